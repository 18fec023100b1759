//! Recovery and corruption: torn tails, flipped bytes, zeroed tails, stale
//! bytes behind the end, corruption in the middle of the log.
//!
//! Each test writes through the store, stops it the way a crash would
//! (`close_uncleanly`: no final flush or checkpoint, `abort` left behind),
//! damages the files, reopens and checks exactly what is served.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::Path;
use std::time::Duration;

use common::log_capture::logged;
use common::*;
use tidelog_storage::checkpoint::Checkpoint;
use tidelog_storage::commit_log::format::Invalid;
use tidelog_storage::{
    CorruptionKind, PhysicalOffset, QueueOffset, RecoveryMode, Store, StoreConfig, StoreError,
};

/// No periodic checkpoint: recovery scans the whole log, so damage
/// anywhere in it is seen.
fn cfg(dir: &Path) -> StoreConfig {
    let mut c = small_config(dir);
    c.flush_interval_ms = 3_600_000;
    c
}

/// Bytes of the header of an entry of topic "t", before its first record.
const T_HEADER: u64 = tidelog_storage::commit_log::format::ENTRY_HEADER_LEN as u64 + 1;

/// Append `n` records `0..n` to t-0, one append (so one CommitLog entry)
/// each, and crash. Returns where each entry starts and its length.
fn write_and_crash(dir: &Path, n: usize) -> Vec<(u64, u32)> {
    let store = Store::open(cfg(dir)).unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let a = store
            .append(&[record(
                "t",
                0,
                Some(&format!("k{i}")),
                Some(&format!("value-{i}-{}", "z".repeat(i % 7 * 10))),
            )])
            .unwrap();
        out.push((
            a[0].physical_offset.get() - T_HEADER,
            a[0].size + T_HEADER as u32,
        ));
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    store.close_uncleanly();
    out
}

fn values(store: &Store) -> Vec<String> {
    store
        .read("t", 0, QueueOffset::new(0), 10_000, usize::MAX)
        .unwrap()
        .records
        .iter()
        .map(|r| String::from_utf8(r.value().unwrap().to_vec()).unwrap())
        .collect()
}

fn first_segment(dir: &Path) -> std::path::PathBuf {
    segment_files(dir).into_iter().next().unwrap()
}

/// A checkpoint that says the whole log (up to its files' end) was flushed,
/// and nothing indexed: recovery scans everything, and damage anywhere is
/// in bytes that had been made durable, so not a power loss.
fn everything_synced(dir: &Path) {
    let end = segment_files(dir)
        .iter()
        .map(|s| std::fs::metadata(s).unwrap().len())
        .sum();
    Checkpoint {
        commitlog_flushed: end,
        dispatched: 0,
        written_at_ms: 1,
    }
    .store(dir)
    .unwrap();
}

fn reopen_and_expect(dir: &Path, n: usize) -> Store {
    let store = Store::open(cfg(dir)).unwrap();
    assert!(!store.recovery_report().clean_shutdown);
    let v = values(&store);
    assert_eq!(v.len(), n, "{v:?}");
    for (i, s) in v.iter().enumerate() {
        assert!(s.starts_with(&format!("value-{i}-")), "{s}");
    }
    assert_eq!(store.offsets("t", 0), (0, n as u64));
    store
}

#[test]
fn torn_last_record_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 10);
    let (pos, size) = recs[9];
    // Zero the second half of the last record: a write torn mid-way.
    poke(
        &first_segment(dir.path()),
        pos + size as u64 / 2,
        &vec![0u8; size as usize - size as usize / 2],
    );
    let store = reopen_and_expect(dir.path(), 9);
    assert!(store.recovery_report().truncated_bytes > 0);
    // The index forgot it too, and the offset is reused by the next append.
    assert!(store
        .query_by_key("t", b"k9", 0, i64::MAX, 10)
        .unwrap()
        .is_empty());
    let a = store
        .append(&[record("t", 0, Some("k9"), Some("value-9-again"))])
        .unwrap();
    assert_eq!(a[0].queue_offset.get(), 9);
    assert_eq!(a[0].physical_offset.get(), pos + T_HEADER);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let q = store.query_by_key("t", b"k9", 0, i64::MAX, 10).unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].value().as_deref(), Some(b"value-9-again".as_slice()));
}

/// A power loss can keep a prefix of the page an entry header was being
/// written to: its length and magic, then zeros from the version byte on.
/// That is a torn tail, not a log of another format version (found by the
/// power-loss test, cleaner/tests/power_loss.rs).
#[test]
fn torn_entry_header_with_zero_version_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 10);
    zero_from_version_byte(dir.path(), recs[9]);
    let store = reopen_and_expect(dir.path(), 9);
    assert!(store.recovery_report().truncated_bytes > 0);
}

/// The same for the log's very first entry, which the format-version check
/// reads before the scan.
#[test]
fn torn_first_entry_header_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 1);
    zero_from_version_byte(dir.path(), recs[0]);
    let store = reopen_and_expect(dir.path(), 0);
    assert!(store.recovery_report().truncated_bytes > 0);
}

/// Zero an entry from its version byte (byte 10 of the header,
/// docs/formats.md) to its end.
fn zero_from_version_byte(dir: &Path, (pos, size): (u64, u32)) {
    const VERSION_AT: usize = 10;
    poke(
        &first_segment(dir),
        pos + VERSION_AT as u64,
        &vec![0u8; size as usize - VERSION_AT],
    );
}

#[test]
fn flipped_byte_in_the_tail_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 10);
    let (pos, size) = recs[9];
    let seg = first_segment(dir.path());
    let at = pos + size as u64 - 3;
    let b = peek(&seg, at, 1)[0];
    poke(&seg, at, &[b ^ 0x10]);
    reopen_and_expect(dir.path(), 9);
}

#[test]
fn a_torn_append_to_a_partition_is_dropped_whole() {
    // Three single-record appends, then one append of five records (one
    // entry). Damage to its third record's value takes all five: the
    // request was never acknowledged, and none of it may be half-served.
    let dir = tempfile::tempdir().unwrap();
    write_and_crash(dir.path(), 3);
    let store = Store::open(cfg(dir.path())).unwrap();
    let batch: Vec<_> = (3..8)
        .map(|i| record("t", 0, Some(&format!("k{i}")), Some(&format!("value-{i}-"))))
        .collect();
    let a = store.append(&batch).unwrap();
    let entry_start = a[0].physical_offset.get() - T_HEADER;
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    store.close_uncleanly();
    let seg = first_segment(dir.path());
    let at = a[2].physical_offset.get() + u64::from(a[2].size) - 1;
    let b = peek(&seg, at, 1)[0];
    poke(&seg, at, &[b ^ 0x01]);
    let store = reopen_and_expect(dir.path(), 3);
    assert_eq!(store.commit_log().committed(), entry_start);
    assert!(store.read_at(a[0].physical_offset).unwrap().is_none());
}

#[test]
fn zeroed_tail_is_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 10);
    let (pos, _) = recs[7];
    let (last, last_size) = recs[9];
    // Pages never written back: the last three records are zeros.
    poke(
        &first_segment(dir.path()),
        pos,
        &vec![0u8; (last + last_size as u64 - pos) as usize],
    );
    let store = reopen_and_expect(dir.path(), 7);
    assert_eq!(store.commit_log().committed(), pos);
}

#[test]
fn stale_bytes_of_a_longer_record_never_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 6);
    let seg = first_segment(dir.path());
    let (pos5, size5) = recs[5];
    // Make record 5 torn: its last byte is wrong.
    let b = peek(&seg, pos5 + size5 as u64 - 1, 1)[0];
    poke(&seg, pos5 + size5 as u64 - 1, &[b ^ 0xff]);
    let store = reopen_and_expect(dir.path(), 5);
    // The torn bytes were zeroed on disk, not just skipped.
    assert!(peek(&seg, pos5, size5 as usize).iter().all(|&b| b == 0));
    // A shorter record now takes the place of the longer one...
    let a = store
        .append(&[record("t", 0, None, Some("value-5-"))])
        .unwrap();
    assert_eq!(a[0].physical_offset.get(), pos5 + T_HEADER);
    assert!(a[0].size + (T_HEADER as u32) < size5);
    store.close_uncleanly();
    // ...and after another crash nothing of the old one is parsed behind it.
    reopen_and_expect(dir.path(), 6);

    // Bytes of a valid record copied to the wrong position (what a reused
    // region could hold) are not taken for a record: the stored physical
    // offset does not match.
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 4);
    let seg = first_segment(dir.path());
    let (p1, s1) = recs[1];
    let (p3, s3) = recs[3];
    let copy = peek(&seg, p1, s1 as usize);
    poke(&seg, p3 + s3 as u64, &copy);
    let store = reopen_and_expect(dir.path(), 4);
    assert!(store
        .read_at(PhysicalOffset::new(p3 + s3 as u64))
        .unwrap()
        .is_none());
    assert!(store
        .read_at(PhysicalOffset::new(p3 + s3 as u64 + T_HEADER))
        .unwrap()
        .is_none());
}

#[test]
fn corruption_in_the_middle_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 10);
    everything_synced(dir.path());
    let seg = first_segment(dir.path());
    let (pos, _) = recs[3];
    let b = peek(&seg, pos + 30, 1)[0];
    poke(&seg, pos + 30, &[b ^ 0x01]);
    match Store::open(cfg(dir.path())) {
        Err(StoreError::Corruption {
            file,
            position,
            kind,
        }) => {
            assert_eq!(file, seg);
            assert_eq!(position, pos);
            // The flipped byte fails the entry's CRC; records follow it.
            assert!(
                matches!(&kind, CorruptionKind::MiddleOfLog { found, valid_at }
                    if matches!(&**found, CorruptionKind::Entry(why) if matches!(**why, Invalid::CrcMismatch { .. }))
                        && *valid_at > pos),
                "{kind:?}"
            );
            assert!(kind.to_string().contains("middle"), "{kind}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
    // Nothing was changed by the refusal: the records after are still there.
    assert_ne!(peek(&seg, recs[9].0, 4), vec![0u8; 4]);

    // The operator can choose to cut the log there.
    let mut c = cfg(dir.path());
    c.recovery_mode = RecoveryMode::TruncateAtCorruption;
    let store = Store::open(c).unwrap();
    assert_eq!(values(&store).len(), 3);
    assert_eq!(store.offsets("t", 0), (0, 3));
}

#[test]
fn corruption_in_an_earlier_segment_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    let v = "m".repeat(2000);
    for _ in 0..100 {
        store.append(&[record("t", 0, None, Some(&v))]).unwrap();
    }
    store.close_uncleanly();
    everything_synced(dir.path());
    let segs = segment_files(dir.path());
    assert!(segs.len() >= 3);
    poke(&segs[0], 1000, b"\xde\xad\xbe\xef");
    let err = Store::open(cfg(dir.path())).err().expect("must refuse");
    assert!(
        err.to_string().contains(&segs[0].display().to_string()),
        "{err}"
    );
}

#[test]
fn an_unsynced_page_lost_before_later_ones_is_an_unsynced_tail() {
    // Past the checkpoint's flushed position (0 here: the one written at
    // open), write-back reached record 3's page after the power went and
    // later ones before: zeros, then valid entries. Nothing there was
    // flushed, so nothing there was promised: strict recovery cuts the log
    // at the zeros, and says so at error.
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 10);
    let seg = first_segment(dir.path());
    let (pos, size) = recs[3];
    poke(&seg, pos, &vec![0u8; size as usize]);
    let (store, log) = logged(|| reopen_and_expect(dir.path(), 3));
    assert!(
        log.contains("write-back of unsynced bytes out of order"),
        "{log}"
    );
    assert_eq!(peek(&seg, recs[9].0, 4), vec![0u8; 4], "dropped for good");
    drop(store);
    // Without a checkpoint nothing is known unsynced: strict refuses.
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 10);
    std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
    let seg = first_segment(dir.path());
    let (pos, size) = recs[3];
    poke(&seg, pos, &vec![0u8; size as usize]);
    let err = Store::open(cfg(dir.path())).err().expect("must refuse");
    assert!(
        matches!(&err, StoreError::Corruption { kind: CorruptionKind::MiddleOfLog { found, .. }, .. }
            if **found == CorruptionKind::Empty),
        "{err:?}"
    );
}

#[test]
fn the_next_segment_on_disk_before_the_unsynced_tail_is_an_unsynced_tail() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    let v = "m".repeat(2000);
    for _ in 0..100 {
        store.append(&[record("t", 0, None, Some(&v))]).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    store.close_uncleanly();
    let segs = segment_files(dir.path());
    assert!(segs.len() >= 3);
    // The first segment's last page never reached the disk.
    let len = std::fs::metadata(&segs[0]).unwrap().len();
    poke(&segs[0], len - 4096, &[0u8; 4096]);
    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(
        log.contains("write-back of unsynced bytes out of order"),
        "{log}"
    );
    let kept = values(&store).len();
    assert!(kept > 0 && kept < 100, "{kept}");
    assert_eq!(store.offsets("t", 0), (0, kept as u64));
    assert_eq!(segment_files(dir.path()).len(), 1);
}

#[test]
fn missing_segment_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    let v = "m".repeat(2000);
    for _ in 0..100 {
        store.append(&[record("t", 0, None, Some(&v))]).unwrap();
    }
    store.shutdown().unwrap();
    let segs = segment_files(dir.path());
    std::fs::remove_file(&segs[1]).unwrap();
    let err = Store::open(cfg(dir.path())).err().expect("must refuse");
    assert!(
        matches!(
            err,
            StoreError::Corruption {
                kind: CorruptionKind::SegmentMissing { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn garbage_in_a_trailing_segment_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    write_and_crash(dir.path(), 5);
    // A preallocated next segment with junk (no valid record) in it.
    let next = dir
        .path()
        .join("commitlog")
        .join(format!("{:020}", 64 * 1024));
    std::fs::write(&next, vec![0xabu8; 64 * 1024]).unwrap();
    // The first segment ends with zeros, not a marker, so the junk segment
    // is past the end and cannot hold acknowledged data.
    let store = reopen_and_expect(dir.path(), 5);
    assert!(!next.exists());
    drop(store);
}

#[test]
fn clean_restart_scans_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    for i in 0..100 {
        store
            .append(&[record("t", 0, None, Some(&format!("value-{i}-")))])
            .unwrap();
    }
    store.shutdown().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    let r = store.recovery_report();
    assert!(r.clean_shutdown);
    assert_eq!(r.records_scanned, 0);
    assert_eq!(r.records_replayed, 0);
    assert_eq!(values(&store).len(), 100);
}

#[test]
fn a_bad_entry_at_a_clean_end_is_a_torn_tail_and_zeroed() {
    // After a clean shutdown recovery scans nothing, and zeros at the end
    // are the end: nothing is rewritten. Any other invalid bytes there, here
    // an entry whose CRC holds but whose first record does not start where
    // it says (`Invalid::NotARecord`), are a torn tail: cut and zeroed, so
    // they can never be read back.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(cfg(dir.path())).unwrap();
    let mut entries = Vec::new();
    for i in 0..2 {
        let a = store
            .append(&[record("t", 0, None, Some(&format!("value-{i}-")))])
            .unwrap();
        entries.push((
            a[0].physical_offset.get() - T_HEADER,
            a[0].size as usize + T_HEADER as usize,
        ));
    }
    store.shutdown().unwrap();
    let seg = first_segment(dir.path());
    let (last, size) = entries[1];
    let end = last + size as u64;
    let mut forged = peek(&seg, last, size);
    forged[12..20].copy_from_slice(&end.to_le_bytes()); // its own position
    forged[T_HEADER as usize] ^= 0x02; // the first record's distance
    let crc = crc32c::crc32c(&forged[tidelog_storage::commit_log::format::CRC_START..]);
    forged[4..8].copy_from_slice(&crc.to_le_bytes());
    poke(&seg, end, &forged);

    let (store, log) = logged(|| Store::open(cfg(dir.path())).unwrap());
    assert!(store.recovery_report().clean_shutdown);
    assert!(log.contains("torn entry at the log tail"), "{log}");
    assert_eq!(peek(&seg, end, size), vec![0u8; size], "zeroed");
    assert_eq!(values(&store), ["value-0-", "value-1-"]);
}

#[test]
fn lost_index_tail_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let recs = write_and_crash(dir.path(), 20);
    // Units past the checkpoint never reached disk: zero the queue file
    // after unit 5. Recovery replays from the checkpoint (0 here).
    let qdir = dir.path().join("consumequeue/t/0");
    let qfile = std::fs::read_dir(&qdir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    poke(&qfile, 5 * 20, &vec![0u8; 15 * 20]);
    let store = reopen_and_expect(dir.path(), 20);
    assert_eq!(
        store
            .read_at(PhysicalOffset::new(recs[19].0 + T_HEADER))
            .unwrap()
            .unwrap()
            .queue_offset()
            .get(),
        19
    );
    assert!(store.recovery_report().records_replayed >= 15);
}

#[test]
fn half_created_segment_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    write_and_crash(dir.path(), 5);
    // A crash between creating a segment file and renaming it into place.
    let tmp = dir
        .path()
        .join("commitlog")
        .join(format!("{:020}.creating", 64 * 1024));
    std::fs::write(&tmp, b"").unwrap();
    let store = reopen_and_expect(dir.path(), 5);
    assert!(!tmp.exists());
    drop(store);
}
