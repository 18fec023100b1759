//! Store behaviour through its public API: append, read by queue offset,
//! read by physical offset, query by key, segment rolls, flush modes,
//! locking, failures.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use tidelog_storage::fault::{FaultPoint, Faults};
use tidelog_storage::fs_util;
use tidelog_storage::{
    AppendRecord, CorruptionKind, FlushMode, Listener, PhysicalOffset, QueueOffset, RecordProblem,
    Store, StoreError,
};

/// A null header value is stored null, apart from an empty one, and comes
/// back so after a crash: recovery's full check of the entry (version 3)
/// accepts it.
#[test]
fn a_null_header_value_reads_back_null_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let headers = vec![
        tidelog_storage::Header {
            name: "h".into(),
            value: Some(bytes::Bytes::from_static(b"x")),
        },
        tidelog_storage::Header {
            name: "h".into(),
            value: None,
        },
        tidelog_storage::Header {
            name: "h".into(),
            value: Some(bytes::Bytes::new()),
        },
    ];
    let store = Store::open(small_config(dir.path())).unwrap();
    let mut r = record("orders", 0, Some("k"), Some("v"));
    r.headers = headers.clone();
    store.append(&[r]).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    store.close_uncleanly();
    let store = Store::open(small_config(dir.path())).unwrap();
    let got = store
        .read("orders", 0, QueueOffset::new(0), 10, 1 << 20)
        .unwrap();
    assert_eq!(got.records.len(), 1);
    assert_eq!(got.records[0].headers(), headers);
}

#[test]
fn append_then_read_back_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    let mut r = with_headers(
        record("orders", 2, Some("k"), Some("v1")),
        &[("h", b"x"), ("h", b"")],
    );
    r.timestamp_ms = Some(1234);
    let out = store
        .append(&[
            r,
            record("orders", 2, None, Some("v2")),
            record("orders", 2, Some("k"), None),
        ])
        .unwrap();
    assert_eq!(
        out.iter().map(|a| a.queue_offset.get()).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(store.offsets("orders", 2), (0, 3));
    let got = store
        .read("orders", 2, QueueOffset::new(0), 100, 1 << 20)
        .unwrap();
    assert_eq!(got.next_offset.get(), 3);
    let recs = got.records;
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[0].topic(), "orders");
    assert_eq!(recs[0].partition(), 2);
    assert_eq!(recs[0].key().as_deref(), Some(b"k".as_slice()));
    assert_eq!(recs[0].value().as_deref(), Some(b"v1".as_slice()));
    assert_eq!(recs[0].timestamp_ms(), 1234);
    let h = recs[0].headers();
    assert_eq!(h.len(), 2);
    assert_eq!(
        (h[0].name.as_str(), h[0].value.as_deref().unwrap()),
        ("h", b"x".as_slice())
    );
    assert_eq!(
        (h[1].name.as_str(), h[1].value.as_deref().unwrap()),
        ("h", b"".as_slice())
    );
    assert_eq!(recs[1].key(), None);
    assert!(recs[2].is_tombstone());
    assert_eq!(recs[2].value(), None);
    // Read by physical offset: exact starts only.
    let p = out[1].physical_offset.get();
    assert_eq!(
        store
            .read_at(PhysicalOffset::new(p))
            .unwrap()
            .unwrap()
            .queue_offset()
            .get(),
        1
    );
    assert!(store.read_at(PhysicalOffset::new(p + 1)).unwrap().is_none());
    assert!(store
        .read_at(PhysicalOffset::new(u64::MAX))
        .unwrap()
        .is_none());
    store.shutdown().unwrap();
}

#[test]
fn one_append_is_one_entry_per_partition_and_every_record_keeps_its_address() {
    use tidelog_storage::commit_log::Next;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    // Partitions interleaved in the request: each partition's records keep
    // their order and offsets; the answer is in request order.
    let batch = [
        record("t", 1, None, Some("a")),
        record("t", 0, None, Some("b")),
        record("t", 1, Some("k"), Some("c")),
        record("t", 0, None, None),
        record("u", 0, None, Some("e")),
    ];
    let out = store.append(&batch).unwrap();
    let offsets: Vec<u64> = out.iter().map(|a| a.queue_offset.get()).collect();
    assert_eq!(offsets, vec![0, 0, 1, 1, 0]);
    // Three entries: t-0, t-1, u-0, each holding its partition's records.
    let log = store.commit_log();
    let mut pos = log.min_offset();
    let mut entries = Vec::new();
    while let Next::Entry(e) = log.read_next(pos, true).unwrap() {
        let recs: Vec<_> = e.records().map(Result::unwrap).collect();
        entries.push(
            recs.iter()
                .map(|r| (r.topic().to_owned(), r.partition(), r.queue_offset().get()))
                .collect::<Vec<_>>(),
        );
        pos += e.size();
    }
    assert_eq!(pos, log.committed());
    assert_eq!(
        entries,
        vec![
            vec![("t".into(), 0, 0), ("t".into(), 0, 1)],
            vec![("t".into(), 1, 0), ("t".into(), 1, 1)],
            vec![("u".into(), 0, 0)],
        ]
    );
    // Every record answers at its own physical offset, and nothing else
    // in the log does.
    for (a, r) in out.iter().zip(&batch) {
        let got = store.read_at(a.physical_offset).unwrap().unwrap();
        assert_eq!(got.value(), r.value);
        assert_eq!(got.size(), a.size);
    }
    let starts: Vec<u64> = out.iter().map(|a| a.physical_offset.get()).collect();
    for p in log.min_offset()..log.committed() + 2 {
        assert_eq!(
            store.read_at(PhysicalOffset::new(p)).unwrap().is_some(),
            starts.contains(&p),
            "position {p}"
        );
    }
    store.shutdown().unwrap();
}

#[test]
fn an_append_larger_than_a_segment_splits_into_entries_across_segments() {
    use tidelog_storage::commit_log::Next;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config_with_segments(dir.path(), 4096)).unwrap();
    let value = "v".repeat(300);
    // ~12 KiB for one partition: no entry can hold it in a 4 KiB segment.
    let batch: Vec<_> = (0..40)
        .map(|_| record("t", 0, None, Some(&value)))
        .collect();
    let out = store.append(&batch).unwrap();
    assert_eq!(
        out.iter().map(|a| a.queue_offset.get()).collect::<Vec<_>>(),
        (0..40).collect::<Vec<_>>()
    );
    assert!(store.stats().commitlog_segments >= 3);
    let log = store.commit_log();
    let (mut pos, mut entries, mut seen) = (log.min_offset(), 0, 0u64);
    loop {
        match log.read_next(pos, true).unwrap() {
            Next::Entry(e) => {
                assert!(e.size() <= 4096 - 20);
                for r in e.records() {
                    assert_eq!(r.unwrap().queue_offset().get(), seen);
                    seen += 1;
                }
                entries += 1;
                pos += e.size();
            }
            Next::Skip(next) => pos = next,
            Next::End => break,
        }
    }
    assert_eq!(seen, 40);
    assert!(entries >= 3, "{entries} entries");
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let got = store
        .read("t", 0, QueueOffset::new(0), 100, usize::MAX)
        .unwrap()
        .records;
    assert_eq!(got.len(), 40);
    for (a, r) in out.iter().zip(&got) {
        assert_eq!(a.physical_offset, r.physical_offset());
    }
    store.shutdown().unwrap();
}

#[test]
fn a_value_that_looks_like_a_record_is_not_one() {
    use tidelog_storage::commit_log::format;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    // The log starts at 0 and the entry header of topic "t" takes 47 bytes;
    // a 200-byte keyless value starts 7 bytes into its record (distance,
    // flags, offset delta, timestamp delta, two-byte length, header
    // count), at 54. Put a well-formed record there that says so.
    let mut value = vec![0u8; 200];
    value[..7].copy_from_slice(&[54, 0b10, 0, 0, 1, 0, b'x']);
    let r = AppendRecord {
        value: Some(bytes::Bytes::from(value)),
        ..record("t", 0, None, None)
    };
    let a = store.append(&[r]).unwrap()[0];
    assert_eq!(a.physical_offset.get(), 47);
    // Decoded on its own, the forged record passes...
    let log = store.commit_log();
    let tidelog_storage::commit_log::Next::Entry(entry) = log.read_next(0, true).unwrap() else {
        panic!("an entry at 0");
    };
    let forged = entry.record_at(54).unwrap();
    assert_eq!(forged.value().as_deref(), Some(b"x".as_slice()));
    assert_eq!(format::ENTRY_HEADER_LEN + 1, 47);
    // ...but a client's physical offset is checked by walking the entry.
    assert!(store.read_at(PhysicalOffset::new(54)).unwrap().is_none());
    assert_eq!(
        store
            .read_at(PhysicalOffset::new(47))
            .unwrap()
            .unwrap()
            .size(),
        a.size
    );
    store.shutdown().unwrap();
}

#[test]
fn a_log_of_another_format_version_is_refused_not_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    store.append(&[record("t", 0, None, Some("v"))]).unwrap();
    store.shutdown().unwrap();
    let seg = dir.path().join("commitlog").join("00000000000000000000");
    let mut bytes = std::fs::read(&seg).unwrap();
    let len = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    // Version 2 is read (the data dirs written before version 3), also by
    // a full scan.
    let mut v2 = bytes.clone();
    v2[10] = 2;
    let crc = crc32c::crc32c(&v2[8..len]);
    v2[4..8].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&seg, &v2).unwrap();
    std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert_eq!(store.recovery_report().records_scanned, 1);
    let got = store
        .read("t", 0, tidelog_storage::QueueOffset::new(0), 1, usize::MAX)
        .unwrap();
    assert_eq!(got.records[0].value().as_deref(), Some(&b"v"[..]));
    store.shutdown().unwrap();
    bytes[10] = 1; // the version byte of the first entry
    std::fs::write(&seg, &bytes).unwrap();
    for _ in 0..2 {
        let err = Store::open(small_config(dir.path()))
            .err()
            .expect("refused");
        assert!(
            matches!(
                err,
                StoreError::Corruption {
                    kind: CorruptionKind::LogFormatVersion { version: 1 },
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("format version 1"), "{err}");
        // Nothing was cut.
        let now = std::fs::read(&seg).unwrap();
        assert_eq!(&now[..len], &bytes[..len]);
    }
}

/// A version this build does not know (5: a newer build's) anywhere the
/// recovery scan reads is refused with its version named, and nothing is
/// truncated: an older build treats a version-3 or -4 entry the same way.
#[test]
fn an_unknown_version_in_the_scan_is_refused_not_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    store.append(&[record("t", 0, None, Some("v"))]).unwrap();
    store.append(&[record("t", 0, None, Some("w"))]).unwrap();
    store.shutdown().unwrap();
    let seg = dir.path().join("commitlog").join("00000000000000000000");
    let mut bytes = std::fs::read(&seg).unwrap();
    let first = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    let second = u32::from_le_bytes(bytes[first..first + 4].try_into().unwrap()) as usize;
    bytes[first + 10] = 5; // the second entry's version byte
    std::fs::write(&seg, &bytes).unwrap();
    // Without a checkpoint the scan reads the whole log.
    std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
    let err = Store::open(small_config(dir.path()))
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            StoreError::Corruption {
                kind: CorruptionKind::LogFormatVersion { version: 5 },
                ..
            }
        ),
        "{err:?}"
    );
    let now = std::fs::read(&seg).unwrap();
    assert_eq!(&now[..first + second], &bytes[..first + second]);
}

#[test]
fn offsets_are_per_partition_and_continue_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    for i in 0..5 {
        store
            .append(&[
                record("a", 0, None, Some("x")),
                record("a", 1, None, Some("y")),
                record("b", 0, None, Some(&i.to_string())),
            ])
            .unwrap();
    }
    store.shutdown().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    assert!(store.recovery_report().clean_shutdown);
    let out = store
        .append(&[
            record("a", 1, None, Some("z")),
            record("c", 0, None, Some("new")),
        ])
        .unwrap();
    assert_eq!(out[0].queue_offset.get(), 5);
    assert_eq!(out[1].queue_offset.get(), 0);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(store.offsets("b", 0), (0, 5));
    assert_eq!(store.offsets("a", 1), (0, 6));
    assert_eq!(store.offsets("nope", 0), (0, 0));
}

#[test]
fn many_small_segments_and_reads_across_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with_segments(dir.path(), 4096);
    let store = Store::open(cfg.clone()).unwrap();
    let value = "v".repeat(300);
    for i in 0..200 {
        store
            .append(&[record(
                "t",
                0,
                Some(&format!("k{i}")),
                Some(&format!("{i}:{value}")),
            )])
            .unwrap();
    }
    // Batches that straddle segment ends.
    let batch: Vec<_> = (200..260)
        .map(|i| record("t", 0, None, Some(&format!("{i}:{value}"))))
        .collect();
    store.append(&batch).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert!(store.stats().commitlog_segments > 20, "{:?}", store.stats());
    let recs = store
        .read("t", 0, QueueOffset::new(0), 1000, usize::MAX)
        .unwrap()
        .records;
    assert_eq!(recs.len(), 260);
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r.queue_offset().get(), i as u64);
        assert!(r.value().unwrap().starts_with(format!("{i}:").as_bytes()));
    }
    // max_bytes bounds a read, but never below one record.
    let one = store.read("t", 0, QueueOffset::new(10), 1000, 1).unwrap();
    assert_eq!(one.records.len(), 1);
    assert_eq!(one.next_offset.get(), 11);
    let some = store
        .read("t", 0, QueueOffset::new(10), 1000, 3 * 400)
        .unwrap();
    assert_eq!(some.records.len(), 3);
    store.shutdown().unwrap();
    // And the same after reopening.
    let store = Store::open(cfg).unwrap();
    let recs = store
        .read("t", 0, QueueOffset::new(250), 1000, usize::MAX)
        .unwrap()
        .records;
    assert_eq!(recs.len(), 10);
    assert_eq!(recs[9].queue_offset().get(), 259);
}

#[test]
fn reads_walk_entries_from_any_offset_and_stop_where_asked() {
    // Appends of 1..=7 records to each of two partitions, interleaved, so
    // every entry of t-0 lies between entries of t-1: a read walks each
    // entry it meets and goes back to the ConsumeQueue for the next one.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    let mut expected: Vec<String> = Vec::new();
    for round in 0..12usize {
        let n = round % 7 + 1;
        let values: Vec<String> = (0..n)
            .map(|i| format!("{}:{}", expected.len() + i, "v".repeat(round * 3)))
            .collect();
        let batch: Vec<_> = values
            .iter()
            .flat_map(|v| {
                [
                    record("t", 0, None, Some(v)),
                    record("t", 1, None, Some("other")),
                ]
            })
            .collect();
        store.append(&batch).unwrap();
        expected.extend(values);
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let total = expected.len() as u64;
    let sizes: Vec<usize> = store
        .read("t", 0, QueueOffset::new(0), 1000, usize::MAX)
        .unwrap()
        .records
        .iter()
        .map(|r| r.size() as usize)
        .collect();
    assert_eq!(sizes.len() as u64, total);
    for from in 0..=total {
        for max_records in [1usize, 2, 3, 5, 8, 1000] {
            for max_bytes in [1usize, 40, 150, usize::MAX] {
                let got = store
                    .read("t", 0, QueueOffset::new(from), max_records, max_bytes)
                    .unwrap();
                // What the contract says: records from `from` on, as many as
                // max_records allows and max_bytes holds, at least one.
                let mut want = 0usize;
                let mut bytes = 0usize;
                for &size in &sizes[from as usize..] {
                    if want == max_records || (want > 0 && bytes + size > max_bytes) {
                        break;
                    }
                    bytes += size;
                    want += 1;
                }
                let case = format!("from {from}, max_records {max_records}, max_bytes {max_bytes}");
                assert_eq!(got.records.len(), want, "{case}");
                assert_eq!(got.next_offset.get(), from + want as u64, "{case}");
                for (i, r) in got.records.iter().enumerate() {
                    let offset = from as usize + i;
                    assert_eq!(r.queue_offset().get(), offset as u64, "{case}");
                    assert_eq!(
                        r.value().as_deref(),
                        Some(expected[offset].as_bytes()),
                        "{case}"
                    );
                }
            }
        }
    }
    store.shutdown().unwrap();
}

#[test]
fn a_read_inside_an_entry_checks_each_record_it_walks_to() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    let batch: Vec<_> = (0..4)
        .map(|i| record("t", 0, None, Some(&format!("value {i}"))))
        .collect();
    let out = store.append(&batch).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let intact = store
        .read("t", 0, QueueOffset::new(0), 100, usize::MAX)
        .unwrap();
    assert_eq!(intact.next_offset.get(), 4);
    // The third record's offset delta (after its one-byte distance and its
    // flags) says 0: decoded alone it is well-formed, but it claims the
    // first record's offset. A read that walks to it from the first record
    // must refuse it, not serve it as offset 2.
    let third = out[2].physical_offset.get();
    let file = &segment_files(dir.path())[0];
    assert_eq!(peek(file, third + 2, 1), vec![2]);
    poke(file, third + 2, &[0]);
    for from in [0, 1] {
        let err = store
            .read("t", 0, QueueOffset::new(from), 100, usize::MAX)
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Corruption { .. }),
            "from {from}: {err}"
        );
    }
    // Up to the bad record, reads still answer.
    let first_two = store
        .read("t", 0, QueueOffset::new(0), 2, usize::MAX)
        .unwrap();
    assert_eq!(first_two.records.len(), 2);
    assert_eq!(first_two.next_offset.get(), 2);
    store.shutdown().unwrap();
}

#[test]
fn record_limits() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(dir.path());
    cfg.max_message_bytes = 1000;
    let store = Store::open(cfg).unwrap();
    let big = "x".repeat(1001);
    let err = store
        .append(&[
            record("t", 0, None, Some("ok")),
            record("t", 0, None, Some(&big)),
        ])
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::RecordRefused {
                index: 1,
                problem: RecordProblem::TooLarge {
                    size: 1001,
                    limit: 1000
                }
            }
        ),
        "{err}"
    );
    // Nothing of the rejected batch was written.
    assert_eq!(store.commit_log().committed(), 0);
    let err = store
        .append(&[record("../etc", 0, None, Some("x"))])
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput { .. }), "{err}");
    let ok = "y".repeat(1000);
    store.append(&[record("t", 0, None, Some(&ok))]).unwrap();
    // A caller's lower limit (a topic's max.message.bytes) applies to that
    // batch, by the same check; a higher one does not raise the store's.
    let err = store
        .append_within(&[record("t", 0, None, Some("abc"))], 2)
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::RecordRefused {
                index: 0,
                problem: RecordProblem::TooLarge { size: 3, limit: 2 }
            }
        ),
        "{err}"
    );
    store
        .append_within(&[record("t", 0, None, Some("ab"))], 2)
        .unwrap();
    let err = store
        .append_within(&[record("t", 0, None, Some(&big))], u64::MAX)
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::RecordRefused {
                problem: RecordProblem::TooLarge { limit: 1000, .. },
                ..
            }
        ),
        "{err}"
    );
    // The header bounds name the record and the header.
    let mut many = record("t", 0, None, Some("x"));
    many.headers = vec![
        tidelog_storage::Header {
            name: "h".into(),
            value: Default::default(),
        };
        tidelog_storage::commit_log::format::HEADER_COUNT_MAX + 1
    ];
    let mut long_name = record("t", 0, None, Some("x"));
    long_name.headers = vec![
        tidelog_storage::Header {
            name: "fine".into(),
            value: Default::default(),
        },
        tidelog_storage::Header {
            name: "n".repeat(tidelog_storage::commit_log::format::HEADER_NAME_MAX + 1),
            value: Default::default(),
        },
    ];
    let before = store.commit_log().committed();
    let err = store.append(&[ok_record(), many]).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::RecordRefused {
                index: 1,
                problem: RecordProblem::TooManyHeaders { .. }
            }
        ),
        "{err}"
    );
    let err = store.append(&[long_name]).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::RecordRefused {
                index: 0,
                problem: RecordProblem::HeaderNameTooLong { header: 1, .. }
            }
        ),
        "{err}"
    );
    assert_eq!(store.commit_log().committed(), before, "nothing written");
}

fn ok_record() -> AppendRecord {
    record("t", 0, None, Some("ok"))
}

#[test]
fn query_by_key_confirms_exact_keys_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(small_config(dir.path())).unwrap();
    for i in 0..50 {
        store
            .append(&[record(
                "t",
                (i % 3) as u32,
                Some(&format!("user-{}", i % 5)),
                Some(&i.to_string()),
            )])
            .unwrap();
    }
    store
        .append(&[record("other", 0, Some("user-1"), Some("elsewhere"))])
        .unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let got = store
        .query_by_key("t", b"user-1", 0, i64::MAX, 100)
        .unwrap();
    let values: Vec<String> = got
        .iter()
        .map(|r| String::from_utf8(r.value().unwrap().to_vec()).unwrap())
        .collect();
    let expected: Vec<String> = (0..50)
        .rev()
        .filter(|i| i % 5 == 1)
        .map(|i| i.to_string())
        .collect();
    assert_eq!(values, expected);
    assert_eq!(
        store
            .query_by_key("t", b"user-1", 0, i64::MAX, 2)
            .unwrap()
            .len(),
        2
    );
    assert!(store
        .query_by_key("t", b"user-9", 0, i64::MAX, 10)
        .unwrap()
        .is_empty());
    // A time window entirely in the past finds nothing.
    assert!(store
        .query_by_key("t", b"user-1", 0, 1000, 10)
        .unwrap()
        .is_empty());
    assert!(store.query_by_key("../x", b"k", 0, i64::MAX, 10).is_err());
}

#[test]
fn second_open_of_the_same_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _store = Store::open(small_config(dir.path())).unwrap();
    match Store::open(small_config(dir.path())) {
        Err(StoreError::Locked { .. }) => {}
        other => panic!("expected Locked, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn sync_flush_group_commit_from_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(dir.path());
    cfg.flush = FlushMode::Sync;
    let store = Arc::new(Store::open(cfg.clone()).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..50 {
                    let a = store
                        .append(&[record("t", t, None, Some(&format!("{t}-{i}")))])
                        .unwrap();
                    // Acknowledged means flushed.
                    assert!(store.commit_log().flushed() > a[0].physical_offset.get());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let store = Arc::try_unwrap(store).ok().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    for t in 0..8 {
        assert_eq!(store.offsets("t", t), (0, 50));
    }
    store.close_uncleanly();
    let store = Store::open(cfg).unwrap();
    assert!(!store.recovery_report().clean_shutdown);
    for t in 0..8 {
        assert_eq!(store.offsets("t", t), (0, 50));
    }
}

#[test]
fn failed_fsync_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let mut cfg = small_config(dir.path());
    cfg.flush = FlushMode::Sync;
    let store = Store::open_with_faults(cfg.clone(), Arc::clone(&faults)).unwrap();
    store
        .append(&[record("t", 0, None, Some("durable"))])
        .unwrap();
    faults.fail_after(FaultPoint::CommitLogFlush, 0);
    let err = store
        .append(&[record("t", 0, None, Some("not acknowledged"))])
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Io { .. } | StoreError::Poisoned { .. }),
        "{err}"
    );
    // Even with the disk healthy again, appends stay refused until restart.
    faults.heal(FaultPoint::CommitLogFlush);
    let err = store
        .append(&[record("t", 0, None, Some("later"))])
        .unwrap_err();
    assert!(matches!(err, StoreError::Poisoned { .. }), "{err}");
    // Reads still work, and serve only what a flush covered: after a
    // failed fsync nobody knows whether the record reached the disk, so
    // it is never served (a power loss may yet take it).
    let durable = vec![(0, "durable".to_string())];
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while served(&store, "t", 0).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(served(&store, "t", 0), durable);
    assert!(
        !store.wait_dispatched(Duration::from_millis(300)),
        "the record whose fsync failed was dispatched"
    );
    assert_eq!(served(&store, "t", 0), durable);
    store.close_uncleanly();
    let store = Store::open_with_faults(cfg, Arc::clone(&faults)).unwrap();
    store
        .append(&[record("t", 0, None, Some("after restart"))])
        .unwrap();
}

#[test]
fn failed_write_poisons_the_log_and_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let cfg = small_config(dir.path());
    let store = Store::open_with_faults(cfg.clone(), Arc::clone(&faults)).unwrap();
    store.append(&[record("t", 0, None, Some("kept"))]).unwrap();
    let committed = store.commit_log().committed();
    faults.fail_after(FaultPoint::CommitLogWrite, 0);
    let err = store
        .append(&[record("t", 0, None, Some("lost"))])
        .unwrap_err();
    assert!(matches!(err, StoreError::Poisoned { .. }), "{err}");
    assert_eq!(
        store.commit_log().committed(),
        committed,
        "nothing published"
    );
    faults.heal(FaultPoint::CommitLogWrite);
    assert!(matches!(
        store
            .append(&[record("t", 0, None, Some("x"))])
            .unwrap_err(),
        StoreError::Poisoned { .. }
    ));
    store.close_uncleanly();
    // After a restart the failed batch is not there and appends work.
    let store = Store::open_with_faults(cfg, Arc::clone(&faults)).unwrap();
    assert_eq!(store.offsets("t", 0), (0, 1));
    let a = store
        .append(&[record("t", 0, None, Some("after"))])
        .unwrap();
    assert_eq!(a[0].queue_offset.get(), 1);
}

/// A failed write must leave every partition's next queue offset as it
/// was: the broker reads them for topic changes, and a topic deletion keeps
/// them durably, so an offset counted for a record that was never written
/// would outlive the restart as a gap in the partition.
#[test]
fn failed_write_leaves_the_next_offsets_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let cfg = small_config(dir.path());
    let store = Store::open_with_faults(cfg.clone(), Arc::clone(&faults)).unwrap();
    let kept = store
        .append(&[
            record("t", 0, None, Some("kept")),
            record("gone", 0, None, Some("kept")),
        ])
        .unwrap();
    assert_eq!(
        kept.iter()
            .map(|a| a.queue_offset.get())
            .collect::<Vec<_>>(),
        vec![0, 0]
    );
    faults.fail_after(FaultPoint::CommitLogWrite, 0);
    let err = store
        .append(&[
            record("t", 0, None, Some("lost")),
            record("t", 0, None, Some("lost")),
            record("t", 1, None, Some("lost")),
            record("gone", 0, None, Some("lost")),
        ])
        .unwrap_err();
    assert!(matches!(err, StoreError::Poisoned { .. }), "{err}");
    faults.heal(FaultPoint::CommitLogWrite);
    let next = |topic: &str, partition: u32| {
        let tp = tidelog_storage::TopicPartition::new(topic, partition).unwrap();
        store.commit_log().next_queue_offset(&tp)
    };
    assert_eq!(
        (next("t", 0), next("t", 1), next("gone", 0)),
        (1, 0, 1),
        "the failed append moved the next offsets"
    );
    // Deleting a topic now keeps its next offsets through the restart.
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    store.delete_topic("gone").unwrap();
    store.close_uncleanly();

    let store = Store::open(cfg).unwrap();
    assert_eq!(store.offsets("gone", 0), (1, 1), "a gap after the deletion");
    let tp = tidelog_storage::TopicPartition::new("gone", 0).unwrap();
    assert_eq!(store.commit_log().open_partition(&tp), 1);
    let after = store
        .append(&[
            record("t", 0, None, Some("after")),
            record("t", 1, None, Some("after")),
            record("gone", 0, None, Some("after")),
        ])
        .unwrap();
    assert_eq!(
        after
            .iter()
            .map(|a| a.queue_offset.get())
            .collect::<Vec<_>>(),
        vec![1, 0, 1],
        "offsets continue with no gap"
    );
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let values = |topic: &str, partition: u32| {
        let got = store
            .read(topic, partition, QueueOffset::new(0), 100, 1 << 20)
            .unwrap();
        got.records
            .iter()
            .map(|r| (r.queue_offset().get(), r.value().unwrap()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        values("t", 0),
        vec![(0, "kept".into()), (1, "after".into())],
        "every acknowledged record, nothing of the failed append"
    );
    assert_eq!(values("t", 1), vec![(0, "after".into())]);
    assert_eq!(values("gone", 0), vec![(1, "after".into())]);
}

#[test]
fn failed_segment_creation_is_an_error_not_a_poison() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let cfg = config_with_segments(dir.path(), 4096);
    let store = Store::open_with_faults(cfg, Arc::clone(&faults)).unwrap();
    store
        .append(&[record("t", 0, None, Some("first"))])
        .unwrap();
    faults.fail_after(FaultPoint::SegmentCreate, 0);
    let big = "x".repeat(3000);
    // Fits the first segment? No: needs a new one, which fails.
    store.append(&[record("t", 0, None, Some(&big))]).unwrap();
    let err = store
        .append(&[record("t", 0, None, Some(&big))])
        .unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }), "{err}");
    faults.heal(FaultPoint::SegmentCreate);
    let a = store.append(&[record("t", 0, None, Some(&big))]).unwrap();
    // The failed append consumed no queue offset.
    assert_eq!(a[0].queue_offset.get(), 2);
}

#[test]
fn listener_wakes_on_new_records() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(small_config(dir.path())).unwrap());
    let listener = store.listen("t", 0).unwrap();
    assert_eq!(store.offsets("t", 0).1, 0);
    let s2 = Arc::clone(&store);
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        s2.append(&[record("t", 0, None, Some("wake"))]).unwrap();
    });
    assert!(
        listener.wait_timeout(Duration::from_secs(10)).is_some(),
        "not woken"
    );
    assert_eq!(store.offsets("t", 0).1, 1);
    writer.join().unwrap();
    // With nothing new, a wait times out.
    let listener = store.listen("t", 0).unwrap();
    assert!(listener.wait_timeout(Duration::from_millis(50)).is_none());
}

#[test]
fn a_failing_sink_does_not_hide_what_was_dispatched_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let sink = StuckSink::new(3, true);
    let store = Store::open_with_sinks(small_config(dir.path()), vec![sink.clone()]).unwrap();
    let listener = store.listen("t", 0).unwrap();
    let batch: Vec<_> = (0..5).map(|_| record("t", 0, None, Some("v"))).collect();
    store.append(&batch).unwrap();
    // Readers are woken for the records before the failure (the queue
    // sink wakes them at the end of a round, which a failure ends too)...
    assert!(
        listener.wait_timeout(Duration::from_secs(10)).is_some(),
        "readers not woken while a later sink fails"
    );
    assert!(store.offsets("t", 0).1 >= 3);
    assert!(!store.wait_dispatched(Duration::from_millis(100)));
    assert!(store.stats().dispatch_errors >= 1);
    // ...and once the sink recovers, the retry completes the batch.
    sink.set_stuck(false);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.offsets("t", 0), (0, 5));
    assert_eq!(
        store
            .read("t", 0, QueueOffset::new(0), 10, usize::MAX)
            .unwrap()
            .records
            .len(),
        5
    );
}

#[test]
fn preallocation_prepares_the_next_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config_with_segments(dir.path(), 8192);
    cfg.preallocate_next_segment = true;
    let store = Store::open(cfg.clone()).unwrap();
    let v = "p".repeat(1000);
    for _ in 0..40 {
        store.append(&[record("t", 0, None, Some(&v))]).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(
        store
            .read("t", 0, QueueOffset::new(0), 100, usize::MAX)
            .unwrap()
            .records
            .len(),
        40
    );
    store.shutdown().unwrap();
    // A preallocated, never-written segment at the end is harmless.
    let store = Store::open(cfg).unwrap();
    assert_eq!(store.offsets("t", 0), (0, 40));
    store.append(&[record("t", 0, None, Some(&v))]).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(store.offsets("t", 0), (0, 41));
}

/// The preallocator keeps two segments made ahead of the writer, so a
/// slow creation (its fsyncs wait behind a busy disk's write-back) does
/// not stop the writer at its next roll: with creation hung, the writer
/// rolls into the first segment made ahead and on into the second.
#[test]
fn the_writer_rolls_through_two_segments_made_ahead_while_creation_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let (store, faults) = store_with_two_segments_ahead(dir.path());
    let v = "r".repeat(1000);
    faults.hang(FaultPoint::SegmentCreate);
    // 1000-byte values, 7 to an 8 KiB segment: 17 more fill the active
    // segment and the first one made ahead and reach the second.
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = Arc::clone(&store);
    std::thread::spawn(move || {
        for _ in 0..17 {
            writer.append(&[record("t", 0, None, Some(&v))]).unwrap();
        }
        let reached = writer.commit_log().committed();
        // Dropped before the answer: the test takes the store back after.
        drop(writer);
        let _ = tx.send(reached);
    });
    let reached = rx.recv_timeout(DEADLINE);
    // No creation could finish since the hang began, so the writer rolled
    // only into segments made before it; the preallocator, asked for the
    // next one at the first of those rolls, is held making it. (Not
    // `wait_for`: a failure must heal the hang first, or the store's
    // shutdown would wait for the held thread.)
    let deadline = std::time::Instant::now() + DEADLINE;
    while faults.blocked(FaultPoint::SegmentCreate) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let blocked = faults.blocked(FaultPoint::SegmentCreate);
    faults.heal(FaultPoint::SegmentCreate);
    let reached = reached.expect("the writer waited for a segment being created");
    assert!(
        reached > 2 * 8192,
        "the appends ended at {reached}, short of the second segment made ahead"
    );
    assert_eq!(
        blocked, 1,
        "the preallocator never tried to make the next one"
    );
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.offsets("t", 0), (0, 18));
    Arc::into_inner(store).unwrap().shutdown().unwrap();
}

/// Whether the byte at `offset` of `file` lies in an unwritten
/// (preallocated, never written) extent, from FIEMAP (with its sync flag);
/// `None` where the file system does not say.
#[cfg(target_os = "linux")]
fn unwritten_at(file: &std::fs::File, offset: u64) -> Option<bool> {
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Extent {
        logical: u64,
        physical: u64,
        length: u64,
        reserved64: [u64; 2],
        flags: u32,
        reserved: [u32; 3],
    }
    #[repr(C)]
    #[derive(Default)]
    struct Fiemap {
        start: u64,
        length: u64,
        flags: u32,
        mapped_extents: u32,
        extent_count: u32,
        reserved: u32,
        extents: [Extent; 1],
    }
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FIEMAP_FLAG_SYNC: u32 = 1;
    const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
    let mut map = Fiemap {
        start: offset,
        length: 1,
        flags: FIEMAP_FLAG_SYNC,
        extent_count: 1,
        ..Default::default()
    };
    // SAFETY: FS_IOC_FIEMAP with a header and room for `extent_count`
    // extents, which is what the kernel writes.
    let rc = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(file),
            FS_IOC_FIEMAP,
            &mut map as *mut Fiemap,
        )
    };
    (rc == 0 && map.mapped_extents == 1)
        .then(|| map.extents[0].flags & FIEMAP_EXTENT_UNWRITTEN != 0)
}

/// Whether the temp dir's file system reports a preallocated, never
/// written range as an unwritten extent (ext4 and XFS do; tmpfs does not).
#[cfg(target_os = "linux")]
fn temp_fs_reports_unwritten_extents() -> bool {
    let len = 1u64 << 20;
    let fresh = tempfile::tempfile().unwrap();
    // SAFETY: plain syscall on a file this test owns.
    let rc = unsafe {
        libc::posix_fallocate(
            std::os::fd::AsRawFd::as_raw_fd(&fresh),
            0,
            len as libc::off_t,
        )
    };
    rc == 0 && unwritten_at(&fresh, len / 2) == Some(true)
}

/// Under `flush: sync` the preallocator writes (and flushes) zeros ahead of
/// the writer, so the acknowledging msync converts no extents: the space
/// ahead is written extents, where async flush (which must not write
/// every byte twice) leaves it preallocated only.
#[cfg(target_os = "linux")]
#[test]
fn sync_flush_writes_zeros_ahead_of_the_writer_and_async_does_not() {
    let segment = 1u64 << 20;
    let probe = segment / 2;
    // Only where the file system reports unwritten extents (ext4, XFS).
    if !temp_fs_reports_unwritten_extents() {
        eprintln!("skipped: the temp dir's file system does not report unwritten extents");
        return;
    }
    let mut unwritten = Vec::new();
    for flush in [FlushMode::Sync, FlushMode::Async] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config_with_segments(dir.path(), segment);
        cfg.preallocate_next_segment = true;
        cfg.flush = flush;
        let store = Store::open(cfg).unwrap();
        store
            .append(&[record("t", 0, None, Some("first"))])
            .unwrap();
        // The preallocator works through the window ahead in steps; wait
        // (boundedly) until it has passed the probe.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while store.commit_log().warmed_to() < segment {
            assert!(
                std::time::Instant::now() < deadline,
                "the window never reached the segment end"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let seg =
            std::fs::File::open(dir.path().join("commitlog").join(format!("{:020}", 0))).unwrap();
        unwritten.push(unwritten_at(&seg, probe));
        store.shutdown().unwrap();
    }
    assert_eq!(
        unwritten,
        [Some(false), Some(true)],
        "[sync, async]: whether the space ahead of the writer is unwritten"
    );
}

/// Under `flush: sync` with large flushes (here ~400 KiB each, as with
/// 100-record requests) the conversion an msync saves is spread thin and
/// the fill's second write of every byte costs more: the preallocator
/// stops writing zeros and only warms, so a segment prepared after those
/// flushes is left preallocated (unwritten).
#[cfg(target_os = "linux")]
#[test]
fn sync_flush_stops_writing_zeros_ahead_while_its_flushes_are_large() {
    let segment = 1u64 << 20;
    let probe = segment / 2;
    // Only where the file system reports unwritten extents (ext4, XFS).
    if !temp_fs_reports_unwritten_extents() {
        eprintln!("skipped: the temp dir's file system does not report unwritten extents");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config_with_segments(dir.path(), segment);
    cfg.preallocate_next_segment = true;
    cfg.flush = FlushMode::Sync;
    let store = Store::open(cfg).unwrap();
    let value = "v".repeat(1000);
    // Each append is acknowledged after its own flush of ~400 KiB.
    for _ in 0..10 {
        let batch: Vec<_> = (0..400)
            .map(|_| record("t", 0, None, Some(&value)))
            .collect();
        store.append(&batch).unwrap();
    }
    let log = store.commit_log();
    let next = (log.committed() / segment + 1) * segment;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while log.warmed_to() < next + segment {
        assert!(
            std::time::Instant::now() < deadline,
            "the window never reached the end of the next segment"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let seg =
        std::fs::File::open(dir.path().join("commitlog").join(format!("{next:020}"))).unwrap();
    assert_eq!(
        unwritten_at(&seg, probe),
        Some(true),
        "the segment prepared after large flushes was zero-filled"
    );
    store.shutdown().unwrap();
}

/// Appends from four threads race the zero fill ahead of them (small
/// segments: it fills each next segment while the writer rolls into it):
/// no acknowledged record is overwritten by zeros, before or after a crash.
#[test]
fn the_zero_fill_never_overwrites_an_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config_with_segments(dir.path(), 256 * 1024);
    cfg.preallocate_next_segment = true;
    cfg.flush = FlushMode::Sync;
    let store = Arc::new(Store::open(cfg.clone()).unwrap());
    let value = |t: u32, i: u32| format!("{t}-{i}-{}", "z".repeat(1000));
    // Four writers of 32 KiB batches: a group commit covers at most 128
    // KiB, under the size past which the fill stops (it must keep going).
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                // Batches of 32 KiB: the writer must keep up with the
                // zero fill, or it never comes near a range being filled.
                for i in 0..40 {
                    let batch: Vec<_> = (0..32)
                        .map(|k| record("t", t, None, Some(&value(t, i * 32 + k))))
                        .collect();
                    store.append(&batch).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let check = |store: &Store| {
        for t in 0..4 {
            let got = store
                .read("t", t, QueueOffset::new(0), 2000, usize::MAX)
                .unwrap()
                .records;
            assert_eq!(got.len(), 1280, "partition {t}");
            for (i, r) in got.iter().enumerate() {
                assert_eq!(
                    r.value_slice(),
                    Some(value(t, i as u32).as_bytes()),
                    "partition {t} record {i}"
                );
            }
        }
    };
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    check(&store);
    assert!(
        store.commit_log().segment_count() > 4,
        "too few rolls to race the zero fill"
    );
    let store = Arc::try_unwrap(store).ok().unwrap();
    store.close_uncleanly();
    let store = Store::open(cfg).unwrap();
    assert!(!store.recovery_report().clean_shutdown);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    check(&store);
}

/// A read-only view of `file`'s byte range `from..to` (`from` page-aligned).
/// Only ever read, never written: the file's pages stay as they are.
fn file_view(file: &std::path::Path, from: u64, to: u64) -> memmap2::Mmap {
    let f = std::fs::File::open(file).unwrap();
    // SAFETY: read-only; the callers read at most one byte per page of
    // bytes the store has already made or written.
    unsafe {
        memmap2::MmapOptions::new()
            .offset(from)
            .len((to - from) as usize)
            .map(&f)
            .unwrap()
    }
}

/// Which pages of `file`'s byte range `from..to` are in the page cache.
fn resident_pages(file: &std::path::Path, from: u64, to: u64) -> Vec<bool> {
    const PAGE: u64 = 4096;
    let map = file_view(file, from, to);
    let pages = (to - from).div_ceil(PAGE) as usize;
    let mut vec = vec![0u8; pages];
    // SAFETY: `map` is a live mapping of `to - from` bytes and `vec` has one
    // byte per page of it.
    let rc = unsafe { libc::mincore(map.as_ptr() as *mut _, map.len(), vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().map(|b| b & 1 == 1).collect()
}

/// The preallocator warms `from..to` of `file`: its own mark passes `to`
/// (waited on, bounded), and right after nearly every page of the range is
/// resident. Not "every page resident at once", polled: on this VM the
/// page cache of pages nobody touches is reclaimed within tens of seconds,
/// and a loaded machine warming slowly raced that reclaim.
fn assert_warmed(store: &Store, file: &std::path::Path, from: u64, to: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while store.stats().commitlog_warmed_offset < to {
        assert!(
            std::time::Instant::now() < deadline,
            "the preallocator never warmed up to {to}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let resident = resident_pages(file, from, to);
    let warm = resident.iter().filter(|&&r| r).count();
    assert!(
        warm * 10 >= resident.len() * 9,
        "{warm} of {} pages of the warmed range {from}..{to} resident",
        resident.len()
    );
}

/// How many of the (resident) pages of `file`'s range `from..to` belong to
/// a large folio, from /proc/self/pagemap and /proc/kpageflags; `None`
/// where those don't give page frame numbers (they need CAP_SYS_ADMIN).
#[cfg(target_os = "linux")]
fn pages_in_large_folios(file: &std::path::Path, from: u64, to: u64) -> Option<usize> {
    use std::os::unix::fs::FileExt;
    const PAGE: u64 = 4096;
    const PRESENT: u64 = 1 << 63;
    const PFN_MASK: u64 = (1 << 55) - 1;
    const COMPOUND_HEAD: u64 = 1 << 15;
    const COMPOUND_TAIL: u64 = 1 << 16;
    let pagemap = std::fs::File::open("/proc/self/pagemap").ok()?;
    let kpageflags = std::fs::File::open("/proc/kpageflags").ok()?;
    // Reading one byte of each (resident) page maps it, so pagemap has it.
    let map = file_view(file, from, to);
    let mut large = 0;
    let mut word = [0u8; 8];
    for at in (0..map.len()).step_by(PAGE as usize) {
        std::hint::black_box(map[at]);
        let vpage = (map.as_ptr() as u64 + at as u64) / PAGE;
        pagemap.read_exact_at(&mut word, vpage * 8).ok()?;
        let entry = u64::from_le_bytes(word);
        let pfn = entry & PFN_MASK;
        if entry & PRESENT == 0 || pfn == 0 {
            return None;
        }
        kpageflags.read_exact_at(&mut word, pfn * 8).ok()?;
        if u64::from_le_bytes(word) & (COMPOUND_HEAD | COMPOUND_TAIL) != 0 {
            large += 1;
        }
    }
    Some(large)
}

#[test]
fn preallocation_warms_a_window_that_follows_the_writer() {
    const MIB: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config_with_segments(dir.path(), 256 * MIB);
    cfg.preallocate_next_segment = true;
    let store = Store::open(cfg).unwrap();
    let seg = dir.path().join("commitlog").join(format!("{:020}", 0));

    store.append(&[record("t", 0, None, Some("x"))]).unwrap();
    let pos = store.stats().commitlog_max_offset;
    // The pages just ahead of the writer are warmed in the background...
    assert_warmed(&store, &seg, pos / 4096 * 4096, pos + 56 * MIB);
    // ...as single pages: the writer's pwrite into large folios costs half
    // as much again (Segment::warm).
    #[cfg(target_os = "linux")]
    match pages_in_large_folios(&seg, 4 * MIB, 56 * MIB) {
        Some(large) => assert_eq!(large, 0, "warmed pages in large folios"),
        None => eprintln!("page frame numbers not readable here: folio sizes not checked"),
    }
    // ...but not the whole segment: far ahead stays untouched.
    let far = resident_pages(&seg, 128 * MIB, 256 * MIB);
    assert!(
        far.iter().all(|&r| !r),
        "pages far ahead of the writer were warmed"
    );

    // The window moves with the writer.
    let v = "w".repeat(512 << 10);
    for _ in 0..160 {
        store.append(&[record("t", 0, None, Some(&v))]).unwrap();
    }
    let pos = store.stats().commitlog_max_offset;
    assert!(pos > 80 * MIB, "wrote up to {pos}");
    assert_warmed(&store, &seg, pos / 4096 * 4096, pos + 56 * MIB);
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    assert_eq!(store.offsets("t", 0), (0, 161));
}

#[test]
fn a_sequential_reader_sees_records_committed_after_it_started() {
    // One ReadCache across reads, with appends (and segment rolls) between
    // them: the reader's view of committed bytes must follow the log.
    use tidelog_storage::commit_log::{Next, ReadCache};
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with_segments(dir.path(), 4096);
    let store = Store::open(cfg).unwrap();
    let log = store.commit_log();
    let mut cache = ReadCache::default();
    let mut pos = 0;
    let mut seen = 0u64;
    for round in 0..40u64 {
        let batch: Vec<_> = (0..round % 5 + 1)
            .map(|i| {
                record(
                    "t",
                    0,
                    None,
                    Some(&format!("{round}.{i}:{}", "x".repeat(200))),
                )
            })
            .collect();
        store.append(&batch).unwrap();
        loop {
            match log.read_next_cached(pos, false, &mut cache).unwrap() {
                Next::Entry(entry) => {
                    assert_eq!(entry.physical_offset(), pos);
                    let mut at = pos;
                    for r in entry.records() {
                        let r = r.unwrap();
                        assert_eq!(r.queue_offset().get(), seen);
                        assert!(r.physical_offset().get() > at, "records lie in order");
                        at = r.physical_offset().get();
                        let value = r.value().unwrap();
                        assert!(value.starts_with(format!("{round}.").as_bytes()), "{round}");
                        seen += 1;
                    }
                    pos += entry.size();
                }
                Next::Skip(next) => pos = next,
                Next::End => break,
            }
        }
        assert_eq!(pos, log.committed());
    }
    assert_eq!(seen, (0..40u64).map(|r| r % 5 + 1).sum::<u64>());
    assert!(store.stats().commitlog_segments > 5, "{:?}", store.stats());
}

/// A sink that buffers until `end_batch`, and takes its time there.
#[derive(Default)]
struct SlowPublisher {
    taken: std::sync::atomic::AtomicU64,
    visible: std::sync::atomic::AtomicU64,
}

impl tidelog_storage::DispatchSink for SlowPublisher {
    fn name(&self) -> &str {
        "slow-publisher"
    }
    fn dispatch(&self, _: &tidelog_storage::StoredRecord) -> tidelog_storage::Result<()> {
        self.taken.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
    fn end_batch(&self) -> tidelog_storage::Result<()> {
        let taken = self.taken.load(std::sync::atomic::Ordering::SeqCst);
        if taken > self.visible.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(300));
            self.visible
                .store(taken, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }
    fn flush(&self) -> tidelog_storage::Result<()> {
        Ok(())
    }
}

/// `wait_dispatched` returns only once every sink published what it took
/// (its `end_batch` ran), not as soon as the records were handed over: a
/// caller that waits and then reads a buffering sink (a compacted log)
/// must find the records there.
#[test]
fn wait_dispatched_waits_for_the_sinks_to_publish() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(SlowPublisher::default());
    let store = Store::open_with_sinks(small_config(dir.path()), vec![sink.clone()]).unwrap();
    store.append(&[record("t", 0, None, Some("v"))]).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(60)));
    assert_eq!(
        sink.visible.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "wait_dispatched returned before the sink's end_batch published the record"
    );
    store.shutdown().unwrap();
}

/// Runs `f` on a thread and fails the test if it has not returned within
/// [`DEADLINE`] (a hang, not a slow machine).
fn within_deadline<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("test-{what}"))
        .spawn(move || {
            let _ = tx.send(f());
        })
        .unwrap();
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("{what} did not return within {DEADLINE:?}"))
}

/// Issue 35's livelock: with segment creation failing for good, the
/// preallocator retried at once, forever, and an append waited for it
/// holding the writer's lock, so flush, retention and shutdown queued
/// behind that lock. Now the preallocator backs off, the append that needs
/// the segment is refused at once with a typed error (nothing written, no
/// poison), the store says it refuses writes, checkpoint, retention and
/// shutdown go on, and appends work again once creation does.
#[test]
fn failing_segment_creation_refuses_appends_and_holds_up_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, faults) = store_with_two_segments_ahead(dir.path());
    let v = "r".repeat(1000);
    faults.fail_after(FaultPoint::SegmentCreate, 0);
    // 7 records to an 8 KiB segment: the active one and the two made ahead
    // take about 20, then the roll finds nothing made and is refused.
    let mut acked = 1u64;
    let refused = loop {
        let s = Arc::clone(&store);
        let value = v.clone();
        match within_deadline("append", move || {
            s.append(&[record("t", 0, None, Some(&value))])
        }) {
            Ok(_) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 100, "appends were never refused");
    };
    assert!(
        matches!(refused, StoreError::SegmentUnavailable { .. }),
        "{refused}"
    );
    assert!(
        acked > 14,
        "refused before the segments made ahead were used: {acked}"
    );
    // Every later append is refused the same way, at once; the log is not
    // poisoned, and the store says it refuses writes (readiness).
    for _ in 0..20 {
        let s = Arc::clone(&store);
        let value = v.clone();
        let e = within_deadline("append", move || {
            s.append(&[record("t", 0, None, Some(&value))])
        })
        .unwrap_err();
        assert!(matches!(e, StoreError::SegmentUnavailable { .. }), "{e}");
    }
    assert!(store.commit_log().poisoned_error().is_none());
    assert!(
        matches!(
            store.write_refusal(),
            Some(StoreError::SegmentUnavailable { .. })
        ),
        "{:?}",
        store.write_refusal()
    );
    // The preallocator backs off: a handful of attempts a second at most
    // (it made ~790 a second, one WARN line each, before).
    let before = store.stats().segment_create_failures;
    std::thread::sleep(Duration::from_secs(1));
    let tried = store.stats().segment_create_failures - before;
    assert!(tried <= 12, "{tried} creation attempts in a second");
    // Checkpoint (the flush thread's work) and a retention pass run.
    let s = Arc::clone(&store);
    within_deadline("checkpoint", move || s.checkpoint()).unwrap();
    let s = Arc::clone(&store);
    let pass = within_deadline("retention", move || {
        s.run_retention(tidelog_storage::Trigger::ManualForce)
    })
    .unwrap();
    assert!(pass.deleted_segments >= 1, "{pass:?}");
    // Creation works again: so do appends, by themselves.
    faults.heal(FaultPoint::SegmentCreate);
    wait_for("appends accepted again", || {
        store.append(&[record("t", 0, None, Some(&v))]).is_ok()
    });
    assert!(store.write_refusal().is_none());
    acked += 1;
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let (begin, end) = store.offsets("t", 0);
    assert_eq!(
        end, acked,
        "every acknowledged record has its offset, no gap"
    );
    let read = store
        .read("t", 0, QueueOffset::new(begin), 1000, usize::MAX)
        .unwrap();
    assert_eq!(read.records.len() as u64, end - begin);
    let store = Arc::into_inner(store).unwrap();
    within_deadline("shutdown", move || store.shutdown()).unwrap();
}

/// A disk-usage source with a settable number of available bytes.
#[derive(Debug)]
struct Available(std::sync::atomic::AtomicU64);

impl tidelog_storage::retention::DiskUsage for Available {
    fn used_ratio(&self, _: &std::path::Path) -> std::io::Result<f64> {
        Ok(0.1)
    }
    fn available_bytes(&self, _: &std::path::Path) -> std::io::Result<Option<u64>> {
        Ok(Some(self.0.load(std::sync::atomic::Ordering::SeqCst)))
    }
}

/// The disk-full gate keeps a reserve for the files the store must still
/// create: with less than it free, writes are refused (507's error) even
/// at a low used ratio, and accepted again once twice the reserve is free.
#[test]
fn writes_stop_before_the_reserve_is_gone() {
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(dir.path());
    let disk = Arc::new(Available(std::sync::atomic::AtomicU64::new(u64::MAX / 4)));
    cfg.retention.disk = disk.clone();
    let reserve = tidelog_storage::store::disk_reserve_bytes(&cfg);
    assert!(reserve >= cfg.commitlog_segment_bytes);
    let store = Store::open(cfg).unwrap();
    store.check_disk();
    store.append(&[record("t", 0, None, Some("a"))]).unwrap();
    disk.0.store(reserve - 1, Ordering::SeqCst);
    store.check_disk();
    let e = store
        .append(&[record("t", 0, None, Some("b"))])
        .unwrap_err();
    assert!(matches!(e, StoreError::DiskFull { .. }), "{e}");
    assert!(e.to_string().contains("reserve"), "{e}");
    assert!(store.write_refusal().is_some());
    assert_eq!(store.stats().disk_reserve_bytes, reserve);
    // Hysteresis: just above the reserve is not enough...
    disk.0.store(reserve + 1, Ordering::SeqCst);
    store.check_disk();
    assert!(store.append(&[record("t", 0, None, Some("c"))]).is_err());
    // ...twice the reserve is.
    disk.0.store(2 * reserve, Ordering::SeqCst);
    store.check_disk();
    store.append(&[record("t", 0, None, Some("d"))]).unwrap();
    assert!(store.write_refusal().is_none());
    store.shutdown().unwrap();
}

/// Issue 35 item 1: a file the store writes through a map is backed by
/// disk blocks before it is mapped, not made sparse with `set_len`: a
/// store into a hole on a full disk is SIGBUS. Every ConsumeQueue file,
/// IndexFile and segment holds blocks for its whole length.
#[test]
fn every_mapped_file_is_allocated_not_sparse() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(dir.path());
    cfg.preallocate_next_segment = true;
    // Files of many pages, so a sparse one (a page or two written) shows.
    cfg.consume_queue_units_per_file = 10_000;
    cfg.index_slots = 1000;
    cfg.index_entries = 10_000;
    let store = Store::open(cfg).unwrap();
    for p in 0..3 {
        store
            .append(&[record("t", p, Some("k"), Some("v"))])
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let mut checked = 0;
    let mut files = vec![];
    for sub in ["index", "commitlog"] {
        files.extend(std::fs::read_dir(dir.path().join(sub)).unwrap());
    }
    for partition in 0..3 {
        let queue = dir
            .path()
            .join("consumequeue")
            .join("t")
            .join(partition.to_string());
        files.extend(std::fs::read_dir(queue).unwrap());
    }
    for entry in files {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if fs_util::parse_offset_file_name(name.to_str().unwrap(), "").is_none() {
            continue;
        }
        let meta = entry.metadata().unwrap();
        assert!(
            meta.blocks() * 512 >= meta.len(),
            "{} is sparse: {} bytes, {} allocated",
            entry.path().display(),
            meta.len(),
            meta.blocks() * 512
        );
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} files looked at");
    store.shutdown().unwrap();
}

/// A dispatcher short of space makes the preallocator give up its spare
/// segment (the space goes to the indexes), and the spare comes back once
/// dispatch succeeds again.
#[test]
fn the_spare_segment_is_given_up_while_the_indexes_lack_space() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config_with_segments(dir.path(), 8192);
    cfg.preallocate_next_segment = true;
    let short = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sink = Arc::new(NoSpaceSink(Arc::clone(&short)));
    let store = Store::open_with_sinks(cfg, vec![sink]).unwrap();
    store.append(&[record("t", 0, None, Some("a"))]).unwrap();
    wait_for("two segments made ahead", || {
        segment_files(dir.path()).len() >= 3
    });
    short.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = store.append(&[record("t", 0, None, Some("b"))]);
    wait_for("the spare given up", || {
        segment_files(dir.path()).len() == 2
    });
    let e = store
        .append(&[record("t", 0, None, Some("c"))])
        .unwrap_err();
    assert!(matches!(e, StoreError::DiskFull { .. }), "{e}");
    short.store(false, std::sync::atomic::Ordering::SeqCst);
    wait_for("dispatch recovered", || store.write_refusal().is_none());
    store.check_disk();
    wait_for("the spare made again", || {
        segment_files(dir.path()).len() >= 3
    });
    store.append(&[record("t", 0, None, Some("d"))]).unwrap();
    store.shutdown().unwrap();
}

/// A sink that fails with ENOSPC while its flag is set.
struct NoSpaceSink(Arc<std::sync::atomic::AtomicBool>);

impl tidelog_storage::DispatchSink for NoSpaceSink {
    fn name(&self) -> &str {
        "no-space"
    }
    fn dispatch(&self, _: &tidelog_storage::StoredRecord) -> tidelog_storage::Result<()> {
        if self.0.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Io {
                path: "/full/index".into(),
                source: std::io::Error::from_raw_os_error(libc::ENOSPC),
            });
        }
        Ok(())
    }
    fn flush(&self) -> tidelog_storage::Result<()> {
        Ok(())
    }
}

/// A store of 8 KiB segments with preallocation, one 1000-byte record
/// appended (the active segment), once its preallocator has made the two
/// segments ahead, and its fault switches.
fn store_with_two_segments_ahead(dir: &std::path::Path) -> (Arc<Store>, Arc<Faults>) {
    let mut cfg = config_with_segments(dir, 8192);
    cfg.preallocate_next_segment = true;
    let faults = Arc::new(Faults::default());
    let store = Arc::new(Store::open_with_faults(cfg, Arc::clone(&faults)).unwrap());
    store
        .append(&[record("t", 0, None, Some(&"r".repeat(1000)))])
        .unwrap();
    wait_for("two segments made ahead of the active one", || {
        segment_files(dir).len() >= 3
    });
    (store, faults)
}
