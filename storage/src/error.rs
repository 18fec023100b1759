//! The one error type of the storage crate.
//!
//! Every variant carries the context an operator needs to act on it: which
//! file, which position, what was wrong. There is no catch-all variant.

use std::path::PathBuf;

/// Result alias used throughout the storage crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An operating-system call on a file failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Bytes on disk do not decode as what they claim to be.
    #[error("corruption in {file} at byte {position}: {reason}")]
    Corruption {
        file: PathBuf,
        position: u64,
        reason: String,
    },

    /// The store's own structures disagree with each other (a queue unit
    /// and the record it points at, a position the log does not hold, a
    /// segment the writer planned and cannot find): a bug or damage, never
    /// the caller's mistake. `file` is the file (or directory) concerned,
    /// `position` the byte position in it (or in the CommitLog).
    #[error("internal inconsistency in {file} at {position}: {reason}")]
    Inconsistent {
        file: PathBuf,
        position: u64,
        reason: String,
    },

    /// A caller handed the store something it refuses (bad name, too large).
    #[error("invalid input: {reason}")]
    InvalidInput { reason: String },

    /// A record is larger than the configured `max_message_bytes`.
    #[error("record of {size} bytes exceeds the limit of {limit} bytes")]
    RecordTooLarge { size: u64, limit: u64 },

    /// An earlier write or fsync failed; the log refuses appends rather than
    /// guess what reached the disk. Restart (which runs recovery) to clear it.
    #[error("the commit log refuses appends after an earlier failure: {reason}")]
    Poisoned { reason: String },

    /// Another process holds the data directory's lock file.
    #[error("data directory {path} is locked by another tidelog process")]
    Locked { path: PathBuf },

    /// The store is shutting down or has shut down.
    #[error("the store is closed")]
    Closed,

    /// Writes are refused because the data directory's disk is nearly full.
    #[error("disk full: {reason}")]
    DiskFull { reason: String },

    /// A setting of the `store:` or `retention:` section is out of range;
    /// `key` is its path as CONFIG.md spells it (`store.index_slots`).
    #[error("{key}: {reason}")]
    InvalidConfig { key: &'static str, reason: String },

    /// Dispatch has failed for longer than `store.dispatch_stall_ms`, so
    /// appended records would not become visible to fetches; appends are
    /// refused until a retry succeeds.
    #[error("dispatch stalled: records would not become visible (sink {sink} failing for {failing_ms} ms: {error})")]
    DispatchStalled {
        sink: String,
        failing_ms: u64,
        error: String,
    },

    /// `flush: sync`: the flush covering an append did not finish within
    /// `store.sync_flush_timeout_ms`. The records are appended (and will be
    /// visible); whether they reached the disk is unknown.
    #[error("flush timed out: the record is appended but its durability is unknown (no flush covered it within {timeout_ms} ms)")]
    FlushTimedOut { timeout_ms: u64 },

    /// An append to a topic deleted while the request was under way (it
    /// passed the caller's existence check before the deletion).
    #[error("topic {topic:?} does not exist (deleted)")]
    TopicDeleted { topic: String },
}

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }

    /// The refusal of an append while the disk is full at `used_ratio`
    /// (the API's pre-check words it the same way).
    pub fn disk_full(used_ratio: f64, retention: &crate::retention::RetentionConfig) -> Self {
        StoreError::DiskFull {
            reason: format!(
                "the data directory's disk is {:.1}% used; writes stopped above disk_full_ratio {:.1}% and resume when usage falls to disk_force_clean_ratio {:.1}% or below (delete old segments or free space)",
                used_ratio * 100.0,
                retention.disk_full_ratio * 100.0,
                retention.disk_force_clean_ratio * 100.0
            ),
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        StoreError::InvalidInput {
            reason: reason.into(),
        }
    }

    pub(crate) fn inconsistent(
        file: impl Into<PathBuf>,
        position: u64,
        reason: impl Into<String>,
    ) -> Self {
        StoreError::Inconsistent {
            file: file.into(),
            position,
            reason: reason.into(),
        }
    }

    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        position: u64,
        reason: impl Into<String>,
    ) -> Self {
        StoreError::Corruption {
            file: file.into(),
            position,
            reason: reason.into(),
        }
    }
}

/// Attach a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| StoreError::io(path, e))
    }
}
