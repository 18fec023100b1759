//! The LogCleaner: Kafka's log compaction over tidelog's compacted logs.
//!
//! Each of `cleaner.threads` named threads (`tidelog-cleaner-N`) loops:
//! housekeeping (roll idle active segments, retention of `compact,delete`
//! topics), then pick the filthiest log that is not in progress, paused or
//! uncleanable, clean it, advance the cleaner checkpoint. With nothing
//! eligible it sleeps `cleaner.backoff_ms` (an admin request wakes it).
//!
//! One pass over a log:
//! 1. Dirty range `[first_dirty, first_uncleanable)`: `first_dirty` from the
//!    cleaner-offset checkpoint (reset to the log start if out of range);
//!    `first_uncleanable` is the lowest of the active segment's base, the
//!    first segment with a record newer than `min.compaction.lag.ms`, and
//!    the end of the copies known durable (below).
//! 2. Build key fingerprint → newest offset over the dirty range, in the
//!    thread's share of `dedupe_buffer_bytes`. If the map fills, the pass
//!    covers only what it mapped (a partial pass); the next pass continues.
//! 3. Group the segments below the mapped end so a cleaned segment stays
//!    under `segment.bytes`; rewrite each group keeping a record unless a
//!    newer record of its key exists, or it is a tombstone whose delete
//!    horizon has passed and that lies below the mapped end (past it, the
//!    map may not know its key, whose older value this pass may keep: see
//!    `keep`). A tombstone kept for the first time is stamped
//!    with horizon now + `delete.retention.ms`.
//! 4. Swap each group in crash-safely (below), then store the checkpoint.
//!
//! The swap, and what a crash at each step leaves:
//! - write `<base>.log.cleaned`, fsync → crash: startup deletes `.cleaned`,
//!   the old segments are whole;
//! - rename to `<base>-<end>.swap`, fsync dir → from here the new data is
//!   the truth: startup deletes old segments with base in `[base, end)`
//!   and renames the swap file to `<base>.log`;
//! - swap in memory, delete the old files, rename `.swap` → `<base>.log`,
//!   fsync dir → crash anywhere here is finished the same way.
//!
//! Durable copies only. The dispatcher copies a record into its compacted
//! log as soon as the record is in the CommitLog's page cache, before the
//! CommitLog is flushed (always under `flush: async`, and under `sync` until
//! the group commit returns). After a power loss recovery drops the copies
//! whose CommitLog bytes were lost (`CompactedLog::truncate_from_physical`).
//! A pass that let such a copy supersede an older, durable record of its key
//! would lose the key: the older record cleaned away, the newer one dropped.
//! So a pass first notes the log's end, then makes the CommitLog durable
//! ([`CopySource::make_durable`]), and bounds `first_uncleanable` by the
//! noted end: every copy below it was dispatched from CommitLog bytes
//! written before that flush, so only durable copies are mapped, supersede
//! older records, or are rewritten.
//!
//! So a crash leaves either the old segments or the new one, never both
//! (which would duplicate keys) and never neither (which would lose them).
//!
//! A pass that fails instead (an I/O error, a panic) leaves the same files
//! a crash would, while the process goes on. Before the partition's next
//! pass its files are reconciled exactly as startup does
//! (`CompactedLog::reconcile`, which calls the same function as
//! `CompactedLog::open`) and its segment list rebuilt from them, so a retry
//! starts from a state with no `.cleaned` or `.swap` file: it cannot rename
//! onto an earlier pass's `.swap` and then delete it as an old segment, and
//! no stale `.swap` is left for a later open to apply over newer data.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::checkpoint::CleanerCheckpoint;
use crate::compacted::format::CompactedRecord;
use crate::compacted::log::{lock, segment_file_name, swap_file_name, CompactedLog};
use crate::compacted::segment::{Segment, SegmentReader, CLEANED_SUFFIX, LOG_SUFFIX};
use crate::compacted::{CompactTopicConfig, CompactedLogs};
use crate::error::{CleanerError, Result};
use crate::fault::{self, FaultPoint, Faults};
use crate::offset_map::{OffsetMap, PutOutcome, DEFAULT_LOAD_FACTOR};
use crate::throttle::Throttle;
use tidelog_storage::commit_log::CommitLog;
use tidelog_storage::fs_util::{self, offset_file_name};
use tidelog_storage::StoreError;

/// Where the compacted logs' copies come from: the CommitLog. A pass makes
/// it durable before it trusts any copy (module doc, "Durable copies only").
pub trait CopySource: Send + Sync {
    /// Make every CommitLog byte written so far durable.
    fn make_durable(&self) -> std::result::Result<(), StoreError>;
}

impl CopySource for CommitLog {
    fn make_durable(&self) -> std::result::Result<(), StoreError> {
        self.flush_all()
    }
}

/// A closure, for a cleaner whose compacted logs are fed without a
/// CommitLog (tests, tools).
impl<F> CopySource for F
where
    F: Fn() -> std::result::Result<(), StoreError> + Send + Sync,
{
    fn make_durable(&self) -> std::result::Result<(), StoreError> {
        self()
    }
}

/// `cleaner:` settings of broker.yaml (Kafka's defaults).
#[derive(Clone, Debug)]
pub struct CleanerConfig {
    pub threads: usize,
    /// Offset-map memory for all threads together.
    pub dedupe_buffer_bytes: usize,
    pub backoff_ms: u64,
    pub io_max_bytes_per_second: Option<u64>,
    pub load_factor: f64,
    /// Test seam: fail or panic at steps of the swap ([`crate::fault`]).
    /// `None` in production.
    pub faults: Option<Arc<Faults>>,
}

/// Most cleaner threads (`cleaner.threads`): far more than a single node's
/// disks can keep busy, and each holds a share of the offset map.
pub const THREADS_MAX: usize = 64;

/// Most offset-map memory one thread may hold: Kafka's cap, 2 GiB per
/// cleaner thread (its map is indexed by a 32-bit int). A larger
/// `dedupe_buffer_bytes` would be allocated at start and could take the
/// machine's memory before anything is cleaned.
pub const DEDUPE_BUFFER_BYTES_PER_THREAD_MAX: usize = 2 << 30;

/// Smallest offset map: room for a few dozen keys.
pub const DEDUPE_BUFFER_BYTES_MIN: usize = 1024;

impl CleanerConfig {
    /// The one range check of the `cleaner:` settings, used by
    /// `LogCleaner::new`, `tidelog serve` and `tidelog check-config`, so
    /// they accept and refuse the same values.
    pub fn validate(&self) -> Result<()> {
        let bad = |setting: &'static str, reason: String| {
            Err(CleanerError::InvalidConfig { setting, reason })
        };
        if !(1..=THREADS_MAX).contains(&self.threads) {
            return bad(
                "cleaner.threads",
                format!("{} is not in [1, {THREADS_MAX}]", self.threads),
            );
        }
        let buffer_max = DEDUPE_BUFFER_BYTES_PER_THREAD_MAX.saturating_mul(self.threads);
        if !(DEDUPE_BUFFER_BYTES_MIN..=buffer_max).contains(&self.dedupe_buffer_bytes) {
            return bad(
                "cleaner.dedupe_buffer_bytes",
                format!(
                    "{} is not in [{DEDUPE_BUFFER_BYTES_MIN}, {buffer_max}] (at most 2 GiB per cleaner thread, as in Kafka)",
                    self.dedupe_buffer_bytes
                ),
            );
        }
        if self.io_max_bytes_per_second == Some(0) {
            return bad(
                "cleaner.io_max_bytes_per_second",
                "0 is too small, the minimum is 1 (null: unthrottled)".into(),
            );
        }
        if !(self.load_factor > 0.0 && self.load_factor <= 1.0) {
            return bad(
                "cleaner.load_factor",
                format!("{} is not in (0, 1]", self.load_factor),
            );
        }
        Ok(())
    }
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            threads: 1,
            dedupe_buffer_bytes: 128 << 20,
            backoff_ms: 15_000,
            io_max_bytes_per_second: None,
            load_factor: DEFAULT_LOAD_FACTOR,
            faults: None,
        }
    }
}

/// Statistics of one cleaning pass (API.md's `last_run`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_kept: u64,
    pub records_removed: u64,
    pub duration_ms: u64,
    /// Fraction of the offset map used.
    pub map_utilization: f64,
    /// Keys the map held.
    pub keys: u64,
    pub first_dirty: u64,
    /// The checkpoint after the pass (end of what the map covered).
    pub end_offset: u64,
    /// The map filled before the dirty range ended.
    pub partial: bool,
    pub segments_cleaned: u64,
}

/// What an operator sees of one partition (API.md's compaction status).
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionStatus {
    pub partition: u32,
    /// `idle`, `in_progress`, `paused` or `uncleanable: <reason>`.
    pub state: String,
    pub dirty_ratio: f64,
    pub checkpoint_offset: Option<u64>,
    pub last_run: Option<RunStats>,
    pub runs: u64,
}

#[derive(Default)]
struct PartitionState {
    in_progress: bool,
    paused: bool,
    forced: bool,
    uncleanable: Option<(String, i64)>,
    last_run: Option<RunStats>,
    /// Passes started and finished; one at a time per partition, so the
    /// first pass to start after a request is number `started + 1`.
    started: u64,
    runs: u64,
    /// The last pass failed or panicked, possibly in the middle of a swap:
    /// the next one reconciles the files first (see the module doc).
    reconcile_first: bool,
}

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

struct Shared {
    logs: Arc<CompactedLogs>,
    source: Arc<dyn CopySource>,
    config: CleanerConfig,
    data_dir: PathBuf,
    checkpoint: Mutex<CleanerCheckpoint>,
    states: Mutex<HashMap<(String, u32), PartitionState>>,
    /// Signalled when work is requested or a run ends.
    changed: Condvar,
    stop: AtomicBool,
    throttle: Throttle,
    housekeeping: Mutex<()>,
    metrics: CleanerMetrics,
}

/// Dirty-range facts about one log.
#[derive(Clone, Debug)]
struct Cleanable {
    first_dirty: u64,
    first_uncleanable: u64,
    dirty_bytes: u64,
    ratio: f64,
    max_lag_due: bool,
    tombstones_due: bool,
    first_dirty_ts: Option<i64>,
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
        config.validate()?;
        let mut checkpoint = CleanerCheckpoint::load_or_empty(&data_dir)?;
        lower_past_the_end(&mut checkpoint, &logs, &data_dir)?;
        Ok(LogCleaner {
            shared: Arc::new(Shared {
                throttle: Throttle::new(config.io_max_bytes_per_second),
                logs,
                source,
                config,
                data_dir,
                checkpoint: Mutex::new(checkpoint),
                states: Mutex::new(HashMap::new()),
                changed: Condvar::new(),
                stop: AtomicBool::new(false),
                housekeeping: Mutex::new(()),
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
        let logs: Vec<_> = self
            .shared
            .logs
            .compact_logs()
            .into_iter()
            .filter(|(l, _)| l.topic_partition().topic() == topic)
            .collect();
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

    /// Per-partition status of a topic, for the admin API.
    pub fn status(&self, topic: &str) -> Vec<PartitionStatus> {
        let now = self.shared.logs.now_ms();
        let logs: Vec<_> = self
            .shared
            .logs
            .compact_logs()
            .into_iter()
            .filter(|(l, _)| l.topic_partition().topic() == topic)
            .collect();
        let cp = lock(&self.shared.checkpoint).clone();
        let states = lock(&self.shared.states);
        let mut out: Vec<_> = logs
            .iter()
            .map(|(log, cfg)| {
                let p = log.topic_partition().partition();
                let st = states.get(&(topic.to_string(), p));
                let state = match st {
                    Some(s) if s.in_progress => "in_progress".to_string(),
                    Some(s) if s.paused => "paused".to_string(),
                    Some(PartitionState {
                        uncleanable: Some((why, _)),
                        ..
                    }) => format!("uncleanable: {why}"),
                    _ => "idle".to_string(),
                };
                PartitionStatus {
                    partition: p,
                    state,
                    dirty_ratio: cleanable(log, cfg, cp.get(topic, p), now).ratio,
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

/// Run the loop; a panic is caught, counted, and the loop restarted.
fn supervise(shared: &Arc<Shared>, name: &str, mut map: OffsetMap) {
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

/// Recovery may have cut a compacted log below its cleaner checkpoint
/// (`CompactedLog::truncate_from_physical`): copies of records the CommitLog
/// lost, and copies past the store checkpoint, which its replay then copies
/// again. Either way the records from the cut on were never cleaned: those
/// that reuse lost offsets, and the replayed copies, superseded values
/// included, even where the replay brought the log's end back past the
/// checkpoint. Left above the cut, the checkpoint would take them for clean
/// ones: they would never be deduplicated among themselves, and a tombstone
/// among them could expire while an older value of its key stays, bringing
/// the key back. So the checkpoint is lowered to the cut (or to the end, if
/// that is lower), and stored, before the cleaner runs (Kafka lowers its
/// checkpoint when it truncates a log). The cleaner is created after the
/// store opened, so every cut of this start is known by then.
fn lower_past_the_end(
    checkpoint: &mut CleanerCheckpoint,
    logs: &CompactedLogs,
    data_dir: &std::path::Path,
) -> Result<()> {
    let past: Vec<(String, u32, u64, u64)> = checkpoint
        .iter()
        .filter_map(|(topic, p, offset)| {
            let log = logs.log(topic, p)?;
            let end = log
                .recovery_cut()
                .map_or(log.next_offset(), |cut| cut.min(log.next_offset()));
            (offset > end).then(|| (topic.to_string(), p, offset, end))
        })
        .collect();
    for (topic, p, offset, end) in &past {
        tracing::info!(
            topic,
            partition = p,
            checkpoint = offset,
            end,
            "cleaner checkpoint past where recovery cut the compacted log; lowered to the cut"
        );
        checkpoint.set(topic, *p, *end)?;
    }
    if !past.is_empty() {
        checkpoint.store(data_dir)?;
    }
    Ok(())
}

/// The dirty range and ratio of a log (see the module doc).
fn cleanable(
    log: &CompactedLog,
    cfg: &CompactTopicConfig,
    checkpoint: Option<u64>,
    now: i64,
) -> Cleanable {
    let segments = log.segments();
    let start = log.beginning_offset();
    let end = log.next_offset();
    let first_dirty = match checkpoint {
        Some(c) if c >= start && c <= end => c,
        Some(c) => {
            tracing::info!(tp = %log.topic_partition(), checkpoint = c, start, end, "cleaner checkpoint out of range; resetting to the log start");
            start
        }
        None => start,
    };
    let active_base = segments.last().map_or(end, |s| s.base_offset());
    let lag_limit = now.saturating_sub(cfg.min_compaction_lag_ms);
    let first_young = segments
        .iter()
        .find(|s| s.stats().max_store_ts_ms > lag_limit && !s.is_empty())
        .map_or(u64::MAX, |s| s.base_offset());
    let first_uncleanable = active_base.min(first_young);
    let mut clean_bytes = 0;
    let mut dirty_bytes = 0;
    let mut first_dirty_ts = None;
    let mut tombstones_due = false;
    for s in segments
        .iter()
        .filter(|s| s.base_offset() < first_uncleanable)
    {
        let st = s.stats();
        match st.last_offset {
            Some(last) if last >= first_dirty => {
                dirty_bytes += s.len();
                if first_dirty_ts.is_none() {
                    first_dirty_ts = st.first_store_ts_ms;
                }
            }
            Some(_) => clean_bytes += s.len(),
            None => {}
        }
        if st.min_tombstone_horizon_ms <= now {
            tombstones_due = true;
        }
    }
    let total = clean_bytes + dirty_bytes;
    let ratio = if total == 0 {
        0.0
    } else {
        dirty_bytes as f64 / total as f64
    };
    let max_lag_due = cfg.max_compaction_lag_ms != i64::MAX
        && first_dirty_ts.is_some_and(|t| t <= now.saturating_sub(cfg.max_compaction_lag_ms));
    Cleanable {
        first_dirty,
        first_uncleanable,
        dirty_bytes,
        ratio,
        max_lag_due,
        tombstones_due,
        first_dirty_ts,
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
        for s in sealed {
            let st = s.stats();
            let too_old = cfg.retention_ms >= 0
                && !s.is_empty()
                && st.max_store_ts_ms < now.saturating_sub(cfg.retention_ms);
            let too_big = cfg.retention_bytes >= 0 && total > cfg.retention_bytes as u64;
            if !(too_old || too_big) {
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

    /// The filthiest eligible log, marked in progress.
    fn pick(&self) -> Option<(Arc<CompactedLog>, CompactTopicConfig, Cleanable)> {
        let now = self.logs.now_ms();
        let cp = lock(&self.checkpoint).clone();
        let mut states = lock(&self.states);
        let mut best: Option<(bool, f64, Arc<CompactedLog>, CompactTopicConfig, Cleanable)> = None;
        let mut max_dirty = 0f64;
        for (log, cfg) in self.logs.compact_logs() {
            let tp = log.topic_partition();
            let st = states
                .entry((tp.topic().to_string(), tp.partition()))
                .or_default();
            if st.in_progress || st.paused {
                continue;
            }
            if let Some((_, retry_at)) = &st.uncleanable {
                if *retry_at > now && !st.forced {
                    continue;
                }
            }
            let info = cleanable(&log, &cfg, cp.get(tp.topic(), tp.partition()), now);
            max_dirty = max_dirty.max(info.ratio);
            let eligible = st.forced
                || (info.dirty_bytes > 0 && info.ratio > cfg.min_cleanable_dirty_ratio)
                || info.max_lag_due
                || info.tombstones_due;
            if !eligible {
                continue;
            }
            let better = match &best {
                None => true,
                Some((forced, ratio, ..)) => (st.forced, info.ratio) > (*forced, *ratio),
            };
            if better {
                best = Some((st.forced, info.ratio, Arc::clone(&log), cfg, info));
            }
        }
        self.metrics
            .max_dirty_percent
            .store((max_dirty * 100.0) as u64, Ordering::Relaxed);
        let (_, _, log, cfg, info) = best?;
        let tp = log.topic_partition();
        if let Some(st) = states.get_mut(&(tp.topic().to_string(), tp.partition())) {
            st.in_progress = true;
            st.forced = false;
            st.started += 1;
        }
        if let Some(ts) = info.first_dirty_ts {
            let delay = now
                .saturating_sub(ts)
                .saturating_sub(cfg.min_compaction_lag_ms)
                .max(0) as u64;
            self.metrics
                .max_compaction_delay_ms
                .store(delay, Ordering::Relaxed);
        }
        Some((log, cfg, info))
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

    /// The next record of `seg` through `reader`, counted in `stats` and
    /// the throttle as read.
    fn read_counted(
        &self,
        seg: &Segment,
        reader: &mut SegmentReader<'_>,
        stats: &mut RunStats,
    ) -> Result<Option<CompactedRecord>> {
        let rec = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(None),
            Err(why) => return Err(corrupt(seg, reader.position(), why)),
        };
        stats.bytes_read += rec.len() as u64;
        self.throttle.account(rec.len() as u64);
        Ok(Some(rec))
    }

    /// If the partition's last pass failed, reconcile its files and
    /// segment list (module doc) and return its dirty range anew, computed
    /// over the segments as they are now. `None`: nothing to do. A failure
    /// here fails the pass, and the next one tries again.
    fn reconcile_after_failure(
        &self,
        log: &CompactedLog,
        cfg: &CompactTopicConfig,
        now: i64,
    ) -> Result<Option<Cleanable>> {
        let tp = log.topic_partition();
        let key = (tp.topic().to_string(), tp.partition());
        if !lock(&self.states)
            .get(&key)
            .is_some_and(|s| s.reconcile_first)
        {
            return Ok(None);
        }
        log.reconcile()?;
        lock(&self.states).entry(key).or_default().reconcile_first = false;
        let checkpoint = lock(&self.checkpoint).get(tp.topic(), tp.partition());
        Ok(Some(cleanable(log, cfg, checkpoint, now)))
    }

    /// One cleaning pass over `log`.
    fn run(
        &self,
        log: &CompactedLog,
        cfg: &CompactTopicConfig,
        info: &Cleanable,
        map: &mut OffsetMap,
    ) -> Result<RunStats> {
        let began = Instant::now();
        let now = self.logs.now_ms();
        let refreshed;
        let info = match self.reconcile_after_failure(log, cfg, now)? {
            Some(fresh) => {
                refreshed = fresh;
                &refreshed
            }
            None => info,
        };
        // Durable copies only (module doc): note the end, then flush.
        let durable_end = log.next_offset();
        self.source
            .make_durable()
            .map_err(|source| CleanerError::Store {
                path: self.data_dir.join(tidelog_storage::store::COMMITLOG_DIR),
                source,
            })?;
        let bounded = Cleanable {
            first_uncleanable: info.first_uncleanable.min(durable_end),
            ..info.clone()
        };
        let info = &bounded;
        let mut stats = RunStats {
            first_dirty: info.first_dirty,
            end_offset: info.first_dirty,
            ..RunStats::default()
        };
        map.clear();
        // 1. Map the dirty range.
        let segments = log.segments();
        'build: for seg in segments.iter().filter(|s| {
            s.base_offset() < info.first_uncleanable
                && s.stats().last_offset.is_some_and(|l| l >= info.first_dirty)
        }) {
            let mut reader = seg.reader(seg.position_for(info.first_dirty));
            while let Some(rec) = self.read_counted(seg, &mut reader, &mut stats)? {
                if rec.offset < info.first_dirty {
                    continue;
                }
                if rec.offset >= info.first_uncleanable {
                    break 'build;
                }
                let Some(key) = rec.key() else { continue };
                match map.put(&key, rec.offset) {
                    PutOutcome::Stored => stats.end_offset = rec.offset + 1,
                    PutOutcome::Full => {
                        stats.partial = true;
                        break 'build;
                    }
                    PutOutcome::BelowBase => {
                        return Err(corrupt(
                            seg,
                            reader.position(),
                            format!("offset {} out of order", rec.offset),
                        ));
                    }
                }
            }
        }
        stats.keys = map.len() as u64;
        stats.map_utilization = map.utilization();
        // 2. Which segments to rewrite: everything below the mapped end; on
        // a tombstone-only pass, everything cleanable.
        let upper = if info.tombstones_due {
            stats.end_offset.max(info.first_uncleanable)
        } else {
            stats.end_offset
        };
        let active_base = segments.last().map_or(u64::MAX, |s| s.base_offset());
        let to_clean: Vec<Arc<Segment>> = segments
            .iter()
            .filter(|s| s.base_offset() < upper && s.base_offset() < active_base)
            .cloned()
            .collect();
        // 3. Group adjacent segments so each cleaned one stays under
        // segment.bytes.
        let mut groups: Vec<Vec<Arc<Segment>>> = Vec::new();
        let mut size = 0;
        for s in to_clean {
            match groups.last_mut() {
                Some(g) if size + s.len() <= cfg.segment_bytes => {
                    size += s.len();
                    g.push(s);
                }
                _ => {
                    size = s.len();
                    groups.push(vec![s]);
                }
            }
        }
        for group in groups {
            self.clean_group(log, cfg, &group, &segments, map, now, &mut stats)?;
            stats.segments_cleaned += group.len() as u64;
            if self.stop.load(Ordering::Acquire) {
                break;
            }
        }
        stats.duration_ms = began.elapsed().as_millis() as u64;
        Ok(stats)
    }

    #[allow(clippy::too_many_arguments)]
    fn clean_group(
        &self,
        log: &CompactedLog,
        cfg: &CompactTopicConfig,
        group: &[Arc<Segment>],
        all: &[Arc<Segment>],
        map: &OffsetMap,
        now: i64,
        stats: &mut RunStats,
    ) -> Result<()> {
        let Some(first) = group.first() else {
            return Ok(());
        };
        let base = first.base_offset();
        let last_base = group.last().map_or(base, |s| s.base_offset());
        // The segment after the group bounds what the swap replaces. It
        // exists: the active segment is never in a group.
        let end = all
            .iter()
            .find(|s| s.base_offset() > last_base)
            .map(|s| s.base_offset())
            .ok_or_else(|| CleanerError::InvalidConfig {
                setting: "internal",
                reason: "a cleaning group reached the active segment".into(),
            })?;
        let dir = log.dir();
        let cleaned_path = dir.join(format!(
            "{}{LOG_SUFFIX}{CLEANED_SUFFIX}",
            offset_file_name(base)
        ));
        let _ = std::fs::remove_file(&cleaned_path);
        let cleaned = Arc::new(Segment::create(
            cleaned_path.clone(),
            base,
            first.created_ms(),
        )?);
        for seg in group {
            let mut reader = seg.reader(0);
            while let Some(rec) = self.read_counted(seg, &mut reader, stats)? {
                if !keep(&rec, map, stats.end_offset, now) {
                    stats.records_removed += 1;
                    continue;
                }
                let rec = if rec.is_tombstone() && rec.delete_horizon_ms == 0 {
                    rec.with_delete_horizon(now.saturating_add(cfg.delete_retention_ms))
                } else {
                    rec
                };
                self.fault(FaultPoint::WriteCleaned, &cleaned_path)?;
                cleaned.append(&rec)?;
                stats.records_kept += 1;
                stats.bytes_written += rec.len() as u64;
                self.throttle.account(rec.len() as u64);
            }
        }
        self.fault(FaultPoint::SyncCleaned, &cleaned_path)?;
        cleaned.flush()?;
        let swap_path = dir.join(swap_file_name(base, end));
        // Renaming over an earlier pass's swap file would replace a segment
        // that may be in the list, and then delete it as an old one. The
        // reconcile before a retry removes every such file; this is the
        // check that it did.
        if swap_path.exists() {
            return Err(CleanerError::LeftoverSwap { path: swap_path });
        }
        self.fault(FaultPoint::RenameToSwap, &swap_path)?;
        cleaned.rename(swap_path)?;
        self.fault(FaultPoint::SyncDirAfterSwap, dir)?;
        fsync_dir(dir)?;
        let old = log.swap_in(base, end, Arc::clone(&cleaned));
        for o in &old {
            let p = o.path();
            self.fault(FaultPoint::DeleteOld, &p)?;
            std::fs::remove_file(&p).map_err(|e| CleanerError::Io { path: p, source: e })?;
        }
        let log_path = dir.join(segment_file_name(base));
        self.fault(FaultPoint::RenameToLog, &log_path)?;
        cleaned.rename(log_path)?;
        self.fault(FaultPoint::SyncDirAfterLog, dir)?;
        fsync_dir(dir)?;
        Ok(())
    }

    /// The test seam ([`crate::fault`]): an I/O error on `path` if the
    /// operation at `point` is to fail.
    fn fault(&self, point: FaultPoint, path: &std::path::Path) -> Result<()> {
        fault::check(&self.config.faults, point).map_err(|source| CleanerError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// Kafka's retention rule for a record being rewritten by a pass whose map
/// covers the offsets below `mapped_end`.
///
/// An expired tombstone goes only if it is below `mapped_end`. Then every
/// older record of its key goes in the same pass or went before: the map of
/// this pass or of an earlier one (the mapped ranges follow each other from
/// the checkpoint) holds the key at the tombstone's offset or later, and
/// every pass rewrites the log from its start. A tombstone past the mapped
/// end (in the segment where a full map stopped, or one a tombstone pass
/// reaches) is kept: this map may not know its key, so an older value of
/// the key can be kept by this pass, and dropping the tombstone would bring
/// the deleted key back. A later pass maps it and drops both.
fn keep(
    rec: &crate::compacted::CompactedRecord,
    map: &OffsetMap,
    mapped_end: u64,
    now: i64,
) -> bool {
    let Some(key) = rec.key() else { return true };
    if map.get(&key).is_some_and(|latest| latest > rec.offset) {
        return false; // a newer record of this key exists
    }
    if rec.is_tombstone()
        && rec.delete_horizon_ms != 0
        && rec.delete_horizon_ms <= now
        && rec.offset < mapped_end
    {
        return false; // tombstone kept long enough
    }
    true
}

fn corrupt(seg: &Segment, position: u64, why: String) -> CleanerError {
    CleanerError::Corruption {
        path: seg.path(),
        line: 0,
        reason: format!("at byte {position}: {why}"),
    }
}

fn fsync_dir(dir: &std::path::Path) -> Result<()> {
    fs_util::fsync_dir(dir).map_err(|e| CleanerError::Store {
        path: dir.to_path_buf(),
        source: e,
    })
}
