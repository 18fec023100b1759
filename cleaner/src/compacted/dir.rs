//! A compacted log's directory, `compacted/<topic>/<partition>/`: the
//! names of the files a log keeps there, and `reconcile_dir`, which
//! finishes or rolls back what an interrupted swap left in it.
//!
//! Invariants:
//! - One function reconciles a directory, at startup and before a cleaning
//!   pass retries after a failure, so the two can never disagree; the
//!   swap's forward steps it mirrors are in `cleaner/swap.rs`, and the two
//!   change together.
//! - A `<base>-<end>.swap` file is the truth once it exists (it was written
//!   and fsynced before the rename); a `.cleaned` file never is.
//! - What reconcile did is durable (the directory fsynced) before it
//!   returns.
//! - `<base>.log.new` segments are listed apart and never touched here:
//!   what they mean is the caller's (`CompactedLog::open`).

use std::path::Path;

use tidelog_storage::fs_util::{self, offset_file_name, parse_offset_file_name};

use super::segment::{CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, NEW_SUFFIX, SWAP_SUFFIX};
use crate::error::{CleanerError, Result};

/// Name of a swap file: `<base>-<end>.swap` replaces the segments whose
/// base offsets lie in `[base, end)`.
pub(crate) fn swap_file_name(base: u64, end: u64) -> String {
    format!(
        "{}-{}{SWAP_SUFFIX}",
        offset_file_name(base),
        offset_file_name(end)
    )
}

fn parse_swap_name(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_suffix(SWAP_SUFFIX)?;
    let (a, b) = stem.split_once('-')?;
    Some((
        parse_offset_file_name(a, "")?,
        parse_offset_file_name(b, "")?,
    ))
}

/// What [`reconcile_dir`] found and left.
pub(crate) struct Reconciled {
    /// Base offsets of the `<base>.log` segments, ascending.
    pub bases: Vec<u64>,
    /// Base offsets of the `<base>.log.new` segments ([`NEW_SUFFIX`]),
    /// ascending: a roll made them, and no flush has renamed them yet.
    pub new_bases: Vec<u64>,
    /// Whether a file was removed or renamed.
    pub changed: bool,
}

/// `<20-digit base>.log`.
pub(crate) fn segment_file_name(base: u64) -> String {
    format!("{}{LOG_SUFFIX}", offset_file_name(base))
}

/// `<20-digit base>.log.new`: a segment a roll made ([`NEW_SUFFIX`]).
pub(crate) fn new_segment_file_name(base: u64) -> String {
    format!("{}{LOG_SUFFIX}{NEW_SUFFIX}", offset_file_name(base))
}

/// Finish or roll back what an interrupted swap left in a log directory:
/// what startup does, and what a cleaning pass does before it retries after
/// a failure (one function, so the two can never disagree). The swap's
/// forward steps, and what a crash after each leaves, are in
/// `cleaner/swap.rs`; the two change together.
///
/// - `.cleaned`: its cleaning had not reached the swap point; the old
///   segments are whole, so it is deleted.
/// - `<base>-<end>.swap`: its cleaning was complete and durable (written
///   and fsynced before the rename), so it is the truth: the segments with
///   base offsets in `[base, end)` are deleted and it is renamed to
///   `<base>.log`.
/// - `<base>.log.deleted`: an old segment a swap replaced and renamed
///   aside after its `.swap` file was durable, so the new data is in the
///   `.swap` file or in its `<base>.log` already; it is deleted.
/// - `<base>.log.new` ([`NEW_SUFFIX`]): listed apart (`new_bases`) and
///   left as it is. A swap never covers one (the cleaner leaves them
///   alone); what it means is the caller's: at startup copies made since
///   the last checkpoint, which `CompactedLog::open` deletes; in a
///   running log a live segment that waits for the next flush.
///
/// Ends with an fsync of the directory, so what it did is durable before
/// anything else happens to the log.
pub(crate) fn reconcile_dir(dir: &Path) -> Result<Reconciled> {
    let mut bases = Vec::new();
    let mut new_bases = Vec::new();
    let mut swaps = Vec::new();
    let mut changed = false;
    for entry in std::fs::read_dir(dir).map_err(|e| CleanerError::io(dir, e))? {
        let entry = entry.map_err(|e| CleanerError::io(dir, e))?;
        let name = entry.file_name();
        let name = name.to_str().unwrap_or_default();
        if let Some(base) = parse_offset_file_name(name, LOG_SUFFIX) {
            bases.push(base);
        } else if let Some(base) = name
            .strip_suffix(NEW_SUFFIX)
            .and_then(|n| parse_offset_file_name(n, LOG_SUFFIX))
        {
            new_bases.push(base);
        } else if name.ends_with(DELETED_SUFFIX) {
            std::fs::remove_file(entry.path()).map_err(|e| CleanerError::io(&entry.path(), e))?;
            changed = true;
        } else if name.ends_with(CLEANED_SUFFIX) {
            tracing::info!(path = %entry.path().display(), "removing an unfinished .cleaned file");
            std::fs::remove_file(entry.path()).map_err(|e| CleanerError::io(&entry.path(), e))?;
            changed = true;
        } else if let Some(range) = parse_swap_name(name) {
            swaps.push((range, entry.path()));
        } else {
            tracing::warn!(path = %entry.path().display(), "ignoring a stray file in a compacted log directory");
        }
    }
    for ((base, end), path) in swaps {
        tracing::info!(path = %path.display(), "completing an interrupted segment swap");
        for &b in bases.iter().filter(|&&b| b >= base && b < end) {
            let old = dir.join(segment_file_name(b));
            std::fs::remove_file(&old).map_err(|e| CleanerError::io(&old, e))?;
        }
        bases.retain(|&b| b < base || b >= end);
        let to = dir.join(segment_file_name(base));
        std::fs::rename(&path, &to).map_err(|e| CleanerError::io(&to, e))?;
        bases.push(base);
        changed = true;
    }
    fs_util::fsync_dir(dir).map_err(|e| CleanerError::Store {
        path: dir.to_path_buf(),
        source: e,
    })?;
    bases.sort_unstable();
    new_bases.sort_unstable();
    Ok(Reconciled {
        bases,
        new_bases,
        changed,
    })
}
