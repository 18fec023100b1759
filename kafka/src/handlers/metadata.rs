//! Metadata (3): one broker (node 0, the advertised host and port), which
//! leads every partition; all topics or the ones asked, unknown ones
//! auto-created when `auto_create_topics` and the request allow it.
//!
//! Decisions: v0's empty topic list means all topics (v1+: null does);
//! an unknown topic without auto-create is UNKNOWN_TOPIC_OR_PARTITION, a
//! bad name INVALID_TOPIC_EXCEPTION. v10+ answers each topic's id
//! (KIP-516) and takes topics by id as well as by name (a KIP-848
//! consumer learns its assignment's names so): an unknown id is
//! UNKNOWN_TOPIC_ID, one the principal may not describe
//! TOPIC_AUTHORIZATION_FAILED, both without a name, so an id leaks none.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::registry::Topic;
use tidelog_broker::topics::NODE_ID;
use uuid::Uuid;

use super::{authorized, topic_name, NOT_READY};
use crate::context::Context;
use crate::error::broker_code;
use tidelog_broker::security::acl::Resource;

pub async fn handle(ctx: &Context, version: i16, request: MetadataRequest) -> MetadataResponse {
    let node = MetadataResponseBroker::default()
        .with_node_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(ctx.host.clone()))
        .with_port(ctx.port);
    let asked: Option<Vec<Asked>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .filter_map(|t| match t.name {
                Some(name) => Some(Asked::Name(name.0.as_str().to_owned())),
                None if version >= 10 && !t.topic_id.is_nil() => Some(Asked::Id(t.topic_id)),
                None => None,
            })
            .collect()
    });
    let asked = asked.filter(|names| !(version == 0 && names.is_empty()));
    let answer = MetadataResponse::default()
        .with_brokers(vec![node])
        .with_controller_id(BrokerId(NODE_ID))
        .with_cluster_id(ctx.cluster_id.clone().map(StrBytes::from_string));
    // Before the broker is ready (recovery) asked topics answer
    // LEADER_NOT_AVAILABLE; a request for all of them gets none, since the
    // registry is not loaded yet.
    let Some(door) = ctx.door() else {
        let topics = asked
            .unwrap_or_default()
            .iter()
            .map(|asked| asked.failed(version, NOT_READY))
            .collect();
        return answer.with_topics(topics);
    };
    let answer = answer
        .with_cluster_id(Some(StrBytes::from_string(door.cluster_id().to_owned())))
        .with_cluster_authorized_operations(authorized::of(
            &door,
            Resource::cluster(),
            (8..=10).contains(&version) && request.include_cluster_authorized_operations,
        ));
    let operations = version >= 8 && request.include_topic_authorized_operations;
    let described = |topic: &Topic| {
        described(topic).with_topic_authorized_operations(authorized::of(
            &door,
            Resource::topic(&topic.name),
            operations,
        ))
    };
    let topics = match asked {
        None => door.list_topics().iter().map(|t| described(t)).collect(),
        Some(asked) => {
            let create = version < 4 || request.allow_auto_topic_creation;
            let mut topics = Vec::with_capacity(asked.len());
            for one in asked {
                let found = match &one {
                    Asked::Name(name) => door.metadata_topic(name, create).await.map(Some),
                    Asked::Id(id) => door.topic_by_id(*id),
                };
                topics.push(match found {
                    Ok(Some(topic)) => described(&topic),
                    Ok(None) => one.failed(version, ResponseError::UnknownTopicId.code()),
                    Err(e) => one.failed(version, broker_code(&e)),
                });
            }
            topics
        }
    };
    answer.with_topics(topics)
}

fn described(topic: &Topic) -> MetadataResponseTopic {
    let partitions = (0..topic.partitions.get())
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p as i32)
                .with_leader_id(BrokerId(NODE_ID))
                .with_leader_epoch(0)
                .with_replica_nodes(vec![BrokerId(NODE_ID)])
                .with_isr_nodes(vec![BrokerId(NODE_ID)])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(topic.id)
        .with_is_internal(topic.is_internal())
        .with_partitions(partitions)
}

/// One topic a request names, by name or (v10+) by id.
enum Asked {
    Name(String),
    Id(Uuid),
}

impl Asked {
    /// The answer of a topic not found or refused; one asked by id has
    /// no name (null from v12, empty before, where it cannot be null).
    fn failed(&self, version: i16, code: i16) -> MetadataResponseTopic {
        let topic = MetadataResponseTopic::default().with_error_code(code);
        match self {
            Asked::Name(name) => topic.with_name(Some(topic_name(name))),
            Asked::Id(id) if version >= 12 => topic.with_topic_id(*id).with_name(None),
            Asked::Id(id) => topic.with_topic_id(*id),
        }
    }
}
