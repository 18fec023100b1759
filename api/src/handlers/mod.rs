//! The route handlers, one file per area of API.md.
//!
//! Every handler returns `Result<Response, ApiError>`; the error side is
//! turned into its status and body in one place (`error.rs`). Broker work
//! goes through the broker's door, which decides where it runs; no lock
//! is held across an `.await`.

pub mod broker_configs;
pub mod cluster;
pub mod compaction;
pub mod console;
pub mod consumers;
pub mod fetch;
pub mod group_admin;
pub mod groups;
pub mod produce;
pub mod retention;
pub mod security;
pub mod status;
pub mod tiering;
pub mod topics;

use std::collections::HashMap;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::ApiError;
use crate::extract::ApiPath;
use crate::names;
use crate::records::V2_RESPONSE;
use crate::state::AppState;

/// A `/v3/clusters/{cluster}/...` route whose `{cluster}` is ours (else
/// 40400, see `check_cluster`). Extracted first, so it is the first check
/// of every v3 handler, as in REST Proxy.
pub struct ClusterPath;

/// The `{topic}` of a `/v3/clusters/{cluster}/topics/{topic}/...` route:
/// the cluster checked first (40400), then the topic name (40002).
pub struct TopicPath(pub String);

/// The route's parameters by name (any number of them; 40002 if they do not
/// decode).
async fn path_params(
    parts: &mut Parts,
    state: &AppState,
) -> Result<HashMap<String, String>, ApiError> {
    ApiPath::<HashMap<String, String>>::from_request_parts(parts, state)
        .await
        .map(|ApiPath(params)| params)
}

/// A route parameter the router always provides; its absence is a bug.
fn param<'a>(params: &'a HashMap<String, String>, name: &str) -> Result<&'a str, ApiError> {
    params
        .get(name)
        .map(String::as_str)
        .ok_or_else(|| ApiError::Internal {
            message: format!("route has no {{{name}}} parameter"),
        })
}

impl FromRequestParts<AppState> for ClusterPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let params = path_params(parts, state).await?;
        check_cluster(state, param(&params, "cluster")?)?;
        Ok(ClusterPath)
    }
}

impl FromRequestParts<AppState> for TopicPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let params = path_params(parts, state).await?;
        check_cluster(state, param(&params, "cluster")?)?;
        let topic = param(&params, "topic")?;
        names::validate_topic_name(topic)?;
        Ok(TopicPath(topic.to_string()))
    }
}

/// 404/40400 unless `cluster` is ours (there is one cluster and its id is
/// the configured `cluster_id`).
pub(crate) fn check_cluster(state: &AppState, cluster: &str) -> Result<(), ApiError> {
    let ours = &state.settings().broker.cluster_id;
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
