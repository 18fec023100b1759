//! The compacted-log dispatcher sink with a real store: compact topics'
//! records are copied with their offsets, replays after a crash are
//! idempotent, and the store never deletes CommitLog bytes whose copy is
//! not durable.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
#[path = "../../storage/tests/common/log_capture.rs"]
mod log_capture;
use log_capture::logged;
use tidelog_cleaner::{CompactTopicConfig, CompactedLogs};
use tidelog_storage::retention::FixedDiskUsage;
use tidelog_storage::{AppendRecord, Store, StoreConfig, Trigger};

fn config(dir: &std::path::Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 8192;
    c.consume_queue_units_per_file = 64;
    c.index_slots = 64;
    c.index_entries = 256;
    c.preallocate_next_segment = false;
    c.flush_interval_ms = 3_600_000;
    c.retention.disk = Arc::new(FixedDiskUsage::new(0.1));
    c
}

fn rec(topic: &str, key: &str, value: Option<&str>) -> AppendRecord {
    AppendRecord {
        topic: Arc::from(topic),
        partition: 0,
        key: Some(Bytes::copy_from_slice(key.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: vec![tidelog_storage::Header {
            name: "h".into(),
            value: Some(Bytes::from_static(b"x")),
        }],
        timestamp_ms: Some(42),
    }
}

fn open(dir: &std::path::Path) -> (Arc<CompactedLogs>, Store) {
    // Compact topics are declared before the store opens, so records
    // replayed by recovery are copied too.
    let logs = CompactedLogs::open(dir).unwrap();
    // Small compacted segments, so replays cross sealed segments too.
    logs.set_topic(
        "users",
        CompactTopicConfig {
            segment_bytes: 512,
            ..CompactTopicConfig::default()
        },
    );
    let store = Store::open_with_sinks(config(dir), vec![logs.sink()]).unwrap();
    (logs, store)
}

#[test]
fn compact_topics_are_copied_with_their_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (logs, store) = open(dir.path());
    store
        .append(&[
            rec("users", "u1", Some("a")),
            rec("events", "e", Some("x")),
            rec("users", "u2", None),
        ])
        .unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert!(
        logs.log("events", 0).is_none(),
        "delete topics are not copied"
    );
    let log = logs.log("users", 0).unwrap();
    let recs = log.read(0, 100, usize::MAX).unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!((recs[0].offset.get(), recs[1].offset.get()), (0, 1));
    assert_eq!(recs[0].value().as_deref(), Some(b"a".as_slice()));
    assert_eq!(recs[0].timestamp_ms, 42);
    assert_eq!(recs[0].headers()[0].name, "h");
    assert!(recs[1].is_tombstone());
    assert_eq!(log.next_offset(), 2);
}

/// A compact topic's keyed records get no IndexFile entries: its key
/// queries scan the compacted log, and the entries cost the dispatcher a
/// quarter of its time under keyed produce. A delete topic's are indexed as
/// before, also in the same entry-by-entry round and after a restart's
/// replay.
#[test]
fn only_delete_topics_are_indexed_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let (logs, store) = open(dir.path());
    store
        .append(&[
            rec("users", "u1", Some("a")),
            rec("events", "e", Some("x")),
            rec("users", "u1", Some("b")),
        ])
        .unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let by_key = |store: &Store, topic: &str, key: &str| {
        store
            .query_by_key(topic, key.as_bytes(), 0, i64::MAX, 10)
            .unwrap()
            .len()
    };
    assert_eq!(by_key(&store, "events", "e"), 1, "a delete topic's key");
    assert_eq!(by_key(&store, "users", "u1"), 0, "a compact topic's key");
    // The compacted log holds both.
    assert_eq!(
        logs.log("users", 0)
            .unwrap()
            .read(0, 10, usize::MAX)
            .unwrap()
            .len(),
        2
    );

    // A replay (no checkpoint claims the records) indexes the same way.
    store.close_uncleanly();
    drop(logs);
    let (_logs, store) = open(dir.path());
    assert_eq!(store.recovery_report().records_replayed, 3);
    assert_eq!(by_key(&store, "events", "e"), 1);
    assert_eq!(by_key(&store, "users", "u1"), 0);
    store.shutdown().unwrap();
}

#[test]
fn replay_after_a_crash_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let (logs, store) = open(dir.path());
    for i in 0..50 {
        store
            .append(&[rec("users", &format!("u{}", i % 7), Some(&i.to_string()))])
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    // No checkpoint since open: recovery replays every record.
    store.close_uncleanly();
    drop(logs);
    let (logs, store) = open(dir.path());
    assert!(store.recovery_report().records_replayed >= 50);
    let recs = logs
        .log("users", 0)
        .unwrap()
        .read(0, 1000, usize::MAX)
        .unwrap();
    assert!(logs.log("users", 0).unwrap().segments().len() > 3);
    assert_eq!(recs.len(), 50, "no duplicates");
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r.offset.get(), i as u64);
    }
    store.append(&[rec("users", "u1", Some("next"))]).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(logs.log("users", 0).unwrap().next_offset(), 51);
}

#[test]
fn lost_commitlog_tail_is_dropped_from_the_copy() {
    let dir = tempfile::tempdir().unwrap();
    let (logs, store) = open(dir.path());
    let mut last = None;
    for i in 0..10 {
        last = Some(
            store
                .append(&[rec("users", "k", Some(&format!("v{i}")))])
                .unwrap()[0],
        );
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    store.close_uncleanly();
    drop(logs);
    // The CommitLog lost its last record (torn), the copy did not.
    let last = last.unwrap();
    let seg = dir.path().join("commitlog").join(format!("{:020}", 0));
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    std::os::unix::fs::FileExt::write_all_at(
        &f,
        &vec![0u8; last.size as usize],
        last.physical_offset.get(),
    )
    .unwrap();
    let (logs, store) = open(dir.path());
    let log = logs.log("users", 0).unwrap();
    assert_eq!(log.next_offset(), 9);
    assert_eq!(log.read(0, 100, usize::MAX).unwrap().len(), 9);
    // The offset is reused by the next append, once, in both logs.
    let a = store.append(&[rec("users", "k", Some("again"))]).unwrap();
    assert_eq!(a[0].queue_offset.get(), 9);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let recs = log.read(9, 10, usize::MAX).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].value().as_deref(), Some(b"again".as_slice()));
}

#[test]
fn lost_commitlog_tail_is_dropped_from_sealed_copies_too() {
    // A flush of the compacted logs (a checkpoint's, which does not wait
    // for the CommitLog's own flush; or the kernel's write-back) can make
    // copies durable while the CommitLog they came from is still in the
    // page cache when the power goes. Then the lost records' copies sit
    // in sealed compacted segments, under their `<base>.log` names, not
    // only in the active one.
    let dir = tempfile::tempdir().unwrap();
    let (logs, store) = open(dir.path());
    let appended: Vec<_> = (0..12)
        .map(|i| {
            store
                .append(&[rec("users", &format!("k{i}"), Some(&format!("value-{i}")))])
                .unwrap()[0]
        })
        .collect();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let log = logs.log("users", 0).unwrap();
    assert!(
        log.segments().len() >= 3,
        "{} segments",
        log.segments().len()
    );
    // Lose every record from the one at the start of the second-newest
    // compacted segment on, and one more before it.
    let segments = log.segments();
    let first_of_sealed = segments[segments.len() - 2].base_offset();
    let lost_from = first_of_sealed as usize - 1;
    log.flush().unwrap();
    drop((segments, log));
    store.close_uncleanly();
    drop(logs);
    let seg = dir.path().join("commitlog").join(format!("{:020}", 0));
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    let from = appended[lost_from].physical_offset.get();
    let end = appended[11].physical_offset.get() + u64::from(appended[11].size);
    std::os::unix::fs::FileExt::write_all_at(&f, &vec![0u8; (end - from) as usize], from).unwrap();

    let (logs, store) = open(dir.path());
    let log = logs.log("users", 0).unwrap();
    assert_eq!(log.next_offset(), lost_from as u64);
    let kept = log.read(0, 100, usize::MAX).unwrap();
    assert_eq!(kept.len(), lost_from);
    assert!(kept.iter().all(|r| r.physical_offset.get() < from));
    // The offsets are handed out again, and their new copies are taken.
    let again = store.append(&[rec("users", "k-new", Some("new"))]).unwrap();
    assert_eq!(again[0].queue_offset.get(), lost_from as u64);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let recs = log.read(lost_from as u64, 10, usize::MAX).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].value().as_deref(), Some(b"new".as_slice()));
    // And the same after another restart.
    store.close_uncleanly();
    drop((log, logs));
    let (logs, _store) = open(dir.path());
    let log = logs.log("users", 0).unwrap();
    assert_eq!(log.next_offset(), lost_from as u64 + 1);
}

#[test]
fn commitlog_retention_keeps_what_the_copy_does_not_hold_durably() {
    let dir = tempfile::tempdir().unwrap();
    let (logs, store) = open(dir.path());
    let v = "x".repeat(1000);
    for i in 0..40 {
        store
            .append(&[rec("users", &format!("k{i}"), Some(&v))])
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    // A forced pass first makes the copies durable (sink flush before the
    // checkpoint), then deletes; the compacted log still has every record.
    let out = store.run_retention(Trigger::ManualForce).unwrap();
    assert!(out.deleted_segments > 0);
    assert_eq!(
        logs.log("users", 0)
            .unwrap()
            .read(0, 100, usize::MAX)
            .unwrap()
            .len(),
        40
    );
}

#[test]
fn a_removed_topic_gets_no_new_compacted_log() {
    use tidelog_cleaner::CleanerError;
    let dir = tempfile::tempdir().unwrap();
    let (logs, store) = open(dir.path());
    let topic_dir = dir.path().join("compacted").join("users");
    // Never declared compact: no log, no directory.
    assert!(matches!(
        logs.log_or_create("orders", 0),
        Err(CleanerError::NotCompact { .. })
    ));
    assert!(!dir.path().join("compacted/orders").exists());

    store.append(&[rec("users", "k", Some("v"))]).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(topic_dir.exists());

    // Fetches that looked the topic up before its removal keep asking for
    // its logs while it is removed; none of them may bring it back.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let askers: Vec<_> = (0..2u32)
        .map(|p| {
            let (logs, stop) = (Arc::clone(&logs), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut refused = 0u32;
                // Until a hundred asks after the removal were refused, or
                // 10 s have passed (then the assertion below fails).
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                while std::time::Instant::now() < deadline {
                    match logs.log_or_create("users", p) {
                        Ok(_) => {}
                        Err(CleanerError::NotCompact { .. }) => refused += 1,
                        Err(e) => panic!("{e}"),
                    }
                    if stop.load(std::sync::atomic::Ordering::Acquire) && refused >= 100 {
                        break;
                    }
                }
                refused
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    logs.remove_topic("users").unwrap();
    stop.store(true, std::sync::atomic::Ordering::Release);
    for asker in askers {
        assert!(asker.join().unwrap() >= 100);
    }
    assert!(
        !topic_dir.exists(),
        "the removed topic's directory came back"
    );
    assert!(logs.log("users", 0).is_none());

    // Records of the topic still being dispatched are not copied anywhere
    // (and do not stop the dispatcher).
    store.append(&[rec("users", "k2", Some("v2"))]).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(!topic_dir.exists());
    assert_eq!(store.stats().dispatch_errors, 0);
}

/// Wait until `users`-0's compacted log ends at `end` (the sink writes its
/// copies at the end of a dispatch batch, just after the dispatched
/// position moves).
fn wait_copied(store: &Store, logs: &CompactedLogs, end: u64) {
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while logs.log("users", 0).is_none_or(|l| l.next_offset() < end) {
        assert!(
            std::time::Instant::now() < deadline,
            "never copied up to {end}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_replay_below_the_cleaner_checkpoint_is_cleaned_again_and_no_deleted_key_comes_back() {
    // Found by the compaction model (tests/model.rs). After a kill -9,
    // recovery cuts the compacted log back to the store checkpoint and the
    // replay copies the records again, uncleaned, up to where the log
    // ended. The cleaner checkpoint, further on, must come down to the cut:
    // otherwise the replayed copies count as clean, and once a tombstone
    // among them expires, the older value of its key stays and the key
    // comes back.
    use std::sync::atomic::{AtomicI64, Ordering};
    use tidelog_cleaner::{CleanerConfig, LogCleaner, OffsetMap};
    let dir = tempfile::tempdir().unwrap();
    let skew = Arc::new(AtomicI64::new(0));
    // An hour ahead of the store's clock, so every record is old enough.
    let base = tidelog_storage::types::now_ms() + 3_600_000;
    let open_all = || {
        let s = Arc::clone(&skew);
        let logs = CompactedLogs::open_with_clock(
            dir.path(),
            Arc::new(move || base + s.load(Ordering::SeqCst)),
        )
        .unwrap();
        logs.set_topic(
            "users",
            CompactTopicConfig {
                delete_retention_ms: 60_000,
                ..CompactTopicConfig::default()
            },
        );
        let store = Store::open_with_sinks(config(dir.path()), vec![logs.sink()]).unwrap();
        let cleaner = LogCleaner::new(
            Arc::clone(&logs),
            dir.path().to_path_buf(),
            CleanerConfig::default(),
            Arc::clone(store.commit_log()),
        )
        .unwrap();
        (logs, store, cleaner)
    };
    let mut map = OffsetMap::new(1 << 16, 0.9).unwrap();
    let pass = |cleaner: &LogCleaner, map: &mut OffsetMap| {
        cleaner.request("users", true).unwrap();
        cleaner.clean_once(map).unwrap().expect("a pass");
    };
    let value_of_a = |logs: &CompactedLogs| {
        let recs = logs
            .log("users", 0)
            .unwrap()
            .read(0, 100, usize::MAX)
            .unwrap();
        recs.iter()
            .rev()
            .find(|r| r.key().as_deref() == Some(b"a".as_slice()))
            .map(|r| r.value())
    };

    let (logs, store, cleaner) = open_all();
    store
        .append(&[
            rec("users", "a", Some("old")),
            rec("users", "x", Some("1")),
            rec("users", "a", None),
            rec("users", "y", Some("1")),
        ])
        .unwrap();
    wait_copied(&store, &logs, 4);
    pass(&cleaner, &mut map);
    assert_eq!(value_of_a(&logs), Some(None), "a is deleted");
    assert_eq!(cleaner.status("users")[0].checkpoint_offset, Some(4));
    // kill -9: the store checkpoint is the one written at open, so the
    // replay copies all four records again.
    drop(cleaner);
    store.close_uncleanly();
    drop(logs);
    let (logs, store, cleaner) = open_all();
    assert!(store.recovery_report().records_replayed >= 4);
    assert_eq!(logs.log("users", 0).unwrap().recovery_cut(), Some(0));
    assert_eq!(
        cleaner.status("users")[0].checkpoint_offset,
        Some(0),
        "lowered to where recovery cut the log"
    );
    // Passes after new records, until the tombstone's horizon has passed.
    for (i, key) in ["z", "w"].into_iter().enumerate() {
        store.append(&[rec("users", key, Some("1"))]).unwrap();
        wait_copied(&store, &logs, 5 + i as u64);
        pass(&cleaner, &mut map);
        skew.fetch_add(61_000, Ordering::SeqCst);
    }
    pass(&cleaner, &mut map);
    let a = value_of_a(&logs);
    assert!(
        a.is_none() || a == Some(None),
        "the deleted key a came back: {a:?}"
    );
}

#[test]
fn an_ignored_checkpoint_re_makes_the_copies_and_says_so_not_that_records_were_lost() {
    // A clean shutdown, then the checkpoint is damaged: recovery scans the
    // whole CommitLog, so the compacted log is cut to its start and every
    // copy is made again. Nothing was lost, and the log must not say so.
    let dir = tempfile::tempdir().unwrap();
    let (logs, store) = open(dir.path());
    for i in 0..20 {
        store
            .append(&[rec("users", &format!("k{i}"), Some("v"))])
            .unwrap();
    }
    wait_copied(&store, &logs, 20);
    store.shutdown().unwrap();
    drop(logs);
    let path = dir.path().join(tidelog_storage::checkpoint::FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();

    let ((logs, store), log) = logged(|| open(dir.path()));
    assert!(!log.contains("lost"), "{log}");
    assert!(!log.contains("did not shut down cleanly"), "{log}");
    assert!(log.contains("re-made the compacted copies"), "{log}");
    assert!(log.contains("no usable checkpoint (damaged)"), "{log}");
    wait_copied(&store, &logs, 20);
}

#[test]
fn copies_of_records_the_commit_log_lost_are_warned_about() {
    // A power loss keeps compacted copies (a flush of the compacted logs
    // made them durable: see the test above) of records whose CommitLog
    // bytes never reached the disk: recovery drops them and cannot re-make
    // them, which is a loss and is warned.
    let dir = tempfile::tempdir().unwrap();
    let (logs, store) = open(dir.path());
    let put = |from: usize, to: usize| {
        for i in from..to {
            store
                .append(&[rec("users", &format!("k{i}"), Some("v"))])
                .unwrap();
        }
    };
    put(0, 10);
    store.checkpoint().unwrap();
    let flushed = store.commit_log().committed();
    put(10, 20);
    wait_copied(&store, &logs, 20);
    logs.log("users", 0).unwrap().flush().unwrap();
    let end = store.commit_log().committed();
    assert_eq!(store.commit_log().segment_count(), 1);
    store.close_uncleanly();
    drop(logs);
    // What the power loss left of the CommitLog: nothing past the flush.
    let seg = dir
        .path()
        .join("commitlog")
        .join(tidelog_storage::fs_util::offset_file_name(0));
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &vec![0u8; (end - flushed) as usize], flushed)
        .unwrap();
    drop(f);

    let ((logs, _store), log) = logged(|| open(dir.path()));
    assert!(
        log.contains("dropped compacted copies of records the commit log lost"),
        "{log}"
    );
    assert!(!log.contains("re-made the compacted copies"), "{log}");
    assert_eq!(logs.log("users", 0).unwrap().next_offset(), 10);
}
