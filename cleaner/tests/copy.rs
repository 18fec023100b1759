//! The dispatcher's copy into compacted logs (docs/compaction.md, "The
//! copy"), through the real store: a batch write torn in the middle (the
//! fault seam `FaultPoint::WriteCopies` leaves half its bytes in the file,
//! unpublished, as a crash mid-write does) is never served, and after the
//! crash recovery copies every acknowledged record exactly once, in order.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tidelog_cleaner::fault::{FaultPoint, Faults};
use tidelog_cleaner::{CompactTopicConfig, CompactedLogs};
use tidelog_storage::retention::FixedDiskUsage;
use tidelog_storage::{AppendRecord, Store, StoreConfig};

/// Generous bound on waits for the dispatcher (a shared, noisy machine).
const DEADLINE: Duration = Duration::from_secs(30);
const PARTITIONS: u32 = 2;

fn config(dir: &std::path::Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 1 << 20;
    c.consume_queue_units_per_file = 1024;
    c.index_slots = 64;
    c.index_entries = 4096;
    c.preallocate_next_segment = false;
    c.flush_interval_ms = 3_600_000;
    c.retention.disk = Arc::new(FixedDiskUsage::new(0.1));
    c
}

fn declare(logs: &CompactedLogs) {
    // Small compacted segments: the copies roll in the middle of batches.
    logs.set_topic(
        "users",
        CompactTopicConfig {
            segment_bytes: 4096,
            ..CompactTopicConfig::default()
        },
    );
}

/// One append of `n` records to `partition`; returns their values, which
/// are also their identities.
fn append(store: &Store, partition: u32, batch: usize, n: usize) -> Vec<String> {
    let values: Vec<String> = (0..n)
        .map(|i| format!("p{partition}-b{batch}-r{i}"))
        .collect();
    let records: Vec<AppendRecord> = values
        .iter()
        .enumerate()
        .map(|(i, v)| AppendRecord {
            topic: Arc::from("users"),
            partition,
            key: Some(Bytes::from(format!("k{}", i % 5))),
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Vec::new(),
            timestamp_ms: Some(1),
        })
        .collect();
    store.append(&records).unwrap();
    values
}

/// Every record the partition's compacted log serves, as (offset, value).
fn served(logs: &CompactedLogs, partition: u32) -> Vec<(u64, String)> {
    logs.log("users", partition)
        .unwrap()
        .read(0, usize::MAX, usize::MAX)
        .unwrap()
        .iter()
        .map(|r| {
            let v = String::from_utf8(r.value().unwrap().to_vec()).unwrap();
            (r.offset.get(), v)
        })
        .collect()
}

#[test]
fn a_copy_torn_mid_batch_is_never_served_and_recovery_copies_every_acked_record_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let logs = CompactedLogs::open_with_faults(dir.path(), Arc::clone(&faults)).unwrap();
    declare(&logs);
    let store = Store::open_with_sinks(config(dir.path()), vec![logs.sink()]).unwrap();
    let mut acked: Vec<Vec<String>> = vec![Vec::new(); PARTITIONS as usize];
    for batch in 0..20 {
        let p = batch as u32 % PARTITIONS;
        acked[p as usize].extend(append(&store, p, batch, 37));
    }
    assert!(store.wait_dispatched(DEADLINE));
    let copied_before: Vec<usize> = (0..PARTITIONS).map(|p| served(&logs, p).len()).collect();
    assert_eq!(copied_before, [370, 370]);

    // Every copy write from now on is torn, and retried, and torn again.
    faults.fail_after(FaultPoint::WriteCopies, 0);
    for batch in 20..40 {
        let p = batch as u32 % PARTITIONS;
        acked[p as usize].extend(append(&store, p, batch, 37));
    }
    let deadline = Instant::now() + DEADLINE;
    while store.stats().dispatch_errors < 3 {
        assert!(
            Instant::now() < deadline,
            "the torn writes never failed dispatch"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Readers see whole, published copies only: from offset 0 on, without
    // a gap, exactly up to the end offset the log publishes, each the
    // record acknowledged at that offset; the torn bytes past it are not.
    let mut torn_bytes = 0;
    for p in 0..PARTITIONS {
        let log = logs.log("users", p).unwrap();
        let end = log.next_offset();
        let got = served(&logs, p);
        assert_eq!(got.len() as u64, end, "partition {p}");
        for (i, (offset, value)) in got.iter().enumerate() {
            assert_eq!(*offset, i as u64);
            assert_eq!(value, &acked[p as usize][i]);
        }
        assert!(
            end < acked[p as usize].len() as u64,
            "the tear stopped the copy"
        );
        let active = log.segments().last().cloned().unwrap();
        torn_bytes += std::fs::metadata(active.path()).unwrap().len() - active.len();
    }
    assert!(torn_bytes > 0, "half a batch reached a file, unpublished");

    // The crash: no flush, no checkpoint; then a start without faults.
    store.close_uncleanly();
    drop(logs);
    let logs = CompactedLogs::open(dir.path()).unwrap();
    declare(&logs);
    let store = Store::open_with_sinks(config(dir.path()), vec![logs.sink()]).unwrap();
    assert!(store.wait_dispatched(DEADLINE));
    for p in 0..PARTITIONS {
        let want: Vec<(u64, String)> = acked[p as usize]
            .iter()
            .enumerate()
            .map(|(i, v)| (i as u64, v.clone()))
            .collect();
        assert_eq!(
            served(&logs, p),
            want,
            "partition {p}: every acked record once, in order"
        );
    }
    // And the copy goes on from there.
    let next = append(&store, 0, 99, 3);
    assert!(store.wait_dispatched(DEADLINE));
    let got = served(&logs, 0);
    assert_eq!(got.len(), acked[0].len() + 3);
    assert_eq!(got.last().unwrap().1, next[2]);
}
