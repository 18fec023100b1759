//! Settings of the store: the `store:` section of `broker.yaml` (and, in
//! [`RetentionConfig`], the `retention:` one), with OPERATIONS.md's defaults
//! (written here once, in [`StoreConfig::new`]) and their one check,
//! [`StoreConfig::validate`], which both `Store::open` and the server's
//! config loader run.
//!
//! With the `serde` feature (enabled by the crate that loads YAML) the
//! structs deserialize from those sections: OPERATIONS.md's keys and units,
//! absent keys keep the defaults, unknown keys are errors. Fields that are
//! not keys (`data_dir`, a top-level key the server fills in;
//! `preallocate_next_segment`; `retention`, its own section) are skipped.

use std::path::PathBuf;

use crate::commit_log::format;
use crate::error::{Result, StoreError};
use crate::index_file::format::{ENTRY_CAPACITY_MAX, SLOT_COUNT_MAX};
use crate::retention::RetentionConfig;

/// Smallest CommitLog segment: room for a few records after the header.
pub const COMMITLOG_SEGMENT_BYTES_MIN: u64 = 4096;
/// 64 GiB: a segment is preallocated and mapped whole, so a size no disk
/// or address space can hold would start the server and then fail every
/// segment creation (EFBIG) instead of being refused here.
pub const COMMITLOG_SEGMENT_BYTES_MAX: u64 = 1 << 36;
/// Most units per ConsumeQueue file (a 1.25 GiB file).
pub const CONSUME_QUEUE_UNITS_PER_FILE_MAX: u64 = 1 << 26;

/// When an append counts as done (`store.flush`: `async` or `sync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum FlushMode {
    /// Appends return once the bytes are in the page cache; a flush thread
    /// makes them durable every `flush_interval_ms`. A crash of the process
    /// loses nothing; a crash of the machine loses at most one interval.
    Async,
    /// Appends return only after an fsync covers them. Concurrent appenders
    /// share one fsync (group commit).
    Sync,
}

/// What recovery does when it finds an invalid record with valid records
/// after it (corruption in the middle of the log rather than a torn tail).
/// `store.recovery_mode`: `strict` or `truncate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum RecoveryMode {
    /// Refuse to open, naming the segment and position. Nothing is lost
    /// silently; the operator decides.
    Strict,
    /// Truncate the log at the first invalid record, dropping everything
    /// after it (including valid records). Brings the store up at the cost
    /// of those records.
    #[cfg_attr(feature = "serde", serde(rename = "truncate"))]
    TruncateAtCorruption,
}

/// Where the data lives when nothing says otherwise (OPERATIONS.md's
/// `data_dir`), relative to the working directory.
pub const DATA_DIR_DEFAULT: &str = "./data";

#[derive(Clone, Debug)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(deny_unknown_fields, default)
)]
pub struct StoreConfig {
    #[cfg_attr(feature = "serde", serde(skip))]
    pub data_dir: PathBuf,
    /// Size every new CommitLog segment is preallocated to.
    pub commitlog_segment_bytes: u64,
    /// 20-byte units per ConsumeQueue file.
    pub consume_queue_units_per_file: u64,
    /// Hash slots per IndexFile.
    pub index_slots: u32,
    /// Entries per IndexFile; a new file starts when one is full.
    pub index_entries: u32,
    pub flush: FlushMode,
    /// Async mode: how often dirty bytes are flushed and the checkpoint is
    /// written.
    pub flush_interval_ms: u64,
    /// Sync mode: how often the checkpoint is written (the log is durable
    /// without it: it bounds recovery's replay and moves retention's
    /// durable dispatched position). Longer than `flush_interval_ms`
    /// because its burst of syncs (every ConsumeQueue and time index, the
    /// checkpoint file) shares the disk and its cache flushes with the
    /// acknowledging msyncs: the msyncs that overlapped one took 1.4-4.9x
    /// as long (docs/BENCHMARKS.md, open leads).
    pub sync_checkpoint_interval_ms: u64,
    /// Largest key + value + headers of one record, as configured. The
    /// limit the store enforces is [`StoreConfig::record_payload_max`]: this,
    /// or less if a record this large would not fit in one segment.
    pub max_message_bytes: u64,
    /// `flush: sync`: how long an append waits for the flush that covers
    /// it before it gives up with [`StoreError::FlushTimedOut`] (RocketMQ's
    /// `syncFlushTimeout`). The bytes stay appended; only the wait ends.
    pub sync_flush_timeout_ms: u64,
    /// After dispatch has failed for this long without a success in
    /// between, appends are refused with [`StoreError::DispatchStalled`]:
    /// their records would not become visible to fetches.
    pub dispatch_stall_ms: u64,
    pub recovery_mode: RecoveryMode,
    /// Create the next CommitLog segment ahead of time and keep the pages
    /// just ahead of the writer in the page cache, so the append path pays
    /// for neither file creation nor page allocation.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub preallocate_next_segment: bool,
    /// CommitLog segment deletion and disk-full protection.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub retention: RetentionConfig,
    /// The store of a cluster's node: its readers see only what its high
    /// watermark covers, across a restart too. The watermark is kept in
    /// the data dir ([`crate::high_watermark`]) and recovery indexes
    /// nothing past the one kept, so a restarted node serves no record
    /// a failover could still take back until its cluster's watermark
    /// reaches it again. Set by the server from its `cluster:` section.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub cluster_member: bool,
}

/// OPERATIONS.md's defaults with data in [`DATA_DIR_DEFAULT`].
impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig::new(DATA_DIR_DEFAULT)
    }
}

impl StoreConfig {
    /// OPERATIONS.md's defaults with data in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        StoreConfig {
            data_dir: data_dir.into(),
            commitlog_segment_bytes: 1 << 30,
            consume_queue_units_per_file: 300_000,
            index_slots: 500_000,
            index_entries: 2_000_000,
            flush: FlushMode::Async,
            flush_interval_ms: 500,
            sync_checkpoint_interval_ms: 5_000,
            max_message_bytes: 1 << 20,
            sync_flush_timeout_ms: 5_000,
            dispatch_stall_ms: 30_000,
            recovery_mode: RecoveryMode::Strict,
            preallocate_next_segment: true,
            retention: RetentionConfig::default(),
            cluster_member: false,
        }
    }
}

impl StoreConfig {
    /// Every range and cross-field rule of the `store:` and `retention:`
    /// sections. `Store::open` calls it, and so does the server's config
    /// loader (`tidelog check-config` and `serve`), so the two accept and
    /// refuse exactly the same settings. The error names the key as
    /// OPERATIONS.md spells it.
    pub fn validate(&self) -> Result<()> {
        let in_range = |key: &'static str, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(StoreError::InvalidConfig {
                    key,
                    reason: format!("{value} is not in [{min}, {max}]"),
                })
            }
        };
        in_range(
            "store.commitlog_segment_bytes",
            self.commitlog_segment_bytes,
            COMMITLOG_SEGMENT_BYTES_MIN,
            COMMITLOG_SEGMENT_BYTES_MAX.min(usize::MAX as u64),
        )?;
        in_range(
            "store.consume_queue_units_per_file",
            self.consume_queue_units_per_file,
            1,
            CONSUME_QUEUE_UNITS_PER_FILE_MAX,
        )?;
        in_range(
            "store.index_slots",
            u64::from(self.index_slots),
            1,
            u64::from(SLOT_COUNT_MAX),
        )?;
        in_range(
            "store.index_entries",
            u64::from(self.index_entries),
            2,
            u64::from(ENTRY_CAPACITY_MAX),
        )?;
        in_range(
            "store.flush_interval_ms",
            self.flush_interval_ms,
            1,
            u64::MAX,
        )?;
        in_range(
            "store.sync_checkpoint_interval_ms",
            self.sync_checkpoint_interval_ms,
            1,
            u64::MAX,
        )?;
        in_range(
            "store.max_message_bytes",
            self.max_message_bytes,
            1,
            u64::MAX,
        )?;
        in_range(
            "store.sync_flush_timeout_ms",
            self.sync_flush_timeout_ms,
            1,
            u64::MAX,
        )?;
        in_range(
            "store.dispatch_stall_ms",
            self.dispatch_stall_ms,
            1,
            u64::MAX,
        )?;
        self.retention.validate()
    }

    /// The largest key + value + headers of one record the store accepts:
    /// `max_message_bytes`, clamped to what fits in one segment whatever
    /// the topic name and the split between key, value and headers (see
    /// [`format::payload_max_in_segment`]).
    pub fn record_payload_max(&self) -> u64 {
        self.max_message_bytes
            .min(format::payload_max_in_segment(self.commitlog_segment_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_limit_is_clamped_to_a_segment() {
        let mut c = StoreConfig::new("/nowhere");
        assert_eq!(
            c.record_payload_max(),
            1 << 20,
            "1 GiB segments clamp nothing"
        );
        c.commitlog_segment_bytes = 65536;
        c.validate().unwrap();
        let clamped = c.record_payload_max();
        assert_eq!(clamped, format::payload_max_in_segment(65536));
        assert!(clamped < 65536 && clamped > 65000, "{clamped}");
        c.max_message_bytes = 100;
        assert_eq!(c.record_payload_max(), 100);
    }

    #[test]
    fn validate_names_the_key() {
        let refused = |change: fn(&mut StoreConfig)| {
            let mut c = StoreConfig::new("/nowhere");
            change(&mut c);
            match c.validate() {
                Err(StoreError::InvalidConfig { key, .. }) => key,
                other => panic!("expected InvalidConfig, got {other:?}"),
            }
        };
        assert_eq!(
            refused(|c| c.index_slots = 100_000_000),
            "store.index_slots"
        );
        assert_eq!(refused(|c| c.index_entries = 1), "store.index_entries");
        assert_eq!(
            refused(|c| c.commitlog_segment_bytes = 100),
            "store.commitlog_segment_bytes"
        );
        assert_eq!(
            refused(|c| c.commitlog_segment_bytes = 1_000_000_000_000_000_000),
            "store.commitlog_segment_bytes"
        );
        assert_eq!(
            refused(|c| c.commitlog_segment_bytes = COMMITLOG_SEGMENT_BYTES_MAX + 1),
            "store.commitlog_segment_bytes"
        );
        assert_eq!(
            refused(|c| c.consume_queue_units_per_file = 1 << 27),
            "store.consume_queue_units_per_file"
        );
        assert_eq!(
            refused(|c| c.sync_flush_timeout_ms = 0),
            "store.sync_flush_timeout_ms"
        );
        assert_eq!(
            refused(|c| c.retention.disk_full_ratio = 0.5),
            "retention.disk_full_ratio"
        );
    }
}
