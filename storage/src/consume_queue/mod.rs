//! ConsumeQueue: per topic-partition index from queue offset to the record's
//! place in the CommitLog.
//!
//! Invariants:
//! - Only the dispatcher writes (one thread), and units below `max_offset`
//!   never change once published, except by recovery before readers exist.
//! - `max_offset` (the next queue offset to be written) is published with
//!   `Release` after the unit is written; readers load it with `Acquire`
//!   and read only units below it.
//! - Units of queue offsets below `min_offset` point at CommitLog bytes that
//!   retention has deleted (or were never written).

pub mod format;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use event_listener::{Event, EventListener};
use memmap2::{MmapOptions, MmapRaw};

pub use self::format::Unit;
use self::format::UNIT_LEN;
use crate::error::{IoContext, Result, StoreError};
use crate::fs_util;
use crate::types::{validate_topic_name, TopicPartition};

struct QueueFile {
    first_unit: u64,
    path: PathBuf,
    map: MmapRaw,
    _file: std::fs::File,
}

impl QueueFile {
    fn create_or_open(path: PathBuf, first_unit: u64, units: u64) -> Result<QueueFile> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .at(&path)?;
        let want = units * UNIT_LEN as u64;
        let len = file.metadata().at(&path)?.len();
        if len != want {
            if len != 0 {
                return Err(StoreError::corruption(
                    &path,
                    0,
                    format!("queue file is {len} bytes, expected {want} (consume_queue_units_per_file changed?)"),
                ));
            }
            file.set_len(want).at(&path)?;
        }
        let map = MmapOptions::new()
            .len(want as usize)
            .map_raw(&file)
            .at(&path)?;
        Ok(QueueFile {
            first_unit,
            path,
            map,
            _file: file,
        })
    }

    fn units(&self) -> u64 {
        (self.map.len() / UNIT_LEN) as u64
    }

    fn raw(&self, unit: u64) -> [u8; UNIT_LEN] {
        let at = (unit - self.first_unit) as usize * UNIT_LEN;
        assert!(at + UNIT_LEN <= self.map.len());
        let mut b = [0u8; UNIT_LEN];
        // SAFETY: in bounds (asserted). Units below `max_offset` are
        // immutable; the dispatcher is the only writer of the rest.
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.as_ptr().add(at), b.as_mut_ptr(), UNIT_LEN)
        };
        b
    }

    fn write(&self, unit: u64, bytes: &[u8; UNIT_LEN]) {
        let at = (unit - self.first_unit) as usize * UNIT_LEN;
        assert!(at + UNIT_LEN <= self.map.len());
        // SAFETY: in bounds; only the dispatcher writes, and this unit is not
        // yet published to readers (or recovery runs with no readers).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.map.as_mut_ptr().add(at), UNIT_LEN)
        };
    }

    /// Make the units `[start, end)` (relative to the file) durable.
    ///
    /// The whole pages among them are unmapped from this process first
    /// (`MADV_DONTNEED`; their dirty state moves to the page cache, nothing
    /// is lost). Writeback must write-protect every page still mapped
    /// writable, and it does that page by page, each with a TLB-shootdown
    /// interrupt to the other cores: on a VM that was most of the flush
    /// thread's time, and the interrupted cores paid too. Unmapping flushes
    /// the TLB once for the whole range, and writeback then finds nothing
    /// mapped. Readers refault a page from the page cache on their next read
    /// (read-only, a minor fault). The page holding `end` stays mapped: the
    /// dispatcher is still filling it.
    fn flush_units(&self, start: u64, end: u64) -> Result<()> {
        let from = start as usize * UNIT_LEN;
        let to = end as usize * UNIT_LEN;
        #[cfg(target_os = "linux")]
        {
            let page = fs_util::page_size();
            let (zap_from, zap_to) = (from / page * page, to / page * page);
            if zap_to > zap_from {
                // SAFETY: a page-aligned range inside our own mapping. No
                // unit in it changes while we do this: they are below the
                // published end, and the writer only appends past it.
                let rc = unsafe {
                    libc::madvise(
                        self.map.as_mut_ptr().add(zap_from).cast(),
                        zap_to - zap_from,
                        libc::MADV_DONTNEED,
                    )
                };
                if rc != 0 {
                    // Only slower: writeback write-protects page by page.
                    tracing::debug!(path = %self.path.display(), error = %std::io::Error::last_os_error(), "could not unmap flushed queue pages");
                }
            }
        }
        crate::durability::sync_map_range(&self._file, &self.path, from, to - from, || {
            self.map.flush_range(from, to - from)
        })
        .at(&self.path)
    }

    fn decode(&self, unit: u64) -> Result<Option<Unit>> {
        Unit::decode(&self.raw(unit)).map_err(|why| {
            StoreError::corruption(&self.path, (unit - self.first_unit) * UNIT_LEN as u64, why)
        })
    }
}

/// Where a sequential reader of a queue is: the file it read last.
#[derive(Default)]
pub struct QueueCursor {
    file: Option<Arc<QueueFile>>,
}

/// The queue of one topic-partition.
pub struct ConsumeQueue {
    tp: TopicPartition,
    dir: PathBuf,
    units_per_file: u64,
    files: RwLock<Vec<Arc<QueueFile>>>,
    min_offset: AtomicU64,
    max_offset: AtomicU64,
    /// Units below this are on disk.
    flushed_offset: AtomicU64,
    new_records: Event,
}

/// What `put` did with a unit.
#[derive(Debug, PartialEq, Eq)]
pub enum PutOutcome {
    Written,
    /// The same unit was already there (a replay after a crash).
    AlreadyPresent,
}

impl ConsumeQueue {
    fn empty(tp: TopicPartition, dir: PathBuf, units_per_file: u64) -> ConsumeQueue {
        ConsumeQueue {
            tp,
            dir,
            units_per_file,
            files: RwLock::new(Vec::new()),
            min_offset: AtomicU64::new(0),
            max_offset: AtomicU64::new(0),
            flushed_offset: AtomicU64::new(0),
            new_records: Event::new(),
        }
    }

    /// Load a partition's queue files from `dir`.
    fn load(tp: TopicPartition, dir: PathBuf, units_per_file: u64) -> Result<ConsumeQueue> {
        let q = Self::empty(tp, dir, units_per_file);
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&q.dir).at(&q.dir)? {
            let entry = entry.at(&q.dir)?;
            let name = entry.file_name();
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
                    format!("queue file name {byte_offset} is not a multiple of the file size {file_bytes}"),
                ));
            }
            names.push(byte_offset / UNIT_LEN as u64);
        }
        names.sort_unstable();
        let mut files = Vec::with_capacity(names.len());
        for first_unit in names {
            let path = q
                .dir
                .join(fs_util::offset_file_name(first_unit * UNIT_LEN as u64));
            files.push(Arc::new(QueueFile::create_or_open(
                path,
                first_unit,
                units_per_file,
            )?));
        }
        // max: one past the last non-empty unit; min: the first non-empty one.
        let mut max = files.first().map_or(0, |f| f.first_unit);
        'outer: for f in files.iter().rev() {
            for u in (f.first_unit..f.first_unit + f.units()).rev() {
                if f.decode(u)?.is_some() {
                    max = u + 1;
                    break 'outer;
                }
            }
        }
        let mut min = max;
        'outer2: for f in files.iter() {
            for u in f.first_unit..(f.first_unit + f.units()).min(max) {
                if f.decode(u)?.is_some() {
                    min = u;
                    break 'outer2;
                }
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

    fn file_for(&self, unit: u64) -> Option<Arc<QueueFile>> {
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
        fs_util::create_dir_durable(&self.dir)?;
        let path = self
            .dir
            .join(fs_util::offset_file_name(first_unit * UNIT_LEN as u64));
        let f = Arc::new(QueueFile::create_or_open(
            path,
            first_unit,
            self.units_per_file,
        )?);
        fs_util::fsync_dir(&self.dir)?;
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        let idx = files.partition_point(|x| x.first_unit < first_unit);
        files.insert(idx, Arc::clone(&f));
        Ok(f)
    }

    /// Record that queue offset `offset` is `unit` and wake readers.
    /// Idempotent: replaying a unit that is already there does nothing.
    /// Called by the dispatcher only.
    pub fn put(&self, offset: u64, unit: Unit) -> Result<PutOutcome> {
        let out = self.put_cached(offset, unit, &mut QueueCursor::default())?;
        self.notify_readers();
        Ok(out)
    }

    /// [`ConsumeQueue::put`] for a run of puts: the cursor keeps the file
    /// of the previous put, and readers are not woken: the caller calls
    /// [`ConsumeQueue::notify_readers`] once after the run. A reader that
    /// checks `max_offset` after registering its listener (as
    /// [`ConsumeQueue::listen`] asks) still sees every unit at once; one
    /// already waiting wakes at the end of the run.
    pub fn put_cached(
        &self,
        offset: u64,
        unit: Unit,
        cursor: &mut QueueCursor,
    ) -> Result<PutOutcome> {
        debug_assert!(unit.size > 0);
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
                    f.write(offset, &encoded);
                    if offset < self.min_offset() {
                        self.min_offset.store(offset, Ordering::Release);
                    }
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
        f.write(offset, &encoded);
        cursor.file = Some(f);
        if offset >= max && max == self.min_offset() {
            // First unit of an empty queue (possibly not at 0, after retention).
            self.min_offset.store(offset, Ordering::Release);
        }
        self.max_offset.store(offset + 1, Ordering::Release);
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

    /// msync units written since the last flush.
    pub fn flush(&self) -> Result<()> {
        let max = self.max_offset();
        let from = self.flushed_offset.load(Ordering::Acquire);
        if from >= max {
            return Ok(());
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
        Ok(())
    }

    /// Retention: move the beginning up to the first unit that points at or
    /// past `commitlog_min` (the CommitLog's new first byte), then delete
    /// queue files that hold only units below it. The file holding the end
    /// is always kept, so a partition's offsets continue after a restart
    /// even when all its records are gone. Returns files deleted.
    pub fn advance_min(&self, commitlog_min: u64) -> Result<usize> {
        let mut lo = self.min_offset();
        let max = self.max_offset();
        // Units point forward in the log as offsets grow: binary search for
        // the first unit at or past `commitlog_min`, treating holes as below.
        let mut hi = max;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let below = match self.file_for(mid) {
                Some(f) => match f.decode(mid)? {
                    Some(u) => u.physical_offset < commitlog_min,
                    None => true,
                },
                None => true,
            };
            if below {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo > self.min_offset() {
            self.min_offset.store(lo, Ordering::Release);
        }
        let min = self.min_offset();
        let mut deleted = 0;
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        while files.len() > 1 && files[0].first_unit + files[0].units() <= min {
            let f = files.remove(0);
            std::fs::remove_file(&f.path).at(&f.path)?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Recovery: drop every unit that points at or past `physical_end` (the
    /// CommitLog's valid end). Runs before any reader exists.
    pub(crate) fn truncate_from_physical(&self, physical_end: u64) -> Result<usize> {
        let min = self.min_offset();
        let mut max = self.max_offset();
        let mut dropped = 0;
        while max > min {
            let Some(f) = self.file_for(max - 1) else {
                break;
            };
            match f.decode(max - 1)? {
                Some(u) if u.physical_offset < physical_end => break,
                _ => {
                    f.write(max - 1, &[0u8; UNIT_LEN]);
                    max -= 1;
                    dropped += 1;
                }
            }
        }
        self.max_offset.store(max, Ordering::Release);
        self.flushed_offset.store(
            self.flushed_offset.load(Ordering::Acquire).min(max),
            Ordering::Release,
        );
        if max == min {
            self.min_offset.store(max, Ordering::Release);
        }
        // Files wholly past the end hold nothing now.
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        while files
            .last()
            .is_some_and(|f| f.first_unit >= max && f.first_unit > 0)
        {
            if let Some(f) = files.pop() {
                std::fs::remove_file(&f.path).at(&f.path)?;
            }
        }
        Ok(dropped)
    }
}

/// Queues of one topic, by partition.
type TopicQueues = HashMap<u32, Arc<ConsumeQueue>>;

/// Every ConsumeQueue of the store, by topic and partition.
pub struct ConsumeQueues {
    root: PathBuf,
    units_per_file: u64,
    queues: RwLock<HashMap<Box<str>, TopicQueues>>,
}

impl ConsumeQueues {
    /// Load every queue under `root` (`<root>/<topic>/<partition>/`).
    pub fn load(root: &Path, units_per_file: u64) -> Result<ConsumeQueues> {
        fs_util::create_dir_durable(root)?;
        let mut queues: HashMap<Box<str>, TopicQueues> = HashMap::new();
        for topic_entry in std::fs::read_dir(root).at(root)? {
            let topic_entry = topic_entry.at(root)?;
            let Some(topic) = topic_entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if validate_topic_name(&topic).is_err() || !topic_entry.path().is_dir() {
                tracing::warn!(path = %topic_entry.path().display(), "ignoring a stray entry in consumequeue/");
                continue;
            }
            for part_entry in std::fs::read_dir(topic_entry.path()).at(&topic_entry.path())? {
                let part_entry = part_entry.at(&topic_entry.path())?;
                let name = part_entry.file_name();
                let Some(partition) = name
                    .to_str()
                    .filter(|n| {
                        !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit())
                    })
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    tracing::warn!(path = %part_entry.path().display(), "ignoring a stray entry in a topic's queue directory");
                    continue;
                };
                let tp = TopicPartition::new(&topic, partition)?;
                let q = ConsumeQueue::load(tp, part_entry.path(), units_per_file)?;
                queues
                    .entry(topic.as_str().into())
                    .or_default()
                    .insert(partition, Arc::new(q));
            }
        }
        Ok(ConsumeQueues {
            root: root.to_path_buf(),
            units_per_file,
            queues: RwLock::new(queues),
        })
    }

    pub fn get(&self, topic: &str, partition: u32) -> Option<Arc<ConsumeQueue>> {
        let q = self.queues.read().unwrap_or_else(|e| e.into_inner());
        q.get(topic)?.get(&partition).cloned()
    }

    /// The queue for `tp`, created (empty, no files yet) if new.
    pub fn get_or_create(&self, topic: &str, partition: u32) -> Result<Arc<ConsumeQueue>> {
        if let Some(q) = self.get(topic, partition) {
            return Ok(q);
        }
        let tp = TopicPartition::new(topic, partition)?;
        let mut all = self.queues.write().unwrap_or_else(|e| e.into_inner());
        let parts = all.entry(topic.into()).or_default();
        let q = parts.entry(partition).or_insert_with(|| {
            let dir = self.root.join(topic).join(partition.to_string());
            Arc::new(ConsumeQueue::empty(tp, dir, self.units_per_file))
        });
        Ok(Arc::clone(q))
    }

    pub fn all(&self) -> Vec<Arc<ConsumeQueue>> {
        let q = self.queues.read().unwrap_or_else(|e| e.into_inner());
        q.values().flat_map(|p| p.values().cloned()).collect()
    }

    pub fn flush(&self) -> Result<()> {
        for q in self.all() {
            q.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(p: u64) -> Unit {
        Unit {
            physical_offset: p,
            size: 100,
            key_hash: p ^ 7,
        }
    }

    #[test]
    fn put_get_across_files_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let qs = ConsumeQueues::load(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 1).unwrap();
        for i in 0..10 {
            assert_eq!(q.put(i, unit(i * 100)).unwrap(), PutOutcome::Written);
        }
        assert_eq!((q.min_offset(), q.max_offset()), (0, 10));
        assert_eq!(q.get(9).unwrap(), Some(unit(900)));
        assert_eq!(q.get(10).unwrap(), None);
        qs.flush().unwrap();
        // 10 units at 4 per file: three files named by byte offset.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("t/1"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 3);
        drop(q);
        drop(qs);
        let qs = ConsumeQueues::load(dir.path(), 4).unwrap();
        let q = qs.get("t", 1).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (0, 10));
        for i in 0..10 {
            assert_eq!(q.get(i).unwrap(), Some(unit(i * 100)));
        }
    }

    #[test]
    fn flushing_keeps_units_written_before_and_after_it() {
        // Flushes unmap whole flushed pages (flush_units); units in them,
        // and units the writer adds to the page it is still filling, must
        // read back the same, now and after a reopen.
        let dir = tempfile::tempdir().unwrap();
        let per_file = 2 * 4096;
        let qs = ConsumeQueues::load(dir.path(), per_file).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        let mut cursor = QueueCursor::default();
        let mut next = 0u64;
        // Flush points inside pages, on page ends, and across a file end.
        for flush_at in [100u64, 204, 205, 1000, 4096, 8191, 8192, 9000, 12_000] {
            while next < flush_at {
                q.put_cached(next, unit(next * 100), &mut cursor).unwrap();
                next += 1;
            }
            qs.flush().unwrap();
            for i in (0..next).step_by(97).chain([next - 1]) {
                assert_eq!(
                    q.get(i).unwrap(),
                    Some(unit(i * 100)),
                    "unit {i} after a flush at {flush_at}"
                );
            }
        }
        drop(q);
        drop(qs);
        let qs = ConsumeQueues::load(dir.path(), per_file).unwrap();
        let q = qs.get("t", 0).unwrap();
        assert_eq!(q.max_offset(), next);
        for i in 0..next {
            assert_eq!(
                q.get(i).unwrap(),
                Some(unit(i * 100)),
                "unit {i} after reopening"
            );
        }
    }

    #[test]
    fn replay_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let qs = ConsumeQueues::load(dir.path(), 8).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        q.put(0, unit(0)).unwrap();
        q.put(1, unit(100)).unwrap();
        assert_eq!(q.put(0, unit(0)).unwrap(), PutOutcome::AlreadyPresent);
        assert_eq!(q.put(1, unit(100)).unwrap(), PutOutcome::AlreadyPresent);
        assert_eq!(q.max_offset(), 2);
    }

    #[test]
    fn truncate_drops_units_past_the_log_end() {
        let dir = tempfile::tempdir().unwrap();
        let qs = ConsumeQueues::load(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..10 {
            q.put(i, unit(i * 100)).unwrap();
        }
        assert_eq!(q.truncate_from_physical(450).unwrap(), 5);
        assert_eq!(q.max_offset(), 5);
        assert_eq!(q.get(5).unwrap(), None);
        // The file holding units 8..12 is gone; reload agrees.
        drop(q);
        drop(qs);
        let qs = ConsumeQueues::load(dir.path(), 4).unwrap();
        let q = qs.get("t", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (0, 5));
        q.put(5, unit(777)).unwrap();
        assert_eq!(q.get(5).unwrap(), Some(unit(777)));
    }

    #[test]
    fn queue_starting_past_zero() {
        let dir = tempfile::tempdir().unwrap();
        let qs = ConsumeQueues::load(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        q.put(6, unit(600)).unwrap();
        q.put(7, unit(700)).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (6, 8));
        drop(q);
        drop(qs);
        let qs = ConsumeQueues::load(dir.path(), 4).unwrap();
        let q = qs.get("t", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (6, 8));
        assert_eq!(q.get(5).unwrap(), None);
    }

    #[test]
    fn advance_min_moves_the_beginning_and_deletes_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let qs = ConsumeQueues::load(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..10 {
            q.put(i, unit(i * 100)).unwrap();
        }
        // The log now starts at 550: units 0..=5 point below it.
        assert_eq!(q.advance_min(550).unwrap(), 1);
        assert_eq!((q.min_offset(), q.max_offset()), (6, 10));
        assert_eq!(q.get(5).unwrap(), None);
        assert_eq!(q.get(6).unwrap(), Some(unit(600)));
        // Everything gone: the last file stays, the end is kept.
        assert_eq!(q.advance_min(10_000).unwrap(), 1);
        assert_eq!((q.min_offset(), q.max_offset()), (10, 10));
        drop(q);
        drop(qs);
        let qs = ConsumeQueues::load(dir.path(), 4).unwrap();
        let q = qs.get("t", 0).unwrap();
        q.advance_min(10_000).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (10, 10));
        q.put(10, unit(20_000)).unwrap();
        assert_eq!(q.get(10).unwrap(), Some(unit(20_000)));
    }

    #[test]
    fn wrong_file_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let qs = ConsumeQueues::load(dir.path(), 4).unwrap();
        qs.get_or_create("t", 0).unwrap().put(0, unit(0)).unwrap();
        drop(qs);
        assert!(ConsumeQueues::load(dir.path(), 8).is_err());
    }

    #[test]
    fn stray_directories_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bad name/0")).unwrap();
        std::fs::create_dir_all(dir.path().join("t/not-a-number")).unwrap();
        let qs = ConsumeQueues::load(dir.path(), 4).unwrap();
        assert!(qs.all().is_empty());
    }
}
