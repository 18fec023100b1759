//! OffsetFetch (9): a group's committed offsets from the same store as
//! HTTP's (`Broker::groups`): v1-7 one group, v8 a batch of groups, each
//! with the partitions asked or (null topics, v2+) every committed one.
//! A partition without a committed offset answers offset -1 and no error,
//! as Kafka does (the consumer applies `auto.offset.reset`).

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::groups::CommittedOffset;
use tidelog_broker::names::validate_group_name;
use tidelog_broker::Door;

use super::cluster::coordinator;
use super::{group, topic_name};
use crate::context::Context;
use crate::error::broker_code;

/// One partition's answer: index, offset (-1: none), the leader epoch
/// committed with it (-1: none given), metadata.
type Found = (i32, i64, i32, String);

pub fn handle(ctx: &Context, version: i16, request: OffsetFetchRequest) -> OffsetFetchResponse {
    // Not the coordinator (or not ready): every group answers so.
    let (door, not_served) = match coordinator(ctx, group::NOT_READY) {
        Ok(door) => (Some(door), group::NOT_READY),
        Err(code) => (None, code),
    };
    if version >= 8 {
        let groups = request
            .groups
            .into_iter()
            .map(|g| {
                let asked = g.topics.map(|topics| {
                    topics
                        .into_iter()
                        .map(|t| (t.name, t.partition_indexes))
                        .collect()
                });
                // v9: a KIP-848 member's fetch must carry its epoch.
                let member = match (door.as_ref(), g.member_id.as_ref()) {
                    (Some(door), Some(member_id)) => door
                        .check_member_epoch(
                            g.group_id.0.as_str(),
                            member_id.as_str(),
                            g.member_epoch,
                        )
                        .map_err(|e| broker_code(&e)),
                    _ => Ok(()),
                };
                let (code, found) = match member {
                    Ok(()) => fetch(door.as_ref(), not_served, g.group_id.0.as_str(), asked),
                    Err(code) => (code, Vec::new()),
                };
                let topics = answer_topics(
                    found,
                    |name, partitions| {
                        OffsetFetchResponseTopics::default()
                            .with_name(name)
                            .with_partitions(partitions)
                    },
                    |(index, offset, epoch, metadata)| {
                        OffsetFetchResponsePartitions::default()
                            .with_partition_index(index)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(epoch)
                            .with_metadata(Some(StrBytes::from_string(metadata)))
                    },
                );
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id)
                    .with_topics(topics)
                    .with_error_code(code)
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let asked = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.name, t.partition_indexes))
            .collect()
    });
    let (code, found) = fetch(
        door.as_ref(),
        not_served,
        request.group_id.0.as_str(),
        asked,
    );
    let topics = answer_topics(
        found,
        |name, partitions| {
            OffsetFetchResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        },
        |(index, offset, epoch, metadata)| {
            OffsetFetchResponsePartition::default()
                .with_partition_index(index)
                .with_committed_offset(offset)
                // A field from v5 on: what OffsetCommit v6+ stored.
                .with_committed_leader_epoch(epoch)
                .with_metadata(Some(StrBytes::from_string(metadata)))
                // v0-1 have no group-level code: each partition carries it.
                .with_error_code(if version < 2 { code } else { 0 })
        },
    );
    let answer = OffsetFetchResponse::default().with_topics(topics);
    if version >= 2 {
        answer.with_error_code(code)
    } else {
        answer
    }
}

/// `found` in the answer's types (v0-7 and v8 have their own).
fn answer_topics<T, P>(
    found: Vec<(TopicName, Vec<Found>)>,
    topic: impl Fn(TopicName, Vec<P>) -> T,
    partition: impl Fn(Found) -> P,
) -> Vec<T> {
    found
        .into_iter()
        .map(|(name, partitions)| topic(name, partitions.into_iter().map(&partition).collect()))
        .collect()
}

/// The group's code and, per topic, the asked partitions (`None`: every
/// committed one) with their offsets; without a door, `not_served`.
fn fetch(
    door: Option<&Door>,
    not_served: i16,
    group_id: &str,
    asked: Option<Vec<(TopicName, Vec<i32>)>>,
) -> (i16, Vec<(TopicName, Vec<Found>)>) {
    let refused = match door.map(|_| validate_group_name(group_id)) {
        None => Some(not_served),
        Some(Err(e)) => Some(broker_code(&e)),
        Some(Ok(())) => None,
    };
    let (Some(door), None) = (door, refused) else {
        // The asked partitions answer -1 beside the code (v0-1 carry the
        // code in each partition only).
        let code = refused.unwrap_or(not_served);
        let none = |indexes: Vec<i32>| {
            indexes
                .into_iter()
                .map(|i| (i, -1, -1, String::new()))
                .collect()
        };
        let asked = asked.unwrap_or_default();
        return (
            code,
            asked
                .into_iter()
                .map(|(name, indexes)| (name, none(indexes)))
                .collect(),
        );
    };
    // DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED for the whole
    // answer); offsets of topics the principal may not describe are left
    // out by the door, so they answer -1 as never committed.
    let committed = match door.committed_offsets(group_id, None) {
        Ok(committed) => committed.unwrap_or_default(),
        Err(e) => {
            let code = broker_code(&e);
            let asked = asked.unwrap_or_default();
            let none = |indexes: Vec<i32>| {
                indexes
                    .into_iter()
                    .map(|i| (i, -1, -1, String::new()))
                    .collect()
            };
            return (
                code,
                asked
                    .into_iter()
                    .map(|(name, indexes)| (name, none(indexes)))
                    .collect(),
            );
        }
    };
    let Some(asked) = asked else {
        return (0, every_committed(committed));
    };
    // Looked up by (topic, partition): a request may name many.
    let by_key: BTreeMap<(&str, u32), &CommittedOffset> = committed
        .iter()
        .map(|c| ((c.topic.as_str(), c.partition), c))
        .collect();
    let found = asked
        .into_iter()
        .map(|(name, indexes)| {
            let partitions = indexes
                .into_iter()
                .map(|index| {
                    let c = u32::try_from(index)
                        .ok()
                        .and_then(|p| by_key.get(&(name.0.as_str(), p)));
                    match c {
                        Some(c) => (index, offset(c), epoch(c), c.metadata.clone()),
                        None => (index, -1, -1, String::new()),
                    }
                })
                .collect();
            (name, partitions)
        })
        .collect();
    (0, found)
}

/// Every committed offset, grouped by topic (already sorted by topic and
/// partition).
fn every_committed(committed: Vec<CommittedOffset>) -> Vec<(TopicName, Vec<Found>)> {
    let mut out: Vec<(TopicName, Vec<Found>)> = Vec::new();
    for c in committed {
        let entry = (
            i32::try_from(c.partition).unwrap_or(i32::MAX),
            offset(&c),
            epoch(&c),
            c.metadata.clone(),
        );
        match out.last_mut() {
            Some((name, partitions)) if name.0.as_str() == c.topic => partitions.push(entry),
            _ => out.push((topic_name(&c.topic), vec![entry])),
        }
    }
    out
}

fn offset(c: &CommittedOffset) -> i64 {
    i64::try_from(c.offset).unwrap_or(i64::MAX)
}

/// The leader epoch committed with the offset (v5+), -1 when none was.
fn epoch(c: &CommittedOffset) -> i32 {
    c.leader_epoch.unwrap_or(-1)
}
