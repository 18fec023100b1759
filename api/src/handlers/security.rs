//! ACLs in Confluent REST Proxy v3's shape and users in Redpanda's Admin
//! API shape (docs/SECURITY.md), over the broker's stores behind the
//! door: describing needs DESCRIBE on the cluster, changing ALTER on it
//! (403/40301 otherwise).
//!
//! * `GET /v3/clusters/{c}/acls?resource_type&resource_name&pattern_type&principal&host&operation&permission`:
//!   the ACLs every given filter matches (a missing one, or `ANY`,
//!   matches all; `pattern_type` also takes `MATCH`).
//! * `POST /v3/clusters/{c}/acls` with one ACL (every field): 201 and the
//!   ACL.
//! * `DELETE /v3/clusters/{c}/acls?...`: the ACLs the filter matched, now
//!   deleted (a filter is required: at least `resource_type`).
//! * `GET /v1/security/users`: the user names. `POST` with
//!   `{"username","password","algorithm"}`: 201, 409/40904 if the user
//!   exists. `PUT /v1/security/users/{u}` `{"password","algorithm"}`: the
//!   password replaced (404/40404 unknown). `DELETE`: 204.
//!
//! Names are upper case as Kafka spells them (`TOPIC`, `PREFIXED`,
//! `WRITE`, `ALLOW`), read in any case; a value that is none of them is
//! 40002 naming the field.

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::json as json_value;
use tidelog_broker::security::acl::{
    AclBinding, AclFilter, Host, Operation, PatternFilter, PatternType, Permission,
    ResourcePattern, ResourceType,
};
use tidelog_broker::security::scram::Mechanism;

use super::{json, ClusterPath};
use crate::error::ApiError;
use crate::extract::{json_body, ApiPath, ApiQuery};
use crate::state::AppState;

/// One ACL as the routes show it.
#[derive(Debug, Serialize)]
struct AclData<'a> {
    kind: &'static str,
    cluster_id: &'a str,
    resource_type: &'static str,
    resource_name: String,
    pattern_type: &'static str,
    principal: String,
    host: String,
    operation: &'static str,
    permission: &'static str,
}

fn acl_data(cluster_id: &str, acl: AclBinding) -> AclData<'_> {
    AclData {
        kind: "KafkaAcl",
        cluster_id,
        resource_type: acl.pattern.resource_type.name(),
        resource_name: acl.pattern.name,
        pattern_type: acl.pattern.pattern_type.name(),
        principal: acl.principal,
        host: acl.host.to_string(),
        operation: acl.operation.name(),
        permission: acl.permission.name(),
    }
}

fn bad(field: &str, value: &str, expected: &str) -> ApiError {
    ApiError::BadRequest {
        message: format!("{field} {value:?} is not one of {expected}"),
    }
}

/// A filter field: absent or `ANY` is `None`.
fn any_or<T>(
    query: &ApiQuery,
    field: &str,
    parse: fn(&str) -> Option<T>,
    expected: &str,
) -> Result<Option<T>, ApiError> {
    match query.get(field) {
        None => Ok(None),
        Some(v) if v.eq_ignore_ascii_case("ANY") => Ok(None),
        Some(v) => parse(&v.to_ascii_uppercase())
            .map(Some)
            .ok_or_else(|| bad(field, v, expected)),
    }
}

fn filter(query: &ApiQuery) -> Result<AclFilter, ApiError> {
    let host = match query.get("host") {
        None => None,
        Some(h) => Some(Host::parse(h).map_err(|e| ApiError::BadRequest {
            message: format!("host: {e}"),
        })?),
    };
    Ok(AclFilter {
        resource_type: any_or(
            query,
            "resource_type",
            ResourceType::parse,
            "TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ANY",
        )?,
        name: query.get("resource_name").map(str::to_owned),
        pattern: match query.get("pattern_type") {
            None => PatternFilter::Any,
            Some(v) => PatternFilter::parse(v)
                .ok_or_else(|| bad("pattern_type", v, "LITERAL, PREFIXED, MATCH, ANY"))?,
        },
        principal: query.get("principal").map(str::to_owned),
        host,
        operation: any_or(
            query,
            "operation",
            Operation::parse,
            "an ACL operation, ANY",
        )?,
        permission: any_or(query, "permission", Permission::parse, "ALLOW, DENY, ANY")?,
    })
}

/// `GET /v3/clusters/{c}/acls`
pub async fn list_acls(
    State(state): State<AppState>,
    _: ClusterPath,
    query: ApiQuery,
) -> Result<Response, ApiError> {
    let door = state.door()?;
    let acls = door.describe_acls(&filter(&query)?)?;
    let cluster_id = &state.settings().broker.cluster_id;
    let data: Vec<AclData<'_>> = acls.into_iter().map(|a| acl_data(cluster_id, a)).collect();
    json(
        StatusCode::OK,
        &json_value!({"kind": "KafkaAclList", "data": data}),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewAcl {
    resource_type: String,
    resource_name: String,
    pattern_type: String,
    principal: String,
    host: String,
    operation: String,
    permission: String,
}

/// `POST /v3/clusters/{c}/acls`
pub async fn create_acl(
    State(state): State<AppState>,
    _: ClusterPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    let new: NewAcl = json_body(&body)?;
    let upper = |s: &str| s.to_ascii_uppercase();
    let acl = AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::parse(&upper(&new.resource_type)).ok_or_else(|| {
                bad(
                    "resource_type",
                    &new.resource_type,
                    "TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID",
                )
            })?,
            name: new.resource_name,
            pattern_type: PatternType::parse(&upper(&new.pattern_type))
                .ok_or_else(|| bad("pattern_type", &new.pattern_type, "LITERAL, PREFIXED"))?,
        },
        principal: new.principal,
        host: Host::parse(&new.host).map_err(|e| ApiError::BadRequest {
            message: format!("host: {e}"),
        })?,
        operation: Operation::parse(&upper(&new.operation))
            .ok_or_else(|| bad("operation", &new.operation, "an ACL operation"))?,
        permission: Permission::parse(&upper(&new.permission))
            .ok_or_else(|| bad("permission", &new.permission, "ALLOW, DENY"))?,
    };
    let door = state.door()?;
    let created = door.create_acls(vec![acl.clone()]).await?;
    if let Some(Err(e)) = created.into_iter().next() {
        return Err(tidelog_broker::BrokerError::from(e).into());
    }
    let cluster_id = &state.settings().broker.cluster_id;
    json(StatusCode::CREATED, &acl_data(cluster_id, acl))
}

/// `DELETE /v3/clusters/{c}/acls`
pub async fn delete_acls(
    State(state): State<AppState>,
    _: ClusterPath,
    query: ApiQuery,
) -> Result<Response, ApiError> {
    if query.get("resource_type").is_none() {
        return Err(ApiError::BadRequest {
            message: "a delete needs a filter: at least resource_type (ANY for every type)".into(),
        });
    }
    let door = state.door()?;
    let deleted = door.delete_acls(vec![filter(&query)?]).await?;
    let cluster_id = &state.settings().broker.cluster_id;
    let data: Vec<AclData<'_>> = deleted
        .into_iter()
        .flatten()
        .map(|a| acl_data(cluster_id, a))
        .collect();
    json(
        StatusCode::OK,
        &json_value!({"kind": "KafkaAclList", "data": data}),
    )
}

/// `GET /v1/security/users`: the user names.
pub async fn list_users(State(state): State<AppState>) -> Result<Response, ApiError> {
    let users = state.door()?.list_users()?;
    let names: Vec<String> = users.into_iter().map(|(name, _)| name).collect();
    json(StatusCode::OK, &names)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewUser {
    username: String,
    password: String,
    #[serde(default = "default_algorithm")]
    algorithm: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewPassword {
    password: String,
    #[serde(default = "default_algorithm")]
    algorithm: String,
}

fn default_algorithm() -> String {
    Mechanism::Sha256.name().to_owned()
}

fn mechanism(algorithm: &str) -> Result<Mechanism, ApiError> {
    Mechanism::from_name(&algorithm.to_ascii_uppercase())
        .ok_or_else(|| bad("algorithm", algorithm, "SCRAM-SHA-256, SCRAM-SHA-512"))
}

/// `POST /v1/security/users`
pub async fn create_user(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    let new: NewUser = json_body(&body)?;
    let algorithm = mechanism(&new.algorithm)?;
    state
        .door()?
        .create_user(&new.username, new.password.into_bytes(), algorithm)
        .await?;
    json(
        StatusCode::CREATED,
        &json_value!({"username": new.username, "algorithm": algorithm.name()}),
    )
}

/// `PUT /v1/security/users/{username}`
pub async fn set_password(
    State(state): State<AppState>,
    ApiPath(user): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    let new: NewPassword = json_body(&body)?;
    let algorithm = mechanism(&new.algorithm)?;
    state
        .door()?
        .set_user_password(&user, new.password.into_bytes(), algorithm)
        .await?;
    json(
        StatusCode::OK,
        &json_value!({"username": user, "algorithm": algorithm.name()}),
    )
}

/// `DELETE /v1/security/users/{username}`
pub async fn delete_user(
    State(state): State<AppState>,
    ApiPath(user): ApiPath<String>,
) -> Result<Response, ApiError> {
    state.door()?.delete_user(&user).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
