//! Idempotent producers' sequence state, per (producer id, topic,
//! partition): the producer's epoch and its last [`BATCHES_RETAINED`]
//! batches (first and last sequence, first and last queue offset), as
//! Kafka's `ProducerStateManager` keeps it.
//!
//! Why here, in storage, and not in the broker: the check must run inside
//! the critical section that assigns offsets and writes (the CommitLog's
//! writer lock), or two connections racing with the same producer could
//! both pass it and both write; and the state must be rebuilt from exactly
//! the entries recovery keeps, which only storage walks. So the writer owns
//! a [`ProducerStates`] beside its next queue offsets, and both move only
//! after a write succeeded.
//!
//! Invariants:
//! - The state holds, for each batch in it, records that are in the log at
//!   those offsets (or were, before retention deleted them): it is updated
//!   after the write, rebuilt from verified entries at recovery, and a
//!   snapshot (`snapshot.rs`) covers only entries below a position that
//!   was flushed before the snapshot was written. So a batch answered as a
//!   duplicate is never one a crash lost.
//! - Rules, Kafka's (`ProducerAppendInfo`): a batch of the current epoch
//!   whose (first, last) sequence equals one of the retained batches is a
//!   duplicate: answered with the original offsets, nothing written. An
//!   older epoch is refused ([`SequenceProblem::StaleEpoch`]). A newer
//!   epoch must start at sequence 0. Within an epoch the next batch must
//!   start right after the last one (a gap or a replay older than the
//!   retained five is [`SequenceProblem::OutOfOrder`]). A producer with no
//!   state here whose batch does not start at 0 is
//!   [`SequenceProblem::UnknownProducer`] (Kafka ≥ 4 accepts it; we answer
//!   UNKNOWN_PRODUCER_ID as Kafka 2.x did, which librdkafka and kafka-python
//!   3 both treat as "state aged out": they reset the partition's sequence
//!   or bump the epoch, and never take it as data loss).
//! - Bounded memory: at most [`PRODUCER_ENTRIES_MAX`] entries, and an entry
//!   whose last batch was stored more than [`PRODUCER_EXPIRATION_MS`] ago
//!   is dropped (Kafka's `producer.id.expiration.ms`, default one day). At
//!   the cap, expired entries go first, then the oldest tenth.

pub mod ids;
pub mod snapshot;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::commit_log::format::EntryProducer;

/// Batches remembered per producer and partition (Kafka's
/// `NUM_BATCHES_TO_RETAIN`: a producer has at most five in flight).
pub const BATCHES_RETAINED: usize = 5;
/// Most (producer, partition) entries kept.
pub const PRODUCER_ENTRIES_MAX: usize = 100_000;
/// An entry idle this long is dropped: Kafka's `producer.id.expiration.ms`
/// default (one day). OPERATIONS.md has no key for it, so it is a constant.
pub const PRODUCER_EXPIRATION_MS: i64 = 24 * 60 * 60 * 1000;

/// An idempotent producer's batch, as a Kafka record batch names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
    /// The batch belongs to the producer's transaction (Kafka's
    /// `isTransactional`): invisible to read_committed readers until the
    /// transaction's marker.
    pub transactional: bool,
}

/// One retained batch: its sequences and queue offsets (inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: u64,
    pub last_offset: u64,
}

/// What is known of one producer in one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first, at most [`BATCHES_RETAINED`]; empty only after a
    /// transaction marker of a new epoch (or a marker to a partition the
    /// producer never wrote), which starts the epoch with no batch.
    pub batches: VecDeque<BatchMeta>,
    /// Store time of the last batch (expiry).
    pub last_timestamp_ms: i64,
}

/// What DescribeProducers (KIP-664) tells of one producer in one
/// partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence of its newest batch retained, −1 with none (an
    /// epoch begun by a marker).
    pub last_sequence: i32,
    /// Store time of its last batch, ms.
    pub last_timestamp_ms: i64,
    /// The first offset of its transaction open in the partition.
    pub txn_start_offset: Option<u64>,
}

/// Why a producer's batch is refused; nothing of it is written (defined
/// with the crate's other reasons in `error.rs`, which a `StoreError`
/// carries).
pub use crate::error::SequenceProblem;

/// The outcome of checking a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// In sequence: write it.
    Append,
    /// A retry of a retained batch: answer with its offsets, write nothing.
    Duplicate(BatchMeta),
}

/// `seq` advanced by `by`, wrapping past `i32::MAX` to 0 as Kafka's
/// sequences do (`DefaultRecordBatch.incrementSequence`).
pub fn increment_sequence(seq: i32, by: i32) -> i32 {
    if seq > i32::MAX - by {
        by - (i32::MAX - seq) - 1
    } else {
        seq + by
    }
}

/// Key: producer id, topic, partition.
type Key = (i64, Arc<str>, u32);

/// The state of every tracked producer (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStates {
    entries: HashMap<Key, ProducerEntry, ahash::RandomState>,
}

impl ProducerStates {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, producer_id: i64, topic: &str, partition: u32) -> Option<&ProducerEntry> {
        self.entries
            .get(&(producer_id, Arc::from(topic), partition))
    }

    /// Every entry, sorted by producer, topic, partition (the snapshot's
    /// order).
    pub fn sorted(&self) -> Vec<(&Key, &ProducerEntry)> {
        let mut all: Vec<_> = self.entries.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all
    }

    /// The producers with state in `topic`-`partition`: a walk of every
    /// entry (an admin's question, DescribeProducers, not a hot path).
    pub fn in_partition<'a>(
        &'a self,
        topic: &'a str,
        partition: u32,
    ) -> impl Iterator<Item = (i64, &'a ProducerEntry)> + 'a {
        self.entries
            .iter()
            .filter(move |((_, t, p), _)| *p == partition && &**t == topic)
            .map(|((id, _, _), e)| (*id, e))
    }

    /// The largest producer id with state, for the id allocator.
    pub fn max_producer_id(&self) -> Option<i64> {
        self.entries.keys().map(|k| k.0).max()
    }

    /// The largest producer id the state holds within `space`.
    pub fn max_producer_id_in(&self, space: &std::ops::Range<i64>) -> Option<i64> {
        self.entries
            .keys()
            .map(|k| k.0)
            .filter(|id| space.contains(id))
            .max()
    }

    /// Check a batch of `record_count` records against the state, Kafka's
    /// rules (module doc). Changes nothing.
    pub fn check(
        &self,
        topic: &Arc<str>,
        partition: u32,
        p: &ProducerBatch,
        record_count: usize,
    ) -> Result<Checked, SequenceProblem> {
        let count = batch_span(p, record_count)?;
        let last_seq = increment_sequence(p.base_sequence, count);
        let key = (p.producer_id, Arc::clone(topic), partition);
        let Some(entry) = self.entries.get(&key) else {
            if p.base_sequence != 0 {
                return Err(SequenceProblem::UnknownProducer {
                    producer_id: p.producer_id,
                    got: p.base_sequence,
                });
            }
            return Ok(Checked::Append);
        };
        if p.epoch == entry.epoch {
            if let Some(dup) = entry
                .batches
                .iter()
                .find(|b| b.first_seq == p.base_sequence && b.last_seq == last_seq)
            {
                return Ok(Checked::Duplicate(*dup));
            }
        }
        if p.epoch < entry.epoch {
            return Err(SequenceProblem::StaleEpoch {
                producer_id: p.producer_id,
                epoch: p.epoch,
                current: entry.epoch,
            });
        }
        let expected = if p.epoch > entry.epoch {
            0
        } else {
            entry
                .batches
                .back()
                .map_or(0, |b| increment_sequence(b.last_seq, 1))
        };
        if p.base_sequence != expected {
            return Err(SequenceProblem::OutOfOrder {
                producer_id: p.producer_id,
                expected,
                got: p.base_sequence,
            });
        }
        Ok(Checked::Append)
    }

    /// Record a batch that was written (after [`ProducerStates::check`]
    /// said [`Checked::Append`]): `record_count` records from queue offset
    /// `base_offset`, stored at `store_ts`.
    pub fn record(
        &mut self,
        topic: &Arc<str>,
        partition: u32,
        p: &ProducerBatch,
        record_count: usize,
        base_offset: u64,
        store_ts: i64,
    ) {
        let Ok(count) = batch_span(p, record_count) else {
            debug_assert!(false, "a batch recorded without its check");
            return;
        };
        let meta = BatchMeta {
            first_seq: p.base_sequence,
            last_seq: increment_sequence(p.base_sequence, count),
            base_offset,
            last_offset: base_offset + count as u64,
        };
        self.push(
            (p.producer_id, Arc::clone(topic), partition),
            p.epoch,
            meta,
            false,
            store_ts,
        );
    }

    /// Check a transaction marker of producer `producer_id` at `epoch`:
    /// refused if the producer is known here at a newer epoch (a fenced
    /// coordinator's or producer's marker, Kafka's INVALID_PRODUCER_EPOCH).
    pub fn check_marker(
        &self,
        topic: &Arc<str>,
        partition: u32,
        producer_id: i64,
        epoch: i16,
    ) -> Result<(), SequenceProblem> {
        if producer_id < 0 || epoch < 0 {
            return Err(SequenceProblem::OutOfRange {
                producer_id,
                max: i32::MAX as u32,
            });
        }
        match self
            .entries
            .get(&(producer_id, Arc::clone(topic), partition))
        {
            Some(e) if epoch < e.epoch => Err(SequenceProblem::StaleEpoch {
                producer_id,
                epoch,
                current: e.epoch,
            }),
            _ => Ok(()),
        }
    }

    /// A transaction marker of `producer_id` at `epoch` was written (or
    /// replayed), stored at `store_ts`: a newer epoch becomes the
    /// producer's, with no batch yet (its next batch starts at sequence
    /// 0, as after a bump by InitProducerId).
    pub fn marker(
        &mut self,
        topic: &Arc<str>,
        partition: u32,
        producer_id: i64,
        epoch: i16,
        store_ts: i64,
    ) {
        let key = (producer_id, Arc::clone(topic), partition);
        if !self.entries.contains_key(&key) && self.entries.len() >= PRODUCER_ENTRIES_MAX {
            self.make_room(store_ts);
        }
        let entry = self.entries.entry(key).or_insert_with(|| ProducerEntry {
            epoch,
            batches: VecDeque::new(),
            last_timestamp_ms: store_ts,
        });
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        entry.last_timestamp_ms = entry.last_timestamp_ms.max(store_ts);
    }

    /// Recovery: the entry of `record_count` records from `base_offset`,
    /// stored at `store_ts`, carried this producer block. An entry that
    /// continues its append's batch extends that batch; an entry already
    /// in the state (a snapshot that covers it) changes nothing.
    pub fn replay(
        &mut self,
        topic: &Arc<str>,
        partition: u32,
        p: &EntryProducer,
        record_count: u32,
        base_offset: u64,
        store_ts: i64,
    ) {
        let Some(count) = record_count
            .checked_sub(1)
            .and_then(|c| i32::try_from(c).ok())
        else {
            return;
        };
        let meta = BatchMeta {
            first_seq: p.base_sequence,
            last_seq: increment_sequence(p.base_sequence, count),
            base_offset,
            last_offset: base_offset + u64::from(count as u32),
        };
        self.push(
            (p.producer_id, Arc::clone(topic), partition),
            p.epoch,
            meta,
            p.continues,
            store_ts,
        );
    }

    fn push(&mut self, key: Key, epoch: i16, meta: BatchMeta, continues: bool, store_ts: i64) {
        if !self.entries.contains_key(&key) && self.entries.len() >= PRODUCER_ENTRIES_MAX {
            self.make_room(store_ts);
        }
        let entry = self.entries.entry(key).or_insert_with(|| ProducerEntry {
            epoch,
            batches: VecDeque::with_capacity(BATCHES_RETAINED),
            last_timestamp_ms: store_ts,
        });
        if epoch < entry.epoch {
            // Only a replay can meet this (the append path refused it):
            // what the log holds later wins.
            return;
        }
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        entry.last_timestamp_ms = entry.last_timestamp_ms.max(store_ts);
        if entry
            .batches
            .iter()
            .any(|b| b.base_offset <= meta.base_offset && meta.last_offset <= b.last_offset)
        {
            return; // already covered (a snapshot holds it)
        }
        if continues {
            if let Some(last) = entry.batches.back_mut() {
                if last.last_offset + 1 == meta.base_offset
                    && increment_sequence(last.last_seq, 1) == meta.first_seq
                {
                    last.last_seq = meta.last_seq;
                    last.last_offset = meta.last_offset;
                    return;
                }
            }
        }
        if entry.batches.len() == BATCHES_RETAINED {
            entry.batches.pop_front();
        }
        entry.batches.push_back(meta);
    }

    /// Drop entries idle for longer than [`PRODUCER_EXPIRATION_MS`] at
    /// `now_ms`; returns how many.
    pub fn expire(&mut self, now_ms: i64) -> usize {
        let before = self.entries.len();
        self.entries
            .retain(|_, e| now_ms.saturating_sub(e.last_timestamp_ms) <= PRODUCER_EXPIRATION_MS);
        before - self.entries.len()
    }

    /// At the cap: expired entries go, and if that is not enough the
    /// oldest tenth, so a flood of new producer ids costs one sweep per
    /// tenth of the cap, not one per append.
    fn make_room(&mut self, now_ms: i64) {
        let expired = self.expire(now_ms);
        if self.entries.len() < PRODUCER_ENTRIES_MAX {
            tracing::info!(
                expired,
                "producer state at its cap: dropped expired producers"
            );
            return;
        }
        let mut times: Vec<i64> = self.entries.values().map(|e| e.last_timestamp_ms).collect();
        let nth = times.len() / 10;
        let (_, &mut cutoff, _) = times.select_nth_unstable(nth);
        let before = self.entries.len();
        self.entries.retain(|_, e| e.last_timestamp_ms > cutoff);
        tracing::warn!(
            dropped = before - self.entries.len(),
            cap = PRODUCER_ENTRIES_MAX,
            "producer state at its cap: dropped the longest-idle producers (their next batch answers UNKNOWN_PRODUCER_ID)"
        );
    }

    /// A topic was deleted: its producers' state goes with it.
    pub fn remove_topic(&mut self, topic: &str) {
        self.entries.retain(|k, _| &*k.1 != topic);
    }

    /// Insert an entry read from a snapshot.
    pub(crate) fn insert(&mut self, key: Key, entry: ProducerEntry) {
        self.entries.insert(key, entry);
    }
}

/// The batch's record count less one (the sequence span), checked: ids,
/// epoch and sequence non-negative, at least one record and a count that
/// fits a sequence.
fn batch_span(p: &ProducerBatch, record_count: usize) -> Result<i32, SequenceProblem> {
    let span = record_count
        .checked_sub(1)
        .and_then(|c| i32::try_from(c).ok())
        .filter(|_| p.producer_id >= 0 && p.epoch >= 0 && p.base_sequence >= 0);
    span.ok_or(SequenceProblem::OutOfRange {
        producer_id: p.producer_id,
        max: i32::MAX as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(epoch: i16, seq: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: 7,
            epoch,
            base_sequence: seq,
            transactional: false,
        }
    }

    #[test]
    fn kafkas_rules() {
        let t: Arc<str> = Arc::from("t");
        let mut s = ProducerStates::default();
        assert_eq!(
            s.check(&t, 0, &batch(0, 3), 1),
            Err(SequenceProblem::UnknownProducer {
                producer_id: 7,
                got: 3
            })
        );
        assert_eq!(s.check(&t, 0, &batch(0, 0), 3), Ok(Checked::Append));
        s.record(&t, 0, &batch(0, 0), 3, 10, 1);
        // A retry of the whole batch is a duplicate with its offsets.
        let first = BatchMeta {
            first_seq: 0,
            last_seq: 2,
            base_offset: 10,
            last_offset: 12,
        };
        assert_eq!(
            s.check(&t, 0, &batch(0, 0), 3),
            Ok(Checked::Duplicate(first))
        );
        // Same first sequence, another length: not a duplicate, a gap.
        assert!(matches!(
            s.check(&t, 0, &batch(0, 0), 2),
            Err(SequenceProblem::OutOfOrder { expected: 3, .. })
        ));
        assert!(matches!(
            s.check(&t, 0, &batch(0, 4), 1),
            Err(SequenceProblem::OutOfOrder { expected: 3, .. })
        ));
        // Another partition is another entry.
        assert!(matches!(
            s.check(&t, 1, &batch(0, 3), 1),
            Err(SequenceProblem::UnknownProducer { .. })
        ));
        for (i, seq) in (3..8).enumerate() {
            s.record(&t, 0, &batch(0, seq), 1, 13 + i as u64, 2);
        }
        // Five retained: the first batch fell out.
        assert_eq!(s.get(7, "t", 0).map(|e| e.batches.len()), Some(5));
        assert!(matches!(
            s.check(&t, 0, &batch(0, 0), 3),
            Err(SequenceProblem::OutOfOrder { .. })
        ));
        assert!(matches!(
            s.check(&t, 0, &batch(0, 3), 1),
            Ok(Checked::Duplicate(BatchMeta {
                base_offset: 13,
                ..
            }))
        ));
        // A new epoch starts at 0; then the old epoch is stale.
        assert!(matches!(
            s.check(&t, 0, &batch(1, 8), 1),
            Err(SequenceProblem::OutOfOrder { expected: 0, .. })
        ));
        s.record(&t, 0, &batch(1, 0), 1, 18, 3);
        assert_eq!(
            s.check(&t, 0, &batch(0, 8), 1),
            Err(SequenceProblem::StaleEpoch {
                producer_id: 7,
                epoch: 0,
                current: 1
            })
        );
        assert_eq!(s.check(&t, 0, &batch(1, 1), 1), Ok(Checked::Append));
        assert!(s.check(&t, 0, &batch(-1, 0), 1).is_err());
        assert!(s.check(&t, 0, &batch(1, 1), 0).is_err());
    }

    #[test]
    fn sequences_wrap_as_kafkas() {
        assert_eq!(increment_sequence(5, 2), 7);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        let t: Arc<str> = Arc::from("t");
        let mut s = ProducerStates::default();
        s.record(&t, 0, &batch(0, 0), 1, 0, 1);
        let near = ProducerBatch {
            base_sequence: i32::MAX - 1,
            ..batch(1, 0)
        };
        // A new epoch at 0, then up to the wrap.
        s.record(&t, 0, &batch(1, 0), 1, 1, 1);
        s.entries.get_mut(&(7, Arc::clone(&t), 0)).unwrap().batches[0].last_seq = i32::MAX - 2;
        assert_eq!(s.check(&t, 0, &near, 3), Ok(Checked::Append));
        s.record(&t, 0, &near, 3, 2, 1);
        assert_eq!(s.check(&t, 0, &batch(1, 1), 1), Ok(Checked::Append));
    }

    #[test]
    fn replay_joins_a_split_batch_and_skips_what_it_holds() {
        let t: Arc<str> = Arc::from("t");
        let mut live = ProducerStates::default();
        live.record(&t, 0, &batch(0, 0), 10, 100, 5);
        let mut replayed = ProducerStates::default();
        let part = |seq, continues| EntryProducer {
            producer_id: 7,
            epoch: 0,
            base_sequence: seq,
            continues,
            transactional: false,
        };
        replayed.replay(&t, 0, &part(0, false), 4, 100, 5);
        replayed.replay(&t, 0, &part(4, true), 6, 104, 5);
        assert_eq!(replayed, live);
        // Replaying it again (a snapshot covered it) changes nothing.
        replayed.replay(&t, 0, &part(0, false), 4, 100, 5);
        replayed.replay(&t, 0, &part(4, true), 6, 104, 5);
        assert_eq!(replayed, live);
    }

    #[test]
    fn expiry_and_the_cap_bound_memory() {
        let t: Arc<str> = Arc::from("t");
        let mut s = ProducerStates::default();
        s.record(&t, 0, &batch(0, 0), 1, 0, 1_000);
        assert_eq!(s.expire(1_000 + PRODUCER_EXPIRATION_MS), 0);
        assert_eq!(s.expire(1_001 + PRODUCER_EXPIRATION_MS), 1);
        assert!(s.is_empty());
        for id in 0..PRODUCER_ENTRIES_MAX as i64 + 1 {
            let p = ProducerBatch {
                producer_id: id,
                epoch: 0,
                base_sequence: 0,
                transactional: false,
            };
            s.record(&t, 0, &p, 1, id as u64, id);
        }
        assert!(s.len() <= PRODUCER_ENTRIES_MAX);
        assert!(s.len() >= PRODUCER_ENTRIES_MAX * 8 / 10);
        // The newest is kept, the oldest went.
        assert!(s.get(PRODUCER_ENTRIES_MAX as i64, "t", 0).is_some());
        assert!(s.get(0, "t", 0).is_none());
    }
}
