//! FindCoordinator (10): this broker coordinates every group and every
//! transactional id. v0-3 ask for one key, v4 for a batch
//! (`coordinator_keys`), each answered on its own. A group key (type 0)
//! that breaks the group-name rule is INVALID_GROUP_ID; a transaction key
//! (type 1) must not be empty (INVALID_REQUEST); another key type is
//! INVALID_REQUEST.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::names::validate_group_name;

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
    let host = StrBytes::from_string(ctx.host.clone());
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let (code, message) = answer(key.as_str());
                let found = code == 0;
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(if found { 0 } else { -1 }))
                    .with_host(if found {
                        host.clone()
                    } else {
                        StrBytes::default()
                    })
                    .with_port(if found { ctx.port } else { -1 })
                    .with_error_code(code)
                    .with_error_message(message.map(StrBytes::from_string))
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (code, message) = answer(request.key.as_str());
    let found = code == 0;
    FindCoordinatorResponse::default()
        .with_error_code(code)
        .with_error_message(if version >= 1 {
            message.map(StrBytes::from_string)
        } else {
            None
        })
        .with_node_id(BrokerId(if found { 0 } else { -1 }))
        .with_host(if found { host } else { StrBytes::default() })
        .with_port(if found { ctx.port } else { -1 })
}
