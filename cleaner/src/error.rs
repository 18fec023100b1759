//! The cleaner crate's one error type.
//!
//! Every variant carries what an operator needs to find the problem (the
//! file, the line, the setting) and no variant is a catch-all: a new kind of
//! failure gets a new variant.

use std::path::PathBuf;

use tidelog_storage::StoreError;

/// Shorthand used throughout the crate.
pub type Result<T, E = CleanerError> = std::result::Result<T, E>;

/// Everything the LogCleaner's building blocks can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CleanerError {
    /// An operating-system call on a file failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A file the cleaner owns does not parse as what it claims to be.
    /// `line` is 1-based; 0 means the file as a whole (too large, not
    /// newline-terminated).
    #[error("corruption in {path} at line {line}: {reason}")]
    Corruption {
        path: PathBuf,
        line: usize,
        reason: String,
    },

    /// The storage layer failed to write a file for us (atomic replace), or
    /// to flush the CommitLog before a pass (which then cleans nothing: it
    /// cannot tell which copies would survive a power loss).
    #[error("could not write {path}: {source}")]
    Store {
        path: PathBuf,
        #[source]
        source: StoreError,
    },

    /// A setting is outside what the cleaner can work with.
    #[error("invalid setting {setting}: {reason}")]
    InvalidConfig {
        setting: &'static str,
        reason: String,
    },

    /// A fixed-size buffer could not be allocated. Returned instead of
    /// aborting the process, so a too-large `dedupe_buffer_bytes` is a
    /// clear startup error.
    #[error("cannot allocate {bytes} bytes for {purpose}")]
    OutOfMemory { purpose: &'static str, bytes: usize },

    /// A topic name that the cleaner-offset checkpoint could not store and
    /// read back (see [`crate::checkpoint`] for the rules).
    #[error("invalid topic name {topic:?}: {reason}")]
    InvalidTopic { topic: String, reason: String },

    /// A compacted log was asked for a topic that is not (or no longer)
    /// declared compact, e.g. one deleted while a fetch was starting.
    #[error("topic {topic:?} is not a compact topic")]
    NotCompact { topic: String },

    /// A cleaning pass found a swap file of an earlier pass where it was
    /// about to rename its own (the reconcile before a retry should have
    /// finished it). The pass stops rather than replace it.
    #[error("a swap file of an earlier cleaning is still there: {path}")]
    LeftoverSwap { path: PathBuf },

    /// The checkpoint holds more entries than a reader accepts, so writing
    /// it would produce a file that the next startup refuses.
    #[error("cleaner checkpoint has {entries} entries; at most {max} can be stored")]
    CheckpointTooLarge { entries: usize, max: usize },
}
