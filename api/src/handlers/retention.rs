//! `POST /v3/clusters/{c}/retention`: run a CommitLog retention pass now.
//!
//! The store does the work (`Store::run_retention`, on the blocking pool: it
//! waits for the dispatcher, writes a checkpoint and unlinks files). This
//! handler only picks the trigger and shapes the answer.
//!
//! Decisions where API.md is silent:
//! * An empty body (or only whitespace) is `{"force": false}`; `"force":
//!   null` is the same. The content type is not checked: the body is tiny
//!   and always JSON.
//! * Unknown body fields are 42206, so a typo such as `"forse": true` does
//!   not silently run a normal pass.
//! * A non-forced pass deletes expired segments whatever the hour, or, with
//!   the disk above `disk_force_clean_ratio`, the oldest segments up to the
//!   per-pass limit (the store's rules, `retention.rs`). The answer's
//!   `reason` says which.
//! * The pass runs under the request's concurrency permit; passes are
//!   serialised inside the store, so two calls at once run one after the
//!   other and the second usually finds nothing left to delete.

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tidelog_broker::store::{PassOutcome, Trigger};

use super::{json, ClusterPath};
use crate::error::ApiError;
use crate::extract::json_body;
use crate::state::AppState;

/// The request body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetentionRequest {
    force: Option<bool>,
}

/// The answer: what the pass did.
#[derive(Debug, Serialize)]
struct RetentionAnswer {
    forced: bool,
    deleted_segments: usize,
    freed_bytes: u64,
    queue_files_deleted: usize,
    index_files_deleted: usize,
    /// The disk usage the pass saw when it started.
    disk_used_ratio: f64,
    /// Why the pass deleted (`null`: no trigger held).
    reason: Option<&'static str>,
}

impl RetentionAnswer {
    fn new(forced: bool, out: PassOutcome) -> Self {
        RetentionAnswer {
            forced,
            deleted_segments: out.deleted_segments,
            freed_bytes: out.freed_bytes,
            queue_files_deleted: out.queue_files_deleted,
            index_files_deleted: out.index_files_deleted,
            disk_used_ratio: out.disk_used_ratio,
            reason: out.reason,
        }
    }
}

/// `force` of the body; an empty body is not forced.
fn parse_force(body: &[u8]) -> Result<bool, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(false);
    }
    let request: RetentionRequest = json_body(body)?;
    Ok(request.force.unwrap_or(false))
}

/// `POST /v3/clusters/{c}/retention`
pub async fn run(
    State(state): State<AppState>,
    _: ClusterPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let force = parse_force(&body?)?;
    let door = state.door()?;
    let trigger = if force {
        Trigger::ManualForce
    } else {
        Trigger::Manual
    };
    let outcome = door.run_retention(trigger).await?;
    tracing::info!(
        force,
        deleted_segments = outcome.deleted_segments,
        freed_bytes = outcome.freed_bytes,
        reason = outcome.reason.unwrap_or("no trigger held"),
        "retention pass requested through the API"
    );
    json(StatusCode::OK, &RetentionAnswer::new(force, outcome))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn force_comes_from_an_optional_body() {
        for (body, force) in [
            (&b""[..], false),
            (b"  \n", false),
            (b"{}", false),
            (b"{\"force\":null}", false),
            (b"{\"force\":false}", false),
            (b"{\"force\":true}", true),
        ] {
            assert_eq!(
                parse_force(body).unwrap(),
                force,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        for bad in [&b"{"[..], b"[]", b"{\"force\":1}", b"{\"forse\":true}"] {
            assert_eq!(
                parse_force(bad).unwrap_err().error_code(),
                42206,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
