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
    let read = store
        .read("t", 0, QueueOffset::new(0), 1000, usize::MAX)
        .unwrap();
    assert!(
        BEFORE_SEGMENT_LOOKUP.with(|h| h.borrow().is_none()),
        "the hook ran"
    );
    let new_min = log.min_offset();
    assert!(new_min > first);
    let offsets: Vec<u64> = read
        .records
        .iter()
        .map(|r| r.queue_offset().get())
        .collect();
    assert!(!offsets.is_empty());
    assert!(read.records[0].physical_offset().get() >= new_min);
    assert_eq!(*offsets.last().unwrap(), 39);
    assert!(offsets.windows(2).all(|w| w[1] == w[0] + 1), "{offsets:?}");
    assert_eq!(read.next_offset.get(), 40);
}

/// A produce that passed its topic check just before the topic's deletion
/// appends between the deletion's snapshot of the writer's next offsets and
/// the queues' deletion (forced with the hook): it is refused, so the
/// deleted topic's queue is not created again (now or after a restart), and
/// a topic created again continues past every record the old one got.
#[test]
fn an_append_racing_a_topic_deletion_is_refused_not_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(small_config(dir.path())).unwrap());
    for i in 0..3 {
        store.append(&[record("t", 0, &format!("v{i}"))]).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let racer = Arc::clone(&store);
    let raced: Arc<std::sync::Mutex<Option<Result<Vec<Appended>>>>> = Arc::default();
    let raced_out = Arc::clone(&raced);
    crate::store::BEFORE_QUEUES_DELETE.with(|h| {
        *h.borrow_mut() = Some(Box::new(move || {
            let r = racer.append(&[record("t", 0, "late")]);
            *raced_out.lock().unwrap() = Some(r);
        }))
    });
    assert_eq!(store.delete_topic("t").unwrap(), 1);
    let raced = raced.lock().unwrap().take().expect("the hook ran");
    assert!(
        matches!(raced, Err(StoreError::TopicDeleted { ref topic }) if topic == "t"),
        "{raced:?}"
    );
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(store.inner.queues.get("t", 0).is_none());
    assert_eq!(store.inner.queues.deleted_next_offset("t", 0), Some(3));
    // Still refused until the topic is created again.
    assert!(store.append(&[record("t", 0, "later")]).is_err());
    let store = Arc::into_inner(store).unwrap();
    store.shutdown().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert!(store.inner.queues.get("t", 0).is_none());
    // Created again: offsets continue where the deleted topic's ended.
    let tp = TopicPartition::new("t", 0).unwrap();
    assert_eq!(store.commit_log().open_partition(&tp), 3);
    let a = store.append(&[record("t", 0, "new")]).unwrap();
    assert_eq!(a[0].queue_offset.get(), 3);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let read = store
        .read("t", 0, QueueOffset::new(3), 10, usize::MAX)
        .unwrap();
    assert_eq!(read.records.len(), 1);
}
