//! DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), as Kafka's
//! authorizer serves them (the security contract): the broker's ACL store
//! behind the door, which checks DESCRIBE (describe) or ALTER (create,
//! delete) on the cluster and answers CLUSTER_AUTHORIZATION_FAILED
//! otherwise.
//!
//! Invariants:
//! * Codes are Kafka's (`tidelog_security::acl`'s enums carry them): a
//!   filter's ANY (1) is "every value", UNKNOWN (0) or a code tidelog
//!   does not know is INVALID_REQUEST for that filter or creation alone.
//! * A creation is answered on its own: an invalid one (no name, a
//!   principal that is not `User:<name>`, a host that is not `*` or an
//!   IP, a pattern of ANY or MATCH) is INVALID_REQUEST and the others are
//!   created. A change is durable before it is answered.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::security::acl::{
    AclBinding, AclFilter, Host, Operation, PatternFilter, PatternType, Permission,
    ResourcePattern, ResourceType,
};

use super::NOT_READY;
use crate::context::Context;
use crate::error::broker_code;

/// Kafka's ANY, in every ACL enum.
const ANY: i8 = 1;
const INVALID_REQUEST: i16 = ResponseError::InvalidRequest.code();

/// A filter field: ANY is `None`, a known code `Some`, anything else
/// refused.
fn filter_code<T>(code: i8, from_code: fn(i8) -> Option<T>) -> Result<Option<T>, ()> {
    if code == ANY {
        return Ok(None);
    }
    from_code(code).map(Some).ok_or(())
}

/// A filter from Kafka's fields, or why it is refused.
fn filter(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, String> {
    let host = match host {
        None => None,
        Some(h) => Some(Host::parse(h.as_str()).map_err(|e| e.to_string())?),
    };
    Ok(AclFilter {
        resource_type: filter_code(resource_type, ResourceType::from_code)
            .map_err(|()| format!("resource type {resource_type} is unknown"))?,
        name: name.map(|n| n.as_str().to_owned()),
        pattern: PatternFilter::from_code(pattern_type)
            .ok_or_else(|| format!("pattern type {pattern_type} is unknown"))?,
        principal: principal.map(|p| p.as_str().to_owned()),
        host,
        operation: filter_code(operation, Operation::from_code)
            .map_err(|()| format!("operation {operation} is unknown"))?,
        permission: filter_code(permission, Permission::from_code)
            .map_err(|()| format!("permission type {permission} is unknown"))?,
    })
}

pub fn describe(ctx: &Context, request: DescribeAclsRequest) -> DescribeAclsResponse {
    let answer = DescribeAclsResponse::default();
    let Some(door) = ctx.door() else {
        return answer.with_error_code(NOT_READY);
    };
    let asked = filter(
        request.resource_type_filter,
        request.resource_name_filter.as_ref(),
        request.pattern_type_filter,
        request.principal_filter.as_ref(),
        request.host_filter.as_ref(),
        request.operation,
        request.permission_type,
    );
    let asked = match asked {
        Ok(f) => f,
        Err(why) => {
            return answer
                .with_error_code(INVALID_REQUEST)
                .with_error_message(Some(StrBytes::from_string(why)))
        }
    };
    let acls = match door.describe_acls(&asked) {
        Ok(acls) => acls,
        Err(e) => {
            return answer
                .with_error_code(broker_code(&e))
                .with_error_message(Some(StrBytes::from_string(e.to_string())))
        }
    };
    // Grouped by resource pattern, as Kafka answers (the store's order
    // keeps a pattern's ACLs together).
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for acl in acls {
        let description = AclDescription::default()
            .with_principal(StrBytes::from_string(acl.principal.clone()))
            .with_host(StrBytes::from_string(acl.host.to_string()))
            .with_operation(acl.operation.code())
            .with_permission_type(acl.permission.code());
        let p = &acl.pattern;
        let same = resources.last().is_some_and(|r| {
            r.resource_type == p.resource_type.code()
                && r.resource_name.as_str() == p.name
                && r.pattern_type == p.pattern_type.code()
        });
        if !same {
            resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(p.resource_type.code())
                    .with_resource_name(StrBytes::from_string(p.name.clone()))
                    .with_pattern_type(p.pattern_type.code()),
            );
        }
        if let Some(last) = resources.last_mut() {
            last.acls.push(description);
        }
    }
    answer.with_resources(resources)
}

pub async fn create(ctx: &Context, request: CreateAclsRequest) -> CreateAclsResponse {
    let count = request.creations.len();
    let refused_all = |code: i16, message: String| {
        let result = AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)));
        CreateAclsResponse::default().with_results(vec![result; count])
    };
    let Some(door) = ctx.door() else {
        return refused_all(NOT_READY, "the broker is recovering".into());
    };
    // Each creation is a binding or why it is not one; the valid ones go
    // to the store together, answered back in the request's order.
    let parsed: Vec<Result<AclBinding, String>> = request
        .creations
        .into_iter()
        .map(|c| {
            let host = Host::parse(c.host.as_str()).map_err(|e| e.to_string())?;
            let acl = AclBinding {
                pattern: ResourcePattern {
                    resource_type: ResourceType::from_code(c.resource_type)
                        .ok_or_else(|| format!("resource type {} is not one", c.resource_type))?,
                    name: c.resource_name.as_str().to_owned(),
                    pattern_type: PatternType::from_code(c.resource_pattern_type).ok_or_else(
                        || {
                            format!(
                                "pattern type {} is not LITERAL (3) or PREFIXED (4)",
                                c.resource_pattern_type
                            )
                        },
                    )?,
                },
                principal: c.principal.as_str().to_owned(),
                host,
                operation: Operation::from_code(c.operation)
                    .ok_or_else(|| format!("operation {} is not one", c.operation))?,
                permission: Permission::from_code(c.permission_type).ok_or_else(|| {
                    format!("permission type {} is not DENY or ALLOW", c.permission_type)
                })?,
            };
            acl.validate().map_err(|e| e.to_string())?;
            Ok(acl)
        })
        .collect();
    let valid: Vec<AclBinding> = parsed.iter().filter_map(|p| p.clone().ok()).collect();
    let mut created = match door.create_acls(valid).await {
        Ok(created) => created.into_iter(),
        Err(e) => return refused_all(broker_code(&e), e.to_string()),
    };
    let results = parsed
        .into_iter()
        .map(|p| {
            let outcome = match p {
                Err(why) => Err((INVALID_REQUEST, why)),
                Ok(_) => match created.next() {
                    Some(Ok(())) => Ok(()),
                    Some(Err(e)) => Err((INVALID_REQUEST, e.to_string())),
                    None => Err((
                        ResponseError::UnknownServerError.code(),
                        "the store answered fewer creations than it was given".into(),
                    )),
                },
            };
            match outcome {
                Ok(()) => AclCreationResult::default(),
                Err((code, message)) => AclCreationResult::default()
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

pub async fn delete(ctx: &Context, request: DeleteAclsRequest) -> DeleteAclsResponse {
    let count = request.filters.len();
    let refused_all = |code: i16, message: String| {
        let result = DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)));
        DeleteAclsResponse::default().with_filter_results(vec![result; count])
    };
    let Some(door) = ctx.door() else {
        return refused_all(NOT_READY, "the broker is recovering".into());
    };
    let parsed: Vec<Result<AclFilter, String>> = request
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclFilter> = parsed.iter().filter_map(|p| p.clone().ok()).collect();
    let mut deleted = match door.delete_acls(valid).await {
        Ok(deleted) => deleted.into_iter(),
        Err(e) => return refused_all(broker_code(&e), e.to_string()),
    };
    let results = parsed
        .into_iter()
        .map(|p| match p {
            Err(why) => DeleteAclsFilterResult::default()
                .with_error_code(INVALID_REQUEST)
                .with_error_message(Some(StrBytes::from_string(why))),
            Ok(_) => {
                let matching = deleted
                    .next()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|acl| {
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(acl.pattern.resource_type.code())
                            .with_resource_name(StrBytes::from_string(acl.pattern.name))
                            .with_pattern_type(acl.pattern.pattern_type.code())
                            .with_principal(StrBytes::from_string(acl.principal))
                            .with_host(StrBytes::from_string(acl.host.to_string()))
                            .with_operation(acl.operation.code())
                            .with_permission_type(acl.permission.code())
                    })
                    .collect();
                DeleteAclsFilterResult::default().with_matching_acls(matching)
            }
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
