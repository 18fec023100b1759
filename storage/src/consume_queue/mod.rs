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
//!   retention has deleted (or were never written), or belong to a deleted
//!   incarnation of the topic. `min_offset` is never below the queue's
//!   log start offset (`log_start`, durable in `log-start-offsets`:
//!   [`log_start`]), and no unit below the log start is written again.
//! - Opening a queue reads only its files' written ranges, with `pread`,
//!   never through the maps: a sparse 6 MB queue file holding one unit
//!   costs one page of page cache at open and nothing resident; pages are
//!   mapped in when read.
//! - A deleted topic's queues are gone from the map and from disk; its
//!   partitions' next offsets are in `deleted-partitions` ([`deleted`]), and
//!   records of the deleted incarnation (queue offset below that) are never
//!   indexed again, also not by a recovery replay.

pub mod deleted;
pub mod ends;
pub mod format;
pub mod log_start;
pub mod offset_table;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use event_listener::{Event, EventListener};
use memmap2::{MmapOptions, MmapRaw};

use self::deleted::DeletedPartitions;
use self::ends::QueueEnds;
pub use self::format::Unit;
use self::format::UNIT_LEN;
use self::log_start::LogStarts;
use crate::commit_log::{CommitLog, ReadCache, StoredRecord};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;
use crate::time_index::{self, RecordTimes, Step, TimeIndex};
use crate::types::{validate_topic_name, QueueOffset, TopicPartition};

/// A queue file being created by an older tidelog, which built new files
/// under this temporary name and synced them on the dispatcher's thread
/// (now [`QueueFile::create`] makes them in place): removed at load.
const TMP_SUFFIX: &str = ".creating";

/// Bytes read per system call when a queue file is scanned at open (about
/// 64 KiB, whole units).
const SCAN_CHUNK: u64 = UNIT_LEN as u64 * 3277;

struct QueueFile {
    first_unit: u64,
    path: PathBuf,
    map: MmapRaw,
    file: std::fs::File,
    /// Bytes of the file below this (whole pages) were written by this
    /// process's writer ([`QueueFile::write`]), so their pages are in the
    /// page cache and a store through the map faults without reading
    /// ahead. Only the dispatcher (or recovery) moves it.
    written_pages_end: AtomicU64,
}

impl QueueFile {
    /// A new, empty queue file of `units` units: created at its full size
    /// (allocated, [`fs_util::allocate`]) under its name, with no fsync (the dispatcher makes it).
    /// Its directory is noted in `names`: the queues' flush, before any
    /// checkpoint claims a unit in it, syncs its units (which makes its
    /// size durable) and then the directory ([`fs_util::PendingDirSyncs`]).
    /// A power loss before that leaves the file missing, empty, or short
    /// (a torn first page), which [`ConsumeQueue::load`] takes as the tail
    /// it is: every unit in it is past the checkpoint, and recovery
    /// dispatches those records again.
    fn create(
        dir: &Path,
        first_unit: u64,
        units: u64,
        names: &fs_util::PendingDirSyncs,
    ) -> Result<QueueFile> {
        let path = dir.join(fs_util::offset_file_name(first_unit * UNIT_LEN as u64));
        let build = || -> Result<QueueFile> {
            let file = fs_util::create_empty(&path)?;
            names.note(dir);
            // Backed, not sparse: the dispatcher writes units through the
            // map, and a store into a hole on a full disk is SIGBUS (issue
            // 35). A short disk fails here, as an error, and the file goes.
            fs_util::allocate(&file, units * UNIT_LEN as u64).at(&path)?;
            Self::map(file, path.clone(), first_unit, units)
        };
        build().inspect_err(|_| {
            let _ = std::fs::remove_file(&path);
        })
    }

    /// An existing queue file. One of the wrong size is corruption (or a
    /// changed `consume_queue_units_per_file`), except a shorter one at the
    /// queue's tail (`tail`: no later file of the queue holds a byte): a
    /// power loss leaves that of a file whose name reached the disk before
    /// its size did (made with no fsync, [`QueueFile::create`], or by an
    /// older tidelog), torn. Such a file holds no unit a checkpoint claims
    /// (the flush that syncs its units makes its size durable), so it is
    /// extended to its size and its tail left to recovery, which drops the
    /// invalid units and dispatches them again from the CommitLog. (A
    /// queue of one file whose setting grew is extended the same way, which
    /// keeps its units; with more files the names no longer fit the setting
    /// and `load` refuses them.) An empty file reads as one that was never
    /// written.
    fn open(path: PathBuf, first_unit: u64, units: u64, tail: bool) -> Result<QueueFile> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .at(&path)?;
        let want = units * UNIT_LEN as u64;
        let len = file.metadata().at(&path)?.len();
        if len != want {
            if len != 0 && !(tail && len < want) {
                return Err(StoreError::corruption(
                    &path,
                    0,
                    CorruptionKind::QueueFileLength {
                        len,
                        expected: want,
                    },
                ));
            }
            if len != 0 {
                tracing::warn!(path = %path.display(), len, expected = want, "a queue file at the queue's tail is short (made just before a power loss and torn, or consume_queue_units_per_file grew); extending it and rebuilding its tail from the commit log");
            }
            // Durable with the first msync of its units (msync writes the
            // file's size with them); until then a power loss leaves it
            // short again, and this runs again.
        }
        if tail || len != want {
            // The queue's tail takes units through the map (and a file
            // extended here may too): backed, not sparse, so a full disk
            // is an error now instead of SIGBUS at a later store.
            fs_util::allocate(&file, want).at(&path)?;
        }
        Self::map(file, path, first_unit, units)
    }

    fn map(file: std::fs::File, path: PathBuf, first_unit: u64, units: u64) -> Result<QueueFile> {
        let map = MmapOptions::new()
            .len((units * UNIT_LEN as u64) as usize)
            .map_raw(&file)
            .at(&path)?;
        Ok(QueueFile {
            first_unit,
            path,
            map,
            file,
            written_pages_end: AtomicU64::new(0),
        })
    }

    /// The first unit of the file (or, with `last`, the last) whose bytes
    /// are not all zero, as a queue offset. Reads the file's data ranges
    /// only, with `pread`: holes are skipped, and the map is not touched,
    /// so nothing becomes resident in this process.
    fn find_written_unit(&self, last: bool) -> Result<Option<u64>> {
        use std::os::unix::fs::FileExt;
        // Read exactly what is asked: readahead around a queue file's
        // first written page would fill the page cache with its holes
        // (6 MB per partition, at every open).
        let _random = ReadRandomly::new(&self.file);
        let unit = UNIT_LEN as u64;
        let len = self.map.len() as u64;
        let mut windows = Vec::new();
        for (start, end) in fs_util::data_ranges(&self.file, 0, len) {
            // Ranges are in blocks; widen them to whole units.
            let mut lo = start / unit * unit;
            let end = end.div_ceil(unit).saturating_mul(unit).min(len);
            while lo < end {
                let hi = (lo + SCAN_CHUNK).min(end);
                windows.push((lo, hi));
                lo = hi;
            }
        }
        if last {
            windows.reverse();
        }
        let mut buf = vec![0u8; SCAN_CHUNK as usize];
        let written = |(_, u): &(usize, &[u8])| u.iter().any(|&b| b != 0);
        for (lo, hi) in windows {
            let buf = &mut buf[..(hi - lo) as usize];
            self.file.read_exact_at(buf, lo).at(&self.path)?;
            let mut units = buf.chunks_exact(UNIT_LEN).enumerate();
            let found = if last {
                units.rfind(written)
            } else {
                units.find(written)
            };
            if let Some((i, _)) = found {
                return Ok(Some(self.first_unit + lo / unit + i as u64));
            }
        }
        Ok(None)
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

    /// Write `unit`'s bytes. The first write into a page goes through the
    /// page cache (`pwrite`), the rest through the map. A store into a
    /// mapped page that is not in the page cache faults, and the fault reads
    /// ahead: the file's next `read_ahead_kb` (8 MiB on the VM we run on),
    /// all hole, zero-filled into the page cache. For a new partition that
    /// was its whole 6 MB queue file, about 6 ms of memset on the
    /// dispatcher's thread for one record (1,000 new partitions: 9 s before
    /// the last was fetchable, and 6 GB of page cache of zeros). `pwrite`
    /// into a hole makes just that page; stores into it then fault without
    /// reading (the page is there). One system call per 204 units.
    fn write(&self, unit: u64, bytes: &[u8; UNIT_LEN]) -> Result<()> {
        let at = (unit - self.first_unit) as usize * UNIT_LEN;
        assert!(at + UNIT_LEN <= self.map.len());
        let end = (at + UNIT_LEN) as u64;
        if end > self.written_pages_end.load(Ordering::Relaxed) {
            use std::os::unix::fs::FileExt;
            self.file.write_all_at(bytes, at as u64).at(&self.path)?;
            let page = fs_util::page_size() as u64;
            self.written_pages_end
                .store(end.div_ceil(page) * page, Ordering::Relaxed);
            return Ok(());
        }
        // SAFETY: in bounds; only the dispatcher writes, and this unit is not
        // yet published to readers (or recovery runs with no readers).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.map.as_mut_ptr().add(at), UNIT_LEN)
        };
        Ok(())
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
        crate::durability::sync_map_range(&self.file, &self.path, from, to - from, || {
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

/// Turns readahead off for a file while it lives (`POSIX_FADV_RANDOM`),
/// back to normal when dropped. Advice only: failures change nothing but
/// speed.
struct ReadRandomly<'a>(&'a std::fs::File);

impl<'a> ReadRandomly<'a> {
    fn new(file: &'a std::fs::File) -> ReadRandomly<'a> {
        Self::advise(file, true);
        ReadRandomly(file)
    }

    fn advise(file: &std::fs::File, random: bool) {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::io::AsRawFd;
            let advice = if random {
                libc::POSIX_FADV_RANDOM
            } else {
                libc::POSIX_FADV_NORMAL
            };
            // SAFETY: plain syscall on an fd the caller owns.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, advice) };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (file, random);
    }
}

impl Drop for ReadRandomly<'_> {
    fn drop(&mut self) {
        Self::advise(self.0, false);
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
    /// The log start offset a client moved the beginning to (DeleteRecords;
    /// 0 if never), as `log-start-offsets` keeps it: `min_offset` is never
    /// below it and units below it are never written again.
    log_start: AtomicU64,
    /// Units below this are on disk.
    flushed_offset: AtomicU64,
    new_records: Event,
    /// Set when the topic is deleted: holders of this queue (the
    /// dispatcher's batch) look it up again.
    deleted: AtomicBool,
    /// Lookup by record timestamp (`time_index`), files beside the queue's.
    time: TimeIndex,
    /// The queues' directories with names not yet durable (shared by every
    /// queue of the store; synced by [`ConsumeQueues::flush`]).
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

/// A queue that ends below its end in `queue-ends`
/// ([`ConsumeQueues::find_lost`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LostQueue {
    pub tp: TopicPartition,
    /// The file that should hold the queue's next units.
    pub path: PathBuf,
    /// Where the queue ended when loaded.
    pub had: u64,
    /// Where the last checkpoint's `queue-ends` says it ended.
    pub recorded: u64,
    /// The CommitLog position from which a re-dispatch rebuilds it.
    pub replay_from: u64,
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
    fn empty(
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
    fn load(
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
    fn replay_from_after_end(&self) -> u64 {
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
    fn raise_log_start(&self, start: u64) {
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
    fn hide_below(&self, offset: u64) -> Result<usize> {
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
    fn close_deleted(&self) {
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

/// Queues of one topic, by partition.
type TopicQueues = HashMap<u32, Arc<ConsumeQueue>>;

/// The deleted partitions and the file that keeps them.
pub(crate) struct Deleted {
    path: PathBuf,
    partitions: DeletedPartitions,
}

impl Deleted {
    /// Is `record` one of a deleted incarnation (never to be indexed
    /// again)? Costs one branch while nothing was ever deleted.
    pub(crate) fn covers(&self, record: &StoredRecord) -> bool {
        !self.partitions.is_empty()
            && self.partitions.covers(
                record.topic(),
                record.partition(),
                record.queue_offset().get(),
            )
    }
}

/// The log start offsets and the file that keeps them.
struct LogStartTable {
    path: PathBuf,
    starts: LogStarts,
}

/// What [`ConsumeQueues::delete_records`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletedRecords {
    /// The partition's beginning now: the offset asked for, or the
    /// beginning it already had if that was later (the low watermark).
    LowWatermark(u64),
    /// The offset asked for is past the high watermark (the queue's end,
    /// what fetches can see): nothing changed.
    AboveHighWatermark { offset: u64, high_watermark: u64 },
}

/// Every ConsumeQueue of the store, by topic and partition.
///
/// Lock order: `deleted` before `log_starts` before `queues`. The
/// dispatcher holds `deleted` (read) while it indexes an entry, and a topic
/// deletion holds it (write) throughout, so no unit of a deleted
/// incarnation is written after the deletion began. `log_starts` is held
/// while a log start is made durable and applied, so two DeleteRecords of
/// one partition land in order.
pub struct ConsumeQueues {
    root: PathBuf,
    units_per_file: u64,
    /// Queue offsets per time index entry (`time_index::format`).
    time_interval: u32,
    deleted: RwLock<Deleted>,
    log_starts: Mutex<LogStartTable>,
    queues: RwLock<HashMap<Box<str>, TopicQueues>>,
    /// Directories that gained queue or time files, or partition or topic
    /// directories, since the last flush: made by the dispatcher with no
    /// fsync, durable by the end of the next [`ConsumeQueues::flush`].
    names: Arc<fs_util::PendingDirSyncs>,
}

impl ConsumeQueues {
    /// Load every queue under `root` (`<root>/<topic>/<partition>/`), the
    /// deleted partitions from `deleted_path` and the log start offsets
    /// from `log_start_path`. A deletion that a crash interrupted (its
    /// partitions recorded, some files left) is finished.
    pub fn load(
        root: &Path,
        deleted_path: &Path,
        log_start_path: &Path,
        units_per_file: u64,
    ) -> Result<ConsumeQueues> {
        fs_util::create_dir_durable(root)?;
        let deleted = DeletedPartitions::load(deleted_path)?;
        let log_starts = LogStarts::load(log_start_path)?;
        let time_interval = time_index::interval_records();
        let names = Arc::new(fs_util::PendingDirSyncs::default());
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
            let mut finished_deletion = false;
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
                let q = ConsumeQueue::load(
                    tp,
                    part_entry.path(),
                    units_per_file,
                    time_interval,
                    Arc::clone(&names),
                )?;
                if let Some(next) = deleted.next_offset(&topic, partition) {
                    if q.max_offset() <= next {
                        // Deleted, and nothing written since: finish it.
                        tracing::info!(path = %part_entry.path().display(), "removing the queue of a deleted topic");
                        drop(q);
                        remove_queue_dir(&part_entry.path())?;
                        finished_deletion = true;
                        continue;
                    }
                    // Written again after the deletion: only the new units
                    // count.
                    q.hide_below(next)?;
                }
                if let Some(start) = log_starts.get(&topic, partition) {
                    q.raise_log_start(start);
                }
                queues
                    .entry(topic.as_str().into())
                    .or_default()
                    .insert(partition, Arc::new(q));
            }
            if finished_deletion && !queues.contains_key(topic.as_str()) {
                remove_queue_dir(&topic_entry.path())?;
            }
        }
        Ok(ConsumeQueues {
            root: root.to_path_buf(),
            units_per_file,
            time_interval,
            deleted: RwLock::new(Deleted {
                path: deleted_path.to_path_buf(),
                partitions: deleted,
            }),
            log_starts: Mutex::new(LogStartTable {
                path: log_start_path.to_path_buf(),
                starts: log_starts,
            }),
            queues: RwLock::new(queues),
            names,
        })
    }

    pub fn get(&self, topic: &str, partition: u32) -> Option<Arc<ConsumeQueue>> {
        let q = self.queues.read().unwrap_or_else(|e| e.into_inner());
        q.get(topic)?.get(&partition).cloned()
    }

    /// The queue for `tp`, created (empty, no files yet) if new. A deleted
    /// partition's queue starts at its next offset.
    pub fn get_or_create(&self, topic: &str, partition: u32) -> Result<Arc<ConsumeQueue>> {
        if let Some(q) = self.get(topic, partition) {
            return Ok(q);
        }
        self.create(&self.deleted(), topic, partition)
    }

    /// [`ConsumeQueues::get_or_create`] for a caller that holds `deleted`.
    pub(crate) fn create(
        &self,
        deleted: &Deleted,
        topic: &str,
        partition: u32,
    ) -> Result<Arc<ConsumeQueue>> {
        if let Some(q) = self.get(topic, partition) {
            // The dispatcher asks once per partition and round: no wait on
            // the log-start mutex (a DeleteRecords' fsync) for that.
            return Ok(q);
        }
        let tp = TopicPartition::new(topic, partition)?;
        let next = deleted
            .partitions
            .next_offset(topic, partition)
            .unwrap_or(0);
        // A partition whose queue files are all gone (a crash lost them,
        // or they were never made durable) still starts at its log start.
        let log_start = self.log_starts().starts.get(topic, partition);
        let mut all = self.queues.write().unwrap_or_else(|e| e.into_inner());
        let parts = all.entry(topic.into()).or_default();
        let q = parts.entry(partition).or_insert_with(|| {
            let dir = self.root.join(topic).join(partition.to_string());
            let q = ConsumeQueue::empty(
                tp,
                dir,
                self.units_per_file,
                self.time_interval,
                next,
                Arc::clone(&self.names),
            );
            if let Some(start) = log_start {
                q.raise_log_start(start);
            }
            Arc::new(q)
        });
        Ok(Arc::clone(q))
    }

    fn log_starts(&self) -> std::sync::MutexGuard<'_, LogStartTable> {
        self.log_starts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The log start offset of `topic`-`partition` (0: never moved): its
    /// queue's, or the table's for a partition without a queue yet.
    pub fn log_start(&self, topic: &str, partition: u32) -> u64 {
        match self.get(topic, partition) {
            Some(q) => q.log_start(),
            None => self.log_starts().starts.get(topic, partition).unwrap_or(0),
        }
    }

    /// Every partition's log start offset that a client moved.
    pub fn log_start_offsets(&self) -> Vec<(TopicPartition, u64)> {
        self.log_starts()
            .starts
            .iter()
            .filter_map(|(t, p, n)| Some((TopicPartition::new(t, p).ok()?, n)))
            .collect()
    }

    /// Kafka's DeleteRecords on one partition: move its log start offset up
    /// to `before` (`None`: the high watermark, the queue's end), which
    /// must not be past the high watermark. Durable (`log-start-offsets`
    /// replaced atomically) before the queue's beginning moves and before
    /// this returns; an offset at or below the beginning changes nothing.
    /// The queue files wholly below go with the next retention pass.
    pub fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        before: Option<u64>,
    ) -> Result<DeletedRecords> {
        validate_topic_name(topic)?;
        let deleted = self.deleted();
        let mut table = self.log_starts();
        let q = match self.get(topic, partition) {
            Some(q) => q,
            None => {
                drop(table);
                let q = self.create(&deleted, topic, partition)?;
                table = self.log_starts();
                q
            }
        };
        let high_watermark = q.max_offset();
        let offset = before.unwrap_or(high_watermark);
        if offset > high_watermark {
            return Ok(DeletedRecords::AboveHighWatermark {
                offset,
                high_watermark,
            });
        }
        if offset <= q.min_offset() {
            return Ok(DeletedRecords::LowWatermark(q.min_offset()));
        }
        let mut next = table.starts.clone();
        next.raise(topic, partition, offset);
        next.store(&table.path)?;
        table.starts = next;
        q.raise_log_start(offset);
        tracing::info!(tp = %q.tp, log_start = offset, "moved the log start offset (records below are deleted)");
        Ok(DeletedRecords::LowWatermark(q.min_offset()))
    }

    /// The deleted partitions, held for reading (see the lock order).
    pub(crate) fn deleted(&self) -> RwLockReadGuard<'_, Deleted> {
        self.deleted.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Where a deleted partition's offsets continue; `None` if it was
    /// never deleted.
    pub fn deleted_next_offset(&self, topic: &str, partition: u32) -> Option<u64> {
        self.deleted().partitions.next_offset(topic, partition)
    }

    /// Every deleted partition with its next offset.
    pub fn deleted_partitions(&self) -> Vec<(TopicPartition, u64)> {
        self.deleted()
            .partitions
            .iter()
            .filter_map(|(t, p, n)| Some((TopicPartition::new(t, p).ok()?, n)))
            .collect()
    }

    /// Delete every queue of `topic`: record each partition's next offset
    /// (the larger of its queue's end and `writer_next`, the writer's next
    /// offsets of the topic, which count records not yet indexed) durably
    /// first, then drop the queues and remove their files. A crash in
    /// between is finished at the next open. Returns the partitions whose
    /// queues were deleted.
    pub fn delete_topic(&self, topic: &str, writer_next: &[(u32, u64)]) -> Result<usize> {
        validate_topic_name(topic)?;
        let mut deleted = self.deleted.write().unwrap_or_else(|e| e.into_inner());
        let queues: Vec<Arc<ConsumeQueue>> = {
            let all = self.queues.read().unwrap_or_else(|e| e.into_inner());
            all.get(topic)
                .map(|parts| parts.values().cloned().collect())
                .unwrap_or_default()
        };
        let mut next = deleted.partitions.clone();
        for &(partition, n) in writer_next {
            next.raise(topic, partition, n);
        }
        for q in &queues {
            next.raise(topic, q.tp.partition(), q.max_offset());
        }
        if next != deleted.partitions {
            next.store(&deleted.path)?;
            deleted.partitions = next;
        }
        // The next incarnation begins at its own first offset: the log
        // starts of this one go (after the offsets above are durable, so a
        // crash in between leaves starts at or below them: harmless).
        {
            let mut table = self.log_starts();
            let mut starts = table.starts.clone();
            if starts.remove_topic(topic) {
                starts.store(&table.path)?;
                table.starts = starts;
            }
        }
        self.queues
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(topic);
        for q in &queues {
            q.close_deleted();
        }
        let dir = self.root.join(topic);
        if dir.exists() {
            remove_queue_dir(&dir)?;
        }
        Ok(queues.len())
    }

    /// Every queue's end as of CommitLog position `physical` (one past
    /// its last unit pointing below it), for the `queue-ends` file
    /// ([`ends`]); queues that end at 0 there are left out. Units past
    /// `physical` may point at bytes a power loss can still take, whose
    /// queue offsets recovery hands out again: they are not claimed. A
    /// queue whose records retention deleted keeps its end (the file
    /// holding it stays), and is listed with it.
    pub(crate) fn ends_at(&self, physical: u64) -> QueueEnds {
        let mut out = QueueEnds::default();
        for q in self.all() {
            let end = q.first_offset_at_or_past(physical);
            if end > 0 {
                out.raise(q.tp.topic(), q.tp.partition(), end);
            }
        }
        out
    }

    /// Recovery, right after load and before anything is truncated: the
    /// queues that end below the end `recorded` (the `queue-ends` file)
    /// says they had, because a queue file (or the whole partition
    /// directory) is missing or short. A partition deleted since (its
    /// `deleted-partitions` offset reaches the recorded end) or whose log
    /// start reaches it lost nothing.
    pub(crate) fn find_lost(&self, recorded: &QueueEnds) -> Vec<LostQueue> {
        let mut lost = Vec::new();
        for (topic, partition, end) in recorded.iter() {
            if self
                .deleted_next_offset(topic, partition)
                .is_some_and(|n| n >= end)
                || self.log_start(topic, partition) >= end
            {
                continue;
            }
            let Ok(tp) = TopicPartition::new(topic, partition) else {
                continue; // the table's decoder validated the name
            };
            let (had, replay_from, path) = match self.get(topic, partition) {
                Some(q) => (
                    q.max_offset(),
                    q.replay_from_after_end(),
                    q.file_path_for(q.max_offset()),
                ),
                None => {
                    let dir = self.root.join(topic).join(partition.to_string());
                    (0, 0, dir.join(fs_util::offset_file_name(0)))
                }
            };
            if had < end {
                lost.push(LostQueue {
                    tp,
                    path,
                    had,
                    recorded: end,
                    replay_from,
                });
            }
        }
        lost
    }

    /// Recovery: a queue whose records from its end up to `next` are
    /// neither in its files nor in the CommitLog (retention had deleted
    /// them before its file was lost) continues at `next`, durably: the
    /// partition's log start moves there (`log-start-offsets`), so no
    /// offset an acknowledged record had is handed out again.
    pub(crate) fn continue_lost_queue(&self, topic: &str, partition: u32, next: u64) -> Result<()> {
        let deleted = self.deleted();
        let q = self.create(&deleted, topic, partition)?;
        drop(deleted);
        if q.max_offset() >= next {
            return Ok(());
        }
        let mut table = self.log_starts();
        let mut starts = table.starts.clone();
        starts.raise(topic, partition, next);
        starts.store(&table.path)?;
        table.starts = starts;
        q.raise_log_start(next);
        Ok(())
    }

    pub fn all(&self) -> Vec<Arc<ConsumeQueue>> {
        let q = self.queues.read().unwrap_or_else(|e| e.into_inner());
        q.values().flat_map(|p| p.values().cloned()).collect()
    }

    /// Make every unit and time index entry written so far durable, and
    /// the names of the files and directories made for them: each queue's
    /// units (which makes a new file's size durable) and entries first,
    /// then each directory that gained a name, once
    /// ([`fs_util::PendingDirSyncs`]). The checkpoint runs this before it
    /// claims a dispatched position, so a file the dispatcher made with no
    /// fsync is whole on disk before the checkpoint counts a unit in it.
    pub fn flush(&self) -> Result<()> {
        for q in self.all() {
            q.flush()?;
        }
        self.names.sync()?;
        Ok(())
    }

    /// Directories whose new names wait for the next flush (tests, stats).
    pub fn pending_dir_syncs(&self) -> usize {
        self.names.pending()
    }
}

/// Remove a queue's (or a topic's) directory with everything in it, durably.
fn remove_queue_dir(dir: &Path) -> Result<()> {
    std::fs::remove_dir_all(dir).at(dir)?;
    match dir.parent() {
        Some(parent) => fs_util::fsync_dir(parent),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queues under `<dir>/cq`, deleted partitions in `<dir>`.
    fn open(dir: &Path, units_per_file: u64) -> Result<ConsumeQueues> {
        ConsumeQueues::load(
            &dir.join("cq"),
            &dir.join(deleted::FILE_NAME),
            &dir.join(log_start::FILE_NAME),
            units_per_file,
        )
    }

    fn unit(p: u64) -> Unit {
        Unit {
            physical_offset: p,
            size: 100,
            key_hash: p ^ 7,
        }
    }

    /// Timestamps of a test queue's records, by offset.
    struct Times(std::collections::HashMap<u64, i64>);

    impl RecordTimes for Times {
        fn timestamp_at(&mut self, offset: u64) -> Result<Option<i64>> {
            Ok(self.0.get(&offset).copied())
        }
    }

    /// A unit rewritten below the end (a repair from the CommitLog) drops
    /// the time index entries from its interval on: they were built from
    /// the unit it replaced. The rebuild then indexes them again.
    #[test]
    fn a_rewritten_unit_drops_the_time_entries_from_its_interval_on() {
        time_index::TEST_INTERVAL.with(|c| c.set(Some(4)));
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 16).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        let mut times = Times((0..20).map(|i| (i, 1000 - i as i64)).collect());
        q.time.catch_up(&[], 0, &mut times).unwrap();
        for i in 0..20 {
            q.put(QueueOffset::new(i), unit(i * 100), 1000 - i as i64)
                .unwrap();
        }
        assert_eq!(q.time_index_entries(), 5, "20 units, 4 an entry");
        assert!(!q.time.needs_catch_up());
        // Offset 9 (interval 2 of the first file) rewritten.
        q.put(QueueOffset::new(9), unit(777), 5).unwrap();
        assert_eq!(q.time_index_entries(), 2, "intervals 0 and 1 kept");
        assert!(q.time.needs_catch_up());
        times.0.insert(9, 5);
        let files: Vec<u64> = q
            .files
            .read()
            .unwrap()
            .iter()
            .map(|f| f.first_unit)
            .collect();
        assert_eq!(
            q.time.catch_up(&files, q.max_offset(), &mut times).unwrap(),
            3
        );
        assert_eq!(q.time_index_entries(), 5);
        time_index::TEST_INTERVAL.with(|c| c.set(None));
    }

    #[test]
    fn a_repaired_unit_below_the_end_is_flushed_again() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..6 {
            q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
        }
        q.flush().unwrap();
        // A unit below the end lost (a hole), then replayed.
        q.file_for(1).unwrap().write(1, &[0u8; UNIT_LEN]).unwrap();
        assert_eq!(
            q.put(QueueOffset::new(1), unit(100), 0).unwrap(),
            PutOutcome::Written
        );
        assert!(
            q.flushed_offset.load(Ordering::Acquire) <= 1,
            "the next flush must cover the repaired unit"
        );
        q.flush().unwrap();
        assert_eq!(q.flushed_offset.load(Ordering::Acquire), 6);
    }

    #[test]
    fn ends_claim_only_units_below_the_position_and_find_lost_compares_them() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..10 {
            q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
        }
        qs.get_or_create("empty", 0).unwrap();
        // Units at 500.. point past the position: not claimed (a power
        // loss may take their records, and their offsets are reused).
        let ends = qs.ends_at(450);
        assert_eq!(ends.get("t", 0), Some(5));
        assert_eq!(ends.get("empty", 0), None);
        assert_eq!(qs.ends_at(10_000).get("t", 0), Some(10));
        // Nothing lost against either.
        assert!(qs.find_lost(&qs.ends_at(10_000)).is_empty());
        qs.flush().unwrap();
        drop(q);
        drop(qs);

        // The tail file (units 8 and 9) is lost.
        std::fs::remove_file(
            dir.path()
                .join("cq/t/0")
                .join(fs_util::offset_file_name(8 * UNIT_LEN as u64)),
        )
        .unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let mut recorded = QueueEnds::default();
        recorded.raise("t", 0, 10);
        // A deleted partition and one whose log start reaches its end
        // lost nothing.
        recorded.raise("gone", 0, 3);
        let lost = qs.find_lost(&recorded);
        assert_eq!(lost.len(), 2, "{lost:?}");
        let t = lost.iter().find(|l| l.tp.topic() == "t").unwrap();
        assert_eq!((t.had, t.recorded), (8, 10));
        // From just past unit 7's record.
        assert_eq!(t.replay_from, 700 + 100);
        let gone = lost.iter().find(|l| l.tp.topic() == "gone").unwrap();
        assert_eq!((gone.had, gone.replay_from), (0, 0));
        qs.delete_topic("gone", &[(0, 3)]).unwrap();
        assert_eq!(qs.find_lost(&recorded).len(), 1);

        // Records retention had deleted: the queue continues at the end,
        // durably.
        qs.continue_lost_queue("t", 0, 10).unwrap();
        assert_eq!(qs.get("t", 0).unwrap().max_offset(), 10);
        drop(qs);
        let qs = open(dir.path(), 4).unwrap();
        assert_eq!(qs.log_start("t", 0), 10);
        assert!(qs.find_lost(&recorded).is_empty());
    }

    #[test]
    fn put_get_across_files_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 1).unwrap();
        for i in 0..10 {
            assert_eq!(
                q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap(),
                PutOutcome::Written
            );
        }
        assert_eq!((q.min_offset(), q.max_offset()), (0, 10));
        assert_eq!(q.get(9).unwrap(), Some(unit(900)));
        assert_eq!(q.get(10).unwrap(), None);
        qs.flush().unwrap();
        // 10 units at 4 per file: three files named by byte offset.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("cq/t/1"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 3);
        drop(q);
        drop(qs);
        let qs = open(dir.path(), 4).unwrap();
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
        let qs = open(dir.path(), per_file).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        let mut cursor = QueueCursor::default();
        let mut next = 0u64;
        // Flush points inside pages, on page ends, and across a file end.
        for flush_at in [100u64, 204, 205, 1000, 4096, 8191, 8192, 9000, 12_000] {
            while next < flush_at {
                q.put_cached(QueueOffset::new(next), unit(next * 100), 0, &mut cursor)
                    .unwrap();
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
        let qs = open(dir.path(), per_file).unwrap();
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
        let qs = open(dir.path(), 8).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        q.put(QueueOffset::new(0), unit(0), 0).unwrap();
        q.put(QueueOffset::new(1), unit(100), 0).unwrap();
        assert_eq!(
            q.put(QueueOffset::new(0), unit(0), 0).unwrap(),
            PutOutcome::AlreadyPresent
        );
        assert_eq!(
            q.put(QueueOffset::new(1), unit(100), 0).unwrap(),
            PutOutcome::AlreadyPresent
        );
        assert_eq!(q.max_offset(), 2);
    }

    #[test]
    fn truncate_drops_units_past_the_log_end() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..10 {
            q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
        }
        assert_eq!(q.truncate_from_physical(450).unwrap().dropped, 5);
        assert_eq!(q.max_offset(), 5);
        assert_eq!(q.get(5).unwrap(), None);
        // The file holding units 8..12 is gone; reload agrees.
        drop(q);
        drop(qs);
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get("t", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (0, 5));
        q.put(QueueOffset::new(5), unit(777), 0).unwrap();
        assert_eq!(q.get(5).unwrap(), Some(unit(777)));
    }

    #[test]
    fn queue_starting_past_zero() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        q.put(QueueOffset::new(6), unit(600), 0).unwrap();
        q.put(QueueOffset::new(7), unit(700), 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (6, 8));
        drop(q);
        drop(qs);
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get("t", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (6, 8));
        assert_eq!(q.get(5).unwrap(), None);
    }

    /// DeleteRecords: the log start moves forward only, never past the
    /// high watermark (`None` is the high watermark), is durable before it
    /// answers (a reopen, with no shutdown, keeps it), and hides what is
    /// below from reads; a replay of units below it writes nothing.
    #[test]
    fn delete_records_moves_the_log_start_forward_durably() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..10 {
            q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
        }
        assert_eq!(
            qs.delete_records("t", 0, Some(11)).unwrap(),
            DeletedRecords::AboveHighWatermark {
                offset: 11,
                high_watermark: 10
            }
        );
        assert_eq!(
            qs.delete_records("t", 0, Some(6)).unwrap(),
            DeletedRecords::LowWatermark(6)
        );
        assert_eq!((q.min_offset(), q.max_offset(), q.log_start()), (6, 10, 6));
        assert_eq!(q.get(5).unwrap(), None);
        assert_eq!(q.get(6).unwrap(), Some(unit(600)));
        // Backwards: nothing changes, the low watermark is answered.
        assert_eq!(
            qs.delete_records("t", 0, Some(2)).unwrap(),
            DeletedRecords::LowWatermark(6)
        );
        // A replay of a deleted record (the queue file may be gone).
        assert_eq!(
            q.put(QueueOffset::new(3), unit(999), 0).unwrap(),
            PutOutcome::BelowLogStart
        );
        assert_eq!(q.min_offset(), 6);
        // Not even flushed: the file is what a crash leaves.
        drop(q);
        drop(qs);
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get("t", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset(), q.log_start()), (6, 10, 6));
        // The high watermark: everything.
        assert_eq!(
            qs.delete_records("t", 0, None).unwrap(),
            DeletedRecords::LowWatermark(10)
        );
        assert_eq!((q.min_offset(), q.max_offset()), (10, 10));
        assert_eq!(q.get(9).unwrap(), None);
        // A partition never written has a high watermark of 0.
        assert_eq!(
            qs.delete_records("t", 1, Some(1)).unwrap(),
            DeletedRecords::AboveHighWatermark {
                offset: 1,
                high_watermark: 0
            }
        );
        assert!(qs
            .log_start_offsets()
            .iter()
            .all(|(tp, _)| tp.partition() == 0));
    }

    /// Queue files wholly below the log start go with the retention pass's
    /// call, not before; the one holding the end stays.
    #[test]
    fn files_below_the_log_start_are_deleted_on_request() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..10 {
            q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
        }
        assert_eq!(q.file_count(), 3);
        qs.delete_records("t", 0, Some(9)).unwrap();
        assert_eq!(q.file_count(), 3, "deleted by the retention pass");
        assert_eq!(q.delete_files_below_start().unwrap(), 2);
        assert_eq!(q.file_count(), 1);
        assert_eq!(q.get(9).unwrap(), Some(unit(900)));
        assert_eq!(q.delete_files_below_start().unwrap(), 0);
    }

    /// A queue that a crash cut below its log start (units lost after the
    /// start was moved), or whose files are gone, continues at the log
    /// start: no offset below it is handed out again.
    #[test]
    fn a_queue_cut_below_its_log_start_continues_at_it() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..10 {
            q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
        }
        qs.delete_records("t", 0, Some(8)).unwrap();
        // Recovery: the log ends at 450, below the log start's records.
        q.truncate_from_physical(450).unwrap();
        assert!(q.max_offset() >= 8, "{}", q.max_offset());
        drop(q);
        drop(qs);
        // Every queue file lost: the partition still starts at 8.
        std::fs::remove_dir_all(dir.path().join("cq").join("t")).unwrap();
        let qs = open(dir.path(), 4).unwrap();
        assert!(qs.get("t", 0).is_none());
        let q = qs.get_or_create("t", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (8, 8));
        assert_eq!(
            qs.log_start_offsets(),
            [(TopicPartition::new("t", 0).unwrap(), 8)]
        );
    }

    #[test]
    fn advance_min_moves_the_beginning_and_deletes_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..10 {
            q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
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
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get("t", 0).unwrap();
        q.advance_min(10_000).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (10, 10));
        q.put(QueueOffset::new(10), unit(20_000), 0).unwrap();
        assert_eq!(q.get(10).unwrap(), Some(unit(20_000)));
    }

    #[test]
    fn wrong_file_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..5 {
            q.put(QueueOffset::new(i), unit(i), 0).unwrap();
        }
        drop(q);
        drop(qs);
        // Files longer than the setting makes them, and (the name check) a
        // second file where a larger setting puts none.
        assert!(open(dir.path(), 2).is_err());
        assert!(open(dir.path(), 8).is_err());
    }

    #[test]
    fn stray_directories_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cq/bad name/0")).unwrap();
        std::fs::create_dir_all(dir.path().join("cq/t/not-a-number")).unwrap();
        let qs = open(dir.path(), 4).unwrap();
        assert!(qs.all().is_empty());
    }

    /// Pages of `q`'s files in the page cache (mincore over their maps).
    #[cfg(target_os = "linux")]
    fn resident_pages(q: &ConsumeQueue) -> usize {
        let page = fs_util::page_size();
        let files = q.files.read().unwrap();
        files
            .iter()
            .map(|f| {
                let pages = f.map.len().div_ceil(page);
                let mut vec = vec![0u8; pages];
                // SAFETY: our own mapping, and a vector of one byte per page.
                let rc = unsafe {
                    libc::mincore(f.map.as_mut_ptr().cast(), f.map.len(), vec.as_mut_ptr())
                };
                assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
                vec.iter().filter(|&&b| b & 1 != 0).count()
            })
            .sum()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn opening_a_sparse_queue_file_reads_only_what_was_written() {
        // A default-sized (6 MB) file with two units: opening it must not
        // read (and so cache, or map in) its holes.
        let dir = tempfile::tempdir().unwrap();
        let per_file = 300_000;
        let qs = open(dir.path(), per_file).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        q.put(QueueOffset::new(0), unit(100), 0).unwrap();
        q.put(QueueOffset::new(1), unit(200), 0).unwrap();
        qs.flush().unwrap();
        // Forget the file's cached pages (the first write fault read the
        // file ahead), so what opening reads shows.
        let files = q.files.read().unwrap().clone();
        for f in &files {
            use std::os::unix::io::AsRawFd;
            // SAFETY: plain syscall on an fd the file owns.
            let rc =
                unsafe { libc::posix_fadvise(f.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            assert_eq!(rc, 0);
        }
        assert!(
            resident_pages(&q) <= 2,
            "{} pages still cached",
            resident_pages(&q)
        );
        drop(files);
        drop(q);
        drop(qs);
        let qs = open(dir.path(), per_file).unwrap();
        let q = qs.get("t", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (0, 2));
        let resident = resident_pages(&q);
        assert!(
            resident <= 16,
            "{resident} pages of a 6 MB file read at open"
        );
        assert_eq!(q.get(1).unwrap(), Some(unit(200)));
    }

    /// The dispatcher's first unit in a new, default-sized (6 MB) queue
    /// file makes one page of page cache, not the file's readahead window
    /// of zeros (a store into the map faulted, and the fault read 8 MiB of
    /// hole ahead on the VM we run on: 6 ms and 6 MB a new partition). Not
    /// tested where the temp dir's file system reads nothing ahead (tmpfs).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_first_unit_makes_one_page_not_a_readahead_window() {
        let dir = tempfile::tempdir().unwrap();
        let per_file = 300_000;
        let qs = open(dir.path(), per_file).unwrap();
        for p in 0..4 {
            let q = qs.get_or_create("t", p).unwrap();
            for i in 0..3 {
                q.put(QueueOffset::new(i), unit(i * 100 + 1), 0).unwrap();
            }
            // A page boundary inside a unit: units 204 and 205 (bytes 4080..4100).
            for i in 203..206 {
                q.put(QueueOffset::new(i), unit(i * 100 + 1), 0).unwrap();
            }
            let resident = resident_pages(&q);
            assert!(
                resident <= 2,
                "{resident} pages of a 6 MB file resident after 6 units"
            );
            assert_eq!(q.get(204).unwrap(), Some(unit(20_401)));
        }
    }

    #[test]
    fn the_end_is_found_across_empty_files_and_in_a_later_page() {
        let dir = tempfile::tempdir().unwrap();
        let per_file = 4096;
        let qs = open(dir.path(), per_file).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        // Units in the first file and far into the second one.
        for i in (0..10).chain(per_file + 3000..per_file + 3010) {
            q.put(QueueOffset::new(i), unit(i * 10 + 1), 0).unwrap();
        }
        qs.flush().unwrap();
        drop(q);
        drop(qs);
        let qs = open(dir.path(), per_file).unwrap();
        let q = qs.get("t", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (0, per_file + 3010));
        assert_eq!(
            q.get(per_file + 3009).unwrap(),
            Some(unit((per_file + 3009) * 10 + 1))
        );
    }

    #[test]
    fn recovery_truncates_at_a_torn_unit_and_asks_for_a_replay() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 64).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..10 {
            q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
        }
        qs.flush().unwrap();
        drop(q);
        drop(qs);
        // Unit 8 half written: its offset but no size.
        let path = dir.path().join("cq/t/0").join(fs_util::offset_file_name(0));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8 * UNIT_LEN + 8..9 * UNIT_LEN].fill(0);
        std::fs::write(&path, &bytes).unwrap();
        let qs = open(dir.path(), 64).unwrap();
        let q = qs.get("t", 0).unwrap();
        assert_eq!(q.max_offset(), 10, "opening does not judge units");
        // Recovery starts at 850: unit 9 points past it, unit 8 is torn.
        let t = q.truncate_from_physical(850).unwrap();
        // Units 8 and 9 are gone; records after unit 7 (at 700, 100
        // bytes) are to be replayed.
        assert_eq!(
            t,
            Truncated {
                dropped: 2,
                replay_from: Some(800)
            }
        );
        assert_eq!(q.max_offset(), 8);
        // A unit whose position lost its low bytes (torn across a page
        // boundary) points before the unit ahead of it.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[7 * UNIT_LEN..7 * UNIT_LEN + 6].fill(0);
        std::fs::write(&path, &bytes).unwrap();
        let q = open(dir.path(), 64).unwrap().get("t", 0).unwrap();
        assert_eq!(q.max_offset(), 8);
        assert_eq!(
            q.truncate_from_physical(10_000).unwrap(),
            Truncated {
                dropped: 1,
                replay_from: Some(700)
            }
        );
        assert_eq!(q.get(6).unwrap(), Some(unit(600)));
        // Without a torn unit there is nothing to replay.
        assert_eq!(q.truncate_from_physical(850).unwrap(), Truncated::default());
    }

    #[test]
    fn delete_topic_removes_its_queues_and_offsets_continue() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        for p in 0..2 {
            let q = qs.get_or_create("t", p).unwrap();
            for i in 0..6 {
                q.put(QueueOffset::new(i), unit(i * 100 + u64::from(p)), 0)
                    .unwrap();
            }
        }
        qs.get_or_create("u", 0)
            .unwrap()
            .put(QueueOffset::new(0), unit(1), 0)
            .unwrap();
        let held = qs.get("t", 0).unwrap();
        // Partition 2 has records the writer numbered but nobody indexed.
        assert_eq!(qs.delete_topic("t", &[(0, 3), (2, 4)]).unwrap(), 2);
        assert!(held.is_deleted());
        assert_eq!(held.file_count(), 0);
        assert!(qs.get("t", 0).is_none());
        assert!(!dir.path().join("cq/t").exists());
        assert_eq!(qs.deleted_next_offset("t", 0), Some(6));
        assert_eq!(qs.deleted_next_offset("t", 2), Some(4));
        // A new incarnation starts where the old one ended.
        let q = qs.get_or_create("t", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (6, 6));
        q.put(QueueOffset::new(6), unit(5000), 0).unwrap();
        drop(q);
        drop(held);
        drop(qs);
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get("t", 0).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (6, 7));
        assert_eq!(q.get(5).unwrap(), None);
        assert!(qs.get("t", 1).is_none());
        assert_eq!(qs.deleted_next_offset("t", 1), Some(6));
        assert_eq!(qs.get("u", 0).unwrap().max_offset(), 1);
    }

    #[test]
    fn a_deletion_cut_short_by_a_crash_is_finished_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let qs = open(dir.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..6 {
            q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
        }
        qs.flush().unwrap();
        drop(q);
        drop(qs);
        // The crash came after the deleted partitions were written and
        // before the files were removed.
        let mut deleted = DeletedPartitions::default();
        deleted.raise("t", 0, 6);
        deleted.store(&dir.path().join(deleted::FILE_NAME)).unwrap();
        let qs = open(dir.path(), 4).unwrap();
        assert!(qs.get("t", 0).is_none());
        assert!(!dir.path().join("cq/t").exists());
        assert_eq!(qs.deleted_next_offset("t", 0), Some(6));
    }

    /// A new queue file and time file cost no sync where they are made
    /// (the dispatcher's path); the flush makes them durable, each
    /// directory that gained a name synced once.
    #[cfg(feature = "durable-image")]
    #[test]
    fn new_files_are_made_with_no_sync_and_are_durable_after_the_flush() {
        time_index::TEST_INTERVAL.with(|c| c.set(Some(2)));
        let root = tempfile::tempdir().unwrap();
        let image = crate::durability::image::install(root.path()).unwrap();
        let qs = open(root.path(), 4).unwrap();
        let before = image.syncs();
        for p in 0..5 {
            let q = qs.get_or_create("t", p).unwrap();
            let mut times = Times((0..6).map(|i| (i, 1000 + i as i64)).collect());
            q.time.catch_up(&[], 0, &mut times).unwrap();
            // Two queue files and two time files (an entry per two units).
            for i in 0..6 {
                q.put(QueueOffset::new(i), unit(i * 100 + 1), 1000 + i as i64)
                    .unwrap();
            }
            assert_eq!(q.time_index_entries(), 3);
        }
        assert_eq!(image.syncs() - before, 0, "syncs while 20 files were made");
        // Every directory with a new name: 5 partitions', the topic's, the root's.
        assert_eq!(qs.pending_dir_syncs(), 7);
        let before = image.syncs();
        qs.flush().unwrap();
        // Per partition: 2 queue files' units, 2 time files; then 7 directories.
        assert_eq!(image.syncs() - before, 5 * 4 + 7);
        assert_eq!(qs.pending_dir_syncs(), 0);
        let snaps = tempfile::tempdir().unwrap();
        image.snapshot(snaps.path(), None).unwrap();
        drop(image);
        let qs = open(snaps.path(), 4).unwrap();
        for p in 0..5 {
            let q = qs.get("t", p).unwrap();
            assert_eq!((q.min_offset(), q.max_offset()), (0, 6));
            assert_eq!(q.get(5).unwrap(), Some(unit(501)));
            assert_eq!(q.time_index_entries(), 3, "time files durable");
        }
        time_index::TEST_INTERVAL.with(|c| c.set(None));
    }

    /// A file made with no sync can have its name reach the disk before
    /// its size: made just after a flush synced the queue's units, just
    /// before that flush's directory sync. A power loss then leaves it
    /// empty or torn short, with the queue's later new files empty beside
    /// it; the queue opens on that, reading it as its tail (every unit in
    /// it is past the checkpoint: recovery replays them), and keeps every
    /// unit the flush made durable.
    #[cfg(feature = "durable-image")]
    #[test]
    fn a_new_file_whose_name_is_durable_before_its_size_opens_as_the_tail() {
        let root = tempfile::tempdir().unwrap();
        let image = crate::durability::image::install(root.path()).unwrap();
        let qs = open(root.path(), 4).unwrap();
        let q = qs.get_or_create("t", 0).unwrap();
        for i in 0..4 {
            q.put(QueueOffset::new(i), unit(i * 100 + 1), 0).unwrap();
        }
        qs.flush().unwrap();
        // Two more files (units 4..8 and 8..12), not synced...
        for i in 4..10 {
            q.put(QueueOffset::new(i), unit(i * 100 + 1), 0).unwrap();
        }
        // ... but their names are: the race above.
        crate::durability::sync_dir(&root.path().join("cq/t/0")).unwrap();
        let snaps = tempfile::tempdir().unwrap();
        let mut torn_short = 0;
        for pick in 0..8u64 {
            let dest = snaps.path().join(pick.to_string());
            let tear = crate::durability::image::Tear {
                file_pick: pick,
                prefix_pick: pick * 13 + 5,
                out_of_order: pick % 2 == 1,
                spare: &[],
            };
            let torn = image.snapshot(&dest, Some(tear)).unwrap();
            assert!(torn.is_some(), "a new file is torn");
            let second = dest
                .join("cq/t/0")
                .join(fs_util::offset_file_name(4 * UNIT_LEN as u64));
            let len = std::fs::metadata(&second).unwrap().len();
            if len > 0 && len < 4 * UNIT_LEN as u64 {
                torn_short += 1;
            }
            let reopened = open(&dest, 4).unwrap_or_else(|e| panic!("{torn:?}: {e}"));
            let q = reopened.get("t", 0).unwrap();
            assert!(
                (4..=10).contains(&q.max_offset()),
                "{torn:?}: {}",
                q.max_offset()
            );
            for i in 0..4 {
                assert_eq!(q.get(i).unwrap(), Some(unit(i * 100 + 1)), "{torn:?}");
            }
        }
        assert!(torn_short > 0, "no tear left the second file short");
    }
}
