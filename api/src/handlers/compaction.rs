//! `POST` and `GET /v3/clusters/{c}/topics/{t}/compaction`: ask the
//! LogCleaner for a pass over a compact topic now, and see how its
//! partitions stand.
//!
//! The cleaner does the work on its own threads (`tidelog-cleaner`); this
//! handler only asks and reports. A request marks every partition of the
//! topic as forced (cleaned next, whatever its dirty ratio), after rolling
//! the active segments first with `roll_active` (so everything written so
//! far becomes cleanable; the active segment is never cleaned).
//!
//! Decisions where API.md is silent:
//! * An empty body (or only whitespace) is `{}`: no wait, no roll. Unknown
//!   fields are 42206, so a typo such as `"wiat": true` does not silently
//!   return at once.
//! * A topic whose policy does not compact is 400/40002 on both routes.
//! * Without `wait`: 202 `{"task_id": "<topic>:<n>", "partitions": [...]}`;
//!   `n` counts requests since the server started. The id names the request
//!   in logs; progress is read with `GET`.
//! * With `wait`: the answer comes when every partition has finished a pass
//!   started after the request (or was marked uncleanable), or after
//!   [`WAIT_TIMEOUT`] (60 s), whichever is first: 200 with each partition's
//!   `last_run`, `completed` and `state`, and `timed_out` true if the time
//!   ran out first. Server shutdown ends the wait with 503/50301.
//! * A pass covers what the offset map holds (`cleaner.dedupe_buffer_bytes`
//!   / threads); a log with more distinct keys is finished by later passes
//!   (`last_run.partial`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tidelog_broker::store::{PartitionStatus, RunStats};

use super::{json, TopicPath};
use crate::error::ApiError;
use crate::extract::json_body;
use crate::state::AppState;

/// Longest a `wait` request blocks before answering with what it has.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// Numbers the requests of this server's life, for `task_id`.
static REQUESTS: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactionRequest {
    wait: Option<bool>,
    roll_active: Option<bool>,
}

/// `wait` and `roll_active` of the body; an empty body is neither.
fn parse_request(body: &[u8]) -> Result<(bool, bool), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((false, false));
    }
    let r: CompactionRequest = json_body(body)?;
    Ok((r.wait.unwrap_or(false), r.roll_active.unwrap_or(false)))
}

/// API.md's `last_run`, plus a few fields of the cleaner's own.
#[derive(Debug, Serialize)]
struct LastRun {
    bytes_read: u64,
    bytes_written: u64,
    records_kept: u64,
    records_removed: u64,
    duration_ms: u64,
    map_utilization: f64,
    /// Distinct keys the offset map held.
    keys: u64,
    /// The map filled before the dirty range ended; later passes continue.
    partial: bool,
    segments_cleaned: u64,
    /// The cleaner checkpoint after the pass.
    end_offset: u64,
}

impl From<&RunStats> for LastRun {
    fn from(s: &RunStats) -> Self {
        LastRun {
            bytes_read: s.bytes_read,
            bytes_written: s.bytes_written,
            records_kept: s.records_kept,
            records_removed: s.records_removed,
            duration_ms: s.duration_ms,
            map_utilization: s.map_utilization,
            keys: s.keys,
            partial: s.partial,
            segments_cleaned: s.segments_cleaned,
            end_offset: s.end_offset,
        }
    }
}

#[derive(Debug, Serialize)]
struct PartitionAnswer {
    partition: u32,
    /// `idle`, `in_progress`, `paused` or `uncleanable: <reason>`.
    state: String,
    dirty_ratio: f64,
    checkpoint_offset: Option<u64>,
    last_run: Option<LastRun>,
    /// Passes finished since the server started.
    runs: u64,
}

impl PartitionAnswer {
    fn new(partition: u32, status: Option<&PartitionStatus>) -> Self {
        match status {
            Some(s) => PartitionAnswer {
                partition,
                state: s.state.to_string(),
                dirty_ratio: s.dirty_ratio,
                checkpoint_offset: s.checkpoint_offset,
                last_run: s.last_run.as_ref().map(LastRun::from),
                runs: s.runs,
            },
            // No compacted log yet: nothing written, nothing to clean.
            None => PartitionAnswer {
                partition,
                state: "idle".into(),
                dirty_ratio: 0.0,
                checkpoint_offset: None,
                last_run: None,
                runs: 0,
            },
        }
    }
}

#[derive(Debug, Serialize)]
struct WaitedPartition {
    partition: u32,
    /// A pass started after the request finished (or the partition was
    /// marked uncleanable, see `state`).
    completed: bool,
    state: String,
    last_run: Option<LastRun>,
}

/// `POST /v3/clusters/{c}/topics/{t}/compaction`
pub async fn request(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (wait, roll_active) = parse_request(&body?)?;
    let ticket = state.door()?.compact(&topic, roll_active).await?;
    let topic = Arc::clone(ticket.topic());
    let task_id = format!(
        "{}:{}",
        topic.name,
        REQUESTS.fetch_add(1, Ordering::Relaxed) + 1
    );
    tracing::info!(%task_id, wait, roll_active, "compaction requested through the API");
    let partitions = ticket.partitions();
    if !wait {
        return json(
            StatusCode::ACCEPTED,
            &serde_json::json!({"task_id": task_id, "partitions": partitions}),
        );
    }
    // The ticket holds the cleaner only, not the store: shutdown stops
    // the cleaner, which ends the wait.
    let mut shutdown = state.shutdown_signal();
    let waited = tokio::select! {
        w = ticket.wait(WAIT_TIMEOUT) => w?,
        _ = shutdown.wait_for(|stopping| *stopping) => {
            return Err(ApiError::NotReady {
                message: format!("the server is shutting down; compaction {task_id} was requested but not waited for"),
            })
        }
    };
    let answers: Vec<WaitedPartition> = waited
        .iter()
        .map(|w| WaitedPartition {
            partition: w.partition,
            completed: w.completed,
            state: w
                .status
                .as_ref()
                .map_or_else(|| "idle".into(), |s| s.state.to_string()),
            last_run: w
                .status
                .as_ref()
                .and_then(|s| s.last_run.as_ref())
                .map(LastRun::from),
        })
        .collect();
    let timed_out = answers.iter().any(|a| !a.completed);
    json(
        StatusCode::OK,
        &serde_json::json!({"task_id": task_id, "timed_out": timed_out, "partitions": answers}),
    )
}

/// `GET /v3/clusters/{c}/topics/{t}/compaction`
pub async fn status(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
) -> Result<Response, ApiError> {
    let (topic, statuses) = state.door()?.compaction_status(&topic).await?;
    let partitions: Vec<PartitionAnswer> = statuses
        .iter()
        .enumerate()
        .map(|(p, s)| PartitionAnswer::new(p as u32, s.as_ref()))
        .collect();
    json(
        StatusCode::OK,
        &serde_json::json!({"topic_name": &*topic.name, "partitions": partitions}),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn options_come_from_an_optional_body() {
        for (body, want) in [
            (&b""[..], (false, false)),
            (b" \n", (false, false)),
            (b"{}", (false, false)),
            (b"{\"wait\":true}", (true, false)),
            (b"{\"roll_active\":true,\"wait\":null}", (false, true)),
            (b"{\"wait\":true,\"roll_active\":true}", (true, true)),
        ] {
            assert_eq!(
                parse_request(body).unwrap(),
                want,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        for bad in [&b"{"[..], b"[]", b"{\"wait\":1}", b"{\"wiat\":true}"] {
            assert_eq!(
                parse_request(bad).unwrap_err().error_code(),
                42206,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
