//! A cut stopped after any of its durable steps (a crash) is finished by
//! the next open, with the same result as an uninterrupted one.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::retention::FixedDiskUsage;
use crate::{AppendRecord, ProducerAppend, ProducerBatch, QueueOffset, Store, StoreConfig};

fn config(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 8 * 1024;
    c.consume_queue_units_per_file = 64;
    c.index_slots = 64;
    c.index_entries = 256;
    c.preallocate_next_segment = false;
    c.retention.disk = Arc::new(FixedDiskUsage::new(0.1));
    c
}

fn record(partition: u32, value: String) -> AppendRecord {
    AppendRecord {
        topic: Arc::from("t"),
        partition,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from(value)),
        headers: Vec::new(),
        timestamp_ms: None,
    }
}

/// What a node serves: its log's end, every partition's records, its
/// producers and its epochs.
type Served = (u64, Vec<Vec<(u64, Vec<u8>)>>, Vec<i32>, Vec<(u64, u64)>);

fn served(dir: &Path) -> Served {
    let store = Store::open(config(dir)).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let partitions = (0..2)
        .map(|p| {
            store
                .read("t", p, QueueOffset::new(0), 10_000, usize::MAX)
                .unwrap()
                .records
                .iter()
                .map(|r| (r.queue_offset().get(), r.value().unwrap().to_vec()))
                .collect()
        })
        .collect();
    let producers = store
        .producers("t", 0)
        .iter()
        .map(|p| p.last_sequence)
        .collect();
    let epochs = Epochs::load(dir)
        .unwrap()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start))
        .collect();
    let out = (
        store.commit_log().committed(),
        partitions,
        producers,
        epochs,
    );
    store.shutdown().unwrap();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_cut_stopped_after_any_step_is_finished_by_the_next_open() {
    let original = tempfile::tempdir().unwrap();
    let store = Store::open(config(original.path())).unwrap();
    let mut epochs = Epochs::load(original.path()).unwrap();
    epochs.begin(1, 0).unwrap();
    let mut cut_at = 0;
    for i in 0..120u32 {
        if i == 40 {
            cut_at = store.commit_log().committed();
            epochs.begin(2, cut_at).unwrap();
        }
        let batch = [record(0, format!("{i}-{}", "v".repeat(300)))];
        let p = ProducerBatch {
            producer_id: 7,
            epoch: 0,
            base_sequence: i as i32,
            transactional: false,
        };
        assert!(matches!(
            store.append_as(&batch, u64::MAX, Some(&p)).unwrap(),
            ProducerAppend::Written(_)
        ));
        store.append(&[record(1, format!("plain-{i}"))]).unwrap();
    }
    assert!(store.commit_log().segment_count() >= 4);
    store.checkpoint().unwrap();
    store.close_uncleanly();
    request(original.path(), cut_at).unwrap();

    let whole = tempfile::tempdir().unwrap();
    copy_dir(original.path(), whole.path());
    let want = served(whole.path());
    assert_eq!(want.0, cut_at);
    assert_eq!(want.1[0].len(), 40);
    assert_eq!(want.2, vec![39], "the producer as it was at the cut");
    assert_eq!(want.3, vec![(1, 0)]);

    let mut stopped = 0;
    for steps in 0.. {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(original.path(), dir.path());
        let lock = crate::DataDirLock::acquire(dir.path()).unwrap();
        let finished = apply(dir.path(), steps).unwrap().is_some();
        drop(lock);
        if finished {
            break;
        }
        assert_eq!(pending(dir.path()).unwrap(), Some(cut_at), "still to do");
        assert_eq!(served(dir.path()), want, "stopped after {steps} steps");
        stopped += 1;
    }
    assert!(stopped >= 5, "every step stopped once ({stopped})");
}
