//! The in-memory model of the broker the model tests check against, the
//! random steps, and the checks after each step (the properties are listed
//! in `tests/model.rs`' module doc).
//!
//! Per partition the model keeps every acknowledged record at its offset,
//! the next offset, the log start offset DeleteRecords moved and each key's
//! latest offset; per idempotent producer its epoch and, per partition, the
//! next sequence and its last five batches; per group the committed
//! offsets. Every call goes through [`Driver`]. What the model cannot
//! decide (when a background cleaner pass runs, which superseded records
//! it has removed yet) is checked as a bound, never as an exact answer.

mod produce;
mod reads;

use std::collections::{BTreeMap, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

use tidelog_broker::store::{BatchMeta, SequenceProblem, StoreError};
use tidelog_broker::BrokerError;

use super::driver::{Driver, HttpRecord, Record};
use super::Rng;

/// Keys per topic: few, so keys repeat and compaction has work.
const KEYS: u64 = 10;
/// A day: tombstones of a topic with this `delete.retention.ms` are
/// always served (the test takes seconds).
const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// Groups commits go to.
const GROUPS: [&str; 3] = ["g-a", "g-b", "g-c"];
/// Kafka's `offset.metadata.max.bytes` (`groups::METADATA_MAX_BYTES`).
const METADATA_MAX_BYTES: usize = 4096;
/// Batches an idempotent producer's partition state retains
/// (`producer_state::BATCHES_RETAINED`).
const BATCHES_RETAINED: usize = 5;
/// Records a full read asks for (far more than a run writes).
const ALL_RECORDS: usize = 1 << 20;

/// A topic's `cleanup.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Delete,
    Compact,
    CompactDelete,
}

impl Policy {
    fn compacts(self) -> bool {
        self != Policy::Delete
    }

    fn deletes(self) -> bool {
        self != Policy::Compact
    }
}

/// A topic of the run.
#[derive(Debug)]
struct TopicModel {
    name: &'static str,
    policy: Policy,
    /// `delete.retention.ms` (compact topics).
    delete_retention_ms: i64,
    /// `None` until it exists (the auto-created topic).
    partitions: Option<u32>,
    parts: Vec<PartitionModel>,
}

/// One acknowledged record.
#[derive(Debug, Clone)]
struct Acked {
    record: Record,
    /// The wall clock just before the produce call: the earliest its
    /// timestamp (append time) and its tombstone's retention count from.
    before_ms: i64,
    /// Just after the produce answered: the latest append time.
    after_ms: i64,
}

#[derive(Debug, Default)]
struct PartitionModel {
    records: BTreeMap<u64, Acked>,
    /// The offset the next record gets.
    next: u64,
    /// Moved by DeleteRecords only.
    log_start: u64,
    /// Key → offset of its newest record.
    latest: BTreeMap<Vec<u8>, u64>,
}

/// An idempotent producer's state in one partition.
#[derive(Debug, Default, Clone)]
struct Sequences {
    /// The epoch of its batches: an entry of an older epoch is state all
    /// the same (a new epoch's first batch must start at 0, else it is out
    /// of order, not unknown).
    epoch: i16,
    next: i32,
    /// Oldest first, at most [`BATCHES_RETAINED`].
    batches: VecDeque<BatchMeta>,
}

#[derive(Debug)]
struct Producer {
    id: i64,
    epoch: i16,
    /// (topic index, partition) → its sequences there.
    partitions: BTreeMap<(usize, u32), Sequences>,
}

/// What the seeds reached, so a change that makes the model stop reaching
/// a case fails instead of passing vacuously.
#[derive(Debug, Default, Clone)]
pub struct Coverage {
    pub http_records: u64,
    pub kafka_records: u64,
    pub idempotent_batches: u64,
    pub duplicates: u64,
    pub out_of_sequence: u64,
    pub stale_epochs: u64,
    pub refused_produces: u64,
    pub fetches: u64,
    pub timestamp_lookups: u64,
    pub log_starts_moved: u64,
    pub compactions: u64,
    /// Acknowledged records at or above the log start that a full read
    /// did not serve (summed over the reads): compaction removed them.
    pub records_compacted_away: u64,
    pub tombstones_gone: u64,
    /// Full reads that served an older record of a key whose latest, a
    /// tombstone, a pass collected while the read ran (allowed: the read
    /// took at least `delete.retention.ms`).
    pub scans_outlived_tombstones: u64,
    pub commits: u64,
    pub refused_commits: u64,
    pub restarts: u64,
    /// Steps that found `__consumer_offsets` refused to clients.
    pub internal_refusals: u64,
}

impl Coverage {
    pub fn add(&mut self, o: &Coverage) {
        self.http_records += o.http_records;
        self.kafka_records += o.kafka_records;
        self.idempotent_batches += o.idempotent_batches;
        self.duplicates += o.duplicates;
        self.out_of_sequence += o.out_of_sequence;
        self.stale_epochs += o.stale_epochs;
        self.refused_produces += o.refused_produces;
        self.fetches += o.fetches;
        self.timestamp_lookups += o.timestamp_lookups;
        self.log_starts_moved += o.log_starts_moved;
        self.compactions += o.compactions;
        self.records_compacted_away += o.records_compacted_away;
        self.tombstones_gone += o.tombstones_gone;
        self.scans_outlived_tombstones += o.scans_outlived_tombstones;
        self.commits += o.commits;
        self.refused_commits += o.refused_commits;
        self.restarts += o.restarts;
        self.internal_refusals += o.internal_refusals;
    }

    /// Every case the model is for was reached (checked over the CI seeds).
    pub fn assert_complete(&self) {
        let c = self;
        assert!(c.http_records > 0 && c.kafka_records > 0, "{c:?}");
        assert!(c.idempotent_batches > 0 && c.duplicates > 0, "{c:?}");
        assert!(c.out_of_sequence > 0 && c.stale_epochs > 0, "{c:?}");
        assert!(c.refused_produces > 0 && c.fetches > 0, "{c:?}");
        assert!(c.timestamp_lookups > 0, "{c:?}");
        assert!(c.log_starts_moved > 0, "{c:?}");
        assert!(c.compactions > 0 && c.records_compacted_away > 0, "{c:?}");
        assert!(c.tombstones_gone > 0, "{c:?}");
        assert!(c.commits > 0 && c.refused_commits > 0, "{c:?}");
        assert!(c.restarts > 0 && c.internal_refusals > 0, "{c:?}");
    }
}

/// A group's committed offsets: (topic, partition) → (offset, metadata).
type GroupModel = BTreeMap<(String, u32), (u64, String)>;

/// One run: the broker, the model, the seed's generator.
struct World {
    seed: u64,
    step: usize,
    rng: Rng,
    driver: Driver,
    topics: Vec<TopicModel>,
    producers: Vec<Producer>,
    groups: BTreeMap<&'static str, GroupModel>,
    coverage: Coverage,
    /// What the auto-created topic gets.
    default_partitions: u32,
    _dir: tempfile::TempDir,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The test's directory: in memory where there is a tmpfs (every commit
/// and shutdown fsyncs; the model checks what is served, not what reaches
/// a platter).
fn test_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

/// With `TIDELOG_MODEL_TRACE` set, print what the test does.
fn trace(what: impl FnOnce() -> String) {
    if std::env::var_os("TIDELOG_MODEL_TRACE").is_some() {
        eprintln!("{}", what());
    }
}

impl World {
    fn new(seed: u64) -> World {
        let mut rng = Rng::new(seed);
        let dir = test_dir();
        let default_partitions = rng.pick(&[1, 2, 3]);
        let driver = Driver::open(dir.path(), default_partitions);
        let dirty_ratio = rng.pick(&["0.01", "0.5"]);
        // `mixed` loses its expired tombstones: at once, after a moment,
        // or never within the run.
        let mixed_retention_ms = rng.pick(&[0, 300, DAY_MS]);
        trace(|| {
            format!("seed {seed}: mixed has delete.retention.ms {mixed_retention_ms}, min.cleanable.dirty.ratio {dirty_ratio}")
        });
        let specs: [(&'static str, Policy, i64, Option<u32>); 4] = [
            ("events", Policy::Delete, DAY_MS, Some(2)),
            ("table", Policy::Compact, DAY_MS, Some(2)),
            ("mixed", Policy::CompactDelete, mixed_retention_ms, Some(2)),
            // Created by its first HTTP produce (auto-create).
            ("auto", Policy::Delete, DAY_MS, None),
        ];
        let mut topics = Vec::new();
        for (name, policy, delete_retention_ms, partitions) in specs {
            if let Some(n) = partitions {
                let mut overrides = vec![(
                    "cleanup.policy",
                    match policy {
                        Policy::Delete => "delete",
                        Policy::Compact => "compact",
                        Policy::CompactDelete => "compact,delete",
                    }
                    .to_string(),
                )];
                if policy.compacts() {
                    overrides.push(("segment.bytes", "1024".to_string()));
                    overrides.push(("min.cleanable.dirty.ratio", dirty_ratio.to_string()));
                    overrides.push(("delete.retention.ms", delete_retention_ms.to_string()));
                }
                driver.create_topic(name, n, &overrides);
            }
            topics.push(TopicModel {
                name,
                policy,
                delete_retention_ms,
                partitions,
                parts: (0..partitions.unwrap_or(0))
                    .map(|_| PartitionModel::default())
                    .collect(),
            });
        }
        World {
            default_partitions,
            seed,
            step: 0,
            rng,
            driver,
            topics,
            producers: Vec::new(),
            groups: GROUPS.iter().map(|g| (*g, BTreeMap::new())).collect(),
            coverage: Coverage::default(),
            _dir: dir,
        }
    }

    fn context(&self) -> String {
        format!(
            "seed {} step {} (rerun with TIDELOG_MODEL_SEED={}, TIDELOG_MODEL_TRACE=1 prints each step)",
            self.seed, self.step, self.seed
        )
    }

    // ---- DeleteRecords and compaction ------------------------------------

    /// DeleteRecords below a random offset (−1: the high watermark; past
    /// it: out of range; at or below the start: nothing moves); a compact
    /// topic refuses it.
    fn delete_records(&mut self) {
        let Some((t, p)) = self.existing_partition() else {
            return;
        };
        let name = self.topics[t].name;
        let (next, start) = {
            let m = &self.topics[t].parts[p as usize];
            (m.next, m.log_start)
        };
        let offset: i64 = match self.rng.below(10) {
            0 => -1,
            1 => next as i64 + 1 + self.rng.below(3) as i64,
            _ => self.rng.below(next + 1) as i64,
        };
        trace(|| format!("delete_records {name}-{p} below {offset}"));
        let answer = self.driver.delete_records(name, p, offset);
        let policy = self.topics[t].policy;
        match answer {
            _ if !policy.deletes() => assert!(
                matches!(answer, Err(BrokerError::RecordsNotDeletable { .. })),
                "{name}: {answer:?}: {}",
                self.context()
            ),
            Err(BrokerError::OffsetOutOfRange { .. }) if offset > next as i64 => {}
            Ok(low) if offset <= next as i64 => {
                let target = if offset < 0 { next } else { offset as u64 };
                let want = start.max(target);
                assert_eq!(
                    low,
                    want,
                    "{name}-{p}: the low watermark: {}",
                    self.context()
                );
                if want > start {
                    self.coverage.log_starts_moved += 1;
                }
                self.topics[t].parts[p as usize].log_start = want;
            }
            other => panic!(
                "{name}-{p}: DeleteRecords below {offset} (end {next}) answered {other:?}: {}",
                self.context()
            ),
        }
        self.check_partition(t, p);
    }

    /// Compaction on request, waited for; a topic that does not compact
    /// refuses it. Then each partition against the model.
    fn compact(&mut self) {
        let t = self.rng.below(self.topics.len() as u64) as usize;
        let name = self.topics[t].name;
        let roll = self.rng.chance(70);
        let answer = self.driver.compact(name, roll);
        trace(|| format!("compact {name} (roll {roll}): {answer:?}"));
        match (&answer, self.topics[t].partitions) {
            (Err(BrokerError::UnknownTopic { .. }), None) => return,
            (Err(BrokerError::TopicNotCompacted { .. }), Some(_))
                if !self.topics[t].policy.compacts() =>
            {
                return
            }
            (Ok(parts), Some(n)) if self.topics[t].policy.compacts() => {
                assert_eq!(parts.len(), n as usize, "{}", self.context());
                assert!(
                    parts.iter().all(|c| c.completed),
                    "{name}: a requested pass did not finish: {parts:?}: {}",
                    self.context()
                );
                self.coverage.compactions += 1;
            }
            _ => panic!("{name}: compaction answered {answer:?}: {}", self.context()),
        }
        for p in 0..self.topics[t].partitions.unwrap_or(0) {
            self.check_partition(t, p);
        }
    }

    // ---- group offsets ---------------------------------------------------

    /// A commit of one to three offsets, all or nothing: an unknown topic
    /// or partition, or metadata over its bound, refuses the whole commit.
    fn commit(&mut self) {
        let group = self.rng.pick(&GROUPS);
        let n = 1 + self.rng.below(3);
        let mut entries = Vec::new();
        let mut refused: Option<&'static str> = None;
        for _ in 0..n {
            let t = self.rng.below(self.topics.len() as u64) as usize;
            let name = self.topics[t].name;
            let count = self.topics[t].partitions;
            let p = self.draw_partition(count.unwrap_or(1), 5);
            let offset = match self.rng.below(20) {
                0 => i64::MAX as u64,
                _ => self.rng.below(500),
            };
            let long = self.rng.chance(3);
            let metadata = if long {
                "m".repeat(METADATA_MAX_BYTES + 1)
            } else {
                format!("meta-{}", self.rng.below(5))
            };
            // The broker's order: all topics and partitions, each with its
            // metadata, entry by entry.
            if refused.is_none() {
                refused = match count {
                    None => Some("UnknownTopic"),
                    Some(c) if p >= c => Some("UnknownPartition"),
                    _ if long => Some("CommitMetadataTooLarge"),
                    _ => None,
                };
            }
            entries.push((name.to_string(), p, offset, metadata));
        }
        trace(|| {
            format!(
                "commit {group}: {} entries, expect {refused:?}",
                entries.len()
            )
        });
        let answer = self.driver.commit(group, entries.clone());
        match (answer, refused) {
            (Ok(()), None) => {
                let g = self.groups.get_mut(group).unwrap();
                for (topic, p, offset, metadata) in entries {
                    g.insert((topic, p), (offset, metadata));
                }
                self.coverage.commits += 1;
            }
            (Err(e), Some(want)) if variant(&e) == want => self.coverage.refused_commits += 1,
            (answer, want) => panic!(
                "commit to {group} answered {answer:?}, the model expected {want:?}: {}",
                self.context()
            ),
        }
        self.check_group(group);
    }

    /// `__consumer_offsets` is the broker's alone: HTTP and Kafka produce
    /// and DeleteRecords are refused, and the group offsets it holds stay.
    fn touch_internal(&mut self) {
        const INTERNAL: &str = "__consumer_offsets";
        let record = Record {
            key: Some(b"g-a/events/0".to_vec()),
            value: Some(b"{\"offset\":1}".to_vec()),
            headers: Vec::new(),
            timestamp_ms: None,
        };
        let answers = [
            self.driver
                .produce_http(
                    INTERNAL,
                    Some(0),
                    vec![HttpRecord {
                        partition: None,
                        record: record.clone(),
                    }],
                )
                .map(|_| ()),
            self.driver
                .produce_kafka(INTERNAL, 0, vec![record], None)
                .map(|_| ()),
            self.driver.delete_records(INTERNAL, 0, -1).map(|_| ()),
        ];
        for answer in answers {
            assert!(
                answer
                    .as_ref()
                    .is_err_and(|e| variant(e) == "InternalTopic"),
                "{INTERNAL}: {answer:?}: {}",
                self.context()
            );
        }
        self.coverage.internal_refusals += 1;
        for g in GROUPS {
            self.check_group(g);
        }
    }

    /// A group's committed offsets are the model's.
    fn check_group(&self, group: &str) {
        let want = &self.groups[group];
        let got = self.driver.fetch_offsets(group);
        let want_list: Vec<(String, u32, u64, String)> = want
            .iter()
            .map(|((t, p), (o, m))| (t.clone(), *p, *o, m.clone()))
            .collect();
        match got {
            None => assert!(
                want.is_empty(),
                "{group}: no offsets, want {want_list:?}: {}",
                self.context()
            ),
            Some(list) => assert_eq!(list, want_list, "{group}'s offsets: {}", self.context()),
        }
    }

    // ---- everything -----------------------------------------------------

    /// Every partition and every group against the model.
    fn check_all(&mut self) {
        for t in 0..self.topics.len() {
            for p in 0..self.topics[t].partitions.unwrap_or(0) {
                self.check_partition(t, p);
            }
        }
        for g in GROUPS {
            self.check_group(g);
        }
    }

    fn restart(&mut self) {
        trace(|| "restart".to_string());
        self.driver.restart();
        self.coverage.restarts += 1;
        self.check_all();
    }
}

/// Pretty name of an error's variant, and of the store's sequence problem
/// inside a producer refusal.
fn variant(e: &BrokerError) -> &'static str {
    match e {
        BrokerError::UnknownTopic { .. } => "UnknownTopic",
        BrokerError::UnknownPartition { .. } => "UnknownPartition",
        BrokerError::PartitionMismatch { .. } => "PartitionMismatch",
        BrokerError::KeyRequired { .. } => "KeyRequired",
        BrokerError::InternalTopic { .. } => "InternalTopic",
        BrokerError::CommitMetadataTooLarge { .. } => "CommitMetadataTooLarge",
        BrokerError::Store {
            source: StoreError::ProducerRefused { problem, .. },
        } => match problem {
            SequenceProblem::StaleEpoch { .. } => "StaleEpoch",
            SequenceProblem::OutOfOrder { .. } => "OutOfOrder",
            SequenceProblem::UnknownProducer { .. } => "UnknownProducer",
            SequenceProblem::OutOfRange { .. } => "OutOfRange",
            SequenceProblem::TransactionOpen { .. } => "TransactionOpen",
            SequenceProblem::TooManyTransactions { .. } => "TooManyTransactions",
        },
        _ => "other",
    }
}

/// Runs one seed for `steps` steps, then checks everything, restarts and
/// checks again; panics with the seed on the first disagreement.
pub fn run_seed(seed: u64, steps: usize) -> Coverage {
    eprintln!("broker model: seed {seed} (rerun with TIDELOG_MODEL_SEED={seed})");
    let mut w = World::new(seed);
    for step in 0..steps {
        w.step = step;
        let op = w.rng.below(100);
        trace(|| format!("step {step}: op {op}"));
        match op {
            0..=24 => w.produce_http(),
            25..=46 => w.produce_kafka(),
            47..=56 => w.fetch(),
            57..=60 => w.list_offsets(),
            61..=66 => w.delete_records(),
            67..=74 => w.compact(),
            75..=86 => w.commit(),
            87..=91 => w.init_producer(),
            92..=93 => {
                let g = w.rng.pick(&GROUPS);
                w.check_group(g);
            }
            94 => w.touch_internal(),
            _ => w.restart(),
        }
    }
    w.step = steps;
    w.check_all();
    w.restart();
    w.coverage
}
