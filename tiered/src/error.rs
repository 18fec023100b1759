//! The one error type of the tiered crate.
//!
//! Three kinds, kept apart because callers answer them differently: the
//! object store failing after the retries (`Unavailable`: HTTP 503 / 50304,
//! Kafka KAFKA_STORAGE_ERROR, the server keeps serving local offsets), bytes
//! in the bucket that fail their checks (`Corrupt`: a 500, logged), and a
//! caller's mistake (`Config`, `InvalidInput`, `OutOfRange`).

/// Result alias of the tiered crate.
pub type Result<T, E = TieredError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum TieredError {
    /// The object store failed or timed out after the retries.
    #[error("remote tier unavailable ({op}): {source}")]
    Unavailable {
        op: &'static str,
        #[source]
        source: object_store::Error,
    },

    /// An object, manifest or topic meta in the bucket failed its checks
    /// (CRC, bounds, version, manifest invariants): damage or a bug, never
    /// the caller's mistake.
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: String, detail: String },

    /// A `tiered:` config mistake (bad url, zero sizes, missing feature).
    #[error("tiered config: {detail}")]
    Config { detail: String },

    /// A caller handed `upload`/`put_topic`/`put_snapshot` something it
    /// refuses (offsets not ascending, a bad name): nothing was written.
    #[error("invalid input: {detail}")]
    InvalidInput { detail: String },

    /// A remote read below the partition's remote beginning (remote
    /// retention dropped it): Kafka's OFFSET_OUT_OF_RANGE.
    #[error("{topic}-{partition}: offset {offset} is below the remote beginning {beginning}")]
    OutOfRange {
        topic: String,
        partition: u32,
        offset: u64,
        beginning: u64,
    },

    /// Another writer advanced the manifest of the partition over and over
    /// while this one tried to (two servers on one bucket prefix).
    #[error("{what}: lost the race to write version {version} {attempts} times")]
    Contended {
        what: String,
        version: u64,
        attempts: u32,
    },
}

impl TieredError {
    pub(crate) fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> Self {
        TieredError::Corrupt {
            what: what.into(),
            detail: detail.into(),
        }
    }

    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        TieredError::InvalidInput {
            detail: detail.into(),
        }
    }

    pub(crate) fn config(detail: impl Into<String>) -> Self {
        TieredError::Config {
            detail: detail.into(),
        }
    }
}
