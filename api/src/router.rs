//! The axum router: every route of API.md this crate serves, and the one
//! middleware every request passes.
//!
//! The middleware, in order:
//! 1. admin auth: with `admin_token` set, `POST`, `PUT`, `DELETE` and
//!    `PATCH` under `/v3/` and under `/consumer-groups/` need the bearer
//!    token (401/40101), except a commit (`POST
//!    /consumer-groups/{group}/offsets`), which is a consumer's own call
//!    (`needs_admin_token`); a wrong token is answered after
//!    `http.auth_failure_delay_ms`, a few such delays at a time over all
//!    connections ([`crate::failed_auth`]);
//! 2. the body, read whole before any handler runs: a declared
//!    `Content-Length` above `max_request_bytes` is 413/41301 at once,
//!    without reading a byte of it, and a chunked body is 413 as soon as it
//!    passes the limit; its bytes are taken from the global in-flight budget
//!    (`max_inflight_bytes`, [`crate::budget`]) as they arrive, before they
//!    are buffered (a declared length takes nothing by itself, so a client
//!    that sends nothing holds nothing), 503/50305 once it has not enough
//!    left; a body still arriving
//!    `body_read_timeout` after the headers is 408/40801. The bytes go back
//!    to the budget when the request is answered;
//! 3. overload: at most `max_concurrent_requests` requests are served at
//!    once; one more gets 429/42901 at once rather than a place in an
//!    unbounded queue. A request counts from the end of its body, so
//!    clients that stall while sending cannot take the slots (the budget
//!    and the timeouts bound them instead). `/status/ready` and `/metrics`
//!    are exempt, so health checks and scrapes still answer under overload;
//! 4. in a cluster, a replica's writes go to the master
//!    ([`crate::forward`]): the request, admitted as above, is sent there
//!    and the master's answer is this request's, or refused 503/50301;
//! 5. a request log line at debug level, and the response-class counters.
//!
//! Handlers then take the body as `Bytes`, already in memory.

use std::pin::Pin;
use std::time::Instant;

use axum::body::{Body, HttpBody};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::request::Parts;
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Router;
use bytes::Bytes;

use crate::budget::Reservation;
use crate::error::ApiError;
use crate::extract::check_bearer;
use crate::forward;
use crate::handlers::{
    broker_configs, cluster, compaction, console, consumers, fetch, group_admin, groups, produce,
    retention, security, status, tiering, topics,
};
use crate::metrics::GaugeGuard;
use crate::state::AppState;

/// The whole API.
pub fn router(state: AppState) -> Router {
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
        // Consumer groups, the operator's routes (ext).
        .route("/consumer-groups", get(group_admin::list))
        .route(
            "/consumer-groups/{group}",
            get(group_admin::describe).delete(group_admin::delete),
        )
        .route(
            "/consumer-groups/{group}/offsets:reset",
            post(group_admin::reset),
        )
        // Consumer instances (v2).
        .route("/consumers/{group}", post(consumers::create))
        .route(
            "/consumers/{group}/instances/{instance}",
            delete(consumers::delete),
        )
        .route(
            "/consumers/{group}/instances/{instance}/subscription",
            post(consumers::subscribe)
                .get(consumers::subscription)
                .delete(consumers::unsubscribe),
        )
        .route(
            "/consumers/{group}/instances/{instance}/assignments",
            post(consumers::assign).get(consumers::assignments),
        )
        .route(
            "/consumers/{group}/instances/{instance}/records",
            get(consumers::records),
        )
        .route(
            "/consumers/{group}/instances/{instance}/offsets",
            post(consumers::commit).get(consumers::committed),
        )
        .route(
            "/consumers/{group}/instances/{instance}/positions",
            post(consumers::seek),
        )
        .route(
            "/consumers/{group}/instances/{instance}/positions/beginning",
            post(consumers::seek_beginning),
        )
        .route(
            "/consumers/{group}/instances/{instance}/positions/end",
            post(consumers::seek_end),
        )
        // Topics and configs (v3).
        .route("/v3/clusters", get(status::clusters))
        .route(
            "/v3/clusters/{cluster}/topics",
            get(topics::list_v3).post(topics::create_v3),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}",
            get(topics::get_v3)
                .patch(topics::patch_v3)
                .delete(topics::delete_v3),
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
            "/v3/clusters/{cluster}/broker-configs",
            get(broker_configs::cluster_configs),
        )
        .route(
            "/v3/clusters/{cluster}/broker-configs:alter",
            post(broker_configs::alter_cluster_configs),
        )
        .route(
            "/v3/clusters/{cluster}/brokers/{broker}/configs",
            get(broker_configs::broker_configs),
        )
        .route(
            "/v3/clusters/{cluster}/brokers/{broker}/configs:alter",
            post(broker_configs::alter_broker_configs),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}/compaction",
            get(compaction::status).post(compaction::request),
        )
        .route(
            "/v3/clusters/{cluster}/topics/{topic}/tiering:upload",
            post(tiering::upload),
        )
        .route("/v3/clusters/{cluster}/stats", get(status::stats))
        .route(
            "/v3/clusters/{cluster}/stats/history",
            get(status::stats_history),
        )
        .route("/v3/clusters/{cluster}/retention", post(retention::run))
        // ACLs and users (docs/SECURITY.md).
        .route(
            "/v3/clusters/{cluster}/acls",
            get(security::list_acls)
                .post(security::create_acl)
                .delete(security::delete_acls),
        )
        .route(
            "/v1/security/users",
            get(security::list_users).post(security::create_user),
        )
        .route(
            "/v1/security/users/{username}",
            put(security::set_password).delete(security::delete_user),
        )
        // The cluster (issue 39).
        .route("/v1/cluster", get(cluster::describe))
        // Operations.
        .route("/status/ready", get(status::ready))
        .route("/metrics", get(status::metrics))
        // The web console (docs/CONSOLE.md).
        .route("/ui", get(console::index))
        .route("/ui/", get(console::index))
        .route("/ui/{file}", get(console::asset))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // `guard` has read and limited the body already; axum's own limit
        // (2 MiB unless set) would only repeat the rule.
        .layer(DefaultBodyLimit::disable())
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

/// Auth, overload protection, forwarding, request log and counters
/// (module doc).
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let peer = request
        .extensions()
        .get::<crate::listener::PeerAddr>()
        .map(|p| p.0.ip());
    // The console asks for a login with its own form (docs/CONSOLE.md):
    // its 401s carry no WWW-Authenticate, which would make the browser
    // prompt instead.
    let from_console = request
        .headers()
        .get("x-requested-with")
        .is_some_and(|v| v == "tidelog-console");
    let certificate_cn = request
        .extensions()
        .get::<tidelog_runtime::tls::PeerIdentity>()
        .and_then(|identity| identity.common_name.as_deref());
    let caller = crate::login::caller(
        &state,
        &method,
        &path,
        request.headers(),
        (peer, certificate_cn),
    )
    .await;
    let admitted = match caller {
        Ok(caller) => admit(&state, request).await.map(|a| (caller, a)),
        Err(e) => Err(e),
    };
    let response = match admitted {
        Err(e) => e.into_response(),
        Ok((caller, (parts, body, permit, body_bytes))) => {
            let broker = state.ready().ok();
            let route = forward::route(
                broker.as_deref(),
                &parts.method,
                parts.uri.path(),
                &parts.headers,
            );
            drop(broker);
            let response = match route {
                // The handlers' door is made for this caller.
                forward::Route::Local => {
                    let request = Request::from_parts(parts, Body::from(body));
                    caller.scope(next.run(request)).await
                }
                forward::Route::Forward(target) => {
                    let shared = state.shared();
                    let forwarded = match shared.forwarder() {
                        Some(forwarder) => forwarder.forward(&target, &caller, parts, body).await,
                        None => Err(target.without_certificate()),
                    };
                    let counter = match &forwarded {
                        Ok(_) => &shared.metrics.forwarded,
                        Err(_) => &shared.metrics.forward_failures,
                    };
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    forwarded.unwrap_or_else(IntoResponse::into_response)
                }
                forward::Route::Refuse(e) => {
                    state
                        .shared()
                        .metrics
                        .forward_failures
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    e.into_response()
                }
            };
            drop(permit);
            drop(body_bytes);
            response
        }
    };
    let mut response = response;
    if from_console {
        response
            .headers_mut()
            .remove(axum::http::header::WWW_AUTHENTICATE);
    }
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

/// A concurrency permit (`None` for exempt routes).
type Permit = Option<tokio::sync::OwnedSemaphorePermit>;

/// A request admitted: its head, its body in memory, its concurrency
/// permit, and the body's bytes in the in-flight budget.
type Admitted = (Parts, Bytes, Permit, Option<Reservation>);

/// Checks auth, reads the body and takes a concurrency permit (module doc).
async fn admit(state: &AppState, request: Request) -> Result<Admitted, ApiError> {
    // With ACLs on, they decide who may change what (a super user needs
    // no token); else the admin token guards the operator's calls.
    let acls_decide = state.settings().broker.security.authorization;
    if let Some(token) = state
        .settings()
        .admin_token
        .as_ref()
        .filter(|_| !acls_decide)
    {
        if needs_admin_token(request.method(), request.uri().path()) {
            if let Err(refused) = check_bearer(request.headers(), token) {
                // A token was sent and is wrong: a guess, delayed
                // (`crate::failed_auth`). None sent is no guess.
                if request
                    .headers()
                    .contains_key(axum::http::header::AUTHORIZATION)
                {
                    let shared = state.shared();
                    shared
                        .failed_auth
                        .penalize(
                            &shared.metrics.auth_failures,
                            request.method(),
                            request.uri().path(),
                        )
                        .await;
                }
                return Err(refused);
            }
        }
    }
    let (parts, body) = request.into_parts();
    let (body, body_bytes) = read_body(state, body).await?;
    let path = parts.uri.path();
    if path == "/status/ready" || path == "/metrics" {
        return Ok((parts, body, None, body_bytes));
    }
    match std::sync::Arc::clone(&state.shared().limiter).try_acquire_owned() {
        Ok(permit) => Ok((parts, body, Some(permit), body_bytes)),
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

/// Whether a call needs the admin token (when one is set): every mutating
/// call under `/v3/` (topics, configs, compaction, retention) and under
/// `/consumer-groups/` (an operator's reset or delete of a group), but not
/// a commit, `POST /consumer-groups/{group}/offsets`, which consumers make
/// as they read. Checked on the raw path before routing, so a path that
/// routes nowhere is refused first, and the rule covers any operator
/// route added under the prefix.
fn needs_admin_token(method: &Method, path: &str) -> bool {
    let mutating = matches!(
        *method,
        Method::POST | Method::PUT | Method::DELETE | Method::PATCH
    );
    if !mutating {
        return false;
    }
    if path.starts_with("/v3/") || path.starts_with("/v1/security/") {
        return true;
    }
    let Some(rest) = path.strip_prefix("/consumer-groups/") else {
        return false;
    };
    let commit = *method == Method::POST
        && rest
            .strip_suffix("/offsets")
            .is_some_and(|group| !group.is_empty() && !group.contains('/'));
    !commit
}

/// The whole body, within `max_request_bytes`, the in-flight budget and
/// `body_read_timeout` (module doc), and its bytes' reservation in the
/// budget (`None` for an empty body).
async fn read_body(
    state: &AppState,
    mut body: Body,
) -> Result<(Bytes, Option<Reservation>), ApiError> {
    if body.is_end_stream() {
        return Ok((Bytes::new(), None));
    }
    let settings = state.settings();
    let limit_bytes = settings.max_request_bytes as u64;
    // hyper's exact size hint is the request's validated Content-Length.
    let declared_bytes = body.size_hint().exact();
    if let Some(declared) = declared_bytes.filter(|n| *n > limit_bytes) {
        return Err(ApiError::TooLarge {
            message: format!(
                "request body declares {declared} bytes, more than the server's limit of {limit_bytes} (http.max_request_bytes)"
            ),
        });
    }
    let shared = state.shared();
    // Nothing is taken for bytes that have not arrived: a client that
    // declares a large body and sends nothing holds nothing. The
    // reservation grows with what is held, the buffer's capacity
    // included, before each allocation.
    let mut reservation = shared.inflight_bytes.empty();
    let _reading = GaugeGuard::new(&shared.metrics.requests_reading_body);
    let collect = async {
        // One frame is the whole body more often than not: kept as it is,
        // copied only when a second one comes.
        let mut single: Option<Bytes> = None;
        let mut joined: Vec<u8> = Vec::new();
        let mut total_bytes = 0u64;
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let frame = frame.map_err(|e| ApiError::BadRequest {
                message: format!("cannot read the request body: {e}"),
            })?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            total_bytes += data.len() as u64;
            if total_bytes > limit_bytes {
                return Err(ApiError::TooLarge {
                    message: format!(
                        "request body is larger than the server's limit of {limit_bytes} bytes (http.max_request_bytes)"
                    ),
                });
            }
            // What is held once this frame is kept: the frame itself, or
            // the joined buffer's capacity (grown by doubling, never past
            // the declared length or the limit).
            let held_bytes = match &single {
                None if joined.is_empty() => total_bytes,
                _ => {
                    let needed = usize::try_from(total_bytes).unwrap_or(usize::MAX);
                    if needed > joined.capacity() {
                        let most = declared_bytes.unwrap_or(limit_bytes);
                        let doubled = (joined.capacity() as u64 * 2).min(most);
                        (needed as u64).max(doubled)
                    } else {
                        joined.capacity() as u64
                    }
                }
            };
            let more_bytes = held_bytes.saturating_sub(reservation.bytes());
            if more_bytes > 0 && !reservation.try_grow(more_bytes) {
                return Err(over_budget(state, total_bytes));
            }
            let capacity = usize::try_from(held_bytes).unwrap_or(usize::MAX);
            match single.take() {
                None if joined.is_empty() => single = Some(data),
                None => {
                    joined.reserve_exact(capacity - joined.len());
                    joined.extend_from_slice(&data);
                }
                Some(first) => {
                    joined.reserve_exact(capacity);
                    joined.extend_from_slice(&first);
                    joined.extend_from_slice(&data);
                }
            }
        }
        Ok(single.unwrap_or_else(|| Bytes::from(joined)))
    };
    match tokio::time::timeout(settings.body_read_timeout, collect).await {
        Ok(body) => Ok((body?, Some(reservation))),
        Err(_) => {
            shared
                .metrics
                .body_read_timeouts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Err(ApiError::RequestTimeout {
                message: format!(
                    "the request body did not arrive within {} ms of its headers (http.body_read_timeout_ms)",
                    settings.body_read_timeout.as_millis()
                ),
            })
        }
    }
}

/// 50305 for a body of `bytes` that does not fit in the in-flight budget,
/// counted.
fn over_budget(state: &AppState, bytes: u64) -> ApiError {
    let shared = state.shared();
    shared
        .metrics
        .rejected_inflight_bytes
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ApiError::InflightBytesExhausted {
        message: format!(
            "a request body of {bytes} bytes would pass the server's budget of {} bytes held in memory for all requests (http.max_inflight_bytes); retry shortly",
            shared.inflight_bytes.limit_bytes()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_token_guards_mutating_v3_and_operator_group_calls_but_not_commits() {
        let guarded = [
            (Method::POST, "/v3/clusters/tidelog/topics"),
            (Method::DELETE, "/v3/clusters/tidelog/topics/t"),
            (
                Method::PUT,
                "/v3/clusters/tidelog/topics/t/configs/retention.ms",
            ),
            (Method::DELETE, "/consumer-groups/g"),
            (Method::POST, "/consumer-groups/g/offsets:reset"),
            (Method::POST, "/consumer-groups/g/offsets%3Areset"),
            (Method::DELETE, "/consumer-groups/g/offsets"),
            (Method::POST, "/consumer-groups//offsets"),
            (Method::POST, "/consumer-groups/a/b/offsets"),
        ];
        for (method, path) in guarded {
            assert!(needs_admin_token(&method, path), "{method} {path}");
        }
        let open = [
            (Method::GET, "/v3/clusters/tidelog/topics"),
            (Method::GET, "/consumer-groups"),
            (Method::GET, "/consumer-groups/g"),
            (Method::GET, "/consumer-groups/g/offsets"),
            (Method::POST, "/consumer-groups/g/offsets"),
            (Method::POST, "/topics/t"),
            (Method::POST, "/consumers/g"),
        ];
        for (method, path) in open {
            assert!(!needs_admin_token(&method, path), "{method} {path}");
        }
    }
}
