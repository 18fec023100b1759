//! The CommitLog: one append-only log shared by every topic and partition.
//!
//! Bytes `[min_offset, committed)` are whole, valid entries (each the
//! records of one partition from one append, see [`mod@format`]) and
//! end-of-segment markers; everything a reader sees lies below
//! [`CommitLog::visible_end`] (`committed`, or under `flush: sync` the
//! flushed position). One writer at a time (the `writer` mutex) assigns queue and
//! physical offsets, writes entries into the segment, then publishes the
//! new `committed` position.
//!
//! Lock order: `writer` → `segments` → `flush_state` → `poison_reason`, and
//! the flush waiters' list → `poison_reason` (the list and `flush_state`
//! are never held together), `writer` → the preallocator's zero claim
//! (`prealloc.rs`: an append waits for a zero fill it reached), and
//! `writer` → the preallocator's `state` (a roll takes the segment made
//! ahead; `take` never waits there), and the preallocator's `state` →
//! `segments` (read: an append waiting for a segment, with `writer`
//! released, looks whether another append rolled already). No lock is held while waiting for an
//! fsync except `flush_state`'s condition variables.
//!
//! No thread waits for a segment while it holds `writer`: an append whose
//! roll finds the next segment still being made releases `writer`, waits
//! on the preallocator's condition variable (at most two seconds) and
//! plans the batch again; one whose creation is failing (a full disk, no
//! file descriptors) is refused at once, [`StoreError::DiskFull`] or
//! [`StoreError::SegmentUnavailable`], with nothing written and the log
//! not poisoned. The preallocator retries with a capped exponential
//! back-off, so flush, retention (which takes `writer` to read the write
//! position) and shutdown never queue behind a retry loop.
//!
//! What poisons the log: a failed write of an append's bytes (answered
//! [`StoreError::Poisoned`] at once, as every later append is) or a
//! failed flush. A failed segment creation does not.
//!
//! Flushing under `flush: sync`: appenders do not flush themselves. An
//! append returns the position it needs durable and the caller awaits a
//! [`FlushWait`] for at most `sync_flush_timeout_ms`: a future with a
//! `Waker` in a list, no thread per waiter. The `tidelog-sync-flush`
//! thread flushes everything committed whenever a request is above
//! `flushed` (RocketMQ's GroupCommitService) and wakes the waiters the
//! flush covers; the `tidelog-flush-timer` thread wakes those whose
//! timeout passed. So a hung fsync holds up that thread only, and every
//! appender gets its answer in time: [`StoreError::FlushTimedOut`] if the
//! flush has not returned.
//!
//! Files, one role each: `writer.rs` (validate, plan, encode and write an
//! append; the next queue offsets), `reader.rs` (reads and the
//! [`ReadCache`]), `flush.rs` (flushing and group commit), `prealloc.rs`
//! (the `tidelog-prealloc` thread), `format.rs` (the entry layout),
//! `record.rs` (records in and out), `segment.rs` (one mapped file). This
//! file holds the [`CommitLog`] type, its construction and the state the
//! roles share (segment list, committed position, poisoning).

mod copy;
mod flush;
mod flush_wait;
pub mod format;
mod prealloc;
mod reader;
pub mod record;
pub(crate) mod replay;
pub mod segment;
mod writer;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use event_listener::Event;

pub use self::copy::{Copied, CopyChunk};
use self::flush::FlushState;
use self::flush_wait::Waiters;
pub use self::flush_wait::{FlushWait, Unflushed};
pub use self::format::Header;
use self::prealloc::Preallocator;
pub(crate) use self::reader::decode_for_recovery;
#[cfg(test)]
pub(crate) use self::reader::BEFORE_SEGMENT_LOOKUP;
pub use self::reader::{Next, ReadCache};
pub use self::record::{AppendRecord, Appended, Entry, ReadSink, StoredRecord};
use self::segment::Segment;
use self::writer::WriterState;
pub use self::writer::{LogAppend, MarkerSpec, NextOffsets, ENTRY_BYTES_TARGET};
use crate::config::StoreConfig;
use crate::error::{Result, StoreError};

pub struct CommitLog {
    dir: PathBuf,
    segment_bytes: u64,
    max_message_bytes: u64,
    preallocate: bool,
    /// `flush: sync` with preallocation: the preallocator writes zeros
    /// ahead of the writer instead of only warming pages (`prealloc.rs`).
    zero_fill_ahead: bool,
    /// `flush: sync`: a record becomes visible (dispatched, fetchable)
    /// only once it is flushed ([`CommitLog::visible_end`]).
    sync_flush: bool,
    faults: crate::fault::FaultHandle,
    segments: RwLock<Vec<Arc<Segment>>>,
    writer: Mutex<WriterState>,
    /// Each partition's transactions: moved by the writer under its lock,
    /// read by fetches (`crate::txn_index`).
    txns: Arc<crate::txn_index::TxnTable>,
    committed: AtomicU64,
    flushed: AtomicU64,
    /// A cluster's high watermark: readers see nothing past it
    /// ([`CommitLog::visible_end`]); `u64::MAX` on a single node.
    high_watermark: AtomicU64,
    poisoned: AtomicBool,
    poison_reason: Mutex<String>,
    flush_state: Mutex<FlushState>,
    flush_done: Condvar,
    /// Wakes the sync flusher: a new request, or the store stops.
    flush_wanted: Condvar,
    /// The pending [`FlushWait`]s.
    waiters: Waiters,
    /// Notified after every append, for the dispatcher.
    appended: Event,
    /// Notified after every flush that moved `flushed`, for the dispatcher
    /// under `flush: sync`.
    flushed_event: Event,
    prealloc: Preallocator,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of our locks leaves plain data behind (no
    // half-applied invariants: every update is a single assignment), so
    // continuing with the inner value is sound.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl CommitLog {
    /// Build a log over recovered `segments` (sorted, contiguous) whose valid
    /// bytes end at `end`. Recovery has already checked and truncated them.
    pub(crate) fn new(
        config: &StoreConfig,
        dir: PathBuf,
        segments: Vec<Arc<Segment>>,
        end: u64,
        next_offsets: NextOffsets,
        faults: crate::fault::FaultHandle,
    ) -> Arc<CommitLog> {
        let log = Arc::new(CommitLog {
            dir,
            segment_bytes: config.commitlog_segment_bytes,
            max_message_bytes: config.record_payload_max(),
            preallocate: config.preallocate_next_segment,
            zero_fill_ahead: config.preallocate_next_segment
                && config.flush == crate::config::FlushMode::Sync,
            sync_flush: config.flush == crate::config::FlushMode::Sync,
            faults,
            segments: RwLock::new(segments),
            writer: Mutex::new(WriterState {
                write_pos: end,
                next_offsets,
                closed_topics: HashSet::default(),
                scratch: Vec::new(),
                producers: Default::default(),
                producers_version: 0,
            }),
            txns: Arc::default(),
            committed: AtomicU64::new(end),
            flushed: AtomicU64::new(end),
            high_watermark: AtomicU64::new(u64::MAX),
            poisoned: AtomicBool::new(false),
            poison_reason: Mutex::new(String::new()),
            flush_state: Mutex::new(FlushState::default()),
            flush_done: Condvar::new(),
            flush_wanted: Condvar::new(),
            waiters: Waiters::default(),
            appended: Event::new(),
            flushed_event: Event::new(),
            prealloc: Preallocator::default(),
        });
        if log.preallocate {
            // The warm-up window starts at the write position: after a
            // restart the active segment's unwritten pages are cold too.
            log.prealloc.warmed_to.store(end, Ordering::Release);
            // The next roll is at the end of the segment being written (at
            // `end` itself if none holds it: an empty log, or one that ends
            // at a segment's end). Asking for `end` inside the active
            // segment would have the thread "make" a segment the log has.
            let next = log.segment_containing(end).map_or(end, |s| s.end());
            log.request_next_segment(next);
        }
        log
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One past the last committed byte.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// The preallocator has warmed the pages below this (or the writer has
    /// written them); the write position without preallocation.
    pub fn warmed_to(&self) -> u64 {
        self.prealloc
            .warmed_to
            .load(Ordering::Acquire)
            .max(self.committed())
    }

    /// Everything below this is on disk.
    pub fn flushed(&self) -> u64 {
        self.flushed.load(Ordering::Acquire)
    }

    /// One past the last byte readers may see: under `flush: sync` the
    /// flushed position, else the committed one. Under `sync` a record is
    /// acknowledged only once it is flushed, and no reader may see it
    /// before: a record a consumer read would otherwise be lost by a power
    /// loss before its flush, and its offset handed out again to another
    /// (Kafka's consumers see only records below the high watermark, which
    /// a single broker's acks=all moves with the same durable step here).
    ///
    /// In a cluster, never past the high watermark either
    /// ([`CommitLog::set_high_watermark`]): what every member of the
    /// in-sync set holds, so no reader on any node sees a record a
    /// failover could take back.
    pub fn visible_end(&self) -> u64 {
        let local = if self.sync_flush {
            self.flushed()
        } else {
            self.committed()
        };
        local.min(self.high_watermark.load(Ordering::Acquire))
    }

    /// Cap what readers see at `high_watermark` (a cluster's: the
    /// position every member of the in-sync set confirmed), and wake the
    /// dispatcher to index up to it. `u64::MAX`, the value a log starts
    /// with, is no cap: a single node. A watermark never goes down while
    /// the process runs (a lower value is ignored): what a reader saw
    /// stays seen.
    pub fn set_high_watermark(&self, high_watermark: u64) {
        let before = self
            .high_watermark
            .fetch_max(high_watermark, Ordering::AcqRel);
        if high_watermark > before {
            self.appended.notify(usize::MAX);
            self.flushed_event.notify(usize::MAX);
        }
    }

    /// Start capping at `high_watermark`: a node joining a cluster, once,
    /// before it serves (the cap a log starts with is none, which
    /// [`CommitLog::set_high_watermark`] never lowers). Unlike that, this
    /// may lower the cap; what was dispatched past it stays dispatched.
    pub fn cap_visible_at(&self, high_watermark: u64) {
        self.high_watermark.store(high_watermark, Ordering::Release);
        self.appended.notify(usize::MAX);
        self.flushed_event.notify(usize::MAX);
    }

    /// The cap [`CommitLog::set_high_watermark`] set (`u64::MAX`: none).
    pub fn high_watermark(&self) -> u64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// `flush: sync`: readers see only flushed records.
    pub fn is_sync_flush(&self) -> bool {
        self.sync_flush
    }

    /// First byte still in the log (the oldest segment's base).
    pub fn min_offset(&self) -> u64 {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        segs.first().map_or_else(|| self.committed(), |s| s.base())
    }

    pub fn segment_count(&self) -> usize {
        self.segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// A snapshot of the segment list, oldest first.
    pub fn segments(&self) -> Vec<Arc<Segment>> {
        self.segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Retention: delete the oldest segment if it is still `base` and is
    /// not the one being written. Its file is unlinked now; its mapping goes
    /// away when the last reader drops it. Returns the bytes freed.
    pub fn delete_oldest_segment(&self, base: u64) -> Result<Option<u64>> {
        let write_pos = lock(&self.writer).write_pos;
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        match segs.first() {
            Some(s) if s.base() == base && s.end() <= write_pos && segs.len() > 1 => {}
            _ => return Ok(None),
        }
        let seg = segs.remove(0);
        drop(segs);
        // Recorded durably before the unlink, so recovery tells a segment
        // retention deleted from one that was lost (`log_head`).
        let recorded = match self.dir.parent() {
            Some(data_dir) => crate::log_head::LogHead::new(seg.end()).store(data_dir),
            None => Err(StoreError::invalid(format!(
                "{} has no parent directory for log-head",
                self.dir.display()
            ))),
        };
        if let Err(e) = recorded {
            self.segments
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(0, Arc::clone(&seg));
            return Err(e);
        }
        if let Err(e) = std::fs::remove_file(seg.path()) {
            // Put it back: nothing was deleted, a later pass retries.
            self.segments
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(0, Arc::clone(&seg));
            return Err(StoreError::io(seg.path(), e));
        }
        crate::fs_util::fsync_dir(&self.dir)?;
        Ok(Some(seg.size()))
    }

    /// The event the dispatcher listens on.
    pub(crate) fn appended_event(&self) -> &Event {
        &self.appended
    }

    /// Notified whenever the flushed position moves (the dispatcher under
    /// `flush: sync` waits on it).
    pub(crate) fn flushed_event(&self) -> &Event {
        &self.flushed_event
    }

    /// `Some(Poisoned)` once a failed write or flush made the log refuse
    /// appends (until a restart runs recovery).
    pub fn poisoned_error(&self) -> Option<StoreError> {
        self.check_poisoned().err()
    }

    fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(StoreError::Poisoned {
                reason: lock(&self.poison_reason).clone(),
            });
        }
        Ok(())
    }

    fn poison(&self, reason: String) {
        tracing::error!(%reason, "commit log refuses further appends");
        *lock(&self.poison_reason) = reason;
        self.poisoned.store(true, Ordering::Release);
        // Every flush waiter answers the poison now, not at its timeout.
        self.waiters.wake_all();
    }

    fn segment_containing(&self, pos: u64) -> Option<Arc<Segment>> {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        find_segment(&segs, pos).cloned()
    }
}

/// The segment containing `pos` in a sorted list.
pub(crate) fn find_segment(segs: &[Arc<Segment>], pos: u64) -> Option<&Arc<Segment>> {
    let idx = segs.partition_point(|s| s.base() <= pos);
    let s = segs.get(idx.checked_sub(1)?)?;
    s.contains(pos).then_some(s)
}
