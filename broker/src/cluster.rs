//! A broker in a cluster (issue 39): what the node runtime tells the
//! broker, and the one place the broker asks it. Whether this node may
//! take a write (the master of a term whose lease it still safely holds)
//! and when a write is acknowledged (the in-sync set holds it) are
//! decided here, for both front-ends, through the door's write calls and
//! [`Broker::produce`](crate::Broker); the store refuses a replica's own
//! appends beneath it all (`Store::set_replica`).
//!
//! A broker without a gate is a single node: every write is its own, and
//! acks=all means its own durable write.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use tidelog_security::acl::{Operation, Resource};

use crate::error::BrokerError;
use crate::principal::Principal;

/// A future the gate answers with.
pub type GateFuture<'a> = Pin<Box<dyn Future<Output = Result<(), BrokerError>> + Send + 'a>>;

/// The node runtime's side of the cluster, as the broker asks it.
pub trait ClusterGate: Send + Sync + 'static {
    /// Whether this node may take a write now: the master, its lease held
    /// with margin ([`BrokerError::NotMaster`] otherwise, naming the
    /// master when one is known).
    fn may_write(&self) -> Result<(), BrokerError>;

    /// How many nodes are in sync now, the master included.
    fn in_sync(&self) -> usize;

    /// The cluster's own floor on acks=all: `cluster.min_insync_replicas`.
    fn min_insync(&self) -> usize;

    /// Resolves once every member of the in-sync set holds the log
    /// through `end` (durable as the flush mode promises) and at least
    /// `min_insync` are in it; [`BrokerError::NotReplicated`] after the
    /// replication timeout. What was written stays written.
    fn replicated(&self, end: u64, min_insync: usize) -> GateFuture<'_>;

    /// The cluster as this node sees it.
    fn status(&self) -> ClusterStatus;

    /// Whether this node serves its part now (`/status/ready`): a master
    /// that holds its lease, or a replica that is copying its master.
    /// `Err` says why not.
    fn ready(&self) -> Result<(), String>;
}

/// A node's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Master,
    Replica,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Replica => "replica",
        }
    }
}

/// One node as `GET /v1/cluster` and Kafka's Metadata name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    pub node_id: u32,
    /// `host:port` of its HTTP API.
    pub http: String,
    /// `host:port` of its Kafka listener, if it has one.
    pub kafka: Option<String>,
    pub role: Role,
    pub in_sync: bool,
    /// How far its copy is behind the master's log (0 for the master).
    pub lag_bytes: u64,
}

/// The cluster as this node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterStatus {
    /// The epoch of the master this node serves or follows (0: none yet).
    pub epoch: u64,
    /// This node.
    pub node_id: u32,
    /// The master, when one is known.
    pub master: Option<u32>,
    /// Every live node, this one included.
    pub nodes: Vec<ClusterNode>,
}

impl ClusterStatus {
    /// The master's entry, when it is known and live.
    pub fn master_node(&self) -> Option<&ClusterNode> {
        let id = self.master?;
        self.nodes.iter().find(|n| n.node_id == id)
    }
}

impl crate::Broker {
    /// Put this broker in a cluster (the node runtime, once, before the
    /// broker serves): from now on `gate` decides its writes and
    /// acknowledgements. A second call is refused.
    ///
    /// From then on each change of topics, configs, users or ACLs also
    /// appends a record to the cluster metadata log
    /// ([`crate::cluster_metadata`]), which the store refuses while it is
    /// a replica (and the gate refuses such a change before).
    pub fn join_cluster(&self, gate: Arc<dyn ClusterGate>) -> Result<(), BrokerError> {
        self.cluster
            .set(gate)
            .map_err(|_| BrokerError::InvalidConfig {
                key: "cluster".into(),
                reason: "the broker is in a cluster already".into(),
            })?;
        self.metadata.enable();
        Ok(())
    }

    /// The cluster's gate, when this broker is in one.
    pub fn cluster(&self) -> Option<&Arc<dyn ClusterGate>> {
        self.cluster.get()
    }

    /// Refused unless this node may take a write now (always, alone).
    pub(crate) fn check_master(&self) -> Result<(), BrokerError> {
        self.cluster().map_or(Ok(()), |c| c.may_write())
    }

    /// Whether a verified client certificate naming `cn`, from `host`, is
    /// one of the cluster's nodes (docs/CLUSTER.md "Security"): its
    /// principal, `User:<cn>`, may CLUSTER_ACTION the cluster, Kafka's
    /// right for a broker's own requests (a super user, or an ACL; with
    /// `security.authorization: false` every named principal may). A
    /// certificate of the cluster's CA alone is not enough: users' client
    /// certificates may come from the same CA. What the replication
    /// listener admits and whose word for a forwarded caller the HTTP API
    /// takes, decided once.
    pub fn is_cluster_node(self: &Arc<Self>, cn: &str, host: Option<IpAddr>) -> bool {
        let door = self.door(&Principal::Certificate(Arc::from(cn)));
        let door = match host {
            Some(host) => door.from_host(host),
            None => door,
        };
        door.may(Operation::ClusterAction, Resource::cluster())
    }
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
