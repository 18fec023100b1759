//! DeleteRecords in the store: a partition's log start offset moves
//! forward only, up to the high watermark, durably; reads, offsets and
//! timestamp lookups begin there, after a clean restart and after a
//! crash; retention deletes the queue files wholly below it; a recovery
//! replay never brings back what is below it; a power loss right after the
//! answer keeps it; a deleted topic's log starts go with it.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::time::Duration;

use common::*;
use tidelog_storage::{DeletedRecords, QueueOffset, Store, StoreConfig, Trigger};

/// [`small_config`] without the periodic checkpoint: a test that crashes
/// the store decides what the checkpoint covers.
fn config(dir: &std::path::Path) -> StoreConfig {
    let mut c = small_config(dir);
    c.flush_interval_ms = 3_600_000;
    c.retention.check_interval_ms = 3_600_000;
    c
}

fn append(store: &Store, topic: &str, count: usize) {
    for i in 0..count {
        store
            .append(&[record(topic, 0, None, Some(&format!("v{i}")))])
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
}

fn first_read(store: &Store, topic: &str) -> Option<u64> {
    store
        .read(topic, 0, QueueOffset::new(0), 1, usize::MAX)
        .unwrap()
        .records
        .first()
        .map(|r| r.queue_offset().get())
}

#[test]
fn the_log_start_moves_forward_only_and_every_beginning_follows_it_across_restarts_and_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    append(&store, "t", 10);
    assert_eq!(
        store.delete_records("t", 0, Some(11)).unwrap(),
        DeletedRecords::AboveHighWatermark {
            offset: 11,
            high_watermark: 10
        }
    );
    assert_eq!(store.offsets("t", 0), (0, 10), "nothing moved");
    assert_eq!(
        store.delete_records("t", 0, Some(4)).unwrap(),
        DeletedRecords::LowWatermark(4)
    );
    assert_eq!(
        store.delete_records("t", 0, Some(2)).unwrap(),
        DeletedRecords::LowWatermark(4),
        "backwards: the low watermark"
    );
    let check = |store: &Store, at: &str| {
        assert_eq!(store.offsets("t", 0), (4, 10), "{at}");
        assert_eq!(store.log_start("t", 0), 4, "{at}");
        assert_eq!(first_read(store, "t"), Some(4), "{at}");
        assert_eq!(
            store.offset_for_timestamp("t", 0, i64::MIN).unwrap(),
            4,
            "{at}"
        );
    };
    check(&store, "moved");
    store.shutdown().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    check(&store, "after a clean restart");
    assert_eq!(
        store.delete_records("t", 0, Some(6)).unwrap(),
        DeletedRecords::LowWatermark(6)
    );
    // A crash right after the answer: no checkpoint, no flush.
    store.close_uncleanly();
    let store = Store::open(config(dir.path())).unwrap();
    assert!(!store.recovery_report().clean_shutdown);
    assert_eq!(store.offsets("t", 0), (6, 10));
    assert_eq!(first_read(&store, "t"), Some(6));
    // Offsets continue at the end.
    let out = store.append(&[record("t", 0, None, Some("new"))]).unwrap();
    assert_eq!(out[0].queue_offset.get(), 10);
    store.shutdown().unwrap();
}

/// Retention deletes the queue files wholly below the log start at every
/// pass (a scheduled one with no trigger too), and a crash whose recovery
/// replays records below the log start, whose queue files are gone by
/// then, does not bring them back (the replay would rewrite their units
/// and move the beginning back down).
#[test]
fn retention_deletes_queue_files_below_the_log_start_and_a_replay_never_brings_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    append(&store, "t", 150);
    store.checkpoint().unwrap();
    // Past the checkpoint: a crash replays these.
    append(&store, "t", 50);
    let queue_files = || {
        std::fs::read_dir(dir.path().join("consumequeue/t/0"))
            .unwrap()
            .count()
    };
    let before = queue_files();
    assert_eq!(
        store.delete_records("t", 0, None).unwrap(),
        DeletedRecords::LowWatermark(200)
    );
    assert_eq!(queue_files(), before, "the retention pass deletes them");
    let out = store.run_retention(Trigger::Scheduled).unwrap();
    assert_eq!(out.deleted_segments, 0, "the CommitLog's segments stay");
    // 64 units per file: [0, 64), [64, 128) and [128, 192) go, the file
    // holding the end stays.
    assert_eq!(out.queue_files_deleted, 3, "{out:?}");
    assert!(queue_files() < before);
    store.close_uncleanly();
    let store = Store::open(config(dir.path())).unwrap();
    assert!(store.recovery_report().records_replayed >= 50);
    assert_eq!(store.offsets("t", 0), (200, 200));
    assert_eq!(first_read(&store, "t"), None);
    let out = store.append(&[record("t", 0, None, Some("new"))]).unwrap();
    assert_eq!(out[0].queue_offset.get(), 200);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(first_read(&store, "t"), Some(200));
    store.shutdown().unwrap();
}

/// A deleted topic's log starts go with it: the name's next incarnation
/// begins at its own first offset, and the file no longer lists it.
#[test]
fn deleting_a_topic_drops_its_log_starts() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    append(&store, "t", 5);
    append(&store, "u", 3);
    store.delete_records("t", 0, Some(3)).unwrap();
    store.delete_records("u", 0, Some(1)).unwrap();
    store.delete_topic("t").unwrap();
    assert_eq!(store.log_start("t", 0), 0);
    store.shutdown().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    assert_eq!(store.log_start("u", 0), 1);
    assert_eq!(store.offsets("u", 0), (1, 3));
    // The next incarnation continues the offsets (the broker's base
    // offsets hide the old records) and begins at its first record.
    let out = store
        .append(&[record("t", 0, None, Some("again"))])
        .unwrap();
    assert_eq!(out[0].queue_offset.get(), 5);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.offsets("t", 0), (5, 6));
    assert_eq!(store.log_start("t", 0), 0);
    store.shutdown().unwrap();
}

/// The log start is durable when DeleteRecords answers: what a power loss
/// at that instant leaves (the durable image: only what an fsync covered,
/// only names whose directory was fsynced) opens with the new beginning.
#[test]
fn a_power_loss_right_after_the_answer_keeps_the_log_start() {
    use tidelog_storage::durability::image;

    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let image = image::install(&live).unwrap();
    let mut cfg = config(&live);
    cfg.flush = tidelog_storage::FlushMode::Sync;
    let store = Store::open(cfg).unwrap();
    append(&store, "t", 10);
    assert_eq!(
        store.delete_records("t", 0, Some(7)).unwrap(),
        DeletedRecords::LowWatermark(7)
    );
    let after = dir.path().join("after");
    image.snapshot(&after, None).unwrap();
    store.close_uncleanly();
    drop(image);
    let mut cfg = config(&after);
    cfg.flush = tidelog_storage::FlushMode::Sync;
    let store = Store::open(cfg).unwrap();
    assert_eq!(store.offsets("t", 0), (7, 10));
    assert_eq!(first_read(&store, "t"), Some(7));
    store.shutdown().unwrap();
}
