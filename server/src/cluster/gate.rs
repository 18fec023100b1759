//! The node's answer to the broker's questions (`tidelog_broker::cluster`):
//! may it take a write, how many nodes are in sync, when is a write
//! acknowledged, what does the cluster look like. The runtime moves the
//! role; the gate only reads it, under one short lock.
//!
//! Fencing: a master takes a write, and acknowledges one, only while its
//! session vouches for its lease (`Session::is_safe_now`: the last
//! renewal's send time plus the TTL, less a margin). Past that another
//! node may already hold the master key with the next epoch, so a write
//! that was waiting for the in-sync set is refused at the end too.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tidelog_broker::cluster::{ClusterGate, ClusterNode, ClusterStatus, GateFuture, Role};
use tidelog_broker::BrokerError;
use tidelog_cluster::election::records::NodeInfo;
use tidelog_cluster::election::session::SessionState;
use tidelog_cluster::replication::{FollowState, Progress};
use tidelog_cluster::ClusterConfig;
use tokio::sync::watch;

/// What the node is now.
#[derive(Clone, Default)]
pub(crate) enum Part {
    /// Starting, or between roles: no writes, not ready.
    #[default]
    Joining,
    Master {
        epoch: u64,
        progress: Arc<Progress>,
    },
    Replica {
        epoch: u64,
        master: u32,
        follow: watch::Receiver<FollowState>,
    },
}

#[derive(Default)]
struct State {
    part: Part,
    /// The session's state, while there is one.
    session: Option<watch::Receiver<SessionState>>,
    /// The live nodes as etcd last showed them.
    nodes: Vec<NodeInfo>,
    /// The in-sync set as etcd last showed it (a replica's view).
    insync: BTreeSet<u32>,
}

/// See the module doc.
pub(crate) struct NodeGate {
    config: ClusterConfig,
    state: Mutex<State>,
}

impl NodeGate {
    pub(crate) fn new(config: ClusterConfig) -> Arc<NodeGate> {
        Arc::new(NodeGate {
            config,
            state: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set_part(&self, part: Part) {
        self.lock().part = part;
    }

    pub(crate) fn set_session(&self, session: Option<watch::Receiver<SessionState>>) {
        self.lock().session = session;
    }

    pub(crate) fn set_view(&self, nodes: Vec<NodeInfo>, insync: BTreeSet<u32>) {
        let mut s = self.lock();
        s.nodes = nodes;
        s.insync = insync;
    }

    fn session_safe(s: &State) -> bool {
        s.session
            .as_ref()
            .is_some_and(|rx| rx.borrow().is_safe_at(Instant::now()))
    }

    /// The master as this node knows it.
    fn master_id(&self, s: &State) -> Option<u32> {
        match &s.part {
            Part::Master { .. } => Some(self.config.node_id),
            Part::Replica { master, .. } => Some(*master),
            Part::Joining => None,
        }
    }
}

impl ClusterGate for NodeGate {
    fn may_write(&self) -> Result<(), BrokerError> {
        let s = self.lock();
        match &s.part {
            Part::Master { .. } if Self::session_safe(&s) => Ok(()),
            // A master that cannot vouch for its lease: another node may
            // hold the key already.
            Part::Master { .. } => Err(BrokerError::NotMaster { master: None }),
            Part::Replica { master, .. } => Err(BrokerError::NotMaster {
                master: Some(*master),
            }),
            Part::Joining => Err(BrokerError::NotMaster { master: None }),
        }
    }

    fn in_sync(&self) -> usize {
        let s = self.lock();
        match &s.part {
            Part::Master { progress, .. } => progress.watermark().insync,
            _ => s.insync.len(),
        }
    }

    fn min_insync(&self) -> usize {
        self.config.min_insync_replicas as usize
    }

    fn replicated(&self, end: u64, min_insync: usize) -> GateFuture<'_> {
        let progress = match &self.lock().part {
            Part::Master { progress, .. } => Some(Arc::clone(progress)),
            _ => None,
        };
        let timeout = self.config.replication_timeout();
        Box::pin(async move {
            let Some(progress) = progress else {
                return Err(BrokerError::NotMaster { master: None });
            };
            let needed = min_insync.max(self.min_insync());
            if !progress.wait_replicated(end, needed, timeout).await {
                return Err(BrokerError::NotReplicated {
                    required: needed,
                    in_sync: progress.watermark().insync,
                    timeout_ms: self.config.replication_timeout_ms,
                });
            }
            // Acknowledged only while the lease still holds: past that
            // another node may lead the next epoch.
            self.may_write()
        })
    }

    fn status(&self) -> ClusterStatus {
        let s = self.lock();
        let master = self.master_id(&s);
        let (epoch, replicas, master_end) = match &s.part {
            Part::Master { epoch, progress } => (*epoch, Some(progress.replicas()), 0),
            Part::Replica { epoch, follow, .. } => (*epoch, None, follow.borrow().master_end),
            Part::Joining => (0, None, 0),
        };
        let insync: BTreeSet<u32> = match &s.part {
            Part::Master { progress, .. } => progress.insync(),
            _ => s.insync.clone(),
        };
        let nodes = s
            .nodes
            .iter()
            .map(|n| {
                let role = match Some(n.node_id) == master {
                    true => Role::Master,
                    false => Role::Replica,
                };
                let lag_bytes = match (&replicas, role) {
                    (_, Role::Master) => 0,
                    (Some(r), _) => r
                        .iter()
                        .find(|r| r.node_id == n.node_id)
                        .map_or(0, |r| r.lag_bytes),
                    (None, _) => master_end.saturating_sub(n.log_end),
                };
                ClusterNode {
                    node_id: n.node_id,
                    http: n.http.clone(),
                    kafka: Some(n.kafka.clone()).filter(|k| !k.is_empty()),
                    role,
                    in_sync: insync.contains(&n.node_id),
                    lag_bytes,
                }
            })
            .collect();
        ClusterStatus {
            epoch,
            node_id: self.config.node_id,
            master,
            nodes,
        }
    }

    fn ready(&self) -> Result<(), String> {
        let s = self.lock();
        match &s.part {
            Part::Master { .. } if Self::session_safe(&s) => Ok(()),
            Part::Master { epoch, .. } => Err(format!(
                "master of epoch {epoch} without a safely held etcd lease"
            )),
            Part::Replica { follow, master, .. } => match follow.borrow().epoch {
                0 => Err(format!("replica connecting to master {master}")),
                _ => Ok(()),
            },
            Part::Joining => Err("joining the cluster".into()),
        }
    }
}
