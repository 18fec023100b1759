//! The operator's consumer group routes (ext, API.md "Groups and time
//! lookups"): `GET /consumer-groups`, `GET` and `DELETE
//! /consumer-groups/{group}`, `POST /consumer-groups/{group}/offsets:reset`.
//! What a group is, its name rule, and when a reset or delete is refused,
//! are the broker's (`broker/src/group_admin.rs`); this decodes and
//! renders.
//!
//! Decisions where API.md is silent:
//! * `protocol` is the kind of the group's members (`http`, `kafka`, or
//!   null without members) in both list and describe; describe adds
//!   `selected_protocol` (the assignor of an HTTP group, the protocol a
//!   Kafka group agreed on) and each member's `instance_id`.
//! * A reset body that is not JSON, has unknown fields or the wrong types,
//!   or a `to` that is none of the four forms is 42206; bad values (an
//!   unknown `to` word, a negative or too large offset or timestamp, a
//!   partition that is not a number, `partitions` without `topic`) are
//!   40002. It answers `{"offsets":[...]}` in the shape of `GET
//!   /consumer-groups/{g}/offsets`. A reset is a write: a full disk
//!   refuses it with 507.
//! * Reset and delete need the admin token when one is set (the router's
//!   rule for mutating operator calls); list and describe do not.

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tidelog_broker::group_admin::{
    GroupDescription, GroupSummary, MemberDescription, OffsetLag, ResetScope, ResetTarget,
};

use super::json;
use crate::error::ApiError;
use crate::extract::{json_body, ApiPath};
use crate::groups::CommittedOffset;
use crate::names;
use crate::state::AppState;

#[derive(Debug, Serialize)]
struct ListAnswer {
    groups: Vec<ListedGroup>,
}

#[derive(Debug, Serialize)]
struct ListedGroup {
    group: String,
    state: &'static str,
    protocol: Option<&'static str>,
    members: usize,
}

#[derive(Debug, Serialize)]
struct DescribeAnswer {
    group: String,
    state: &'static str,
    generation: u32,
    protocol: Option<&'static str>,
    selected_protocol: Option<String>,
    members: Vec<MemberAnswer>,
    offsets: Vec<OffsetAnswer>,
}

#[derive(Debug, Serialize)]
struct MemberAnswer {
    member_id: String,
    instance_id: Option<String>,
    client_id: String,
    host: String,
    assignments: Vec<PartitionAnswer>,
}

#[derive(Debug, Serialize)]
struct PartitionAnswer {
    topic: String,
    partition: u32,
}

#[derive(Debug, Serialize)]
struct OffsetAnswer {
    topic: String,
    partition: u32,
    offset: u64,
    metadata: String,
    end_offset: Option<u64>,
    lag: Option<u64>,
}

#[derive(Debug, Serialize)]
struct OffsetsAnswer {
    offsets: Vec<CommittedOffset>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetRequest {
    #[serde(default)]
    topic: Option<String>,
    #[serde(default)]
    partitions: Option<Vec<serde_json::Number>>,
    to: Value,
}

/// `GET /consumer-groups`
pub async fn list(State(state): State<AppState>) -> Result<Response, ApiError> {
    let door = state.door()?;
    let groups = door
        .list_groups()
        .into_iter()
        .map(|g: GroupSummary| ListedGroup {
            state: g.state.name(),
            protocol: g.kind.map(|k| k.name()),
            members: g.members,
            group: g.group,
        })
        .collect();
    json(StatusCode::OK, &ListAnswer { groups })
}

/// `GET /consumer-groups/{group}`
pub async fn describe(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
) -> Result<Response, ApiError> {
    let door = state.door()?;
    let d: GroupDescription = door.describe_group(&group)?;
    let answer = DescribeAnswer {
        group: d.group,
        state: d.state.name(),
        generation: d.generation,
        protocol: d.kind.map(|k| k.name()),
        selected_protocol: d.selected_protocol,
        members: d.members.into_iter().map(member_answer).collect(),
        offsets: d.offsets.into_iter().map(offset_answer).collect(),
    };
    json(StatusCode::OK, &answer)
}

fn member_answer(m: MemberDescription) -> MemberAnswer {
    MemberAnswer {
        member_id: m.member_id,
        instance_id: m.instance_id,
        client_id: m.client_id,
        host: m.host,
        assignments: m
            .assignments
            .into_iter()
            .map(|tp| PartitionAnswer {
                topic: tp.topic,
                partition: tp.partition,
            })
            .collect(),
    }
}

fn offset_answer(o: OffsetLag) -> OffsetAnswer {
    OffsetAnswer {
        topic: o.topic,
        partition: o.partition,
        offset: o.offset,
        metadata: o.metadata,
        end_offset: o.end_offset,
        lag: o.lag,
    }
}

/// `POST /consumer-groups/{group}/offsets:reset`
pub async fn reset(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    let request: ResetRequest = json_body(&body)?;
    let to = reset_target(&request.to)?;
    let scope = reset_scope(request.topic, request.partitions)?;
    let door = state.door()?;
    let offsets = door.reset_offsets(&group, scope, to).await?;
    json(StatusCode::OK, &OffsetsAnswer { offsets })
}

/// `DELETE /consumer-groups/{group}`
pub async fn delete(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
) -> Result<Response, ApiError> {
    state.door()?.delete_group(&group).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

const TO_FORMS: &str = r#""beginning", "end", {"offset": N} or {"timestamp": ms}"#;

/// `to` of a reset body (module doc: which mistakes are 42206, which
/// 40002).
fn reset_target(to: &Value) -> Result<ResetTarget, ApiError> {
    let malformed = || ApiError::PayloadMalformed {
        message: format!("request body: to: must be {TO_FORMS}"),
    };
    match to {
        Value::String(word) => match word.as_str() {
            "beginning" => Ok(ResetTarget::Beginning),
            "end" => Ok(ResetTarget::End),
            other => Err(ApiError::BadRequest {
                message: format!("to {other:?} is not one of {TO_FORMS}"),
            }),
        },
        Value::Object(form) if form.len() == 1 => match form.iter().next() {
            Some((name, Value::Number(n))) if name == "offset" => n
                .as_u64()
                .filter(|o| *o <= names::OFFSET_MAX)
                .map(ResetTarget::Offset)
                .ok_or_else(|| ApiError::BadRequest {
                    message: format!(
                        "to.offset {n} is not an integer in [0, {}]",
                        names::OFFSET_MAX
                    ),
                }),
            Some((name, Value::Number(n))) if name == "timestamp" => n
                .as_i64()
                .filter(|ms| *ms >= 0)
                .map(ResetTarget::Timestamp)
                .ok_or_else(|| ApiError::BadRequest {
                    message: format!(
                        "to.timestamp {n} is not an integer in [0, {}] (ms since the epoch)",
                        i64::MAX
                    ),
                }),
            _ => Err(malformed()),
        },
        _ => Err(malformed()),
    }
}

/// The scope of a reset body: the whole group, a topic, or some of its
/// partitions.
fn reset_scope(
    topic: Option<String>,
    partitions: Option<Vec<serde_json::Number>>,
) -> Result<ResetScope, ApiError> {
    match (topic, partitions) {
        (None, None) => Ok(ResetScope::Group),
        (None, Some(_)) => Err(ApiError::BadRequest {
            message: "partitions needs topic: name the topic the partitions are of".into(),
        }),
        (Some(topic), None) => Ok(ResetScope::Topic(topic)),
        (Some(topic), Some(list)) => {
            let partitions = list
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    n.as_u64()
                        .and_then(|p| u32::try_from(p).ok())
                        .ok_or_else(|| ApiError::BadRequest {
                            message: format!("partitions[{i}] {n} is not a partition number"),
                        })
                })
                .collect::<Result<_, _>>()?;
            Ok(ResetScope::Partitions { topic, partitions })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reset_targets_and_their_codes() {
        let ok = [
            (json!("beginning"), ResetTarget::Beginning),
            (json!("end"), ResetTarget::End),
            (json!({"offset": 7}), ResetTarget::Offset(7)),
            (
                json!({"offset": names::OFFSET_MAX}),
                ResetTarget::Offset(names::OFFSET_MAX),
            ),
            (json!({"timestamp": 0}), ResetTarget::Timestamp(0)),
        ];
        for (to, want) in ok {
            assert_eq!(reset_target(&to).unwrap(), want, "{to}");
        }
        let bad = [
            (json!("middle"), 40002),
            (json!({"offset": -1}), 40002),
            (json!({"offset": names::OFFSET_MAX + 1}), 40002),
            (json!({"offset": 1.5}), 40002),
            (json!({"timestamp": -1}), 40002),
            (json!({"offset": "7"}), 42206),
            (json!({"offset": 1, "timestamp": 2}), 42206),
            (json!({"position": 1}), 42206),
            (json!({}), 42206),
            (json!(7), 42206),
            (json!(null), 42206),
            (json!(["end"]), 42206),
        ];
        for (to, code) in bad {
            assert_eq!(reset_target(&to).unwrap_err().error_code(), code, "{to}");
        }
    }

    #[test]
    fn reset_scopes() {
        let n = |v: i64| serde_json::Number::from(v);
        assert_eq!(reset_scope(None, None).unwrap(), ResetScope::Group);
        assert_eq!(
            reset_scope(Some("t".into()), None).unwrap(),
            ResetScope::Topic("t".into())
        );
        assert_eq!(
            reset_scope(Some("t".into()), Some(vec![n(2), n(0)])).unwrap(),
            ResetScope::Partitions {
                topic: "t".into(),
                partitions: vec![2, 0]
            }
        );
        for (topic, partitions) in [
            (None, vec![n(0)]),
            (Some("t".to_string()), vec![n(-1)]),
            (Some("t".to_string()), vec![n(1 << 40)]),
        ] {
            let err = reset_scope(topic, Some(partitions)).unwrap_err();
            assert_eq!(err.error_code(), 40002, "{err}");
        }
    }
}
