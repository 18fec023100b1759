//! Metadata (3): the brokers and who leads every partition
//! (`super::cluster`: node 0 at the listener's host and port alone; the
//! live nodes, the master leading, in a cluster); all topics or the ones
//! asked, unknown ones auto-created when `auto_create_topics` and the
//! request allow it.
//!
//! Decisions: v0's empty topic list means all topics (v1+: null does);
//! an unknown topic without auto-create is UNKNOWN_TOPIC_OR_PARTITION, a
//! bad name INVALID_TOPIC_EXCEPTION. v10+ answers each topic's id
//! (KIP-516) and takes topics by id as well as by name (a KIP-848
//! consumer learns its assignment's names so): an unknown id is
//! UNKNOWN_TOPIC_ID, one the principal may not describe
//! TOPIC_AUTHORIZATION_FAILED, both without a name, so an id leaks none.
//! On a replica an unknown topic is not auto-created (the master
//! creates): LEADER_NOT_AVAILABLE, as Kafka answers a topic being
//! created. In a cluster with no master known (an election under way) every
//! partition answers LEADER_NOT_AVAILABLE, leader -1, with its replicas
//! and ISR: clients retry their metadata until a master is named. While
//! the broker is not ready (recovery, or a cluster's node opening it
//! again on a role change) a topic this listener described before keeps
//! its partitions, each LEADER_NOT_AVAILABLE without a leader, for a
//! client told that a topic has no partitions drops what it queued.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::registry::Topic;
use tidelog_broker::BrokerError;
use uuid::Uuid;

use super::cluster::Nodes;
use super::{authorized, topic_name, NOT_READY};
use crate::context::Context;
use crate::error::broker_code;
use tidelog_broker::security::acl::Resource;

pub async fn handle(ctx: &Context, version: i16, request: MetadataRequest) -> MetadataResponse {
    let door = ctx.door();
    let nodes = Nodes::of(door.as_ref());
    let brokers = nodes
        .brokers(ctx)
        .into_iter()
        .map(|b| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(b.host))
                .with_port(b.port)
        })
        .collect();
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
        .with_brokers(brokers)
        .with_controller_id(BrokerId(nodes.master_id(ctx)))
        .with_cluster_id(ctx.cluster_id.clone().map(StrBytes::from_string));
    // Before the broker is ready (recovery) asked topics answer
    // LEADER_NOT_AVAILABLE; a request for all of them gets none, since the
    // registry is not loaded yet.
    // A topic described before (the broker is being opened again) keeps
    // its partitions, each without a leader: the client waits for one
    // rather than drop what it queued for them.
    let Some(door) = door else {
        let known = ctx.known_topics.lock().unwrap_or_else(|e| e.into_inner());
        let topics = asked
            .unwrap_or_default()
            .iter()
            .map(|asked| match asked {
                Asked::Name(name) => match known.get(name) {
                    Some(&(id, partitions)) => leaderless(name, id, partitions),
                    None => asked.failed(version, NOT_READY),
                },
                Asked::Id(_) => asked.failed(version, NOT_READY),
            })
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
    let leaders = Leaders::of(&nodes, ctx);
    let described = |topic: &Topic| {
        described(topic, &leaders).with_topic_authorized_operations(authorized::of(
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
                    // A replica cannot auto-create (a write): the code
                    // Kafka answers while a topic is being created, so
                    // the client asks again, and its asking the master
                    // creates it.
                    Err(BrokerError::NotMaster { .. }) => one.failed(version, NOT_READY),
                    Err(e) => one.failed(version, broker_code(&e)),
                });
            }
            topics
        }
    };
    remember(ctx, &topics);
    answer.with_topics(topics)
}

/// Note each described topic's id and partition count for the answers
/// given while the broker is not ready.
fn remember(ctx: &Context, topics: &[MetadataResponseTopic]) {
    let mut known = ctx.known_topics.lock().unwrap_or_else(|e| e.into_inner());
    for t in topics.iter().filter(|t| t.error_code == 0) {
        if let Some(name) = &t.name {
            known.insert(name.to_string(), (t.topic_id, t.partitions.len() as u32));
        }
    }
}

/// A known topic while no broker answers: its partitions, each
/// LEADER_NOT_AVAILABLE without a leader.
fn leaderless(name: &str, id: Uuid, partitions: u32) -> MetadataResponseTopic {
    let partitions = (0..partitions)
        .map(|p| {
            MetadataResponsePartition::default()
                .with_error_code(NOT_READY)
                .with_partition_index(p as i32)
                .with_leader_id(BrokerId(-1))
                .with_leader_epoch(-1)
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_topic_id(id)
        .with_partitions(partitions)
}

/// What every partition answers: its leader (with LEADER_NOT_AVAILABLE
/// without one), leader epoch, replicas and ISR, the same for all.
struct Leaders {
    leader: i32,
    error_code: i16,
    epoch: i32,
    replicas: Vec<BrokerId>,
    isr: Vec<BrokerId>,
}

impl Leaders {
    fn of(nodes: &Nodes, ctx: &Context) -> Leaders {
        let leader = nodes.master_id(ctx);
        let ids = |ids: Vec<i32>| ids.into_iter().map(BrokerId).collect();
        Leaders {
            leader,
            error_code: match leader {
                -1 => NOT_READY,
                _ => 0,
            },
            epoch: nodes.leader_epoch(),
            replicas: ids(nodes.replicas()),
            isr: ids(nodes.isr()),
        }
    }
}

fn described(topic: &Topic, leaders: &Leaders) -> MetadataResponseTopic {
    let partitions = (0..topic.partitions.get())
        .map(|p| {
            MetadataResponsePartition::default()
                .with_error_code(leaders.error_code)
                .with_partition_index(p as i32)
                .with_leader_id(BrokerId(leaders.leader))
                .with_leader_epoch(leaders.epoch)
                .with_replica_nodes(leaders.replicas.clone())
                .with_isr_nodes(leaders.isr.clone())
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
