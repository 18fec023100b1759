//! OffsetDelete (47): deletes committed offsets of some partitions of a
//! group (`Broker::delete_committed_offsets`, Kafka's
//! `GroupCoordinator.handleDeleteOffsets`; blocking: it appends
//! tombstones to `__consumer_offsets`, as a group's deletion does).
//!
//! Answers: the group as a whole is refused with a top-level code and no
//! topics (GROUP_ID_NOT_FOUND for a group with neither members nor
//! offsets, NON_EMPTY_GROUP for members of another protocol type than
//! `consumer`, INVALID_GROUP_ID, COORDINATOR_LOAD_IN_PROGRESS while
//! recovery runs, GROUP_AUTHORIZATION_FAILED with `admin_token` set and no
//! login: it is an operator's call, as HTTP's group delete is); otherwise
//! every partition gets its own code: UNKNOWN_TOPIC_OR_PARTITION,
//! GROUP_SUBSCRIBED_TO_TOPIC for a topic a live member subscribes to, or
//! none (deleted, or nothing was committed there).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use tidelog_broker::group_admin::OffsetDeletion;
use tidelog_broker::BrokerError;

use super::admin::{self, Gate};
use super::cluster::coordinator;
use super::group;
use crate::context::Context;
use crate::error::coordinator_code;

pub async fn handle(
    ctx: &Context,
    gate: Gate,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let refused = |code: i16| OffsetDeleteResponse::default().with_error_code(code);
    if let Some(refusal) = gate.refusal(admin::GROUP) {
        return refused(refusal.code());
    }
    let door = match coordinator(ctx, group::NOT_READY) {
        Ok(door) => door,
        Err(code) => return refused(code),
    };
    // Every asked partition in order; a negative index is no partition.
    let asked: Vec<(String, u32)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let index = u32::try_from(p.partition_index).unwrap_or(u32::MAX);
                (t.name.0.as_str().to_owned(), index)
            })
        })
        .collect();
    let group_id = request.group_id.0.as_str().to_owned();
    let answers = match door.delete_committed_offsets(&group_id, asked).await {
        Ok(answers) => answers,
        Err(e @ BrokerError::GroupHasMembers { .. }) => {
            tracing::debug!(error = %e, "offset delete refused");
            return refused(ResponseError::NonEmptyGroup.code());
        }
        Err(e) => return refused(coordinator_code(&e)),
    };
    let mut answers = answers.into_iter();
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let code = match answers.next() {
                        Some(OffsetDeletion::Deleted) => 0,
                        Some(OffsetDeletion::Subscribed) => {
                            ResponseError::GroupSubscribedToTopic.code()
                        }
                        Some(OffsetDeletion::UnknownPartition) | None => {
                            ResponseError::UnknownTopicOrPartition.code()
                        }
                    };
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
