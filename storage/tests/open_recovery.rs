//! What opening a data dir does with the indexes and the checkpoint after
//! a crash or a power loss: where recovery starts, what happens to a
//! damaged checkpoint or a torn ConsumeQueue unit, and what a fresh data
//! dir logs.
//!
//! A power loss is simulated by hand: the store is stopped the way a
//! crash stops it (`close_uncleanly`), then the bytes that never reached
//! the disk are zeroed and the checkpoint is set to what it held.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::Path;
use std::time::Duration;

use common::log_capture::logged;
use common::*;
use tidelog_storage::checkpoint::Checkpoint;
use tidelog_storage::{CorruptionKind, QueueOffset, Store, StoreConfig, StoreError};

/// No periodic checkpoint, so each test decides what the checkpoint says.
fn cfg(dir: &Path) -> StoreConfig {
    let mut c = small_config(dir);
    c.flush_interval_ms = 3_600_000;
    c
}

fn append(store: &Store, i: usize) -> u64 {
    store
        .append(&[record(
            "t",
            0,
            Some(&format!("k{i}")),
            Some(&format!("value-{i}")),
        )])
        .unwrap()[0]
        .queue_offset
        .get()
}

fn values(store: &Store, from: u64) -> Vec<String> {
    store
        .read("t", 0, QueueOffset::new(from), 10_000, usize::MAX)
        .unwrap()
        .records
        .iter()
        .map(|r| String::from_utf8(r.value().unwrap().to_vec()).unwrap())
        .collect()
}

const UNCLEAN: &str = "did not shut down cleanly";

#[test]
fn a_fresh_data_dir_does_not_claim_an_unclean_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(!log.contains(UNCLEAN), "{log}");
    assert!(log.contains("store open"), "the capture works: {log}");
    append(&store, 0);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    store.close_uncleanly();
    // After a real crash it is said.
    let (_store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(log.contains(UNCLEAN), "{log}");
}

#[test]
fn recovery_starts_at_the_flushed_position_after_a_power_loss() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    for i in 0..10 {
        append(&store, i);
    }
    store.checkpoint().unwrap();
    let flushed = store.stats().commitlog_flushed_offset;
    for i in 10..20 {
        append(&store, i);
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let end = store.commit_log().committed();
    assert_eq!(store.commit_log().segment_count(), 1);
    store.close_uncleanly();
    // What an older tidelog's checkpoint could say (it read `dispatched`
    // after the flush), and what a power loss leaves of the log: nothing
    // past the flushed position.
    Checkpoint {
        commitlog_flushed: flushed,
        dispatched: end,
        written_at_ms: 1,
    }
    .store(dir.path())
    .unwrap();
    let seg = segment_files(dir.path()).remove(0);
    poke(&seg, flushed, &vec![0u8; (end - flushed) as usize]);

    let store = Store::open(cfg(dir.path())).unwrap();
    assert_eq!(store.recovery_report().scanned_from, flushed);
    assert_eq!(store.commit_log().committed(), flushed);
    // The queue ends at the recovered end; every fetch answers.
    assert_eq!(store.offsets("t", 0), (0, 10));
    for from in 0..25 {
        let got = values(&store, from);
        let want: Vec<String> = (from..10).map(|i| format!("value-{i}")).collect();
        assert_eq!(got, want, "fetch from {from}");
    }
    // No index entry points at the zeros.
    let all = (i64::MIN / 2, i64::MAX / 2);
    assert!(store
        .query_by_key("t", b"k15", all.0, all.1, 10)
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .query_by_key("t", b"k5", all.0, all.1, 10)
            .unwrap()
            .len(),
        1
    );
    // Later records continue the queue's offsets.
    assert_eq!(append(&store, 10), 10);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(values(&store, 10), vec!["value-10".to_string()]);
    store.shutdown().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    assert_eq!(store.offsets("t", 0), (0, 11));
}

#[test]
fn a_checkpoint_never_claims_dispatched_past_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    for i in 0..10 {
        append(&store, i);
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    // A forced retention pass writes a checkpoint of its own: it must
    // cover only flushed bytes (it flushes first).
    store
        .run_retention(tidelog_storage::Trigger::ManualForce)
        .unwrap();
    let cp = Checkpoint::load(dir.path()).unwrap().unwrap();
    assert!(cp.dispatched <= cp.commitlog_flushed, "{cp:?}");
    assert_eq!(cp.dispatched, store.commit_log().committed(), "{cp:?}");
}

#[test]
fn a_corrupt_checkpoint_falls_back_to_a_full_scan() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    for i in 0..10 {
        append(&store, i);
    }
    store.shutdown().unwrap();
    let path = dir.path().join(tidelog_storage::checkpoint::FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();

    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(log.contains("checkpoint is damaged"), "{log}");
    // The previous run shut down cleanly: the start-up line says why it
    // scans everything, not that it crashed.
    assert!(!log.contains(UNCLEAN), "{log}");
    assert!(log.contains("no usable checkpoint (damaged)"), "{log}");
    let report = store.recovery_report();
    assert!(!report.clean_shutdown);
    assert_eq!(report.scanned_from, 0);
    assert_eq!(report.records_scanned, 10);
    assert_eq!(values(&store, 0).len(), 10);
    assert_eq!(append(&store, 10), 10);
}

fn queue_file(dir: &Path, topic: &str, partition: u32) -> std::path::PathBuf {
    dir.join(format!("consumequeue/{topic}/{partition}"))
        .join(tidelog_storage::fs_util::offset_file_name(0))
}

/// The last unit half written, as a power loss can leave it: its physical
/// offset, but no size or key hash.
fn tear_unit(dir: &Path, unit: u64) {
    let unit_len = tidelog_storage::consume_queue::format::UNIT_LEN as u64;
    poke(&queue_file(dir, "t", 0), unit * unit_len + 8, &[0u8; 12]);
}

#[test]
fn a_torn_queue_unit_does_not_stop_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    for i in 0..20 {
        append(&store, i);
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    store.close_uncleanly();
    tear_unit(dir.path(), 19);
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(log.contains("invalid consume queue unit"), "{log}");
    assert_eq!(store.offsets("t", 0), (0, 20));
    let want: Vec<String> = (0..20).map(|i| format!("value-{i}")).collect();
    assert_eq!(values(&store, 0), want);
    assert_eq!(append(&store, 20), 20);
}

#[test]
fn a_torn_queue_unit_behind_the_checkpoint_moves_the_replay_back() {
    // The checkpoint says everything was indexed (a clean shutdown), yet
    // the queue's last unit is torn: recovery re-dispatches from before it.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    for i in 0..20 {
        append(&store, i);
    }
    store.shutdown().unwrap();
    tear_unit(dir.path(), 19);
    let store = Store::open(cfg(dir.path())).unwrap();
    let report = store.recovery_report();
    assert!(
        report.scanned_from < store.commit_log().committed(),
        "{report:?}"
    );
    assert!(report.records_replayed >= 1, "{report:?}");
    assert_eq!(store.offsets("t", 0), (0, 20));
    assert_eq!(values(&store, 19), vec!["value-19".to_string()]);
}

/// Queue file `n` (of `consume_queue_units_per_file` units) of `t/0`.
fn nth_queue_file(dir: &Path, n: u64) -> std::path::PathBuf {
    let unit_len = tidelog_storage::consume_queue::format::UNIT_LEN as u64;
    let file_bytes = cfg(dir).consume_queue_units_per_file * unit_len;
    dir.join("consumequeue/t/0")
        .join(tidelog_storage::fs_util::offset_file_name(n * file_bytes))
}

fn set_len(path: &Path, len: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(len).unwrap();
}

#[test]
fn a_short_last_queue_file_is_extended_and_rebuilt() {
    // What a power loss can leave of a queue file whose name reached the
    // disk before its size (the dispatcher makes new files with no fsync;
    // older tidelogs did not make the size durable either), torn: a prefix
    // of its first page, here two units and part of a third, behind a
    // clean checkpoint.
    let units = cfg(Path::new("")).consume_queue_units_per_file;
    let unit_len = tidelog_storage::consume_queue::format::UNIT_LEN as u64;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    let total = units as usize + 10;
    for i in 0..total {
        append(&store, i);
    }
    store.shutdown().unwrap();
    set_len(&nth_queue_file(dir.path(), 1), 2 * unit_len + 6);
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(
        log.contains("a queue file at the queue's tail is short"),
        "{log}"
    );
    assert_eq!(store.offsets("t", 0), (0, total as u64));
    let want: Vec<String> = (0..total).map(|i| format!("value-{i}")).collect();
    assert_eq!(values(&store, 0), want);
    assert_eq!(append(&store, total), total as u64);
    store.shutdown().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    assert_eq!(store.offsets("t", 0), (0, total as u64 + 1));
}

#[test]
fn a_queue_file_of_another_size_is_refused_unless_it_is_the_last_and_short() {
    let units = cfg(Path::new("")).consume_queue_units_per_file;
    let unit_len = tidelog_storage::consume_queue::format::UNIT_LEN as u64;
    for (file, len) in [(0, 2 * unit_len), (1, (units + 1) * unit_len)] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(cfg(dir.path())).unwrap();
        for i in 0..units as usize + 10 {
            append(&store, i);
        }
        store.shutdown().unwrap();
        set_len(&nth_queue_file(dir.path(), file), len);
        let err = Store::open(cfg(dir.path())).err().unwrap();
        assert!(
            matches!(
                err,
                StoreError::Corruption {
                    kind: CorruptionKind::QueueFileLength { .. },
                    ..
                }
            ),
            "file {file}: {err:?}"
        );
        assert!(
            err.to_string().contains("queue file is"),
            "file {file}: {err}"
        );
    }
}

#[test]
fn a_half_created_queue_file_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    append(&store, 0);
    store.shutdown().unwrap();
    let mut leftover = nth_queue_file(dir.path(), 1).into_os_string();
    leftover.push(".creating");
    std::fs::write(&leftover, b"").unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    assert!(!Path::new(&leftover).exists());
    assert_eq!(store.offsets("t", 0), (0, 1));
}

#[test]
fn a_deleted_topic_stays_deleted_through_an_unclean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    for i in 0..3 {
        append(&store, i);
        store.append(&[record("t", 1, None, Some("p1"))]).unwrap();
    }
    store.append(&[record("u", 0, None, Some("kept"))]).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(store.delete_topic("t").unwrap(), 2);
    assert!(!dir.path().join("consumequeue/t").exists());
    assert_eq!(store.offsets("t", 0), (3, 3));
    assert!(values(&store, 0).is_empty());
    // A crash: `abort` stays, and the checkpoint (written at open) is
    // older than every record, so recovery replays the deleted topic's.
    store.close_uncleanly();
    let store = Store::open(cfg(dir.path())).unwrap();
    assert!(store.recovery_report().records_replayed >= 7);
    assert!(!dir.path().join("consumequeue/t").exists());
    let partitions: Vec<String> = store.partitions().iter().map(|tp| tp.to_string()).collect();
    assert_eq!(partitions.len(), 1, "{partitions:?}");
    assert_eq!(store.offsets("t", 0), (3, 3));
    assert_eq!(store.offsets("t", 1), (3, 3));
    assert_eq!(store.offsets("u", 0), (0, 1));
    // A topic created again continues the offsets, and shows only its own.
    assert_eq!(append(&store, 100), 3);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(values(&store, 0), vec!["value-100".to_string()]);
    store.close_uncleanly();
    let store = Store::open(cfg(dir.path())).unwrap();
    assert_eq!(store.offsets("t", 0), (3, 4));
    assert_eq!(values(&store, 0), vec!["value-100".to_string()]);
    assert_eq!(append(&store, 101), 4);
}

#[test]
fn a_missing_checkpoint_after_a_clean_shutdown_is_not_called_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    for i in 0..10 {
        append(&store, i);
    }
    store.shutdown().unwrap();
    std::fs::remove_file(dir.path().join(tidelog_storage::checkpoint::FILE_NAME)).unwrap();
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(!log.contains(UNCLEAN), "{log}");
    assert!(log.contains("no usable checkpoint (missing)"), "{log}");
    assert_eq!(store.recovery_report().records_scanned, 10);
}
