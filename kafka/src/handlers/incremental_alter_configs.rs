//! IncrementalAlterConfigs (44): SET and DELETE of a topic's, a broker's
//! or a group's configs, all or nothing per resource (`configs::alter`).
//! APPEND and SUBTRACT work on the one list config, `cleanup.policy` of a
//! topic and `log.cleanup.policy` of a broker (items `compact` and
//! `delete`); on any other config they are INVALID_REQUEST, as Kafka
//! answers them for a non-list config.

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::admin::Gate;
use super::configs::{self, Asked};
use crate::context::Context;

pub async fn handle(
    ctx: &Context,
    gate: Gate,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let name = resource.resource_name.to_string();
        let outcome = configs::alter(
            ctx,
            gate,
            resource.resource_type,
            &name,
            request.validate_only,
            Asked::Incremental(resource.configs),
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
