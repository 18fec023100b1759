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

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use event_listener::EventListener;

use crate::checkpoint::Checkpoint;
use crate::commit_log::{
    AppendRecord, Appended, CommitLog, LogAppend, NextOffsets, ReadSink, StoredRecord, Unflushed,
};
use crate::config::{FlushMode, StoreConfig};
use crate::consume_queue::ends::QueueEnds;
use crate::consume_queue::{ConsumeQueues, DeletedRecords, LostQueue};
use crate::dispatch::{
    keep_going, ConsumeQueueSink, DispatchSink, Dispatcher, IndexSink, DISPATCH_LAG_MAX_BYTES,
};
use crate::error::{CorruptionKind, IoContext, QueuePosition, Result, StoreError};
use crate::fault::FaultHandle;
use crate::fs_util;
use crate::index_file::IndexService;
use crate::producer_state::ids::ProducerIds;
use crate::producer_state::snapshot::Loaded;
use crate::producer_state::{self, BatchMeta, ProducerBatch, ProducerStates};
use crate::recovery;
use crate::types::{now_ms, validate_topic_name, PhysicalOffset, QueueOffset, TopicPartition};

pub const LOCK_FILE: &str = "lock";
pub const ABORT_FILE: &str = "abort";
pub const COMMITLOG_DIR: &str = "commitlog";
pub const CONSUMEQUEUE_DIR: &str = "consumequeue";
pub const INDEX_DIR: &str = "index";
/// A read reserves room for at most this many records up front (~100 KiB;
/// more grow the vector as usual): a fetch at the API's default
/// `max_records` (500) never reallocates, and one whose `max_bytes` stops
/// it after a few records wastes little.
const READ_RESERVE_MAX: usize = 1000;

/// Records read from one partition.
#[derive(Debug, Default)]
pub struct ReadResult {
    pub records: Vec<StoredRecord>,
    /// Where the next read should start (last offset + 1, or the request's
    /// offset moved up to the partition's beginning).
    pub next_offset: QueueOffset,
}

/// What recovery did at open.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    pub clean_shutdown: bool,
    pub scanned_from: u64,
    pub end: u64,
    pub records_scanned: u64,
    pub truncated_bytes: u64,
    pub records_replayed: u64,
    pub elapsed: Duration,
}

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
    /// [`DISPATCH_LAG_MAX_BYTES`] behind (back-pressure of a slow sink).
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

/// Counters and flags of retention, shared by its threads and stats.
#[derive(Default)]
struct RetentionState {
    /// Serialises passes (scheduled and manual).
    pass_lock: Mutex<()>,
    /// Everything below this is durably in every index and sink: the
    /// checkpoint's dispatched position. Segments ending above it stay.
    durable_dispatched: AtomicU64,
    disk_full: AtomicBool,
    /// The flag is up because free space fell below the store's reserve
    /// (not the ratio): what the refusal says.
    full_by_reserve: AtomicBool,
    disk_used_ratio_bits: AtomicU64,
    /// The last measured available bytes (`u64::MAX`: unknown).
    disk_available_bytes: AtomicU64,
    segments_deleted: AtomicU64,
    bytes_freed: AtomicU64,
    failures: AtomicU64,
    last_pass_ms: AtomicI64,
    /// Segments ending above its position stay (tiered storage's records
    /// not yet uploaded); see `retention.rs`.
    hold: std::sync::RwLock<Option<Arc<dyn crate::retention::RetentionHold>>>,
    /// Passes that stopped at the hold while they would have deleted more.
    held_passes: AtomicU64,
}

struct Inner {
    config: StoreConfig,
    log: Arc<CommitLog>,
    queues: Arc<ConsumeQueues>,
    index: Arc<IndexService>,
    dispatcher: Dispatcher,
    stop: AtomicBool,
    thread_restarts: AtomicU64,
    /// Serialises checkpoint writers (flush thread and shutdown).
    checkpoint_lock: Mutex<()>,
    /// The producer-state version the last snapshot written holds.
    producer_snapshot_version: AtomicU64,
    /// Hands out producer ids (InitProducerId), durably.
    producer_ids: Mutex<ProducerIds>,
    /// Wakes sleeping background threads at shutdown.
    wake: event_listener::Event,
    retention: RetentionState,
    /// The `queue-ends` table last written (none yet in this run).
    queue_ends_stored: Mutex<Option<QueueEnds>>,
    /// The `index-end` last written (none yet in this run).
    index_end_stored: Mutex<Option<u64>>,
    /// Free space the disk-full gate keeps for the files the store must
    /// still create ([`disk_reserve_bytes`]).
    disk_reserve_bytes: u64,
}

/// Proof that [`Store::lag_admitted`] was awaited: what
/// [`Store::append_unflushed_admitted`] takes instead of waiting for the
/// dispatcher itself. One append per proof.
#[derive(Debug)]
pub struct LagAdmitted(());

/// What [`Store::append_as`] did.
#[derive(Debug)]
pub enum ProducerAppend {
    /// Written: where each record landed, in the batch's order.
    Written(Vec<Appended>),
    /// The producer's batch was written before, at these offsets; nothing
    /// was written now.
    Duplicate(BatchMeta),
}

pub struct Store {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    recovery: RecoveryReport,
    closed: AtomicBool,
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

    fn open_inner(
        config: StoreConfig,
        extra_sinks: Vec<Arc<dyn DispatchSink>>,
        lock: DataDirLock,
        faults: FaultHandle,
    ) -> Result<Store> {
        let began = Instant::now();
        config.validate()?;
        let record_limit = config.record_payload_max();
        if record_limit < config.max_message_bytes {
            tracing::warn!(
                max_message_bytes = config.max_message_bytes,
                commitlog_segment_bytes = config.commitlog_segment_bytes,
                record_limit,
                "store.max_message_bytes does not fit in one CommitLog segment; records are limited to {record_limit} bytes"
            );
        }
        let dir = config.data_dir.clone();
        if lock.dir != dir {
            return Err(StoreError::inconsistent(
                &dir,
                0,
                format!("opened under the lock of {}", lock.dir.display()),
            ));
        }
        let abort_path = dir.join(ABORT_FILE);
        let checkpoint = Checkpoint::load(&dir)?;
        let aborted = abort_path.exists();
        let clean = !aborted && checkpoint.is_some();
        std::fs::write(&abort_path, b"").at(&abort_path)?;
        fs_util::fsync_dir(&dir)?;
        // Past this, no durable byte is known to the checkpoint (recovery).
        let synced_below = checkpoint.as_ref().map(|c| c.commitlog_flushed);
        let checkpoint = checkpoint.unwrap_or_default();

        // Indexes and sinks first: recovery feeds them while it verifies.
        let queues = Arc::new(ConsumeQueues::load(
            &dir.join(CONSUMEQUEUE_DIR),
            &dir.join(crate::consume_queue::deleted::FILE_NAME),
            &dir.join(crate::consume_queue::log_start::FILE_NAME),
            config.consume_queue_units_per_file,
        )?);
        let index = Arc::new(IndexService::load(
            &dir.join(INDEX_DIR),
            config.index_slots,
            config.index_entries,
        )?);
        let queue_sink = Arc::new(ConsumeQueueSink::new(Arc::clone(&queues)));
        let mut sinks: Vec<Arc<dyn DispatchSink>> = vec![
            Arc::clone(&queue_sink) as Arc<dyn DispatchSink>,
            Arc::new(IndexSink {
                index: Arc::clone(&index),
                key_owners: extra_sinks.clone(),
            }),
        ];
        sinks.extend(extra_sinks);

        // Everything past the checkpoint's dispatched position is re-derived
        // from the log: sinks forget it now, and the recovery scan hands
        // them each record it verifies, so the log is read once, not twice
        // (scan, then replay). A sink that lost more (a damaged index file)
        // moves the start back for everyone, keeping dispatch in order.
        let cl_dir = dir.join(COMMITLOG_DIR);
        let segments = recovery::load_segments(&cl_dir)?;
        recovery::check_format_version(&segments)?;
        // A head that is gone without retention having deleted it is
        // damage, not retention (`log_head`).
        let segments = crate::log_head::check(
            &dir,
            segments,
            synced_below.unwrap_or(0),
            config.recovery_mode,
        )?;
        // A data dir with no log, no checkpoint and no `abort` is new (or
        // empty): nothing was lost, and saying otherwise would only worry.
        let fresh = !aborted && segments.is_empty();
        // Worded by the cause: an unclean exit leaves `abort` behind; a
        // clean one whose checkpoint is missing or damaged (`Checkpoint::load`
        // says which file and why) only costs a full scan.
        if aborted {
            tracing::warn!(data_dir = %dir.display(), "previous run did not shut down cleanly; running full recovery");
        } else if !clean && !fresh {
            let why = if dir.join(crate::checkpoint::FILE_NAME).exists() {
                "damaged"
            } else {
                "missing"
            };
            tracing::warn!(data_dir = %dir.display(), "no usable checkpoint ({why}) after a clean shutdown; running full recovery");
        }
        let log_min = segments.first().map_or(0, |s| s.base());
        // Never past what reached the disk: after a power loss the bytes
        // past `commitlog_flushed` may be zeros, and the indexes must not
        // keep pointing at them (a checkpoint of an older tidelog could
        // record `dispatched` above `commitlog_flushed`).
        let mut start = checkpoint
            .dispatched
            .min(checkpoint.commitlog_flushed)
            .max(log_min);
        // Queues that end below what the last checkpoint recorded lost a
        // file (or its tail): checked before anything is truncated, and
        // rebuilt by re-dispatching from where each surviving queue ends.
        let lost_queues = find_lost_queues(&dir, &queues);
        let lost_index = find_lost_index(&dir, &index);
        let lost_from = lost_queues
            .iter()
            .map(|l| l.replay_from)
            .chain(lost_index.map(|l| l.had))
            .min();
        for l in lost_queues.iter().filter(|l| l.recorded > l.had) {
            tracing::warn!(
                tp = %l.tp,
                file = %l.path.display(),
                queue_end = l.had,
                recorded_end = l.recorded,
                "consume queue file missing or shorter than the last checkpoint recorded; rebuilding its units from the commit log"
            );
        }
        let wanted = truncate_all(&sinks, start)?
            .min(lost_from.unwrap_or(u64::MAX))
            .max(log_min);
        if wanted < start {
            // Recovery scans whole entries: start at the beginning of the
            // segment that holds `wanted`, the nearest entry boundary
            // known without a scan (entries never straddle segments).
            start = recovery::segment_base_at(&segments, wanted);
            tracing::warn!(
                from = start,
                "an index lost units; re-dispatching from an earlier position"
            );
            truncate_all(&sinks, start)?;
        }
        // Producer state: the snapshot covers the log below its position;
        // the entries the scan verifies at or past it are replayed on top.
        let (mut producers, producers_from) = match producer_state::snapshot::load(&dir)? {
            Loaded::Snapshot(states, position) => (states, position),
            Loaded::Missing => {
                if !fresh {
                    tracing::warn!(data_dir = %dir.display(), "no producer-state snapshot (a data dir of an older tidelog, or the file was lost); producer state is rebuilt from the entries recovery reads");
                }
                (ProducerStates::default(), 0)
            }
            Loaded::Damaged => (ProducerStates::default(), 0),
        };
        let mut replayed = 0u64;
        let recovered = recovery::recover_log(
            &cl_dir,
            segments,
            start,
            synced_below,
            config.recovery_mode,
            clean,
            &mut |entry| {
                let v = entry.view();
                let Some(p) = v.producer.filter(|_| v.physical_offset >= producers_from) else {
                    return;
                };
                // A deleted topic's records stay deleted, its producers too.
                if queues
                    .deleted_next_offset(entry.topic(), v.partition)
                    .is_some_and(|n| v.base_queue_offset < n)
                {
                    return;
                }
                producers.replay(
                    &Arc::from(entry.topic()),
                    v.partition,
                    &p,
                    v.record_count,
                    v.base_queue_offset,
                    v.store_timestamp_ms,
                );
            },
            &mut |record| {
                replayed += 1;
                sinks.iter().try_for_each(|s| s.dispatch(record))
            },
        )?;
        let end = recovered.end;
        if producers_from > end {
            // Only a log cut below a flushed position (`recovery_mode:
            // truncate` past damage) gets here: the snapshot may hold
            // batches the log lost, whose offsets will be handed out again.
            tracing::warn!(snapshot_position = producers_from, end, "the producer-state snapshot covers more than the recovered commit log; dropping it and keeping only what the scan read");
            producers = ProducerStates::default();
        }
        sinks.iter().try_for_each(|s| s.end_batch())?;
        // Records dispatched during the scan all lie below the valid end;
        // this only drops what sinks held past it from before the crash
        // (records the CommitLog lost).
        for s in &sinks {
            s.truncate_lost(PhysicalOffset::new(end))?;
        }
        report_rebuilt_queues(&queues, &lost_queues)?;
        if let Some(l) = lost_index {
            tracing::warn!(
                dir = %index.dir().display(),
                index_end = index.end(),
                recorded_end = l.recorded,
                "rebuilt the IndexFile entries from the commit log"
            );
        }
        let log = CommitLog::new(
            &config,
            cl_dir,
            recovered.segments,
            end,
            NextOffsets::default(),
            faults.clone(),
        );
        // The time indexes follow the recovered queues: missing entries
        // (an old data dir, a lost or damaged time file, a recovery's
        // truncation) are built from the queues and the log now, before
        // dispatch resumes; each queue's tail interval is read once.
        queue_sink.set_log(&log);
        catch_up_time_indexes(&queues, &log);
        let dispatcher = Dispatcher::new(
            Arc::clone(&log),
            sinks,
            end,
            Duration::from_millis(config.dispatch_stall_ms),
            faults,
        );

        // Queue offsets continue where each partition's queue ends, or, for
        // a deleted partition, where it ended, and never below a log start
        // (a partition whose queue a crash lost past its log start).
        let mut next = NextOffsets::default();
        for (tp, n) in queues
            .deleted_partitions()
            .into_iter()
            .chain(queues.log_start_offsets())
        {
            let n = next.get(tp.topic(), tp.partition()).unwrap_or(0).max(n);
            next.insert(&tp, n);
        }
        for q in queues.all() {
            let tp = q.topic_partition();
            let n = next.get(tp.topic(), tp.partition()).unwrap_or(0);
            next.insert(tp, n.max(q.max_offset()));
        }
        log.set_next_offsets(next);
        let producer_id_floor = producers.max_producer_id().map_or(0, |id| id + 1);
        log.set_producer_states(producers);
        let producer_ids = ProducerIds::load(&dir, producer_id_floor)?;

        let disk_reserve_bytes = disk_reserve_bytes(&config);
        let inner = Arc::new(Inner {
            config,
            log,
            queues,
            index,
            dispatcher,
            stop: AtomicBool::new(false),
            thread_restarts: AtomicU64::new(0),
            checkpoint_lock: Mutex::new(()),
            producer_snapshot_version: AtomicU64::new(0),
            producer_ids: Mutex::new(producer_ids),
            wake: event_listener::Event::new(),
            retention: RetentionState {
                disk_available_bytes: AtomicU64::new(u64::MAX),
                ..RetentionState::default()
            },
            disk_reserve_bytes,
            queue_ends_stored: Mutex::new(None),
            index_end_stored: Mutex::new(None),
        });
        // After a crash, what the dead process left unsynced is still in the
        // page cache: recovery took it as durable, and the checkpoint below
        // will claim it, so it must reach the disk first (`sync_tree`).
        if aborted {
            let began_sync = Instant::now();
            let (files, dirs) = fs_util::sync_tree(&inner.config.data_dir)?;
            tracing::info!(
                files,
                dirs,
                elapsed_ms = began_sync.elapsed().as_millis() as u64,
                "synced the data dir the crashed process left"
            );
        }
        // Everything is consistent now: record it, so a crash right after
        // open does not repeat this work.
        inner.checkpoint()?;
        // Beginning offsets follow the CommitLog's first segment (retention
        // may have deleted segments before the restart).
        inner.cleanup_indexes_below_log_start()?;
        inner.check_disk();
        let report = RecoveryReport {
            clean_shutdown: clean,
            scanned_from: recovered.scanned_from,
            end,
            records_scanned: recovered.records_scanned,
            truncated_bytes: recovered.truncated_bytes,
            records_replayed: replayed,
            elapsed: began.elapsed(),
        };
        tracing::info!(?report, "store open");
        let store = Store {
            inner,
            threads: Mutex::new(Vec::new()),
            recovery: report,
            closed: AtomicBool::new(false),
            _lock: lock,
        };
        store.start_threads()?;
        Ok(store)
    }

    fn start_threads(&self) -> Result<()> {
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
        if self.inner.config.flush == FlushMode::Sync {
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
        }
        if self.inner.config.preallocate_next_segment {
            threads.push(spawn_supervised(
                "tidelog-prealloc",
                &self.inner,
                |inner| inner.log.run_preallocator(&inner.stop),
            )?);
        }
        Ok(())
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

    /// Append one batch (one produce request). Under `flush: sync` this
    /// returns only after an fsync covers the batch, or
    /// [`StoreError::FlushTimedOut`] after `sync_flush_timeout_ms` (the
    /// batch is appended then, its durability unknown). Refused while the
    /// disk is full or dispatch is stalled.
    pub fn append(&self, batch: &[AppendRecord]) -> Result<Vec<Appended>> {
        self.append_within(batch, u64::MAX)
    }

    /// [`append`](Self::append) with a lower record limit for this batch:
    /// key + value + headers of every record at most `max_payload` bytes
    /// (or the store's limit, whichever is smaller). A front-end passes a
    /// topic's `max.message.bytes` here instead of checking the records
    /// itself, so the record rules are checked once, by the writer, and a
    /// refusal names the record ([`StoreError::RecordRefused`]).
    pub fn append_within(&self, batch: &[AppendRecord], max_payload: u64) -> Result<Vec<Appended>> {
        match self.append_as(batch, max_payload, None)? {
            ProducerAppend::Written(appended) => Ok(appended),
            ProducerAppend::Duplicate(_) => Err(StoreError::inconsistent(
                self.data_dir(),
                0,
                "an append without a producer was taken for a duplicate",
            )),
        }
    }

    /// [`append_within`](Self::append_within) as an idempotent producer's
    /// batch (one partition) when `producer` is given: its sequence is
    /// checked in the writer's critical section (`crate::producer_state`).
    /// A retry of one of its last five batches writes nothing and answers
    /// [`ProducerAppend::Duplicate`] with the original offsets, after the
    /// same sync flush wait a write gets (so the original is durable too).
    pub fn append_as(
        &self,
        batch: &[AppendRecord],
        max_payload: u64,
        producer: Option<&ProducerBatch>,
    ) -> Result<ProducerAppend> {
        self.append_unflushed(batch, max_payload, producer)?.wait()
    }

    /// [`append_as`](Self::append_as) without its wait: the batch is
    /// appended when this returns, and the answer is the caller's once the
    /// returned [`Unflushed`] answers (under `flush: sync` an fsync covers
    /// the batch, or [`StoreError::FlushTimedOut`] after
    /// `sync_flush_timeout_ms`; under `async` at once). Awaiting it holds
    /// no thread. The append itself is a copy into the page cache in both
    /// modes (segments are created and warmed ahead by the preallocator).
    ///
    /// While the dispatcher is more than [`DISPATCH_LAG_MAX_BYTES`]
    /// behind, this blocks until it is back within the bound: an async
    /// caller awaits [`Store::lag_admitted`] first and appends with
    /// [`Store::append_unflushed_admitted`] instead.
    pub fn append_unflushed(
        &self,
        batch: &[AppendRecord],
        max_payload: u64,
        producer: Option<&ProducerBatch>,
    ) -> Result<Unflushed<ProducerAppend>> {
        self.append_gates()?;
        self.inner.dispatcher.wait_lag_within(&self.closed)?;
        self.append_unflushed_admitted(batch, max_payload, producer, LagAdmitted(()))
    }

    /// Resolves once an append may go ahead under the dispatch-lag bound
    /// (at once while the dispatcher is within [`DISPATCH_LAG_MAX_BYTES`]
    /// of the visible end, the usual case), without holding a
    /// thread: the dispatcher wakes held appends as it moves. A stall or a
    /// closing store answers with its error. Between this and the append
    /// other appends may pass too: the lag may exceed the bound by the
    /// appends in flight, one batch each (the bound leaves room for them).
    pub async fn lag_admitted(&self) -> Result<LagAdmitted> {
        self.append_gates()?;
        self.inner.dispatcher.lag_within(&self.closed).await?;
        Ok(LagAdmitted(()))
    }

    /// [`append_unflushed`](Self::append_unflushed) after
    /// [`lag_admitted`](Self::lag_admitted) was awaited: never blocks (the
    /// append is a copy into the page cache).
    pub fn append_unflushed_admitted(
        &self,
        batch: &[AppendRecord],
        max_payload: u64,
        producer: Option<&ProducerBatch>,
        _admitted: LagAdmitted,
    ) -> Result<Unflushed<ProducerAppend>> {
        self.append_gates()?;
        let (answer, end) = match self.inner.log.append_as(batch, max_payload, producer)? {
            LogAppend::Written { appended, end } => (ProducerAppend::Written(appended), end),
            LogAppend::Duplicate { batch, end } => (ProducerAppend::Duplicate(batch), end),
        };
        let wait = (self.inner.config.flush == FlushMode::Sync).then(|| {
            self.inner.log.flush_wait(
                end,
                Duration::from_millis(self.inner.config.sync_flush_timeout_ms),
            )
        });
        Ok(Unflushed::new(answer, wait))
    }

    /// What refuses an append before it waits or writes: a closed store, a
    /// full disk (by ratio or reserve), dispatch stalled or short of space.
    fn append_gates(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        if self.inner.retention.disk_full.load(Ordering::Acquire) {
            return Err(self.inner.disk_full_error());
        }
        if let Some(refused) = self.inner.dispatcher.refusal() {
            return Err(refused);
        }
        Ok(())
    }

    /// `Some(why)` while the store refuses appends, with the error an
    /// append gets now: closed, poisoned (a failed write or flush), the
    /// disk full (by ratio, by reserve, or a file the dispatcher could not
    /// create), dispatch stalled, or the next CommitLog segment
    /// impossible to make with none made ahead. What readiness reports: a
    /// server that answers ready while every produce fails sends a load
    /// balancer's writes to it.
    pub fn write_refusal(&self) -> Option<StoreError> {
        if let Err(e) = self.append_gates() {
            return Some(e);
        }
        if let Some(e) = self.inner.log.poisoned_error() {
            return Some(e);
        }
        self.inner.log.segment_creation_failure()
    }

    /// A new producer id for InitProducerId: never one handed out before in
    /// this data dir, across restarts and crashes (`producer_state::ids`).
    pub fn allocate_producer_id(&self) -> Result<i64> {
        self.inner
            .producer_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .allocate()
    }

    /// Whether `producer_id` was handed out by this data dir.
    pub fn producer_id_issued(&self, producer_id: i64) -> bool {
        self.inner
            .producer_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .issued(producer_id)
    }

    /// Whether the dispatcher is more than half of
    /// [`DISPATCH_LAG_MAX_BYTES`] behind: an append may soon wait for it
    /// (a front-end runs appends where a wait costs no async worker).
    pub fn dispatch_lagging(&self) -> bool {
        self.inner.dispatcher.lag_bytes() > DISPATCH_LAG_MAX_BYTES / 2
    }

    /// `Some` while dispatch refuses appends (stalled, or a sink out of
    /// space): the error they are refused with.
    pub fn dispatch_stall(&self) -> Option<StoreError> {
        self.inner.dispatcher.refusal()
    }

    /// `[beginning, end)` queue offsets of a partition; `(0, 0)` if nothing
    /// was ever written to it, `(next, next)` if its topic was deleted.
    pub fn offsets(&self, topic: &str, partition: u32) -> (u64, u64) {
        match self.inner.queues.get(topic, partition) {
            Some(q) => (q.min_offset(), q.max_offset()),
            None => match self.inner.queues.deleted_next_offset(topic, partition) {
                Some(next) => (next, next),
                None => (0, 0),
            },
        }
    }

    /// The first queue offset of a partition whose record timestamp is at
    /// least `timestamp_ms` (Kafka's ListOffsets rule: the producer's
    /// timestamps, which need not grow with offsets), or the partition's end
    /// offset if no record is. Found through the partition's time index
    /// (reads at most about two intervals of records), not a scan.
    pub fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: u32,
        timestamp_ms: i64,
    ) -> Result<u64> {
        match self.inner.queues.get(topic, partition) {
            Some(q) => q.offset_for_timestamp(timestamp_ms, &self.inner.log),
            None => Ok(self.offsets(topic, partition).1),
        }
    }

    /// Kafka's DeleteRecords on one partition: move its log start offset to
    /// `before` (`None`: the high watermark, the partition's end as fetches
    /// see it). Records below are never served again (reads, offsets and
    /// timestamp lookups begin there, also after a restart or a crash) and
    /// their queue files go with the next retention pass; their bytes stay
    /// in the CommitLog, which every partition shares, until its segments
    /// age out. Durable before it returns. An offset past the high
    /// watermark changes nothing ([`DeletedRecords::AboveHighWatermark`]),
    /// one at or below the beginning neither. Blocking (fsyncs).
    pub fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        before: Option<u64>,
    ) -> Result<DeletedRecords> {
        self.inner.queues.delete_records(topic, partition, before)
    }

    /// The log start offset a client moved the partition's beginning to
    /// ([`Store::delete_records`]), 0 if none: a compact topic's reads of
    /// its compacted log begin there too.
    pub fn log_start(&self, topic: &str, partition: u32) -> u64 {
        self.inner.queues.log_start(topic, partition)
    }

    /// The first record of a partition with the largest timestamp, as
    /// (queue offset, timestamp), or `None` for a partition without
    /// records (Kafka's ListOffsets -3): through the time index, not a
    /// scan (`ConsumeQueue::max_timestamp_record`).
    pub fn max_timestamp_record(&self, topic: &str, partition: u32) -> Result<Option<(u64, i64)>> {
        match self.inner.queues.get(topic, partition) {
            Some(q) => q.max_timestamp_record(&self.inner.log),
            None => Ok(None),
        }
    }

    /// Delete `topic` from the store: its ConsumeQueue files are removed and
    /// closed now, and its records are never indexed or served by queue
    /// offset again, also not after a crash and a recovery replay (they stay
    /// in the CommitLog until retention deletes their segments). Each
    /// partition's next offset is kept durably, so a topic created again
    /// under the name continues its offsets. Returns the partitions whose
    /// queues were deleted. Blocking (fsyncs).
    pub fn delete_topic(&self, topic: &str) -> Result<usize> {
        validate_topic_name(topic)?;
        // Appends of the topic are refused from the snapshot on, so the
        // offsets kept cover every record of it that can be dispatched.
        let writer_next = self.inner.log.close_topic(topic);
        #[cfg(test)]
        run_before_queues_delete();
        let deleted = self.inner.queues.delete_topic(topic, &writer_next)?;
        tracing::info!(topic, partitions = deleted, "deleted the topic's queues");
        Ok(deleted)
    }

    /// Up to `max_records` records of a partition from queue offset `from`
    /// on (or from the beginning, if `from` was deleted), stopping before
    /// `max_bytes` is exceeded but always returning at least one record if
    /// there is one (so a large record cannot block a consumer).
    pub fn read(
        &self,
        topic: &str,
        partition: u32,
        from: QueueOffset,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<ReadResult> {
        let mut records = Vec::new();
        let next_offset =
            self.read_into(topic, partition, from, max_records, max_bytes, &mut records)?;
        Ok(ReadResult {
            records,
            next_offset,
        })
    }

    /// [`Store::read`], each record handed to `sink` as it is read rather
    /// than collected (a Kafka fetch encodes it into its batch at once);
    /// returns where the next read starts.
    pub fn read_into(
        &self,
        topic: &str,
        partition: u32,
        from: QueueOffset,
        max_records: usize,
        max_bytes: usize,
        sink: &mut impl ReadSink,
    ) -> Result<QueueOffset> {
        let Some(q) = self.inner.queues.get(topic, partition) else {
            return Ok(from);
        };
        let start = from.get().max(q.min_offset());
        let end = q.max_offset();
        let wanted = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX);
        sink.reserve(wanted.min(max_records).min(READ_RESERVE_MAX));
        let mut count = 0usize;
        let mut bytes = 0usize;
        let mut offset = start;
        let mut queue_cursor = crate::consume_queue::QueueCursor::default();
        let mut segment = crate::commit_log::ReadCache::default();
        while offset < end && count < max_records {
            // The record after the one just read is usually the next of its
            // entry, found without the queue. Only an entry this read
            // found is looked in (`segment` is its own), so a sink that
            // comes holding another partition's record is never followed.
            let after_last = sink
                .last()
                .filter(|last| last.queue_offset().get() + 1 == offset);
            let rec = match after_last {
                Some(last) => self.inner.log.next_in_entry(last, &segment)?,
                None => None,
            };
            // A record of the entry of the one before has its topic and
            // partition (the entry's), checked with that one.
            let entry_checked = rec.is_some();
            let rec = match rec {
                Some(rec) => Some(rec),
                None => match q.get_cached(offset, &mut queue_cursor)? {
                    Some(unit) => match self.inner.log.read_unit_cached(
                        unit.physical_offset,
                        unit.size,
                        &mut segment,
                    )? {
                        None if unit.physical_offset < self.inner.log.min_offset() => {
                            // Retention deleted it since we read the
                            // beginning (the queue's beginning follows a
                            // moment later): go on from the new beginning
                            // rather than unit by unit.
                            let log_min = self.inner.log.min_offset();
                            offset = q.first_offset_at_or_past(log_min).max(offset + 1);
                            continue;
                        }
                        rec => rec,
                    },
                    None => None,
                },
            };
            let Some(rec) = rec else {
                // A hole in the queue, or deleted by retention since we
                // looked at the beginning.
                offset += 1;
                continue;
            };
            if rec.queue_offset().get() != offset
                || !entry_checked
                    && (rec.topic_bytes() != topic.as_bytes() || rec.partition() != partition)
            {
                // Bytes the reads do not CRC-check disagree with the
                // queue: damage in the log (or the queue), reported as such.
                return Err(StoreError::corruption(
                    self.inner.log.dir(),
                    rec.physical_offset().get(),
                    CorruptionKind::QueueMismatch {
                        queue: Box::new(QueuePosition {
                            topic: topic.to_string(),
                            partition,
                            offset,
                        }),
                        found: Box::new(QueuePosition {
                            topic: rec.topic().to_string(),
                            partition: rec.partition(),
                            offset: rec.queue_offset().get(),
                        }),
                    },
                ));
            }
            let size = rec.size() as usize;
            if count > 0 && bytes + size > max_bytes {
                break;
            }
            bytes += size;
            count += 1;
            sink.push(rec);
            offset += 1;
        }
        Ok(QueueOffset::new(offset))
    }

    /// A listener that fires when a record is added to the partition's
    /// queue. Register, re-check with [`Store::offsets`], then await (async)
    /// or `wait_timeout` (blocking): no wake-up is missed in between.
    pub fn listen(&self, topic: &str, partition: u32) -> Result<EventListener> {
        Ok(self.inner.queues.get_or_create(topic, partition)?.listen())
    }

    /// The record starting exactly at physical offset `pos`, fully verified;
    /// `None` if no record starts there (safe for client-supplied offsets).
    pub fn read_at(&self, pos: PhysicalOffset) -> Result<Option<StoredRecord>> {
        self.inner.log.read_at(pos)
    }

    /// Records of `topic` whose key is exactly `key` and whose store time is
    /// within `[begin_ms, end_ms]`, newest first, at most `max`.
    pub fn query_by_key(
        &self,
        topic: &str,
        key: &[u8],
        begin_ms: i64,
        end_ms: i64,
        max: usize,
    ) -> Result<Vec<StoredRecord>> {
        validate_topic_name(topic)?;
        let mut out = Vec::new();
        if max == 0 {
            return Ok(out);
        }
        let log = &self.inner.log;
        self.inner
            .index
            .query(topic, key, begin_ms, end_ms, &mut |pos| {
                if let Some(rec) = log.read_at(PhysicalOffset::new(pos))? {
                    let ts = rec.store_timestamp_ms();
                    if rec.topic() == topic
                        && rec.key().as_deref() == Some(key)
                        && ts >= begin_ms
                        && ts <= end_ms
                    {
                        out.push(rec);
                    }
                }
                Ok(keep_going(out.len() < max))
            })?;
        Ok(out)
    }

    /// Every partition the store has records (or a queue) for.
    pub fn partitions(&self) -> Vec<TopicPartition> {
        let mut v: Vec<_> = self
            .inner
            .queues
            .all()
            .iter()
            .map(|q| q.topic_partition().clone())
            .collect();
        v.sort();
        v
    }

    /// The CommitLog position after the last acknowledged append: a read
    /// that waits until [`Store::dispatched_or_listen`] of it is `None`
    /// sees every record acknowledged before this call. Under `flush:
    /// sync` the flushed position (a record is acknowledged only once
    /// flushed), so a read waits for no unacknowledged record's flush.
    pub fn committed_position(&self) -> u64 {
        self.inner.log.visible_end()
    }

    /// `None` once every record below `position` (a
    /// [`Store::committed_position`]) is dispatched, so fetchable; else a
    /// listener, registered before the check, that fires at the
    /// dispatcher's next progress (check again then).
    pub fn dispatched_or_listen(&self, position: u64) -> Option<EventListener> {
        self.inner.dispatcher.dispatched_or_listen(position)
    }

    /// Block until the dispatcher has indexed everything appended so far
    /// (tests and tools; the produce path does not wait for it).
    pub fn wait_dispatched(&self, timeout: Duration) -> bool {
        self.inner
            .dispatcher
            .wait_dispatched(self.inner.log.committed(), timeout)
    }

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

    /// The CommitLog position the dispatcher has reached: every record
    /// below it is in the ConsumeQueues (readable), every record at or above
    /// it is not yet. Tiered storage's retention hold starts from it when a
    /// partition has nothing readable left to upload.
    pub fn dispatched_position(&self) -> u64 {
        self.inner.dispatcher.dispatched()
    }

    /// Install the hold retention obeys from its next pass on (replacing
    /// any earlier one): no segment ending above
    /// [`RetentionHold::min_position`](crate::retention::RetentionHold::min_position)
    /// is deleted, whatever the trigger.
    pub fn set_retention_hold(&self, hold: Arc<dyn crate::retention::RetentionHold>) {
        *self
            .inner
            .retention
            .hold
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(hold);
    }

    /// Run a retention pass now. `Trigger::Manual` deletes expired segments
    /// whatever the hour; `Trigger::ManualForce` deletes every sealed
    /// segment the indexes hold durably (RocketMQ's manual delete). The
    /// segment being written is never deleted.
    pub fn run_retention(
        &self,
        trigger: crate::retention::Trigger,
    ) -> Result<crate::retention::PassOutcome> {
        if trigger != crate::retention::Trigger::Scheduled {
            // Make everything dispatched so far durable, so the pass may
            // delete every segment the dispatcher has passed. Flushed
            // first: under `flush: sync` dispatch follows the flush.
            self.inner.log.flush_all()?;
            self.inner
                .dispatcher
                .wait_dispatched(self.inner.log.committed(), Duration::from_secs(5));
            self.inner.log.flush_all()?;
            self.inner.checkpoint()?;
        }
        self.inner.retention_pass(trigger)
    }

    /// Re-evaluate the disk-full flag now (it is also kept by a thread).
    pub fn check_disk(&self) {
        self.inner.check_disk();
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

    fn stop_threads(&self) {
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
    /// below the recorded dispatched position is durable in them.
    fn checkpoint(&self) -> Result<()> {
        let _g = self
            .checkpoint_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let dispatched = self.dispatcher.dispatched();
        self.dispatcher.flush_sinks()?;
        let flushed = self.log.flushed();
        // Claim only what is on disk in the log too: recovery and retention
        // trust `dispatched`, and indexes pointing past the flushed log
        // would point at zeros after a power loss.
        let dispatched = dispatched.min(flushed);
        // Each queue's end as of `dispatched`: its units were written
        // before the flush above, so they are durable, and they point
        // into flushed log bytes, which a power loss cannot take
        // (`consume_queue::ends`).
        self.store_queue_ends(self.queues.ends_at(dispatched))?;
        self.store_index_end(self.index.end_below(dispatched))?;
        self.store_producer_snapshot()?;
        Checkpoint {
            commitlog_flushed: flushed,
            dispatched,
            written_at_ms: now_ms(),
        }
        .store(&self.config.data_dir)?;
        self.retention
            .durable_dispatched
            .fetch_max(dispatched, Ordering::AcqRel);
        Ok(())
    }

    /// Replace `queue-ends` with `ends` if they changed since the last
    /// one written. Before the checkpoint: recovery compares the queues
    /// with the newest one either way (its ends are durable in the queues
    /// whichever checkpoint follows).
    fn store_queue_ends(&self, ends: QueueEnds) -> Result<()> {
        let mut last = self
            .queue_ends_stored
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if last.as_ref() == Some(&ends) {
            return Ok(());
        }
        ends.store(
            &self
                .config
                .data_dir
                .join(crate::consume_queue::ends::FILE_NAME),
        )?;
        *last = Some(ends);
        Ok(())
    }

    /// Replace `index-end` with `end` if it moved since the last one
    /// written (`index_file::end`).
    fn store_index_end(&self, end: u64) -> Result<()> {
        let mut last = self
            .index_end_stored
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if *last == Some(end) {
            return Ok(());
        }
        crate::index_file::end::IndexEnd::new(end).store(&self.config.data_dir)?;
        *last = Some(end);
        Ok(())
    }

    /// Write the producer-state snapshot if the state changed since the
    /// last one: after the checkpoint's positions were read (so the
    /// snapshot's position is at or past the recovery start the checkpoint
    /// will name) and before the checkpoint is written, with the log
    /// flushed up to the snapshot's position first (so a power loss can
    /// never keep a batch in the snapshot and lose it from the log). A
    /// failure fails the checkpoint: the old pair stays consistent.
    fn store_producer_snapshot(&self) -> Result<()> {
        let since = self.producer_snapshot_version.load(Ordering::Acquire);
        let Some((states, position, version)) = self.log.producer_snapshot(since) else {
            return Ok(());
        };
        if self.log.flushed() < position {
            self.log.flush_all()?;
        }
        producer_state::snapshot::store(&self.config.data_dir, &states, position)?;
        self.producer_snapshot_version
            .store(version, Ordering::Release);
        Ok(())
    }

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

    /// The refusal while the disk-full flag is up.
    fn disk_full_error(&self) -> StoreError {
        let ratio = f64::from_bits(self.retention.disk_used_ratio_bits.load(Ordering::Acquire));
        if self.retention.full_by_reserve.load(Ordering::Acquire) {
            let available = self.retention.disk_available_bytes.load(Ordering::Acquire);
            return StoreError::DiskFull {
                reason: format!(
                    "the data directory's disk has {available} bytes available ({:.1}% used), less than the store's reserve of {} bytes for the files it must still create (the next commit log segment, index and queue files); writes resume when {} bytes are free (delete old segments or free space)",
                    ratio * 100.0,
                    self.disk_reserve_bytes,
                    self.disk_reserve_bytes.saturating_mul(2)
                ),
            };
        }
        StoreError::disk_full(ratio, &self.config.retention)
    }

    /// Update the disk-used ratio and the disk-full flag.
    fn check_disk(&self) {
        let cfg = &self.config.retention;
        let ratio = match cfg.disk.used_ratio(&self.config.data_dir) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read disk usage of the data directory");
                return;
            }
        };
        self.retention
            .disk_used_ratio_bits
            .store(ratio.to_bits(), Ordering::Release);
        // Hysteresis (RocketMQ's): full above disk_full_ratio, and full
        // until usage is back at disk_force_clean_ratio or below, so
        // produce does not flap while usage hovers around the mark.
        let available = match cfg.disk.available_bytes(&self.config.data_dir) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the available bytes of the data directory's disk");
                None
            }
        };
        self.retention
            .disk_available_bytes
            .store(available.unwrap_or(u64::MAX), Ordering::Release);
        let was = self.retention.disk_full.load(Ordering::Acquire);
        let was_by_reserve = self.retention.full_by_reserve.load(Ordering::Acquire);
        // The reserve: free space for the files the store must still
        // create (issue 35: without it the last bytes went to a segment
        // being preallocated, and the indexes' next file found none). The
        // same hysteresis: short below the reserve, and short until twice
        // the reserve is free.
        let short = available.is_some_and(|a| {
            if was_by_reserve {
                a < self.disk_reserve_bytes.saturating_mul(2)
            } else {
                a < self.disk_reserve_bytes
            }
        });
        let full_by_ratio = if was && !was_by_reserve {
            ratio > cfg.disk_force_clean_ratio
        } else {
            ratio > cfg.disk_full_ratio
        };
        let full = full_by_ratio || short;
        self.retention
            .full_by_reserve
            .store(short && !full_by_ratio, Ordering::Release);
        self.retention.disk_full.store(full, Ordering::Release);
        // The spare segment goes only while the indexes lack space (the
        // dispatcher's ENOSPC), and comes back once they have it. Not for
        // the ratio or the reserve: a segment given up there would lift
        // the gate and be made again at once, over and over.
        self.log.set_disk_short(self.dispatcher.out_of_space());
        if short && !was_by_reserve {
            tracing::error!(
                disk_available_bytes = available.unwrap_or(0),
                disk_reserve_bytes = self.disk_reserve_bytes,
                "disk nearly full: less free space than the store's reserve; refusing produce until twice the reserve is free"
            );
        }
        let was_by_ratio = was && !was_by_reserve;
        if full_by_ratio && !was_by_ratio {
            tracing::error!(
                disk_used_ratio = ratio,
                disk_full_ratio = cfg.disk_full_ratio,
                disk_force_clean_ratio = cfg.disk_force_clean_ratio,
                "disk nearly full: refusing produce until usage falls to disk_force_clean_ratio"
            );
        } else if was && !full && was_by_reserve {
            tracing::warn!(
                disk_available_bytes = available.unwrap_or(0),
                disk_reserve_bytes = self.disk_reserve_bytes,
                "free space back at twice the store's reserve: accepting produce again"
            );
        } else if was && !full {
            tracing::warn!(
                disk_used_ratio = ratio,
                disk_force_clean_ratio = cfg.disk_force_clean_ratio,
                "disk usage back at disk_force_clean_ratio or below: accepting produce again"
            );
        }
    }

    /// One retention pass (see `retention.rs` for the rules).
    fn retention_pass(
        &self,
        trigger: crate::retention::Trigger,
    ) -> Result<crate::retention::PassOutcome> {
        use crate::retention::{plan, Mode, PassOutcome};
        let _pass = self
            .retention
            .pass_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let cfg = &self.config.retention;
        let ratio = cfg
            .disk
            .used_ratio(&self.config.data_dir)
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot read disk usage; treating it as 0");
                0.0
            });
        let mut out = PassOutcome {
            disk_used_ratio: ratio,
            ..PassOutcome::default()
        };
        self.retention
            .last_pass_ms
            .store(cfg.clock.now_ms(), Ordering::Relaxed);
        // Queue files wholly below a beginning a client moved
        // (`Store::delete_records`) go at every pass, whatever the hour or
        // the disk: nothing reads them, and unlike the CommitLog's
        // segments, which every partition shares, they are the
        // partition's own.
        for q in self.queues.all() {
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
        let durable = self.retention.durable_dispatched.load(Ordering::Acquire);
        let held = self.retention_hold_position();
        let limit = crate::retention::segments_per_pass(cfg, trigger);
        let segments = self.log.segments();
        for (i, seg) in segments.iter().enumerate() {
            if i + 1 == segments.len() || seg.end() > durable {
                break; // the active segment, or not yet durably indexed
            }
            if held.is_some_and(|held| seg.end() > held) {
                // Holds records a tiered partition has not uploaded yet.
                self.retention.held_passes.fetch_add(1, Ordering::Relaxed);
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
            match self.log.delete_oldest_segment(seg.base()) {
                Ok(Some(freed)) => {
                    out.deleted_segments += 1;
                    out.freed_bytes += freed;
                    tracing::info!(segment = %seg.path().display(), reason, "deleted commit log segment");
                }
                Ok(None) => break,
                Err(e) => {
                    self.retention.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(segment = %seg.path().display(), error = %e, "could not delete segment; a later pass retries");
                    break;
                }
            }
        }
        if out.deleted_segments > 0 {
            let (q, i) = self.cleanup_indexes_below_log_start()?;
            out.queue_files_deleted += q;
            out.index_files_deleted = i;
            self.retention
                .segments_deleted
                .fetch_add(out.deleted_segments as u64, Ordering::Relaxed);
            self.retention
                .bytes_freed
                .fetch_add(out.freed_bytes, Ordering::Relaxed);
            tracing::info!(?out, "retention pass done");
        }
        Ok(out)
    }

    fn retention_hold_position(&self) -> Option<u64> {
        let hold = self
            .retention
            .hold
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        hold.and_then(|h| h.min_position())
    }

    /// Move every partition's beginning up to the CommitLog's first byte and
    /// delete queue and index files that only point below it.
    fn cleanup_indexes_below_log_start(&self) -> Result<(usize, usize)> {
        let min = self.log.min_offset();
        let mut queue_files = 0;
        for q in self.queues.all() {
            queue_files += q.advance_min(min)?;
        }
        let index_files = self.index.delete_files_below(min)?;
        Ok((queue_files, index_files))
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

/// How many ConsumeQueue files the disk reserve holds room for: partitions
/// roll into their next queue file one at a time, rarely together.
const QUEUE_FILES_IN_RESERVE: u64 = 4;

/// The free space the disk-full gate keeps for the files the store must
/// still create after it refuses writes: the next CommitLog segment (the
/// preallocator's, or the writer's), the next IndexFile, and
/// [`QUEUE_FILES_IN_RESERVE`] ConsumeQueue files. Segments already made
/// ahead are allocated, so counted as used. Writes stop when less than
/// this is available, whatever the ratio: so the last bytes go to no
/// file at all, and every file the store maps is backed.
pub fn disk_reserve_bytes(config: &StoreConfig) -> u64 {
    use crate::index_file::format::{ENTRY_LEN, HEADER_LEN, SLOT_LEN};
    let index = HEADER_LEN as u64
        + u64::from(config.index_slots) * SLOT_LEN as u64
        + u64::from(config.index_entries) * ENTRY_LEN as u64;
    let queue = config
        .consume_queue_units_per_file
        .saturating_mul(crate::consume_queue::format::UNIT_LEN as u64);
    config
        .commitlog_segment_bytes
        .saturating_add(index)
        .saturating_add(queue.saturating_mul(QUEUE_FILES_IN_RESERVE))
}

/// Bring every queue's time index up to its queue (see
/// [`ConsumeQueue::catch_up_time_index`](crate::consume_queue::ConsumeQueue::catch_up_time_index)),
/// logging progress. A queue that fails keeps a partial index, which its
/// lookups make up for by reading the unindexed intervals' records, and the
/// dispatcher tries again at its next unit: logged, not a reason to refuse
/// to start.
fn catch_up_time_indexes(queues: &ConsumeQueues, log: &CommitLog) {
    let all = queues.all();
    let began = Instant::now();
    let mut built = 0u64;
    for (done, q) in all.iter().enumerate() {
        match q.catch_up_time_index(log) {
            Ok(n) => built += n,
            Err(e) => {
                tracing::error!(tp = %q.topic_partition(), error = %e, "could not rebuild the time index; its lookups read the unindexed records")
            }
        }
        if began.elapsed() > Duration::from_secs(5) && done % 100 == 99 {
            tracing::info!(
                queues = done + 1,
                of = all.len(),
                entries = built,
                "rebuilding time indexes"
            );
        }
    }
    if built > 0 {
        tracing::info!(queues = all.len(), entries = built, elapsed = ?began.elapsed(), "time indexes rebuilt");
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

/// The queues that end below the `queue-ends` file's record
/// ([`ConsumeQueues::find_lost`]). No file (a data dir of an older tidelog,
/// or a new one) means nothing to compare; a damaged one is logged and
/// every queue is re-dispatched from the CommitLog's start, which is
/// slower but always right (the file is derived data).
fn find_lost_queues(dir: &Path, queues: &ConsumeQueues) -> Vec<LostQueue> {
    let path = dir.join(crate::consume_queue::ends::FILE_NAME);
    match QueueEnds::load(&path) {
        Ok(recorded) => queues.find_lost(&recorded),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the queue-ends file; rebuilding every consume queue from the commit log's start");
            queues
                .all()
                .into_iter()
                .map(|q| LostQueue {
                    tp: q.topic_partition().clone(),
                    path: q.file_path_for(q.max_offset()),
                    had: q.max_offset(),
                    recorded: q.max_offset(),
                    replay_from: 0,
                })
                .collect()
        }
    }
}

/// IndexFiles that end below the last checkpoint's `index-end`.
#[derive(Debug, Clone, Copy)]
struct LostIndex {
    /// Where the surviving IndexFiles end (one past their newest entry's
    /// record, 0 for none): the re-dispatch starts there.
    had: u64,
    recorded: u64,
}

/// Compare the IndexFiles with `index-end` (`index_file::end`), warning
/// about a loss. No file compares nothing; a damaged one is logged and the
/// IndexFiles are rebuilt from the CommitLog's start.
fn find_lost_index(dir: &Path, index: &IndexService) -> Option<LostIndex> {
    let had = index.end();
    let recorded = match crate::index_file::end::IndexEnd::load(dir) {
        Ok(Some(e)) => e.end,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the index-end file; rebuilding the IndexFiles from the commit log's start");
            return Some(LostIndex {
                had: 0,
                recorded: had,
            });
        }
    };
    if had >= recorded {
        return None;
    }
    tracing::warn!(
        dir = %index.dir().display(),
        newest_file = ?index.newest_path(),
        index_end = had,
        recorded_end = recorded,
        "IndexFile missing or shorter than the last checkpoint recorded; rebuilding its entries from the commit log"
    );
    Some(LostIndex { had, recorded })
}

/// After the recovery scan: say what each lost queue got back, and make
/// one whose records retention had already deleted continue at its
/// recorded end, so no offset is handed out twice.
fn report_rebuilt_queues(queues: &ConsumeQueues, lost: &[LostQueue]) -> Result<()> {
    for l in lost {
        let now = queues
            .get(l.tp.topic(), l.tp.partition())
            .map_or(0, |q| q.max_offset());
        let rebuilt = now.saturating_sub(l.had);
        if now >= l.recorded {
            if l.recorded > l.had {
                tracing::warn!(tp = %l.tp, file = %l.path.display(), rebuilt_units = rebuilt, queue_end = now, "rebuilt the consume queue from the commit log; no acknowledged record is lost");
            }
            continue;
        }
        tracing::warn!(
            tp = %l.tp,
            file = %l.path.display(),
            rebuilt_units = rebuilt,
            queue_end = now,
            recorded_end = l.recorded,
            "rebuilt what the commit log still holds of a lost consume queue; offsets [{now}, {}) are no longer in the commit log (retention deleted them, or a lost head of the log took them, before the file was lost); the partition continues at {}",
            l.recorded,
            l.recorded
        );
        queues.continue_lost_queue(l.tp.topic(), l.tp.partition(), l.recorded)?;
    }
    Ok(())
}

/// Truncate every sink at `physical_end`; the earliest position any of them
/// needs replayed from.
fn truncate_all(sinks: &[Arc<dyn DispatchSink>], physical_end: u64) -> Result<u64> {
    let physical_end = PhysicalOffset::new(physical_end);
    let mut from = physical_end;
    for s in sinks {
        from = from.min(s.truncate(physical_end)?);
    }
    Ok(from.get())
}

/// An exclusive flock on `<data_dir>/lock`, so two servers never share a
/// data dir; released when dropped. Taken once per server, before anything
/// in the data dir is opened (the store's own files and its callers').
#[derive(Debug)]
pub struct DataDirLock {
    dir: PathBuf,
    _file: File,
}

impl DataDirLock {
    /// Creates `dir` (durably) if needed and locks it; `StoreError::Locked`
    /// if another process holds the lock.
    pub fn acquire(dir: &Path) -> Result<DataDirLock> {
        fs_util::create_dir_durable(dir)?;
        Ok(DataDirLock {
            dir: dir.to_path_buf(),
            _file: acquire_lock(dir)?,
        })
    }
}

/// Take `<dir>/lock` with flock, so two servers never share a data dir.
fn acquire_lock(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .at(&path)?;
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: plain syscall on an fd we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(StoreError::Locked {
                    path: dir.to_path_buf(),
                });
            }
            return Err(StoreError::io(&path, err));
        }
    }
    Ok(file)
}

#[cfg(test)]
#[path = "store_tests.rs"]
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
