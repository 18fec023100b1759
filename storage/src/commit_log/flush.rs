//! Flushing the CommitLog and group commit.
//!
//! Under `flush: sync` appenders do not flush themselves: they raise
//! `FlushState::requested` and wait on `flush_done`; the
//! `tidelog-sync-flush` thread flushes everything committed whenever a
//! request is above `flushed`. A failed flush poisons the log: after an
//! msync error nobody knows which bytes reached the disk.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{lock, CommitLog};
use crate::error::{Result, StoreError};
use crate::fault::{self, FaultPoint};

#[derive(Default)]
pub(super) struct FlushState {
    in_progress: bool,
    /// The highest position a sync-flush waiter asked to see flushed.
    requested: u64,
}

/// Longest the sync flusher sleeps without a request (a safety net: every
/// request notifies it).
const SYNC_FLUSH_IDLE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

impl CommitLog {
    /// `flush: sync`: block until everything below `target` is on disk, for
    /// at most `timeout`. The `tidelog-sync-flush` thread
    /// ([`CommitLog::run_sync_flusher`]) does the flushing; one flush
    /// covers every waiter whose records were committed when it began
    /// (group commit). After `timeout` the answer is
    /// [`StoreError::FlushTimedOut`]: the records stay appended, and the
    /// flush, when it returns, still covers them (or poisons the log).
    pub fn wait_flushed(&self, target: u64, timeout: std::time::Duration) -> Result<()> {
        let deadline = std::time::Instant::now() + timeout;
        let mut st = lock(&self.flush_state);
        loop {
            if self.flushed.load(Ordering::Acquire) >= target {
                return Ok(());
            }
            self.check_poisoned()?;
            if st.requested < target {
                st.requested = target;
                self.flush_wanted.notify_one();
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(StoreError::FlushTimedOut {
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                });
            }
            st = self
                .flush_done
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The `tidelog-sync-flush` thread: flush whenever a waiter of
    /// [`CommitLog::wait_flushed`] asks for more than is flushed, until
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
                st = self
                    .flush_wanted
                    .wait_timeout(st, SYNC_FLUSH_IDLE_WAIT)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            drop(st);
            // A failure has poisoned the log and been logged; the waiters
            // see it.
            let _ = self.flush_all();
        }
    }

    /// Wake the sync flusher so it sees the store stopping.
    pub(crate) fn stop_sync_flusher(&self) {
        let _st = lock(&self.flush_state);
        self.flush_wanted.notify_all();
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
            let res = self.flush_range(self.flushed.load(Ordering::Acquire), upto);
            let mut st = lock(&self.flush_state);
            st.in_progress = false;
            match &res {
                Ok(()) => {
                    self.flushed.fetch_max(upto, Ordering::AcqRel);
                }
                Err(e) => self.poison(format!("flush failed: {e}")),
            }
            drop(st);
            self.flush_done.notify_all();
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
