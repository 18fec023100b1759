//! tidelog's Kafka wire protocol front-end (KAFKA.md, docs/KAFKA.md).
//!
//! A thin mapping onto `tidelog-broker`, beside the HTTP API and never
//! depending on it: the listener and framing (`listener`), what its
//! connections share (`context`) and what each holds (`session`), the
//! table of served APIs (`routes`: key, versions, name, body check,
//! route), dispatch by API key (`dispatch`), one request on its way to
//! its handler and the answer frame (`call`), the structural check before
//! decoding (`precheck`), one handler module per API (`handlers`), and
//! the record-batch layer (`records`). Request and response envelopes
//! come from the `kafka-protocol` crate; record batches do not
//! (`records`).
//!
//! Imports run one way: `listener` → `dispatch` → `routes` → `handlers`
//! → `context`, `session`, `error`; no handler imports dispatch or the
//! table.

mod call;
pub mod config;
pub mod context;
pub mod dispatch;
pub mod error;
pub mod handlers;
pub mod listener;
pub mod metrics;
mod precheck;
pub mod records;
pub mod routes;
pub mod session;

pub use config::{KafkaConfig, ListenerConfig, ListenerName, SecurityProtocol};
pub use error::{FrameError, RecordError};

use std::sync::Arc;

use crate::metrics::KafkaMetrics;
use tidelog_runtime::budget::ByteBudget;
use tidelog_runtime::connections::ConnectionSlots;
use tidelog_runtime::tls::TlsAcceptor;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use context::{Budgets, Context, Ready};

/// Serves the Kafka protocol on `listener` (already bound: its port is
/// the one Metadata advertises), one PLAINTEXT listener, until `stop`
/// turns true. `ready` answers
/// the broker once recovery is done (`None` before: KAFKA.md "Not
/// ready"). A listener on its own (tests, tools): its frames and its
/// fetch answers take from budgets of their own, as large as its
/// connections could hold; a node shares both with HTTP
/// ([`serve_in_node`]).
pub async fn serve(
    listener: TcpListener,
    config: &KafkaConfig,
    ready: Ready,
    stop: watch::Receiver<bool>,
) {
    let own = config
        .max_request_bytes
        .saturating_mul(config.max_connections);
    let answers = config
        .fetch_max_bytes
        .saturating_mul(config.max_connections);
    let bound = Listener {
        socket: listener,
        name: ListenerName(config::DEFAULT_LISTENER_NAME.to_string()),
        security_protocol: SecurityProtocol::Plaintext,
        advertised_host: config.advertised_host.clone(),
        tls: None,
    };
    serve_in_node(
        bound,
        config,
        NodeHandles {
            ready,
            budgets: Budgets {
                requests: ByteBudget::new(own),
                answers: ByteBudget::new(answers),
            },
            metrics: Arc::new(KafkaMetrics::default()),
            connections: ConnectionSlots::unlimited(),
            stop,
        },
    )
    .await;
}

/// One bound Kafka listener and what it speaks.
pub struct Listener {
    /// Bound already: its port is the one Metadata advertises.
    pub socket: TcpListener,
    pub name: ListenerName,
    pub security_protocol: SecurityProtocol,
    /// The host Metadata names (`None`: the bound address's).
    pub advertised_host: Option<String>,
    /// The node's TLS acceptor: `Some` exactly when
    /// `security_protocol.uses_tls()` (the server checks it).
    pub tls: Option<Arc<TlsAcceptor>>,
}

/// What a node (`server/src/node.rs`) shares with its Kafka listeners
/// (one clone each); a listener's [`Context`] is built from these and its
/// config.
#[derive(Clone)]
pub struct NodeHandles {
    /// The broker once recovery is done (the node's ready slot).
    pub ready: Ready,
    /// The byte budgets, the ones the HTTP API takes from too.
    pub budgets: Budgets,
    /// The listener's counters, which the node registers for the HTTP
    /// API's `/metrics` ([`metrics`]).
    pub metrics: Arc<KafkaMetrics>,
    /// The cap both front-ends share under the open-file limit
    /// (`tidelog_runtime::connections`).
    pub connections: Arc<ConnectionSlots>,
    /// Turns true at shutdown.
    pub stop: watch::Receiver<bool>,
}

/// Serves one of a node's listeners, with what it holds and counts taken
/// from the node's `handles` (their docs), until they say stop.
pub async fn serve_in_node(listener: Listener, config: &KafkaConfig, handles: NodeHandles) {
    let NodeHandles {
        ready,
        budgets,
        metrics,
        connections,
        stop,
    } = handles;
    let Listener {
        socket,
        name,
        security_protocol,
        advertised_host,
        tls,
    } = listener;
    let bound = match socket.local_addr() {
        Ok(bound) => bound,
        Err(e) => {
            tracing::error!(listener = %name, error = %e, "the Kafka listener has no local address");
            return;
        }
    };
    let ctx = Arc::new(Context::new(
        config,
        (name, security_protocol),
        ready,
        listener::advertised(bound, advertised_host.as_deref()),
        budgets,
        metrics,
        stop.clone(),
    ));
    listener::serve(socket, ctx, connections, tls, stop).await;
}
