//! The `log-head` file: where retention left the CommitLog's beginning.
//!
//! A position file ([`crate::position_file`], 28 bytes, magic "TLHD"):
//! `position` is `first_base`, the base of the first segment kept: every
//! CommitLog byte below it was deleted on purpose (retention), none at or
//! above it.
//!
//! Why it exists: a deleted oldest segment looks exactly like a retention
//! pass (the log simply begins later), so without a record of what
//! retention deleted a lost head would be served as if nothing happened.
//! Invariants: retention writes the new `first_base` durably *before* it
//! unlinks a segment ([`CommitLog::delete_oldest_segment`], the only place
//! that unlinks the head; tiered storage deletes local segments through
//! retention too), so after any crash the first segment on disk begins at
//! or below the record. At open (`check`): a first segment above the
//! record is a lost head (refused under `recovery_mode: strict`, a loud
//! warning under `truncate`); one below it is a deletion a crash cut short,
//! finished. A data dir without the file (an older tidelog's, or a new
//! one) gets one for its current first segment: from then on a lost head
//! is noticed, one lost before cannot be.
//!
//! [`CommitLog::delete_oldest_segment`]: crate::commit_log::CommitLog::delete_oldest_segment

use std::path::Path;
use std::sync::Arc;

use crate::commit_log::segment::Segment;
use crate::config::RecoveryMode;
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;
use crate::position_file::{Position, PositionFile};

pub const FILE_NAME: &str = "log-head";
pub const MAGIC: u32 = 0x544C_4844;
const FILE: PositionFile = PositionFile {
    name: FILE_NAME,
    magic: MAGIC,
};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogHead {
    pub first_base: u64,
    pub written_at_ms: i64,
}

impl LogHead {
    pub fn new(first_base: u64) -> LogHead {
        LogHead::from(Position::now(first_base))
    }

    /// Read `<dir>/log-head`; `None` if there is none. A damaged one stops
    /// start-up: what retention deleted cannot be learnt again (the
    /// runbook, docs/OPERATIONS.md, says how to accept the log as it is).
    pub fn load(dir: &Path) -> Result<Option<LogHead>> {
        Ok(FILE.load(dir)?.map(LogHead::from))
    }

    pub fn store(&self, dir: &Path) -> Result<()> {
        FILE.store(
            dir,
            Position {
                position: self.first_base,
                written_at_ms: self.written_at_ms,
            },
        )
    }
}

impl From<Position> for LogHead {
    fn from(p: Position) -> LogHead {
        LogHead {
            first_base: p.position,
            written_at_ms: p.written_at_ms,
        }
    }
}

/// Recovery, after the segments are listed: compare the log's first
/// segment with `log-head` in `data_dir` and act (see the module doc).
/// `flushed` is the checkpoint's `commitlog_flushed` (0 without one): a
/// log with no segment at all lost its head if bytes above the record
/// were once durable. Returns the segments to recover.
pub(crate) fn check(
    data_dir: &Path,
    mut segments: Vec<Arc<Segment>>,
    flushed: u64,
    mode: RecoveryMode,
) -> Result<Vec<Arc<Segment>>> {
    let first = segments.first().map(|s| s.base());
    let Some(head) = LogHead::load(data_dir)? else {
        // Without a segment the log begins where the checkpoint says (a
        // data dir a restore from the remote tier wrote: no segment, a
        // checkpoint at the restored log's start).
        let base = first.unwrap_or(flushed);
        if base > 0 {
            tracing::info!(first_base = base, "no log-head file (a data dir of an older tidelog): recording the commit log's first segment; a head lost before this start cannot be noticed");
        }
        LogHead::new(base).store(data_dir)?;
        return Ok(segments);
    };
    // A deletion a crash cut short: the record was written, the unlink
    // did not happen (or did not reach the disk). Finish it.
    let mut finished = false;
    while segments.len() > 1 && segments[0].end() <= head.first_base {
        let seg = segments.remove(0);
        tracing::info!(segment = %seg.path().display(), first_base = head.first_base, "finishing the deletion of a segment retention had recorded as deleted");
        std::fs::remove_file(seg.path()).at(seg.path())?;
        finished = true;
    }
    if finished {
        if let Some(dir) = segments.first().and_then(|s| s.path().parent()) {
            fs_util::fsync_dir(dir)?;
        }
    }
    let found = match segments.first() {
        Some(s) => s.base(),
        // No segment at all: lost only if durable bytes existed above the
        // record (a fresh log, or one retention emptied, has none).
        None if flushed > head.first_base => flushed,
        None => return Ok(segments),
    };
    if found <= head.first_base {
        return Ok(segments);
    }
    let lost = CorruptionKind::LogHeadMissing {
        recorded_first: head.first_base,
        found_first: found,
    };
    match mode {
        // The error names the first missing segment's file.
        RecoveryMode::Strict => Err(StoreError::corruption(
            data_dir
                .join(crate::layout::COMMITLOG_DIR)
                .join(fs_util::offset_file_name(head.first_base)),
            0,
            lost,
        )),
        RecoveryMode::TruncateAtCorruption => {
            tracing::warn!(
                missing_segment = %data_dir
                    .join(crate::layout::COMMITLOG_DIR)
                    .join(fs_util::offset_file_name(head.first_base))
                    .display(),
                recorded_first = head.first_base,
                found_first = found,
                lost_bytes = found - head.first_base,
                "LOST DATA: the commit log's first segments are gone but retention did not delete them \
                 (log-head records {}); every record in [{}, {}) of the commit log is lost; \
                 continuing as recovery_mode: truncate asks",
                head.first_base,
                head.first_base,
                found
            );
            LogHead::new(found).store(data_dir)?;
            Ok(segments)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This kind's bytes as written (the layout's checks are tested in
    /// `position_file`).
    #[test]
    fn golden_bytes_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(LogHead::load(dir.path()).unwrap(), None);
        let written = LogHead {
            first_base: 0x0102,
            written_at_ms: 7,
        };
        written.store(dir.path()).unwrap();
        #[rustfmt::skip]
        let mut want = vec![
            0x44, 0x48, 0x4C, 0x54, // magic "TLHD" little endian
            1, 0, 0, 0, // version, reserved
            0x02, 0x01, 0, 0, 0, 0, 0, 0, // first_base
            7, 0, 0, 0, 0, 0, 0, 0, // written_at_ms
        ];
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(std::fs::read(dir.path().join("log-head")).unwrap(), want);
        assert_eq!(LogHead::load(dir.path()).unwrap(), Some(written));
    }
}
