//! tidelog's broker core: what every front-end (the HTTP API and the
//! Kafka protocol) shares, with no HTTP or Kafka types in it.
//!
//! * [`door`]: [`Door`], the one way in: one async call per operation,
//!   made as a [`Principal`] ([`principal`]); it decides where the work
//!   runs. Its [`door::groups`] holds the group coordinator's calls with
//!   the join and sync waits, its [`door::consumers`] the HTTP consumer
//!   instances' calls with the records call's wait. [`long_poll`]: the one
//!   wait of every fetch. [`topics`]: the
//!   create rules and topic lookups behind it. [`stats`]: the node's
//!   counters in one snapshot.
//! * `access` (private): the one authorization check every door method
//!   makes, over tidelog-security's ACL index, and what logins ask of the
//!   broker (`logins`: [`Broker::scram_start`],
//!   [`Broker::login_with_password`], [`Broker::account_active`]).
//! * [`error`]: [`BrokerError`], the one error of this crate, with
//!   [`ErrorKind`]; each front-end maps every variant in one file.
//! * [`names`]: validation of topic and group names before anything
//!   reaches storage.
//! * [`partitioner`]: Kafka's murmur2 partitioner and round-robin.
//! * [`topic_config`]: known Kafka topic configs, their bounds and defaults;
//!   shared with the server's YAML loader.
//! * [`registry`]: topics, partition counts and config overrides, persisted
//!   in `<data_dir>/config/topics.json`.
//! * [`groups`]: consumer group offsets, kept in `__consumer_offsets` and
//!   rebuilt from its compacted log.
//! * [`group_admin`]: the operator's calls on groups: list, describe (with
//!   lag), reset offsets, delete.
//! * [`consumer_protocol`]: Kafka's ConsumerProtocol Assignment, decoded
//!   for describe.
//! * [`config`]: [`BrokerConfig`], the broker's settings (cluster id,
//!   auto-create, declared topics), their defaults and their one check.
//! * [`settings`]: what the broker is told at start ([`DeclaredTopic`]).
//! * [`read`]: reads that hide where records live ([`Broker::partition`]
//!   with read, listen and offsets; query by key; read by physical
//!   offset).
//! * [`produce`]: the record rules and the append ([`Door::produce`](crate::Door::produce)).
//! * [`compaction`]: compaction on request.
//! * [`usage`]: a partition's offsets and its share of the disk.
//! * [`store`]: the store's and the cleaner's types that are part of this
//!   crate's API (errors, stats, configs), so a front-end needs no
//!   dependency on those crates.
//! * [`fault`]: the fault plans tests open the broker with (the
//!   `failpoints` feature only).
//! * [`consumers`]: the HTTP consumer instances (REST Proxy v2), server-side
//!   members of the coordinator's groups, with positions, commits and
//!   expiry.
//! * [`schedules`]: the periodic work on named threads
//!   (`tidelog-offset-expiry`, `tidelog-tiering`), started by the node
//!   once the broker is ready.
//! * [`broker`]: start-up and shutdown order ([`Broker::open`]), keeping
//!   the compacted logs in line with the registry.

mod access;
pub mod auth;
mod blocking;
pub mod broker;
pub mod cluster;
pub mod cluster_metadata;
pub mod compaction;
pub mod config;
pub mod consumer_protocol;
pub mod consumers;
pub mod coordinator;
pub mod delete_records;
pub mod door;
pub mod dynamic_configs;
pub mod error;
#[cfg(any(test, feature = "failpoints"))]
pub mod error_fixtures;
pub mod fault;
pub mod group_admin;
pub mod groups;
mod log_start;
mod logins;
pub mod long_poll;
pub mod names;
pub mod partitioner;
pub mod principal;
pub mod produce;
pub mod read;
pub mod registry;
pub mod restore;
pub mod schedules;
pub mod settings;
pub mod stats;
pub mod store;
#[cfg(test)]
mod test_support;
pub mod tiering;
pub mod topic_config;
pub mod topics;
pub mod transactions;
pub mod usage;
pub mod visibility;

pub use broker::{next_offset, Broker};
pub use config::BrokerConfig;
pub use door::Door;
pub use error::{BrokerError, ErrorKind};
pub use principal::{Caller, Principal};
pub use settings::DeclaredTopic;
/// The ACL model and the users' types front-ends name (Kafka's ACL and
/// SCRAM APIs, HTTP's routes), so they need no dependency of their own.
pub use tidelog_security as security;
