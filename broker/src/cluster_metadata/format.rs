//! The records of `__cluster_metadata` (docs/formats.md, "Cluster
//! metadata record"): one record per change of a metadata file, the
//! file's whole new bytes.
//!
//! ```text
//! key:   the file's name, ASCII: "topics.json" | "dynamic.json" |
//!        "users.json" | "acls.json"
//! value:
//! | offset | size | field                                             |
//! |--------|------|---------------------------------------------------|
//! | 0      | 1    | version = 1                                       |
//! | 1      | 8    | writer: u64 BE, the broker instance that appended |
//! | 9      | n    | the file's bytes, exactly as the owner wrote them |
//! ```
//!
//! The decoder checks, in order: a key (none, or an unknown name:
//! refused), a value (a tombstone: refused), at least [`HEADER_LEN`]
//! bytes, the version, and the file's length against [`FILE_MAX_BYTES`].
//! What the bytes say is the owner's to check (`install`), as at load.

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

/// A decoded record.
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
}

/// The value of a record carrying `bytes`, appended by `writer`.
pub fn encode_value(writer: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + bytes.len());
    out.push(VERSION);
    out.extend_from_slice(&writer.to_be_bytes());
    out.extend_from_slice(bytes);
    out
}

/// A record's key and value, checked (module doc).
pub fn decode<'a>(key: Option<&[u8]>, value: Option<&'a [u8]>) -> Result<Decoded<'a>, FormatError> {
    let key = key.ok_or(FormatError::NoKey)?;
    let file = MetadataFile::ALL
        .into_iter()
        .find(|f| f.name().as_bytes() == key)
        .ok_or_else(|| FormatError::UnknownFile {
            key: String::from_utf8_lossy(&key[..key.len().min(64)]).into_owned(),
        })?;
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
    let bytes = &value[FILE_OFFSET..];
    if bytes.len() > FILE_MAX_BYTES {
        return Err(FormatError::TooLarge { len: bytes.len() });
    }
    Ok(Decoded {
        file,
        writer: u64::from_be_bytes(be),
        bytes,
    })
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
