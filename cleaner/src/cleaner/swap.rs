//! The swap of one rewritten group, crash-safe. Its forward steps are
//! here; what startup (and the retry after a failed pass) does with each
//! file a crash leaves is `reconcile_dir` in `compacted/dir.rs`, which
//! points back here. The two must change together.
//!
//! The swap, and what a crash at each step leaves:
//! - write `<base>.log.cleaned`, fsync → crash: startup deletes `.cleaned`,
//!   the old segments are whole;
//! - rename to `<base>-<end>.swap`, fsync dir → from here the new data is
//!   the truth: startup deletes old segments with base in `[base, end)`
//!   and renames the swap file to `<base>.log`;
//! - swap in memory, rename the old files aside (`<base>.log.deleted`),
//!   rename `.swap` → `<base>.log`, fsync dir → crash anywhere here is
//!   finished the same way (startup also deletes every `.deleted` file);
//! - later, off the pass: the next housekeeping unlinks the `.deleted`
//!   files (`Shared::delete_retired`).
//!
//! Why aside and not unlinked at once: the unlink of a segment no file
//! handle holds any more frees its page cache then and there (the kernel's
//! `truncate_inode_pages` of every page), which was about a quarter of a
//! warm pass's thread, ahead of the checkpoint and the pass's end.
//! Kafka defers deletion the same way (`file.delete.delay.ms`: old
//! segments renamed `.deleted`, deleted by a scheduled task).
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
use crate::compacted::dir::{segment_file_name, swap_file_name};
use crate::compacted::log::lock;
use crate::compacted::log::CompactedLog;
use crate::compacted::segment::{Segment, DELETED_SUFFIX};
use crate::error::{CleanerError, Result};
use crate::fault::{self, FaultPoint};
use tidelog_storage::fs_util;

impl Shared {
    /// Steps of the swap after `cleaned` (at `cleaned_path`, the group
    /// `[base, end)` rewritten) is written: fsync it, rename it to `.swap`,
    /// swap it in, rename the old files aside for deletion, rename into
    /// place.
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
            let mut aside = o.path().into_os_string();
            aside.push(DELETED_SUFFIX);
            let aside = std::path::PathBuf::from(aside);
            self.fault(FaultPoint::DeleteOld, &aside)?;
            o.rename(aside.clone())?;
            lock(&self.retired).push(aside);
        }
        let log_path = dir.join(segment_file_name(base));
        self.fault(FaultPoint::RenameToLog, &log_path)?;
        cleaned.rename(log_path)?;
        self.fault(FaultPoint::SyncDirAfterLog, dir)?;
        fsync_dir(dir)?;
        Ok(())
    }

    /// Unlink the old segment files swaps renamed aside (module doc),
    /// returning how many. One that is gone already (its topic deleted,
    /// or a reconcile removed it) counts as done; one that fails stays
    /// listed for the next call.
    pub(super) fn delete_retired(&self) -> Result<usize> {
        let retired = std::mem::take(&mut *lock(&self.retired));
        let mut deleted = 0;
        for (i, path) in retired.iter().enumerate() {
            match std::fs::remove_file(path) {
                Ok(()) => deleted += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    lock(&self.retired).extend_from_slice(&retired[i..]);
                    return Err(CleanerError::Io {
                        path: path.clone(),
                        source,
                    });
                }
            }
        }
        Ok(deleted)
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
