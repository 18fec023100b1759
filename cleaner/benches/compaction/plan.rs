//! The sizes of one run ([`Plan`]: the full benchmark or the tiny smoke
//! run) and the constants every step shares: record and batch shape,
//! topic names, the busy slices of step 4, how often progress is printed.
//!
//! A leaf: the other modules read these, so a figure of the benchmark
//! table is defined once (`VALUE_BYTES` is both what `setup` writes and
//! what `phases` produces).

use std::time::Duration;

pub(crate) const VALUE_BYTES: usize = 1024;

pub(crate) const BATCH_RECORDS: u64 = 100;

pub(crate) const PRODUCE_PARTITIONS: u64 = 4;

pub(crate) const TOPIC: &str = "bench";

/// Prefix of the background logs that step 4's busy slices clean.
pub(crate) const BG_TOPIC: &str = "bench-bg";

/// Busy slices in step 4, each cleaning a background log of its own.
pub(crate) const BG_SLICES: usize = 4;

/// A delete-policy topic (not copied): the store and dispatcher alone. Same
/// name length as `TOPIC`, so records have the same size.
pub(crate) const PLAIN_TOPIC: &str = "plain";

/// Kafka's SkimpyOffsetMap: 16-byte MD5 + 8-byte offset per slot.
pub(crate) const KAFKA_BYTES_PER_ENTRY: usize = 24;

pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(2);

pub(crate) fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Sizes of one run: the full benchmark or the tiny smoke version.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub(crate) full: bool,
    pub(crate) log_bytes: u64,
    pub(crate) segment_bytes: u64,
    pub(crate) distinct_pct: u64,
    pub(crate) produce: Duration,
    pub(crate) warmup_log_bytes: u64,
}
