//! tidelog-cleaner: Kafka's LogCleaner for compact topics.
//!
//! Records of a compact topic are copied by the dispatcher into a
//! per-partition CompactedLog (the shared CommitLog is deleted by age and
//! disk pressure, a compacted topic must keep each key's latest value
//! forever). The cleaner, on `cleaner.threads` named OS threads, picks the
//! filthiest log whose dirty ratio exceeds `min.cleanable.dirty.ratio`; its
//! dirty range runs from the offset in the [`checkpoint`] to the first
//! uncleanable segment (the active one, or one younger than
//! `min.compaction.lag.ms`), and never past the copies whose CommitLog
//! bytes it has made durable (see [`cleaner`]). It scans that range into an [`offset_map`] of
//! key fingerprint → place of the newest record, bounded by its share of
//! `dedupe_buffer_bytes`; when the map fills, the pass ends early and the
//! rest waits for the next pass. It then rewrites segments, in groups up to
//! the segment size, keeping a record only if no newer record of its key
//! exists (the key bytes compared, so a fingerprint collision only keeps
//! extra records; tombstones survive `delete.retention.ms`), writes each group to a
//! `.cleaned` file, renames it to `.swap`, swaps it in, drops the old files
//! and renames into place, so a crash at any step is completed or rolled
//! back at startup; finally it advances the checkpoint. Queue offsets never
//! change, so cleaned logs have gaps. A partition that fails is marked
//! uncleanable and retried after a backoff.
//!
//! Modules: [`config`] (the `cleaner:` settings and their check),
//! [`compacted`] (the logs, their format and the dispatcher sink),
//! [`cleaner`] (selection, the pass, the crash-safe swap and the threads,
//! one file each), [`offset_map`], [`checkpoint`], [`throttle`], [`fault`]
//! (the swap's fault-injection seam for tests).

pub mod checkpoint;
pub mod cleaner;
pub mod compacted;
pub mod config;
pub mod error;
pub mod fault;
mod fingerprint;
pub mod offset_map;
pub mod restore;
pub mod throttle;

pub use checkpoint::CleanerCheckpoint;
pub use cleaner::{CleanState, CleanerConfig, CopySource, LogCleaner, PartitionStatus, RunStats};
pub use compacted::{CompactTopicConfig, CompactedLog, CompactedLogs, CompactedRecord};
pub use error::{CleanerError, Result};
pub use offset_map::{OffsetMap, PutOutcome};
