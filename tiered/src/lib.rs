//! tidelog's remote tier: the records of tiered partitions re-grouped into
//! per-partition objects on object storage (S3 and S3-compatible servers,
//! the local file system), recorded in versioned per-partition manifests,
//! read back with ranged GETs through a bounded read-ahead cache; topic
//! metas and compacted snapshots for a restore.
//!
//! Invariant: the newest manifest of a partition lists only objects that
//! exist and pass their CRCs, ascending and non-overlapping, below its
//! `end`; a crash at any step leaves the old or the new manifest. The byte
//! layout of objects is in [`mod@format`], the bucket layout in [`layout`], the
//! crash argument in [`upload`] and [`tier`]; docs/TIERED.md "Format" says
//! the same for operators.
//!
//! The crate does not depend on the broker (the broker depends on it); its
//! records are [`RemoteRecord`]s.

pub mod cache;
pub mod config;
pub mod error;
#[cfg(feature = "failpoints")]
pub mod faulty;
pub mod format;
pub mod layout;
pub mod manifest;
pub mod read;
pub mod record;
pub mod retry;
pub mod stats;
pub mod tier;
pub mod topics;
pub mod upload;

pub use config::TieredConfig;
pub use error::{Result, TieredError};
pub use manifest::{Manifest, ObjectEntry, RemoteTopic, Snapshot, SnapshotFile};
pub use record::RemoteRecord;
pub use retry::RetryPolicy;
pub use stats::TieredStats;
pub use tier::RemoteTier;

/// Re-exported so callers name the same `object_store` (its `ObjectStore`
/// trait and `path::Path` appear in [`RemoteTier::with_store`]).
pub use object_store;
