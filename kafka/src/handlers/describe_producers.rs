//! DescribeProducers (61) v0 (KIP-664, `kafka-transactions.sh
//! describe-producers`): the producers with state in each asked
//! partition, their epoch, last sequence, last write's time and the first
//! offset of their open transaction there. TOPIC_AUTHORIZATION_FAILED
//! without READ on the topic, UNKNOWN_TOPIC_OR_PARTITION for a partition
//! that does not exist. This broker leads every partition, so NOT_LEADER
//! never comes.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use tidelog_broker::door::ProducersRefusal;

use crate::context::Context;

pub fn handle(ctx: &Context, request: DescribeProducersRequest) -> DescribeProducersResponse {
    let door = ctx.door();
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let answers = match &door {
                // Not ready: every partition unknown for now, as
                // Metadata answers before the broker is up.
                None => vec![Err(ProducersRefusal::Unknown); t.partition_indexes.len()],
                Some(door) => door.describe_producers(t.name.0.as_str(), &t.partition_indexes),
            };
            let partitions = t
                .partition_indexes
                .iter()
                .zip(answers)
                .map(|(&index, answer)| {
                    let p = PartitionResponse::default().with_partition_index(index);
                    match answer {
                        Err(ProducersRefusal::NotAuthorized) => {
                            p.with_error_code(ResponseError::TopicAuthorizationFailed.code())
                        }
                        Err(ProducersRefusal::Unknown) => {
                            p.with_error_code(ResponseError::UnknownTopicOrPartition.code())
                        }
                        Ok(producers) => p.with_active_producers(
                            producers
                                .into_iter()
                                .map(|a| {
                                    ProducerState::default()
                                        .with_producer_id(ProducerId(a.producer_id))
                                        .with_producer_epoch(i32::from(a.epoch))
                                        .with_last_sequence(a.last_sequence)
                                        .with_last_timestamp(a.last_timestamp_ms)
                                        // The markers' coordinator epoch is
                                        // not kept per producer.
                                        .with_coordinator_epoch(-1)
                                        .with_current_txn_start_offset(
                                            a.txn_start_offset.map_or(-1, |o| {
                                                i64::try_from(o).unwrap_or(i64::MAX)
                                            }),
                                        )
                                })
                                .collect(),
                        ),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
