//! Store throughput benchmarks, through the public `Store` API only.
//!
//! - `append_async/<value bytes>`: one produce-request-sized batch per
//!   iteration, `flush: async`. Throughput counts records and the bytes they
//!   occupy in the CommitLog (the bytes that eventually reach the disk).
//! - `append_sync/<writers>`: one 1 KiB record per `append` call, `flush:
//!   sync`, from 1 and from 32 threads at once. Group commit is what makes
//!   the 32-writer rate many times the 1-writer rate.
//! - `read/<value bytes>`: `Store::read` (ConsumeQueue lookup + CommitLog
//!   read) over a pre-filled partition, walking it front to back.
//!
//! Data lives in a tempdir under `$TIDELOG_BENCH_DIR` (default: the system
//! temp dir), with 256 MiB segments and the default preallocation, so
//! creating and first-touching segments happens on the `tidelog-prealloc`
//! thread, not on the append path. `TIDELOG_BENCH_NO_PREALLOC=1` turns
//! preallocation off, to compare.
//!
//! Only `cargo bench` (which passes `--bench`) gets realistic sizes; under
//! `cargo test --all-targets` or nextest criterion runs each benchmark once,
//! and the setup here shrinks to a few MiB so that stays quick.
//!
//! Results and the machine's limits: docs/BENCHMARKS.md.

// A benchmark is not a library: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use tidelog_storage::{AppendRecord, FlushMode, QueueOffset, Store, StoreConfig};

const TOPIC: &str = "bench";

/// `cargo bench` passes `--bench` (and not `--test`); anything else (test
/// mode, `--list`) gets tiny sizes so it finishes in a moment.
fn bench_mode() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test" || a == "--list")
}

fn bench_dir() -> PathBuf {
    std::env::var_os("TIDELOG_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn open_store(flush: FlushMode) -> (tempfile::TempDir, Store) {
    let dir = tempfile::Builder::new()
        .prefix("tidelog-bench-")
        .tempdir_in(bench_dir())
        .unwrap();
    let mut config = StoreConfig::new(dir.path());
    config.flush = flush;
    config.commitlog_segment_bytes = if bench_mode() { 256 << 20 } else { 4 << 20 };
    if !bench_mode() {
        config.consume_queue_units_per_file = 4096;
        config.index_slots = 1024;
        config.index_entries = 8192;
    }
    // A benchmark measures the store, not how full this shared machine's
    // disk happens to be: its fill must not refuse writes.
    config.retention.disk = Arc::new(tidelog_storage::retention::FixedDiskUsage::new(0.1));
    if std::env::var_os("TIDELOG_BENCH_NO_PREALLOC").is_some() {
        config.preallocate_next_segment = false;
    }
    let store = Store::open(config).unwrap();
    (dir, store)
}

fn record(partition: u32, seq: u64, value: &Bytes) -> AppendRecord {
    AppendRecord {
        topic: Arc::from(TOPIC),
        partition,
        // A 16-byte key.
        key: Some(Bytes::from(format!("key-{seq:012}"))),
        value: Some(value.clone()),
        headers: Vec::new(),
        timestamp_ms: None,
    }
}

/// Bytes `batch` took in `store`'s CommitLog when appended once, as a
/// measured throughput's byte count (entry headers included; ConsumeQueue
/// units not).
fn log_bytes(store: &Store, batch: &[AppendRecord]) -> u64 {
    let before = store.commit_log().committed();
    store.append(batch).unwrap();
    store.commit_log().committed() - before
}

/// A value that does not compress to nothing, should anyone ever add that.
fn value(value_bytes: usize) -> Bytes {
    Bytes::from(
        (0..value_bytes)
            .map(|i| (i as u8).wrapping_mul(31) ^ 0x5a)
            .collect::<Vec<u8>>(),
    )
}

fn append_async(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_async");
    group
        .warm_up_time(Duration::from_secs(3))
        .measurement_time(Duration::from_secs(8))
        .sample_size(20);
    // (value bytes, records per batch): batches of ~10-256 KiB, like
    // produce requests.
    for (value_bytes, batch_records) in [(100usize, 100usize), (1024, 100), (16 << 10, 16)] {
        let (_dir, store) = open_store(FlushMode::Async);
        let value = value(value_bytes);
        // Eight partitions per batch, as a producer batching for several
        // partitions of one topic would send.
        let batch: Vec<AppendRecord> = (0..batch_records)
            .map(|i| record((i % 8) as u32, i as u64, &value))
            .collect();
        group.throughput(Throughput::ElementsAndBytes {
            elements: batch_records as u64,
            bytes: log_bytes(&store, &batch),
        });
        group.bench_function(format!("{value_bytes}B_x{batch_records}"), |b| {
            b.iter(|| black_box(store.append(&batch).unwrap()))
        });
        drop(store);
    }
    group.finish();
}

fn append_sync(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_sync");
    group
        .warm_up_time(Duration::from_secs(3))
        .measurement_time(Duration::from_secs(10))
        .sample_size(10)
        // Each iteration is an fsync's worth of waiting: keep the iteration
        // count per sample flat instead of growing it linearly.
        .sampling_mode(SamplingMode::Flat);
    let value_bytes = 1024;
    for writers in [1usize, 32] {
        let (_dir, store) = open_store(FlushMode::Sync);
        let value = value(value_bytes);
        group.throughput(Throughput::ElementsAndBytes {
            elements: 1,
            bytes: log_bytes(&store, &[record(0, 0, &value)]),
        });
        group.bench_function(format!("1KiB_{writers}_writers"), |b| {
            // `iters` records in total, spread over the writers, each
            // appending one record per call and waiting for its fsync.
            b.iter_custom(|iters| {
                let start = Barrier::new(writers + 1);
                let began = std::thread::scope(|s| {
                    for w in 0..writers {
                        let n =
                            iters / writers as u64 + u64::from((w as u64) < iters % writers as u64);
                        let (store, value, start) = (&store, &value, &start);
                        s.spawn(move || {
                            let batch = [record(w as u32 % 8, w as u64, value)];
                            start.wait();
                            for _ in 0..n {
                                black_box(store.append(&batch).unwrap());
                            }
                        });
                    }
                    start.wait();
                    Instant::now()
                });
                began.elapsed()
            })
        });
        drop(store);
    }
    group.finish();
}

fn read(c: &mut Criterion) {
    let mut group = c.benchmark_group("read");
    group
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(6))
        .sample_size(20);
    // (value bytes, records per read, records in the partition)
    let cases: [(usize, usize, u64); 2] = if bench_mode() {
        [(100, 1000, 1_000_000), (1024, 500, 200_000)]
    } else {
        [(100, 1000, 2000), (1024, 500, 1000)]
    };
    for (value_bytes, per_read, total) in cases {
        let (_dir, store) = open_store(FlushMode::Async);
        let value = value(value_bytes);
        let mut seq = 0;
        while seq < total {
            let n = 100.min(total - seq);
            let batch: Vec<AppendRecord> = (seq..seq + n).map(|s| record(0, s, &value)).collect();
            store.append(&batch).unwrap();
            seq += n;
        }
        assert!(store.wait_dispatched(Duration::from_secs(120)));
        // Pre-touch: one full pass, so the first samples do not pay for
        // cold pages.
        let mut from = 0;
        while from < total {
            from = store
                .read(TOPIC, 0, QueueOffset::new(from), per_read, usize::MAX)
                .unwrap()
                .next_offset
                .get();
        }
        let bytes = per_read as u64 * store.commit_log().committed() / total;
        group.throughput(Throughput::ElementsAndBytes {
            elements: per_read as u64,
            bytes,
        });
        // A consumer fetch: the records, as zero-copy views of the log.
        let mut from = 0;
        group.bench_function(format!("{value_bytes}B_x{per_read}"), |b| {
            b.iter(|| {
                if from + per_read as u64 > total {
                    from = 0;
                }
                let r = store
                    .read(TOPIC, 0, QueueOffset::new(from), per_read, usize::MAX)
                    .unwrap();
                from = r.next_offset.get();
                black_box(r)
            })
        });
        // The same, plus copying every value into one response buffer, as
        // a server answering the fetch has to.
        let mut from = 0;
        let mut out = Vec::with_capacity(bytes as usize);
        group.bench_function(format!("{value_bytes}B_x{per_read}_copy_values"), |b| {
            b.iter(|| {
                if from + per_read as u64 > total {
                    from = 0;
                }
                let r = store
                    .read(TOPIC, 0, QueueOffset::new(from), per_read, usize::MAX)
                    .unwrap();
                from = r.next_offset.get();
                out.clear();
                for rec in &r.records {
                    out.extend_from_slice(&rec.value().unwrap());
                }
                black_box(out.len())
            })
        });
        drop(store);
    }
    group.finish();
}

criterion_group!(benches, append_async, append_sync, read);
criterion_main!(benches);
