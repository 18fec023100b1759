//! New partitions (and new IndexFiles) cost the dispatcher no fsync, and
//! are durable by the checkpoint that claims their records.
//!
//! The first record of a partition makes the dispatcher create the
//! partition's queue directory and queue file. They used to be made
//! durable there and then (temporary file, fsync, rename, directory
//! fsyncs: about five fsyncs, each an ext4 journal commit), on the one
//! dispatcher thread, so a burst of new partitions on a slow disk held
//! every other partition's records back for seconds (docs/OPERATIONS.md).
//! Now they are made with no fsync and the queues' flush, which runs before
//! every checkpoint, syncs the new files' units and then each directory
//! that gained a name, once (`fs_util::PendingDirSyncs`).
//!
//! What must hold, checked on the durable image (what a power loss leaves:
//! bytes as of their last sync, names as of their directory's last fsync,
//! optionally one unsynced page torn):
//! - the dispatcher's path does no sync at all for a new partition;
//! - nothing a checkpoint claims is missing after a power loss: every
//!   record acknowledged under `flush: sync` is served, also when the
//!   checkpoint recovery starts from claims it (so no replay brings it
//!   back), whatever state the new files made around that checkpoint are
//!   left in;
//! - recovery never serves a half-made file: the store opens (strict
//!   recovery) on every image and serves only the records written, each at
//!   its offset.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use common::*;
use tidelog_storage::checkpoint::Checkpoint;
use tidelog_storage::durability::image::{self, Tear};
use tidelog_storage::{FlushMode, Store, StoreConfig};

/// [`small_config`] with no periodic checkpoint or retention pass: the
/// test decides when a checkpoint is written.
fn config(dir: &Path, flush: FlushMode) -> StoreConfig {
    let mut c = small_config(dir);
    c.flush = flush;
    c.flush_interval_ms = 3_600_000;
    c.retention.check_interval_ms = 3_600_000;
    // Syncs through the image are slow on a loaded machine; the store's
    // deadlines are not what this tests.
    c.sync_flush_timeout_ms = 300_000;
    c.dispatch_stall_ms = 300_000;
    c
}

fn value(topic: &str, partition: u32) -> String {
    format!("{topic}/{partition}")
}

/// One record to each of `partitions` new partitions of `topic`: a new
/// partition's first record, as far as the dispatcher is concerned, costs
/// no sync. The checkpoint after it syncs the new files and directories,
/// and a power loss right after it (the checkpoint claims the records, so
/// recovery replays none of them) keeps every one.
#[test]
fn a_new_partition_costs_the_dispatcher_no_fsync_and_is_durable_at_the_checkpoint() {
    let root = tempfile::tempdir().unwrap();
    let live = root.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let image = image::install(&live).unwrap();
    let store = Store::open(config(&live, FlushMode::Async)).unwrap();
    // The IndexFile's first file, and the first CommitLog segment, are the
    // store's, not a partition's: made before counting.
    store
        .append(&[record("warm", 0, Some("k"), Some("v"))])
        .unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let before = image.syncs();
    let partitions = 40u32;
    for topic in ["a", "b"] {
        for p in 0..partitions {
            store
                .append(&[record(topic, p, None, Some(&value(topic, p)))])
                .unwrap();
        }
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let dispatched_syncs = image.syncs() - before;
    // Before: 3 per partition (its directory's name, the queue file, its
    // name), 4 for a topic's first (the topic's directory too).
    assert_eq!(
        dispatched_syncs,
        0,
        "syncs while {} new partitions were dispatched",
        2 * partitions
    );
    assert_eq!(
        served(&store, "a", 7),
        [(0, value("a", 7))],
        "visible before any sync"
    );

    let before = image.syncs();
    store.checkpoint().unwrap();
    let checkpoint_syncs = image.syncs() - before;
    // Each new queue file's units once (which makes its size durable), each
    // directory that gained a name once (80 partition directories, 2 topic
    // directories, the queues' root), plus the store's own: the CommitLog's
    // flush, the index's, the queue-ends and index-end files (their ends
    // moved) and the checkpoint file, and their directory.
    let new_partitions = u64::from(2 * partitions);
    assert!(
        checkpoint_syncs >= 2 * new_partitions && checkpoint_syncs <= 2 * new_partitions + 16,
        "{checkpoint_syncs} syncs in the checkpoint after {new_partitions} new partitions"
    );
    let after = root.path().join("after");
    image.snapshot(&after, None).unwrap();
    store.close_uncleanly();
    drop(image);

    let claimed = Checkpoint::load(&after).unwrap().unwrap();
    let store = Store::open(config(&after, FlushMode::Async)).unwrap();
    let report = store.recovery_report();
    assert_eq!(
        report.scanned_from, claimed.dispatched,
        "recovery starts at the checkpoint: nothing is replayed"
    );
    for topic in ["a", "b"] {
        for p in 0..partitions {
            assert_eq!(
                served(&store, topic, p),
                [(0, value(topic, p))],
                "{topic}/{p}"
            );
        }
    }
    store.close_uncleanly();
}

/// The same for the IndexFile: a keyed burst that fills files costs the
/// dispatcher one sync per new file (its header, so that a name which
/// reaches the disk always opens), not an msync of the full file (up to
/// 42 MB at the defaults) nor a directory sync. The checkpoint syncs
/// those, and after a power loss right after it every key is found with
/// nothing replayed.
#[test]
fn a_full_index_file_costs_the_dispatcher_only_the_new_files_header_sync() {
    let root = tempfile::tempdir().unwrap();
    let live = root.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let image = image::install(&live).unwrap();
    let mut c = config(&live, FlushMode::Async);
    c.index_entries = 64;
    let store = Store::open(c.clone()).unwrap();
    // The partition's first queue file, the first index file: made first.
    store
        .append(&[record("k", 0, Some("warm"), Some("v"))])
        .unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let index_files = |dir: &Path| std::fs::read_dir(dir.join("index")).unwrap().count() as u64;
    let files_before = index_files(&live);
    let before = image.syncs();
    let keys = 50;
    for batch in 0..6 {
        let records: Vec<_> = (0..100)
            .map(|i| {
                let n = batch * 100 + i;
                record(
                    "k",
                    0,
                    Some(&format!("key-{}", n % keys)),
                    Some(&n.to_string()),
                )
            })
            .collect();
        store.append(&records).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let new_files = index_files(&live) - files_before;
    assert!(new_files >= 8, "{new_files} index files made");
    assert_eq!(
        image.syncs() - before,
        new_files,
        "one sync per new index file"
    );

    store.checkpoint().unwrap();
    let after = root.path().join("after");
    image.snapshot(&after, None).unwrap();
    store.close_uncleanly();
    drop(image);

    let claimed = Checkpoint::load(&after).unwrap().unwrap();
    c.data_dir = after.clone();
    let store = Store::open(c).unwrap();
    assert_eq!(
        store.recovery_report().scanned_from,
        claimed.dispatched,
        "nothing is replayed"
    );
    for k in 0..keys {
        let found: Vec<String> = store
            .query_by_key("k", format!("key-{k}").as_bytes(), 0, i64::MAX, 100)
            .unwrap()
            .iter()
            .map(|r| String::from_utf8(r.value().unwrap().to_vec()).unwrap())
            .collect();
        let want: Vec<String> = (0..600)
            .rev()
            .filter(|n| n % keys == k)
            .map(|n| n.to_string())
            .collect();
        assert_eq!(found, want, "key-{k} after the power loss");
    }
    store.close_uncleanly();
}

/// Power losses at random moments while new partitions are made and
/// checkpoints written beside them (so some files are made while a
/// checkpoint syncs the ones before), some with an unsynced page torn:
/// every image opens, every record acknowledged before the power loss
/// (`flush: sync`) is served, and nothing else.
#[test]
fn new_partitions_survive_power_loss_around_checkpoints() {
    let seed = seed("new_partitions_survive_power_loss_around_checkpoints");
    let mut rng = Rng::new(seed);
    let root = tempfile::tempdir().unwrap();
    let live = root.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let image = image::install(&live).unwrap();
    let store = Store::open(config(&live, FlushMode::Sync)).unwrap();
    let topics = ["t0", "t1", "t2"];
    let per_topic = 60u32;
    let acked: Mutex<Vec<(&str, u32)>> = Mutex::new(Vec::new());
    let done = AtomicBool::new(false);
    let snapshots: Vec<(std::path::PathBuf, usize, Option<String>)> = std::thread::scope(|s| {
        s.spawn(|| {
            for p in 0..per_topic {
                for topic in topics {
                    store
                        .append(&[record(topic, p, None, Some(&value(topic, p)))])
                        .unwrap();
                    acked.lock().unwrap().push((topic, p));
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                store.checkpoint().unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let mut snapshots = Vec::new();
        let mut i = 0;
        while !done.load(Ordering::SeqCst) && i < 12 {
            std::thread::sleep(Duration::from_millis(1 + rng.below(30)));
            let acked_before = acked.lock().unwrap().len();
            let tear = rng.chance(75).then(|| Tear {
                file_pick: rng.next(),
                prefix_pick: rng.next(),
                out_of_order: rng.chance(50),
                spare: &[],
            });
            let dest = root.path().join(format!("power-loss-{i}"));
            let torn = image.snapshot(&dest, tear).unwrap();
            snapshots.push((dest, acked_before, torn));
            i += 1;
        }
        snapshots
    });
    let acked = acked.into_inner().unwrap();
    store.close_uncleanly();
    drop(image);
    assert!(
        snapshots.len() >= 2,
        "the writer finished too early: {seed}"
    );

    let mut claimed_new = 0;
    let mut tears = 0;
    for (dir, acked_before, torn) in &snapshots {
        let context = format!(
            "seed {seed}, {}: {}",
            dir.display(),
            torn.as_deref().unwrap_or("no tear")
        );
        tears += usize::from(torn.is_some());
        let claimed = Checkpoint::load(dir).unwrap().map_or(0, |c| c.dispatched);
        let store = Store::open(config(dir, FlushMode::Sync))
            .unwrap_or_else(|e| panic!("does not open: {e}; {context}"));
        let mut want: HashMap<(&str, u32), String> = HashMap::new();
        for &(topic, p) in &acked[..*acked_before] {
            want.insert((topic, p), value(topic, p));
        }
        for topic in topics {
            for p in 0..per_topic {
                let got = served(&store, topic, p);
                match want.get(&(topic, p)) {
                    Some(v) => assert_eq!(got, [(0, v.clone())], "{topic}/{p}; {context}"),
                    // Written, not acknowledged before the power loss: it
                    // may or may not have reached the disk.
                    None => assert!(
                        got.is_empty() || got == [(0, value(topic, p))],
                        "{topic}/{p} serves {got:?}; {context}"
                    ),
                }
            }
        }
        // Records below the checkpoint's claim are not replayed (unless a
        // torn unit sends recovery back): they are served from the files
        // the dispatcher made with no fsync, which that checkpoint's flush
        // made durable.
        if claimed > 0 {
            claimed_new += 1;
        }
        store.close_uncleanly();
    }
    eprintln!(
        "{} power losses, {tears} torn, {claimed_new} with a checkpoint claiming new partitions' records",
        snapshots.len()
    );
    assert!(claimed_new > 0, "no power loss after a checkpoint: {seed}");
}
