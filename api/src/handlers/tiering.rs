//! `POST /v3/clusters/{c}/topics/{t}/tiering:upload` (ext): run the
//! tiered-storage uploader's round for one topic now, instead of waiting
//! up to `tiered.upload_interval_ms` (tests, operators before a planned
//! shutdown). The broker does the work (`Broker::tiering_round`, which
//! waits for a round in progress); this handler only shapes the answer.
//!
//! Decisions where API.md is silent:
//! * A topic without `remote.storage.enable` answers 200 with no
//!   partitions; a server without a remote tier 40002.
//! * A partition that failed (the object store down) is 200 with its
//!   `error` set: the round went on with the others, and the partition
//!   retries at the next round (its records stay held locally).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{json, TopicPath};
use crate::error::ApiError;
use crate::state::AppState;

/// `POST /v3/clusters/{c}/topics/{t}/tiering:upload`
pub async fn upload(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
) -> Result<Response, ApiError> {
    let door = state.door()?;
    let report = door.tiering_round(Some(&topic)).await?;
    tracing::info!(
        topic,
        partitions = report.partitions.len(),
        uploaded = report
            .partitions
            .iter()
            .map(|p| p.uploaded_records)
            .sum::<u64>(),
        "tiering round requested through the API"
    );
    json(StatusCode::OK, &report)
}
