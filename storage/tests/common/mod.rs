//! Helpers shared by the storage integration tests.
#![allow(dead_code, clippy::unwrap_used)]

pub mod log_capture;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tidelog_storage::retention::FixedDiskUsage;
use tidelog_storage::{
    AppendRecord, DispatchSink, FlushMode, Header, QueueOffset, Store, StoreConfig, StoreError,
    StoredRecord,
};

/// Generous bound on waits for background threads (a shared, noisy machine).
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Wait until `done`, failing the test after [`DEADLINE`].
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A dispatch sink that, while `stuck`, refuses every record from queue
/// offset `from` on, like a compacted log that cannot keep up.
pub struct StuckSink {
    pub from: u64,
    pub stuck: AtomicBool,
}

impl StuckSink {
    pub fn new(from: u64, stuck: bool) -> Arc<StuckSink> {
        Arc::new(StuckSink {
            from,
            stuck: AtomicBool::new(stuck),
        })
    }

    pub fn set_stuck(&self, stuck: bool) {
        self.stuck.store(stuck, Ordering::SeqCst);
    }
}

impl DispatchSink for StuckSink {
    fn name(&self) -> &str {
        "stuck"
    }
    fn dispatch(&self, r: &StoredRecord) -> tidelog_storage::Result<()> {
        if r.queue_offset().get() >= self.from && self.stuck.load(Ordering::SeqCst) {
            return Err(StoreError::InvalidInput {
                reason: "stuck on purpose".into(),
            });
        }
        Ok(())
    }
    fn flush(&self) -> tidelog_storage::Result<()> {
        Ok(())
    }
}

/// Small files everywhere, so tests roll segments and queue files often.
pub fn small_config(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 64 * 1024;
    c.consume_queue_units_per_file = 64;
    c.index_slots = 64;
    c.index_entries = 256;
    c.flush = FlushMode::Async;
    c.flush_interval_ms = 50;
    // The same cadence for the tests that switch to `flush: sync`.
    c.sync_checkpoint_interval_ms = 50;
    c.preallocate_next_segment = false;
    // Tests must not depend on how full this machine's disk is.
    c.retention.disk = Arc::new(FixedDiskUsage::new(0.1));
    c
}

/// [`small_config`] with CommitLog segments of `segment_bytes`.
pub fn config_with_segments(dir: &Path, segment_bytes: u64) -> StoreConfig {
    let mut c = small_config(dir);
    c.commitlog_segment_bytes = segment_bytes;
    c
}

pub fn record(topic: &str, partition: u32, key: Option<&str>, value: Option<&str>) -> AppendRecord {
    AppendRecord {
        topic: Arc::from(topic),
        partition,
        key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: Vec::new(),
        timestamp_ms: None,
    }
}

/// The first 100 records `store` serves of `topic`-`partition`: queue
/// offset and value (UTF-8), in order.
pub fn served(store: &Store, topic: &str, partition: u32) -> Vec<(u64, String)> {
    store
        .read(topic, partition, QueueOffset::new(0), 100, usize::MAX)
        .unwrap()
        .records
        .iter()
        .map(|r| {
            let v = r.value().unwrap();
            (
                r.queue_offset().get(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect()
}

pub fn with_headers(mut r: AppendRecord, headers: &[(&str, &[u8])]) -> AppendRecord {
    r.headers = headers
        .iter()
        .map(|(n, v)| Header {
            name: n.to_string(),
            value: Some(Bytes::copy_from_slice(v)),
        })
        .collect();
    r
}

/// A tiny seeded PRNG (xorshift64*), so failures reproduce from the seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Seed from TIDELOG_TEST_SEED, or from the clock; printed so a failure can
/// be replayed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("TIDELOG_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(42)
        });
    eprintln!("{test}: seed {seed} (rerun with TIDELOG_TEST_SEED={seed})");
    seed
}

/// Paths of the CommitLog segment files, oldest first (not a file the
/// preallocator is still making).
pub fn segment_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| tidelog_storage::fs_util::parse_offset_file_name(n, ""))
                .is_some()
        })
        .collect();
    v.sort();
    v
}

/// Overwrite bytes of a file at `at`.
pub fn poke(path: &Path, at: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

pub fn peek(path: &Path, at: u64, len: usize) -> Vec<u8> {
    let b = std::fs::read(path).unwrap();
    b[at as usize..at as usize + len].to_vec()
}
