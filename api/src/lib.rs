//! tidelog's HTTP API layer: the Confluent REST Proxy dialect of API.md.
//!
//! This crate turns HTTP requests into storage calls and storage results into
//! HTTP answers. It holds no state of its own beyond a round-robin counter.
//!
//! * [`error`]: every API error and its single mapping to status and body.
//! * [`names`]: validation of topic and group names, partitions and offsets
//!   taken from paths and queries, before anything reaches storage.
//! * [`partitioner`]: Kafka's murmur2 partitioner and round-robin.
//! * [`records`]: produce bodies in the json and binary embedded formats,
//!   fetch rendering, and the answer shapes.
//! * [`topic_config`]: known Kafka topic configs, their bounds and defaults;
//!   shared with the server's YAML loader.
//!
//! The axum router comes with the storage wiring; nothing here fakes storage.

pub mod error;
pub mod names;
pub mod partitioner;
pub mod records;
pub mod topic_config;

pub use error::ApiError;
