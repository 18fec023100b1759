//! HTTP fetch at `isolation_level=read_committed` (issue 38; API.md
//! "Fetch"): a partition holding a committed, an aborted and an open
//! transaction, written into the store directly (no transaction API is
//! served yet). read_uncommitted serves every record and no marker;
//! read_committed stops at the last stable offset and leaves the aborted
//! transaction's records out; a long-poll at the LSO is woken by the
//! marker that moves it. In process.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::Router;
use bytes::Bytes;
use serde_json::Value;
use tidelog_api::{ApiSettings, AppState, Broker};
use tidelog_broker::store::{
    AppendRecord, CleanerConfig, MarkerSpec, ProducerAppend, ProducerBatch,
};
use tidelog_broker::BrokerConfig;

use common::call_with as call;

async fn serving(dir: &std::path::Path) -> (AppState, Router) {
    let mut store = common::store_config(dir);
    store.retention.disk_max_used_ratio = 0.97;
    store.retention.disk_force_clean_ratio = 0.98;
    store.retention.disk_full_ratio = 0.99;
    let settings = ApiSettings {
        broker: BrokerConfig {
            auto_create_topics: true,
            default_partitions: 1,
            ..BrokerConfig::default()
        },
        ..ApiSettings::default()
    };
    let broker_config = settings.broker.clone();
    let state = AppState::new(settings, dir.to_path_buf());
    let broker = tokio::task::spawn_blocking(move || {
        Broker::open(&broker_config, store, CleanerConfig::default())
    })
    .await
    .unwrap()
    .unwrap();
    state.set_ready(broker);
    let router = tidelog_api::router(state.clone());
    (state, router)
}

/// The offsets and values a fetch answers.
async fn fetch(router: &Router, query: &str) -> (StatusCode, Vec<(u64, String)>) {
    let uri = format!("/topics/tx/partitions/0/records?{query}");
    let (status, _, body) = call(router, "GET", &uri, &[], None).await;
    if status != StatusCode::OK {
        return (status, Vec::new());
    }
    let records: Vec<Value> = serde_json::from_str(&body).unwrap();
    let got = records
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["value"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    (status, got)
}

/// A consumer instance's records call (json format): offsets and values.
async fn instance_records(router: &Router, name: &str, timeout_ms: u64) -> Vec<(u64, String)> {
    let uri = format!("/consumers/g/instances/{name}/records?timeout={timeout_ms}");
    let (status, _, body) = call(
        router,
        "GET",
        &uri,
        &[("accept", "application/vnd.kafka.json.v2+json")],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let records: Vec<Value> = serde_json::from_str(&body).unwrap();
    records
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["value"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn record(value: &str) -> AppendRecord {
    AppendRecord {
        topic: Arc::from("tx"),
        partition: 0,
        key: None,
        value: Some(Bytes::copy_from_slice(format!("\"{value}\"").as_bytes())),
        headers: Vec::new(),
        timestamp_ms: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_ends_at_the_lso_and_leaves_aborted_records_out() {
    let dir = tempfile::tempdir().unwrap();
    let (state, router) = serving(dir.path()).await;
    // The topic, by a first produce: offset 0.
    let (status, _, body) = call(
        &router,
        "POST",
        "/topics/tx/partitions/0",
        &[],
        Some(serde_json::json!({"records": [{"value": "plain0"}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let broker = state.ready().unwrap();
    let store = broker.store();
    let txn = |id| ProducerBatch {
        producer_id: id,
        epoch: 0,
        base_sequence: 0,
        transactional: true,
    };
    let write = |r: AppendRecord, id| match store.append_as(&[r], u64::MAX, Some(&txn(id))).unwrap()
    {
        ProducerAppend::Written(a) => a[0].queue_offset.get(),
        other => panic!("{other:?}"),
    };
    let end = |id, commit| {
        let m = MarkerSpec {
            producer_id: id,
            epoch: 0,
            commit,
            coordinator_epoch: 0,
        };
        store
            .append_marker(&Arc::from("tx"), 0, m)
            .unwrap()
            .wait()
            .unwrap()
            .queue_offset
            .get()
    };
    // 1 p1 (committed at 3), 2 p2 (aborted at 4), 5 p3 (open).
    assert_eq!(write(record("p1"), 1), 1);
    assert_eq!(write(record("p2"), 2), 2);
    assert_eq!(end(1, true), 3);
    assert_eq!(end(2, false), 4);
    assert_eq!(write(record("p3"), 3), 5);
    assert!(store.wait_dispatched(Duration::from_secs(10)));

    let all = |v: &[(u64, &str)]| -> Vec<(u64, String)> {
        v.iter().map(|(o, s)| (*o, s.to_string())).collect()
    };
    assert_eq!(
        fetch(&router, "offset=0&timeout=0").await,
        (
            StatusCode::OK,
            all(&[(0, "plain0"), (1, "p1"), (2, "p2"), (5, "p3")])
        ),
        "read_uncommitted: every record, no marker"
    );
    assert_eq!(
        fetch(
            &router,
            "offset=0&timeout=0&isolation_level=read_uncommitted"
        )
        .await,
        (
            StatusCode::OK,
            all(&[(0, "plain0"), (1, "p1"), (2, "p2"), (5, "p3")])
        ),
    );
    assert_eq!(
        fetch(&router, "offset=0&timeout=0&isolation_level=read_committed").await,
        (StatusCode::OK, all(&[(0, "plain0"), (1, "p1")])),
        "read_committed: below the LSO (5), p2's aborted record left out"
    );
    // Only aborted records in reach: nothing, at once.
    assert_eq!(
        fetch(&router, "offset=2&timeout=0&isolation_level=read_committed").await,
        (StatusCode::OK, Vec::new())
    );
    assert_eq!(
        fetch(&router, "offset=0&isolation_level=serializable")
            .await
            .0,
        StatusCode::BAD_REQUEST
    );

    // Consumer instances: `isolation.level` in the create body.
    for (name, isolation) in [("c1", "read_committed"), ("c2", "read_uncommitted")] {
        let (status, _, body) = call(
            &router,
            "POST",
            "/consumers/g",
            &[],
            Some(serde_json::json!({
                "name": name, "format": "json", "auto.offset.reset": "earliest",
                "isolation.level": isolation
            })),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, _, body) = call(
            &router,
            "POST",
            &format!("/consumers/g/instances/{name}/assignments"),
            &[],
            Some(serde_json::json!({"partitions": [{"topic": "tx", "partition": 0}]})),
        )
        .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    }
    assert_eq!(
        instance_records(&router, "c1", 0).await,
        all(&[(0, "plain0"), (1, "p1")]),
        "a read_committed instance"
    );
    assert_eq!(
        instance_records(&router, "c2", 0).await,
        all(&[(0, "plain0"), (1, "p1"), (2, "p2"), (5, "p3")]),
        "a read_uncommitted instance"
    );
    let (status, _, _) = call(
        &router,
        "POST",
        "/consumers/g",
        &[],
        Some(serde_json::json!({"name": "c3", "isolation.level": "serializable"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // A long-poll at the LSO waits, and p3's commit wakes it.
    let poll = {
        let router = router.clone();
        tokio::spawn(async move {
            let began = Instant::now();
            let got = fetch(
                &router,
                "offset=5&timeout=20000&isolation_level=read_committed",
            )
            .await;
            (got, began.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !poll.is_finished(),
        "the long-poll answered before the commit"
    );
    let broker2 = Arc::clone(&broker);
    tokio::task::spawn_blocking(move || {
        let m = MarkerSpec {
            producer_id: 3,
            epoch: 0,
            commit: true,
            coordinator_epoch: 0,
        };
        broker2
            .store()
            .append_marker(&Arc::from("tx"), 0, m)
            .unwrap()
            .wait()
            .unwrap();
    })
    .await
    .unwrap();
    let (got, waited) = poll.await.unwrap();
    assert_eq!(got, (StatusCode::OK, all(&[(5, "p3")])));
    assert!(waited < Duration::from_secs(15), "{waited:?}");
    // The read_committed instance reads on past the commit.
    assert_eq!(
        instance_records(&router, "c1", 5000).await,
        all(&[(5, "p3")])
    );
    drop(broker);
    let ready = state.take_ready(Duration::from_secs(10)).await.unwrap();
    let ready = ready.unwrap_or_else(|_| panic!("a request still holds the store"));
    tokio::task::spawn_blocking(move || ready.shutdown())
        .await
        .unwrap()
        .unwrap();
}
