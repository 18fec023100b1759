//! A table of one queue offset per topic-partition, kept in one small file
//! of the data dir that is replaced whole. Three files have this layout,
//! each with its own magic and meaning: `deleted-partitions`
//! ([`super::deleted`]), `log-start-offsets` ([`super::log_start`]) and
//! `queue-ends` ([`super::ends`]).
//!
//! ```text
//! offset  size  field
//!      0     4  magic        u32, the file's (TableFile::MAGIC)
//!      4     2  version      u16, VERSION
//!      6     2  reserved     0
//!      8     4  count        u32, entries that follow, at most ENTRIES_MAX
//!     12        count entries, sorted by topic then partition:
//!                 2  topic_len    u16, 1..=TOPIC_LEN_MAX
//!                    topic        a valid topic name (ASCII)
//!                 4  partition    u32
//!                 8  offset       u64, a queue offset (the file says which)
//!      …     4  crc          u32, CRC32C of every byte before it
//! ```
//! Replaced whole with temp → fsync → rename → fsync dir
//! ([`fs_util::write_atomic`]), so it is always one version or the other.
//! Offsets in a table only rise ([`OffsetTable::raise`]); an entry goes
//! only with its topic ([`OffsetTable::remove_topic`]).

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::path::Path;

use crate::codec::{self, Reader, U16_LEN, U32_LEN, U64_LEN};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;
use crate::types::{validate_topic_name, TOPIC_NAME_MAX};

/// Which file a table is: its name, magic and what an error calls it.
pub trait TableFile {
    const FILE_NAME: &'static str;
    const MAGIC: u32;
    /// What a decoding error names it (`"deleted-partitions table"`).
    const WHAT: &'static str;
}

pub const VERSION: u16 = 1;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = OFF_MAGIC + U32_LEN;
const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
const OFF_COUNT: usize = OFF_RESERVED + U16_LEN;
/// Fixed header; entries follow it.
pub const HEADER_LEN: usize = OFF_COUNT + U32_LEN;
const CRC_LEN: usize = U32_LEN;
/// An entry without its topic name: `topic_len`, `partition`, `offset`.
const ENTRY_FIXED_LEN: usize = U16_LEN + U32_LEN + U64_LEN;
const _: () = assert!(HEADER_LEN == 12);

/// Longest topic name an entry may carry.
pub const TOPIC_LEN_MAX: usize = TOPIC_NAME_MAX;
/// Most entries a file may hold (a million partitions, ~263 MB at the
/// longest names): checked before anything is allocated for them.
pub const ENTRIES_MAX: u32 = 1 << 20;
/// Largest file read back, checked before reading it.
pub const FILE_LEN_MAX: u64 =
    (HEADER_LEN + CRC_LEN) as u64 + ENTRIES_MAX as u64 * (ENTRY_FIXED_LEN + TOPIC_LEN_MAX) as u64;

/// topic → partition → offset, as file `F` keeps it.
pub struct OffsetTable<F> {
    offsets: BTreeMap<String, BTreeMap<u32, u64>>,
    file: PhantomData<F>,
}

// By hand: derived, they would ask `F` (a marker) for the same traits.
impl<F> Clone for OffsetTable<F> {
    fn clone(&self) -> Self {
        OffsetTable {
            offsets: self.offsets.clone(),
            file: PhantomData,
        }
    }
}

impl<F> Default for OffsetTable<F> {
    fn default() -> Self {
        OffsetTable {
            offsets: BTreeMap::new(),
            file: PhantomData,
        }
    }
}

impl<F> PartialEq for OffsetTable<F> {
    fn eq(&self, other: &Self) -> bool {
        self.offsets == other.offsets
    }
}

impl<F> Eq for OffsetTable<F> {}

impl<F: TableFile> std::fmt::Debug for OffsetTable<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{:?}", F::FILE_NAME, self.offsets)
    }
}

impl<F: TableFile> OffsetTable<F> {
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    pub fn len(&self) -> usize {
        self.offsets.values().map(BTreeMap::len).sum()
    }

    /// The offset kept for `topic`-`partition`, if any.
    pub fn get(&self, topic: &str, partition: u32) -> Option<u64> {
        self.offsets.get(topic)?.get(&partition).copied()
    }

    /// Keep `offset` for `topic`-`partition`, or the one kept if higher.
    pub fn raise(&mut self, topic: &str, partition: u32, offset: u64) {
        let at = self
            .offsets
            .entry(topic.to_string())
            .or_default()
            .entry(partition)
            .or_insert(offset);
        *at = (*at).max(offset);
    }

    /// Forget every partition of `topic`; whether it had any.
    pub fn remove_topic(&mut self, topic: &str) -> bool {
        self.offsets.remove(topic).is_some()
    }

    /// Every entry: topic, partition, offset.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32, u64)> + '_ {
        self.offsets
            .iter()
            .flat_map(|(t, parts)| parts.iter().map(move |(&p, &n)| (t.as_str(), p, n)))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_LEN + CRC_LEN + self.len() * 32);
        codec::push_u32(&mut b, F::MAGIC);
        codec::push_u16(&mut b, VERSION);
        codec::push_u16(&mut b, 0);
        codec::push_u32(&mut b, self.len() as u32);
        for (topic, partition, offset) in self.iter() {
            codec::push_u16(&mut b, topic.len() as u16);
            b.extend_from_slice(topic.as_bytes());
            codec::push_u32(&mut b, partition);
            codec::push_u64(&mut b, offset);
        }
        let crc = crc32c::crc32c(&b);
        codec::push_u32(&mut b, crc);
        b
    }

    pub fn decode(b: &[u8]) -> std::result::Result<OffsetTable<F>, CorruptionKind> {
        if b.len() < HEADER_LEN + CRC_LEN {
            return Err(CorruptionKind::NoHeader {
                what: F::WHAT,
                len: b.len() as u64,
            });
        }
        let (body, crc) = b.split_at(b.len() - CRC_LEN);
        let stored = codec::get_u32(crc, 0);
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(CorruptionKind::CrcMismatch { stored, computed });
        }
        let mut r = Reader::new(body);
        let magic = r.u32()?;
        if magic != F::MAGIC {
            return Err(CorruptionKind::BadMagic { found: magic });
        }
        let version = r.u16()?;
        if version != VERSION {
            return Err(CorruptionKind::UnknownVersion { found: version });
        }
        r.u16()?;
        let count = r.u32()?;
        if count > ENTRIES_MAX {
            return Err(CorruptionKind::TooManyEntries {
                count,
                max: ENTRIES_MAX,
            });
        }
        let mut out = OffsetTable::default();
        for i in 0..count {
            let topic_len = r.u16()? as usize;
            if topic_len == 0 || topic_len > TOPIC_LEN_MAX {
                return Err(CorruptionKind::BadTopicEntry {
                    entry: i,
                    reason: format!("topic of {topic_len} bytes"),
                });
            }
            let bad_topic = |reason: String| CorruptionKind::BadTopicEntry { entry: i, reason };
            let topic = std::str::from_utf8(r.take(topic_len)?)
                .map_err(|_| bad_topic("topic is not UTF-8".into()))?;
            validate_topic_name(topic).map_err(|e| bad_topic(e.to_string()))?;
            let partition = r.u32()?;
            let offset = r.u64()?;
            out.raise(topic, partition, offset);
        }
        if r.remaining() != 0 {
            return Err(CorruptionKind::TrailingBytes {
                count: r.remaining(),
            });
        }
        Ok(out)
    }

    /// Read `path`; empty if there is none. A damaged file stops start-up:
    /// unlike the indexes it cannot be rebuilt from the CommitLog.
    pub fn load(path: &Path) -> Result<OffsetTable<F>> {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(OffsetTable::default()),
            Err(e) => return Err(e).at(path),
            Ok(meta) if meta.len() > FILE_LEN_MAX => {
                return Err(StoreError::corruption(
                    path,
                    0,
                    CorruptionKind::FileTooLarge {
                        len: meta.len(),
                        max: FILE_LEN_MAX,
                    },
                ))
            }
            Ok(_) => {}
        }
        let bytes = std::fs::read(path).at(path)?;
        OffsetTable::decode(&bytes).map_err(|why| StoreError::corruption(path, 0, why))
    }

    /// Replace `path` with this table, durably.
    pub fn store(&self, path: &Path) -> Result<()> {
        if self.len() > ENTRIES_MAX as usize {
            return Err(StoreError::invalid(format!(
                "{} partitions in {}, more than the {ENTRIES_MAX} the store keeps",
                self.len(),
                F::FILE_NAME
            )));
        }
        fs_util::write_atomic(path, &self.encode())
    }
}

/// The golden bytes of one entry `("ab", 2, 5)` in file `F`, CRC excluded:
/// each file's golden test starts from these and writes its CRC out.
#[cfg(test)]
pub(crate) fn golden_one_entry(magic: u32) -> Vec<u8> {
    let mut want = magic.to_le_bytes().to_vec();
    #[rustfmt::skip]
    want.extend_from_slice(&[
        1, 0, 0, 0, // version, reserved
        1, 0, 0, 0, // count
        2, 0, b'a', b'b', // topic
        2, 0, 0, 0, // partition
        5, 0, 0, 0, 0, 0, 0, 0, // offset
    ]);
    want
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consume_queue::deleted::DeletedPartitions;
    use crate::consume_queue::log_start::{self, LogStarts};

    fn sample<F: TableFile>() -> OffsetTable<F> {
        let mut d = OffsetTable::default();
        d.raise("orders", 0, 7);
        d.raise("orders", 3, 1 << 40);
        d.raise("a", 1, 0);
        d
    }

    #[test]
    fn round_trip_through_disk_raise_only_raises_and_topics_go_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("table");
        assert!(LogStarts::load(&path).unwrap().is_empty());
        let mut d: LogStarts = sample();
        d.store(&path).unwrap();
        assert_eq!(LogStarts::load(&path).unwrap(), d);
        d.raise("orders", 0, 3);
        assert_eq!(d.get("orders", 0), Some(7));
        assert_eq!(d.len(), 3);
        assert!(d.remove_topic("orders"));
        assert!(!d.remove_topic("orders"));
        assert_eq!(d.iter().collect::<Vec<_>>(), [("a", 1, 0)]);
        // Each file has its own magic: one is never read as the other.
        assert!(matches!(
            DeletedPartitions::load(&path),
            Err(StoreError::Corruption {
                kind: CorruptionKind::BadMagic { .. },
                ..
            })
        ));
    }

    #[test]
    fn bad_files_are_refused() {
        let good = sample::<log_start::LogStartFile>().encode();
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x01;
            assert!(LogStarts::decode(&b).is_err(), "flip at {i} accepted");
        }
        for len in 0..good.len() {
            assert!(LogStarts::decode(&good[..len]).is_err(), "{len} bytes");
        }
        // A count beyond the limit (with a valid CRC) is refused before
        // anything is allocated for it.
        let mut b = good[..HEADER_LEN].to_vec();
        b[OFF_COUNT..OFF_COUNT + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        let err = LogStarts::decode(&b).unwrap_err();
        assert!(
            matches!(
                err,
                CorruptionKind::TooManyEntries {
                    count: u32::MAX,
                    max: ENTRIES_MAX
                }
            ),
            "{err}"
        );
        // A name that is no topic name.
        let mut d = LogStarts::default();
        d.raise("../x", 0, 1);
        assert!(matches!(
            LogStarts::decode(&d.encode()),
            Err(CorruptionKind::BadTopicEntry { entry: 0, .. })
        ));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("table");
        std::fs::write(&path, b"garbage").unwrap();
        assert!(matches!(
            LogStarts::load(&path),
            Err(StoreError::Corruption { .. })
        ));
    }
}
