//! SyncGroup (14): the leader sends every member's assignment, each
//! member gets its own back. A follower that arrives before the leader
//! waits on the group's listener (bounded, as JoinGroup), then polls
//! (`Coordinator::poll_sync`).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::coordinator::{MemberAssignment, SyncOutcome};

use super::group::{self, Waited};
use crate::context::Context;
use crate::error::broker_code;

pub async fn handle(ctx: &Context, version: i16, request: SyncGroupRequest) -> SyncGroupResponse {
    let Some(broker) = ctx.broker() else {
        return failed(group::NOT_READY);
    };
    let group_id = request.group_id.0.as_str();
    let member_id = request.member_id.as_str();
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
    let coordinator = broker.coordinator();
    let instance_id = group::id(request.group_instance_id.as_ref());
    let mut outcome = coordinator.sync(group_id, member_id, instance_id, generation, assignments);
    let deadline = group::deadline(coordinator.config().max_session_timeout_ms);
    let mut stop = ctx.stop.clone();
    loop {
        let listener = match outcome {
            Ok(SyncOutcome::Synced(assignment)) => {
                let protocol = coordinator.describe(group_id).and_then(|g| g.protocol);
                return synced(version, &request, protocol, assignment);
            }
            Err(e) => return failed(broker_code(&e)),
            Ok(SyncOutcome::Pending) => coordinator.listen(group_id),
        };
        // Polled after the listener is taken: a change in between wakes
        // the wait at once.
        outcome = coordinator.poll_sync(group_id, member_id, generation);
        if matches!(outcome, Ok(SyncOutcome::Pending)) {
            match group::wait(listener, deadline, &mut stop).await {
                Waited::Changed => outcome = coordinator.poll_sync(group_id, member_id, generation),
                Waited::Deadline => return failed(ResponseError::RebalanceInProgress.code()),
                Waited::Stopping => return failed(group::STOPPING),
            }
        }
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
