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
//!   the recovered end ([`TimeIndex::truncate_to`]); a unit rewritten below
//!   the end drops the entries from its interval on. Missing entries are
//!   rebuilt from the queue and the CommitLog ([`TimeIndex::catch_up`]);
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

pub mod format;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use self::format::{ENTRY_LEN, HEADER_LEN, NO_RECORDS};
use crate::consume_queue::format::UNIT_LEN;
use crate::error::{IoContext, Result};
use crate::fs_util;

/// Time files are named as their queue file, with this suffix.
pub const FILE_SUFFIX: &str = ".time";
/// A time file being created by an older tidelog, which built new files
/// under this temporary name (now they are made in place,
/// [`TimeIndex::create_file`]): removed at load.
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

struct TimeFile {
    first_unit: u64,
    path: PathBuf,
    /// Open while entries may still be appended or synced: a full, synced
    /// file is closed (one descriptor per partition, not per queue file,
    /// beside the queue's own) and opened again only to be truncated.
    file: Option<Arc<File>>,
    /// Entry k's interval maximum.
    maxima: Vec<i64>,
    /// `running[k]` = max of `maxima[..=k]`: monotonic, for binary search.
    running: Vec<i64>,
    /// Entries durable on disk.
    synced: usize,
    /// The header (and so the file's size) is durable: false for a file
    /// made since the last flush, with no fsync ([`TimeIndex::create_file`]).
    header_synced: bool,
}

impl TimeFile {
    fn push(&mut self, max_ts: i64) {
        let prev = self.running.last().copied().unwrap_or(NO_RECORDS);
        self.maxima.push(max_ts);
        self.running.push(prev.max(max_ts));
    }

    /// The open file, opened again if it was closed.
    fn handle(&mut self) -> Result<Arc<File>> {
        if let Some(file) = &self.file {
            return Ok(Arc::clone(file));
        }
        let (file, _) = fs_util::open_read_write(&self.path)?;
        let file = Arc::new(file);
        self.file = Some(Arc::clone(&file));
        Ok(file)
    }

    /// Keep the first `n` entries, durably (a dropped entry that came back
    /// after a power loss could be stale).
    fn truncate(&mut self, n: usize) -> Result<()> {
        if self.maxima.len() <= n {
            return Ok(());
        }
        self.maxima.truncate(n);
        self.running.truncate(n);
        let file = self.handle()?;
        file.set_len((HEADER_LEN + n * ENTRY_LEN) as u64)
            .at(&self.path)?;
        crate::durability::sync_data(&file, &self.path).at(&self.path)?;
        self.synced = self.synced.min(n);
        Ok(())
    }
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

    /// The dispatcher put a new unit at `offset` (the queue's end), of a
    /// record with `timestamp_ms`. One compare while the interval lasts;
    /// its last unit appends its entry.
    #[inline]
    pub(crate) fn note(&self, offset: u64, timestamp_ms: i64) -> Result<()> {
        let end = self.tail_end.load(Ordering::Relaxed);
        if offset >= end || offset < self.tail_start.load(Ordering::Relaxed) {
            // Unknown (`end == 0`: `catch_up` rebuilds it), or a gap or a
            // put outside the tail: rebuilt from the queue.
            self.forget_tail();
            return Ok(());
        }
        if timestamp_ms > self.tail_max.load(Ordering::Relaxed) {
            self.tail_max.store(timestamp_ms, Ordering::Relaxed);
        }
        if offset + 1 < end {
            return Ok(());
        }
        self.finish_tail()
    }

    /// The tail interval is complete: append its entry, and the next
    /// interval becomes the tail.
    fn finish_tail(&self) -> Result<()> {
        let done = self.interval_of(self.tail_start.load(Ordering::Relaxed));
        let max_ts = self.tail_max.load(Ordering::Relaxed);
        let next = self.interval_at(done.file_first, done.k + 1);
        self.set_tail(next.start, next.end, NO_RECORDS);
        let appended = {
            let mut files = self.lock();
            self.append(&mut files, done, max_ts)
        };
        match appended {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.forget_tail();
                Ok(())
            }
            Err(e) => {
                self.forget_tail();
                Err(e)
            }
        }
    }

    fn set_tail(&self, start: u64, end: u64, max_ts: i64) {
        self.tail_end.store(0, Ordering::Relaxed);
        self.tail_start.store(start, Ordering::Relaxed);
        self.tail_max.store(max_ts, Ordering::Relaxed);
        self.tail_end.store(end, Ordering::Relaxed);
    }

    fn forget_tail(&self) {
        self.tail_end.store(0, Ordering::Relaxed);
    }

    /// Whether the tail is unknown: [`TimeIndex::catch_up`] must run before
    /// the index follows new units again.
    pub(crate) fn needs_catch_up(&self) -> bool {
        self.tail_end.load(Ordering::Relaxed) == 0
    }

    /// Append the entry of `iv`; `false` if it is not the next entry of its
    /// file (the caller rebuilds instead).
    fn append(&self, files: &mut Vec<TimeFile>, iv: Interval, max_ts: i64) -> Result<bool> {
        let at = match files.binary_search_by_key(&iv.file_first, |f| f.first_unit) {
            Ok(at) => at,
            Err(at) => {
                let f = self.create_file(iv.file_first)?;
                files.insert(at, f);
                at
            }
        };
        let f = &mut files[at];
        if f.maxima.len() as u64 != iv.k {
            return Ok(false);
        }
        let bytes = format::encode_entry(iv.file_first, iv.k, max_ts);
        let pos = HEADER_LEN as u64 + iv.k * ENTRY_LEN as u64;
        f.handle()?.write_all_at(&bytes, pos).at(&f.path)?;
        f.push(max_ts);
        Ok(true)
    }

    /// A new time file holding only its header, made in place with no
    /// fsync (the dispatcher's path, like a new queue file's): its header
    /// is synced by the next [`TimeIndex::flush`], and its directory, noted
    /// in `names`, by the queues' flush after that, before a checkpoint
    /// counts any unit of its interval. A power loss before leaves it
    /// missing, empty or with a torn header, which [`TimeIndex::load`]
    /// removes; [`TimeIndex::catch_up`] rebuilds its entries.
    fn create_file(&self, first_unit: u64) -> Result<TimeFile> {
        let name = fs_util::offset_file_name(first_unit * UNIT_LEN as u64);
        let path = self.dir.join(format!("{name}{FILE_SUFFIX}"));
        self.names.create_dir_all(&self.dir)?;
        let header = format::encode_header(self.interval as u32);
        let build = || -> Result<TimeFile> {
            let file = fs_util::create_empty(&path)?;
            self.names.note(&self.dir);
            file.write_all_at(&header, 0).at(&path)?;
            Ok(TimeFile {
                first_unit,
                path: path.clone(),
                file: Some(Arc::new(file)),
                maxima: Vec::new(),
                running: Vec::new(),
                synced: 0,
                header_synced: false,
            })
        };
        build().inspect_err(|_| {
            let _ = std::fs::remove_file(&path);
        })
    }

    /// Bring the index up to the queue: `queue_files` are the first units
    /// of the queue's files, `end` its `max_offset`. Drops time files of
    /// queue files that are gone and entries at or past `end`, builds every
    /// missing entry of a complete interval from the records (`times`), and
    /// the tail's running maximum. Returns the entries built.
    pub(crate) fn catch_up(
        &self,
        queue_files: &[u64],
        end: u64,
        times: &mut dyn RecordTimes,
    ) -> Result<u64> {
        let mut files = self.lock();
        let mut kept = Vec::with_capacity(files.len());
        for f in files.drain(..) {
            if queue_files.contains(&f.first_unit) && f.first_unit < end {
                kept.push(f);
            } else {
                std::fs::remove_file(&f.path).at(&f.path)?;
            }
        }
        *files = kept;
        let mut built = 0;
        for &file_first in queue_files.iter().filter(|&&f| f < end) {
            let complete = self.complete_in(file_first, end);
            if let Ok(at) = files.binary_search_by_key(&file_first, |f| f.first_unit) {
                files[at].truncate(complete as usize)?;
            }
            let have = files
                .iter()
                .find(|f| f.first_unit == file_first)
                .map_or(0, |f| f.maxima.len() as u64);
            for k in have..complete {
                let iv = self.interval_at(file_first, k);
                let max_ts = max_timestamp(times, iv.start, iv.end)?;
                if !self.append(&mut files, iv, max_ts)? {
                    break; // cannot happen: entries are built in order
                }
                built += 1;
                if built % 10_000 == 0 {
                    tracing::info!(dir = %self.dir.display(), built, "rebuilding the time index");
                }
            }
        }
        drop(files);
        let tail = self.interval_of(end);
        let max_ts = max_timestamp(times, tail.start, end)?;
        self.set_tail(tail.start, tail.end, max_ts);
        Ok(built)
    }

    /// Drop every entry whose interval reaches `end` or past it, durably,
    /// and time files wholly past it; the tail becomes unknown. Recovery
    /// (the queue's end moved down) and repairs (a unit below the end was
    /// rewritten at `end`).
    pub(crate) fn truncate_to(&self, end: u64) -> Result<()> {
        self.forget_tail();
        let mut files = self.lock();
        let mut removed = false;
        while files.last().is_some_and(|f| f.first_unit >= end) {
            if let Some(f) = files.pop() {
                std::fs::remove_file(&f.path).at(&f.path)?;
                removed = true;
            }
        }
        for f in files.iter_mut() {
            let complete = self.complete_in(f.first_unit, end);
            f.truncate(complete as usize)?;
        }
        if removed {
            fs_util::fsync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Retention: delete the time files of queue files before `first_unit`
    /// (the first queue file kept).
    pub(crate) fn remove_before(&self, first_unit: u64) -> Result<usize> {
        let mut files = self.lock();
        let mut removed = 0;
        while files.first().is_some_and(|f| f.first_unit < first_unit) {
            let f = files.remove(0);
            std::fs::remove_file(&f.path).at(&f.path)?;
            removed += 1;
        }
        Ok(removed)
    }

    /// Make every entry appended so far durable. The file is synced outside
    /// the lock, so the dispatcher's appends do not wait for the disk.
    pub(crate) fn flush(&self) -> Result<()> {
        let mut pending: Vec<(u64, Arc<File>, PathBuf, usize)> = Vec::new();
        for f in self
            .lock()
            .iter_mut()
            .filter(|f| f.synced < f.maxima.len() || !f.header_synced)
        {
            pending.push((f.first_unit, f.handle()?, f.path.clone(), f.maxima.len()));
        }
        let cap = format::entries_per_file(self.units_per_file, self.interval) as usize;
        for (first_unit, file, path, n) in pending {
            crate::durability::sync_data(&file, &path).at(&path)?;
            if let Some(f) = self.lock().iter_mut().find(|f| f.first_unit == first_unit) {
                f.header_synced = true;
                f.synced = f.synced.max(n.min(f.maxima.len()));
                if f.synced == cap {
                    f.file = None; // full and durable: nothing more to write
                }
            }
        }
        Ok(())
    }

    /// A lookup's next step for timestamp `timestamp_ms` from queue offset
    /// `from` (everything before it is below T), with the queue's end at
    /// `end`.
    pub(crate) fn next_step(&self, from: u64, timestamp_ms: i64, end: u64) -> Step {
        let first = self.interval_of(from);
        if from != first.start {
            // Part of an interval (the beginning moved into it): its entry
            // also covers records before `from`.
            return Step::Scan {
                from,
                to: first.end,
            };
        }
        let files = self.lock();
        let mut iv = first;
        loop {
            if iv.start >= end {
                return Step::Done;
            }
            let Ok(at) = files.binary_search_by_key(&iv.file_first, |f| f.first_unit) else {
                return Step::Scan {
                    from: iv.start,
                    to: iv.end,
                };
            };
            let f = &files[at];
            let n = f.maxima.len() as u64;
            if iv.k >= n {
                return Step::Scan {
                    from: iv.start,
                    to: iv.end,
                };
            }
            let found = if iv.k == 0 {
                f.running.partition_point(|&m| m < timestamp_ms) as u64
            } else {
                let k = iv.k as usize;
                f.maxima[k..]
                    .iter()
                    .position(|&m| m >= timestamp_ms)
                    .map_or(n, |j| (k + j) as u64)
            };
            if found < n {
                let hit = self.interval_at(iv.file_first, found);
                return Step::Scan {
                    from: hit.start,
                    to: hit.end,
                };
            }
            iv = self.interval_at(iv.file_first, n);
        }
    }

    /// The largest record timestamp at queue offsets `[from, end)`, or
    /// `None` when no record there has one (ListOffsets -3, KIP-734). An
    /// indexed interval wholly inside the range counts by its entry (a
    /// file whose entries are all there by its last running maximum); the
    /// rest is read from the records: a first interval the beginning
    /// moved into (its entry covers records that are gone), intervals
    /// without an entry yet, and the tail. So at most about two intervals
    /// of records are read while the index is complete.
    pub(crate) fn max_timestamp(
        &self,
        from: u64,
        end: u64,
        times: &mut dyn RecordTimes,
    ) -> Result<Option<i64>> {
        let mut best = NO_RECORDS;
        // The ranges to read, planned under the lock and read after it,
        // so the dispatcher's appends do not wait for the reads.
        let mut unindexed: Vec<(u64, u64)> = Vec::new();
        {
            let files = self.lock();
            let mut at = from;
            while at < end {
                let iv = self.interval_of(at);
                let to = iv.end.min(end);
                let entry = (at == iv.start && iv.end <= end)
                    .then(|| files.binary_search_by_key(&iv.file_first, |f| f.first_unit))
                    .and_then(Result::ok)
                    .map(|i| &files[i]);
                match entry {
                    Some(f)
                        if iv.k == 0
                            && f.first_unit + self.units_per_file <= end
                            && f.maxima.len() as u64 == self.complete_in(f.first_unit, end) =>
                    {
                        // The whole file, indexed: its running maximum.
                        best = best.max(f.running.last().copied().unwrap_or(NO_RECORDS));
                        at = f.first_unit + self.units_per_file;
                        continue;
                    }
                    Some(f) if (iv.k as usize) < f.maxima.len() => {
                        best = best.max(f.maxima[iv.k as usize]);
                    }
                    _ => unindexed.push((at, to)),
                }
                at = to;
            }
        }
        for (lo, hi) in unindexed {
            best = best.max(max_timestamp(times, lo, hi)?);
        }
        Ok((best != NO_RECORDS).then_some(best))
    }

    /// Entries held (tests and stats).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.lock().iter().map(|f| f.maxima.len()).sum()
    }
}

/// The largest timestamp among the records of `[from, to)`.
fn max_timestamp(times: &mut dyn RecordTimes, from: u64, to: u64) -> Result<i64> {
    let mut max_ts = NO_RECORDS;
    for offset in from..to {
        if let Some(ts) = times.timestamp_at(offset)? {
            max_ts = max_ts.max(ts);
        }
    }
    Ok(max_ts)
}

/// The first offset of `[from, to)` whose record's timestamp is at least
/// `timestamp_ms`.
pub(crate) fn first_at_or_after(
    times: &mut dyn RecordTimes,
    from: u64,
    to: u64,
    timestamp_ms: i64,
) -> Result<Option<u64>> {
    for offset in from..to {
        if times
            .timestamp_at(offset)?
            .is_some_and(|ts| ts >= timestamp_ms)
        {
            return Ok(Some(offset));
        }
    }
    Ok(None)
}
