//! A compact partition's compacted log written back from its remote
//! snapshot (the broker's restore, docs/TIERED.md "Restore"): the files
//! are the cleaner's, so their layout, names and checks are written here,
//! never by the restore itself.
//!
//! Invariants:
//! - Only compacted segment names (`<20 digits>.log`) are written: any
//!   other name from the bucket (a path, `..`) is refused before a byte of
//!   it reaches the disk.
//! - Each file is written whole (temp → fsync → rename) into
//!   `compacted/<topic>/<partition>/`, then checked by opening it as the
//!   cleaner does (sealed: every byte a whole record, CRC and offset order
//!   checked); a file that fails the check fails the restore.
//! - The reasons are handed to the caller's `bad`, in the words of the
//!   crate that found them (the store's for a write, the cleaner's for a
//!   record): the restore reports them as its own error.

use std::path::Path;

use bytes::Bytes;
use tidelog_storage::fs_util;

use crate::compacted::segment::{Segment, LOG_SUFFIX};
use crate::compacted::COMPACTED_DIR;

/// What writing one partition's snapshot found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoredLog {
    /// The snapshot's bytes written.
    pub bytes: u64,
    /// One past the largest CommitLog position its records name.
    pub physical_end: u64,
    /// One past its last record's offset.
    pub next_offset: u64,
}

/// Writes a snapshot's `files` (name, bytes) as `topic`-`partition`'s
/// compacted log under `data_dir` and checks each by opening it as the
/// cleaner does (module doc). A refusal is `bad(reason)`.
pub fn write_snapshot<E>(
    data_dir: &Path,
    topic: &str,
    partition: u32,
    files: &[(String, Bytes)],
    bad: impl Fn(String) -> E,
) -> Result<RestoredLog, E> {
    let dir = data_dir
        .join(COMPACTED_DIR)
        .join(topic)
        .join(partition.to_string());
    fs_util::create_dir_durable(&dir).map_err(|e| bad(e.to_string()))?;
    let mut written = RestoredLog::default();
    for (name, bytes) in files {
        let Some(base) = fs_util::parse_offset_file_name(name, LOG_SUFFIX) else {
            return Err(bad(format!("{name:?} is not a compacted segment's name")));
        };
        let path = dir.join(name);
        fs_util::write_atomic(&path, bytes).map_err(|e| bad(e.to_string()))?;
        // Sealed segments: every byte must be a whole, valid record.
        let segment = Segment::open(path.clone(), base, false).map_err(|e| bad(e.to_string()))?;
        let mut reader = segment.reader(0);
        while let Some(record) = reader.next_record().map_err(|e| bad(e.to_string()))? {
            written.physical_end = written.physical_end.max(record.physical_offset.get() + 1);
            written.next_offset = written.next_offset.max(record.offset.get() + 1);
        }
        written.bytes += bytes.len() as u64;
    }
    tracing::info!(
        topic,
        partition,
        files = files.len(),
        bytes = written.bytes,
        "restored a compacted log from its snapshot"
    );
    Ok(written)
}
