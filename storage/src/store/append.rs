//! Appending: the five entry points (`append`, `append_within`,
//! `append_as`, `append_unflushed`, `append_unflushed_admitted` after
//! `lag_admitted`), the gates that refuse an append before it waits or
//! writes, and the producer ids idempotent appends are checked against.
//!
//! Invariants: every entry point passes `append_gates` (closed, disk full,
//! dispatch stalled or short of space) and the dispatch-lag bound before
//! the CommitLog's writer checks and writes the batch, so a refused batch
//! writes nothing; under `flush: sync` an answer is given only once an
//! fsync covers the batch or its wait timed out.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Store;
use crate::commit_log::{AppendRecord, Appended, Copied, LogAppend, MarkerSpec, Unflushed};
use crate::config::FlushMode;
use crate::dispatch::DISPATCH_LAG_MAX_BYTES;
use crate::error::{Result, StoreError};
use crate::producer_state::{BatchMeta, ProducerBatch};

/// Proof that [`Store::lag_admitted`] was awaited: what
/// [`Store::append_unflushed_admitted`] takes instead of waiting for the
/// dispatcher itself. One append per proof.
#[derive(Debug)]
pub struct LagAdmitted(());

/// What [`Store::append_as`] did.
#[derive(Debug)]
pub enum ProducerAppend {
    /// Written: where each record landed, in the batch's order.
    Written(Vec<Appended>),
    /// The producer's batch was written before, at these offsets; nothing
    /// was written now.
    Duplicate(BatchMeta),
}

impl Store {
    /// Append one batch (one produce request). Under `flush: sync` this
    /// returns only after an fsync covers the batch, or
    /// [`StoreError::FlushTimedOut`] after `sync_flush_timeout_ms` (the
    /// batch is appended then, its durability unknown). Refused while the
    /// disk is full or dispatch is stalled.
    pub fn append(&self, batch: &[AppendRecord]) -> Result<Vec<Appended>> {
        self.append_within(batch, u64::MAX)
    }

    /// [`append`](Self::append) with a lower record limit for this batch:
    /// key + value + headers of every record at most `max_payload` bytes
    /// (or the store's limit, whichever is smaller). A front-end passes a
    /// topic's `max.message.bytes` here instead of checking the records
    /// itself, so the record rules are checked once, by the writer, and a
    /// refusal names the record ([`StoreError::RecordRefused`]).
    pub fn append_within(&self, batch: &[AppendRecord], max_payload: u64) -> Result<Vec<Appended>> {
        match self.append_as(batch, max_payload, None)? {
            ProducerAppend::Written(appended) => Ok(appended),
            ProducerAppend::Duplicate(_) => Err(StoreError::inconsistent(
                self.data_dir(),
                0,
                "an append without a producer was taken for a duplicate",
            )),
        }
    }

    /// [`append_within`](Self::append_within) as an idempotent producer's
    /// batch (one partition) when `producer` is given: its sequence is
    /// checked in the writer's critical section (`crate::producer_state`).
    /// A retry of one of its last five batches writes nothing and answers
    /// [`ProducerAppend::Duplicate`] with the original offsets, after the
    /// same sync flush wait a write gets (so the original is durable too).
    pub fn append_as(
        &self,
        batch: &[AppendRecord],
        max_payload: u64,
        producer: Option<&ProducerBatch>,
    ) -> Result<ProducerAppend> {
        self.append_unflushed(batch, max_payload, producer)?.wait()
    }

    /// [`append_as`](Self::append_as) without its wait: the batch is
    /// appended when this returns, and the answer is the caller's once the
    /// returned [`Unflushed`] answers (under `flush: sync` an fsync covers
    /// the batch, or [`StoreError::FlushTimedOut`] after
    /// `sync_flush_timeout_ms`; under `async` at once). Awaiting it holds
    /// no thread. The append itself is a copy into the page cache in both
    /// modes (segments are created and warmed ahead by the preallocator).
    ///
    /// While the dispatcher is more than [`DISPATCH_LAG_MAX_BYTES`]
    /// behind, this blocks until it is back within the bound: an async
    /// caller awaits [`Store::lag_admitted`] first and appends with
    /// [`Store::append_unflushed_admitted`] instead.
    pub fn append_unflushed(
        &self,
        batch: &[AppendRecord],
        max_payload: u64,
        producer: Option<&ProducerBatch>,
    ) -> Result<Unflushed<ProducerAppend>> {
        self.append_gates()?;
        self.inner.dispatcher.wait_lag_within(&self.closed)?;
        self.append_unflushed_admitted(batch, max_payload, producer, LagAdmitted(()))
    }

    /// Resolves once an append may go ahead under the dispatch-lag bound
    /// (at once while the dispatcher is within [`DISPATCH_LAG_MAX_BYTES`]
    /// of the visible end, the usual case), without holding a
    /// thread: the dispatcher wakes held appends as it moves. A stall or a
    /// closing store answers with its error. Between this and the append
    /// other appends may pass too: the lag may exceed the bound by the
    /// appends in flight, one batch each (the bound leaves room for them).
    pub async fn lag_admitted(&self) -> Result<LagAdmitted> {
        self.append_gates()?;
        self.inner.dispatcher.lag_within(&self.closed).await?;
        Ok(LagAdmitted(()))
    }

    /// [`append_unflushed`](Self::append_unflushed) after
    /// [`lag_admitted`](Self::lag_admitted) was awaited: never blocks (the
    /// append is a copy into the page cache).
    pub fn append_unflushed_admitted(
        &self,
        batch: &[AppendRecord],
        max_payload: u64,
        producer: Option<&ProducerBatch>,
        _admitted: LagAdmitted,
    ) -> Result<Unflushed<ProducerAppend>> {
        self.append_gates()?;
        let (answer, end) = match self.inner.log.append_as(batch, max_payload, producer)? {
            LogAppend::Written { appended, end } => (ProducerAppend::Written(appended), end),
            LogAppend::Duplicate { batch, end } => (ProducerAppend::Duplicate(batch), end),
        };
        Ok(self.answered_at(answer, end))
    }

    /// `answer` of an append that ends at CommitLog position `end`, owed
    /// a flush under `flush: sync`.
    fn answered_at<T>(&self, answer: T, end: u64) -> Unflushed<T> {
        let wait = (self.inner.config.flush == FlushMode::Sync).then(|| {
            self.inner.log.flush_wait(
                end,
                Duration::from_millis(self.inner.config.sync_flush_timeout_ms),
            )
        });
        Unflushed::new(answer, wait, end)
    }

    /// Write a transaction marker (COMMIT or ABORT) to `topic`-`partition`
    /// for `marker`'s producer: it ends the producer's transaction there
    /// (`CommitLog::append_marker`). Gated and answered as an append
    /// ([`Store::append_unflushed`]: the answer is the caller's once the
    /// returned [`Unflushed`] answers, under `flush: sync` after an fsync
    /// covers the marker). Refused with [`StoreError::ProducerRefused`] (a
    /// stale epoch) or [`StoreError::TopicDeleted`].
    pub fn append_marker(
        &self,
        topic: &std::sync::Arc<str>,
        partition: u32,
        marker: MarkerSpec,
    ) -> Result<Unflushed<Appended>> {
        self.append_gates()?;
        self.inner.dispatcher.wait_lag_within(&self.closed)?;
        let LogAppend::Written { appended, end } =
            self.inner.log.append_marker(topic, partition, marker)?
        else {
            return Err(StoreError::inconsistent(
                self.data_dir(),
                0,
                "a transaction marker was taken for a duplicate",
            ));
        };
        let appended = appended.into_iter().next().unwrap_or_default();
        Ok(self.answered_at(appended, end))
    }

    /// A replica's copy of its master's log from physical offset `at`
    /// ([`CommitLog::append_copy`](crate::commit_log::CommitLog::append_copy)),
    /// gated as an append (closed, disk full, dispatch stalled or far
    /// behind): a replica that cannot take the bytes refuses them, falls
    /// behind and leaves the in-sync set, rather than fill its disk.
    /// Returns once the bytes are written, not flushed: what the replica
    /// confirms is [`Store::copied_durable`].
    pub fn append_copy(&self, at: u64, bytes: &[u8]) -> Result<Copied> {
        self.space_gates()?;
        self.inner.dispatcher.wait_lag_within(&self.closed)?;
        self.inner.log.append_copy(at, bytes)
    }

    /// How far this node's log is as durable as the store's flush mode
    /// promises: flushed under `flush: sync`, written under `async` (the
    /// master's acknowledgement means the same on every node).
    pub fn copied_durable(&self) -> u64 {
        match self.inner.config.flush {
            FlushMode::Sync => self.inner.log.flushed(),
            FlushMode::Async => self.inner.log.committed(),
        }
    }

    /// `unflushed` answered only once a flush covers it, whatever the
    /// store's flush mode: a topic's own flush bound
    /// (`flush.messages`, `flush.ms` 0) under `flush: async`. The sync
    /// flusher does the flushing, with every other waiter's (group
    /// commit), within `store.sync_flush_timeout_ms`.
    pub fn flushed<T>(&self, unflushed: Unflushed<T>) -> Unflushed<T> {
        if unflushed.waits() || unflushed.end() == 0 {
            return unflushed;
        }
        let end = unflushed.end();
        let wait = self.inner.log.flush_wait(
            end,
            Duration::from_millis(self.inner.config.sync_flush_timeout_ms),
        );
        Unflushed::new(unflushed.into_value(), Some(wait), end)
    }

    /// Asks for a flush through CommitLog position `end` without waiting
    /// for it (a topic's `flush.ms`: its records are flushed within that
    /// bound, not only at the next `flush_interval_ms`).
    pub fn request_flush(&self, end: u64) {
        self.inner.log.request_flush(end);
    }

    /// What refuses an append before it waits or writes: a replica, a
    /// closed store, a full disk (by ratio or reserve), dispatch stalled
    /// or short of space.
    pub(super) fn append_gates(&self) -> Result<()> {
        if self.replica.load(Ordering::Acquire) {
            return Err(StoreError::Replica);
        }
        self.space_gates()
    }

    /// Make this store a cluster's replica (`true`): every append is
    /// refused ([`StoreError::Replica`]) and only the master's copy
    /// ([`Store::append_copy`]) writes, so nothing of this node's own (a
    /// coordinator's marker, an expiry's tombstone) can make its log part
    /// from the master's. `false`: it is the master, or a single node.
    pub fn set_replica(&self, replica: bool) {
        self.replica.store(replica, Ordering::Release);
    }

    /// Whether [`Store::set_replica`] made this store a replica.
    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Acquire)
    }

    /// The gates both an append and a copy pass: closed, disk full,
    /// dispatch stalled.
    fn space_gates(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        if self.inner.retention.disk_full.load(Ordering::Acquire) {
            return Err(self.inner.disk_full_error());
        }
        if let Some(refused) = self.inner.dispatcher.refusal() {
            return Err(refused);
        }
        Ok(())
    }

    /// `Some(why)` while the store refuses appends, with the error an
    /// append gets now: closed, poisoned (a failed write or flush), the
    /// disk full (by ratio, by reserve, or a file the dispatcher could not
    /// create), dispatch stalled, or the next CommitLog segment
    /// impossible to make with none made ahead. What readiness reports: a
    /// server that answers ready while every produce fails sends a load
    /// balancer's writes to it.
    ///
    /// A replica is not refused here: its writes go to the master (HTTP
    /// forwards them), so it is as ready as its disk lets it be.
    pub fn write_refusal(&self) -> Option<StoreError> {
        if let Err(e) = self.space_gates() {
            return Some(e);
        }
        if let Some(e) = self.inner.log.poisoned_error() {
            return Some(e);
        }
        self.inner.log.segment_creation_failure()
    }

    /// A new producer id for InitProducerId: never one handed out before in
    /// this data dir, across restarts and crashes (`producer_state::ids`).
    pub fn allocate_producer_id(&self) -> Result<i64> {
        self.inner
            .producer_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .allocate()
    }

    /// Hand out producer ids of cluster node `node_id`'s own block only
    /// (`producer_state::ids::node_space`), above every id of the block
    /// the producer state holds: any node of a cluster then answers an
    /// idempotent producer's InitProducerId, and no two ever hand out one
    /// id.
    pub fn confine_producer_ids(&self, node_id: u32) {
        let space = crate::producer_state::ids::node_space(node_id);
        let floor = self
            .inner
            .log
            .max_producer_id_in(&space)
            .map_or(space.start, |id| id + 1);
        self.inner
            .producer_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .confine(space, floor);
    }

    /// Whether `producer_id` was handed out by this data dir.
    pub fn producer_id_issued(&self, producer_id: i64) -> bool {
        self.inner
            .producer_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .issued(producer_id)
    }

    /// Whether the dispatcher is more than half of
    /// [`DISPATCH_LAG_MAX_BYTES`] behind: an append may soon wait for it
    /// (a front-end runs appends where a wait costs no async worker).
    pub fn dispatch_lagging(&self) -> bool {
        self.inner.dispatcher.lag_bytes() > DISPATCH_LAG_MAX_BYTES / 2
    }

    /// `Some` while dispatch refuses appends (stalled, or a sink out of
    /// space): the error they are refused with.
    pub fn dispatch_stall(&self) -> Option<StoreError> {
        self.inner.dispatcher.refusal()
    }
}
