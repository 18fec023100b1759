//! The route handlers, one file per area of API.md.
//!
//! Every handler returns `Result<Response, ApiError>`; the error side is
//! turned into its status and body in one place (`error.rs`). Blocking store
//! calls run in `spawn_blocking`; no lock is held across an `.await`.

pub mod compaction;
pub mod fetch;
pub mod groups;
pub mod produce;
pub mod retention;
pub mod status;
pub mod topics;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::ApiError;
use crate::records::V2_RESPONSE;
use crate::state::AppState;

/// 404/40400 unless `cluster` is ours (there is one cluster and its id is
/// the configured `cluster_id`).
pub(crate) fn check_cluster(state: &AppState, cluster: &str) -> Result<(), ApiError> {
    let ours = &state.settings().cluster_id;
    if cluster == ours {
        Ok(())
    } else {
        Err(ApiError::NotFound {
            message: format!("cluster {cluster:?} not found; this cluster is {ours:?}"),
        })
    }
}

/// `body` as JSON with `content_type`.
fn json_with(
    status: StatusCode,
    content_type: &'static str,
    body: &impl Serialize,
) -> Result<Response, ApiError> {
    let bytes = serde_json::to_vec(body).map_err(|e| ApiError::Internal {
        message: format!("cannot encode the answer: {e}"),
    })?;
    Ok(bytes_with(status, content_type, bytes))
}

/// Already-encoded JSON with `content_type`.
fn bytes_with(status: StatusCode, content_type: &'static str, bytes: Vec<u8>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        bytes,
    )
        .into_response()
}

/// A v2 answer (`application/vnd.kafka.v2+json`).
pub(crate) fn v2_json(status: StatusCode, body: &impl Serialize) -> Result<Response, ApiError> {
    json_with(status, V2_RESPONSE, body)
}

/// A v2 answer already encoded as JSON.
pub(crate) fn v2_bytes(status: StatusCode, bytes: Vec<u8>) -> Response {
    bytes_with(status, V2_RESPONSE, bytes)
}

/// A v3 or ext answer (`application/json`).
pub(crate) fn json(status: StatusCode, body: &impl Serialize) -> Result<Response, ApiError> {
    json_with(status, "application/json", body)
}

/// Runs a produce or fetch and counts it in `metrics`: the answer, the
/// records and payload bytes it moved (on success), and its latency.
pub(crate) async fn timed(
    metrics: &crate::metrics::RequestMetrics,
    work: impl std::future::Future<Output = Result<(Response, u64, u64), ApiError>>,
) -> Response {
    let started = std::time::Instant::now();
    let result = work.await;
    match result {
        Ok((response, records, bytes)) => {
            metrics.finish(true, records, bytes, started.elapsed());
            response
        }
        Err(e) => {
            metrics.finish(false, 0, 0, started.elapsed());
            e.into_response()
        }
    }
}

/// Runs a blocking closure on tokio's blocking pool.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, ApiError>
where
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f).await?
}
