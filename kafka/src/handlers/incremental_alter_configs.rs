//! IncrementalAlterConfigs (44): SET and DELETE of a topic's configs,
//! all or nothing per topic (`configs::alter`). APPEND and SUBTRACT work
//! on the one list config, `cleanup.policy` (its items `compact` and
//! `delete`); on any other config they are INVALID_REQUEST, as Kafka
//! answers them for a non-list config.

use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use tidelog_broker::error::ConfigOperationProblem;
use tidelog_broker::registry::Topic;
use tidelog_broker::BrokerError;

use super::admin::Gate;
use super::configs;
use crate::context::Context;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// The one list config.
const LIST_CONFIG: &str = "cleanup.policy";

pub async fn handle(
    ctx: &Context,
    gate: Gate,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let name = resource.resource_name.to_string();
        let configs = resource.configs;
        let outcome = configs::alter(
            ctx,
            gate,
            resource.resource_type,
            &name,
            request.validate_only,
            move |topic| changes(topic, &configs),
        )
        .await;
        let response = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name);
        let (code, message) = configs::error_parts(outcome);
        responses.push(response.with_error_code(code).with_error_message(message));
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

fn changes(
    topic: &Topic,
    configs: &[AlterableConfig],
) -> Result<Vec<(String, Option<String>)>, BrokerError> {
    let mut changes: Vec<(String, Option<String>)> = Vec::with_capacity(configs.len());
    for c in configs {
        let name = c.name.to_string();
        let value = c.value.as_ref().map(|v| v.to_string());
        let change = match c.config_operation {
            SET => Some(value.ok_or_else(|| BrokerError::InvalidConfigOperation {
                name: name.clone(),
                problem: ConfigOperationProblem::SetWithoutValue,
            })?),
            DELETE => None,
            APPEND | SUBTRACT if name == LIST_CONFIG => {
                // The value so far in this request, else the topic's.
                let current = changes
                    .iter()
                    .rev()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| topic.overrides.get(&name).cloned());
                let current =
                    current.unwrap_or_else(|| topic.config.cleanup_policy.as_str().to_owned());
                Some(edit_list(
                    &current,
                    value.as_deref().unwrap_or(""),
                    c.config_operation == APPEND,
                ))
            }
            APPEND | SUBTRACT => {
                return Err(BrokerError::InvalidConfigOperation {
                    name,
                    problem: ConfigOperationProblem::NotAList {
                        list_config: LIST_CONFIG,
                    },
                })
            }
            other => {
                return Err(BrokerError::InvalidConfigOperation {
                    name,
                    problem: ConfigOperationProblem::UnknownOperation { operation: other },
                })
            }
        };
        changes.push((name, change));
    }
    Ok(changes)
}

/// `current`'s comma-separated items with `items`' appended (each once)
/// or removed; the result is validated by the alter like any value.
fn edit_list(current: &str, items: &str, append: bool) -> String {
    let mut list: Vec<&str> = current
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    for item in items.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if append {
            if !list.contains(&item) {
                list.push(item);
            }
        } else {
            list.retain(|s| *s != item);
        }
    }
    list.join(",")
}
