//! The bare endpoint: the HTTP ceiling of this machine, measured with the
//! same client and load as the real server.
//!
//! It serves the two routes the bench drives, on the same axum and tokio:
//! * `POST /topics/{topic}/partitions/{p}` parses the body with serde_json
//!   into the produce shape, base64-decodes every value (and key), and
//!   answers the produce shape with made-up offsets. Nothing is validated
//!   beyond what parsing needs and nothing is stored.
//! * `GET /topics/{topic}/partitions/{p}/records` answers a fetch-shaped
//!   JSON array built once at start, of the size a real fetch of one batch
//!   returns.
//!
//! It runs on its own runtime (`tidelog-bench-ceiling` threads), like the
//! real server runs in its own process, so it does not share worker threads
//! with the load generator.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context as _;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::Deserialize;
use tidelog_api::records::{FetchedRecord, PartitionOffset, ProduceResponse, V2_RESPONSE};

/// What the bare fetch answers, and the produce offsets it hands out.
struct Ceiling {
    fetch_body: Bytes,
    next_offset: AtomicU64,
}

/// A produce body, in the shape tidelog accepts (API.md).
#[derive(Deserialize)]
struct ProduceBody {
    records: Vec<BareRecord>,
}

#[derive(Deserialize)]
#[allow(dead_code)] // parsed like the real server does, then dropped
struct BareRecord {
    key: Option<String>,
    value: Option<String>,
    partition: Option<u32>,
    headers: Option<Vec<BareHeader>>,
    timestamp: Option<i64>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct BareHeader {
    name: String,
    value: String,
}

/// Threads of the bare endpoint's runtime (their CPU time is reported).
pub const THREAD_NAME: &str = "tidelog-bench-ceiling";

/// A running bare endpoint; stops when dropped (with its runtime).
pub struct CeilingServer {
    pub addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for CeilingServer {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Starts the bare endpoint on 127.0.0.1 (a free port), answering fetches
/// with `batch` records of `record_bytes` each as `topic`'s.
pub fn start(topic: &str, batch: usize, record_bytes: usize) -> anyhow::Result<CeilingServer> {
    let fetch_body = Bytes::from(fetch_shaped_body(topic, batch, record_bytes)?);
    let state = Arc::new(Ceiling {
        fetch_body,
        next_offset: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/topics/{topic}/partitions/{partition}", post(produce))
        .route("/topics/{topic}/partitions/{partition}/records", get(fetch))
        .route("/status/ready", get(|| async { "{\"ready\":true}" }))
        .with_state(state);
    serve_on_own_runtime(
        THREAD_NAME,
        "the bare endpoint",
        move |listener| async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("tidelog bench: the bare endpoint stopped: {e}");
            }
        },
    )
}

/// Binds a free port on 127.0.0.1 and runs `serve` on it in a runtime of
/// its own whose threads are named `thread_name` (so their CPU time is
/// told apart); `what` names it in errors.
pub(crate) fn serve_on_own_runtime<F, Fut>(
    thread_name: &'static str,
    what: &str,
    serve: F,
) -> anyhow::Result<CeilingServer>
where
    F: FnOnce(tokio::net::TcpListener) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(thread_name)
        .build()
        .with_context(|| format!("starting {what}'s runtime"))?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .with_context(|| format!("binding {what} to 127.0.0.1"))?;
    let addr = listener
        .local_addr()
        .with_context(|| format!("{what}'s address"))?;
    runtime.spawn(serve(listener));
    Ok(CeilingServer {
        addr,
        runtime: Some(runtime),
    })
}

/// A fetch answer of `batch` binary records of `record_bytes`, keyless,
/// without headers: what tidelog renders for what the bench produces.
pub fn fetch_shaped_body(
    topic: &str,
    batch: usize,
    record_bytes: usize,
) -> anyhow::Result<Vec<u8>> {
    let value =
        serde_json::Value::String(BASE64.encode(crate::body::record_value(record_bytes, 0)));
    let timestamp = crate::body::now_ms();
    let records: Vec<FetchedRecord> = (0..batch as u64)
        .map(|offset| FetchedRecord {
            topic: topic.to_string(),
            key: serde_json::Value::Null,
            value: value.clone(),
            partition: 0,
            // Offsets of a realistic width, as deep in a partition.
            offset: 1_000_000 + offset,
            timestamp,
            headers: Vec::new(),
            physical_offset: None,
        })
        .collect();
    serde_json::to_vec(&records).context("encoding the bare fetch answer")
}

async fn produce(State(state): State<Arc<Ceiling>>, body: Bytes) -> Response {
    let parsed: ProduceBody = match serde_json::from_slice(&body) {
        Ok(parsed) => parsed,
        Err(e) => return bad_request(format!("body is not a produce body: {e}")),
    };
    let mut decoded_bytes = 0usize;
    for record in &parsed.records {
        for text in [&record.key, &record.value].into_iter().flatten() {
            match BASE64.decode(text) {
                Ok(bytes) => decoded_bytes += bytes.len(),
                Err(e) => return bad_request(format!("bad base64: {e}")),
            }
        }
    }
    std::hint::black_box(decoded_bytes);
    let count = parsed.records.len() as u64;
    let first = state.next_offset.fetch_add(count, Ordering::Relaxed);
    let offsets = (first..first + count)
        .map(|offset| PartitionOffset::new(0, offset))
        .collect();
    match serde_json::to_vec(&ProduceResponse::new(offsets)) {
        Ok(body) => v2(StatusCode::OK, Bytes::from(body)),
        Err(e) => bad_request(format!("cannot encode: {e}")),
    }
}

async fn fetch(State(state): State<Arc<Ceiling>>) -> Response {
    v2(StatusCode::OK, state.fetch_body.clone())
}

fn v2(status: StatusCode, body: Bytes) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static(V2_RESPONSE))],
        body,
    )
        .into_response()
}

fn bad_request(message: String) -> Response {
    let body = serde_json::json!({"error_code": 42206, "message": message}).to_string();
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::count_occurrences;

    #[test]
    fn bare_fetch_answer_has_the_batch() {
        let body = fetch_shaped_body("t", 5, 10).unwrap();
        assert_eq!(count_occurrences(&body, b"\"offset\":"), 5);
        let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(parsed.as_array().map(Vec::len), Some(5));
    }
}
