//! tidelog's HTTP API layer: the Confluent REST Proxy dialect of API.md.
//!
//! This crate is a thin front-end over the broker (`tidelog_broker`): it
//! routes, extracts and decodes requests, calls the broker, and renders
//! the answers and errors. It never decides where records live (queue or
//! compacted log), opens a file or holds domain state; its own state is
//! its settings and counters. It depends on the broker only: the store's
//! and the cleaner's types it names come through `tidelog_broker::store`.
//!
//! * [`budget`]: the global budget of request bytes held in memory, the
//!   runtime's type (`tidelog_runtime`), shared with the Kafka listener.
//! * [`error`]: every API error and its single mapping to status and body.
//! * [`names`]: validation of partitions and offsets taken from paths and
//!   queries; the name rules are the broker's, re-exported.
//! * `json_body`: the decoder of every other JSON body (admin, configs,
//!   commits), which reads a struct from a JSON object only.
//! * [`records`]: produce bodies in the json and binary embedded formats,
//!   fetch rendering, and the answer shapes; inside it `format` (the
//!   formats and the decoded record), `json_write` (hand-written JSON
//!   output), `canonical_json` (the stored text of json-format keys and
//!   values) and `json_fast` (the hot-path scanner), each using only the
//!   ones before it.
//!
//! The topic registry, topic configs, consumer group offsets and the
//! partitioner are the broker's, re-exported here under their old paths;
//! its `BrokerError` becomes an HTTP answer in `error.rs`.
//!
//! * [`state`]: shared handler state, built from the node's handles
//!   ([`NodeHandles`]: ready slot, budgets, connection slots, metrics
//!   registry, shutdown signal); start-up, [`Broker::open`], is the
//!   broker's.
//! * [`mod@router`] and [`handlers`]: the routes of API.md.
//! * [`forward`]: in a cluster, a replica's writes sent to the master and
//!   answered as the master answered.
//! * [`listener`]: the accept loop over hyper's HTTP/1.1 connections, with
//!   the connection limits and read and write timeouts of OPERATIONS.md
//!   `http:`; [`head`] checks each request head before hyper parses it,
//!   so a bad head gets API.md's JSON error body.
//! * [`history`]: the last ten minutes of rates and gauges for the
//!   console's plots, sampled by the `tidelog-history` thread.
//! * [`metrics`] renders `/metrics`: its own counters, the store's stats and
//!   the LogCleaner's metrics.
//!
//! Reads go through `Broker::partition` (`handlers/fetch.rs` runs the
//! long-poll over its `listen`), produce through `Broker::produce`
//! (`handlers/produce.rs`), compaction requests through
//! `Broker::compact` (`handlers/compaction.rs`).
//!
//! The disk-full gate is the store's (`retention.disk_full_ratio`, measured
//! by its `tidelog-disk` thread): `Store::append` refuses with
//! `StoreError::DiskFull`, which `error.rs` maps to 507/50701. Neither the
//! API nor the broker measures the disk.

pub mod answers;
pub mod budget;
pub mod error;
mod extract;
pub mod failed_auth;
pub mod forward;
pub mod handlers;
pub mod head;
pub mod history;
mod json_body;
pub mod listener;
pub mod login;
pub mod metrics;
pub mod names;
pub mod records;
pub mod router;
pub mod settings;
pub mod state;

pub use tidelog_broker::{groups, partitioner, registry, topic_config};

pub use error::ApiError;
pub use listener::ListenerLimits;
pub use router::router;
pub use settings::{ApiSettings, DeclaredTopic, HttpConfig};
pub use state::{AppState, NodeHandles};
pub use tidelog_broker::Broker;
