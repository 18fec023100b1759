//! Transactions in the store (issue 38's storage side): transactional
//! entries and markers move each partition's last stable offset (LSO),
//! aborts are named to read_committed fetches, Kafka's producer rules are
//! kept under the writer's lock, and all of it is rebuilt after a clean
//! restart, a crash, a power loss, and a lost snapshot or index file.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tidelog_storage::durability::image;
use tidelog_storage::{
    AppendRecord, FlushMode, MarkerSpec, ProducerAppend, ProducerBatch, QueueOffset,
    SequenceProblem, Store, StoreConfig, StoreError, Trigger,
};

const T: &str = "t";

fn batch(n: usize, tag: &str) -> Vec<AppendRecord> {
    (0..n)
        .map(|i| record(T, 0, Some("k"), Some(&format!("{tag}{i}"))))
        .collect()
}

/// Producer `id`'s batch at `seq`, in its transaction or not.
fn producer(id: i64, epoch: i16, seq: i32, transactional: bool) -> ProducerBatch {
    ProducerBatch {
        producer_id: id,
        epoch,
        base_sequence: seq,
        transactional,
    }
}

fn write(
    store: &Store,
    records: &[AppendRecord],
    p: ProducerBatch,
) -> tidelog_storage::Result<u64> {
    match store.append_as(records, u64::MAX, Some(&p))? {
        ProducerAppend::Written(a) => Ok(a[0].queue_offset.get()),
        other => panic!("{other:?}"),
    }
}

fn marker(store: &Store, id: i64, epoch: i16, commit: bool) -> tidelog_storage::Result<u64> {
    let m = MarkerSpec {
        producer_id: id,
        epoch,
        commit,
        coordinator_epoch: 3,
    };
    Ok(store
        .append_marker(&Arc::from(T), 0, m)?
        .wait()?
        .queue_offset
        .get())
}

/// The partition as a read_committed reader must see it: LSO and the
/// aborted transactions of everything below it.
fn committed_view(store: &Store) -> (u64, Vec<(i64, u64)>) {
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let lso = store.last_stable_offset(T, 0);
    (lso, store.aborted_transactions(T, 0, 0, lso))
}

/// Producer 1 commits, producer 2 aborts, producer 3 stays open; returns
/// the view a restart must keep: 0..=1 p1, 2 plain, 3 p2, 4 p3, 5 p1's
/// commit, 6 p2's abort, so the LSO is 4 and p2's transaction from 3 is
/// aborted.
fn three_transactions(store: &Store) -> (u64, Vec<(i64, u64)>) {
    assert_eq!(
        write(store, &batch(2, "a"), producer(1, 0, 0, true)).unwrap(),
        0
    );
    store.append(&batch(1, "plain")).unwrap();
    assert_eq!(
        write(store, &batch(1, "b"), producer(2, 0, 0, true)).unwrap(),
        3
    );
    assert_eq!(
        write(store, &batch(1, "c"), producer(3, 0, 0, true)).unwrap(),
        4
    );
    assert_eq!(
        committed_view(store).0,
        0,
        "p1's open transaction holds the LSO"
    );
    assert_eq!(marker(store, 1, 0, true).unwrap(), 5);
    assert_eq!(committed_view(store).0, 3, "then p2's");
    assert_eq!(marker(store, 2, 0, false).unwrap(), 6);
    let view = committed_view(store);
    assert_eq!(view, (4, vec![(2, 3)]), "then p3's; p2's aborted");
    view
}

#[test]
fn markers_move_the_lso_and_aborts_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(store.last_stable_offset(T, 0), 0);
    three_transactions(&store);
    // p3 commits: nothing open, the LSO is the end.
    assert_eq!(marker(&store, 3, 0, true).unwrap(), 7);
    assert_eq!(committed_view(&store), (8, vec![(2, 3)]));
    // A window names the abort only when it reaches its range.
    assert_eq!(store.aborted_transactions(T, 0, 7, 8), []);
    assert_eq!(store.aborted_transactions(T, 0, 0, 3), []);
    assert_eq!(store.aborted_transactions(T, 0, 6, 8), [(2, 3)]);

    // What readers get: markers are records with their control flag, the
    // data knows its producer and whether it is a transaction's.
    let read = store
        .read(T, 0, QueueOffset::new(0), 100, usize::MAX)
        .unwrap();
    let kinds: Vec<(bool, bool)> = read
        .records
        .iter()
        .map(|r| (r.is_transactional(), r.is_control()))
        .collect();
    assert_eq!(
        kinds,
        [
            (true, false),
            (true, false),
            (false, false),
            (true, false),
            (true, false),
            (true, true),
            (true, true),
            (true, true)
        ]
    );
    let abort = read.records[6].marker().unwrap();
    assert!(!abort.commit);
    assert_eq!(abort.coordinator_epoch, 3);
    assert_eq!(
        (abort.txn_first_offset, abort.last_stable_offset),
        (Some(3), 4)
    );
    assert_eq!(read.records[6].key().unwrap().as_ref(), [0, 0, 0, 0]);
    assert_eq!(read.records[5].key().unwrap().as_ref(), [0, 0, 0, 1]);
    assert_eq!(read.records[0].producer().unwrap().producer_id, 1);
    assert_eq!(read.records[2].producer(), None);
    assert_eq!(read.records[2].marker(), None);
    // The aborted transaction's index entry, appended by the dispatcher.
    let file = dir.path().join("consumequeue/t/0/aborted.txnindex");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 48);
    store.shutdown().unwrap();
}

#[test]
fn kafkas_producer_rules_hold_for_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    write(&store, &batch(2, "a"), producer(1, 0, 0, true)).unwrap();
    // Outside its open transaction: INVALID_TXN_STATE's problem.
    assert!(matches!(
        write(&store, &batch(1, "x"), producer(1, 0, 2, false)),
        Err(StoreError::ProducerRefused {
            problem: SequenceProblem::TransactionOpen { producer_id: 1 },
            ..
        })
    ));
    // Sequences run on through the transaction and past its marker.
    write(&store, &batch(1, "b"), producer(1, 0, 2, true)).unwrap();
    marker(&store, 1, 0, true).unwrap();
    write(&store, &batch(1, "c"), producer(1, 0, 3, false)).unwrap();
    // A marker of a new epoch (a coordinator's abort after a bump)
    // fences the old epoch; the new one starts at sequence 0.
    write(&store, &batch(1, "d"), producer(1, 0, 4, true)).unwrap();
    marker(&store, 1, 1, false).unwrap();
    assert!(matches!(
        write(&store, &batch(1, "e"), producer(1, 0, 5, true)),
        Err(StoreError::ProducerRefused {
            problem: SequenceProblem::StaleEpoch { current: 1, .. },
            ..
        })
    ));
    assert!(matches!(
        marker(&store, 1, 0, true),
        Err(StoreError::ProducerRefused {
            problem: SequenceProblem::StaleEpoch { .. },
            ..
        })
    ));
    write(&store, &batch(1, "f"), producer(1, 1, 0, true)).unwrap();
    // A marker to a partition the producer never wrote ends nothing.
    marker(&store, 9, 0, false).unwrap();
    let (lso, aborted) = committed_view(&store);
    let end = store.offsets(T, 0).1;
    assert!(lso < end);
    assert_eq!(aborted, [(1, 5)]);
    assert_eq!(
        lso,
        end - 2,
        "p1's epoch-1 transaction from {} holds it",
        end - 2
    );
    store.shutdown().unwrap();
}

#[test]
fn clean_and_unclean_restarts_keep_open_and_aborted_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    let view = three_transactions(&store);
    // Clean.
    store.shutdown().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(committed_view(&store), view);
    // A crash with the transactions past the checkpoint (replayed).
    store.close_uncleanly();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(committed_view(&store), view);
    // A crash with them wholly below it (from the snapshot and the file).
    bury(&store);
    store.close_uncleanly();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert!(store.recovery_report().scanned_from > 0);
    assert_eq!(committed_view(&store), view);
    // The open transaction still closes, and its producer's epoch holds.
    assert!(matches!(
        write(&store, &batch(1, "x"), producer(3, 0, 1, false)),
        Err(StoreError::ProducerRefused {
            problem: SequenceProblem::TransactionOpen { .. },
            ..
        })
    ));
    let m = marker(&store, 3, 0, false).unwrap();
    let view = committed_view(&store);
    assert_eq!(view, (m + 1, vec![(2, 3), (3, 4)]));
    assert_eq!(store.offsets(T, 0).1, m + 1);
    store.shutdown().unwrap();
}

#[test]
fn a_lost_snapshot_or_index_file_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    let view = three_transactions(&store);
    bury(&store);
    store.shutdown().unwrap();
    let index = dir.path().join("consumequeue/t/0/aborted.txnindex");
    let snapshot = dir.path().join("producer-state");

    // The index file: the snapshot counted one abort, the file is gone.
    std::fs::remove_file(&index).unwrap();
    let (store, logs) = log_capture::logged(|| Store::open(small_config(dir.path())).unwrap());
    assert!(logs.contains("aborted-transaction index lost"), "{logs}");
    assert_eq!(committed_view(&store), view);
    assert_eq!(std::fs::metadata(&index).unwrap().len(), 48);
    store.shutdown().unwrap();

    // A torn tail is cut, the entry rebuilt.
    let bytes = std::fs::read(&index).unwrap();
    std::fs::write(&index, &bytes[..30]).unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(committed_view(&store), view);
    store.shutdown().unwrap();

    // The snapshot: the whole log is scanned for the open transaction.
    std::fs::remove_file(&snapshot).unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(store.recovery_report().scanned_from, 0);
    assert_eq!(committed_view(&store), view);
    store.shutdown().unwrap();

    // A damaged entry is refused, not read as some other range.
    let mut bytes = std::fs::read(&index).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&index, &bytes).unwrap();
    let err = Store::open(small_config(dir.path()))
        .err()
        .expect("refused");
    assert!(matches!(err, StoreError::Corruption { .. }), "{err:?}");
}

#[test]
fn a_deleted_topic_takes_its_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    three_transactions(&store);
    store.delete_topic(T).unwrap();
    let end = store.offsets(T, 0).1;
    assert_eq!(store.last_stable_offset(T, 0), end);
    assert_eq!(store.aborted_transactions(T, 0, 0, u64::MAX), []);
    assert!(!dir
        .path()
        .join("consumequeue/t/0/aborted.txnindex")
        .exists());
    store.shutdown().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(store.aborted_transactions(T, 0, 0, u64::MAX), []);
    store.shutdown().unwrap();
}

/// Sync flush: every marker answered survives a power loss right after
/// its answer, and recovery agrees with what readers were told.
#[test]
fn acknowledged_markers_survive_a_power_loss() {
    let root = tempfile::tempdir().unwrap();
    let live = root.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let image = image::install(&live).unwrap();
    let store = Store::open(sync_config(&live)).unwrap();
    let view = three_transactions(&store);
    let after = root.path().join("after");
    image.snapshot(&after, None).unwrap();
    store.close_uncleanly();
    drop(image);
    let store = Store::open(sync_config(&after)).unwrap();
    assert_eq!(committed_view(&store), view);
    store.close_uncleanly();
}

fn sync_config(dir: &Path) -> StoreConfig {
    let mut c = small_config(dir);
    c.flush = FlushMode::Sync;
    c
}

/// Records of another topic past everything, then a checkpoint: the
/// transactions lie below the recovery start after it.
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

/// DescribeProducers' facts (KIP-664): each producer with state in the
/// partition, its last sequence and its open transaction's first offset.
#[test]
fn the_producers_of_a_partition_are_listed_with_their_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(store.producers(T, 0), []);
    three_transactions(&store);
    let got: Vec<_> = store
        .producers(T, 0)
        .iter()
        .map(|p| (p.producer_id, p.epoch, p.last_sequence, p.txn_start_offset))
        .collect();
    // p1 wrote two records and committed, p2 one and aborted, p3 one,
    // still open at offset 4.
    assert_eq!(got, [(1, 0, 1, None), (2, 0, 0, None), (3, 0, 0, Some(4))]);
    assert!(store
        .producers(T, 0)
        .iter()
        .all(|p| p.last_timestamp_ms > 0));
    assert_eq!(
        store.producers(T, 1),
        [],
        "another partition's are not listed"
    );
    assert_eq!(store.producers("other", 0), []);
    // The same after a restart (the snapshot and the log).
    store.close_uncleanly();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(store.producers(T, 0).len(), 3);
    assert_eq!(store.producers(T, 0)[2].txn_start_offset, Some(4));
    store.close_uncleanly();
}

/// Retention forgets the aborted transactions it took the records of, in
/// memory and in the index file, so a partition aborting transactions for
/// years keeps a bounded list; a topic the keep rule names (a compact
/// one, whose compacted log outlives the CommitLog) keeps them. Nothing
/// is forgotten before the rule is installed.
#[test]
fn retention_forgets_the_aborted_transactions_below_a_partitions_beginning() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    // Producer 1 aborts one transaction in T and producer 2 one in "kept";
    // then enough of another topic that both lie in sealed segments.
    let kept = |value: &str| record("kept", 0, Some("k"), Some(value));
    write(&store, &batch(2, "a"), producer(1, 0, 0, true)).unwrap();
    marker(&store, 1, 0, false).unwrap();
    match store
        .append_as(&[kept("x")], u64::MAX, Some(&producer(2, 0, 0, true)))
        .unwrap()
    {
        ProducerAppend::Written(_) => {}
        other => panic!("{other:?}"),
    }
    store
        .append_marker(
            &Arc::from("kept"),
            0,
            MarkerSpec {
                producer_id: 2,
                epoch: 0,
                commit: false,
                coordinator_epoch: 0,
            },
        )
        .unwrap()
        .wait()
        .unwrap();
    bury(&store);
    let index_file = dir.path().join("consumequeue/t/0/aborted.txnindex");
    assert!(index_file.exists());
    // No rule installed: retention forgets nothing.
    store.run_retention(Trigger::ManualForce).unwrap();
    assert_eq!(store.aborted_transactions(T, 0, 0, u64::MAX), [(1, 0)]);

    store.set_aborted_keep(Arc::new(|topic| topic == "kept"));
    bury(&store);
    let out = store.run_retention(Trigger::ManualForce).unwrap();
    assert!(out.deleted_segments > 0, "{out:?}");
    assert!(store.offsets(T, 0).0 > 2, "T's records are gone");
    assert_eq!(store.aborted_transactions(T, 0, 0, u64::MAX), []);
    assert!(!index_file.exists(), "its file held nothing else");
    assert_eq!(
        store.aborted_transactions("kept", 0, 0, u64::MAX),
        [(2, 0)],
        "a kept topic's stay"
    );
    // Across an unclean restart: no rebuild brings them back.
    store.close_uncleanly();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(store.aborted_transactions(T, 0, 0, u64::MAX), []);
    assert_eq!(store.aborted_transactions("kept", 0, 0, u64::MAX), [(2, 0)]);
    store.shutdown().unwrap();
}
