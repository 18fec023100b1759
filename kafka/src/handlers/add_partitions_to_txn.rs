//! AddPartitionsToTxn (24) v0-3: partitions join a producer's
//! transaction (`Door::add_partitions_to_txn`), which is open from the
//! first. v4+ (KIP-890's batched form, sent by brokers) is not served.
//!
//! Decisions, Kafka's:
//! * A partition that does not exist fails the call: it is answered
//!   UNKNOWN_TOPIC_OR_PARTITION, and every other partition
//!   OPERATION_NOT_ATTEMPTED, and none is added.
//! * Any other refusal (fenced, concurrent, not authorized, ...) is every
//!   partition's error code.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use tidelog_broker::BrokerError;

use super::cluster::coordinator;
use crate::context::Context;
use crate::error::txn_error_code;

pub async fn handle(
    ctx: &Context,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let asked: Vec<(String, u32, i32)> = request
        .v3_and_below_topics
        .iter()
        .flat_map(|t| {
            let name = t.name.0.to_string();
            t.partitions
                .iter()
                .map(move |&p| (name.clone(), u32::try_from(p).unwrap_or(u32::MAX), p))
        })
        .collect();
    // Every partition's code: the one failing partition's own, the rest
    // not attempted; or one code for all.
    let codes: Vec<i16> = match coordinator(ctx, ResponseError::CoordinatorLoadInProgress.code()) {
        Err(code) => vec![code; asked.len()],
        Ok(door) => {
            let missing = asked
                .iter()
                .position(|(topic, partition, _)| !door.partition_exists(topic, *partition));
            match missing {
                Some(_) => asked
                    .iter()
                    .map(|(topic, partition, _)| {
                        if door.partition_exists(topic, *partition) {
                            ResponseError::OperationNotAttempted.code()
                        } else {
                            ResponseError::UnknownTopicOrPartition.code()
                        }
                    })
                    .collect(),
                None => {
                    let partitions = asked.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
                    let done = door
                        .add_partitions_to_txn(
                            request.v3_and_below_transactional_id.0.to_string(),
                            request.v3_and_below_producer_id.0,
                            request.v3_and_below_producer_epoch,
                            partitions,
                        )
                        .await;
                    let code = match done {
                        Ok(()) => 0,
                        Err(e) => {
                            if !matches!(
                                &e,
                                tidelog_broker::transactions::service::TxnError::Broker(
                                    BrokerError::NotAuthorized { .. }
                                )
                            ) {
                                tracing::debug!(error = %e, "AddPartitionsToTxn refused");
                            }
                            txn_error_code(&e)
                        }
                    };
                    vec![code; asked.len()]
                }
            }
        }
    };
    let mut results: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((topic, _, index), code) in asked.iter().zip(codes) {
        let partition = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(*index)
            .with_partition_error_code(code);
        match results.iter_mut().find(|r| r.name.0.as_str() == topic) {
            Some(r) => r.results_by_partition.push(partition),
            None => results.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(kafka_protocol::messages::TopicName(
                        kafka_protocol::protocol::StrBytes::from_string(topic.clone()),
                    ))
                    .with_results_by_partition(vec![partition]),
            ),
        }
    }
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}
