//! Idempotent and transactional producers for `--transactions`
//! (`txn_run.rs`), over the load's own Kafka connections, as a Kafka
//! client makes them:
//! * a producer id and epoch from InitProducerId, with a transactional id
//!   after FindCoordinator (key type 1) for a transactional producer;
//! * a sequence per partition, from 0 after InitProducerId, moved on by
//!   the batch's records once a batch is acknowledged, wrapping from
//!   `i32::MAX` to 0 ([`next_sequence`]);
//! * each batch stamped with the producer id, epoch and base sequence, and
//!   for a transaction's, attribute bit 4 ([`stamp_batch`]);
//! * a transaction: AddPartitionsToTxn of the partitions it will write,
//!   its batches, EndTxn.
//!
//! A load connection's producer ([`ProducerLoad`]) writes batch `k` to
//! partition `(i + k) % partitions` (connection `i`), so a transaction of
//! at least as many batches as partitions writes every partition, as a
//! stream processor's output does; the idempotent producers write the
//! same way, so the two differ by the transactions alone. Its records
//! count when acknowledged (idempotent) or when their transaction's
//! EndTxn commit is answered (transactional). A transaction still open
//! when a phase ends is committed without being counted
//! ([`ProducerLoad::finish`]), so none is left holding an LSO back.
//!
//! Connection `i` of `c`'s first transaction is `n - i·n/c` batches long
//! (`n` a transaction's), its later ones `n`: the connections of a slice
//! start together, and with equal transactions they would commit in
//! waves (a wave is 64 commits of 10,000 records at the table's load), so
//! a measured window would count one wave more or less by where it fell;
//! staggered, commits come evenly, as independent producers' do.
//!
//! A Produce frame is encoded once per partition and producer
//! ([`BatchFrame`]) and each request is a copy of it with the producer
//! fields and the CRC32C written again: a few microseconds of the load
//! generator's CPU against a server's hundred for a 100-record batch.

use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context as _};
use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, EndTxnRequest, EndTxnResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse,
    ProducerId, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::kafka_client::{self, batch, KafkaConn};

/// The versions of the transaction calls: the highest tidelog serves
/// that keep AddPartitionsToTxn's client form (v4+ is KIP-890's, sent by
/// brokers) and FindCoordinator's single key (v4 batches keys).
const INIT_PRODUCER_ID_VERSION: i16 = 4;
const FIND_COORDINATOR_VERSION: i16 = 3;
const ADD_PARTITIONS_TO_TXN_VERSION: i16 = 3;
const END_TXN_VERSION: i16 = 3;
/// FindCoordinator's key type of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;
/// `transaction.timeout.ms` of the bench's producers (the Java client's
/// default): a transaction a broken connection left open is aborted then.
const TRANSACTION_TIMEOUT_MS: i32 = 60_000;
/// A coordinator call answered CONCURRENT_TRANSACTIONS (an InitProducerId
/// while the coordinator aborts what the id left open) or
/// COORDINATOR_LOAD_IN_PROGRESS is sent again, this many times at most,
/// this long apart, as clients retry them.
const COORDINATOR_RETRIES_MAX: u32 = 100;
const COORDINATOR_RETRY_PAUSE: Duration = Duration::from_millis(20);
/// After the records of a Produce v9 frame: the empty tagged-field
/// sections of its partition, topic and request, one byte each.
const PRODUCE_TRAILER_BYTES: usize = 3;

/// A call's answer: its value, or the server's refusal (its Kafka error,
/// by name, and which call). A transport failure is the outer `Err`.
pub(crate) type Answered<T> = Result<T, String>;

/// What a producer writes: batches of `records` records (`batch`, as
/// `kafka_client::produce_batch` encodes it) to `topic`'s `partitions`
/// with `acks`.
#[derive(Clone)]
pub(crate) struct ProducerSpec {
    pub(crate) topic: String,
    pub(crate) partitions: u32,
    pub(crate) acks: i16,
    pub(crate) batch: Bytes,
    pub(crate) records: u32,
}

/// The producer fields a batch is stamped with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    pub(crate) base_sequence: i32,
    pub(crate) transactional: bool,
}

/// Writes `stamp` into the header of `batch` (one whole record batch) and
/// its CRC32C again (over attributes to the batch's end).
pub(crate) fn stamp_batch(batch: &mut [u8], stamp: Stamp) {
    let put = |batch: &mut [u8], at: usize, bytes: &[u8]| {
        batch[at..at + bytes.len()].copy_from_slice(bytes);
    };
    let attributes =
        i16::from_be_bytes([batch[batch::ATTRIBUTES_AT], batch[batch::ATTRIBUTES_AT + 1]]);
    let attributes = if stamp.transactional {
        attributes | batch::ATTR_TRANSACTIONAL
    } else {
        attributes & !batch::ATTR_TRANSACTIONAL
    };
    put(batch, batch::ATTRIBUTES_AT, &attributes.to_be_bytes());
    put(
        batch,
        batch::PRODUCER_ID_AT,
        &stamp.producer_id.to_be_bytes(),
    );
    put(batch, batch::PRODUCER_EPOCH_AT, &stamp.epoch.to_be_bytes());
    put(
        batch,
        batch::BASE_SEQUENCE_AT,
        &stamp.base_sequence.to_be_bytes(),
    );
    let crc = crc32c::crc32c(&batch[batch::ATTRIBUTES_AT..]);
    put(batch, batch::CRC_AT, &crc.to_be_bytes());
}

/// The sequence after a batch of `records` starting at `sequence`,
/// Kafka's way (`DefaultRecordBatch.incrementSequence`): past `i32::MAX`
/// it goes on from 0.
pub(crate) fn next_sequence(sequence: i32, records: i32) -> i32 {
    if sequence > i32::MAX - records {
        records - (i32::MAX - sequence) - 1
    } else {
        sequence + records
    }
}

/// A Produce frame of one partition, with where its batch is, stamped per
/// request.
struct BatchFrame {
    frame: Bytes,
    batch_at: usize,
    batch_len: usize,
}

impl BatchFrame {
    fn new(
        spec: &ProducerSpec,
        partition: u32,
        transactional_id: Option<&str>,
    ) -> anyhow::Result<BatchFrame> {
        let partition = i32::try_from(partition).context("a partition number over i32")?;
        let frame = kafka_client::produce_frame_as(
            &spec.topic,
            partition,
            spec.acks,
            transactional_id,
            spec.batch.clone(),
        )?;
        let batch_len = spec.batch.len();
        // The records are the frame's last field but for the trailer.
        let batch_at = frame
            .len()
            .checked_sub(PRODUCE_TRAILER_BYTES + batch_len)
            .ok_or_else(|| anyhow!("a Produce frame shorter than its batch"))?;
        ensure!(
            frame[batch_at..batch_at + batch_len] == spec.batch[..],
            "the batch is not where a Produce v{} frame was expected to carry it",
            kafka_client::PRODUCE_VERSION
        );
        Ok(BatchFrame {
            frame,
            batch_at,
            batch_len,
        })
    }

    fn stamped(&self, stamp: Stamp) -> Bytes {
        let mut out = BytesMut::from(&self.frame[..]);
        stamp_batch(
            &mut out[self.batch_at..self.batch_at + self.batch_len],
            stamp,
        );
        out.freeze()
    }
}

/// An idempotent or transactional producer on one connection.
pub(crate) struct Producer {
    producer_id: i64,
    epoch: i16,
    transactional_id: Option<String>,
    /// A frame per partition.
    frames: Vec<BatchFrame>,
    /// The next base sequence per partition.
    sequences: Vec<i32>,
    records: i32,
    /// Answer bytes since [`Producer::take_wire_bytes`].
    wire_bytes: u64,
}

impl Producer {
    /// A producer of `spec` on `conn`: InitProducerId (after
    /// FindCoordinator, with `transactional_id`), retried while the
    /// coordinator asks to.
    pub(crate) async fn start(
        conn: &mut KafkaConn,
        spec: &ProducerSpec,
        transactional_id: Option<String>,
    ) -> anyhow::Result<Producer> {
        let records = i32::try_from(spec.records).context("a batch of over i32::MAX records")?;
        let frames = (0..spec.partitions)
            .map(|p| BatchFrame::new(spec, p, transactional_id.as_deref()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut producer = Producer {
            producer_id: -1,
            epoch: -1,
            transactional_id,
            frames,
            sequences: vec![0; spec.partitions as usize],
            records,
            wire_bytes: 0,
        };
        if let Some(id) = producer.transactional_id.clone() {
            let request = FindCoordinatorRequest::default()
                .with_key(StrBytes::from_string(id.clone()))
                .with_key_type(KEY_TYPE_TRANSACTION);
            let answer: FindCoordinatorResponse = producer
                .call(
                    conn,
                    ApiKey::FindCoordinator,
                    FIND_COORDINATOR_VERSION,
                    &request,
                )
                .await?;
            if let Some(refused) = refusal(answer.error_code) {
                anyhow::bail!("FindCoordinator of transactional id {id:?}: {refused}");
            }
        }
        let request = InitProducerIdRequest::default()
            .with_transactional_id(
                producer
                    .transactional_id
                    .as_ref()
                    .map(|id| TransactionalId(StrBytes::from_string(id.clone()))),
            )
            .with_transaction_timeout_ms(TRANSACTION_TIMEOUT_MS)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let answer: InitProducerIdResponse = producer
            .coordinator_call(
                conn,
                ApiKey::InitProducerId,
                INIT_PRODUCER_ID_VERSION,
                &request,
                |a: &InitProducerIdResponse| a.error_code,
            )
            .await?
            .map_err(|refused| anyhow!("InitProducerId: {refused}"))?;
        producer.producer_id = answer.producer_id.0;
        producer.epoch = answer.producer_epoch;
        ensure!(
            producer.producer_id >= 0 && producer.epoch >= 0,
            "InitProducerId answered producer id {} epoch {}",
            producer.producer_id,
            producer.epoch
        );
        Ok(producer)
    }

    /// One batch to `partition` at its next sequence: the batch's base
    /// offset, or why it was refused. The sequence moves on only once the
    /// batch is acknowledged.
    pub(crate) async fn produce(
        &mut self,
        conn: &mut KafkaConn,
        partition: usize,
    ) -> anyhow::Result<Answered<i64>> {
        let (frame, sequence) = match (self.frames.get(partition), self.sequences.get(partition)) {
            (Some(frame), Some(sequence)) => (frame, *sequence),
            _ => anyhow::bail!("partition {partition} of {}", self.frames.len()),
        };
        let request = frame.stamped(Stamp {
            producer_id: self.producer_id,
            epoch: self.epoch,
            base_sequence: sequence,
            transactional: self.transactional_id.is_some(),
        });
        let answer = conn.call(&request).await?;
        self.wire_bytes += answer.len() as u64;
        Ok(match kafka_client::produced_offset(answer) {
            Ok(offset) => {
                self.sequences[partition] = next_sequence(sequence, self.records);
                Ok(offset)
            }
            Err(e) => Err(format!("{e:#}")),
        })
    }

    /// AddPartitionsToTxn of `topic`'s `partitions` to this producer's
    /// transaction (which it opens).
    pub(crate) async fn add_partitions(
        &mut self,
        conn: &mut KafkaConn,
        topic: &str,
        partitions: &[u32],
    ) -> anyhow::Result<Answered<()>> {
        let partitions = partitions
            .iter()
            .map(|p| i32::try_from(*p).context("a partition number over i32"))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(self.txn_id()?)
            .with_v3_and_below_producer_id(ProducerId(self.producer_id))
            .with_v3_and_below_producer_epoch(self.epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(kafka_client::topic_name(topic))
                .with_partitions(partitions)]);
        let answer = self
            .coordinator_call(
                conn,
                ApiKey::AddPartitionsToTxn,
                ADD_PARTITIONS_TO_TXN_VERSION,
                &request,
                |a: &AddPartitionsToTxnResponse| {
                    a.results_by_topic_v3_and_below
                        .iter()
                        .flat_map(|t| &t.results_by_partition)
                        .map(|p| p.partition_error_code)
                        .find(|code| *code != 0)
                        .unwrap_or(a.error_code)
                },
            )
            .await?;
        Ok(answer
            .map(|_| ())
            .map_err(|refused| format!("AddPartitionsToTxn: {refused}")))
    }

    /// EndTxn: commit (or abort) this producer's transaction.
    pub(crate) async fn end(
        &mut self,
        conn: &mut KafkaConn,
        commit: bool,
    ) -> anyhow::Result<Answered<()>> {
        let request = EndTxnRequest::default()
            .with_transactional_id(self.txn_id()?)
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.epoch)
            .with_committed(commit);
        let answer = self
            .coordinator_call(
                conn,
                ApiKey::EndTxn,
                END_TXN_VERSION,
                &request,
                |a: &EndTxnResponse| a.error_code,
            )
            .await?;
        let what = if commit { "commit" } else { "abort" };
        Ok(answer
            .map(|_| ())
            .map_err(|refused| format!("EndTxn {what}: {refused}")))
    }

    /// The answer bytes read since the last call.
    pub(crate) fn take_wire_bytes(&mut self) -> u64 {
        std::mem::take(&mut self.wire_bytes)
    }

    fn txn_id(&self) -> anyhow::Result<TransactionalId> {
        self.transactional_id
            .as_ref()
            .map(|id| TransactionalId(StrBytes::from_string(id.clone())))
            .ok_or_else(|| anyhow!("a transaction call of a producer without a transactional id"))
    }

    /// One request and its decoded answer.
    async fn call<R: Encodable, A: Decodable>(
        &mut self,
        conn: &mut KafkaConn,
        key: ApiKey,
        version: i16,
        request: &R,
    ) -> anyhow::Result<A> {
        let frame = kafka_client::request_frame(key, version, request)?;
        let answer = conn.call(&frame).await?;
        self.wire_bytes += answer.len() as u64;
        kafka_client::decode(answer, key, version)
    }

    /// [`Producer::call`] to the transaction coordinator, sent again
    /// while it answers CONCURRENT_TRANSACTIONS or
    /// COORDINATOR_LOAD_IN_PROGRESS ([`COORDINATOR_RETRIES_MAX`]); any
    /// other error (`code` of the answer) is a refusal.
    async fn coordinator_call<R: Encodable, A: Decodable>(
        &mut self,
        conn: &mut KafkaConn,
        key: ApiKey,
        version: i16,
        request: &R,
        code: impl Fn(&A) -> i16,
    ) -> anyhow::Result<Answered<A>> {
        let mut retries = 0;
        loop {
            let answer: A = self.call(conn, key, version, request).await?;
            let error = ResponseError::try_from_code(code(&answer));
            match error {
                None => return Ok(Ok(answer)),
                Some(
                    ResponseError::ConcurrentTransactions
                    | ResponseError::CoordinatorLoadInProgress,
                ) if retries < COORDINATOR_RETRIES_MAX => {
                    retries += 1;
                    tokio::time::sleep(COORDINATOR_RETRY_PAUSE).await;
                }
                Some(e) => return Ok(Err(format!("{e} (error {})", e.code()))),
            }
        }
    }
}

/// A Kafka error code's name, or `None` for 0.
fn refusal(code: i16) -> Option<String> {
    ResponseError::try_from_code(code).map(|e| format!("{e} (error {code})"))
}

/// The produce phase's job of `--transactions`: every load connection a
/// producer of its own ([`ProducerLoad`]).
pub(crate) struct ProducerJob {
    pub(crate) spec: ProducerSpec,
    /// Batches a transaction; `None`: idempotent, no transactions.
    pub(crate) txn_batches: Option<u32>,
    /// Connection `i`'s transactional id is `{txn_id_prefix}-{i}`: the
    /// same ids every slice, each slice's InitProducerId bumping their
    /// epochs, as a restarted application's producers do.
    pub(crate) txn_id_prefix: String,
    /// The load's connections, over which the first transactions'
    /// lengths are spread (module doc).
    pub(crate) connections: usize,
}

/// Batches of connection `index` of `connections`' first transaction,
/// when each is `n` batches: `n - index·n/connections`, at least 1 (the
/// module doc's staggering).
fn first_txn_batches(n: u32, index: usize, connections: usize) -> u32 {
    let before = u64::from(n) * index as u64 / connections.max(1) as u64;
    let first = u64::from(n).saturating_sub(before).max(1);
    u32::try_from(first).unwrap_or(n)
}

/// A load connection's producer and where its transaction stands.
pub(crate) struct ProducerLoad {
    producer: Producer,
    topic: String,
    /// The connection's index: batch `k` goes to `(index + k) % partitions`.
    index: u64,
    partitions: u64,
    records: u64,
    batches_sent: u64,
    txn_batches: Option<u32>,
    /// Batches of the next transaction: the first one's staggered
    /// (module doc), then `txn_batches`.
    next_txn_batches: u32,
    /// The open transaction's batches and records so far, and its length.
    open: Option<OpenTxn>,
}

/// A transaction under way.
#[derive(Clone, Copy)]
struct OpenTxn {
    batches: u32,
    records: u64,
    length: u32,
}

/// What one step of a producer's load answered.
pub(crate) struct Step {
    /// Records acknowledged (idempotent) or committed with this step's
    /// EndTxn (transactional); 0 for a transaction's other batches.
    pub(crate) records: u64,
    pub(crate) wire_bytes: u64,
    pub(crate) refused: Option<String>,
    /// How long this step's EndTxn commit took, when it made one.
    pub(crate) commit: Option<Duration>,
}

impl ProducerLoad {
    /// Connection `index`'s producer of `job` on `conn`.
    pub(crate) async fn start(
        conn: &mut KafkaConn,
        job: &ProducerJob,
        index: usize,
    ) -> anyhow::Result<ProducerLoad> {
        let transactional_id = job
            .txn_batches
            .map(|_| format!("{}-{index}", job.txn_id_prefix));
        let producer = Producer::start(conn, &job.spec, transactional_id).await?;
        let n = job.txn_batches.unwrap_or(1);
        Ok(ProducerLoad {
            producer,
            topic: job.spec.topic.clone(),
            index: index as u64,
            partitions: u64::from(job.spec.partitions.max(1)),
            records: u64::from(job.spec.records),
            batches_sent: 0,
            txn_batches: job.txn_batches,
            next_txn_batches: first_txn_batches(n, index, job.connections),
            open: None,
        })
    }

    /// The partition of the batch sent after `ahead` more.
    fn partition(&self, ahead: u64) -> u64 {
        (self.index + self.batches_sent + ahead) % self.partitions
    }

    /// One batch; for a transactional producer, with the
    /// AddPartitionsToTxn that opens its transaction before its first
    /// batch, and the EndTxn commit after its last.
    pub(crate) async fn step(&mut self, conn: &mut KafkaConn) -> anyhow::Result<Step> {
        let Some(txn_batches) = self.txn_batches else {
            let partition = self.partition(0) as usize;
            self.batches_sent += 1;
            let records = self.records;
            let answer = self.producer.produce(conn, partition).await?;
            return Ok(self.answered(answer.map(|_| records), None));
        };
        if self.open.is_none() {
            let length = self.next_txn_batches;
            // Every partition this transaction's batches go to, at once.
            let partitions: Vec<u32> = (0..u64::from(length).min(self.partitions))
                .map(|ahead| self.partition(ahead) as u32)
                .collect();
            let topic = self.topic.clone();
            let added = self
                .producer
                .add_partitions(conn, &topic, &partitions)
                .await?;
            if let Err(refused) = added {
                return Ok(self.answered(Err(refused), None));
            }
            self.open = Some(OpenTxn {
                batches: 0,
                records: 0,
                length,
            });
            self.next_txn_batches = txn_batches;
        }
        let partition = self.partition(0) as usize;
        if let Err(refused) = self.producer.produce(conn, partition).await? {
            // The transaction cannot commit without this batch: a client
            // aborts it.
            self.open = None;
            let why = match self.producer.end(conn, false).await? {
                Ok(()) => refused,
                Err(abort) => format!("{refused}; then {abort}"),
            };
            return Ok(self.answered(Err(why), None));
        }
        self.batches_sent += 1;
        let Some(mut open) = self.open.take() else {
            anyhow::bail!("a transaction's batch with no transaction open");
        };
        open.batches += 1;
        open.records += self.records;
        if open.batches < open.length {
            self.open = Some(open);
            return Ok(self.answered(Ok(0), None));
        }
        let records = open.records;
        let started = Instant::now();
        let ended = self.producer.end(conn, true).await?;
        let took = started.elapsed();
        Ok(self.answered(ended.map(|()| records), Some(took)))
    }

    /// At the end of a phase: a transaction still open is committed, its
    /// records not counted, so no open transaction holds a partition's
    /// last stable offset back. Why the commit was refused, if it was.
    pub(crate) async fn finish(&mut self, conn: &mut KafkaConn) -> anyhow::Result<Option<String>> {
        if self.open.take().is_none() {
            return Ok(None);
        }
        Ok(self.producer.end(conn, true).await?.err())
    }

    fn answered(&mut self, records: Answered<u64>, commit: Option<Duration>) -> Step {
        let wire_bytes = self.producer.take_wire_bytes();
        match records {
            Ok(records) => Step {
                records,
                wire_bytes,
                refused: None,
                commit,
            },
            Err(refused) => Step {
                records: 0,
                wire_bytes,
                refused: Some(refused),
                commit: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

    use super::*;
    use tidelog_kafka::records::{decode_partition, BatchProducer};

    #[test]
    fn first_transactions_are_spread_over_one_transactions_length() {
        let firsts: Vec<u32> = (0..64).map(|i| first_txn_batches(100, i, 64)).collect();
        assert_eq!(firsts[0], 100);
        assert_eq!(firsts[32], 50);
        assert_eq!(firsts[63], 2);
        assert!(firsts.windows(2).all(|w| w[0] > w[1]), "{firsts:?}");
        // Fewer batches than connections: never an empty transaction.
        assert!((0..64).all(|i| (1..=3).contains(&first_txn_batches(3, i, 64))));
        assert_eq!(first_txn_batches(100, 0, 0), 100);
    }

    #[test]
    fn sequences_wrap_from_i32_max_to_zero_as_kafkas() {
        assert_eq!(next_sequence(0, 100), 100);
        assert_eq!(next_sequence(i32::MAX - 100, 100), i32::MAX);
        // MAX - 99 + 100 records: MAX - 99 ..= MAX, then 0 ..= 98.
        assert_eq!(next_sequence(i32::MAX - 99, 100), 0);
        assert_eq!(next_sequence(i32::MAX, 100), 99);
        assert_eq!(next_sequence(i32::MAX, 1), 0);
    }

    /// A stamped batch decodes with tidelog's own decoder (its CRC
    /// checked) to the producer it was stamped with, both ways of bit 4,
    /// and its records unchanged.
    #[test]
    fn a_stamped_batch_carries_its_producer_and_a_good_crc() {
        let plain = kafka_client::produce_batch(3, 20);
        let mut budget = usize::MAX;
        let (records, producer) = decode_partition(&plain, &mut budget).unwrap();
        assert_eq!(producer, None);
        for transactional in [true, false] {
            let mut batch = plain.to_vec();
            let stamp = Stamp {
                producer_id: 4_000_000_007,
                epoch: 3,
                base_sequence: i32::MAX - 1,
                transactional,
            };
            stamp_batch(&mut batch, stamp);
            let (stamped, producer) = decode_partition(&Bytes::from(batch), &mut budget).unwrap();
            assert_eq!(stamped, records);
            assert_eq!(
                producer,
                Some(BatchProducer {
                    producer_id: 4_000_000_007,
                    epoch: 3,
                    base_sequence: i32::MAX - 1,
                    transactional,
                })
            );
        }
    }

    #[test]
    fn a_frame_is_stamped_where_its_batch_is() {
        let spec = ProducerSpec {
            topic: "t".into(),
            partitions: 2,
            acks: -1,
            batch: kafka_client::produce_batch(5, 10),
            records: 5,
        };
        let frame = BatchFrame::new(&spec, 1, Some("txn-1")).unwrap();
        let stamp = Stamp {
            producer_id: 7,
            epoch: 0,
            base_sequence: 5,
            transactional: true,
        };
        let stamped = frame.stamped(stamp);
        let mut batch = spec.batch.to_vec();
        stamp_batch(&mut batch, stamp);
        assert_eq!(
            &stamped[frame.batch_at..frame.batch_at + frame.batch_len],
            &batch[..]
        );
        // Everything else is the frame as encoded.
        assert_eq!(&stamped[..frame.batch_at], &frame.frame[..frame.batch_at]);
        assert_eq!(
            &stamped[frame.batch_at + frame.batch_len..],
            &frame.frame[frame.batch_at + frame.batch_len..]
        );
    }
}
