//! AlterConfigs (33), the older alter kafkajs uses: a resource's configs
//! are replaced by the request's. A topic override, broker config or group
//! config the request does not name is removed, a named one is set (a null
//! value removes it), all or nothing per resource (`configs::alter`).

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};

use super::admin::Gate;
use super::configs::{self, Asked};
use crate::context::Context;

pub async fn handle(
    ctx: &Context,
    gate: Gate,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let name = resource.resource_name.to_string();
        let named: Vec<(String, Option<String>)> = resource
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect();
        let outcome = configs::alter(
            ctx,
            gate,
            resource.resource_type,
            &name,
            request.validate_only,
            Asked::Replace(named),
        )
        .await;
        let response = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name);
        let (code, message) = configs::error_parts(outcome);
        responses.push(response.with_error_code(code).with_error_message(message));
    }
    AlterConfigsResponse::default().with_responses(responses)
}
