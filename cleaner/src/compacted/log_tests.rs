//! Unit tests of `log.rs` (the CompactedLog of one partition): reading
//! from the page cache only (`read_cached`), copies visible while a flush
//! waits, deletions and rolls keeping the segment list and the files in
//! step, and `open` repairing what the last flush did not make durable.
//! They reach the log's private parts through `super::*`, so they live in
//! the module as `#[path = "log_tests.rs"] mod tests`.

use tidelog_storage::QueueOffset;

use super::*;
use crate::compacted::format::{encode_record, Fields};
use crate::compacted::segment::NEW_SUFFIX;

fn record(offset: u64) -> CompactedRecord {
    encode_record(&Fields {
        offset: QueueOffset::new(offset),
        timestamp_ms: 1,
        store_timestamp_ms: 1,
        delete_horizon_ms: 0,
        physical_offset: PhysicalOffset::new(offset * 100),
        key: Some(b"k"),
        value: Some(b"v"),
        headers_block: &[],
        header_count: 0,
        producer: None,
    })
}

fn roll_policy() -> RollPolicy {
    RollPolicy {
        segment_bytes: 1 << 20,
        segment_ms: i64::MAX,
    }
}

/// Drop a file's pages from the page cache (they are clean: the log
/// was flushed), as memory pressure would.
#[cfg(target_os = "linux")]
/// Drop `path`'s pages from the page cache, and check that they are
/// gone: `POSIX_FADV_DONTNEED` is advice, and skips a page that is
/// busy at that moment (under writeback, or being read), which a
/// loaded machine makes likely enough to fail a test now and then. So
/// it is repeated, a bounded number of times, until `mincore` finds
/// no page resident; a test that needed the eviction fails here, with
/// the reason, rather than on what it meant to check.
fn evict_from_page_cache(path: &Path) {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    if f.metadata().unwrap().len() == 0 {
        return;
    }
    // SAFETY: a read-only mapping of a file only this test writes,
    // made to ask `mincore` which of its pages are resident; it is
    // never read.
    let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
    let pages = map.len().div_ceil(page);
    let mut resident = vec![0u8; pages];
    for _ in 0..50 {
        // SAFETY: plain syscall on an fd we own.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
        // SAFETY: `map` is a live mapping of `map.len()` bytes and
        // `resident` has a byte for each of its pages.
        let rc = unsafe {
            libc::mincore(
                map.as_ptr() as *mut libc::c_void,
                map.len(),
                resident.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0);
        if resident.iter().all(|b| b & 1 == 0) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!(
        "{}: pages still in the page cache after 50 evictions",
        path.display()
    );
}

/// A read of bytes the page cache holds answers as `read` does; once
/// they are evicted, `read_cached` answers `None` or exactly what
/// `read` does (a readahead its miss started may have finished), and
/// `read` still reads them. Needs a file system with non-blocking
/// buffered reads (ext4, xfs, btrfs; tmpfs has none, and
/// `read_cached` always answers `None` there).
#[cfg(target_os = "linux")]
#[test]
fn read_cached_reads_the_page_cache_and_serves_only_the_right_records() {
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("t", 0).unwrap();
    let log = CompactedLog::open(tp, dir.path().to_path_buf()).unwrap();
    for offset in 0..50 {
        log.append(&record(offset), roll_policy(), 0).unwrap();
    }
    log.end_batch().unwrap();
    let read = log.read(10, 5, usize::MAX).unwrap();
    assert_eq!(read.len(), 5);
    let cached = log.read_cached(10, 5, usize::MAX).unwrap();
    let offsets = |rs: &[CompactedRecord]| rs.iter().map(|r| r.offset.get()).collect::<Vec<_>>();
    assert_eq!(
        cached.as_deref().map(offsets),
        Some(offsets(&read)),
        "bytes just written are in the page cache"
    );
    assert_eq!(
        log.read_cached(50, 5, usize::MAX).unwrap().map(|r| r.len()),
        Some(0),
        "at the end: nothing, without waiting"
    );

    log.flush().unwrap();
    // Evicted, the bytes need the disk. `RWF_NOWAIT` never waits for
    // it, but the miss may start readahead, and that can finish before
    // the kernel looks at the page again: on a fast disk, or when the
    // host descheduled this vCPU meanwhile (CI saw it five times in
    // five on a loaded host). Either answer is correct, so neither is
    // required here (the refusal's meaning is checked on every
    // answer the kernel gives, in `segment.rs`); what is required is
    // that a served read is exactly the records `read` gives.
    for seg in log.segments() {
        evict_from_page_cache(&seg.path());
    }
    if let Some(rs) = log.read_cached(10, 5, usize::MAX).unwrap() {
        assert_eq!(offsets(&rs), offsets(&read));
    }
    for seg in log.segments() {
        evict_from_page_cache(&seg.path());
    }
    assert_eq!(
        offsets(&log.read(10, 5, usize::MAX).unwrap()),
        offsets(&read)
    );
    // The blocking read brought them back.
    assert!(log.read_cached(10, 5, usize::MAX).unwrap().is_some());
}

/// The fsync of a flush (the store's checkpoint) does not hold the
/// append lock: while it waits for the disk, the dispatcher writes and
/// publishes the log's next copies. It held the lock before, and a
/// record produced during a checkpoint became visible only after the
/// fsync (issue 17 §2).
#[cfg(feature = "failpoints")]
#[test]
fn copies_are_written_and_visible_while_a_flush_waits_for_the_disk() {
    use crate::fault::Faults;
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("t", 0).unwrap();
    let faults = Arc::new(Faults::default());
    let log = Arc::new(
        CompactedLog::open(tp, dir.path().to_path_buf())
            .unwrap()
            .with_faults(FaultHandle::new(Arc::clone(&faults))),
    );
    log.append(&record(0), roll_policy(), 0).unwrap();
    faults.hang(FaultPoint::SyncCopies);
    let flushing = std::thread::spawn({
        let log = Arc::clone(&log);
        move || log.flush()
    });
    while faults.blocked(FaultPoint::SyncCopies) == 0 {
        assert!(!flushing.is_finished(), "the flush ended before its fsync");
        std::thread::yield_now();
    }
    let free = log.append_lock.try_lock().is_ok();
    if free {
        // The dispatcher's next round, on this thread: it cannot wait.
        log.append(&record(1), roll_policy(), 0).unwrap();
        log.end_batch().unwrap();
    }
    let visible = log.next_offset();
    let read = log.read(0, 10, usize::MAX).unwrap().len();
    faults.heal();
    flushing.join().unwrap().unwrap();
    assert!(free, "the flush held the append lock through its fsync");
    assert_eq!(
        (visible, read),
        (2, 2),
        "the second copy, written during the fsync"
    );
}

/// A failed deletion leaves that segment listed and every younger one
/// untouched (they were dropped from the list before, and came back
/// from disk at the next start).
#[test]
fn a_failed_deletion_keeps_the_list_and_the_files_in_step() {
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("t", 0).unwrap();
    let log = CompactedLog::open(tp, dir.path().to_path_buf()).unwrap();
    let roll = RollPolicy {
        segment_bytes: 1 << 20,
        segment_ms: i64::MAX,
    };
    for offset in 0..4 {
        log.append(&record(offset), roll, 0).unwrap();
        log.end_batch().unwrap();
        log.roll(0).unwrap();
    }
    let before: Vec<PathBuf> = log.segments().iter().map(|s| s.path()).collect();
    assert!(before.len() >= 4, "{before:?}");
    // The second oldest cannot be deleted: a directory stands at its
    // path (remove_file refuses a directory, also as root).
    std::fs::remove_file(&before[1]).unwrap();
    std::fs::create_dir(&before[1]).unwrap();
    assert!(log.delete_oldest(3).is_err());
    let after: Vec<PathBuf> = log.segments().iter().map(|s| s.path()).collect();
    assert_eq!(after, before[1..], "only the oldest is gone");
    assert!(!before[0].exists());
    assert!(before[2..].iter().all(|p| p.exists()));
    // Once it can be deleted, retention goes on from there.
    std::fs::remove_dir(&before[1]).unwrap();
    std::fs::write(&before[1], b"").unwrap();
    assert_eq!(log.delete_oldest(1).unwrap().0, 1);
    assert_eq!(log.segments().len(), before.len() - 2);
}

fn offsets(log: &CompactedLog) -> Vec<u64> {
    log.read(0, usize::MAX, usize::MAX)
        .unwrap()
        .iter()
        .map(|r| r.offset.get())
        .collect()
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A roll syncs nothing: the sealed segment waits for the next flush,
/// and the new one is named `.new` until that flush has synced it.
#[test]
fn a_roll_leaves_the_sealed_segment_to_the_next_flush() {
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("t", 0).unwrap();
    let log = CompactedLog::open(tp, dir.path().to_path_buf()).unwrap();
    log.append(&record(0), roll_policy(), 0).unwrap();
    log.roll(0).unwrap();
    log.append(&record(1), roll_policy(), 0).unwrap();
    log.end_batch().unwrap();
    let segments = log.segments();
    assert!(
        !segments[0].is_synced(),
        "the roll synced the sealed segment"
    );
    assert!(segments[1].is_new());
    assert_eq!(log.first_new_base(), Some(1));
    assert_eq!(
        file_names(dir.path()),
        [segment_file_name(0), new_segment_file_name(1)]
    );
    log.flush().unwrap();
    assert!(segments.iter().all(|s| s.is_synced() && !s.is_new()));
    assert_eq!(log.first_new_base(), None);
    assert_eq!(
        file_names(dir.path()),
        [segment_file_name(0), segment_file_name(1)]
    );
    assert_eq!(offsets(&log), [0, 1]);
}

/// At open, a `.new` segment and every newer one hold copies made
/// since the last checkpoint: they go (recovery copies them again),
/// and the segment before them, which a power loss may have left
/// torn, has its tail repaired as the newest.
#[test]
fn open_drops_the_segments_made_since_the_last_flush_and_repairs_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("t", 0).unwrap();
    let log = CompactedLog::open(tp.clone(), dir.path().to_path_buf()).unwrap();
    for offset in 0..8 {
        log.append(&record(offset), roll_policy(), 0).unwrap();
        if offset % 2 == 1 {
            log.roll(0).unwrap();
        }
        if offset == 3 {
            log.flush().unwrap();
        }
    }
    log.end_batch().unwrap();
    // [0, 1], [2, 3] and [4, 5] renamed by the flush (the roll after
    // offset 3 came before it); [6, 7] and the empty active one are
    // still `.new`.
    let names = file_names(dir.path());
    assert_eq!(
        names.iter().filter(|n| n.ends_with(NEW_SUFFIX)).count(),
        2,
        "{names:?}"
    );
    let sealed = log.segments()[2].path();
    drop(log);
    // Power loss: the segment sealed before the `.new` ones lost its
    // last record to zeros, and one newer segment has a `.log` name
    // (renames reach the disk in any order).
    let len = std::fs::metadata(&sealed).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&sealed)
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &vec![0; (len / 2) as usize], len - len / 2)
        .unwrap();
    std::fs::rename(
        dir.path().join(new_segment_file_name(8)),
        dir.path().join(segment_file_name(8)),
    )
    .unwrap();
    let log = CompactedLog::open(tp, dir.path().to_path_buf()).unwrap();
    assert_eq!(offsets(&log), [0, 1, 2, 3, 4]);
    assert_eq!(log.next_offset(), 5);
    assert_eq!(
        file_names(dir.path()),
        [
            segment_file_name(0),
            segment_file_name(2),
            segment_file_name(4)
        ]
    );
    // The replay appends the lost records to the repaired segment.
    for offset in 5..9 {
        log.append(&record(offset), roll_policy(), 0).unwrap();
    }
    log.end_batch().unwrap();
    assert_eq!(offsets(&log), (0..9).collect::<Vec<_>>());
}
