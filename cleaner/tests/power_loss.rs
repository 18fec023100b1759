//! Power loss, simulated: writers produce to a delete and a compact topic
//! while the cleaner and retention run; at a random moment the test takes
//! the data directory's *durable image* (what was fsynced or msynced, with
//! names as of their directory's last fsync: `tidelog_storage::durability`),
//! optionally tearing one unsynced page, and opens a store, with the
//! compacted logs as its sink (as the server wires it), on that image alone.
//! Each round runs several such crashes back to back, each era starting from
//! the previous era's image.
//!
//! After every crash it checks:
//! - the store opens (strict recovery);
//! - `flush: sync`: every record acknowledged before the snapshot is served
//!   unchanged (offset, key, value, headers); `flush: async`: every
//!   acknowledged record below the CommitLog's flushed position at the
//!   snapshot is; in both modes every record served before the crash still
//!   is (unless retention deleted its segment or the cleaner superseded it);
//! - every record served is one a writer attempted, whole, at a queue offset
//!   that follows the previous one (the ConsumeQueue), and every IndexFile
//!   hit is such a record with the key asked for;
//! - every compacted record is one the CommitLog serves at its offset (or
//!   one retention deleted there), and every record the CommitLog serves of
//!   the compact topic is in the compacted log or superseded by its key.
//!
//! Seeded: the seed is printed; rerun with `TIDELOG_TEST_SEED=<seed>`.
//! `TIDELOG_POWER_LOSS_ROUNDS` sets the number of rounds.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

#[path = "../../storage/tests/common/log_capture.rs"]
mod log_capture;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use log_capture::logged;
use tidelog_cleaner::{CleanerConfig, CompactTopicConfig, CompactedLogs, LogCleaner, OffsetMap};
use tidelog_storage::durability::image::{self, Tear};
use tidelog_storage::retention::FixedDiskUsage;
use tidelog_storage::test_rng::SplitMix64 as Rng;
use tidelog_storage::{AppendRecord, FlushMode, Header, QueueOffset, Store, StoreConfig, Trigger};

const DELETE_TOPIC: &str = "events";
const DELETE_PARTITIONS: u32 = 2;
const COMPACT_TOPIC: &str = "users";
const KEYS: u64 = 8;
const ERAS_PER_ROUND: usize = 4;
/// 200 power losses in CI (about 25 s of a loaded 2-core machine).
const DEFAULT_ROUNDS: usize = 50;
const WRITERS: usize = 2;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// What a writer tried to append, by the id in its `id` header.
#[derive(Clone, Debug)]
struct Attempt {
    topic: &'static str,
    partition: u32,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<Header>,
}

/// A record acknowledged by `Store::append`.
struct Acked {
    id: String,
    partition: u32,
    topic: &'static str,
    offset: u64,
    physical: u64,
    physical_end: u64,
}

#[derive(Default)]
struct Shared {
    attempts: Mutex<HashMap<String, Attempt>>,
    acked: Mutex<Vec<Acked>>,
    stop: AtomicBool,
    coverage: Coverage,
}

/// What a run exercised, so a change that makes the test check nothing
/// fails it.
#[derive(Default, Debug)]
struct Coverage {
    power_losses: AtomicU64,
    tears: AtomicU64,
    promised_records: AtomicU64,
    cleaned_records_removed: AtomicU64,
    retention_segments_deleted: AtomicU64,
}

/// A record the model holds durable: the store must serve it after the next
/// crash unless retention or the cleaner removed it legitimately.
#[derive(Clone, Debug)]
struct Durable {
    id: String,
    physical: u64,
}

/// Per partition, queue offset → record known to be durable; for the
/// compact topic also its compacted log (offset → id).
#[derive(Default)]
struct Model {
    log: HashMap<(&'static str, u32), BTreeMap<u64, Durable>>,
    compacted: BTreeMap<u64, String>,
}

fn partitions() -> Vec<(&'static str, u32)> {
    let mut v: Vec<_> = (0..DELETE_PARTITIONS).map(|p| (DELETE_TOPIC, p)).collect();
    v.push((COMPACT_TOPIC, 0));
    v
}

fn store_config(dir: &Path, flush: FlushMode) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    // Tiny files: rolls of every file type within a few hundred records.
    c.commitlog_segment_bytes = 16 * 1024;
    c.max_message_bytes = 2 * 1024;
    c.consume_queue_units_per_file = 64;
    c.index_slots = 16;
    c.index_entries = 128;
    c.preallocate_next_segment = false;
    c.flush = flush;
    c.flush_interval_ms = 5;
    // Power losses land in checkpoints under `flush: sync` too.
    c.sync_checkpoint_interval_ms = 5;
    // The store's own deadlines are not under test here: on a loaded
    // machine the durable image's syncs can hold a sync append past the
    // 5 s default, which the store rightly answers with FlushTimedOut and
    // the writers would take for a failure (seen once under a full test
    // run beside other builds: 218 s instead of 14).
    c.sync_flush_timeout_ms = 300_000;
    c.dispatch_stall_ms = 300_000;
    c.retention.disk = Arc::new(FixedDiskUsage::new(0.1));
    // A forced pass may delete every segment; unpaced, it ends within the
    // era instead of holding the crash up.
    c.retention.pause_between_deletes_ms = 0;
    c
}

fn compact_config() -> CompactTopicConfig {
    CompactTopicConfig {
        segment_bytes: 4096,
        min_cleanable_dirty_ratio: 0.0,
        min_compaction_lag_ms: 0,
        ..CompactTopicConfig::default()
    }
}

/// Open as the server does: compacted logs first, the compact topic declared,
/// then the store with the compacted logs as its sink (recovery replays into
/// them).
///
/// A power loss loses no file: what it takes is past what the checkpoint
/// claims, so recovery must not report a lost ConsumeQueue file, IndexFile
/// or CommitLog head (`queue-ends`, `index-end`, `log-head`).
fn open(dir: &Path, flush: FlushMode) -> Result<(Arc<CompactedLogs>, Store), String> {
    let logs = CompactedLogs::open(dir).map_err(|e| format!("compacted logs: {e}"))?;
    logs.set_topic(COMPACT_TOPIC, compact_config());
    let (store, log) =
        logged(|| Store::open_with_sinks(store_config(dir, flush), vec![logs.sink()]));
    let store = store.map_err(|e| format!("store: {e}"))?;
    for lost in [
        "consume queue file missing",
        "IndexFile missing",
        "LOST DATA",
    ] {
        if log.contains(lost) {
            return Err(format!("a power loss was reported as a lost file:\n{log}"));
        }
    }
    Ok((logs, store))
}

fn writer(store: &Store, shared: &Shared, id_prefix: String, mut rng: Rng) {
    let mut seq = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let mut batch = Vec::new();
        let mut ids = Vec::new();
        for _ in 0..=rng.below(4) {
            let id = format!("{id_prefix}s{seq}");
            seq += 1;
            let compact = rng.one_in(2);
            let (topic, partition) = if compact {
                (COMPACT_TOPIC, 0)
            } else {
                (DELETE_TOPIC, rng.below(DELETE_PARTITIONS as u64) as u32)
            };
            let key =
                (compact || !rng.one_in(4)).then(|| Bytes::from(format!("k{}", rng.below(KEYS))));
            let value = (!compact || !rng.one_in(6)).then(|| {
                let len = rng.below(400) as usize;
                Bytes::from(format!("{id}:").repeat(len / (id.len() + 1) + 1))
            });
            let mut headers = vec![Header {
                name: "id".into(),
                value: Some(Bytes::from(id.clone())),
            }];
            if rng.one_in(3) {
                headers.push(Header {
                    name: "extra".into(),
                    value: Some(Bytes::from(vec![
                        rng.below(256) as u8;
                        rng.below(20) as usize
                    ])),
                });
            }
            let attempt = Attempt {
                topic,
                partition,
                key,
                value,
                headers,
            };
            batch.push(AppendRecord {
                topic: Arc::from(topic),
                partition,
                key: attempt.key.clone(),
                value: attempt.value.clone(),
                headers: attempt.headers.clone(),
                timestamp_ms: Some(1_700_000_000_000),
            });
            shared.attempts.lock().unwrap().insert(id.clone(), attempt);
            ids.push(id);
        }
        let appended = store
            .append(&batch)
            .unwrap_or_else(|e| panic!("append failed: {e}"));
        let mut acked = shared.acked.lock().unwrap();
        for ((id, r), a) in ids.into_iter().zip(&batch).zip(appended) {
            acked.push(Acked {
                id,
                topic: if &*r.topic == COMPACT_TOPIC {
                    COMPACT_TOPIC
                } else {
                    DELETE_TOPIC
                },
                partition: r.partition,
                offset: a.queue_offset.get(),
                physical: a.physical_offset.get(),
                physical_end: a.physical_offset.get() + u64::from(a.size),
            });
        }
    }
}

/// The `id` header of a record.
fn id_of(headers: &[Header]) -> Option<String> {
    let h = headers.iter().find(|h| h.name == "id")?;
    String::from_utf8(h.value.as_ref()?.to_vec()).ok()
}

/// Checks one reopened store against the model, then makes everything it
/// serves the model (it is all on disk now).
struct Checker<'a> {
    store: &'a Store,
    logs: &'a CompactedLogs,
    attempts: &'a HashMap<String, Attempt>,
    context: &'a str,
}

impl Checker<'_> {
    fn fail(&self, what: String) -> ! {
        let compacted = self.logs.log(COMPACT_TOPIC, 0).map(|l| {
            let segments: Vec<_> = l
                .segments()
                .iter()
                .map(|s| (s.base_offset(), s.len()))
                .collect();
            format!(
                "next {}, segments (base, bytes) {segments:?}",
                l.next_offset()
            )
        });
        panic!(
            "{what}\n{}\nrecovery: {:?}\ncompacted log: {compacted:?}",
            self.context,
            self.store.recovery_report(),
        )
    }

    /// `id` is an attempt for `(topic, partition)` with exactly these fields.
    fn whole(
        &self,
        topic: &str,
        partition: u32,
        key: Option<Bytes>,
        value: Option<Bytes>,
        headers: &[Header],
        where_: &str,
    ) -> String {
        let Some(id) = id_of(headers) else {
            self.fail(format!(
                "{where_}: a record without an id header: {headers:?}"
            ));
        };
        let Some(a) = self.attempts.get(&id) else {
            self.fail(format!("{where_}: id {id} was never attempted"));
        };
        if a.topic != topic || a.partition != partition {
            self.fail(format!(
                "{where_}: {id} was written to {}/{}",
                a.topic, a.partition
            ));
        }
        if a.key != key || a.value != value || a.headers != headers {
            self.fail(format!(
                "{where_}: {id} is served changed: key {key:?} value {value:?} headers {headers:?}, written {a:?}"
            ));
        }
        id
    }

    /// Every record of a partition the ConsumeQueue serves, checked whole.
    fn served(&self, topic: &'static str, partition: u32) -> BTreeMap<u64, Durable> {
        let (min, max) = self.store.offsets(topic, partition);
        let mut out = BTreeMap::new();
        let mut from = min;
        while from < max {
            let read = self
                .store
                .read(topic, partition, QueueOffset::new(from), 500, usize::MAX)
                .unwrap_or_else(|e| self.fail(format!("{topic}/{partition} read at {from}: {e}")));
            if read.records.is_empty() {
                self.fail(format!(
                    "{topic}/{partition}: nothing served at {from} below the end {max}"
                ));
            }
            for r in &read.records {
                let offset = r.queue_offset().get();
                let where_ = format!("{topic}/{partition} offset {offset}");
                if offset != from || r.topic() != topic || r.partition() != partition {
                    self.fail(format!(
                        "{where_}: expected offset {from}, got {}/{} {offset}",
                        r.topic(),
                        r.partition()
                    ));
                }
                let id = self.whole(topic, partition, r.key(), r.value(), &r.headers(), &where_);
                out.insert(
                    offset,
                    Durable {
                        id,
                        physical: r.physical_offset().get(),
                    },
                );
                from += 1;
            }
        }
        out
    }

    fn index_hits(&self, served: &HashMap<(&'static str, u32), BTreeMap<u64, Durable>>) {
        for topic in [DELETE_TOPIC, COMPACT_TOPIC] {
            for k in 0..KEYS {
                let key = format!("k{k}");
                let hits = self
                    .store
                    .query_by_key(topic, key.as_bytes(), 0, i64::MAX, 100_000)
                    .unwrap_or_else(|e| self.fail(format!("query {topic} {key}: {e}")));
                for r in hits {
                    let where_ =
                        format!("index hit {topic} {key} at {}", r.physical_offset().get());
                    if r.topic() != topic || r.key_slice() != Some(key.as_bytes()) {
                        self.fail(format!("{where_}: is {}, key {:?}", r.topic(), r.key()));
                    }
                    let id = self.whole(
                        topic,
                        r.partition(),
                        r.key(),
                        r.value(),
                        &r.headers(),
                        &where_,
                    );
                    let o = r.queue_offset().get();
                    if let Some(s) = served[&(topic, r.partition())].get(&o) {
                        if s.id != id {
                            self.fail(format!("{where_}: {id}, the queue serves {} at {o}", s.id));
                        }
                    }
                }
            }
        }
    }

    fn compacted(&self, served: &BTreeMap<u64, Durable>) -> BTreeMap<u64, String> {
        let mut out = BTreeMap::new();
        let Some(log) = self.logs.log(COMPACT_TOPIC, 0) else {
            return out;
        };
        let (_, store_end) = self.store.offsets(COMPACT_TOPIC, 0);
        let records = log
            .read(0, usize::MAX, usize::MAX)
            .unwrap_or_else(|e| self.fail(format!("compacted read: {e}")));
        for r in records {
            let where_ = format!("compacted offset {}", r.offset);
            if out
                .last_key_value()
                .is_some_and(|(&o, _)| o >= r.offset.get())
            {
                self.fail(format!("{where_}: offsets out of order"));
            }
            if r.offset.get() >= store_end {
                self.fail(format!("{where_}: past the CommitLog's end {store_end}"));
            }
            let id = self.whole(COMPACT_TOPIC, 0, r.key(), r.value(), &r.headers(), &where_);
            if let Some(s) = served.get(&r.offset.get()) {
                if s.id != id {
                    self.fail(format!("{where_}: {id}, the CommitLog serves {}", s.id));
                }
            }
            out.insert(r.offset.get(), id);
        }
        out
    }

    /// The newest compacted offset of each key.
    fn newest_by_key(&self, compacted: &BTreeMap<u64, String>) -> HashMap<Option<Bytes>, u64> {
        compacted
            .iter()
            .map(|(&o, id)| (self.attempts[id].key.clone(), o))
            .collect()
    }

    fn check(&self, model: &mut Model) {
        let log_min = self.store.commit_log().min_offset();
        let served: HashMap<_, _> = partitions()
            .into_iter()
            .map(|tp| (tp, self.served(tp.0, tp.1)))
            .collect();
        self.index_hits(&served);
        for (tp, durable) in &model.log {
            for (o, d) in durable {
                match served[tp].get(o) {
                    Some(s) if s.id == d.id => {}
                    // Its CommitLog segment was deleted by retention.
                    None if d.physical < log_min => {}
                    got => self.fail(format!(
                        "{}/{} offset {o}: durable {} (at {}) is lost: served {got:?}, log starts at {log_min}",
                        tp.0, tp.1, d.id, d.physical
                    )),
                }
            }
        }
        let served_compact = &served[&(COMPACT_TOPIC, 0)];
        let compacted = self.compacted(served_compact);
        let newest = self.newest_by_key(&compacted);
        let kept = |o: u64, id: &String| {
            compacted.get(&o) == Some(id)
                || newest.get(&self.attempts[id].key).is_some_and(|&n| n > o)
        };
        for (o, d) in served_compact {
            if !kept(*o, &d.id) {
                self.fail(format!(
                    "the CommitLog serves {} at {o}, the compacted log neither has it nor a newer record of its key",
                    d.id
                ));
            }
        }
        for (o, id) in &model.compacted {
            if !kept(*o, id) {
                self.fail(format!("compacted {id} at {o} is lost and not superseded"));
            }
        }
        model.log = served;
        model.compacted = compacted;
    }
}

/// One era: open `dir` (checking it against the model), produce, crash into
/// `next`. Returns what the crash tore.
#[allow(clippy::too_many_arguments)]
fn era(
    dir: &Path,
    next: &Path,
    flush: FlushMode,
    rng: &mut Rng,
    model: &mut Model,
    shared: &Arc<Shared>,
    era_id: &str,
    context: &str,
) -> String {
    let image = image::install(dir).unwrap();
    let (logs, store) =
        open(dir, flush).unwrap_or_else(|e| panic!("the store does not open: {e}\n{context}"));
    {
        let attempts = shared.attempts.lock().unwrap();
        Checker {
            store: &store,
            logs: &logs,
            attempts: &attempts,
            context,
        }
        .check(model);
    }
    let cleaner = LogCleaner::new(
        Arc::clone(&logs),
        dir.to_path_buf(),
        CleanerConfig {
            dedupe_buffer_bytes: 1 << 20,
            ..CleanerConfig::default()
        },
        Arc::clone(store.commit_log()),
    )
    .unwrap();
    shared.stop.store(false, Ordering::SeqCst);
    shared.acked.lock().unwrap().clear();
    let run_ms = 1 + rng.below(40);
    let retention = rng.one_in(3);
    let (flushed, acked_before, torn) = std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (store, shared) = (&store, &**shared);
            let rng = Rng(rng.next());
            let prefix = format!("{era_id}w{w}");
            s.spawn(move || writer(store, shared, prefix, rng));
        }
        s.spawn(|| {
            let mut map = OffsetMap::new(1 << 20, 0.75).unwrap();
            while !shared.stop.load(Ordering::Relaxed) {
                let cleaned = cleaner
                    .clean_once(&mut map)
                    .unwrap_or_else(|e| panic!("cleaner pass failed: {e}"));
                if let Some((_, _, stats)) = cleaned {
                    shared
                        .coverage
                        .cleaned_records_removed
                        .fetch_add(stats.records_removed, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        if retention {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(run_ms / 2));
                if !shared.stop.load(Ordering::Relaxed) {
                    let outcome = store
                        .run_retention(Trigger::ManualForce)
                        .unwrap_or_else(|e| panic!("retention failed: {e}"));
                    shared
                        .coverage
                        .retention_segments_deleted
                        .fetch_add(outcome.deleted_segments as u64, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_millis(run_ms));
        // The power goes: whatever the flush thread finished before it is
        // durable, and so is every record acknowledged before it.
        let flushed = store.commit_log().flushed();
        let acked_before = shared.acked.lock().unwrap().len();
        // Half the tears follow the order the log writes its files in (the
        // tail page of the first file of a directory with unsynced bytes);
        // the others tear any file with unsynced bytes, as a kernel's
        // write-back may reach a later file (the next CommitLog segment)
        // before an earlier one's tail.
        let tear = rng.one_in(2).then(|| Tear {
            file_pick: rng.next(),
            prefix_pick: rng.next(),
            out_of_order: rng.one_in(2),
            spare: &[],
        });
        let torn = image.snapshot(next, tear).unwrap();
        shared.stop.store(true, Ordering::SeqCst);
        (flushed, acked_before, torn)
    });
    store.close_uncleanly();
    drop(cleaner);
    drop(logs);
    drop(image);
    let acked = shared.acked.lock().unwrap();
    for a in &acked[..acked_before] {
        let promised = match flush {
            FlushMode::Sync => true,
            FlushMode::Async => a.physical_end <= flushed,
        };
        if promised {
            shared
                .coverage
                .promised_records
                .fetch_add(1, Ordering::Relaxed);
            model.log.entry((a.topic, a.partition)).or_default().insert(
                a.offset,
                Durable {
                    id: a.id.clone(),
                    physical: a.physical,
                },
            );
        }
    }
    shared.coverage.power_losses.fetch_add(1, Ordering::Relaxed);
    if torn.is_some() {
        shared.coverage.tears.fetch_add(1, Ordering::Relaxed);
    }
    torn.unwrap_or_else(|| "no tear".into())
}

fn round(seed: u64, root: &Path, coverage: &Coverage) {
    let mut rng = Rng(seed);
    let flush = if rng.one_in(2) {
        FlushMode::Sync
    } else {
        FlushMode::Async
    };
    let shared = Arc::new(Shared::default());
    let mut model = Model::default();
    let mut dir: PathBuf = root.join("era0");
    std::fs::create_dir(&dir).unwrap();
    let rerun = format!("rerun with TIDELOG_TEST_SEED={seed} TIDELOG_POWER_LOSS_ROUNDS=1");
    let mut opening = "opening an empty data dir".to_string();
    for e in 0..ERAS_PER_ROUND {
        let next = root.join(format!("era{}", e + 1));
        let context = format!("round seed {seed} ({flush:?}), {opening}: {rerun}");
        let torn = era(
            &dir,
            &next,
            flush,
            &mut rng,
            &mut model,
            &shared,
            &format!("e{e}"),
            &context,
        );
        opening = format!("opening after power loss {} ({torn})", e + 1);
        std::fs::remove_dir_all(&dir).unwrap();
        dir = next;
    }
    // The last power loss's image opens and holds everything promised.
    let context = format!("round seed {seed} ({flush:?}), {opening}: {rerun}");
    let (logs, store) =
        open(&dir, flush).unwrap_or_else(|e| panic!("the store does not open: {e}\n{context}"));
    let attempts = shared.attempts.lock().unwrap();
    Checker {
        store: &store,
        logs: &logs,
        attempts: &attempts,
        context: &context,
    }
    .check(&mut model);
    store.close_uncleanly();
    for (total, this) in [
        (&coverage.power_losses, &shared.coverage.power_losses),
        (&coverage.tears, &shared.coverage.tears),
        (
            &coverage.promised_records,
            &shared.coverage.promised_records,
        ),
        (
            &coverage.cleaned_records_removed,
            &shared.coverage.cleaned_records_removed,
        ),
        (
            &coverage.retention_segments_deleted,
            &shared.coverage.retention_segments_deleted,
        ),
    ] {
        total.fetch_add(this.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// A directory on tmpfs where there is one: the image, not the disk, is what
/// the test is about, and fsyncs on tmpfs cost nothing.
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

fn run() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_test_writer()
        .try_init();
    let seed = env_u64("TIDELOG_TEST_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let rounds = env_u64("TIDELOG_POWER_LOSS_ROUNDS").map_or(DEFAULT_ROUNDS, |n| n as usize);
    eprintln!(
        "power-loss test: seed {seed}, {rounds} rounds (rerun with TIDELOG_TEST_SEED={seed})"
    );
    let mut rng = Rng(seed);
    let coverage = Coverage::default();
    for r in 0..rounds {
        // Round 0 uses the printed seed itself, so one round reruns alone.
        let round_seed = if r == 0 { seed } else { rng.next() };
        let root = scratch();
        round(round_seed, root.path(), &coverage);
    }
    eprintln!("power-loss test exercised: {coverage:?}");
    if rounds >= DEFAULT_ROUNDS {
        for (what, n) in [
            ("power losses", &coverage.power_losses),
            ("tears", &coverage.tears),
            ("records promised durable", &coverage.promised_records),
            (
                "records removed by the cleaner",
                &coverage.cleaned_records_removed,
            ),
            (
                "segments deleted by retention",
                &coverage.retention_segments_deleted,
            ),
        ] {
            assert!(
                n.load(Ordering::Relaxed) > 0,
                "no {what} in {rounds} rounds (seed {seed})"
            );
        }
    }
}

#[test]
fn acknowledged_records_survive_power_loss() {
    run();
}

/// A cleaner pass trusts only copies whose CommitLog bytes are durable.
/// The dispatcher copies a record into the compacted log before the
/// CommitLog is flushed; if a pass let that copy supersede the older,
/// durable record of its key, a power loss would drop the copy (recovery
/// cuts compacted copies past the CommitLog's valid end) after the older
/// record was cleaned away, and the key would be gone from the compacted
/// log while the CommitLog still serves it.
#[test]
fn cleaning_supersedes_only_with_durable_copies() {
    let root = scratch();
    let dir = root.path().join("live");
    std::fs::create_dir(&dir).unwrap();
    let image = image::install(&dir).unwrap();
    let logs = CompactedLogs::open(&dir).unwrap();
    logs.set_topic(COMPACT_TOPIC, compact_config());
    let mut config = store_config(&dir, FlushMode::Async);
    // No periodic flush: only what this test (or the cleaner) flushes is
    // durable.
    config.flush_interval_ms = 3_600_000;
    let store = Store::open_with_sinks(config, vec![logs.sink()]).unwrap();
    let append = |value: &str| {
        store
            .append(&[AppendRecord {
                topic: Arc::from(COMPACT_TOPIC),
                partition: 0,
                key: Some(Bytes::from_static(b"k")),
                value: Some(Bytes::from(value.to_string())),
                headers: Vec::new(),
                timestamp_ms: Some(1_700_000_000_000),
            }])
            .unwrap();
    };
    append("old");
    // Durable, and past the checkpoint: recovery will not copy it again.
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    store.checkpoint().unwrap();
    append("new");
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let cleaner = LogCleaner::new(
        Arc::clone(&logs),
        dir.clone(),
        CleanerConfig::default(),
        Arc::clone(store.commit_log()),
    )
    .unwrap();
    // Roll, so both copies are cleanable, and clean.
    cleaner.request(COMPACT_TOPIC, true).unwrap();
    let mut map = OffsetMap::new(1 << 20, 0.75).unwrap();
    let (_, _, stats) = cleaner.clean_once(&mut map).unwrap().unwrap();
    assert_eq!(stats.records_removed, 1, "{stats:?}");
    let crashed = root.path().join("crashed");
    image.snapshot(&crashed, None).unwrap();
    drop(cleaner);
    store.close_uncleanly();
    drop(logs);
    drop(image);

    let (logs, store) = open(&crashed, FlushMode::Async).unwrap();
    let served = store
        .read(COMPACT_TOPIC, 0, QueueOffset::new(0), 10, usize::MAX)
        .unwrap();
    let latest = served.records.last().and_then(|r| r.value());
    assert!(latest.is_some(), "the CommitLog lost the durable record");
    let compacted: Vec<_> = logs
        .log(COMPACT_TOPIC, 0)
        .map(|l| l.read(0, usize::MAX, usize::MAX).unwrap())
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.value())
        .collect();
    // Recovery may copy the older record again (its replay), but the
    // newest copy must be the record the CommitLog serves last.
    assert_eq!(
        compacted.last(),
        Some(&latest),
        "the compacted log lost the key: it holds {compacted:?}"
    );
    store.close_uncleanly();
}

/// Queue units that recovery drops stay dropped through the next power
/// loss. The queue's flushes start at its end, so units zeroed in the page
/// cache only would come back from the disk, pointing at CommitLog
/// positions that later records reuse.
#[test]
fn queue_units_dropped_by_recovery_stay_dropped() {
    let root = scratch();
    let dir = root.path().join("live");
    std::fs::create_dir(&dir).unwrap();
    let append = |store: &Store, partition: u32, n: usize| -> Vec<u64> {
        (0..n)
            .map(|i| {
                store
                    .append(&[AppendRecord {
                        topic: Arc::from(DELETE_TOPIC),
                        partition,
                        key: None,
                        value: Some(Bytes::from(format!("p{partition}-{i}"))),
                        headers: Vec::new(),
                        timestamp_ms: Some(1_700_000_000_000),
                    }])
                    .unwrap()[0]
                    .physical_offset
                    .get()
            })
            .collect()
    };
    let store = Store::open(store_config(&dir, FlushMode::Async)).unwrap();
    let positions = append(&store, 0, 10);
    store.shutdown().unwrap();
    // A power loss kept the queue's units 5..10 but lost their records:
    // the log past record 5 is zeros and the checkpoint stops there.
    let kept_end = positions[5];
    let segment = dir
        .join("commitlog")
        .join(tidelog_storage::fs_util::offset_file_name(0));
    let mut log = std::fs::read(&segment).unwrap();
    log[kept_end as usize..].fill(0);
    std::fs::write(&segment, &log).unwrap();
    tidelog_storage::checkpoint::Checkpoint {
        commitlog_flushed: kept_end,
        dispatched: kept_end,
        written_at_ms: 1,
    }
    .store(&dir)
    .unwrap();

    // Recovery drops units 5..10; the log then reuses their positions for
    // another partition's records, all made durable.
    let image = image::install(&dir).unwrap();
    let store = Store::open(store_config(&dir, FlushMode::Async)).unwrap();
    assert_eq!(store.offsets(DELETE_TOPIC, 0), (0, 5));
    append(&store, 1, 10);
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    store.checkpoint().unwrap();
    let crashed = root.path().join("crashed");
    image.snapshot(&crashed, None).unwrap();
    store.close_uncleanly();
    drop(image);

    let store = Store::open(store_config(&crashed, FlushMode::Async)).unwrap();
    assert_eq!(store.offsets(DELETE_TOPIC, 0), (0, 5));
    let values: Vec<_> = store
        .read(DELETE_TOPIC, 0, QueueOffset::new(0), 100, usize::MAX)
        .unwrap()
        .records
        .iter()
        .map(|r| r.value().unwrap())
        .collect();
    let want: Vec<_> = (0..5).map(|i| Bytes::from(format!("p0-{i}"))).collect();
    assert_eq!(values, want);
    store.close_uncleanly();
}

/// A store and its compacted logs in a new directory `dir` under a durable
/// image, flushed and checked for retention only when a test says so.
fn open_imaged(dir: &Path) -> (image::Installed, Arc<CompactedLogs>, Store) {
    std::fs::create_dir(dir).unwrap();
    let image = image::install(dir).unwrap();
    let logs = CompactedLogs::open(dir).unwrap();
    logs.set_topic(COMPACT_TOPIC, compact_config());
    let mut config = store_config(dir, FlushMode::Async);
    config.flush_interval_ms = 3_600_000;
    config.retention.check_interval_ms = 3_600_000;
    let store = Store::open_with_sinks(config, vec![logs.sink()]).unwrap();
    (image, logs, store)
}

/// The durable image as a power loss now leaves it, in `root/before-<i>`,
/// with the `i`th pick of an unsynced page torn.
fn snapshot_torn(image: &image::Installed, root: &Path, i: u64) -> PathBuf {
    let crashed = root.join(format!("before-{i}"));
    let tear = Tear {
        file_pick: i * 7,
        prefix_pick: i * 131,
        out_of_order: i % 2 == 1,
        spare: &[],
    };
    image.snapshot(&crashed, Some(tear)).unwrap();
    crashed
}

/// Every copy in the compact topic's compacted log of `partition`, as
/// (offset, value).
fn copies_of(logs: &CompactedLogs, partition: u32) -> Vec<(u64, Bytes)> {
    logs.log(COMPACT_TOPIC, partition)
        .unwrap_or_else(|| panic!("no compacted log of {COMPACT_TOPIC}/{partition}"))
        .read(0, usize::MAX, usize::MAX)
        .unwrap()
        .iter()
        .map(|r| (r.offset.get(), r.value().unwrap()))
        .collect()
}

/// One record keyed `k<partition>` with `value`, appended.
fn append_keyed(store: &Store, topic: &'static str, partition: u32, value: &str) {
    store
        .append(&[AppendRecord {
            topic: Arc::from(topic),
            partition,
            key: Some(Bytes::from(format!("k{partition}"))),
            value: Some(Bytes::from(value.to_owned())),
            headers: Vec::new(),
            timestamp_ms: Some(1_700_000_000_000),
        }])
        .unwrap();
}

/// A new partition's first record costs the dispatcher no fsync, for a
/// delete topic (its ConsumeQueue directory and file) and for a compact
/// topic (its compacted log's directory and first segment too): the files
/// are made with no sync and made durable by the flush before the next
/// checkpoint. A power loss before that checkpoint opens (the new files
/// may be missing, empty or torn: a tear over a durable empty queue file
/// was once a 46-byte file that stopped start-up); one after it serves
/// every record, and every compacted copy, though recovery replays none.
#[test]
fn new_partitions_cost_the_dispatcher_no_fsync_and_are_durable_at_the_checkpoint() {
    let root = scratch();
    let (image, logs, store) = open_imaged(&root.path().join("live"));
    let append = |topic: &'static str, partition: u32| {
        append_keyed(&store, topic, partition, &format!("{topic}/{partition}"));
    };
    // The store's own first files (the IndexFile's, the compacted root's
    // first topic) are not a partition's: made before counting.
    append(DELETE_TOPIC, 0);
    append(COMPACT_TOPIC, 0);
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let before = image.syncs();
    let new = 1..31u32;
    for p in new.clone() {
        append(DELETE_TOPIC, p);
        append(COMPACT_TOPIC, p);
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    assert_eq!(
        image.syncs() - before,
        0,
        "syncs while 60 new partitions (30 compact) were dispatched"
    );
    // A power loss now, with any unsynced page torn, still opens.
    for i in 0..4u64 {
        let crashed = snapshot_torn(&image, root.path(), i);
        let (_, reopened) = open(&crashed, FlushMode::Async).unwrap_or_else(|e| {
            panic!("does not open after a power loss before the checkpoint: {e}")
        });
        reopened.close_uncleanly();
    }
    store.checkpoint().unwrap();
    let crashed = root.path().join("after");
    image.snapshot(&crashed, None).unwrap();
    store.close_uncleanly();
    drop(logs);
    drop(image);

    let claimed = tidelog_storage::checkpoint::Checkpoint::load(&crashed)
        .unwrap()
        .unwrap();
    let (logs, store) = open(&crashed, FlushMode::Async).unwrap();
    assert_eq!(
        store.recovery_report().scanned_from,
        claimed.dispatched,
        "nothing replayed: the records are in the files the checkpoint synced"
    );
    for p in new {
        for topic in [DELETE_TOPIC, COMPACT_TOPIC] {
            let got: Vec<_> = store
                .read(topic, p, QueueOffset::new(0), 10, usize::MAX)
                .unwrap()
                .records
                .iter()
                .map(|r| r.value().unwrap())
                .collect();
            assert_eq!(got, [Bytes::from(format!("{topic}/{p}"))], "{topic}/{p}");
        }
        assert_eq!(
            copies_of(&logs, p),
            [(0, Bytes::from(format!("{COMPACT_TOPIC}/{p}")))],
            "compacted {p}"
        );
    }
    store.close_uncleanly();
}

/// A checkpoint with nothing new to make durable costs no sync per
/// compacted log: the compacted logs' flush synced every log's active
/// segment at every checkpoint, grown or not (about 15,600 fdatasyncs in
/// one run with 1,000 idle compact partitions, each a cache flush of the
/// disk beside `flush: sync`'s msyncs). A log that grows is synced again,
/// and a power loss after that checkpoint keeps its new copy.
#[test]
fn an_idle_checkpoint_syncs_no_compacted_log() {
    const PARTITIONS: u32 = 40;
    let root = scratch();
    let (image, logs, store) = open_imaged(&root.path().join("live"));
    let append =
        |partition: u32, value: &str| append_keyed(&store, COMPACT_TOPIC, partition, value);
    for p in 0..PARTITIONS {
        append(p, "first");
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    store.checkpoint().unwrap();

    // What an idle checkpoint syncs without the compacted logs (the
    // checkpoint file, its directory): the same however many logs exist.
    let before = image.syncs();
    store.checkpoint().unwrap();
    let idle = image.syncs() - before;
    assert!(
        idle < u64::from(PARTITIONS) / 4,
        "an idle checkpoint with {PARTITIONS} compacted logs made {idle} syncs"
    );

    // One log grows: the next checkpoint syncs it, and only it more.
    append(7, "second");
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let before = image.syncs();
    store.checkpoint().unwrap();
    let grown = image.syncs() - before;
    assert!(
        grown > idle,
        "the grown log was not synced ({grown} syncs, idle {idle})"
    );
    assert!(
        grown < idle + u64::from(PARTITIONS) / 4,
        "{grown} syncs for one grown log"
    );

    let crashed = root.path().join("after");
    image.snapshot(&crashed, None).unwrap();
    store.close_uncleanly();
    drop(logs);
    drop(image);
    let (logs, _store) = open(&crashed, FlushMode::Async).unwrap();
    let values: Vec<_> = copies_of(&logs, 7).into_iter().map(|(_, v)| v).collect();
    assert_eq!(values, [Bytes::from("first"), Bytes::from("second")]);
}

/// A roll costs the dispatcher no fsync: the segment it seals is synced
/// by the next flush, which then renames the new one from `.new`. A power
/// loss before that checkpoint, with any unsynced page torn, opens and
/// the compacted log holds exactly what the CommitLog serves of the
/// partition (recovery drops the `.new` segments and copies their records
/// again); one after it replays nothing and keeps every copy.
#[test]
fn a_roll_costs_the_dispatcher_no_fsync_and_its_segments_are_durable_at_the_checkpoint() {
    const RECORDS: usize = 200;
    // The compacted log's 4 KiB segments roll; the CommitLog (whose own
    // roll is the writer's, not the dispatcher's) does not. No periodic
    // flush or retention: only the test checkpoints.
    let config = |dir: &Path| {
        let mut c = store_config(dir, FlushMode::Async);
        c.commitlog_segment_bytes = 1 << 20;
        c.consume_queue_units_per_file = 4096;
        c.index_entries = 4096;
        c.flush_interval_ms = 3_600_000;
        c.retention.check_interval_ms = 3_600_000;
        c
    };
    let open_at = |dir: &Path| {
        let logs = CompactedLogs::open(dir).unwrap();
        logs.set_topic(COMPACT_TOPIC, compact_config());
        let store = Store::open_with_sinks(config(dir), vec![logs.sink()]).unwrap();
        (logs, store)
    };
    let served = |store: &Store, logs: &CompactedLogs| {
        let records: Vec<_> = store
            .read(
                COMPACT_TOPIC,
                0,
                QueueOffset::new(0),
                usize::MAX,
                usize::MAX,
            )
            .unwrap()
            .records
            .iter()
            .map(|r| (r.queue_offset().get(), r.value().unwrap()))
            .collect();
        (records, copies_of(logs, 0))
    };
    let root = scratch();
    let live = root.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let image = image::install(&live).unwrap();
    let (logs, store) = open_at(&live);
    append_keyed(&store, COMPACT_TOPIC, 0, "first");
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    store.checkpoint().unwrap();
    let before = image.syncs();
    for i in 1..RECORDS {
        append_keyed(
            &store,
            COMPACT_TOPIC,
            0,
            &format!("value {i:04} {}", "x".repeat(100)),
        );
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let log = logs.log(COMPACT_TOPIC, 0).unwrap();
    assert!(log.segments().len() > 5, "rolls (4 KiB segments)");
    assert_eq!(
        image.syncs() - before,
        0,
        "syncs while the compacted log rolled"
    );
    for i in 0..8u64 {
        let crashed = snapshot_torn(&image, root.path(), i);
        let (logs, reopened) = open_at(&crashed);
        let (records, copies) = served(&reopened, &logs);
        assert!(!records.is_empty(), "the checkpointed record at least");
        assert_eq!(
            copies, records,
            "power loss {i}: the copies are the CommitLog's records"
        );
        reopened.close_uncleanly();
    }
    store.checkpoint().unwrap();
    assert!(
        log.segments().iter().all(|s| !s.is_new()),
        "every segment renamed by the checkpoint's flush"
    );
    let crashed = root.path().join("after");
    image.snapshot(&crashed, None).unwrap();
    let want = served(&store, &logs);
    store.close_uncleanly();
    drop(logs);
    drop(image);
    let claimed = tidelog_storage::checkpoint::Checkpoint::load(&crashed)
        .unwrap()
        .unwrap();
    let (logs, store) = open_at(&crashed);
    assert_eq!(
        store.recovery_report().scanned_from,
        claimed.dispatched,
        "nothing replayed: the copies are in the segments the checkpoint synced"
    );
    assert_eq!(want.0.len(), RECORDS);
    assert_eq!(want.0, want.1);
    assert_eq!(served(&store, &logs), want);
    store.close_uncleanly();
}
