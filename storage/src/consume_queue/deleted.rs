//! The `deleted-partitions` file: the next queue offset of every partition
//! whose topic was deleted.
//!
//! ```text
//! offset  size  field
//!      0     4  magic        u32, MAGIC ("TDLP")
//!      4     2  version      u16, VERSION
//!      6     2  reserved     0
//!      8     4  count        u32, entries that follow, at most ENTRIES_MAX
//!     12        count entries, sorted by topic then partition:
//!                 2  topic_len    u16, 1..=TOPIC_LEN_MAX
//!                    topic        a valid topic name (ASCII)
//!                 4  partition    u32
//!                 8  next_offset  u64, the queue offset the partition's next
//!                                 record gets
//!      …     4  crc          u32, CRC32C of every byte before it
//! ```
//! Replaced whole with temp → fsync → rename → fsync dir
//! ([`fs_util::write_atomic`]), so it is always one version or the other.
//!
//! Why it exists: deleting a topic removes its ConsumeQueue files, but its
//! records stay in the CommitLog until retention removes them, and a
//! recovery replays records from the checkpoint on. A record of a partition
//! listed here whose queue offset is below `next_offset` belongs to a
//! deleted incarnation and is never indexed again, and a topic created
//! again under the name continues at `next_offset` (the registry hides
//! what a new incarnation must not see by those offsets). Entries are kept
//! for good: a replay of old records must never recreate a queue, and
//! offsets never go back.

use std::collections::BTreeMap;
use std::path::Path;

use crate::codec::{self, U16_LEN, U32_LEN, U64_LEN};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;
use crate::types::{validate_topic_name, TOPIC_NAME_MAX};

pub const FILE_NAME: &str = "deleted-partitions";
pub const MAGIC: u32 = 0x5444_4C50;
pub const VERSION: u16 = 1;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = OFF_MAGIC + U32_LEN;
const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
const OFF_COUNT: usize = OFF_RESERVED + U16_LEN;
/// Fixed header; entries follow it.
pub const HEADER_LEN: usize = OFF_COUNT + U32_LEN;
const CRC_LEN: usize = U32_LEN;
/// An entry without its topic name: `topic_len`, `partition`,
/// `next_offset`.
const ENTRY_FIXED_LEN: usize = U16_LEN + U32_LEN + U64_LEN;
const _: () = assert!(HEADER_LEN == 12);

/// Longest topic name an entry may carry.
pub const TOPIC_LEN_MAX: usize = TOPIC_NAME_MAX;
/// Most entries the file may hold (a million deleted partitions, ~263 MB
/// at the longest names): checked before anything is allocated for them.
pub const ENTRIES_MAX: u32 = 1 << 20;
/// Largest file read back, checked before reading it.
pub const FILE_LEN_MAX: u64 =
    (HEADER_LEN + CRC_LEN) as u64 + ENTRIES_MAX as u64 * (ENTRY_FIXED_LEN + TOPIC_LEN_MAX) as u64;

/// Deleted partitions and where their offsets continue: topic → partition
/// → next queue offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeletedPartitions(BTreeMap<String, BTreeMap<u32, u64>>);

impl DeletedPartitions {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.values().map(BTreeMap::len).sum()
    }

    /// Where `topic`-`partition` continues, if it was deleted.
    pub fn next_offset(&self, topic: &str, partition: u32) -> Option<u64> {
        self.0.get(topic)?.get(&partition).copied()
    }

    /// Is a record of `topic`-`partition` at `queue_offset` one of a
    /// deleted incarnation?
    pub fn covers(&self, topic: &str, partition: u32, queue_offset: u64) -> bool {
        self.next_offset(topic, partition)
            .is_some_and(|next| queue_offset < next)
    }

    /// Record that `topic`-`partition` continues at `next` or later.
    pub fn raise(&mut self, topic: &str, partition: u32, next: u64) {
        let at = self
            .0
            .entry(topic.to_string())
            .or_default()
            .entry(partition)
            .or_insert(next);
        *at = (*at).max(next);
    }

    /// Every entry: topic, partition, next offset.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32, u64)> + '_ {
        self.0
            .iter()
            .flat_map(|(t, parts)| parts.iter().map(move |(&p, &n)| (t.as_str(), p, n)))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_LEN + CRC_LEN + self.len() * 32);
        codec::push_u32(&mut b, MAGIC);
        codec::push_u16(&mut b, VERSION);
        codec::push_u16(&mut b, 0);
        codec::push_u32(&mut b, self.len() as u32);
        for (topic, partition, next) in self.iter() {
            codec::push_u16(&mut b, topic.len() as u16);
            b.extend_from_slice(topic.as_bytes());
            codec::push_u32(&mut b, partition);
            codec::push_u64(&mut b, next);
        }
        let crc = crc32c::crc32c(&b);
        codec::push_u32(&mut b, crc);
        b
    }

    pub fn decode(b: &[u8]) -> std::result::Result<DeletedPartitions, CorruptionKind> {
        let mut r =
            codec::crc_framed_table(b, "deleted-partitions table", HEADER_LEN, MAGIC, VERSION)?;
        let count = r.u32()?;
        if count > ENTRIES_MAX {
            return Err(CorruptionKind::TooManyEntries {
                count,
                max: ENTRIES_MAX,
            });
        }
        let mut out = DeletedPartitions::default();
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
            let next = r.u64()?;
            out.raise(topic, partition, next);
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
    pub fn load(path: &Path) -> Result<DeletedPartitions> {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(DeletedPartitions::default())
            }
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
        DeletedPartitions::decode(&bytes).map_err(|why| StoreError::corruption(path, 0, why))
    }

    /// Replace `path` with this table, durably.
    pub fn store(&self, path: &Path) -> Result<()> {
        if self.len() > ENTRIES_MAX as usize {
            return Err(StoreError::invalid(format!(
                "{} deleted partitions, more than the {ENTRIES_MAX} the store keeps",
                self.len()
            )));
        }
        fs_util::write_atomic(path, &self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DeletedPartitions {
        let mut d = DeletedPartitions::default();
        d.raise("orders", 0, 7);
        d.raise("orders", 3, 1 << 40);
        d.raise("a", 1, 0);
        d
    }

    #[test]
    fn golden_bytes() {
        let mut d = DeletedPartitions::default();
        d.raise("ab", 2, 5);
        let b = d.encode();
        #[rustfmt::skip]
        let mut want = vec![
            0x50, 0x4C, 0x44, 0x54, // magic
            1, 0, 0, 0, // version, reserved
            1, 0, 0, 0, // count
            2, 0, b'a', b'b', // topic
            2, 0, 0, 0, // partition
            5, 0, 0, 0, 0, 0, 0, 0, // next offset
        ];
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(b, want);
        // The CRC too, written out: the bytes are the format, not whatever
        // the encoder does today.
        assert_eq!(&want[want.len() - 4..], [0x58, 0xc3, 0xe2, 0x1a]);
        assert_eq!(DeletedPartitions::decode(&want), Ok(d));
    }

    #[test]
    fn round_trip_through_disk_and_raise_only_raises() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert!(DeletedPartitions::load(&path).unwrap().is_empty());
        let mut d = sample();
        d.store(&path).unwrap();
        assert_eq!(DeletedPartitions::load(&path).unwrap(), d);
        d.raise("orders", 0, 3);
        assert_eq!(d.next_offset("orders", 0), Some(7));
        assert!(d.covers("orders", 0, 6) && !d.covers("orders", 0, 7));
        assert!(!d.covers("orders", 1, 0));
        assert_eq!(d.len(), 3);
    }

    #[test]
    fn bad_files_are_refused() {
        let good = sample().encode();
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x01;
            assert!(
                DeletedPartitions::decode(&b).is_err(),
                "flip at {i} accepted"
            );
        }
        for len in 0..good.len() {
            assert!(
                DeletedPartitions::decode(&good[..len]).is_err(),
                "{len} bytes"
            );
        }
        // A count beyond the limit (with a valid CRC) is refused before
        // anything is allocated for it.
        let mut b = good[..HEADER_LEN].to_vec();
        b[OFF_COUNT..OFF_COUNT + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        let err = DeletedPartitions::decode(&b).unwrap_err();
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
        let mut d = DeletedPartitions::default();
        d.raise("../x", 0, 1);
        assert!(matches!(
            DeletedPartitions::decode(&d.encode()),
            Err(CorruptionKind::BadTopicEntry { entry: 0, .. })
        ));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, b"garbage").unwrap();
        assert!(matches!(
            DeletedPartitions::load(&path),
            Err(StoreError::Corruption { .. })
        ));
    }
}
