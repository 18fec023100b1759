//! What the bucket says about a partition (its manifest) and a topic (its
//! meta), and the invariants a manifest must hold to be used.
//!
//! Manifest invariants (checked on every load and before every write):
//! - `objects` ascending and non-overlapping: each `base_offset <=
//!   last_offset`, each `base_offset` above the previous `last_offset`;
//!   `1 <= records <= last - base + 1`; the name is
//!   `{base:020}-{last:020}.tlro`; `bytes` holds at least a header and a
//!   footer.
//! - `beginning <= end`; `beginning` at or below the first object's base;
//!   `end >= last_offset + 1` of the last object (`end` is the next offset
//!   to upload).
//! - Every object listed exists and passes its CRCs (the writer puts and
//!   verifies it before the manifest naming it; readers check the CRCs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Result, TieredError};
use crate::format::{FOOTER_LEN, HEADER_LEN};
use crate::layout::{check_file_name, object_name};

/// One partition's remote state, version `version`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub version: u64,
    pub topic: String,
    pub partition: u32,
    /// The remote log's start (after remote retention).
    pub beginning: u64,
    /// One past the last offset uploaded: the next offset to upload.
    pub end: u64,
    pub objects: Vec<ObjectEntry>,
    /// Compact topics only: the cleaned segments of the last clean.
    pub snapshot: Option<Snapshot>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectEntry {
    /// The object's file name in the partition's `data/` directory.
    pub name: String,
    pub base_offset: u64,
    pub last_offset: u64,
    pub records: u64,
    pub bytes: u64,
    pub max_timestamp_ms: i64,
    pub uploaded_ms: i64,
    /// CRC32C of the whole object.
    pub crc32c: u32,
}

/// The files of one compacted-segment snapshot, under
/// `snapshot/{version:020}/`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// The snapshot directory's number (the manifest version it was
    /// written for).
    pub version: u64,
    /// The partition's next offset when the snapshot was taken.
    pub next_offset: u64,
    pub files: Vec<SnapshotFile>,
    pub uploaded_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotFile {
    pub name: String,
    pub bytes: u64,
    pub crc32c: u32,
}

/// A topic as restore needs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteTopic {
    pub name: String,
    pub partitions: u32,
    pub configs: BTreeMap<String, String>,
    pub updated_ms: i64,
}

/// A topic meta version as stored: a `RemoteTopic`, or a tombstone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TopicVersion {
    #[serde(flatten)]
    pub topic: RemoteTopic,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

impl Manifest {
    /// The manifest before the first upload of a partition: nothing
    /// remote, version 0 (the first written is 1).
    pub fn empty(topic: &str, partition: u32, start: u64) -> Manifest {
        Manifest {
            version: 0,
            topic: topic.to_string(),
            partition,
            beginning: start,
            end: start,
            objects: Vec::new(),
            snapshot: None,
        }
    }

    /// Bytes of the objects listed.
    pub fn object_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.bytes).sum()
    }

    /// The index of the first object holding offsets at or after `from`.
    pub fn first_object_from(&self, from: u64) -> usize {
        self.objects.partition_point(|o| o.last_offset < from)
    }

    /// The invariants of the module doc; `Corrupt` names the broken one.
    pub fn check(&self) -> Result<()> {
        let broken = |detail: String| {
            Err(TieredError::corrupt(
                format!(
                    "manifest {}-{} version {}",
                    self.topic, self.partition, self.version
                ),
                detail,
            ))
        };
        if self.beginning > self.end {
            return broken(format!("beginning {} > end {}", self.beginning, self.end));
        }
        let mut previous: Option<&ObjectEntry> = None;
        for o in &self.objects {
            if o.base_offset > o.last_offset
                || o.records == 0
                || o.records - 1 > o.last_offset - o.base_offset
            {
                return broken(format!(
                    "object {} holds {} records in {}..={}",
                    o.name, o.records, o.base_offset, o.last_offset
                ));
            }
            if o.name != object_name(o.base_offset, o.last_offset) {
                return broken(format!(
                    "object name {:?} does not match its offsets",
                    o.name
                ));
            }
            if o.bytes < (HEADER_LEN + FOOTER_LEN) as u64 {
                return broken(format!("object {} of {} bytes", o.name, o.bytes));
            }
            match previous {
                None if o.base_offset < self.beginning => {
                    return broken(format!(
                        "first object {} below the beginning {}",
                        o.name, self.beginning
                    ))
                }
                Some(p) if o.base_offset <= p.last_offset => {
                    return broken(format!("object {} overlaps or precedes {}", o.name, p.name))
                }
                _ => {}
            }
            previous = Some(o);
        }
        if let Some(last) = previous {
            if self.end <= last.last_offset {
                return broken(format!(
                    "end {} not past the last object {}",
                    self.end, last.name
                ));
            }
        }
        if let Some(s) = &self.snapshot {
            for f in &s.files {
                if check_file_name(&f.name).is_err() {
                    return broken(format!("snapshot file name {:?}", f.name));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(base: u64, last: u64) -> ObjectEntry {
        ObjectEntry {
            name: object_name(base, last),
            base_offset: base,
            last_offset: last,
            records: last - base + 1,
            bytes: 1000,
            max_timestamp_ms: 0,
            uploaded_ms: 0,
            crc32c: 0,
        }
    }

    fn manifest(beginning: u64, end: u64, objects: Vec<ObjectEntry>) -> Manifest {
        Manifest {
            objects,
            beginning,
            end,
            ..Manifest::empty("t", 0, 0)
        }
    }

    #[test]
    fn good_manifests_pass() {
        manifest(0, 0, vec![]).check().unwrap();
        manifest(0, 20, vec![entry(0, 9), entry(12, 19)])
            .check()
            .unwrap();
        manifest(5, 30, vec![entry(7, 9)]).check().unwrap();
        let m = manifest(0, 20, vec![entry(0, 9), entry(12, 19)]);
        assert_eq!(m.first_object_from(0), 0);
        assert_eq!(
            m.first_object_from(10),
            1,
            "a gap answers from the next object"
        );
        assert_eq!(m.first_object_from(20), 2);
    }

    #[test]
    fn every_broken_invariant_is_corrupt() {
        let mut bad_name = entry(0, 9);
        bad_name.name = "../x.tlro".into();
        let mut too_many = entry(0, 9);
        too_many.records = 11;
        let mut small = entry(0, 9);
        small.bytes = 10;
        let cases = [
            manifest(5, 4, vec![]),
            manifest(0, 20, vec![entry(0, 9), entry(9, 19)]),
            manifest(0, 20, vec![entry(10, 19), entry(0, 9)]),
            manifest(0, 9, vec![entry(0, 9)]),
            manifest(3, 20, vec![entry(0, 9)]),
            manifest(0, 20, vec![bad_name]),
            manifest(0, 20, vec![too_many]),
            manifest(0, 20, vec![small]),
        ];
        for m in cases {
            assert!(
                matches!(m.check(), Err(TieredError::Corrupt { .. })),
                "{m:?}"
            );
        }
    }

    #[test]
    fn json_shape() {
        let m = manifest(0, 10, vec![entry(0, 9)]);
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains(r#""end":10"#), "{json}");
        assert_eq!(serde_json::from_str::<Manifest>(&json).unwrap(), m);
        let tomb = TopicVersion {
            topic: RemoteTopic {
                name: "t".into(),
                partitions: 2,
                configs: BTreeMap::new(),
                updated_ms: 1,
            },
            deleted: true,
        };
        let json = serde_json::to_string(&tomb).unwrap();
        assert!(json.contains(r#""deleted":true"#), "{json}");
        let live: TopicVersion = serde_json::from_str(
            r#"{"name":"t","partitions":2,"configs":{"retention.ms":"5"},"updated_ms":1}"#,
        )
        .unwrap();
        assert!(!live.deleted);
        assert_eq!(live.topic.configs["retention.ms"], "5");
    }
}
