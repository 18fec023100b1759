//! tidelog's HTTP API layer: the Confluent REST Proxy dialect of API.md.
//!
//! This crate turns HTTP requests into storage calls and storage results into
//! HTTP answers. Its own state is topic metadata (the store knows nothing of
//! partition counts or configs), consumer offsets mirrored from their topic,
//! and counters.
//!
//! * [`budget`]: the global budget of request bytes held in memory, not
//!   tied to HTTP so other listeners can share it.
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
//! partitioner are the broker's (`tidelog_broker`), re-exported here under
//! their old paths; its `BrokerError` becomes an HTTP answer in `error.rs`.
//!
//! * [`state`]: shared handler state and the broker once it is open
//!   (start-up, [`Broker::open`], is the broker's).
//! * [`router`] and [`handlers`]: the routes of API.md.
//! * [`metrics`] renders `/metrics`: its own counters, the store's stats and
//!   the LogCleaner's metrics.
//!
//! Compact topics are read from their compacted logs (`handlers/fetch.rs`)
//! and compacted on request (`handlers/compaction.rs`).
//!
//! The disk-full gate is the store's (`retention.disk_full_ratio`, measured
//! by its `tidelog-disk` thread): `Store::append` refuses with
//! `StoreError::DiskFull`, which `error.rs` maps to 507/50701. The API only
//! reads the store's flag, never the disk.

pub mod budget;
pub mod error;
mod extract;
pub mod handlers;
mod json_body;
pub mod metrics;
pub mod names;
pub mod records;
pub mod router;
pub mod settings;
pub mod state;

pub use tidelog_broker::{groups, partitioner, registry, topic_config};

pub use error::ApiError;
pub use router::router;
pub use settings::{ApiSettings, DeclaredTopic};
pub use state::AppState;
pub use tidelog_broker::Broker;
