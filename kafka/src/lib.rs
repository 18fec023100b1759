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
mod precheck;
pub mod records;
pub mod routes;
pub mod session;

pub use config::KafkaConfig;
pub use error::{FrameError, RecordError};

use std::sync::Arc;

use tidelog_broker::budget::ByteBudget;
use tidelog_broker::connections::ConnectionSlots;
use tidelog_broker::kafka_metrics::KafkaMetrics;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use context::{Budgets, Context, Ready};

/// Serves the Kafka protocol on `listener` (already bound: its port is
/// the one Metadata advertises) until `stop` turns true. `ready` answers
/// the broker once recovery is done (`None` before: KAFKA.md "Not
/// ready"). A listener on its own (tests, tools): its frames and its
/// fetch answers take from budgets of their own, as large as its
/// connections could hold; the server shares both with HTTP
/// ([`serve_sharing`]).
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
    let metrics = Arc::new(KafkaMetrics::default());
    serve_sharing(
        listener,
        config,
        ready,
        Budgets {
            requests: ByteBudget::new(own),
            answers: ByteBudget::new(answers),
        },
        metrics,
        ConnectionSlots::unlimited(),
        stop,
    )
    .await;
}

/// [`serve`] with the memory it holds taken from `budgets`, the ones the
/// HTTP API takes from too. Its
/// counters go to `metrics`, which the HTTP API's `/metrics` renders. Its
/// connections count against `connections`, the cap both front-ends share
/// under the open-file limit (`tidelog_broker::connections`).
pub async fn serve_sharing(
    listener: TcpListener,
    config: &KafkaConfig,
    ready: Ready,
    budgets: Budgets,
    metrics: Arc<KafkaMetrics>,
    connections: Arc<ConnectionSlots>,
    stop: watch::Receiver<bool>,
) {
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
