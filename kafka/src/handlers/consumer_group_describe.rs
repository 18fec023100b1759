//! ConsumerGroupDescribe (69, KIP-848): each consumer group's state,
//! epochs, assignor and members with their subscriptions, assignments
//! and targets (`Door::consumer_group_snapshot`).
//!
//! A group with neither KIP-848 members nor committed offsets is
//! GROUP_ID_NOT_FOUND, as Kafka answers it; so is a classic group ("not a
//! consumer group"), and librdkafka's admin client then asks
//! DescribeGroups. A group with offsets only is `Empty`, epoch 0.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId,
};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::coordinator::consumer::{ConsumerGroupSnapshot, Partitions};
use tidelog_broker::coordinator::GroupType;
use tidelog_broker::names::validate_group_name;
use tidelog_broker::security::acl::Resource;
use tidelog_broker::Door;

use super::cluster::coordinator;
use super::{authorized, group, topic_name};
use crate::context::Context;
use crate::error::broker_code;

pub fn handle(
    ctx: &Context,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    // Not the coordinator (or not ready): every group answers so.
    let (door, not_served) = match coordinator(ctx, group::NOT_READY) {
        Ok(door) => (Some(door), group::NOT_READY),
        Err(code) => (None, code),
    };
    let groups = request
        .group_ids
        .into_iter()
        .map(|id| {
            let described = match &door {
                Some(door) => describe(door, id),
                None => DescribedGroup::default()
                    .with_group_id(id)
                    .with_error_code(not_served),
            };
            match &door {
                Some(door) if described.error_code == 0 => {
                    let group = Resource::group(described.group_id.0.as_str());
                    let bits = authorized::of(door, group, request.include_authorized_operations);
                    described.with_authorized_operations(bits)
                }
                _ => described,
            }
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

fn describe(door: &Door, id: GroupId) -> DescribedGroup {
    let answer = DescribedGroup::default().with_group_id(id.clone());
    let refused = |code: i16, message: String| {
        answer
            .clone()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    let name = id.0.as_str();
    if let Err(e) = validate_group_name(name) {
        return refused(broker_code(&e), e.to_string());
    }
    let snapshot = match door.consumer_group_snapshot(name) {
        Ok(snapshot) => snapshot,
        Err(e) => return refused(broker_code(&e), e.to_string()),
    };
    let not_found = ResponseError::GroupIdNotFound.code();
    let Some(snapshot) = snapshot else {
        let classic = door
            .group_snapshot(name)
            .ok()
            .flatten()
            .is_some_and(|s| s.group_type == GroupType::Classic && !s.members.is_empty());
        if classic {
            return refused(not_found, format!("Group {name} is not a consumer group."));
        }
        if matches!(door.committed_offsets(name, None), Ok(Some(_))) {
            return answer
                .with_group_state(StrBytes::from_static_str("Empty"))
                .with_assignor_name(StrBytes::from_static_str("uniform"));
        }
        return refused(not_found, format!("Group {name} not found."));
    };
    let members = snapshot
        .members
        .iter()
        .map(|m| {
            Member::default()
                .with_member_id(StrBytes::from_string(m.member_id.clone()))
                .with_instance_id(m.instance_id.clone().map(StrBytes::from_string))
                .with_rack_id(m.rack_id.clone().map(StrBytes::from_string))
                .with_member_epoch(i32::try_from(m.member_epoch).unwrap_or(i32::MAX))
                .with_client_id(StrBytes::from_string(m.client_id.clone()))
                .with_client_host(StrBytes::from_string(m.client_host.clone()))
                .with_subscribed_topic_names(m.topic_names.iter().map(|n| topic_name(n)).collect())
                .with_subscribed_topic_regex(m.topic_regex.clone().map(StrBytes::from_string))
                .with_assignment(assignment(&snapshot, &m.assignment))
                .with_target_assignment(assignment(&snapshot, &m.target))
                // 1: the member speaks the consumer protocol (0: classic).
                .with_member_type(1)
        })
        .collect();
    answer
        .with_group_state(StrBytes::from_static_str(snapshot.state.name()))
        .with_group_epoch(i32::try_from(snapshot.epoch).unwrap_or(i32::MAX))
        .with_assignment_epoch(i32::try_from(snapshot.assignment_epoch).unwrap_or(i32::MAX))
        .with_assignor_name(StrBytes::from_static_str(snapshot.assignor))
        .with_members(members)
}

fn assignment(snapshot: &ConsumerGroupSnapshot, partitions: &Partitions) -> Assignment {
    Assignment::default().with_topic_partitions(
        partitions
            .iter()
            .map(|(id, ps)| {
                let name = snapshot.topic_names.get(id).map_or("", String::as_str);
                TopicPartitions::default()
                    .with_topic_id(*id)
                    .with_topic_name(topic_name(name))
                    .with_partitions(ps.iter().filter_map(|p| i32::try_from(*p).ok()).collect())
            })
            .collect(),
    )
}
