//! The door's calls about the node and its groups as an operator sees
//! them: the cluster id, the cluster's status and static settings
//! (Metadata, DescribeCluster, DescribeConfigs of the broker), the
//! node's counters (the stats route), a partition's share of the disk,
//! the operator's view of a group (with lag), the cluster's nodes and
//! roles as an operator sees them, and a tiering round on request.
//!
//! They are the door's like every other call, so their ACL check
//! (DESCRIBE on the cluster for the counters, DESCRIBE_CONFIGS for the
//! settings, DESCRIBE on a group for its view) is made here once. The node's own
//! observability (the `/metrics` sampler, the readiness probe) reads
//! `Broker::stats` and `Broker::write_refusal` directly: no request and
//! no principal stands behind it, and both answer without a login
//! (SECURITY's contract leaves them open).

use tidelog_security::acl::{Operation, Resource};

use crate::cluster::ClusterStatus;
use crate::config::BrokerConfig;
use crate::dynamic_configs::{ChangesOfValues, Described, Scope, Values};
use crate::error::BrokerError;
use crate::group_admin::GroupDescription;
use crate::groups::ConsumerLag;
use crate::stats::BrokerStats;
use crate::tiering::{RoundReport, TieringStats};
use crate::usage::PartitionUsage;

use super::Door;

impl Door {
    /// The cluster id Metadata, DescribeCluster and the v3 routes name.
    pub fn cluster_id(&self) -> &str {
        self.broker().cluster_id()
    }

    /// The cluster as this node sees it, `None` for a single node: the
    /// master, its epoch and the live nodes Kafka's Metadata,
    /// DescribeCluster and FindCoordinator name. No check, as for the
    /// cluster id: Kafka tells every client its brokers.
    pub fn cluster_status(&self) -> Option<ClusterStatus> {
        self.broker().cluster().map(|gate| gate.status())
    }

    /// The broker's static settings, as DescribeConfigs shows them:
    /// DESCRIBE_CONFIGS on the cluster.
    pub fn settings(&self) -> Result<&BrokerConfig, BrokerError> {
        self.allow(Operation::DescribeConfigs, Resource::cluster())?;
        Ok(self.broker().settings())
    }

    /// The configs of `scope` (`crate::dynamic_configs`) as DescribeConfigs
    /// answers them, the broker's `statics` first: DESCRIBE_CONFIGS on the
    /// cluster for a broker's, on the group for a group's.
    pub fn dynamic_configs(
        &self,
        scope: &Scope,
        statics: Vec<Described>,
    ) -> Result<Vec<Described>, BrokerError> {
        if let Scope::Group(group) = scope {
            crate::names::validate_group_name(group)?;
        }
        self.allow(Operation::DescribeConfigs, scope_resource(scope))?;
        Ok(self.broker().describe_dynamic_configs(scope, statics))
    }

    /// The values set for `scope`, for a front-end that computes its
    /// changes from them: DESCRIBE_CONFIGS as [`Door::dynamic_configs`].
    pub fn dynamic_values(&self, scope: &Scope) -> Result<Values, BrokerError> {
        self.allow(Operation::DescribeConfigs, scope_resource(scope))?;
        Ok(self.broker().dynamic.values(scope))
    }

    /// Applies broker or group config changes, all or nothing; with
    /// `validate_only`, checks them and changes nothing. `changes_of`
    /// gives the changes from the values as they are when applied.
    /// ALTER_CONFIGS on the cluster for a broker's, on the group for a
    /// group's (Kafka 4.0's rule).
    pub async fn alter_dynamic_configs(
        &self,
        scope: Scope,
        changes_of: Box<ChangesOfValues<'static>>,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::AlterConfigs, scope_resource(&scope))?;
        let broker = std::sync::Arc::clone(self.broker());
        let logged = scope.to_string();
        crate::blocking::run(move || {
            broker.alter_dynamic_configs(&scope, &*changes_of, validate_only)
        })
        .await?;
        self.broker.metadata_replicated().await?;
        if !validate_only {
            tracing::info!(resource = %logged, "altered dynamic configs");
        }
        Ok(())
    }

    /// The topic defaults in force (the `log.*` broker configs), which a
    /// topic's described configs show as their source. No check of its
    /// own: a topic's DescribeConfigs answers the values they give.
    pub fn topic_defaults(&self) -> std::sync::Arc<crate::topic_config::Defaults> {
        self.broker().topic_defaults()
    }

    /// The node's counters in one snapshot (in-memory reads): DESCRIBE
    /// on the cluster.
    pub fn stats(&self) -> Result<BrokerStats, BrokerError> {
        self.allow(Operation::Describe, Resource::cluster())?;
        Ok(self.broker().stats())
    }

    /// The lag of every committed offset of every group: DESCRIBE on the
    /// cluster (it names every group and topic).
    pub fn consumer_lag(&self) -> Result<Vec<ConsumerLag>, BrokerError> {
        self.allow(Operation::Describe, Resource::cluster())?;
        Ok(self.broker().consumer_lag())
    }

    /// The cluster as this node sees it for an operator (`GET
    /// /v1/cluster`), `None` for a single node: DESCRIBE on the cluster,
    /// as the other node calls. (Kafka's answers use
    /// [`Door::cluster_status`], unchecked: Kafka tells every client its
    /// brokers.)
    pub fn describe_cluster(&self) -> Result<Option<crate::cluster::ClusterStatus>, BrokerError> {
        self.allow(Operation::Describe, Resource::cluster())?;
        Ok(self.broker().cluster().map(|gate| gate.status()))
    }

    /// The remote tier's counters, `None` without one: DESCRIBE on the
    /// cluster.
    pub fn tiering_stats(&self) -> Result<Option<TieringStats>, BrokerError> {
        self.allow(Operation::Describe, Resource::cluster())?;
        Ok(self.broker().tiering_stats())
    }

    /// A partition's offsets and its share of the disk: DESCRIBE on the
    /// topic.
    pub fn partition_usage(
        &self,
        topic: &str,
        partition: u32,
    ) -> Result<PartitionUsage, BrokerError> {
        self.allow(Operation::Describe, Resource::topic(topic))?;
        self.broker().partition_usage(topic, partition)
    }

    /// A group as the operator sees it: state, members, committed offsets
    /// with their lag. DESCRIBE on the group; offsets of topics the
    /// principal may not describe are left out.
    pub fn describe_group(&self, group: &str) -> Result<GroupDescription, BrokerError> {
        self.allow(Operation::Describe, Resource::group(group))?;
        let mut description = self.broker().describe_group(group)?;
        description
            .offsets
            .retain(|o| self.may(Operation::Describe, Resource::topic(&o.topic)));
        Ok(description)
    }

    /// One uploader round now, of `topic` or of every tiered topic; waits
    /// for a round in progress (TieringOff without a remote tier). ALTER
    /// on the topic, or on the cluster for every topic.
    pub async fn tiering_round(&self, topic: Option<&str>) -> Result<RoundReport, BrokerError> {
        match topic {
            Some(topic) => self.allow(Operation::Alter, Resource::topic(topic))?,
            None => self.allow(Operation::Alter, Resource::cluster())?,
        }
        self.broker().tiering_round(topic).await
    }

    /// Waits until every record acknowledged before the call is visible
    /// (read-your-writes, `crate::visibility`): what a request that reads
    /// several partitions awaits once, before its reads.
    pub async fn until_acknowledged_visible(&self) {
        self.broker().until_acknowledged_visible().await;
    }
}

/// The ACL resource a scope's configs belong to.
fn scope_resource(scope: &Scope) -> Resource<'_> {
    match scope {
        Scope::Broker | Scope::ClusterDefault => Resource::cluster(),
        Scope::Group(group) => Resource::group(group),
    }
}
