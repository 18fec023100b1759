//! Metadata (3): one broker (node 0, the advertised host and port), which
//! leads every partition; all topics or the ones asked, unknown ones
//! auto-created when `auto_create_topics` and the request allow it.
//!
//! Decisions: v0's empty topic list means all topics (v1+: null does);
//! an unknown topic without auto-create is UNKNOWN_TOPIC_OR_PARTITION, a
//! bad name INVALID_TOPIC_EXCEPTION; topic ids are zero (tidelog has none,
//! and the served Fetch versions name topics).

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::registry::Topic;
use tidelog_broker::topics::NODE_ID;

use super::{authorized, topic_name, NOT_READY};
use crate::context::Context;
use crate::error::broker_code;
use tidelog_broker::security::acl::Resource;

pub async fn handle(ctx: &Context, version: i16, request: MetadataRequest) -> MetadataResponse {
    let node = MetadataResponseBroker::default()
        .with_node_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(ctx.host.clone()))
        .with_port(ctx.port);
    let asked: Option<Vec<String>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .filter_map(|t| t.name.map(|n| n.0.as_str().to_owned()))
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
            .map(|name| failed(name, NOT_READY))
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
        Some(names) => {
            let create = version < 4 || request.allow_auto_topic_creation;
            let mut topics = Vec::with_capacity(names.len());
            for name in names {
                topics.push(match door.metadata_topic(&name, create).await {
                    Ok(topic) => described(&topic),
                    Err(e) => failed(&name, broker_code(&e)),
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
        .with_is_internal(topic.is_internal())
        .with_partitions(partitions)
}

fn failed(name: &str, code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_error_code(code)
}
