//! The cleaner's threads: [`LogCleaner`] and its API.
//!
//! Each of `cleaner.threads` named threads (`tidelog-cleaner-N`) loops:
//! housekeeping (roll idle active segments, retention of `compact,delete`
//! topics), then pick the filthiest log that is not in progress, paused or
//! uncleanable, clean it, advance the cleaner checkpoint. With nothing
//! eligible it sleeps `cleaner.backoff_ms` (an admin request wakes it).
//!
//! A pass runs on one thread at a time per partition (`in_progress`). A
//! thread that panics is restarted by [`supervise`], counted in
//! `thread_restarts`; the passes it left in progress are marked to
//! reconcile first, as a failed pass is (see [`super::swap`]). A failed
//! pass marks its partition uncleanable until `cleaner.backoff_ms` passes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::select::{cleanable, lower_past_the_end};
use super::{
    CleanState, CleanerConfig, CopySource, PartitionState, PartitionStatus, RunStats, Shared,
};
use crate::checkpoint::CleanerCheckpoint;
use crate::compacted::log::{lock, CompactedLog};
use crate::compacted::{CompactTopicConfig, CompactedLogs};
use crate::error::{CleanerError, Result};
use crate::fault::FaultHandle;
use crate::offset_map::OffsetMap;
use crate::throttle::Throttle;

/// Kafka's cleaner metrics.
#[derive(Debug, Default)]
pub struct CleanerMetrics {
    pub max_dirty_percent: AtomicU64,
    pub recopy_percent: AtomicU64,
    pub max_clean_time_ms: AtomicU64,
    pub max_compaction_delay_ms: AtomicU64,
    pub last_run_end_ms: AtomicU64,
    pub thread_restarts: AtomicU64,
    pub buffer_utilization_permille: AtomicU64,
    pub runs: AtomicU64,
    pub failures: AtomicU64,
}

/// A snapshot for `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct CleanerMetricsSnapshot {
    pub max_dirty_percent: u64,
    pub recopy_percent: u64,
    pub max_clean_time_ms: u64,
    pub max_compaction_delay_ms: u64,
    pub time_since_last_run_ms: u64,
    pub uncleanable_partitions: u64,
    pub uncleanable_bytes: u64,
    pub thread_restarts: u64,
    pub buffer_utilization: f64,
    pub runs: u64,
    pub failures: u64,
}

pub struct LogCleaner {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl LogCleaner {
    /// Load the cleaner checkpoint (a corrupt one reads as empty: every log
    /// is cleaned again, which is always safe). `source` is the CommitLog
    /// the logs' copies come from. Threads start with [`LogCleaner::start`].
    pub fn new<S: CopySource + 'static>(
        logs: Arc<CompactedLogs>,
        data_dir: PathBuf,
        config: CleanerConfig,
        source: Arc<S>,
    ) -> Result<LogCleaner> {
        Self::new_inner(logs, data_dir, config, source, FaultHandle::default())
    }

    /// [`LogCleaner::new`] with a fault plan the swap checks at each
    /// [`FaultPoint`](crate::fault::FaultPoint) (tests only: the
    /// `failpoints` feature).
    #[cfg(feature = "failpoints")]
    pub fn new_with_faults<S: CopySource + 'static>(
        logs: Arc<CompactedLogs>,
        data_dir: PathBuf,
        config: CleanerConfig,
        source: Arc<S>,
        faults: Arc<crate::fault::Faults>,
    ) -> Result<LogCleaner> {
        Self::new_inner(logs, data_dir, config, source, FaultHandle::new(faults))
    }

    fn new_inner<S: CopySource + 'static>(
        logs: Arc<CompactedLogs>,
        data_dir: PathBuf,
        config: CleanerConfig,
        source: Arc<S>,
        faults: FaultHandle,
    ) -> Result<LogCleaner> {
        config.validate()?;
        let mut checkpoint = CleanerCheckpoint::load_or_empty(&data_dir)?;
        lower_past_the_end(&mut checkpoint, &logs, &data_dir)?;
        Ok(LogCleaner {
            shared: Arc::new(Shared {
                throttle: Throttle::new(config.io_max_bytes_per_second),
                logs,
                source,
                config,
                faults,
                data_dir,
                checkpoint: Mutex::new(checkpoint),
                states: Mutex::new(HashMap::new()),
                changed: Condvar::new(),
                stop: AtomicBool::new(false),
                housekeeping: Mutex::new(()),
                retired: Mutex::new(Vec::new()),
                metrics: CleanerMetrics::default(),
            }),
            threads: Mutex::new(Vec::new()),
        })
    }

    /// Start `cleaner.threads` threads, each with its share of the buffer.
    pub fn start(&self) -> Result<()> {
        let per_thread = self.shared.config.dedupe_buffer_bytes / self.shared.config.threads;
        let mut threads = lock(&self.threads);
        for i in 0..self.shared.config.threads {
            let shared = Arc::clone(&self.shared);
            // Allocate before spawning, so a too-large buffer is a clear
            // startup error rather than a dead thread.
            let map = OffsetMap::new(per_thread, shared.config.load_factor)?;
            let name = format!("tidelog-cleaner-{i}");
            let handle = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || supervise(&shared, &name, map))
                .map_err(|e| CleanerError::Io {
                    path: PathBuf::from("thread"),
                    source: e,
                })?;
            threads.push(handle);
        }
        Ok(())
    }

    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.changed.notify_all();
        for t in lock(&self.threads).drain(..) {
            let _ = t.join();
        }
    }

    /// Unlink the old segment files that finished swaps renamed aside
    /// (`<base>.log.deleted`), as each housekeeping step does first; returns
    /// how many. Tests and tools (the compaction bench times it apart from
    /// the pass).
    pub fn delete_retired(&self) -> Result<usize> {
        self.shared.delete_retired()
    }

    pub fn logs(&self) -> &Arc<CompactedLogs> {
        &self.shared.logs
    }

    /// Ask for a pass over every partition of `topic` now, whatever the
    /// dirty ratio; with `roll_active`, the active segments roll first so
    /// everything written so far can be cleaned. Returns each partition with
    /// the number of passes started before the request (for
    /// [`LogCleaner::wait`]: a pass in progress now does not count).
    pub fn request(&self, topic: &str, roll_active: bool) -> Result<Vec<(u32, u64)>> {
        let now = self.shared.logs.now_ms();
        let mut out = Vec::new();
        let logs = self.topic_logs(topic);
        for (log, _) in &logs {
            if roll_active {
                log.roll(now)?;
            }
        }
        let mut states = lock(&self.shared.states);
        for (log, _) in &logs {
            let p = log.topic_partition().partition();
            let st = states.entry((topic.to_string(), p)).or_default();
            st.forced = true;
            st.uncleanable = None;
            out.push((p, st.started));
        }
        drop(states);
        self.shared.changed.notify_all();
        out.sort_unstable();
        Ok(out)
    }

    /// Wait until each `(partition, runs_before)` has finished a run after
    /// the request, or `timeout`. Returns each partition's last run.
    pub fn wait(
        &self,
        topic: &str,
        requested: &[(u32, u64)],
        timeout: Duration,
    ) -> Vec<(u32, Option<RunStats>)> {
        let deadline = Instant::now() + timeout;
        let mut states = lock(&self.shared.states);
        loop {
            let done = requested.iter().all(|(p, before)| {
                states
                    .get(&(topic.to_string(), *p))
                    .is_none_or(|s| s.runs > *before || s.uncleanable.is_some())
            });
            let now = Instant::now();
            if done || now >= deadline || self.shared.stop.load(Ordering::Acquire) {
                return requested
                    .iter()
                    .map(|(p, _)| {
                        (
                            *p,
                            states
                                .get(&(topic.to_string(), *p))
                                .and_then(|s| s.last_run.clone()),
                        )
                    })
                    .collect();
            }
            states = self
                .shared
                .changed
                .wait_timeout(states, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Stop cleaning a partition until [`LogCleaner::resume`]; waits for a
    /// pass in progress to end.
    pub fn pause(&self, topic: &str, partition: u32) {
        let mut states = lock(&self.shared.states);
        states
            .entry((topic.to_string(), partition))
            .or_default()
            .paused = true;
        while states
            .get(&(topic.to_string(), partition))
            .is_some_and(|s| s.in_progress)
        {
            states = self
                .shared
                .changed
                .wait(states)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    pub fn resume(&self, topic: &str, partition: u32) {
        let mut states = lock(&self.shared.states);
        states
            .entry((topic.to_string(), partition))
            .or_default()
            .paused = false;
        drop(states);
        self.shared.changed.notify_all();
    }

    /// A topic is deleted: pause its partitions, drop its logs and its
    /// checkpoint entries.
    pub fn remove_topic(&self, topic: &str) -> Result<()> {
        let partitions: Vec<u32> = self
            .shared
            .logs
            .all_logs()
            .iter()
            .filter(|l| l.topic_partition().topic() == topic)
            .map(|l| l.topic_partition().partition())
            .collect();
        for &p in &partitions {
            self.pause(topic, p);
        }
        self.shared.logs.remove_topic(topic)?;
        {
            let mut cp = lock(&self.shared.checkpoint);
            cp.remove_topic(topic);
            cp.store(&self.shared.data_dir)?;
        }
        let mut states = lock(&self.shared.states);
        states.retain(|(t, _), _| t != topic);
        Ok(())
    }

    /// The compacted logs of `topic`, with their configs.
    fn topic_logs(&self, topic: &str) -> Vec<(Arc<CompactedLog>, CompactTopicConfig)> {
        self.shared
            .logs
            .compact_logs()
            .into_iter()
            .filter(|(l, _)| l.topic_partition().topic() == topic)
            .collect()
    }

    /// Per-partition status of a topic, for the admin API.
    pub fn status(&self, topic: &str) -> Vec<PartitionStatus> {
        let now = self.shared.logs.now_ms();
        let logs = self.topic_logs(topic);
        let cp = lock(&self.shared.checkpoint).clone();
        let states = lock(&self.shared.states);
        let mut out: Vec<_> = logs
            .iter()
            .map(|(log, cfg)| {
                let p = log.topic_partition().partition();
                let st = states.get(&(topic.to_string(), p));
                let state = match st {
                    Some(s) if s.in_progress => CleanState::InProgress,
                    Some(s) if s.paused => CleanState::Paused,
                    Some(PartitionState {
                        uncleanable: Some((why, _)),
                        ..
                    }) => CleanState::Uncleanable {
                        reason: why.clone(),
                    },
                    _ => CleanState::Idle,
                };
                PartitionStatus {
                    partition: p,
                    state,
                    dirty_ratio: cleanable(
                        log,
                        cfg,
                        cp.get(topic, p),
                        self.shared.stable_end(log),
                        now,
                    )
                    .ratio,
                    checkpoint_offset: cp.get(topic, p),
                    last_run: st.and_then(|s| s.last_run.clone()),
                    runs: st.map_or(0, |s| s.runs),
                }
            })
            .collect();
        out.sort_by_key(|s| s.partition);
        out
    }

    pub fn metrics(&self) -> CleanerMetricsSnapshot {
        let m = &self.shared.metrics;
        let now = self.shared.logs.now_ms().max(0) as u64;
        let last = m.last_run_end_ms.load(Ordering::Relaxed);
        let states = lock(&self.shared.states);
        let mut uncleanable = 0;
        let mut uncleanable_bytes = 0;
        for ((t, p), s) in states.iter() {
            if s.uncleanable.is_some() {
                uncleanable += 1;
                uncleanable_bytes += self.shared.logs.log(t, *p).map_or(0, |l| l.size_bytes());
            }
        }
        CleanerMetricsSnapshot {
            max_dirty_percent: m.max_dirty_percent.load(Ordering::Relaxed),
            recopy_percent: m.recopy_percent.load(Ordering::Relaxed),
            max_clean_time_ms: m.max_clean_time_ms.load(Ordering::Relaxed),
            max_compaction_delay_ms: m.max_compaction_delay_ms.load(Ordering::Relaxed),
            time_since_last_run_ms: if last == 0 {
                0
            } else {
                now.saturating_sub(last)
            },
            uncleanable_partitions: uncleanable,
            uncleanable_bytes,
            thread_restarts: m.thread_restarts.load(Ordering::Relaxed),
            buffer_utilization: m.buffer_utilization_permille.load(Ordering::Relaxed) as f64
                / 1000.0,
            runs: m.runs.load(Ordering::Relaxed),
            failures: m.failures.load(Ordering::Relaxed),
        }
    }

    /// Run one pass on the calling thread (tests and tools): housekeeping,
    /// then clean the filthiest eligible log with `map`. Returns what it
    /// cleaned.
    pub fn clean_once(&self, map: &mut OffsetMap) -> Result<Option<(String, u32, RunStats)>> {
        self.shared.housekeeping()?;
        let Some((log, cfg, info)) = self.shared.pick() else {
            return Ok(None);
        };
        let tp = log.topic_partition().clone();
        let res = self.shared.run(&log, &cfg, &info, map);
        self.shared.finish(&log, &res);
        res.map(|s| Some((tp.topic().to_string(), tp.partition(), s)))
    }
}

impl Drop for LogCleaner {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How much lower than the process's CPU priority the cleaner threads run
/// (nice increment). Cleaning is background work that can always wait; on
/// a machine whose cores the producers, the dispatcher and the flusher
/// already keep busy, a cleaner at the same priority takes a core's share
/// from them and produce slows while a pass runs (RocksDB lowers its
/// compaction threads' priority for the same reason). At +10 the kernel
/// gives it about a tenth of a contended core and all of an idle one.
pub const CLEANER_NICE_INCREMENT: i32 = 10;

/// Lower the calling thread's CPU priority by [`CLEANER_NICE_INCREMENT`].
/// On Linux the nice value belongs to the thread (`PRIO_PROCESS` with id 0
/// is the calling thread, see setpriority(2)); elsewhere it would be the
/// whole process's, so nothing is done there. A refusal is logged, not
/// fatal: the cleaner is only slower to yield.
fn lower_cpu_priority(name: &str) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getpriority and setpriority take plain integers and touch
        // no memory of ours. A -1 from getpriority may be a real nice of -1;
        // for the calling thread it cannot fail.
        let current = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let target = (current + CLEANER_NICE_INCREMENT).min(19);
        // SAFETY: as above.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, target) } != 0 {
            let error = std::io::Error::last_os_error();
            tracing::warn!(thread = name, %error, "could not lower the cleaner thread's CPU priority");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = name;
}

/// Run the loop; a panic is caught, counted, and the loop restarted.
fn supervise(shared: &Arc<Shared>, name: &str, mut map: OffsetMap) {
    lower_cpu_priority(name);
    loop {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shared.thread_loop(&mut map)
        }));
        if r.is_ok() || shared.stop.load(Ordering::Acquire) {
            return;
        }
        shared
            .metrics
            .thread_restarts
            .fetch_add(1, Ordering::Relaxed);
        tracing::error!(thread = name, "cleaner thread panicked; restarting it");
        // Whatever it held is released: clear in-progress marks it left.
        // A pass it was running may have stopped mid-swap.
        for s in lock(&shared.states).values_mut() {
            if s.in_progress {
                s.in_progress = false;
                s.reconcile_first = true;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Shared {
    fn thread_loop(&self, map: &mut OffsetMap) {
        while !self.stop.load(Ordering::Acquire) {
            if let Err(e) = self.housekeeping() {
                tracing::warn!(error = %e, "cleaner housekeeping failed");
            }
            match self.pick() {
                Some((log, cfg, info)) => {
                    let res = self.run(&log, &cfg, &info, map);
                    self.finish(&log, &res);
                }
                None => {
                    let states = lock(&self.states);
                    if self.stop.load(Ordering::Acquire) {
                        return;
                    }
                    let _ = self
                        .changed
                        .wait_timeout(states, Duration::from_millis(self.config.backoff_ms.max(1)));
                }
            }
        }
    }

    /// Roll idle active segments and apply `compact,delete` retention. One
    /// thread at a time; others skip it.
    fn housekeeping(&self) -> Result<()> {
        let Ok(_g) = self.housekeeping.try_lock() else {
            return Ok(());
        };
        // What the last passes' swaps renamed aside (swap.rs).
        self.delete_retired()?;
        let now = self.logs.now_ms();
        for (log, cfg) in self.logs.compact_logs() {
            log.roll_if_old(cfg.roll_policy().segment_ms, now)?;
            if !cfg.delete_too {
                continue;
            }
            let key = (
                log.topic_partition().topic().to_string(),
                log.topic_partition().partition(),
            );
            {
                let mut states = lock(&self.states);
                let st = states.entry(key.clone()).or_default();
                if st.in_progress || st.paused {
                    continue;
                }
                st.in_progress = true;
            }
            let res = self.apply_retention(&log, &cfg, now);
            lock(&self.states).entry(key).or_default().in_progress = false;
            self.changed.notify_all();
            res?;
        }
        Ok(())
    }

    fn apply_retention(
        &self,
        log: &CompactedLog,
        cfg: &CompactTopicConfig,
        now: i64,
    ) -> Result<()> {
        let segments = log.segments();
        let sealed = &segments[..segments.len().saturating_sub(1)];
        let mut total: u64 = segments.iter().map(|s| s.len()).sum();
        let mut n = 0;
        let log_start = log.log_start();
        for s in sealed {
            let st = s.stats();
            let too_old = cfg.retention_ms >= 0
                && !s.is_empty()
                && st.max_store_ts_ms < now.saturating_sub(cfg.retention_ms);
            let too_big = cfg.retention_bytes >= 0 && total > cfg.retention_bytes as u64;
            // Wholly below the log start DeleteRecords moved (Kafka's
            // log-start-offset breach).
            let deleted = st.last_offset.is_some_and(|last| last < log_start);
            if !(too_old || too_big || deleted) {
                break;
            }
            total -= s.len();
            n += 1;
        }
        if n > 0 {
            let (segs, bytes) = log.delete_oldest(n)?;
            tracing::info!(tp = %log.topic_partition(), segments = segs, bytes, "compact,delete retention removed old compacted segments");
        }
        Ok(())
    }

    /// Record the end of a pass: stats, checkpoint, or the failure.
    fn finish(&self, log: &CompactedLog, res: &Result<RunStats>) {
        let tp = log.topic_partition();
        let key = (tp.topic().to_string(), tp.partition());
        let now = self.logs.now_ms();
        match res {
            Ok(stats) => {
                let stored = {
                    let mut cp = lock(&self.checkpoint);
                    cp.set(tp.topic(), tp.partition(), stats.end_offset)
                        .and_then(|_| cp.store(&self.data_dir))
                };
                if let Err(e) = stored {
                    tracing::error!(error = %e, "could not store the cleaner checkpoint");
                }
                let m = &self.metrics;
                m.runs.fetch_add(1, Ordering::Relaxed);
                m.last_run_end_ms
                    .store(now.max(0) as u64, Ordering::Relaxed);
                m.max_clean_time_ms
                    .store(stats.duration_ms, Ordering::Relaxed);
                m.buffer_utilization_permille
                    .store((stats.map_utilization * 1000.0) as u64, Ordering::Relaxed);
                if let Some(pct) = (stats.bytes_written * 100).checked_div(stats.bytes_read) {
                    m.recopy_percent.store(pct, Ordering::Relaxed);
                }
                tracing::info!(tp = %tp, ?stats, "cleaned");
            }
            Err(e) => {
                self.metrics.failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(tp = %tp, error = %e, backoff_ms = self.config.backoff_ms, "cleaning failed; partition marked uncleanable and retried after the backoff");
            }
        }
        let mut states = lock(&self.states);
        let st = states.entry(key).or_default();
        st.in_progress = false;
        st.runs += 1;
        match res {
            Ok(stats) => {
                st.last_run = Some(stats.clone());
                st.uncleanable = None;
            }
            Err(e) => {
                st.uncleanable = Some((
                    e.to_string(),
                    now.saturating_add(self.config.backoff_ms as i64),
                ));
                st.reconcile_first = true;
            }
        }
        drop(states);
        self.changed.notify_all();
    }
}
