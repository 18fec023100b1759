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

pub use config::KafkaConfig;
pub use error::{FrameError, RecordError};

use std::sync::Arc;

use crate::metrics::KafkaMetrics;
use tidelog_runtime::budget::ByteBudget;
use tidelog_runtime::connections::ConnectionSlots;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use context::{Budgets, Context, Ready};

/// Serves the Kafka protocol on `listener` (already bound: its port is
/// the one Metadata advertises) until `stop` turns true. `ready` answers
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
    serve_in_node(
        listener,
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

/// What a node (`server/src/node.rs`) shares with its Kafka listener; the
/// listener's [`Context`] is built from these and its config.
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

/// [`serve`] with what it holds and counts taken from the node's
/// `handles` (their docs).
pub async fn serve_in_node(listener: TcpListener, config: &KafkaConfig, handles: NodeHandles) {
    let NodeHandles {
        ready,
        budgets,
        metrics,
        connections,
        stop,
    } = handles;
    let bound = match listener.local_addr() {
        Ok(bound) => bound,
        Err(e) => {
            tracing::error!(error = %e, "the Kafka listener has no local address");
            return;
        }
    };
    let ctx = Arc::new(Context::new(
        config,
        ready,
        listener::advertised(bound, config.advertised_host.as_deref()),
        budgets,
        metrics,
        stop.clone(),
    ));
    listener::serve(listener, ctx, connections, stop).await;
}
