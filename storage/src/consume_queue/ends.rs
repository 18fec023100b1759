//! The `queue-ends` file: every ConsumeQueue's end (the next queue offset)
//! as of a checkpoint, with every unit below it flushed. Its layout is the
//! offset table's ([`super::offset_table`]) with magic [`MAGIC`] ("TDQE");
//! each entry's offset is the partition's queue end.
//!
//! Why it exists: recovery trusts the checkpoint's `dispatched` position
//! (every index holds every record below it), so without this a queue file
//! lost after a checkpoint (deleted by hand, a bad disk) would never be
//! noticed: the partition would end where its surviving files end and the
//! next produce would get offsets its acknowledged records have. With it,
//! opening compares every queue with its recorded end; a queue that ends
//! below it lost units, and recovery re-dispatches that partition's records
//! from the CommitLog (`Store::open`, docs/recovery.md step 5).
//!
//! Invariants: written by the checkpoint before the checkpoint file, with
//! each queue's end as of the checkpoint's `dispatched` position (one past
//! its last unit pointing below it), after the queues were flushed: every
//! unit below an entry is durable when the file names it, and points at
//! CommitLog bytes that were flushed, which a power loss cannot take (the
//! offsets of unflushed records a power loss takes are handed out again,
//! docs/recovery.md, and must not count as lost). A queue's end
//! never moves down except by recovery (a log cut under `recovery_mode:
//! truncate`) and by a topic's deletion (`deleted-partitions` then holds an
//! offset at least the end): retention and DeleteRecords keep the file
//! holding a queue's end. The file is derived data: a damaged one is
//! logged and costs a full re-dispatch of the CommitLog; a missing one (a
//! data dir of an older tidelog) means no check until the next checkpoint.

use super::offset_table::{OffsetTable, TableFile};

pub const FILE_NAME: &str = "queue-ends";
pub const MAGIC: u32 = 0x5444_5145;

/// The `queue-ends` file.
#[derive(Debug)]
pub struct QueueEndsFile;

impl TableFile for QueueEndsFile {
    const FILE_NAME: &'static str = FILE_NAME;
    const MAGIC: u32 = MAGIC;
    const WHAT: &'static str = "queue-ends table";
}

/// topic → partition → queue end (the next queue offset).
pub type QueueEnds = OffsetTable<QueueEndsFile>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consume_queue::offset_table::golden_one_entry;

    #[test]
    fn golden_bytes() {
        let mut d = QueueEnds::default();
        d.raise("ab", 2, 5);
        let b = d.encode();
        let mut want = golden_one_entry(MAGIC);
        assert_eq!(&want[..4], [0x45, 0x51, 0x44, 0x54]); // "EQDT" little endian
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(b, want);
        assert_eq!(QueueEnds::decode(&want), Ok(d));
        let mut bad = want.clone();
        bad[12] ^= 1;
        assert!(matches!(
            QueueEnds::decode(&bad),
            Err(crate::error::CorruptionKind::CrcMismatch { .. })
        ));
    }
}
