//! Idempotent producers through the real store: the sequence state
//! survives clean and unclean restarts whatever the recovery scan reads
//! (the snapshot written with the checkpoint), a lost or damaged snapshot
//! is rebuilt from the log tail with a warning, retention deleting the
//! producer's segments keeps its state, and two threads racing with one
//! producer's batch write it once.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::*;
use tidelog_storage::retention::FixedDiskUsage;
use tidelog_storage::{
    AppendRecord, ProducerAppend, ProducerBatch, SequenceProblem, Store, StoreError, Trigger,
};

fn batch(partition: u32, from: u64, n: u64) -> Vec<AppendRecord> {
    (from..from + n)
        .map(|i| record("t", partition, Some("k"), Some(&format!("v{i}"))))
        .collect()
}

fn producer(base_sequence: i32) -> ProducerBatch {
    ProducerBatch {
        producer_id: 3,
        epoch: 0,
        base_sequence,
        transactional: false,
    }
}

/// Write `batches` batches of 3 records as producer 3 to t-0: sequences
/// 0, 3, 6, ...; returns each batch's base offset.
fn produce(store: &Store, batches: u64) -> Vec<u64> {
    (0..batches)
        .map(|b| {
            let got = store
                .append_as(
                    &batch(0, b * 3, 3),
                    u64::MAX,
                    Some(&producer((b * 3) as i32)),
                )
                .unwrap();
            match got {
                ProducerAppend::Written(a) => a[0].queue_offset.get(),
                other => panic!("{other:?}"),
            }
        })
        .collect()
}

/// Retry batch `b` (see [`produce`]).
fn retry(store: &Store, b: u64) -> tidelog_storage::Result<ProducerAppend> {
    store.append_as(
        &batch(0, b * 3, 3),
        u64::MAX,
        Some(&producer((b * 3) as i32)),
    )
}

fn assert_duplicate(got: tidelog_storage::Result<ProducerAppend>, base: u64) {
    match got {
        Ok(ProducerAppend::Duplicate(meta)) => {
            assert_eq!((meta.base_offset, meta.last_offset), (base, base + 2))
        }
        other => panic!("expected a duplicate at {base}: {other:?}"),
    }
}

/// Fill the log with other records past the producer's, so a checkpoint
/// (and so the recovery scan's start) is past its entries.
fn bury(store: &Store) {
    let v = "x".repeat(1000);
    for i in 0..200 {
        store
            .append(&[record("other", 0, None, Some(&format!("{i}{v}")))])
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.checkpoint().unwrap();
}

#[test]
fn retries_after_clean_and_unclean_restarts_are_answered_with_the_original_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    let bases = produce(&store, 6);
    bury(&store);
    store.shutdown().unwrap();
    // Clean: the scan reads nothing, the snapshot holds the state.
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(store.recovery_report().records_scanned, 0);
    for b in 1..6 {
        assert_duplicate(retry(&store, b), bases[b as usize]);
    }
    // Older than the last five: out of order, nothing written.
    assert!(matches!(
        retry(&store, 0),
        Err(StoreError::ProducerRefused {
            problem: SequenceProblem::OutOfOrder { expected: 18, .. },
            ..
        })
    ));
    // The next batch continues; then a crash (no shutdown).
    let more = store
        .append_as(&batch(0, 18, 3), u64::MAX, Some(&producer(18)))
        .unwrap();
    let ProducerAppend::Written(more) = more else {
        panic!("{more:?}")
    };
    drop(store);
    let store = Store::open(small_config(dir.path())).unwrap();
    assert!(!store.recovery_report().clean_shutdown);
    assert_duplicate(retry(&store, 6), more[0].queue_offset.get());
    assert_duplicate(retry(&store, 5), bases[5]);
    // Nothing was written twice.
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.offsets("t", 0), (0, 21));
    store.shutdown().unwrap();
}

#[test]
fn a_lost_or_damaged_snapshot_is_rebuilt_from_the_log_tail_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    let bases = produce(&store, 3);
    store.shutdown().unwrap();
    let snapshot = dir.path().join("producer-state");
    assert!(snapshot.exists());
    // Damaged, with the producer's entries still in the scan (no
    // checkpoint: a full scan): rebuilt from them.
    std::fs::write(&snapshot, b"junk").unwrap();
    std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
    let (store, logs) = log_capture::logged(|| Store::open(small_config(dir.path())).unwrap());
    assert!(
        logs.contains("producer-state snapshot is damaged"),
        "{logs}"
    );
    assert_duplicate(retry(&store, 2), bases[2]);
    bury(&store);
    store.shutdown().unwrap();
    // Missing, with the producer's entries before the checkpoint's start:
    // the scan starts at the log's first entry instead (a warning says
    // so), so the state is rebuilt whole and the retry is still a
    // duplicate; the sinks are handed only what they lacked.
    std::fs::remove_file(&snapshot).unwrap();
    let (store, logs) = log_capture::logged(|| Store::open(small_config(dir.path())).unwrap());
    assert!(
        logs.contains("no producer-state snapshot") && logs.contains("whole commit log"),
        "{logs}"
    );
    assert_eq!(store.recovery_report().scanned_from, 0);
    assert_eq!(store.recovery_report().records_replayed, 0);
    assert_duplicate(retry(&store, 2), bases[2]);
    store.shutdown().unwrap();
}

#[test]
fn retention_deleting_the_producers_segments_keeps_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config_with_segments(dir.path(), 4096);
    cfg.retention.disk = Arc::new(FixedDiskUsage::new(0.5));
    let store = Store::open(cfg.clone()).unwrap();
    let bases = produce(&store, 2);
    bury(&store);
    store.run_retention(Trigger::ManualForce).unwrap();
    store.shutdown().unwrap();
    let store = Store::open(cfg).unwrap();
    // The producer's records are gone with their segments.
    assert_eq!(store.offsets("t", 0), (6, 6));
    assert_duplicate(retry(&store, 1), bases[1]);
    store.shutdown().unwrap();
}

#[test]
fn two_threads_racing_with_one_producers_batch_write_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(small_config(dir.path())).unwrap());
    for round in 0..50u64 {
        let barrier = Arc::new(Barrier::new(2));
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let store = Arc::clone(&store);
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    store
                        .append_as(
                            &batch(1, round * 2, 2),
                            u64::MAX,
                            Some(&ProducerBatch {
                                producer_id: 9,
                                epoch: 0,
                                base_sequence: (round * 2) as i32,
                                transactional: false,
                            }),
                        )
                        .unwrap()
                })
            })
            .collect();
        let outcomes: Vec<ProducerAppend> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let written = outcomes
            .iter()
            .filter(|o| matches!(o, ProducerAppend::Written(_)))
            .count();
        assert_eq!(written, 1, "round {round}: {outcomes:?}");
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.offsets("t", 1), (0, 100));
}
