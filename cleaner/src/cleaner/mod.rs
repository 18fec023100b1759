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
//!   `compacted/log.rs`.
//! - `threads.rs`: [`LogCleaner`], its named threads, their supervision
//!   and scheduling, housekeeping and the metrics.
//!
//! This file holds the public settings and results, and the state the
//! threads share (`Shared`, one `PartitionState` per partition); each part
//! above is an `impl Shared` block over it.

mod pass;
mod select;
mod swap;
mod threads;

pub use threads::{CleanerMetrics, CleanerMetricsSnapshot, LogCleaner};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};

use crate::checkpoint::CleanerCheckpoint;
use crate::compacted::CompactedLogs;
use crate::error::{CleanerError, Result};
use crate::fault::FaultHandle;
use crate::offset_map::{self, BYTES_PER_ENTRY, DEFAULT_LOAD_FACTOR};
use crate::throttle::Throttle;
use tidelog_storage::commit_log::CommitLog;
use tidelog_storage::StoreError;

/// Where the compacted logs' copies come from: the CommitLog. A pass makes
/// it durable before it trusts any copy (`pass.rs` module doc, "Durable
/// copies only").
pub trait CopySource: Send + Sync {
    /// Make every CommitLog byte written so far durable.
    fn make_durable(&self) -> std::result::Result<(), StoreError>;
}

impl CopySource for CommitLog {
    fn make_durable(&self) -> std::result::Result<(), StoreError> {
        self.flush_all()
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

/// `cleaner:` settings of broker.yaml (Kafka's defaults).
#[derive(Clone, Debug)]
pub struct CleanerConfig {
    pub threads: usize,
    /// Offset-map memory for all threads together.
    pub dedupe_buffer_bytes: usize,
    pub backoff_ms: u64,
    pub io_max_bytes_per_second: Option<u64>,
    pub load_factor: f64,
}

/// Most cleaner threads (`cleaner.threads`): far more than a single node's
/// disks can keep busy, and each holds a share of the offset map.
pub const THREADS_MAX: usize = 64;

/// Most offset-map memory one thread may hold: Kafka's cap, 2 GiB per
/// cleaner thread (its map is indexed by a 32-bit int). A larger
/// `dedupe_buffer_bytes` would be allocated at start and could take the
/// machine's memory before anything is cleaned.
pub const DEDUPE_BUFFER_BYTES_PER_THREAD_MAX: usize = 2 << 30;

/// Smallest offset map: room for a few dozen keys.
pub const DEDUPE_BUFFER_BYTES_MIN: usize = 1024;

impl CleanerConfig {
    /// The one range check of the `cleaner:` settings, used by
    /// `LogCleaner::new`, `tidelog serve` and `tidelog check-config`, so
    /// they accept and refuse the same values.
    pub fn validate(&self) -> Result<()> {
        let bad = |setting: &'static str, reason: String| {
            Err(CleanerError::InvalidConfig { setting, reason })
        };
        if !(1..=THREADS_MAX).contains(&self.threads) {
            return bad(
                "cleaner.threads",
                format!("{} is not in [1, {THREADS_MAX}]", self.threads),
            );
        }
        let buffer_max = DEDUPE_BUFFER_BYTES_PER_THREAD_MAX.saturating_mul(self.threads);
        if !(DEDUPE_BUFFER_BYTES_MIN..=buffer_max).contains(&self.dedupe_buffer_bytes) {
            return bad(
                "cleaner.dedupe_buffer_bytes",
                format!(
                    "{} is not in [{DEDUPE_BUFFER_BYTES_MIN}, {buffer_max}] (at most 2 GiB per cleaner thread, as in Kafka)",
                    self.dedupe_buffer_bytes
                ),
            );
        }
        if self.io_max_bytes_per_second == Some(0) {
            return bad(
                "cleaner.io_max_bytes_per_second",
                "0 is too small, the minimum is 1 (null: unthrottled)".into(),
            );
        }
        if !offset_map::load_factor_is_usable(self.load_factor) {
            return bad(
                "cleaner.load_factor",
                format!("{} is not in (0, 1)", self.load_factor),
            );
        }
        // Each thread builds its map from its share at start; a share that
        // holds no key would fail there, after the config was accepted.
        let per_thread = self.dedupe_buffer_bytes / self.threads;
        if offset_map::max_entries(per_thread, self.load_factor) == 0 {
            return bad(
                "cleaner.dedupe_buffer_bytes",
                format!(
                    "{} is too small for {} cleaner threads: a thread's share of {per_thread} bytes holds no key (each takes {BYTES_PER_ENTRY} bytes)",
                    self.dedupe_buffer_bytes, self.threads
                ),
            );
        }
        Ok(())
    }
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            threads: 1,
            dedupe_buffer_bytes: 128 << 20,
            backoff_ms: 15_000,
            io_max_bytes_per_second: None,
            load_factor: DEFAULT_LOAD_FACTOR,
        }
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
    pub segments_cleaned: u64,
}

/// What an operator sees of one partition (API.md's compaction status).
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionStatus {
    pub partition: u32,
    /// `idle`, `in_progress`, `paused` or `uncleanable: <reason>`.
    pub state: String,
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
    metrics: CleanerMetrics,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offset_map::OffsetMap;

    /// `validate` accepts a buffer exactly when every thread can build its
    /// map from its share, as `LogCleaner::start` does.
    #[test]
    fn validate_accepts_what_every_thread_can_build() {
        for threads in [1, 2, 25, 26, 51, 52, THREADS_MAX] {
            for dedupe_buffer_bytes in [1024, 2048, 4096] {
                let config = CleanerConfig {
                    threads,
                    dedupe_buffer_bytes,
                    ..CleanerConfig::default()
                };
                let per_thread = dedupe_buffer_bytes / threads;
                let builds = OffsetMap::new(per_thread, config.load_factor).is_ok();
                match config.validate() {
                    Ok(()) => assert!(builds, "{threads} threads, {dedupe_buffer_bytes} bytes"),
                    Err(CleanerError::InvalidConfig { setting, .. }) => {
                        assert!(!builds, "{threads} threads, {dedupe_buffer_bytes} bytes");
                        assert_eq!(setting, "cleaner.dedupe_buffer_bytes");
                    }
                    Err(other) => panic!("{other}"),
                }
            }
        }
        let edge = |threads| CleanerConfig {
            threads,
            dedupe_buffer_bytes: 1024,
            ..CleanerConfig::default()
        };
        edge(25).validate().unwrap();
        assert!(edge(26).validate().is_err(), "39 bytes hold no key");
    }

    #[test]
    fn load_factor_bounds_are_the_maps() {
        for load_factor in [0.0, 1.0, f64::NAN] {
            let config = CleanerConfig {
                load_factor,
                ..CleanerConfig::default()
            };
            assert!(config.validate().is_err(), "{load_factor}");
            assert!(OffsetMap::new(1 << 20, load_factor).is_err());
        }
    }
}
