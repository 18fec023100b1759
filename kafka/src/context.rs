//! What every connection of one listener shares ([`Context`]): where the
//! broker is ([`Ready`]), the `kafka:` limits, the listener's name,
//! security protocol and advertised address (each listener advertises
//! itself, as Kafka answers Metadata with the listener a client came in
//! on), the memory budgets ([`Budgets`]) and the counters.
//!
//! Invariants:
//! * Built once per listener ([`Context::new`]), from its `KafkaConfig`,
//!   and never changed after: a handler reads it, never writes it. A
//!   connection's own state lives in `session::Session`.
//! * The broker is reached only through [`Context::door`]: `None` until
//!   recovery is done (KAFKA.md "Not ready").
//! * Handlers take a `&Context` and a typed request and return the typed
//!   answer, so one is called in a test without a socket; this file
//!   imports no handler and no dispatch, so handlers import it freely.

use std::sync::Arc;

use tidelog_broker::{Broker, Caller, Door};
use tidelog_runtime::budget::ByteBudget;
use tokio::sync::watch;

use crate::config::{AdminToken, KafkaConfig, ListenerName, SecurityProtocol};
use crate::metrics::KafkaMetrics;
use crate::session::SaslMechanism;

/// Where the broker is, once recovery is done.
pub type Ready = Arc<dyn Fn() -> Option<Arc<Broker>> + Send + Sync>;

/// The memory budgets a Kafka listener takes from, shared with the HTTP
/// API in the server.
#[derive(Clone)]
pub struct Budgets {
    /// Request bytes (`http.max_inflight_bytes`, KAFKA.md "Bad input"):
    /// a frame's bytes as they arrive, until its answer is written, and a
    /// Produce's decoded records; while it is short the connection is not
    /// read (backpressure, `listener`).
    pub requests: Arc<ByteBudget>,
    /// Fetch answers until written (`http.max_inflight_response_bytes`).
    pub answers: Arc<ByteBudget>,
}

/// What every connection shares.
pub struct Context {
    pub ready: Ready,
    pub max_request_bytes: usize,
    pub max_connections: u64,
    /// `kafka.max_batch_inflated_bytes`, `kafka.max_records_per_request`,
    /// `kafka.fetch_max_bytes`.
    pub max_batch_inflated_bytes: usize,
    pub max_records_per_request: usize,
    pub fetch_max_bytes: usize,
    /// The listener's name (`kafka.listeners[].name`, or PLAINTEXT for
    /// `kafka.listen`).
    pub listener: ListenerName,
    /// What its connections speak: TLS is the listener's (already
    /// unwrapped when a request gets here); a SASL protocol's login is
    /// for the authentication layer to require.
    pub security_protocol: SecurityProtocol,
    /// The host and port Metadata names: this listener's.
    pub host: String,
    pub port: i32,
    /// Turns true at shutdown: long-polls answer at once.
    pub stop: watch::Receiver<bool>,
    /// When set, the mutating admin APIs need a SASL/PLAIN login with it
    /// (`handlers::sasl`, `handlers::admin`).
    pub admin_token: Option<AdminToken>,
    /// The cluster id Metadata answers (the broker's, known before it is).
    pub cluster_id: Option<String>,
    /// The global budget of request bytes held in memory, shared with
    /// HTTP bodies (`listener`), and a Produce's decoded records.
    pub budget: Arc<ByteBudget>,
    /// The global budget of fetch answers held until written, shared with
    /// HTTP's fetch answers (`handlers::fetch`): a client that does not
    /// read its answers holds these bytes, never the ones producers need.
    pub answer_budget: Arc<ByteBudget>,
    /// The listener's counters, which the HTTP API's `/metrics` renders.
    pub metrics: Arc<KafkaMetrics>,
    /// The SASL mechanisms offered (`kafka.sasl_mechanisms`), in order.
    pub sasl_mechanisms: Vec<SaslMechanism>,
    /// On a SASL listener, how long a connection may stay without a login
    /// (`kafka.authentication_timeout_ms`, `listener`).
    pub authentication_timeout: std::time::Duration,
    /// Each topic as Metadata last described it (its id and partition
    /// count), answered while the broker is not ready: a cluster's node
    /// opens its broker again on a role change, and a client told then
    /// that a topic has no partitions drops its queued records for them
    /// (`handlers::metadata`).
    pub known_topics: std::sync::Mutex<std::collections::HashMap<String, (uuid::Uuid, u32)>>,
}

impl Context {
    /// The context of the listener `listener` (named so, speaking
    /// `security_protocol`) configured by `config` that advertises `host`
    /// and `port`, takes from `budgets`, counts in `metrics` and stops
    /// when `stop` turns true.
    pub fn new(
        config: &KafkaConfig,
        (listener, security_protocol): (ListenerName, SecurityProtocol),
        ready: Ready,
        (host, port): (String, i32),
        budgets: Budgets,
        metrics: Arc<KafkaMetrics>,
        stop: watch::Receiver<bool>,
    ) -> Context {
        Context {
            ready,
            max_request_bytes: usize::try_from(config.max_request_bytes).unwrap_or(usize::MAX),
            max_connections: config.max_connections,
            max_batch_inflated_bytes: usize::try_from(config.max_batch_inflated_bytes)
                .unwrap_or(usize::MAX),
            max_records_per_request: usize::try_from(config.max_records_per_request)
                .unwrap_or(usize::MAX),
            fetch_max_bytes: usize::try_from(config.fetch_max_bytes).unwrap_or(usize::MAX),
            listener,
            security_protocol,
            host,
            port,
            stop,
            admin_token: config.admin_token.clone(),
            cluster_id: config.cluster_id.clone(),
            budget: budgets.requests,
            answer_budget: budgets.answers,
            metrics,
            sasl_mechanisms: config
                .sasl_mechanisms
                .iter()
                .filter_map(|m| SaslMechanism::from_name(m))
                .collect(),
            authentication_timeout: std::time::Duration::from_millis(
                config.authentication_timeout_ms,
            ),
            known_topics: std::sync::Mutex::default(),
        }
    }

    /// The broker's door for the request being served, `None` until the
    /// broker is ready. The only way a handler reaches the broker: it is
    /// made for the request's caller (the connection's principal and
    /// peer, named by `dispatch` around each request), and what that
    /// caller may do is decided behind it.
    pub fn door(&self) -> Option<Door> {
        (self.ready)().map(|broker| broker.door_for(&Caller::current()))
    }

    /// The broker, for what a login asks of it before there is a
    /// principal to make a door for (`handlers::sasl`), and the
    /// per-request check that a logged-in user still exists.
    pub fn logins(&self) -> Option<Arc<Broker>> {
        (self.ready)()
    }
}
