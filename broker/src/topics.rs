//! The door's topic calls: create (every rule once, for every front-end,
//! with validate-only), describe, list, and the lookup Kafka's Metadata
//! makes, which may auto-create.
//!
//! Rules of a create, in order: the name; the replication factor (1, or
//! -1 / none for the default: one node holds one copy); no manual replica
//! assignment; the partition count (the broker's `default_partitions`
//! when none is given, else 1..=`PARTITIONS_MAX`); the configs, each
//! known and in bounds, and their combination; then, for validate-only,
//! that the topic does not exist yet. A create writes and syncs the
//! registry, so it runs on the blocking pool.

use std::sync::Arc;

use tidelog_storage::StoreError;

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::names;
use crate::principal::Principal;
use crate::registry::{check_partitions, Topic};
use crate::topic_config::{self, Overrides, TopicConfig};

/// A topic to create, as a front-end decoded it.
#[derive(Debug, Clone, Default)]
pub struct CreateTopic {
    pub name: String,
    /// `None`: the broker's `default_partitions` (Kafka's -1 too).
    pub partitions: Option<i64>,
    /// `None` or -1: the default, 1.
    pub replication_factor: Option<i64>,
    /// The client assigned replicas itself (Kafka's `assignments`).
    pub manual_assignment: bool,
    /// Config overrides by Kafka name; `None` values are ignored as Kafka
    /// does for a create.
    pub configs: Vec<(String, Option<String>)>,
}

/// A topic created, or that would be (validate-only).
#[derive(Debug, Clone)]
pub struct CreatedTopic {
    pub name: String,
    pub partitions: u32,
    pub overrides: Overrides,
}

impl Broker {
    /// Creates `request`'s topic after every rule (module doc); with
    /// `validate_only`, checks all of them, including that the topic does
    /// not exist, and creates nothing.
    pub(crate) async fn create_topic_checked(
        self: &Arc<Self>,
        _who: &Principal,
        request: CreateTopic,
        validate_only: bool,
    ) -> Result<CreatedTopic, BrokerError> {
        let (name, partitions, overrides) = self.check_create(request)?;
        if validate_only {
            if self.registry.get(&name).is_some() {
                return Err(BrokerError::topic_exists(&name));
            }
            return Ok(CreatedTopic {
                name,
                partitions,
                overrides,
            });
        }
        let broker = Arc::clone(self);
        crate::blocking::run(move || {
            let topic = broker.create_topic(&name, partitions, overrides)?;
            Ok(CreatedTopic {
                name,
                partitions,
                overrides: topic.overrides.clone(),
            })
        })
        .await
    }

    /// The rules of a create, in order: the name, the partitions and the
    /// overrides it would have.
    fn check_create(&self, request: CreateTopic) -> Result<(String, u32, Overrides), BrokerError> {
        names::validate_topic_name(&request.name)?;
        match request.replication_factor {
            None | Some(1) | Some(-1) => {}
            Some(requested) => return Err(BrokerError::ReplicationFactorImpossible { requested }),
        }
        if request.manual_assignment {
            return Err(BrokerError::ReplicaAssignmentUnsupported);
        }
        let partitions = match request.partitions {
            None | Some(-1) => self.config.default_partitions,
            Some(n) => u32::try_from(n).map_err(|_| BrokerError::InvalidPartitionCount {
                requested: n,
                max: crate::registry::PARTITIONS_MAX,
            })?,
        };
        check_partitions(partitions)?;
        let mut overrides = Overrides::new();
        topic_config::apply(
            &mut overrides,
            request
                .configs
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_deref())),
        )?;
        // A bad combination (e.g. compaction settings) fails as the create would.
        TopicConfig::from_overrides(&overrides)?;
        Ok((request.name, partitions, overrides))
    }

    /// The topic `name`: 40401 / UNKNOWN_TOPIC_OR_PARTITION if unknown.
    pub(crate) fn describe_topic(
        &self,
        _who: &Principal,
        name: &str,
    ) -> Result<Arc<Topic>, BrokerError> {
        self.registry.require(name)
    }

    /// Every topic, internal ones included, by name.
    pub(crate) fn list_topics(&self, _who: &Principal) -> Vec<Arc<Topic>> {
        self.registry.all()
    }

    /// The topic `name` as Kafka's Metadata asks for it: created with the
    /// default partitions when it is unknown, the client allows it
    /// (`allow_auto_topic_creation`) and so does the broker
    /// (`auto_create_topics`).
    pub(crate) async fn metadata_topic(
        self: &Arc<Self>,
        _who: &Principal,
        name: &str,
        client_allows_create: bool,
    ) -> Result<Arc<Topic>, BrokerError> {
        names::validate_topic_name(name)?;
        self.topic_or_auto_created(name, client_allows_create, false)
            .await
    }

    /// The topic `name`; when it is unknown, created if `create` asks and
    /// the broker's `auto_create_topics` allows (Kafka's Metadata, HTTP's
    /// produce), on the blocking pool: creating writes and syncs the
    /// registry. Not for a request that `writes` while the disk is full:
    /// the append would be refused, and the topic should not outlive the
    /// refusal. The disk-full flag is the store's alone; this reads it.
    pub(crate) async fn topic_or_auto_created(
        self: &Arc<Self>,
        name: &str,
        create: bool,
        writes: bool,
    ) -> Result<Arc<Topic>, BrokerError> {
        if let Some(topic) = self.registry.get(name) {
            return Ok(topic);
        }
        let (broker, name) = (Arc::clone(self), name.to_owned());
        crate::blocking::run(move || broker.auto_create_topic(&name, create, writes)).await
    }

    /// [`topic_or_auto_created`](Self::topic_or_auto_created) on the
    /// caller's thread.
    pub(crate) fn auto_create_topic(
        &self,
        name: &str,
        create: bool,
        writes: bool,
    ) -> Result<Arc<Topic>, BrokerError> {
        if let Some(topic) = self.registry.get(name) {
            return Ok(topic);
        }
        if !(create && self.config.auto_create_topics) {
            return Err(BrokerError::unknown_topic(name));
        }
        if writes {
            let stats = self.store.stats();
            if stats.disk_full {
                return Err(StoreError::disk_full(
                    stats.disk_used_ratio,
                    &self.store.config().retention,
                )
                .into());
            }
        }
        self.get_or_create_topic(name, self.config.default_partitions)
    }

    /// How many partitions topic `name` has, if it exists (what the group
    /// coordinator's rebalances look up).
    pub(crate) fn partition_count(&self, name: &str) -> Option<u32> {
        self.registry.get(name).map(|t| t.partitions.get())
    }

    /// The broker's static settings, as DescribeConfigs shows them.
    pub(crate) fn settings(&self) -> &crate::BrokerConfig {
        &self.config
    }

    /// The cluster id Metadata, DescribeCluster and the v3 routes name.
    pub fn cluster_id(&self) -> &str {
        &self.config.cluster_id
    }
}
