//! The door: the one way a front-end asks the broker for anything.
//!
//! A front-end (HTTP, Kafka, the CLI through HTTP) holds a [`Door`] for the
//! principal a request is made as ([`Broker::door`]) and calls one async
//! method per operation, with a typed request and a typed answer. Every
//! rule that is not about a wire format is decided behind it, once: who
//! may do what (the ACLs of the security issue: each method is where its
//! check goes), which partitions this node leads (the cluster issue),
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
//! front-end's request path.

use std::sync::Arc;

use tidelog_storage::{PassOutcome, Trigger};

use crate::broker::Broker;
use crate::compaction::CompactionTicket;
use crate::error::BrokerError;
use crate::groups::{CommittedOffset, Committer, OffsetCommit};
use crate::principal::Principal;
use crate::produce::{ProduceAck, ProduceRequest};
use crate::registry::Topic;
use crate::store::PartitionStatus;
use crate::topics::{CreateTopic, CreatedTopic};
use crate::visibility::VISIBILITY_WAIT;

/// The broker as one principal sees it. Cheap to make and to clone.
#[derive(Debug, Clone)]
pub struct Door {
    broker: Arc<Broker>,
    who: Principal,
}

impl Broker {
    /// The door for requests made as `who`.
    pub fn door(self: &Arc<Self>, who: &Principal) -> Door {
        Door {
            broker: Arc::clone(self),
            who: who.clone(),
        }
    }
}

impl Door {
    pub(crate) fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// Who this door's requests are made as.
    pub fn who(&self) -> &Principal {
        &self.who
    }

    /// Appends records (`crate::produce`): answers once they are as
    /// durable as the flush mode promises.
    pub async fn produce(&self, request: ProduceRequest) -> Result<ProduceAck, BrokerError> {
        self.broker.produce(&self.who, request).await
    }

    /// Creates a topic after every rule of `crate::topics`, or, with
    /// `validate_only`, checks them and creates nothing.
    pub async fn create_topic(
        &self,
        request: CreateTopic,
        validate_only: bool,
    ) -> Result<CreatedTopic, BrokerError> {
        self.broker
            .create_topic_checked(&self.who, request, validate_only)
            .await
    }

    /// The topic `name` (40401 / UNKNOWN_TOPIC_OR_PARTITION if unknown).
    pub fn describe_topic(&self, name: &str) -> Result<Arc<Topic>, BrokerError> {
        self.broker.describe_topic(&self.who, name)
    }

    /// Every topic, internal ones included.
    pub fn list_topics(&self) -> Vec<Arc<Topic>> {
        self.broker.list_topics(&self.who)
    }

    /// The topic as Kafka's Metadata asks for it, auto-created when the
    /// client and the broker allow.
    pub async fn metadata_topic(
        &self,
        name: &str,
        client_allows_create: bool,
    ) -> Result<Arc<Topic>, BrokerError> {
        self.broker
            .metadata_topic(&self.who, name, client_allows_create)
            .await
    }

    /// Asks for a compaction pass of every partition of a compact topic.
    pub async fn compact(
        &self,
        topic: &str,
        roll_active: bool,
    ) -> Result<CompactionTicket, BrokerError> {
        self.broker.compact(&self.who, topic, roll_active).await
    }

    /// Every partition's compaction status of a compact topic.
    pub async fn compaction_status(
        &self,
        topic: &str,
    ) -> Result<(Arc<Topic>, Vec<Option<PartitionStatus>>), BrokerError> {
        self.broker.compaction_status(&self.who, topic).await
    }

    /// Commits a group's offsets, checked whole.
    pub async fn commit(
        &self,
        group: String,
        offsets: Vec<OffsetCommit>,
        committer: Committer,
    ) -> Result<(), BrokerError> {
        self.broker
            .commit(&self.who, group, offsets, committer)
            .await
    }

    /// A group's committed offsets (of one topic, if given).
    pub fn committed_offsets(
        &self,
        group: &str,
        topic: Option<&str>,
    ) -> Option<Vec<CommittedOffset>> {
        self.broker.committed_offsets(group, topic)
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
        let broker = &self.broker;
        let _ = tokio::time::timeout(VISIBILITY_WAIT, broker.visible(broker.acknowledged())).await;
        let (broker, topic) = (Arc::clone(broker), topic.to_owned());
        crate::blocking::run(move || broker.delete_records(&topic, partition, offset)).await
    }

    /// A retention pass now.
    pub async fn run_retention(&self, trigger: Trigger) -> Result<PassOutcome, BrokerError> {
        self.broker.run_retention(&self.who, trigger).await
    }
}
