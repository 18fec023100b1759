//! Store tests that need the crate's test hooks (the integration tests in
//! `tests/` cannot reach them).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use bytes::Bytes;

use std::time::{Duration, Instant};

use super::*;
use crate::checkpoint::Checkpoint;
use crate::commit_log::{AppendRecord, Appended, ReadSink, StoredRecord, BEFORE_SEGMENT_LOOKUP};
use crate::config::FlushMode;
use crate::error::StoreError;
use crate::retention::{FixedDiskUsage, Trigger};
use crate::types::{QueueOffset, TopicPartition};

fn small_config(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 4096;
    c.consume_queue_units_per_file = 64;
    c.index_slots = 64;
    c.index_entries = 256;
    c.flush_interval_ms = 50;
    c.sync_checkpoint_interval_ms = 50;
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

/// Under `flush: sync` the periodic checkpoint follows
/// `sync_checkpoint_interval_ms`, not `flush_interval_ms`: at an hour, no
/// checkpoint follows the open's in twenty flush intervals, and a crash
/// then replays every acknowledged record from the open's checkpoint; at
/// 10 ms the checkpoint moves past the appends. Either way a crash loses
/// nothing acknowledged.
#[test]
fn under_sync_flush_the_checkpoint_follows_its_own_interval() {
    for (checkpoint_ms, moves) in [(3_600_000, false), (10, true)] {
        let dir = tempfile::tempdir().unwrap();
        let mut c = small_config(dir.path());
        c.flush = FlushMode::Sync;
        c.flush_interval_ms = 10;
        c.sync_checkpoint_interval_ms = checkpoint_ms;
        let store = Store::open(c.clone()).unwrap();
        let dispatched = || Checkpoint::load(dir.path()).unwrap().unwrap().dispatched;
        let at_open = dispatched();
        for i in 0..20 {
            store.append(&[record("t", 0, &format!("v{i}"))]).unwrap();
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        if moves {
            let deadline = Instant::now() + Duration::from_secs(30);
            while dispatched() <= at_open {
                assert!(Instant::now() < deadline, "the checkpoint never moved");
                std::thread::sleep(Duration::from_millis(5));
            }
        } else {
            // Twenty flush intervals: the old cadence would have written
            // the checkpoint many times by now.
            std::thread::sleep(Duration::from_millis(200));
            assert_eq!(dispatched(), at_open, "a checkpoint at the flush interval");
        }
        store.close_uncleanly();

        let store = Store::open(c).unwrap();
        if !moves {
            assert!(
                store.recovery_report().records_replayed >= 20,
                "{:?}",
                store.recovery_report()
            );
        }
        let read = store
            .read("t", 0, QueueOffset::new(0), 100, usize::MAX)
            .unwrap();
        let values: Vec<Bytes> = read.records.iter().map(|r| r.value().unwrap()).collect();
        let expected: Vec<Bytes> = (0..20).map(|i| Bytes::from(format!("v{i}"))).collect();
        assert_eq!(values, expected, "checkpoint every {checkpoint_ms} ms");
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

/// The answer a scan gives: the first record at or past `from` whose
/// timestamp is at least `t`, else `end`.
fn first_at_or_after_by_scan(model: &[(u64, i64)], from: u64, end: u64, t: i64) -> u64 {
    model
        .iter()
        .filter(|(o, _)| *o >= from)
        .find(|(_, ts)| *ts >= t)
        .map_or(end, |(o, _)| *o)
}

/// Every partition's lookups against the scan of the model: timestamps of
/// records and their neighbours, before and after everything.
fn check_time_lookups(
    store: &Store,
    model: &[Vec<(u64, i64)>],
    rng: &mut crate::test_rng::SplitMix64,
    what: &str,
) {
    for (p, records) in model.iter().enumerate() {
        let (min, end) = store.offsets("t", p as u32);
        let mut asked = vec![i64::MIN, i64::MAX, -1_000_000, 0];
        if let (Some(lo), Some(hi)) = (
            records.iter().map(|r| r.1).min(),
            records.iter().map(|r| r.1).max(),
        ) {
            asked.extend([lo - 1, lo, hi, hi + 1]);
        }
        for _ in 0..60 {
            if records.is_empty() {
                break;
            }
            let (_, ts) = records[rng.below(records.len() as u64) as usize];
            asked.push(ts + rng.below(3) as i64 - 1);
        }
        // The first record with the largest timestamp (ListOffsets -3).
        let kept = || records.iter().filter(|(o, _)| *o >= min);
        let want = kept()
            .map(|r| r.1)
            .max()
            .and_then(|max| kept().find(|r| r.1 == max).copied());
        crate::time_index::RECORDS_READ.with(|n| n.set(0));
        let got = store.max_timestamp_record("t", p as u32).unwrap();
        assert_eq!(got, want, "{what}: partition {p}, the largest timestamp");
        // Through the index: a partly retained first interval, the tail,
        // and the lookup's two intervals, of 8.
        let read = crate::time_index::RECORDS_READ.with(|n| n.get());
        assert!(
            read <= 32,
            "{what}: partition {p}: read {read} records for the largest timestamp"
        );
        for t in asked {
            let want = first_at_or_after_by_scan(records, min, end, t);
            crate::time_index::RECORDS_READ.with(|n| n.set(0));
            let got = store.offset_for_timestamp("t", p as u32, t).unwrap();
            assert_eq!(
                got, want,
                "{what}: partition {p}, timestamp {t}, offsets [{min}, {end})"
            );
            // Through the index: at most the partly retained first
            // interval and one more (the one found, or the tail), of 8.
            let read = crate::time_index::RECORDS_READ.with(|n| n.get());
            assert!(
                read <= 16,
                "{what}: partition {p}, timestamp {t}: read {read} records"
            );
        }
    }
}

/// Appends `n` records with non-monotonic timestamps (jitter around a
/// rising clock, outliers far ahead and behind) to random partitions of
/// `t`, in small batches, and records them in the model.
fn append_timed(
    store: &Store,
    model: &mut [Vec<(u64, i64)>],
    rng: &mut crate::test_rng::SplitMix64,
    clock: &mut i64,
    n: usize,
) {
    let mut left = n;
    while left > 0 {
        let p = rng.below(model.len() as u64) as u32;
        let batch = (1 + rng.below(5) as usize).min(left);
        let records: Vec<AppendRecord> = (0..batch)
            .map(|_| {
                *clock += rng.below(20) as i64;
                let ts = if rng.one_in(25) {
                    *clock + 1_000_000 // far ahead: raises the running maximum
                } else if rng.one_in(25) {
                    -(rng.below(1000) as i64) // before everything
                } else {
                    *clock + rng.below(400) as i64 - 200
                };
                let mut r = record("t", p, &"v".repeat(20 + rng.below(200) as usize));
                r.timestamp_ms = Some(ts);
                r
            })
            .collect();
        let appended = store.append(&records).unwrap();
        for (a, r) in appended.iter().zip(&records) {
            model[p as usize].push((a.queue_offset.get(), r.timestamp_ms.unwrap()));
        }
        left -= batch;
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
}

fn time_files(dir: &Path, partition: u32) -> Vec<std::path::PathBuf> {
    let dir = dir
        .join("consumequeue")
        .join("t")
        .join(partition.to_string());
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.to_string_lossy()
                .ends_with(crate::time_index::FILE_SUFFIX)
        })
        .collect();
    files.sort();
    files
}

/// Per partition of `t`, the intervals of 8 offsets its queue files hold
/// whole (64 units a file): the entries a complete time index has.
fn complete_intervals(store: &Store, dir: &Path) -> Vec<usize> {
    (0..3)
        .map(|p| {
            let (_, end) = store.offsets("t", p);
            std::fs::read_dir(dir.join("consumequeue/t").join(p.to_string()))
                .unwrap()
                .filter_map(|e| {
                    let name = e.unwrap().file_name().into_string().unwrap();
                    crate::fs_util::parse_offset_file_name(&name, "")
                })
                .map(|byte_offset| (end.saturating_sub(byte_offset / 20)).min(64) as usize / 8)
                .sum()
        })
        .collect()
}

fn time_entries(store: &Store, partition: u32) -> usize {
    store
        .inner
        .queues
        .get("t", partition)
        .map_or(0, |q| q.time_index_entries())
}

/// Model test of the timestamp lookup: non-monotonic timestamps, across
/// rolls of queue files and CommitLog segments, after retention deleted
/// the oldest segments (and their queue and time files), after a crash
/// with a deleted time file, a damaged header, a torn entry and a stale
/// entry past the queue's end (each rebuilt or dropped at open), and
/// after a clean restart: always the answer of a scan.
#[test]
fn time_lookups_match_a_scan_through_rolls_retention_and_crashes() {
    let seed = std::env::var("TIDELOG_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7135_e1d0);
    eprintln!("seed {seed} (rerun with TIDELOG_TEST_SEED={seed})");
    let mut rng = crate::test_rng::SplitMix64(seed);
    crate::time_index::TEST_INTERVAL.with(|c| c.set(Some(8)));
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let mut model = vec![Vec::new(), Vec::new(), Vec::new()];
    let mut clock = 1_700_000_000_000i64;

    let store = Store::open(config.clone()).unwrap();
    append_timed(&store, &mut model, &mut rng, &mut clock, 700);
    assert!(store.commit_log().segment_count() > 5);
    assert!(time_files(dir.path(), 0).len() > 1, "queue files rolled");
    // 8 records an entry: the lookups below go through the index.
    assert!(time_entries(&store, 0) * 8 + 8 >= model[0].len());
    check_time_lookups(&store, &model, &mut rng, "after rolls");

    let out = store.run_retention(Trigger::ManualForce).unwrap();
    assert!(out.deleted_segments > 0, "{out:?}");
    assert!(store.offsets("t", 0).0 > 0, "retention moved the beginning");
    check_time_lookups(&store, &model, &mut rng, "after retention");
    append_timed(&store, &mut model, &mut rng, &mut clock, 300);
    check_time_lookups(&store, &model, &mut rng, "after retention and appends");

    store.checkpoint().unwrap();
    let entries: Vec<usize> = (0..3).map(|p| time_entries(&store, p)).collect();
    assert_eq!(
        entries,
        complete_intervals(&store, dir.path()),
        "indexed as dispatched"
    );
    store.close_uncleanly();
    // Partition 0: a time file lost; partition 1: a header damaged and a
    // torn last entry; partition 2: an entry for the tail interval, which
    // is not complete (a stale entry, as after records past the flushed
    // log were lost), claiming no records.
    let p0 = time_files(dir.path(), 0);
    std::fs::remove_file(&p0[p0.len() / 2]).unwrap();
    let p1 = time_files(dir.path(), 1);
    let mut header = std::fs::read(&p1[0]).unwrap();
    header[5] ^= 0xff;
    std::fs::write(&p1[0], &header).unwrap();
    let last = p1.last().unwrap();
    let len = std::fs::metadata(last).unwrap().len();
    assert!(len > 16, "the last time file of partition 1 has entries");
    std::fs::OpenOptions::new()
        .write(true)
        .open(last)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let (_, end2) = store_offsets_from_model(&model[2]);
    let units = config.consume_queue_units_per_file;
    let file_first = end2 / units * units;
    let path2 = dir.path().join("consumequeue/t/2").join(format!(
        "{}.time",
        crate::fs_util::offset_file_name(file_first * 20)
    ));
    let k = (end2 - file_first) / 8;
    if k < units / 8 && path2.exists() {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path2)
            .unwrap();
        let stale = crate::time_index::format::encode_entry(
            file_first,
            k,
            crate::time_index::format::NO_RECORDS,
        );
        f.write_all_at(&stale, 16 + k * 12).unwrap();
    }

    let store = Store::open(config.clone()).unwrap();
    let rebuilt: Vec<usize> = (0..3).map(|p| time_entries(&store, p)).collect();
    assert_eq!(
        rebuilt,
        complete_intervals(&store, dir.path()),
        "every complete interval indexed again (before the crash: {entries:?})"
    );
    check_time_lookups(&store, &model, &mut rng, "after a crash and damage");
    append_timed(&store, &mut model, &mut rng, &mut clock, 300);
    check_time_lookups(&store, &model, &mut rng, "after the crash and appends");

    store.shutdown().unwrap();
    let store = Store::open(config).unwrap();
    check_time_lookups(&store, &model, &mut rng, "after a clean restart");
    // Deleted: a deleted partition answers its next offset.
    store.delete_topic("t").unwrap();
    let next = model[0].last().unwrap().0 + 1;
    assert_eq!(store.offset_for_timestamp("t", 0, 0).unwrap(), next);
    assert_eq!(store.offset_for_timestamp("none", 0, 0).unwrap(), 0);
}

/// One past the last offset of a partition's model (its end), and that.
fn store_offsets_from_model(records: &[(u64, i64)]) -> (u64, u64) {
    let end = records.last().map_or(0, |r| r.0 + 1);
    (records.first().map_or(0, |r| r.0), end)
}

/// A sink that keeps only the record it got last (as a Kafka fetch's
/// does) and notes every offset and value it was handed.
#[derive(Default)]
struct LastOnly {
    last: Option<StoredRecord>,
    seen: Vec<(u64, Option<Bytes>, Vec<crate::commit_log::Header>)>,
}

impl ReadSink for LastOnly {
    fn last(&self) -> Option<&StoredRecord> {
        self.last.as_ref()
    }

    fn push(&mut self, record: StoredRecord) {
        self.seen.push((
            record.queue_offset().get(),
            record.value(),
            record.headers(),
        ));
        self.last = Some(record);
    }
}

/// `read_into` with a sink that keeps only its last record reads exactly
/// what `read` collects, across entries of several appends and segments
/// (headers, a null header value, a tombstone among them), from every
/// offset and under byte limits that cut entries in the middle.
#[test]
fn read_into_a_sink_keeping_only_the_last_record_reads_what_read_collects() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    for batch in 0..12 {
        let records: Vec<AppendRecord> = (0..7)
            .map(|i| {
                let mut r = record("t", 0, &format!("{batch}-{i}-{}", "v".repeat(40)));
                if i % 3 == 1 {
                    r.headers = vec![
                        crate::commit_log::Header {
                            name: "a".into(),
                            value: Some(Bytes::from(format!("{i}"))),
                        },
                        crate::commit_log::Header {
                            name: "a".into(),
                            value: None,
                        },
                    ];
                }
                if i == 5 {
                    r.key = Some(Bytes::from_static(b"k"));
                    r.value = None;
                }
                r
            })
            .collect();
        store.append(&records).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(store.commit_log().segment_count() >= 2);
    for from in [0u64, 3, 7, 40, 83, 84] {
        for max_bytes in [1usize, 150, 700, usize::MAX] {
            let read = store
                .read("t", 0, QueueOffset::new(from), 1000, max_bytes)
                .unwrap();
            let mut sink = LastOnly::default();
            let next = store
                .read_into("t", 0, QueueOffset::new(from), 1000, max_bytes, &mut sink)
                .unwrap();
            let collected: Vec<_> = read
                .records
                .iter()
                .map(|r| (r.queue_offset().get(), r.value(), r.headers()))
                .collect();
            assert_eq!(sink.seen, collected, "from {from}, max_bytes {max_bytes}");
            assert_eq!(next, read.next_offset);
            assert_eq!(next.get(), from + collected.len() as u64);
        }
    }
    // A sink that comes holding a record of another partition's read: the
    // next read never takes the rest of that record's entry for its own.
    store
        .append(&[record("u", 0, "u0"), record("u", 0, "u1")])
        .unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let mut sink = LastOnly::default();
    store
        .read_into("t", 0, QueueOffset::new(0), 1, usize::MAX, &mut sink)
        .unwrap();
    let next = store
        .read_into("u", 0, QueueOffset::new(1), 10, usize::MAX, &mut sink)
        .unwrap();
    assert_eq!(next.get(), 2);
    assert_eq!(sink.seen.len(), 2);
    assert_eq!(sink.seen[1].1.as_deref(), Some(&b"u1"[..]));
}
