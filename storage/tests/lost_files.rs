//! A file lost between two runs (an operator's mistake, a bad disk) is
//! noticed, not served as if nothing happened: a missing or short
//! ConsumeQueue file is rebuilt from the CommitLog with a warning, and a
//! CommitLog head that retention did not delete is refused under
//! `recovery_mode: strict` (a warning under `truncate`), while segments
//! retention deleted open cleanly (docs/recovery.md).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::log_capture::logged;
use common::*;
use tidelog_storage::{
    CorruptionKind, QueueOffset, RecoveryMode, Store, StoreConfig, StoreError, Trigger,
};

const REBUILD: &str = "consume queue file missing or shorter than the last checkpoint recorded";
const LOST_HEAD: &str = "LOST DATA";

/// No periodic checkpoint: the checkpoint is what open and shutdown write.
fn cfg(dir: &Path) -> StoreConfig {
    let mut c = small_config(dir);
    c.flush_interval_ms = 3_600_000;
    c
}

fn append(store: &Store, partition: u32, i: u64) -> u64 {
    store
        .append(&[record(
            "t",
            partition,
            Some(&format!("k{i}")),
            Some(&format!("value-{i}")),
        )])
        .unwrap()[0]
        .queue_offset
        .get()
}

/// Every record of `t`-`partition` from `from` on: offset and value.
fn all_served(store: &Store, partition: u32, from: u64) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let got = store
            .read("t", partition, QueueOffset::new(next), 100, usize::MAX)
            .unwrap();
        if got.records.is_empty() {
            return out;
        }
        for r in &got.records {
            let v = String::from_utf8(r.value().unwrap().to_vec()).unwrap();
            out.push((r.queue_offset().get(), v));
            next = r.queue_offset().get() + 1;
        }
    }
}

fn expected(from: u64, to: u64) -> Vec<(u64, String)> {
    (from..to).map(|i| (i, format!("value-{i}"))).collect()
}

fn queue_files(dir: &Path, partition: u32) -> Vec<PathBuf> {
    let qdir = dir
        .join("consumequeue")
        .join("t")
        .join(partition.to_string());
    let mut v: Vec<_> = std::fs::read_dir(qdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    v.sort();
    v
}

/// Write `n` records to `t`-0 (and a few to `t`-1, which loses nothing),
/// then stop cleanly or as a crash does.
fn write(dir: &Path, n: u64, clean: bool) {
    let store = Store::open(cfg(dir)).unwrap();
    for i in 0..n {
        assert_eq!(append(&store, 0, i), i);
        if i % 10 == 0 {
            append(&store, 1, i);
        }
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    if clean {
        store.shutdown().unwrap();
    } else {
        // Periodic checkpoints ran while the writes went on in a real
        // server; here one covers them before the crash.
        store.checkpoint().unwrap();
        store.close_uncleanly();
    }
}

/// Reopen after the loss: the warning is logged, every record is served
/// at its offset, and the next produce gets offset `n`.
fn reopen_and_check(dir: &Path, n: u64) {
    let (store, log) = logged(|| Store::open(cfg(dir)).unwrap());
    assert!(log.contains(REBUILD), "{log}");
    assert!(log.contains("rebuilt the consume queue"), "{log}");
    assert_eq!(store.offsets("t", 0), (0, n));
    assert_eq!(all_served(&store, 0, 0), expected(0, n));
    assert_eq!(store.offsets("t", 1).1, n.div_ceil(10));
    assert_eq!(append(&store, 0, n), n);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.shutdown().unwrap();
    // Rebuilt for good: the next restart has nothing to rebuild.
    let (store, log) = logged(|| Store::open(cfg(dir)).unwrap());
    assert!(!log.contains(REBUILD), "{log}");
    assert_eq!(all_served(&store, 0, 0), expected(0, n + 1));
}

#[test]
fn a_deleted_queue_file_is_rebuilt_from_the_commit_log() {
    for clean in [true, false] {
        // The partition's only queue file (50 units of 64).
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 50, clean);
        let files = queue_files(dir.path(), 0);
        assert_eq!(files.len(), 1);
        std::fs::remove_file(&files[0]).unwrap();
        reopen_and_check(dir.path(), 50);

        // The tail file of several, and then every file of the partition.
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 300, clean);
        let files = queue_files(dir.path(), 0);
        assert_eq!(files.len(), 5, "{files:?}");
        std::fs::remove_file(files.last().unwrap()).unwrap();
        reopen_and_check(dir.path(), 300);
        std::fs::remove_dir_all(dir.path().join("consumequeue").join("t").join("0")).unwrap();
        let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
        assert!(log.contains(REBUILD), "{log}");
        assert_eq!(all_served(&store, 0, 0), expected(0, 301));
        assert_eq!(append(&store, 0, 301), 301);
    }
}

#[test]
fn a_short_queue_file_is_rebuilt_from_the_commit_log() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 50, clean);
        let file = queue_files(dir.path(), 0).remove(0);
        // 10 units of 20 bytes survive.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(200)
            .unwrap();
        reopen_and_check(dir.path(), 50);
    }
}

#[test]
fn a_lost_queue_whose_records_retention_deleted_continues_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config_with_segments(dir.path(), 64 * 1024)).unwrap();
    let v = "r".repeat(1000);
    for i in 0..200u64 {
        store.append(&[record("t", 0, None, Some(&v))]).unwrap();
        if i == 199 {
            // Rolls the log past `t`-0's segments.
            for _ in 0..70 {
                store.append(&[record("u", 0, None, Some(&v))]).unwrap();
            }
        }
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.checkpoint().unwrap();
    let out = store.run_retention(Trigger::ManualForce).unwrap();
    assert!(out.deleted_segments > 0, "{out:?}");
    let (begin, end) = store.offsets("t", 0);
    assert_eq!(end, 200);
    assert!(begin > 0, "retention deleted some of t-0's records");
    store.shutdown().unwrap();

    // A restart after retention is clean: nothing rebuilt, no lost head.
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(!log.contains(REBUILD), "{log}");
    assert!(!log.contains(LOST_HEAD), "{log}");
    assert_eq!(store.offsets("t", 0), (begin, 200));
    store.shutdown().unwrap();

    for f in queue_files(dir.path(), 0) {
        std::fs::remove_file(f).unwrap();
    }
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(log.contains(REBUILD), "{log}");
    // What the log still holds is back; the partition continues at 200.
    assert_eq!(store.offsets("t", 0), (begin, 200));
    assert_eq!(all_served(&store, 0, begin).len() as u64, 200 - begin);
    assert_eq!(append(&store, 0, 200), 200);
}

fn write_segments(dir: &Path) -> Vec<PathBuf> {
    let store = Store::open(cfg(dir)).unwrap();
    let v = "m".repeat(2000);
    for _ in 0..100 {
        store.append(&[record("t", 0, None, Some(&v))]).unwrap();
    }
    store.shutdown().unwrap();
    let segs = segment_files(dir);
    assert!(segs.len() >= 3, "{segs:?}");
    segs
}

#[test]
fn a_lost_oldest_segment_is_refused_under_strict_and_warned_under_truncate() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_segments(dir.path());
    std::fs::remove_file(&segs[0]).unwrap();
    let err = Store::open(cfg(dir.path())).err().expect("must refuse");
    match &err {
        StoreError::Corruption {
            file,
            kind:
                CorruptionKind::LogHeadMissing {
                    recorded_first: 0,
                    found_first,
                },
            ..
        } => {
            assert_eq!(file, &segs[0]);
            assert!(*found_first > 0);
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("missing") && msg.contains("not deleted by retention"),
        "{msg}"
    );
    // Nothing changed on disk: it refuses again.
    assert!(Store::open(cfg(dir.path())).is_err());

    let mut lenient = cfg(dir.path());
    lenient.recovery_mode = RecoveryMode::TruncateAtCorruption;
    let (store, log) = logged(|| Store::open(lenient).unwrap());
    assert!(log.contains(LOST_HEAD), "{log}");
    assert!(log.contains(&segs[0].display().to_string()), "{log}");
    assert!(store.offsets("t", 0).0 > 0);
    store.shutdown().unwrap();
    // Accepted once: strict opens the rest from now on.
    let (_store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(!log.contains(LOST_HEAD), "{log}");
}

#[test]
fn segments_retention_deleted_are_not_reported_lost() {
    let dir = tempfile::tempdir().unwrap();
    write_segments(dir.path());
    let store = Store::open(cfg(dir.path())).unwrap();
    let out = store.run_retention(Trigger::ManualForce).unwrap();
    assert!(out.deleted_segments > 0, "{out:?}");
    let begin = store.offsets("t", 0).0;
    assert!(begin > 0);
    store.close_uncleanly();
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(!log.contains(LOST_HEAD), "{log}");
    assert_eq!(store.offsets("t", 0).0, begin);
}

#[test]
fn a_deletion_a_crash_cut_short_is_finished_and_an_old_data_dir_opens() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_segments(dir.path());
    // Retention recorded the new head, then the process died before the
    // unlink.
    let second = segs[1]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .parse::<u64>()
        .unwrap();
    tidelog_storage::log_head::LogHead::new(second)
        .store(dir.path())
        .unwrap();
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(!log.contains(LOST_HEAD), "{log}");
    assert!(!segs[0].exists());
    assert!(store.offsets("t", 0).0 > 0);
    store.shutdown().unwrap();

    // A data dir of an older tidelog has no log-head: it opens, and gets
    // one, after which a lost head is noticed.
    let head = dir.path().join(tidelog_storage::log_head::FILE_NAME);
    std::fs::remove_file(&head).unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    store.shutdown().unwrap();
    assert!(head.exists());
    std::fs::remove_file(&segs[1]).unwrap();
    assert!(Store::open(cfg(dir.path())).is_err());
}

fn index_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("index"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn finds_key(store: &Store, i: u64) -> bool {
    let hits = store
        .query_by_key(
            "t",
            format!("k{i}").as_bytes(),
            i64::MIN / 2,
            i64::MAX / 2,
            10,
        )
        .unwrap();
    // `write` gives every tenth key to partition 1 too.
    hits.len() == if i % 10 == 0 { 2 } else { 1 }
}

#[test]
fn a_deleted_index_file_is_rebuilt_from_the_commit_log() {
    const LOST_INDEX: &str = "IndexFile missing or shorter than the last checkpoint recorded";
    for clean in [true, false] {
        // 300 keyed records at 255 entries a file: two IndexFiles. Lose
        // the newest, then every one.
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 300, clean);
        let files = index_files(dir.path());
        assert_eq!(files.len(), 2, "{files:?}");
        std::fs::remove_file(&files[1]).unwrap();
        let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
        assert!(log.contains(LOST_INDEX), "{log}");
        assert!(log.contains("rebuilt the IndexFile entries"), "{log}");
        assert!((0..300).all(|i| finds_key(&store, i)), "clean: {clean}");
        store.shutdown().unwrap();
        let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
        assert!(!log.contains(LOST_INDEX), "{log}");
        drop(store);

        for f in index_files(dir.path()) {
            std::fs::remove_file(f).unwrap();
        }
        let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
        assert!(log.contains(LOST_INDEX), "{log}");
        assert!((0..300).all(|i| finds_key(&store, i)), "clean: {clean}");
    }
}

#[test]
fn a_data_dir_with_no_segment_begins_where_its_checkpoint_says() {
    // What a restore from the remote tier writes: no segment, a
    // checkpoint at the restored log's start.
    let dir = tempfile::tempdir().unwrap();
    tidelog_storage::checkpoint::Checkpoint {
        commitlog_flushed: 1 << 20,
        dispatched: 1 << 20,
        written_at_ms: 1,
    }
    .store(dir.path())
    .unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    assert_eq!(append(&store, 0, 0), 0);
    store.shutdown().unwrap();
    let first = segment_files(dir.path()).remove(0);
    assert_eq!(
        first
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap(),
        1 << 20
    );
    // Its first segment is where the log began: no lost head.
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(!log.contains(LOST_HEAD), "{log}");
    assert_eq!(store.offsets("t", 0), (0, 1));
}

#[test]
fn damaged_queue_ends_and_index_end_rebuild_from_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 100, true);
    for name in ["queue-ends", "index-end"] {
        let path = dir.path().join(name);
        let mut b = std::fs::read(&path).unwrap();
        b[8] ^= 0xff;
        std::fs::write(&path, b).unwrap();
    }
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(log.contains("cannot read the queue-ends file"), "{log}");
    assert!(log.contains("cannot read the index-end file"), "{log}");
    assert!(!log.contains(REBUILD), "nothing was lost: {log}");
    assert_eq!(store.recovery_report().scanned_from, 0);
    assert_eq!(all_served(&store, 0, 0), expected(0, 100));
    assert!((0..100).all(|i| finds_key(&store, i)));
    assert_eq!(append(&store, 0, 100), 100);
    store.shutdown().unwrap();
    // Rewritten whole by the checkpoint.
    let (_store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(!log.contains("cannot read"), "{log}");
}
