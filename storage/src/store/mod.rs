//! The store: opens the data directory, runs recovery, owns the CommitLog,
//! ConsumeQueues, IndexFiles and the background threads, and offers the
//! operations the server needs.
//!
//! Threads (all named, so `top -H` and stack dumps say who is who):
//! - `tidelog-dispatch`: builds indexes from committed records;
//! - `tidelog-flush`: flushes and writes the checkpoint every
//!   `flush_interval_ms` (async mode), writes the checkpoint every
//!   `sync_checkpoint_interval_ms` (sync mode);
//! - `tidelog-sync-flush` (sync mode): the group-commit flush that appends
//!   wait for (awaiting a `FlushWait`, no thread each);
//! - `tidelog-flush-timer` (sync mode): answers those waits after
//!   `sync_flush_timeout_ms`, also while an fsync hangs;
//! - `tidelog-prealloc`: creates the next CommitLog segment ahead of time.
//!
//! A background thread that panics is logged, counted and restarted.
//!
//! Files, one role each: `open.rs` (opening: recovery, and what a lost
//! file costs), `append.rs` (the append entry points and the gates that
//! refuse them), `read.rs` (reads, offsets and lookups), `delete.rs`
//! (deleting topics and records, retention on demand), `disk.rs` (the
//! disk-full gate and its reserve), `threads.rs` (the background threads:
//! started, supervised, stopped), `stats.rs` (the stats view), `lock.rs`
//! (the data dir lock). This file holds the [`Store`], the state its
//! roles share (`Inner`), the open entry points, the checkpoint and
//! shutdown. The checkpoint is written by `checkpoint::CheckpointWriter`,
//! a retention pass is `retention::pass`'s.
//!
//! Invariants: everything the background threads touch is in `Inner`
//! (shared through an `Arc`), so a thread never outlives the store: drop
//! and shutdown stop and join them all first. Dropping a store without
//! [`Store::shutdown`] leaves `abort` behind, so the next open recovers.
//! Locks the store's parts hold: the checkpoint writer's (a checkpoint,
//! while the parts it flushes take their own), a retention pass's
//! `pass_lock` (while the CommitLog, queues and IndexFiles take theirs)
//! and `producer_ids`; none of the three is taken while another is held.

mod append;
mod delete;
mod disk;
mod lock;
mod open;
mod read;
mod stats;
mod threads;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::checkpoint::CheckpointWriter;
use crate::commit_log::CommitLog;
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueues;
use crate::dispatch::{DispatchSink, Dispatcher};
use crate::error::{IoContext, Result};
use crate::fault::FaultHandle;
use crate::fs_util;
use crate::index_file::IndexService;
use crate::producer_state::ids::ProducerIds;
use crate::retention::pass::RetentionState;

pub use self::append::{LagAdmitted, ProducerAppend};
pub use self::disk::disk_reserve_bytes;
pub use self::lock::DataDirLock;
pub use self::open::RecoveryReport;
pub use self::read::ReadResult;
pub use self::stats::StoreStats;
pub use crate::layout::{ABORT_FILE, COMMITLOG_DIR, CONSUMEQUEUE_DIR, INDEX_DIR, LOCK_FILE};

/// The state the store's roles and background threads share (each
/// thread holds an `Arc` of it).
struct Inner {
    config: StoreConfig,
    log: Arc<CommitLog>,
    queues: Arc<ConsumeQueues>,
    index: Arc<IndexService>,
    dispatcher: Dispatcher,
    stop: AtomicBool,
    thread_restarts: AtomicU64,
    /// Writes the checkpoint and the files it vouches for (flush thread,
    /// shutdown, open).
    checkpoints: CheckpointWriter,
    /// Hands out producer ids (InitProducerId), durably.
    producer_ids: Mutex<ProducerIds>,
    /// Wakes sleeping background threads at shutdown.
    wake: event_listener::Event,
    retention: RetentionState,
    /// Free space the disk-full gate keeps for the files the store must
    /// still create ([`disk_reserve_bytes`]).
    disk_reserve_bytes: u64,
    /// The aborted-transaction index files' sink (also among the
    /// dispatcher's), which retention trims.
    txn_sink: Arc<crate::txn_index::file::TxnIndexSink>,
}

pub struct Store {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    recovery: RecoveryReport,
    closed: AtomicBool,
    /// A cluster's replica (issue 39): appends are refused, only the
    /// master's copy is taken ([`Store::set_replica`]).
    replica: AtomicBool,
    // Held for the store's lifetime: flock on `<data_dir>/lock`.
    _lock: DataDirLock,
}

impl Store {
    /// Open (or create) the store in `config.data_dir`, recovering as needed.
    pub fn open(config: StoreConfig) -> Result<Store> {
        Self::open_with_sinks(config, Vec::new())
    }

    /// Open with extra dispatch sinks (e.g. compacted logs), which receive
    /// every record after the built-in ConsumeQueue and IndexFile sinks.
    pub fn open_with_sinks(
        config: StoreConfig,
        extra_sinks: Vec<Arc<dyn DispatchSink>>,
    ) -> Result<Store> {
        let lock = DataDirLock::acquire(&config.data_dir)?;
        Self::open_locked(config, extra_sinks, lock)
    }

    /// [`Store::open_with_sinks`] under a lock of `config.data_dir` its
    /// caller took before (to open files of its own in the data dir, such
    /// as the compacted logs, before the store recovers); the store holds it
    /// from then on.
    pub fn open_locked(
        config: StoreConfig,
        extra_sinks: Vec<Arc<dyn DispatchSink>>,
        lock: DataDirLock,
    ) -> Result<Store> {
        Self::open_inner(config, extra_sinks, lock, FaultHandle::default())
    }

    /// [`Store::open`] with a fault plan its parts check at each
    /// [`FaultPoint`](crate::fault::FaultPoint) (tests only: the
    /// `failpoints` feature).
    #[cfg(feature = "failpoints")]
    pub fn open_with_faults(
        config: StoreConfig,
        faults: Arc<crate::fault::Faults>,
    ) -> Result<Store> {
        let lock = DataDirLock::acquire(&config.data_dir)?;
        Self::open_locked_with_faults(config, Vec::new(), lock, faults)
    }

    /// [`Store::open_locked`] with a fault plan (tests only: the
    /// `failpoints` feature).
    #[cfg(feature = "failpoints")]
    pub fn open_locked_with_faults(
        config: StoreConfig,
        extra_sinks: Vec<Arc<dyn DispatchSink>>,
        lock: DataDirLock,
        faults: Arc<crate::fault::Faults>,
    ) -> Result<Store> {
        Self::open_inner(config, extra_sinks, lock, FaultHandle::new(faults))
    }

    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    pub fn data_dir(&self) -> &Path {
        &self.inner.config.data_dir
    }

    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    pub fn commit_log(&self) -> &Arc<CommitLog> {
        &self.inner.log
    }

    pub fn consume_queues(&self) -> &Arc<ConsumeQueues> {
        &self.inner.queues
    }

    /// Flush everything and write a checkpoint now.
    pub fn checkpoint(&self) -> Result<()> {
        self.inner.log.flush_all()?;
        self.inner.checkpoint()
    }

    /// Stop the threads, index everything, flush, write the checkpoint and
    /// remove the `abort` marker, so the next open is quick.
    pub fn shutdown(self) -> Result<()> {
        self.stop_threads();
        let inner = &self.inner;
        // Flushed before the last dispatch round: under `flush: sync` it
        // dispatches only what is flushed.
        inner.log.flush_all()?;
        inner.dispatcher.catch_up(false)?;
        inner.checkpoint()?;
        let abort = inner.config.data_dir.join(ABORT_FILE);
        std::fs::remove_file(&abort).at(&abort)?;
        fs_util::fsync_dir(&inner.config.data_dir)?;
        tracing::info!(end = inner.log.committed(), "store shut down cleanly");
        Ok(())
    }

    /// Stop the threads and drop everything without flushing, checkpointing
    /// or removing `abort`: what a crash leaves behind, minus lost page
    /// cache. For crash tests.
    #[doc(hidden)]
    pub fn close_uncleanly(self) {
        self.stop_threads();
    }
}

/// A store is its own handle: code generic over what holds a store (the
/// cluster's replication over a broker, or a bare store in tests) takes
/// `AsRef<Store>`.
impl AsRef<Store> for Store {
    fn as_ref(&self) -> &Store {
        self
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Threads hold `Arc<Inner>`; stop them so nothing outlives the store.
        // Dropping without `shutdown` counts as unclean: `abort` stays.
        self.stop_threads();
        // After `shutdown`'s last flush (which answered the waiters it
        // covered): a waiter left has no flusher and no timer any more.
        self.inner.log.close_flush_waiters();
    }
}

impl Inner {
    /// Write the checkpoint: flush the indexes first, so that everything
    /// below the recorded dispatched position is durable in them
    /// ([`CheckpointWriter::write`]).
    fn checkpoint(&self) -> Result<()> {
        self.checkpoints.write(
            &self.config.data_dir,
            &self.log,
            &self.dispatcher,
            &self.queues,
            &self.index,
            &self.retention.durable_dispatched,
        )
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
thread_local! {
    /// Runs once, in `Store::delete_topic` between the writer's snapshot and
    /// the queues' deletion: lets a test append exactly there.
    pub(crate) static BEFORE_QUEUES_DELETE: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        std::cell::RefCell::new(None);
}

#[cfg(test)]
fn run_before_queues_delete() {
    if let Some(hook) = BEFORE_QUEUES_DELETE.with(|h| h.borrow_mut().take()) {
        hook();
    }
}
