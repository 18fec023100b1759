//! The axum router: every route of API.md this crate serves, and the one
//! middleware every request passes.
//!
//! The middleware, in order:
//! 1. admin auth: with `admin_token` set, `POST`, `PUT`, `DELETE` and
//!    `PATCH` under `/v3/` need the bearer token (401/40101);
//! 2. overload: at most `max_concurrent_requests` requests are served at
//!    once; one more gets 429/42901 at once rather than a place in an
//!    unbounded queue. `/status/ready` and `/metrics` are exempt, so health
//!    checks and scrapes still answer under overload;
//! 3. a request log line at debug level, and the response-class counters.
//!
//! Request bodies are capped at `max_request_bytes` by axum's body limit;
//! handlers turn its rejection into 413/41301 with our JSON body.

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;

use crate::error::ApiError;
use crate::extract::check_bearer;
use crate::handlers::{compaction, fetch, groups, produce, retention, status, topics};
use crate::state::AppState;

/// The whole API.
pub fn router(state: AppState) -> Router {
    let body_limit = state.settings().max_request_bytes;
    Router::new()
        // Records (v2 and ext).
        .route("/topics", get(topics::list_v2))
        .route(
            "/topics/{topic}",
            get(topics::get_v2).post(produce::produce),
        )
        .route(
            "/topics/{topic}/partitions/{partition}",
            post(produce::produce_to_partition),
        )
        .route(
            "/topics/{topic}/partitions/{partition}/records",
            get(fetch::fetch),
        )
        .route(
            "/topics/{topic}/partitions/{partition}/offsets",
            get(fetch::offsets),
        )
        .route("/topics/{topic}/records", get(fetch::query_by_key))
        .route("/commitlog/{physical_offset}", get(fetch::read_physical))
        // Consumer group offsets (ext).
        .route(
            "/consumer-groups/{group}/offsets",
            get(groups::get).post(groups::commit),
        )
        // Topics and configs (v3).
        .route("/v3/clusters", get(status::clusters))
        .route(
            "/v3/clusters/{cluster}/topics",
            get(topics::list_v3).post(topics::create_v3),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}",
            get(topics::get_v3).delete(topics::delete_v3),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}/configs",
            get(topics::configs_v3),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}/configs/{name}",
            put(topics::put_config_v3),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}/configs:alter",
            post(topics::alter_configs_v3),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}/compaction",
            get(compaction::status).post(compaction::request),
        )
        .route("/v3/clusters/{cluster}/stats", get(status::stats))
        .route("/v3/clusters/{cluster}/retention", post(retention::run))
        // Operations.
        .route("/status/ready", get(status::ready))
        .route("/metrics", get(status::metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

async fn not_found(request: Request) -> ApiError {
    ApiError::NotFound {
        message: format!("no route for {} {}", request.method(), request.uri().path()),
    }
}

async fn method_not_allowed(request: Request) -> ApiError {
    ApiError::MethodNotAllowed {
        message: format!(
            "{} is not allowed on {}",
            request.method(),
            request.uri().path()
        ),
    }
}

/// Auth, overload protection, request log and counters (module doc).
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = match admit(&state, &request) {
        Err(e) => e.into_response(),
        Ok(permit) => {
            let response = next.run(request).await;
            drop(permit);
            response
        }
    };
    let status = response.status();
    state.shared().metrics.count_response(status.as_u16());
    tracing::debug!(
        %method,
        %path,
        status = status.as_u16(),
        micros = started.elapsed().as_micros() as u64,
        "request"
    );
    response
}

/// Checks auth and takes a concurrency permit (`None` for exempt routes).
fn admit(
    state: &AppState,
    request: &Request,
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, ApiError> {
    let path = request.uri().path();
    if let Some(token) = &state.settings().admin_token {
        let mutating = matches!(
            *request.method(),
            Method::POST | Method::PUT | Method::DELETE | Method::PATCH
        );
        if mutating && path.starts_with("/v3/") {
            check_bearer(request.headers(), token)?;
        }
    }
    if path == "/status/ready" || path == "/metrics" {
        return Ok(None);
    }
    match std::sync::Arc::clone(&state.shared().limiter).try_acquire_owned() {
        Ok(permit) => Ok(Some(permit)),
        Err(_) => {
            state
                .shared()
                .metrics
                .rejected_overload
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Err(ApiError::TooManyRequests {
                message: format!(
                    "{} requests are in flight, the server's limit (http.max_concurrent_requests); retry shortly",
                    state.settings().max_concurrent_requests
                ),
            })
        }
    }
}
