//! The store's background threads: started at open, each named and
//! supervised, woken and joined at shutdown.
//!
//! Threads: `tidelog-dispatch`, `tidelog-flush` (flush and checkpoint,
//! `run_flusher`), `tidelog-retention` (scheduled passes),
//! `tidelog-disk` (the disk-full gate), and under `flush: sync`
//! `tidelog-sync-flush` and `tidelog-flush-timer`; `tidelog-prealloc`
//! when segments are made ahead.
//!
//! Invariants: a thread that panics is logged, counted
//! (`thread_restarts`) and restarted after 100 ms, unless the store is
//! stopping; stopping sets `stop`, wakes every sleeper (the dispatcher,
//! `run_every`'s waits, the preallocator, the sync flusher, readers
//! listening on a queue) and joins every thread before it returns.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Inner, Store};
use crate::config::FlushMode;
use crate::error::{Result, StoreError};

impl Store {
    pub(super) fn start_threads(&self) -> Result<()> {
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        threads.push(spawn_supervised(
            "tidelog-dispatch",
            &self.inner,
            |inner| inner.dispatcher.run(&inner.stop),
        )?);
        threads.push(spawn_supervised("tidelog-flush", &self.inner, |inner| {
            inner.run_flusher()
        })?);
        threads.push(spawn_supervised(
            "tidelog-retention",
            &self.inner,
            |inner| {
                inner.run_every(inner.config.retention.check_interval_ms, |i| {
                    if let Err(e) = i.retention_pass(crate::retention::Trigger::Scheduled) {
                        tracing::error!(error = %e, "retention pass failed");
                    }
                })
            },
        )?);
        threads.push(spawn_supervised("tidelog-disk", &self.inner, |inner| {
            inner.run_every(
                inner.config.retention.disk_check_every_ms(),
                Inner::check_disk,
            )
        })?);
        // Under `flush: async` too: a topic with its own flush bound
        // (`flush.messages`, `flush.ms`) asks it for flushes; idle, it
        // waits on a condition variable.
        threads.push(spawn_supervised(
            "tidelog-sync-flush",
            &self.inner,
            |inner| inner.log.run_sync_flusher(&inner.stop),
        )?);
        threads.push(spawn_supervised(
            "tidelog-flush-timer",
            &self.inner,
            |inner| inner.log.run_flush_timer(&inner.stop),
        )?);
        if self.inner.config.preallocate_next_segment {
            threads.push(spawn_supervised(
                "tidelog-prealloc",
                &self.inner,
                |inner| inner.log.run_preallocator(&inner.stop),
            )?);
        }
        Ok(())
    }

    pub(super) fn stop_threads(&self) {
        self.closed.store(true, Ordering::Release);
        self.inner.stop.store(true, Ordering::Release);
        self.inner.dispatcher.wake();
        self.inner.wake.notify(usize::MAX);
        self.inner.log.stop_preallocator();
        self.inner.log.stop_sync_flusher();
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        for t in threads.drain(..) {
            let _ = t.join();
        }
        for q in self.inner.queues.all() {
            q.wake_all();
        }
    }
}

impl Inner {
    /// Call `f` every `interval_ms` until the store stops.
    fn run_every(&self, interval_ms: u64, f: impl Fn(&Inner)) {
        let interval = Duration::from_millis(interval_ms.max(1));
        loop {
            let listener = self.wake.listen();
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            let _ = event_listener::Listener::wait_timeout(listener, interval);
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            f(self);
        }
    }

    /// The `tidelog-flush` thread: under `flush: async` it makes the log
    /// durable and writes the checkpoint every `flush_interval_ms`; under
    /// `flush: sync` the log is durable already, and it writes the
    /// checkpoint every `sync_checkpoint_interval_ms` (its syncs would
    /// otherwise slow the acknowledging msyncs twice a second).
    fn run_flusher(&self) {
        let interval_ms = match self.config.flush {
            FlushMode::Async => self.config.flush_interval_ms,
            FlushMode::Sync => self.config.sync_checkpoint_interval_ms,
        };
        self.run_every(interval_ms, |inner| {
            if let Err(e) = inner.log.flush_all().and_then(|_| inner.checkpoint()) {
                tracing::error!(error = %e, "periodic flush failed");
            }
        });
    }
}

fn spawn_supervised(
    name: &'static str,
    inner: &Arc<Inner>,
    body: fn(&Inner),
) -> Result<JoinHandle<()>> {
    let inner = Arc::clone(inner);
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || loop {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&inner)));
            if r.is_ok() || inner.stop.load(Ordering::Acquire) {
                return;
            }
            inner.thread_restarts.fetch_add(1, Ordering::Relaxed);
            tracing::error!(thread = name, "background thread panicked; restarting it");
            std::thread::sleep(Duration::from_millis(100));
        })
        .map_err(|e| StoreError::io(PathBuf::from(name), e))
}
