//! The store's files of a data dir rebuilt from the remote tier (the
//! broker's restore, docs/TIERED.md "Restore"): each written here, by the
//! crate that owns its format, never by the restore itself.
//!
//! A restore writes into an empty data dir, before any store opens it:
//! - [`write_next_offsets`]: `deleted-partitions`, where each partition's
//!   offsets continue (the offsets after the highest one uploaded), so the
//!   local log begins there and no offset is handed out twice;
//! - [`write_commit_log_start`]: a `checkpoint` whose positions lie at
//!   `position`, past every CommitLog position a restored compacted record
//!   names; the empty log's first segment is then created there when the
//!   store opens.
//!
//! Invariants: both files are written whole (temp → fsync → rename →
//! fsync dir, as the store writes them), in their current format; the
//! store opening the data dir reads them as its own.

use std::path::Path;

use crate::checkpoint::Checkpoint;
use crate::consume_queue::deleted::{self, DeletedPartitions};
use crate::error::Result;
use crate::types::now_ms;

/// Write `deleted-partitions` with `next_offsets` (each partition at the
/// offset its next record gets) into `data_dir`.
pub fn write_next_offsets(data_dir: &Path, next_offsets: &DeletedPartitions) -> Result<()> {
    next_offsets.store(&data_dir.join(deleted::FILE_NAME))
}

/// Write a `checkpoint` into `data_dir` that makes the store begin its
/// (empty) CommitLog at `position`: flushed and dispatched both there.
pub fn write_commit_log_start(data_dir: &Path, position: u64) -> Result<()> {
    Checkpoint {
        commitlog_flushed: position,
        dispatched: position,
        written_at_ms: now_ms(),
    }
    .store(data_dir)
}
