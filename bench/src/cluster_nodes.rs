//! `--cluster`: a three-node tidelog cluster on this machine, the way
//! docs/CLUSTER.md's quick start runs one (`configs/cluster/`): an etcd
//! ([`EtcdChild`]) and three `tidelog serve` children of the binary being
//! benchmarked, each a [`ChildServer`] with its own data dir, HTTP, Kafka
//! and replication ports, and the shipped examples' `cluster:` values
//! ([`SESSION_TTL_MS`], `min_insync_replicas: 2`, ...) merged over the
//! bench's config (`--server-config`, `--flush`), so a node differs from
//! the single node it is compared with by its `cluster:` section alone.
//!
//! Invariants:
//! - Node `id` (1..=[`NODES`]) is `nodes[id - 1]`; its process may be
//!   killed and started again ([`ClusterNodes::kill`],
//!   [`ClusterNodes::restart`]) on the same data dir and ports.
//! - Whole ([`ClusterNodes::wait_whole`]): a master answers `GET
//!   /v1/cluster` naming itself master, with every node live and in the
//!   in-sync set, and every node answers `/status/ready`. Every wait is
//!   bounded; a node that died while waited for is an error quoting its
//!   log.
//! - Dropping it kills every node (SIGKILL, reaped), then etcd.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use hyper::StatusCode;
use serde::Deserialize;

use crate::client::{self, Conn};
use crate::cpu::PROCESSES_MAX;
use crate::etcd::EtcdChild;
use crate::target::{free_local_addr, ChildServer};
use crate::BenchArgs;

/// Nodes of the cluster: a master and two replicas.
pub(crate) const NODES: usize = PROCESSES_MAX;
/// The etcd lease of every node: the shipped examples' (configs/cluster/).
pub(crate) const SESSION_TTL_MS: u64 = 3000;
/// How long a started node may take to answer ready.
const NODE_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the cluster may take to be whole again (an election, a
/// returning node's cut and catch-up).
const WHOLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Between polls of the cluster's state.
const POLL: Duration = Duration::from_millis(50);

/// `GET /v1/cluster` (API.md "Cluster"), the fields the bench reads.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ClusterStatus {
    pub(crate) master: Option<u32>,
    pub(crate) node_id: u32,
    pub(crate) nodes: Vec<NodeStatus>,
}

/// One live node of [`ClusterStatus`].
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct NodeStatus {
    pub(crate) node_id: u32,
    pub(crate) role: String,
    pub(crate) in_sync: bool,
    pub(crate) lag_bytes: u64,
}

impl ClusterStatus {
    /// Whether this answer is a master's own that sees every node live and
    /// in sync.
    fn whole(&self) -> bool {
        let ids: Vec<u32> = self.nodes.iter().map(|n| n.node_id).collect();
        self.master == Some(self.node_id)
            && (1..=NODES as u32).all(|id| ids.contains(&id))
            && self.nodes.iter().all(|n| n.in_sync)
    }
}

/// `GET /v1/cluster` of the node at `addr`, over `conn`.
pub(crate) async fn cluster_status(conn: &mut Conn) -> anyhow::Result<ClusterStatus> {
    let answer = conn.get("/v1/cluster", "application/json").await?;
    if answer.status != StatusCode::OK {
        bail!(
            "GET /v1/cluster: status {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
        );
    }
    serde_json::from_slice(&answer.body).context("GET /v1/cluster: not the expected JSON")
}

/// The three nodes and their etcd (module doc). Fields drop in order:
/// the nodes before etcd.
pub(crate) struct ClusterNodes {
    nodes: Vec<ChildServer>,
    etcd: EtcdChild,
}

impl ClusterNodes {
    /// Starts etcd and the three nodes and waits until each is ready
    /// (not yet until the cluster is whole: [`Self::wait_whole`]).
    pub(crate) async fn start(args: &BenchArgs) -> anyhow::Result<ClusterNodes> {
        let etcd = EtcdChild::start(args.data_dir.as_deref()).await?;
        let mut nodes = Vec::with_capacity(NODES);
        for id in 1..=NODES as u32 {
            let overlay = node_overlay(id, &etcd.endpoint(), free_local_addr()?)?;
            nodes.push(ChildServer::start_with(args, Some(&overlay))?);
        }
        let mut cluster = ClusterNodes { nodes, etcd };
        for id in 1..=NODES as u32 {
            cluster.wait_ready(id).await?;
        }
        println!(
            "cluster: etcd {} and {NODES} nodes ({}), session_ttl_ms {SESSION_TTL_MS}, min_insync_replicas 2",
            cluster.etcd.endpoint(),
            cluster
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| format!(
                    "node {}: http://{}, kafka {}, pid {}",
                    i + 1,
                    n.addr,
                    n.kafka_addr.map_or_else(|| "none".into(), |a| a.to_string()),
                    n.child.id()
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        Ok(cluster)
    }

    pub(crate) fn node(&self, id: u32) -> anyhow::Result<&ChildServer> {
        (id as usize)
            .checked_sub(1)
            .and_then(|i| self.nodes.get(i))
            .ok_or_else(|| anyhow!("no node {id} in a cluster of {NODES}"))
    }

    fn node_mut(&mut self, id: u32) -> anyhow::Result<&mut ChildServer> {
        (id as usize)
            .checked_sub(1)
            .and_then(|i| self.nodes.get_mut(i))
            .ok_or_else(|| anyhow!("no node {id} in a cluster of {NODES}"))
    }

    /// Node `id`'s Kafka listener.
    pub(crate) fn kafka_addr(&self, id: u32) -> anyhow::Result<SocketAddr> {
        self.node(id)?
            .kafka_addr
            .ok_or_else(|| anyhow!("node {id} has no Kafka listener"))
    }

    /// The nodes' process ids, node 1 first.
    pub(crate) fn pids(&self) -> [u32; NODES] {
        std::array::from_fn(|i| self.nodes.get(i).map_or(0, |n| n.child.id()))
    }

    /// Every node's id and HTTP address but `except`'s.
    pub(crate) fn http_addrs_except(&self, except: u32) -> Vec<(u32, SocketAddr)> {
        (1..=NODES as u32)
            .zip(&self.nodes)
            .filter(|(id, _)| *id != except)
            .map(|(id, n)| (id, n.addr))
            .collect()
    }

    /// Waits (bounded) until node `id` answers `/status/ready`.
    async fn wait_ready(&mut self, id: u32) -> anyhow::Result<()> {
        let node = self.node_mut(id)?;
        let addr = node.addr;
        client::wait_ready(addr, NODE_READY_TIMEOUT, || node.check_alive())
            .await
            .with_context(|| format!("node {id}"))
    }

    /// Waits (bounded) until the cluster is whole (module doc); returns
    /// the master's node id.
    pub(crate) async fn wait_whole(&mut self) -> anyhow::Result<u32> {
        let deadline = Instant::now() + WHOLE_TIMEOUT;
        let mut last = String::from("no answer yet");
        while Instant::now() < deadline {
            for node in &mut self.nodes {
                node.check_alive()?;
            }
            match self.whole_now().await {
                Ok(Some(master)) => return Ok(master),
                Ok(None) => last = "no master sees every node in sync".into(),
                Err(e) => last = format!("{e:#}"),
            }
            tokio::time::sleep(POLL).await;
        }
        bail!("the cluster was not whole within {WHOLE_TIMEOUT:?} (last: {last})")
    }

    /// The master's id if the cluster is whole now.
    async fn whole_now(&self) -> anyhow::Result<Option<u32>> {
        let mut master = None;
        for node in &self.nodes {
            let mut conn = Conn::connect(node.addr).await?;
            if conn.get("/status/ready", "application/json").await?.status != StatusCode::OK {
                return Ok(None);
            }
            if let Ok(status) = cluster_status(&mut conn).await {
                if status.whole() {
                    master = status.master;
                }
            }
        }
        Ok(master)
    }

    /// `kill -9` of node `id` (SIGKILL, reaped).
    pub(crate) fn kill(&mut self, id: u32) -> anyhow::Result<()> {
        self.node_mut(id)?.stop();
        Ok(())
    }

    /// Starts node `id` again on its data dir and ports and waits until it
    /// answers ready.
    pub(crate) async fn restart(&mut self, id: u32) -> anyhow::Result<()> {
        self.node_mut(id)?.respawn()?;
        self.wait_ready(id).await
    }

    /// The node logs' last lines, for an error report.
    pub(crate) fn log_tails(&self) -> String {
        let mut out = String::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let log = std::fs::read_to_string(&node.log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            out.push_str(&format!("--- node {} log (last lines) ---\n", i + 1));
            for line in tail.into_iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// Node `id`'s `cluster:` section: the shipped examples' values
/// (configs/cluster/node1.yaml) on this run's etcd and a free replication
/// port.
fn node_overlay(
    id: u32,
    etcd: &str,
    replication: SocketAddr,
) -> anyhow::Result<serde_yaml::Mapping> {
    let text = format!(
        r#"cluster:
  node_id: {id}
  name: bench
  etcd_endpoints: ["{etcd}"]
  replication_listen: "{replication}"
  session_ttl_ms: {SESSION_TTL_MS}
  min_insync_replicas: 2
  replica_lag_max_ms: 10000
  replication_timeout_ms: 5000
"#
    );
    serde_yaml::from_str(&text).context("the cluster: overlay")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(master: Option<u32>, node_id: u32, nodes: &[(u32, bool)]) -> ClusterStatus {
        ClusterStatus {
            master,
            node_id,
            nodes: nodes
                .iter()
                .map(|&(node_id, in_sync)| NodeStatus {
                    node_id,
                    role: if Some(node_id) == master {
                        "master"
                    } else {
                        "replica"
                    }
                    .into(),
                    in_sync,
                    lag_bytes: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn whole_is_the_masters_own_answer_with_every_node_in_sync() {
        let all = [(1, true), (2, true), (3, true)];
        assert!(status(Some(2), 2, &all).whole());
        // A replica's answer: it may lag the master's view.
        assert!(!status(Some(2), 1, &all).whole());
        assert!(!status(None, 1, &all).whole());
        assert!(!status(Some(2), 2, &[(1, true), (2, true)]).whole());
        assert!(!status(Some(2), 2, &[(1, true), (2, true), (3, false)]).whole());
    }

    #[test]
    fn the_overlay_is_the_shipped_examples_cluster_section() {
        let o = node_overlay(
            2,
            "http://127.0.0.1:2379",
            "127.0.0.1:9502".parse().unwrap(),
        )
        .unwrap();
        let c = &o["cluster"];
        assert_eq!(c["node_id"], 2);
        assert_eq!(c["etcd_endpoints"][0], "http://127.0.0.1:2379");
        assert_eq!(c["replication_listen"], "127.0.0.1:9502");
        assert_eq!(c["min_insync_replicas"], 2);
        assert_eq!(c["session_ttl_ms"], 3000);
    }

    #[test]
    fn cluster_status_reads_the_documented_answer() {
        let body = r#"{"epoch":3,"master":1,"node_id":2,"nodes":[
            {"node_id":1,"http":"10.0.0.1:8080","kafka":"10.0.0.1:9092","role":"master","in_sync":true,"lag_bytes":0},
            {"node_id":2,"http":"10.0.0.2:8080","kafka":null,"role":"replica","in_sync":true,"lag_bytes":512}]}"#;
        let s: ClusterStatus = serde_json::from_str(body).unwrap();
        assert_eq!(s.master, Some(1));
        assert_eq!(s.node_id, 2);
        assert_eq!(s.nodes[1].lag_bytes, 512);
        assert_eq!(s.nodes[1].role, "replica");
    }
}
