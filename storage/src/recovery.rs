//! Finding the CommitLog's valid end at open.
//!
//! Crash model: the process can die at any instruction (kill -9), and the
//! machine can lose power, losing page-cache bytes that were not fsynced, in
//! any order. The log is written front to back, so after a process crash
//! the bytes past the last whole entry are a torn entry followed by zeros;
//! after a power loss they can be any mix of old zeros and new bytes.
//!
//! Recovery scans from the checkpoint's dispatched position, verifying every
//! entry (CRC, its stored physical offset, every record in it), and stops
//! at the first invalid one. That is the valid end if nothing valid follows
//! it (a torn tail): the rest is zeroed so stale bytes can never be read
//! back, and segments after it are removed. An entry is the unit: the
//! records of one append to one partition survive whole or not at all. If
//! valid entries do follow, it depends on where:
//! - at or past the checkpoint's `commitlog_flushed`, it is an unsynced
//!   tail that write-back reached out of order (a later page, or the next
//!   segment, on disk before the page at the invalid entry). Flushes are
//!   prefix-ordered (one at a time, from the flushed position up, segment
//!   by segment), so bytes that a power loss left invalid were never
//!   covered by a completed flush, and neither was anything after them:
//!   nothing past them was acknowledged under `flush: sync`, or was inside
//!   the last completed flush under `async`. The log is cut there like a
//!   torn tail, logged at error with what is dropped;
//! - below it, those bytes had been made durable: the damage is in the
//!   middle of the log, not a power loss. `RecoveryMode::Strict` refuses to
//!   open and names the segment and position, `TruncateAtCorruption` cuts
//!   the log there.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::commit_log::format::{self, Decoded, Invalid, ENTRY_HEADER_LEN};
use crate::commit_log::segment::{self, Segment};
use crate::commit_log::{decode_for_recovery, find_segment, Entry, StoredRecord};
use crate::config::RecoveryMode;
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;

/// What recovery learnt about the CommitLog.
pub(crate) struct RecoveredLog {
    pub segments: Vec<Arc<Segment>>,
    /// One past the last valid byte.
    pub end: u64,
    /// Where the scan started (the checkpoint's dispatched position).
    pub scanned_from: u64,
    pub records_scanned: u64,
    pub truncated_bytes: u64,
}

/// Open every segment file under `dir`, oldest first, checking they are
/// contiguous.
pub(crate) fn load_segments(dir: &Path) -> Result<Vec<Arc<Segment>>> {
    fs_util::create_dir_durable(dir)?;
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name();
        let name = name.to_str().unwrap_or_default();
        if let Some(b) = fs_util::parse_offset_file_name(name, "") {
            bases.push(b);
        } else if fs_util::parse_offset_file_name(name, segment::TMP_SUFFIX).is_some() {
            // A segment whose creation a crash interrupted: never used.
            tracing::info!(path = %entry.path().display(), "removing a half-created segment");
            std::fs::remove_file(entry.path()).at(&entry.path())?;
        } else {
            tracing::warn!(path = %entry.path().display(), "ignoring a stray file in commitlog/");
        }
    }
    bases.sort_unstable();
    let mut segs: Vec<Arc<Segment>> = Vec::with_capacity(bases.len());
    for base in bases {
        let path = dir.join(fs_util::offset_file_name(base));
        let seg = Segment::open(&path, base)?;
        if let Some(prev) = segs.last() {
            if prev.end() != base {
                return Err(StoreError::corruption(
                    &path,
                    0,
                    CorruptionKind::SegmentMissing {
                        base,
                        previous_end: prev.end(),
                    },
                ));
            }
        }
        segs.push(Arc::new(seg));
    }
    Ok(segs)
}

/// The base of the segment holding `pos` (an entry boundary at or before
/// it), or the log's first byte if no segment holds it.
pub(crate) fn segment_base_at(segments: &[Arc<Segment>], pos: u64) -> u64 {
    match find_segment(segments, pos) {
        Some(s) => s.base(),
        None => segments.last().map_or(pos, |s| s.end()).min(pos),
    }
}

/// Scan from `start` (an entry boundary from the checkpoint) to the valid
/// end, then make the end durable. `synced_below` is the checkpoint's
/// `commitlog_flushed` (`None` without a checkpoint: then any invalid entry
/// followed by valid data is middle corruption).
// One caller (`Store::open`); the two callbacks are what it does with each
// verified entry (producer state) and record (the sinks).
#[allow(clippy::too_many_arguments)]
pub(crate) fn recover_log(
    dir: &Path,
    mut segments: Vec<Arc<Segment>>,
    start: u64,
    synced_below: Option<u64>,
    mode: RecoveryMode,
    clean_shutdown: bool,
    on_entry: &mut dyn FnMut(&Entry),
    on_record: &mut dyn FnMut(&StoredRecord) -> Result<()>,
) -> Result<RecoveredLog> {
    let Some(first) = segments.first() else {
        return Ok(RecoveredLog {
            segments,
            end: start,
            scanned_from: start,
            records_scanned: 0,
            truncated_bytes: 0,
        });
    };
    let log_end = segments.last().map_or(0, |s| s.end());
    let mut pos = start.max(first.base());
    if pos > log_end {
        return Err(StoreError::corruption(
            dir,
            pos,
            CorruptionKind::CheckpointPastEnd {
                dispatched: pos,
                log_end,
            },
        ));
    }
    let scanned_from = pos;
    let began = Instant::now();
    let mut last_log = began;
    let mut records = 0u64;
    let mut bad: Option<(Arc<Segment>, CorruptionKind)> = None;
    while let Some(seg) = find_segment(&segments, pos).cloned() {
        match decode_for_recovery(&seg, pos) {
            Ok(Decoded::Entry(v)) => {
                seg.note_store_ts(v.store_timestamp_ms);
                // SAFETY: recovery runs before any reader or writer exists,
                // and these bytes were just verified and are never rewritten.
                let bytes = unsafe { seg.bytes((pos - seg.base()) as usize, v.total_len) };
                let entry = Entry::new(bytes, v);
                on_entry(&entry);
                for record in entry.records() {
                    // The decode above walked every record already.
                    let record = record
                        .map_err(|why| StoreError::corruption(seg.path(), pos - seg.base(), why))?;
                    on_record(&record)?;
                }
                pos += entry.size();
                records += u64::from(entry.record_count());
            }
            // Version 0 was never written: it is a header torn after its
            // magic (the rest still zeros), which the torn-tail check judges.
            Err(Invalid::BadVersion(v)) if v != 0 => {
                return Err(older_format(&seg, pos, v));
            }
            Ok(Decoded::EndOfSegment { .. }) => {
                tracing::debug!(segment = %seg.path().display(), "segment verified");
                pos = seg.end();
            }
            Ok(Decoded::Empty) => {
                bad = Some((seg, CorruptionKind::Empty));
                break;
            }
            Err(why) => {
                bad = Some((seg, why.into()));
                break;
            }
        }
        if last_log.elapsed() >= Duration::from_secs(1) {
            last_log = Instant::now();
            tracing::info!(
                scanned_bytes = pos - scanned_from,
                total_bytes = log_end - scanned_from,
                records,
                "recovering the commit log"
            );
        }
    }
    let end = pos;
    let mut truncated = 0;
    let clean_end = clean_shutdown && end == scanned_from;
    // Zeros right at a clean shutdown's end are the expected end: nothing
    // to zero, and a large segment is not rewritten for it.
    let clean_zeros = |why: &CorruptionKind| clean_end && *why == CorruptionKind::Empty;
    if let Some((seg, why)) = bad.filter(|(_, why)| !clean_zeros(why)) {
        let evidence = valid_data_after(&segments, &seg, end);
        if let Some(evidence) = evidence.filter(|_| synced_below.is_some_and(|s| end >= s)) {
            tracing::error!(
                segment = %seg.path().display(),
                position = end - seg.base(),
                %why,
                valid_entry_at = evidence,
                dropped_bytes = log_end - end,
                "invalid entry past the last checkpoint's flushed position with valid data after it: \
                 write-back of unsynced bytes out of order before a power loss; cutting the log here \
                 and dropping everything after it (never acknowledged under flush: sync)"
            );
        } else if let Some(evidence) = evidence {
            match mode {
                RecoveryMode::Strict => {
                    return Err(StoreError::corruption(
                        seg.path(),
                        end - seg.base(),
                        CorruptionKind::MiddleOfLog {
                            found: Box::new(why),
                            valid_at: evidence,
                        },
                    ));
                }
                RecoveryMode::TruncateAtCorruption => {
                    tracing::error!(segment = %seg.path().display(), position = end - seg.base(), %why, valid_entry_at = evidence, "invalid entry with valid data after it: corruption in the middle of the log, not a torn tail; truncating the log at the corruption as configured");
                }
            }
        } else if why == CorruptionKind::Empty {
            tracing::debug!(end, "log ends cleanly");
        } else {
            tracing::warn!(segment = %seg.path().display(), position = end - seg.base(), %why, "torn entry at the log tail; truncating");
        }
        truncated += zero_from(&seg, end)?;
    }
    // Segments wholly past the end hold nothing valid (or, in truncate mode,
    // nothing we keep): remove them. One starting exactly at the end stays
    // (zeroed above) as the active segment.
    while segments.last().is_some_and(|s| s.base() > end) {
        if let Some(s) = segments.pop() {
            truncated += nonzero_len(&s);
            std::fs::remove_file(s.path()).at(s.path())?;
        }
    }
    fs_util::fsync_dir(dir)?;
    tracing::info!(
        end,
        scanned_bytes = end - scanned_from,
        records,
        truncated_bytes = truncated,
        elapsed_ms = began.elapsed().as_millis() as u64,
        "commit log recovered"
    );
    Ok(RecoveredLog {
        segments,
        end,
        scanned_from,
        records_scanned: records,
        truncated_bytes: truncated,
    })
}

/// The error for a log written in another format version: it is refused
/// whole, never truncated as if it were torn.
fn older_format(seg: &Segment, pos: u64, version: u8) -> StoreError {
    StoreError::corruption(
        seg.path(),
        pos - seg.base(),
        CorruptionKind::LogFormatVersion { version },
    )
}

/// Refuse a log whose first segment was written in another format version,
/// before anything reads it: with a clean checkpoint, recovery scans
/// nothing and the first read would find it.
pub(crate) fn check_format_version(segments: &[Arc<Segment>]) -> Result<()> {
    let Some(first) = segments.first() else {
        return Ok(());
    };
    match decode_for_recovery(first, first.base()) {
        Err(Invalid::BadVersion(v)) if v != 0 => Err(older_format(first, first.base(), v)),
        _ => Ok(()),
    }
}

/// Is there a valid entry after the invalid position `at` of `seg`: in
/// the rest of `seg` or at the start of a later segment? Returns where.
fn valid_data_after(segments: &[Arc<Segment>], seg: &Arc<Segment>, at: u64) -> Option<u64> {
    for later in segments.iter().filter(|s| s.base() > seg.base()) {
        if matches!(
            decode_for_recovery(later, later.base()),
            Ok(Decoded::Entry(_) | Decoded::EndOfSegment { .. })
        ) {
            return Some(later.base());
        }
    }
    // An entry can start at any byte; it stores its own offset at +12, which
    // makes a cheap filter before the full check. Only ranges that may hold
    // data are read; zero runs inside them are skipped quickly.
    let size = seg.size() as usize;
    // SAFETY: recovery runs before any reader or writer exists.
    let bytes = unsafe { seg.slice(0, size) };
    let from = at - seg.base() + 1;
    for (start, end) in seg.data_ranges(from) {
        // An entry that starts up to a header before a data range begins
        // would have its length bytes inside it: start a little early.
        let mut rel = (start as usize)
            .saturating_sub(ENTRY_HEADER_LEN)
            .max(from as usize);
        let end = end as usize;
        while rel < end && rel + ENTRY_HEADER_LEN <= size {
            if bytes[rel..rel + 8] == [0u8; 8] {
                match bytes[rel..end].iter().position(|&b| b != 0) {
                    Some(skip) => {
                        rel += skip.saturating_sub(11).max(1);
                        continue;
                    }
                    None => break,
                }
            }
            let pos = seg.base() + rel as u64;
            let mut stored = [0u8; 8];
            stored.copy_from_slice(&bytes[rel + 12..rel + 20]);
            if u64::from_le_bytes(stored) == pos
                && matches!(
                    format::decode(&bytes[rel..], pos, true),
                    Ok(Decoded::Entry(_) | Decoded::EndOfSegment { .. })
                )
            {
                return Some(pos);
            }
            rel += 1;
        }
    }
    None
}

/// Zero `[from, seg.end())` where it is not zero already, and make that
/// durable, so stale bytes can never be read back as records.
pub(crate) fn zero_from(seg: &Segment, from: u64) -> Result<u64> {
    const CHUNK: usize = 64 << 10;
    let mut zeroed = 0u64;
    for (start, end) in seg.data_ranges(from - seg.base()) {
        let mut rel = start as usize;
        while rel < end as usize {
            let len = CHUNK.min(end as usize - rel);
            // SAFETY: recovery runs before any reader or writer exists.
            let chunk = unsafe { seg.slice_mut(rel, len) };
            if chunk.iter().any(|&b| b != 0) {
                chunk.fill(0);
                seg.flush(rel, len)?;
                zeroed += len as u64;
            }
            rel += len;
        }
    }
    Ok(zeroed)
}

/// Bytes a removed trailing segment held: its size if anything was written
/// at its start, else 0 (a preallocated, never-used segment). Looks at the
/// first bytes only, so removing a spare 1 GiB segment reads nothing more.
pub(crate) fn nonzero_len(seg: &Segment) -> u64 {
    // SAFETY: recovery runs before any reader or writer exists.
    let head = unsafe { seg.slice(0, (seg.size() as usize).min(format::END_MARKER_LEN)) };
    if head.iter().any(|&b| b != 0) {
        seg.size()
    } else {
        0
    }
}
