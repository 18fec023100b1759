//! The routes the web console adds or reads (docs/CONSOLE.md): the
//! embedded files under `/ui` with their types, cache validators and CSP;
//! `GET /v3/clusters/{c}/stats/history`, filled by the sampler from the
//! start; a topic's usage in `GET /v3/clusters/{c}/topics/{t}` and each
//! config's default; the broker's configs (`broker-configs`,
//! `brokers/0/configs`). In process; the real browser's test is
//! integration-tests/tests/console.rs.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use serde_json::{json, Value};
use tidelog_api::{ApiSettings, AppState, Broker};
use tidelog_broker::store::CleanerConfig;
use tidelog_broker::BrokerConfig;

use common::call_with as call;

async fn get_json(router: &Router, uri: &str) -> Value {
    let (status, _, body) = call(router, "GET", uri, &[], None).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    serde_json::from_str(&body).unwrap()
}

async fn serving(dir: &std::path::Path) -> (AppState, Router) {
    // Tiers near 100 %: how full this shared machine's disk is must not
    // refuse the test's produce.
    let mut store = common::store_config(dir);
    store.retention.disk_max_used_ratio = 0.97;
    store.retention.disk_force_clean_ratio = 0.98;
    store.retention.disk_full_ratio = 0.99;
    let cleaner = CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    };
    let settings = ApiSettings {
        broker: BrokerConfig {
            auto_create_topics: true,
            default_partitions: 2,
            ..BrokerConfig::default()
        },
        ..ApiSettings::default()
    };
    let broker_config = settings.broker.clone();
    let state = AppState::new(settings, dir.to_path_buf());
    let broker = tokio::task::spawn_blocking(move || Broker::open(&broker_config, store, cleaner))
        .await
        .unwrap()
        .unwrap();
    state.set_ready(broker);
    let router = tidelog_api::router(state.clone());
    (state, router)
}

async fn close(state: &AppState) {
    let ready = state.take_ready(Duration::from_secs(10)).await.unwrap();
    let ready = ready.unwrap_or_else(|_| panic!("a request still holds the store"));
    tokio::task::spawn_blocking(move || ready.shutdown())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_files_are_served_with_their_types_csp_and_validators() {
    let dir = tempfile::tempdir().unwrap();
    let (state, router) = serving(dir.path()).await;
    for (uri, content_type) in [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/", "text/html; charset=utf-8"),
        ("/ui/index.html", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/api.js", "text/javascript; charset=utf-8"),
        ("/ui/view.js", "text/javascript; charset=utf-8"),
        ("/ui/plot.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
    ] {
        let (status, headers, body) = call(&router, "GET", uri, &[], None).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        assert_eq!(headers["content-type"], content_type, "{uri}");
        assert_eq!(headers["cache-control"], "no-cache", "{uri}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{uri}");
        let csp = headers["content-security-policy"].to_str().unwrap();
        for rule in [
            "default-src 'none'",
            "script-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(rule), "{uri}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{uri}: {csp}");
        assert!(!body.is_empty(), "{uri}");
        // A browser's revalidation with the same ETag gets 304, no body.
        let etag = headers["etag"].to_str().unwrap().to_string();
        let (status, _, body) = call(
            &router,
            "GET",
            uri,
            &[("if-none-match", etag.as_str())],
            None,
        )
        .await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::NOT_MODIFIED, ""),
            "{uri}"
        );
        let (status, _, _) = call(&router, "GET", uri, &[("if-none-match", "\"x\"")], None).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
    }
    let (_, _, page) = call(&router, "GET", "/ui", &[], None).await;
    assert!(page.contains("<script type=\"module\" src=\"/ui/app.js\">"));
    for missing in ["/ui/nope.js", "/ui/..%2Fsrc%2Flib.rs", "/ui/a/b"] {
        let (status, _, body) = call(&router, "GET", missing, &[], None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{missing}: {body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error_code"], 40400, "{missing}");
    }
    close(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_has_samples_from_the_start_and_counts_what_was_produced() {
    let dir = tempfile::tempdir().unwrap();
    let (state, router) = serving(dir.path()).await;
    let history = get_json(&router, "/v3/clusters/tidelog/stats/history").await;
    assert_eq!(history["interval_ms"], 2000);
    assert_eq!(history["capacity"], 300);
    assert_eq!(history["disk_max_used_ratio"], 0.97);
    assert_eq!(history["disk_force_clean_ratio"], 0.98);
    assert_eq!(history["disk_full_ratio"], 0.99);
    // The first sample is the baseline of the first rate: taken as the
    // broker becomes ready (bounded wait).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while get_json(&router, "/v3/clusters/tidelog/stats/history").await["samples"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        assert!(tokio::time::Instant::now() < deadline, "no first sample");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, _, body) = call(
        &router,
        "POST",
        "/topics/t",
        &[],
        Some(json!({"records": [{"value": 1}, {"value": 2}, {"value": 3}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The sampler takes one sample every 2 s: wait (bounded) until a rate
    // after the produce shows its records.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let history = get_json(&router, "/v3/clusters/tidelog/stats/history").await;
        let samples = history["samples"].as_array().unwrap().clone();
        let produced: f64 = samples
            .iter()
            .filter_map(|s| s["produce_records_per_sec"].as_f64())
            .sum();
        if produced > 0.0 {
            assert!(samples[0]["produce_records_per_sec"].is_null(), "{history}");
            let last = samples.last().unwrap();
            assert!(last["timestamp_ms"].as_i64().unwrap() > 0);
            assert!(last["disk_used_ratio"].as_f64().is_some());
            assert!(last["commitlog_segments"].as_u64().unwrap() >= 1);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no sample counted the produce: {history}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stats = get_json(&router, "/v3/clusters/tidelog/stats").await;
    assert_eq!(stats["disk_max_used_ratio"], 0.97);
    assert_eq!(stats["disk_force_clean_ratio"], 0.98);
    close(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_answers_its_usage_and_its_configs_their_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let (state, router) = serving(dir.path()).await;
    let (status, _, body) = call(
        &router,
        "POST",
        "/topics/t/partitions/1",
        &[],
        Some(json!({"records": [{"value": "a"}, {"value": "b"}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let topic = loop {
        let topic = get_json(&router, "/v3/clusters/tidelog/topics/t").await;
        if topic["records"] == 2 {
            break topic;
        }
        assert!(tokio::time::Instant::now() < deadline, "{topic}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(topic["topic_name"], "t");
    assert_eq!(topic["kind"], "KafkaTopic");
    assert_eq!(topic["cleanup_policy"], "delete");
    let partitions = topic["partition_usage"].as_array().unwrap();
    assert_eq!(partitions.len(), 2);
    assert_eq!(partitions[0]["records"], 0);
    assert_eq!(partitions[1]["beginning_offset"], 0);
    assert_eq!(partitions[1]["end_offset"], 2);
    let p1_bytes = partitions[1]["bytes_on_disk"].as_u64().unwrap();
    // Partition 1's records plus its queue file (1000 units of 20 bytes);
    // partition 0 has no queue file yet.
    assert!(p1_bytes > 20_000, "{topic}");
    assert_eq!(topic["bytes_on_disk"].as_u64().unwrap(), p1_bytes);
    assert_eq!(topic["bytes_on_disk_estimated"], false);

    let (status, _, _) = call(
        &router,
        "PUT",
        "/v3/clusters/tidelog/topics/t/configs/retention.ms",
        &[],
        Some(json!({"value": "60000"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let configs = get_json(&router, "/v3/clusters/tidelog/topics/t/configs").await;
    let retention = configs["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "retention.ms")
        .unwrap()
        .clone();
    assert_eq!(
        retention,
        json!({"name": "retention.ms", "value": "60000", "is_default": false, "default": "604800000", "source": "DYNAMIC_TOPIC_CONFIG"})
    );
    close(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_configs_are_listed_and_altered_as_confluent_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let (state, router) = serving(dir.path()).await;
    let alter = |uri: &'static str, body: Value| {
        let router = router.clone();
        async move {
            let (status, _, body) = call(&router, "POST", uri, &[], Some(body)).await;
            (status, body)
        }
    };
    let (status, body) = alter(
        "/v3/clusters/tidelog/broker-configs:alter",
        json!({"data": [{"name": "log.retention.ms", "value": "86400000"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, body) = alter(
        "/v3/clusters/tidelog/brokers/0/configs:alter",
        json!({"data": [{"name": "background.threads", "value": 4}]}),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    // The broker's refusals, all or nothing.
    for (uri, body, code) in [
        (
            "/v3/clusters/tidelog/brokers/0/configs:alter",
            json!({"data": [{"name": "num.partitions", "value": "3"}]}),
            40002,
        ),
        (
            "/v3/clusters/tidelog/brokers/0/configs:alter",
            json!({"data": [{"name": "num.io.threads", "value": "3"}, {"name": "no.such", "value": "1"}]}),
            40002,
        ),
        (
            "/v3/clusters/tidelog/brokers/7/configs:alter",
            json!({"data": [{"name": "num.io.threads", "value": "3"}]}),
            40400,
        ),
        (
            "/v3/clusters/tidelog/broker-configs:alter",
            json!({"data": [{"name": "log.retention.ms", "operation": "set", "value": "1"}]}),
            40002,
        ),
    ] {
        let (status, answer) = alter(uri, body).await;
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["error_code"], code, "{uri}: {answer}");
        assert_ne!(status, StatusCode::NO_CONTENT);
    }

    let cluster = get_json(&router, "/v3/clusters/tidelog/broker-configs").await;
    assert_eq!(cluster["kind"], "KafkaClusterConfigList");
    let data = cluster["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{cluster}");
    assert_eq!(
        (&data[0]["name"], &data[0]["value"], &data[0]["source"]),
        (
            &json!("log.retention.ms"),
            &json!("86400000"),
            &json!("DYNAMIC_DEFAULT_BROKER_CONFIG")
        )
    );
    let broker = get_json(&router, "/v3/clusters/tidelog/brokers/0/configs").await;
    let find = |name: &str| {
        broker["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .clone()
    };
    let threads = find("background.threads");
    assert_eq!(
        (&threads["value"], &threads["source"], &threads["broker_id"]),
        (&json!("4"), &json!("DYNAMIC_BROKER_CONFIG"), &json!(0))
    );
    assert!(threads["without_effect"].is_string(), "{threads}");
    assert_eq!(find("num.io.threads")["source"], "DEFAULT_CONFIG");
    let partitions = find("num.partitions");
    assert_eq!(
        (
            &partitions["value"],
            &partitions["is_read_only"],
            &partitions["source"]
        ),
        (&json!("2"), &json!(true), &json!("STATIC_BROKER_CONFIG"))
    );
    // A topic without its own retention follows the cluster-wide default.
    let (status, _, body) = call(
        &router,
        "POST",
        "/v3/clusters/tidelog/topics",
        &[],
        Some(json!({"topic_name": "follows"})),
    )
    .await;
    assert!(status.is_success(), "{body}");
    let configs = get_json(&router, "/v3/clusters/tidelog/topics/follows/configs").await;
    let retention = configs["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "retention.ms")
        .unwrap()
        .clone();
    assert_eq!(
        retention,
        json!({"name": "retention.ms", "value": "86400000", "is_default": true, "default": "86400000", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG"})
    );
    let (status, _, _) = call(
        &router,
        "GET",
        "/v3/clusters/other/broker-configs",
        &[],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    close(&state).await;
}
