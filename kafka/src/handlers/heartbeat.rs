//! Heartbeat (12): keeps a member's session; REBALANCE_IN_PROGRESS while
//! its group rebalances (the member joins again), the coordinator's
//! refusals otherwise (`error::broker_code`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::cluster::coordinator;
use super::group;
use crate::context::Context;
use crate::error::coordinator_code;

pub fn handle(ctx: &Context, request: HeartbeatRequest) -> HeartbeatResponse {
    let code = match (
        coordinator(ctx, group::NOT_READY),
        u32::try_from(request.generation_id),
    ) {
        (Err(code), _) => code,
        (Ok(_), Err(_)) => ResponseError::IllegalGeneration.code(),
        (Ok(door), Ok(generation)) => match door.heartbeat(
            request.group_id.0.as_str(),
            request.member_id.as_str(),
            group::id(request.group_instance_id.as_ref()),
            generation,
        ) {
            Ok(()) => 0,
            Err(e) => coordinator_code(&e),
        },
    };
    HeartbeatResponse::default().with_error_code(code)
}
