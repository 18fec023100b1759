//! The door: the one way a front-end asks the broker for anything.
//!
//! A front-end (HTTP, Kafka, the CLI through HTTP) holds a [`Door`] for the
//! caller a request comes from ([`Broker::door_for`]: its principal and
//! host) and calls one async method per operation, with a typed request
//! and a typed answer. Every rule that is not about a wire format is
//! decided behind it, once: who may do what (each method's first line is
//! its ACL check, `crate::access`; [`Door::may`] answers the same for a
//! front-end that answers item by item), which partitions this node leads (the cluster issue),
//! what a read may see (read-committed, the transactions issue), and on
//! which thread the work runs: a copy into the page cache on the caller's
//! task, a registry write, a file deletion or a cold read on the blocking
//! pool, a wait for the dispatcher or an fsync awaited without holding a
//! thread. No front-end picks a thread for broker work.
//!
//! The methods are thin: each hands over to the broker's operation of the
//! same name in the module that owns it (`produce.rs`, `topics.rs`,
//! `compaction.rs`, `groups.rs`, `stats.rs`, ...). The broker's blocking
//! methods stay public for tests and tools (restore, bench), never for a
//! front-end's request path. Two sets of calls have files of their own
//! here, for the waits they hold: [`groups`], the group coordinator's
//! (a JoinGroup waits for the join window, a SyncGroup for the leader),
//! and [`consumers`], the HTTP consumer instances' (a records call waits
//! for records).

// Declared, not re-exported: they import this file (`Door`), so a
// re-export here would be an import circle.
mod cluster;
pub mod consumers;
pub mod groups;
pub mod security;
mod transactions;
pub use transactions::{DescribeRefusal, ProducersRefusal};

use std::net::IpAddr;
use std::sync::Arc;

use tidelog_security::acl::{Operation, Resource};
use tidelog_storage::{PassOutcome, Trigger};
use uuid::Uuid;

use crate::broker::Broker;
use crate::compaction::CompactionTicket;
use crate::error::BrokerError;
use crate::group_admin::{OffsetDeletion, ResetScope, ResetTarget};
use crate::groups::{CommittedOffset, Committer, OffsetCommit};
use crate::principal::{Caller, Principal};
use crate::produce::{ProduceAck, ProduceRequest, Records};
use crate::read::{KeyRecords, PartitionRef, PhysicalRecord};
use crate::registry::{ChangesOf, Topic};
use crate::store::PartitionStatus;
use crate::topics::{AddPartitions, CreateTopic, CreatedTopic};

/// A partition's offsets ([`Door::offsets`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub beginning: u64,
    /// The offset the next record gets.
    pub end: u64,
    /// The first offset whose record's timestamp is at least the one
    /// asked, when one was.
    pub at_timestamp: Option<u64>,
}

/// The broker as one principal sees it. Cheap to make and to clone.
#[derive(Debug, Clone)]
pub struct Door {
    broker: Arc<Broker>,
    who: Principal,
    /// The client's address, for ACLs that name hosts; `None` (an
    /// in-process caller) matches only ACLs for every host.
    host: Option<IpAddr>,
}

impl Broker {
    /// The door for requests made as `who` (from no particular host:
    /// [`Door::from_host`] names it).
    pub fn door(self: &Arc<Self>, who: &Principal) -> Door {
        Door {
            broker: Arc::clone(self),
            who: who.clone(),
            host: None,
        }
    }

    /// The door for `caller`'s requests (its principal, from its host).
    pub fn door_for(self: &Arc<Self>, caller: &Caller) -> Door {
        Door {
            broker: Arc::clone(self),
            who: caller.principal.clone(),
            host: caller.host,
        }
    }
}

impl Door {
    pub(crate) fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// This door with requests from `host` (the client's address).
    pub fn from_host(mut self, host: IpAddr) -> Door {
        self.host = Some(host);
        self
    }

    /// Who this door's requests are made as.
    pub fn who(&self) -> &Principal {
        &self.who
    }

    /// Whether this door's principal may do `operation` on `resource`:
    /// the check every method makes (`crate::access`), for a front-end
    /// that answers item by item (Metadata's topics, OffsetCommit's
    /// partitions) or leaves out what may not be seen.
    pub fn may(&self, operation: Operation, resource: Resource<'_>) -> bool {
        self.broker
            .access
            .allows(&self.who, self.host, operation, resource)
    }

    /// [`Door::may`], or [`BrokerError::NotAuthorized`].
    pub(crate) fn allow(
        &self,
        operation: Operation,
        resource: Resource<'_>,
    ) -> Result<(), BrokerError> {
        self.broker
            .access
            .check(&self.who, self.host, operation, resource)
    }

    /// Appends records (`crate::produce`): answers once they are as
    /// durable as the flush mode promises. WRITE on the topic, checked
    /// once: by [`Door::records_for`] when it made the records (Kafka's
    /// path), else here.
    pub async fn produce(&self, request: ProduceRequest) -> Result<ProduceAck, BrokerError> {
        if !request.records.bound_to(&request.topic) {
            self.allow(Operation::Write, Resource::topic(&request.topic))?;
        }
        self.broker.produce(&self.who, request).await
    }

    /// Empty [`Records`] for `partition` of `topic`, checked before the
    /// caller decodes into them: an unknown topic or partition, or an
    /// internal topic, is refused before a byte of the request is
    /// decoded, and each record gets its topic and partition as it is
    /// pushed (Kafka's Produce; it never creates a topic).
    pub fn records_for(&self, topic: &str, partition: u32) -> Result<Records, BrokerError> {
        self.allow(Operation::Write, Resource::topic(topic))?;
        self.broker.records_for(topic, partition)
    }

    /// Creates a topic after every rule of `crate::topics`, or, with
    /// `validate_only`, checks them and creates nothing.
    pub async fn create_topic(
        &self,
        request: CreateTopic,
        validate_only: bool,
    ) -> Result<CreatedTopic, BrokerError> {
        self.broker.check_master()?;
        self.allow_create(&request.name)?;
        self.broker
            .create_topic_checked(&self.who, request, validate_only)
            .await
    }

    /// Adds partitions to a topic after Kafka's rules
    /// (`crate::topics::AddPartitions`), or, with `validate_only`, checks
    /// them and changes nothing: ALTER on the topic, as Kafka's
    /// CreatePartitions asks. The partition count it has now.
    pub async fn add_partitions(
        &self,
        request: AddPartitions,
        validate_only: bool,
    ) -> Result<u32, BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Alter, Resource::topic(&request.topic))?;
        self.broker
            .add_partitions_checked(&self.who, request, validate_only)
            .await
    }

    /// The topic `name` (40401 / UNKNOWN_TOPIC_OR_PARTITION if unknown).
    pub fn describe_topic(&self, name: &str) -> Result<Arc<Topic>, BrokerError> {
        self.allow(Operation::Describe, Resource::topic(name))?;
        self.broker.describe_topic(&self.who, name)
    }

    /// The topic `name` for its configs (Kafka's DescribeConfigs):
    /// DESCRIBE_CONFIGS on the topic, which ALTER_CONFIGS implies.
    pub fn topic_configs(&self, name: &str) -> Result<Arc<Topic>, BrokerError> {
        self.allow(Operation::DescribeConfigs, Resource::topic(name))?;
        self.broker.describe_topic(&self.who, name)
    }

    /// Every topic the principal may describe, internal ones included:
    /// the others are left out, as Kafka's Metadata leaves them.
    pub fn list_topics(&self) -> Vec<Arc<Topic>> {
        let mut topics = self.broker.list_topics(&self.who);
        topics.retain(|t| self.may(Operation::Describe, Resource::topic(&t.name)));
        topics
    }

    /// The topic whose id is `id` (Kafka's Metadata and DeleteTopics by
    /// topic id); `None` if no topic has it. DESCRIBE on the topic.
    pub fn topic_by_id(&self, id: Uuid) -> Result<Option<Arc<Topic>>, BrokerError> {
        let Some(topic) = self.broker.topic_by_id(&self.who, id) else {
            return Ok(None);
        };
        self.allow(Operation::Describe, Resource::topic(&topic.name))?;
        Ok(Some(topic))
    }

    /// CREATE on the cluster, or else on the topic (Kafka's CreateTopics).
    fn allow_create(&self, topic: &str) -> Result<(), BrokerError> {
        if self.may(Operation::Create, Resource::cluster()) {
            return Ok(());
        }
        self.allow(Operation::Create, Resource::topic(topic))
    }

    /// The topic as Kafka's Metadata asks for it, auto-created when the
    /// client and the broker allow.
    pub async fn metadata_topic(
        &self,
        name: &str,
        client_allows_create: bool,
    ) -> Result<Arc<Topic>, BrokerError> {
        self.allow(Operation::Describe, Resource::topic(name))?;
        // Auto-creation needs CREATE as a create does; without it the
        // client may still learn of a topic that exists.
        let may_create = client_allows_create && self.allow_create(name).is_ok();
        // A replica creates nothing (the master does, when asked): a
        // topic it would auto-create is NotMaster, as every write is.
        if may_create && self.broker.registry.get(name).is_none() {
            self.broker.check_master()?;
        }
        self.broker
            .metadata_topic(&self.who, name, may_create)
            .await
    }

    /// Asks for a compaction pass of every partition of a compact topic.
    pub async fn compact(
        &self,
        topic: &str,
        roll_active: bool,
    ) -> Result<CompactionTicket, BrokerError> {
        self.allow(Operation::Alter, Resource::topic(topic))?;
        self.broker.compact(&self.who, topic, roll_active).await
    }

    /// Every partition's compaction status of a compact topic.
    pub async fn compaction_status(
        &self,
        topic: &str,
    ) -> Result<(Arc<Topic>, Vec<Option<PartitionStatus>>), BrokerError> {
        self.allow(Operation::Describe, Resource::topic(topic))?;
        self.broker.compaction_status(&self.who, topic).await
    }

    /// Commits a group's offsets, checked whole: READ on the group and on
    /// every topic.
    pub async fn commit(
        &self,
        group: String,
        offsets: Vec<OffsetCommit>,
        committer: Committer,
    ) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Read, Resource::group(&group))?;
        for commit in &offsets {
            self.allow(Operation::Read, Resource::topic(&commit.topic))?;
        }
        self.broker
            .commit(&self.who, group, offsets, committer)
            .await
    }

    /// A group's committed offsets (of one topic, if given): DESCRIBE on
    /// the group; the offsets of topics the principal may not describe
    /// are left out (Kafka's OffsetFetch).
    pub fn committed_offsets(
        &self,
        group: &str,
        topic: Option<&str>,
    ) -> Result<Option<Vec<CommittedOffset>>, BrokerError> {
        self.allow(Operation::Describe, Resource::group(group))?;
        let mut offsets = self.broker.committed_offsets(group, topic);
        if let Some(offsets) = &mut offsets {
            offsets.retain(|o| self.may(Operation::Describe, Resource::topic(&o.topic)));
        }
        Ok(offsets)
    }

    /// DeleteRecords: moves the partition's log start offset below
    /// `offset` (`-1`: the high watermark), once every record acknowledged
    /// before this call is visible, so the high watermark it checks
    /// against is the acknowledged one (read-your-writes, as a read;
    /// `crate::visibility`). Durable before it answers the low watermark.
    pub async fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        offset: i64,
    ) -> Result<u64, BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Delete, Resource::topic(topic))?;
        let broker = &self.broker;
        broker.until_acknowledged_visible().await;
        let (moved, topic) = (Arc::clone(broker), topic.to_owned());
        let low =
            crate::blocking::run(move || moved.delete_records(&topic, partition, offset)).await?;
        // In a cluster, answered once the in-sync set holds the move.
        broker.metadata_replicated().await?;
        Ok(low)
    }

    /// Deletes a topic: its partitions, compacted logs, remote data.
    pub async fn delete_topic(&self, name: &str) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Delete, Resource::topic(name))?;
        let (broker, name) = (Arc::clone(&self.broker), name.to_owned());
        crate::blocking::run(move || broker.delete_topic(&name)).await?;
        self.broker.metadata_replicated().await
    }

    /// Applies config changes to a topic, all or nothing (`None` removes
    /// an override); with `validate_only`, checks them and changes
    /// nothing. `changes_of` gives the changes from the topic as it is
    /// when they are applied (Kafka's AlterConfigs replaces every
    /// override; an incremental change adds to them).
    pub async fn alter_topic(
        &self,
        name: &str,
        changes_of: Box<ChangesOf<'static>>,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::AlterConfigs, Resource::topic(name))?;
        let (broker, name) = (Arc::clone(&self.broker), name.to_owned());
        crate::blocking::run(move || {
            if validate_only {
                let current = broker.registry.require(&name)?;
                broker.check_alter_topic(&name, &changes_of(&current)?)
            } else {
                broker.alter_topic_with(&name, &*changes_of)
            }
        })
        .await?;
        self.broker.metadata_replicated().await
    }

    /// A new producer id for InitProducerId (or the next epoch of
    /// `current`); durable before it answers. IDEMPOTENT_WRITE on the
    /// cluster, or WRITE on some topic (Kafka 2.8's rule, KIP-679).
    pub async fn init_producer_id(
        &self,
        current: Option<(i64, i16)>,
    ) -> Result<(i64, i16), BrokerError> {
        // Any node of a cluster answers: each hands out ids of its own
        // block (`Store::confine_producer_ids`), none writes to the log.
        if !self
            .broker
            .access
            .allows_any_topic_write(&self.who, self.host)
        {
            self.allow(Operation::IdempotentWrite, Resource::cluster())?;
        }
        let broker = Arc::clone(&self.broker);
        crate::blocking::run(move || broker.init_producer_id(current)).await
    }

    /// Resets a group's committed offsets (the group must have no
    /// members); the offsets it committed.
    pub async fn reset_offsets(
        &self,
        group: &str,
        scope: ResetScope,
        to: ResetTarget,
    ) -> Result<Vec<CommittedOffset>, BrokerError> {
        self.broker.check_master()?;
        // Kafka's AlterConsumerGroupOffsets is an OffsetCommit: READ on
        // the group and on every topic it moves.
        self.allow(Operation::Read, Resource::group(group))?;
        let topics = match &scope {
            ResetScope::Group => self
                .broker
                .committed_offsets(group, None)
                .unwrap_or_default()
                .into_iter()
                .map(|o| o.topic)
                .collect(),
            ResetScope::Topic(topic) | ResetScope::Partitions { topic, .. } => {
                vec![topic.clone()]
            }
        };
        for topic in &topics {
            self.allow(Operation::Read, Resource::topic(topic))?;
        }
        let (broker, group) = (Arc::clone(&self.broker), group.to_owned());
        // The ends it resets to cover what was acknowledged before.
        broker.until_acknowledged_visible().await;
        crate::blocking::run(move || broker.reset_offsets(&group, scope, to)).await
    }

    /// Deletes a group without members and its committed offsets.
    pub async fn delete_group(&self, group: &str) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Delete, Resource::group(group))?;
        let (broker, group) = (Arc::clone(&self.broker), group.to_owned());
        crate::blocking::run(move || broker.delete_group(&group)).await
    }

    /// Kafka's OffsetDelete: the committed offsets of `partitions` of a
    /// group without members, each answered on its own.
    pub async fn delete_committed_offsets(
        &self,
        group: &str,
        partitions: Vec<(String, u32)>,
    ) -> Result<Vec<OffsetDeletion>, BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Delete, Resource::group(group))?;
        for (topic, _) in &partitions {
            self.allow(Operation::Read, Resource::topic(topic))?;
        }
        let (broker, group) = (Arc::clone(&self.broker), group.to_owned());
        crate::blocking::run(move || broker.delete_committed_offsets(&group, &partitions)).await
    }

    /// The records of `topic` with `key` appended in `[begin_ms, end_ms]`,
    /// newest first, at most `max`: after every record acknowledged
    /// before the call is visible (the IndexFile and the compacted logs
    /// get it from the dispatcher).
    pub async fn query_by_key(
        &self,
        topic: &str,
        key: Vec<u8>,
        begin_ms: i64,
        end_ms: i64,
        max: usize,
    ) -> Result<(Arc<Topic>, KeyRecords), BrokerError> {
        self.allow(Operation::Read, Resource::topic(topic))?;
        let topic = self.describe_topic(topic)?;
        let broker = Arc::clone(&self.broker);
        broker.until_acknowledged_visible().await;
        crate::blocking::run(move || {
            let found = broker.query_by_key(&topic, &key, begin_ms, end_ms, max)?;
            Ok((topic, found))
        })
        .await
    }

    /// The record that starts at CommitLog `position`, if one of a live
    /// topic does: READ on its topic (known once it is read).
    pub async fn read_physical(
        &self,
        position: u64,
    ) -> Result<Option<PhysicalRecord>, BrokerError> {
        let broker = Arc::clone(&self.broker);
        let found = crate::blocking::run(move || broker.read_physical(position)).await?;
        if let Some(record) = &found {
            self.allow(Operation::Read, Resource::topic(record.topic()))?;
        }
        Ok(found)
    }

    /// A partition to read records of (fetch, listen): READ on the topic.
    pub fn partition(&self, topic: &str, partition: u32) -> Result<PartitionRef, BrokerError> {
        self.allow(Operation::Read, Resource::topic(topic))?;
        self.broker.partition(topic, partition)
    }

    /// A partition to learn the offsets of (Kafka's ListOffsets):
    /// DESCRIBE on the topic.
    pub fn describe_partition(
        &self,
        topic: &str,
        partition: u32,
    ) -> Result<PartitionRef, BrokerError> {
        self.allow(Operation::Describe, Resource::topic(topic))?;
        self.broker.partition(topic, partition)
    }

    /// A partition's beginning and end offsets, and with `timestamp_ms`
    /// the first offset whose record's timestamp is at least it (a lookup
    /// that reads records: on the blocking pool), after every record
    /// acknowledged before the call is visible.
    pub async fn offsets(
        &self,
        topic: &str,
        partition: u32,
        timestamp_ms: Option<i64>,
    ) -> Result<PartitionOffsets, BrokerError> {
        let part = self.describe_partition(topic, partition)?;
        let broker = &self.broker;
        broker.until_acknowledged_visible().await;
        let offset = match timestamp_ms {
            Some(ts) => {
                let part = part.clone();
                Some(crate::blocking::run(move || part.offset_for_timestamp(ts)).await?)
            }
            None => None,
        };
        // After the lookup, so `offset` is never past `end`.
        let (beginning, end) = part.offsets();
        Ok(PartitionOffsets {
            beginning,
            end: end.max(offset.unwrap_or(0)),
            at_timestamp: offset,
        })
    }

    /// Kafka's ListOffsets by timestamp: the first record whose timestamp
    /// is at least `timestamp_ms` (the time index's running maximum, exact
    /// for timestamps out of order), with its offset and timestamp;
    /// `None` when no record qualifies. Reads records: on the blocking
    /// pool, after every record acknowledged before the call is visible.
    pub async fn record_at_timestamp(
        &self,
        topic: &str,
        partition: u32,
        timestamp_ms: i64,
    ) -> Result<Option<(u64, i64)>, BrokerError> {
        let part = self.describe_partition(topic, partition)?;
        let broker = &self.broker;
        broker.until_acknowledged_visible().await;
        crate::blocking::run(move || part.record_at_timestamp(timestamp_ms)).await
    }

    /// The first record with the largest timestamp (KIP-734), with that
    /// timestamp; `None` for a partition without records. From the time
    /// index's maxima, not a scan; on the blocking pool.
    pub async fn max_timestamp_record(
        &self,
        topic: &str,
        partition: u32,
    ) -> Result<Option<(u64, i64)>, BrokerError> {
        let part = self.describe_partition(topic, partition)?;
        let broker = &self.broker;
        broker.until_acknowledged_visible().await;
        crate::blocking::run(move || part.max_timestamp_record()).await
    }

    /// A retention pass now: a store-wide pass, ALTER on the cluster.
    pub async fn run_retention(&self, trigger: Trigger) -> Result<PassOutcome, BrokerError> {
        self.allow(Operation::Alter, Resource::cluster())?;
        self.broker.run_retention(&self.who, trigger).await
    }
}
