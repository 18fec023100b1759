//! The records of `__cluster_metadata` (docs/formats.md, "Cluster
//! metadata record"): one record per change of a metadata file, the
//! file's whole new bytes, and one per DeleteRecords, a partition's new
//! log start offset.
//!
//! ```text
//! key:   the file's name, ASCII: "topics.json" | "dynamic.json" |
//!        "users.json" | "acls.json"; or "log-start"
//! value:
//! | offset | size | field                                             |
//! |--------|------|---------------------------------------------------|
//! | 0      | 1    | version = 1                                       |
//! | 1      | 8    | writer: u64 BE, the broker instance that appended |
//! | 9      | n    | a file: its bytes, exactly as the owner wrote them |
//! ```
//! A "log-start" record's bytes from offset 9: `partition` u32 BE,
//! `offset` u64 BE, the topic's name (UTF-8, the rest: 1..=249 bytes).
//!
//! The decoder checks, in order: a key (none, or an unknown name:
//! refused), a value (a tombstone: refused), at least [`HEADER_LEN`]
//! bytes, the version, and the file's length against [`FILE_MAX_BYTES`]
//! (a log start: its exact shape). What a file's bytes say is the
//! owner's to check (`install`), as at load.

use super::MetadataFile;

pub const VERSION: u8 = 1;
pub const VERSION_OFFSET: usize = 0;
pub const WRITER_OFFSET: usize = VERSION_OFFSET + std::mem::size_of::<u8>();
pub const FILE_OFFSET: usize = WRITER_OFFSET + std::mem::size_of::<u64>();
pub const HEADER_LEN: usize = FILE_OFFSET;
const _: () = assert!(HEADER_LEN == 9);

/// The largest file a record carries: the largest any owner reads (the
/// users and ACL files', 256 MiB). The store's record limit
/// (`store.max_message_bytes`) is lower, and refuses a larger change
/// before it is made (`ClusterMetadata::publish`).
pub const FILE_MAX_BYTES: usize = 256 << 20;

/// The key of a record that moves a partition's log start offset.
pub const LOG_START_KEY: &str = "log-start";

/// The longest topic name (Kafka's).
const TOPIC_MAX_BYTES: usize = 249;
const LOG_START_FIXED: usize = std::mem::size_of::<u32>() + std::mem::size_of::<u64>();

/// A partition's log start offset as DeleteRecords moved it on the
/// master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogStart<'a> {
    pub topic: &'a str,
    pub partition: u32,
    pub offset: u64,
}

/// A decoded record of either kind.
#[derive(Debug, PartialEq, Eq)]
pub enum Record<'a> {
    File(Decoded<'a>),
    LogStart { writer: u64, start: LogStart<'a> },
}

/// A decoded file record.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    pub file: MetadataFile,
    pub writer: u64,
    pub bytes: &'a [u8],
}

/// Why a record of `__cluster_metadata` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("a record without a key")]
    NoKey,
    #[error("key {key:?} names no metadata file")]
    UnknownFile { key: String },
    #[error("a tombstone (no value): a metadata file is never removed")]
    Tombstone,
    #[error("value of {len} bytes, shorter than its {HEADER_LEN}-byte header")]
    Short { len: usize },
    #[error("version {version}, not the supported {VERSION}")]
    Version { version: u8 },
    #[error("a file of {len} bytes, more than the {FILE_MAX_BYTES} carried")]
    TooLarge { len: usize },
    #[error("a log start of {len} bytes: {reason}")]
    BadLogStart { len: usize, reason: &'static str },
}

/// The value of a record carrying `bytes`, appended by `writer`.
pub fn encode_value(writer: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + bytes.len());
    out.push(VERSION);
    out.extend_from_slice(&writer.to_be_bytes());
    out.extend_from_slice(bytes);
    out
}

/// The value of a record moving `start`'s log start, appended by
/// `writer`.
pub fn encode_log_start(writer: u64, start: &LogStart<'_>) -> Vec<u8> {
    let mut body = Vec::with_capacity(LOG_START_FIXED + start.topic.len());
    body.extend_from_slice(&start.partition.to_be_bytes());
    body.extend_from_slice(&start.offset.to_be_bytes());
    body.extend_from_slice(start.topic.as_bytes());
    encode_value(writer, &body)
}

/// A record's key and value of either kind, checked (module doc).
pub fn decode_record<'a>(
    key: Option<&[u8]>,
    value: Option<&'a [u8]>,
) -> Result<Record<'a>, FormatError> {
    if key != Some(LOG_START_KEY.as_bytes()) {
        return decode(key, value).map(Record::File);
    }
    let (writer, body) = header(value)?;
    let bad = |reason| FormatError::BadLogStart {
        len: body.len(),
        reason,
    };
    let (Some(partition), Some(offset), Some(topic)) = (
        body.get(..4),
        body.get(4..LOG_START_FIXED),
        body.get(LOG_START_FIXED..),
    ) else {
        return Err(bad("shorter than its 12 fixed bytes"));
    };
    if topic.is_empty() || topic.len() > TOPIC_MAX_BYTES {
        return Err(bad("a topic name of 1..=249 bytes is needed"));
    }
    let topic = std::str::from_utf8(topic).map_err(|_| bad("the topic name is not UTF-8"))?;
    let mut p = [0u8; 4];
    p.copy_from_slice(partition);
    let mut o = [0u8; 8];
    o.copy_from_slice(offset);
    Ok(Record::LogStart {
        writer,
        start: LogStart {
            topic,
            partition: u32::from_be_bytes(p),
            offset: u64::from_be_bytes(o),
        },
    })
}

/// A file record's key and value, checked (module doc).
pub fn decode<'a>(key: Option<&[u8]>, value: Option<&'a [u8]>) -> Result<Decoded<'a>, FormatError> {
    let key = key.ok_or(FormatError::NoKey)?;
    let file = MetadataFile::ALL
        .into_iter()
        .find(|f| f.name().as_bytes() == key)
        .ok_or_else(|| FormatError::UnknownFile {
            key: String::from_utf8_lossy(&key[..key.len().min(64)]).into_owned(),
        })?;
    let (writer, bytes) = header(value)?;
    if bytes.len() > FILE_MAX_BYTES {
        return Err(FormatError::TooLarge { len: bytes.len() });
    }
    Ok(Decoded {
        file,
        writer,
        bytes,
    })
}

/// A value's writer and the bytes after its header, checked.
fn header(value: Option<&[u8]>) -> Result<(u64, &[u8]), FormatError> {
    let value = value.ok_or(FormatError::Tombstone)?;
    let (Some(&version), Some(writer)) = (
        value.get(VERSION_OFFSET),
        value.get(WRITER_OFFSET..FILE_OFFSET),
    ) else {
        return Err(FormatError::Short { len: value.len() });
    };
    if version != VERSION {
        return Err(FormatError::Version { version });
    }
    let mut be = [0u8; 8];
    be.copy_from_slice(writer);
    Ok((u64::from_be_bytes(be), &value[FILE_OFFSET..]))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The bytes of a record, pinned: a change to encode and decode
    /// together cannot pass unseen.
    #[test]
    fn golden_bytes() {
        let value = encode_value(0x0102_0304_0506_0708, b"{}");
        assert_eq!(
            value,
            [0x01, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, b'{', b'}']
        );
        let d = decode(Some(b"acls.json"), Some(&value)).unwrap();
        assert_eq!(
            d,
            Decoded {
                file: MetadataFile::Acls,
                writer: 0x0102_0304_0506_0708,
                bytes: b"{}",
            }
        );
        assert_eq!(MetadataFile::Topics.name(), "topics.json");
        assert_eq!(MetadataFile::Dynamic.name(), "dynamic.json");
        assert_eq!(MetadataFile::Users.name(), "users.json");
        assert_eq!(MetadataFile::Acls.name(), "acls.json");
    }

    #[test]
    fn a_log_start_has_golden_bytes_and_round_trips() {
        let start = LogStart {
            topic: "t",
            partition: 2,
            offset: 0x0102,
        };
        let value = encode_log_start(7, &start);
        assert_eq!(
            value,
            [1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 2, b't']
        );
        assert_eq!(
            decode_record(Some(b"log-start"), Some(&value)),
            Ok(Record::LogStart { writer: 7, start })
        );
        let long = "x".repeat(249);
        let start = LogStart {
            topic: &long,
            partition: u32::MAX,
            offset: u64::MAX,
        };
        let value = encode_log_start(1, &start);
        assert_eq!(
            decode_record(Some(b"log-start"), Some(&value)),
            Ok(Record::LogStart { writer: 1, start })
        );
        // A file's record decodes as one.
        let file = encode_value(3, b"{}");
        assert!(matches!(
            decode_record(Some(b"users.json"), Some(&file)),
            Ok(Record::File(Decoded {
                file: MetadataFile::Users,
                writer: 3,
                ..
            }))
        ));
    }

    #[test]
    fn a_bad_log_start_is_refused() {
        let good = encode_log_start(
            1,
            &LogStart {
                topic: "orders",
                partition: 0,
                offset: 5,
            },
        );
        for len in HEADER_LEN..HEADER_LEN + LOG_START_FIXED + 1 {
            assert!(
                matches!(
                    decode_record(Some(b"log-start"), Some(&good[..len])),
                    Err(FormatError::BadLogStart { .. })
                ),
                "{len}"
            );
        }
        let mut not_utf8 = good.clone();
        *not_utf8.last_mut().unwrap() = 0xff;
        assert!(matches!(
            decode_record(Some(b"log-start"), Some(&not_utf8)),
            Err(FormatError::BadLogStart { .. })
        ));
        let mut too_long = encode_value(1, &[0; LOG_START_FIXED]);
        too_long.extend_from_slice(&[b'x'; 250]);
        assert!(matches!(
            decode_record(Some(b"log-start"), Some(&too_long)),
            Err(FormatError::BadLogStart { .. })
        ));
        assert_eq!(
            decode_record(Some(b"log-start"), None),
            Err(FormatError::Tombstone)
        );
    }

    #[test]
    fn every_file_round_trips_also_empty() {
        for file in MetadataFile::ALL {
            for bytes in [&b""[..], b"x", &[0xff; 300][..]] {
                let value = encode_value(7, bytes);
                let d = decode(Some(file.name().as_bytes()), Some(&value)).unwrap();
                assert_eq!((d.file, d.writer, d.bytes), (file, 7, bytes));
            }
        }
    }

    #[test]
    fn bad_records_are_refused_with_their_reason() {
        let good = encode_value(1, b"{}");
        assert_eq!(decode(None, Some(&good)), Err(FormatError::NoKey));
        assert!(matches!(
            decode(Some(b"../etc/passwd"), Some(&good)),
            Err(FormatError::UnknownFile { .. })
        ));
        assert_eq!(
            decode(Some(b"topics.json"), None),
            Err(FormatError::Tombstone)
        );
        for len in 0..HEADER_LEN {
            assert_eq!(
                decode(Some(b"topics.json"), Some(&good[..len])),
                Err(FormatError::Short { len })
            );
        }
        let mut other = good.clone();
        other[VERSION_OFFSET] = 2;
        assert_eq!(
            decode(Some(b"topics.json"), Some(&other)),
            Err(FormatError::Version { version: 2 })
        );
    }
}
