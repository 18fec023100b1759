//! Fetch (1), sessionless: every asked partition read from its offset,
//! built back into one uncompressed batch per partition with the records'
//! own offsets (gaps after compaction), long-polling until `min_bytes`
//! are there, `max_wait_ms` passes or shutdown begins.
//!
//! The wait is the broker's one long-poll (`Door::long_poll`, the one HTTP
//! fetch waits in): read-your-writes (a fetch sees every record
//! acknowledged before it began, also with max_wait 0), then the
//! partitions' listeners, the deadline or shutdown; never a polling loop.
//! This file makes one round of reads (`KafkaRound`) and the answer.
//!
//! Decisions: a fetch offset below the beginning or above the end is
//! OFFSET_OUT_OF_RANGE, at the end it waits; `max_bytes` and
//! `partition_max_bytes` bound what is read, but a partition's first
//! record comes back even when larger (as Kafka returns its first batch);
//! `max_wait_ms` is capped at [`MAX_WAIT_MS`]; a session id or epoch is
//! ignored (answered as a full fetch, session id 0). In a cluster only
//! the master serves fetches (clients fetch from the leader; there is no
//! follower fetching): a replica answers NOT_LEADER_OR_FOLLOWER per
//! partition, and a `current_leader_epoch` (v9+) other than the
//! cluster's FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH (newer),
//! as Kafka's leader checks it (`super::cluster`); alone it is ignored,
//! as it always was.
//!
//! Bounds on what one fetch makes the server hold:
//! * `max_bytes` is capped by `kafka.fetch_max_bytes` (Kafka's broker
//!   `fetch.max.bytes`, 55 MiB): a client asking 2^31-1 gets at most that
//!   many record bytes (its first batch still, when larger).
//! * A partition named more than once (in one topic or in two entries of
//!   the same topic) is read and answered once, at its first place, with
//!   the offset and `partition_max_bytes` of its last mention, as Kafka's
//!   broker does (its FetchRequest's partitions are a map keyed by
//!   partition, later entries replacing earlier ones).
//! * Every partition's read is counted against the global budget of
//!   fetch answers (`http.max_inflight_response_bytes`, shared with HTTP's
//!   fetch answers; not the request budget, so clients that do not read
//!   cannot starve producers) before it is made, by its byte limit, then
//!   by what it read; the answer's bytes stay counted until the listener
//!   has written it ([`handle`] returns the reservation), so answers held
//!   for clients that do not read are bounded in total, not only per
//!   connection. A partition whose read does not fit the budget is
//!   answered empty (the consumer fetches it again), never with an error
//!   and never by closing the connection.

use std::sync::Arc;
use std::time::Duration;

use std::collections::HashMap;

use crate::metrics::Refused;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId};
use tidelog_broker::long_poll::{FetchRound, Round};
use tidelog_broker::read::PartitionRef;
use tidelog_broker::store::{ReadSink, StoredRecord};
use tidelog_broker::topic_config::{CompressionType, TimestampType};
use tidelog_runtime::budget::{ByteBudget, Reservation};

use super::cluster::Nodes;
use super::partition_ref;
use crate::context::Context;
use crate::error::broker_code;
use crate::records::{
    compress_batches, compression, encode_batch_as, BatchBuilder, OutRecord, TxnBatch,
};

/// The longest wait a fetch is held for (Kafka clients ask 500 ms).
pub const MAX_WAIT_MS: u64 = 30_000;
/// Records read per partition and fetch, beside the byte bounds.
const MAX_RECORDS: usize = 65_536;

/// One asked partition: its reader and where it reads from.
struct Asked {
    topic: usize,
    index: i32,
    offset: i64,
    max_bytes: usize,
    /// `isolation_level` 1 (READ_COMMITTED): the read ends at the last
    /// stable offset and names the aborted transactions it spans.
    committed: bool,
    part: Result<PartitionRef, i16>,
}

/// The answer, and the answer budget's bytes its records hold, to be
/// dropped once the answer is written.
pub async fn handle(ctx: &Context, request: FetchRequest) -> (FetchResponse, Reservation) {
    let door = ctx.door();
    let nodes = Nodes::of(door.as_ref());
    let committed = request.isolation_level == 1;
    let mut topics = Vec::with_capacity(request.topics.len());
    let mut asked: Vec<Asked> = Vec::new();
    // Each partition once: where it is in `asked`, by topic and index.
    let mut seen: HashMap<(String, i32), usize> = HashMap::new();
    for (t, topic) in request.topics.into_iter().enumerate() {
        let name = topic.topic.0.as_str();
        for p in &topic.partitions {
            let max_bytes = usize::try_from(p.partition_max_bytes.max(0)).unwrap_or(0);
            if let Some(&at) = seen.get(&(name.to_owned(), p.partition)) {
                asked[at].offset = p.fetch_offset;
                asked[at].max_bytes = max_bytes;
                continue;
            }
            seen.insert((name.to_owned(), p.partition), asked.len());
            let part = partition_ref(door.as_ref(), name, p.partition)
                .and_then(|part| nodes.leader_check(p.current_leader_epoch).map(|()| part));
            asked.push(Asked {
                topic: t,
                index: p.partition,
                offset: p.fetch_offset,
                max_bytes,
                committed,
                part,
            });
        }
        topics.push(topic.topic);
    }
    let wait = u64::try_from(request.max_wait_ms.max(0))
        .unwrap_or(0)
        .min(MAX_WAIT_MS);
    let max_bytes = usize::try_from(request.max_bytes.max(0))
        .unwrap_or(0)
        .min(ctx.fetch_max_bytes);
    let mut round = KafkaRound {
        asked: &asked,
        max_bytes,
        min_bytes: min_bytes(request.min_bytes, max_bytes),
        ctx,
    };
    let (answered, held) = match &door {
        Some(door) => {
            door.long_poll(&mut round, Duration::from_millis(wait), ctx.stop.clone())
                .await
        }
        // Recovering: every partition answers NOT_READY, at once.
        None => round.read_once().await.0,
    };
    let mut responses: Vec<FetchableTopicResponse> = topics
        .into_iter()
        .map(|name| FetchableTopicResponse::default().with_topic(name))
        .collect();
    for (a, data) in asked.iter().zip(answered) {
        responses[a.topic].partitions.push(data);
    }
    // A topic entry all of whose partitions were answered at an earlier
    // entry of the same topic says nothing.
    responses.retain(|t| !t.partitions.is_empty());
    (FetchResponse::default().with_responses(responses), held)
}

/// A fetch's `min_bytes`: at least one byte (a fetch waits for
/// something), at most what the fetch may carry (`max_bytes`): else a
/// fetch whose min_bytes cannot be met would wait out its deadline with
/// records there to answer.
fn min_bytes(asked: i32, max_bytes: usize) -> usize {
    usize::try_from(asked.max(0))
        .unwrap_or(0)
        .clamp(1, max_bytes.max(1))
}

/// One round of a fetch's reads: every asked partition once, within the
/// fetch's byte limits and the answer budget.
struct KafkaRound<'a> {
    asked: &'a [Asked],
    max_bytes: usize,
    min_bytes: usize,
    ctx: &'a Context,
}

impl KafkaRound<'_> {
    /// The answers and their budget bytes, and whether they are enough
    /// (`min_bytes` read, or a partition failed) with where to listen.
    async fn read_once(&self) -> ((Vec<PartitionData>, Reservation), Round<()>) {
        let (answered, bytes, listen_from, held) =
            read_all(self.asked, self.max_bytes, self.ctx).await;
        let failed = answered.iter().any(|p| p.error_code != 0);
        if bytes >= self.min_bytes || failed {
            return ((answered, held), Round::Done(()));
        }
        let listen = self
            .asked
            .iter()
            .zip(&listen_from)
            .filter_map(|(a, from)| match (&a.part, from) {
                (Ok(part), Some(from)) => Some((part.clone(), *from)),
                _ => None,
            })
            .collect();
        ((answered, held), Round::Short { answer: (), listen })
    }
}

impl FetchRound for KafkaRound<'_> {
    type Answer = (Vec<PartitionData>, Reservation);

    async fn read(&mut self) -> Round<Self::Answer> {
        match self.read_once().await {
            (answer, Round::Done(())) => Round::Done(answer),
            (answer, Round::Short { listen, .. }) => Round::Short { answer, listen },
        }
    }
}

/// Every asked partition read once: the answers, the record bytes sent,
/// for each partition where a wait should listen (see [`read_one`]), and
/// the budget's bytes the answers' records hold.
async fn read_all(
    asked: &[Asked],
    max_bytes: usize,
    ctx: &Context,
) -> (Vec<PartitionData>, usize, Vec<Option<u64>>, Reservation) {
    let budget: &Arc<ByteBudget> = &ctx.answer_budget;
    let mut answered = Vec::with_capacity(asked.len());
    let mut listen_from = Vec::with_capacity(asked.len());
    let mut held = budget.empty();
    let mut left = max_bytes;
    let mut sent = 0;
    for a in asked {
        // The first records of a fetch come back even past max_bytes
        // (Kafka's rule, so a consumer always makes progress).
        let left_here = if sent == 0 { left.max(1) } else { left };
        let (data, from) = match &a.part {
            Err(code) => (failed(a.index, *code), None),
            Ok(part) => {
                // The read's bytes are counted before it is made (by its
                // limit), then by what it read.
                let limit = a.max_bytes.min(left_here).max(1) as u64;
                match budget.try_reserve(limit) {
                    None => {
                        ctx.metrics.refused(Refused::FetchInflightBytes);
                        tracing::debug!(
                            partition = a.index,
                            limit,
                            used = budget.used_bytes(),
                            "kafka fetch partition answered empty: the answer budget is short (http.max_inflight_response_bytes)"
                        );
                        (empty(part, a), None)
                    }
                    Some(mut reserved) => {
                        let (data, from) = read_one(part, a, left_here, sent > 0).await;
                        // What it read stays held, the rest of its limit
                        // goes back.
                        reserved.shrink_to(data.records.as_ref().map_or(0, Bytes::len) as u64);
                        held.absorb(reserved);
                        (data, from)
                    }
                }
            }
        };
        let size = data.records.as_ref().map_or(0, Bytes::len);
        left = left.saturating_sub(size);
        sent += size;
        answered.push(data);
        listen_from.push(from);
    }
    (answered, sent, listen_from, held)
}

/// A partition answered with no records (its read did not fit the byte
/// budget), with its offsets as a read would have them.
fn empty(part: &PartitionRef, a: &Asked) -> PartitionData {
    let (beginning, end) = part.log_start_and_end();
    PartitionData::default()
        .with_partition_index(a.index)
        .with_high_watermark(end as i64)
        .with_last_stable_offset(part.last_stable_offset(end) as i64)
        .with_log_start_offset(beginning as i64)
        .with_aborted_transactions(Some(Vec::new()))
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(Bytes::new()))
}

/// One partition's answer, and the offset a wait for more bytes listens
/// from: the read's next offset when it reached the partition's end (a
/// new record there would add to the answer), `None` when nothing more
/// could (an error, or a byte limit cut the read: the rest is there but
/// this fetch cannot take it, so waking on it would only read the same).
///
/// `must_fit`: an earlier partition of this answer has records, so this
/// one's may not go past `left` (Kafka lets only the first partition with
/// records exceed the fetch's `max_bytes`, so that a consumer always
/// makes progress). The store always reads at least one record; a first
/// record larger than `left` is read and dropped, at most once a fetch
/// and partition.
async fn read_one(
    part: &PartitionRef,
    a: &Asked,
    left: usize,
    must_fit: bool,
) -> (PartitionData, Option<u64>) {
    // Not the first record kept: a compact partition's start stays where
    // compaction found it (`PartitionRef::log_start_and_end`).
    let (beginning, end) = part.log_start_and_end();
    let Ok(from) = u64::try_from(a.offset) else {
        return (out_of_range(a.index, beginning, end), None);
    };
    if from < beginning || from > end {
        return (out_of_range(a.index, beginning, end), None);
    }
    // Read after the end: every transactional record below the end is
    // counted in it (`Store::last_stable_offset`).
    let lso = part.last_stable_offset(end);
    let answer = PartitionData::default()
        .with_partition_index(a.index)
        .with_high_watermark(end as i64)
        .with_last_stable_offset(lso as i64)
        .with_log_start_offset(beginning as i64)
        .with_aborted_transactions(Some(Vec::new()))
        .with_preferred_read_replica(BrokerId(-1));
    // A read_committed read ends at the LSO; a wait there listens at the
    // end, where the marker that moves it will land.
    let stable = if a.committed { lso.max(from) } else { end };
    if from >= stable || left == 0 {
        let listen = (from >= stable).then_some(end);
        return (answer.with_records(Some(Bytes::new())), listen);
    }
    let max_records = MAX_RECORDS.min(usize::try_from(stable - from).unwrap_or(MAX_RECORDS));
    let limit = a.max_bytes.min(left).max(1);
    // A queue read of the mapped page cache, straight into the batch;
    // anything else (a compact partition's compacted log, a tiered
    // partition's remote tier) through the broker's read, which decides
    // where it runs (`PartitionRef::read_async`).
    let log_append_time = part.topic().config.timestamp_type == TimestampType::LogAppendTime;
    let direct = {
        let mut sink = FetchSink::new(limit, log_append_time);
        match part.read_into(from, max_records, limit, &mut sink) {
            Ok(Some(next)) => Some(Ok((sink.batch.finish(), next))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    };
    // A read the broker makes (not the queue's, which goes out as the
    // store holds it) drops the aborted records itself at read_committed:
    // a compacted log keeps no markers, so a client could not tell where
    // an aborted transaction ends (docs/compaction.md, "Transactions").
    let filtered = direct.is_none() && a.committed;
    let read = match direct {
        Some(read) => read,
        None if filtered => part
            .read_committed_async(from, max_records, limit)
            .await
            .map(|(batch, _)| encode(&batch, log_append_time)),
        None => part
            .read_async(from, max_records, limit)
            .await
            .map(|batch| encode(&batch, log_append_time)),
    };
    let read = match (read, codec_of(part)) {
        (Ok((bytes, next)), Some((codec, level))) if !bytes.is_empty() => {
            Ok((compressed(bytes, codec, level).await, next))
        }
        (read, _) => read,
    };
    match read {
        Ok((bytes, _)) if must_fit && bytes.len() > left => {
            (answer.with_records(Some(Bytes::new())), None)
        }
        Ok((bytes, next)) => {
            let answer = if a.committed && !filtered {
                let aborted = part
                    .aborted_transactions(from, next)
                    .into_iter()
                    .map(|(producer_id, first_offset)| {
                        AbortedTransaction::default()
                            .with_producer_id(ProducerId(producer_id))
                            .with_first_offset(first_offset as i64)
                    })
                    .collect();
                answer.with_aborted_transactions(Some(aborted))
            } else {
                answer
            };
            (
                answer.with_records(Some(Bytes::from(bytes))),
                (next >= stable).then_some(end),
            )
        }
        Err(e) => (failed(a.index, broker_code(&e)), None),
    }
}

/// The codec (and level) a partition's answers are compressed with: its
/// topic's `compression.type`, none for `producer` and `uncompressed`.
fn codec_of(part: &PartitionRef) -> Option<(u8, Option<i32>)> {
    let config = &part.topic().config;
    let codec = match config.compression {
        CompressionType::Producer | CompressionType::Uncompressed => return None,
        CompressionType::Gzip => compression::GZIP,
        CompressionType::Snappy => compression::SNAPPY,
        CompressionType::Lz4 => compression::LZ4,
        CompressionType::Zstd => compression::ZSTD,
    };
    Some((codec, config.compression_level()))
}

/// An answer's batches compressed, on the blocking pool (a megabyte of
/// records is milliseconds of a core, not an async worker's to spend).
/// Compressing our own batches in memory does not fail short of a bug;
/// if it does, the batches go uncompressed, which every client reads.
async fn compressed(bytes: Vec<u8>, codec: u8, level: Option<i32>) -> Vec<u8> {
    let bytes = Arc::new(bytes);
    let input = Arc::clone(&bytes);
    let task = tokio::task::spawn_blocking(move || compress_batches(&input, codec, level));
    match task.await {
        Ok(Ok(packed)) => packed,
        failed => {
            tracing::error!(
                codec,
                ?failed,
                "a fetch answer could not be compressed: sent uncompressed"
            );
            Arc::try_unwrap(bytes).unwrap_or_else(|shared| shared.to_vec())
        }
    }
}

/// One batch of a fetch's records and where the next read starts. Sized
/// for the whole batch up front (a record's framing in a batch is at most
/// 24 bytes beyond its payload), so it is written once and never moved.
fn encode(batch: &tidelog_broker::read::ReadBatch, log_append_time: bool) -> (Vec<u8>, u64) {
    let framing = 24 * batch.records.len() + BATCH_HEADER_BYTES;
    let payload: u64 = batch.records.iter().map(|r| r.payload_bytes()).sum();
    let mut out = Vec::with_capacity(framing + payload as usize);
    encode_batch_as(
        &mut out,
        batch.records.iter().map(OutRecord::from),
        log_append_time,
    );
    (out, batch.next_offset)
}

/// A batch's bytes before its first record.
const BATCH_HEADER_BYTES: usize = 61;
/// A record's framing in a batch beyond its store encoding (the store's
/// own takes at least 5 bytes, Kafka's at most 24 beyond the payload):
/// for sizing the buffer only.
const FRAMING_OVER_STORED: usize = 19;

/// A fetch's read of a partition's CommitLog records: each encoded into
/// the answer's batch as the store reads it (no list of records, no
/// headers collected), only the last kept, for the store to find the
/// next one in its entry.
struct FetchSink {
    batch: BatchBuilder,
    last: Option<StoredRecord>,
    /// The read's byte limit and its hint of how many records come.
    limit: usize,
    expected: usize,
}

impl FetchSink {
    fn new(limit: usize, log_append_time: bool) -> FetchSink {
        let batch = BatchBuilder::new(Vec::new());
        FetchSink {
            batch: if log_append_time {
                batch.log_append_time()
            } else {
                batch
            },
            last: None,
            limit,
            expected: 0,
        }
    }
}

impl ReadSink for FetchSink {
    fn last(&self) -> Option<&StoredRecord> {
        self.last.as_ref()
    }

    fn push(&mut self, r: StoredRecord) {
        if self.batch.is_empty() {
            // Sized from the first record, for as many like it as the
            // read may bring (the store counts its own sizes against the
            // limit), so the buffer is rarely moved.
            let stored = (r.size() as usize).max(1);
            let records = self.expected.min(self.limit / stored + 1).max(1);
            self.batch
                .reserve(BATCH_HEADER_BYTES + records * (stored + FRAMING_OVER_STORED));
        }
        // A transaction's records and markers go in batches of their
        // producer's (a read_committed client drops an aborted
        // transaction's records by producer id, and skips control
        // batches); every other record in batches with none. One byte of
        // the entry header decides; only a transaction's decode the rest.
        if r.is_transactional() {
            let (batch, sequence) = match r.producer_sequence() {
                Some((p, sequence)) => (
                    Some(TxnBatch {
                        producer_id: p.producer_id,
                        epoch: p.epoch,
                        control: r.is_control(),
                    }),
                    sequence,
                ),
                None => (None, -1),
            };
            self.batch.set_producer(batch, sequence);
        } else if self.batch.has_producer() {
            self.batch.set_producer(None, -1);
        }
        self.batch.push(
            r.queue_offset().get(),
            r.timestamp_ms(),
            r.key_slice(),
            r.value_slice(),
            r.header_entries(),
        );
        self.last = Some(r);
    }

    fn reserve(&mut self, records: usize) {
        self.expected = records;
    }
}

fn out_of_range(index: i32, beginning: u64, end: u64) -> PartitionData {
    failed(index, ResponseError::OffsetOutOfRange.code())
        .with_high_watermark(end as i64)
        .with_last_stable_offset(end as i64)
        .with_log_start_offset(beginning as i64)
}

fn failed(index: i32, code: i16) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_aborted_transactions(Some(Vec::new()))
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(Bytes::new()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// min_bytes is kept within 1..=max_bytes: a fetch asking more than
    /// it may carry is answered with what it can carry, not held until
    /// its deadline.
    #[test]
    fn min_bytes_is_at_least_one_and_at_most_max_bytes() {
        assert_eq!(min_bytes(0, 100), 1);
        assert_eq!(min_bytes(-5, 100), 1);
        assert_eq!(min_bytes(50, 100), 50);
        assert_eq!(min_bytes(1 << 20, 100), 100);
        assert_eq!(min_bytes(10, 0), 1);
    }
}
