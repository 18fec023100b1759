//! The model's produce steps: HTTP's per-record produce (with its refusals
//! predicted in the broker's order), Kafka's partition batches, plain or
//! an idempotent producer's (in sequence, retried, out of sequence, of an
//! old epoch), and InitProducerId; each acknowledged record goes into the
//! model at its offset.

use std::collections::BTreeMap;

use tidelog_broker::partitioner::partition_for_key;
use tidelog_broker::store::{BatchMeta, ProducerBatch};
use tidelog_broker::BrokerError;

use super::{
    now_ms, trace, variant, Acked, PartitionModel, Producer, Sequences, World, BATCHES_RETAINED,
    KEYS,
};
use crate::common::driver::{HttpRecord, Record};

impl World {
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
    pub(super) fn produce_http(&mut self) {
        let t = self.rng.below(self.topics.len() as u64) as usize;
        let name = self.topics[t].name;
        // Now and then an empty request: it writes nothing (and still
        // auto-creates an unknown topic).
        let n = self.rng.below(7) as usize;
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
    pub(super) fn draw_partition(&mut self, count: u32, past_percent: u64) -> u32 {
        let past = u64::from(self.rng.chance(past_percent));
        self.rng.below(u64::from(count) + past) as u32
    }

    /// Kafka's produce of one partition: plain, or an idempotent
    /// producer's batch in sequence, a retry of one of its retained
    /// batches, a batch out of sequence, or one of an old epoch.
    pub(super) fn produce_kafka(&mut self) {
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
                    transactional: false,
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
    pub(super) fn init_producer(&mut self) {
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
}
