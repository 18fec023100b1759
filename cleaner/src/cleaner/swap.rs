//! The swap of one rewritten group, crash-safe. Its forward steps are
//! here; what startup (and the retry after a failed pass) does with each
//! file a crash leaves is `reconcile_dir` in `compacted/log.rs`, which
//! points back here. The two must change together.
//!
//! The swap, and what a crash at each step leaves:
//! - write `<base>.log.cleaned`, fsync → crash: startup deletes `.cleaned`,
//!   the old segments are whole;
//! - rename to `<base>-<end>.swap`, fsync dir → from here the new data is
//!   the truth: startup deletes old segments with base in `[base, end)`
//!   and renames the swap file to `<base>.log`;
//! - swap in memory, delete the old files, rename `.swap` → `<base>.log`,
//!   fsync dir → crash anywhere here is finished the same way.
//!
//! So a crash leaves either the old segments or the new one, never both
//! (which would duplicate keys) and never neither (which would lose them).
//!
//! A pass that fails instead (an I/O error, a panic) leaves the same files
//! a crash would, while the process goes on. Before the partition's next
//! pass its files are reconciled exactly as startup does
//! (`CompactedLog::reconcile`, which calls the same function as
//! `CompactedLog::open`) and its segment list rebuilt from them, so a retry
//! starts from a state with no `.cleaned` or `.swap` file: it cannot rename
//! onto an earlier pass's `.swap` and then delete it as an old segment, and
//! no stale `.swap` is left for a later open to apply over newer data.
//!
//! Each step is preceded by a [`crate::fault`] check, so tests can fail or
//! crash the swap at any of them ([`FaultPoint`] names them in order).

use std::sync::Arc;

use super::Shared;
use crate::compacted::log::{segment_file_name, swap_file_name, CompactedLog};
use crate::compacted::segment::Segment;
use crate::error::{CleanerError, Result};
use crate::fault::{self, FaultPoint};
use tidelog_storage::fs_util;

impl Shared {
    /// Steps of the swap after `cleaned` (at `cleaned_path`, the group
    /// `[base, end)` rewritten) is written: fsync it, rename it to `.swap`,
    /// swap it in, delete the old files, rename into place.
    pub(super) fn swap(
        &self,
        log: &CompactedLog,
        base: u64,
        end: u64,
        cleaned: Arc<Segment>,
        cleaned_path: &std::path::Path,
    ) -> Result<()> {
        let dir = log.dir();
        self.fault(FaultPoint::SyncCleaned, cleaned_path)?;
        cleaned.flush()?;
        let swap_path = dir.join(swap_file_name(base, end));
        // Renaming over an earlier pass's swap file would replace a segment
        // that may be in the list, and then delete it as an old one. The
        // reconcile before a retry removes every such file; this is the
        // check that it did.
        if swap_path.exists() {
            return Err(CleanerError::LeftoverSwap { path: swap_path });
        }
        self.fault(FaultPoint::RenameToSwap, &swap_path)?;
        cleaned.rename(swap_path)?;
        self.fault(FaultPoint::SyncDirAfterSwap, dir)?;
        fsync_dir(dir)?;
        let old = log.swap_in(base, end, Arc::clone(&cleaned));
        for o in &old {
            let p = o.path();
            self.fault(FaultPoint::DeleteOld, &p)?;
            std::fs::remove_file(&p).map_err(|e| CleanerError::Io { path: p, source: e })?;
        }
        let log_path = dir.join(segment_file_name(base));
        self.fault(FaultPoint::RenameToLog, &log_path)?;
        cleaned.rename(log_path)?;
        self.fault(FaultPoint::SyncDirAfterLog, dir)?;
        fsync_dir(dir)?;
        Ok(())
    }

    /// The test seam ([`crate::fault`]): an I/O error on `path` if the
    /// operation at `point` is to fail.
    pub(super) fn fault(&self, point: FaultPoint, path: &std::path::Path) -> Result<()> {
        fault::check(&self.faults, point).map_err(|source| CleanerError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

fn fsync_dir(dir: &std::path::Path) -> Result<()> {
    fs_util::fsync_dir(dir).map_err(|e| CleanerError::Store {
        path: dir.to_path_buf(),
        source: e,
    })
}
