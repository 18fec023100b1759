//! The `log-start-offsets` file: the log start offset of every partition
//! whose beginning a client moved (Kafka's DeleteRecords,
//! [`Store::delete_records`](crate::Store::delete_records)). Its layout is
//! the offset table's ([`super::offset_table`]) with magic [`MAGIC`]
//! ("TDLS"); each entry's offset is the partition's log start offset.
//!
//! Why a file of its own, in the store: a ConsumeQueue's beginning is
//! otherwise derived (its first written unit, raised to the CommitLog's
//! first byte by retention), and a moved beginning must survive a restart
//! and `kill -9` though the units below it are still on disk. One table
//! for every topic, beside `deleted-partitions`, rather than one file per
//! queue or per compacted log: every partition has a ConsumeQueue, compact
//! topics too (the compacted log is a dispatch sink beside it), so the
//! broker reads both kinds' log start from here, and a topic whose
//! `cleanup.policy` changes keeps it; a DeleteRecords costs one small
//! atomic file write, and opening a data dir one read.
//!
//! Invariants: an entry only rises; it is at most the partition's high
//! watermark (its queue's end) when it is written, and written durably
//! before anything answers or uses it; a queue never reports a beginning
//! below its entry, never indexes a record below it again (a recovery
//! replay), and hands out no offset below it; an entry goes with its
//! topic's deletion. No file (every data dir before this one, datadir-v1)
//! means no entry: each queue starts at what it holds.

use super::offset_table::{OffsetTable, TableFile};

pub const FILE_NAME: &str = "log-start-offsets";
pub const MAGIC: u32 = 0x5444_4C53;

/// The `log-start-offsets` file.
#[derive(Debug)]
pub struct LogStartFile;

impl TableFile for LogStartFile {
    const FILE_NAME: &'static str = FILE_NAME;
    const MAGIC: u32 = MAGIC;
    const WHAT: &'static str = "log-start-offsets table";
}

/// topic → partition → log start offset.
pub type LogStarts = OffsetTable<LogStartFile>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consume_queue::offset_table::golden_one_entry;

    #[test]
    fn golden_bytes() {
        let mut d = LogStarts::default();
        d.raise("ab", 2, 5);
        let b = d.encode();
        let mut want = golden_one_entry(MAGIC);
        assert_eq!(&want[..4], [0x53, 0x4C, 0x44, 0x54]); // "SLDT" little endian
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(b, want);
        assert_eq!(&want[want.len() - 4..], [0xf5, 0x28, 0x30, 0xf9]);
        assert_eq!(LogStarts::decode(&want), Ok(d));
    }
}
