//! The ConsumeQueue of one topic-partition: its files in offset order,
//! `[min_offset, max_offset)`, the units' reads and writes, its time
//! index, and the listeners waiting for its next unit.
//!
//! Invariants: only the dispatcher writes (one thread), and a unit below
//! `max_offset` never changes once published (`Release` after the unit
//! is written, `Acquire` by readers, which read only below it), except by
//! recovery before readers exist; `min_offset` is never below the log
//! start, and no unit below the log start is written again; the time
//! index follows the units (what it lacks, a lookup reads from the log).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use event_listener::{Event, EventListener};

use super::file::QueueFile;
use super::format::{Unit, UNIT_LEN};
use crate::commit_log::{CommitLog, ReadCache};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;
use crate::time_index::{self, RecordTimes, Step, TimeIndex};
use crate::types::{QueueOffset, TopicPartition};

/// A queue file being created by an older tidelog, which built new files
/// under this temporary name and synced them on the dispatcher's thread
/// (now [`QueueFile::create`] makes them in place): removed at load.
const TMP_SUFFIX: &str = ".creating";

/// Where a sequential reader of a queue is: the file it read last.
#[derive(Default)]
pub struct QueueCursor {
    file: Option<Arc<QueueFile>>,
}

/// The queue of one topic-partition.
pub struct ConsumeQueue {
    pub(super) tp: TopicPartition,
    dir: PathBuf,
    units_per_file: u64,
    pub(super) files: RwLock<Vec<Arc<QueueFile>>>,
    min_offset: AtomicU64,
    max_offset: AtomicU64,
    /// The log start offset a client moved the beginning to (DeleteRecords;
    /// 0 if never), as `log-start-offsets` keeps it: `min_offset` is never
    /// below it and units below it are never written again.
    log_start: AtomicU64,
    /// Units below this are on disk.
    pub(super) flushed_offset: AtomicU64,
    new_records: Event,
    /// Set when the topic is deleted: holders of this queue (the
    /// dispatcher's batch) look it up again.
    deleted: AtomicBool,
    /// Lookup by record timestamp (`time_index`), files beside the queue's.
    pub(super) time: TimeIndex,
    /// The queues' directories with names not yet durable (shared by every
    /// queue of the store; synced by
    /// [`ConsumeQueues::flush`](super::ConsumeQueues::flush)).
    names: Arc<fs_util::PendingDirSyncs>,
}

/// What [`ConsumeQueue::truncate_from_physical`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Truncated {
    /// Units dropped from the tail.
    pub dropped: usize,
    /// Set when invalid (torn) units were among them: where the records
    /// after the last unit kept begin, so recovery can re-dispatch from
    /// there (0 when no unit was kept).
    pub replay_from: Option<u64>,
}

/// What `put` did with a unit.
#[derive(Debug, PartialEq, Eq)]
pub enum PutOutcome {
    Written,
    /// The same unit was already there (a replay after a crash).
    AlreadyPresent,
    /// Below the queue's log start (a replay of deleted records): skipped.
    BelowLogStart,
}

impl ConsumeQueue {
    /// A queue with no units whose offsets start at `next`.
    pub(super) fn empty(
        tp: TopicPartition,
        dir: PathBuf,
        units_per_file: u64,
        time_interval: u32,
        next: u64,
        names: Arc<fs_util::PendingDirSyncs>,
    ) -> ConsumeQueue {
        let dir_for_time = dir.clone();
        ConsumeQueue {
            tp,
            dir,
            units_per_file,
            files: RwLock::new(Vec::new()),
            min_offset: AtomicU64::new(next),
            max_offset: AtomicU64::new(next),
            log_start: AtomicU64::new(0),
            flushed_offset: AtomicU64::new(next),
            new_records: Event::new(),
            deleted: AtomicBool::new(false),
            time: TimeIndex::empty(
                dir_for_time,
                units_per_file,
                time_interval,
                Arc::clone(&names),
            ),
            names,
        }
    }

    /// Load a partition's queue files from `dir`.
    pub(super) fn load(
        tp: TopicPartition,
        dir: PathBuf,
        units_per_file: u64,
        time_interval: u32,
        names: Arc<fs_util::PendingDirSyncs>,
    ) -> Result<ConsumeQueue> {
        let mut q = Self::empty(tp, dir, units_per_file, time_interval, 0, names);
        q.time = TimeIndex::load(&q.dir, units_per_file, time_interval, Arc::clone(&q.names))?;
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&q.dir).at(&q.dir)? {
            let entry = entry.at(&q.dir)?;
            let name = entry.file_name();
            if name.to_str().is_some_and(|n| {
                n.ends_with(time_index::FILE_SUFFIX) || n.ends_with(time_index::TMP_SUFFIX)
            }) {
                continue; // the time index's (`TimeIndex::load`)
            }
            if name.to_str().is_some_and(|n| {
                n.ends_with(crate::txn_index::file::FILE_SUFFIX)
                    || n.ends_with(crate::txn_index::file::TMP_SUFFIX)
            }) {
                continue; // the aborted transactions' (`txn_index::file`)
            }
            if name
                .to_str()
                .and_then(|n| fs_util::parse_offset_file_name(n, TMP_SUFFIX))
                .is_some()
            {
                // A creation a crash interrupted: never used.
                tracing::info!(path = %entry.path().display(), "removing a half-created queue file");
                std::fs::remove_file(entry.path()).at(&entry.path())?;
                continue;
            }
            let Some(byte_offset) = name
                .to_str()
                .and_then(|n| fs_util::parse_offset_file_name(n, ""))
            else {
                tracing::warn!(path = %entry.path().display(), "ignoring a stray file in a consume queue directory");
                continue;
            };
            let file_bytes = units_per_file * UNIT_LEN as u64;
            if byte_offset % file_bytes != 0 {
                return Err(StoreError::corruption(
                    entry.path(),
                    0,
                    CorruptionKind::QueueFileName {
                        byte_offset,
                        file_bytes,
                    },
                ));
            }
            names.push(byte_offset / UNIT_LEN as u64);
        }
        names.sort_unstable();
        let paths: Vec<(u64, PathBuf)> = names
            .into_iter()
            .map(|first_unit| {
                let name = fs_util::offset_file_name(first_unit * UNIT_LEN as u64);
                (first_unit, q.dir.join(name))
            })
            .collect();
        // The files after the last one holding a byte are the tail, which a
        // power loss may leave short (`QueueFile::open`).
        let mut lens = Vec::with_capacity(paths.len());
        for (_, path) in &paths {
            lens.push(std::fs::metadata(path).at(path)?.len());
        }
        let tail_from = lens.iter().rposition(|&len| len > 0).unwrap_or(0);
        let mut files = Vec::with_capacity(paths.len());
        for (i, (first_unit, path)) in paths.into_iter().enumerate() {
            files.push(Arc::new(QueueFile::open(
                path,
                first_unit,
                units_per_file,
                i >= tail_from,
            )?));
        }
        // max: one past the last written unit; min: the first written one.
        // Whether they are valid is for recovery to decide: it drops torn
        // units at the tail (`truncate_from_physical`).
        let mut max = files.first().map_or(0, |f| f.first_unit);
        for f in files.iter().rev() {
            if let Some(u) = f.find_written_unit(true)? {
                max = u + 1;
                break;
            }
        }
        let mut min = max;
        for f in files.iter().take_while(|f| f.first_unit < max) {
            if let Some(u) = f.find_written_unit(false)? {
                min = u.min(max);
                break;
            }
        }
        q.min_offset.store(min, Ordering::Release);
        q.max_offset.store(max, Ordering::Release);
        q.flushed_offset.store(max, Ordering::Release);
        *q.files.write().unwrap_or_else(|e| e.into_inner()) = files;
        Ok(q)
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    /// First queue offset that can still be read.
    pub fn min_offset(&self) -> u64 {
        self.min_offset.load(Ordering::Acquire)
    }

    /// The next queue offset to be written: one past the last readable unit.
    pub fn max_offset(&self) -> u64 {
        self.max_offset.load(Ordering::Acquire)
    }

    /// The log start offset a client moved the beginning to (0 if never).
    pub fn log_start(&self) -> u64 {
        self.log_start.load(Ordering::Acquire)
    }

    /// The path of the queue file that holds (or would hold) `offset`.
    pub(crate) fn file_path_for(&self, offset: u64) -> PathBuf {
        let first_unit = offset / self.units_per_file * self.units_per_file;
        self.dir
            .join(fs_util::offset_file_name(first_unit * UNIT_LEN as u64))
    }

    /// Recovery: the CommitLog position just past the record of the
    /// queue's last unit, from which a re-dispatch gives it every later
    /// record; 0 (the log's start) when it holds no readable unit.
    pub(super) fn replay_from_after_end(&self) -> u64 {
        let (min, max) = (self.min_offset(), self.max_offset());
        if max <= min {
            return 0;
        }
        match self.file_for(max - 1).map(|f| f.decode(max - 1)) {
            Some(Ok(Some(u))) => u.physical_offset + u64::from(u.size),
            _ => 0,
        }
    }

    /// Move the log start up to `start` (never down) and the beginning with
    /// it. A queue that ends below `start` (its units past the end were
    /// lost in a crash after the start was moved) continues at `start`:
    /// no offset below the log start is handed out again. The caller has
    /// made `start` durable (`ConsumeQueues::delete_records`, or read it
    /// from `log-start-offsets`). Queue files wholly below it go with the
    /// next retention pass ([`ConsumeQueue::delete_files_below_start`]).
    pub(super) fn raise_log_start(&self, start: u64) {
        self.log_start.fetch_max(start, Ordering::AcqRel);
        if self.max_offset() < start {
            self.max_offset.store(start, Ordering::Release);
            self.flushed_offset.fetch_max(start, Ordering::AcqRel);
        }
        self.min_offset.fetch_max(start, Ordering::AcqRel);
    }

    /// Retention: delete the queue files that hold only units below the
    /// beginning (except the one holding the end). Returns files deleted.
    pub fn delete_files_below_start(&self) -> Result<usize> {
        self.hide_below(self.min_offset())
    }

    pub(super) fn file_for(&self, unit: u64) -> Option<Arc<QueueFile>> {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        let idx = files.partition_point(|f| f.first_unit <= unit);
        let f = files.get(idx.checked_sub(1)?)?;
        (unit < f.first_unit + f.units()).then(|| Arc::clone(f))
    }

    fn file_for_write(&self, unit: u64) -> Result<Arc<QueueFile>> {
        if let Some(f) = self.file_for(unit) {
            return Ok(f);
        }
        let first_unit = unit / self.units_per_file * self.units_per_file;
        // No fsync here: this is the dispatcher's path (see `QueueFile::create`).
        self.names.create_dir_all(&self.dir)?;
        let f = Arc::new(QueueFile::create(
            &self.dir,
            first_unit,
            self.units_per_file,
            &self.names,
        )?);
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        let idx = files.partition_point(|x| x.first_unit < first_unit);
        files.insert(idx, Arc::clone(&f));
        Ok(f)
    }

    /// Record that queue offset `offset` is `unit` and wake readers.
    /// Idempotent: replaying a unit that is already there does nothing.
    /// Called by the dispatcher only.
    pub fn put(&self, offset: QueueOffset, unit: Unit, timestamp_ms: i64) -> Result<PutOutcome> {
        let out = self.put_cached(offset, unit, timestamp_ms, &mut QueueCursor::default())?;
        self.notify_readers();
        Ok(out)
    }

    /// [`ConsumeQueue::put`] for a run of puts: the cursor keeps the file
    /// of the previous put, and readers are not woken: the caller calls
    /// [`ConsumeQueue::notify_readers`] once after the run. A reader that
    /// checks `max_offset` after registering its listener (as
    /// [`ConsumeQueue::listen`] asks) still sees every unit at once; one
    /// already waiting wakes at the end of the run. `timestamp_ms` is the
    /// record's (the time index's).
    pub fn put_cached(
        &self,
        offset: QueueOffset,
        unit: Unit,
        timestamp_ms: i64,
        cursor: &mut QueueCursor,
    ) -> Result<PutOutcome> {
        let offset = offset.get();
        debug_assert!(unit.size > 0);
        if offset < self.log_start() {
            // Deleted by a client (a replay from before the move): never
            // served again, and its queue file may be gone.
            return Ok(PutOutcome::BelowLogStart);
        }
        let max = self.max_offset();
        let encoded = unit.encode();
        if offset < max {
            let f = self.file_for_write(offset)?;
            match f.decode(offset)? {
                Some(existing) if existing == unit => return Ok(PutOutcome::AlreadyPresent),
                other => {
                    // The CommitLog is the source of truth; recovery has
                    // dropped units past its end, so this means the queue
                    // file was damaged. Repair it and say so.
                    tracing::warn!(tp = %self.tp, offset, ?other, new = ?unit, "consume queue unit disagreed with the commit log; rewritten");
                    f.write(offset, &encoded)?;
                    // Below the end, so possibly below what the next flush
                    // starts at: move that back, or the repair never
                    // reaches the disk and a power loss brings the damage
                    // back.
                    self.flushed_offset.fetch_min(offset, Ordering::AcqRel);
                    if offset < self.min_offset() {
                        self.min_offset.store(offset, Ordering::Release);
                    }
                    // Its interval's entry (and later ones) may be stale.
                    self.time.truncate_to(offset)?;
                    return Ok(PutOutcome::Written);
                }
            }
        }
        if offset > max {
            let empty = max == self.min_offset();
            if !empty {
                tracing::warn!(tp = %self.tp, expected = max, got = offset, "gap in queue offsets; the missing units read as holes");
            }
        }
        let f = match cursor.file.take() {
            Some(f) if offset >= f.first_unit && offset < f.first_unit + f.units() => f,
            _ => self.file_for_write(offset)?,
        };
        f.write(offset, &encoded)?;
        cursor.file = Some(f);
        if offset >= max && max == self.min_offset() {
            // First unit of an empty queue (possibly not at 0, after retention).
            self.min_offset.store(offset, Ordering::Release);
        }
        self.max_offset.store(offset + 1, Ordering::Release);
        self.time.note(offset, timestamp_ms)?;
        Ok(PutOutcome::Written)
    }

    /// Wake the readers waiting for new units.
    pub fn notify_readers(&self) {
        self.new_records.notify(usize::MAX);
    }

    /// The unit at `offset`, or `None` outside `[min, max)` or at a hole.
    pub fn get(&self, offset: u64) -> Result<Option<Unit>> {
        self.get_cached(offset, &mut QueueCursor::default())
    }

    /// [`ConsumeQueue::get`] for a run of reads: the cursor keeps the file
    /// of the previous read, so reading a range takes the file-list lock
    /// once per file, not once per unit.
    pub fn get_cached(&self, offset: u64, cursor: &mut QueueCursor) -> Result<Option<Unit>> {
        if offset < self.min_offset() || offset >= self.max_offset() {
            return Ok(None);
        }
        let hit = cursor
            .file
            .as_ref()
            .is_some_and(|f| offset >= f.first_unit && offset < f.first_unit + f.units());
        if !hit {
            cursor.file = self.file_for(offset);
        }
        match &cursor.file {
            Some(f) => f.decode(offset),
            None => Ok(None),
        }
    }

    /// Queue files this partition has now.
    pub fn file_count(&self) -> usize {
        self.files.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// A listener that fires when a unit is added. Register it, re-check
    /// `max_offset`, then wait: no wake-up can be missed in between.
    pub fn listen(&self) -> EventListener {
        self.new_records.listen()
    }

    /// Wake everything waiting on this queue (shutdown, deletion).
    pub fn wake_all(&self) {
        self.new_records.notify(usize::MAX);
    }

    /// msync units written since the last flush, then sync the time
    /// index's entries: a checkpoint after this counts no entry whose units
    /// could still be lost (one that writeback wrote early goes with its
    /// units in recovery, `TimeIndex::truncate_to`).
    pub fn flush(&self) -> Result<()> {
        let max = self.max_offset();
        let from = self.flushed_offset.load(Ordering::Acquire);
        if from >= max {
            return self.time.flush();
        }
        let files = self.files.read().unwrap_or_else(|e| e.into_inner()).clone();
        for f in files
            .iter()
            .filter(|f| f.first_unit + f.units() > from && f.first_unit < max)
        {
            let start = from.max(f.first_unit) - f.first_unit;
            let end = max.min(f.first_unit + f.units()) - f.first_unit;
            f.flush_units(start, end)?;
        }
        self.flushed_offset.store(max, Ordering::Release);
        self.time.flush()
    }

    /// Retention: move the beginning up to the first unit that points at or
    /// past `commitlog_min` (the CommitLog's new first byte), then delete
    /// queue files that hold only units below it. The file holding the end
    /// is always kept, so a partition's offsets continue after a restart
    /// even when all its records are gone. Returns files deleted.
    pub fn advance_min(&self, commitlog_min: u64) -> Result<usize> {
        self.hide_below(self.first_offset_at_or_past(commitlog_min))
    }

    /// The first queue offset (from the beginning on) whose unit points at
    /// or past CommitLog position `commitlog_min`; the end if none does.
    pub fn first_offset_at_or_past(&self, commitlog_min: u64) -> u64 {
        let mut lo = self.min_offset();
        // Units point forward in the log as offsets grow: binary search for
        // the first unit at or past `commitlog_min`, treating holes as below.
        let mut hi = self.max_offset();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            // An invalid unit counts as a hole: it is reported when read,
            // and must not stop retention (or start-up, which runs this).
            let below = match self.file_for(mid).map(|f| f.decode(mid)) {
                Some(Ok(Some(u))) => u.physical_offset < commitlog_min,
                _ => true,
            };
            if below {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Move the beginning up to queue offset `offset` (if it is below) and
    /// delete the files that hold only units below the beginning, except
    /// the one holding the end. Returns files deleted.
    pub(super) fn hide_below(&self, offset: u64) -> Result<usize> {
        let offset = offset.min(self.max_offset());
        if offset > self.min_offset() {
            self.min_offset.store(offset, Ordering::Release);
        }
        let min = self.min_offset();
        let mut deleted = 0;
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        while files.len() > 1 && files[0].first_unit + files[0].units() <= min {
            let f = files.remove(0);
            std::fs::remove_file(&f.path).at(&f.path)?;
            deleted += 1;
        }
        let first_kept = files.first().map(|f| f.first_unit);
        // The time index's lock comes before the file list (its rebuild
        // reads units under it): never taken while the list is held.
        drop(files);
        if let Some(first) = first_kept {
            self.time.remove_before(first)?;
        }
        Ok(deleted)
    }

    /// `unit` (at `offset`) if it points past the unit before it, as every
    /// unit does (a partition's records are dispatched in log order). A
    /// unit torn across a page boundary by a power loss can decode with
    /// zeros for the high bytes of its position; this catches it.
    fn check_order(&self, offset: u64, unit: Option<Unit>) -> Result<Option<Unit>> {
        let (Some(u), Some(before)) = (unit, offset.checked_sub(1)) else {
            return Ok(unit);
        };
        if before < self.min_offset() {
            return Ok(unit);
        }
        match self.file_for(before).map(|f| f.decode(before)) {
            Some(Ok(Some(prev))) if prev.physical_offset >= u.physical_offset => {
                Err(StoreError::corruption(
                    &self.dir,
                    offset * UNIT_LEN as u64,
                    CorruptionKind::UnitOrder {
                        physical: u.physical_offset,
                        previous: prev.physical_offset,
                    },
                ))
            }
            _ => Ok(unit),
        }
    }

    /// The first queue offset whose record's timestamp is at least
    /// `timestamp_ms` (Kafka's ListOffsets rule), or the end if none is:
    /// through the time index, reading at most about two intervals of
    /// records while the index is complete (see `time_index`).
    pub fn offset_for_timestamp(&self, timestamp_ms: i64, log: &CommitLog) -> Result<u64> {
        let mut times = QueueTimes::new(self, log);
        let mut from = self.min_offset();
        loop {
            let end = self.max_offset();
            if from >= end {
                return Ok(end);
            }
            match self.time.next_step(from, timestamp_ms, end) {
                Step::Done => return Ok(end),
                Step::Scan { from: lo, to } => {
                    let lo = lo.max(from);
                    let to = to.min(end);
                    if let Some(found) =
                        time_index::first_at_or_after(&mut times, lo, to, timestamp_ms)?
                    {
                        return Ok(found);
                    }
                    // An interval's maximum reached T but its record is
                    // gone (retention since): go on after it.
                    from = to.max(from + 1);
                }
            }
        }
    }

    /// The first record with the largest timestamp, as (queue offset,
    /// timestamp), or `None` when the queue holds no record (ListOffsets
    /// -3, KIP-734): the maximum through the time index, then the lookup
    /// of that timestamp, which finds the first record reaching it.
    pub fn max_timestamp_record(&self, log: &CommitLog) -> Result<Option<(u64, i64)>> {
        let mut times = QueueTimes::new(self, log);
        let (from, end) = (self.min_offset(), self.max_offset());
        let Some(max_ts) = self.time.max_timestamp(from, end, &mut times)? else {
            return Ok(None);
        };
        let offset = self.offset_for_timestamp(max_ts, log)?;
        Ok((offset < self.max_offset()).then_some((offset, max_ts)))
    }

    /// Whether the time index must be brought up to the queue
    /// ([`ConsumeQueue::catch_up_time_index`]) before it follows new units.
    pub fn time_index_needs_catch_up(&self) -> bool {
        self.time.needs_catch_up()
    }

    /// Build the time index's missing entries from the queue and `log`
    /// (recovery, a missing or damaged time file, a repaired unit). Returns
    /// the entries built. Called by the dispatcher's thread, or before it
    /// runs.
    pub fn catch_up_time_index(&self, log: &CommitLog) -> Result<u64> {
        let queue_files: Vec<u64> = self
            .files
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|f| f.first_unit)
            .collect();
        let end = self.max_offset();
        let built = self
            .time
            .catch_up(&queue_files, end, &mut QueueTimes::new(self, log))?;
        if built > 0 {
            tracing::info!(tp = %self.tp, entries = built, "rebuilt time index entries from the consume queue and the commit log");
        }
        Ok(built)
    }

    /// Time index entries held (tests).
    #[cfg(test)]
    pub(crate) fn time_index_entries(&self) -> usize {
        self.time.entries()
    }

    /// Whether the topic was deleted (the queue is no longer in the map).
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// Deletion: forget the files (each closes when its last reader lets
    /// go of it) and wake waiting readers. The caller removes the files.
    pub(super) fn close_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
        self.files
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.wake_all();
    }

    /// Recovery: drop every unit at the tail that points at or past
    /// `physical_end` (the CommitLog's valid end), or that is invalid: a
    /// unit torn by a crash is rebuilt from the CommitLog, not a reason to
    /// refuse to start. Runs before any reader exists.
    ///
    /// The dropped units are zeroed durably (msynced, and removed files'
    /// directory fsynced). Zeroed in the page cache only, a dropped unit
    /// would come back after the next power loss, pointing at a position
    /// the log has since reused for other records, if nothing rewrote its
    /// offset before that: the queue's later flushes start at its end.
    pub(crate) fn truncate_from_physical(&self, physical_end: u64) -> Result<Truncated> {
        let min = self.min_offset();
        let old_max = self.max_offset();
        let mut max = old_max;
        let mut out = Truncated::default();
        let mut torn = false;
        while max > min {
            let Some(f) = self.file_for(max - 1) else {
                break;
            };
            match f.decode(max - 1).and_then(|u| self.check_order(max - 1, u)) {
                Ok(Some(u)) if u.physical_offset < physical_end => {
                    if torn {
                        out.replay_from = Some(u.physical_offset + u64::from(u.size));
                    }
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(tp = %self.tp, offset = max - 1, error = %e, "invalid consume queue unit; truncating the queue before it and rebuilding from the commit log");
                    torn = true;
                    out.replay_from = Some(0);
                }
            }
            f.write(max - 1, &[0u8; UNIT_LEN])?;
            max -= 1;
            out.dropped += 1;
        }
        self.max_offset.store(max, Ordering::Release);
        self.flushed_offset.store(
            self.flushed_offset.load(Ordering::Acquire).min(max),
            Ordering::Release,
        );
        if max == min {
            self.min_offset.store(max, Ordering::Release);
        }
        // Entries of intervals the queue no longer holds whole go too.
        self.time.truncate_to(max)?;
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        for f in files
            .iter()
            .filter(|f| f.first_unit < old_max && f.first_unit + f.units() > max)
        {
            let start = max.max(f.first_unit) - f.first_unit;
            let end = old_max.min(f.first_unit + f.units()) - f.first_unit;
            f.flush_units(start, end)?;
        }
        // Files wholly past the end hold nothing now.
        let mut removed = false;
        while files
            .last()
            .is_some_and(|f| f.first_unit >= max && f.first_unit > 0)
        {
            if let Some(f) = files.pop() {
                std::fs::remove_file(&f.path).at(&f.path)?;
                removed = true;
            }
        }
        if removed {
            fs_util::fsync_dir(&self.dir)?;
        }
        Ok(out)
    }
}

/// A queue's records' timestamps, read through its units from the log.
struct QueueTimes<'a> {
    queue: &'a ConsumeQueue,
    log: &'a CommitLog,
    cursor: QueueCursor,
    cache: ReadCache,
}

impl<'a> QueueTimes<'a> {
    fn new(queue: &'a ConsumeQueue, log: &'a CommitLog) -> QueueTimes<'a> {
        QueueTimes {
            queue,
            log,
            cursor: QueueCursor::default(),
            cache: ReadCache::default(),
        }
    }
}

impl RecordTimes for QueueTimes<'_> {
    fn timestamp_at(&mut self, offset: u64) -> Result<Option<i64>> {
        #[cfg(test)]
        time_index::RECORDS_READ.with(|n| n.set(n.get() + 1));
        let Some(unit) = self.queue.get_cached(offset, &mut self.cursor)? else {
            return Ok(None);
        };
        let Some(record) =
            self.log
                .read_unit_cached(unit.physical_offset, unit.size, &mut self.cache)?
        else {
            return Ok(None);
        };
        if record.queue_offset().get() != offset
            || record.partition() != self.queue.tp.partition()
            || record.topic_bytes() != self.queue.tp.topic().as_bytes()
        {
            // The queue and the log disagree: damage, which a fetch of the
            // offset reports; no answer is built on it.
            return Err(StoreError::inconsistent(
                &self.queue.dir,
                offset * UNIT_LEN as u64,
                format!(
                    "queue unit points at {}/{}@{}",
                    record.topic(),
                    record.partition(),
                    record.queue_offset().get()
                ),
            ));
        }
        Ok(Some(record.timestamp_ms()))
    }
}
