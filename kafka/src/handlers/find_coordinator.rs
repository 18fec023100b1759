//! FindCoordinator (10): the master coordinates every group and every
//! transactional id (`super::cluster`: this broker alone; the master, not
//! this node, in a cluster, and COORDINATOR_NOT_AVAILABLE, retriable,
//! while no master is known). v0-3 ask for one key, v4 for a batch
//! (`coordinator_keys`), each answered on its own. A group key (type 0)
//! that breaks the group-name rule is INVALID_GROUP_ID; a transaction key
//! (type 1) must not be empty (INVALID_REQUEST); another key type is
//! INVALID_REQUEST.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::names::validate_group_name;

use super::cluster::{Endpoint, Nodes};
use crate::context::Context;
use crate::error::broker_code;
use tidelog_broker::security::acl::{Operation, Resource};

const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;

pub fn handle(
    ctx: &Context,
    version: i16,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let door = ctx.door();
    let ready = door.is_some();
    let answer = |key: &str| -> (i16, Option<String>) {
        if request.key_type != GROUP_KEY && request.key_type != TRANSACTION_KEY {
            return (
                ResponseError::InvalidRequest.code(),
                Some(format!(
                    "key type {} is not served (0 groups, 1 transactions)",
                    request.key_type
                )),
            );
        }
        if !ready {
            return (ResponseError::CoordinatorNotAvailable.code(), None);
        }
        if request.key_type == TRANSACTION_KEY {
            return match &door {
                _ if key.is_empty() => (
                    ResponseError::InvalidRequest.code(),
                    Some("an empty transactional id".into()),
                ),
                Some(d) if !d.may_describe_transactional_id(key) => (
                    ResponseError::TransactionalIdAuthorizationFailed.code(),
                    None,
                ),
                _ => (0, None),
            };
        }
        match validate_group_name(key) {
            // Kafka's rule: the coordinator of a group the principal may
            // not describe is not told.
            Ok(())
                if door
                    .as_ref()
                    .is_some_and(|d| !d.may(Operation::Describe, Resource::group(key))) =>
            {
                (ResponseError::GroupAuthorizationFailed.code(), None)
            }
            Ok(()) => (0, None),
            Err(e) => (broker_code(&e), Some(e.to_string())),
        }
    };
    // The key's own checks first, then who coordinates it: every key the
    // same node, the master.
    let master = Nodes::of(door.as_ref()).master(ctx);
    let found = |key: &str| -> Result<Endpoint, (i16, Option<String>)> {
        match (answer(key), &master) {
            ((0, _), Some(master)) => Ok(master.clone()),
            ((0, _), None) => Err((
                ResponseError::CoordinatorNotAvailable.code(),
                Some("no master is known in the cluster yet".into()),
            )),
            (refused, _) => Err(refused),
        }
    };
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let coordinator = Coordinator::default().with_key(key.clone());
                match found(key.as_str()) {
                    Ok(at) => coordinator
                        .with_node_id(BrokerId(at.id))
                        .with_host(StrBytes::from_string(at.host))
                        .with_port(at.port),
                    Err((code, message)) => coordinator
                        .with_node_id(BrokerId(-1))
                        .with_host(StrBytes::default())
                        .with_port(-1)
                        .with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string)),
                }
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    match found(request.key.as_str()) {
        Ok(at) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(at.id))
            .with_host(StrBytes::from_string(at.host))
            .with_port(at.port),
        Err((code, message)) => FindCoordinatorResponse::default()
            .with_error_code(code)
            .with_error_message(if version >= 1 {
                message.map(StrBytes::from_string)
            } else {
                None
            })
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::default())
            .with_port(-1),
    }
}
