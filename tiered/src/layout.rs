//! Where everything lives in the bucket, under the url's prefix:
//!
//! ```text
//! tidelog.json                                          {"format": 1}
//! topics/{topic}/topic/{version:020}.json               RemoteTopic versions
//! topics/{topic}/{partition}/manifest/{version:020}.json
//! topics/{topic}/{partition}/data/{base:020}-{last:020}.tlro
//! topics/{topic}/{partition}/snapshot/{version:020}/{file}
//! ```
//!
//! Zero-padded numbers make the lexical order of a LIST the numeric one.
//! Topic names and snapshot file names are checked here (Kafka's topic
//! alphabet, no `.`/`..`), so no name can leave its directory.

use object_store::path::Path;

use crate::error::{Result, TieredError};

/// The bucket's format marker: `{"format": FORMAT}`.
pub const FORMAT: u32 = 1;
/// Longest topic name (Kafka's, and tidelog's).
pub const TOPIC_NAME_MAX: usize = 249;
/// Longest snapshot file name.
pub const FILE_NAME_MAX: usize = 255;

pub fn format_marker(root: &Path) -> Path {
    root.clone().join("tidelog.json")
}

pub fn topics_dir(root: &Path) -> Path {
    root.clone().join("topics")
}

pub fn topic_dir(root: &Path, topic: &str) -> Path {
    topics_dir(root).join(topic)
}

pub fn topic_meta_dir(root: &Path, topic: &str) -> Path {
    topic_dir(root, topic).join("topic")
}

pub fn partition_dir(root: &Path, topic: &str, partition: u32) -> Path {
    topic_dir(root, topic).join(partition.to_string())
}

pub fn manifest_dir(root: &Path, topic: &str, partition: u32) -> Path {
    partition_dir(root, topic, partition).join("manifest")
}

pub fn data_dir(root: &Path, topic: &str, partition: u32) -> Path {
    partition_dir(root, topic, partition).join("data")
}

pub fn snapshot_dir(root: &Path, topic: &str, partition: u32, version: u64) -> Path {
    partition_dir(root, topic, partition)
        .join("snapshot")
        .join(version_name(version, ""))
}

/// `{version:020}{ext}`: a manifest or topic version (ext ".json"), a
/// snapshot directory (no ext).
pub fn version_name(version: u64, ext: &str) -> String {
    format!("{version:020}{ext}")
}

/// The version a `{version:020}.json` file name holds.
pub fn parse_version(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// `{base:020}-{last:020}.tlro`.
pub fn object_name(base: u64, last: u64) -> String {
    format!("{base:020}-{last:020}.tlro")
}

/// The offsets an object name holds.
pub fn parse_object_name(name: &str) -> Option<(u64, u64)> {
    let (base, last) = name.strip_suffix(".tlro")?.split_once('-')?;
    let num = |s: &str| {
        (s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    Some((num(base)?, num(last)?))
}

/// Kafka's topic alphabet and length; `.` and `..` refused.
pub fn check_topic(name: &str) -> Result<()> {
    let alphabet = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if name.is_empty() || name.len() > TOPIC_NAME_MAX || !alphabet || name == "." || name == ".." {
        return Err(TieredError::invalid(format!("topic name {name:?}")));
    }
    Ok(())
}

/// A snapshot file name: one path segment of the topic alphabet.
pub fn check_file_name(name: &str) -> Result<()> {
    let alphabet = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if name.is_empty() || name.len() > FILE_NAME_MAX || !alphabet || name == "." || name == ".." {
        return Err(TieredError::invalid(format!("snapshot file name {name:?}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sort() {
        assert_eq!(
            object_name(5, 70),
            "00000000000000000005-00000000000000000070.tlro"
        );
        assert_eq!(parse_object_name(&object_name(5, 70)), Some((5, 70)));
        assert_eq!(parse_object_name("5-70.tlro"), None);
        assert_eq!(parse_version(&version_name(42, ".json")), Some(42));
        assert_eq!(parse_version("00000000000000000042.json#1"), None);
        assert!(version_name(9, "") < version_name(10, ""));
        let root = Path::from("pre/fix");
        assert_eq!(
            manifest_dir(&root, "t.1", 3).to_string(),
            "pre/fix/topics/t.1/3/manifest"
        );
        assert_eq!(
            snapshot_dir(&root, "t", 0, 2).to_string(),
            "pre/fix/topics/t/0/snapshot/00000000000000000002"
        );
    }

    #[test]
    fn names_that_could_escape_are_refused() {
        for bad in ["", ".", "..", "a/b", "a b", "ä", &"x".repeat(250)] {
            assert!(check_topic(bad).is_err(), "{bad:?}");
            assert!(check_file_name(bad).is_err() || bad.len() == 250, "{bad:?}");
        }
        check_topic("orders_v2.eu-1").unwrap();
        check_file_name("00000000000000000000.log").unwrap();
    }
}
