//! tidelog-storage: everything tidelog keeps on disk.
//!
//! A RocketMQ-style store: one CommitLog shared by every topic, per-partition
//! ConsumeQueues of 20-byte units pointing into it, IndexFiles for lookup by
//! key, a dispatcher thread that builds those indexes from committed records,
//! a checkpoint of durable positions and crash recovery.
//!
//! No async runtime lives here: the store runs on named OS threads and its
//! blocking calls are meant to be reached from `spawn_blocking` or plain
//! threads. Readers that wait for new records get an `EventListener`, which
//! can be awaited on any runtime or waited on with a timeout.

pub mod checkpoint;
pub mod codec;
pub mod commit_log;
pub mod config;
pub mod consume_queue;
pub mod cut;
pub mod dispatch;
pub mod durability;
pub mod epochs;
pub mod error;
pub mod fault;
pub mod fs_util;
pub mod high_watermark;
pub mod index_file;
pub mod layout;
pub mod log_head;
pub mod position_file;
pub mod producer_state;
mod recovery;
pub mod restore;
pub mod retention;
pub mod store;
pub mod test_rng;
pub mod time_index;
pub mod txn_index;
pub mod types;

pub use commit_log::{
    AppendRecord, Appended, FlushWait, Header, MarkerSpec, ReadSink, StoredRecord, Unflushed,
};
pub use config::{FlushMode, RecoveryMode, StoreConfig};
pub use consume_queue::DeletedRecords;
pub use dispatch::{DispatchSink, DISPATCH_LAG_MAX_BYTES};
pub use error::{CopyProblem, CorruptionKind, RecordProblem, Result, StoreError};
pub use event_listener::{EventListener, Listener};
pub use producer_state::{ActiveProducer, BatchMeta, ProducerBatch, SequenceProblem};
pub use retention::{
    AbortedKeep, DeleteWhen, PassOutcome, RetentionConfig, RetentionHold, Trigger,
};
pub use store::{
    DataDirLock, LagAdmitted, ProducerAppend, ReadResult, RecoveryReport, Store, StoreStats,
};
pub use types::{
    topic_name_problem, validate_topic_name, PhysicalOffset, QueueOffset, TopicNameProblem,
    TopicPartition,
};
