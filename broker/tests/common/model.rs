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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

use tidelog_broker::partitioner::partition_for_key;
use tidelog_broker::store::{BatchMeta, ProducerBatch, SequenceProblem, StoreError};
use tidelog_broker::BrokerError;

use super::driver::{Driver, FetchPath, HttpRecord, Record};
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
        self.log_starts_moved += o.log_starts_moved;
        self.compactions += o.compactions;
        self.records_compacted_away += o.records_compacted_away;
        self.tombstones_gone += o.tombstones_gone;
        self.scans_outlived_tombstones += o.scans_outlived_tombstones;
        self.commits += o.commits;
        self.refused_commits += o.refused_commits;
        self.restarts += o.restarts;
    }

    /// Every case the model is for was reached (checked over the CI seeds).
    pub fn assert_complete(&self) {
        let c = self;
        assert!(c.http_records > 0 && c.kafka_records > 0, "{c:?}");
        assert!(c.idempotent_batches > 0 && c.duplicates > 0, "{c:?}");
        assert!(c.out_of_sequence > 0 && c.stale_epochs > 0, "{c:?}");
        assert!(c.refused_produces > 0 && c.fetches > 0, "{c:?}");
        assert!(c.log_starts_moved > 0, "{c:?}");
        assert!(c.compactions > 0 && c.records_compacted_away > 0, "{c:?}");
        assert!(c.tombstones_gone > 0, "{c:?}");
        assert!(c.commits > 0 && c.refused_commits > 0, "{c:?}");
        assert!(c.restarts > 0, "{c:?}");
    }
}

/// Bugs the model steps around, each until its fix lands; the pinned
/// seed of each (`model_N.rs`) runs without the workaround and is ignored
/// until then.
#[derive(Debug, Clone, Copy)]
pub struct Workarounds {
    /// `model_1.rs`: DeleteRecords checks its offset against the
    /// dispatched end, not the acknowledged one, so right after a produce
    /// (before dispatch caught up) a DeleteRecords up to the new end is
    /// refused OFFSET_OUT_OF_RANGE. The workaround waits, as a reader does,
    /// until every acknowledged record is visible first.
    pub visible_before_delete_records: bool,
}

impl Workarounds {
    /// Every workaround (the CI seeds).
    pub const ALL: Workarounds = Workarounds {
        visible_before_delete_records: true,
    };
    /// None: the behaviour the broker owes.
    pub const NONE: Workarounds = Workarounds {
        visible_before_delete_records: false,
    };
}

/// A group's committed offsets: (topic, partition) → (offset, metadata).
type GroupModel = BTreeMap<(String, u32), (u64, String)>;

/// One run: the broker, the model, the seed's generator.
struct World {
    seed: u64,
    workarounds: Workarounds,
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
    fn new(seed: u64, workarounds: Workarounds) -> World {
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
            workarounds,
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

    // ---- produce --------------------------------------------------------

    fn random_record(&mut self, t: usize, keyed: bool) -> Record {
        let compacts = self.topics[t].policy.compacts();
        let key = keyed.then(|| format!("key-{}", self.rng.below(KEYS)).into_bytes());
        // Tombstones mostly on compact topics; a null value is a record like
        // any other on the others.
        let tombstone = self.rng.chance(if compacts { 20 } else { 5 });
        let value = (!tombstone).then(|| {
            let len = self.rng.below(120) as usize;
            (0..len).map(|_| self.rng.next() as u8).collect::<Vec<u8>>()
        });
        let mut headers = Vec::new();
        if self.rng.chance(25) {
            headers.push(("h".to_string(), Some(vec![0, 255, 7])));
        }
        if self.rng.chance(15) {
            headers.push(("h".to_string(), None));
        }
        let timestamp_ms = self
            .rng
            .chance(50)
            .then(|| 1_600_000_000_000 + self.rng.below(1_000_000_000) as i64);
        Record {
            key,
            value,
            headers,
            timestamp_ms,
        }
    }

    /// A record was acknowledged at `offset` of `t`-`p`.
    fn acked(&mut self, t: usize, p: u32, offset: u64, record: Record, before: i64, after: i64) {
        let context = self.context();
        let name = self.topics[t].name;
        let m = &mut self.topics[t].parts[p as usize];
        assert_eq!(
            offset, m.next,
            "{name}-{p}: offsets are handed out once, in order: {context}"
        );
        m.next += 1;
        if let Some(key) = &record.key {
            m.latest.insert(key.clone(), offset);
        }
        m.records.insert(
            offset,
            Acked {
                record,
                before_ms: before,
                after_ms: after,
            },
        );
    }

    /// HTTP's produce: a list of records, each with its own partition or
    /// none, with or without a path partition; some requests break a rule
    /// (an unknown partition, a record's partition not the path's, a
    /// keyless record on a compact topic) and must write nothing.
    fn produce_http(&mut self) {
        let t = self.rng.below(self.topics.len() as u64) as usize;
        let name = self.topics[t].name;
        let n = 1 + self.rng.below(6) as usize;
        // The partition count the request is planned against (an unknown
        // topic is auto-created with the default).
        let known = self.topics[t].partitions;
        let count = known.unwrap_or(self.default_partitions);
        let path = match self.rng.chance(30) {
            true => Some(self.draw_partition(count, 10)),
            false => None,
        };
        let mut records = Vec::with_capacity(n);
        for _ in 0..n {
            let keyed = !self.rng.chance(if self.topics[t].policy.compacts() {
                3
            } else {
                30
            });
            let record = self.random_record(t, keyed);
            let own = if self.rng.chance(20) {
                match path {
                    Some(p) if self.rng.chance(80) => Some(p),
                    _ => Some(self.draw_partition(count, 10)),
                }
            } else {
                None
            };
            records.push(HttpRecord {
                partition: own,
                record,
            });
        }
        // What the broker must answer: the first broken rule, in its order
        // (the path partition, then each record: its partition against the
        // path's, its partition, its key).
        let mut refusal: Option<&'static str> = None;
        let mut targets: Vec<Option<u32>> = Vec::with_capacity(n);
        if path.is_some_and(|p| p >= count) {
            refusal = Some("UnknownPartition");
        }
        for r in &records {
            if refusal.is_some() {
                break;
            }
            let target = match (path, r.partition) {
                (Some(p), Some(own)) if own != p => {
                    refusal = Some("PartitionMismatch");
                    break;
                }
                (Some(p), _) => Some(p),
                (None, Some(own)) => Some(own),
                (None, None) => r
                    .record
                    .key
                    .as_ref()
                    .map(|k| partition_for_key(k, std::num::NonZeroU32::new(count).unwrap())),
            };
            if target.is_some_and(|p| p >= count) {
                refusal = Some("UnknownPartition");
                break;
            }
            if r.record.key.is_none() && self.topics[t].policy.compacts() {
                refusal = Some("KeyRequired");
                break;
            }
            targets.push(target);
        }
        trace(|| {
            format!(
                "produce_http {name} path {path:?}: {} records, expect {refusal:?}",
                records.len()
            )
        });
        let before = now_ms();
        let answer = self.driver.produce_http(name, path, records.clone());
        let after = now_ms();
        self.note_topic_created(t);
        match (answer, refusal) {
            (Ok(offsets), None) => {
                assert_eq!(offsets.len(), records.len(), "{}", self.context());
                for ((r, (p, offset)), target) in records.into_iter().zip(offsets).zip(targets) {
                    if let Some(want) = target {
                        assert_eq!(
                            p, want,
                            "{name}: a record's partition (its own, the path's, or its key's murmur2): {}",
                            self.context()
                        );
                    }
                    self.coverage.http_records += 1;
                    self.acked(t, p, offset, r.record, before, after);
                }
            }
            (Err(e), Some(want)) => {
                assert!(
                    variant(&e) == want,
                    "{name}: expected {want}, got {e:?}: {}",
                    self.context()
                );
                self.coverage.refused_produces += 1;
            }
            (answer, want) => panic!(
                "{name}: HTTP produce answered {answer:?}, the model expected {want:?}: {}",
                self.context()
            ),
        }
    }

    /// The auto-created topic exists once an HTTP produce named it.
    fn note_topic_created(&mut self, t: usize) {
        if self.topics[t].partitions.is_none() {
            let n = self.driver.partitions(self.topics[t].name);
            assert!(n.is_some(), "auto-create: {}", self.context());
            self.topics[t].partitions = n;
            self.topics[t].parts = (0..n.unwrap()).map(|_| PartitionModel::default()).collect();
        }
    }

    /// A partition of `count`, or now and then the one past them.
    fn draw_partition(&mut self, count: u32, past_percent: u64) -> u32 {
        let past = u64::from(self.rng.chance(past_percent));
        self.rng.below(u64::from(count) + past) as u32
    }

    /// Kafka's produce of one partition: plain, or an idempotent
    /// producer's batch in sequence, a retry of one of its retained
    /// batches, a batch out of sequence, or one of an old epoch.
    fn produce_kafka(&mut self) {
        let t = self.rng.below(self.topics.len() as u64) as usize;
        let name = self.topics[t].name;
        let Some(count) = self.topics[t].partitions else {
            let answer = self.driver.produce_kafka(name, 0, Vec::new(), None);
            assert!(
                matches!(answer, Err(BrokerError::UnknownTopic { .. })),
                "{name}: {answer:?}: {}",
                self.context()
            );
            return;
        };
        let p = self.draw_partition(count, 5);
        let n = 1 + self.rng.below(5) as usize;
        let compacts = self.topics[t].policy.compacts();
        let keyless_at = (self.rng.chance(if compacts { 3 } else { 30 }))
            .then(|| self.rng.below(n as u64) as usize);
        let records: Vec<Record> = (0..n)
            .map(|i| self.random_record(t, keyless_at != Some(i)))
            .collect();
        let idempotent = self.rng.chance(60);
        if idempotent && self.producers.is_empty() {
            self.new_producer();
        }
        // What to send and what must come back.
        enum Want {
            Written,
            Duplicate(BatchMeta),
            Refused(&'static str),
        }
        let mut producer = None;
        let mut want = Want::Written;
        let mut records = records;
        if idempotent {
            let i = self.rng.below(self.producers.len() as u64) as usize;
            let (id, epoch) = (self.producers[i].id, self.producers[i].epoch);
            let known = self.producers[i].partitions.get(&(t, p)).cloned();
            let has_state = known.is_some();
            // The partition's state is of the current epoch: an older one
            // is refused there (a partition without state takes any).
            let current = known.as_ref().is_some_and(|s| s.epoch == epoch);
            let seqs = known.filter(|s| s.epoch == epoch).unwrap_or_default();
            let kind = self.rng.below(100);
            let (base, epoch) = if kind < 15 && !seqs.batches.is_empty() {
                // A retry of a retained batch: same sequences, same count.
                let b = seqs.batches[self.rng.below(seqs.batches.len() as u64) as usize];
                let len = (b.last_seq - b.first_seq + 1) as usize;
                records.truncate(len);
                while records.len() < len {
                    records.push(self.random_record(t, true));
                }
                want = Want::Duplicate(b);
                (b.first_seq, epoch)
            } else if kind < 22 {
                // A gap: the batch after the next.
                want = Want::Refused(if !has_state {
                    "UnknownProducer"
                } else {
                    "OutOfOrder"
                });
                (seqs.next + 1 + self.rng.below(3) as i32, epoch)
            } else if kind < 32 && epoch > 0 && current {
                want = Want::Refused("StaleEpoch");
                (0, epoch - 1)
            } else {
                (seqs.next, epoch)
            };
            producer = Some((
                i,
                ProducerBatch {
                    producer_id: id,
                    epoch,
                    base_sequence: base,
                },
            ));
        }
        // The broker's checks come first: the partition, then the keys.
        if p >= count {
            want = Want::Refused("UnknownPartition");
        } else if compacts && records.iter().any(|r| r.key.is_none()) {
            want = Want::Refused("KeyRequired");
        }
        trace(|| {
            format!(
                "produce_kafka {name}-{p}: {} records, producer {:?}",
                records.len(),
                producer.map(|(_, b)| b)
            )
        });
        let before = now_ms();
        let answer = self
            .driver
            .produce_kafka(name, p, records.clone(), producer.map(|(_, b)| b));
        let after = now_ms();
        match (answer, want) {
            (Ok(ack), Want::Written) => {
                assert_eq!(ack.duplicate_of, None, "{}", self.context());
                assert_eq!(ack.offsets.len(), records.len(), "{}", self.context());
                let base = ack.offsets[0];
                for (r, offset) in records.iter().zip(&ack.offsets) {
                    self.coverage.kafka_records += 1;
                    self.acked(t, p, *offset, r.clone(), before, after);
                }
                if let Some((i, b)) = producer {
                    self.coverage.idempotent_batches += 1;
                    let seqs = self.producers[i].partitions.entry((t, p)).or_default();
                    if seqs.epoch != b.epoch {
                        *seqs = Sequences {
                            epoch: b.epoch,
                            ..Sequences::default()
                        };
                    }
                    let len = records.len() as i32;
                    seqs.batches.push_back(BatchMeta {
                        first_seq: b.base_sequence,
                        last_seq: b.base_sequence + len - 1,
                        base_offset: base,
                        last_offset: base + len as u64 - 1,
                    });
                    if seqs.batches.len() > BATCHES_RETAINED {
                        seqs.batches.pop_front();
                    }
                    seqs.next = b.base_sequence + len;
                }
            }
            (Ok(ack), Want::Duplicate(b)) => {
                assert_eq!(
                    ack.duplicate_of,
                    Some(b),
                    "{name}-{p}: a retried batch answers its original offsets: {}",
                    self.context()
                );
                assert!(ack.offsets.is_empty(), "{}", self.context());
                self.coverage.duplicates += 1;
            }
            (Err(e), Want::Refused(why)) => {
                assert!(
                    variant(&e) == why,
                    "{name}-{p}: expected {why}, got {e:?}: {}",
                    self.context()
                );
                match why {
                    "OutOfOrder" | "UnknownProducer" => self.coverage.out_of_sequence += 1,
                    "StaleEpoch" => self.coverage.stale_epochs += 1,
                    _ => self.coverage.refused_produces += 1,
                }
            }
            (answer, want) => panic!(
                "{name}-{p}: Kafka produce answered {answer:?}, the model expected {}: {}",
                match want {
                    Want::Written => "a write".to_string(),
                    Want::Duplicate(b) => format!("a duplicate of {b:?}"),
                    Want::Refused(why) => format!("a refusal ({why})"),
                },
                self.context()
            ),
        }
    }

    fn new_producer(&mut self) {
        let (id, epoch) = self.driver.init_producer_id(None);
        assert!(
            self.producers.iter().all(|p| p.id != id),
            "producer ids are never handed out twice: {}",
            self.context()
        );
        assert_eq!(epoch, 0, "{}", self.context());
        self.producers.push(Producer {
            id,
            epoch,
            partitions: BTreeMap::new(),
        });
    }

    /// InitProducerId: a new producer, or a producer's next epoch (its
    /// sequences start again at 0).
    fn init_producer(&mut self) {
        if self.producers.is_empty() || self.rng.chance(30) {
            self.new_producer();
            return;
        }
        let i = self.rng.below(self.producers.len() as u64) as usize;
        let current = (self.producers[i].id, self.producers[i].epoch);
        let (id, epoch) = self.driver.init_producer_id(Some(current));
        assert_eq!(
            (id, epoch),
            (current.0, current.1 + 1),
            "the same producer at the next epoch: {}",
            self.context()
        );
        // Each partition's state stays, of the old epoch, until the new
        // epoch's first batch there.
        self.producers[i].epoch = epoch;
    }

    // ---- reads ----------------------------------------------------------

    /// Whether the model requires `offset` of `t`-`p` (its key's latest
    /// record) to be served now: at or above the log start, and not a
    /// tombstone past `delete.retention.ms`.
    fn required(&self, t: usize, p: u32, offset: u64, now: i64) -> bool {
        let topic = &self.topics[t];
        let m = &topic.parts[p as usize];
        let acked = &m.records[&offset];
        offset >= m.log_start
            && (acked.record.value.is_some()
                || now < acked.before_ms.saturating_add(topic.delete_retention_ms))
    }

    /// One served record: the one acknowledged at its offset, field for
    /// field (an append-time timestamp between the produce's call and
    /// answer).
    fn check_record(&self, t: usize, p: u32, offset: u64, got: &Record) {
        let name = self.topics[t].name;
        let m = &self.topics[t].parts[p as usize];
        let Some(want) = m.records.get(&offset) else {
            panic!(
                "{name}-{p}: offset {offset} was never acknowledged: {}",
                self.context()
            );
        };
        let what = format!("{name}-{p} offset {offset}: {}", self.context());
        assert_eq!(got.key, want.record.key, "key of {what}");
        assert_eq!(got.value, want.record.value, "value of {what}");
        assert_eq!(got.headers, want.record.headers, "headers of {what}");
        let ts = got.timestamp_ms.unwrap();
        match want.record.timestamp_ms {
            Some(given) => assert_eq!(ts, given, "timestamp of {what}"),
            None => assert!(
                (want.before_ms..=want.after_ms).contains(&ts),
                "append time {ts} outside [{}, {}] of {what}",
                want.before_ms,
                want.after_ms
            ),
        }
    }

    /// The whole partition against the model: its offsets, every record
    /// served, and (compact topics) every key's latest record.
    fn check_partition(&mut self, t: usize, p: u32) {
        let name = self.topics[t].name;
        let policy = self.topics[t].policy;
        let offsets = self.driver.offsets(name, p).unwrap();
        let (next, log_start) = {
            let m = &self.topics[t].parts[p as usize];
            (m.next, m.log_start)
        };
        assert_eq!(
            offsets.end,
            next,
            "{name}-{p}: the end offset is what was acknowledged: {}",
            self.context()
        );
        assert_eq!(
            offsets.log_start,
            log_start,
            "{name}-{p}: the log start is what DeleteRecords moved it to: {}",
            self.context()
        );
        // Read in one call: a background pass between two reads could
        // otherwise remove a key's newest record after an older one was read.
        let path = self.fetch_path();
        let began = now_ms();
        let all = self
            .driver
            .fetch(name, p, 0, ALL_RECORDS, usize::MAX, path)
            .unwrap();
        let now = now_ms();
        // Kafka's contract for tombstones: a scan that takes less than
        // `delete.retention.ms` sees each key's final state. One that takes
        // longer (always, at 0 ms) may have read a key's older record
        // before the pass that removed it and then missed the tombstone a
        // later pass collected; then only its latest record, if served, has
        // to be the newest.
        let scan_outlived_tombstones = now - began >= self.topics[t].delete_retention_ms;
        let served: Vec<u64> = all.records.iter().map(|(o, _)| *o).collect();
        for w in served.windows(2) {
            assert!(
                w[0] < w[1],
                "{name}-{p}: {} then {}: {}",
                w[0],
                w[1],
                self.context()
            );
        }
        assert!(
            served.first().is_none_or(|&o| o >= log_start),
            "{name}-{p}: offset {:?} below the log start {log_start} served: {}",
            served.first(),
            self.context()
        );
        for (offset, r) in &all.records {
            self.check_record(t, p, *offset, r);
        }
        if !policy.compacts() {
            let m = &self.topics[t].parts[p as usize];
            let want: Vec<u64> = m.records.range(log_start..).map(|(o, _)| *o).collect();
            assert_eq!(
                served,
                want,
                "{name}-{p}: every acknowledged record from the log start: {}",
                self.context()
            );
            assert_eq!(
                offsets.beginning,
                log_start,
                "{name}-{p}: the beginning: {}",
                self.context()
            );
            return;
        }
        // Compacted: per key, the newest record served is its latest (a key
        // never comes back to an older value), unless the latest is not
        // required (below the log start, or an expired tombstone), and then
        // nothing of the key is served at all.
        let mut newest: HashMap<Vec<u8>, u64> = HashMap::new();
        for (offset, r) in &all.records {
            newest.insert(r.key.clone().unwrap(), *offset);
        }
        let latest: Vec<(Vec<u8>, u64)> = self.topics[t].parts[p as usize]
            .latest
            .iter()
            .map(|(k, o)| (k.clone(), *o))
            .collect();
        for (key, offset) in latest {
            let shown = String::from_utf8_lossy(&key).into_owned();
            let tombstone = self.topics[t].parts[p as usize].records[&offset]
                .record
                .value
                .is_none();
            match newest.get(&key) {
                Some(&o) if o != offset && tombstone && scan_outlived_tombstones => {
                    assert!(
                        !self.required(t, p, offset, now),
                        "{name}-{p} key {shown}: its latest record {offset}, a tombstone, is missing: {}",
                        self.context()
                    );
                    self.coverage.scans_outlived_tombstones += 1;
                }
                Some(&o) => assert_eq!(
                    o,
                    offset,
                    "{name}-{p} key {shown}: the newest record served is not its latest ({}, delete.retention.ms {}, read in {} ms): {}",
                    if tombstone { "a tombstone" } else { "a value" },
                    self.topics[t].delete_retention_ms,
                    now - began,
                    self.context()
                ),
                None => {
                    assert!(
                        !self.required(t, p, offset, now),
                        "{name}-{p} key {shown}: its latest record {offset} is missing: {}",
                        self.context()
                    );
                    if offset >= log_start {
                        self.coverage.tombstones_gone += 1;
                    }
                }
            }
        }
        let m = &self.topics[t].parts[p as usize];
        let above = m.records.range(log_start..).count();
        self.coverage.records_compacted_away += (above - served.len()) as u64;
    }

    /// A fetch from a random offset with random limits: the first records
    /// served at or after it (every acknowledged one on a topic that does
    /// not compact, every required one on a compact topic), at least one
    /// if there is one.
    fn fetch(&mut self) {
        let Some((t, p)) = self.existing_partition() else {
            return;
        };
        let name = self.topics[t].name;
        let (next, log_start) = {
            let m = &self.topics[t].parts[p as usize];
            (m.next, m.log_start)
        };
        let from = self.rng.below(next + 2);
        let max_records = 1 + self.rng.below(20) as usize;
        let max_bytes = self.rng.pick(&[1, 200, 4096, usize::MAX]);
        let path = self.fetch_path();
        let got = self
            .driver
            .fetch(name, p, from, max_records, max_bytes, path)
            .unwrap();
        let now = now_ms();
        self.coverage.fetches += 1;
        let context = format!(
            "{name}-{p} {path:?} fetch from {from} ({max_records} records, {max_bytes} bytes): {}",
            self.context()
        );
        let offsets: Vec<u64> = got.records.iter().map(|(o, _)| *o).collect();
        assert!(offsets.len() <= max_records, "{context}");
        for w in offsets.windows(2) {
            assert!(w[0] < w[1], "{context}");
        }
        let start = from.max(log_start);
        assert!(
            offsets.first().is_none_or(|&o| o >= start),
            "{offsets:?}: {context}"
        );
        for (offset, r) in &got.records {
            self.check_record(t, p, *offset, r);
        }
        if let Some(&last) = offsets.last() {
            assert_eq!(got.next_offset, last + 1, "the next offset: {context}");
        }
        let m = &self.topics[t].parts[p as usize];
        let policy = self.topics[t].policy;
        // What must be served from `start` on.
        let must: Vec<u64> = m
            .records
            .range(start..)
            .map(|(o, _)| *o)
            .filter(|&o| {
                !policy.compacts()
                    || self.topics[t].parts[p as usize].records[&o]
                        .record
                        .key
                        .as_ref()
                        .is_some_and(|k| m.latest.get(k) == Some(&o))
                        && self.required(t, p, o, now)
            })
            .collect();
        match offsets.last() {
            None => assert!(
                must.is_empty(),
                "nothing served, but {must:?} must be: {context}"
            ),
            Some(&last) => {
                for o in must.iter().filter(|&&o| o <= last) {
                    assert!(offsets.contains(o), "{o} skipped ({offsets:?}): {context}");
                }
                if !policy.compacts() {
                    let want: Vec<u64> = must.iter().take(offsets.len()).copied().collect();
                    assert_eq!(offsets, want, "{context}");
                }
            }
        }
    }

    fn fetch_path(&mut self) -> FetchPath {
        self.rng.pick(&[FetchPath::Http, FetchPath::Kafka])
    }

    fn existing_partition(&mut self) -> Option<(usize, u32)> {
        let t = self.rng.below(self.topics.len() as u64) as usize;
        let count = self.topics[t].partitions?;
        Some((t, self.rng.below(u64::from(count)) as u32))
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
        if self.workarounds.visible_before_delete_records {
            self.driver.wait_visible();
        }
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
            (Err(BrokerError::Invalid { .. }), Some(_)) if !self.topics[t].policy.compacts() => {
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
        BrokerError::CommitMetadataTooLarge { .. } => "CommitMetadataTooLarge",
        BrokerError::Store {
            source: StoreError::ProducerRefused { problem, .. },
        } => match problem {
            SequenceProblem::StaleEpoch { .. } => "StaleEpoch",
            SequenceProblem::OutOfOrder { .. } => "OutOfOrder",
            SequenceProblem::UnknownProducer { .. } => "UnknownProducer",
            SequenceProblem::OutOfRange { .. } => "OutOfRange",
        },
        _ => "other",
    }
}

/// Runs one seed for `steps` steps, then checks everything, restarts and
/// checks again; panics with the seed on the first disagreement.
pub fn run_seed(seed: u64, steps: usize, workarounds: Workarounds) -> Coverage {
    eprintln!("broker model: seed {seed} (rerun with TIDELOG_MODEL_SEED={seed})");
    let mut w = World::new(seed, workarounds);
    for step in 0..steps {
        w.step = step;
        let op = w.rng.below(100);
        trace(|| format!("step {step}: op {op}"));
        match op {
            0..=24 => w.produce_http(),
            25..=46 => w.produce_kafka(),
            47..=60 => w.fetch(),
            61..=66 => w.delete_records(),
            67..=74 => w.compact(),
            75..=86 => w.commit(),
            87..=91 => w.init_producer(),
            92..=94 => {
                let g = w.rng.pick(&GROUPS);
                w.check_group(g);
            }
            _ => w.restart(),
        }
    }
    w.step = steps;
    w.check_all();
    w.restart();
    w.coverage
}
