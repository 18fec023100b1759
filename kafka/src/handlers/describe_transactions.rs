//! DescribeTransactions (65) v0 (KIP-664): each asked transactional id's
//! state, timeout, start, producer id and epoch, and the partitions of
//! its open transaction; TRANSACTIONAL_ID_AUTHORIZATION_FAILED without
//! DESCRIBE on it, TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator
//! does not have; NOT_COORDINATOR for every id on a node of a cluster
//! that is not the master.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::door::DescribeRefusal;

use super::cluster::coordinator;
use crate::context::Context;

pub fn handle(ctx: &Context, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse {
    let ids: Vec<String> = request
        .transactional_ids
        .iter()
        .map(|id| id.0.to_string())
        .collect();
    let answers: Vec<Result<_, i16>> =
        match coordinator(ctx, ResponseError::CoordinatorLoadInProgress.code()) {
            Err(code) => vec![Err(code); ids.len()],
            Ok(door) => door
                .describe_transactions(&ids)
                .into_iter()
                .map(|r| {
                    r.map_err(|why| match why {
                        DescribeRefusal::NotAuthorized => {
                            ResponseError::TransactionalIdAuthorizationFailed.code()
                        }
                        DescribeRefusal::NotFound => ResponseError::TransactionalIdNotFound.code(),
                    })
                })
                .collect(),
        };
    let states = request
        .transactional_ids
        .into_iter()
        .zip(answers)
        .map(|(id, answer)| {
            let state = TransactionState::default().with_transactional_id(id);
            match answer {
                Err(code) => state
                    .with_error_code(code)
                    .with_transaction_state(StrBytes::default())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1),
                Ok(m) => {
                    let mut topics: Vec<TopicData> = Vec::new();
                    for (topic, partition) in &m.partitions {
                        let p = i32::try_from(*partition).unwrap_or(i32::MAX);
                        match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
                            Some(t) => t.partitions.push(p),
                            None => topics.push(
                                TopicData::default()
                                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                                    .with_partitions(vec![p]),
                            ),
                        }
                    }
                    state
                        .with_transaction_state(StrBytes::from_static_str(m.state.name()))
                        .with_transaction_timeout_ms(
                            i32::try_from(m.timeout_ms).unwrap_or(i32::MAX),
                        )
                        .with_transaction_start_time_ms(
                            m.started_ms
                                .map_or(-1, |s| i64::try_from(s).unwrap_or(i64::MAX)),
                        )
                        .with_producer_id(ProducerId(m.producer_id))
                        .with_producer_epoch(m.epoch)
                        .with_topics(topics)
                }
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
