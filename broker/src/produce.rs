//! Produce: the one door front-ends append through
//! ([`Door::produce`](crate::Door::produce)), with the record rules every front-end shares.
//!
//! A front-end decodes a request straight into [`Records`] (HTTP's JSON
//! records, a Kafka partition's batches) and hands them over with the
//! topic and partition in a [`ProduceRequest`]; the answer,
//! [`ProduceAck`], carries every record's offset, an idempotent retry's
//! original offsets and the partition's log start offset, in one trip.
//! The broker decides where the work runs: a produce to a known topic is
//! a copy into the page cache and runs on the caller's task, awaiting the
//! dispatch-lag bound and (under `flush: sync`) the group commit's fsync
//! without holding a thread; creating an unknown topic writes and syncs
//! the registry, so it runs on the blocking pool.
//!
//! A request is checked whole before anything of it is written: the topic
//! (auto-created if allowed), then every record's partition and key
//! (compact topics need one). Then it is appended, as one
//! `Store::append_within`, which checks every record's limits first and is
//! all or nothing.
//!
//! The limits are the store's (its header count and name bounds, its
//! header-block size, its record payload limit clamped to a segment) and
//! the topic's `max.message.bytes`. They are checked once, by the store's
//! writer, before it writes anything: the broker hands it the topic's limit
//! (`Store::append_within`) and turns a refusal, which names the record,
//! into [`BrokerError`]'s record variants. So neither the broker nor a
//! front-end repeats them, and they cannot drift apart.
//!
//! Decisions:
//! * Auto-created topics get the broker's `default_partitions` and no
//!   config overrides, when the request allows creation and the broker's
//!   `auto_create_topics` is on (HTTP asks; Kafka's Produce never creates:
//!   its clients create through Metadata first). A full disk creates no
//!   topic for a request that would write (the append would be refused
//!   anyway, and the topic should not outlive the refusal). The disk-full
//!   flag is the store's alone: this reads it, never the disk.
//! * An empty request writes nothing, even when the disk is full (but an
//!   unknown topic is still auto-created for it, as before).
//! * A record's client-supplied timestamp follows one rule for every
//!   front-end, [`check_timestamp_ms`]: milliseconds since the epoch, at
//!   least 0 (Kafka reserves negative timestamps; -1 is "none"). HTTP
//!   refuses the rest with 42206, Kafka with INVALID_TIMESTAMP.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tidelog_storage::commit_log::format::headers_block_len;
use tidelog_storage::{
    AppendRecord, Appended, BatchMeta, Header, ProducerAppend, ProducerBatch, RecordProblem,
    StoreConfig, StoreError,
};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::partitioner::partition_for_key;
use crate::principal::Principal;
use crate::registry::Topic;
use crate::topic_config::{TimestampType, UNBOUNDED};

/// The smallest timestamp a record may carry: the epoch. Negative ones
/// are Kafka's reserved values (-1 is NO_TIMESTAMP) or arithmetic gone
/// wrong, and would sort before every real record in the time index.
pub const TIMESTAMP_MIN_MS: i64 = 0;

/// A client-supplied record timestamp outside the one rule both
/// front-ends apply ([`check_timestamp_ms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("timestamp {timestamp_ms} is not milliseconds since the epoch (an integer >= {TIMESTAMP_MIN_MS})")]
pub struct BadTimestamp {
    pub timestamp_ms: i64,
}

/// The one timestamp rule of produce, for every front-end (HTTP's
/// `timestamp` field, a Kafka record's base timestamp plus its delta):
/// milliseconds since the epoch, at least [`TIMESTAMP_MIN_MS`]. The
/// front-end adds where the value was (HTTP: the field path, 42206;
/// Kafka: the partition, INVALID_TIMESTAMP).
pub fn check_timestamp_ms(timestamp_ms: i64) -> Result<i64, BadTimestamp> {
    if timestamp_ms < TIMESTAMP_MIN_MS {
        return Err(BadTimestamp { timestamp_ms });
    }
    Ok(timestamp_ms)
}

/// One record of a produce request, decoded by a front-end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRecord {
    /// `None`: keyless (key absent or null); partitioned round-robin.
    pub key: Option<Bytes>,
    /// `None`: a tombstone (`"value": null`).
    pub value: Option<Bytes>,
    /// The partition the client asked for, not yet checked against the topic.
    pub partition: Option<u32>,
    /// In request order, duplicates kept.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Client-supplied create time in ms since the epoch; `None`: use the
    /// append time.
    pub timestamp_ms: Option<i64>,
}

/// What a front-end asks the broker to append ([`Door::produce`](crate::Door::produce)).
#[derive(Debug)]
pub struct ProduceRequest {
    pub topic: String,
    /// The partition every record goes to (Kafka's partition, HTTP's
    /// partition route); `None`: each record's own, else by key.
    pub partition: Option<u32>,
    pub records: Records,
    /// An idempotent producer's batch (Kafka's Produce, producer id ≥ 0):
    /// one partition, whose sequence the store checks in the critical
    /// section that appends (`tidelog_storage::producer_state`). A retry of
    /// one of the producer's last five batches writes nothing and answers
    /// [`ProduceAck::duplicate_of`]; a batch out of sequence is the store's
    /// `ProducerRefused`.
    pub producer: Option<ProducerBatch>,
    /// Create the topic if it is unknown, when the broker's
    /// `auto_create_topics` allows (HTTP's produce; Kafka's never does).
    pub create_missing_topic: bool,
    /// The producer waits for every in-sync replica (Kafka's acks=all;
    /// HTTP's produce, as REST Proxy's producer defaults to it): refused
    /// when the topic's `min.insync.replicas` asks for more replicas than
    /// one node has.
    pub acks_all: bool,
}

/// The records of one produce, decoded by a front-end straight into the
/// store's append records (no list of decoded records in between): the
/// one record type from the front-ends into the broker.
///
/// Two ways to make one:
/// * [`Door::records_for`](crate::Door::records_for) (Kafka's Produce,
///   one partition per batch): the topic and partition are checked
///   before a byte is decoded, and each record gets them as it is pushed,
///   so [`Door::produce`](crate::Door::produce) makes no second pass over
///   the records (only the key rule of compact topics, from the first
///   keyless record noted on the way).
/// * [`Records::new`] (HTTP, whose records may each name a partition):
///   [`Door::produce`](crate::Door::produce) fills in the topic and
///   partition in one pass, after the broker's checks (an internal topic,
///   each record's partition, the key rule).
///
/// Either way nothing is written before every check passed; the record
/// limits stay the store's.
#[derive(Debug)]
pub struct Records {
    records: Vec<AppendRecord>,
    /// The partition each record asked for, when any did (HTTP's
    /// per-record `partition`); shorter than `records` (or empty) when the
    /// rest asked for none.
    asked: Vec<Option<u32>>,
    payload_bytes: u64,
    /// Heap bytes the records' headers hold beyond the records' own
    /// structs (their `Vec`s and names), for [`Records::memory_bytes`].
    header_heap_bytes: u64,
    /// Each record's topic: the one checked by
    /// [`Door::records_for`](crate::Door::records_for), or a placeholder
    /// until [`Door::produce`](crate::Door::produce) knows it.
    topic: Arc<str>,
    /// The partition every record was pushed with, when the records were
    /// made for one ([`Door::records_for`](crate::Door::records_for)).
    bound: Option<u32>,
    /// The first record pushed without a key, for the key rule of compact
    /// topics.
    first_keyless: Option<usize>,
    /// The broker's time stamped on every record, for a topic with
    /// `message.timestamp.type=LogAppendTime` ([`stamp_timestamps`]).
    log_append_time_ms: Option<i64>,
}

impl Default for Records {
    fn default() -> Self {
        Records::new()
    }
}

impl Records {
    /// The memory one record takes, beyond its headers and the buffer its
    /// key and value point into.
    pub const RECORD_MEMORY_BYTES: usize = std::mem::size_of::<AppendRecord>();

    pub fn new() -> Records {
        Records {
            records: Vec::new(),
            asked: Vec::new(),
            payload_bytes: 0,
            header_heap_bytes: 0,
            topic: Arc::from(""),
            bound: None,
            first_keyless: None,
            log_append_time_ms: None,
        }
    }

    /// Records for `partition` of `topic`, both already checked
    /// ([`Door::records_for`](crate::Door::records_for)).
    pub(crate) fn bound(topic: &Topic, partition: u32) -> Records {
        Records {
            topic: Arc::clone(&topic.name),
            bound: Some(partition),
            ..Records::new()
        }
    }

    /// The bytes the records hold in memory themselves: their structs
    /// (the list's capacity, not its length) and their headers' lists and
    /// names. Keys, values and header values are slices of the buffer
    /// they were decoded from, which its owner counts. A front-end counts
    /// this against the in-flight byte budget as it decodes (Kafka's
    /// Produce: a few wire bytes can become many records).
    pub fn memory_bytes(&self) -> u64 {
        (self.records.capacity() * Self::RECORD_MEMORY_BYTES
            + self.asked.capacity() * std::mem::size_of::<Option<u32>>()) as u64
            + self.header_heap_bytes
    }

    /// Room for `records` more.
    pub fn reserve(&mut self, records: usize) {
        self.records.reserve(records);
    }

    /// Appends a record: `key` `None` is keyless, `value` `None` a
    /// tombstone, `headers` in order (duplicates kept), `timestamp_ms`
    /// `None` the append time, `partition` the one the client asked for
    /// this record (`None`: the request's, else by key).
    pub fn push(
        &mut self,
        partition: Option<u32>,
        key: Option<Bytes>,
        value: Option<Bytes>,
        headers: Vec<Header>,
        timestamp_ms: Option<i64>,
    ) {
        self.payload_bytes += payload_bytes(key.as_ref(), value.as_ref(), &headers);
        if !headers.is_empty() {
            let names: usize = headers.iter().map(|h| h.name.capacity()).sum();
            self.header_heap_bytes +=
                (headers.capacity() * std::mem::size_of::<Header>() + names) as u64;
        }
        if partition.is_some() {
            self.asked.resize(self.records.len(), None);
            self.asked.push(partition);
        }
        if key.is_none() && self.first_keyless.is_none() {
            self.first_keyless = Some(self.records.len());
        }
        self.records.push(AppendRecord {
            topic: Arc::clone(&self.topic),
            partition: self.bound.unwrap_or(0),
            key,
            value,
            headers,
            timestamp_ms,
        });
    }

    /// Whether every record was pushed with `topic` and `partition`, and
    /// none asked for a partition of its own. The topic is compared by
    /// identity, not by name: a pointer compare on the produce path, and a
    /// topic deleted and made again under the same name since
    /// [`Door::records_for`](crate::Door::records_for) gets the pass.
    fn made_for(&self, topic: &Topic, partition: Option<u32>) -> bool {
        self.bound.is_some()
            && self.bound == partition
            && self.asked.is_empty()
            && Arc::ptr_eq(&self.topic, &topic.name)
    }

    /// Whether these were made by [`Door::records_for`](crate::Door::records_for)
    /// for `topic` (which checked WRITE on it as it made them).
    pub(crate) fn bound_to(&self, topic: &str) -> bool {
        self.bound.is_some() && &*self.topic == topic
    }

    /// Records pushed so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Key, value and header bytes of all records.
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }
}

impl FromIterator<ProduceRecord> for Records {
    fn from_iter<I: IntoIterator<Item = ProduceRecord>>(iter: I) -> Records {
        let iter = iter.into_iter();
        let mut records = Records::new();
        records.reserve(iter.size_hint().0);
        for r in iter {
            let headers = r
                .headers
                .into_iter()
                .map(|(name, value)| Header { name, value })
                .collect();
            records.push(r.partition, r.key, r.value, headers, r.timestamp_ms);
        }
        records
    }
}

/// What a produce wrote, in one answer: where each record landed (in
/// request order), an idempotent retry's original batch, and the log
/// start offset of the partition when the request named one.
#[derive(Debug)]
pub struct ProduceAck {
    batch: Vec<AppendRecord>,
    appended: Vec<Appended>,
    payload_bytes: u64,
    /// An idempotent producer's retry: the original batch's offsets
    /// (nothing was written, `offsets` is empty).
    duplicate: Option<BatchMeta>,
    log_start_offset: Option<u64>,
    log_append_time_ms: Option<i64>,
}

impl ProduceAck {
    /// The time the broker stamped on every record, when the topic's
    /// `message.timestamp.type` is LogAppendTime (Kafka's
    /// `log_append_time_ms`).
    pub fn log_append_time_ms(&self) -> Option<i64> {
        self.log_append_time_ms
    }

    /// `(partition, offset)` of every record, in request order.
    pub fn offsets(&self) -> impl ExactSizeIterator<Item = (u32, u64)> + '_ {
        self.batch
            .iter()
            .zip(&self.appended)
            .map(|(r, a)| (r.partition, a.queue_offset.get()))
    }

    /// The offset of the first record written, or of the original batch
    /// when this was an idempotent retry; `None` when nothing was.
    pub fn base_offset(&self) -> Option<u64> {
        match self.duplicate {
            Some(original) => Some(original.base_offset),
            None => self.appended.first().map(|a| a.queue_offset.get()),
        }
    }

    pub fn len(&self) -> usize {
        self.appended.len()
    }

    pub fn is_empty(&self) -> bool {
        self.appended.is_empty()
    }

    /// Key, value and header bytes of all records.
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    /// `Some` when the batch was an idempotent producer's retry of a batch
    /// already written: that batch's offsets.
    pub fn duplicate_of(&self) -> Option<BatchMeta> {
        self.duplicate
    }

    /// Kafka's log start offset of the partition the request named, read
    /// after the append; `None` when the request named no partition.
    pub fn log_start_offset(&self) -> Option<u64> {
        self.log_start_offset
    }
}

/// The answer to an append.
fn ack(records: Records, answer: ProducerAppend, log_start_offset: Option<u64>) -> ProduceAck {
    let (appended, duplicate) = match answer {
        ProducerAppend::Written(appended) => (appended, None),
        ProducerAppend::Duplicate(original) => (Vec::new(), Some(original)),
    };
    ProduceAck {
        log_append_time_ms: records.log_append_time_ms,
        batch: records.records,
        appended,
        payload_bytes: records.payload_bytes,
        duplicate,
        log_start_offset,
    }
}

/// The answer when nothing is appended.
fn nothing_written() -> ProduceAck {
    ProduceAck {
        batch: Vec::new(),
        appended: Vec::new(),
        payload_bytes: 0,
        duplicate: None,
        log_start_offset: None,
        log_append_time_ms: None,
    }
}

impl Broker {
    /// Appends `request.records` to `request.topic`, all or nothing: to
    /// `request.partition` if given (every record naming a partition must
    /// name that one), else each to its own partition, by murmur2 of its
    /// key, or round-robin for a keyless record. An unknown topic is
    /// created first when the request and the broker's
    /// `auto_create_topics` allow. Answers once the records are as durable
    /// as the flush mode promises. Where it runs is the broker's to decide
    /// (module doc); a caller just awaits it.
    pub(crate) async fn produce(
        self: &Arc<Self>,
        _who: &Principal,
        request: ProduceRequest,
    ) -> Result<ProduceAck, BrokerError> {
        let ProduceRequest {
            topic,
            partition,
            records,
            producer,
            create_missing_topic,
            acks_all,
        } = request;
        // A replica takes no write (HTTP forwarded it to the master
        // before it got here), nor does a master past its lease's margin.
        self.check_master()?;
        let topic = self
            .topic_or_auto_created(&topic, create_missing_topic, !records.is_empty())
            .await?;
        // Kafka's answer carries the partition's log start, also for an
        // empty batch: read after the append.
        let log_start = |broker: &Arc<Self>| -> Result<Option<u64>, BrokerError> {
            match partition {
                Some(p) => Ok(Some(broker.partition(&topic.name, p)?.offsets().0)),
                None => Ok(None),
            }
        };
        let replicas_needed = match acks_all {
            true => Some(self.check_replicas(&topic)?),
            false => None,
        };
        // A transaction's batch: its producer's transaction must be open,
        // at its epoch, and have added the partition (Kafka's
        // INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH otherwise).
        if let Some(b) = producer.as_ref().filter(|b| b.transactional) {
            let refused = |refusal| BrokerError::TransactionRefused { refusal };
            let Some(p) = partition else {
                return Err(refused(crate::transactions::TxnRefusal::InvalidRequest {
                    reason: "a transactional batch names its partition".into(),
                }));
            };
            self.check_transactional_produce(b.producer_id, b.epoch, &topic.name, p)
                .map_err(refused)?;
        }
        let Some(records) = self.plan_produce(&topic, partition, records)? else {
            return Ok(ProduceAck {
                log_start_offset: log_start(self)?,
                ..nothing_written()
            });
        };
        let admitted = self.store.lag_admitted().await?;
        let limit = RecordLimit::new(self.store.config(), &topic);
        let unflushed = self
            .store
            .append_unflushed_admitted(
                &records.records,
                limit.topic_limit,
                producer.as_ref(),
                admitted,
            )
            .map_err(|e| limit.refusal(&topic, e))?;
        let unflushed = self.topic_flush(&topic, records.len() as u64, unflushed);
        let end = unflushed.end();
        let answer = unflushed.durable().await?;
        // acks=all in a cluster: the in-sync set holds it too (the group
        // commit extended across nodes).
        if let (Some(needed), Some(cluster)) = (replicas_needed, self.cluster()) {
            cluster.replicated(end, needed).await?;
        }
        Ok(ack(records, answer, log_start(self)?))
    }

    /// A topic's own flush bounds on an append of `appended` records, under
    /// `store.flush: async` (under `sync` every answer waits for its flush
    /// already): the append is answered once flushed when it brings the
    /// records since the topic's last flush to `flush.messages`, or when
    /// `flush.ms` is 0; with a `flush.ms` above 0 and below the store's
    /// `flush_interval_ms`, a flush through the log's end is asked for that
    /// many ms later (one timer per topic at a time), so the topic's
    /// records are on disk within its bound (a longer bound is the store's
    /// own flush). As Kafka's, these
    /// bound durability per topic; visibility stays the store's (under
    /// `async`, records are readable once written).
    fn topic_flush<T>(
        self: &Arc<Self>,
        topic: &Topic,
        appended: u64,
        unflushed: tidelog_storage::Unflushed<T>,
    ) -> tidelog_storage::Unflushed<T> {
        let config = &topic.config;
        if unflushed.waits() || (config.flush_messages == UNBOUNDED && config.flush_ms == UNBOUNDED)
        {
            return unflushed;
        }
        let flush = &topic.flush;
        let counted = flush
            .unflushed_records
            .fetch_add(appended, Ordering::AcqRel)
            + appended;
        if counted >= config.flush_messages || config.flush_ms == 0 {
            flush.unflushed_records.store(0, Ordering::Release);
            return self.store.flushed(unflushed);
        }
        // A bound no shorter than the store's own interval is the store's
        // flush already.
        let sooner = config.flush_ms < self.store.config().flush_interval_ms;
        if sooner && !flush.timer_pending.swap(true, Ordering::AcqRel) {
            let (broker, flush) = (Arc::clone(self), Arc::clone(flush));
            let after = Duration::from_millis(config.flush_ms);
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                flush.timer_pending.store(false, Ordering::Release);
                flush.unflushed_records.store(0, Ordering::Release);
                broker
                    .store
                    .request_flush(broker.store.commit_log().committed());
            });
        }
        unflushed
    }

    /// [`produce`](Self::produce) for a caller that may block its thread
    /// (tests, tools): the same checks and answer, waiting for the lag
    /// bound and the flush on this thread.
    /// Its answer carries no log start offset.
    #[cfg(any(test, feature = "failpoints"))]
    pub fn produce_blocking(
        &self,
        topic: &str,
        partition: Option<u32>,
        records: Vec<ProduceRecord>,
    ) -> Result<ProduceAck, BrokerError> {
        let topic = self.auto_create_topic(topic, true, !records.is_empty())?;
        let records: Records = records.into_iter().collect();
        let Some(records) = self.plan_produce(&topic, partition, records)? else {
            return Ok(nothing_written());
        };
        let limit = RecordLimit::new(self.store.config(), &topic);
        let answer = self
            .store
            .append_unflushed(&records.records, limit.topic_limit, None)
            .map_err(|e| limit.refusal(&topic, e))?
            .wait()?;
        Ok(ack(records, answer, None))
    }

    /// The checks before an append, and the records with their topic and
    /// partition filled in: `None` when there is nothing to append.
    fn plan_produce(
        &self,
        topic: &Topic,
        partition: Option<u32>,
        mut records: Records,
    ) -> Result<Option<Records>, BrokerError> {
        check_producible(topic)?;
        if let Some(p) = partition {
            topic.check_partition(p)?;
        }
        if records.is_empty() {
            return Ok(None);
        }
        if records.made_for(topic, partition) {
            // Every record has its topic and partition already.
            if let Some(index) = records.first_keyless {
                check_keyless(topic, index, &records)?;
            }
        } else {
            assign_partitions(topic, partition, &mut records)?;
        }
        stamp_timestamps(topic, &mut records, tidelog_storage::types::now_ms())?;
        Ok(Some(records))
    }

    /// InitProducerId for a producer without a transactional id: a new
    /// producer id at epoch 0, or, when the client names an id this data
    /// dir handed out and its epoch (InitProducerId v3+, KIP-360), the same
    /// id at the next epoch, so the producer's batches of the old epoch are
    /// refused from then on. An epoch that cannot grow gets a new id. Ids
    /// are durable: never handed out twice, across restarts and crashes.
    pub(crate) fn init_producer_id(
        &self,
        current: Option<(i64, i16)>,
    ) -> Result<(i64, i16), BrokerError> {
        if let Some((id, epoch)) = current {
            if id >= 0 && (0..i16::MAX - 1).contains(&epoch) && self.store.producer_id_issued(id) {
                return Ok((id, epoch + 1));
            }
        }
        Ok((self.store.allocate_producer_id()?, 0))
    }

    /// [`Records`] for `partition` of the known `topic`, after the checks
    /// that need no record (an internal topic, the partition's range):
    /// for a front-end that decodes one partition's records after them
    /// (Kafka's Produce, which never creates a topic).
    pub(crate) fn records_for(&self, topic: &str, partition: u32) -> Result<Records, BrokerError> {
        let topic = self
            .registry
            .get(topic)
            .ok_or_else(|| BrokerError::unknown_topic(topic))?;
        check_producible(&topic)?;
        topic.check_partition(partition)?;
        Ok(Records::bound(&topic, partition))
    }
}

/// Gives every record its topic and partition: the request's, the
/// record's own (which must agree with the request's), else by key
/// (murmur2) or round-robin; each checked against the topic.
fn assign_partitions(
    topic: &Topic,
    request_partition: Option<u32>,
    records: &mut Records,
) -> Result<(), BrokerError> {
    let asked = std::mem::take(&mut records.asked);
    let compacts = topic.config.cleanup_policy.compacts();
    for (index, r) in records.records.iter_mut().enumerate() {
        let own = asked.get(index).copied().flatten();
        let partition = match (request_partition, own) {
            (Some(requested), Some(own)) if own != requested => {
                return Err(BrokerError::PartitionMismatch {
                    index,
                    own,
                    requested,
                })
            }
            (Some(p), _) => p,
            (None, Some(own)) => {
                topic.check_partition(own)?;
                own
            }
            (None, None) => match &r.key {
                Some(key) => partition_for_key(key, topic.partitions),
                None => topic.round_robin.next(topic.partitions),
            },
        };
        r.topic = Arc::clone(&topic.name);
        r.partition = partition;
    }
    if let (true, Some(index)) = (compacts, records.first_keyless) {
        check_keyless(topic, index, records)?;
    }
    Ok(())
}

/// The timestamp rules of a topic, applied at `now_ms` (the broker's
/// clock): with LogAppendTime every record gets `now_ms`, whatever it
/// carried (Kafka's broker-side stamping); with CreateTime a record's own
/// timestamp may lie at most `message.timestamp.before.max.ms` before and
/// `after.max.ms` after `now_ms` (KIP-937; no pass at Kafka's unbounded
/// defaults), and every record outside is named. A record without a
/// timestamp takes the append time, always inside.
fn stamp_timestamps(topic: &Topic, records: &mut Records, now_ms: i64) -> Result<(), BrokerError> {
    if topic.config.timestamp_type == TimestampType::LogAppendTime {
        for r in &mut records.records {
            r.timestamp_ms = Some(now_ms);
        }
        records.log_append_time_ms = Some(now_ms);
        return Ok(());
    }
    let (before, after) = topic.config.timestamp_bounds();
    if before.is_none() && after.is_none() {
        return Ok(());
    }
    let outside = |ts: i64| -> Option<(u64, &'static str, u64, &'static str)> {
        let distance = ts.abs_diff(now_ms);
        match (ts < now_ms, before, after) {
            (true, Some(max), _) if distance > max => {
                Some((distance, "before", max, "message.timestamp.before.max.ms"))
            }
            (false, _, Some(max)) if distance > max => {
                Some((distance, "after", max, "message.timestamp.after.max.ms"))
            }
            _ => None,
        }
    };
    let mut first = None;
    let mut indexes = Vec::new();
    for (index, r) in records.records.iter().enumerate() {
        let Some(ts) = r.timestamp_ms else { continue };
        if let Some(why) = outside(ts) {
            first.get_or_insert((index, ts, why));
            indexes.push(index);
        }
    }
    let Some((index, timestamp_ms, (distance_ms, side, max_ms, config))) = first else {
        return Ok(());
    };
    Err(BrokerError::TimestampOutOfBounds {
        index,
        topic: topic.name.to_string(),
        timestamp_ms,
        now_ms,
        distance_ms,
        side,
        max_ms,
        config,
        indexes,
    })
}

impl Broker {
    /// An acks=all produce needs `min.insync.replicas` nodes in sync (and,
    /// in a cluster, `cluster.min_insync_replicas`): refused before
    /// anything is written when fewer are. A single node has one. Returns
    /// how many the write must reach.
    fn check_replicas(&self, topic: &Topic) -> Result<usize, BrokerError> {
        let wanted = topic.config.min_insync_replicas as usize;
        let Some(cluster) = self.cluster() else {
            if wanted > 1 {
                return Err(BrokerError::NotEnoughReplicas {
                    topic: topic.name.to_string(),
                    required: topic.config.min_insync_replicas,
                });
            }
            return Ok(1);
        };
        let required = wanted.max(cluster.min_insync());
        let in_sync = cluster.in_sync();
        if in_sync < required {
            return Err(BrokerError::TooFewInSync {
                topic: topic.name.to_string(),
                required,
                in_sync,
            });
        }
        Ok(required)
    }
}

/// The record limit of a topic: its `max.message.bytes` or the store's
/// effective limit, whichever is smaller.
struct RecordLimit<'a> {
    store: &'a StoreConfig,
    store_limit: u64,
    topic_limit: u64,
}

impl<'a> RecordLimit<'a> {
    fn new(store: &'a StoreConfig, topic: &Topic) -> Self {
        RecordLimit {
            store,
            store_limit: store.record_payload_max(),
            topic_limit: u64::from(topic.config.max_message_bytes),
        }
    }

    /// The store's refusal of a record as the broker's record variant (with
    /// whose limit it was); any other error passes through.
    fn refusal(&self, topic: &Topic, e: StoreError) -> BrokerError {
        let StoreError::RecordRefused { index, problem } = e else {
            return e.into();
        };
        match problem {
            RecordProblem::TooManyHeaders { count, max } => {
                BrokerError::TooManyHeaders { index, count, max }
            }
            RecordProblem::HeaderNameTooLong { header, max, .. } => {
                BrokerError::HeaderNameTooLong { index, header, max }
            }
            RecordProblem::TooLarge { size, limit } => BrokerError::RecordTooLarge {
                index,
                size,
                limit,
                limit_source: self.source(topic),
            },
            problem @ RecordProblem::LargerThanSegment { .. } => {
                StoreError::RecordRefused { index, problem }.into()
            }
        }
    }

    /// Whose limit the smaller of the two is, for the refusal.
    fn source(&self, topic: &Topic) -> String {
        if self.topic_limit <= self.store_limit {
            format!("topic {:?} max.message.bytes", topic.name)
        } else if self.store_limit < self.store.max_message_bytes {
            format!(
                "the store's record limit (store.max_message_bytes {}, clamped to what fits in a store.commitlog_segment_bytes segment of {})",
                self.store.max_message_bytes, self.store.commitlog_segment_bytes
            )
        } else {
            "store.max_message_bytes".to_string()
        }
    }
}

/// Front-ends never produce to an internal topic (the broker writes it).
fn check_producible(topic: &Topic) -> Result<(), BrokerError> {
    if topic.is_internal() {
        return Err(BrokerError::InternalTopic {
            topic: topic.name.to_string(),
        });
    }
    Ok(())
}

/// Record `index` is the first without a key: refused on a topic that
/// compacts, naming every keyless record of `records`.
fn check_keyless(topic: &Topic, index: usize, records: &Records) -> Result<(), BrokerError> {
    if topic.config.cleanup_policy.compacts() {
        let indexes = records
            .records
            .iter()
            .enumerate()
            .skip(index)
            .filter(|(_, r)| r.key.is_none())
            .map(|(i, _)| i)
            .collect();
        return Err(BrokerError::KeyRequired {
            index,
            topic: topic.name.to_string(),
            policy: topic.config.cleanup_policy.as_str(),
            indexes,
        });
    }
    Ok(())
}

/// A record's payload bytes as produce answers count them: key, value and
/// the headers' block (none without headers).
fn payload_bytes(key: Option<&Bytes>, value: Option<&Bytes>, headers: &[Header]) -> u64 {
    let headers = if headers.is_empty() {
        0
    } else {
        headers_block_len(headers) as u64
    };
    key.map_or(0, |k| k.len() as u64) + value.map_or(0, |v| v.len() as u64) + headers
}

#[cfg(test)]
#[path = "produce_tests.rs"]
mod tests;
