//! The cluster layer (issue 39): one master and its replicas copying the
//! CommitLog byte for byte, membership and the master's election with an
//! epoch held in etcd.
//!
//! Built so far:
//! - [`frame`]: the replication stream's frames (a replica's hello and
//!   confirmations, the master's epochs and CommitLog bytes), framed,
//!   CRC-checked and bounded before anything is allocated.
//!
//! The epoch file and where two logs part ways are the store's
//! ([`tidelog_storage::epochs`]): they are files of the data dir.

pub mod election;
pub mod etcd;
pub mod frame;

pub use frame::{Frame, FrameError};
