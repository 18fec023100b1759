//! Retention: every trigger and ratio tier, with a clock and a disk-usage
//! source the test sets, so nothing waits hours or fills a disk.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use tidelog_storage::retention::{FixedDiskUsage, ManualClock};
use tidelog_storage::{QueueOffset, Store, StoreConfig, StoreError, Trigger};

const HOUR_MS: i64 = 3_600_000;
const SEGMENT: u64 = 4096;

struct Knobs {
    clock: Arc<ManualClock>,
    disk: Arc<FixedDiskUsage>,
}

fn config(dir: &std::path::Path) -> (StoreConfig, Knobs) {
    let mut c = small_config(dir);
    c.commitlog_segment_bytes = SEGMENT;
    let clock = Arc::new(ManualClock::new(now(), 12));
    let disk = Arc::new(FixedDiskUsage::new(0.5));
    c.retention.clock = clock.clone();
    c.retention.disk = disk.clone();
    c.retention.file_reserved_hours = 1;
    // Threads stay out of the way: passes run when the test says.
    c.retention.check_interval_ms = 3_600_000;
    c.retention.disk_check_interval_ms = 3_600_000;
    c.retention.pause_between_deletes_ms = 0;
    (c, Knobs { clock, disk })
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Fill `segments` sealed segments of t-0 (plus a started active one), a
/// few ms apart so each has a distinct newest-record time.
fn fill(store: &Store, segments: usize) {
    fill_then(store, segments, true)
}

fn fill_then(store: &Store, segments: usize, wait_for_dispatch: bool) {
    let v = "r".repeat(500);
    let mut i = 0;
    while store.stats().commitlog_segments <= segments {
        store
            .append(&[record(
                "t",
                0,
                Some(&format!("k{i}")),
                Some(&format!("{i}:{v}")),
            )])
            .unwrap();
        i += 1;
        if i % 7 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    if wait_for_dispatch {
        assert!(store.wait_dispatched(Duration::from_secs(5)));
    }
    store.checkpoint().unwrap();
}

fn first_value(store: &Store) -> u64 {
    let r = store
        .read("t", 0, QueueOffset::new(0), 1, usize::MAX)
        .unwrap();
    let v = r.records[0].value().unwrap();
    std::str::from_utf8(&v)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn expired_segments_go_oldest_first_and_the_pass_stops_at_the_first_unexpired() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, knobs) = config(dir.path());
    let store = Store::open(cfg).unwrap();
    fill(&store, 6);
    let segs = store.commit_log().segments();
    // "Now" makes exactly the first three segments older than 1 hour.
    knobs.clock.set_now_ms(segs[2].last_store_ts_ms() + HOUR_MS);
    assert!(segs[3].last_store_ts_ms() > segs[2].last_store_ts_ms());
    // Outside delete_when, below every ratio: a scheduled pass does nothing.
    let out = store.run_retention(Trigger::Scheduled).unwrap();
    assert_eq!((out.deleted_segments, out.reason), (0, None));
    // An operator's pass deletes the expired ones only.
    let out = store.run_retention(Trigger::Manual).unwrap();
    assert_eq!(out.deleted_segments, 3);
    assert_eq!(out.freed_bytes, 3 * SEGMENT);
    assert_eq!(store.commit_log().min_offset(), segs[3].base());
    let stats = store.stats();
    assert_eq!(stats.retention_segments_deleted, 3);
    assert!(stats.retention_last_pass_ms > 0);
    for s in &segs[..3] {
        assert!(!s.path().exists());
    }
}

#[test]
fn a_newer_segment_stops_the_pass_even_if_later_ones_are_expired() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, knobs) = config(dir.path());
    let store = Store::open(cfg.clone()).unwrap();
    fill(&store, 4);
    store.shutdown().unwrap();
    // After a restart segment ages come from mtimes: make segment 1 young
    // and 0, 2, 3 old.
    let files = segment_files(dir.path());
    let old = UNIX_EPOCH + Duration::from_millis((now() - 10 * HOUR_MS) as u64);
    for (i, f) in files.iter().enumerate().take(4) {
        let when = if i == 1 { SystemTime::now() } else { old };
        std::fs::File::options()
            .write(true)
            .open(f)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    let store = Store::open(cfg).unwrap();
    knobs.clock.set_now_ms(now());
    let out = store.run_retention(Trigger::Manual).unwrap();
    assert_eq!(
        out.deleted_segments, 1,
        "no hole: segment 2 stays behind young segment 1"
    );
    assert!(!files[0].exists() && files[2].exists());
}

#[test]
fn delete_when_hour_triggers_a_scheduled_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, knobs) = config(dir.path());
    let store = Store::open(cfg).unwrap();
    fill(&store, 3);
    knobs.clock.set_now_ms(now() + 2 * HOUR_MS);
    knobs.clock.set_hour(5);
    assert_eq!(
        store
            .run_retention(Trigger::Scheduled)
            .unwrap()
            .deleted_segments,
        0
    );
    knobs.clock.set_hour(4);
    let out = store.run_retention(Trigger::Scheduled).unwrap();
    assert_eq!(out.deleted_segments, 3);
    assert_eq!(out.reason, Some("delete_when hour"));
}

#[test]
fn disk_above_max_used_ratio_deletes_expired_at_any_hour() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, knobs) = config(dir.path());
    let store = Store::open(cfg).unwrap();
    fill(&store, 3);
    knobs.clock.set_now_ms(now() + 2 * HOUR_MS);
    knobs.disk.set(0.80);
    let out = store.run_retention(Trigger::Scheduled).unwrap();
    assert_eq!(out.deleted_segments, 3);
    assert_eq!(out.reason, Some("disk above disk_max_used_ratio"));
}

#[test]
fn disk_pressure_deletes_unexpired_segments_ten_per_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, knobs) = config(dir.path());
    let store = Store::open(cfg).unwrap();
    fill(&store, 14);
    // Nothing is expired, but the disk is above 0.85.
    knobs.disk.set(0.86);
    let out = store.run_retention(Trigger::Scheduled).unwrap();
    assert_eq!(out.deleted_segments, 10);
    assert_eq!(out.reason, Some("disk above disk_force_clean_ratio"));
    let out = store.run_retention(Trigger::Scheduled).unwrap();
    assert_eq!(
        out.deleted_segments, 4,
        "the rest, but never the active segment"
    );
    assert_eq!(store.stats().commitlog_segments, 1);
    // Produce and fetch go on.
    store
        .append(&[record("t", 0, None, Some("999999:after"))])
        .unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let (begin, end) = store.offsets("t", 0);
    assert!(begin > 0 && end > begin);
}

#[test]
fn every_pass_pauses_between_deleted_files_and_only_scheduled_passes_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let (mut cfg, knobs) = config(dir.path());
    cfg.retention.pause_between_deletes_ms = 100;
    let store = Store::open(cfg).unwrap();
    fill(&store, 32);
    let deleted_with_pauses = |trigger| {
        let pauses = knobs.clock.pauses();
        let out = store.run_retention(trigger).unwrap();
        (out.deleted_segments, knobs.clock.pauses() - pauses)
    };
    // Expired by the hour: capped at 10, paced.
    knobs.clock.set_now_ms(now() + 2 * HOUR_MS);
    knobs.clock.set_hour(4);
    assert_eq!(deleted_with_pauses(Trigger::Scheduled), (10, 9));
    // Under disk pressure: capped, paced.
    knobs.clock.set_hour(12);
    knobs.disk.set(0.86);
    assert_eq!(deleted_with_pauses(Trigger::Scheduled), (10, 9));
    // An operator's pass takes everything eligible (the active segment
    // stays), still paced.
    knobs.disk.set(0.5);
    let left = store.stats().commitlog_segments - 1;
    assert!(left > 10, "{left}");
    assert_eq!(
        deleted_with_pauses(Trigger::ManualForce),
        (left, left as u64 - 1)
    );
    assert_eq!(store.stats().commitlog_segments, 1);
}

#[test]
fn a_full_disk_accepts_writes_again_only_at_the_force_clean_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, knobs) = config(dir.path());
    let store = Store::open(cfg).unwrap();
    let refused = |store: &Store| {
        matches!(
            store.append(&[record("t", 0, None, Some("v"))]),
            Err(StoreError::DiskFull { .. })
        )
    };
    knobs.disk.set(0.90);
    store.check_disk();
    assert!(!refused(&store), "at disk_full_ratio: not full yet");
    knobs.disk.set(0.91);
    store.check_disk();
    assert!(refused(&store));
    // Back below disk_full_ratio, but above disk_force_clean_ratio: still
    // full, so produce does not flap around the mark.
    knobs.disk.set(0.89);
    store.check_disk();
    assert!(store.stats().disk_full);
    assert!(refused(&store));
    knobs.disk.set(0.851);
    store.check_disk();
    assert!(refused(&store));
    knobs.disk.set(0.85);
    store.check_disk();
    assert!(!store.stats().disk_full);
    assert!(!refused(&store));
    // And between the two marks, a disk that was not full stays accepted.
    knobs.disk.set(0.89);
    store.check_disk();
    assert!(!refused(&store));
}

#[test]
fn disk_full_refuses_appends_and_recovers_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (mut cfg, knobs) = config(dir.path());
    cfg.retention.disk_check_interval_ms = 10;
    let store = Store::open(cfg).unwrap();
    store
        .append(&[record("t", 0, None, Some("0:before"))])
        .unwrap();
    knobs.disk.set(0.95);
    store.check_disk();
    let err = store
        .append(&[record("t", 0, None, Some("1:refused"))])
        .unwrap_err();
    match &err {
        StoreError::DiskFull { reason } => assert_eq!(
            reason,
            "the data directory's disk is 95.0% used; writes stopped above disk_full_ratio 90.0% and resume when usage falls to disk_force_clean_ratio 85.0% or below (delete old segments or free space)"
        ),
        other => panic!("expected DiskFull, got {other}"),
    }
    assert!(store.stats().disk_full);
    // Reads keep working.
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(
        store
            .read("t", 0, QueueOffset::new(0), 10, usize::MAX)
            .unwrap()
            .records
            .len(),
        1
    );
    // The disk thread notices space coming back without any call.
    knobs.disk.set(0.5);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.stats().disk_full && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!store.stats().disk_full);
    store
        .append(&[record("t", 0, None, Some("2:accepted"))])
        .unwrap();
}

#[test]
fn forced_pass_never_takes_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, _knobs) = config(dir.path());
    let store = Store::open(cfg).unwrap();
    store
        .append(&[record("t", 0, None, Some("0:only"))])
        .unwrap();
    let out = store.run_retention(Trigger::ManualForce).unwrap();
    assert_eq!(out.deleted_segments, 0);
    assert_eq!(store.stats().commitlog_segments, 1);
}

#[test]
fn segments_past_the_durable_dispatch_position_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, knobs) = config(dir.path());
    let sink = StuckSink::new(0, false);
    let store = Store::open_with_sinks(cfg, vec![sink.clone()]).unwrap();
    fill(&store, 3);
    let dispatched_before = store.stats().dispatched_offset;
    sink.set_stuck(true);
    fill_then(&store, 6, false);
    assert_eq!(
        store.stats().dispatched_offset,
        dispatched_before,
        "dispatch is stuck"
    );
    knobs.clock.set_now_ms(now() + 2 * HOUR_MS);
    knobs.clock.set_hour(4);
    let out = store.run_retention(Trigger::Scheduled).unwrap();
    // Only segments wholly below the stuck position may go.
    let min = store.commit_log().min_offset();
    assert!(
        min <= dispatched_before,
        "deleted past the dispatch position: min {min}, dispatched {dispatched_before}"
    );
    assert!(out.deleted_segments <= 3);
    assert!(store.stats().commitlog_segments >= 4);
}

#[test]
fn a_reader_holding_a_deleted_segment_still_gets_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, _knobs) = config(dir.path());
    let store = Store::open(cfg).unwrap();
    fill(&store, 3);
    // A fetch in progress holds records of the first segment...
    let held = store
        .read("t", 0, QueueOffset::new(0), 3, usize::MAX)
        .unwrap()
        .records;
    let expected: Vec<_> = held.iter().map(|r| r.value().unwrap().to_vec()).collect();
    // ...while retention deletes it.
    assert_eq!(
        store
            .run_retention(Trigger::ManualForce)
            .unwrap()
            .deleted_segments,
        3
    );
    assert!(!segment_files(dir.path())
        .iter()
        .any(|p| p.ends_with(format!("{:020}", 0))));
    for (r, e) in held.iter().zip(&expected) {
        assert_eq!(&r.value().unwrap()[..], &e[..]);
        assert!(r.value().unwrap().starts_with(b"0:") || r.queue_offset().get() > 0);
    }
}

#[test]
fn beginning_offsets_move_up_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, _knobs) = config(dir.path());
    let store = Store::open(cfg.clone()).unwrap();
    // Two partitions and keys, so queue and index files both have work.
    let v = "q".repeat(400);
    for i in 0..120 {
        store
            .append(&[
                record(
                    "t",
                    0,
                    Some(&format!("k{}", i % 5)),
                    Some(&format!("{i}:{v}")),
                ),
                record("u", 0, None, Some(&format!("{i}:x"))),
            ])
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let index_files_before = store.stats().index_files;
    let out = store.run_retention(Trigger::ManualForce).unwrap();
    assert!(out.deleted_segments > 5, "{out:?}");
    assert!(out.queue_files_deleted > 0, "{out:?}");
    assert!(store.stats().index_files <= index_files_before);
    let (begin, end) = store.offsets("t", 0);
    assert!(begin > 0 && end == 120, "({begin}, {end})");
    // Fetch from 0 returns from the first surviving record on.
    let first = store
        .read("t", 0, QueueOffset::new(0), 1, usize::MAX)
        .unwrap();
    assert_eq!(first.records[0].queue_offset().get(), begin);
    assert_eq!(first_value(&store), begin);
    // Key lookups only find surviving records.
    for r in store.query_by_key("t", b"k1", 0, i64::MAX, 1000).unwrap() {
        assert!(r.queue_offset().get() >= begin);
    }
    let u = store.offsets("u", 0);
    store.close_uncleanly();
    let store = Store::open(cfg).unwrap();
    assert_eq!(store.offsets("t", 0), (begin, end));
    assert_eq!(store.offsets("u", 0), u);
    assert_eq!(first_value(&store), begin);
    let a = store
        .append(&[record("t", 0, None, Some("120:next"))])
        .unwrap();
    assert_eq!(a[0].queue_offset.get(), 120);
}

/// A hold the test moves by hand, as tiered storage's uploader would.
struct TestHold(std::sync::atomic::AtomicU64);

impl tidelog_storage::RetentionHold for TestHold {
    fn min_position(&self) -> Option<u64> {
        Some(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// No pass (forced, disk pressure, expired) deletes a segment ending above
/// the hold's position; a full disk still refuses writes instead of forcing
/// deletion; once the hold moves up, the next pass goes on.
#[test]
fn the_retention_hold_keeps_segments_at_or_above_its_position_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, knobs) = config(dir.path());
    let store = Store::open(cfg).unwrap();
    fill(&store, 6);
    let segs = store.commit_log().segments();
    // Inside segment 2: segments 0 and 1 may go, 2 and later stay.
    let hold = Arc::new(TestHold((segs[2].base() + 1).into()));
    store.set_retention_hold(hold.clone());
    knobs.clock.set_now_ms(now() + 2 * HOUR_MS);
    let out = store.run_retention(Trigger::Manual).unwrap();
    assert_eq!(out.deleted_segments, 2);
    assert_eq!(store.commit_log().min_offset(), segs[2].base());
    for trigger in [Trigger::ManualForce, Trigger::Scheduled] {
        knobs.disk.set(0.99);
        let out = store.run_retention(trigger).unwrap();
        assert_eq!(out.deleted_segments, 0, "{trigger:?}");
        assert_eq!(store.commit_log().min_offset(), segs[2].base());
    }
    assert!(store.stats().retention_held_passes >= 3);
    // Disk full: writes are refused, nothing held is deleted to make room.
    store.check_disk();
    assert!(matches!(
        store.append(&[record("t", 0, None, Some("x"))]),
        Err(StoreError::DiskFull { .. })
    ));
    assert_eq!(store.commit_log().min_offset(), segs[2].base());
    // The hold at a segment's base keeps that segment and frees those below.
    hold.0
        .store(segs[4].base(), std::sync::atomic::Ordering::SeqCst);
    knobs.disk.set(0.5);
    store.check_disk();
    let out = store.run_retention(Trigger::ManualForce).unwrap();
    assert_eq!(out.deleted_segments, 2);
    assert_eq!(store.commit_log().min_offset(), segs[4].base());
    assert!(first_value(&store) > 0);
}
