//! Seeded model test of compaction through the real store: random produce
//! (values and tombstones), rolls, cleaning passes (some with a small
//! offset map, so partial), clock jumps past `delete.retention.ms`, passes
//! that fail with an I/O error at a step of the swap and are retried,
//! clean restarts, kill -9 restarts, and crashes in the middle of a swap,
//! checked after every step that reads against a plain map of what was
//! produced:
//!
//! - the end offset is the number of records produced: offsets are never
//!   renumbered and never handed out twice;
//! - every key's latest record is served, until it is a tombstone whose
//!   `delete.retention.ms` has passed (and once it is gone, no older record
//!   of its key is served: a key never comes back);
//! - whatever else is served (superseded records the cleaner has not
//!   removed yet, nothing requires it to) is a record that was produced at
//!   that offset, byte for byte (a tombstone may gain its delete horizon);
//! - offsets are strictly increasing, and a fetch from any offset returns
//!   the first records at or after it;
//! - at the end, after passes until one covers the whole log, at most one
//!   record per key is left.
//!
//! Operators changing `segment.bytes` are in the mix too, so small
//! segments get cleaned in large groups.
//!
//! And transactions (docs/compaction.md, "Transactions"): a few
//! transactional producers write records of their open transaction, which
//! ends in a COMMIT or ABORT marker (an offset of its own, never copied).
//! A key's latest record is its newest plain or committed one; an open
//! transaction's records are always served (none is ever cleaned away);
//! an aborted transaction's may be served until a pass drops them, never
//! superseding anything, and none is left at the end.
//!
//! A run is decided by its seed alone: the clock is the model's (the
//! compacted logs and the cleaner read it; it only moves when the test
//! moves it), each pass is over one chosen partition (the others paused),
//! and a kill -9 comes once dispatch caught up (the replay still covers
//! everything since the last open, since the store checkpoints only at open
//! and shutdown here). A fixed set of seeds runs in CI (a few seconds in a
//! debug build), and they must reach every case (partial passes, expired
//! tombstones, recovery cuts, a failure at every swap step). Each seed is
//! printed before it runs; rerun one with `TIDELOG_TEST_SEED=<seed>` (and
//! `TIDELOG_MODEL_TRACE=1` to print every step), or try more with
//! `TIDELOG_TEST_SEEDS=<n>`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tidelog_cleaner::fault::{FaultPoint, Faults};
use tidelog_cleaner::{
    CleanerConfig, CompactTopicConfig, CompactedLogs, CompactedRecord, LogCleaner, OffsetMap,
    RunStats,
};
use tidelog_storage::retention::FixedDiskUsage;
use tidelog_storage::{
    AppendRecord, FlushMode, Header, MarkerSpec, ProducerAppend, ProducerBatch, Store, StoreConfig,
};

const TOPIC: &str = "table";
const PARTITIONS: u32 = 2;
const KEYS: u64 = 12;
const STEPS: usize = 300;
const DELETE_RETENTION_MS: i64 = 10_000;
/// `segment.bytes` choices: a few records, tens of them, all of them.
const SEGMENT_BYTES: [u64; 4] = [400, 1500, 4096, 1 << 20];
const BACKOFF_MS: u64 = 1_000;
/// Seeds run by default (CI).
const CI_SEEDS: u64 = 24;
/// Passes allowed for the final convergence (a small map needs many).
const FINAL_PASSES_MAX: usize = 2_000;
/// Transactional producers' ids.
const TXN_PRODUCERS: [i64; 3] = [100, 101, 102];

/// A tiny seeded PRNG (xorshift64*), so failures reproduce from the seed.
/// The generator of `storage/tests/common` (the test binaries of two crates
/// share no module), with `pick` and a seed spread added.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // Spread small seeds (1, 2, ...) over the state space.
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

/// What was produced at one offset.
#[derive(Debug)]
struct Produced {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp_ms: i64,
    physical_offset: u64,
    /// The model clock when it was produced.
    at_ms: i64,
    /// The transaction it belongs to (an index of `World::txns`).
    txn: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Open,
    Committed,
    Aborted,
}

/// One transaction of a producer in one partition.
#[derive(Debug)]
struct Txn {
    producer: i64,
    partition: u32,
    offsets: Vec<u64>,
    outcome: Outcome,
}

#[derive(Default)]
struct PartitionModel {
    /// Every record ever produced, by offset.
    records: BTreeMap<u64, Produced>,
    /// Key → offset of its newest record, plain or committed.
    latest: BTreeMap<Vec<u8>, u64>,
    /// The next offset the store hands out (markers take one too).
    end: u64,
    /// One past the last record copied (markers are not).
    copied_end: u64,
    /// The bytes first served at each offset (horizon cleared), which every
    /// later read must repeat.
    served: HashMap<u64, Bytes>,
}

impl PartitionModel {
    /// A record produced at `offset`, the next one the store hands out.
    fn note(&mut self, offset: u64, produced: Produced, context: &str) {
        assert_eq!(
            offset, self.end,
            "offsets are handed out once, in order: {context}"
        );
        self.end = offset + 1;
        self.copied_end = offset + 1;
        self.records.insert(offset, produced);
    }
}

/// Every way a pass can fail at a swap step: each point on its first
/// operation, and the second delete of old segments.
fn fault_plans() -> Vec<(FaultPoint, u64)> {
    let mut v: Vec<_> = FaultPoint::ALL.iter().map(|&p| (p, 0)).collect();
    v.push((FaultPoint::DeleteOld, 1));
    v
}

/// What the seeds exercised, so a change that makes the model test stop
/// reaching a case (no pass removes anything, no tombstone expires) fails
/// instead of passing vacuously.
#[derive(Debug, Default)]
struct Coverage {
    passes: u64,
    partial_passes: u64,
    records_removed: u64,
    /// Latest records that were tombstones past their retention and gone.
    tombstones_gone: u64,
    /// Restarts whose recovery cut a compacted log.
    recovery_cuts: u64,
    /// Passes that failed at each fault plan (index in `fault_plans`).
    failed_at: Vec<u64>,
    /// Records passes kept because their fingerprint collided (the
    /// colliding map's passes).
    collisions: u64,
    /// Transactions committed and aborted.
    commits: u64,
    aborts: u64,
    /// Aborted records a check found gone (a pass dropped them).
    aborted_gone: u64,
    /// Passes run while a transaction was open in their partition.
    passes_beside_open: u64,
}

struct World {
    seed: u64,
    coverage: Coverage,
    dir: tempfile::TempDir,
    /// The model clock: a fixed base an hour past the real time (so every
    /// record's store timestamp is in its past) plus what the test adds.
    base_ms: i64,
    skew: Arc<AtomicI64>,
    faults: Arc<Faults>,
    topic: CompactTopicConfig,
    map: OffsetMap,
    /// Some passes use a map whose fingerprints keep only a few bits, so
    /// that keys collide (a collision may keep extra records, never lose
    /// the newest of a key).
    colliding: OffsetMap,
    logs: Arc<CompactedLogs>,
    store: Option<Store>,
    cleaner: Option<LogCleaner>,
    model: Vec<PartitionModel>,
    seq: i64,
    step: usize,
    txns: Vec<Txn>,
    /// Each producer's open transaction (an index of `txns`).
    open: HashMap<i64, usize>,
    /// Each producer's next sequence in a partition.
    sequences: HashMap<(i64, u32), i32>,
}

fn store_config(dir: &std::path::Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 32 * 1024;
    c.consume_queue_units_per_file = 64;
    c.index_slots = 64;
    c.index_entries = 256;
    c.preallocate_next_segment = false;
    c.flush = FlushMode::Async;
    // Checkpoints only at open and shutdown: a kill -9 replays everything
    // since the last open through the compacted-log sink.
    c.flush_interval_ms = 3_600_000;
    // No retention pass either: it writes a checkpoint too, at a time the
    // seed does not decide.
    c.retention.check_interval_ms = 3_600_000;
    c.retention.disk = Arc::new(FixedDiskUsage::new(0.1));
    c
}

/// The test's directory: in memory where there is a tmpfs, since every swap
/// and flush fsyncs, and on a shared disk those fsyncs would take most of
/// the run (the model checks what is served, not what reaches a platter).
fn test_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

impl World {
    fn new(seed: u64, rng: &mut Rng) -> World {
        let dir = test_dir();
        let topic = CompactTopicConfig {
            segment_bytes: rng.pick(&SEGMENT_BYTES),
            min_cleanable_dirty_ratio: rng.pick(&[0.01, 0.3, 0.6]),
            delete_retention_ms: DELETE_RETENTION_MS,
            ..CompactTopicConfig::default()
        };
        // About 6 keys, 27 keys, or plenty: small maps make partial passes.
        let map = OffsetMap::new(rng.pick(&[140, 600, 1 << 16]), 0.9).unwrap();
        let colliding =
            OffsetMap::with_colliding_fingerprints(1 << 12, 0.9, rng.pick(&[0, 1, 3])).unwrap();
        let skew = Arc::new(AtomicI64::new(0));
        let base_ms = tidelog_storage::types::now_ms() + 3_600_000;
        let faults = Arc::new(Faults::default());
        let logs = open_logs(dir.path(), base_ms, &skew, &topic);
        let mut w = World {
            seed,
            coverage: Coverage {
                failed_at: vec![0; fault_plans().len()],
                ..Coverage::default()
            },
            dir,
            base_ms,
            skew,
            faults,
            topic,
            map,
            colliding,
            logs,
            store: None,
            cleaner: None,
            model: (0..PARTITIONS).map(|_| PartitionModel::default()).collect(),
            seq: 0,
            step: 0,
            txns: Vec::new(),
            open: HashMap::new(),
            sequences: HashMap::new(),
        };
        w.open_rest();
        w
    }

    fn now(&self) -> i64 {
        self.base_ms + self.skew.load(Ordering::SeqCst)
    }

    fn context(&self) -> String {
        format!(
            "seed {} step {} (rerun with TIDELOG_TEST_SEED={})",
            self.seed, self.step, self.seed
        )
    }

    /// As the server starts: compacted logs (declared compact), then the
    /// store with their sink, then the cleaner.
    fn open_rest(&mut self) {
        let store =
            Store::open_with_sinks(store_config(self.dir.path()), vec![self.logs.sink()]).unwrap();
        let cleaner = LogCleaner::new_with_faults(
            Arc::clone(&self.logs),
            self.dir.path().to_path_buf(),
            CleanerConfig {
                backoff_ms: BACKOFF_MS,
                ..CleanerConfig::default()
            },
            Arc::clone(store.commit_log()),
            Arc::clone(&self.faults),
        )
        .unwrap();
        self.store = Some(store);
        self.cleaner = Some(cleaner);
    }

    fn store(&self) -> &Store {
        self.store.as_ref().unwrap()
    }

    fn restart(&mut self, clean: bool) {
        if let Some(c) = self.cleaner.take() {
            c.stop();
        }
        // A kill -9 once dispatch caught up, so that what the replay finds
        // depends on the seed alone (the replay still covers everything
        // since the last open: the store checkpoints only at open and
        // shutdown here).
        self.dispatched();
        let store = self.store.take().unwrap();
        if clean {
            store.shutdown().unwrap();
        } else {
            store.close_uncleanly();
        }
        self.logs = open_logs(self.dir.path(), self.base_ms, &self.skew, &self.topic);
        self.open_rest();
        let cut = (0..PARTITIONS).any(|p| {
            self.logs
                .log(TOPIC, p)
                .is_some_and(|l| l.recovery_cut().is_some())
        });
        self.coverage.recovery_cuts += u64::from(cut);
    }

    /// Everything produced is in the compacted logs. `wait_dispatched`
    /// alone is not enough: the dispatcher publishes its position per
    /// entry, and the sink writes its pending copies at the end of the
    /// batch, a moment later.
    fn dispatched(&self) {
        assert!(
            self.store().wait_dispatched(Duration::from_secs(30)),
            "{}",
            self.context()
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        for (p, m) in self.model.iter().enumerate() {
            let want = m.copied_end;
            if want == 0 {
                continue;
            }
            while self
                .logs
                .log(TOPIC, p as u32)
                .is_none_or(|l| l.next_offset() < want)
            {
                assert!(
                    std::time::Instant::now() < deadline,
                    "partition {p} never got its copies: {}",
                    self.context()
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    fn produce(&mut self, rng: &mut Rng) {
        let n = 1 + rng.below(6);
        let mut batch = Vec::new();
        let mut pending = Vec::new();
        for _ in 0..n {
            self.seq += 1;
            let p = rng.below(u64::from(PARTITIONS)) as u32;
            let key = format!("key-{}", rng.below(KEYS)).into_bytes();
            let value = (!rng.chance(15)).then(|| {
                let len = rng.below(150) as usize;
                (0..len).map(|_| rng.next() as u8).collect::<Vec<u8>>()
            });
            let mut headers = vec![("seq".to_string(), Some(self.seq.to_string().into_bytes()))];
            if rng.chance(20) {
                headers.push(("h".to_string(), Some(vec![0, 255, 7])));
            }
            // A null header value survives cleaning as null.
            if rng.chance(20) {
                headers.push(("h".to_string(), None));
            }
            batch.push(append_record(p, &key, &value, &headers, self.seq));
            pending.push((p, key, value, headers, self.seq));
        }
        let out = self.store().append(&batch).unwrap();
        let now = self.now();
        let context = self.context();
        for (a, (p, key, value, headers, seq)) in out.iter().zip(pending) {
            let m = &mut self.model[p as usize];
            let offset = a.queue_offset.get();
            m.latest.insert(key.clone(), offset);
            m.note(
                offset,
                Produced {
                    key,
                    value,
                    headers,
                    timestamp_ms: seq,
                    physical_offset: a.physical_offset.get(),
                    at_ms: now,
                    txn: None,
                },
                &context,
            );
        }
    }

    /// A transactional producer writes a few records of its transaction
    /// (opening one in a random partition if it has none).
    fn txn_produce(&mut self, rng: &mut Rng) {
        let producer = rng.pick(&TXN_PRODUCERS);
        let txn = match self.open.get(&producer) {
            Some(&t) => t,
            None => {
                let partition = rng.below(u64::from(PARTITIONS)) as u32;
                self.txns.push(Txn {
                    producer,
                    partition,
                    offsets: Vec::new(),
                    outcome: Outcome::Open,
                });
                self.open.insert(producer, self.txns.len() - 1);
                self.txns.len() - 1
            }
        };
        let p = self.txns[txn].partition;
        let n = 1 + rng.below(4) as usize;
        let mut batch = Vec::new();
        let mut pending = Vec::new();
        for _ in 0..n {
            self.seq += 1;
            let key = format!("key-{}", rng.below(KEYS)).into_bytes();
            let value = (!rng.chance(15)).then(|| vec![rng.next() as u8; rng.below(60) as usize]);
            let headers = vec![("seq".to_string(), Some(self.seq.to_string().into_bytes()))];
            batch.push(append_record(p, &key, &value, &headers, self.seq));
            pending.push((key, value, headers, self.seq));
        }
        let sequence = self.sequences.entry((producer, p)).or_insert(0);
        let spec = ProducerBatch {
            producer_id: producer,
            epoch: 0,
            base_sequence: *sequence,
            transactional: true,
        };
        *sequence += n as i32;
        let out = match self.store().append_as(&batch, u64::MAX, Some(&spec)) {
            Ok(ProducerAppend::Written(out)) => out,
            other => panic!("transactional append: {other:?}: {}", self.context()),
        };
        trace(|| format!("txn {txn} of producer {producer} in {p}: {n} records"));
        let now = self.now();
        let context = self.context();
        for (a, (key, value, headers, seq)) in out.iter().zip(pending) {
            let offset = a.queue_offset.get();
            self.model[p as usize].note(
                offset,
                Produced {
                    key,
                    value,
                    headers,
                    timestamp_ms: seq,
                    physical_offset: a.physical_offset.get(),
                    at_ms: now,
                    txn: Some(txn),
                },
                &context,
            );
            self.txns[txn].offsets.push(offset);
        }
    }

    /// An open transaction ends: its marker, COMMIT or ABORT.
    fn txn_end(&mut self, producer: i64, commit: bool) {
        let Some(txn) = self.open.remove(&producer) else {
            return;
        };
        let p = self.txns[txn].partition;
        let marker = MarkerSpec {
            producer_id: producer,
            epoch: 0,
            commit,
            coordinator_epoch: 0,
        };
        let offset = self
            .store()
            .append_marker(&Arc::from(TOPIC), p, marker)
            .and_then(|m| m.wait())
            .unwrap_or_else(|e| panic!("marker: {e}: {}", self.context()))
            .queue_offset
            .get();
        trace(|| format!("txn {txn} of producer {producer} in {p}: commit {commit}"));
        let context = self.context();
        let m = &mut self.model[p as usize];
        assert_eq!(offset, m.end, "a marker takes the next offset: {context}");
        m.end = offset + 1;
        let t = &mut self.txns[txn];
        if commit {
            t.outcome = Outcome::Committed;
            self.coverage.commits += 1;
            // Newer than the key's latest only where no plain record came
            // after it.
            for &o in &t.offsets {
                let key = m.records[&o].key.clone();
                let latest = m.latest.entry(key).or_insert(o);
                *latest = (*latest).max(o);
            }
        } else {
            t.outcome = Outcome::Aborted;
            self.coverage.aborts += 1;
        }
    }

    /// The outcome of the transaction of the record at `offset`, `None`
    /// for a plain record.
    fn outcome(&self, p: u32, offset: u64) -> Option<Outcome> {
        let txn = self.model[p as usize].records[&offset].txn?;
        Some(self.txns[txn].outcome)
    }

    /// One record served at its offset: produced there, byte for byte.
    fn check_record(&mut self, p: u32, r: &CompactedRecord) {
        let context = self.context();
        let m = &mut self.model[p as usize];
        let Some(want) = m.records.get(&r.offset.get()) else {
            panic!("offset {} was never produced: {context}", r.offset);
        };
        let what = format!("partition {p} offset {}: {context}", r.offset);
        assert_eq!(
            r.producer().map(|p| p.id),
            want.txn.map(|t| self.txns[t].producer),
            "a transaction's record carries its producer: {what}"
        );
        assert_eq!(r.key().as_deref(), Some(want.key.as_slice()), "{what}");
        assert_eq!(r.value().map(|v| v.to_vec()), want.value, "{what}");
        assert_eq!(r.timestamp_ms, want.timestamp_ms, "{what}");
        assert_eq!(r.physical_offset.get(), want.physical_offset, "{what}");
        let headers: Vec<_> = r
            .headers()
            .into_iter()
            .map(|h| (h.name, h.value.map(|v| v.to_vec())))
            .collect();
        assert_eq!(headers, want.headers, "{what}");
        let bytes = if r.is_tombstone() {
            // Stamped by the first pass that kept it: never earlier than
            // delete.retention.ms after it was produced.
            assert!(
                r.delete_horizon_ms == 0 || r.delete_horizon_ms >= want.at_ms + DELETE_RETENTION_MS,
                "horizon {} of a tombstone produced at {}: {what}",
                r.delete_horizon_ms,
                want.at_ms
            );
            r.with_delete_horizon(0).raw().clone()
        } else {
            r.raw().clone()
        };
        let first = m
            .served
            .entry(r.offset.get())
            .or_insert_with(|| bytes.clone());
        assert_eq!(*first, bytes, "the same bytes every time: {what}");
    }

    /// Whether the model requires `offset` (a key's latest record) to be
    /// served now: always, except a tombstone past its retention (which
    /// may or may not have been removed yet).
    fn required(&self, p: u32, offset: u64) -> bool {
        let r = &self.model[p as usize].records[&offset];
        r.value.is_some() || self.now() < r.at_ms + DELETE_RETENTION_MS
    }

    /// The whole partition against the model.
    fn check_partition(&mut self, p: u32) -> Vec<CompactedRecord> {
        self.dispatched();
        let context = self.context();
        let Some(log) = self.logs.log(TOPIC, p) else {
            assert!(self.model[p as usize].records.is_empty(), "{context}");
            return Vec::new();
        };
        assert_eq!(
            log.next_offset(),
            self.model[p as usize].copied_end,
            "the end offset is one past the last record produced: {context}"
        );
        let all = log.read(0, usize::MAX, usize::MAX).unwrap();
        for w in all.windows(2) {
            assert!(
                w[0].offset < w[1].offset,
                "{} then {}: {context}",
                w[0].offset,
                w[1].offset
            );
        }
        for r in &all {
            self.check_record(p, r);
        }
        // Newest plain or committed record of each key; every open
        // transaction's record is there.
        let mut newest_served: HashMap<Vec<u8>, u64> = HashMap::new();
        for r in &all {
            match self.outcome(p, r.offset.get()) {
                None | Some(Outcome::Committed) => {
                    newest_served.insert(r.key().unwrap().to_vec(), r.offset.get());
                }
                Some(Outcome::Open | Outcome::Aborted) => {}
            }
        }
        let served: std::collections::HashSet<u64> = all.iter().map(|r| r.offset.get()).collect();
        for t in self.txns.iter().filter(|t| t.partition == p) {
            for o in &t.offsets {
                match t.outcome {
                    Outcome::Open => assert!(
                        served.contains(o),
                        "partition {p}: record {o} of an open transaction is gone: {context}"
                    ),
                    Outcome::Aborted if !served.contains(o) => self.coverage.aborted_gone += 1,
                    _ => {}
                }
            }
        }
        let latest: Vec<(Vec<u8>, u64)> = self.model[p as usize]
            .latest
            .iter()
            .map(|(k, &o)| (k.clone(), o))
            .collect();
        for (key, offset) in latest {
            let shown = String::from_utf8_lossy(&key).into_owned();
            match newest_served.get(&key) {
                Some(&served) => assert_eq!(
                    served, offset,
                    "partition {p} key {shown}: its newest record served is not its latest: {context}"
                ),
                None => {
                    assert!(
                        !self.required(p, offset),
                        "partition {p} key {shown}: latest record {offset} is missing: {context}"
                    );
                    self.coverage.tombstones_gone += 1;
                }
            }
        }
        all
    }

    /// A fetch from a random offset: the first records at or after it.
    fn check_fetch(&mut self, p: u32, rng: &mut Rng) {
        let all = self.check_partition(p);
        let Some(log) = self.logs.log(TOPIC, p) else {
            return;
        };
        let end = log.next_offset();
        let from = rng.below(end + 2);
        let max_records = 1 + rng.below(20) as usize;
        let max_bytes = rng.pick(&[1, 300, 4096, usize::MAX]);
        let got = log.read(from, max_records, max_bytes).unwrap();
        let want: Vec<u64> = all
            .iter()
            .map(|r| r.offset.get())
            .filter(|&o| o >= from)
            .take(got.len().max(1))
            .collect();
        let got_offsets: Vec<u64> = got.iter().map(|r| r.offset.get()).collect();
        if got.is_empty() {
            assert!(
                want.is_empty(),
                "fetch from {from} found nothing: {}",
                self.context()
            );
        } else {
            assert_eq!(got_offsets, want, "fetch from {from}: {}", self.context());
        }
        assert!(got.len() <= max_records);
        for r in &got {
            self.check_record(p, r);
        }
    }

    fn roll(&self, p: u32) {
        self.dispatched();
        if let Some(log) = self.logs.log(TOPIC, p) {
            log.roll(self.now()).unwrap();
        }
    }

    /// One pass over partition `p` alone (the others paused, so which log
    /// the cleaner picks does not depend on its map's iteration order).
    fn pass_on(
        &mut self,
        p: u32,
        force: bool,
        roll: bool,
        colliding: bool,
    ) -> tidelog_cleaner::Result<Option<RunStats>> {
        let cleaner = self.cleaner.as_ref().unwrap();
        let others: Vec<u32> = (0..PARTITIONS).filter(|&o| o != p).collect();
        for &o in &others {
            cleaner.pause(TOPIC, o);
        }
        if force {
            cleaner.request(TOPIC, roll).unwrap();
        }
        let map = if colliding {
            &mut self.colliding
        } else {
            &mut self.map
        };
        let res = cleaner.clean_once(map);
        for &o in &others {
            cleaner.resume(TOPIC, o);
        }
        trace(|| {
            format!("pass on {p} (forced {force}, roll {roll}, colliding {colliding}): {res:?}")
        });
        if let Ok(Some((_, _, stats))) = &res {
            self.coverage.passes += 1;
            self.coverage.passes_beside_open +=
                u64::from(self.open.values().any(|&t| self.txns[t].partition == p));
            self.coverage.collisions += stats.collisions;
            self.coverage.partial_passes += u64::from(stats.partial);
            self.coverage.records_removed += stats.records_removed;
        }
        res.map(|ran| ran.map(|(_, _, stats)| stats))
    }

    /// One pass (maybe forced), which must not fail.
    fn clean(&mut self, p: u32, rng: &mut Rng) {
        self.dispatched();
        let force = rng.chance(40);
        let roll = rng.chance(50);
        let colliding = rng.chance(25);
        if let Err(e) = self.pass_on(p, force, roll, colliding) {
            panic!("a pass failed: {e}: {}", self.context());
        }
    }

    /// A forced pass that fails at `plan`'s step (if it gets there).
    fn failing_pass(&mut self, p: u32, plan: (FaultPoint, u64)) {
        self.dispatched();
        self.faults.fail_after(plan.0, plan.1);
        trace(|| format!("fail at {plan:?}"));
        if self.pass_on(p, true, true, false).is_err() {
            let i = fault_plans().iter().position(|&q| q == plan).unwrap();
            self.coverage.failed_at[i] += 1;
        }
        self.faults.heal();
    }

    /// Passes until each partition had one that covered all its records
    /// (not partial), after rolling the active segments.
    fn clean_to_the_end(&mut self) {
        self.dispatched();
        for p in 0..PARTITIONS {
            if self.logs.log(TOPIC, p).is_none() {
                continue;
            }
            let mut roll = true;
            for passes in 0.. {
                assert!(
                    passes < FINAL_PASSES_MAX,
                    "did not converge: {}",
                    self.context()
                );
                match self.pass_on(p, true, roll, false) {
                    Ok(Some(stats)) if !stats.partial => break,
                    Ok(_) => {}
                    Err(e) => panic!("a pass failed: {e}: {}", self.context()),
                }
                roll = false;
            }
        }
    }
}

/// The record to append of what the model notes as produced.
fn append_record(
    partition: u32,
    key: &[u8],
    value: &Option<Vec<u8>>,
    headers: &[(String, Option<Vec<u8>>)],
    seq: i64,
) -> AppendRecord {
    AppendRecord {
        topic: Arc::from(TOPIC),
        partition,
        key: Some(Bytes::copy_from_slice(key)),
        value: value.clone().map(Bytes::from),
        headers: headers
            .iter()
            .map(|(name, v)| Header {
                name: name.clone(),
                value: v.clone().map(Bytes::from),
            })
            .collect(),
        timestamp_ms: Some(seq),
    }
}

/// With `TIDELOG_MODEL_TRACE` set, print what the test does.
fn trace(what: impl FnOnce() -> String) {
    if std::env::var_os("TIDELOG_MODEL_TRACE").is_some() {
        eprintln!("{}", what());
    }
}

fn open_logs(
    dir: &std::path::Path,
    base_ms: i64,
    skew: &Arc<AtomicI64>,
    topic: &CompactTopicConfig,
) -> Arc<CompactedLogs> {
    let skew = Arc::clone(skew);
    let logs = CompactedLogs::open_with_clock(
        dir,
        Arc::new(move || base_ms + skew.load(Ordering::SeqCst)),
    )
    .unwrap();
    logs.set_topic(TOPIC, topic.clone());
    logs
}

fn run_seed(seed: u64) -> Coverage {
    eprintln!("compaction model: seed {seed} (rerun with TIDELOG_TEST_SEED={seed})");
    let mut rng = Rng::new(seed);
    let mut w = World::new(seed, &mut rng);
    let plans = fault_plans();
    let mut crashes = 0;
    let mut failures = 0;
    for step in 0..STEPS {
        w.step = step;
        let p = rng.below(u64::from(PARTITIONS)) as u32;
        let op = rng.below(100);
        trace(|| format!("step {step}: op {op}, partition {p}"));
        match op {
            0..=29 => w.produce(&mut rng),
            30..=35 => w.txn_produce(&mut rng),
            36..=39 => {
                let producer = rng.pick(&TXN_PRODUCERS);
                w.txn_end(producer, rng.chance(60));
            }
            40..=51 => w.check_fetch(p, &mut rng),
            52..=54 => w.roll(p),
            55..=56 => {
                // An operator changes segment.bytes: small segments already
                // written are then cleaned in large groups, or the other
                // way round.
                w.topic.segment_bytes = rng.pick(&SEGMENT_BYTES);
                w.logs.set_topic(TOPIC, w.topic.clone());
            }
            57..=63 => {
                w.skew.fetch_add(
                    rng.below(DELETE_RETENTION_MS as u64 * 3 / 2) as i64,
                    Ordering::SeqCst,
                );
            }
            64..=79 => w.clean(p, &mut rng),
            80..=84 => {
                // An I/O error mid-swap; the process goes on, and a pass
                // retries: at once, or after whatever comes next.
                w.failing_pass(p, plans[failures % plans.len()]);
                failures += 1;
                if rng.chance(50) {
                    w.clean(p, &mut rng);
                }
                w.check_partition(p);
            }
            85..=89 => {
                // Killed in the middle of a swap, then started again.
                w.failing_pass(p, plans[crashes % plans.len()]);
                crashes += 1;
                w.restart(false);
                w.check_partition(p);
            }
            90..=94 => {
                w.restart(false);
                w.check_partition(p);
            }
            _ => {
                w.restart(true);
                w.check_partition(p);
            }
        }
    }
    w.step = STEPS;
    for p in 0..PARTITIONS {
        w.check_partition(p);
    }
    // Every transaction ends, so nothing holds the cleaner back.
    for producer in TXN_PRODUCERS {
        let commit = rng.chance(50);
        w.txn_end(producer, commit);
    }
    w.clean_to_the_end();
    for p in 0..PARTITIONS {
        let all = w.check_partition(p);
        let mut per_key: HashMap<Vec<u8>, usize> = HashMap::new();
        for r in &all {
            assert_ne!(
                w.outcome(p, r.offset.get()),
                Some(Outcome::Aborted),
                "partition {p}: aborted record {} left after cleaning to the end: {}",
                r.offset,
                w.context()
            );
            *per_key.entry(r.key().unwrap().to_vec()).or_default() += 1;
        }
        assert!(
            per_key.values().all(|&n| n == 1),
            "partition {p}: one record per key after cleaning to the end: {}",
            w.context()
        );
    }
    // And it all survives one more restart.
    w.restart(true);
    for p in 0..PARTITIONS {
        w.check_partition(p);
    }
    w.coverage
}

#[test]
fn random_produce_clean_crash_and_fetch_match_the_model() {
    let seeds: Vec<u64> = match std::env::var("TIDELOG_TEST_SEED") {
        Ok(s) => vec![s.parse().expect("TIDELOG_TEST_SEED is a number")],
        Err(_) => {
            let n = std::env::var("TIDELOG_TEST_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(CI_SEEDS);
            (1..=n).collect()
        }
    };
    let several = seeds.len() >= CI_SEEDS as usize;
    let mut total = Coverage {
        failed_at: vec![0; fault_plans().len()],
        ..Coverage::default()
    };
    for seed in seeds {
        let c = run_seed(seed);
        total.passes += c.passes;
        total.partial_passes += c.partial_passes;
        total.records_removed += c.records_removed;
        total.tombstones_gone += c.tombstones_gone;
        total.recovery_cuts += c.recovery_cuts;
        total.collisions += c.collisions;
        total.commits += c.commits;
        total.aborts += c.aborts;
        total.aborted_gone += c.aborted_gone;
        total.passes_beside_open += c.passes_beside_open;
        for (t, n) in total.failed_at.iter_mut().zip(c.failed_at) {
            *t += n;
        }
    }
    eprintln!("compaction model: {total:?}");
    if several {
        // The CI seeds reach every case the model is for.
        assert!(total.passes > 0 && total.partial_passes > 0, "{total:?}");
        assert!(
            total.records_removed > 0 && total.tombstones_gone > 0,
            "{total:?}"
        );
        assert!(total.recovery_cuts > 0, "{total:?}");
        assert!(total.collisions > 0, "{total:?}");
        assert!(total.commits > 0 && total.aborts > 0, "{total:?}");
        assert!(
            total.aborted_gone > 0 && total.passes_beside_open > 0,
            "{total:?}"
        );
        assert!(total.failed_at.iter().all(|&n| n > 0), "{total:?}");
    }
}
