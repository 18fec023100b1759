//! DeleteRecords (21): each partition through `Broker::delete_records`
//! (the durable log start offset: records below are never served again
//! and retention deletes them), its own error code and low watermark per
//! partition. A mutating admin API: refused with TOPIC_AUTHORIZATION_FAILED
//! while `admin_token` is set and the connection has not logged in.
//!
//! Codes, as Kafka's `ReplicaManager.deleteRecords` answers them:
//! UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (an internal
//! topic), POLICY_VIOLATION (a `cleanup.policy` without `delete`),
//! OFFSET_OUT_OF_RANGE (past the high watermark, or negative other than
//! -1, the high watermark); a refused partition's low watermark is -1.
//! The request's `timeout_ms` is not waited on: with one replica a
//! deletion is complete when it is durable, before the answer.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::{admin, NOT_READY};
use crate::context::Context;
use crate::error::broker_code;

pub async fn handle(
    ctx: &Context,
    gate: admin::Gate,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let door = ctx.door();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let outcome = match (&door, gate.refusal(admin::TOPIC)) {
                (_, Some(refusal)) => Err(refusal.code()),
                (None, None) => Err(NOT_READY),
                (Some(door), None) => match u32::try_from(p.partition_index) {
                    Err(_) => {
                        Err(kafka_protocol::error::ResponseError::UnknownTopicOrPartition.code())
                    }
                    Ok(index) => door
                        .delete_records(topic.name.0.as_str(), index, p.offset)
                        .await
                        .map_err(|e| broker_code(&e)),
                },
            };
            let result =
                DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
            partitions.push(match outcome {
                Ok(low) => result.with_low_watermark(i64::try_from(low).unwrap_or(i64::MAX)),
                Err(code) => result.with_low_watermark(-1).with_error_code(code),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
