//! SyncGroup (14): the leader sends every member's assignment, each
//! member gets its own back (`Door::sync_group`). A follower that arrives
//! before the leader waits in the broker, bounded as JoinGroup's wait;
//! one that outlives its bound answers REBALANCE_IN_PROGRESS, shutdown
//! COORDINATOR_NOT_AVAILABLE.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::coordinator::{MemberAssignment, SyncRequest};
use tidelog_broker::door::groups::SyncAnswer;

use super::cluster::coordinator;
use super::group;
use crate::context::Context;
use crate::error::coordinator_code;

pub async fn handle(ctx: &Context, version: i16, request: SyncGroupRequest) -> SyncGroupResponse {
    let door = match coordinator(ctx, group::NOT_READY) {
        Ok(door) => door,
        Err(code) => return failed(code),
    };
    let group_id = request.group_id.0.as_str();
    let Ok(generation) = u32::try_from(request.generation_id) else {
        return failed(ResponseError::IllegalGeneration.code());
    };
    let assignments = (!request.assignments.is_empty()).then(|| {
        request
            .assignments
            .iter()
            .map(|a| (a.member_id.as_str().to_owned(), a.assignment.clone()))
            .collect()
    });
    let sync = SyncRequest {
        member_id: request.member_id.as_str().to_owned(),
        instance_id: group::id(request.group_instance_id.as_ref()).map(str::to_owned),
        generation,
        assignments,
    };
    let answer = door.sync_group(group_id, sync, ctx.stop.clone()).await;
    match answer {
        Ok(SyncAnswer::Synced {
            assignment,
            protocol,
        }) => synced(version, &request, protocol, assignment),
        Ok(SyncAnswer::TimedOut) => failed(ResponseError::RebalanceInProgress.code()),
        Ok(SyncAnswer::Stopping) => failed(group::STOPPING),
        Err(e) => failed(coordinator_code(&e)),
    }
}

fn synced(
    version: i16,
    request: &SyncGroupRequest,
    protocol: Option<String>,
    assignment: MemberAssignment,
) -> SyncGroupResponse {
    let bytes = match assignment {
        MemberAssignment::Opaque(bytes) => bytes,
        // Not in a Kafka group (the coordinator keeps kinds apart).
        MemberAssignment::Partitions(_) => Bytes::new(),
    };
    let answer = SyncGroupResponse::default().with_assignment(bytes);
    if version < 5 {
        return answer;
    }
    answer
        .with_protocol_type(request.protocol_type.clone())
        .with_protocol_name(
            protocol
                .map(StrBytes::from_string)
                .or(request.protocol_name.clone()),
        )
}

fn failed(code: i16) -> SyncGroupResponse {
    SyncGroupResponse::default().with_error_code(code)
}
