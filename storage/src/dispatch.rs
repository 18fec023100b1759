//! The dispatcher: follows the CommitLog's committed position and feeds
//! every record, in physical order, to a list of sinks (ConsumeQueue,
//! IndexFile, and whatever other crates register, such as the compacted
//! logs of compact topics).
//!
//! Invariant: `dispatched` is a record boundary, and every record below it
//! has been handed to every sink. Sinks must be idempotent for records they
//! already hold, because recovery replays from the last checkpoint.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use event_listener::{Event, Listener};

use crate::commit_log::{CommitLog, Next, ReadCache, StoredRecord};
use crate::consume_queue::{format::key_hash, ConsumeQueue, ConsumeQueues, QueueCursor, Unit};
use crate::error::{Result, StoreError};
use crate::index_file::IndexService;

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
    fn truncate(&self, physical_end: u64) -> Result<u64> {
        Ok(physical_end)
    }
}

/// Builds ConsumeQueue units.
pub struct ConsumeQueueSink {
    queues: Arc<ConsumeQueues>,
    batch: Mutex<QueueBatch>,
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
        }
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
                r.queue_offset().0,
                Unit {
                    physical_offset: r.physical_offset().0,
                    size: r.size(),
                    key_hash: key_hash(r.key_slice()),
                },
                cursor,
            )?;
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

    fn truncate(&self, physical_end: u64) -> Result<u64> {
        let mut replay_from = physical_end;
        for q in self.queues.all() {
            let t = q.truncate_from_physical(physical_end)?;
            if t.dropped > 0 {
                tracing::info!(tp = %q.topic_partition(), dropped = t.dropped, "dropped queue units past the recovered log end");
            }
            // Torn units: their records may lie before `physical_end`.
            replay_from = replay_from.min(t.replay_from.unwrap_or(physical_end));
        }
        Ok(replay_from)
    }
}

/// Builds IndexFile entries for keyed records.
pub struct IndexSink {
    pub index: Arc<IndexService>,
}

impl DispatchSink for IndexSink {
    fn name(&self) -> &str {
        "index-file"
    }

    fn dispatch(&self, r: &StoredRecord) -> Result<()> {
        match r.key_slice() {
            Some(key) => self.index.put(
                r.topic(),
                key,
                r.physical_offset().0,
                r.store_timestamp_ms(),
            ),
            None => Ok(()),
        }
    }

    fn flush(&self) -> Result<()> {
        self.index.flush()
    }

    fn truncate(&self, physical_end: u64) -> Result<u64> {
        self.index.truncate_from_physical(physical_end)
    }
}

pub(crate) struct Dispatcher {
    log: Arc<CommitLog>,
    sinks: Vec<Arc<dyn DispatchSink>>,
    dispatched: AtomicU64,
    progressed: Event,
    errors: AtomicU64,
}

/// How long the dispatcher sleeps after a sink error before retrying.
const ERROR_BACKOFF: Duration = Duration::from_millis(500);
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

impl Dispatcher {
    pub(crate) fn new(
        log: Arc<CommitLog>,
        sinks: Vec<Arc<dyn DispatchSink>>,
        from: u64,
    ) -> Dispatcher {
        Dispatcher {
            log,
            sinks,
            dispatched: AtomicU64::new(from),
            progressed: Event::new(),
            errors: AtomicU64::new(0),
        }
    }

    pub(crate) fn dispatched(&self) -> u64 {
        self.dispatched.load(Ordering::Acquire)
    }

    pub(crate) fn error_count(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Dispatch everything committed now; with `progress`, log how far it
    /// got about once a second (recovery replays can be long).
    pub(crate) fn catch_up(&self, progress: bool) -> Result<u64> {
        let mut pos = self.dispatched();
        let target = self.log.committed();
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
                    failed = Some(e);
                    break;
                }
            };
            match next {
                Next::Entry(entry) => {
                    let decoded = entry.records().try_for_each(|r| {
                        let r = r.map_err(|why| {
                            StoreError::corruption(self.log.dir(), pos, why.to_string())
                        })?;
                        batch.push(r);
                        Ok(())
                    });
                    let dispatched = decoded.and_then(|()| {
                        self.sinks.iter().try_for_each(|s| s.dispatch_entry(&batch))
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
        if records > 0 || failed.is_some() {
            // Also after a failure: what was dispatched before it is
            // published (sinks batch their wake-ups and writes), including
            // what the sinks before the failing one took of its entry.
            for s in &self.sinks {
                s.end_batch()?;
            }
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
            let dispatched_some = match self.catch_up(false) {
                Ok(records) => records > 0,
                Err(e) => {
                    self.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(error = %e, position = self.dispatched(), "dispatch failed; retrying");
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let _ = listener.wait_timeout(ERROR_BACKOFF);
                    continue;
                }
            };
            if stop.load(Ordering::Acquire) {
                return;
            }
            if self.dispatched() >= self.log.committed() {
                if dispatched_some {
                    // Busy: let the next appends gather. Without a
                    // listener, appends in the meantime wake nobody.
                    drop(listener);
                    std::thread::sleep(LINGER);
                } else {
                    let _ = listener.wait_timeout(IDLE_WAIT);
                }
            }
        }
    }

    /// Wake the loop (shutdown).
    pub(crate) fn wake(&self) {
        self.log.appended_event().notify(usize::MAX);
    }

    /// Block until everything below `target` is dispatched, or `timeout`.
    pub(crate) fn wait_dispatched(&self, target: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let listener = self.progressed.listen();
            if self.dispatched() >= target {
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
