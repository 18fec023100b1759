//! Produce (0): each partition's record batches decoded (`records`) into
//! the broker's `PartitionBatch`, then appended all or nothing through
//! `Broker::produce_batch_awaiting`, inline,
//! awaiting the dispatch-lag bound and the sync flush (if any) without
//! holding a thread.
//!
//! Decisions:
//! * Partitions are independent: one failing (CORRUPT_MESSAGE, an unknown
//!   partition, a record rule) writes nothing of itself and does not stop
//!   the others, as Kafka answers per partition.
//! * Produce does not auto-create (Kafka's clients create through
//!   Metadata first): an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
//! * All of a request's compressed batches share one inflation budget,
//!   `kafka.max_request_bytes`.
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
//!   Transactional batches stay refused (INVALID_RECORD).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use tidelog_broker::produce::PartitionBatch;
use tidelog_broker::store::{Header, ProducerBatch};
use tidelog_broker::{Broker, BrokerError};

use super::NOT_READY;
use crate::dispatch::Context;
use crate::error::broker_code;
use crate::records::{decode_partition_into, BatchRecord, RecordSink};

/// The answer, or `None` for acks 0.
pub async fn handle(ctx: &Context, request: ProduceRequest) -> Option<ProduceResponse> {
    let acks = request.acks;
    let broker = ctx.broker();
    let mut budget = ctx.max_request_bytes;
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let index = data.index;
            let answer = match (&broker, acks) {
                (_, a) if ![0, 1, -1].contains(&a) => {
                    failed(index, ResponseError::InvalidRequiredAcks.code(), None)
                }
                (None, _) => failed(index, NOT_READY, None),
                (Some(broker), _) => {
                    partition(broker, topic.name.0.as_str(), data, &mut budget).await
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
    broker: &Arc<Broker>,
    topic: &str,
    data: PartitionProduceData,
    budget: &mut usize,
) -> PartitionProduceResponse {
    let index = data.index;
    let Some(topic) = broker.registry.get(topic) else {
        return failed(index, ResponseError::UnknownTopicOrPartition.code(), None);
    };
    let Ok(p) = u32::try_from(index) else {
        return failed(index, ResponseError::UnknownTopicOrPartition.code(), None);
    };
    // Each record becomes the store's append record as it is decoded
    // (`PartitionBatch`): no list of decoded records in between.
    let mut batch = Appends(PartitionBatch::new(Arc::clone(&topic), p));
    let decoded = data
        .records
        .as_ref()
        .map(|r| decode_partition_into(r, budget, &mut batch));
    let producer = match decoded {
        Some(Ok(producer)) => producer,
        Some(Err(e)) => {
            tracing::warn!(topic = %topic.name, partition = index, error = %e, "kafka produce batch refused");
            return failed(index, e.code(), Some(e.to_string()));
        }
        None => return failed(index, ResponseError::CorruptMessage.code(), None),
    };
    let producer = producer.map(|b| ProducerBatch {
        producer_id: b.producer_id,
        epoch: b.epoch,
        base_sequence: b.base_sequence,
    });
    // Inline in both flush modes: the append is a copy into the page
    // cache, and under sync flush (acks 1 and -1 alike) the answer awaits
    // the group commit's fsync without holding a thread; while the
    // dispatcher is over its lag bound the append awaits it likewise
    // (`Broker::produce_batch_awaiting`).
    let produced = match broker.produce_batch_awaiting(batch.0, producer).await {
        Ok(unflushed) => unflushed.durable().await.map_err(BrokerError::from),
        Err(e) => Err(e),
    };
    let answer = produced.and_then(|produced| {
        let first = match produced.duplicate_of() {
            Some(original) => Some(original.base_offset),
            None => produced.offsets().next().map(|(_, offset)| offset),
        };
        let beginning = broker.partition(&topic.name, p)?.offsets().0;
        Ok((first, beginning))
    });
    match answer {
        Ok((first, beginning)) => PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(first.map_or(-1, |o| o as i64))
            .with_log_append_time_ms(-1)
            .with_log_start_offset(beginning as i64),
        Err(e) => failed(index, broker_code(&e), Some(e.to_string())),
    }
}

/// A produce's decoded records, straight into the broker's batch.
struct Appends(PartitionBatch);

impl RecordSink for Appends {
    fn reserve(&mut self, records: usize) {
        self.0.reserve(records);
    }

    fn push(&mut self, r: BatchRecord) {
        // Most records have none: no iterator to build and drop.
        let headers = if r.headers.is_empty() {
            Vec::new()
        } else {
            r.headers
                .into_iter()
                .map(|(name, value)| Header { name, value })
                .collect()
        };
        self.0.push(r.key, r.value, headers, r.timestamp_ms);
    }
}

fn failed(index: i32, code: i16, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(kafka_protocol::protocol::StrBytes::from_string))
}
