//! CreatePartitions (37): grows topics through the broker's door
//! (`Door::add_partitions`, whose rules are HTTP's `PATCH
//! /v3/clusters/{c}/topics/{name}` too), each topic answered on its own
//! with its code and message.
//!
//! As Kafka's `KafkaApis.handleCreatePartitionsRequest` and its
//! controller: a topic named twice is INVALID_REQUEST for each time it is
//! named, and nothing is done for it; an unknown topic is
//! UNKNOWN_TOPIC_OR_PARTITION; a count not above the topic's is
//! INVALID_PARTITIONS; `assignments`, when given, must list one replica
//! set per new partition, each this broker alone (else
//! INVALID_REPLICA_ASSIGNMENT); ALTER on the topic is needed
//! (TOPIC_AUTHORIZATION_FAILED). `validate_only` checks everything and
//! changes nothing. `timeout_ms` is not waited on: the change is durable
//! when the answer is sent.

use std::collections::HashMap;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::topics::AddPartitions;
use tidelog_broker::Door;

use super::admin;
use crate::context::Context;
use crate::error::Refusal;

pub async fn handle(
    ctx: &Context,
    gate: admin::Gate,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let door = ctx.door();
    let mut named: HashMap<StrBytes, usize> = HashMap::new();
    for topic in &request.topics {
        *named.entry(topic.name.0.clone()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.clone();
        let outcome = match (&door, gate.refusal(admin::TOPIC)) {
            _ if named.get(&name.0).copied().unwrap_or(0) > 1 => Err(Refusal::DuplicateTopic),
            (_, Some(refused)) => Err(refused),
            (None, None) => Err(Refusal::NotReady),
            (Some(door), None) => add(door, topic, request.validate_only).await,
        };
        let result = CreatePartitionsTopicResult::default().with_name(name.clone());
        results.push(match outcome {
            Ok(count) => {
                tracing::info!(topic = %name.0, partitions = count, validate_only = request.validate_only, "CreatePartitions");
                result
            }
            Err(refusal) => result
                .with_error_code(refusal.code())
                .with_error_message(Some(StrBytes::from_string(refusal.to_string()))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

async fn add(
    door: &Door,
    topic: CreatePartitionsTopic,
    validate_only: bool,
) -> Result<u32, Refusal> {
    let request = AddPartitions {
        topic: topic.name.0.to_string(),
        count: i64::from(topic.count),
        // An empty list places them as none does (kafka-protocol's default,
        // and some clients send it for "no assignment").
        assignment: topic
            .assignments
            .filter(|a| !a.is_empty())
            .map(|assignments| {
                assignments
                    .into_iter()
                    .map(|a| a.broker_ids.into_iter().map(|b| b.0).collect())
                    .collect()
            }),
    };
    door.add_partitions(request, validate_only)
        .await
        .map_err(Refusal::from)
}
