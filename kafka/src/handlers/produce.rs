//! Produce (0): each partition's topic and partition checked first
//! (`Door::records_for`), its record batches then decoded
//! (`records::appends`) straight into the broker's `Records` made for
//! them, then appended all or nothing
//! through the broker's door, `Broker::produce`, which answers the
//! offsets and the log start offset in one trip and decides itself where
//! the append runs (inline, awaiting the dispatch-lag bound and the sync
//! flush without holding a thread).
//!
//! Decisions:
//! * Partitions are independent: one failing (CORRUPT_MESSAGE, an unknown
//!   partition, a record rule) writes nothing of itself and does not stop
//!   the others, as Kafka answers per partition.
//! * Produce does not auto-create (Kafka's clients create through
//!   Metadata first): an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
//! * All of a request's compressed batches share one inflation budget,
//!   `kafka.max_request_bytes`; one batch inflates to at most
//!   `kafka.max_batch_inflated_bytes` (MESSAGE_TOO_LARGE), and the request
//!   carries at most `kafka.max_records_per_request` records
//!   (RECORD_LIST_TOO_LARGE) (`records::DecodeLimits`).
//! * What decoding holds in memory counts against the global in-flight
//!   byte budget (`http.max_inflight_bytes`, shared with HTTP bodies and
//!   Kafka frames) as it comes to be held: each inflated buffer, and the
//!   append records in memory bytes (`Records::memory_bytes`, not
//!   wire bytes: a 7-byte record is a 128-byte append record;
//!   `records::appends`). It is
//!   given back once the partition is answered. When the budget is short
//!   the partition is refused with REQUEST_TIMED_OUT (retriable: the
//!   client sends it again), nothing of it written; the connection stays.
//! * A partition with a compressed batch, or more than
//!   [`INLINE_DECODE_MAX_BYTES`] of records, is decoded on the blocking
//!   pool: its inflation and per-record work are not an async worker's
//!   to do (a few wire bytes can be a million records).
//! * acks 0 does the same work and answers nothing; acks other than 0, 1,
//!   -1 is INVALID_REQUIRED_ACKS for every partition.
//! * An idempotent producer's batch (producer id ≥ 0) passes its producer
//!   id, epoch and base sequence to the append, where the store checks
//!   them in the critical section that writes (KAFKA.md "Idempotent
//!   producers"): a retry of one of its last five batches is answered with
//!   the original base offset and nothing is written; a gap is
//!   OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch INVALID_PRODUCER_EPOCH, a
//!   producer with no state whose batch does not start at 0
//!   UNKNOWN_PRODUCER_ID. Per partition, like every other error.
//!   A transactional batch (bit 4) is the broker's to check against its
//!   producer's open transaction (`Broker::produce`): INVALID_TXN_STATE
//!   outside it or for a partition it did not add, INVALID_PRODUCER_EPOCH
//!   for another epoch.
//! * A refusal that names records (keyless records on a compact topic,
//!   INVALID_RECORD; timestamps outside `message.timestamp.before/after.
//!   max.ms`, INVALID_TIMESTAMP) lists each in `record_errors` with its
//!   batch index (KIP-467, v8+), so the client fails just those and
//!   retries the rest; nothing of the batch is written.
//! * A topic with `message.timestamp.type=LogAppendTime` answers the
//!   time stamped on every record as `log_append_time_ms` (else -1);
//!   acks=all to a topic whose `min.insync.replicas` is over 1 is
//!   NOT_ENOUGH_REPLICAS (one node holds one replica).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::produce::ProduceRequest as Produce;
use tidelog_broker::store::ProducerBatch;
use tidelog_broker::{BrokerError, Door};

use super::NOT_READY;
use crate::context::Context;
use crate::error::broker_code;
use crate::records::appends::{decode_appends, Decoded};
use crate::records::{any_compressed, DecodeLimits};

/// Uncompressed records up to this many bytes a partition are decoded on
/// the async worker (a hand-off to the blocking pool costs more than
/// they do); more, or any compressed batch, on the blocking pool.
pub const INLINE_DECODE_MAX_BYTES: usize = 256 * 1024;

/// The answer, or `None` for acks 0.
pub async fn handle(ctx: &Context, request: ProduceRequest) -> Option<ProduceResponse> {
    let acks = request.acks;
    let door = ctx.door();
    let mut limits = DecodeLimits::new(
        ctx.max_request_bytes,
        ctx.max_batch_inflated_bytes,
        ctx.max_records_per_request,
    );
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let index = data.index;
            let answer = match (&door, acks) {
                (_, a) if ![0, 1, -1].contains(&a) => {
                    failed(index, ResponseError::InvalidRequiredAcks.code(), None)
                }
                (None, _) => failed(index, NOT_READY, None),
                (Some(door), _) => {
                    let topic = topic.name.0.as_str();
                    partition(ctx, door, topic, data, acks == -1, &mut limits).await
                }
            };
            partitions.push(answer);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions),
        );
    }
    (acks != 0).then(|| ProduceResponse::default().with_responses(responses))
}

async fn partition(
    ctx: &Context,
    door: &Door,
    topic: &str,
    data: PartitionProduceData,
    acks_all: bool,
    limits: &mut DecodeLimits,
) -> PartitionProduceResponse {
    let index = data.index;
    let Ok(p) = u32::try_from(index) else {
        return failed(index, ResponseError::UnknownTopicOrPartition.code(), None);
    };
    let Some(data) = data.records else {
        return failed(index, ResponseError::CorruptMessage.code(), None);
    };
    // The topic and partition are checked before a byte is decoded; each
    // record is then pushed with them, straight into the broker's
    // `Records` (`records::appends`).
    let records = match door.records_for(topic, p) {
        Ok(records) => records,
        Err(e) => return failed(index, broker_code(&e), Some(e.to_string())),
    };
    let decoded = if data.len() > INLINE_DECODE_MAX_BYTES || any_compressed(&data) {
        let mut owned = *limits;
        let budget = Arc::clone(&ctx.budget);
        let task = tokio::task::spawn_blocking(move || {
            let decoded = decode_appends(&data, &mut owned, records, &budget);
            (decoded, owned)
        });
        match task.await {
            Ok((decoded, left)) => {
                *limits = left;
                decoded
            }
            Err(e) => {
                tracing::error!(topic = %topic, partition = index, error = %e, "kafka produce decode task failed");
                return failed(index, ResponseError::UnknownServerError.code(), None);
            }
        }
    } else {
        decode_appends(&data, limits, records, &ctx.budget)
    };
    let Decoded {
        records,
        producer,
        held,
    } = match decoded {
        Ok(decoded) => decoded,
        Err(e) => {
            if let Some(why) = e.refused() {
                ctx.metrics.refused(why);
            }
            tracing::warn!(topic = %topic, partition = index, error = %e, "kafka produce batch refused");
            return failed(index, e.code(), Some(e.to_string()));
        }
    };
    // The decoded records' bytes stay counted until the append is done
    // and answered (dropped at the end of this function).
    let _held = held;
    let producer = producer.map(|b| ProducerBatch {
        producer_id: b.producer_id,
        epoch: b.epoch,
        base_sequence: b.base_sequence,
        transactional: b.transactional,
    });
    let request = Produce {
        topic: topic.to_owned(),
        partition: Some(p),
        records,
        producer,
        create_missing_topic: false,
        acks_all,
    };
    match door.produce(request).await {
        Ok(ack) => PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(ack.base_offset().map_or(-1, |o| o as i64))
            .with_log_append_time_ms(ack.log_append_time_ms().unwrap_or(-1))
            .with_log_start_offset(ack.log_start_offset().map_or(-1, |o| o as i64)),
        Err(e) => {
            let record_errors = record_errors(&e);
            failed(index, broker_code(&e), Some(e.to_string())).with_record_errors(record_errors)
        }
    }
}

/// KIP-467: each record of the batch the refusal names, with why, so a
/// client fails those records with the error and retries the others
/// (librdkafka: `_INVALID_DIFFERENT_RECORD`). Empty for a refusal of the
/// whole batch.
fn record_errors(e: &BrokerError) -> Vec<BatchIndexAndErrorMessage> {
    let why = match e {
        BrokerError::KeyRequired { topic, .. } => {
            format!("no key, but topic {topic:?} is compacted")
        }
        BrokerError::TimestampOutOfBounds { config, .. } => {
            format!("timestamp outside the topic's {config}")
        }
        other => other.to_string(),
    };
    e.record_indexes()
        .into_iter()
        .map(|i| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(i32::try_from(i).unwrap_or(i32::MAX))
                .with_batch_index_error_message(Some(StrBytes::from_string(why.clone())))
        })
        .collect()
}

fn failed(index: i32, code: i16, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(StrBytes::from_string))
}
