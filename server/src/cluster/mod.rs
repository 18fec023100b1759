//! The node in a cluster (issue 39; docs/CLUSTER.md): with a `cluster:`
//! section, the opened broker is put behind the node's gate
//! ([`gate::NodeGate`], what the broker asks before a write and an
//! acknowledgement) and the cluster loop ([`runtime::Runtime`]) decides
//! the node's role with etcd and carries it out: replication listener,
//! etcd session, election, master terms and replica streams.

pub(crate) mod gate;
pub(crate) mod runtime;

use std::sync::Arc;

use tidelog_api::{AppState, Broker};
use tidelog_cluster::election::keys::Keys;
use tidelog_cluster::election::records::NodeInfo;
use tidelog_cluster::{ClusterConfig, EtcdClient};
use tidelog_runtime::tls::{TlsAcceptor, TlsConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::node::Node;

/// The longest a request to etcd may take.
const ETCD_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The store under the broker (what the cluster copies and caps).
pub(crate) fn store_of(broker: &Broker) -> &tidelog_storage::Store {
    broker.as_ref()
}

/// The node's TLS with the other nodes (the cluster runs with `tls`;
/// docs/CLUSTER.md "Security"): the replication listener's acceptor
/// (client certificates required, checked against `tls.client_ca_file`)
/// and the files a connection to the master proves this node with.
#[derive(Clone)]
pub(crate) struct NodeTls {
    pub acceptor: Arc<TlsAcceptor>,
    pub config: TlsConfig,
}

impl NodeTls {
    /// Keeps the HTTP forwarding client on the node's certificate as its
    /// files hold it: made now, and again after each reload the
    /// replication listener's acceptor takes (files changed, SIGHUP: the
    /// acceptor's own watch), until `stop`. Errors are the files', and
    /// stop start-up.
    pub(crate) fn forward_with(
        &self,
        state: AppState,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(), tidelog_runtime::tls::TlsError> {
        use tidelog_runtime::tls::load::node_client_config;
        let mut reloaded = self.acceptor.reloaded();
        state.forward_over_tls(node_client_config(&self.config)?);
        let config = self.config.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = reloaded.changed() => if changed.is_err() { return },
                    _ = stop.wait_for(|stopping| *stopping) => return,
                }
                let config = config.clone();
                match tokio::task::spawn_blocking(move || node_client_config(&config)).await {
                    Ok(Ok(client)) => {
                        state.forward_over_tls(client);
                        tracing::info!("forwarded writes use the reloaded node certificate");
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "the reloaded node certificate does not make a client; forwarding keeps the one in use")
                    }
                    Err(e) => tracing::warn!(error = %e, "reloading the forwarding client failed"),
                }
            }
        });
        Ok(())
    }
}

/// Where this node is reached, for its etcd entry.
pub(crate) struct Addresses {
    pub http: String,
    pub kafka: String,
}

/// Put `broker` behind the node's gate, publish it (not ready until the
/// node has a role), and start the cluster loop on a task. Errors are the
/// node's settings or its replication listener, and stop start-up.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn start(
    cfg: ClusterConfig,
    addresses: Addresses,
    reopen: runtime::Reopen,
    node: Arc<Node>,
    state: AppState,
    broker: Broker,
    tls: Option<NodeTls>,
    shutdown: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let listener = TcpListener::bind(cfg.replication_listen)
        .await
        .map_err(|e| format!("cluster.replication_listen {}: {e}", cfg.replication_listen))?;
    let client = EtcdClient::new(&cfg.etcd_endpoints, ETCD_REQUEST_TIMEOUT)
        .map_err(|e| format!("cluster.etcd_endpoints: {e}"))?;
    let keys = Keys::new(&cfg.name).map_err(|e| format!("cluster.name: {e}"))?;
    let gate = gate::NodeGate::new(cfg.clone());
    broker
        .join_cluster(Arc::clone(&gate) as _)
        .map_err(|e| e.to_string())?;
    // Until the node has a role, nothing of its own is written.
    store_of(&broker).set_replica(true);
    // Producer ids from this node's own block: any node answers an
    // idempotent producer, none hands out another's id.
    store_of(&broker).confine_producer_ids(cfg.node_id);
    node.set_ready(broker, &state);
    let me = NodeInfo {
        node_id: cfg.node_id,
        http: addresses.http,
        kafka: addresses.kafka,
        replication: cfg.replication_address(),
        log_end: 0,
        epoch: 0,
    };
    let runtime = runtime::Runtime::new(cfg, me, reopen, node, state, gate, client, keys, tls)
        .map_err(|e| e.to_string())?;
    tracing::info!("cluster: joining");
    Ok(tokio::spawn(runtime.run(listener, shutdown)))
}
