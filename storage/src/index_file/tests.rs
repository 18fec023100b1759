//! Tests of the IndexFiles: golden bytes, put and query, full files and
//! rolls, hash collisions, flush and its directory sync, recovery's
//! truncation (damaged chains rebuilt) and retention's deletion.

use std::ops::ControlFlow;

use super::*;

fn collect(svc: &IndexService, topic: &str, key: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    svc.query(topic, key, i64::MIN / 2, i64::MAX / 2, &mut |p| {
        out.push(p);
        Ok(ControlFlow::Continue(()))
    })
    .unwrap();
    out
}

#[test]
fn chains_newest_first_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let svc = IndexService::load(dir.path(), 4, 5).unwrap();
    // 4 usable entries per file; 10 puts → 3 files.
    for i in 0..10u64 {
        let key = if i % 2 == 0 {
            b"even".as_slice()
        } else {
            b"odd".as_slice()
        };
        svc.put("t", key, i * 10, 1_000_000 + i as i64 * 1000)
            .unwrap();
    }
    assert_eq!(svc.file_count(), 3);
    assert_eq!(collect(&svc, "t", b"even"), vec![80, 60, 40, 20, 0]);
    assert_eq!(collect(&svc, "t", b"odd"), vec![90, 70, 50, 30, 10]);
    // Same key, other topic: hash differs, so (almost surely) nothing.
    assert!(collect(&svc, "u", b"even").is_empty());
    // Replays are skipped.
    svc.put("t", b"even", 80, 1_008_000).unwrap();
    assert_eq!(collect(&svc, "t", b"even").len(), 5);
    svc.flush().unwrap();
    drop(svc);
    let svc = IndexService::load(dir.path(), 4, 5).unwrap();
    assert_eq!(collect(&svc, "t", b"odd"), vec![90, 70, 50, 30, 10]);
    assert_eq!(svc.last_indexed(), Some(90));
}

#[test]
fn files_wholly_below_the_log_start_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let svc = IndexService::load(dir.path(), 4, 5).unwrap();
    for i in 0..10u64 {
        svc.put("t", b"k", i * 10, 1_000_000).unwrap();
    }
    // Files hold offsets 0..=30, 40..=70, 80..=90.
    assert_eq!(svc.delete_files_below(35).unwrap(), 1);
    assert_eq!(svc.delete_files_below(75).unwrap(), 1);
    assert_eq!(
        svc.delete_files_below(u64::MAX).unwrap(),
        0,
        "the newest file stays"
    );
    assert_eq!(collect(&svc, "t", b"k"), vec![90, 80]);
}

#[test]
fn time_window_filters() {
    let dir = tempfile::tempdir().unwrap();
    let svc = IndexService::load(dir.path(), 8, 100).unwrap();
    for i in 0..10u64 {
        svc.put("t", b"k", i, 1_000_000 + i as i64 * 10_000)
            .unwrap();
    }
    let mut got = Vec::new();
    svc.query("t", b"k", 1_030_000, 1_050_000, &mut |p| {
        got.push(p);
        Ok(ControlFlow::Continue(()))
    })
    .unwrap();
    assert_eq!(got, vec![5, 4, 3]);
}

#[test]
fn truncate_repairs_chains() {
    let dir = tempfile::tempdir().unwrap();
    let svc = IndexService::load(dir.path(), 2, 100).unwrap();
    for i in 0..20u64 {
        svc.put("t", format!("k{}", i % 3).as_bytes(), i * 100, 1_000_000)
            .unwrap();
    }
    assert_eq!(svc.truncate_from_physical(1050).unwrap(), 1050);
    assert_eq!(svc.last_indexed(), Some(1000));
    assert_eq!(collect(&svc, "t", b"k0"), vec![900, 600, 300, 0]);
    assert_eq!(collect(&svc, "t", b"k1"), vec![1000, 700, 400, 100]);
    // New entries chain onto the repaired slots.
    svc.put("t", b"k0", 1100, 1_000_000).unwrap();
    assert_eq!(collect(&svc, "t", b"k0"), vec![1100, 900, 600, 300, 0]);
    assert_eq!(svc.truncate_from_physical(0).unwrap(), 0);
    assert_eq!(svc.last_indexed(), None);
}

#[test]
fn damaged_chain_is_rebuilt_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let svc = IndexService::load(dir.path(), 2, 100).unwrap();
    for i in 0..5u64 {
        svc.put("t", b"k", 500 + i, 1_000_000).unwrap();
    }
    // Corrupt entry 3's prev pointer to point forward.
    let f = svc.files()[0].clone();
    let mut e = f.entry(3);
    e.prev = 4;
    f.write_entry(3, &e);
    // Queries stop at the bad link instead of looping.
    assert_eq!(collect(&svc, "t", b"k"), vec![504, 503, 502]);
    drop(f);
    assert_eq!(svc.truncate_from_physical(504).unwrap(), 500);
    assert_eq!(svc.file_count(), 0);
}

/// A put that fills a file and starts the next syncs only the new
/// file's header: the full file and the directory are the next
/// flush's (the checkpoint's) work, and a power loss before it loses
/// only the entries it would have covered.
#[cfg(feature = "durable-image")]
#[test]
fn a_full_file_is_synced_by_the_next_flush_not_by_the_put_that_fills_it() {
    let root = tempfile::tempdir().unwrap();
    let image = crate::durability::image::install(root.path()).unwrap();
    let dir = root.path().join("index");
    let svc = IndexService::load(&dir, 4, 5).unwrap();
    // 4 usable entries per file; three keys.
    let put = |i: u64| {
        let key = format!("k{}", i % 3);
        svc.put("t", key.as_bytes(), i * 10, 1_000_000 + i as i64 * 1000)
            .unwrap()
    };
    (0..4).for_each(put);
    svc.flush().unwrap();
    assert!(!svc.dir_sync_pending());
    let before = image.syncs();
    (4..10).for_each(put);
    assert_eq!(svc.file_count(), 3);
    assert_eq!(image.syncs() - before, 2, "one header sync per new file");
    assert!(svc.dir_sync_pending());
    let lost = tempfile::tempdir().unwrap();
    image.snapshot(lost.path(), None).unwrap();

    let before = image.syncs();
    svc.flush().unwrap();
    // The directory, the file that filled since the last flush and
    // the newest; not the first file again.
    assert_eq!(image.syncs() - before, 3);
    let before = image.syncs();
    svc.flush().unwrap();
    assert_eq!(image.syncs() - before, 0, "nothing new to sync");
    let kept = tempfile::tempdir().unwrap();
    image.snapshot(kept.path(), None).unwrap();
    drop(image);

    let svc = IndexService::load(&lost.path().join("index"), 4, 5).unwrap();
    assert_eq!(svc.file_count(), 1, "names no flush covered are gone");
    assert_eq!(svc.last_indexed(), Some(30));
    assert_eq!(collect(&svc, "t", b"k0"), vec![30, 0]);
    let svc = IndexService::load(&kept.path().join("index"), 4, 5).unwrap();
    assert_eq!(collect(&svc, "t", b"k0"), vec![90, 60, 30, 0]);
    assert_eq!(collect(&svc, "t", b"k1"), vec![70, 40, 10]);
    assert_eq!(collect(&svc, "t", b"k2"), vec![80, 50, 20]);
}

/// Recovery's truncation changes a file behind its entry count: the
/// next flush syncs it even when re-indexing brings the count back to
/// what the last flush covered.
#[cfg(feature = "durable-image")]
#[test]
fn a_truncated_file_is_synced_again_whatever_its_count() {
    let root = tempfile::tempdir().unwrap();
    let image = crate::durability::image::install(root.path()).unwrap();
    let dir = root.path().join("index");
    let svc = IndexService::load(&dir, 2, 100).unwrap();
    for i in 0..20u64 {
        svc.put("t", b"old", i * 100, 1_000_000).unwrap();
    }
    svc.flush().unwrap();
    assert_eq!(svc.truncate_from_physical(1050).unwrap(), 1050);
    // Nine entries dropped, nine others in their place.
    for i in 11..20u64 {
        svc.put("t", b"new", i * 100, 1_000_000).unwrap();
    }
    let before = image.syncs();
    svc.flush().unwrap();
    assert_eq!(image.syncs() - before, 1);
    let snap = tempfile::tempdir().unwrap();
    image.snapshot(snap.path(), None).unwrap();
    drop(image);
    let svc = IndexService::load(&snap.path().join("index"), 2, 100).unwrap();
    assert_eq!(collect(&svc, "t", b"old").len(), 11);
    assert_eq!(
        collect(&svc, "t", b"new"),
        (11..20u64).rev().map(|i| i * 100).collect::<Vec<_>>()
    );
}

#[test]
fn half_created_file_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir
        .path()
        .join(format!("{}{TMP_SUFFIX}", fs_util::offset_file_name(5)));
    std::fs::write(&tmp, b"").unwrap();
    let svc = IndexService::load(dir.path(), 2, 100).unwrap();
    assert_eq!(svc.file_count(), 0);
    assert!(!tmp.exists());
}

#[test]
fn garbage_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(fs_util::offset_file_name(1)),
        b"not an index",
    )
    .unwrap();
    assert!(IndexService::load(dir.path(), 2, 100).is_err());
}
