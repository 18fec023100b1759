//! What the in-process API tests share: one request through the router,
//! and a store small enough to open fast.
#![allow(clippy::unwrap_used, dead_code)] // tests: a failed unwrap is a failed test

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tidelog_broker::store::StoreConfig;
use tower::ServiceExt as _;

const JSON_V2: &str = "application/vnd.kafka.json.v2+json";

/// Status, headers and body of one request (a JSON `body` is sent as the
/// json embedded format, which the admin routes also accept).
pub async fn call_with(
    router: &Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, HeaderMap, String) {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = match body {
        Some(b) => {
            request = request.header("content-type", JSON_V2);
            Body::from(b.to_string())
        }
        None => Body::empty(),
    };
    let response = router
        .clone()
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
}

/// 1 MiB segments, small queue and index files, no preallocation, and a
/// disk that reads half used: the machine's disk is shared and often
/// past the store's 90 % full ratio, which would refuse every write.
pub fn store_config(dir: &std::path::Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.retention.disk = std::sync::Arc::new(tidelog_broker::store::FixedDiskUsage::new(0.5));
    c.commitlog_segment_bytes = 1 << 20;
    c.consume_queue_units_per_file = 1000;
    c.index_slots = 1000;
    c.index_entries = 4000;
    c.preallocate_next_segment = false;
    c
}
