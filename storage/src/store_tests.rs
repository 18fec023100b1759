//! Store tests that need the crate's test hooks (the integration tests in
//! `tests/` cannot reach them).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::commit_log::BEFORE_SEGMENT_LOOKUP;
use crate::retention::FixedDiskUsage;

fn small_config(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 4096;
    c.consume_queue_units_per_file = 64;
    c.index_slots = 64;
    c.index_entries = 256;
    c.flush_interval_ms = 50;
    c.preallocate_next_segment = false;
    c.retention.disk = Arc::new(FixedDiskUsage::new(0.1));
    c
}

fn record(topic: &str, partition: u32, value: &str) -> AppendRecord {
    AppendRecord {
        topic: Arc::from(topic),
        partition,
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Vec::new(),
        timestamp_ms: None,
    }
}

/// A fetch whose first record's segment is deleted by retention between
/// its check of the log's start and its segment lookup (forced with the
/// lookup hook) answers from the new beginning instead of failing.
#[test]
fn a_read_racing_retention_answers_from_the_new_beginning() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    let value = "v".repeat(300);
    for _ in 0..40 {
        store.append(&[record("t", 0, &value)]).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let log = Arc::clone(store.commit_log());
    assert!(log.segment_count() >= 3, "{}", log.segment_count());
    let first = log.segments()[0].base();
    let deleter = Arc::clone(&log);
    BEFORE_SEGMENT_LOOKUP.with(|h| {
        *h.borrow_mut() = Some(Box::new(move || {
            assert!(deleter.delete_oldest_segment(first).unwrap().is_some());
        }))
    });
    let read = store.read("t", 0, 0, 1000, usize::MAX).unwrap();
    assert!(
        BEFORE_SEGMENT_LOOKUP.with(|h| h.borrow().is_none()),
        "the hook ran"
    );
    let new_min = log.min_offset();
    assert!(new_min > first);
    let offsets: Vec<u64> = read.records.iter().map(|r| r.queue_offset().0).collect();
    assert!(!offsets.is_empty());
    assert!(read.records[0].physical_offset().0 >= new_min);
    assert_eq!(*offsets.last().unwrap(), 39);
    assert!(offsets.windows(2).all(|w| w[1] == w[0] + 1), "{offsets:?}");
    assert_eq!(read.next_offset, 40);
}
