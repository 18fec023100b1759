//! The CommitLog: one append-only log shared by every topic and partition.
//!
//! Bytes `[min_offset, committed)` are whole, valid entries (each the
//! records of one partition from one append, see [`format`]) and
//! end-of-segment markers; everything a reader sees lies below
//! `committed`. One writer at a time (the `writer` mutex) assigns queue and
//! physical offsets, writes entries into the segment, then publishes the
//! new `committed` position.
//!
//! Lock order: `writer` → `segments` → `flush_state` → `poison_reason`. No
//! lock is held while waiting for an fsync except `flush_state`'s condition
//! variables.
//!
//! Flushing under `flush: sync`: appenders do not flush themselves. They
//! raise `FlushState::requested` and wait, for at most
//! `sync_flush_timeout_ms`, for `flushed` to pass their end; the
//! `tidelog-sync-flush` thread flushes everything committed whenever a
//! request is above `flushed` (RocketMQ's GroupCommitService). So a hung
//! fsync holds up that thread only, and every appender gets its answer in
//! time: [`StoreError::FlushTimedOut`] if the flush has not returned.

pub mod format;
pub mod record;
pub mod segment;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use bytes::Bytes;
use event_listener::Event;

pub use self::format::Header;
use self::format::{Decoded, EntryBuilder, EntryFields, Invalid, RecordFields, END_MARKER_LEN};
pub use self::record::{AppendRecord, Appended, Entry, StoredRecord};
use self::segment::Segment;
use crate::config::StoreConfig;
use crate::error::{CorruptionKind, Result, StoreError};
use crate::fault::{self, FaultPoint};
use crate::types::{now_ms, PhysicalOffset, QueueOffset, TopicPartition};

/// Per-partition counters of the next queue offset, owned by the writer:
/// topic → partition → next offset. Keyed by topic first so the append
/// path looks a partition up by `&str` without allocating.
#[derive(Default)]
pub struct NextOffsets(
    HashMap<Arc<str>, HashMap<u32, u64, ahash::RandomState>, ahash::RandomState>,
);

impl NextOffsets {
    pub fn insert(&mut self, tp: &TopicPartition, next: u64) {
        self.0
            .entry(Arc::clone(tp.topic_arc()))
            .or_default()
            .insert(tp.partition(), next);
    }

    pub fn get(&self, topic: &str, partition: u32) -> Option<u64> {
        self.0.get(topic)?.get(&partition).copied()
    }

    /// The counters of `topic`'s partitions, created empty if it has none.
    /// The append path looks the topic up once per run of its records.
    fn topic_mut(&mut self, topic: &Arc<str>) -> &mut HashMap<u32, u64, ahash::RandomState> {
        if !self.0.contains_key(&**topic) {
            self.0.insert(Arc::clone(topic), HashMap::default());
        }
        self.0.get_mut(&**topic).expect("inserted above")
    }
}

struct WriterState {
    /// Where the next record goes; equals `committed` between appends.
    write_pos: u64,
    next_offsets: NextOffsets,
    /// Topics deleted in this run and not created again: their appends are
    /// refused, so no record gets an offset past the next offsets the
    /// deletion kept (see [`CommitLog::close_topic`]).
    closed_topics: HashSet<Arc<str>, ahash::RandomState>,
    /// Reused encoding buffer, so appends do not allocate.
    scratch: Vec<u8>,
}

#[derive(Default)]
struct FlushState {
    in_progress: bool,
    /// The highest position a sync-flush waiter asked to see flushed.
    requested: u64,
}

/// Longest the sync flusher sleeps without a request (a safety net: every
/// request notifies it).
const SYNC_FLUSH_IDLE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Largest entry the writer builds: the records of one partition in one
/// append beyond it continue in another entry. A reader by physical offset
/// walks (and checks) at most one entry, and the whole-or-nothing unit of a
/// torn write stays small.
pub const ENTRY_BYTES_TARGET: usize = 1 << 20;

/// One entry of an append being planned: which records (a range of the
/// batch's partition order), its length, where it goes.
struct PlannedEntry {
    records: std::ops::Range<usize>,
    len: usize,
    at: u64,
}

fn record_fields(r: &AppendRecord, store_ts: i64) -> RecordFields<'_> {
    RecordFields {
        producer_timestamp_ms: r.timestamp_ms.unwrap_or(store_ts),
        key: r.key.as_deref(),
        value: r.value.as_deref(),
        headers: &r.headers,
    }
}

fn same_partition(a: &AppendRecord, b: &AppendRecord) -> bool {
    a.partition == b.partition && a.topic == b.topic
}

/// What starts at a physical offset, for sequential readers.
pub enum Next {
    Entry(Entry),
    /// No record here; continue at this offset (after an end marker).
    Skip(u64),
    /// Nothing committed at or after this offset yet.
    End,
}

pub struct CommitLog {
    dir: PathBuf,
    segment_bytes: u64,
    max_message_bytes: u64,
    preallocate: bool,
    faults: crate::fault::FaultHandle,
    segments: RwLock<Vec<Arc<Segment>>>,
    writer: Mutex<WriterState>,
    committed: AtomicU64,
    flushed: AtomicU64,
    poisoned: AtomicBool,
    poison_reason: Mutex<String>,
    flush_state: Mutex<FlushState>,
    flush_done: Condvar,
    /// Wakes the sync flusher: a new request, or the store stops.
    flush_wanted: Condvar,
    /// Notified after every append, for the dispatcher.
    appended: Event,
    prealloc: Preallocator,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of our locks leaves plain data behind (no
    // half-applied invariants: every update is a single assignment), so
    // continuing with the inner value is sound.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl CommitLog {
    /// Build a log over recovered `segments` (sorted, contiguous) whose valid
    /// bytes end at `end`. Recovery has already checked and truncated them.
    pub(crate) fn new(
        config: &StoreConfig,
        dir: PathBuf,
        segments: Vec<Arc<Segment>>,
        end: u64,
        next_offsets: NextOffsets,
        faults: crate::fault::FaultHandle,
    ) -> Arc<CommitLog> {
        let log = Arc::new(CommitLog {
            dir,
            segment_bytes: config.commitlog_segment_bytes,
            max_message_bytes: config.record_payload_max(),
            preallocate: config.preallocate_next_segment,
            faults,
            segments: RwLock::new(segments),
            writer: Mutex::new(WriterState {
                write_pos: end,
                next_offsets,
                closed_topics: HashSet::default(),
                scratch: Vec::new(),
            }),
            committed: AtomicU64::new(end),
            flushed: AtomicU64::new(end),
            poisoned: AtomicBool::new(false),
            poison_reason: Mutex::new(String::new()),
            flush_state: Mutex::new(FlushState::default()),
            flush_done: Condvar::new(),
            flush_wanted: Condvar::new(),
            appended: Event::new(),
            prealloc: Preallocator::default(),
        });
        if log.preallocate {
            // The warm-up window starts at the write position: after a
            // restart the active segment's unwritten pages are cold too.
            log.prealloc.warmed_to.store(end, Ordering::Release);
            log.request_next_segment(end);
        }
        log
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One past the last committed byte.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// Everything below this is on disk.
    pub fn flushed(&self) -> u64 {
        self.flushed.load(Ordering::Acquire)
    }

    /// First byte still in the log (the oldest segment's base).
    pub fn min_offset(&self) -> u64 {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        segs.first().map_or_else(|| self.committed(), |s| s.base())
    }

    pub fn segment_count(&self) -> usize {
        self.segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// A snapshot of the segment list, oldest first.
    pub fn segments(&self) -> Vec<Arc<Segment>> {
        self.segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Retention: delete the oldest segment if it is still `base` and is
    /// not the one being written. Its file is unlinked now; its mapping goes
    /// away when the last reader drops it. Returns the bytes freed.
    pub fn delete_oldest_segment(&self, base: u64) -> Result<Option<u64>> {
        let write_pos = lock(&self.writer).write_pos;
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        match segs.first() {
            Some(s) if s.base() == base && s.end() <= write_pos && segs.len() > 1 => {}
            _ => return Ok(None),
        }
        let seg = segs.remove(0);
        drop(segs);
        if let Err(e) = std::fs::remove_file(seg.path()) {
            // Put it back: nothing was deleted, a later pass retries.
            self.segments
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(0, Arc::clone(&seg));
            return Err(StoreError::io(seg.path(), e));
        }
        crate::fs_util::fsync_dir(&self.dir)?;
        Ok(Some(seg.size()))
    }

    /// The event the dispatcher listens on.
    pub(crate) fn appended_event(&self) -> &Event {
        &self.appended
    }

    /// Recovery: where each partition's queue offsets continue.
    pub(crate) fn set_next_offsets(&self, next: NextOffsets) {
        lock(&self.writer).next_offsets = next;
    }

    /// The next queue offset the writer will assign in `tp`.
    pub fn next_queue_offset(&self, tp: &TopicPartition) -> u64 {
        lock(&self.writer)
            .next_offsets
            .get(tp.topic(), tp.partition())
            .unwrap_or(0)
    }

    /// A topic is being deleted: from now on its appends are refused (until
    /// [`CommitLog::open_partition`]), and the writer's next queue offset
    /// of every partition of `topic` it has assigned offsets in (or was
    /// told of at open) is returned. Both happen under the writer's lock,
    /// so every record of the topic either got its offset before and is
    /// counted in what is returned, or is refused: none can take an offset
    /// at or past what the deletion keeps and be indexed as a new
    /// incarnation of the deleted topic.
    pub fn close_topic(&self, topic: &str) -> Vec<(u32, u64)> {
        let mut w = lock(&self.writer);
        w.closed_topics.insert(Arc::from(topic));
        w.next_offsets
            .0
            .get(topic)
            .map(|parts| parts.iter().map(|(&p, &n)| (p, n)).collect())
            .unwrap_or_default()
    }

    /// A partition of `tp`'s topic is created (or the topic created again
    /// after a deletion): appends to the topic are accepted again, and the
    /// queue offset its next record gets is returned (the base of the new
    /// incarnation). One lock for both, so no refused-then-accepted record
    /// can slip below the returned base.
    pub fn open_partition(&self, tp: &TopicPartition) -> u64 {
        let mut w = lock(&self.writer);
        w.closed_topics.remove(tp.topic());
        w.next_offsets.get(tp.topic(), tp.partition()).unwrap_or(0)
    }

    fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(StoreError::Poisoned {
                reason: lock(&self.poison_reason).clone(),
            });
        }
        Ok(())
    }

    fn poison(&self, reason: String) {
        tracing::error!(%reason, "commit log refuses further appends");
        *lock(&self.poison_reason) = reason;
        self.poisoned.store(true, Ordering::Release);
    }

    /// Check a record against the limits before anything is written. The
    /// topic name is checked by the caller, once per run of records of
    /// one topic.
    fn validate(&self, r: &AppendRecord) -> Result<()> {
        if r.headers.len() > format::HEADER_COUNT_MAX {
            return Err(StoreError::invalid(format!(
                "{} headers; at most {} allowed",
                r.headers.len(),
                format::HEADER_COUNT_MAX
            )));
        }
        if let Some(h) = r
            .headers
            .iter()
            .find(|h| h.name.len() > format::HEADER_NAME_MAX)
        {
            return Err(StoreError::invalid(format!(
                "header name of {} bytes; at most {} allowed",
                h.name.len(),
                format::HEADER_NAME_MAX
            )));
        }
        let key_len = r.key.as_ref().map(|k| k.len());
        let value_len = r.value.as_ref().map(|v| v.len());
        let payload = key_len.unwrap_or(0) as u64
            + value_len.unwrap_or(0) as u64
            + format::headers_block_len(&r.headers) as u64;
        if payload > self.max_message_bytes {
            return Err(StoreError::RecordTooLarge {
                size: payload,
                limit: self.max_message_bytes,
            });
        }
        // The record must fit an entry of its own in an empty segment.
        let len = format::entry_header_len(r.topic.len())
            + format::record_len_bound(key_len, value_len, &r.headers);
        if len > format::RECORD_LEN_MAX || (len + END_MARKER_LEN) as u64 > self.segment_bytes {
            return Err(StoreError::RecordTooLarge {
                size: len as u64,
                limit: (self.segment_bytes.saturating_sub(END_MARKER_LEN as u64))
                    .min(format::RECORD_LEN_MAX as u64),
            });
        }
        Ok(())
    }

    /// Append a batch (one produce request) as one unit: every record is
    /// validated first, so either all of it is appended or none. Returns
    /// where each record landed, in the batch's order, and the log position
    /// after the batch. Does not wait for a flush; see
    /// [`CommitLog::wait_flushed`] and [`CommitLog::flush_all`].
    ///
    /// The records of one partition go into one entry (see [`format`]),
    /// or several if they exceed [`ENTRY_BYTES_TARGET`]; each partition's
    /// records keep the batch's order, and so do their queue offsets.
    pub fn append(&self, batch: &[AppendRecord]) -> Result<(Vec<Appended>, u64)> {
        let mut checked_topic: Option<&str> = None;
        for r in batch {
            if checked_topic != Some(&*r.topic) {
                crate::types::validate_topic_name(&r.topic)?;
                checked_topic = Some(&r.topic);
            }
            self.validate(r)?;
        }
        // A produce request usually goes to one partition; a mixed batch is
        // grouped by partition (a stable sort keeps each one's order).
        let mut order: Vec<usize> = (0..batch.len()).collect();
        if !batch.windows(2).all(|w| same_partition(&w[0], &w[1])) {
            order.sort_by(|&a, &b| {
                let (a, b) = (&batch[a], &batch[b]);
                (&*a.topic, a.partition).cmp(&(&*b.topic, b.partition))
            });
        }
        let mut w = lock(&self.writer);
        self.check_poisoned()?;
        if !w.closed_topics.is_empty() {
            if let Some(r) = batch.iter().find(|r| w.closed_topics.contains(&*r.topic)) {
                return Err(StoreError::TopicDeleted {
                    topic: r.topic.to_string(),
                });
            }
        }
        let store_ts = now_ms();
        let fields = |r| record_fields(r, store_ts);

        // Plan: the entries (their records and exact lengths), where each
        // goes and which segments that needs, before anything is written.
        let cap = ENTRY_BYTES_TARGET.min(self.segment_bytes as usize - END_MARKER_LEN);
        let mut plan: Vec<PlannedEntry> = Vec::new();
        let mut pos = w.write_pos;
        let mut seg = self.segment_for_write(pos)?;
        let mut i = 0;
        while i < order.len() {
            let first = &batch[order[i]];
            let mut len = format::entry_header_len(first.topic.len());
            let mut j = i;
            while j < order.len() {
                let r = &batch[order[j]];
                if j > i && !same_partition(first, r) {
                    break;
                }
                let rec_len = format::record_len(len, (j - i) as u64, store_ts, &fields(r));
                if j > i && len + rec_len > cap {
                    break;
                }
                len += rec_len;
                j += 1;
            }
            if pos + (len + END_MARKER_LEN) as u64 > seg.end() {
                pos = seg.end();
                seg = self.segment_for_write(pos)?;
            }
            plan.push(PlannedEntry {
                records: i..j,
                len,
                at: pos,
            });
            pos += len as u64;
            i = j;
        }
        let end = pos;

        // Encode the entries into the scratch buffer, one contiguous run per
        // segment, and hand each run to the kernel with one positioned
        // write. Writing through write(2) rather than through the map is
        // what makes appends run near the disk's bandwidth: a store into a
        // mapped page takes a page fault per page, write(2) copies into the
        // page cache in bulk. Readers still read through the map, which
        // sees the same page cache.
        let mut out = vec![Appended::default(); batch.len()];
        let mut cursor = w.write_pos;
        let mut run_start = cursor;
        let mut scratch = std::mem::take(&mut w.scratch);
        scratch.clear();
        let WriterState { next_offsets, .. } = &mut *w;
        // The partition counters of the topic of the current run of entries.
        let mut counters: Option<(&str, &mut HashMap<u32, u64, ahash::RandomState>)> = None;
        for e in &plan {
            if e.at != cursor {
                // The entry did not fit: mark the rest of the old segment,
                // and write out what this segment got.
                let mut marker = [0u8; END_MARKER_LEN];
                format::encode_end_marker(&mut marker, cursor, e.at - cursor);
                scratch.extend_from_slice(&marker);
                self.write_run(run_start, &scratch)?;
                if let Some(s) = self.segment_containing(run_start) {
                    s.note_store_ts(store_ts);
                    s.seal();
                }
                scratch.clear();
                run_start = e.at;
            }
            let first = &batch[order[e.records.start]];
            if counters
                .as_ref()
                .is_none_or(|(topic, _)| *topic != &*first.topic)
            {
                counters = Some((&first.topic, next_offsets.topic_mut(&first.topic)));
            }
            let (_, topic_counters) = counters.as_mut().expect("set above");
            let tp_next = topic_counters.entry(first.partition).or_insert(0);
            let base = *tp_next;
            *tp_next += e.records.len() as u64;
            let start = scratch.len();
            let mut entry = EntryBuilder::begin(
                &mut scratch,
                &EntryFields {
                    base_queue_offset: base,
                    store_timestamp_ms: store_ts,
                    topic: &first.topic,
                    partition: first.partition,
                },
            );
            for (k, &idx) in order[e.records.clone()].iter().enumerate() {
                let (at, len) = entry.push(&mut scratch, &fields(&batch[idx]));
                out[idx] = Appended {
                    queue_offset: QueueOffset(base + k as u64),
                    physical_offset: PhysicalOffset(e.at + at as u64),
                    size: len as u32,
                };
            }
            entry.finish(&mut scratch, e.at);
            debug_assert_eq!(scratch.len() - start, e.len);
            cursor = e.at + e.len as u64;
        }
        if !scratch.is_empty() {
            self.write_run(run_start, &scratch)?;
            if let Some(s) = self.segment_containing(run_start) {
                s.note_store_ts(store_ts);
            }
        }
        w.scratch = scratch;
        w.write_pos = end;
        self.committed.store(end, Ordering::Release);
        drop(w);
        self.appended.notify(usize::MAX);
        if self.preallocate {
            self.prealloc.writer_at(end);
        }
        Ok((out, end))
    }

    /// Write `bytes` at physical offset `pos` (all inside one segment, past
    /// the committed position). A failed write poisons the log: nobody
    /// knows what reached the page cache, and nothing of the batch is
    /// published.
    fn write_run(&self, pos: u64, bytes: &[u8]) -> Result<()> {
        let Some(s) = self.segment_containing(pos) else {
            debug_assert!(false, "planned segment at {pos} is missing");
            return Err(StoreError::inconsistent(
                &self.dir,
                pos,
                "the segment planned for this write is missing",
            ));
        };
        let res = fault::check(&self.faults, FaultPoint::CommitLogWrite)
            .and_then(|_| s.write_at(pos - s.base(), bytes));
        if let Err(e) = res {
            self.poison(format!("write to {} failed: {e}", s.path().display()));
            return Err(StoreError::io(s.path(), e));
        }
        Ok(())
    }

    fn segment_containing(&self, pos: u64) -> Option<Arc<Segment>> {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        find_segment(&segs, pos).cloned()
    }

    /// The segment that `pos` falls in, creating it (at `pos`) if the log
    /// ends exactly there. Called with the writer lock held.
    fn segment_for_write(&self, pos: u64) -> Result<Arc<Segment>> {
        if let Some(s) = self.segment_containing(pos) {
            return Ok(s);
        }
        let seg = match self.prealloc.take(pos) {
            Some(s) => s,
            None => Arc::new(Segment::create(
                &self.dir,
                pos,
                self.segment_bytes,
                &self.faults,
            )?),
        };
        tracing::debug!(base = pos, "commit log rolled to a new segment");
        self.segments
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&seg));
        if self.preallocate {
            self.request_next_segment(seg.end());
        }
        Ok(seg)
    }

    fn request_next_segment(&self, base: u64) {
        self.prealloc.request(base);
    }

    /// Run the preallocation loop on the calling thread until `stop` is
    /// set: create the next segment when asked, and keep the pages just
    /// ahead of the writer warm (see [`Preallocator`]).
    pub(crate) fn run_preallocator(&self, stop: &AtomicBool) {
        let create = |base: u64| {
            if self.segment_containing(base).is_some() {
                return None;
            }
            match Segment::create(&self.dir, base, self.segment_bytes, &self.faults) {
                Ok(s) => Some(Arc::new(s)),
                Err(e) => {
                    tracing::warn!(error = %e, base, "could not preallocate the next segment; the writer will create it");
                    None
                }
            }
        };
        let warm = |from: u64, ready: Option<&Arc<Segment>>| -> Option<u64> {
            let seg = self
                .segment_containing(from)
                .or_else(|| ready.filter(|s| s.contains(from)).cloned())?;
            let to = (from + WARM_CHUNK).min(seg.end());
            seg.warm(from - seg.base(), to - seg.base());
            Some(to)
        };
        self.prealloc.run(
            stop,
            || self.committed.load(Ordering::Acquire),
            create,
            warm,
        );
    }

    pub(crate) fn stop_preallocator(&self) {
        self.prealloc.stop();
    }

    /// `flush: sync`: block until everything below `target` is on disk, for
    /// at most `timeout`. The `tidelog-sync-flush` thread
    /// ([`CommitLog::run_sync_flusher`]) does the flushing; one flush
    /// covers every waiter whose records were committed when it began
    /// (group commit). After `timeout` the answer is
    /// [`StoreError::FlushTimedOut`]: the records stay appended, and the
    /// flush, when it returns, still covers them (or poisons the log).
    pub fn wait_flushed(&self, target: u64, timeout: std::time::Duration) -> Result<()> {
        let deadline = std::time::Instant::now() + timeout;
        let mut st = lock(&self.flush_state);
        loop {
            if self.flushed.load(Ordering::Acquire) >= target {
                return Ok(());
            }
            self.check_poisoned()?;
            if st.requested < target {
                st.requested = target;
                self.flush_wanted.notify_one();
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(StoreError::FlushTimedOut {
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                });
            }
            st = self
                .flush_done
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The `tidelog-sync-flush` thread: flush whenever a waiter of
    /// [`CommitLog::wait_flushed`] asks for more than is flushed, until
    /// `stop`. A poisoned log is not flushed again (its waiters get the
    /// poison error).
    pub(crate) fn run_sync_flusher(&self, stop: &AtomicBool) {
        loop {
            let mut st = lock(&self.flush_state);
            loop {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let wanted = st.requested > self.flushed.load(Ordering::Acquire);
                if wanted && !self.poisoned.load(Ordering::Acquire) {
                    break;
                }
                st = self
                    .flush_wanted
                    .wait_timeout(st, SYNC_FLUSH_IDLE_WAIT)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            drop(st);
            // A failure has poisoned the log and been logged; the waiters
            // see it.
            let _ = self.flush_all();
        }
    }

    /// Wake the sync flusher so it sees the store stopping.
    pub(crate) fn stop_sync_flusher(&self) {
        let _st = lock(&self.flush_state);
        self.flush_wanted.notify_all();
    }

    /// Block until everything below `target` is on disk, flushing in the
    /// calling thread. Concurrent callers share one flush (group commit):
    /// the first to arrive flushes all that is committed at that moment,
    /// the others wait for it and are usually covered by it.
    fn flush_through(&self, target: u64) -> Result<()> {
        loop {
            if self.flushed.load(Ordering::Acquire) >= target {
                return Ok(());
            }
            self.check_poisoned()?;
            let mut st = lock(&self.flush_state);
            if st.in_progress {
                let _st = self.flush_done.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            st.in_progress = true;
            drop(st);
            let upto = self.committed.load(Ordering::Acquire);
            let res = self.flush_range(self.flushed.load(Ordering::Acquire), upto);
            let mut st = lock(&self.flush_state);
            st.in_progress = false;
            match &res {
                Ok(()) => {
                    self.flushed.fetch_max(upto, Ordering::AcqRel);
                }
                Err(e) => self.poison(format!("flush failed: {e}")),
            }
            drop(st);
            self.flush_done.notify_all();
            res?;
        }
    }

    /// Flush everything committed so far.
    pub fn flush_all(&self) -> Result<()> {
        self.flush_through(self.committed())
    }

    fn flush_range(&self, from: u64, to: u64) -> Result<()> {
        if from >= to {
            return Ok(());
        }
        let segs = self.segments();
        for s in segs.iter().filter(|s| s.end() > from && s.base() < to) {
            let start = from.max(s.base());
            let end = to.min(s.end());
            fault::check(&self.faults, FaultPoint::CommitLogFlush)
                .map_err(|e| StoreError::io(s.path(), e))?;
            s.flush((start - s.base()) as usize, (end - start) as usize)?;
        }
        Ok(())
    }

    /// What starts at `pos`: an entry, a marker to skip, or the end.
    /// `verify` is for bytes whose origin is not trusted (see
    /// [`format::decode`]).
    pub fn read_next(&self, pos: u64, verify: bool) -> Result<Next> {
        self.read_next_cached(pos, verify, &mut ReadCache::default())
    }

    /// [`CommitLog::read_next`] for sequential readers (the dispatcher, a
    /// fetch): see [`ReadCache`].
    pub fn read_next_cached(&self, pos: u64, verify: bool, cache: &mut ReadCache) -> Result<Next> {
        let committed = self.committed();
        if pos >= committed {
            return Ok(Next::End);
        }
        let at = self.cache_at(pos, committed, cache)?;
        let seg = (cache.segment.as_ref()).expect("a cache that holds bytes holds their segment");
        let rel = (pos - seg.base()) as usize;
        // Entries are committed whole, so one that starts in the chunk
        // (committed bytes when it was taken) ends in it.
        match format::decode(&cache.chunk[at..], pos, verify) {
            Ok(Decoded::Entry(view)) => {
                let bytes = cache.chunk.slice(at..at + view.total_len);
                Ok(Next::Entry(Entry::new(bytes, view)))
            }
            Ok(Decoded::EndOfSegment { .. }) => Ok(Next::Skip(seg.end())),
            Ok(Decoded::Empty) => Err(StoreError::corruption(
                seg.path(),
                rel as u64,
                CorruptionKind::ZerosBelowCommitted,
            )),
            Err(why) => Err(StoreError::corruption(seg.path(), rel as u64, why)),
        }
    }

    /// Make `cache` hold the committed bytes at `pos` (below `committed`);
    /// returns where `pos` is in its chunk.
    fn cache_at(&self, pos: u64, committed: u64, cache: &mut ReadCache) -> Result<usize> {
        if !cache.holds(pos) {
            if !cache.segment.as_ref().is_some_and(|s| s.contains(pos)) {
                #[cfg(test)]
                run_before_segment_lookup();
                cache.segment = self.segment_containing(pos);
                cache.entry = None;
            }
            let Some(seg) = cache.segment.as_ref() else {
                cache.chunk = Bytes::new();
                return Err(StoreError::inconsistent(
                    &self.dir,
                    pos,
                    format!(
                        "physical offset {pos} is not in the log (minimum {})",
                        self.min_offset()
                    ),
                ));
            };
            let rel = (pos - seg.base()) as usize;
            let avail = (committed.min(seg.end()) - pos) as usize;
            // SAFETY: `[pos, pos + avail)` is below `committed`.
            cache.chunk = unsafe { seg.bytes(rel, avail) };
            cache.chunk_at = pos;
        }
        Ok((pos - cache.chunk_at) as usize)
    }

    /// The record that starts at `pos`: its distance leads to its entry,
    /// which must start there. With `verify` (positions from clients) the
    /// entry is checked whole and `pos` must be one of the record starts
    /// found by walking it; without (positions from the ConsumeQueue or the
    /// IndexFile) only the entry header and the record are decoded.
    fn record_at(&self, pos: u64, verify: bool, cache: &mut ReadCache) -> Result<StoredRecord> {
        if !verify {
            // A run of reads (a fetch) finds most records in the entry of
            // the one before. Entries never overlap, so the entry that
            // holds `pos` is the only one a record there can belong to.
            if let Some(entry) = cache.entry.as_ref().filter(|e| e.holds(pos)) {
                let at = (pos - entry.physical_offset()) as usize;
                return entry
                    .record_at(at)
                    .map_err(|why| cache.entry_corruption(pos, why));
            }
        }
        let committed = self.committed();
        let at = self.cache_at(pos, committed, cache)?;
        let seg = Arc::clone(cache.segment.as_ref().expect("cached above"));
        let corrupt =
            |why: CorruptionKind| StoreError::corruption(seg.path(), pos - seg.base(), why);
        let distance = format::distance_at(&cache.chunk[at..])
            .filter(|&d| d <= pos - seg.base())
            .ok_or_else(|| corrupt(CorruptionKind::NoRecordHere))?;
        let entry_pos = pos - distance;
        let entry_at = if entry_pos >= cache.chunk_at {
            (entry_pos - cache.chunk_at) as usize
        } else {
            self.cache_at(entry_pos, committed, cache)?
        };
        let Decoded::Entry(view) = format::decode(&cache.chunk[entry_at..], entry_pos, verify)
            .map_err(|why| {
                corrupt(CorruptionKind::RecordEntry {
                    entry_pos,
                    found: Box::new(why),
                })
            })?
        else {
            return Err(corrupt(CorruptionKind::NoEntryAt { entry_pos }));
        };
        let bytes = cache.chunk.slice(entry_at..entry_at + view.total_len);
        let entry = Entry::new(bytes, view);
        let record = if verify {
            // A value can hold bytes that look like a record; only the
            // walk from the entry's first record finds the real starts.
            entry
                .records()
                .map(|r| r.map_err(|why| corrupt(why.into())))
                .find(|r| r.as_ref().map_or(true, |r| r.physical_offset().0 >= pos))
                .unwrap_or_else(|| Err(corrupt(CorruptionKind::PastLastRecord)))?
        } else {
            let record = entry
                .record_at(distance as usize)
                .map_err(|why| corrupt(why.into()))?;
            cache.entry = Some(entry);
            record
        };
        if record.physical_offset().0 != pos {
            return Err(corrupt(CorruptionKind::InsideRecord));
        }
        Ok(record)
    }

    /// The record that starts exactly at `pos`, verified (CRC, stored
    /// offsets, the entry's record starts): safe for offsets that come from
    /// clients. `None` if no record starts there.
    pub fn read_at(&self, pos: u64) -> Result<Option<StoredRecord>> {
        if pos < self.min_offset() || pos >= self.committed() {
            return Ok(None);
        }
        match self.record_at(pos, true, &mut ReadCache::default()) {
            Ok(r) => Ok(Some(r)),
            Err(StoreError::Corruption { .. }) => Ok(None),
            // Deleted by retention since the check above.
            Err(StoreError::Inconsistent { .. }) if pos < self.min_offset() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read the record at `pos` of `size` bytes, as a ConsumeQueue unit
    /// points at it. The CRC was checked when the record was written or
    /// recovered; lengths and the stored offsets are still checked.
    pub fn read_unit(&self, pos: u64, size: u32) -> Result<Option<StoredRecord>> {
        self.read_unit_cached(pos, size, &mut ReadCache::default())
    }

    /// [`CommitLog::read_unit`] for a run of reads (see [`ReadCache`]).
    pub fn read_unit_cached(
        &self,
        pos: u64,
        size: u32,
        cache: &mut ReadCache,
    ) -> Result<Option<StoredRecord>> {
        // A cached segment is still in the log or its Arc keeps its bytes
        // readable; otherwise check the log's start (retention).
        if !cache.segment.as_ref().is_some_and(|s| s.contains(pos)) && pos < self.min_offset() {
            return Ok(None);
        }
        if pos >= self.committed() {
            return Ok(None);
        }
        let r = match self.record_at(pos, false, cache) {
            Ok(r) => r,
            // Retention deleted the segment between the check above and
            // the lookup: the record is gone, as if the check had seen it.
            Err(StoreError::Inconsistent { .. }) if pos < self.min_offset() => return Ok(None),
            Err(e) => return Err(e),
        };
        if r.size() != size {
            return Err(StoreError::inconsistent(
                &self.dir,
                pos,
                format!("queue unit says {size} bytes, record has {}", r.size()),
            ));
        }
        Ok(Some(r))
    }

    /// The record right after `prev` in the entry `cache` holds, if `prev`
    /// was the last record read through `cache` and is not its entry's
    /// last: a fetch reads the rest of an entry this way, without a
    /// ConsumeQueue lookup per record. The record is decoded with every
    /// length checked, as [`CommitLog::read_unit`] does.
    pub fn next_in_entry(
        &self,
        prev: &StoredRecord,
        cache: &ReadCache,
    ) -> Result<Option<StoredRecord>> {
        let Some(entry) = cache.entry.as_ref() else {
            return Ok(None);
        };
        entry.record_after(prev).map_err(|why| {
            cache.entry_corruption(prev.physical_offset().0 + u64::from(prev.size()), why)
        })
    }
}

/// What a sequential reader of the log keeps between reads: the segment of
/// the previous read, so a walk takes the segment-list lock once per
/// segment, and one zero-copy view of that segment's committed bytes, so
/// each record handed out is a slice of it (a reference count) rather than
/// a view of its own (an allocation and a free per record: a fifth of the
/// dispatcher's time in the produce benchmark).
#[derive(Default)]
pub struct ReadCache {
    segment: Option<Arc<Segment>>,
    /// Committed bytes of `segment` from physical offset `chunk_at` on, as
    /// they were when taken; empty when there are none.
    chunk: Bytes,
    chunk_at: u64,
    /// The entry of the last record read by position (in `segment`).
    entry: Option<Entry>,
}

impl ReadCache {
    fn holds(&self, pos: u64) -> bool {
        pos >= self.chunk_at && pos - self.chunk_at < self.chunk.len() as u64
    }

    /// The error for bad bytes at `pos` inside the cached entry.
    fn entry_corruption(&self, pos: u64, why: Invalid) -> StoreError {
        let seg = (self.segment.as_ref()).expect("an entry's segment is cached with it");
        StoreError::corruption(seg.path(), pos - seg.base(), why)
    }
}

#[cfg(test)]
thread_local! {
    /// Runs once, right before this thread's next segment lookup of a
    /// read: lets a test delete a segment exactly between a reader's
    /// check of the log's start and its lookup.
    pub(crate) static BEFORE_SEGMENT_LOOKUP: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        std::cell::RefCell::new(None);
}

#[cfg(test)]
fn run_before_segment_lookup() {
    if let Some(hook) = BEFORE_SEGMENT_LOOKUP.with(|h| h.borrow_mut().take()) {
        hook();
    }
}

/// The segment containing `pos` in a sorted list.
pub(crate) fn find_segment(segs: &[Arc<Segment>], pos: u64) -> Option<&Arc<Segment>> {
    let idx = segs.partition_point(|s| s.base() <= pos);
    let s = segs.get(idx.checked_sub(1)?)?;
    s.contains(pos).then_some(s)
}

/// Decode at `pos` of `seg` during recovery (single-threaded, full checks).
pub(crate) fn decode_for_recovery(
    seg: &Segment,
    pos: u64,
) -> std::result::Result<Decoded, Invalid> {
    let rel = (pos - seg.base()) as usize;
    // SAFETY: recovery runs before any reader or writer exists.
    let buf = unsafe { seg.slice(rel, (seg.end() - pos) as usize) };
    format::decode(buf, pos, true)
}

/// How far ahead of the writer the preallocator keeps pages warm. Far
/// enough that the writer does not catch up between two wake-ups of the
/// thread, near enough that warm pages are written within moments (idle
/// memory goes cold again on some VMs) and that a slow producer never
/// makes the thread warm a whole segment it will not reach for minutes.
const WARM_AHEAD: u64 = 64 << 20;
/// One step of warming: the writer nudges the thread each time it has
/// used up this much of the window.
const WARM_CHUNK: u64 = 4 << 20;

/// The writer's helper thread. It does two things off the append path:
/// - creates the next segment (file, preallocation, name) before the
///   writer reaches the end of the active one, so rolling never waits for
///   file creation;
/// - keeps the `WARM_AHEAD` bytes after the write position in the page
///   cache, across a segment boundary if the next segment is ready, so the
///   writer copies into existing pages instead of allocating them. Warming
///   follows the writer in `WARM_CHUNK` steps, so its cost is proportional
///   to what is written, and it runs on this thread, off the append path:
///   the writer never waits for a warm-up.
///
/// Warming is an optimisation only: a nudge lost to a race between the
/// writer's flag and the thread's read of the write position leaves the
/// window one chunk short until the next append nudges again, and a page
/// the writer reaches cold is merely slower to write.
#[derive(Default)]
struct Preallocator {
    state: Mutex<PreState>,
    cv: Condvar,
    /// Absolute position below which pages are warm (or written).
    warmed_to: AtomicU64,
    /// The writer asked for more warming and the thread has not yet
    /// picked that up; keeps the writer from locking `state` per append.
    nudged: AtomicBool,
}

#[derive(Default)]
struct PreState {
    requested: Option<u64>,
    ready: Option<Arc<Segment>>,
    busy_with: Option<u64>,
    stopped: bool,
}

impl PreState {
    /// The segment the writer asked for, unless it is the one ready.
    fn wanted(&self) -> Option<u64> {
        self.requested
            .filter(|b| self.ready.as_ref().map(|s| s.base()) != Some(*b))
    }
}

impl Preallocator {
    fn request(&self, base: u64) {
        let mut st = lock(&self.state);
        st.requested = Some(base);
        self.cv.notify_all();
    }

    /// The writer is at `pos`: wake the thread if the warm window ahead of
    /// it has shrunk by a chunk. Lock-free unless a wake-up is due.
    fn writer_at(&self, pos: u64) {
        let warmed = self.warmed_to.load(Ordering::Acquire);
        if warmed >= pos + WARM_AHEAD - WARM_CHUNK || self.nudged.swap(true, Ordering::AcqRel) {
            return;
        }
        let _st = lock(&self.state);
        self.cv.notify_all();
    }

    fn take(&self, base: u64) -> Option<Arc<Segment>> {
        let mut st = lock(&self.state);
        // If the thread is making exactly this segment, wait for it rather
        // than race it for the file name. Making one is quick: the pages
        // are warmed later, as the writer approaches them.
        while st.busy_with == Some(base) {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if st.requested == Some(base) {
            // Not started yet: the writer makes it itself, so cancel.
            st.requested = None;
        }
        match st.ready.take() {
            Some(s) if s.base() == base => Some(s),
            Some(stale) => {
                // A segment for another position (the log was truncated);
                // remove it so its name is free.
                let _ = std::fs::remove_file(stale.path());
                None
            }
            None => None,
        }
    }

    fn stop(&self) {
        let mut st = lock(&self.state);
        st.stopped = true;
        self.cv.notify_all();
    }

    /// The thread's loop. `writer` reads the write position; `create`
    /// makes a segment; `warm` warms one step from an absolute position
    /// (in a segment of the log, or in the ready next one) and says where
    /// it stopped, or `None` if no segment holds that position yet.
    fn run(
        &self,
        stop: &AtomicBool,
        writer: impl Fn() -> u64,
        create: impl Fn(u64) -> Option<Arc<Segment>>,
        warm: impl Fn(u64, Option<&Arc<Segment>>) -> Option<u64>,
    ) {
        let mut st = lock(&self.state);
        loop {
            if st.stopped || stop.load(Ordering::Acquire) {
                return;
            }
            self.nudged.store(false, Ordering::Release);
            // The next segment first: the writer may be about to roll.
            if let Some(base) = st.wanted() {
                st.requested = None;
                st.busy_with = Some(base);
                drop(st);
                let seg = create(base);
                st = lock(&self.state);
                st.busy_with = None;
                if let Some(s) = seg {
                    if let Some(old) = st.ready.replace(s) {
                        let _ = std::fs::remove_file(old.path());
                    }
                }
                self.cv.notify_all();
                continue;
            }
            // Then one step of warming, if the window is not full. Pages
            // the writer has passed need none: if it has caught up,
            // warming goes on from where it writes (readahead skips the
            // pages it has already made).
            let at = writer();
            let from = self.warmed_to.load(Ordering::Acquire).max(at);
            if from < at + WARM_AHEAD {
                let ready = st.ready.clone();
                drop(st);
                let reached = warm(from, ready.as_ref());
                st = lock(&self.state);
                if let Some(to) = reached {
                    self.warmed_to.store(to, Ordering::Release);
                    continue;
                }
                // Past the last segment and the next is not made yet: the
                // request (or the writer's roll) wakes us. Unless it came,
                // or a stop or a nudge did, while the lock was dropped:
                // its notification found nobody waiting.
                if st.stopped || st.wanted().is_some() || self.nudged.load(Ordering::Acquire) {
                    continue;
                }
            }
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A stop (or a segment request) that arrives while the thread warms,
    /// with the lock dropped, must not be lost: the thread would then
    /// wait for a notification that already happened, and shutdown would
    /// hang joining it.
    #[test]
    fn the_preallocator_sees_a_stop_or_request_made_while_it_warmed() {
        for request_too in [false, true] {
            let pre = Arc::new(Preallocator::default());
            let stop = AtomicBool::new(false);
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            let runner = Arc::clone(&pre);
            let created = Arc::new(AtomicU64::new(0));
            let made = Arc::clone(&created);
            std::thread::spawn(move || {
                let warmer = Arc::clone(&runner);
                runner.run(
                    &stop,
                    || 0,
                    |base| {
                        made.store(base + 1, Ordering::Release);
                        // Nothing to hand over: the test only needs the
                        // thread to notice the request.
                        warmer.stop();
                        None
                    },
                    |_, _| {
                        // No segment holds the position; meanwhile the
                        // writer asks for one, or the store stops.
                        if request_too {
                            warmer.request(7);
                        } else {
                            warmer.stop();
                        }
                        None
                    },
                );
                let _ = done_tx.send(());
            });
            assert!(
                done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
                "the preallocator missed a wake-up (request_too: {request_too})"
            );
            if request_too {
                assert_eq!(created.load(Ordering::Acquire), 8, "request 7 not served");
            }
        }
    }
}
