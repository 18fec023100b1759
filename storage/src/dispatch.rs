//! The dispatcher: follows the CommitLog's visible end and feeds every
//! record, in physical order, to a list of sinks (ConsumeQueue, IndexFile,
//! and whatever other crates register, such as the compacted logs of
//! compact topics).
//!
//! The visible end ([`CommitLog::visible_end`]) is the committed position,
//! or under `flush: sync` the flushed one: a record is fetchable only once
//! a power loss can no longer take it, so no consumer reads a record whose
//! offset a restart would hand out again. Under `sync` the dispatcher is
//! woken by each flush rather than by each append, and asks for a flush
//! itself when records nobody awaits (acks=0) are waiting for one.
//!
//! Invariant: `dispatched` is a record boundary, and every record below it
//! has been handed to every sink. Sinks must be idempotent for records they
//! already hold, because recovery replays from the last checkpoint.
//!
//! A failing sink stops dispatch at the failing entry; the thread retries it
//! with a growing back-off. A sink that fails for want of space (it
//! could not create or back its next ConsumeQueue or IndexFile on a full
//! disk: ENOSPC, EDQUOT) makes appends be refused at once with
//! [`StoreError::DiskFull`], not only after a stall: every record stays
//! committed in the CommitLog, and dispatch resumes by itself (the
//! refusal ends with the first successful round) once space is freed. Once dispatch has failed without a success for
//! `dispatch_stall_ms` it is *stalled*: `Dispatcher::refusal` answers with
//! the error that appends are refused with (their records would not become
//! visible), counted once per stall. The first success ends it.
//!
//! Back-pressure: an append waits while the dispatcher is more than
//! [`DISPATCH_LAG_MAX_BYTES`] behind the visible end, so a sink
//! slower than produce (the compacted-log copy) holds producers back
//! instead of letting the lag, and with it the age of what fetches see,
//! grow without bound. Healthy sinks keep up and never reach it; a failing
//! one ends in a stall, which refuses the waiting appends. The wait is an
//! awaitable (`Dispatcher::lag_within`, what the front-ends use: a held
//! append costs no thread) or blocking (`Dispatcher::wait_lag_within`);
//! both listen to `lag_eased`, which the dispatcher fires entry by entry
//! while it is within the bound (a cheap atomic check while nobody
//! listens), after each failed round (so waiters see a stall) and at
//! shutdown.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use event_listener::{Event, EventListener, Listener};

use crate::commit_log::{CommitLog, Next, ReadCache, StoredRecord};
use crate::consume_queue::{format::key_hash, ConsumeQueue, ConsumeQueues, QueueCursor, Unit};
use crate::error::{Result, StoreError};
use crate::fault::{self, FaultHandle, FaultPoint};
use crate::index_file::IndexService;
use crate::types::PhysicalOffset;

/// How far (CommitLog bytes) the dispatcher may fall behind the committed
/// position before appends wait for it. Issue 17's goal is a lag of at
/// most 64 MiB; this leaves room for the appends that pass the check at
/// once (one batch each, at most the in-flight requests) and for what the
/// dispatcher's current round holds. At 100 B records it is about 300 k
/// records, a fraction of a second of the copy.
pub const DISPATCH_LAG_MAX_BYTES: u64 = 32 << 20;

/// A consumer of dispatched records.
pub trait DispatchSink: Send + Sync {
    /// Short name for logs and metrics.
    fn name(&self) -> &str;

    /// Take one record. Called from the dispatcher thread only, in physical
    /// order; a record the sink already has must be accepted silently.
    fn dispatch(&self, record: &StoredRecord) -> Result<()>;

    /// Take the records of one CommitLog entry: one partition's, with
    /// consecutive queue offsets, in order, at least one. The default hands
    /// them to [`DispatchSink::dispatch`] one by one; a sink with work per
    /// partition (finding its queue, checking its topic) does that once.
    fn dispatch_entry(&self, records: &[StoredRecord]) -> Result<()> {
        records.iter().try_for_each(|r| self.dispatch(r))
    }

    /// Whether this sink answers key queries of `record`'s topic itself, so
    /// the IndexFile need not index it. The compacted logs do for compact
    /// topics: their key queries scan the compacted log (the latest value
    /// of every key, what a compact topic serves), and a topic changes
    /// policy only while it has no records (docs/compaction.md), so no
    /// record of it ever needs an IndexFile entry. Asked once per entry
    /// (one topic's records), before the entry is dispatched.
    fn answers_key_queries(&self, record: &StoredRecord) -> bool {
        let _ = record;
        false
    }

    /// Make everything dispatched so far durable. Called before the
    /// checkpoint records a dispatched position.
    fn flush(&self) -> Result<()>;

    /// The dispatcher has handed over every record committed so far: a sink
    /// that buffers (to write a batch with one system call) makes what it
    /// holds visible now.
    fn end_batch(&self) -> Result<()> {
        Ok(())
    }

    /// Recovery: the CommitLog's valid end is `physical_end`; forget
    /// anything at or past it. Return the physical offset from which the
    /// sink needs records replayed if that is earlier than the checkpoint
    /// (e.g. it had to drop damaged state), else `physical_end`.
    fn truncate(&self, physical_end: PhysicalOffset) -> Result<PhysicalOffset> {
        Ok(physical_end)
    }

    /// Recovery, after its scan: the CommitLog's valid end is `physical_end`
    /// for good, so anything a sink still holds past it belongs to records
    /// the CommitLog lost (where [`DispatchSink::truncate`], before the
    /// scan, drops what the scan hands over again). Same contract as
    /// `truncate`; a sink that reports the two differently overrides it.
    fn truncate_lost(&self, physical_end: PhysicalOffset) -> Result<PhysicalOffset> {
        self.truncate(physical_end)
    }
}

/// Builds ConsumeQueue units.
pub struct ConsumeQueueSink {
    queues: Arc<ConsumeQueues>,
    batch: Mutex<QueueBatch>,
    /// The log the time indexes read records from to rebuild; set once the
    /// store has recovered it ([`ConsumeQueueSink::set_log`]).
    log: OnceLock<Arc<CommitLog>>,
}

/// The sink's state within one dispatch batch (the dispatcher thread is
/// its only user; the mutex is never contended).
#[derive(Default)]
struct QueueBatch {
    /// Every queue that got units in this batch, with where in it the last
    /// put went, by partition number (then topic): records of a batch go
    /// to a few partitions, so most need neither the queue map's lookup
    /// nor the queue's file-list lock. At the end of the batch each of
    /// these wakes its readers once, rather than once per record.
    queues: HashMap<u32, Vec<(Arc<ConsumeQueue>, QueueCursor)>, ahash::RandomState>,
}

impl ConsumeQueueSink {
    pub fn new(queues: Arc<ConsumeQueues>) -> ConsumeQueueSink {
        ConsumeQueueSink {
            queues,
            batch: Mutex::default(),
            log: OnceLock::new(),
        }
    }

    /// The recovered log: from now on a queue whose time index lost its
    /// tail is caught up as soon as a unit arrives.
    pub fn set_log(&self, log: &Arc<CommitLog>) {
        let _ = self.log.set(Arc::clone(log));
    }

    fn batch(&self) -> MutexGuard<'_, QueueBatch> {
        self.batch.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl DispatchSink for ConsumeQueueSink {
    fn name(&self) -> &str {
        "consume-queue"
    }

    fn dispatch(&self, r: &StoredRecord) -> Result<()> {
        self.dispatch_entry(std::slice::from_ref(r))
    }

    fn dispatch_entry(&self, records: &[StoredRecord]) -> Result<()> {
        let Some(first) = records.first() else {
            return Ok(());
        };
        // Held while the entry is indexed: a topic deletion waits for it,
        // and this sees a deletion whole (see `ConsumeQueues`).
        let deleted = self.queues.deleted();
        // An entry's records are of one append, so of one incarnation.
        if deleted.covers(first) {
            return Ok(()); // of a deleted topic: replayed, or not indexed before the deletion
        }
        let mut batch = self.batch();
        let same_partition = batch.queues.entry(first.partition()).or_default();
        let at = match same_partition.iter().position(|(q, _)| {
            q.topic_partition().topic().as_bytes() == first.topic_bytes() && !q.is_deleted()
        }) {
            Some(at) => at,
            None => {
                let q = self
                    .queues
                    .create(&deleted, first.topic(), first.partition())?;
                same_partition.push((q, QueueCursor::default()));
                same_partition.len() - 1
            }
        };
        let (q, cursor) = &mut same_partition[at];
        for r in records {
            debug_assert!(
                r.partition() == first.partition() && r.topic_bytes() == first.topic_bytes()
            );
            q.put_cached(
                r.queue_offset(),
                Unit {
                    physical_offset: r.physical_offset().get(),
                    size: r.size(),
                    key_hash: key_hash(r.key_slice()),
                },
                r.timestamp_ms(),
                cursor,
            )?;
        }
        if q.time_index_needs_catch_up() {
            // A repair or a gap: rebuilt once the log is there (recovery's
            // replay runs before; the store catches every queue up after).
            if let Some(log) = self.log.get() {
                q.catch_up_time_index(log)?;
            }
        }
        Ok(())
    }

    fn end_batch(&self) -> Result<()> {
        let mut batch = self.batch();
        for (_, queues) in batch.queues.drain() {
            for (q, _) in queues {
                q.notify_readers();
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.queues.flush()
    }

    fn truncate(&self, physical_end: PhysicalOffset) -> Result<PhysicalOffset> {
        let mut replay_from = physical_end;
        for q in self.queues.all() {
            let t = q.truncate_from_physical(physical_end.get())?;
            if t.dropped > 0 {
                tracing::info!(tp = %q.topic_partition(), dropped = t.dropped, "dropped queue units past the recovered log end");
            }
            // Torn units: their records may lie before `physical_end`.
            replay_from = replay_from.min(t.replay_from.map_or(physical_end, PhysicalOffset::new));
        }
        Ok(replay_from)
    }
}

/// Builds IndexFile entries for keyed records, except those of topics
/// another sink answers key queries of ([`DispatchSink::answers_key_queries`]:
/// a compact topic's). Their entries cost the dispatcher about a quarter of
/// its time under keyed produce (docs/compaction.md, "The copy") and no
/// query ever read them.
pub struct IndexSink {
    pub index: Arc<IndexService>,
    /// The sinks asked whether they answer a topic's key queries.
    pub key_owners: Vec<Arc<dyn DispatchSink>>,
}

impl DispatchSink for IndexSink {
    fn name(&self) -> &str {
        "index-file"
    }

    fn dispatch(&self, r: &StoredRecord) -> Result<()> {
        self.dispatch_entry(std::slice::from_ref(r))
    }

    fn dispatch_entry(&self, records: &[StoredRecord]) -> Result<()> {
        let Some(first) = records.first() else {
            return Ok(());
        };
        // A marker's key is Kafka's control key, no key of the topic's.
        if first.is_control() || self.key_owners.iter().any(|s| s.answers_key_queries(first)) {
            return Ok(());
        }
        for r in records {
            if let Some(key) = r.key_slice() {
                self.index.put(
                    r.topic(),
                    key,
                    r.physical_offset().get(),
                    r.store_timestamp_ms(),
                )?;
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.index.flush()
    }

    fn truncate(&self, physical_end: PhysicalOffset) -> Result<PhysicalOffset> {
        self.index
            .truncate_from_physical(physical_end.get())
            .map(PhysicalOffset::new)
    }
}

pub(crate) struct Dispatcher {
    log: Arc<CommitLog>,
    sinks: Vec<Arc<dyn DispatchSink>>,
    dispatched: AtomicU64,
    /// Up to here every sink has also run `end_batch`: what a buffering
    /// sink took is visible. At most `dispatched`; what
    /// [`Dispatcher::wait_dispatched`] waits for.
    published: AtomicU64,
    progressed: Event,
    errors: AtomicU64,
    /// Failing for this long makes dispatch stalled.
    stall_after: Duration,
    /// Set while `failure` holds a failure: the append path reads only this
    /// while dispatch is healthy.
    failing: AtomicBool,
    failure: Mutex<Option<Failure>>,
    /// How many times dispatch became stalled.
    stalls: AtomicU64,
    /// Appends that waited for the lag to come back within the bound.
    lag_waits: AtomicU64,
    /// Fired while the lag is within the bound as the dispatcher moves, on
    /// a failed round and at shutdown: what held appends listen to.
    lag_eased: Event,
    /// A round's `end_batch` failed: the next round owes it (also with no
    /// new record), and `published` stays where it was until one succeeds.
    /// Without this a sink's buffered records (the compacted logs' pending
    /// copies) stayed unwritten until the next append, while `published`
    /// moved past them at the next empty round.
    end_batch_owed: AtomicBool,
    /// Test seam: [`FaultPoint::Dispatch`] fails the hand-over to the sinks.
    faults: FaultHandle,
}

/// The run of failures since the last successful dispatch round.
struct Failure {
    since: Instant,
    /// The sink that failed last (`commit-log` for a failed read).
    sink: String,
    error: String,
    retries: u64,
    last_logged: Instant,
    /// This run has been counted in `stalls` (and logged as a stall).
    stall_counted: bool,
    /// The last failure was the disk being short: appends are refused
    /// with [`StoreError::DiskFull`] at once.
    out_of_space: bool,
}

/// The first back-off after a failed dispatch round; it doubles with each
/// further failure up to [`ERROR_BACKOFF_MAX`].
const ERROR_BACKOFF_MIN: Duration = Duration::from_millis(50);
const ERROR_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// While the same error repeats, one warning per this long (the first
/// failure, a changed error and the stall are always logged).
const FAILURE_LOG_EVERY: Duration = Duration::from_secs(10);
/// Name of the dispatcher's own reads in failure reports.
const COMMIT_LOG_SOURCE: &str = "commit-log";
/// Upper bound on one wait for new appends (a safety net, not a poll: the
/// writer notifies on every append).
const IDLE_WAIT: Duration = Duration::from_millis(200);
/// After a round that found records, how long the dispatcher lets appends
/// gather before the next round, instead of being woken by each one. Under
/// a steady stream of small appends this turns one wake-up (two context
/// switches, one on the appender's side) per append into one per
/// `LINGER`, at the price of up to `LINGER` more before a record is
/// visible to fetches. An idle dispatcher still wakes at once for the
/// first append. RocketMQ's ReputMessageService rests 1 ms between rounds.
const LINGER: Duration = Duration::from_micros(500);
/// Longest a blocked append held back by the lag bound sleeps between
/// looks at it (a safety net: `lag_eased` wakes it).
const LAG_RECHECK: Duration = Duration::from_millis(100);

impl Dispatcher {
    pub(crate) fn new(
        log: Arc<CommitLog>,
        sinks: Vec<Arc<dyn DispatchSink>>,
        from: u64,
        stall_after: Duration,
        faults: FaultHandle,
    ) -> Dispatcher {
        Dispatcher {
            log,
            sinks,
            dispatched: AtomicU64::new(from),
            published: AtomicU64::new(from),
            progressed: Event::new(),
            errors: AtomicU64::new(0),
            stall_after,
            failing: AtomicBool::new(false),
            failure: Mutex::new(None),
            stalls: AtomicU64::new(0),
            lag_waits: AtomicU64::new(0),
            lag_eased: Event::new(),
            end_batch_owed: AtomicBool::new(false),
            faults,
        }
    }

    fn failure(&self) -> MutexGuard<'_, Option<Failure>> {
        self.failure.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What appends are refused with because of dispatch: `DiskFull` at
    /// once while a sink has no space for its next file (the records are
    /// committed; indexing them needs the space back), `DispatchStalled`
    /// once dispatch has failed otherwise for at least
    /// `dispatch_stall_ms`. The first caller to see a stall counts and
    /// logs it.
    pub(crate) fn refusal(&self) -> Option<StoreError> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        let mut failure = self.failure();
        let f = failure.as_mut()?;
        if f.out_of_space {
            return Some(StoreError::DiskFull {
                reason: format!(
                    "no space for the indexes (sink {}: {}); the records so far are committed and are indexed once space is freed, and writes resume by themselves then",
                    f.sink, f.error
                ),
            });
        }
        let failing_for = f.since.elapsed();
        if failing_for < self.stall_after {
            return None;
        }
        let failing_ms = u64::try_from(failing_for.as_millis()).unwrap_or(u64::MAX);
        if !f.stall_counted {
            f.stall_counted = true;
            self.stalls.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                sink = %f.sink,
                error = %f.error,
                failing_ms,
                position = self.dispatched(),
                "dispatch stalled: refusing produce until the sink recovers"
            );
        }
        Some(StoreError::DispatchStalled {
            sink: f.sink.clone(),
            failing_ms,
            error: f.error.clone(),
        })
    }

    /// Whether the dispatcher is at most [`DISPATCH_LAG_MAX_BYTES`]
    /// behind the visible end.
    fn lag_is_within(&self) -> bool {
        self.lag_bytes() <= DISPATCH_LAG_MAX_BYTES
    }

    /// How far dispatch is behind what it may dispatch: the CommitLog's
    /// [`visible_end`](CommitLog::visible_end). Under `flush: sync` the
    /// bytes not yet flushed do not count: the dispatcher cannot take them
    /// before the flush, and their appenders already wait for it (bounded
    /// by `sync_flush_timeout_ms`, which a hung fsync must not turn into an
    /// endless wait for the lag bound).
    pub(crate) fn lag_bytes(&self) -> u64 {
        self.log.visible_end().saturating_sub(self.dispatched())
    }

    /// `None` once an append may go ahead: the lag is within the bound.
    /// Else a listener of `lag_eased`, registered before the check; or
    /// the error a held append is refused with (the store `closed`, or
    /// dispatch stalled).
    fn lag_within_or_listen(&self, closed: &AtomicBool) -> Result<Option<EventListener>> {
        let listener = self.lag_eased.listen();
        if self.lag_is_within() {
            return Ok(None);
        }
        if closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        if let Some(refused) = self.refusal() {
            return Err(refused);
        }
        Ok(Some(listener))
    }

    /// Back-pressure (see the module docs), blocking: return once the
    /// dispatcher is at most [`DISPATCH_LAG_MAX_BYTES`] behind the
    /// visible end, at once when it is. Waiting appends are refused
    /// with the stall's error once dispatch is stalled, and with
    /// [`StoreError::Closed`] when `closed` is set.
    pub(crate) fn wait_lag_within(&self, closed: &AtomicBool) -> Result<()> {
        if self.lag_is_within() {
            return Ok(());
        }
        self.lag_waits.fetch_add(1, Ordering::Relaxed);
        while let Some(listener) = self.lag_within_or_listen(closed)? {
            let _ = listener.wait_timeout(LAG_RECHECK);
        }
        Ok(())
    }

    /// [`wait_lag_within`](Self::wait_lag_within) as a future: a held
    /// append waits on `lag_eased` without a thread.
    pub(crate) async fn lag_within(&self, closed: &AtomicBool) -> Result<()> {
        if self.lag_is_within() {
            return Ok(());
        }
        self.lag_waits.fetch_add(1, Ordering::Relaxed);
        while let Some(listener) = self.lag_within_or_listen(closed)? {
            listener.await;
        }
        Ok(())
    }

    /// Appends that waited for the dispatcher ([`Dispatcher::wait_lag_within`]).
    pub(crate) fn lag_wait_count(&self) -> u64 {
        self.lag_waits.load(Ordering::Relaxed)
    }

    /// How many times dispatch became stalled.
    pub(crate) fn stall_count(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }

    /// A dispatch round failed in `sink`: start or extend the run of
    /// failures; returns how many retries it has had.
    fn note_failure(&self, sink: &str, error: &StoreError) -> u64 {
        let out_of_space = error.is_out_of_space();
        let error = error.to_string();
        let now = Instant::now();
        let mut failure = self.failure();
        match failure.as_mut() {
            None => {
                tracing::error!(sink, %error, position = self.dispatched(), "dispatch failed; retrying with back-off");
                *failure = Some(Failure {
                    since: now,
                    sink: sink.to_string(),
                    error,
                    retries: 0,
                    last_logged: now,
                    stall_counted: false,
                    out_of_space,
                });
                self.failing.store(true, Ordering::Release);
                0
            }
            Some(f) => {
                f.retries += 1;
                let changed = f.sink != sink || f.error != error;
                if changed || now.duration_since(f.last_logged) >= FAILURE_LOG_EVERY {
                    tracing::warn!(
                        sink,
                        %error,
                        retries = f.retries,
                        failing_ms = now.duration_since(f.since).as_millis() as u64,
                        "dispatch still failing"
                    );
                    f.last_logged = now;
                }
                if changed {
                    f.sink = sink.to_string();
                    f.error = error;
                }
                f.out_of_space = out_of_space;
                f.retries
            }
        }
    }

    /// A dispatch round succeeded: end the run of failures, if any.
    fn note_success(&self) {
        if !self.failing.load(Ordering::Acquire) {
            return;
        }
        if let Some(f) = self.failure().take() {
            tracing::warn!(
                sink = %f.sink,
                retries = f.retries,
                failing_ms = f.since.elapsed().as_millis() as u64,
                "dispatch recovered; accepting produce again"
            );
        }
        self.failing.store(false, Ordering::Release);
    }

    /// The last dispatch round failed for want of space.
    pub(crate) fn out_of_space(&self) -> bool {
        self.failing.load(Ordering::Acquire)
            && self.failure().as_ref().is_some_and(|f| f.out_of_space)
    }

    pub(crate) fn dispatched(&self) -> u64 {
        self.dispatched.load(Ordering::Acquire)
    }

    /// Up to here every sink has also run `end_batch`: a buffering sink
    /// (the compacted logs' pending copies) has written what it took, so
    /// a flush of the sinks makes it durable. What a checkpoint may claim.
    pub(crate) fn published(&self) -> u64 {
        self.published.load(Ordering::Acquire)
    }

    pub(crate) fn error_count(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Dispatch everything committed now; with `progress`, log how far it
    /// got about once a second (recovery replays can be long).
    pub(crate) fn catch_up(&self, progress: bool) -> Result<u64> {
        self.catch_up_from_sinks(progress).map_err(|(_, e)| e)
    }

    /// [`Dispatcher::catch_up`], naming the sink of a failure.
    fn catch_up_from_sinks(&self, progress: bool) -> Result<u64, (String, StoreError)> {
        let mut pos = self.dispatched();
        let target = self.log.visible_end();
        let start = pos;
        let began = Instant::now();
        let mut last_log = began;
        let mut records = 0u64;
        let mut cache = ReadCache::default();
        // The records of the entry at hand, handed to every sink at once.
        let mut batch: Vec<StoredRecord> = Vec::new();
        let mut failed = None;
        while pos < target {
            let next = match self.log.read_next_cached(pos, false, &mut cache) {
                Ok(next) => next,
                Err(e) => {
                    failed = Some((COMMIT_LOG_SOURCE.to_string(), e));
                    break;
                }
            };
            match next {
                Next::Entry(entry) => {
                    let decoded = entry.records().try_for_each(|r| {
                        let r = r.map_err(|why| {
                            (
                                COMMIT_LOG_SOURCE.to_string(),
                                StoreError::corruption(self.log.dir(), pos, why),
                            )
                        })?;
                        batch.push(r);
                        Ok(())
                    });
                    let dispatched = decoded.and_then(|()| {
                        fault::check(&self.faults, FaultPoint::Dispatch).map_err(|e| {
                            (
                                "fault-injection".to_string(),
                                StoreError::io(self.log.dir(), e),
                            )
                        })?;
                        self.sinks.iter().try_for_each(|s| {
                            s.dispatch_entry(&batch)
                                .map_err(|e| (s.name().to_string(), e))
                        })
                    });
                    let decoded_records = batch.len() as u64;
                    batch.clear();
                    if let Err(e) = dispatched {
                        // Retried from this entry after a back-off; the
                        // sinks accept replays of what they already took.
                        failed = Some(e);
                        break;
                    }
                    records += decoded_records;
                    pos += entry.size();
                }
                Next::Skip(next) => pos = next,
                Next::End => break,
            }
            self.dispatched.store(pos, Ordering::Release);
            // Appends held by the lag bound go on as soon as it is met,
            // not at the end of the round (which may be the whole bound
            // long). Nobody listening: one atomic load in `notify`.
            if self.lag_is_within() {
                self.lag_eased.notify(usize::MAX);
            }
            if progress && last_log.elapsed() >= Duration::from_secs(1) {
                last_log = Instant::now();
                tracing::info!(
                    done_bytes = pos - start,
                    total_bytes = target - start,
                    records,
                    "replaying records into the indexes"
                );
            }
        }
        if records > 0 || failed.is_some() || self.end_batch_owed.load(Ordering::Acquire) {
            // Also after a failure: what was dispatched before it is
            // published (sinks batch their wake-ups and writes), including
            // what the sinks before the failing one took of its entry.
            self.end_batch_owed.store(true, Ordering::Release);
            for s in &self.sinks {
                s.end_batch().map_err(|e| (s.name().to_string(), e))?;
            }
            self.end_batch_owed.store(false, Ordering::Release);
        }
        if self.published.swap(pos, Ordering::AcqRel) != pos {
            self.progressed.notify(usize::MAX);
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if progress {
            tracing::info!(
                records,
                bytes = pos - start,
                elapsed_ms = began.elapsed().as_millis() as u64,
                "index replay done"
            );
        }
        Ok(records)
    }

    /// The dispatcher thread's loop.
    pub(crate) fn run(&self, stop: &AtomicBool) {
        loop {
            let listener = self.log.appended_event().listen();
            let dispatched_some = match self.catch_up_from_sinks(false) {
                Ok(records) => {
                    self.note_success();
                    records > 0
                }
                Err((sink, e)) => {
                    drop(listener);
                    self.errors.fetch_add(1, Ordering::Relaxed);
                    let retries = self.note_failure(&sink, &e);
                    if e.is_out_of_space() {
                        // Space for the indexes' next file: the
                        // preallocator's spare segment goes.
                        self.log.set_disk_short(true);
                    }
                    // Notices (counts, logs) a stall even while no append
                    // asks; held appends look, and are refused once it is.
                    let _ = self.refusal();
                    self.lag_eased.notify(usize::MAX);
                    let backoff = ERROR_BACKOFF_MIN
                        .saturating_mul(1 << retries.min(16))
                        .min(ERROR_BACKOFF_MAX);
                    if self.sleep_unless_stopped(backoff, stop) {
                        return;
                    }
                    continue;
                }
            };
            if stop.load(Ordering::Acquire) {
                return;
            }
            if self.dispatched() >= self.log.visible_end() {
                if dispatched_some {
                    // Busy: let the next appends gather. Without a
                    // listener, appends in the meantime wake nobody.
                    drop(listener);
                    std::thread::sleep(LINGER);
                } else if !self.wait_for_flush() {
                    let _ = listener.wait_timeout(IDLE_WAIT);
                }
            }
        }
    }

    /// `flush: sync` with records appended and not yet flushed: ask for
    /// their flush (a no-op when their appenders already asked; records
    /// nobody awaits, acks=0, would otherwise wait for the periodic flush)
    /// and wait until it moves the flushed position. `false` when there is
    /// nothing to flush: the caller waits for appends instead.
    fn wait_for_flush(&self) -> bool {
        if !self.log.is_sync_flush() {
            return false;
        }
        let committed = self.log.committed();
        if self.log.flushed() >= committed {
            return false;
        }
        // Registered before the look, so a flush in between is not missed.
        let listener = self.log.flushed_event().listen();
        self.log.request_flush(committed);
        if self.log.visible_end() <= self.dispatched() {
            let _ = listener.wait_timeout(IDLE_WAIT);
        }
        true
    }

    /// Sleep for `pause` (appends do not cut it short: a failing sink is
    /// retried on its back-off, not on every append); `true` if the store
    /// stops meanwhile.
    fn sleep_unless_stopped(&self, pause: Duration, stop: &AtomicBool) -> bool {
        let deadline = Instant::now() + pause;
        loop {
            let listener = self.log.appended_event().listen();
            if stop.load(Ordering::Acquire) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let _ = listener.wait_timeout(deadline - now);
        }
    }

    /// Wake the loop and the appends held by the lag bound (shutdown).
    pub(crate) fn wake(&self) {
        self.log.appended_event().notify(usize::MAX);
        self.log.flushed_event().notify(usize::MAX);
        self.lag_eased.notify(usize::MAX);
    }

    /// `None` once everything below `target` is dispatched and published
    /// by every sink; else a listener of the next progress, registered
    /// before the check, so a publish in between is not missed.
    pub(crate) fn dispatched_or_listen(&self, target: u64) -> Option<EventListener> {
        let listener = self.progressed.listen();
        (self.published.load(Ordering::Acquire) < target).then_some(listener)
    }

    /// Block until everything below `target` is dispatched and published
    /// by every sink (their `end_batch` ran), or `timeout`.
    pub(crate) fn wait_dispatched(&self, target: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let listener = self.progressed.listen();
            if self.published.load(Ordering::Acquire) >= target {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let _ = listener.wait_timeout((deadline - now).min(Duration::from_millis(50)));
        }
    }

    pub(crate) fn flush_sinks(&self) -> Result<()> {
        for s in &self.sinks {
            s.flush()?;
        }
        Ok(())
    }
}

/// `ControlFlow` helper for key queries.
pub(crate) fn keep_going(more: bool) -> ControlFlow<()> {
    if more {
        ControlFlow::Continue(())
    } else {
        ControlFlow::Break(())
    }
}
