//! Step 1's input and its check: the records (12-byte keys, 1 KiB values,
//! copies below any CommitLog's end), a compacted log built to a size with
//! each key's newest offset noted ([`Built`]), [`verify`] that a cleaned
//! log holds exactly one record per key at that offset, and the store
//! config of step 4.
//!
//! Invariant: a log is flushed after it is built (sealed segments synced,
//! `.new` ones renamed), so a copy of its directory opens with every
//! record, as a checkpointed log would.

use std::path::Path;
use std::time::Instant;

use bytes::Bytes;
use tidelog_cleaner::compacted::format::{decode, encode, Decoded, Fields, HEADER_LEN};
use tidelog_cleaner::{CompactTopicConfig, CompactedLog, CompactedRecord};
use tidelog_storage::test_rng::SplitMix64 as Rng;
use tidelog_storage::{FlushMode, PhysicalOffset, QueueOffset, StoreConfig};

use crate::plan::{Plan, PROGRESS_EVERY, VALUE_BYTES};
use crate::system::{mb, mbps};

pub(crate) fn key_bytes(k: u64) -> Vec<u8> {
    format!("key-{k:08}").into_bytes()
}

pub(crate) fn record(offset: u64, key: &[u8], value: &[u8], now: i64) -> CompactedRecord {
    let b = Bytes::from(encode(&Fields {
        offset: QueueOffset::new(offset),
        timestamp_ms: now,
        store_timestamp_ms: now,
        delete_horizon_ms: 0,
        // Copies of records the CommitLog took long ago: below any store's
        // dispatched position, so the background log planted into a store's
        // data dir survives its recovery, which drops copies at or past the
        // CommitLog's end (copies of records it lost).
        physical_offset: PhysicalOffset::new(0),
        key: Some(key),
        value: Some(value),
        headers_block: &[],
        header_count: 0,
        producer: None,
    }));
    match decode(&b).unwrap() {
        Decoded::Record(r) => r,
        Decoded::End => unreachable!(),
    }
}

pub(crate) fn topic_config(plan: &Plan) -> CompactTopicConfig {
    CompactTopicConfig {
        segment_bytes: plan.segment_bytes,
        min_compaction_lag_ms: 0,
        ..CompactTopicConfig::default()
    }
}

/// What was written: newest offset per key (u64::MAX: never written).
pub(crate) struct Built {
    pub(crate) latest: Vec<u64>,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
}

impl Built {
    pub(crate) fn distinct(&self) -> u64 {
        self.latest.iter().filter(|&&o| o != u64::MAX).count() as u64
    }
}

/// Append `target` bytes of records to `log`, then roll it.
pub(crate) fn build_log(
    log: &CompactedLog,
    plan: &Plan,
    target: u64,
    seed: u64,
    verbose: bool,
) -> Built {
    let rec_len = (HEADER_LEN + key_bytes(0).len() + VALUE_BYTES) as u64;
    let records = target / rec_len;
    let keys = (records * plan.distinct_pct / 100).max(1);
    let policy = topic_config(plan).roll_policy();
    let mut rng = Rng(seed);
    let mut value: Vec<u8> = (0..VALUE_BYTES)
        .map(|i| (i as u8).wrapping_mul(31) ^ 0x5a)
        .collect();
    let mut latest = vec![u64::MAX; keys as usize];
    let began = Instant::now();
    let mut last_report = began;
    let mut bytes = 0;
    for offset in 0..records {
        let k = rng.next() % keys;
        value[..8].copy_from_slice(&offset.to_le_bytes());
        let now = tidelog_storage::types::now_ms();
        let rec = record(offset, &key_bytes(k), &value, now);
        bytes += rec.len() as u64;
        assert!(log.append(&rec, policy, now).unwrap());
        latest[k as usize] = offset;
        if verbose && last_report.elapsed() >= PROGRESS_EVERY {
            last_report = Instant::now();
            eprintln!(
                "  build: {} / {records} records, {:.0} MB, {:.1} s, {:.0} MB/s",
                offset + 1,
                mb(bytes),
                began.elapsed().as_secs_f64(),
                mbps(bytes, began.elapsed())
            );
        }
    }
    log.end_batch().unwrap();
    log.roll(tidelog_storage::types::now_ms()).unwrap();
    // As a checkpoint would: the sealed segments synced and the rolled
    // ones renamed from `.new` (a copy of the directory opened without it
    // would drop them as made after the last checkpoint).
    log.flush().unwrap();
    if verbose {
        eprintln!(
            "  built {records} records over {keys} keys, {:.0} MB in {} segments, in {:.1} s ({:.0} MB/s through CompactedLog::append)",
            mb(bytes),
            log.segments().len() - 1,
            began.elapsed().as_secs_f64(),
            mbps(bytes, began.elapsed())
        );
    }
    Built {
        latest,
        records,
        bytes,
    }
}

/// Every record left is the newest of its key, and every key is there.
pub(crate) fn verify(log: &CompactedLog, built: &Built) {
    let mut seen = 0u64;
    for seg in log.segments() {
        let mut r = seg.reader(0);
        while let Some(rec) = r.next_record().unwrap() {
            let key = rec.key().unwrap();
            let k: usize = std::str::from_utf8(&key[4..]).unwrap().parse().unwrap();
            assert_eq!(built.latest[k], rec.offset.get(), "record of key {k} kept");
            assert_eq!(&rec.value().unwrap()[..8], &rec.offset.get().to_le_bytes());
            seen += 1;
        }
    }
    assert_eq!(seen, built.distinct(), "one record per key");
    assert_eq!(log.next_offset(), built.records, "end offset unchanged");
}

pub(crate) fn store_config(dir: &Path, plan: &Plan) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.flush = FlushMode::Async;
    if plan.full {
        c.commitlog_segment_bytes = 256 << 20;
    } else {
        c.commitlog_segment_bytes = 16 << 20;
        c.preallocate_next_segment = false;
    }
    // A benchmark measures the cleaner, not how full this shared
    // machine's disk happens to be: its fill must not refuse writes.
    c.retention.disk = std::sync::Arc::new(tidelog_storage::retention::FixedDiskUsage::new(0.1));
    c
}
