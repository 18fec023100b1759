//! The compacted log of one partition of a compact topic:
//! `compacted/<topic>/<partition>/<20-digit base offset>.log`.
//!
//! Queue offsets never change: the dispatcher appends every record with the
//! offset the CommitLog gave it, and cleaning only removes records. Fetch
//! returns the first record at or after the requested offset; gaps are
//! normal after cleaning.
//!
//! Appends are buffered and written in batches (one positioned write per
//! dispatch batch, or per `PENDING_MAX_*`), then published: readers see a
//! record once it is in the segment file, never before. The copy path
//! ([`CompactedLog::append_copies`]) encodes a CommitLog entry's records
//! straight into the pending buffer under one lock: no allocation, no
//! second copy and no segment-list clone per record, and one index and
//! stats update per write (docs/compaction.md, "The copy").
//!
//! Lock order: `append_lock` → `segments`. Readers take only a read lock on
//! `segments`, long enough to clone the list.
//!
//! The directory's file names and the reconcile of what an interrupted
//! swap left (run by [`CompactedLog::open`] and `CompactedLog::reconcile`)
//! are in `dir.rs`; the tests in `log_tests.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use event_listener::{Event, EventListener};
use tidelog_storage::durability;
use tidelog_storage::fs_util;
use tidelog_storage::{PhysicalOffset, TopicPartition};

use super::dir::{new_segment_file_name, reconcile_dir, segment_file_name};
use super::format::{self, CompactedRecord, Fields};
use super::segment::{RecordMeta, Segment};
use crate::error::{CleanerError, CorruptionKind, Location, Result};
use crate::fault::{self, FaultHandle, FaultPoint};

/// fsync the directories that gained names since the last call.
pub(crate) fn sync_names(names: &fs_util::PendingDirSyncs) -> Result<()> {
    names.sync().map(drop).map_err(|e| CleanerError::Store {
        path: PathBuf::from(super::COMPACTED_DIR),
        source: e,
    })
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// When the active segment rolls.
#[derive(Clone, Copy, Debug)]
pub struct RollPolicy {
    pub segment_bytes: u64,
    /// Roll a non-empty active segment this long after its first record
    /// (`segment.ms`, capped by `max.compaction.lag.ms`).
    pub segment_ms: i64,
}

/// Pending appends are written once they reach either bound (or at the end
/// of a dispatch batch, or before a flush or roll).
const PENDING_MAX_BYTES: usize = 256 << 10;
const PENDING_MAX_RECORDS: usize = 4096;

/// The appender's state, under `append_lock`.
struct AppendState {
    /// Copied but not yet written to the active segment: the encoded
    /// records back to back (the buffer is reused: its capacity stays)...
    pending: Vec<u8>,
    /// ... and what each of them is, in order.
    pending_records: Vec<RecordMeta>,
    /// One past the last offset taken (pending included), for replay checks.
    next: u64,
}

pub struct CompactedLog {
    tp: TopicPartition,
    dir: PathBuf,
    append_lock: Mutex<AppendState>,
    segments: RwLock<Vec<Arc<Segment>>>,
    /// One past the last offset appended: the log end offset.
    next_offset: AtomicU64,
    /// The lowest end offset recovery cut this log to since it was opened
    /// (`u64::MAX`: never cut). The records from there on were copied again
    /// from the CommitLog, uncleaned, whatever the cleaner checkpoint says.
    recovery_cut: AtomicU64,
    /// The partition's log start offset (DeleteRecords), as the broker told
    /// it ([`CompactedLog::set_log_start`]; durable in the store's
    /// `log-start-offsets`): `compact,delete` retention deletes the sealed
    /// segments wholly below it. The broker never serves a record below
    /// it, wherever it still lies.
    log_start: AtomicU64,
    appended: Event,
    /// Test seam: [`FaultPoint::WriteCopies`] tears a batch write.
    faults: FaultHandle,
    /// Where a new segment's (or a new log's directory's) name is noted
    /// instead of fsyncing its directory on the dispatcher's path: synced
    /// by [`CompactedLog::flush`] (or the compacted logs' flush, which
    /// shares one set among every log), after the segments.
    names: Arc<fs_util::PendingDirSyncs>,
    /// Segments a roll sealed whose tail may not be synced yet: the next
    /// flush syncs them, then renames the `.new` segments after them
    /// ([`CompactedLog::open`]). The roll itself syncs nothing: an
    /// fdatasync there waited behind the disk's whole write-back queue
    /// and stalled dispatch, and through the lag bound every producer,
    /// for up to a second and a half while the cleaner wrote (issue 17).
    sealed_unsynced: Mutex<Vec<Arc<Segment>>>,
    /// One flush at a time: a second one could otherwise rename a `.new`
    /// segment while the first still syncs the one before it.
    flush_lock: Mutex<()>,
}

impl std::fmt::Debug for CompactedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompactedLog({})", self.tp)
    }
}

impl CompactedLog {
    /// Open (or create) the log in `dir`: finish or roll back an interrupted
    /// swap and drop leftover `.cleaned` files (`reconcile_dir`), drop the
    /// copies made since the last checkpoint that a segment's name cannot
    /// vouch for, then open the segments.
    ///
    /// A roll does not sync the segment it seals; it names the new one
    /// `<base>.log.new`, and the next flush syncs the sealed one and only
    /// then renames the new one `<base>.log` ([`CompactedLog::flush`]).
    /// So on disk a `.log` segment with an older one before it says that
    /// one is whole. A `.new` segment was made after the flush before the
    /// last checkpoint began (that flush would have renamed it), so it,
    /// and every newer segment, holds only copies of records past the
    /// checkpoint, which recovery replays: they are deleted here, and the
    /// segment before the first of them, which a power loss may have left
    /// short or torn, has its tail repaired as the newest segment always
    /// has.
    pub fn open(tp: TopicPartition, dir: PathBuf) -> Result<CompactedLog> {
        fs_util::create_dir_durable(&dir).map_err(|e| CleanerError::Store {
            path: dir.clone(),
            source: e,
        })?;
        let found = reconcile_dir(&dir)?;
        let mut bases = found.bases;
        if let Some(&first_new) = found.new_bases.first() {
            let mut gone: Vec<PathBuf> = found
                .new_bases
                .iter()
                .map(|&b| dir.join(new_segment_file_name(b)))
                .collect();
            gone.extend(
                bases
                    .iter()
                    .filter(|&&b| b > first_new)
                    .map(|&b| dir.join(segment_file_name(b))),
            );
            bases.retain(|&b| b < first_new);
            for path in &gone {
                std::fs::remove_file(path).map_err(|e| CleanerError::io(path, e))?;
            }
            fs_util::fsync_dir(&dir).map_err(|e| CleanerError::Store {
                path: dir.clone(),
                source: e,
            })?;
            tracing::info!(tp = %tp, from = first_new, segments = gone.len(), "dropped the compacted segments made since the last checkpoint; recovery copies their records again");
        }
        let mut segments = Vec::with_capacity(bases.len());
        for (i, &base) in bases.iter().enumerate() {
            let path = dir.join(segment_file_name(base));
            let newest = i + 1 == bases.len();
            segments.push(Arc::new(Segment::open(path, base, newest)?));
        }
        Ok(Self::with_segments(tp, dir, segments))
    }

    /// A new, empty log in `dir`, which does not exist yet: what the
    /// dispatcher makes for a compact topic's new partition. Its directory
    /// (and its parent's, for a new topic) is made with no fsync and noted
    /// in `names`, as is its first segment when the first record comes
    /// ([`CompactedLog::roll`]); the compacted logs' flush makes them
    /// durable before a checkpoint claims a record copied here. A power
    /// loss before leaves the directory missing or empty, or its first
    /// segment empty or with a torn tail, all of which [`CompactedLog::open`]
    /// reads as the log it was (the newest segment's tail is repaired), and
    /// the recovery replay copies the records again. (`open`, at start-up,
    /// still makes its directory durable at once.)
    pub(crate) fn create(
        tp: TopicPartition,
        dir: PathBuf,
        names: Arc<fs_util::PendingDirSyncs>,
    ) -> Result<CompactedLog> {
        names
            .create_dir_all(&dir)
            .map_err(|e| CleanerError::Store {
                path: dir.clone(),
                source: e,
            })?;
        Ok(Self::with_segments(tp, dir, Vec::new()).with_names(names))
    }

    fn with_segments(
        tp: TopicPartition,
        dir: PathBuf,
        segments: Vec<Arc<Segment>>,
    ) -> CompactedLog {
        let next = segments.last().map_or(0, |s| {
            s.stats().last_offset.map_or(s.base_offset(), |o| o + 1)
        });
        CompactedLog {
            tp,
            dir,
            append_lock: Mutex::new(AppendState {
                pending: Vec::new(),
                pending_records: Vec::new(),
                next,
            }),
            segments: RwLock::new(segments),
            next_offset: AtomicU64::new(next),
            recovery_cut: AtomicU64::new(u64::MAX),
            log_start: AtomicU64::new(0),
            appended: Event::new(),
            faults: FaultHandle::default(),
            names: Arc::default(),
            sealed_unsynced: Mutex::default(),
            flush_lock: Mutex::default(),
        }
    }

    /// This log noting new names in `names` (`CompactedLogs`: one set for
    /// every log, synced once by its flush).
    pub(crate) fn with_names(mut self, names: Arc<fs_util::PendingDirSyncs>) -> CompactedLog {
        self.names = names;
        self
    }

    /// This log with a fault plan (`CompactedLogs::open_with_faults`).
    pub(crate) fn with_faults(mut self, faults: FaultHandle) -> CompactedLog {
        self.faults = faults;
        self
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One past the last offset appended (the end offset).
    pub fn next_offset(&self) -> u64 {
        self.next_offset.load(Ordering::Acquire)
    }

    /// The lowest end offset recovery cut this log to since it was opened,
    /// if it cut it ([`CompactedLog::truncate_from_physical`]). Records from
    /// there on are copies made again by the replay, which no pass has
    /// cleaned, even where the log's end is back past the cleaner checkpoint.
    pub fn recovery_cut(&self) -> Option<u64> {
        let cut = self.recovery_cut.load(Ordering::Acquire);
        (cut != u64::MAX).then_some(cut)
    }

    /// Offset of the first record still in the log (the end offset when the
    /// log is empty).
    pub fn beginning_offset(&self) -> u64 {
        self.segments()
            .iter()
            .find_map(|s| s.stats().first_offset)
            .unwrap_or_else(|| self.next_offset())
    }

    /// The log start offset the broker last told (0: none).
    pub fn log_start(&self) -> u64 {
        self.log_start.load(Ordering::Acquire)
    }

    /// Raise the log start offset to `start` (never lowered).
    pub fn set_log_start(&self, start: u64) {
        self.log_start.fetch_max(start, Ordering::AcqRel);
    }

    pub fn segments(&self) -> Vec<Arc<Segment>> {
        self.segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Base offset of the oldest segment still named `.new` (a roll made
    /// it, and the next flush renames it once the segment before it is
    /// synced): the cleaner leaves it and every newer one alone until then.
    pub(crate) fn first_new_base(&self) -> Option<u64> {
        self.segments()
            .iter()
            .find(|s| s.is_new())
            .map(|s| s.base_offset())
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments().iter().map(|s| s.len()).sum()
    }

    /// A listener that fires when a record is appended. Register, re-check
    /// `next_offset`, then wait.
    pub fn listen(&self) -> EventListener {
        self.appended.listen()
    }

    pub fn wake_all(&self) {
        self.appended.notify(usize::MAX);
    }

    /// Append a record copied from the CommitLog. Records at offsets already
    /// in the log (a replay after a crash) are skipped. Returns whether it
    /// was taken. It becomes visible when the pending batch is written
    /// ([`CompactedLog::end_batch`], or when the batch is full).
    pub fn append(&self, record: &CompactedRecord, roll: RollPolicy, now_ms: i64) -> Result<bool> {
        let mut st = lock(&self.append_lock);
        let mut active = self.segments().last().cloned();
        let meta = RecordMeta::from(record);
        self.take(&mut st, &mut active, meta, roll, now_ms, |out| {
            out.extend_from_slice(record.raw())
        })
    }

    /// Append the records of one CommitLog entry (offsets ascending), each
    /// encoded straight into the pending batch, under one lock. Records at
    /// offsets already in the log (a replay) are skipped; returns how many
    /// were taken. Visible, as with [`CompactedLog::append`], when the
    /// batch is written.
    pub fn append_copies<'a>(
        &self,
        records: impl IntoIterator<Item = Fields<'a>>,
        roll: RollPolicy,
        now_ms: i64,
    ) -> Result<usize> {
        let mut st = lock(&self.append_lock);
        let mut active = self.segments().last().cloned();
        let mut taken = 0;
        for f in records {
            let meta = RecordMeta {
                offset: f.offset.get(),
                timestamp_ms: f.timestamp_ms,
                store_timestamp_ms: f.store_timestamp_ms,
                delete_horizon_ms: f.delete_horizon_ms,
                tombstone: f.value.is_none(),
                len: format::encoded_len(&f) as u32,
            };
            if self.take(&mut st, &mut active, meta, roll, now_ms, |out| {
                format::encode_into(&f, out)
            })? {
                taken += 1;
            }
        }
        Ok(taken)
    }

    /// One record into the pending batch (`encode` appends its `meta.len`
    /// bytes): rolls first when it does not fit the active segment, writes
    /// the batch when it is full. `active` is the caller's view of the
    /// active segment, kept across its records (a roll replaces it).
    fn take(
        &self,
        st: &mut AppendState,
        active: &mut Option<Arc<Segment>>,
        meta: RecordMeta,
        roll: RollPolicy,
        now_ms: i64,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<bool> {
        if meta.offset < st.next {
            return Ok(false);
        }
        let fits = match active {
            None => false,
            Some(s) => {
                let len = s.len() + st.pending.len() as u64;
                len == 0
                    || (len + u64::from(meta.len) <= roll.segment_bytes
                        && now_ms.saturating_sub(s.created_ms()) < roll.segment_ms)
            }
        };
        if !fits {
            self.write_pending(st)?;
            *active = Some(self.roll_locked(meta.offset, now_ms)?);
        }
        let before = st.pending.len();
        encode(&mut st.pending);
        debug_assert_eq!(st.pending.len() - before, meta.len as usize);
        st.pending_records.push(meta);
        st.next = meta.offset + 1;
        if st.pending.len() >= PENDING_MAX_BYTES || st.pending_records.len() >= PENDING_MAX_RECORDS
        {
            self.write_pending(st)?;
        }
        Ok(true)
    }

    /// Write and publish the pending records (end of a dispatch batch).
    pub fn end_batch(&self) -> Result<()> {
        let mut st = lock(&self.append_lock);
        self.write_pending(&mut st)
    }

    fn write_pending(&self, st: &mut AppendState) -> Result<()> {
        let Some(last) = st.pending_records.last().map(|r| r.offset) else {
            return Ok(());
        };
        let Some(active) = self.segments().last().cloned() else {
            return Err(CleanerError::InvalidConfig {
                setting: "internal",
                reason: "pending compacted records with no segment".into(),
            });
        };
        if let Err(e) = fault::check(&self.faults, FaultPoint::WriteCopies) {
            // Torn, as a crash in the middle of the write leaves it.
            active.write_unpublished(&st.pending[..st.pending.len() / 2])?;
            return Err(CleanerError::io(&active.path(), e));
        }
        active.append_encoded(&st.pending, &st.pending_records)?;
        st.pending.clear();
        st.pending_records.clear();
        if st.pending.capacity() > 2 * PENDING_MAX_BYTES {
            // A huge record passed through: give its memory back.
            st.pending = Vec::new();
        }
        self.next_offset.store(last + 1, Ordering::Release);
        self.appended.notify(usize::MAX);
        Ok(())
    }

    /// Start a new, empty active segment at the end offset (if the current
    /// one holds anything), so everything before it becomes cleanable.
    pub fn roll(&self, now_ms: i64) -> Result<bool> {
        let mut st = lock(&self.append_lock);
        self.write_pending(&mut st)?;
        match self.segments().last() {
            Some(s) if s.is_empty() => Ok(false),
            None => Ok(false),
            Some(_) => {
                self.roll_locked(self.next_offset(), now_ms)?;
                Ok(true)
            }
        }
    }

    /// Roll if the active segment is older than `segment_ms` (idle logs).
    pub fn roll_if_old(&self, segment_ms: i64, now_ms: i64) -> Result<bool> {
        let old = self
            .segments()
            .last()
            .is_some_and(|s| !s.is_empty() && now_ms.saturating_sub(s.created_ms()) >= segment_ms);
        if old {
            self.roll(now_ms)
        } else {
            Ok(false)
        }
    }

    fn roll_locked(&self, base: u64, now_ms: i64) -> Result<Arc<Segment>> {
        // The segment sealed here is synced by the next flush, which then
        // renames the new one from `.new` (`sealed_unsynced`, `open`). A
        // log's first segment has none before it to vouch for.
        let name = match self.segments().last() {
            Some(prev) => {
                lock(&self.sealed_unsynced).push(Arc::clone(prev));
                new_segment_file_name(base)
            }
            None => segment_file_name(base),
        };
        let seg = Arc::new(Segment::create(self.dir.join(name), base, now_ms)?);
        // Its name is durable by the next flush, before a checkpoint
        // claims a record in it: no fsync on the dispatcher's path (a new
        // partition's first record comes here, and every roll).
        self.names.note(&self.dir);
        self.segments
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&seg));
        tracing::debug!(tp = %self.tp, base, "compacted log rolled");
        Ok(seg)
    }

    /// Make every appended record durable.
    ///
    /// The fsyncs run after the append lock is let go: every record
    /// appended so far is then written to the active segment taken under
    /// the lock, or to an older one, which is synced already or waits in
    /// `sealed_unsynced`, so syncing those covers them all. Once those
    /// are synced, the `.new` segments there were at the start are
    /// renamed `<base>.log` ([`CompactedLog::open`] says why), and their
    /// directory noted for the names' sync. Held through the fsync, the lock made
    /// the dispatcher's next write to this log (`end_batch`) wait for it,
    /// so a record produced while the periodic checkpoint synced its log
    /// became visible only after a disk flush (milliseconds while the
    /// cleaner keeps the disk busy; issue 17 §2).
    ///
    /// Then the names made since the last flush (a new directory, a new
    /// segment: `CompactedLog::create`, the roll) are made durable.
    pub fn flush(&self) -> Result<()> {
        self.flush_segment()?;
        sync_names(&self.names)
    }

    /// [`CompactedLog::flush`] without the names: the compacted logs' flush
    /// syncs every log's segment first, then the names they share once.
    pub(crate) fn flush_segment(&self) -> Result<()> {
        let _one_flush = lock(&self.flush_lock);
        let (sealed, renames, active) = {
            let mut st = lock(&self.append_lock);
            self.write_pending(&mut st)?;
            let listed = self.segments();
            // Those a cleaning pass or retention has replaced or removed
            // since need nothing.
            let sealed: Vec<_> = std::mem::take(&mut *lock(&self.sealed_unsynced))
                .into_iter()
                .filter(|s| listed.iter().any(|l| Arc::ptr_eq(l, s)))
                .collect();
            let renames: Vec<_> = listed.iter().filter(|s| s.is_new()).cloned().collect();
            (sealed, renames, listed.last().cloned())
        };
        for (i, s) in sealed.iter().enumerate() {
            let synced = fault::check(&self.faults, FaultPoint::SyncCopies)
                .map_err(|e| CleanerError::io(&s.path(), e))
                .and_then(|()| s.flush());
            if let Err(e) = synced {
                // Still owed, and the `.new` names wait for them.
                lock(&self.sealed_unsynced).splice(0..0, sealed[i..].iter().cloned());
                return Err(e);
            }
        }
        if !renames.is_empty() {
            // Under the append lock, as retention's deletions are, so a
            // segment is never renamed and deleted at once.
            let _appends = lock(&self.append_lock);
            let listed = self.segments();
            // Only those still listed: retention may have deleted one
            // since, or the topic gone with its directory.
            for s in renames
                .iter()
                .filter(|s| s.is_new() && listed.iter().any(|l| Arc::ptr_eq(l, s)))
            {
                s.rename(self.dir.join(segment_file_name(s.base_offset())))?;
            }
            self.names.note(&self.dir);
        }
        if let Some(s) = active {
            fault::check(&self.faults, FaultPoint::SyncCopies)
                .map_err(|e| CleanerError::io(&s.path(), e))?;
            s.flush()?;
        }
        Ok(())
    }

    /// Up to `max_records` records with offset ≥ `from`, in order, stopping
    /// before `max_bytes` (but always at least one record if there is one).
    pub fn read(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<CompactedRecord>> {
        self.read_from_segments(from, max_records, max_bytes, false)
    }

    /// [`read`](Self::read) if the page cache holds every byte it reads,
    /// else `None`, without waiting for the disk either way: what an async
    /// worker may call. A long-poll at the end of the log reads bytes the
    /// dispatcher wrote a moment before, which the page cache holds; this
    /// spares it the hand-off to a blocking thread and back, two more
    /// wake-ups that a busy machine delays by milliseconds (issue 17 §2).
    /// The records are the same `read` returns.
    pub fn read_cached(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Option<Vec<CompactedRecord>>> {
        match self.read_from_segments(from, max_records, max_bytes, true) {
            Ok(records) => Ok(Some(records)),
            Err(CleanerError::NotCached { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn read_from_segments(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
        cached_only: bool,
    ) -> Result<Vec<CompactedRecord>> {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        let segments = self.segments();
        // The last segment whose base is ≤ from holds the first candidate;
        // if `from` is before the first segment, start at the beginning.
        let start = segments
            .partition_point(|s| s.base_offset() <= from)
            .saturating_sub(1);
        for seg in &segments[start..] {
            let at = seg.position_for(from);
            let mut reader = if cached_only {
                seg.reader_cached(at)
            } else {
                seg.reader(at)
            };
            loop {
                let rec = match reader.next_record() {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(e) => return Err(e),
                };
                if rec.offset.get() < from {
                    continue;
                }
                if out.len() >= max_records || (!out.is_empty() && bytes + rec.len() > max_bytes) {
                    return Ok(out);
                }
                bytes += rec.len();
                out.push(rec);
            }
        }
        Ok(out)
    }

    /// The first offset whose record's timestamp is ≥ `timestamp_ms`
    /// among the records the log holds (Kafka's ListOffsets rule over what
    /// compaction kept), or the end offset if none is: each segment's
    /// sparse index says whether and where (see `segment`), so one segment
    /// is read from one index entry on.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<u64> {
        self.offset_for_timestamp_from(0, timestamp_ms)
    }

    /// [`CompactedLog::offset_for_timestamp`] among the records at or
    /// after offset `from` (a partition's log start, which DeleteRecords
    /// moved): the answer is never a record below it, nor the record after
    /// it merely because an earlier one matched.
    pub fn offset_for_timestamp_from(&self, from: u64, timestamp_ms: i64) -> Result<u64> {
        for seg in self.segments() {
            if seg.stats().last_offset.is_some_and(|last| last < from) {
                continue;
            }
            let Some(pos) = seg.position_for_timestamp(timestamp_ms) else {
                continue;
            };
            // Records before either position are below `from` or below T.
            let mut reader = seg.reader(pos.max(seg.position_for(from)));
            while let Some(rec) = reader.next_record()? {
                if rec.offset.get() >= from && rec.timestamp_ms >= timestamp_ms {
                    return Ok(rec.offset.get());
                }
            }
            // Indexed but not yet readable (an append publishing its
            // length): the next segments, or the end.
        }
        Ok(self.next_offset())
    }

    /// The first record the log holds with the largest timestamp, as
    /// (offset, timestamp), or `None` when it holds none (Kafka's
    /// ListOffsets -3 over what compaction kept): the segments' running
    /// maxima, then the lookup of that timestamp.
    pub fn max_timestamp_record(&self) -> Result<Option<(u64, i64)>> {
        let Some(max_ts) = self
            .segments()
            .iter()
            .filter_map(|s| s.max_timestamp())
            .max()
        else {
            return Ok(None);
        };
        let offset = self.offset_for_timestamp(max_ts)?;
        Ok((offset < self.next_offset()).then_some((offset, max_ts)))
    }

    /// Recovery: drop records whose CommitLog copy is at or past
    /// `physical_end`: lost in a crash, or past the checkpoint and about to
    /// be replayed.
    ///
    /// They can be in sealed segments too, not just the active one. A roll
    /// fsyncs the compacted segment at once, while the CommitLog bytes it
    /// was copied from may still be in the page cache. A power loss then
    /// keeps the copy and loses the original. Left in place, such a copy
    /// would be served, and the offsets it holds would be handed out again
    /// to new records, whose copies the log would then skip as replays.
    /// Copies are in CommitLog order (within a partition, physical offsets
    /// grow with offsets, and cleaning keeps that order), so what goes is a
    /// tail: the newest segments whole and the end of one more, which
    /// becomes the active segment again. Newer segments are deleted before
    /// that one is cut, and a crash in between leaves a state the next
    /// recovery finishes.
    pub fn truncate_from_physical(&self, physical_end: PhysicalOffset) -> Result<usize> {
        let mut st = lock(&self.append_lock);
        self.write_pending(&mut st)?;
        let segments = self.segments();
        // Newest first: how each segment would be cut, up to the first one
        // whose last record stays (all older records stay too).
        let mut cuts = Vec::new();
        for seg in segments.iter().rev() {
            let cut = Cut::scan(seg, physical_end);
            let keeps_its_last = cut.dropped == 0 && cut.last_kept.is_some();
            cuts.push(cut);
            if keeps_its_last {
                break;
            }
        }
        let dropped: usize = cuts.iter().map(|c| c.dropped).sum();
        if dropped == 0 {
            return Ok(0);
        }
        // The segment to cut: the oldest scanned one that loses records.
        // Those after it lose everything they hold.
        let at = cuts
            .iter()
            .rposition(|c| c.dropped > 0)
            .expect("something is dropped");
        let keep = segments.len() - 1 - at;
        let newer = &segments[keep + 1..];
        for s in newer {
            let p = s.path();
            std::fs::remove_file(&p).map_err(|e| CleanerError::io(&p, e))?;
        }
        if !newer.is_empty() {
            fs_util::fsync_dir(&self.dir).map_err(|e| CleanerError::Store {
                path: self.dir.clone(),
                source: e,
            })?;
        }
        let cut = &cuts[at];
        let (path, base) = (segments[keep].path(), segments[keep].base_offset());
        drop(segments);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| CleanerError::io(&path, e))?;
        f.set_len(cut.keep_len)
            .map_err(|e| CleanerError::io(&path, e))?;
        durability::sync_all(&f, &path).map_err(|e| CleanerError::io(&path, e))?;
        let reopened = Arc::new(Segment::open(path, base, true)?);
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        segs.truncate(keep);
        segs.push(reopened);
        drop(segs);
        let next = cut.last_kept.map_or(base, |o| o + 1);
        st.next = next;
        self.next_offset.store(next, Ordering::Release);
        self.recovery_cut.fetch_min(next, Ordering::AcqRel);
        tracing::debug!(tp = %self.tp, dropped, segments_deleted = at, "cut the compacted log");
        Ok(dropped)
    }

    /// Before a cleaning pass retries after a failed one: bring the files
    /// to what startup would make of them ([`reconcile_dir`], the same
    /// function), then make the segment list match them.
    ///
    /// A pass can fail at any step of its swap, leaving a `.cleaned` file, a
    /// `.swap` file, old segments partly deleted, and a segment list that
    /// may or may not have the new segment in it. Retrying from that state
    /// could rename onto the `.swap` file of the segment it is replacing and
    /// then delete it as an old file, or leave a `.swap` that the next open
    /// applies over what later passes wrote. After this there is no leftover
    /// file, and every listed segment is the `<base>.log` on disk.
    ///
    /// Holds the append lock, so no append or roll changes the list while it
    /// is rebuilt. The active segment is kept as it is: a swap never covers
    /// it. Sealed segments are reopened (a scan each) when anything was
    /// changed on disk or a listed segment is not its `<base>.log`; that only
    /// happens after a failure. Returns whether the list was rebuilt.
    pub(crate) fn reconcile(&self) -> Result<bool> {
        let _appends = lock(&self.append_lock);
        let found = reconcile_dir(&self.dir)?;
        // Every segment file by base, `.new` ones as they are: in a running
        // log they are live segments that wait for the next flush.
        let mut files: Vec<(u64, PathBuf)> = found
            .bases
            .iter()
            .map(|&b| (b, self.dir.join(segment_file_name(b))))
            .chain(
                found
                    .new_bases
                    .iter()
                    .map(|&b| (b, self.dir.join(new_segment_file_name(b)))),
            )
            .collect();
        files.sort_unstable_by_key(|(b, _)| *b);
        let current = self.segments();
        let agrees = !found.changed
            && current.len() == files.len()
            && current
                .iter()
                .zip(&files)
                .all(|(s, (b, path))| s.base_offset() == *b && s.path() == *path);
        if agrees {
            return Ok(false);
        }
        let Some(active) = current.last() else {
            return Err(self.vanished("the log has no active segment"));
        };
        if files.last().map(|(b, _)| *b) != Some(active.base_offset()) {
            return Err(self.vanished("the active segment is not the newest file"));
        }
        let mut segments = Vec::with_capacity(files.len());
        for (base, path) in &files[..files.len() - 1] {
            segments.push(Arc::new(Segment::open(path.clone(), *base, false)?));
        }
        segments.push(Arc::clone(active));
        *self.segments.write().unwrap_or_else(|e| e.into_inner()) = segments;
        tracing::info!(tp = %self.tp, "compacted log reconciled with its files after a failed cleaning");
        Ok(true)
    }

    fn vanished(&self, reason: &'static str) -> CleanerError {
        CleanerError::Corruption {
            path: self.dir.clone(),
            at: Location::Whole,
            kind: CorruptionKind::SegmentList { reason },
        }
    }

    /// Swap `replacement` in for the segments with base offsets in
    /// `[base, end)`. The caller has written and fsynced the replacement and
    /// renamed it to its `.swap` name; see `cleaner/swap.rs` for the protocol.
    pub(crate) fn swap_in(
        &self,
        base: u64,
        end: u64,
        replacement: Arc<Segment>,
    ) -> Vec<Arc<Segment>> {
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        let first = segs.partition_point(|s| s.base_offset() < base);
        let last = segs.partition_point(|s| s.base_offset() < end);
        let old: Vec<_> = segs.splice(first..last, [replacement]).collect();
        old
    }

    /// Remove the oldest segments (retention of `compact,delete` topics),
    /// never the active one. Returns (segments, bytes) removed.
    ///
    /// One segment at a time, oldest first: out of the list (so no new
    /// read starts on it; a read under way keeps its open file), then its
    /// file deleted. If a deletion fails, that segment goes back at the
    /// front and the younger ones are not touched, so the list in memory
    /// and the files on disk agree: records a failed deletion leaves are
    /// still served, and none come back after a restart that were gone
    /// before it.
    pub(crate) fn delete_oldest(&self, count: usize) -> Result<(usize, u64)> {
        let mut st = lock(&self.append_lock);
        self.write_pending(&mut st)?;
        let (mut removed, mut bytes) = (0, 0);
        while removed < count {
            let oldest = {
                let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
                if segs.len() <= 1 {
                    break;
                }
                segs.remove(0)
            };
            let p = oldest.path();
            if let Err(e) = std::fs::remove_file(&p) {
                let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
                segs.insert(0, oldest);
                return Err(CleanerError::io(&p, e));
            }
            removed += 1;
            bytes += oldest.len();
        }
        Ok((removed, bytes))
    }
}

/// How recovery would cut one segment at a CommitLog position.
struct Cut {
    /// Bytes of the records that stay (they come first).
    keep_len: u64,
    /// Offset of the last record that stays.
    last_kept: Option<u64>,
    /// Records at or past the position.
    dropped: usize,
}

impl Cut {
    fn scan(seg: &Segment, physical_end: PhysicalOffset) -> Cut {
        let mut cut = Cut {
            keep_len: 0,
            last_kept: None,
            dropped: 0,
        };
        let mut reader = seg.reader(0);
        while let Ok(Some(r)) = reader.next_record() {
            if r.physical_offset >= physical_end {
                cut.dropped += 1;
            } else if cut.dropped == 0 {
                cut.keep_len = reader.position();
                cut.last_kept = Some(r.offset.get());
            }
        }
        cut
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
