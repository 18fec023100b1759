//! ConsumeQueue: per topic-partition index from queue offset to the record's
//! place in the CommitLog.
//!
//! Invariants:
//! - Only the dispatcher writes (one thread), and units below `max_offset`
//!   never change once published, except by recovery before readers exist.
//! - `max_offset` (the next queue offset to be written) is published with
//!   `Release` after the unit is written; readers load it with `Acquire`
//!   and read only units below it.
//! - Units of queue offsets below `min_offset` point at CommitLog bytes that
//!   retention has deleted (or were never written), or belong to a deleted
//!   incarnation of the topic. `min_offset` is never below the queue's
//!   log start offset (`log_start`, durable in `log-start-offsets`:
//!   [`log_start`]), and no unit below the log start is written again.
//! - Opening a queue reads only its files' written ranges, with `pread`,
//!   never through the maps: a sparse 6 MB queue file holding one unit
//!   costs one page of page cache at open and nothing resident; pages are
//!   mapped in when read.
//! - A deleted topic's queues are gone from the map and from disk; its
//!   partitions' next offsets are in `deleted-partitions` ([`deleted`]), and
//!   records of the deleted incarnation (queue offset below that) are never
//!   indexed again, also not by a recovery replay.
//!
//! Files, one role each: `file.rs` (one mapped queue file), `queue.rs`
//! (one partition's queue, [`ConsumeQueue`]), `queues.rs` (every queue of
//! the store, [`ConsumeQueues`], with the deleted partitions and log
//! starts), `format.rs` (the unit's layout), `offset_table.rs` with
//! `deleted.rs`, `log_start.rs` and `ends.rs` (the small tables kept
//! beside the queues). This file holds the module's invariants and
//! re-exports.

pub mod deleted;
pub mod ends;
mod file;
pub mod format;
pub mod log_start;
pub mod offset_table;
mod queue;
mod queues;

pub use self::format::Unit;
pub use self::queue::{ConsumeQueue, PutOutcome, QueueCursor};
pub(crate) use self::queues::LostQueue;
pub use self::queues::{ConsumeQueues, DeletedRecords};

#[cfg(test)]
mod tests;
