//! The `deleted-partitions` file: the next queue offset of every partition
//! whose topic was deleted. Its layout is the offset table's
//! ([`super::offset_table`]) with magic [`MAGIC`] ("TDLP"); each entry's
//! offset is the queue offset the partition's next record gets.
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

use super::offset_table::{OffsetTable, TableFile};

pub const FILE_NAME: &str = "deleted-partitions";
pub const MAGIC: u32 = 0x5444_4C50;

/// The `deleted-partitions` file.
#[derive(Debug)]
pub struct DeletedFile;

impl TableFile for DeletedFile {
    const FILE_NAME: &'static str = FILE_NAME;
    const MAGIC: u32 = MAGIC;
    const WHAT: &'static str = "deleted-partitions table";
}

/// Deleted partitions and where their offsets continue: topic → partition
/// → next queue offset.
pub type DeletedPartitions = OffsetTable<DeletedFile>;

impl OffsetTable<DeletedFile> {
    /// Where `topic`-`partition` continues, if it was deleted.
    pub fn next_offset(&self, topic: &str, partition: u32) -> Option<u64> {
        self.get(topic, partition)
    }

    /// Is a record of `topic`-`partition` at `queue_offset` one of a
    /// deleted incarnation?
    pub fn covers(&self, topic: &str, partition: u32, queue_offset: u64) -> bool {
        self.next_offset(topic, partition)
            .is_some_and(|next| queue_offset < next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consume_queue::offset_table::golden_one_entry;

    #[test]
    fn golden_bytes() {
        let mut d = DeletedPartitions::default();
        d.raise("ab", 2, 5);
        let b = d.encode();
        let mut want = golden_one_entry(MAGIC);
        assert_eq!(&want[..4], [0x50, 0x4C, 0x44, 0x54]); // "PLDT" little endian
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(b, want);
        // The CRC too, written out: the bytes are the format, not whatever
        // the encoder does today.
        assert_eq!(&want[want.len() - 4..], [0x58, 0xc3, 0xe2, 0x1a]);
        assert_eq!(DeletedPartitions::decode(&want), Ok(d));
    }

    #[test]
    fn covers_what_lies_below_the_next_offset() {
        let mut d = DeletedPartitions::default();
        d.raise("orders", 0, 7);
        assert!(d.covers("orders", 0, 6) && !d.covers("orders", 0, 7));
        assert!(!d.covers("orders", 1, 0));
    }
}
