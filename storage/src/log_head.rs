//! The `log-head` file: where retention left the CommitLog's beginning.
//!
//! ```text
//! offset  size  field
//!      0     4  magic          u32, MAGIC ("TLHD")
//!      4     2  version        u16, VERSION
//!      6     2  reserved       0
//!      8     8  first_base     u64, the base of the first segment kept:
//!                              every CommitLog byte below it was deleted
//!                              on purpose (retention), none at or above
//!     16     8  written_at_ms  i64, wall-clock time of writing
//!     24     4  crc            u32, CRC32C of bytes [0, 24)
//! ```
//! Written with temp → fsync → rename → fsync dir, so it is always whole.
//!
//! Why it exists: a deleted oldest segment looks exactly like a retention
//! pass (the log simply begins later), so without a record of what
//! retention deleted a lost head would be served as if nothing happened.
//! Invariants: retention writes the new `first_base` durably *before* it
//! unlinks a segment ([`CommitLog::delete_oldest_segment`], the only place
//! that unlinks the head; tiered storage deletes local segments through
//! retention too), so after any crash the first segment on disk begins at
//! or below the record. At open ([`check`]): a first segment above the
//! record is a lost head (refused under `recovery_mode: strict`, a loud
//! warning under `truncate`); one below it is a deletion a crash cut short,
//! finished. A data dir without the file (an older tidelog's, or a new
//! one) gets one for its current first segment: from then on a lost head
//! is noticed, one lost before cannot be.
//!
//! [`CommitLog::delete_oldest_segment`]: crate::commit_log::CommitLog::delete_oldest_segment

use std::path::Path;
use std::sync::Arc;

use crate::codec::{get_i64, get_u16, get_u32, get_u64, put_i64, put_u16, put_u32, put_u64};
use crate::codec::{U16_LEN, U32_LEN, U64_LEN};
use crate::commit_log::segment::Segment;
use crate::config::RecoveryMode;
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;
use crate::types::now_ms;

pub const FILE_NAME: &str = "log-head";
pub const MAGIC: u32 = 0x544C_4844;
pub const VERSION: u16 = 1;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = OFF_MAGIC + U32_LEN;
const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
const OFF_FIRST_BASE: usize = OFF_RESERVED + U16_LEN;
const OFF_WRITTEN_AT: usize = OFF_FIRST_BASE + U64_LEN;
/// The CRC covers every byte before it.
const OFF_CRC: usize = OFF_WRITTEN_AT + U64_LEN;
pub const LEN: usize = OFF_CRC + U32_LEN;
const _: () = assert!(LEN == 28);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogHead {
    pub first_base: u64,
    pub written_at_ms: i64,
}

impl LogHead {
    pub fn new(first_base: u64) -> LogHead {
        LogHead {
            first_base,
            written_at_ms: now_ms(),
        }
    }

    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        put_u32(&mut b, OFF_MAGIC, MAGIC);
        put_u16(&mut b, OFF_VERSION, VERSION);
        put_u64(&mut b, OFF_FIRST_BASE, self.first_base);
        put_i64(&mut b, OFF_WRITTEN_AT, self.written_at_ms);
        let crc = crc32c::crc32c(&b[..OFF_CRC]);
        put_u32(&mut b, OFF_CRC, crc);
        b
    }

    pub fn decode(b: &[u8]) -> std::result::Result<LogHead, CorruptionKind> {
        if b.len() != LEN {
            return Err(CorruptionKind::FileLength {
                len: b.len() as u64,
                expected: LEN as u64,
            });
        }
        // The length is checked: the fixed offsets below are in bounds.
        let magic = get_u32(b, OFF_MAGIC);
        if magic != MAGIC {
            return Err(CorruptionKind::BadMagic { found: magic });
        }
        let version = get_u16(b, OFF_VERSION);
        if version != VERSION {
            return Err(CorruptionKind::UnknownVersion { found: version });
        }
        let stored = get_u32(b, OFF_CRC);
        let computed = crc32c::crc32c(&b[..OFF_CRC]);
        if stored != computed {
            return Err(CorruptionKind::CrcMismatch { stored, computed });
        }
        Ok(LogHead {
            first_base: get_u64(b, OFF_FIRST_BASE),
            written_at_ms: get_i64(b, OFF_WRITTEN_AT),
        })
    }

    /// Read `<dir>/log-head`; `None` if there is none. A damaged one stops
    /// start-up: what retention deleted cannot be learnt again (the
    /// runbook, docs/OPERATIONS.md, says how to accept the log as it is).
    pub fn load(dir: &Path) -> Result<Option<LogHead>> {
        let path = dir.join(FILE_NAME);
        let bytes = match std::fs::metadata(&path) {
            Ok(meta) if meta.len() != LEN as u64 => {
                return Err(StoreError::corruption(
                    &path,
                    0,
                    CorruptionKind::FileLength {
                        len: meta.len(),
                        expected: LEN as u64,
                    },
                ))
            }
            Ok(_) => std::fs::read(&path).at(&path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).at(&path),
        };
        LogHead::decode(&bytes)
            .map(Some)
            .map_err(|why| StoreError::corruption(&path, 0, why))
    }

    pub fn store(&self, dir: &Path) -> Result<()> {
        fs_util::write_atomic(&dir.join(FILE_NAME), &self.encode())
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
                .join(crate::store::COMMITLOG_DIR)
                .join(fs_util::offset_file_name(head.first_base)),
            0,
            lost,
        )),
        RecoveryMode::TruncateAtCorruption => {
            tracing::warn!(
                missing_segment = %data_dir
                    .join(crate::store::COMMITLOG_DIR)
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

    #[test]
    fn golden_bytes() {
        let h = LogHead {
            first_base: 0x0102,
            written_at_ms: 7,
        };
        let b = h.encode();
        #[rustfmt::skip]
        let mut want = vec![
            0x44, 0x48, 0x4C, 0x54, // magic "DHLT" little endian
            1, 0, 0, 0, // version, reserved
            0x02, 0x01, 0, 0, 0, 0, 0, 0, // first_base
            7, 0, 0, 0, 0, 0, 0, 0, // written_at_ms
        ];
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(b.to_vec(), want);
        assert_eq!(LogHead::decode(&want), Ok(h));
    }

    #[test]
    fn bad_input_is_refused_with_its_reason() {
        let b = LogHead::new(5).encode();
        assert!(matches!(
            LogHead::decode(&b[..LEN - 1]),
            Err(CorruptionKind::FileLength { .. })
        ));
        let mut m = b;
        m[0] ^= 1;
        assert!(matches!(
            LogHead::decode(&m),
            Err(CorruptionKind::BadMagic { .. })
        ));
        let mut v = b;
        v[OFF_VERSION] = 9;
        assert!(matches!(
            LogHead::decode(&v),
            Err(CorruptionKind::UnknownVersion { found: 9 })
        ));
        let mut c = b;
        c[OFF_FIRST_BASE] ^= 1;
        assert!(matches!(
            LogHead::decode(&c),
            Err(CorruptionKind::CrcMismatch { .. })
        ));
    }

    #[test]
    fn store_and_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(LogHead::load(dir.path()).unwrap(), None);
        let h = LogHead::new(4096);
        h.store(dir.path()).unwrap();
        assert_eq!(LogHead::load(dir.path()).unwrap(), Some(h));
    }
}
