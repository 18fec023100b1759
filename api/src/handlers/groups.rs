//! `POST` and `GET /consumer-groups/{group}/offsets` (ext).
//!
//! A commit is validated whole (group name, at most
//! `http.max_records_per_request` entries, every topic and partition,
//! offsets in [0, 2^63 − 1], metadata at most 4096 bytes), then committed
//! by the broker (`Broker::commit_offsets`: appended to
//! `__consumer_offsets` as one batch, then applied in memory; see
//! `broker/src/groups.rs` for why concurrent commits cannot disagree with
//! the log).
//!
//! Decisions where API.md is silent: a commit body that is not JSON or has
//! the wrong shape is 42206, like a produce body; bad values are 40002. An
//! empty `offsets` list is 204 and writes nothing. Committing is not an
//! admin call, so it needs no token; it is a write, so a full disk refuses
//! it with 507. `GET` of an unknown topic filter is 40002 for a bad name
//! and an empty list otherwise (offsets of deleted topics stay visible).

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::json;
use crate::error::ApiError;
use crate::extract::{json_body, ApiPath, ApiQuery};
use crate::groups::{CommitValue, CommittedOffset, OffsetCommit};
use crate::names;
use crate::state::AppState;
use tidelog_broker::groups::Committer;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitRequest {
    offsets: Vec<CommitEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitEntry {
    topic: String,
    partition: serde_json::Number,
    offset: serde_json::Number,
    #[serde(default)]
    metadata: Option<String>,
}

#[derive(Debug, Serialize)]
struct OffsetsAnswer {
    offsets: Vec<CommittedOffset>,
}

pub async fn commit(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    // The group and topic names, topics, partitions and metadata are the
    // broker's to check (`Broker::commit_offsets`); this decodes.
    let body = body?;
    let request: CommitRequest = json_body(&body)?;
    // One record per entry, appended at once: the bound of a produce.
    let max_entries = state.settings().max_records_per_request;
    if request.offsets.len() > max_entries {
        return Err(ApiError::BadRequest {
            message: format!(
                "offsets has {} entries; at most {max_entries} are allowed in one commit (http.max_records_per_request)",
                request.offsets.len()
            ),
        });
    }
    let door = state.door()?;
    let mut commits = Vec::with_capacity(request.offsets.len());
    for (i, e) in request.offsets.into_iter().enumerate() {
        let partition = e
            .partition
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| ApiError::BadRequest {
                message: format!(
                    "offsets[{i}].partition {} is not a partition number",
                    e.partition
                ),
            })?;
        let offset = e
            .offset
            .as_u64()
            .filter(|o| *o <= names::OFFSET_MAX)
            .ok_or_else(|| ApiError::BadRequest {
                message: format!(
                    "offsets[{i}].offset {} is not an integer in [0, {}]",
                    e.offset,
                    names::OFFSET_MAX
                ),
            })?;
        let metadata = e.metadata.unwrap_or_default();
        commits.push(OffsetCommit {
            topic: e.topic,
            partition,
            value: CommitValue {
                offset,
                metadata,
                ..Default::default()
            },
        });
    }
    if commits.is_empty() {
        // Nothing appended: the broker only checks the group name.
        door.commit(group, commits, Committer::Stateless).await?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    door.commit(group, commits, Committer::Stateless).await?;
    state
        .shared()
        .metrics
        .offset_commits
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn get(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    query: ApiQuery,
) -> Result<Response, ApiError> {
    names::validate_group_name(&group)?;
    let topic = query.get("topic");
    if let Some(topic) = topic {
        names::validate_topic_name(topic)?;
    }
    let door = state.door()?;
    let offsets = door
        .committed_offsets(&group, topic)?
        .ok_or_else(|| ApiError::unknown_consumer_group(&group))?;
    json(StatusCode::OK, &OffsetsAnswer { offsets })
}
