//! The cluster layer (issue 39): one master and its replicas copying the
//! CommitLog byte for byte, membership and the master's election with an
//! epoch held in etcd.
//!
//! Built so far:
//! - [`frame`]: the replication stream's frames (a replica's hello and
//!   confirmations, the master's epochs and CommitLog bytes), framed,
//!   CRC-checked and bounded before anything is allocated.
//! - [`etcd`]: a client of etcd's v3 API over its JSON gateway (keys,
//!   txns with compares, leases, watches), every request with a deadline
//!   and every answer bounded.
//! - [`election`]: on that client, a node's session (its lease, its entry,
//!   the renewals and the fencing deadline they give), the campaign for
//!   the master key and the next epoch in one txn, the master's writes of
//!   the in-sync set, and who campaigns first.
//!
//! Nothing here runs by itself yet: the node runtime that starts a session
//! and steps the election is the next piece.
//!
//! The epoch file and where two logs part ways are the store's
//! ([`tidelog_storage::epochs`]): they are files of the data dir.

pub mod config;
pub mod election;
pub mod etcd;
pub mod frame;
pub mod replication;

pub use config::{ClusterConfig, InvalidClusterSetting};
pub use etcd::{EtcdClient, EtcdError, EtcdErrorKind};
pub use frame::{Frame, FrameError};
