//! The LogCleaner: Kafka's log compaction over tidelog's compacted logs.
//!
//! One concern per file:
//! - `select.rs`: which log is filthiest, its dirty range
//!   `[first_dirty, first_uncleanable)` and the rules that make a segment
//!   uncleanable; the checkpoint lowered to a recovery cut at start.
//! - `pass.rs`: one pass over a log: durable copies only, the offset map
//!   over the dirty range, segment grouping, rewriting (the `keep` rule).
//! - `swap.rs`: the crash-safe swap of a rewritten group (`.cleaned` →
//!   `.swap` → in place), whose recovery is `reconcile_dir` in
//!   `compacted/dir.rs`.
//! - `threads.rs`: [`LogCleaner`], its named threads, their supervision
//!   and scheduling, housekeeping and the metrics.
//!
//! This file holds the public results, and the state the
//! threads share (`Shared`, one `PartitionState` per partition); each part
//! above is an `impl Shared` block over it.

mod pass;
mod select;
mod swap;
mod threads;

pub use threads::{CleanerMetrics, CleanerMetricsSnapshot, LogCleaner, CLEANER_NICE_INCREMENT};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};

use crate::checkpoint::CleanerCheckpoint;
use crate::compacted::CompactedLogs;
pub use crate::config::CleanerConfig;
use crate::fault::FaultHandle;
use crate::throttle::Throttle;
use tidelog_storage::commit_log::CommitLog;
use tidelog_storage::StoreError;

/// Where the compacted logs' copies come from: the CommitLog. A pass makes
/// it durable before it trusts any copy (`pass.rs` module doc, "Durable
/// copies only"), and asks it which transactions are decided and which
/// were aborted (`pass.rs` module doc, "Transactions").
pub trait CopySource: Send + Sync {
    /// Make every CommitLog byte written so far durable.
    fn make_durable(&self) -> std::result::Result<(), StoreError>;

    /// The last stable offset of `topic`-`partition` whose copies end at
    /// `end`: the first offset of its earliest open transaction, or `end`.
    /// A source without transactions answers `end`.
    fn last_stable_offset(&self, _topic: &str, _partition: u32, end: u64) -> u64 {
        end
    }

    /// The aborted transactions of `topic`-`partition` holding records
    /// below `to`: `(producer id, first offset, marker offset)`.
    fn aborted_ranges(&self, _topic: &str, _partition: u32, _to: u64) -> Vec<(i64, u64, u64)> {
        Vec::new()
    }
}

impl CopySource for CommitLog {
    fn make_durable(&self) -> std::result::Result<(), StoreError> {
        self.flush_all()
    }

    fn last_stable_offset(&self, topic: &str, partition: u32, end: u64) -> u64 {
        self.txns().last_stable_offset(topic, partition, end)
    }

    fn aborted_ranges(&self, topic: &str, partition: u32, to: u64) -> Vec<(i64, u64, u64)> {
        self.txns().aborted_ranges(topic, partition, 0, to)
    }
}

/// A closure, for a cleaner whose compacted logs are fed without a
/// CommitLog (tests, tools).
impl<F> CopySource for F
where
    F: Fn() -> std::result::Result<(), StoreError> + Send + Sync,
{
    fn make_durable(&self) -> std::result::Result<(), StoreError> {
        self()
    }
}

/// Statistics of one cleaning pass (API.md's `last_run`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_kept: u64,
    pub records_removed: u64,
    pub duration_ms: u64,
    /// Fraction of the offset map used.
    pub map_utilization: f64,
    /// Keys the map held.
    pub keys: u64,
    pub first_dirty: u64,
    /// The checkpoint after the pass (end of what the map covered).
    pub end_offset: u64,
    /// The map filled before the dirty range ended.
    pub partial: bool,
    /// Records kept only because their key's fingerprint was another key's
    /// too (pass.rs, "Collisions"); the checkpoint stays below the first
    /// in the mapped range, so the next pass compacts them.
    pub collisions: u64,
    pub segments_cleaned: u64,
}

/// Where a partition's cleaning stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CleanState {
    Idle,
    InProgress,
    Paused,
    /// A pass failed; retried later (`uncleanable_retry_ms`).
    Uncleanable {
        reason: String,
    },
}

impl CleanState {
    /// Whether a request waiting for a pass should stop waiting: a pass
    /// cannot finish while the partition is uncleanable.
    pub fn ends_a_wait(&self) -> bool {
        matches!(self, CleanState::Uncleanable { .. })
    }
}

/// API.md's spelling: `idle`, `in_progress`, `paused` or
/// `uncleanable: <reason>`.
impl std::fmt::Display for CleanState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CleanState::Idle => f.write_str("idle"),
            CleanState::InProgress => f.write_str("in_progress"),
            CleanState::Paused => f.write_str("paused"),
            CleanState::Uncleanable { reason } => write!(f, "uncleanable: {reason}"),
        }
    }
}

/// What an operator sees of one partition (API.md's compaction status).
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionStatus {
    pub partition: u32,
    pub state: CleanState,
    pub dirty_ratio: f64,
    pub checkpoint_offset: Option<u64>,
    pub last_run: Option<RunStats>,
    pub runs: u64,
}

#[derive(Default)]
struct PartitionState {
    in_progress: bool,
    paused: bool,
    forced: bool,
    uncleanable: Option<(String, i64)>,
    last_run: Option<RunStats>,
    /// Passes started and finished; one at a time per partition, so the
    /// first pass to start after a request is number `started + 1`.
    started: u64,
    runs: u64,
    /// The last pass failed or panicked, possibly in the middle of a swap:
    /// the next one reconciles the files first (see `swap.rs`).
    reconcile_first: bool,
}

struct Shared {
    logs: Arc<CompactedLogs>,
    source: Arc<dyn CopySource>,
    config: CleanerConfig,
    /// The swap's fault plan ([`crate::fault`]; empty in a release build).
    faults: FaultHandle,
    data_dir: PathBuf,
    checkpoint: Mutex<CleanerCheckpoint>,
    states: Mutex<HashMap<(String, u32), PartitionState>>,
    /// Signalled when work is requested or a run ends.
    changed: Condvar,
    stop: AtomicBool,
    throttle: Throttle,
    housekeeping: Mutex<()>,
    /// Old segment files swaps renamed aside (`.deleted`), for the next
    /// housekeeping to unlink (`swap.rs`). A leaf lock: nothing else is
    /// taken while it is held.
    retired: Mutex<Vec<PathBuf>>,
    metrics: CleanerMetrics,
}
