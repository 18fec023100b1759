//! The stats view: one point-in-time [`StoreStats`] of the CommitLog,
//! dispatch, the indexes, the disk-full gate and retention, for
//! `/status` and the metrics.
//!
//! Invariant: reading the stats takes no lock a write path holds for
//! long (atomics and the parts' own short reads), so a scrape never
//! waits behind an append or an fsync.

use std::sync::atomic::Ordering;

use super::Store;
use crate::error::StoreError;

/// A point-in-time view for stats and metrics.
#[derive(Clone, Debug, Default)]
pub struct StoreStats {
    pub commitlog_segments: usize,
    pub commitlog_min_offset: u64,
    pub commitlog_max_offset: u64,
    pub commitlog_flushed_offset: u64,
    /// Pages of the CommitLog below this are warm: written, or touched
    /// ahead of the writer by the preallocator (`preallocate_next_segment`).
    pub commitlog_warmed_offset: u64,
    pub dispatched_offset: u64,
    pub dispatch_lag_bytes: u64,
    pub dispatch_errors: u64,
    /// Dispatch has failed for `dispatch_stall_ms`: produce is refused.
    pub dispatch_stalled: bool,
    /// How many times dispatch became stalled.
    pub dispatch_stalls: u64,
    /// Appends that waited because dispatch was more than
    /// [`DISPATCH_LAG_MAX_BYTES`](crate::DISPATCH_LAG_MAX_BYTES) behind (back-pressure of a slow sink).
    pub dispatch_lag_waits: u64,
    /// Appends awaiting the sync flush's fsync now (`flush: sync`).
    pub sync_flush_waiters: usize,
    pub index_files: usize,
    pub partitions: usize,
    /// ConsumeQueue files of every partition.
    pub consume_queue_files: usize,
    pub thread_restarts: u64,
    pub disk_used_ratio: f64,
    pub disk_full: bool,
    /// Bytes still available on the data directory's file system at the
    /// last check (`None`: not known).
    pub disk_available_bytes: Option<u64>,
    /// Free space the disk-full gate keeps for the files the store must
    /// still create: writes stop when less is available.
    pub disk_reserve_bytes: u64,
    /// CommitLog segment creations that failed (full disk, no file
    /// descriptors); the preallocator backs off between them.
    pub segment_create_failures: u64,
    /// Why the store refuses writes now (`None`: it accepts them): the
    /// message produce gets. What `/status/ready` reports.
    pub writes_refused: Option<String>,
    pub retention_segments_deleted: u64,
    pub retention_bytes_freed: u64,
    pub retention_failures: u64,
    /// Wall-clock time of the last retention pass (ms; 0 = none yet).
    pub retention_last_pass_ms: i64,
    /// Retention passes stopped by the retention hold (tiered storage's
    /// records not yet uploaded).
    pub retention_held_passes: u64,
}

impl Store {
    pub fn stats(&self) -> StoreStats {
        let log = &self.inner.log;
        let committed = log.committed();
        let dispatched = self.inner.dispatcher.dispatched();
        let queues = self.inner.queues.all();
        StoreStats {
            commitlog_segments: log.segment_count(),
            commitlog_min_offset: log.min_offset(),
            commitlog_max_offset: committed,
            commitlog_flushed_offset: log.flushed(),
            commitlog_warmed_offset: log.warmed_to(),
            dispatched_offset: dispatched,
            dispatch_lag_bytes: log.visible_end().saturating_sub(dispatched),
            dispatch_errors: self.inner.dispatcher.error_count(),
            dispatch_stalled: matches!(
                self.inner.dispatcher.refusal(),
                Some(StoreError::DispatchStalled { .. })
            ),
            dispatch_stalls: self.inner.dispatcher.stall_count(),
            dispatch_lag_waits: self.inner.dispatcher.lag_wait_count(),
            sync_flush_waiters: log.flush_waiters(),
            index_files: self.inner.index.file_count(),
            partitions: queues.len(),
            consume_queue_files: queues.iter().map(|q| q.file_count()).sum(),
            thread_restarts: self.inner.thread_restarts.load(Ordering::Relaxed),
            disk_used_ratio: f64::from_bits(
                self.inner
                    .retention
                    .disk_used_ratio_bits
                    .load(Ordering::Acquire),
            ),
            disk_full: self.inner.retention.disk_full.load(Ordering::Acquire),
            disk_available_bytes: Some(
                self.inner
                    .retention
                    .disk_available_bytes
                    .load(Ordering::Acquire),
            )
            .filter(|&b| b != u64::MAX),
            disk_reserve_bytes: self.inner.disk_reserve_bytes,
            segment_create_failures: log.segment_create_failures(),
            writes_refused: self.write_refusal().map(|e| e.to_string()),
            retention_segments_deleted: self
                .inner
                .retention
                .segments_deleted
                .load(Ordering::Relaxed),
            retention_bytes_freed: self.inner.retention.bytes_freed.load(Ordering::Relaxed),
            retention_failures: self.inner.retention.failures.load(Ordering::Relaxed),
            retention_last_pass_ms: self.inner.retention.last_pass_ms.load(Ordering::Relaxed),
            retention_held_passes: self.inner.retention.held_passes.load(Ordering::Relaxed),
        }
    }
}
