//! A replica's side of the store (issue 39): the master's CommitLog bytes
//! placed at the same physical offsets (`CommitLog::append_copy`), read
//! for copying on the master (`CommitLog::read_for_copy`), and a
//! returning node's cut back to where its log and the master's part ways
//! (`tidelog_storage::cut`). What is held: the two logs are the same
//! bytes, and the replica serves what the master serves (records, queue
//! offsets, producers, transactions), after a crash too.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tidelog_storage::epochs::{common_end, Epochs};
use tidelog_storage::error::CopyProblem;
use tidelog_storage::{
    cut, AppendRecord, MarkerSpec, ProducerAppend, ProducerBatch, QueueOffset, Store, StoreConfig,
    StoreError,
};

const TOPICS: [&str; 2] = ["a", "b"];
const PARTITIONS: u32 = 2;
const SEGMENT_BYTES: u64 = 16 * 1024;

fn config(dir: &Path) -> StoreConfig {
    config_with_segments(dir, SEGMENT_BYTES)
}

/// A master's writes: plain batches over every partition, an idempotent
/// producer's batches and a transactional producer committing and
/// aborting, with values large enough to roll segments often.
struct Workload {
    idempotent: i64,
    transactional: i64,
    rng: Rng,
    sequences: HashMap<i64, i32>,
    /// The transactional producer's open transaction, if any.
    open: bool,
    written: u64,
    /// The idempotent producer's last batch, for a retry.
    last_idempotent: Option<(ProducerBatch, Vec<AppendRecord>)>,
}

const IDEMPOTENT: i64 = 10;
const TRANSACTIONAL: i64 = 20;

impl Workload {
    fn new(seed: u64) -> Workload {
        Workload::with_producers(seed, IDEMPOTENT, TRANSACTIONAL)
    }

    /// A workload whose producers are `idempotent` and `transactional`.
    fn with_producers(seed: u64, idempotent: i64, transactional: i64) -> Workload {
        Workload {
            idempotent,
            transactional,
            rng: Rng::new(seed),
            sequences: HashMap::new(),
            open: false,
            written: 0,
            last_idempotent: None,
        }
    }

    fn value(&mut self) -> String {
        let len = if self.rng.chance(10) {
            2000 + self.rng.below(3000)
        } else {
            1 + self.rng.below(200)
        };
        let tag = self.written;
        self.written += 1;
        format!("{tag}-{}", "x".repeat(len as usize))
    }

    fn producer(&mut self, id: i64, records: usize, transactional: bool) -> ProducerBatch {
        let seq = self.sequences.entry(id).or_insert(0);
        let p = ProducerBatch {
            producer_id: id,
            epoch: 0,
            base_sequence: *seq,
            transactional,
        };
        *seq += records as i32;
        p
    }

    /// One write of a random kind.
    fn step(&mut self, store: &Store) {
        match self.rng.below(10) {
            0..=4 => {
                let n = 1 + self.rng.below(5) as usize;
                let batch: Vec<AppendRecord> = (0..n)
                    .map(|_| {
                        let topic = TOPICS[self.rng.below(2) as usize];
                        let partition = self.rng.below(u64::from(PARTITIONS)) as u32;
                        let key = format!("k{}", self.rng.below(8));
                        record(topic, partition, Some(&key), Some(&self.value()))
                    })
                    .collect();
                store.append(&batch).unwrap();
            }
            5 | 6 => {
                let n = 1 + self.rng.below(3) as usize;
                let batch: Vec<AppendRecord> = (0..n)
                    .map(|_| record("a", 0, Some("idem"), Some(&self.value())))
                    .collect();
                let p = self.producer(self.idempotent, n, false);
                assert!(matches!(
                    store.append_as(&batch, u64::MAX, Some(&p)).unwrap(),
                    ProducerAppend::Written(_)
                ));
                self.last_idempotent = Some((p, batch));
            }
            7 | 8 => {
                let n = 1 + self.rng.below(3) as usize;
                let batch: Vec<AppendRecord> = (0..n)
                    .map(|_| record("b", 1, Some("txn"), Some(&self.value())))
                    .collect();
                let p = self.producer(self.transactional, n, true);
                store.append_as(&batch, u64::MAX, Some(&p)).unwrap();
                self.open = true;
            }
            _ if self.open => {
                let commit = self.rng.chance(50);
                let m = MarkerSpec {
                    producer_id: self.transactional,
                    epoch: 0,
                    commit,
                    coordinator_epoch: 1,
                };
                store
                    .append_marker(&Arc::from("b"), 1, m)
                    .unwrap()
                    .wait()
                    .unwrap();
                self.open = false;
            }
            _ => {}
        }
    }
}

/// A record as served: queue offset, key, value.
type Served = (u64, Option<Vec<u8>>, Option<Vec<u8>>);

/// What a node serves of one partition: its offsets, every record
/// (offset, key, value), the LSO, the aborted transactions below it and
/// the producers (id, epoch, last sequence).
#[derive(Debug, PartialEq, Eq)]
struct PartitionView {
    offsets: (u64, u64),
    records: Vec<Served>,
    lso: u64,
    aborted: Vec<(i64, u64)>,
    producers: Vec<(i64, i16, i32)>,
}

fn view(store: &Store) -> Vec<PartitionView> {
    // Everything its readers may see (up to a cluster's watermark).
    wait_for("the dispatcher", || {
        store.dispatched_position() >= store.committed_position()
    });
    let mut out = Vec::new();
    for topic in TOPICS {
        for partition in 0..PARTITIONS {
            let offsets = store.offsets(topic, partition);
            let mut records = Vec::new();
            let mut from = offsets.0;
            while from < offsets.1 {
                let r = store
                    .read(topic, partition, QueueOffset::new(from), 500, usize::MAX)
                    .unwrap();
                let Some(last) = r.records.last() else { break };
                from = last.queue_offset().get() + 1;
                records.extend(r.records.iter().map(|r| {
                    (
                        r.queue_offset().get(),
                        r.key().map(|k| k.to_vec()),
                        r.value().map(|v| v.to_vec()),
                    )
                }));
            }
            let lso = store.last_stable_offset(topic, partition);
            out.push(PartitionView {
                offsets,
                records,
                lso,
                aborted: store.aborted_transactions(topic, partition, 0, lso),
                producers: store
                    .producers(topic, partition)
                    .iter()
                    .map(|p| (p.producer_id, p.epoch, p.last_sequence))
                    .collect(),
            });
        }
    }
    out
}

/// The log's bytes as the copy reads them, from its first segment: every
/// run with its position.
fn log_bytes(store: &Store) -> Vec<(u64, Vec<u8>)> {
    let log = store.commit_log();
    let mut pos = log.min_offset();
    let mut out = Vec::new();
    while let Some(chunk) = log.read_for_copy(pos, 1 << 20).unwrap() {
        out.push((chunk.at, chunk.bytes.to_vec()));
        pos = chunk.next;
    }
    out
}

/// Copy everything `master` has past `replica`'s end, in runs of at most
/// `max_bytes` (chosen per run by `rng`, so runs end at every kind of
/// place). Returns the runs copied.
fn copy_all(master: &Store, replica: &Store, rng: &mut Rng) -> usize {
    let mut runs = 0;
    loop {
        let at = replica.commit_log().committed();
        let max_bytes = 1 + rng.below(8192) as usize;
        let Some(chunk) = master.commit_log().read_for_copy(at, max_bytes).unwrap() else {
            return runs;
        };
        assert_eq!(chunk.at, at);
        let copied = replica.append_copy(chunk.at, &chunk.bytes).unwrap();
        assert_eq!(copied.end, chunk.next, "the copy ends where the run does");
        runs += 1;
    }
}

fn assert_same(master: &Store, replica: &Store, when: &str) {
    assert_eq!(
        master.commit_log().committed(),
        replica.commit_log().committed(),
        "{when}: log ends"
    );
    assert!(
        log_bytes(master) == log_bytes(replica),
        "{when}: the logs hold different bytes"
    );
    assert_eq!(view(master), view(replica), "{when}: what the nodes serve");
}

#[test]
fn a_replica_copies_the_masters_log_byte_for_byte_and_serves_what_it_serves() {
    let seed = seed("replica_copy");
    let (m_dir, r_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Store::open(config(m_dir.path())).unwrap();
    let mut replica = Store::open(config(r_dir.path())).unwrap();
    let mut work = Workload::new(seed);
    let mut rng = Rng::new(seed ^ 0x5eed);
    let mut runs = 0;
    for round in 0..8 {
        for _ in 0..40 {
            work.step(&master);
        }
        runs += copy_all(&master, &replica, &mut rng);
        if round == 3 {
            // A crash of the replica mid-way: recovery rebuilds the same
            // state from its copy, and the copy goes on from its end.
            replica.close_uncleanly();
            replica = Store::open(config(r_dir.path())).unwrap();
        }
    }
    assert!(
        master.commit_log().segment_count() > 5,
        "the workload rolled segments"
    );
    assert!(runs > 20, "copied in many runs ({runs})");
    assert_same(&master, &replica, "after the copy");
    let served = view(&master);
    assert!(served.iter().any(|p| !p.aborted.is_empty()), "an abort");
    assert!(served.iter().any(|p| !p.producers.is_empty()), "producers");

    replica.close_uncleanly();
    let replica = Store::open(config(r_dir.path())).unwrap();
    assert_same(&master, &replica, "after the replica's crash");

    // The copied producer state is the master's: the idempotent
    // producer's next batch is taken on the replica (as on a new master),
    // and a retry of its last one is a duplicate there too.
    let (retry, retried) = work.last_idempotent.clone().expect("an idempotent batch");
    assert!(matches!(
        replica.append_as(&retried, u64::MAX, Some(&retry)).unwrap(),
        ProducerAppend::Duplicate(_)
    ));
    let next = work.producer(IDEMPOTENT, 1, false);
    let batch = [record("a", 0, Some("idem"), Some("after"))];
    assert!(matches!(
        replica.append_as(&batch, u64::MAX, Some(&next)).unwrap(),
        ProducerAppend::Written(_)
    ));
}

#[test]
fn bytes_that_fail_a_check_are_refused_whole_and_nothing_is_written() {
    let (m_dir, r_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Store::open(config(m_dir.path())).unwrap();
    let replica = Store::open(config(r_dir.path())).unwrap();
    for i in 0..3 {
        master
            .append(&[record("a", 0, None, Some(&format!("v{i}")))])
            .unwrap();
    }
    let chunk = master
        .commit_log()
        .read_for_copy(0, 1 << 20)
        .unwrap()
        .unwrap();
    let refused = |at: u64, bytes: &[u8]| match replica.append_copy(at, bytes) {
        Err(StoreError::CopyRefused { problem, .. }) => problem,
        other => panic!("not refused: {other:?}"),
    };
    // Not at the replica's end.
    assert_eq!(
        refused(7, &chunk.bytes),
        CopyProblem::NotAtEnd { log_end: 0 }
    );
    // A flipped byte anywhere: the CRC (or the header's own checks).
    for at in [0, 13, chunk.bytes.len() / 2, chunk.bytes.len() - 1] {
        let mut bad = chunk.bytes.to_vec();
        bad[at] ^= 0x40;
        assert!(
            matches!(
                refused(0, &bad),
                CopyProblem::Invalid(_) | CopyProblem::TornEntry { .. }
            ),
            "byte {at}"
        );
    }
    // Cut inside the last entry.
    assert!(matches!(
        refused(0, &chunk.bytes[..chunk.bytes.len() - 3]),
        CopyProblem::TornEntry { .. }
    ));
    // Zeros are not an entry.
    assert!(matches!(refused(0, &[0u8; 64]), CopyProblem::Invalid(_)));
    assert_eq!(replica.commit_log().committed(), 0, "nothing written");

    // A replica whose partition is elsewhere: same physical end, other
    // queue offsets (its own record in "a"-0 where the master wrote "b"-0).
    let (o_dir, x_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let other = Store::open(config(o_dir.path())).unwrap();
    let mine = Store::open(config(x_dir.path())).unwrap();
    other.append(&[record("b", 0, None, Some("v"))]).unwrap();
    other.append(&[record("a", 0, None, Some("v"))]).unwrap();
    mine.append(&[record("a", 0, None, Some("v"))]).unwrap();
    let first_len = mine.commit_log().committed();
    let rest = other
        .commit_log()
        .read_for_copy(first_len, 1 << 20)
        .unwrap()
        .unwrap();
    match mine.append_copy(rest.at, &rest.bytes) {
        Err(StoreError::CopyRefused {
            problem:
                CopyProblem::QueueOffset {
                    found: 0,
                    expected: 1,
                    ..
                },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(mine.commit_log().committed(), first_len);

    // Two nodes with different segment sizes part at the first roll.
    let (s_dir, l_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let small = Store::open(config(s_dir.path())).unwrap();
    let large = Store::open(config_with_segments(l_dir.path(), 2 * SEGMENT_BYTES)).unwrap();
    let big = "y".repeat(3000);
    while small.commit_log().segment_count() < 2 {
        small.append(&[record("a", 0, None, Some(&big))]).unwrap();
    }
    let mut pos = 0;
    loop {
        let chunk = small
            .commit_log()
            .read_for_copy(pos, 1 << 20)
            .unwrap()
            .unwrap();
        match large.append_copy(chunk.at, &chunk.bytes) {
            Ok(c) => pos = c.end,
            Err(StoreError::CopyRefused {
                problem: CopyProblem::SegmentEnd { .. },
                ..
            }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(pos < SEGMENT_BYTES, "refused at the first segment's end");
    assert_eq!(large.commit_log().committed(), pos);

    // Below the master's first segment (retention deleted it): gone.
    assert!(matches!(
        small.commit_log().read_for_copy(u64::MAX / 2, 100),
        Ok(None)
    ));
}

/// A master and a replica part ways: the replica copied up to `common`,
/// the master wrote more it never copied and died, the replica became
/// master in epoch 2 and wrote on. The old master returns, finds
/// `common` from the two epoch files, cuts there, copies from the new
/// master and ends with its log byte for byte and what it serves.
#[test]
fn a_returning_node_cuts_back_to_where_the_logs_part_and_copies_on() {
    let seed = seed("replica_cut");
    let (old_dir, new_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = Store::open(config(old_dir.path())).unwrap();
    let new = Store::open(config(new_dir.path())).unwrap();
    Epochs::load(old_dir.path()).unwrap().begin(1, 0).unwrap();
    Epochs::load(new_dir.path()).unwrap().begin(1, 0).unwrap();
    let mut work = Workload::new(seed);
    let mut rng = Rng::new(seed ^ 0xc07);
    for _ in 0..120 {
        work.step(&old);
    }
    copy_all(&old, &new, &mut rng);
    let common = new.commit_log().committed();
    let at_common = view(&new);

    // The old master writes on alone (a transaction left open too), then
    // dies; the replica takes over in epoch 2 and writes on.
    let mut old_work = Workload::with_producers(seed ^ 1, IDEMPOTENT + 1, TRANSACTIONAL + 1);
    for _ in 0..80 {
        old_work.step(&old);
    }
    let old_end = old.commit_log().committed();
    // A checkpoint past the coming cut: its positions, the producer-state
    // snapshot, `queue-ends` and `index-end` all cover bytes the cut drops.
    old.checkpoint().unwrap();
    old.close_uncleanly();
    Epochs::load(new_dir.path())
        .unwrap()
        .begin(2, common)
        .unwrap();
    for _ in 0..60 {
        work.step(&new);
    }

    // The old master's return: where the two logs part, from the epoch
    // files alone, then the cut at its next open.
    let mine = Epochs::load(old_dir.path()).unwrap();
    let theirs = Epochs::load(new_dir.path()).unwrap();
    let new_end = new.commit_log().committed();
    let part = common_end(mine.entries(), old_end, theirs.entries(), new_end);
    assert_eq!(part, common);
    cut::request(old_dir.path(), part).unwrap();
    assert_eq!(cut::pending(old_dir.path()).unwrap(), Some(part));
    let old = Store::open(config(old_dir.path())).unwrap();
    let done = old.recovery_report().cut.expect("the open cut the log");
    assert_eq!((done.requested, done.at), (part, part));
    assert!(done.dropped_bytes > 0);
    assert_eq!(cut::pending(old_dir.path()).unwrap(), None, "done once");
    assert_eq!(old.commit_log().committed(), common);
    assert_eq!(view(&old), at_common, "served what both held at the cut");
    assert_eq!(
        Epochs::load(old_dir.path()).unwrap().entries(),
        &theirs.entries()[..1],
        "the epochs past the cut are forgotten"
    );

    // It copies on from the new master, and takes its epochs with it.
    copy_all(&new, &old, &mut rng);
    Epochs::load(old_dir.path())
        .unwrap()
        .begin(2, common)
        .unwrap();
    assert_same(&new, &old, "after the copy");
    assert_eq!(
        Epochs::load(old_dir.path()).unwrap().entries(),
        Epochs::load(new_dir.path()).unwrap().entries()
    );
    old.close_uncleanly();
    let old = Store::open(config(old_dir.path())).unwrap();
    assert_same(&new, &old, "after a crash of the returned node");
}

#[test]
fn a_cut_inside_an_entry_goes_to_its_start_and_one_below_the_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    store.append(&[record("a", 0, None, Some("one"))]).unwrap();
    let second = store.commit_log().committed();
    store.append(&[record("a", 0, None, Some("two"))]).unwrap();
    let end = store.commit_log().committed();
    store.shutdown().unwrap();

    // Past the end: nothing to cut.
    cut::request(dir.path(), end + 100).unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    assert_eq!(store.commit_log().committed(), end);
    assert_eq!(store.recovery_report().cut.unwrap().dropped_bytes, 0);
    store.shutdown().unwrap();

    // Inside the second entry: at its start. A later, higher request
    // does not undo a lower one not yet applied.
    cut::request(dir.path(), second + 5).unwrap();
    cut::request(dir.path(), end).unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    let done = store.recovery_report().cut.unwrap();
    assert_eq!((done.requested, done.at), (second + 5, second));
    assert_eq!(store.commit_log().committed(), second);
    assert_eq!(served(&store, "a", 0), vec![(0, "one".to_string())]);
    assert_eq!(store.offsets("a", 0), (0, 1));
    // Offsets go on from the cut.
    store
        .append(&[record("a", 0, None, Some("three"))])
        .unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    assert_eq!(
        served(&store, "a", 0),
        vec![(0, "one".to_string()), (1, "three".to_string())]
    );
    store.shutdown().unwrap();

    // Below the log's first segment (retention deleted the head, recorded
    // as retention records it): refused, and the data dir untouched.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    let big = "z".repeat(3000);
    while store.commit_log().segment_count() < 3 {
        store.append(&[record("a", 0, None, Some(&big))]).unwrap();
    }
    let second = store.commit_log().segments()[1].base();
    store.shutdown().unwrap();
    tidelog_storage::log_head::LogHead::new(second)
        .store(dir.path())
        .unwrap();
    std::fs::remove_file(&segment_files(dir.path())[0]).unwrap();
    cut::request(dir.path(), second - 1).unwrap();
    for _ in 0..2 {
        match Store::open(config(dir.path())) {
            Err(StoreError::CutBelowLogStart {
                position,
                log_start,
            }) => assert_eq!((position + 1, log_start), (second, second)),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("opened"),
        }
    }
    assert_eq!(cut::pending(dir.path()).unwrap(), Some(second - 1));
}

/// A cluster's high watermark caps what readers see on a node (issue 39:
/// no reader sees a record a failover could take back), under both flush
/// modes; raising it makes the records visible, a lower one is ignored.
#[test]
fn readers_see_nothing_past_the_high_watermark() {
    for flush in [
        tidelog_storage::FlushMode::Async,
        tidelog_storage::FlushMode::Sync,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path());
        c.flush = flush;
        let store = Store::open(c).unwrap();
        let log = store.commit_log();
        assert_eq!(log.high_watermark(), u64::MAX, "a single node: no cap");
        log.cap_visible_at(0);
        store.append(&[record("a", 0, None, Some("one"))]).unwrap();
        let first_end = log.committed();
        store.append(&[record("a", 0, None, Some("two"))]).unwrap();
        assert!(
            !store.wait_dispatched(Duration::from_millis(200)),
            "the dispatcher stops at the cap"
        );
        assert_eq!(store.offsets("a", 0), (0, 0), "{flush:?}: nothing visible");
        log.set_high_watermark(first_end);
        wait_for("the first record", || store.offsets("a", 0) == (0, 1));
        assert_eq!(served(&store, "a", 0), vec![(0, "one".to_string())]);
        log.set_high_watermark(1);
        assert_eq!(log.high_watermark(), first_end, "never lowered");
        log.set_high_watermark(log.committed());
        assert!(store.wait_dispatched(Duration::from_secs(30)));
        assert_eq!(store.offsets("a", 0), (0, 2));
    }
}

/// What a node serves of each partition: its offsets and records.
fn served_records(store: &Store) -> Vec<((u64, u64), Vec<Served>)> {
    view(store)
        .into_iter()
        .map(|p| (p.offsets, p.records))
        .collect()
}

/// A cluster member's restart: what the watermark it kept does not cover
/// stays unindexed (no reader sees it: a failover may still take it back)
/// until the watermark comes past it again, while the copy goes on after
/// it (its queue offsets and aborted transactions count from the open).
/// Clean, after a crash, and after a crash that lost the kept file (the
/// checkpoint's indexed position stands in). Opened as a single node (a
/// new master opening again), the same data dir serves everything.
#[test]
fn a_restarted_member_serves_nothing_past_the_watermark_it_kept() {
    let seed = seed("kept_watermark");
    for (stop, lose_file) in [("clean", false), ("crash", false), ("crash", true)] {
        let (m_dir, r_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let member = || StoreConfig {
            cluster_member: true,
            ..config(r_dir.path())
        };
        let master = Store::open(config(m_dir.path())).unwrap();
        let replica = Store::open(member()).unwrap();
        let mut work = Workload::new(seed);
        let mut rng = Rng::new(seed ^ 0x4857);
        for _ in 0..120 {
            work.step(&master);
        }
        copy_all(&master, &replica, &mut rng);
        let mid = master.commit_log().committed();
        replica.commit_log().set_high_watermark(mid);
        let at_mid = served_records(&master);
        for _ in 0..120 {
            work.step(&master);
        }
        copy_all(&master, &replica, &mut rng);
        assert_eq!(
            served_records(&replica),
            at_mid,
            "{stop}: capped while running"
        );
        replica.checkpoint().unwrap();
        if stop == "clean" {
            replica.shutdown().unwrap();
        } else {
            replica.close_uncleanly();
        }
        if lose_file {
            std::fs::remove_file(
                r_dir
                    .path()
                    .join(tidelog_storage::high_watermark::FILE_NAME),
            )
            .unwrap();
        }

        let mut replica = Store::open(member()).unwrap();
        let held = replica.recovery_report().held_back_bytes;
        // From the first entry past the watermark: the same bytes, less
        // a segment's unused end when the watermark lies there.
        let tail = master.commit_log().committed() - mid;
        assert!(
            held > 0 && held <= tail && tail - held < SEGMENT_BYTES,
            "{stop}: the tail held back ({held} of {tail} bytes)"
        );
        assert_eq!(replica.commit_log().high_watermark(), mid);
        assert_eq!(
            served_records(&replica),
            at_mid,
            "{stop}, file lost {lose_file}: nothing past the kept watermark after the restart"
        );
        // The copy goes on at the master's queue offsets (a wrong one is
        // refused), and the watermark releases the tail and the rest.
        for _ in 0..60 {
            work.step(&master);
        }
        copy_all(&master, &replica, &mut rng);
        assert_eq!(served_records(&replica), at_mid, "{stop}: still capped");
        replica
            .commit_log()
            .set_high_watermark(master.commit_log().committed());
        assert_same(&master, &replica, "once the watermark covers the tail");

        // Copied past the watermark again, then opened as a new master
        // opens: every record indexed at once.
        for _ in 0..30 {
            work.step(&master);
        }
        copy_all(&master, &replica, &mut rng);
        replica.shutdown().unwrap();
        replica = Store::open(config(r_dir.path())).unwrap();
        assert_eq!(replica.recovery_report().held_back_bytes, 0);
        assert_eq!(replica.commit_log().high_watermark(), u64::MAX);
        assert_same(&master, &replica, "opened as a single node");
    }
}

/// A replica's store takes only its master's copy: every append of its
/// own is refused, so nothing local (a coordinator's marker, an expiry's
/// tombstone) makes its log part from the master's; it still counts as
/// ready, its writes being the master's to take.
#[test]
fn a_replica_refuses_its_own_appends_and_takes_the_copy() {
    let (m_dir, r_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Store::open(config(m_dir.path())).unwrap();
    let replica = Store::open(config(r_dir.path())).unwrap();
    replica.set_replica(true);
    assert!(replica.is_replica());
    assert!(matches!(
        replica.append(&[record("a", 0, None, Some("mine"))]),
        Err(StoreError::Replica)
    ));
    let m = MarkerSpec {
        producer_id: 1,
        epoch: 0,
        commit: true,
        coordinator_epoch: 0,
    };
    assert!(matches!(
        replica.append_marker(&Arc::from("a"), 0, m),
        Err(StoreError::Replica)
    ));
    assert!(replica.write_refusal().is_none(), "ready");
    master
        .append(&[record("a", 0, None, Some("theirs"))])
        .unwrap();
    copy_all(&master, &replica, &mut Rng::new(1));
    assert!(replica.wait_dispatched(Duration::from_secs(30)));
    assert_eq!(served(&replica, "a", 0), vec![(0, "theirs".to_string())]);
    // Promoted: its own appends go on after the copy.
    replica.set_replica(false);
    replica
        .append(&[record("a", 0, None, Some("mine"))])
        .unwrap();
    assert!(replica.wait_dispatched(Duration::from_secs(30)));
    assert_eq!(served(&replica, "a", 0).len(), 2);
}
