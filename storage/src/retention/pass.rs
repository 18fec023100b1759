//! One retention pass over the store's files, by the rules of
//! `retention/mod.rs` (`plan`, `segments_per_pass`): which CommitLog segments
//! go, oldest first, then the queue and index files that only point below
//! the log's new start; and the counters and flags retention and the
//! disk-full gate share ([`RetentionState`]).
//!
//! Invariants: passes are serialised (`pass_lock`, scheduled and manual
//! alike); a pass never deletes the segment being written, one ending
//! above the checkpoint's dispatched position (`durable_dispatched`: not
//! yet durably in every index and sink) or above the retention hold, and
//! it stops at the first segment it keeps, so the log never has a hole;
//! queue files wholly below a client's log start go at every pass.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{plan, segments_per_pass, Mode, PassOutcome, RetentionConfig, RetentionHold, Trigger};
use crate::commit_log::CommitLog;
use crate::consume_queue::ConsumeQueues;
use crate::error::Result;
use crate::index_file::IndexService;
use crate::txn_index::file::TxnIndexSink;

/// Counters and flags of retention, shared by its threads and stats.
#[derive(Default)]
pub(crate) struct RetentionState {
    /// Serialises passes (scheduled and manual).
    pub(crate) pass_lock: Mutex<()>,
    /// Everything below this is durably in every index and sink: the
    /// checkpoint's dispatched position. Segments ending above it stay.
    pub(crate) durable_dispatched: AtomicU64,
    pub(crate) disk_full: AtomicBool,
    /// The flag is up because free space fell below the store's reserve
    /// (not the ratio): what the refusal says.
    pub(crate) full_by_reserve: AtomicBool,
    pub(crate) disk_used_ratio_bits: AtomicU64,
    /// The last measured available bytes (`u64::MAX`: unknown).
    pub(crate) disk_available_bytes: AtomicU64,
    pub(crate) segments_deleted: AtomicU64,
    pub(crate) bytes_freed: AtomicU64,
    pub(crate) failures: AtomicU64,
    pub(crate) last_pass_ms: AtomicI64,
    /// Segments ending above its position stay (tiered storage's records
    /// not yet uploaded); see `retention.rs`.
    pub(crate) hold: std::sync::RwLock<Option<Arc<dyn RetentionHold>>>,
    /// Passes that stopped at the hold while they would have deleted more.
    pub(crate) held_passes: AtomicU64,
    /// Which topics keep their aborted transactions below the log start
    /// (a compact topic's compacted log outlives the CommitLog); `None`:
    /// none is forgotten. See [`trim_aborted_below_log_start`].
    pub(crate) aborted_keep: std::sync::RwLock<Option<AbortedKeep>>,
}

/// Whether a topic keeps its aborted transactions whatever retention
/// deleted ([`crate::Store::set_aborted_keep`]).
pub type AbortedKeep = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The store's files a retention pass deletes from or trims.
pub(crate) struct Retained<'a> {
    pub log: &'a CommitLog,
    pub queues: &'a ConsumeQueues,
    pub index: &'a IndexService,
    pub txn_sink: &'a TxnIndexSink,
}

impl RetentionState {
    /// One retention pass (see `retention.rs` for the rules) over the
    /// store's CommitLog, queues, IndexFiles and aborted-transaction
    /// indexes.
    pub(crate) fn pass(
        &self,
        cfg: &RetentionConfig,
        data_dir: &Path,
        files: Retained<'_>,
        trigger: Trigger,
    ) -> Result<PassOutcome> {
        let Retained {
            log,
            queues,
            index,
            txn_sink,
        } = files;
        let _pass = self.pass_lock.lock().unwrap_or_else(|e| e.into_inner());
        let ratio = cfg.disk.used_ratio(data_dir).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read disk usage; treating it as 0");
            0.0
        });
        let mut out = PassOutcome {
            disk_used_ratio: ratio,
            ..PassOutcome::default()
        };
        self.last_pass_ms
            .store(cfg.clock.now_ms(), Ordering::Relaxed);
        // Queue files wholly below a beginning a client moved
        // (`Store::delete_records`) go at every pass, whatever the hour or
        // the disk: nothing reads them, and unlike the CommitLog's
        // segments, which every partition shares, they are the
        // partition's own.
        for q in queues.all() {
            out.queue_files_deleted += q.delete_files_below_start()?;
        }
        let Some((mode, reason)) = plan(cfg, trigger, ratio) else {
            return Ok(out);
        };
        out.reason = Some(reason);
        let now = cfg.clock.now_ms();
        let reserved_ms = cfg
            .file_reserved_hours
            .saturating_mul(3_600_000)
            .min(i64::MAX as u64) as i64;
        let durable = self.durable_dispatched.load(Ordering::Acquire);
        let held = self.hold_position();
        let limit = segments_per_pass(cfg, trigger);
        let segments = log.segments();
        for (i, seg) in segments.iter().enumerate() {
            if i + 1 == segments.len() || seg.end() > durable {
                break; // the active segment, or not yet durably indexed
            }
            if held.is_some_and(|held| seg.end() > held) {
                // Holds records a tiered partition has not uploaded yet.
                self.held_passes.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(segment = %seg.path().display(), ?held, "retention held by tiered storage");
                break;
            }
            if mode == Mode::Expired && seg.last_store_ts_ms().saturating_add(reserved_ms) > now {
                break;
            }
            if limit.is_some_and(|limit| out.deleted_segments >= limit) {
                break;
            }
            if out.deleted_segments > 0 && cfg.pause_between_deletes_ms > 0 {
                // Between two deleted files, in every pass: unlinking a
                // large file and dropping its page cache is heavy work for
                // the file system, and produce shares it.
                cfg.clock
                    .pause(Duration::from_millis(cfg.pause_between_deletes_ms));
            }
            match log.delete_oldest_segment(seg.base()) {
                Ok(Some(freed)) => {
                    out.deleted_segments += 1;
                    out.freed_bytes += freed;
                    tracing::info!(segment = %seg.path().display(), reason, "deleted commit log segment");
                }
                Ok(None) => break,
                Err(e) => {
                    self.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(segment = %seg.path().display(), error = %e, "could not delete segment; a later pass retries");
                    break;
                }
            }
        }
        if out.deleted_segments > 0 {
            let (q, i) = cleanup_indexes_below_log_start(log, queues, index)?;
            out.queue_files_deleted += q;
            out.index_files_deleted = i;
            let keep = self
                .aborted_keep
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if let Some(keep) = keep {
                trim_aborted_below_log_start(log, queues, txn_sink, &*keep)?;
            }
            self.segments_deleted
                .fetch_add(out.deleted_segments as u64, Ordering::Relaxed);
            self.bytes_freed
                .fetch_add(out.freed_bytes, Ordering::Relaxed);
            tracing::info!(?out, "retention pass done");
        }
        Ok(out)
    }

    fn hold_position(&self) -> Option<u64> {
        let hold = self.hold.read().unwrap_or_else(|e| e.into_inner()).clone();
        hold.and_then(|h| h.min_position())
    }
}

/// Forget the aborted transactions wholly below each partition's
/// beginning, in memory and in its `aborted.txnindex`, except a topic
/// `keep` names: retention took their records, so no read can need them,
/// and a partition aborting transactions for years would otherwise grow
/// its list (and its file, which a start refuses past
/// `txn_index::file::FILE_LEN_MAX`) without end. The file first, then
/// memory, then the producer-state snapshot is owed: a crash in between
/// finds the file shorter than the snapshot counted and rebuilds it from
/// the log's markers, which holds exactly the entries kept.
pub(crate) fn trim_aborted_below_log_start(
    log: &CommitLog,
    queues: &ConsumeQueues,
    txn_sink: &TxnIndexSink,
    keep: &(dyn Fn(&str) -> bool + Send + Sync),
) -> Result<usize> {
    let mut trimmed = 0;
    for q in queues.all() {
        let tp = q.topic_partition();
        let below = q.min_offset();
        if !log
            .txns()
            .has_aborted_below(tp.topic(), tp.partition(), below)
            || keep(tp.topic())
        {
            continue;
        }
        let gone = txn_sink.trim(tp.topic(), tp.partition(), below)?;
        log.txns()
            .truncate_before(tp.topic(), tp.partition(), below);
        log.producer_state_changed();
        tracing::info!(topic = %tp.topic(), partition = tp.partition(), below, entries = gone, "forgot aborted transactions below the partition's beginning");
        trimmed += gone;
    }
    Ok(trimmed)
}

/// Move every partition's beginning up to the CommitLog's first byte and
/// delete queue and index files that only point below it.
pub(crate) fn cleanup_indexes_below_log_start(
    log: &CommitLog,
    queues: &ConsumeQueues,
    index: &IndexService,
) -> Result<(usize, usize)> {
    let min = log.min_offset();
    let mut queue_files = 0;
    for q in queues.all() {
        queue_files += q.advance_min(min)?;
    }
    let index_files = index.delete_files_below(min)?;
    Ok((queue_files, index_files))
}
