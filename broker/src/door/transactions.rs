//! The door's transaction calls (Kafka's InitProducerId with a
//! transactional id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit,
//! EndTxn, DescribeTransactions, ListTransactions, DescribeProducers): the
//! ACLs Kafka asks for, then the coordinator
//! (`crate::transactions::service`), on the blocking pool for every call
//! that waits for its records (and markers) to be durable.
//!
//! ACLs, Kafka's (docs/SECURITY.md): WRITE on the transactional id for
//! every call that changes it, WRITE on each topic a transaction adds,
//! READ on the group (and its topics) whose offsets it commits, DESCRIBE
//! on the id to find, list or describe it; a transactional id refused is
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED. READ on a topic to describe its
//! partitions' producers.

use std::sync::Arc;

use tidelog_security::acl::{Operation, Resource};
use tidelog_storage::ActiveProducer;

use super::Door;
use crate::registry::CONSUMER_OFFSETS_TOPIC;
use crate::transactions::service::TxnError;
use crate::transactions::{TxnMetadata, TxnOffset, TxnPartition, TxnRefusal, TxnState};

/// Why DescribeProducers does not describe a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducersRefusal {
    /// TOPIC_AUTHORIZATION_FAILED: no READ on the topic.
    NotAuthorized,
    /// UNKNOWN_TOPIC_OR_PARTITION.
    Unknown,
}

/// Why DescribeTransactions does not describe an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescribeRefusal {
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED: no DESCRIBE on it.
    NotAuthorized,
    /// TRANSACTIONAL_ID_NOT_FOUND.
    NotFound,
}

impl Door {
    /// WRITE on `transactional_id`, which every call that changes it
    /// needs (TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise).
    fn allow_write_on(&self, transactional_id: &str) -> Result<(), TxnError> {
        self.allow(
            Operation::Write,
            Resource::transactional_id(transactional_id),
        )?;
        Ok(())
    }

    /// InitProducerId with `transactional_id`: its producer id and epoch
    /// (see `Broker::init_transactional_producer`).
    pub async fn init_transactional_producer(
        &self,
        transactional_id: String,
        timeout_ms: i64,
        current: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        self.broker.check_master()?;
        self.allow_write_on(&transactional_id)?;
        let broker = Arc::clone(&self.broker);
        crate::blocking::run(move || {
            Ok(broker.init_transactional_producer(&transactional_id, timeout_ms, current))
        })
        .await?
    }

    /// AddPartitionsToTxn: every partition must exist and its topic be
    /// writable; then all join the transaction, or none.
    pub async fn add_partitions_to_txn(
        &self,
        transactional_id: String,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<TxnPartition>,
    ) -> Result<(), TxnError> {
        self.broker.check_master()?;
        self.allow_write_on(&transactional_id)?;
        for (topic, partition) in &partitions {
            self.allow(Operation::Write, Resource::topic(topic))?;
            let t = self.broker.registry.require(topic)?;
            if t.is_internal() {
                return Err(crate::BrokerError::InternalTopic {
                    topic: topic.clone(),
                }
                .into());
            }
            t.check_partition(*partition)?;
            // The remote tier's objects keep no transaction flags or
            // markers (KAFKA.md, "Transactions").
            if t.config.remote_storage_enable {
                return Err(TxnRefusal::InvalidState {
                    what: "add a tiered topic (not served yet) to",
                    state: "any",
                }
                .into());
            }
        }
        let broker = Arc::clone(&self.broker);
        crate::blocking::run(move || {
            Ok(broker.add_partitions_to_txn(&transactional_id, producer_id, epoch, &partitions))
        })
        .await?
    }

    /// AddOffsetsToTxn: the transaction will commit `group`'s offsets
    /// (its offsets partition joins it, as in Kafka). READ on the group.
    pub async fn add_offsets_to_txn(
        &self,
        transactional_id: String,
        producer_id: i64,
        epoch: i16,
        group: String,
    ) -> Result<(), TxnError> {
        self.broker.check_master()?;
        self.allow_write_on(&transactional_id)?;
        self.allow(Operation::Read, Resource::group(&group))?;
        crate::names::validate_group_name(&group)?;
        let broker = Arc::clone(&self.broker);
        crate::blocking::run(move || {
            Ok(broker.add_partitions_to_txn(
                &transactional_id,
                producer_id,
                epoch,
                &[(CONSUMER_OFFSETS_TOPIC.to_owned(), 0)],
            ))
        })
        .await?
    }

    /// TxnOffsetCommit: `group`'s offsets join the transaction (see
    /// `Broker::txn_offset_commit`). READ on the group and each topic.
    #[allow(clippy::too_many_arguments)]
    pub async fn txn_offset_commit(
        &self,
        transactional_id: String,
        producer_id: i64,
        epoch: i16,
        group: String,
        member: Option<(String, Option<String>, u32)>,
        offsets: Vec<(String, u32, TxnOffset)>,
    ) -> Result<(), TxnError> {
        self.broker.check_master()?;
        self.allow_write_on(&transactional_id)?;
        self.allow(Operation::Read, Resource::group(&group))?;
        for (topic, _, _) in &offsets {
            self.allow(Operation::Read, Resource::topic(topic))?;
        }
        let broker = Arc::clone(&self.broker);
        crate::blocking::run(move || {
            let member = member
                .as_ref()
                .map(|(id, instance, generation)| (id.as_str(), instance.as_deref(), *generation));
            Ok(broker.txn_offset_commit(
                &transactional_id,
                producer_id,
                epoch,
                &group,
                member,
                offsets,
            ))
        })
        .await?
    }

    /// EndTxn: commit or abort, answered once durable in every partition.
    pub async fn end_txn(
        &self,
        transactional_id: String,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), TxnError> {
        self.broker.check_master()?;
        self.allow_write_on(&transactional_id)?;
        let broker = Arc::clone(&self.broker);
        crate::blocking::run(move || {
            Ok(broker.end_txn(&transactional_id, producer_id, epoch, commit))
        })
        .await?
    }

    /// Whether `topic`-`partition` exists (AddPartitionsToTxn answers the
    /// missing ones by name).
    pub fn partition_exists(&self, topic: &str, partition: u32) -> bool {
        self.broker
            .registry
            .get(topic)
            .is_some_and(|t| t.check_partition(partition).is_ok())
    }

    /// ListTransactions (KIP-664): the transactional ids the principal
    /// may describe, filtered by state names (Kafka's; empty: any), by
    /// producer ids (empty: any) and, with `running_longer_ms` ≥ 0, to
    /// open transactions that began longer ago than that. Also the state
    /// names asked for that are no state.
    pub fn list_transactions(
        &self,
        states: &[String],
        producer_ids: &[i64],
        running_longer_ms: i64,
    ) -> (Vec<(String, i64, &'static str)>, Vec<String>) {
        let known = [
            TxnState::Empty,
            TxnState::Ongoing,
            TxnState::PrepareCommit,
            TxnState::PrepareAbort,
            TxnState::CompleteCommit,
            TxnState::CompleteAbort,
            TxnState::PrepareEpochFence,
        ];
        let unknown = states
            .iter()
            .filter(|s| !known.iter().any(|k| k.name() == s.as_str()))
            .cloned()
            .collect();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let listed = self
            .broker
            .transactions()
            .into_iter()
            .filter(|(id, m)| {
                (states.is_empty() || states.iter().any(|s| s == m.state.name()))
                    && (producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
                    && (running_longer_ms < 0
                        || m.started_ms.is_some_and(|s| {
                            now.saturating_sub(s) > u64::try_from(running_longer_ms).unwrap_or(0)
                        }))
                    && self.may(Operation::Describe, Resource::transactional_id(id))
            })
            .map(|(id, m)| (id, m.producer_id, m.state.name()))
            .collect();
        (listed, unknown)
    }

    /// DescribeTransactions (KIP-664): each id's metadata, `Err` with why
    /// not (not authorized, not found).
    pub fn describe_transactions(
        &self,
        ids: &[String],
    ) -> Vec<Result<TxnMetadata, DescribeRefusal>> {
        let all = self.broker.transactions();
        ids.iter()
            .map(|id| {
                if !self.may(Operation::Describe, Resource::transactional_id(id)) {
                    return Err(DescribeRefusal::NotAuthorized);
                }
                all.iter()
                    .find(|(known, _)| known == id)
                    .map(|(_, m)| m.clone())
                    .ok_or(DescribeRefusal::NotFound)
            })
            .collect()
    }

    /// DescribeProducers (KIP-664): the producers with state in each of
    /// `topic`'s asked `partitions` (their epoch, last sequence, last
    /// write and open transaction), `Err` with why not. READ on the topic,
    /// as Kafka asks, checked before the topic is looked up, so a refused
    /// principal learns nothing of which topics exist.
    pub fn describe_producers(
        &self,
        topic: &str,
        partitions: &[i32],
    ) -> Vec<Result<Vec<ActiveProducer>, ProducersRefusal>> {
        if !self.may(Operation::Read, Resource::topic(topic)) {
            return vec![Err(ProducersRefusal::NotAuthorized); partitions.len()];
        }
        let known = self.broker.registry.require(topic).ok();
        partitions
            .iter()
            .map(|&p| {
                let p = u32::try_from(p).map_err(|_| ProducersRefusal::Unknown)?;
                match &known {
                    Some(t) if t.check_partition(p).is_ok() => {
                        Ok(self.broker.store.producers(topic, p))
                    }
                    _ => Err(ProducersRefusal::Unknown),
                }
            })
            .collect()
    }

    /// FindCoordinator of a transactional id: whether the principal may
    /// describe it (Kafka tells the coordinator only then).
    pub fn may_describe_transactional_id(&self, transactional_id: &str) -> bool {
        self.may(
            Operation::Describe,
            Resource::transactional_id(transactional_id),
        )
    }
}
