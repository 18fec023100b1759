//! The cluster layer (issue 39): one master and its replicas copying the
//! CommitLog byte for byte, membership and the master's election with an
//! epoch held in etcd.
//!
//! Its parts:
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
//! - [`replication`]: the master's source, a replica's follower, and the
//!   in-sync set's progress and high watermark.
//! - [`config`]: the `cluster:` section.
//!
//! The server's node runtime (`server/src/cluster/`) runs these: a session,
//! the election's steps, a master's source or a replica's follower.
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
