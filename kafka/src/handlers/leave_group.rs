//! LeaveGroup (13): v0-2 one member by id, v3+ a batch of members by id
//! or `group.instance.id` (KIP-345), each answered on its own (the
//! request's own code is for the group as a whole: 0 once it is served).

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use kafka_protocol::error::ResponseError;
use tidelog_broker::security::acl::{Operation, Resource};

use super::cluster::coordinator;
use super::group;
use crate::context::Context;
use crate::error::coordinator_code;

pub fn handle(ctx: &Context, version: i16, request: LeaveGroupRequest) -> LeaveGroupResponse {
    let door = match coordinator(ctx, group::NOT_READY) {
        Ok(door) => door,
        Err(code) => return LeaveGroupResponse::default().with_error_code(code),
    };
    let group_id = request.group_id.0.as_str();
    // Kafka answers a group it may not READ with the request's own code.
    if !door.may(Operation::Read, Resource::group(group_id)) {
        return LeaveGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let leave = |member_id: Option<&str>, instance_id: Option<&str>| -> i16 {
        match door.leave_group(group_id, member_id, instance_id) {
            Ok(()) => 0,
            Err(e) => coordinator_code(&e),
        }
    };
    if version < 3 {
        let code = leave(group::id(Some(&request.member_id)), None);
        return LeaveGroupResponse::default().with_error_code(code);
    }
    let members = request
        .members
        .iter()
        .map(|m| {
            let instance_id = m.group_instance_id.as_ref();
            MemberResponse::default()
                .with_member_id(m.member_id.clone())
                .with_group_instance_id(instance_id.cloned())
                .with_error_code(leave(group::id(Some(&m.member_id)), group::id(instance_id)))
        })
        .collect();
    LeaveGroupResponse::default().with_members(members)
}
