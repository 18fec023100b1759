//! The types of the store and the cleaner that are part of the broker's
//! public API, re-exported deliberately: a front-end names these (to map
//! errors, render stats and pass outcomes, build a config in its tests)
//! without depending on `tidelog-storage` or `tidelog-cleaner` itself.
//! Nothing else of those crates is reachable through the broker; a type
//! a front-end needs is added here, never by a new dependency of the
//! front-end.

pub use tidelog_cleaner::cleaner::CleanerMetricsSnapshot;
pub use tidelog_cleaner::{CleanState, CleanerConfig, CleanerError, PartitionStatus, RunStats};
/// A fixed disk usage for the store's disk-full gate (tests).
pub use tidelog_storage::retention::FixedDiskUsage;
/// How far dispatch may lag before appends are held back (what the
/// front-ends' tests fill to).
pub use tidelog_storage::DISPATCH_LAG_MAX_BYTES;
/// Transactions: a marker to write, and what an append with a producer
/// did (the transaction coordinator writes markers; tests write both,
/// through the store `Broker::store` answers).
pub use tidelog_storage::{AppendRecord, MarkerSpec, ProducerAppend, Store};
/// Idempotent producers: a batch's producer, a retried batch's original
/// offsets, and why a batch is out of sequence.
pub use tidelog_storage::{BatchMeta, ProducerBatch, SequenceProblem};
pub use tidelog_storage::{
    CopyProblem, CorruptionKind, FlushMode, Header, PassOutcome, RecordProblem, RetentionConfig,
    StoreConfig, StoreError, StoreStats, Trigger,
};

/// What a long-polling read awaits ([`PartitionRef::listen`]).
///
/// [`PartitionRef::listen`]: crate::read::PartitionRef::listen
pub use tidelog_storage::EventListener;

/// A read that hands each record on as it is read
/// ([`PartitionRef::read_into`]), and the records it hands on.
///
/// [`PartitionRef::read_into`]: crate::read::PartitionRef::read_into
pub use tidelog_storage::{ReadSink, StoredRecord};
/// The object store's error, inside `TieredError::Unavailable` (front-end
/// tests build one).
pub use tidelog_tiered::object_store::Error as ObjectStoreError;
/// Tiered storage's errors and config, for the front-ends' error mapping
/// (`TieredError::Unavailable` → 503/50304, KAFKA_STORAGE_ERROR) and the
/// server's `tiered:` section.
pub use tidelog_tiered::{RemoteTier, TieredConfig, TieredError};
