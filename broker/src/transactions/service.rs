//! The transaction coordinator at work: the state machine
//! ([`Transactions`]) behind a lock, each transition made durable in
//! `__transaction_state` before it is applied, markers written to every
//! partition of an ending transaction, the end finished after a crash,
//! and open transactions past their timeout aborted.
//!
//! Order of an end (EndTxn, a fence, a timeout), Kafka's:
//! 1. the PrepareCommit or PrepareAbort record is appended (under
//!    `flush: sync`, acknowledged once durable) and applied: from here the
//!    outcome is decided, and a restart finishes it (`Broker::txn_recover`);
//! 2. a COMMIT or ABORT marker is written to each of its partitions
//!    (`Store::append_marker`, durable the same way), which ends the
//!    transaction there for read_committed readers;
//! 3. the CompleteCommit or CompleteAbort record is appended and applied.
//!
//! A crash between any two steps leaves a PrepareX record, so the markers
//! are written (again: a marker of a producer with nothing open in a
//! partition ends nothing) and the end completes; before step 1 nothing is
//! decided, and the transaction stays open until its producer ends it or
//! its timeout aborts it. Every partition therefore ends the same way.
//!
//! Locking: the state machine's lock is held only to compute or apply a
//! transition, never across a write; a transition in flight makes every
//! other call on its id CONCURRENT_TRANSACTIONS ([`Transactions`]), so
//! what is applied is always what is durable, in log order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tidelog_storage::{AppendRecord, MarkerSpec, SequenceProblem, StoreError};

use super::log::{self, TRANSACTION_STATE_TOPIC};
use super::{
    InitOutcome, Transactions, Transition, TxnOffset, TxnOffsets, TxnPartition, TxnRefusal,
    TxnState,
};
use crate::topic_config::Overrides;
use crate::BrokerError;

/// `transactional.id.expiration.ms`'s default (Kafka's: seven days): an
/// id with no transaction open and unused this long is forgotten.
pub const TRANSACTIONAL_ID_EXPIRATION_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// How often the coordinator looks for transactions past their timeout
/// (Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`
/// is 10 s).
pub const TXN_TICK_MS: u64 = 1_000;
/// Records read at once when the log is rebuilt.
const REBUILD_BATCH_RECORDS: usize = 1_000;
const REBUILD_BATCH_BYTES: usize = 4 << 20;

/// Why a transaction call failed: the coordinator's refusal (one Kafka
/// error each), or the broker's.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    #[error(transparent)]
    Refused(#[from] TxnRefusal),
    #[error(transparent)]
    Broker(#[from] BrokerError),
}

/// The coordinator's state ([`Transactions`]) and who writes which
/// producer's transactions.
#[derive(Debug, Default)]
pub struct TxnCoordinator {
    state: Mutex<Transactions>,
    /// Producer id → its transactional id, for Produce's check of a
    /// transactional batch (an id's producer changes only by a
    /// transition): each id's current producer only, and no id the
    /// coordinator forgot.
    producers: Mutex<HashMap<i64, String>>,
}

impl TxnCoordinator {
    /// The coordinator of a rebuilt log.
    pub fn with(state: Transactions) -> TxnCoordinator {
        let producers = state
            .list()
            .map(|(id, m)| (m.producer_id, id.to_owned()))
            .collect();
        TxnCoordinator {
            state: Mutex::new(state),
            producers: Mutex::new(producers),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Transactions> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn producers(&self) -> MutexGuard<'_, HashMap<i64, String>> {
        self.producers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The coordinator's clock: wall time, as the transitions record it.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl crate::Broker {
    /// The transaction log's topic, made (compact, one partition,
    /// internal) on the first transactional producer. Blocking.
    fn txn_log_topic(&self) -> Result<Arc<crate::registry::Topic>, BrokerError> {
        if let Some(t) = self.registry.get(TRANSACTION_STATE_TOPIC) {
            return Ok(t);
        }
        let overrides = Overrides::from([("cleanup.policy".to_string(), "compact".to_string())]);
        match self.create_topic(TRANSACTION_STATE_TOPIC, 1, overrides) {
            Ok(t) => Ok(t),
            // Made by another call in between.
            Err(_) if self.registry.get(TRANSACTION_STATE_TOPIC).is_some() => {
                self.registry.require(TRANSACTION_STATE_TOPIC)
            }
            Err(e) => Err(e),
        }
    }

    /// Makes `t` durable in the transaction log, then applies it; on a
    /// failed write forgets it, so the client's retry starts again.
    /// Blocking (under `flush: sync`, until the record is durable).
    fn txn_apply(&self, t: &Transition) -> Result<(), BrokerError> {
        let written = self.txn_log_topic().and_then(|topic| {
            let record = AppendRecord {
                topic: Arc::clone(&topic.name),
                partition: 0,
                key: Some(log::record_key(&t.transactional_id)),
                value: Some(log::record_value(t)),
                headers: Vec::new(),
                timestamp_ms: Some(i64::try_from(t.at_ms).unwrap_or(i64::MAX)),
            };
            self.store.append(std::slice::from_ref(&record))?;
            Ok(())
        });
        match written {
            Ok(()) => {
                let previous = {
                    let mut state = self.txns.lock();
                    let previous = state.get(&t.transactional_id).map(|m| m.producer_id);
                    state.complete(t);
                    previous
                };
                let mut producers = self.txns.producers();
                // An id given a new producer id (epoch exhaustion) leaves
                // its old one: the map holds each id's current producer.
                if let Some(old) = previous.filter(|&old| old != t.producer_id) {
                    producers.remove(&old);
                }
                producers.insert(t.producer_id, t.transactional_id.clone());
                Ok(())
            }
            Err(e) => {
                tracing::warn!(transactional_id = %t.transactional_id, state = t.state.name(), error = %e, "a transaction's state could not be made durable; the client retries");
                self.txns.lock().abandon(t);
                Err(e)
            }
        }
    }

    /// Writes `t`'s COMMIT or ABORT marker to each of its partitions,
    /// each durable as an append is. A partition whose topic is gone
    /// needs none; one where the producer is known at a newer epoch has
    /// been ended by that epoch already. Every marker is written before
    /// the first wait, so under `flush: sync` one group commit covers
    /// them all (waiting for each in turn took one flush a partition).
    /// Blocking.
    fn txn_markers(&self, t: &Transition) -> Result<(), BrokerError> {
        let Some(commit) = t.marker() else {
            return Ok(());
        };
        let spec = MarkerSpec {
            producer_id: t.producer_id,
            epoch: t.epoch,
            commit,
            coordinator_epoch: 0,
        };
        let mut written = Vec::with_capacity(t.partitions.len());
        for (topic, partition) in &t.partitions {
            let Some(topic) = self.registry.get(topic) else {
                continue;
            };
            if topic.check_partition(*partition).is_err() {
                continue;
            }
            match self.store.append_marker(&topic.name, *partition, spec) {
                Ok(unflushed) => written.push(unflushed),
                Err(StoreError::TopicDeleted { .. }) => {}
                Err(StoreError::ProducerRefused {
                    problem: SequenceProblem::StaleEpoch { .. },
                    ..
                }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        for unflushed in written {
            unflushed.wait()?;
        }
        Ok(())
    }

    /// A committing transaction's consumer offsets, committed to their
    /// groups (`__consumer_offsets`) after its markers and before its
    /// Complete record: a restart after the decision commits them again,
    /// the same values, so they are committed if and only if the
    /// transaction is. Blocking.
    fn txn_commit_offsets(&self, offsets: &TxnOffsets) -> Result<(), BrokerError> {
        let mut by_group: std::collections::BTreeMap<&str, Vec<crate::groups::OffsetRecord>> =
            std::collections::BTreeMap::new();
        for ((group, topic, partition), o) in offsets {
            let value = crate::groups::CommitValue {
                offset: o.offset,
                metadata: o.metadata.clone(),
                leader_epoch: o.leader_epoch,
                protocol: None,
            };
            let bytes = crate::groups::record_value(&value)
                .map_err(|source| BrokerError::OffsetCommitEncode { source })?;
            by_group.entry(group).or_default().push((
                topic.clone(),
                *partition,
                Some((value, bytes)),
            ));
        }
        for (group, records) in by_group {
            self.append_offsets(group, records)?;
        }
        Ok(())
    }

    /// A decided end, carried out: `prepare` (a PrepareCommit or
    /// PrepareAbort) made durable and applied unless `durable`, the
    /// markers, then the Complete record. Blocking.
    fn txn_end_decided(&self, prepare: &Transition, durable: bool) -> Result<(), BrokerError> {
        if !durable {
            self.txn_apply(prepare)?;
        }
        self.txn_markers(prepare)?;
        if prepare.marker() == Some(true) {
            self.txn_commit_offsets(&prepare.offsets)?;
        }
        let complete = self.txns.lock().finish(&prepare.transactional_id, now_ms());
        match complete {
            Some(c) => self.txn_apply(&c),
            // Finished by another call meanwhile (a retry, the tick).
            None => Ok(()),
        }
    }

    /// InitProducerId with a transactional id: the id's producer id and
    /// epoch, bumped, after a transaction left open is aborted (the
    /// caller gets CONCURRENT_TRANSACTIONS then and retries). Blocking.
    pub fn init_transactional_producer(
        &self,
        transactional_id: &str,
        timeout_ms: i64,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        self.txn_log_topic()?;
        let store = &self.store;
        let mut allocate = || {
            store
                .allocate_producer_id()
                .map_err(|e| TxnRefusal::InvalidRequest {
                    reason: format!("no producer id: {e}"),
                })
        };
        let outcome = self.txns.lock().init_producer_id(
            transactional_id,
            timeout_ms,
            expected,
            now_ms(),
            &mut allocate,
        )?;
        match outcome {
            InitOutcome::Ready(t) => {
                self.txn_apply(&t)?;
                Ok((t.producer_id, t.epoch))
            }
            InitOutcome::Same { producer_id, epoch } => Ok((producer_id, epoch)),
            InitOutcome::AbortFirst(t) => {
                self.txn_end_decided(&t, false)?;
                Err(TxnRefusal::Concurrent.into())
            }
        }
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn): the partitions join the
    /// producer's transaction, which is open from here. Every partition
    /// must exist (the caller answers UNKNOWN_TOPIC_OR_PARTITION for one
    /// that does not, and adds none). Blocking.
    pub fn add_partitions_to_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TxnPartition],
    ) -> Result<(), TxnError> {
        let t = self.txns.lock().add_partitions(
            transactional_id,
            producer_id,
            epoch,
            partitions,
            now_ms(),
        )?;
        if let Some(t) = t {
            self.txn_apply(&t)?;
        }
        Ok(())
    }

    /// TxnOffsetCommit: consumer offsets of `group` join the producer's
    /// open transaction, committed with it (KIP-98's
    /// consume-transform-produce). With a generation (v3, KIP-447) the
    /// member must be the group's current one, as for OffsetCommit, so a
    /// zombie member cannot commit; every topic and partition must exist,
    /// metadata at most 4 KiB. Blocking.
    pub fn txn_offset_commit(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        member: Option<(&str, Option<&str>, u32)>,
        offsets: Vec<(String, u32, TxnOffset)>,
    ) -> Result<(), TxnError> {
        crate::names::validate_group_name(group)?;
        if let Some((member_id, instance_id, generation)) = member {
            self.coordinator.validate_commit(
                group,
                crate::coordinator::CommitOrigin::Member {
                    member_id,
                    instance_id,
                    generation,
                },
            )?;
        }
        for (index, (topic, partition, o)) in offsets.iter().enumerate() {
            self.registry.require(topic)?.check_partition(*partition)?;
            crate::groups::validate_commit_metadata(index, &o.metadata)?;
        }
        let keyed = offsets
            .into_iter()
            .map(|(topic, partition, o)| ((group.to_owned(), topic, partition), o))
            .collect();
        let t =
            self.txns
                .lock()
                .add_offsets(transactional_id, producer_id, epoch, keyed, now_ms())?;
        if let Some(t) = t {
            self.txn_apply(&t)?;
        }
        Ok(())
    }

    /// EndTxn: commit or abort the producer's transaction in every
    /// partition it added, answered once all of it is durable (the
    /// module doc's order). A retried end already made answers at once.
    /// Blocking.
    pub fn end_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), TxnError> {
        let prepare =
            self.txns
                .lock()
                .end(transactional_id, producer_id, epoch, commit, now_ms())?;
        if let Some(prepare) = prepare {
            self.txn_end_decided(&prepare, false)?;
        }
        Ok(())
    }

    /// Produce's check of a transactional batch to `topic`-`partition`:
    /// its producer's transaction is open, at that epoch, and added the
    /// partition (Kafka answers INVALID_TXN_STATE otherwise, and
    /// PRODUCER_FENCED for an old epoch).
    pub fn check_transactional_produce(
        &self,
        producer_id: i64,
        epoch: i16,
        topic: &str,
        partition: u32,
    ) -> Result<(), TxnRefusal> {
        // The producer map, then the state: nothing takes them the other
        // way round (a transition's apply takes one after the other).
        let producers = self.txns.producers();
        let state = self.txns.lock();
        let m = producers
            .get(&producer_id)
            .and_then(|id| state.get(id))
            .filter(|m| m.producer_id == producer_id)
            .ok_or(TxnRefusal::InvalidProducerIdMapping { producer_id })?;
        if m.epoch != epoch {
            return Err(TxnRefusal::ProducerFenced {
                epoch,
                current: m.epoch,
            });
        }
        let added = m.partitions.contains(&(topic.to_owned(), partition));
        if m.state != TxnState::Ongoing || !added {
            return Err(TxnRefusal::InvalidState {
                what: "write to a partition outside",
                state: m.state.name(),
            });
        }
        Ok(())
    }

    /// Every transactional id with its metadata (ListTransactions,
    /// DescribeTransactions), in id order.
    pub fn transactions(&self) -> Vec<(String, super::TxnMetadata)> {
        self.txns
            .lock()
            .list()
            .filter(|(_, m)| m.epoch >= 0)
            .map(|(id, m)| (id.to_owned(), m.clone()))
            .collect()
    }

    /// The coordinator's periodic work: transactions past their timeout
    /// aborted (their producers fenced), ends a failed write left
    /// decided but unfinished carried out again, and transactional ids
    /// unused past [`TRANSACTIONAL_ID_EXPIRATION_MS`] forgotten.
    /// Blocking.
    pub fn txn_tick(&self) -> Result<(), BrokerError> {
        if self.registry.get(TRANSACTION_STATE_TOPIC).is_none() {
            return Ok(());
        }
        let now = now_ms();
        let (expired, stuck) = {
            let mut state = self.txns.lock();
            let expired = state.expire(now);
            let stuck: Vec<Transition> = state
                .list()
                .filter(|(_, m)| {
                    m.pending.is_none()
                        && matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
                        && now.saturating_sub(m.updated_ms) > TXN_TICK_MS
                })
                .map(|(id, _)| state.snapshot(id))
                .collect();
            (expired, stuck)
        };
        for t in &expired {
            tracing::info!(transactional_id = %t.transactional_id, producer_id = t.producer_id, "aborting a transaction past its timeout");
            self.txn_end_decided(t, false)?;
        }
        for t in &stuck {
            self.txn_end_decided(t, true)?;
        }
        let gone = self
            .txns
            .lock()
            .expire_ids(now, TRANSACTIONAL_ID_EXPIRATION_MS);
        if !gone.is_empty() {
            // Forgotten now, whether or not the tombstones below are
            // written (a restart's rebuild forgets them again).
            let forgotten: std::collections::HashSet<&String> = gone.iter().collect();
            self.txns
                .producers()
                .retain(|_, id| !forgotten.contains(id));
            let topic = self.txn_log_topic()?;
            let tombstones: Vec<AppendRecord> = gone
                .iter()
                .map(|id| AppendRecord {
                    topic: Arc::clone(&topic.name),
                    partition: 0,
                    key: Some(log::record_key(id)),
                    value: None,
                    headers: Vec::new(),
                    timestamp_ms: None,
                })
                .collect();
            self.store.append(&tombstones)?;
            tracing::info!(ids = gone.len(), "forgot expired transactional ids");
        }
        Ok(())
    }

    /// At start, after the log was rebuilt: every end a crash left decided
    /// but unfinished is carried out. Blocking.
    pub(crate) fn txn_recover(&self, ending: &[Transition]) -> Result<(), BrokerError> {
        for t in ending {
            tracing::info!(transactional_id = %t.transactional_id, state = t.state.name(), partitions = t.partitions.len(), "finishing a transaction end a restart interrupted");
            self.txn_end_decided(t, true)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "crash_tests.rs"]
mod crash_tests;

/// The coordinator from `__transaction_state`'s compacted log (read from
/// its base offset), and the ends to finish. Blocking. A record that does
/// not decode refuses the start by name: a transaction's outcome must
/// never be guessed.
pub(crate) fn rebuild(
    logs: &tidelog_cleaner::compacted::CompactedLogs,
    base_offset: u64,
) -> Result<(TxnCoordinator, Vec<Transition>), BrokerError> {
    let Some(log) = logs.log(TRANSACTION_STATE_TOPIC, 0) else {
        return Ok((TxnCoordinator::default(), Vec::new()));
    };
    let end = log.next_offset();
    let mut from = base_offset;
    let mut records = Vec::new();
    while from < end {
        let batch = log
            .read(from, REBUILD_BATCH_RECORDS, REBUILD_BATCH_BYTES)
            .map_err(|source| BrokerError::ConsumerOffsets {
                topic: TRANSACTION_STATE_TOPIC,
                source,
            })?;
        let Some(last) = batch.last() else {
            break;
        };
        from = last.offset.get() + 1;
        for r in batch {
            records.push((r.offset.get(), r.key(), r.value()));
        }
    }
    let (state, recovery) = log::rebuild(records.iter().map(|(offset, key, value)| {
        (
            *offset,
            key.as_deref().unwrap_or_default(),
            value.as_deref(),
        )
    }))
    .map_err(|bad| BrokerError::TransactionLog {
        reason: bad.to_string(),
    })?;
    tracing::info!(
        ids = state.len(),
        open = recovery.open,
        ending = recovery.ending.len(),
        "transactions rebuilt"
    );
    Ok((TxnCoordinator::with(state), recovery.ending))
}
