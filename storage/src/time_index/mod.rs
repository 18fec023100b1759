//! The time index of a ConsumeQueue: "the first queue offset whose record
//! timestamp is at least T" (Kafka's ListOffsets rule) without a scan of
//! the partition.
//!
//! Record timestamps are the producers', so they are not monotonic. Kafka
//! indexes the running maximum; here each queue file has a time file
//! beside it (`format.rs`) with one entry per *interval* of
//! `interval` queue offsets: the largest timestamp among the interval's
//! records. A lookup finds the first interval whose maximum reaches T
//! (within a file by binary search over the running maximum of the
//! interval maxima, which is monotonic) and reads that interval's records:
//! every record before it is below T, and it holds one that is not. Exact
//! for any order of timestamps.
//!
//! Invariants:
//! - An entry exists only for an interval whose every queue offset is
//!   below the queue's end (`max_offset`), and its value is the maximum
//!   over the units there when it was written. Recovery drops entries past
//!   the recovered end (`TimeIndex::truncate_to`); a unit rewritten below
//!   the end drops the entries from its interval on. Missing entries are
//!   rebuilt from the queue and the CommitLog (`TimeIndex::catch_up`);
//!   until then a lookup reads the records of an unindexed interval, so a
//!   missing index is slower, never wrong.
//! - Entries of a file are contiguous from its first interval. A time file
//!   is deleted with its queue file (retention, topic deletion, recovery).
//! - The interval being filled (the *tail*) is the dispatcher's: its bounds
//!   and running maximum are atomics only the dispatcher (or recovery,
//!   before the dispatcher runs) writes, so a record costs a compare and an
//!   interval one `pwrite`. After a restart the tail is unknown until
//!   `catch_up` reads its records again (at most one interval).
//! - Entries are synced by the queue's flush, after its units. An entry
//!   writeback put on disk before its units is dropped by recovery with
//!   them (the first invariant).
//!
//! Files, one role each: `writer.rs` (the dispatcher's side: noting each
//! record, appending an interval's entry, creating, truncating, removing
//! and flushing time files, rebuilding missing entries), `reader.rs`
//! (lookups: the next interval to read for a timestamp, the largest
//! timestamp, the scans of an interval's records), `file.rs` (one time
//! file's entries in memory and its handle), `format.rs` (the layout).
//! This file holds [`TimeIndex`], its loading and the interval
//! arithmetic both sides share.

mod file;
pub mod format;
mod reader;
mod writer;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard};

use self::file::TimeFile;
use self::format::{ENTRY_LEN, HEADER_LEN, NO_RECORDS};
pub(crate) use self::reader::first_at_or_after;
use crate::consume_queue::format::UNIT_LEN;
use crate::error::{IoContext, Result};
use crate::fs_util;

/// Time files are named as their queue file, with this suffix.
pub const FILE_SUFFIX: &str = ".time";
/// A time file being created by an older tidelog, which built new files
/// under this temporary name (now they are made in place,
/// `TimeIndex::create_file`): removed at load.
pub const TMP_SUFFIX: &str = ".time.creating";

#[cfg(test)]
thread_local! {
    /// Tests: the interval queues loaded on this thread get (the default
    /// needs thousands of records per interval to test).
    pub(crate) static TEST_INTERVAL: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
    /// Tests: records whose timestamp a lookup or a rebuild read on this
    /// thread (a lookup must read a few intervals, not the partition).
    pub(crate) static RECORDS_READ: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The interval the queues of a store index with (read once, where the
/// store loads its queues).
pub(crate) fn interval_records() -> u32 {
    #[cfg(test)]
    if let Some(i) = TEST_INTERVAL.with(|c| c.get()) {
        return i;
    }
    format::INTERVAL_RECORDS
}

/// Reads the timestamp of the record at a queue offset: `None` for a hole,
/// or a record retention deleted.
pub trait RecordTimes {
    fn timestamp_at(&mut self, offset: u64) -> Result<Option<i64>>;
}

/// What a lookup reads next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The first record at or above T, if any, is in `[from, to)`, or
    /// past it.
    Scan { from: u64, to: u64 },
    /// No record at or past the asked offset reaches T.
    Done,
}

/// One interval: queue offsets `[start, end)`, entry `k` of the time file
/// of the queue file starting at `file_first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Interval {
    file_first: u64,
    k: u64,
    start: u64,
    end: u64,
}

/// The time index of one queue (see the module docs).
pub struct TimeIndex {
    dir: PathBuf,
    /// Where a new time file's directory is noted, to be synced by the
    /// queues' flush after this index's (`ConsumeQueues::flush`).
    names: Arc<fs_util::PendingDirSyncs>,
    units_per_file: u64,
    interval: u64,
    /// Sorted by first unit. Held for an append, a lookup step, a
    /// truncation or a rebuild; never while waiting for an fsync of an
    /// entry. Lock order: this, then the queue's file list (a rebuild reads
    /// units under it), so the queue never calls in here holding its list.
    files: Mutex<Vec<TimeFile>>,
    /// The tail interval `[tail_start, tail_end)` and its running maximum;
    /// `tail_end == 0` while unknown.
    tail_start: AtomicU64,
    tail_end: AtomicU64,
    tail_max: AtomicI64,
}

impl TimeIndex {
    /// An index with no files (a new queue).
    pub(crate) fn empty(
        dir: PathBuf,
        units_per_file: u64,
        interval: u32,
        names: Arc<fs_util::PendingDirSyncs>,
    ) -> TimeIndex {
        TimeIndex {
            dir,
            names,
            units_per_file,
            interval: u64::from(interval.max(1)),
            files: Mutex::new(Vec::new()),
            tail_start: AtomicU64::new(0),
            tail_end: AtomicU64::new(0),
            tail_max: AtomicI64::new(NO_RECORDS),
        }
    }

    /// Load the time files of a queue directory. What does not decode is
    /// dropped (a bad header: the file; a torn or damaged entry: it and
    /// every entry after it) and rebuilt by [`TimeIndex::catch_up`].
    pub(crate) fn load(
        dir: &Path,
        units_per_file: u64,
        interval: u32,
        names: Arc<fs_util::PendingDirSyncs>,
    ) -> Result<TimeIndex> {
        let index = TimeIndex::empty(dir.to_path_buf(), units_per_file, interval, names);
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).at(dir)? {
            let entry = entry.at(dir)?;
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if fs_util::parse_offset_file_name(&name, TMP_SUFFIX).is_some() {
                tracing::info!(path = %path.display(), "removing a half-created time index file");
                std::fs::remove_file(&path).at(&path)?;
                continue;
            }
            let Some(byte_offset) = fs_util::parse_offset_file_name(&name, FILE_SUFFIX) else {
                continue;
            };
            let file_bytes = units_per_file * UNIT_LEN as u64;
            if byte_offset % file_bytes != 0 {
                tracing::warn!(path = %path.display(), "time index file does not fit consume_queue_units_per_file; removing it, it is rebuilt");
                std::fs::remove_file(&path).at(&path)?;
                continue;
            }
            if let Some(f) = index.open_file(path, byte_offset / UNIT_LEN as u64)? {
                files.push(f);
            }
        }
        files.sort_by_key(|f| f.first_unit);
        *index.lock() = files;
        Ok(index)
    }

    fn open_file(&self, path: PathBuf, first_unit: u64) -> Result<Option<TimeFile>> {
        let (file, len) = fs_util::open_read_write(&path)?;
        let cap = format::entries_per_file(self.units_per_file, self.interval);
        // Never more than a full file is read, whatever the length says.
        let want = len.min(HEADER_LEN as u64 + cap * ENTRY_LEN as u64) as usize;
        let mut bytes = vec![0u8; want];
        file.read_exact_at(&mut bytes, 0).at(&path)?;
        if len < HEADER_LEN as u64 && bytes.iter().all(|&b| b == 0) {
            // Made just before a power loss: its name reached the disk,
            // its header did not (`create_file`). Expected, not damage.
            tracing::info!(path = %path.display(), len, "removing a time index file made just before a crash; it is rebuilt");
            drop(file);
            std::fs::remove_file(&path).at(&path)?;
            return Ok(None);
        }
        if let Err(why) = format::decode_header(&bytes, self.interval as u32) {
            tracing::warn!(path = %path.display(), ?why, "time index file header does not decode; removing it, it is rebuilt");
            drop(file);
            std::fs::remove_file(&path).at(&path)?;
            return Ok(None);
        }
        let mut f = TimeFile {
            first_unit,
            path,
            file: None,
            maxima: Vec::new(),
            running: Vec::new(),
            synced: 0,
            header_synced: true,
        };
        for (k, e) in bytes[HEADER_LEN..].chunks_exact(ENTRY_LEN).enumerate() {
            let e: &[u8; ENTRY_LEN] = e.try_into().unwrap_or(&[0; ENTRY_LEN]);
            match format::decode_entry(e, first_unit, k as u64) {
                Some(max_ts) => f.push(max_ts),
                None => break,
            }
        }
        f.synced = f.maxima.len();
        let valid = (HEADER_LEN + f.maxima.len() * ENTRY_LEN) as u64;
        if len != valid {
            tracing::warn!(path = %f.path.display(), len, valid, "time index file has a torn or damaged tail; truncating it, the rest is rebuilt");
            file.set_len(valid).at(&f.path)?;
            crate::durability::sync_data(&file, &f.path).at(&f.path)?;
        }
        if (f.maxima.len() as u64) < cap {
            f.file = Some(Arc::new(file)); // entries still to come
        }
        Ok(Some(f))
    }

    fn lock(&self) -> MutexGuard<'_, Vec<TimeFile>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Entry `k` of the queue file starting at `file_first`, moved to the
    /// next file's first interval when `k` is past the file's last one.
    fn interval_at(&self, file_first: u64, k: u64) -> Interval {
        let start = file_first + k * self.interval;
        let file_end = file_first + self.units_per_file;
        if start >= file_end {
            return self.interval_at(file_end, 0);
        }
        Interval {
            file_first,
            k,
            start,
            end: (start + self.interval).min(file_end),
        }
    }

    fn interval_of(&self, offset: u64) -> Interval {
        let file_first = offset / self.units_per_file * self.units_per_file;
        self.interval_at(file_first, (offset - file_first) / self.interval)
    }

    /// Intervals of the queue file at `file_first` that lie wholly below
    /// `end`.
    fn complete_in(&self, file_first: u64, end: u64) -> u64 {
        let units = end.saturating_sub(file_first).min(self.units_per_file);
        if units == self.units_per_file {
            format::entries_per_file(self.units_per_file, self.interval)
        } else {
            units / self.interval
        }
    }

    /// Entries held (tests and stats).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.lock().iter().map(|f| f.maxima.len()).sum()
    }
}
