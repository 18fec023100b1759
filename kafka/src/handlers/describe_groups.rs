//! DescribeGroups (15): each group's state, protocol and members with
//! their metadata for the selected protocol and their assignment bytes
//! as the leader sent them (`Door::group_snapshot`).
//!
//! A group without members but with committed offsets is `Empty`; a
//! group with neither is `Dead` with no error, as Kafka answers it (the
//! admin clients read the state). A KIP-848 group with members is `Dead`
//! with no error, as Kafka 4 answers it below v6 (v6 adds the error
//! message its GROUP_ID_NOT_FOUND "is not a classic group" needs; tidelog
//! serves up to v5): ConsumerGroupDescribe describes those. An HTTP
//! group's members carry no
//! metadata or assignment bytes (theirs are the coordinator's own, shown
//! by HTTP's describe).

use bytes::Bytes;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::coordinator::{
    GroupSnapshot, GroupType, MemberAssignment, MemberProtocol, MemberSnapshot,
};
use tidelog_broker::names::validate_group_name;
use tidelog_broker::Door;

use super::cluster::coordinator;
use super::list_groups::protocol_type;
use super::{authorized, group};
use crate::context::Context;
use crate::error::broker_code;
use tidelog_broker::security::acl::Resource;

pub fn handle(
    ctx: &Context,
    version: i16,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    // Not the coordinator (or not ready): every group answers so.
    let (door, not_served) = match coordinator(ctx, group::NOT_READY) {
        Ok(door) => (Some(door), group::NOT_READY),
        Err(code) => (None, code),
    };
    let operations = version >= 3 && request.include_authorized_operations;
    let groups = request
        .groups
        .into_iter()
        .map(|id| {
            let described = match &door {
                Some(door) => describe(door, version, id),
                None => DescribedGroup::default()
                    .with_group_id(id)
                    .with_error_code(not_served),
            };
            match &door {
                Some(door) if described.error_code == 0 => {
                    let group = Resource::group(described.group_id.0.as_str());
                    let bits = authorized::of(door, group, operations);
                    described.with_authorized_operations(bits)
                }
                _ => described,
            }
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

fn describe(door: &Door, version: i16, id: GroupId) -> DescribedGroup {
    let answer = DescribedGroup::default().with_group_id(id.clone());
    let name = id.0.as_str();
    if let Err(e) = validate_group_name(name) {
        return answer.with_error_code(broker_code(&e));
    }
    let snapshot = match door.group_snapshot(name) {
        Ok(snapshot) => snapshot,
        Err(e) => return answer.with_error_code(broker_code(&e)),
    };
    if snapshot
        .as_ref()
        .is_some_and(|s| s.group_type == GroupType::Consumer && !s.members.is_empty())
    {
        // Not a classic group: Kafka's answer below v6, which has no
        // error message to say so in.
        return answer.with_group_state(StrBytes::from_static_str("Dead"));
    }
    let Some(snapshot) = snapshot.filter(|s| !s.members.is_empty()) else {
        if !matches!(door.committed_offsets(name, None), Ok(Some(_))) {
            return answer.with_group_state(StrBytes::from_static_str("Dead"));
        }
        // Kafka keeps an emptied group's protocol type (`consumer`);
        // librdkafka reads an empty one as a "simple" group.
        let kind = door.committed_protocol(name).ok().flatten();
        return answer
            .with_group_state(StrBytes::from_static_str("Empty"))
            .with_protocol_type(StrBytes::from_static_str(protocol_type(kind)));
    };
    let members = snapshot
        .members
        .iter()
        .map(|m| member(&snapshot, m, version))
        .collect();
    answer
        .with_group_state(StrBytes::from_static_str(snapshot.state.name()))
        .with_protocol_type(StrBytes::from_string(group_protocol_type(&snapshot)))
        .with_protocol_data(StrBytes::from_string(
            snapshot.protocol.clone().unwrap_or_default(),
        ))
        .with_members(members)
}

/// The Kafka members' protocol type (`consumer` for consumer clients).
fn group_protocol_type(snapshot: &GroupSnapshot) -> String {
    snapshot
        .members
        .iter()
        .find_map(|m| match &m.protocol {
            MemberProtocol::Kafka { protocol_type, .. } => Some(protocol_type.clone()),
            MemberProtocol::Http { .. } => None,
        })
        .unwrap_or_else(|| protocol_type(snapshot.kind).to_owned())
}

fn member(snapshot: &GroupSnapshot, m: &MemberSnapshot, version: i16) -> DescribedGroupMember {
    let metadata = match (&m.protocol, &snapshot.protocol) {
        (MemberProtocol::Kafka { protocols, .. }, Some(selected)) => protocols
            .iter()
            .find(|(name, _)| name == selected)
            .map(|(_, metadata)| metadata.clone()),
        _ => None,
    };
    let assignment = match &m.assignment {
        Some(MemberAssignment::Opaque(bytes)) => bytes.clone(),
        _ => Bytes::new(),
    };
    let described = DescribedGroupMember::default()
        .with_member_id(StrBytes::from_string(m.member_id.clone()))
        .with_client_id(StrBytes::from_string(m.client_id.clone()))
        .with_client_host(StrBytes::from_string(m.host.clone()))
        .with_member_metadata(metadata.unwrap_or_default())
        .with_member_assignment(assignment);
    if version >= 4 {
        described.with_group_instance_id(m.instance_id.clone().map(StrBytes::from_string))
    } else {
        described
    }
}
