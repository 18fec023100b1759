//! tidelog's Kafka wire protocol front-end (KAFKA.md, docs/KAFKA.md).
//!
//! A thin mapping onto `tidelog-broker`, beside the HTTP API and never
//! depending on it: the listener and framing (`listener`), dispatch by
//! API key (`dispatch`), one handler module per API (`handlers`), and the
//! record-batch layer (`records`). Request and response envelopes come
//! from the `kafka-protocol` crate; record batches do not (`records`).

pub mod config;
pub mod dispatch;
pub mod error;
pub mod handlers;
pub mod listener;
pub mod metrics;
mod precheck;
pub mod records;

pub use config::KafkaConfig;
pub use error::{FrameError, RecordError};

use std::sync::Arc;

use crate::metrics::KafkaMetrics;
use tidelog_runtime::budget::ByteBudget;
use tidelog_runtime::connections::ConnectionSlots;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use dispatch::Ready;

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

/// The memory budgets a Kafka listener takes from, shared with the HTTP
/// API in the server.
pub struct Budgets {
    /// Request bytes (`http.max_inflight_bytes`, KAFKA.md "Bad input"):
    /// a frame's bytes as they arrive, until its answer is written, and a
    /// Produce's decoded records; while it is short the connection is not
    /// read (backpressure, `listener`).
    pub requests: Arc<ByteBudget>,
    /// Fetch answers until written (`http.max_inflight_response_bytes`).
    pub answers: Arc<ByteBudget>,
}

/// What a node (`server/src/node.rs`) shares with its Kafka listener; the
/// listener's [`dispatch::Context`] is built from these and its config.
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
    let (host, port) = listener::advertised(bound, config.advertised_host.as_deref());
    let ctx = Arc::new(dispatch::Context {
        ready,
        max_request_bytes: usize::try_from(config.max_request_bytes).unwrap_or(usize::MAX),
        max_connections: config.max_connections,
        max_batch_inflated_bytes: usize::try_from(config.max_batch_inflated_bytes)
            .unwrap_or(usize::MAX),
        max_records_per_request: usize::try_from(config.max_records_per_request)
            .unwrap_or(usize::MAX),
        fetch_max_bytes: usize::try_from(config.fetch_max_bytes).unwrap_or(usize::MAX),
        host,
        port,
        stop: stop.clone(),
        admin_token: config.admin_token.clone(),
        cluster_id: config.cluster_id.clone(),
        budget: budgets.requests,
        answer_budget: budgets.answers,
        metrics,
    });
    listener::serve(listener, ctx, connections, stop).await;
}
