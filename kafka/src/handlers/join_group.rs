//! JoinGroup (11): a Kafka member joins through the broker's door
//! (`Door::join_group`), which waits while the join window is open,
//! bounded by the member's rebalance timeout and by shutdown.
//!
//! Decisions:
//! * From v4 a new dynamic member is answered MEMBER_ID_REQUIRED with its
//!   id (KIP-394); v0-3 members are admitted at once.
//! * v0 has no rebalance timeout: the session timeout stands for it.
//! * A wait that outlives its bound answers REBALANCE_IN_PROGRESS (the
//!   client joins again); shutdown answers COORDINATOR_NOT_AVAILABLE.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::coordinator::{JoinRequest, JoinResponse, MemberProtocol};
use tidelog_broker::door::groups::{JoinAnswer, NotJoined};
use tidelog_broker::BrokerError;

use super::cluster::coordinator;
use super::group;
use crate::context::Context;
use crate::error::coordinator_code;

/// Who sent the request: the header's client id and the peer's address.
pub struct Caller<'a> {
    pub client_id: &'a str,
    pub host: &'a str,
}

pub async fn handle(
    ctx: &Context,
    version: i16,
    caller: Caller<'_>,
    request: JoinGroupRequest,
) -> JoinGroupResponse {
    let door = match coordinator(ctx, group::NOT_READY) {
        Ok(door) => door,
        Err(code) => return failed(code, ""),
    };
    let group_id = request.group_id.0.as_str();
    let Ok(session_timeout_ms) = u64::try_from(request.session_timeout_ms) else {
        return failed(ResponseError::InvalidSessionTimeout.code(), "");
    };
    // v0's default is -1: no rebalance timeout, the session's stands.
    let rebalance_timeout_ms = u64::try_from(request.rebalance_timeout_ms).unwrap_or(0);
    let join = JoinRequest {
        member_id: group::id(Some(&request.member_id)).map(str::to_owned),
        instance_id: group::id(request.group_instance_id.as_ref()).map(str::to_owned),
        client_id: caller.client_id.to_owned(),
        host: caller.host.to_owned(),
        session_timeout_ms,
        rebalance_timeout_ms,
        protocol: MemberProtocol::Kafka {
            protocol_type: request.protocol_type.as_str().to_owned(),
            protocols: request
                .protocols
                .iter()
                .map(|p| (p.name.as_str().to_owned(), p.metadata.clone()))
                .collect(),
        },
        require_known_member_id: version >= 4,
        server_side: false,
    };
    let answer = door.join_group(group_id, join, ctx.stop.clone()).await;
    match answer {
        Ok(JoinAnswer::Joined(joined)) => joined_answer(version, &request, joined),
        Ok(JoinAnswer::NotJoined { member_id, why }) => {
            let code = match why {
                NotJoined::TimedOut => ResponseError::RebalanceInProgress.code(),
                NotJoined::Stopping => group::STOPPING,
                NotJoined::Refused(e) => coordinator_code(&e),
            };
            failed(code, &member_id)
        }
        Err(BrokerError::MemberIdRequired { member_id, .. }) => {
            failed(ResponseError::MemberIdRequired.code(), &member_id)
        }
        Err(e) => failed(coordinator_code(&e), request.member_id.as_str()),
    }
}

fn joined_answer(
    version: i16,
    request: &JoinGroupRequest,
    joined: JoinResponse,
) -> JoinGroupResponse {
    let members = joined
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(StrBytes::from_string(m.member_id))
                // A field from v5 on.
                .with_group_instance_id(if version >= 5 {
                    m.instance_id.map(StrBytes::from_string)
                } else {
                    None
                })
                .with_metadata(m.metadata)
        })
        .collect();
    JoinGroupResponse::default()
        .with_generation_id(i32::try_from(joined.generation).unwrap_or(i32::MAX))
        .with_protocol_type(Some(request.protocol_type.clone()))
        .with_protocol_name(Some(StrBytes::from_string(joined.protocol_name)))
        .with_leader(StrBytes::from_string(joined.leader_id))
        .with_member_id(StrBytes::from_string(joined.member_id))
        .with_members(members)
}

fn failed(code: i16, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(code)
        .with_generation_id(-1)
        .with_protocol_name(Some(StrBytes::default()))
        .with_member_id(StrBytes::from_string(member_id.to_owned()))
}
