//! Compaction benchmark (issue 5): one full LogCleaner pass over ~1 GiB of
//! compacted log beside `cp -r` of the same segment files, the offset map's
//! bytes per key and keys per pass, and produce throughput through the real
//! store + compacted-log sink with the cleaner idle and busy.
//!
//! A plain bench binary rather than a criterion group: one measurement needs
//! ~1 GiB of setup and an emptied page cache, and destroys its input.
//!
//! Steps (everything in one tempdir, on the disk of `TIDELOG_BENCH_DIR`):
//! 1. Build log A: 1 KiB values, 12-byte keys drawn uniformly from a key
//!    space of 10 % of the record count (≈ 97 k keys over ≈ 973 k records),
//!    128 MiB segments, appended with `CompactedLog::append`, then rolled so
//!    every byte is cleanable. A 64 MiB log is cleaned first as a warm-up.
//! 2. Cold, same cache state for both: drop the page cache, time
//!    `cp -r A B` + `sync B/*`; drop the page cache, time
//!    `LogCleaner::clean_once` on A with the default config (128 MiB dedupe
//!    buffer, one thread). The result is checked: exactly one record per
//!    key, at the key's newest offset. The pass renames the segments it
//!    replaced aside; their unlink (a cleaner thread's next housekeeping:
//!    `LogCleaner::delete_retired`) is timed apart and printed, with the
//!    ratio it would give counted in.
//! 3. Warm, same again on B: `cat B/*` twice, reopen B (the open scans and
//!    CRC-checks every record), scan-only / map-build / map-lookup passes
//!    over B to split the cleaner's time, `cp -r B C`, clean B.
//! 4. Produce: a `Store` with the compacted-log sink, and `BG_SLICES`
//!    background logs of a `BG_SLICES`th of the log size each, built into
//!    its data dir as dirty logs of compact topics of their own. Batches of
//!    100 × 1 KiB records: for `TIDELOG_COMPACTION_PRODUCE_SECS` to a
//!    delete-policy topic (no copy: the store alone), then to a compact
//!    topic in alternating slices, idle first and last: an idle slice
//!    (`TIDELOG_COMPACTION_PRODUCE_SECS / BG_SLICES`, the `LogCleaner`
//!    thread has nothing to do), then a busy one while it cleans the next
//!    background log (started with `request`), until that pass ends or
//!    twice an idle slice passes; a pass still running then is waited for
//!    without producing, as is the unlink of the segments its swap renamed
//!    aside, so no idle slice overlaps a pass. Busy is compared with idle
//!    as records over seconds of each kind, so a load that drifts during
//!    the run weighs on both; each busy slice over the idle slices beside
//!    it is printed too. Each slice also waits until the dispatcher has
//!    caught up, and reports that rate. The LogCleaner thread runs at its
//!    lowered CPU priority (`CLEANER_NICE_INCREMENT`); the cold and warm
//!    passes of steps 2 and 3 run `clean_once` on a bench thread at normal
//!    priority.
//!
//! The last lines printed are the benchmark table's rows: pass MB/s beside
//! `cp -r + sync` MB/s and their ratio, cold and warm; bytes per key and
//! keys per pass of the default map (counted by filling it); produce busy /
//! idle.
//!
//! Runs the full size only under `cargo bench` (which passes `--bench`);
//! under `cargo test --benches` or nextest it runs a tiny version (4 MiB,
//! no cache drops) that takes seconds.
//!
//! Environment: `TIDELOG_BENCH_DIR` (default: the system temp dir; keep it
//! on the disk you mean to measure), `TIDELOG_COMPACTION_MIB` (1024),
//! `TIDELOG_COMPACTION_SEGMENT_MIB` (128), `TIDELOG_COMPACTION_DISTINCT_PCT`
//! (10), `TIDELOG_COMPACTION_PRODUCE_SECS` (10). Worker threads are named
//! (`bench-clean`, `bench-scan`, `bench-produce`) for `perf report --comm`.
//!
//! Files: this one runs the steps in order and prints the summary; `plan`
//! holds the run's sizes and shared constants, `system` what is asked of
//! the machine (CPU time, page cache, timed shell commands), `setup` step
//! 1's log and the check of a cleaned one, `phases` the measured passes
//! and produce slices. Each imports only those listed before it.

// A benchmark is not a library: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tidelog_cleaner::offset_map::BYTES_PER_ENTRY;
use tidelog_cleaner::{CleanerConfig, CompactTopicConfig, CompactedLogs, LogCleaner, OffsetMap};
use tidelog_storage::test_rng::SplitMix64 as Rng;
use tidelog_storage::{AppendRecord, Store};

mod phases;
mod plan;
mod setup;
mod system;

use phases::{
    clean, cleaning_output, fill_map, kafka_keys, pooled_rates, produce, scan,
    wait_for_retired_deleted, Produced, ScanMode, Slices,
};
use plan::{
    env_u64, Plan, BG_SLICES, BG_TOPIC, KAFKA_BYTES_PER_ENTRY, PLAIN_TOPIC, PRODUCE_PARTITIONS,
    TOPIC,
};
use setup::{build_log, key_bytes, store_config, topic_config, verify};
use system::{cp_r, df, dir_bytes, loadavg, mb, mbps, note_cold, same_device, sh};

/// The tiny run's name as a test (see `main`).
const TINY_TEST: &str = "tiny_smoke_run";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        // libtest's listing, which cargo-nextest asks for: the tiny run is
        // one test (none of them ignored), so `cargo nextest run
        // --all-targets`, the suite's command, checks this bench too.
        if !args.iter().any(|a| a == "--ignored") {
            println!("{TINY_TEST}: test");
        }
        return;
    }
    let full = args.iter().any(|a| a == "--bench");
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let plan = if full {
        Plan {
            full,
            log_bytes: env_u64("TIDELOG_COMPACTION_MIB", 1024) << 20,
            segment_bytes: env_u64("TIDELOG_COMPACTION_SEGMENT_MIB", 128) << 20,
            distinct_pct: env_u64("TIDELOG_COMPACTION_DISTINCT_PCT", 10).clamp(1, 100),
            produce: Duration::from_secs(env_u64("TIDELOG_COMPACTION_PRODUCE_SECS", 10)),
            warmup_log_bytes: 64 << 20,
        }
    } else {
        eprintln!("compaction bench: tiny smoke run (the full run needs `cargo bench`)");
        Plan {
            full,
            log_bytes: 4 << 20,
            segment_bytes: 512 << 10,
            distinct_pct: 10,
            produce: Duration::from_millis(300),
            warmup_log_bytes: 1 << 20,
        }
    };
    let root = std::env::var_os("TIDELOG_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("tidelog-compaction-")
        .tempdir_in(&root)
        .unwrap();
    let base = tmp.path();
    eprintln!("== compaction bench: {plan:?}");
    eprintln!("  data in {} ({})", base.display(), df(base));
    if let Some(same) = same_device(base, Path::new("/work")) {
        eprintln!("  same filesystem as /work: {same}");
    }
    eprintln!("  load average at start: {}", loadavg());

    // ---- offset map at the default buffer
    let config = CleanerConfig::default();
    let budget = config.dedupe_buffer_bytes / config.threads;
    let map = OffsetMap::new(budget, config.load_factor).unwrap();
    let kafka_max = kafka_keys(budget, config.load_factor);
    let map_row = format!(
        "offset map at the default buffer ({budget} B per thread, {} thread(s), load factor {}): \
         {} B per slot (Kafka {KAFKA_BYTES_PER_ENTRY}), {} B allocated, {} slots, {} keys per pass \
         (Kafka {kafka_max}); allocated / keys per pass = {:.2} B per key (Kafka {:.2})",
        config.threads,
        config.load_factor,
        map.bytes_per_entry(),
        map.allocated_bytes(),
        map.slots(),
        map.max_entries(),
        map.allocated_bytes() as f64 / map.max_entries() as f64,
        budget as f64 / kafka_max as f64,
    );
    eprintln!("  {map_row}");
    drop(map);
    // The tiny run (a debug build) fills a 1 MiB map instead.
    let filled_budget = if plan.full { budget } else { 1 << 20 };
    let filled = fill_map(filled_budget, config.load_factor);
    eprintln!(
        "  default map filled by distinct keys: {} keys counted until Full, {:.0} ns a put, then {:.0} ns a hit, {:.0} ns a miss at that load",
        filled.keys, filled.put_ns, filled.hit_ns, filled.miss_ns
    );

    // ---- 1. build log A
    let dir_a = base.join("a");
    let logs_a = CompactedLogs::open(&dir_a).unwrap();
    logs_a.set_topic(TOPIC, topic_config(&plan));
    let log_a = logs_a.log_or_create(TOPIC, 0).unwrap();
    eprintln!("== build {:.0} MB of compacted log", mb(plan.log_bytes));
    let built = build_log(&log_a, &plan, plan.log_bytes, 42, true);
    let part_a = log_a.dir().to_path_buf();
    let (log_bytes, files) = dir_bytes(&part_a);
    eprintln!(
        "  {files} files, {log_bytes} B; {} distinct keys",
        built.distinct()
    );

    // Warm-up: a small log cleaned start to end (code, allocator, the map's
    // 128 MiB, fresh memory).
    {
        let dir_w = base.join("warmup");
        let logs_w = CompactedLogs::open(&dir_w).unwrap();
        logs_w.set_topic(TOPIC, topic_config(&plan));
        let log_w = logs_w.log_or_create(TOPIC, 0).unwrap();
        let w = build_log(&log_w, &plan, plan.warmup_log_bytes, 7, false);
        let (took, _, _) = clean(&logs_w, &dir_w, "warm-up");
        verify(&log_w, &w);
        eprintln!(
            "  warm-up: cleaned {:.0} MB in {:.2} s",
            mb(w.bytes),
            took.as_secs_f64()
        );
        std::fs::remove_dir_all(&dir_w).unwrap();
    }

    // ---- 2. cold: cp, then the cleaner, each after dropping the cache
    let dir_b = base.join("b");
    let part_b = dir_b.join("compacted").join(TOPIC).join("0");
    eprintln!("== cold (load {})", loadavg());
    note_cold(&plan, "cp");
    let cp_cold = cp_r(&part_a, &part_b);
    eprintln!(
        "  cp -r + sync: {:.2} s, {:.0} MB/s",
        cp_cold.as_secs_f64(),
        mbps(log_bytes, cp_cold)
    );
    note_cold(&plan, "the cleaner");
    let (clean_cold, stats_cold, delete_cold) = clean(&logs_a, &dir_a, "cold");
    eprintln!(
        "  cleaner: {:.2} s, {:.0} MB/s of log; {stats_cold:?}",
        clean_cold.as_secs_f64(),
        mbps(log_bytes, clean_cold)
    );
    assert!(!stats_cold.partial, "one pass covers the log");
    verify(&log_a, &built);

    // ---- 3. warm, on B
    eprintln!("== warm (load {})", loadavg());
    let cat_cmd = format!("cat '{}'/* > /dev/null", part_b.display());
    let cat_first = sh(&cat_cmd);
    let cat_warm = sh(&cat_cmd);
    eprintln!(
        "  cat: {:.0} MB/s (first, B just written), {:.0} MB/s (warm)",
        mbps(log_bytes, cat_first),
        mbps(log_bytes, cat_warm)
    );
    let began = Instant::now();
    let logs_b = CompactedLogs::open(&dir_b).unwrap();
    let open_b = began.elapsed();
    logs_b.set_topic(TOPIC, topic_config(&plan));
    let log_b = logs_b.log(TOPIC, 0).unwrap();
    eprintln!(
        "  CompactedLogs::open (scans + CRCs every record): {:.2} s, {:.0} MB/s",
        open_b.as_secs_f64(),
        mbps(log_bytes, open_b)
    );
    // Split the cleaner's work, warm, on a thread named bench-scan.
    let mut map = OffsetMap::new(budget, config.load_factor).unwrap();
    let scans = std::thread::Builder::new()
        .name("bench-scan".into())
        .spawn({
            let log_b = Arc::clone(&log_b);
            move || {
                let mut out = Vec::new();
                for (mode, label) in [
                    (ScanMode::Decode, "read + decode (CRC) only"),
                    (ScanMode::Put, "read + decode + map put (map build)"),
                    (ScanMode::Get, "read + decode + map get (rewrite filter)"),
                ] {
                    let s = scan(&log_b, mode, &mut map);
                    eprintln!(
                        "  scan, {label}: {} records in {:.2} s, {:.0} MB/s, {:.0} ns/record",
                        s.records,
                        s.took.as_secs_f64(),
                        mbps(s.bytes, s.took),
                        s.took.as_nanos() as f64 / s.records as f64
                    );
                    out.push((label, s));
                }
                // Raw CRC32C speed over memory, for scale.
                let buf = vec![0x5au8; 64 << 20];
                let began = Instant::now();
                let mut acc = 0u32;
                for _ in 0..8 {
                    acc ^= crc32c::crc32c(std::hint::black_box(&buf));
                }
                std::hint::black_box(acc);
                let crc = began.elapsed();
                eprintln!(
                    "  crc32c over memory: {:.0} MB/s",
                    mbps(8 * buf.len() as u64, crc)
                );
                (out, mbps(8 * buf.len() as u64, crc))
            }
        })
        .unwrap()
        .join()
        .unwrap();
    let dir_p = base.join("p");
    // C is only `cp`'s output: the busy slices of step 4 clean logs of
    // their own.
    let part_c = base.join("c");
    let cp_warm = cp_r(&part_b, &part_c);
    eprintln!(
        "  cp -r + sync (warm source): {:.2} s, {:.0} MB/s",
        cp_warm.as_secs_f64(),
        mbps(log_bytes, cp_warm)
    );
    let (clean_warm, stats_warm, delete_warm) = clean(&logs_b, &dir_b, "warm");
    eprintln!(
        "  cleaner: {:.2} s, {:.0} MB/s of log; {stats_warm:?}",
        clean_warm.as_secs_f64(),
        mbps(log_bytes, clean_warm)
    );
    verify(&log_b, &built);
    drop((log_b, logs_b, log_a, logs_a));
    std::fs::remove_dir_all(&part_c).unwrap();

    // ---- 4. produce, alternating slices with the cleaner idle and busy
    eprintln!("== produce (load {})", loadavg());
    {
        // Give the store a CommitLog that has dispatched something, so the
        // planted background log's copies (physical offset 0) lie below it.
        let store = Store::open(store_config(&dir_p, &plan)).unwrap();
        store
            .append(&[AppendRecord {
                topic: Arc::from(PLAIN_TOPIC),
                partition: 0,
                key: Some(Bytes::from(key_bytes(0))),
                value: Some(Bytes::from_static(b"first")),
                headers: Vec::new(),
                timestamp_ms: None,
            }])
            .unwrap();
        store.shutdown().unwrap();
    }
    let logs_p = CompactedLogs::open(&dir_p).unwrap();
    // Produced records are never cleaned here (min lag: forever), and the
    // background logs only when requested (ratio > 1 never holds), so the
    // cleaner is idle until `request`.
    logs_p.set_topic(
        TOPIC,
        CompactTopicConfig {
            min_compaction_lag_ms: i64::MAX,
            ..topic_config(&plan)
        },
    );
    // One background log a busy slice, a `BG_SLICES`th of the log size
    // each, copies below the CommitLog's end (see `record`).
    let bg_topics: Vec<String> = (0..BG_SLICES).map(|i| format!("{BG_TOPIC}-{i}")).collect();
    let mut bg_records = 0;
    for (i, topic) in bg_topics.iter().enumerate() {
        logs_p.set_topic(
            topic,
            CompactTopicConfig {
                min_cleanable_dirty_ratio: 1.0,
                ..topic_config(&plan)
            },
        );
        let log = logs_p.log_or_create(topic, 0).unwrap();
        let bytes = plan.log_bytes / BG_SLICES as u64;
        bg_records += build_log(&log, &plan, bytes, 100 + i as u64, false).records;
    }
    eprintln!(
        "  built {BG_SLICES} background logs of {:.0} MB, {bg_records} records in all",
        mb(plan.log_bytes / BG_SLICES as u64)
    );
    let store = Store::open_with_sinks(store_config(&dir_p, &plan), vec![logs_p.sink()]).unwrap();
    let cleaner = LogCleaner::new(
        Arc::clone(&logs_p),
        dir_p.clone(),
        CleanerConfig::default(),
        Arc::clone(store.commit_log()),
    )
    .unwrap();
    cleaner.start().unwrap();
    let keys = 100_000;
    let never = AtomicBool::new(false);
    // The background log being cleaned, for the progress lines.
    let cleaning = std::sync::atomic::AtomicUsize::new(0);
    let status = || {
        let topic = &bg_topics[cleaning.load(Ordering::Relaxed)];
        let st = cleaner.status(topic);
        format!(
            "{topic}: {} ({:.0} MB written by the cleaner so far)",
            st.first().map_or("?".into(), |s| s.state.to_string()),
            mb(cleaning_output(logs_p.log(topic, 0).unwrap().dir()))
        )
    };
    let (warm_records, plain, slices) = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("bench-produce".into())
            .spawn_scoped(s, || {
                let mut rng = Rng(99);
                let warm = produce(
                    &store,
                    TOPIC,
                    &mut rng,
                    keys,
                    plan.produce.min(Duration::from_secs(3)),
                    &never,
                    "warm-up",
                    &status,
                );
                eprintln!(
                    "  warm-up: {:.0} k records/s",
                    warm.records as f64 / warm.window.as_secs_f64() / 1e3
                );
                // One phase of at most `length`, stopped early by `stop`.
                let phase = |rng: &mut Rng,
                             topic: &str,
                             length: Duration,
                             stop: &AtomicBool,
                             label: &str| {
                    eprintln!("  {label} (load {})", loadavg());
                    produce(&store, topic, rng, keys, length, stop, label, &status)
                };
                let plain = phase(
                    &mut rng,
                    PLAIN_TOPIC,
                    plan.produce,
                    &never,
                    "non-compact phase",
                );
                // Idle and busy slices alternate, idle first and last, so
                // a load that drifts during the run weighs on both alike.
                let slice = plan.produce / BG_SLICES as u32;
                let mut slices = Slices::default();
                slices
                    .idle
                    .push(phase(&mut rng, TOPIC, slice, &never, "idle slice 1"));
                for (i, topic) in bg_topics.iter().enumerate() {
                    cleaning.store(i, Ordering::Relaxed);
                    let requested = cleaner.request(topic, false).unwrap();
                    let pass_done = AtomicBool::new(false);
                    let (busy, pass) = std::thread::scope(|s2| {
                        let waiter = s2.spawn(|| {
                            let began = Instant::now();
                            let r = cleaner.wait(topic, &requested, Duration::from_secs(900));
                            pass_done.store(true, Ordering::Release);
                            (began.elapsed(), r)
                        });
                        // Until the pass ends, or twice an idle slice; a
                        // pass still running then is waited for without
                        // producing, so no idle slice overlaps it.
                        let label = format!("busy slice {} ({topic})", i + 1);
                        let busy = phase(&mut rng, TOPIC, 2 * slice, &pass_done, &label);
                        (busy, waiter.join().unwrap())
                    });
                    let stats = pass.1.into_iter().next().and_then(|(_, s)| s);
                    slices.busy.push(busy);
                    slices
                        .passes
                        .push((pass.0, stats.expect("the background pass finished")));
                    // The segments the swap renamed aside are unlinked by
                    // the cleaner's next housekeeping: the pass's cost,
                    // not the next idle slice's.
                    let dir = logs_p.log(topic, 0).unwrap().dir().to_path_buf();
                    wait_for_retired_deleted(&dir);
                    let label = format!("idle slice {}", i + 2);
                    slices
                        .idle
                        .push(phase(&mut rng, TOPIC, slice, &never, &label));
                }
                (warm.records, plain, slices)
            })
            .unwrap()
            .join()
            .unwrap()
    });
    cleaner.stop();
    let produced_total: u64 = (0..PRODUCE_PARTITIONS as u32)
        .filter_map(|p| logs_p.log(TOPIC, p))
        .map(|l| l.next_offset())
        .sum();
    store.shutdown().unwrap();
    eprintln!("  load at end: {}", loadavg());

    // ---- summary (stdout)
    // The planted logs must all have been there to clean (a store that
    // dropped them at open would leave empty passes).
    let bg_seen: u64 = slices
        .passes
        .iter()
        .map(|(_, s)| s.records_kept + s.records_removed)
        .sum();
    assert_eq!(
        bg_seen, bg_records,
        "the background passes saw the whole planted logs"
    );
    let row = |name: &str, d: Duration, read: u64, written: u64| {
        format!(
            "| {name} | {:.2} | {:.0} | {:.0} | {:.0} |",
            d.as_secs_f64(),
            mbps(log_bytes, d),
            mbps(read, d),
            mbps(written, d)
        )
    };
    println!();
    println!(
        "log: {} records, {} distinct keys, {log_bytes} B in {files} files (segment.bytes {} KiB)",
        built.records,
        built.distinct(),
        plan.segment_bytes >> 10
    );
    println!("| step | s | MB/s of log | MB/s read | MB/s written |");
    println!("|---|---|---|---|---|");
    println!(
        "{}",
        row("cp -r + sync, cold", cp_cold, log_bytes, log_bytes)
    );
    println!(
        "{}",
        row(
            "cleaner, cold",
            clean_cold,
            stats_cold.bytes_read,
            stats_cold.bytes_written
        )
    );
    println!(
        "{}",
        row("cp -r + sync, warm", cp_warm, log_bytes, log_bytes)
    );
    println!(
        "{}",
        row(
            "cleaner, warm",
            clean_warm,
            stats_warm.bytes_read,
            stats_warm.bytes_written
        )
    );
    println!(
        "cleaner / cp: cold {:.2}x, warm {:.2}x (MB/s of log)",
        cp_cold.as_secs_f64() / clean_cold.as_secs_f64(),
        cp_warm.as_secs_f64() / clean_warm.as_secs_f64()
    );
    // Not the table's figure (that is the pass, as Kafka's cleaner is timed
    // without its delayed deletion), but the cost is the cleaner's all the
    // same: the ratio with it counted.
    println!(
        "with the deferred deletion of the old segments counted: cleaner / cp cold {:.2}x, warm {:.2}x (deletion {:.3} s cold, {:.3} s warm)",
        cp_cold.as_secs_f64() / (clean_cold + delete_cold).as_secs_f64(),
        cp_warm.as_secs_f64() / (clean_warm + delete_warm).as_secs_f64(),
        delete_cold.as_secs_f64(),
        delete_warm.as_secs_f64()
    );
    for (name, s) in [("cold", &stats_cold), ("warm", &stats_warm)] {
        println!(
            "{name} pass: kept {} removed {} records, read {} B, wrote {} B, keys {}, map utilisation {:.4}, {} segments cleaned, partial {}, duration_ms {}",
            s.records_kept,
            s.records_removed,
            s.bytes_read,
            s.bytes_written,
            s.keys,
            s.map_utilization,
            s.segments_cleaned,
            s.partial,
            s.duration_ms
        );
    }
    println!(
        "cat warm {:.0} MB/s; open (scan+CRC) {:.0} MB/s; crc32c memory {:.0} MB/s",
        mbps(log_bytes, cat_warm),
        mbps(log_bytes, open_b),
        scans.1
    );
    for (label, s) in &scans.0 {
        println!(
            "scan {label}: {:.2} s, {:.0} MB/s, {:.0} ns/record",
            s.took.as_secs_f64(),
            mbps(s.bytes, s.took),
            s.took.as_nanos() as f64 / s.records as f64
        );
    }
    println!("{map_row}");
    let rate = |p: &Produced| p.records as f64 / p.window.as_secs_f64();
    let sink_rate = |p: &Produced| p.records as f64 / p.dispatched_after.as_secs_f64();
    let print_phase = |name: &str, p: &Produced| {
        println!(
            "produce, {name}: {} records in {:.2} s = {:.0} records/s appended ({:.0} MB/s of CommitLog); all dispatched (indexes and any compacted copy) after {:.2} s = {:.0} records/s (lag at end {:.1} MB)",
            p.records,
            p.window.as_secs_f64(),
            rate(p),
            mbps(p.bytes, p.window),
            p.dispatched_after.as_secs_f64(),
            sink_rate(p),
            mb(p.lag_at_end)
        );
    };
    print_phase("non-compact topic (no copy)", &plain);
    for (i, idle) in slices.idle.iter().enumerate() {
        print_phase(
            &format!("compact topic, cleaner idle, slice {}", i + 1),
            idle,
        );
        if let Some(busy) = slices.busy.get(i) {
            print_phase(
                &format!("compact topic, cleaner busy, slice {}", i + 1),
                busy,
            );
        }
    }
    let (idle_rate, idle_sink_rate) = pooled_rates(&slices.idle);
    let (busy_rate, busy_sink_rate) = pooled_rates(&slices.busy);
    println!(
        "produce busy / idle ({} busy slices between {} idle ones, records over seconds of each kind): {:.2}x appended, {:.2}x through the sink",
        slices.busy.len(),
        slices.idle.len(),
        busy_rate / idle_rate,
        busy_sink_rate / idle_sink_rate
    );
    let each: Vec<String> = slices
        .busy
        .iter()
        .zip(slices.idle.windows(2))
        .map(|(b, around)| {
            format!(
                "{:.2}x",
                rate(b) / ((rate(&around[0]) + rate(&around[1])) / 2.0)
            )
        })
        .collect();
    println!(
        "each busy slice over the mean of the idle slices beside it: {}",
        each.join(", ")
    );
    for (i, (took, s)) in slices.passes.iter().enumerate() {
        println!(
            "background pass {}: {:.2} s wall ({:.0} MB/s read), duration_ms {}, kept {}, removed {}",
            i + 1,
            took.as_secs_f64(),
            mbps(s.bytes_read, *took),
            s.duration_ms,
            s.records_kept,
            s.records_removed
        );
    }
    println!("compacted copies of produced records: {produced_total}");
    println!();
    println!("benchmark table rows (load at end {}):", loadavg());
    println!("| figure | value | beside it | ratio | goal |");
    println!("|---|---|---|---|---|");
    for (name, clean, cp) in [
        ("cleaner pass, cold", clean_cold, cp_cold),
        ("cleaner pass, warm", clean_warm, cp_warm),
    ] {
        println!(
            "| {name} | {:.0} MB/s of log | cp -r + sync {:.0} MB/s | {:.2}x | >= 1.0x |",
            mbps(log_bytes, clean),
            mbps(log_bytes, cp),
            cp.as_secs_f64() / clean.as_secs_f64()
        );
    }
    println!(
        "| offset map, bytes per key | {} B a slot, {:.2} B of buffer a key at load {} | Kafka {KAFKA_BYTES_PER_ENTRY} B, {:.2} B | | <= 20 B of buffer a key |",
        BYTES_PER_ENTRY,
        filled_budget as f64 / filled.keys as f64,
        config.load_factor,
        filled_budget as f64 / kafka_keys(filled_budget, config.load_factor) as f64,
    );
    println!(
        "| keys per pass, {} MiB buffer | {} (counted) | Kafka {} | {:.2}x | >= 6 M at the default 128 MiB |",
        filled_budget >> 20,
        filled.keys,
        kafka_keys(filled_budget, config.load_factor),
        filled.keys as f64 / kafka_keys(filled_budget, config.load_factor) as f64
    );
    println!(
        "| produce, cleaner busy / idle (one producer) | {busy_rate:.0} records/s | idle {idle_rate:.0} records/s (alternating slices) | {:.2}x | >= 0.90x |",
        busy_rate / idle_rate
    );
    let slice_records: u64 = slices
        .idle
        .iter()
        .chain(&slices.busy)
        .map(|p| p.records)
        .sum();
    assert_eq!(
        produced_total,
        warm_records + slice_records,
        "every produced record was copied"
    );
}
