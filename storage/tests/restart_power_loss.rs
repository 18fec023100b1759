//! A power loss after a crash's recovery keeps everything that recovery
//! served.
//!
//! A process killed with `kill -9` leaves its unsynced writes in the page
//! cache, where they outlive it: the next open reads them as if they were
//! on the disk, serves them, and writes a checkpoint that claims them. If
//! that open synced only what it wrote itself, a power loss afterwards
//! would leave the checkpoint claiming queue units (and CommitLog bytes)
//! that never reached the disk, and recovery, trusting the checkpoint,
//! would replay none of them: records served once would be gone. Checked on
//! the durable image (what a power loss leaves: bytes as of their last
//! sync, names as of their directory's last fsync).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use tidelog_storage::durability::image;
use tidelog_storage::{FlushMode, Store, StoreConfig};

/// Async flush whose interval never comes and no periodic checkpoint or
/// retention pass: nothing the first process writes is synced by it.
fn config(dir: &Path) -> StoreConfig {
    let mut c = small_config(dir);
    c.flush = FlushMode::Async;
    c.flush_interval_ms = 3_600_000;
    c.retention.check_interval_ms = 3_600_000;
    c.dispatch_stall_ms = 300_000;
    c
}

#[test]
fn what_recovery_serves_after_a_crash_survives_a_power_loss_after_it() {
    let root = tempfile::tempdir().unwrap();
    let live = root.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let image = image::install(&live).unwrap();

    // The crashed process: records to new partitions (new queue files and
    // directories) and a second record to each, none of it synced.
    let store = Store::open(config(&live)).unwrap();
    let partitions = 40u32;
    for round in 0..2 {
        for p in 0..partitions {
            store
                .append(&[record("t", p, None, Some(&format!("{p}.{round}")))])
                .unwrap();
        }
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    store.close_uncleanly();

    // Its recovery, on the same files (the page cache survived the crash).
    let store = Store::open(config(&live)).unwrap();
    assert!(!store.recovery_report().clean_shutdown);
    let expected: Vec<Vec<(u64, String)>> =
        (0..partitions).map(|p| served(&store, "t", p)).collect();
    for (p, records) in expected.iter().enumerate() {
        assert_eq!(
            records,
            &[(0, format!("{p}.0")), (1, format!("{p}.1"))],
            "recovery serves what the crashed process wrote to t/{p}"
        );
    }

    // The power goes right after that open.
    let after = root.path().join("after");
    image.snapshot(&after, None).unwrap();
    store.close_uncleanly();
    drop(image);

    let store = Store::open(config(&after)).unwrap();
    for (p, records) in expected.iter().enumerate() {
        assert_eq!(
            &served(&store, "t", p as u32),
            records,
            "t/{p} after the power loss"
        );
    }
    store.close_uncleanly();
}
