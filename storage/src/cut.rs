//! Cutting the CommitLog back to a physical offset, with everything
//! derived from it (issue 39): what a returning replica does at the point
//! where its log and its master's part ways (`epochs::common_end`), before
//! it copies on.
//!
//! Recovery cuts a torn tail above the checkpoint; a replica's cut can go
//! below it, into bytes that were durable and dispatched: queue units, key
//! index entries, compacted copies, aborted-transaction entries, producer
//! state and the epochs that point past the cut must go with them. The
//! cut is done at open, before recovery, as a crash would leave the log:
//! - [`request`] writes the `cut-to` file (a position file, magic
//!   "TCUT") durably. Nothing else changes until the next open.
//! - The open (`apply_pending`) finds it and, each step durable before
//!   the next: forgets the epochs that began at or past the cut
//!   ([`Epochs::truncate_to`]); lowers the checkpoint's positions to the
//!   cut, so recovery truncates every index and sink there and re-derives
//!   them from the log; removes a producer-state snapshot that covers
//!   bytes past the cut (recovery then rebuilds producers and open
//!   transactions from the whole log); zeroes the log from the cut and
//!   removes the segments past it. Then the file goes, and recovery runs
//!   as after a crash. `queue-ends` and `index-end` stay: recovery
//!   compares them with the files before it truncates them, so they
//!   still tell a lost queue file or IndexFile from a cut one.
//! - A crash anywhere in between leaves the file: the next open does every
//!   step again. Each is idempotent, and the log is cut last, so a step
//!   never sees bytes past the cut that the steps before it kept.
//!
//! The cut is at an entry boundary. A position inside an entry (a caller's
//! mistake: divergence points are epoch starts and log ends, both
//! boundaries) cuts at the start of that entry, with a warning: below the
//! requested position every byte is kept or copied again, never lost
//! unseen. A position below the log's first segment is refused: this node
//! holds none of the common history, and needs a whole copy.

use std::path::Path;

use crate::checkpoint::Checkpoint;
use crate::commit_log::format::Decoded;
use crate::commit_log::{decode_for_recovery, find_segment};
use crate::epochs::Epochs;
use crate::error::{IoContext, Result, StoreError};
use crate::fs_util;
use crate::layout::COMMITLOG_DIR;
use crate::position_file::{Position, PositionFile};
use crate::producer_state::snapshot::{self, Loaded};
use crate::recovery;

pub const FILE_NAME: &str = "cut-to";
/// "TCUT".
pub const MAGIC: u32 = 0x5443_5554;
const FILE: PositionFile = PositionFile {
    name: FILE_NAME,
    magic: MAGIC,
};

/// What an open's cut did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cut {
    /// The position [`request`] asked for.
    pub requested: u64,
    /// Where the log now ends at most: `requested`, or the start of the
    /// entry it fell inside.
    pub at: u64,
    /// Non-zero CommitLog bytes the cut zeroed or removed.
    pub dropped_bytes: u64,
}

/// Ask the next open of the store in `data_dir` to cut its CommitLog at
/// physical offset `at` (see the module doc). Durable when it returns.
/// A later request replaces an earlier one not yet applied: the lower
/// wins, so a cut is never undone by a second request.
pub fn request(data_dir: &Path, at: u64) -> Result<()> {
    let at = match FILE.load(data_dir)? {
        Some(earlier) => earlier.position.min(at),
        None => at,
    };
    FILE.store(data_dir, Position::now(at))
}

/// The cut [`request`] left for the next open, if any.
pub fn pending(data_dir: &Path) -> Result<Option<u64>> {
    Ok(FILE.load(data_dir)?.map(|p| p.position))
}

/// At open, before recovery and with the data dir locked: carry out a
/// requested cut (see the module doc). `None`: none was requested.
pub(crate) fn apply_pending(data_dir: &Path) -> Result<Option<Cut>> {
    apply(data_dir, usize::MAX)
}

/// [`apply_pending`], stopped (as by a crash) after `steps` durable steps
/// when that is fewer than it takes.
fn apply(data_dir: &Path, steps: usize) -> Result<Option<Cut>> {
    let mut taken = 0usize;
    let mut crash_here = || {
        taken += 1;
        taken > steps
    };
    let Some(requested) = pending(data_dir)? else {
        return Ok(None);
    };
    let cl_dir = data_dir.join(COMMITLOG_DIR);
    let segments = recovery::load_segments(&cl_dir)?;
    let log_start = segments.first().map_or(requested, |s| s.base());
    if requested < log_start {
        return Err(StoreError::CutBelowLogStart {
            position: requested,
            log_start,
        });
    }
    let at = entry_boundary(&segments, requested)?;
    if at < requested {
        tracing::warn!(
            requested,
            at,
            "the requested cut falls inside an entry; cutting at the entry's start"
        );
    }

    Epochs::load(data_dir)?.truncate_to(at)?;
    if crash_here() {
        return Ok(None);
    }
    if let Some(c) = Checkpoint::load(data_dir)? {
        let lowered = Checkpoint {
            commitlog_flushed: c.commitlog_flushed.min(at),
            dispatched: c.dispatched.min(at),
            ..c
        };
        if lowered != c {
            lowered.store(data_dir)?;
        }
    }
    if crash_here() {
        return Ok(None);
    }
    if let Loaded::Snapshot(s) = snapshot::load(data_dir)? {
        if s.position > at {
            remove_if_present(&data_dir.join(snapshot::FILE_NAME))?;
        }
    }
    fs_util::fsync_dir(data_dir)?;
    if crash_here() {
        return Ok(None);
    }

    // Newest first: a crash in between leaves the segments contiguous,
    // as the next open's listing requires.
    let mut dropped_bytes = 0;
    for seg in segments.iter().rev() {
        if seg.end() <= at {
            continue;
        }
        if seg.base() > at {
            dropped_bytes += recovery::nonzero_len(seg);
            std::fs::remove_file(seg.path()).at(seg.path())?;
            fs_util::fsync_dir(&cl_dir)?;
        } else {
            dropped_bytes += recovery::zero_from(seg, at)?;
        }
        if crash_here() {
            return Ok(None);
        }
    }

    remove_if_present(&data_dir.join(FILE_NAME))?;
    fs_util::fsync_dir(data_dir)?;
    let cut = Cut {
        requested,
        at,
        dropped_bytes,
    };
    tracing::warn!(?cut, "cut the commit log back to where it and the master's part ways; everything derived from it past the cut is rebuilt by recovery");
    Ok(Some(cut))
}

/// `requested` if an entry (or an end marker, or the log's valid end)
/// starts there, else the start of the entry it falls inside. Walks the
/// segment holding it from its base; a log that ends before `requested`
/// has nothing there to cut, and `requested` is returned.
fn entry_boundary(
    segments: &[std::sync::Arc<crate::commit_log::segment::Segment>],
    requested: u64,
) -> Result<u64> {
    let Some(seg) = find_segment(segments, requested) else {
        return Ok(requested);
    };
    let mut pos = seg.base();
    while pos < requested {
        match decode_for_recovery(seg, pos) {
            Ok(Decoded::Entry(v)) => {
                let next = pos + v.total_len as u64;
                if next > requested {
                    return Ok(pos);
                }
                pos = next;
            }
            Ok(Decoded::EndOfSegment { .. }) => return Ok(pos),
            // The valid log ends before `requested`: nothing of it is past.
            Ok(Decoded::Empty) | Err(_) => return Ok(requested),
        }
    }
    Ok(requested)
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

#[cfg(test)]
#[path = "cut_tests.rs"]
mod tests;
