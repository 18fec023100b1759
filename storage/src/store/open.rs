//! Opening the store: the data dir locked, recovery run, every index and
//! sink brought in line with the CommitLog, then the threads started.
//!
//! Order (each step relies on the one before): the `abort` marker is
//! written (and synced) before anything else, so a crash from here on is
//! seen by the next open; indexes and sinks load first and are truncated
//! to the checkpoint's dispatched position (never past the flushed log),
//! moved back to where any lost queue or IndexFile ends; the recovery
//! scan then verifies the log from there once, replaying producer state
//! and feeding every sink the records it verifies (on a cluster's node,
//! none past the high watermark it kept: that tail is left for the
//! dispatcher, `crate::high_watermark`); queue offsets continue where
//! each queue (or a deleted partition, or the held-back tail) ended; a
//! checkpoint records
//! the consistent state before the store is handed out.
//!
//! Invariant: a lost queue file, IndexFile or log head is rebuilt from the
//! CommitLog or refused (`store.recovery_mode`), and logged with what it
//! cost; an offset is never handed out twice.

use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{DataDirLock, Inner, Store, ABORT_FILE, COMMITLOG_DIR, CONSUMEQUEUE_DIR, INDEX_DIR};
use crate::checkpoint::{Checkpoint, CheckpointWriter};
use crate::commit_log::replay::{replay_entry, TxnStep};
use crate::commit_log::{CommitLog, NextOffsets};
use crate::config::StoreConfig;
use crate::consume_queue::ends::QueueEnds;
use crate::consume_queue::{ConsumeQueues, LostQueue};
use crate::dispatch::{ConsumeQueueSink, DispatchSink, Dispatcher, IndexSink};
use crate::error::{IoContext, Result, StoreError};
use crate::fault::FaultHandle;
use crate::fs_util;
use crate::index_file::IndexService;
use crate::producer_state::ids::ProducerIds;
use crate::producer_state::snapshot::Loaded;
use crate::producer_state::{self, ProducerStates};
use crate::recovery;
use crate::retention::pass::RetentionState;
use crate::txn_index::file::{AbortedByPartition, TxnIndexSink};
use crate::txn_index::{OpenTxn, PartitionTxns, TxnTable};
use crate::types::PhysicalOffset;

/// The partitions whose aborted-transaction index holds fewer entries
/// below the snapshot's position than the snapshot counted: the file, or
/// its tail, was lost after the checkpoint that covered it.
fn lost_txn_indexes(
    files: &AbortedByPartition,
    counts: &[crate::producer_state::snapshot::AbortedCount],
    position: u64,
) -> Vec<(Arc<str>, u32)> {
    counts
        .iter()
        .filter(|(topic, partition, n)| {
            let have = files.get(&(Arc::clone(topic), *partition)).map_or(0, |v| {
                v.iter().filter(|e| e.marker_position < position).count()
            });
            have < *n as usize
        })
        .map(|(topic, partition, _)| (Arc::clone(topic), *partition))
        .collect()
}

/// Rebuild the `lost` partitions' aborted-transaction indexes from every
/// marker the log holds below `below`, the dispatched position (a walk
/// of entry headers from the log's first segment; markers retention
/// deleted took their records with them; the dispatcher indexes those
/// past `below`).
fn rebuild_txn_indexes(
    log: &CommitLog,
    sink: &TxnIndexSink,
    lost: &[(Arc<str>, u32)],
    below: u64,
) -> Result<()> {
    let began = Instant::now();
    for (topic, partition) in lost {
        tracing::warn!(%topic, partition, "aborted-transaction index lost (shorter than the producer-state snapshot counted); rebuilding it from the commit log's markers");
        let path = crate::txn_index::file::path(sink.queue_root(), topic, *partition);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(&path, e)),
        }
    }
    let mut pos = log.min_offset();
    let mut markers = 0u64;
    while pos < below {
        match log.read_next(pos, false)? {
            crate::commit_log::Next::End => break,
            crate::commit_log::Next::Skip(next) => pos = next,
            crate::commit_log::Next::Entry(e) => {
                pos = e.physical_offset() + e.size();
                let v = e.view();
                if v.is_control()
                    && lost
                        .iter()
                        .any(|(t, p)| *p == v.partition && **t == *e.topic())
                {
                    if let Some(r) = e.records().next() {
                        let r = r.map_err(|why| {
                            StoreError::corruption(log.dir(), v.physical_offset, why)
                        })?;
                        sink.dispatch(&r)?;
                        markers += 1;
                    }
                }
            }
        }
    }
    sink.flush()?;
    tracing::info!(
        partitions = lost.len(),
        markers,
        elapsed_ms = began.elapsed().as_millis() as u64,
        "rebuilt aborted-transaction indexes"
    );
    Ok(())
}

/// The transactions recovery rebuilds: the snapshot's open ones, then the
/// entries replayed past it, in log order (so each partition's offsets
/// only grow). A problem here (more open than allowed, offsets out of
/// order) can only come of damage the scan let through: it is logged and
/// the entry skipped.
#[derive(Default)]
struct Txns(std::collections::HashMap<(Arc<str>, u32), PartitionTxns>);

impl Txns {
    fn from_open(mut open: Vec<OpenTxn>) -> Txns {
        open.sort_by(|a, b| (&a.0, a.1, a.3).cmp(&(&b.0, b.1, b.3)));
        let mut t = Txns::default();
        for (topic, partition, producer_id, first) in open {
            t.record(&topic, partition, producer_id, first);
        }
        t
    }

    fn record(&mut self, topic: &Arc<str>, partition: u32, producer_id: i64, offset: u64) {
        let t = self.0.entry((Arc::clone(topic), partition)).or_default();
        if let Err(why) = t.record(producer_id, offset) {
            tracing::warn!(%topic, partition, producer_id, offset, %why, "skipping a transactional entry at recovery");
        }
    }

    fn marker(
        &mut self,
        topic: &Arc<str>,
        partition: u32,
        producer_id: i64,
        offset: u64,
        commit: bool,
        position: u64,
    ) {
        let t = self.0.entry((Arc::clone(topic), partition)).or_default();
        if let Err(why) = t.marker(producer_id, offset, commit, position) {
            tracing::warn!(%topic, partition, producer_id, offset, %why, "skipping a transaction marker at recovery");
        }
    }

    /// Into the log's table, each partition's aborted transactions those
    /// of its index file.
    fn install(mut self, table: &TxnTable, mut aborted: AbortedByPartition) {
        let mut g = table.lock();
        for (key, list) in aborted.drain() {
            self.0.entry(key).or_default().set_aborted(list);
        }
        let (mut open, mut partitions) = (0usize, 0usize);
        for ((topic, partition), t) in self.0 {
            if t.is_empty() {
                continue;
            }
            partitions += 1;
            open += t.open().count();
            *g.get_mut(&topic, partition) = t;
        }
        if partitions > 0 {
            tracing::info!(partitions, open, "transactions recovered");
        }
    }
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
    /// The cut this open carried out before recovering (`crate::cut`).
    pub cut: Option<crate::cut::Cut>,
    /// A cluster node's log tail past its kept high watermark, verified
    /// but not indexed yet ([`StoreConfig::cluster_member`]).
    pub held_back_bytes: u64,
}

impl Store {
    pub(super) fn open_inner(
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
        // A replica's cut back to its master's log (`crate::cut`) comes
        // first: it lowers the checkpoint the rest of the open reads.
        let cut = crate::cut::apply_pending(&dir)?;
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
        let txn_sink = Arc::new(TxnIndexSink::new(dir.join(CONSUMEQUEUE_DIR)));
        let mut sinks: Vec<Arc<dyn DispatchSink>> = vec![
            Arc::clone(&queue_sink) as Arc<dyn DispatchSink>,
            Arc::new(IndexSink {
                index: Arc::clone(&index),
                key_owners: extra_sinks.clone(),
            }),
            // After the queue: a marker's partition directory exists by
            // the time its entry is appended to the index file there.
            Arc::clone(&txn_sink) as Arc<dyn DispatchSink>,
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
        // A cluster node indexes nothing past the watermark it last knew
        // (`crate::high_watermark`): sinks holding more forget it, and
        // the scan below holds the rest back for the dispatcher, which
        // indexes it once the cluster's watermark covers it again.
        let hold_back_at = config
            .cluster_member
            .then(|| crate::high_watermark::load(&dir).unwrap_or(start));
        if let Some(cap) = hold_back_at.filter(|cap| *cap < start) {
            start = recovery::segment_base_at(&segments, cap).max(log_min);
        }
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
        // Producer state and open transactions: the snapshot covers the
        // log below its position; the entries the scan verifies at or past
        // it are replayed on top.
        let (snapshot, have_snapshot) = match producer_state::snapshot::load(&dir)? {
            Loaded::Snapshot(snapshot) => (snapshot, true),
            Loaded::Missing => {
                if !fresh {
                    tracing::warn!(data_dir = %dir.display(), "no producer-state snapshot (a data dir of an older tidelog, or the file was lost); producer state and open transactions are rebuilt from the whole commit log");
                }
                (Default::default(), false)
            }
            Loaded::Damaged => (Default::default(), false),
        };
        let producers_from = snapshot.position;
        let mut producers = snapshot.states;
        let mut txns = Txns::from_open(snapshot.open_txns);
        let mut aborted_counts = snapshot.aborted;
        // Without a snapshot, a transaction open since before the recovery
        // start would be forgotten and its records served to read_committed
        // readers as committed: the scan starts at the log's first entry
        // then, handing the sinks only what they do not hold.
        let dispatch_from = start;
        // The entries past the cap, held back: where they begin, the
        // queue offsets they take (the writer continues after them) and
        // the aborted transactions they end (readers must know those
        // once the entries are indexed; the index files get them then).
        let held_from: Cell<Option<u64>> = Cell::new(None);
        let mut held_next: std::collections::HashMap<(Arc<str>, u32), u64> = Default::default();
        let mut held_aborted = AbortedByPartition::default();
        let scan_from = if have_snapshot || fresh {
            start
        } else {
            log_min
        };
        let mut replayed = 0u64;
        let recovered = recovery::recover_log(
            &cl_dir,
            segments,
            scan_from,
            synced_below,
            config.recovery_mode,
            clean,
            &mut |entry| {
                let v = entry.view();
                let entry_end = v.physical_offset + v.total_len as u64;
                if held_from.get().is_some() || hold_back_at.is_some_and(|cap| entry_end > cap) {
                    held_from.set(held_from.get().or(Some(v.physical_offset)));
                    let next = v.base_queue_offset + u64::from(v.record_count);
                    let had = held_next
                        .entry((Arc::from(entry.topic()), v.partition))
                        .or_default();
                    *had = (*had).max(next);
                }
                if v.producer.is_none() || v.physical_offset < producers_from {
                    return;
                }
                // A deleted topic's records stay deleted, its producers too.
                if queues
                    .deleted_next_offset(entry.topic(), v.partition)
                    .is_some_and(|n| v.base_queue_offset < n)
                {
                    return;
                }
                let topic = Arc::from(entry.topic());
                match replay_entry(&mut producers, &topic, v) {
                    Some(TxnStep::Record {
                        producer_id,
                        offset,
                    }) => txns.record(&topic, v.partition, producer_id, offset),
                    Some(TxnStep::Marker {
                        producer_id,
                        offset,
                        commit,
                        position,
                    }) => txns.marker(&topic, v.partition, producer_id, offset, commit, position),
                    None => {}
                }
            },
            &mut |record| {
                if record.physical_offset().get() < dispatch_from {
                    return Ok(()); // the sinks hold it (a scan for producers only)
                }
                if held_from.get().is_some() {
                    if let Some(aborted) = crate::txn_index::file::aborted_by(record) {
                        held_aborted
                            .entry((Arc::from(record.topic()), record.partition()))
                            .or_default()
                            .push(aborted);
                    }
                    return Ok(());
                }
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
            txns = Txns::default();
            aborted_counts.clear();
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
        // What was held back waits for the watermark to come past it.
        let dispatched = held_from.get().unwrap_or(end);
        if let Some(cap) = hold_back_at {
            log.cap_visible_at(cap.min(end));
            if dispatched < end {
                tracing::info!(
                    high_watermark = cap,
                    held_back_bytes = end - dispatched,
                    "holding back the log's tail past the kept high watermark until the cluster's watermark covers it"
                );
            }
        }
        let dispatcher = Dispatcher::new(
            Arc::clone(&log),
            sinks,
            dispatched,
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
        // And past the entries held back, which no queue holds yet.
        for ((topic, partition), n) in &held_next {
            next.raise(topic, *partition, *n);
        }
        log.set_next_offsets(next);
        let producer_id_floor = producers.max_producer_id().map_or(0, |id| id + 1);
        log.set_producer_states(producers);
        // The aborted transactions are the index files' (complete now: the
        // scan re-dispatched every marker past the checkpoint), unless a
        // file was lost: then it is rebuilt from the log's markers.
        // Those the held-back entries end are added: the files get them
        // as the dispatcher indexes the entries.
        let with_held = |mut files: AbortedByPartition| {
            for (key, list) in &held_aborted {
                files
                    .entry(key.clone())
                    .or_default()
                    .extend_from_slice(list);
            }
            files
        };
        let mut aborted_txns = with_held(txn_sink.load_all()?);
        let lost = lost_txn_indexes(&aborted_txns, &aborted_counts, producers_from);
        if !lost.is_empty() {
            rebuild_txn_indexes(&log, &txn_sink, &lost, dispatched)?;
            aborted_txns = with_held(txn_sink.load_all()?);
        }
        txns.install(log.txns(), aborted_txns);
        let producer_ids = ProducerIds::load(&dir, producer_id_floor)?;

        let disk_reserve_bytes = super::disk_reserve_bytes(&config);
        let inner = Arc::new(Inner {
            config,
            log,
            queues,
            index,
            dispatcher,
            stop: AtomicBool::new(false),
            thread_restarts: AtomicU64::new(0),
            checkpoints: CheckpointWriter::default(),
            producer_ids: Mutex::new(producer_ids),
            wake: event_listener::Event::new(),
            retention: RetentionState {
                disk_available_bytes: AtomicU64::new(u64::MAX),
                ..RetentionState::default()
            },
            disk_reserve_bytes,
            txn_sink: Arc::clone(&txn_sink),
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
        crate::retention::pass::cleanup_indexes_below_log_start(
            &inner.log,
            &inner.queues,
            &inner.index,
        )?;
        inner.check_disk();
        let report = RecoveryReport {
            clean_shutdown: clean,
            scanned_from: recovered.scanned_from,
            end,
            records_scanned: recovered.records_scanned,
            truncated_bytes: recovered.truncated_bytes,
            records_replayed: replayed,
            elapsed: began.elapsed(),
            cut,
            held_back_bytes: end - dispatched,
        };
        tracing::info!(?report, "store open");
        let store = Store {
            inner,
            threads: Mutex::new(Vec::new()),
            recovery: report,
            closed: AtomicBool::new(false),
            replica: AtomicBool::new(false),
            _lock: lock,
        };
        store.start_threads()?;
        Ok(store)
    }
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
