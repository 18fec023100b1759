//! DeleteGroups (42): deletes whole consumer groups without members, each
//! with its committed offsets (`Door::delete_group`, as HTTP's group
//! delete; blocking: it appends a tombstone per committed offset to
//! `__consumer_offsets`, so a deleted group stays gone after a restart).
//!
//! Kafka's `KafkaApis.handleDeleteGroupsRequest`: each distinct group of
//! the request is answered on its own, in the request's order:
//! GROUP_ID_NOT_FOUND for a group with neither members nor offsets,
//! NON_EMPTY_GROUP while it has members, INVALID_GROUP_ID,
//! GROUP_AUTHORIZATION_FAILED without DELETE on it (or, with
//! `admin_token` set, for a connection that did not log in: an operator's
//! call, as OffsetDelete), COORDINATOR_LOAD_IN_PROGRESS while recovery
//! runs; none once deleted.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use tidelog_broker::BrokerError;

use super::admin::{self, Gate};
use super::cluster::coordinator;
use super::group;
use crate::context::Context;
use crate::error::coordinator_code;

pub async fn handle(
    ctx: &Context,
    gate: Gate,
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut seen = HashSet::new();
    let mut results = Vec::new();
    for name in request.groups_names {
        if !seen.insert(name.clone()) {
            continue;
        }
        let code = match (
            gate.refusal(admin::GROUP),
            coordinator(ctx, group::NOT_READY),
        ) {
            (Some(refusal), _) => refusal.code(),
            (None, Err(code)) => code,
            (None, Ok(door)) => match door.delete_group(name.0.as_str()).await {
                Ok(()) => 0,
                Err(e @ BrokerError::GroupHasMembers { .. }) => {
                    tracing::debug!(error = %e, "group delete refused");
                    ResponseError::NonEmptyGroup.code()
                }
                Err(e) => coordinator_code(&e),
            },
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(name)
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
