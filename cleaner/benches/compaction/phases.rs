//! The measured steps: one cleaning pass ([`clean`], its deferred unlink
//! timed apart), the split of its work into scan / map-build / map-lookup
//! passes ([`scan`]), the default offset map filled to its limit
//! ([`fill_map`]), and produce through the real store in slices
//! ([`produce`], [`Slices`], [`pooled_rates`]).
//!
//! Each step runs on a named thread where its CPU is read
//! (`bench-clean`, `bench-scan`, `bench-produce`), and prints progress
//! every `PROGRESS_EVERY`; what it returns is what the summary prints.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tidelog_cleaner::compacted::segment::DELETED_SUFFIX;
use tidelog_cleaner::{
    CleanerConfig, CompactedLog, CompactedLogs, LogCleaner, OffsetMap, RunStats,
};
use tidelog_storage::test_rng::SplitMix64 as Rng;
use tidelog_storage::{AppendRecord, Store};

use crate::plan::{
    BATCH_RECORDS, KAFKA_BYTES_PER_ENTRY, PRODUCE_PARTITIONS, PROGRESS_EVERY, TOPIC, VALUE_BYTES,
};
use crate::setup::key_bytes;
use crate::system::{dir_bytes, mb, thread_cpu};

/// Bytes of `.cleaned`/`.swap` files in `dir`: the cleaner's output so far.
pub(crate) fn cleaning_output(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.ends_with(".cleaned") || n.ends_with(".swap")
                })
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// One `clean_once` with the default config and map, on a thread named
/// `bench-clean`, printing progress, then (timed apart, not in the pass's
/// time) the unlink of the old segments its swaps renamed aside, which a
/// cleaner thread's next housekeeping does. Returns (wall time of the
/// pass, stats, wall time of the deferred deletion).
pub(crate) fn clean(
    logs: &Arc<CompactedLogs>,
    data_dir: &Path,
    label: &str,
) -> (Duration, RunStats, Duration) {
    let config = CleanerConfig::default();
    // Compacted logs filled directly: no CommitLog to make durable.
    let no_commit_log = Arc::new(|| Ok::<(), tidelog_storage::StoreError>(()));
    let cleaner = LogCleaner::new(
        Arc::clone(logs),
        data_dir.to_path_buf(),
        config.clone(),
        no_commit_log,
    )
    .unwrap();
    let mut map = OffsetMap::new(
        config.dedupe_buffer_bytes / config.threads,
        config.load_factor,
    )
    .unwrap();
    let part_dir = logs.log(TOPIC, 0).unwrap().dir().to_path_buf();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let worker = std::thread::Builder::new()
            .name("bench-clean".into())
            .spawn_scoped(s, || {
                let began = Instant::now();
                let cpu_before = thread_cpu();
                let out = cleaner.clean_once(&mut map).unwrap();
                let took = began.elapsed();
                let cpu = thread_cpu() - cpu_before;
                eprintln!(
                    "  {label}: the pass took {:.3} s of its thread's CPU in {:.3} s",
                    cpu.as_secs_f64(),
                    took.as_secs_f64()
                );
                let began = Instant::now();
                let deleted = cleaner.delete_retired().unwrap();
                let delete_took = began.elapsed();
                done.store(true, Ordering::Release);
                let (_, _, stats) = out.expect("the log was eligible");
                eprintln!(
                    "  {label}: then the deferred deletion of {deleted} old segment files: {:.3} s",
                    delete_took.as_secs_f64()
                );
                (took, stats, delete_took)
            })
            .unwrap();
        let began = Instant::now();
        let mut last_report = began;
        while !done.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(20));
            if last_report.elapsed() >= PROGRESS_EVERY {
                last_report = Instant::now();
                eprintln!(
                    "  {label}: cleaning, {:.1} s, output file being written: {:.1} MB, segments now {}",
                    began.elapsed().as_secs_f64(),
                    mb(cleaning_output(&part_dir)),
                    dir_bytes(&part_dir).1
                );
            }
        }
        worker.join().unwrap()
    })
}

#[derive(Default)]
pub(crate) struct Scan {
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    pub(crate) took: Duration,
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum ScanMode {
    /// Read + decode (CRC, header checks) only.
    Decode,
    /// Plus `OffsetMap::put` of every key (the cleaner's map build).
    Put,
    /// Plus `OffsetMap::get` of every key (the rewrite's filter, no write).
    Get,
}

/// Walk every sealed segment of `log` the way the cleaner does.
pub(crate) fn scan(log: &CompactedLog, mode: ScanMode, map: &mut OffsetMap) -> Scan {
    let mut out = Scan::default();
    let began = Instant::now();
    if mode == ScanMode::Put {
        // Sized as a pass sizes it: by the records it maps.
        map.clear_for(log.segments().iter().map(|s| s.stats().records).sum());
    }
    for seg in log.segments() {
        let mut r = seg.reader(0);
        while let Some(rec) = r.next_record().unwrap() {
            out.records += 1;
            out.bytes += rec.len() as u64;
            match mode {
                ScanMode::Decode => {}
                ScanMode::Put => {
                    let k = rec.key().unwrap();
                    assert_eq!(
                        map.put(&k, rec.offset.get()),
                        tidelog_cleaner::PutOutcome::Stored
                    );
                }
                ScanMode::Get => {
                    let k = rec.key().unwrap();
                    std::hint::black_box(map.get(&k));
                }
            }
        }
    }
    out.took = began.elapsed();
    out
}

/// Keys Kafka's SkimpyOffsetMap holds in `budget` bytes.
pub(crate) fn kafka_keys(budget: usize, load_factor: f64) -> usize {
    ((budget / KAFKA_BYTES_PER_ENTRY) as f64 * load_factor) as usize
}

/// The default map filled with distinct keys until `put` says Full.
pub(crate) struct Filled {
    pub(crate) keys: u64,
    pub(crate) put_ns: f64,
    pub(crate) hit_ns: f64,
    pub(crate) miss_ns: f64,
}

pub(crate) fn fill_map(budget: usize, load_factor: f64) -> Filled {
    let mut map = OffsetMap::new(budget, load_factor).unwrap();
    map.clear();
    let began = Instant::now();
    let mut keys = 0u64;
    while map.put(&key_bytes(keys), keys) == tidelog_cleaner::PutOutcome::Stored {
        keys += 1;
    }
    let put_ns = began.elapsed().as_nanos() as f64 / keys as f64;
    let probes = 1_000_000.min(keys);
    let mut rng = Rng(5);
    let began = Instant::now();
    for _ in 0..probes {
        std::hint::black_box(map.get(&key_bytes(rng.next() % keys)));
    }
    let hit_ns = began.elapsed().as_nanos() as f64 / probes as f64;
    let began = Instant::now();
    for _ in 0..probes {
        std::hint::black_box(map.get(&key_bytes(keys + rng.next() % keys)));
    }
    let miss_ns = began.elapsed().as_nanos() as f64 / probes as f64;
    Filled {
        keys,
        put_ns,
        hit_ns,
        miss_ns,
    }
}

pub(crate) struct Produced {
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    pub(crate) window: Duration,
    /// From the start until the sink had copied everything appended.
    pub(crate) dispatched_after: Duration,
    pub(crate) lag_at_end: u64,
}

/// Append 100-record batches of 1 KiB values to `TOPIC` until `duration`
/// passes or `stop` is set.
#[allow(clippy::too_many_arguments)]
pub(crate) fn produce(
    store: &Store,
    topic: &str,
    rng: &mut Rng,
    keys: u64,
    duration: Duration,
    stop: &AtomicBool,
    label: &str,
    progress: &dyn Fn() -> String,
) -> Produced {
    let topic: Arc<str> = Arc::from(topic);
    let value = Bytes::from(vec![0xa5u8; VALUE_BYTES]);
    let began = Instant::now();
    let mut last_report = began;
    let mut records = 0;
    let mut bytes = 0;
    while began.elapsed() < duration && !stop.load(Ordering::Acquire) {
        let batch: Vec<AppendRecord> = (0..BATCH_RECORDS)
            .map(|_| {
                let k = rng.next() % keys;
                AppendRecord {
                    topic: Arc::clone(&topic),
                    partition: (k % PRODUCE_PARTITIONS) as u32,
                    key: Some(Bytes::from(key_bytes(k))),
                    value: Some(value.clone()),
                    headers: Vec::new(),
                    timestamp_ms: None,
                }
            })
            .collect();
        let out = store.append(&batch).unwrap();
        records += out.len() as u64;
        bytes += out.iter().map(|a| u64::from(a.size)).sum::<u64>();
        if last_report.elapsed() >= PROGRESS_EVERY {
            last_report = Instant::now();
            let st = store.stats();
            eprintln!(
                "  {label}: {:.1} s, {records} records appended ({:.0} k/s), dispatch lag {:.1} MB; {}",
                began.elapsed().as_secs_f64(),
                records as f64 / began.elapsed().as_secs_f64() / 1e3,
                mb(st.dispatch_lag_bytes),
                progress()
            );
        }
    }
    let window = began.elapsed();
    let lag_at_end = store.stats().dispatch_lag_bytes;
    assert!(store.wait_dispatched(Duration::from_secs(300)));
    Produced {
        records,
        bytes,
        window,
        dispatched_after: began.elapsed(),
        lag_at_end,
    }
}

/// Step 4's slices, in the order they ran: `idle[i]` before `busy[i]`,
/// and one idle slice more at the end.
#[derive(Default)]
pub(crate) struct Slices {
    pub(crate) idle: Vec<Produced>,
    pub(crate) busy: Vec<Produced>,
    /// Each busy slice's background pass: wall time from its request, and
    /// its stats.
    pub(crate) passes: Vec<(Duration, RunStats)>,
}

/// Records per second over `phases` together (their records over their
/// seconds): appended, and through the sink.
pub(crate) fn pooled_rates(phases: &[Produced]) -> (f64, f64) {
    let records = phases.iter().map(|p| p.records).sum::<u64>() as f64;
    let window: f64 = phases.iter().map(|p| p.window.as_secs_f64()).sum();
    let dispatched: f64 = phases
        .iter()
        .map(|p| p.dispatched_after.as_secs_f64())
        .sum();
    (records / window, records / dispatched)
}

/// Wait (at most a minute) until no segment a swap renamed aside
/// (`.deleted`) is left in `dir`.
pub(crate) fn wait_for_retired_deleted(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().ends_with(DELETED_SUFFIX));
        if !left {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the cleaner's housekeeping left retired segments in {} for a minute",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
