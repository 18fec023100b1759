//! The one error type of the storage crate, and every typed reason it
//! carries.
//!
//! Every variant carries the context an operator needs to act on it: which
//! file, which position, what was wrong. There is no catch-all variant.
//!
//! Invariant: this file is the crate's leaf; it imports nothing of the
//! crate. The reasons a [`StoreError`] holds are defined here with it
//! (a CommitLog entry's [`Invalid`] and its [`VarintError`], a producer's
//! [`SequenceProblem`], a record's [`RecordProblem`], [`CorruptionKind`]),
//! and their modules re-export them under the paths they always had
//! (`commit_log::format::Invalid`, `codec::VarintError`,
//! `producer_state::SequenceProblem`). What needs a module's knowledge
//! lives in that module: `From<codec::Truncated>` in `codec.rs`,
//! `StoreError::disk_full`'s wording of the retention settings in
//! `retention.rs`.

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
    #[error("corruption in {file} at byte {position}: {kind}")]
    Corruption {
        file: PathBuf,
        position: u64,
        kind: CorruptionKind,
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

    /// Record `index` of a batch breaks a record rule; nothing of the batch
    /// was written. The one check of these rules is the writer's (a
    /// front-end passes its own, lower payload limit to
    /// `Store::append_within` rather than checking the records a second
    /// time).
    #[error("record {index}: {problem}")]
    RecordRefused {
        index: usize,
        problem: RecordProblem,
    },

    /// An idempotent producer's batch is out of sequence (Kafka's rules,
    /// `producer_state`); nothing of it was written. A client mistake or a
    /// producer that lost its state, never the store's.
    #[error("{topic}-{partition}: {problem}")]
    ProducerRefused {
        topic: String,
        partition: u32,
        problem: SequenceProblem,
    },

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
    /// `key` is its path as OPERATIONS.md spells it (`store.index_slots`).
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

    /// The CommitLog segment an append needs (at `base`) cannot be made
    /// now: its creation keeps failing for another reason than a full disk
    /// (that is [`StoreError::DiskFull`]), such as "too many open files",
    /// or has not finished in time. Nothing of the batch was written; the
    /// log is not poisoned, and appends work again once a creation
    /// succeeds.
    #[error("cannot make the commit log segment at {base}: {reason}")]
    SegmentUnavailable { base: u64, reason: String },

    /// An append to a topic deleted while the request was under way (it
    /// passed the caller's existence check before the deletion).
    #[error("topic {topic:?} does not exist (deleted)")]
    TopicDeleted { topic: String },

    /// A master's bytes a replica was handed to place at `position`
    /// (`CommitLog::append_copy`) are refused; nothing of them was
    /// written. The stream is out of step or damaged, or the two nodes
    /// are configured apart (their segment sizes differ).
    #[error("copy of the master's log refused at {position}: {problem}")]
    CopyRefused { position: u64, problem: CopyProblem },

    /// A requested cut of the CommitLog (`crate::cut`) goes below the
    /// log's first segment: this node holds none of what it shares with
    /// the master, and needs a whole copy of the data dir.
    #[error("cannot cut the commit log at {position}: it begins at {log_start}; the node needs a whole copy")]
    CutBelowLogStart { position: u64, log_start: u64 },

    /// An append to a cluster's replica: only the master writes, and a
    /// replica's log takes only the master's copy (`Store::set_replica`).
    #[error("this node is a replica: writes go to the master")]
    Replica,
}

/// Why a replica refuses a master's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CopyProblem {
    /// The bytes do not start where this log ends.
    #[error("this log ends at {log_end}")]
    NotAtEnd { log_end: u64 },
    /// The bytes are not a valid entry or end marker here.
    #[error("{0}")]
    Invalid(Box<Invalid>),
    /// The bytes end inside an entry (a master sends whole entries).
    #[error("the bytes end inside an entry ({needed} bytes needed, {available} given)")]
    TornEntry { needed: usize, available: usize },
    /// An entry's first queue offset is not where its partition goes on.
    #[error("{topic}-{partition}: entry starts at queue offset {found}, the partition goes on at {expected}")]
    QueueOffset {
        topic: String,
        partition: u32,
        found: u64,
        expected: u64,
    },
    /// The master's segment ends elsewhere than this node's: the two are
    /// configured with different `store.commitlog_segment_bytes`.
    #[error("the master's segment ends at {master_end}, this node's at {segment_end} (store.commitlog_segment_bytes differs)")]
    SegmentEnd { master_end: u64, segment_end: u64 },
    /// The master's log no longer holds the position (retention deleted
    /// it): the replica needs a whole copy.
    #[error("the master's log begins at {log_start}")]
    Gone { log_start: u64 },
}

/// Why the store refuses one record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordProblem {
    #[error("{count} headers; at most {max} are allowed")]
    TooManyHeaders { count: usize, max: usize },
    /// `header` is the header's index in the record.
    #[error("header {header}'s name is {len} bytes; at most {max} are allowed")]
    HeaderNameTooLong {
        header: usize,
        len: usize,
        max: usize,
    },
    /// Key + value + headers over the limit: the store's
    /// `max_message_bytes` (clamped to a segment) or the caller's, whichever
    /// is smaller.
    #[error("{size} bytes (key + value + headers), over the limit of {limit}")]
    TooLarge { size: u64, limit: u64 },
    /// The record with its entry header (which holds the topic name) does
    /// not fit an empty segment, or is over the format's record length.
    #[error("{size} bytes with its entry header, over the {limit} an empty segment holds")]
    LargerThanSegment { size: u64, limit: u64 },
}

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether this is the file system running out of space (ENOSPC, or
    /// a quota's EDQUOT): a write that more free space would let through.
    pub fn is_out_of_space(&self) -> bool {
        match self {
            StoreError::DiskFull { .. } => true,
            StoreError::Io { source, .. } => io_out_of_space(source),
            _ => false,
        }
    }

    /// An I/O error of a file the store had to create or back turned into
    /// [`StoreError::DiskFull`] when it is the disk being short; any other
    /// error as it is.
    pub(crate) fn space_refusal(self, what: &str) -> Self {
        if !self.is_out_of_space() || matches!(self, StoreError::DiskFull { .. }) {
            return self;
        }
        StoreError::DiskFull {
            reason: format!(
                "no space to {what}: {self}; writes resume by themselves once space is freed"
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
        kind: impl Into<CorruptionKind>,
    ) -> Self {
        StoreError::Corruption {
            file: file.into(),
            position,
            kind: kind.into(),
        }
    }
}

/// What was wrong with the bytes of a [`StoreError::Corruption`]: every
/// decoder of an on-disk format returns one, so callers (recovery above
/// all) decide by variant, never by the message. `Display` is the message
/// the operator reads; the file and position are on the error around it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CorruptionKind {
    /// A CommitLog entry or record does not decode (the log's own reason;
    /// boxed, like the other large fields: this error travels in every
    /// `Result` of the crate).
    #[error("{0}")]
    Entry(Box<Invalid>),
    /// Zeros where recovery scans for the next entry: nothing was written
    /// here (the log's clean end, or a hole if valid data follows).
    #[error("no record here (zeros)")]
    Empty,
    /// A read found zeros below the committed position.
    #[error("zero bytes below the committed position")]
    ZerosBelowCommitted,
    /// A client's physical offset is not where a record starts.
    #[error("no record starts here")]
    NoRecordHere,
    /// The entry a record's distance leads to does not decode.
    #[error("its entry at {entry_pos}: {found}")]
    RecordEntry { entry_pos: u64, found: Box<Invalid> },
    /// A record's distance leads to an end marker or zeros, not an entry.
    #[error("no entry at {entry_pos}")]
    NoEntryAt { entry_pos: u64 },
    /// A position past the last record of the entry it falls in.
    #[error("past the entry's last record")]
    PastLastRecord,
    /// A position inside a record, not at its start.
    #[error("inside a record")]
    InsideRecord,
    /// A CommitLog segment file's size cannot be mapped.
    #[error("segment size {size} is not usable")]
    SegmentSize { size: u64 },
    /// A gap between two CommitLog segments.
    #[error("segment starts at {base} but the previous one ends at {previous_end}: a segment is missing")]
    SegmentMissing { base: u64, previous_end: u64 },
    /// The CommitLog's first segments are gone though retention did not
    /// delete them (`log-head` records where retention left the start).
    #[error("the commit log should begin at {recorded_first} (log-head: retention deleted everything below it) but its first segment begins at {found_first}: segments holding [{recorded_first}, {found_first}) are missing and were not deleted by retention; refusing to open (restore the missing segment files, or set store.recovery_mode: truncate to accept the loss)")]
    LogHeadMissing {
        recorded_first: u64,
        found_first: u64,
    },
    /// The CommitLog was written in another format version. The versions
    /// named are [`READ_LOG_VERSIONS`] (`commit_log::format` pins them to
    /// its own `VERSION_2` and `VERSION`).
    #[error(
        "the CommitLog holds format version {version}, this tidelog reads versions {}, {} and {} only; \
         start the version that wrote it to drain it, or move the data dir aside",
        READ_LOG_VERSIONS[0],
        READ_LOG_VERSIONS[1],
        READ_LOG_VERSIONS[2]
    )]
    LogFormatVersion { version: u8 },
    /// The checkpoint claims more was dispatched than the log holds.
    #[error(
        "checkpoint says records up to {dispatched} were dispatched, but the log ends at {log_end}"
    )]
    CheckpointPastEnd { dispatched: u64, log_end: u64 },
    /// An invalid entry (`found`) with a valid one after it, below the
    /// last flushed position: damage in the middle of the log, which
    /// `store.recovery_mode: strict` refuses.
    #[error("invalid entry ({found}) with valid data after it at {valid_at}: this is corruption in the middle of the log, not a torn tail; refusing to open (set store.recovery_mode: truncate to cut the log here and lose what follows)")]
    MiddleOfLog {
        found: Box<CorruptionKind>,
        valid_at: u64,
    },
    /// A queue unit leads to a record of another queue or offset.
    #[error("queue {queue} leads to a record of {found}")]
    QueueMismatch {
        queue: Box<QueuePosition>,
        found: Box<QueuePosition>,
    },
    /// A queue unit points at or before the unit before it.
    #[error("unit points at {physical} but the unit before it at {previous}")]
    UnitOrder { physical: u64, previous: u64 },
    /// A queue unit with a zero size and other fields set.
    #[error("unit has zero size but other fields set")]
    UnitZeroSize,
    /// A queue unit's size beyond any record's.
    #[error("unit size {size} exceeds {max}")]
    UnitTooLarge { size: u32, max: usize },
    /// A queue file's length is not the configured one.
    #[error(
        "queue file is {len} bytes, expected {expected} (consume_queue_units_per_file changed?)"
    )]
    QueueFileLength { len: u64, expected: u64 },
    /// A queue file's name is not at a file boundary.
    #[error("queue file name {byte_offset} is not a multiple of the file size {file_bytes}")]
    QueueFileName { byte_offset: u64, file_bytes: u64 },
    /// A whole aborted-transaction index entry that does not decode.
    #[error("aborted-transaction index entry: {reason}")]
    TxnIndexEntry { reason: String },
    /// A fixed-size file (the checkpoint) of the wrong length.
    #[error("{len} bytes, expected {expected}")]
    FileLength { len: u64, expected: u64 },
    /// A file too short for its header (`what` names the file kind).
    #[error("{what} of {len} bytes has no header")]
    NoHeader { what: &'static str, len: u64 },
    /// A file larger than its format allows.
    #[error("{len} bytes, more than the {max} the file can be")]
    FileTooLarge { len: u64, max: u64 },
    /// A file's bytes end before a field.
    #[error("truncated at byte {at}")]
    Truncated { at: usize },
    #[error("bad magic {found:#010x}")]
    BadMagic { found: u32 },
    #[error("unknown version {found}")]
    UnknownVersion { found: u16 },
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    /// A header field outside its range (`field` as the message names it).
    #[error("{field} {value} outside [{min}, {max}]")]
    OutOfRange {
        field: &'static str,
        value: u32,
        min: u32,
        max: u32,
    },
    /// An index file's length disagrees with its header.
    #[error("file is {len} bytes, header implies {implied}")]
    IndexFileLength { len: u64, implied: u64 },
    /// An index file's physical range runs backwards.
    #[error("end physical offset before begin")]
    IndexRangeBackwards,
    /// A table with more entries than it may hold.
    #[error("{count} entries, more than {max}")]
    TooManyEntries { count: u32, max: u32 },
    /// An entry of the deleted-partitions table names no valid topic.
    #[error("entry {entry}: {reason}")]
    BadTopicEntry { entry: u32, reason: String },
    /// Bytes left over after a table's last entry.
    #[error("{count} bytes after the last entry")]
    TrailingBytes { count: usize },
    /// Damage the cleaner found in a compacted log, in the cleaner's words
    /// (its own error type carries the detail).
    #[error("{reason}")]
    CompactedLog { reason: String },
}

// Every `Result` of the crate (and of the crates above it) carries a
// `StoreError`: large fields of a kind are boxed to keep it this size.
const _: () = assert!(std::mem::size_of::<StoreError>() <= 64);

impl From<Invalid> for CorruptionKind {
    fn from(why: Invalid) -> Self {
        CorruptionKind::Entry(Box::new(why))
    }
}

/// The CommitLog format versions this build reads, as
/// [`CorruptionKind::LogFormatVersion`] names them: the older one still
/// read, the one written, and the one written for transactions.
/// `commit_log::format` asserts at compile time that they are its
/// `VERSION_2`, `VERSION` and `VERSION_TXN`, so they cannot drift.
pub const READ_LOG_VERSIONS: [u8; 3] = [2, 3, 4];

/// A record's place in its queue, as a corruption message names it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{topic}-{partition} offset {offset}")]
pub struct QueuePosition {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
}

/// ENOSPC or EDQUOT.
pub(crate) fn io_out_of_space(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        || e.kind() == std::io::ErrorKind::StorageFull
        || e.kind() == std::io::ErrorKind::QuotaExceeded
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

/// Why bytes are not a valid entry or record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Fewer bytes than a header needs.
    Truncated {
        needed: usize,
        available: usize,
    },
    BadMagic(u16),
    BadVersion(u8),
    BadFlags(u8),
    /// A producer block with a negative producer id, epoch or sequence.
    BadProducer {
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
    },
    BadLength(String),
    /// A varint runs past the entry or overflows 64 bits.
    BadVarint(VarintError),
    OffsetMismatch {
        stored: u64,
        expected: u64,
    },
    CrcMismatch {
        stored: u32,
        computed: u32,
    },
    BadTopic,
    BadHeaders(String),
    /// No record starts at this position of the entry.
    NotARecord(String),
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::Truncated { needed, available } => {
                write!(f, "truncated: needs {needed} bytes, {available} available")
            }
            Invalid::BadMagic(m) => write!(f, "bad magic {m:#06x}"),
            Invalid::BadVersion(v) => write!(f, "unknown version {v}"),
            Invalid::BadFlags(x) => write!(f, "unknown flags {x:#04x}"),
            Invalid::BadProducer {
                producer_id,
                epoch,
                base_sequence,
            } => write!(
                f,
                "producer block out of range: id {producer_id}, epoch {epoch}, sequence {base_sequence}"
            ),
            Invalid::BadLength(s) => write!(f, "bad length: {s}"),
            Invalid::BadVarint(e) => write!(f, "bad length: {e}"),
            Invalid::OffsetMismatch { stored, expected } => {
                write!(f, "entry says it starts at {stored}, found at {expected}")
            }
            Invalid::CrcMismatch { stored, computed } => {
                write!(
                    f,
                    "CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
                )
            }
            Invalid::BadTopic => write!(f, "topic name is not valid"),
            Invalid::BadHeaders(s) => write!(f, "bad header block: {s}"),
            Invalid::NotARecord(s) => write!(f, "no record starts here: {s}"),
        }
    }
}

impl std::error::Error for Invalid {}

/// Why bytes are not a varint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VarintError {
    #[error("a varint runs past the end")]
    RunsPast,
    /// Longer than ten bytes, or a tenth byte above the one bit left.
    #[error("a varint overflows 64 bits")]
    Overflow,
}

/// Why a producer's batch is refused; nothing of it is written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SequenceProblem {
    #[error("producer {producer_id}: epoch {epoch} is older than its current epoch {current}")]
    StaleEpoch {
        producer_id: i64,
        epoch: i16,
        current: i16,
    },
    #[error("producer {producer_id}: sequence {got} is out of order (the next is {expected})")]
    OutOfOrder {
        producer_id: i64,
        expected: i32,
        got: i32,
    },
    #[error("producer {producer_id} has no state in this partition (expired or never written) and its batch starts at sequence {got}, not 0")]
    UnknownProducer { producer_id: i64, got: i32 },
    #[error("producer {producer_id}: a producer id, epoch and sequence must be >= 0 and a batch at most {max} records")]
    OutOfRange { producer_id: i64, max: u32 },
    /// A batch outside a transaction from a producer whose transaction is
    /// open in the partition (Kafka: INVALID_TXN_STATE).
    #[error("producer {producer_id} has a transaction open in this partition: a batch outside it is refused")]
    TransactionOpen { producer_id: i64 },
    /// One partition holds as many open transactions as it may.
    #[error("producer {producer_id}: {max} transactions are open in this partition already")]
    TooManyTransactions { producer_id: i64, max: usize },
}
