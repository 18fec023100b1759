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

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use event_listener::{Event, EventListener};
use tidelog_storage::durability;
use tidelog_storage::fs_util::{self, offset_file_name, parse_offset_file_name};
use tidelog_storage::{PhysicalOffset, TopicPartition};

use super::format::{self, CompactedRecord, Fields};
use super::segment::{
    RecordMeta, Segment, CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, NEW_SUFFIX, SWAP_SUFFIX,
};
use crate::error::{CleanerError, CorruptionKind, Location, Result};
use crate::fault::{self, FaultHandle, FaultPoint};

/// fsync the directories that gained names since the last call.
pub(crate) fn sync_names(names: &fs_util::PendingDirSyncs) -> Result<()> {
    names.sync().map(drop).map_err(|e| CleanerError::Store {
        path: PathBuf::from(super::COMPACTED_DIR),
        source: e,
    })
}

fn io_err(path: &Path, source: std::io::Error) -> CleanerError {
    CleanerError::Io {
        path: path.to_path_buf(),
        source,
    }
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
///   the last checkpoint, which [`CompactedLog::open`] deletes; in a
///   running log a live segment that waits for the next flush.
///
/// Ends with an fsync of the directory, so what it did is durable before
/// anything else happens to the log.
pub(crate) fn reconcile_dir(dir: &Path) -> Result<Reconciled> {
    let mut bases = Vec::new();
    let mut new_bases = Vec::new();
    let mut swaps = Vec::new();
    let mut changed = false;
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
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
            std::fs::remove_file(entry.path()).map_err(|e| io_err(&entry.path(), e))?;
            changed = true;
        } else if name.ends_with(CLEANED_SUFFIX) {
            tracing::info!(path = %entry.path().display(), "removing an unfinished .cleaned file");
            std::fs::remove_file(entry.path()).map_err(|e| io_err(&entry.path(), e))?;
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
            std::fs::remove_file(&old).map_err(|e| io_err(&old, e))?;
        }
        bases.retain(|&b| b < base || b >= end);
        let to = dir.join(segment_file_name(base));
        std::fs::rename(&path, &to).map_err(|e| io_err(&to, e))?;
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

impl CompactedLog {
    /// Open (or create) the log in `dir`: finish or roll back an interrupted
    /// swap and drop leftover `.cleaned` files ([`reconcile_dir`]), drop the
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
                std::fs::remove_file(path).map_err(|e| io_err(path, e))?;
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
            return Err(io_err(&active.path(), e));
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
    /// segment: [`CompactedLog::create`], the roll) are made durable.
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
                .map_err(|e| io_err(&s.path(), e))
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
            fault::check(&self.faults, FaultPoint::SyncCopies).map_err(|e| io_err(&s.path(), e))?;
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
            std::fs::remove_file(&p).map_err(|e| io_err(&p, e))?;
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
            .map_err(|e| io_err(&path, e))?;
        f.set_len(cut.keep_len).map_err(|e| io_err(&path, e))?;
        durability::sync_all(&f, &path).map_err(|e| io_err(&path, e))?;
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
                return Err(io_err(&p, e));
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
mod tests {
    use tidelog_storage::QueueOffset;

    use super::*;
    use crate::compacted::format::{encode_record, Fields};

    fn record(offset: u64) -> CompactedRecord {
        encode_record(&Fields {
            offset: QueueOffset::new(offset),
            timestamp_ms: 1,
            store_timestamp_ms: 1,
            delete_horizon_ms: 0,
            physical_offset: PhysicalOffset::new(offset * 100),
            key: Some(b"k"),
            value: Some(b"v"),
            headers_block: &[],
            header_count: 0,
        })
    }

    fn roll_policy() -> RollPolicy {
        RollPolicy {
            segment_bytes: 1 << 20,
            segment_ms: i64::MAX,
        }
    }

    /// Drop a file's pages from the page cache (they are clean: the log
    /// was flushed), as memory pressure would.
    #[cfg(target_os = "linux")]
    /// Drop `path`'s pages from the page cache, and check that they are
    /// gone: `POSIX_FADV_DONTNEED` is advice, and skips a page that is
    /// busy at that moment (under writeback, or being read), which a
    /// loaded machine makes likely enough to fail a test now and then. So
    /// it is repeated, a bounded number of times, until `mincore` finds
    /// no page resident; a test that needed the eviction fails here, with
    /// the reason, rather than on what it meant to check.
    fn evict_from_page_cache(path: &Path) {
        use std::os::unix::io::AsRawFd;
        let f = std::fs::File::open(path).unwrap();
        if f.metadata().unwrap().len() == 0 {
            return;
        }
        // SAFETY: a read-only mapping of a file only this test writes,
        // made to ask `mincore` which of its pages are resident; it is
        // never read.
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        let pages = map.len().div_ceil(page);
        let mut resident = vec![0u8; pages];
        for _ in 0..50 {
            // SAFETY: plain syscall on an fd we own.
            let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            assert_eq!(rc, 0);
            // SAFETY: `map` is a live mapping of `map.len()` bytes and
            // `resident` has a byte for each of its pages.
            let rc = unsafe {
                libc::mincore(
                    map.as_ptr() as *mut libc::c_void,
                    map.len(),
                    resident.as_mut_ptr(),
                )
            };
            assert_eq!(rc, 0);
            if resident.iter().all(|b| b & 1 == 0) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!(
            "{}: pages still in the page cache after 50 evictions",
            path.display()
        );
    }

    /// A read of bytes the page cache holds answers as `read` does; once
    /// they are evicted, `read_cached` answers `None` or exactly what
    /// `read` does (a readahead its miss started may have finished), and
    /// `read` still reads them. Needs a file system with non-blocking
    /// buffered reads (ext4, xfs, btrfs; tmpfs has none, and
    /// `read_cached` always answers `None` there).
    #[cfg(target_os = "linux")]
    #[test]
    fn read_cached_reads_the_page_cache_and_serves_only_the_right_records() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0).unwrap();
        let log = CompactedLog::open(tp, dir.path().to_path_buf()).unwrap();
        for offset in 0..50 {
            log.append(&record(offset), roll_policy(), 0).unwrap();
        }
        log.end_batch().unwrap();
        let read = log.read(10, 5, usize::MAX).unwrap();
        assert_eq!(read.len(), 5);
        let cached = log.read_cached(10, 5, usize::MAX).unwrap();
        let offsets =
            |rs: &[CompactedRecord]| rs.iter().map(|r| r.offset.get()).collect::<Vec<_>>();
        assert_eq!(
            cached.as_deref().map(offsets),
            Some(offsets(&read)),
            "bytes just written are in the page cache"
        );
        assert_eq!(
            log.read_cached(50, 5, usize::MAX).unwrap().map(|r| r.len()),
            Some(0),
            "at the end: nothing, without waiting"
        );

        log.flush().unwrap();
        // Evicted, the bytes need the disk. `RWF_NOWAIT` never waits for
        // it, but the miss may start readahead, and that can finish before
        // the kernel looks at the page again: on a fast disk, or when the
        // host descheduled this vCPU meanwhile (CI saw it five times in
        // five on a loaded host). Either answer is correct, so neither is
        // required here (the refusal's meaning is checked on every
        // answer the kernel gives, in `segment.rs`); what is required is
        // that a served read is exactly the records `read` gives.
        for seg in log.segments() {
            evict_from_page_cache(&seg.path());
        }
        if let Some(rs) = log.read_cached(10, 5, usize::MAX).unwrap() {
            assert_eq!(offsets(&rs), offsets(&read));
        }
        for seg in log.segments() {
            evict_from_page_cache(&seg.path());
        }
        assert_eq!(
            offsets(&log.read(10, 5, usize::MAX).unwrap()),
            offsets(&read)
        );
        // The blocking read brought them back.
        assert!(log.read_cached(10, 5, usize::MAX).unwrap().is_some());
    }

    /// The fsync of a flush (the store's checkpoint) does not hold the
    /// append lock: while it waits for the disk, the dispatcher writes and
    /// publishes the log's next copies. It held the lock before, and a
    /// record produced during a checkpoint became visible only after the
    /// fsync (issue 17 §2).
    #[cfg(feature = "failpoints")]
    #[test]
    fn copies_are_written_and_visible_while_a_flush_waits_for_the_disk() {
        use crate::fault::Faults;
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0).unwrap();
        let faults = Arc::new(Faults::default());
        let log = Arc::new(
            CompactedLog::open(tp, dir.path().to_path_buf())
                .unwrap()
                .with_faults(FaultHandle::new(Arc::clone(&faults))),
        );
        log.append(&record(0), roll_policy(), 0).unwrap();
        faults.hang(FaultPoint::SyncCopies);
        let flushing = std::thread::spawn({
            let log = Arc::clone(&log);
            move || log.flush()
        });
        while faults.blocked(FaultPoint::SyncCopies) == 0 {
            assert!(!flushing.is_finished(), "the flush ended before its fsync");
            std::thread::yield_now();
        }
        let free = log.append_lock.try_lock().is_ok();
        if free {
            // The dispatcher's next round, on this thread: it cannot wait.
            log.append(&record(1), roll_policy(), 0).unwrap();
            log.end_batch().unwrap();
        }
        let visible = log.next_offset();
        let read = log.read(0, 10, usize::MAX).unwrap().len();
        faults.heal();
        flushing.join().unwrap().unwrap();
        assert!(free, "the flush held the append lock through its fsync");
        assert_eq!(
            (visible, read),
            (2, 2),
            "the second copy, written during the fsync"
        );
    }

    /// A failed deletion leaves that segment listed and every younger one
    /// untouched (they were dropped from the list before, and came back
    /// from disk at the next start).
    #[test]
    fn a_failed_deletion_keeps_the_list_and_the_files_in_step() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0).unwrap();
        let log = CompactedLog::open(tp, dir.path().to_path_buf()).unwrap();
        let roll = RollPolicy {
            segment_bytes: 1 << 20,
            segment_ms: i64::MAX,
        };
        for offset in 0..4 {
            log.append(&record(offset), roll, 0).unwrap();
            log.end_batch().unwrap();
            log.roll(0).unwrap();
        }
        let before: Vec<PathBuf> = log.segments().iter().map(|s| s.path()).collect();
        assert!(before.len() >= 4, "{before:?}");
        // The second oldest cannot be deleted: a directory stands at its
        // path (remove_file refuses a directory, also as root).
        std::fs::remove_file(&before[1]).unwrap();
        std::fs::create_dir(&before[1]).unwrap();
        assert!(log.delete_oldest(3).is_err());
        let after: Vec<PathBuf> = log.segments().iter().map(|s| s.path()).collect();
        assert_eq!(after, before[1..], "only the oldest is gone");
        assert!(!before[0].exists());
        assert!(before[2..].iter().all(|p| p.exists()));
        // Once it can be deleted, retention goes on from there.
        std::fs::remove_dir(&before[1]).unwrap();
        std::fs::write(&before[1], b"").unwrap();
        assert_eq!(log.delete_oldest(1).unwrap().0, 1);
        assert_eq!(log.segments().len(), before.len() - 2);
    }

    fn offsets(log: &CompactedLog) -> Vec<u64> {
        log.read(0, usize::MAX, usize::MAX)
            .unwrap()
            .iter()
            .map(|r| r.offset.get())
            .collect()
    }

    fn file_names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// A roll syncs nothing: the sealed segment waits for the next flush,
    /// and the new one is named `.new` until that flush has synced it.
    #[test]
    fn a_roll_leaves_the_sealed_segment_to_the_next_flush() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0).unwrap();
        let log = CompactedLog::open(tp, dir.path().to_path_buf()).unwrap();
        log.append(&record(0), roll_policy(), 0).unwrap();
        log.roll(0).unwrap();
        log.append(&record(1), roll_policy(), 0).unwrap();
        log.end_batch().unwrap();
        let segments = log.segments();
        assert!(
            !segments[0].is_synced(),
            "the roll synced the sealed segment"
        );
        assert!(segments[1].is_new());
        assert_eq!(log.first_new_base(), Some(1));
        assert_eq!(
            file_names(dir.path()),
            [segment_file_name(0), new_segment_file_name(1)]
        );
        log.flush().unwrap();
        assert!(segments.iter().all(|s| s.is_synced() && !s.is_new()));
        assert_eq!(log.first_new_base(), None);
        assert_eq!(
            file_names(dir.path()),
            [segment_file_name(0), segment_file_name(1)]
        );
        assert_eq!(offsets(&log), [0, 1]);
    }

    /// At open, a `.new` segment and every newer one hold copies made
    /// since the last checkpoint: they go (recovery copies them again),
    /// and the segment before them, which a power loss may have left
    /// torn, has its tail repaired as the newest.
    #[test]
    fn open_drops_the_segments_made_since_the_last_flush_and_repairs_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0).unwrap();
        let log = CompactedLog::open(tp.clone(), dir.path().to_path_buf()).unwrap();
        for offset in 0..8 {
            log.append(&record(offset), roll_policy(), 0).unwrap();
            if offset % 2 == 1 {
                log.roll(0).unwrap();
            }
            if offset == 3 {
                log.flush().unwrap();
            }
        }
        log.end_batch().unwrap();
        // [0, 1], [2, 3] and [4, 5] renamed by the flush (the roll after
        // offset 3 came before it); [6, 7] and the empty active one are
        // still `.new`.
        let names = file_names(dir.path());
        assert_eq!(
            names.iter().filter(|n| n.ends_with(NEW_SUFFIX)).count(),
            2,
            "{names:?}"
        );
        let sealed = log.segments()[2].path();
        drop(log);
        // Power loss: the segment sealed before the `.new` ones lost its
        // last record to zeros, and one newer segment has a `.log` name
        // (renames reach the disk in any order).
        let len = std::fs::metadata(&sealed).unwrap().len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&sealed)
            .unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &vec![0; (len / 2) as usize], len - len / 2)
            .unwrap();
        std::fs::rename(
            dir.path().join(new_segment_file_name(8)),
            dir.path().join(segment_file_name(8)),
        )
        .unwrap();
        let log = CompactedLog::open(tp, dir.path().to_path_buf()).unwrap();
        assert_eq!(offsets(&log), [0, 1, 2, 3, 4]);
        assert_eq!(log.next_offset(), 5);
        assert_eq!(
            file_names(dir.path()),
            [
                segment_file_name(0),
                segment_file_name(2),
                segment_file_name(4)
            ]
        );
        // The replay appends the lost records to the repaired segment.
        for offset in 5..9 {
            log.append(&record(offset), roll_policy(), 0).unwrap();
        }
        log.end_batch().unwrap();
        assert_eq!(offsets(&log), (0..9).collect::<Vec<_>>());
    }
}
