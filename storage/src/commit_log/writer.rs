//! The CommitLog's writer: validating a batch, planning its entries and
//! the segments they need, encoding them and writing each segment's run
//! with one positioned write, then publishing the new committed position.
//! Also the per-partition next queue offsets it assigns, and the topic
//! close/open that topic deletion needs under the writer's lock.
//!
//! Invariant: a batch is planned whole (lengths, positions, segments)
//! before a byte is written, so it lands whole or not at all; a failed
//! write poisons the log and publishes nothing of the batch. The
//! partitions' next queue offsets move only after every write of the batch
//! succeeded, so a failed append leaves them as they were.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::format::{
    self, EntryBuilder, EntryFields, EntryMarker, EntryProducer, RecordFields, END_MARKER_LEN,
};
use super::prealloc::Take;
use super::record::{AppendRecord, Appended};
use super::segment::Segment;
use super::{lock, CommitLog};
use crate::error::{RecordProblem, Result, StoreError};
use crate::fault::{self, FaultPoint};
use crate::producer_state::{
    increment_sequence, ActiveProducer, BatchMeta, Checked, ProducerBatch, ProducerStates,
};
use crate::txn_index::TxnTable;
use crate::types::{now_ms, PhysicalOffset, QueueOffset, TopicPartition};

/// Per-partition counters of the next queue offset, owned by the writer:
/// topic → partition → next offset. Keyed by topic first so the append
/// path looks a partition up by `&str` without allocating.
#[derive(Default)]
pub struct NextOffsets(
    HashMap<Arc<str>, HashMap<u32, u64, ahash::RandomState>, ahash::RandomState>,
);

impl NextOffsets {
    pub fn insert(&mut self, tp: &TopicPartition, next: u64) {
        self.0
            .entry(Arc::clone(tp.topic_arc()))
            .or_default()
            .insert(tp.partition(), next);
    }

    pub fn get(&self, topic: &str, partition: u32) -> Option<u64> {
        self.0.get(topic)?.get(&partition).copied()
    }

    /// Raise `topic`-`partition`'s counter to `next` if it is lower.
    pub fn raise(&mut self, topic: &Arc<str>, partition: u32, next: u64) {
        let n = self.topic_mut(topic).entry(partition).or_insert(0);
        *n = (*n).max(next);
    }

    /// The counters of `topic`'s partitions, created empty if it has none.
    /// The append path looks the topic up once per run of its records
    /// (and a replica's copy, `copy.rs`, once per entry).
    pub(super) fn topic_mut(
        &mut self,
        topic: &Arc<str>,
    ) -> &mut HashMap<u32, u64, ahash::RandomState> {
        if !self.0.contains_key(&**topic) {
            self.0.insert(Arc::clone(topic), HashMap::default());
        }
        self.0.get_mut(&**topic).expect("inserted above")
    }
}

pub(super) struct WriterState {
    /// Where the next record goes; equals `committed` between appends.
    pub(super) write_pos: u64,
    pub(super) next_offsets: NextOffsets,
    /// Topics deleted in this run and not created again: their appends are
    /// refused, so no record gets an offset past the next offsets the
    /// deletion kept (see [`CommitLog::close_topic`]).
    pub(super) closed_topics: HashSet<Arc<str>, ahash::RandomState>,
    /// Reused encoding buffer, so appends do not allocate.
    pub(super) scratch: Vec<u8>,
    /// Idempotent producers' sequences, checked and moved under this lock
    /// with the offsets (see `crate::producer_state`).
    pub(super) producers: ProducerStates,
    /// Counts changes to `producers`, so a checkpoint rewrites the
    /// snapshot only when there is something new in it.
    pub(super) producers_version: u64,
}

/// What [`CommitLog::producer_snapshot`] hands the checkpoint.
pub(crate) struct ProducerSnapshot {
    pub states: ProducerStates,
    pub open_txns: Vec<crate::txn_index::OpenTxn>,
    pub aborted: Vec<crate::producer_state::snapshot::AbortedCount>,
    pub position: u64,
    pub version: u64,
}

/// What an append did.
#[derive(Debug)]
pub enum LogAppend {
    /// The batch was written: where each record landed, and the log
    /// position after it.
    Written { appended: Vec<Appended>, end: u64 },
    /// The producer's batch was written before: its offsets, and the log
    /// position (at or past it) a sync flush must cover before answering.
    Duplicate { batch: BatchMeta, end: u64 },
}

/// A transaction marker to write: whose, which outcome, and the epoch of
/// the coordinator that decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkerSpec {
    pub producer_id: i64,
    pub epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// Largest entry the writer builds: the records of one partition in one
/// append beyond it continue in another entry. A reader by physical offset
/// walks (and checks) at most one entry, and the whole-or-nothing unit of a
/// torn write stays small.
pub const ENTRY_BYTES_TARGET: usize = 1 << 20;

/// One entry of an append being planned: which records (a range of the
/// batch's partition order), its length, where it goes, and the queue
/// offset of its first record.
struct PlannedEntry {
    records: std::ops::Range<usize>,
    len: usize,
    at: u64,
    base_queue_offset: u64,
}

fn record_fields(r: &AppendRecord, store_ts: i64) -> RecordFields<'_> {
    RecordFields {
        producer_timestamp_ms: r.timestamp_ms.unwrap_or(store_ts),
        key: r.key.as_deref(),
        value: r.value.as_deref(),
        headers: &r.headers,
    }
}

/// Whether two records go to the same partition. A front-end hands every
/// record of a request the topic's one `Arc`, so the pointer comparison
/// answers nearly always; the names are compared only when it does not.
fn same_partition(a: &AppendRecord, b: &AppendRecord) -> bool {
    a.partition == b.partition && (Arc::ptr_eq(&a.topic, &b.topic) || a.topic == b.topic)
}

impl CommitLog {
    /// Recovery: where each partition's queue offsets continue.
    pub(crate) fn set_next_offsets(&self, next: NextOffsets) {
        lock(&self.writer).next_offsets = next;
    }

    /// Each partition's transactions (open ones, the LSO, the aborted).
    pub fn txns(&self) -> &Arc<TxnTable> {
        &self.txns
    }

    /// The producers with state in `topic`-`partition`, by producer id,
    /// each with its open transaction's first offset (DescribeProducers).
    pub fn producers_of(&self, topic: &str, partition: u32) -> Vec<ActiveProducer> {
        let mut out: Vec<ActiveProducer> = lock(&self.writer)
            .producers
            .in_partition(topic, partition)
            .map(|(producer_id, e)| ActiveProducer {
                producer_id,
                epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_seq),
                last_timestamp_ms: e.last_timestamp_ms,
                txn_start_offset: None,
            })
            .collect();
        out.sort_unstable_by_key(|p| p.producer_id);
        let txns = self.txns.lock();
        if let Some(t) = txns.get(topic, partition) {
            for p in &mut out {
                p.txn_start_offset = t.open_since(p.producer_id);
            }
        }
        out
    }

    /// The producer-state snapshot's contents changed outside an append
    /// (aborted transactions forgotten): the next checkpoint writes it.
    pub(crate) fn producer_state_changed(&self) {
        lock(&self.writer).producers_version += 1;
    }

    /// Recovery: the producer state rebuilt from the snapshot and the log.
    pub(crate) fn set_producer_states(&self, states: ProducerStates) {
        let mut w = lock(&self.writer);
        w.producers = states;
        w.producers_version += 1;
    }

    /// The producer state (expired entries dropped first) with the open
    /// transactions, the write position both are exact for (every producer
    /// entry below it is in them, none at or past it) and its version;
    /// `None` if the version is still `since` (nothing changed since that
    /// snapshot).
    pub(crate) fn producer_snapshot(&self, since: u64) -> Option<ProducerSnapshot> {
        let mut w = lock(&self.writer);
        if w.producers.expire(now_ms()) > 0 {
            w.producers_version += 1;
        }
        (w.producers_version != since).then(|| {
            let txns = self.txns.lock();
            ProducerSnapshot {
                states: w.producers.clone(),
                open_txns: txns.open_all(),
                aborted: txns.aborted_counts(),
                position: w.write_pos,
                version: w.producers_version,
            }
        })
    }

    /// The largest producer id the state holds.
    pub fn max_producer_id(&self) -> Option<i64> {
        lock(&self.writer).producers.max_producer_id()
    }

    /// The largest producer id the state holds within `space`.
    pub fn max_producer_id_in(&self, space: &std::ops::Range<i64>) -> Option<i64> {
        lock(&self.writer).producers.max_producer_id_in(space)
    }

    /// The next queue offset the writer will assign in `tp`.
    pub fn next_queue_offset(&self, tp: &TopicPartition) -> u64 {
        lock(&self.writer)
            .next_offsets
            .get(tp.topic(), tp.partition())
            .unwrap_or(0)
    }

    /// A topic is being deleted: from now on its appends are refused (until
    /// [`CommitLog::open_partition`]), and the writer's next queue offset
    /// of every partition of `topic` it has assigned offsets in (or was
    /// told of at open) is returned. Both happen under the writer's lock,
    /// so every record of the topic either got its offset before and is
    /// counted in what is returned, or is refused: none can take an offset
    /// at or past what the deletion keeps and be indexed as a new
    /// incarnation of the deleted topic.
    pub fn close_topic(&self, topic: &str) -> Vec<(u32, u64)> {
        let mut w = lock(&self.writer);
        w.closed_topics.insert(Arc::from(topic));
        w.producers.remove_topic(topic);
        self.txns.lock().remove_topic(topic);
        w.producers_version += 1;
        w.next_offsets
            .0
            .get(topic)
            .map(|parts| parts.iter().map(|(&p, &n)| (p, n)).collect())
            .unwrap_or_default()
    }

    /// A partition of `tp`'s topic is created (or the topic created again
    /// after a deletion): appends to the topic are accepted again, and the
    /// queue offset its next record gets is returned (the base of the new
    /// incarnation). One lock for both, so no refused-then-accepted record
    /// can slip below the returned base.
    pub fn open_partition(&self, tp: &TopicPartition) -> u64 {
        let mut w = lock(&self.writer);
        w.closed_topics.remove(tp.topic());
        w.next_offsets.get(tp.topic(), tp.partition()).unwrap_or(0)
    }

    /// The record rules, checked once per record before anything is
    /// written: the header bounds, the payload limit (the store's, or
    /// `max_payload` if that is smaller), and that the record fits an entry
    /// of its own in an empty segment. The topic name is checked by the
    /// caller, once per run of records of one topic.
    fn validate(&self, index: usize, r: &AppendRecord, max_payload: u64) -> Result<()> {
        let refuse = |problem| Err(StoreError::RecordRefused { index, problem });
        if r.headers.len() > format::HEADER_COUNT_MAX {
            return refuse(RecordProblem::TooManyHeaders {
                count: r.headers.len(),
                max: format::HEADER_COUNT_MAX,
            });
        }
        if let Some((header, h)) = r
            .headers
            .iter()
            .enumerate()
            .find(|(_, h)| h.name.len() > format::HEADER_NAME_MAX)
        {
            return refuse(RecordProblem::HeaderNameTooLong {
                header,
                len: h.name.len(),
                max: format::HEADER_NAME_MAX,
            });
        }
        let key_len = r.key.as_ref().map(|k| k.len());
        let value_len = r.value.as_ref().map(|v| v.len());
        let payload = key_len.unwrap_or(0) as u64
            + value_len.unwrap_or(0) as u64
            + format::headers_block_len(&r.headers) as u64;
        let limit = self.max_message_bytes.min(max_payload);
        if payload > limit {
            return refuse(RecordProblem::TooLarge {
                size: payload,
                limit,
            });
        }
        // The record must fit an entry of its own in an empty segment, with
        // a producer block or without (one limit for every producer).
        let len = format::entry_header_len_with(r.topic.len(), true)
            + format::record_len_bound(key_len, value_len, &r.headers);
        if len > format::RECORD_LEN_MAX || (len + END_MARKER_LEN) as u64 > self.segment_bytes {
            return refuse(RecordProblem::LargerThanSegment {
                size: len as u64,
                limit: (self.segment_bytes.saturating_sub(END_MARKER_LEN as u64))
                    .min(format::RECORD_LEN_MAX as u64),
            });
        }
        Ok(())
    }

    /// Append a batch (one produce request) as one unit: every record is
    /// validated first, so either all of it is appended or none. Answers
    /// [`LogAppend::Written`] with where each record landed, in the batch's
    /// order, and the log position after the batch. Does not wait for a
    /// flush; see
    /// [`CommitLog::wait_flushed`] and [`CommitLog::flush_all`].
    ///
    /// The records of one partition go into one entry (see [`mod@format`]),
    /// or several if they exceed [`ENTRY_BYTES_TARGET`]; each partition's
    /// records keep the batch's order, and so do their queue offsets.
    ///
    /// `max_payload` lowers the store's record limit for this batch (a
    /// topic's `max.message.bytes`); `u64::MAX` keeps the store's.
    ///
    /// With `producer`, the batch is that idempotent producer's: it must be
    /// of one partition, and its sequence is checked against the producer
    /// state under the writer's lock, before anything is planned (Kafka's
    /// rules, `crate::producer_state`). A retry of one of the producer's
    /// last five batches writes nothing and answers
    /// [`LogAppend::Duplicate`]; a batch out of sequence is
    /// [`StoreError::ProducerRefused`]. The state moves only once the batch
    /// is written, like the next offsets.
    ///
    /// An append that rolls into a segment the preallocator is still
    /// making releases the writer's lock, waits for it (at most
    /// `SEGMENT_WAIT_MAX`) and plans
    /// again; one whose creation is failing is refused at once
    /// ([`StoreError::DiskFull`] for a short disk, else
    /// [`StoreError::SegmentUnavailable`]), with nothing written.
    pub fn append_as(
        &self,
        batch: &[AppendRecord],
        max_payload: u64,
        producer: Option<&ProducerBatch>,
    ) -> Result<LogAppend> {
        self.append_with(batch, max_payload, producer, None)
    }

    /// Write a transaction marker (Kafka's COMMIT or ABORT control record)
    /// to `topic`-`partition`, at an offset of its own: it ends the
    /// producer's transaction there, and an abort is remembered for
    /// read_committed fetches (`crate::txn_index`). Refused with
    /// [`SequenceProblem::StaleEpoch`] if the producer is known here at a
    /// newer epoch. Does not wait for a flush, as
    /// [`CommitLog::append_as`].
    ///
    /// [`SequenceProblem::StaleEpoch`]: crate::SequenceProblem::StaleEpoch
    pub fn append_marker(
        &self,
        topic: &Arc<str>,
        partition: u32,
        marker: MarkerSpec,
    ) -> Result<LogAppend> {
        let record = AppendRecord {
            topic: Arc::clone(topic),
            partition,
            key: Some(bytes::Bytes::copy_from_slice(&format::control_key(
                marker.commit,
            ))),
            value: Some(bytes::Bytes::copy_from_slice(&format::control_value(
                marker.coordinator_epoch,
            ))),
            headers: Vec::new(),
            timestamp_ms: None,
        };
        self.append_with(std::slice::from_ref(&record), u64::MAX, None, Some(marker))
    }

    fn append_with(
        &self,
        batch: &[AppendRecord],
        max_payload: u64,
        producer: Option<&ProducerBatch>,
        marker: Option<MarkerSpec>,
    ) -> Result<LogAppend> {
        let mut deadline = None;
        loop {
            match self.try_append(batch, max_payload, producer, marker)? {
                Attempt::Done(done) => return Ok(done),
                Attempt::WaitForSegment(base) => {
                    let deadline = *deadline.get_or_insert_with(|| {
                        std::time::Instant::now() + super::prealloc::SEGMENT_WAIT_MAX
                    });
                    self.wait_for_segment(base, deadline)?;
                }
            }
        }
    }

    /// One attempt of [`CommitLog::append_as`] (or, with `marker`, of
    /// [`CommitLog::append_marker`]: `batch` is its control record) under
    /// the writer's lock.
    fn try_append(
        &self,
        batch: &[AppendRecord],
        max_payload: u64,
        producer: Option<&ProducerBatch>,
        marker: Option<MarkerSpec>,
    ) -> Result<Attempt> {
        let one_partition = batch.windows(2).all(|w| same_partition(&w[0], &w[1]));
        if (producer.is_some() || marker.is_some()) && (batch.is_empty() || !one_partition) {
            return Err(StoreError::invalid(
                "a producer's batch must hold records of one partition",
            ));
        }
        let mut checked_topic: Option<&Arc<str>> = None;
        for (index, r) in batch.iter().enumerate() {
            if checked_topic.is_none_or(|t| !Arc::ptr_eq(t, &r.topic) && *t != r.topic) {
                crate::types::validate_topic_name(&r.topic)?;
                checked_topic = Some(&r.topic);
            }
            self.validate(index, r, max_payload)?;
        }
        // A produce request usually goes to one partition; a mixed batch is
        // grouped by partition (a stable sort keeps each one's order).
        let mut order: Vec<usize> = (0..batch.len()).collect();
        if !one_partition {
            order.sort_by(|&a, &b| {
                let (a, b) = (&batch[a], &batch[b]);
                (&*a.topic, a.partition).cmp(&(&*b.topic, b.partition))
            });
        }
        let mut w = lock(&self.writer);
        self.check_poisoned()?;
        if !w.closed_topics.is_empty() {
            if let Some(r) = batch.iter().find(|r| w.closed_topics.contains(&*r.topic)) {
                return Err(StoreError::TopicDeleted {
                    topic: r.topic.to_string(),
                });
            }
        }
        let refused = |first: &AppendRecord, problem| StoreError::ProducerRefused {
            topic: first.topic.to_string(),
            partition: first.partition,
            problem,
        };
        // A marker's block: what it ends here and the LSO after it.
        let mut marker_block: Option<EntryMarker> = None;
        if let (Some(m), Some(first)) = (marker, batch.first()) {
            w.producers
                .check_marker(&first.topic, first.partition, m.producer_id, m.epoch)
                .map_err(|p| refused(first, p))?;
            let offset = w
                .next_offsets
                .get(&first.topic, first.partition)
                .unwrap_or(0);
            let (txn_first_offset, last_stable_offset) = self
                .txns
                .lock()
                .get(&first.topic, first.partition)
                .map_or((None, offset + 1), |t| t.ending(m.producer_id, offset));
            marker_block = Some(EntryMarker {
                commit: m.commit,
                coordinator_epoch: m.coordinator_epoch,
                txn_first_offset,
                last_stable_offset,
            });
        }
        if let (Some(p), Some(first)) = (producer, batch.first()) {
            self.txns
                .check_batch(
                    &first.topic,
                    first.partition,
                    p.producer_id,
                    p.transactional,
                )
                .map_err(|problem| refused(first, problem))?;
            match w
                .producers
                .check(&first.topic, first.partition, p, batch.len())
            {
                Ok(Checked::Append) => {}
                Ok(Checked::Duplicate(original)) => {
                    return Ok(Attempt::Done(LogAppend::Duplicate {
                        batch: original,
                        end: w.write_pos,
                    }))
                }
                Err(problem) => return Err(refused(first, problem)),
            }
        }
        let store_ts = now_ms();
        let fields = |r| record_fields(r, store_ts);

        // Plan: the entries (their records and exact lengths), where each
        // goes and which segments that needs, before anything is written.
        let cap = ENTRY_BYTES_TARGET.min(self.segment_bytes as usize - END_MARKER_LEN);
        let mut plan: Vec<PlannedEntry> = Vec::new();
        let mut pos = w.write_pos;
        let Some(mut seg) = self.segment_for_write(pos)? else {
            return Ok(Attempt::WaitForSegment(pos));
        };
        let mut i = 0;
        while i < order.len() {
            let first = &batch[order[i]];
            let mut len = if marker.is_some() {
                format::marker_header_len(first.topic.len())
            } else {
                format::entry_header_len_with(first.topic.len(), producer.is_some())
            };
            let mut j = i;
            while j < order.len() {
                let r = &batch[order[j]];
                if j > i && !same_partition(first, r) {
                    break;
                }
                let rec_len = format::record_len(len, (j - i) as u64, store_ts, &fields(r));
                if j > i && len + rec_len > cap {
                    break;
                }
                len += rec_len;
                j += 1;
            }
            if pos + (len + END_MARKER_LEN) as u64 > seg.end() {
                pos = seg.end();
                seg = match self.segment_for_write(pos)? {
                    Some(s) => s,
                    // Nothing written yet: the whole batch plans again.
                    None => return Ok(Attempt::WaitForSegment(pos)),
                };
            }
            // Read, not taken: the counters move only once every write of
            // the batch succeeded (below).
            let base_queue_offset = match plan.last() {
                Some(prev) if same_partition(&batch[order[prev.records.start]], first) => {
                    prev.base_queue_offset + prev.records.len() as u64
                }
                _ => w
                    .next_offsets
                    .get(&first.topic, first.partition)
                    .unwrap_or(0),
            };
            plan.push(PlannedEntry {
                records: i..j,
                len,
                at: pos,
                base_queue_offset,
            });
            pos += len as u64;
            i = j;
        }
        let end = pos;
        if self.zero_fill_ahead {
            self.wait_for_zero_fill(end);
        }

        // Encode the entries into the scratch buffer, one contiguous run per
        // segment, and hand each run to the kernel with one positioned
        // write. Writing through write(2) rather than through the map is
        // what makes appends run near the disk's bandwidth: a store into a
        // mapped page takes a page fault per page, write(2) copies into the
        // page cache in bulk. Readers still read through the map, which
        // sees the same page cache.
        let mut out = vec![Appended::default(); batch.len()];
        let mut cursor = w.write_pos;
        let mut run_start = cursor;
        let mut scratch = std::mem::take(&mut w.scratch);
        scratch.clear();
        for e in &plan {
            if e.at != cursor {
                // The entry did not fit: mark the rest of the old segment,
                // and write out what this segment got.
                let mut marker = [0u8; END_MARKER_LEN];
                format::encode_end_marker(&mut marker, cursor, e.at - cursor);
                scratch.extend_from_slice(&marker);
                self.write_run(run_start, &scratch)?;
                if let Some(s) = self.segment_containing(run_start) {
                    s.note_store_ts(store_ts);
                    s.seal();
                }
                scratch.clear();
                run_start = e.at;
            }
            let first = &batch[order[e.records.start]];
            let base = e.base_queue_offset;
            let start = scratch.len();
            let mut entry = EntryBuilder::begin(
                &mut scratch,
                &EntryFields {
                    base_queue_offset: base,
                    store_timestamp_ms: store_ts,
                    topic: &first.topic,
                    partition: first.partition,
                    // A producer's batch is one partition, so its k-th
                    // record is the batch's k-th and its sequence follows.
                    producer: match (producer, marker) {
                        (Some(p), _) => Some(EntryProducer {
                            producer_id: p.producer_id,
                            epoch: p.epoch,
                            base_sequence: increment_sequence(
                                p.base_sequence,
                                e.records.start as i32,
                            ),
                            continues: e.records.start > 0,
                            transactional: p.transactional,
                        }),
                        (None, Some(m)) => Some(EntryProducer {
                            producer_id: m.producer_id,
                            epoch: m.epoch,
                            base_sequence: format::MARKER_SEQUENCE,
                            continues: false,
                            transactional: true,
                        }),
                        (None, None) => None,
                    },
                    marker: marker_block,
                },
            );
            for (k, &idx) in order[e.records.clone()].iter().enumerate() {
                let (at, len) = entry.push(&mut scratch, &fields(&batch[idx]));
                out[idx] = Appended {
                    queue_offset: QueueOffset::new(base + k as u64),
                    physical_offset: PhysicalOffset::new(e.at + at as u64),
                    size: len as u32,
                };
            }
            entry.finish(&mut scratch, e.at);
            debug_assert_eq!(scratch.len() - start, e.len);
            cursor = e.at + e.len as u64;
        }
        if !scratch.is_empty() {
            self.write_run(run_start, &scratch)?;
            if let Some(s) = self.segment_containing(run_start) {
                s.note_store_ts(store_ts);
            }
        }
        // Every write succeeded: only now do the partitions' next offsets
        // move, so a failed append leaves them exactly as they were (a
        // topic deletion keeps them durably, and a counted offset that was
        // never written would be a gap).
        let mut counters: Option<(&str, &mut HashMap<u32, u64, ahash::RandomState>)> = None;
        for e in &plan {
            let first = &batch[order[e.records.start]];
            if counters
                .as_ref()
                .is_none_or(|(topic, _)| *topic != &*first.topic)
            {
                counters = Some((&first.topic, w.next_offsets.topic_mut(&first.topic)));
            }
            let (_, topic_counters) = counters.as_mut().expect("set above");
            topic_counters.insert(
                first.partition,
                e.base_queue_offset + e.records.len() as u64,
            );
        }
        if let (Some(p), Some(first), Some(e)) = (producer, batch.first(), plan.first()) {
            w.producers.record(
                &first.topic,
                first.partition,
                p,
                batch.len(),
                e.base_queue_offset,
                store_ts,
            );
            if p.transactional {
                // Checked above (room, order: offsets only grow here).
                if let Err(problem) = self
                    .txns
                    .lock()
                    .get_mut(&first.topic, first.partition)
                    .record(p.producer_id, e.base_queue_offset)
                {
                    debug_assert!(false, "a checked transactional batch: {problem}");
                }
            }
            w.producers_version += 1;
        }
        if let (Some(m), Some(first), Some(e)) = (marker, batch.first(), plan.first()) {
            w.producers.marker(
                &first.topic,
                first.partition,
                m.producer_id,
                m.epoch,
                store_ts,
            );
            if let Err(problem) = self
                .txns
                .lock()
                .get_mut(&first.topic, first.partition)
                .marker(
                    m.producer_id,
                    e.base_queue_offset,
                    m.commit,
                    out[0].physical_offset.get(),
                )
            {
                debug_assert!(false, "a marker in offset order: {problem}");
            }
            w.producers_version += 1;
        }
        w.scratch = scratch;
        w.write_pos = end;
        self.committed.store(end, Ordering::Release);
        drop(w);
        self.appended.notify(usize::MAX);
        if self.preallocate {
            self.prealloc.writer_at(end);
        }
        Ok(Attempt::Done(LogAppend::Written { appended: out, end }))
    }

    /// Write `bytes` at physical offset `pos` (all inside one segment, past
    /// the committed position). A failed write poisons the log: nobody
    /// knows what reached the page cache, and nothing of the batch is
    /// published; the append answers [`StoreError::Poisoned`].
    pub(super) fn write_run(&self, pos: u64, bytes: &[u8]) -> Result<()> {
        let Some(s) = self.segment_containing(pos) else {
            debug_assert!(false, "planned segment at {pos} is missing");
            return Err(StoreError::inconsistent(
                &self.dir,
                pos,
                "the segment planned for this write is missing",
            ));
        };
        let res = fault::check(&self.faults, FaultPoint::CommitLogWrite)
            .and_then(|_| s.write_at(pos - s.base(), bytes));
        if let Err(e) = res {
            // The append that poisons the log is answered as every later
            // one is: the store refuses writes (a read-only or failing
            // disk), not an internal error of this one request.
            let reason = format!("write to {} failed: {e}", s.path().display());
            self.poison(reason.clone());
            return Err(StoreError::Poisoned { reason });
        }
        Ok(())
    }

    /// The segment that `pos` falls in, or the next one (at `pos`) if the
    /// log ends exactly there: the preallocator's, or with preallocation
    /// off (or asked for another position) one made here. `None`: the
    /// preallocator is making it, and the caller must release the
    /// writer's lock and wait ([`CommitLog::wait_for_segment`]); nothing
    /// waits for another thread here. Called with the writer lock held.
    pub(super) fn segment_for_write(&self, pos: u64) -> Result<Option<Arc<Segment>>> {
        if let Some(s) = self.segment_containing(pos) {
            return Ok(Some(s));
        }
        let made = |faults| {
            Segment::create(&self.dir, pos, self.segment_bytes, faults)
                .map(Arc::new)
                .map_err(|e| e.space_refusal("create the next commit log segment"))
        };
        let seg = if self.preallocate {
            match self.prealloc.take(pos) {
                Take::Ready(s) => s,
                Take::Wait => return Ok(None),
                Take::Failing(e) => return Err(e),
                Take::Stopped => return Err(StoreError::Closed),
                Take::NotMine => made(&self.faults)?,
            }
        } else {
            made(&self.faults)?
        };
        tracing::debug!(base = pos, "commit log rolled to a new segment");
        self.segments
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&seg));
        if self.preallocate {
            self.request_next_segment(seg.end());
        }
        Ok(Some(seg))
    }
}

/// What one attempt of an append under the writer's lock came to.
enum Attempt {
    Done(LogAppend),
    /// The segment at this base is being made: wait with the lock
    /// released, then plan the batch again.
    WaitForSegment(u64),
}
