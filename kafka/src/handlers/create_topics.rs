//! CreateTopics (19): each topic through the broker's door,
//! `Broker::create_topic_as`, whose rules are the HTTP admin API's too
//! (`tidelog_broker::topics`), its own error code per topic:
//! `num_partitions` −1 is the broker's `default_partitions`; a replication
//! factor other than −1 or 1..=the number of nodes (1 alone) is
//! INVALID_REPLICATION_FACTOR, and a topic created answers (v5+) the
//! factor it has: every node holds every topic (`super::cluster`); a
//! manual replica assignment may name only this broker (id 0), once a
//! partition, for partitions 0..n (else INVALID_REPLICA_ASSIGNMENT), and
//! makes n partitions. `validate_only` checks
//! everything a create would (including that the topic does not exist) and
//! creates nothing. From v5 an answer carries the topic's partitions and
//! configs.

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::topic_config::{self, Defaults, Overrides};
use tidelog_broker::topics::CreateTopic;
use tidelog_broker::Door;
use uuid::Uuid;

use super::admin;
use super::cluster::Nodes;
use super::configs::source_code;
use crate::context::Context;
use crate::error::Refusal;

pub async fn handle(
    ctx: &Context,
    gate: admin::Gate,
    version: i16,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let door = ctx.door();
    let replicas = Nodes::of(door.as_ref()).replicas().len();
    let factor = i16::try_from(replicas).unwrap_or(i16::MAX);
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let result = CreatableTopicResult::default().with_name(topic.name.clone());
        let outcome = match (&door, gate.refusal(admin::TOPIC)) {
            (_, Some(refused)) => Err(refused),
            (None, None) => Err(Refusal::NotReady),
            (Some(door), None) => create(door, topic, request.validate_only).await,
        };
        topics.push(match outcome {
            Ok(created) => {
                tracing::info!(topic = %name, partitions = created.1, validate_only = request.validate_only, "CreateTopics");
                let defaults = door.as_ref().map(Door::topic_defaults).unwrap_or_default();
                answer(result, version, &defaults, factor, created)
            }
            Err(refusal) => result
                .with_error_code(refusal.code())
                .with_error_message(Some(StrBytes::from_string(refusal.to_string())))
                .with_num_partitions(-1)
                .with_replication_factor(-1),
        });
    }
    CreateTopicsResponse::default().with_topics(topics)
}

/// The partitions and overrides of a topic created (or that would be).
type Created = (Option<Uuid>, u32, Overrides);

async fn create(
    door: &Door,
    topic: CreatableTopic,
    validate_only: bool,
) -> Result<Created, Refusal> {
    let request = CreateTopic {
        name: topic.name.0.to_string(),
        partitions: Some(i64::from(topic.num_partitions)),
        replication_factor: Some(i64::from(topic.replication_factor)),
        assignment: topic
            .assignments
            .iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.iter().map(|b| b.0).collect(),
                )
            })
            .collect(),
        configs: topic
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect(),
    };
    door.create_topic(request, validate_only)
        .await
        .map(|created| (created.id, created.partitions, created.overrides))
        .map_err(Refusal::from)
}

fn answer(
    result: CreatableTopicResult,
    version: i16,
    defaults: &Defaults,
    replication_factor: i16,
    (id, partitions, overrides): Created,
) -> CreatableTopicResult {
    let result = result.with_topic_id(id.unwrap_or_default());
    if version < 5 {
        return result;
    }
    let configs = topic_config::entries(defaults, &overrides)
        .into_iter()
        .map(|e| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_static_str(e.name))
                .with_value(Some(StrBytes::from_string(e.value)))
                .with_config_source(source_code(e.source))
        })
        .collect();
    result
        .with_num_partitions(i32::try_from(partitions).unwrap_or(i32::MAX))
        .with_replication_factor(replication_factor)
        .with_configs(Some(configs))
}
