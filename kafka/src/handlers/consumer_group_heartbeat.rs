//! ConsumerGroupHeartbeat (68, KIP-848): a member of a consumer group
//! joins (epoch 0), stays and learns its assignment, or leaves (−1; −2
//! for a static member coming back), all through this one call
//! (`Door::consumer_group_heartbeat`; the rules are the coordinator's,
//! `coordinator::consumer`).
//!
//! v0 gives a joining member without an id one; v1 (KIP-1082) requires
//! the member to bring its own, as librdkafka and Kafka's clients do, and
//! answers an empty one INVALID_REQUEST. Refusals carry Kafka's code and a
//! message; the assignment is answered only when it changed or the
//! member asked in full, as Kafka does.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::coordinator::consumer::Partitions;
use tidelog_broker::coordinator::Heartbeat;

use super::cluster::coordinator;
use super::group;
use crate::context::Context;
use crate::error::coordinator_code;

pub fn handle(
    ctx: &Context,
    version: i16,
    client_id: &str,
    host: &str,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let answer = ConsumerGroupHeartbeatResponse::default();
    let door = match coordinator(ctx, group::NOT_READY) {
        Ok(door) => door,
        Err(code) => return answer.with_error_code(code),
    };
    let refused = |code: i16, message: String| {
        answer
            .clone()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    if version >= 1 && request.member_id.is_empty() {
        return refused(
            ResponseError::InvalidRequest.code(),
            "MemberId can't be empty.".into(),
        );
    }
    let group = request.group_id.0.to_string();
    let owned = request.topic_partitions.map(|topics| {
        let mut owned = Partitions::new();
        for t in topics {
            let partitions = owned.entry(t.topic_id).or_default();
            // Negative indexes name no partition: ignored.
            partitions.extend(t.partitions.iter().filter_map(|p| u32::try_from(*p).ok()));
        }
        owned
    });
    let heartbeat = Heartbeat {
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.map(|s| s.to_string()),
        rack_id: request.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        topic_names: request
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
        topic_regex: request.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: request.server_assignor.map(|s| s.to_string()),
        owned,
        client_id: client_id.to_owned(),
        client_host: host.to_owned(),
    };
    match door.consumer_group_heartbeat(&group, heartbeat) {
        Ok(beat) => answer
            .with_member_id(Some(StrBytes::from_string(beat.member_id)))
            .with_member_epoch(beat.member_epoch)
            .with_heartbeat_interval_ms(
                i32::try_from(beat.heartbeat_interval_ms).unwrap_or(i32::MAX),
            )
            .with_assignment(beat.assignment.map(assignment)),
        Err(e) => refused(coordinator_code(&e), e.to_string()),
    }
}

fn assignment(partitions: Partitions) -> Assignment {
    Assignment::default().with_topic_partitions(
        partitions
            .into_iter()
            .map(|(id, ps)| {
                TopicPartitions::default()
                    .with_topic_id(id)
                    .with_partitions(
                        ps.into_iter()
                            .filter_map(|p| i32::try_from(p).ok())
                            .collect(),
                    )
            })
            .collect(),
    )
}
