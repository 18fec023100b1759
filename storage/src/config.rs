//! Settings of the store. The server fills these from `broker.yaml`'s `store`
//! section; defaults match CONFIG.md.

use std::path::PathBuf;
use std::sync::Arc;

use crate::fault::Faults;
use crate::retention::RetentionConfig;

/// When an append counts as done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryMode {
    /// Refuse to open, naming the segment and position. Nothing is lost
    /// silently; the operator decides.
    Strict,
    /// Truncate the log at the first invalid record, dropping everything
    /// after it (including valid records). Brings the store up at the cost
    /// of those records.
    TruncateAtCorruption,
}

#[derive(Clone, Debug)]
pub struct StoreConfig {
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
    /// Async mode: how often dirty bytes are flushed. Both modes: how often
    /// the checkpoint is written.
    pub flush_interval_ms: u64,
    /// Largest key + value + headers of one record.
    pub max_message_bytes: u64,
    pub recovery_mode: RecoveryMode,
    /// Create the next CommitLog segment ahead of time and keep the pages
    /// just ahead of the writer in the page cache, so the append path pays
    /// for neither file creation nor page allocation.
    pub preallocate_next_segment: bool,
    /// CommitLog segment deletion and disk-full protection.
    pub retention: RetentionConfig,
    /// Test seam: injected I/O failures. `None` in production.
    pub faults: Option<Arc<Faults>>,
}

impl StoreConfig {
    /// CONFIG.md's defaults with data in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        StoreConfig {
            data_dir: data_dir.into(),
            commitlog_segment_bytes: 1 << 30,
            consume_queue_units_per_file: 300_000,
            index_slots: 500_000,
            index_entries: 2_000_000,
            flush: FlushMode::Async,
            flush_interval_ms: 500,
            max_message_bytes: 1 << 20,
            recovery_mode: RecoveryMode::Strict,
            preallocate_next_segment: true,
            retention: RetentionConfig::default(),
            faults: None,
        }
    }
}
