//! The cleaner crate's one error type.
//!
//! Every variant carries what an operator needs to find the problem (the
//! file, the line, the setting) and no variant is a catch-all: a new kind of
//! failure gets a new variant.
//!
//! A leaf of the crate: of its modules it imports only
//! `compacted::format`'s [`Invalid`], and that module returns no
//! `CleanerError`. The limits a message cites (the checkpoint's size,
//! count and version) travel in the variant's fields, set by the module
//! that owns them, so no error ties two modules into a circle.

use std::path::PathBuf;

use tidelog_storage::{StoreError, TopicNameProblem};

use crate::compacted::format::Invalid;

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

    /// A file the cleaner owns does not parse as what it claims to be:
    /// where in it, and the typed reason (callers and tests decide by
    /// `kind`, never by the message).
    #[error("corruption in {path}{at}: {kind}")]
    Corruption {
        path: PathBuf,
        at: Location,
        kind: CorruptionKind,
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

    /// A read that must not wait for the disk
    /// ([`crate::compacted::CompactedLog::read_cached`]) found bytes of
    /// `path` that the page cache does not hold (or a file system or
    /// platform that cannot tell): the caller reads again where blocking
    /// is allowed. Not a failure of the file.
    #[error("{path}: not all of the bytes to read are in the page cache")]
    NotCached { path: PathBuf },

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

impl CleanerError {
    /// An I/O failure on `path`.
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> CleanerError {
        CleanerError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Where in a file a [`CleanerError::Corruption`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// A line of a text file (the cleaner-offset checkpoint), 1-based.
    Line(usize),
    /// A byte position (a compacted log segment).
    Byte(u64),
    /// The file (or directory) as a whole: too large, not
    /// newline-terminated, out of step with its neighbours.
    Whole,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Line(line) => write!(f, " at line {line}"),
            Location::Byte(position) => write!(f, " at byte {position}"),
            Location::Whole => Ok(()),
        }
    }
}

/// What was wrong with the bytes of a [`CleanerError::Corruption`], as
/// storage's `CorruptionKind` does it for the store's files. `Display` is
/// the message the operator reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CorruptionKind {
    // Compacted log segments.
    /// A record does not decode (its own reason).
    #[error("{0}")]
    Record(#[from] Invalid),
    /// Zeros inside a segment's length, where a record should start.
    #[error("zeros where a record should be")]
    Zeros,
    /// A record's offset not above the one before it (or below the
    /// segment's base offset).
    #[error("offset {offset} out of order")]
    OffsetOrder { offset: u64 },
    /// Bytes after a sealed segment's last record.
    #[error("bytes after the last record")]
    BytesAfterLastRecord,
    /// A compacted log's segment list and its files disagree after a
    /// failed cleaning.
    #[error("cannot reconcile the segment list with the files: {reason}")]
    SegmentList { reason: &'static str },

    // The cleaner-offset checkpoint (text).
    #[error("not valid UTF-8")]
    NotUtf8,
    #[error("file is empty")]
    Empty,
    #[error("last line does not end with a newline")]
    NoFinalNewline,
    /// `max` is the checkpoint's `CHECKPOINT_FILE_BYTES_MAX`.
    #[error("file is {len} bytes, more than the limit of {max}")]
    FileTooLarge { len: u64, max: usize },
    /// `expected` is the checkpoint's `CHECKPOINT_VERSION`.
    #[error("unsupported version {found:?}, expected {expected}")]
    Version { found: String, expected: u32 },
    #[error("missing the entry count line")]
    NoCountLine,
    #[error("entry count {found:?} is not a decimal number")]
    Count { found: String },
    /// `max` is the checkpoint's `CHECKPOINT_ENTRIES_MAX`.
    #[error("entry count {count} exceeds the limit of {max}")]
    CountOverLimit { count: usize, max: usize },
    #[error("expected {expected} entries, found {found}")]
    TooFewEntries { expected: usize, found: usize },
    #[error("expected {expected} entries, found more")]
    TooManyEntries { expected: usize },
    /// A line that is not three fields separated by single spaces
    /// (`line` is an excerpt).
    #[error("expected \"topic partition offset\" separated by single spaces, got {line:?}")]
    EntryShape { line: String },
    /// A topic name the store would refuse (the store's words).
    #[error("{}", topic_problem_message(.topic))]
    BadTopic {
        topic: String,
        problem: TopicNameProblem,
    },
    #[error("partition {found:?} is not a decimal number in 0..={}", u32::MAX)]
    Partition { found: String },
    #[error("offset {found:?} is not a decimal number in 0..={}", u64::MAX)]
    Offset { found: String },
    #[error("second entry for topic {topic} partition {partition}")]
    DuplicateEntry { topic: String, partition: u32 },
}

/// The store's message for a topic name it refuses: the rule and its
/// wording are the store's (`tidelog_storage::validate_topic_name`).
pub(crate) fn topic_problem_message(topic: &str) -> String {
    match tidelog_storage::validate_topic_name(topic) {
        Err(StoreError::InvalidInput { reason }) => reason,
        Err(other) => other.to_string(),
        Ok(()) => format!("topic name {topic:?} is valid"),
    }
}
