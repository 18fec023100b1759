//! Who the brokers are, as Kafka's answers name them ([`Nodes`]): one
//! node alone, or the cluster of issue 39 (docs/KAFKA.md "Cluster"). The
//! one place the Kafka front-end reads `Door::cluster_status`: Metadata,
//! DescribeCluster and FindCoordinator name brokers through it, the
//! partition APIs ask it whether this node leads and whether a client's
//! leader epoch is current ([`Nodes::leader_check`]), and the
//! coordinator APIs whether this node coordinates ([`coordinator`]; a
//! refusal found behind it is `crate::error::coordinator_code`'s).
//!
//! Invariants:
//! * Alone, every answer is the single node's of before the cluster:
//!   broker [`NODE_ID`] at this listener's host and port, leader,
//!   controller and coordinator of everything, leader epoch 0, and a
//!   client's leader epoch never checked (Fetch and ListOffsets ignored
//!   it then).
//! * In a cluster the master leads every partition and coordinates every
//!   group and transactional id; every live node is a replica; the
//!   in-sync ones are the ISR; the leader epoch is the cluster's epoch.
//!   A node reads leadership from the status it names in Metadata, so
//!   what it serves agrees with what it tells clients.
//! * This node is always named at the listener the client came in on
//!   (Kafka answers with the listener a request arrived on); another node
//!   at the `kafka` address it registered.

use kafka_protocol::error::ResponseError;
use tidelog_broker::cluster::{ClusterNode, ClusterStatus};
use tidelog_broker::topics::NODE_ID;
use tidelog_broker::Door;

use crate::context::Context;

/// A broker as Kafka's answers name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub id: i32,
    pub host: String,
    pub port: i32,
}

/// The nodes as this node sees them for one request: a single node, or
/// the cluster's status (taken once per request).
pub struct Nodes {
    status: Option<ClusterStatus>,
}

impl Nodes {
    /// The nodes behind `door`; `None` (recovery running): the single
    /// node's answer, as before the broker is ready.
    pub fn of(door: Option<&Door>) -> Nodes {
        Nodes {
            status: door.and_then(Door::cluster_status),
        }
    }

    /// Whether this is a node of a cluster.
    pub fn clustered(&self) -> bool {
        self.status.is_some()
    }

    /// Every broker a client may reach: this node at `ctx`'s listener,
    /// then every other live node with a Kafka address, by id.
    pub fn brokers(&self, ctx: &Context) -> Vec<Endpoint> {
        let mut brokers = vec![self.this(ctx)];
        if let Some(status) = &self.status {
            let mut others: Vec<Endpoint> = status
                .nodes
                .iter()
                .filter(|n| n.node_id != status.node_id)
                .filter_map(|n| endpoint(broker_id(n.node_id), n.kafka.as_deref()?))
                .collect();
            others.sort_by_key(|e| e.id);
            brokers.extend(others);
        }
        brokers
    }

    /// This node's Kafka broker id: 0 alone, its node id in a cluster.
    pub fn own_id(&self) -> i32 {
        self.status
            .as_ref()
            .map_or(NODE_ID, |s| broker_id(s.node_id))
    }

    /// This node, at the listener `ctx` serves.
    fn this(&self, ctx: &Context) -> Endpoint {
        Endpoint {
            id: self.own_id(),
            host: ctx.host.clone(),
            port: ctx.port,
        }
    }

    /// The leader of every partition, controller and coordinator: this
    /// node alone; the master in a cluster, when it is known and has a
    /// Kafka address a client can reach (`None` otherwise).
    pub fn master(&self, ctx: &Context) -> Option<Endpoint> {
        let Some(status) = &self.status else {
            return Some(self.this(ctx));
        };
        match status.master_node() {
            Some(m) if m.node_id == status.node_id => Some(self.this(ctx)),
            Some(m) => endpoint(broker_id(m.node_id), m.kafka.as_deref()?),
            None => None,
        }
    }

    /// The broker id of [`Nodes::master`], -1 without one (Kafka's "no
    /// leader", "no controller").
    pub fn master_id(&self, ctx: &Context) -> i32 {
        self.master(ctx).map_or(-1, |m| m.id)
    }

    /// Every partition's replicas: this node alone, every live node in a
    /// cluster (each holds every topic), by id.
    pub fn replicas(&self) -> Vec<i32> {
        self.ids(|_| true)
    }

    /// Every partition's in-sync replicas: this node alone, the in-sync
    /// set in a cluster, by id.
    pub fn isr(&self) -> Vec<i32> {
        self.ids(|n| n.in_sync)
    }

    fn ids(&self, keep: impl Fn(&ClusterNode) -> bool) -> Vec<i32> {
        let Some(status) = &self.status else {
            return vec![NODE_ID];
        };
        let mut ids: Vec<i32> = status
            .nodes
            .iter()
            .filter(|n| keep(n))
            .map(|n| broker_id(n.node_id))
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Every partition's leader epoch: 0 alone, the cluster's epoch (that
    /// of the master this node serves or follows) in a cluster.
    pub fn leader_epoch(&self) -> i32 {
        self.status
            .as_ref()
            .map_or(0, |s| i32::try_from(s.epoch).unwrap_or(i32::MAX))
    }

    /// Whether this node leads every partition and coordinates every
    /// group: always alone, the master in a cluster.
    pub fn leads(&self) -> bool {
        self.status
            .as_ref()
            .is_none_or(|s| s.master == Some(s.node_id))
    }

    /// Whether a partition may be read here by a client that believes the
    /// leader epoch is `current_leader_epoch` (-1: it does not say), as
    /// Kafka's leader checks it: an epoch older than the cluster's is
    /// FENCED_LEADER_EPOCH (the client's metadata is stale), a newer one
    /// UNKNOWN_LEADER_EPOCH (this node's is); then a node other than the
    /// master is NOT_LEADER_OR_FOLLOWER. Alone nothing is checked, as
    /// before the cluster.
    pub fn leader_check(&self, current_leader_epoch: i32) -> Result<(), i16> {
        if !self.clustered() {
            return Ok(());
        }
        let ours = self.leader_epoch();
        if current_leader_epoch >= 0 && current_leader_epoch < ours {
            return Err(ResponseError::FencedLeaderEpoch.code());
        }
        if current_leader_epoch > ours {
            return Err(ResponseError::UnknownLeaderEpoch.code());
        }
        match self.leads() {
            true => Ok(()),
            false => Err(ResponseError::NotLeaderOrFollower.code()),
        }
    }
}

/// A node's id as a Kafka broker id (node ids are 1..=1000).
fn broker_id(node_id: u32) -> i32 {
    i32::try_from(node_id).unwrap_or(i32::MAX)
}

/// The endpoint of broker `id` at `address` (`host:port`, an IPv6 host
/// in brackets); `None` for an address that does not parse, which no
/// client could reach either.
fn endpoint(id: i32, address: &str) -> Option<Endpoint> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port: u16 = port.parse().ok()?;
    if host.is_empty() {
        return None;
    }
    Some(Endpoint {
        id,
        host: host.to_owned(),
        port: i32::from(port),
    })
}

/// NOT_COORDINATOR: a group or transaction call on a node that is not the
/// master (Kafka clients then look for the coordinator again).
pub const NOT_COORDINATOR: i16 = ResponseError::NotCoordinator.code();

/// The door for a group or transaction coordinator's call, or the code
/// its answer carries: `not_ready` before the broker is
/// (COORDINATOR_LOAD_IN_PROGRESS for every coordinator API today),
/// NOT_COORDINATOR on a node of a cluster that is not the master.
pub fn coordinator(ctx: &Context, not_ready: i16) -> Result<Door, i16> {
    coordinating(ctx.door().ok_or(not_ready)?)
}

/// `door` if this node coordinates (always alone; the master in a
/// cluster), else NOT_COORDINATOR: [`coordinator`] for a handler that
/// asks only for some requests (InitProducerId with a transactional id).
pub fn coordinating(door: Door) -> Result<Door, i16> {
    match Nodes::of(Some(&door)).leads() {
        true => Ok(door),
        false => Err(NOT_COORDINATOR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_or_are_left_out() {
        let at = |host: &str, port| {
            Some(Endpoint {
                id: 2,
                host: host.into(),
                port,
            })
        };
        assert_eq!(endpoint(2, "10.0.0.2:9092"), at("10.0.0.2", 9092));
        assert_eq!(
            endpoint(2, "kafka-2.local:19092"),
            at("kafka-2.local", 19092)
        );
        assert_eq!(endpoint(2, "[::1]:9092"), at("::1", 9092));
        for bad in [
            "",
            "host",
            "host:",
            ":9092",
            "host:70000",
            "host:-1",
            "[]:9092",
        ] {
            assert_eq!(endpoint(2, bad), None, "{bad:?}");
        }
    }
}
