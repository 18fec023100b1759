//! Recovery after an unclean stop, beside `cat` of the same segment files.
//!
//! A plain bench binary rather than a criterion group: one measurement
//! needs ~1 GiB of log and an emptied page cache, and criterion wants at
//! least ten samples per benchmark. Here the log is written once, then each
//! repetition drops the page cache, times `cat <segments> > /dev/null`,
//! drops it again and times `Store::open`; then the same two warm.
//!
//! What `Store::open` does here: the `abort` marker is present and the
//! `checkpoint` file is deleted, so recovery starts at physical offset 0:
//! it CRC-checks every record of the CommitLog, then replays every record
//! into the ConsumeQueues and IndexFiles (which already hold them, so that
//! is mostly comparing), exactly as after a crash with a lost checkpoint.
//!
//! Runs only under `cargo bench` (which passes `--bench`); under `cargo
//! test --all-targets` or nextest it prints nothing to stdout and exits.
//!
//! Environment: `TIDELOG_BENCH_DIR` (default: system temp dir),
//! `TIDELOG_RECOVERY_MIB` (log size, default 1024), `TIDELOG_RECOVERY_REPS`
//! (default 3).

// A benchmark is not a library: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tidelog_storage::{AppendRecord, FlushMode, Store, StoreConfig};

const PARTITIONS: u32 = 8;
const VALUE_BYTES: usize = 1024;
const BATCH_RECORDS: u64 = 100;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 256 << 20;
    c.flush = FlushMode::Async;
    // A benchmark measures recovery, not how full this shared machine's
    // disk happens to be: its fill must not refuse writes.
    c.retention.disk = std::sync::Arc::new(tidelog_storage::retention::FixedDiskUsage::new(0.1));
    c
}

/// `sync; echo 3 > /proc/sys/vm/drop_caches`. False if not permitted.
fn drop_caches() -> bool {
    let synced = Command::new("sync").status().is_ok_and(|s| s.success());
    synced && std::fs::write("/proc/sys/vm/drop_caches", b"3").is_ok()
}

fn segment_files(data_dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn cat(files: &[PathBuf]) -> Duration {
    let began = Instant::now();
    let ok = Command::new("cat")
        .args(files)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "cat failed");
    began.elapsed()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn write_log(dir: &Path, target_bytes: u64) {
    let store = Store::open(config(dir)).unwrap();
    let value = Bytes::from(
        (0..VALUE_BYTES)
            .map(|i| (i as u8).wrapping_mul(31) ^ 0x5a)
            .collect::<Vec<u8>>(),
    );
    let topics: [Arc<str>; 2] = [Arc::from("orders"), Arc::from("clicks")];
    let began = Instant::now();
    let mut seq = 0u64;
    let mut written = 0u64;
    while written < target_bytes {
        // A produce request spanning the partitions of both topics.
        let batch: Vec<AppendRecord> = (seq..seq + BATCH_RECORDS)
            .map(|s| AppendRecord {
                topic: Arc::clone(&topics[(s % 2) as usize]),
                partition: (s / 2 % u64::from(PARTITIONS / 2)) as u32,
                key: Some(Bytes::from(format!("key-{s:012}"))),
                value: Some(value.clone()),
                headers: Vec::new(),
                timestamp_ms: None,
            })
            .collect();
        let out = store.append(&batch).unwrap();
        written += out.iter().map(|a| u64::from(a.size)).sum::<u64>();
        seq += BATCH_RECORDS;
    }
    let took = began.elapsed();
    assert!(store.wait_dispatched(Duration::from_secs(600)));
    eprintln!(
        "wrote {seq} records, {:.0} MiB of log in {:.2} s ({:.0} MiB/s, async flush); indexes caught up after {:.2} s",
        mib(written),
        took.as_secs_f64(),
        mib(written) / took.as_secs_f64(),
        began.elapsed().as_secs_f64()
    );
    store.close_uncleanly();
}

/// Make the next open a full recovery: `abort` stays (close_uncleanly
/// leaves it), and without a checkpoint the scan starts at offset 0.
fn forget_checkpoint(dir: &Path) {
    assert!(dir.join("abort").exists());
    let cp = dir.join("checkpoint");
    if cp.exists() {
        std::fs::remove_file(cp).unwrap();
    }
}

fn recover(dir: &Path) -> Duration {
    let began = Instant::now();
    let store = Store::open(config(dir)).unwrap();
    let took = began.elapsed();
    let r = store.recovery_report().clone();
    assert!(!r.clean_shutdown && r.scanned_from == 0);
    eprintln!(
        "  recovery report: scanned {} records from {} to {} ({:.0} MiB), replayed {}, truncated {} B",
        r.records_scanned,
        r.scanned_from,
        r.end,
        mib(r.end - r.scanned_from),
        r.records_replayed,
        r.truncated_bytes
    );
    store.close_uncleanly();
    forget_checkpoint(dir);
    took
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") || args.iter().any(|a| a == "--list") {
        eprintln!("recovery bench: runs only under `cargo bench` (1 GiB of setup)");
        return;
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let root = std::env::var_os("TIDELOG_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("tidelog-recovery-")
        .tempdir_in(root)
        .unwrap();
    let dir = tmp.path();
    let target = env_u64("TIDELOG_RECOVERY_MIB", 1024) << 20;
    let reps = env_u64("TIDELOG_RECOVERY_REPS", 3);

    write_log(dir, target);
    forget_checkpoint(dir);

    let mut rows = Vec::new();
    for rep in 1..=reps {
        let files = segment_files(dir);
        let file_bytes: u64 = files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum();
        eprintln!(
            "rep {rep}: {} segment files, {:.0} MiB",
            files.len(),
            mib(file_bytes)
        );
        let cold = drop_caches();
        if !cold {
            eprintln!("  could not drop the page cache (not root?): cold numbers are warm");
        }
        let cat_cold = cat(&files);
        drop_caches();
        let open_cold = recover(dir);
        // Warm: the files were just read, so they are in the page cache.
        let files = segment_files(dir);
        let cat_warm = cat(&files);
        let open_warm = recover(dir);
        rows.push((
            rep, cold, file_bytes, cat_cold, open_cold, cat_warm, open_warm,
        ));
    }

    println!();
    println!("recovery of ~{} MiB of log (1 KiB values, {PARTITIONS} partitions), full scan + index replay", target >> 20);
    println!("| rep | cache dropped | segment files MiB | cat cold s | open cold s | cold ratio | cat warm s | open warm s | warm ratio |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (rep, cold, bytes, cc, oc, cw, ow) in rows {
        println!(
            "| {rep} | {cold} | {:.0} | {:.3} | {:.3} | {:.2}x | {:.3} | {:.3} | {:.2}x |",
            mib(bytes),
            cc.as_secs_f64(),
            oc.as_secs_f64(),
            oc.as_secs_f64() / cc.as_secs_f64(),
            cw.as_secs_f64(),
            ow.as_secs_f64(),
            ow.as_secs_f64() / cw.as_secs_f64(),
        );
    }
}
