//! Flushing the CommitLog and group commit.
//!
//! Under `flush: sync` appenders do not flush themselves: each awaits a
//! [`FlushWait`] (`flush_wait.rs`), which raises `FlushState::requested`
//! when it registers; the `tidelog-sync-flush` thread flushes everything
//! committed whenever a request is above `flushed`, starting the next
//! flush as soon as one ends if a waiter is left (group commit, no added
//! delay), and whoever completes a flush wakes the waiters it covers. A
//! failed flush poisons the log and wakes every waiter with the error:
//! after an msync error nobody knows which bytes reached the disk.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::flush_wait::FlushWait;
use super::{lock, CommitLog};
use crate::error::{Result, StoreError};
use crate::fault::{self, FaultPoint};

#[derive(Default)]
pub(super) struct FlushState {
    in_progress: bool,
    /// The highest position a [`FlushWait`] asked to see flushed.
    pub(super) requested: u64,
    /// The sync flusher waits on `flush_wanted` (set and cleared under
    /// this lock): only then does a request notify it. While it flushes
    /// it looks at `requested` again before it waits, so a request then
    /// needs no wake-up (a condvar's notify is a syscall even with nobody
    /// waiting, and under load nearly every request arrives mid-flush).
    pub(super) flusher_waiting: bool,
    /// How many times a request woke the sleeping flusher (tests).
    pub(super) flusher_wakeups: u64,
}

/// Longest the sync flusher sleeps without a request (a safety net: every
/// request notifies it).
const SYNC_FLUSH_IDLE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

impl CommitLog {
    /// `flush: sync`: the wait for everything below `target` to be on disk,
    /// for at most `timeout` ([`FlushWait`]: await it, or
    /// [`FlushWait::wait`] to block). The `tidelog-sync-flush` thread
    /// (`CommitLog::run_sync_flusher`) does the flushing; one flush
    /// covers every waiter whose records were committed when it began
    /// (group commit). After `timeout` the answer is
    /// [`StoreError::FlushTimedOut`]: the records stay appended, and the
    /// flush, when it returns, still covers them (or poisons the log).
    pub fn flush_wait(self: &Arc<Self>, target: u64, timeout: Duration) -> FlushWait {
        FlushWait::new(Arc::clone(self), target, timeout)
    }

    /// [`flush_wait`](Self::flush_wait), blocking the calling thread.
    pub fn wait_flushed(self: &Arc<Self>, target: u64, timeout: Duration) -> Result<()> {
        self.flush_wait(target, timeout).wait()
    }

    /// A waiter of [`FlushWait`] (or the dispatcher, for records nobody
    /// awaits: acks=0) needs `target` flushed: raise the request and wake
    /// the sync flusher if it is not asked for that much yet.
    pub(crate) fn request_flush(&self, target: u64) {
        let mut st = lock(&self.flush_state);
        if st.requested < target {
            st.requested = target;
            if st.flusher_waiting {
                st.flusher_wakeups += 1;
                self.flush_wanted.notify_one();
            }
        }
    }

    /// How many [`FlushWait`]s are pending (registered and not answered).
    pub fn flush_waiters(&self) -> usize {
        self.waiters.len()
    }

    /// The `tidelog-flush-timer` thread: answers sync-flush waiters whose
    /// timeout passed, also while an fsync hangs.
    pub(crate) fn run_flush_timer(&self, stop: &AtomicBool) {
        self.waiters.run_timer(stop);
    }

    /// The store is gone: every pending and later [`FlushWait`] answers
    /// now (flushed, poisoned, or [`StoreError::Closed`]).
    pub(crate) fn close_flush_waiters(&self) {
        self.waiters.close();
    }

    /// The `tidelog-sync-flush` thread: flush whenever a [`FlushWait`] asks for more than is flushed, until
    /// `stop`. A poisoned log is not flushed again (its waiters get the
    /// poison error).
    pub(crate) fn run_sync_flusher(&self, stop: &AtomicBool) {
        loop {
            let mut st = lock(&self.flush_state);
            loop {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let wanted = st.requested > self.flushed.load(Ordering::Acquire);
                if wanted && !self.poisoned.load(Ordering::Acquire) {
                    break;
                }
                st.flusher_waiting = true;
                st = self
                    .flush_wanted
                    .wait_timeout(st, SYNC_FLUSH_IDLE_WAIT)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                st.flusher_waiting = false;
            }
            drop(st);
            // A failure has poisoned the log and been logged; the waiters
            // see it.
            let _ = self.flush_all();
        }
    }

    /// Wake the sync flusher so it sees the store stopping.
    pub(crate) fn stop_sync_flusher(&self) {
        let st = lock(&self.flush_state);
        self.flush_wanted.notify_all();
        drop(st);
        self.waiters.stop_timer();
    }

    /// Block until everything below `target` is on disk, flushing in the
    /// calling thread. Concurrent callers share one flush (group commit):
    /// the first to arrive flushes all that is committed at that moment,
    /// the others wait for it and are usually covered by it.
    fn flush_through(&self, target: u64) -> Result<()> {
        loop {
            if self.flushed.load(Ordering::Acquire) >= target {
                return Ok(());
            }
            self.check_poisoned()?;
            let mut st = lock(&self.flush_state);
            if st.in_progress {
                let _st = self.flush_done.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            st.in_progress = true;
            drop(st);
            let upto = self.committed.load(Ordering::Acquire);
            let from = self.flushed.load(Ordering::Acquire);
            let res = self.flush_range(from, upto);
            if res.is_ok() && upto > from {
                self.prealloc.zeroing.note_flush(upto - from);
            }
            let mut st = lock(&self.flush_state);
            st.in_progress = false;
            let flushed = match &res {
                Ok(()) => self.flushed.fetch_max(upto, Ordering::AcqRel).max(upto),
                Err(e) => {
                    self.poison(format!("flush failed: {e}"));
                    self.flushed.load(Ordering::Acquire)
                }
            };
            drop(st);
            self.flush_done.notify_all();
            if res.is_ok() && upto > from {
                // Nobody listening (async mode): one atomic load.
                self.flushed_event.notify(usize::MAX);
            }
            // After publishing: a waiter checks under the list's lock.
            // (A failure woke them all when it poisoned the log.)
            if res.is_ok() {
                self.waiters.wake_flushed(flushed);
            }
            res?;
        }
    }

    /// Flush everything committed so far.
    pub fn flush_all(&self) -> Result<()> {
        self.flush_through(self.committed())
    }

    fn flush_range(&self, from: u64, to: u64) -> Result<()> {
        if from >= to {
            return Ok(());
        }
        let segs = self.segments();
        for s in segs.iter().filter(|s| s.end() > from && s.base() < to) {
            let start = from.max(s.base());
            let end = to.min(s.end());
            fault::check(&self.faults, FaultPoint::CommitLogFlush)
                .map_err(|e| StoreError::io(s.path(), e))?;
            s.flush((start - s.base()) as usize, (end - start) as usize)?;
        }
        Ok(())
    }
}
