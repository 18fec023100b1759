//! Tests of the ConsumeQueues: loading, appending and reading units,
//! truncation and recovery of torn or lost files, deletion of topics and
//! records, log starts, the time index and the flush of new names.

use std::path::Path;
use std::sync::atomic::Ordering;

use super::deleted::DeletedPartitions;
use super::ends::QueueEnds;
use super::format::UNIT_LEN;
use super::queue::Truncated;
use super::*;
use crate::error::Result;
use crate::fs_util;
use crate::time_index::{self, RecordTimes};
use crate::types::{QueueOffset, TopicPartition};

/// Queues under `<dir>/cq`, deleted partitions in `<dir>`.
fn open(dir: &Path, units_per_file: u64) -> Result<ConsumeQueues> {
    ConsumeQueues::load(
        &dir.join("cq"),
        &dir.join(deleted::FILE_NAME),
        &dir.join(log_start::FILE_NAME),
        units_per_file,
    )
}

fn unit(p: u64) -> Unit {
    Unit {
        physical_offset: p,
        size: 100,
        key_hash: p ^ 7,
    }
}

/// Timestamps of a test queue's records, by offset.
struct Times(std::collections::HashMap<u64, i64>);

impl RecordTimes for Times {
    fn timestamp_at(&mut self, offset: u64) -> Result<Option<i64>> {
        Ok(self.0.get(&offset).copied())
    }
}

/// A unit rewritten below the end (a repair from the CommitLog) drops
/// the time index entries from its interval on: they were built from
/// the unit it replaced. The rebuild then indexes them again.
#[test]
fn a_rewritten_unit_drops_the_time_entries_from_its_interval_on() {
    time_index::TEST_INTERVAL.with(|c| c.set(Some(4)));
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 16).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    let mut times = Times((0..20).map(|i| (i, 1000 - i as i64)).collect());
    q.time.catch_up(&[], 0, &mut times).unwrap();
    for i in 0..20 {
        q.put(QueueOffset::new(i), unit(i * 100), 1000 - i as i64)
            .unwrap();
    }
    assert_eq!(q.time_index_entries(), 5, "20 units, 4 an entry");
    assert!(!q.time.needs_catch_up());
    // Offset 9 (interval 2 of the first file) rewritten.
    q.put(QueueOffset::new(9), unit(777), 5).unwrap();
    assert_eq!(q.time_index_entries(), 2, "intervals 0 and 1 kept");
    assert!(q.time.needs_catch_up());
    times.0.insert(9, 5);
    let files: Vec<u64> = q
        .files
        .read()
        .unwrap()
        .iter()
        .map(|f| f.first_unit)
        .collect();
    assert_eq!(
        q.time.catch_up(&files, q.max_offset(), &mut times).unwrap(),
        3
    );
    assert_eq!(q.time_index_entries(), 5);
    time_index::TEST_INTERVAL.with(|c| c.set(None));
}

#[test]
fn a_repaired_unit_below_the_end_is_flushed_again() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..6 {
        q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
    }
    q.flush().unwrap();
    // A unit below the end lost (a hole), then replayed.
    q.file_for(1).unwrap().write(1, &[0u8; UNIT_LEN]).unwrap();
    assert_eq!(
        q.put(QueueOffset::new(1), unit(100), 0).unwrap(),
        PutOutcome::Written
    );
    assert!(
        q.flushed_offset.load(Ordering::Acquire) <= 1,
        "the next flush must cover the repaired unit"
    );
    q.flush().unwrap();
    assert_eq!(q.flushed_offset.load(Ordering::Acquire), 6);
}

#[test]
fn ends_claim_only_units_below_the_position_and_find_lost_compares_them() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..10 {
        q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
    }
    qs.get_or_create("empty", 0).unwrap();
    // Units at 500.. point past the position: not claimed (a power
    // loss may take their records, and their offsets are reused).
    let ends = qs.ends_at(450);
    assert_eq!(ends.get("t", 0), Some(5));
    assert_eq!(ends.get("empty", 0), None);
    assert_eq!(qs.ends_at(10_000).get("t", 0), Some(10));
    // Nothing lost against either.
    assert!(qs.find_lost(&qs.ends_at(10_000)).is_empty());
    qs.flush().unwrap();
    drop(q);
    drop(qs);

    // The tail file (units 8 and 9) is lost.
    std::fs::remove_file(
        dir.path()
            .join("cq/t/0")
            .join(fs_util::offset_file_name(8 * UNIT_LEN as u64)),
    )
    .unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let mut recorded = QueueEnds::default();
    recorded.raise("t", 0, 10);
    // A deleted partition and one whose log start reaches its end
    // lost nothing.
    recorded.raise("gone", 0, 3);
    let lost = qs.find_lost(&recorded);
    assert_eq!(lost.len(), 2, "{lost:?}");
    let t = lost.iter().find(|l| l.tp.topic() == "t").unwrap();
    assert_eq!((t.had, t.recorded), (8, 10));
    // From just past unit 7's record.
    assert_eq!(t.replay_from, 700 + 100);
    let gone = lost.iter().find(|l| l.tp.topic() == "gone").unwrap();
    assert_eq!((gone.had, gone.replay_from), (0, 0));
    qs.delete_topic("gone", &[(0, 3)]).unwrap();
    assert_eq!(qs.find_lost(&recorded).len(), 1);

    // Records retention had deleted: the queue continues at the end,
    // durably.
    qs.continue_lost_queue("t", 0, 10).unwrap();
    assert_eq!(qs.get("t", 0).unwrap().max_offset(), 10);
    drop(qs);
    let qs = open(dir.path(), 4).unwrap();
    assert_eq!(qs.log_start("t", 0), 10);
    assert!(qs.find_lost(&recorded).is_empty());
}

#[test]
fn put_get_across_files_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 1).unwrap();
    for i in 0..10 {
        assert_eq!(
            q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap(),
            PutOutcome::Written
        );
    }
    assert_eq!((q.min_offset(), q.max_offset()), (0, 10));
    assert_eq!(q.get(9).unwrap(), Some(unit(900)));
    assert_eq!(q.get(10).unwrap(), None);
    qs.flush().unwrap();
    // 10 units at 4 per file: three files named by byte offset.
    let names: Vec<_> = std::fs::read_dir(dir.path().join("cq/t/1"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3);
    drop(q);
    drop(qs);
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get("t", 1).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (0, 10));
    for i in 0..10 {
        assert_eq!(q.get(i).unwrap(), Some(unit(i * 100)));
    }
}

#[test]
fn flushing_keeps_units_written_before_and_after_it() {
    // Flushes unmap whole flushed pages (flush_units); units in them,
    // and units the writer adds to the page it is still filling, must
    // read back the same, now and after a reopen.
    let dir = tempfile::tempdir().unwrap();
    let per_file = 2 * 4096;
    let qs = open(dir.path(), per_file).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    let mut cursor = QueueCursor::default();
    let mut next = 0u64;
    // Flush points inside pages, on page ends, and across a file end.
    for flush_at in [100u64, 204, 205, 1000, 4096, 8191, 8192, 9000, 12_000] {
        while next < flush_at {
            q.put_cached(QueueOffset::new(next), unit(next * 100), 0, &mut cursor)
                .unwrap();
            next += 1;
        }
        qs.flush().unwrap();
        for i in (0..next).step_by(97).chain([next - 1]) {
            assert_eq!(
                q.get(i).unwrap(),
                Some(unit(i * 100)),
                "unit {i} after a flush at {flush_at}"
            );
        }
    }
    drop(q);
    drop(qs);
    let qs = open(dir.path(), per_file).unwrap();
    let q = qs.get("t", 0).unwrap();
    assert_eq!(q.max_offset(), next);
    for i in 0..next {
        assert_eq!(
            q.get(i).unwrap(),
            Some(unit(i * 100)),
            "unit {i} after reopening"
        );
    }
}

#[test]
fn replay_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 8).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    q.put(QueueOffset::new(0), unit(0), 0).unwrap();
    q.put(QueueOffset::new(1), unit(100), 0).unwrap();
    assert_eq!(
        q.put(QueueOffset::new(0), unit(0), 0).unwrap(),
        PutOutcome::AlreadyPresent
    );
    assert_eq!(
        q.put(QueueOffset::new(1), unit(100), 0).unwrap(),
        PutOutcome::AlreadyPresent
    );
    assert_eq!(q.max_offset(), 2);
}

#[test]
fn truncate_drops_units_past_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..10 {
        q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
    }
    assert_eq!(q.truncate_from_physical(450).unwrap().dropped, 5);
    assert_eq!(q.max_offset(), 5);
    assert_eq!(q.get(5).unwrap(), None);
    // The file holding units 8..12 is gone; reload agrees.
    drop(q);
    drop(qs);
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get("t", 0).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (0, 5));
    q.put(QueueOffset::new(5), unit(777), 0).unwrap();
    assert_eq!(q.get(5).unwrap(), Some(unit(777)));
}

#[test]
fn queue_starting_past_zero() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    q.put(QueueOffset::new(6), unit(600), 0).unwrap();
    q.put(QueueOffset::new(7), unit(700), 0).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (6, 8));
    drop(q);
    drop(qs);
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get("t", 0).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (6, 8));
    assert_eq!(q.get(5).unwrap(), None);
}

/// DeleteRecords: the log start moves forward only, never past the
/// high watermark (`None` is the high watermark), is durable before it
/// answers (a reopen, with no shutdown, keeps it), and hides what is
/// below from reads; a replay of units below it writes nothing.
#[test]
fn delete_records_moves_the_log_start_forward_durably() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..10 {
        q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
    }
    assert_eq!(
        qs.delete_records("t", 0, Some(11)).unwrap(),
        DeletedRecords::AboveHighWatermark {
            offset: 11,
            high_watermark: 10
        }
    );
    assert_eq!(
        qs.delete_records("t", 0, Some(6)).unwrap(),
        DeletedRecords::LowWatermark(6)
    );
    assert_eq!((q.min_offset(), q.max_offset(), q.log_start()), (6, 10, 6));
    assert_eq!(q.get(5).unwrap(), None);
    assert_eq!(q.get(6).unwrap(), Some(unit(600)));
    // Backwards: nothing changes, the low watermark is answered.
    assert_eq!(
        qs.delete_records("t", 0, Some(2)).unwrap(),
        DeletedRecords::LowWatermark(6)
    );
    // A replay of a deleted record (the queue file may be gone).
    assert_eq!(
        q.put(QueueOffset::new(3), unit(999), 0).unwrap(),
        PutOutcome::BelowLogStart
    );
    assert_eq!(q.min_offset(), 6);
    // Not even flushed: the file is what a crash leaves.
    drop(q);
    drop(qs);
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get("t", 0).unwrap();
    assert_eq!((q.min_offset(), q.max_offset(), q.log_start()), (6, 10, 6));
    // The high watermark: everything.
    assert_eq!(
        qs.delete_records("t", 0, None).unwrap(),
        DeletedRecords::LowWatermark(10)
    );
    assert_eq!((q.min_offset(), q.max_offset()), (10, 10));
    assert_eq!(q.get(9).unwrap(), None);
    // A partition never written has a high watermark of 0.
    assert_eq!(
        qs.delete_records("t", 1, Some(1)).unwrap(),
        DeletedRecords::AboveHighWatermark {
            offset: 1,
            high_watermark: 0
        }
    );
    assert!(qs
        .log_start_offsets()
        .iter()
        .all(|(tp, _)| tp.partition() == 0));
}

/// Queue files wholly below the log start go with the retention pass's
/// call, not before; the one holding the end stays.
#[test]
fn files_below_the_log_start_are_deleted_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..10 {
        q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
    }
    assert_eq!(q.file_count(), 3);
    qs.delete_records("t", 0, Some(9)).unwrap();
    assert_eq!(q.file_count(), 3, "deleted by the retention pass");
    assert_eq!(q.delete_files_below_start().unwrap(), 2);
    assert_eq!(q.file_count(), 1);
    assert_eq!(q.get(9).unwrap(), Some(unit(900)));
    assert_eq!(q.delete_files_below_start().unwrap(), 0);
}

/// A queue that a crash cut below its log start (units lost after the
/// start was moved), or whose files are gone, continues at the log
/// start: no offset below it is handed out again.
#[test]
fn a_queue_cut_below_its_log_start_continues_at_it() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..10 {
        q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
    }
    qs.delete_records("t", 0, Some(8)).unwrap();
    // Recovery: the log ends at 450, below the log start's records.
    q.truncate_from_physical(450).unwrap();
    assert!(q.max_offset() >= 8, "{}", q.max_offset());
    drop(q);
    drop(qs);
    // Every queue file lost: the partition still starts at 8.
    std::fs::remove_dir_all(dir.path().join("cq").join("t")).unwrap();
    let qs = open(dir.path(), 4).unwrap();
    assert!(qs.get("t", 0).is_none());
    let q = qs.get_or_create("t", 0).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (8, 8));
    assert_eq!(
        qs.log_start_offsets(),
        [(TopicPartition::new("t", 0).unwrap(), 8)]
    );
}

#[test]
fn advance_min_moves_the_beginning_and_deletes_old_files() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..10 {
        q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
    }
    // The log now starts at 550: units 0..=5 point below it.
    assert_eq!(q.advance_min(550).unwrap(), 1);
    assert_eq!((q.min_offset(), q.max_offset()), (6, 10));
    assert_eq!(q.get(5).unwrap(), None);
    assert_eq!(q.get(6).unwrap(), Some(unit(600)));
    // Everything gone: the last file stays, the end is kept.
    assert_eq!(q.advance_min(10_000).unwrap(), 1);
    assert_eq!((q.min_offset(), q.max_offset()), (10, 10));
    drop(q);
    drop(qs);
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get("t", 0).unwrap();
    q.advance_min(10_000).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (10, 10));
    q.put(QueueOffset::new(10), unit(20_000), 0).unwrap();
    assert_eq!(q.get(10).unwrap(), Some(unit(20_000)));
}

#[test]
fn wrong_file_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..5 {
        q.put(QueueOffset::new(i), unit(i), 0).unwrap();
    }
    drop(q);
    drop(qs);
    // Files longer than the setting makes them, and (the name check) a
    // second file where a larger setting puts none.
    assert!(open(dir.path(), 2).is_err());
    assert!(open(dir.path(), 8).is_err());
}

#[test]
fn stray_directories_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("cq/bad name/0")).unwrap();
    std::fs::create_dir_all(dir.path().join("cq/t/not-a-number")).unwrap();
    let qs = open(dir.path(), 4).unwrap();
    assert!(qs.all().is_empty());
}

/// Pages of `q`'s files in the page cache (mincore over their maps).
#[cfg(target_os = "linux")]
fn resident_pages(q: &ConsumeQueue) -> usize {
    let page = fs_util::page_size();
    let files = q.files.read().unwrap();
    files
        .iter()
        .map(|f| {
            let pages = f.map.len().div_ceil(page);
            let mut vec = vec![0u8; pages];
            // SAFETY: our own mapping, and a vector of one byte per page.
            let rc =
                unsafe { libc::mincore(f.map.as_mut_ptr().cast(), f.map.len(), vec.as_mut_ptr()) };
            assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
            vec.iter().filter(|&&b| b & 1 != 0).count()
        })
        .sum()
}

#[cfg(target_os = "linux")]
#[test]
fn opening_a_sparse_queue_file_reads_only_what_was_written() {
    // A default-sized (6 MB) file with two units: opening it must not
    // read (and so cache, or map in) its holes.
    let dir = tempfile::tempdir().unwrap();
    let per_file = 300_000;
    let qs = open(dir.path(), per_file).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    q.put(QueueOffset::new(0), unit(100), 0).unwrap();
    q.put(QueueOffset::new(1), unit(200), 0).unwrap();
    qs.flush().unwrap();
    // Forget the file's cached pages (the first write fault read the
    // file ahead), so what opening reads shows.
    let files = q.files.read().unwrap().clone();
    for f in &files {
        use std::os::unix::io::AsRawFd;
        // SAFETY: plain syscall on an fd the file owns.
        let rc =
            unsafe { libc::posix_fadvise(f.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
    }
    assert!(
        resident_pages(&q) <= 2,
        "{} pages still cached",
        resident_pages(&q)
    );
    drop(files);
    drop(q);
    drop(qs);
    let qs = open(dir.path(), per_file).unwrap();
    let q = qs.get("t", 0).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (0, 2));
    let resident = resident_pages(&q);
    assert!(
        resident <= 16,
        "{resident} pages of a 6 MB file read at open"
    );
    assert_eq!(q.get(1).unwrap(), Some(unit(200)));
}

/// The dispatcher's first unit in a new, default-sized (6 MB) queue
/// file makes one page of page cache, not the file's readahead window
/// of zeros (a store into the map faulted, and the fault read 8 MiB of
/// hole ahead on the VM we run on: 6 ms and 6 MB a new partition). Not
/// tested where the temp dir's file system reads nothing ahead (tmpfs).
#[cfg(target_os = "linux")]
#[test]
fn a_first_unit_makes_one_page_not_a_readahead_window() {
    let dir = tempfile::tempdir().unwrap();
    let per_file = 300_000;
    let qs = open(dir.path(), per_file).unwrap();
    for p in 0..4 {
        let q = qs.get_or_create("t", p).unwrap();
        for i in 0..3 {
            q.put(QueueOffset::new(i), unit(i * 100 + 1), 0).unwrap();
        }
        // A page boundary inside a unit: units 204 and 205 (bytes 4080..4100).
        for i in 203..206 {
            q.put(QueueOffset::new(i), unit(i * 100 + 1), 0).unwrap();
        }
        let resident = resident_pages(&q);
        assert!(
            resident <= 2,
            "{resident} pages of a 6 MB file resident after 6 units"
        );
        assert_eq!(q.get(204).unwrap(), Some(unit(20_401)));
    }
}

#[test]
fn the_end_is_found_across_empty_files_and_in_a_later_page() {
    let dir = tempfile::tempdir().unwrap();
    let per_file = 4096;
    let qs = open(dir.path(), per_file).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    // Units in the first file and far into the second one.
    for i in (0..10).chain(per_file + 3000..per_file + 3010) {
        q.put(QueueOffset::new(i), unit(i * 10 + 1), 0).unwrap();
    }
    qs.flush().unwrap();
    drop(q);
    drop(qs);
    let qs = open(dir.path(), per_file).unwrap();
    let q = qs.get("t", 0).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (0, per_file + 3010));
    assert_eq!(
        q.get(per_file + 3009).unwrap(),
        Some(unit((per_file + 3009) * 10 + 1))
    );
}

#[test]
fn recovery_truncates_at_a_torn_unit_and_asks_for_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 64).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..10 {
        q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
    }
    qs.flush().unwrap();
    drop(q);
    drop(qs);
    // Unit 8 half written: its offset but no size.
    let path = dir.path().join("cq/t/0").join(fs_util::offset_file_name(0));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8 * UNIT_LEN + 8..9 * UNIT_LEN].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let qs = open(dir.path(), 64).unwrap();
    let q = qs.get("t", 0).unwrap();
    assert_eq!(q.max_offset(), 10, "opening does not judge units");
    // Recovery starts at 850: unit 9 points past it, unit 8 is torn.
    let t = q.truncate_from_physical(850).unwrap();
    // Units 8 and 9 are gone; records after unit 7 (at 700, 100
    // bytes) are to be replayed.
    assert_eq!(
        t,
        Truncated {
            dropped: 2,
            replay_from: Some(800)
        }
    );
    assert_eq!(q.max_offset(), 8);
    // A unit whose position lost its low bytes (torn across a page
    // boundary) points before the unit ahead of it.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[7 * UNIT_LEN..7 * UNIT_LEN + 6].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let q = open(dir.path(), 64).unwrap().get("t", 0).unwrap();
    assert_eq!(q.max_offset(), 8);
    assert_eq!(
        q.truncate_from_physical(10_000).unwrap(),
        Truncated {
            dropped: 1,
            replay_from: Some(700)
        }
    );
    assert_eq!(q.get(6).unwrap(), Some(unit(600)));
    // Without a torn unit there is nothing to replay.
    assert_eq!(q.truncate_from_physical(850).unwrap(), Truncated::default());
}

#[test]
fn delete_topic_removes_its_queues_and_offsets_continue() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    for p in 0..2 {
        let q = qs.get_or_create("t", p).unwrap();
        for i in 0..6 {
            q.put(QueueOffset::new(i), unit(i * 100 + u64::from(p)), 0)
                .unwrap();
        }
    }
    qs.get_or_create("u", 0)
        .unwrap()
        .put(QueueOffset::new(0), unit(1), 0)
        .unwrap();
    let held = qs.get("t", 0).unwrap();
    // Partition 2 has records the writer numbered but nobody indexed.
    assert_eq!(qs.delete_topic("t", &[(0, 3), (2, 4)]).unwrap(), 2);
    assert!(held.is_deleted());
    assert_eq!(held.file_count(), 0);
    assert!(qs.get("t", 0).is_none());
    assert!(!dir.path().join("cq/t").exists());
    assert_eq!(qs.deleted_next_offset("t", 0), Some(6));
    assert_eq!(qs.deleted_next_offset("t", 2), Some(4));
    // A new incarnation starts where the old one ended.
    let q = qs.get_or_create("t", 0).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (6, 6));
    q.put(QueueOffset::new(6), unit(5000), 0).unwrap();
    drop(q);
    drop(held);
    drop(qs);
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get("t", 0).unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (6, 7));
    assert_eq!(q.get(5).unwrap(), None);
    assert!(qs.get("t", 1).is_none());
    assert_eq!(qs.deleted_next_offset("t", 1), Some(6));
    assert_eq!(qs.get("u", 0).unwrap().max_offset(), 1);
}

#[test]
fn a_deletion_cut_short_by_a_crash_is_finished_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let qs = open(dir.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..6 {
        q.put(QueueOffset::new(i), unit(i * 100), 0).unwrap();
    }
    qs.flush().unwrap();
    drop(q);
    drop(qs);
    // The crash came after the deleted partitions were written and
    // before the files were removed.
    let mut deleted = DeletedPartitions::default();
    deleted.raise("t", 0, 6);
    deleted.store(&dir.path().join(deleted::FILE_NAME)).unwrap();
    let qs = open(dir.path(), 4).unwrap();
    assert!(qs.get("t", 0).is_none());
    assert!(!dir.path().join("cq/t").exists());
    assert_eq!(qs.deleted_next_offset("t", 0), Some(6));
}

/// A new queue file and time file cost no sync where they are made
/// (the dispatcher's path); the flush makes them durable, each
/// directory that gained a name synced once.
#[cfg(feature = "durable-image")]
#[test]
fn new_files_are_made_with_no_sync_and_are_durable_after_the_flush() {
    time_index::TEST_INTERVAL.with(|c| c.set(Some(2)));
    let root = tempfile::tempdir().unwrap();
    let image = crate::durability::image::install(root.path()).unwrap();
    let qs = open(root.path(), 4).unwrap();
    let before = image.syncs();
    for p in 0..5 {
        let q = qs.get_or_create("t", p).unwrap();
        let mut times = Times((0..6).map(|i| (i, 1000 + i as i64)).collect());
        q.time.catch_up(&[], 0, &mut times).unwrap();
        // Two queue files and two time files (an entry per two units).
        for i in 0..6 {
            q.put(QueueOffset::new(i), unit(i * 100 + 1), 1000 + i as i64)
                .unwrap();
        }
        assert_eq!(q.time_index_entries(), 3);
    }
    assert_eq!(image.syncs() - before, 0, "syncs while 20 files were made");
    // Every directory with a new name: 5 partitions', the topic's, the root's.
    assert_eq!(qs.pending_dir_syncs(), 7);
    let before = image.syncs();
    qs.flush().unwrap();
    // Per partition: 2 queue files' units, 2 time files; then 7 directories.
    assert_eq!(image.syncs() - before, 5 * 4 + 7);
    assert_eq!(qs.pending_dir_syncs(), 0);
    let snaps = tempfile::tempdir().unwrap();
    image.snapshot(snaps.path(), None).unwrap();
    drop(image);
    let qs = open(snaps.path(), 4).unwrap();
    for p in 0..5 {
        let q = qs.get("t", p).unwrap();
        assert_eq!((q.min_offset(), q.max_offset()), (0, 6));
        assert_eq!(q.get(5).unwrap(), Some(unit(501)));
        assert_eq!(q.time_index_entries(), 3, "time files durable");
    }
    time_index::TEST_INTERVAL.with(|c| c.set(None));
}

/// A file made with no sync can have its name reach the disk before
/// its size: made just after a flush synced the queue's units, just
/// before that flush's directory sync. A power loss then leaves it
/// empty or torn short, with the queue's later new files empty beside
/// it; the queue opens on that, reading it as its tail (every unit in
/// it is past the checkpoint: recovery replays them), and keeps every
/// unit the flush made durable.
#[cfg(feature = "durable-image")]
#[test]
fn a_new_file_whose_name_is_durable_before_its_size_opens_as_the_tail() {
    let root = tempfile::tempdir().unwrap();
    let image = crate::durability::image::install(root.path()).unwrap();
    let qs = open(root.path(), 4).unwrap();
    let q = qs.get_or_create("t", 0).unwrap();
    for i in 0..4 {
        q.put(QueueOffset::new(i), unit(i * 100 + 1), 0).unwrap();
    }
    qs.flush().unwrap();
    // Two more files (units 4..8 and 8..12), not synced...
    for i in 4..10 {
        q.put(QueueOffset::new(i), unit(i * 100 + 1), 0).unwrap();
    }
    // ... but their names are: the race above.
    crate::durability::sync_dir(&root.path().join("cq/t/0")).unwrap();
    let snaps = tempfile::tempdir().unwrap();
    let mut torn_short = 0;
    for pick in 0..8u64 {
        let dest = snaps.path().join(pick.to_string());
        let tear = crate::durability::image::Tear {
            file_pick: pick,
            prefix_pick: pick * 13 + 5,
            out_of_order: pick % 2 == 1,
            spare: &[],
        };
        let torn = image.snapshot(&dest, Some(tear)).unwrap();
        assert!(torn.is_some(), "a new file is torn");
        let second = dest
            .join("cq/t/0")
            .join(fs_util::offset_file_name(4 * UNIT_LEN as u64));
        let len = std::fs::metadata(&second).unwrap().len();
        if len > 0 && len < 4 * UNIT_LEN as u64 {
            torn_short += 1;
        }
        let reopened = open(&dest, 4).unwrap_or_else(|e| panic!("{torn:?}: {e}"));
        let q = reopened.get("t", 0).unwrap();
        assert!(
            (4..=10).contains(&q.max_offset()),
            "{torn:?}: {}",
            q.max_offset()
        );
        for i in 0..4 {
            assert_eq!(q.get(i).unwrap(), Some(unit(i * 100 + 1)), "{torn:?}");
        }
    }
    assert!(torn_short > 0, "no tear left the second file short");
}
