//! Consumer lag and the group coordinator's counts in `/metrics` and in
//! `GET /v3/clusters/{c}/stats`, through the router in process: a commit
//! below a partition's end shows `end − committed`, one past it shows 0.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use serde_json::{json, Value};
use tidelog_api::{ApiSettings, AppState, Broker};
use tidelog_broker::store::{CleanerConfig, StoreConfig};
use tidelog_broker::BrokerConfig;
use tower::ServiceExt as _;

const JSON_V2: &str = "application/vnd.kafka.json.v2+json";

async fn call(
    router: &Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, String) {
    let mut request = Request::builder().method(method).uri(uri);
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
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

fn settings() -> ApiSettings {
    ApiSettings {
        broker: BrokerConfig {
            auto_create_topics: true,
            default_partitions: 2,
            ..BrokerConfig::default()
        },
        ..ApiSettings::default()
    }
}

async fn open(dir: &std::path::Path) -> Broker {
    let mut config = StoreConfig::new(dir);
    config.commitlog_segment_bytes = 1 << 20;
    config.consume_queue_units_per_file = 1000;
    config.index_slots = 1000;
    config.index_entries = 4000;
    config.preallocate_next_segment = false;
    let cleaner = CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    };
    let broker = settings().broker;
    tokio::task::spawn_blocking(move || Broker::open(&broker, config, cleaner))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_is_end_minus_committed_in_metrics_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let state = AppState::new(settings(), dir.path().to_path_buf());
    state.set_ready(open(dir.path()).await);
    let router = tidelog_api::router(state.clone());

    // Partition 0 ends at 3, partition 1 at 1.
    let records = json!({"records": [
        {"value": "a", "partition": 0},
        {"value": "b", "partition": 0},
        {"value": "c", "partition": 0},
        {"value": "d", "partition": 1},
    ]});
    let (status, body) = call(&router, "POST", "/topics/t", Some(records)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Below the end on partition 0; past it on partition 1 (allowed by the
    // ext route), which is lag 0, never negative.
    let commit = json!({"offsets": [
        {"topic": "t", "partition": 0, "offset": 1},
        {"topic": "t", "partition": 1, "offset": 5},
    ]});
    let (status, body) = call(&router, "POST", "/consumer-groups/g/offsets", Some(commit)).await;
    assert!(status.is_success(), "{status}: {body}");

    // Records count once dispatched (the end offset the fetch and offsets
    // routes answer): wait for the last one, bounded.
    for (partition, last) in [(0, 2), (1, 0)] {
        let uri = format!("/topics/t/partitions/{partition}/records?offset={last}&timeout=10000");
        let (status, body) = call(&router, "GET", &uri, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_ne!(body, "[]", "partition {partition} has offset {last}");
    }
    let (status, text) = call(&router, "GET", "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    for line in [
        "# TYPE tidelog_consumer_group_lag gauge\n",
        "\ntidelog_consumer_group_lag{group=\"g\",topic=\"t\",partition=\"0\"} 2\n",
        "\ntidelog_consumer_group_lag{group=\"g\",topic=\"t\",partition=\"1\"} 0\n",
        "\ntidelog_consumer_group_states{state=\"Stable\"} 0\n",
        "\ntidelog_consumer_group_members 0\n",
        "# TYPE tidelog_consumer_group_rebalances_total counter\n",
        "\ntidelog_consumer_group_rebalances_total 0\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }

    let (status, body) = call(&router, "GET", "/v3/clusters/tidelog/stats", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stats: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        stats["consumer_group_lag"],
        json!([
            {"group": "g", "topic": "t", "partition": 0, "committed_offset": 1, "end_offset": 3, "lag": 2},
            {"group": "g", "topic": "t", "partition": 1, "committed_offset": 5, "end_offset": 1, "lag": 0},
        ])
    );
    assert_eq!(stats["consumer_group_members"], json!(0));
    assert_eq!(stats["consumer_group_rebalances"], json!(0));

    let ready = state.take_ready(Duration::from_secs(10)).await.unwrap();
    let ready = ready.unwrap_or_else(|_| panic!("a request still holds the store"));
    tokio::task::spawn_blocking(move || ready.shutdown())
        .await
        .unwrap()
        .unwrap();
}
