//! The replication stream (issue 39): a master's CommitLog copied to its
//! replicas over `replication_listen`, byte for byte at the same physical
//! offsets (RocketMQ's HAService idea, over the frames of
//! [`crate::frame`]).
//!
//! - [`source`]: the master's side, one task per replica.
//! - [`follower`]: the replica's side.
//! - [`progress`]: the master's view of what each replica confirmed, the
//!   in-sync set and the high watermark they give.
//! - [`wire`]: frames over a byte stream, bounded before allocation.
//! - [`link`]: the byte stream itself, plain TCP or TLS.

pub mod follower;
pub mod link;
pub mod progress;
pub mod source;
pub mod wire;

pub use follower::{FollowEnd, FollowState, Follower, FollowerConfig};
pub use link::Link;
pub use progress::{Progress, ReplicaStatus, Watermark};
pub use source::{Source, SourceConfig};

use crate::frame::RefusalCode;

/// Why a replication stream ended.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    #[error(transparent)]
    Wire(#[from] wire::WireError),
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("no answer in {after_ms} ms waiting for {what}")]
    Timeout { what: &'static str, after_ms: u64 },
    #[error("expected {expected}, got {got}")]
    OutOfTurn {
        expected: &'static str,
        got: &'static str,
    },
    #[error("refused by the peer ({code:?}): {reason}")]
    Refused { code: RefusalCode, reason: String },
    #[error("node {node_id} refused: {reason}")]
    Stranger { node_id: u32, reason: String },
    #[error("a frame of epoch {theirs} in a stream of epoch {ours}")]
    StaleEpoch { ours: u64, theirs: u64 },
    #[error("position {position}, where the log is at {log_end}")]
    BadPosition { position: u64, log_end: u64 },
    #[error(transparent)]
    Store(#[from] tidelog_storage::StoreError),
    #[error("the stream's task ended")]
    Closed,
}
