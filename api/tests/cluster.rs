//! The HTTP side of a cluster (issue 39) with a cluster gate whose
//! answers the test sets: `GET /v1/cluster`, `/status/ready` and the
//! cluster's metrics from the gate, and a single node's answers without
//! one; a replica's writes forwarded to the master over real HTTP (the
//! master's answer passed back as it is, the record on the master only,
//! the caller's `Authorization` kept for the master's checks), and the
//! refusals: no master known, the master unreachable, and a forwarded
//! request that would be forwarded again (two nodes that each name the
//! other as master).
//!
//! The replica is driven in process (the router's `oneshot`); the master
//! is served on a real listener, which the replica forwards to.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use serde_json::{json, Value};
use tidelog_api::forward::FORWARDED_BY;
use tidelog_api::listener::{serve, ListenerLimits};
use tidelog_api::{ApiSettings, AppState, Broker};
use tidelog_broker::cluster::{ClusterGate, ClusterNode, ClusterStatus, GateFuture, Role};
use tidelog_broker::store::CleanerConfig;
use tidelog_broker::{BrokerConfig, BrokerError};

use common::call_with as call;

const LIMITS: ListenerLimits = ListenerLimits {
    max_connections: 64,
    header_read_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(10),
    write_timeout: Duration::from_secs(10),
};

/// A node's gate as the test sets it: whether it may write, the cluster
/// it sees, and its readiness.
struct FakeGate {
    writable: AtomicBool,
    status: Mutex<ClusterStatus>,
    ready: Mutex<Result<(), String>>,
}

impl FakeGate {
    fn new(writable: bool, status: ClusterStatus) -> Arc<FakeGate> {
        Arc::new(FakeGate {
            writable: AtomicBool::new(writable),
            status: Mutex::new(status),
            ready: Mutex::new(Ok(())),
        })
    }

    fn set(&self, f: impl FnOnce(&mut ClusterStatus)) {
        f(&mut self.status.lock().unwrap());
    }
}

impl ClusterGate for FakeGate {
    fn may_write(&self) -> Result<(), BrokerError> {
        match self.writable.load(Ordering::Acquire) {
            true => Ok(()),
            false => Err(BrokerError::NotMaster {
                master: self.status.lock().unwrap().master,
            }),
        }
    }
    fn in_sync(&self) -> usize {
        2
    }
    fn min_insync(&self) -> usize {
        1
    }
    fn replicated(&self, _end: u64, _min_insync: usize) -> GateFuture<'_> {
        Box::pin(async { Ok(()) })
    }
    fn status(&self) -> ClusterStatus {
        self.status.lock().unwrap().clone()
    }
    fn ready(&self) -> Result<(), String> {
        self.ready.lock().unwrap().clone()
    }
}

fn node(node_id: u32, http: SocketAddr, role: Role, lag_bytes: u64) -> ClusterNode {
    ClusterNode {
        node_id,
        http: http.to_string(),
        kafka: Some(format!("127.0.0.1:{}", 9090 + node_id)),
        role,
        in_sync: lag_bytes == 0,
        lag_bytes,
    }
}

/// Node 1 the master at `master`, node 2 a replica at `replica` (4096
/// bytes behind), as node `me` sees them in epoch 3.
fn two_nodes(me: u32, master: SocketAddr, replica: SocketAddr) -> ClusterStatus {
    ClusterStatus {
        epoch: 3,
        node_id: me,
        master: Some(1),
        nodes: vec![
            node(1, master, Role::Master, 0),
            node(2, replica, Role::Replica, 4096),
        ],
    }
}

/// A node's API over its own store, in the cluster of `gate` (none: a
/// single node).
async fn node_api(
    dir: &std::path::Path,
    gate: Option<Arc<FakeGate>>,
    admin_token: Option<&str>,
) -> (AppState, Router) {
    let settings = ApiSettings {
        broker: BrokerConfig {
            default_partitions: 1,
            ..BrokerConfig::default()
        },
        admin_token: admin_token.map(str::to_string),
        ..ApiSettings::default()
    };
    let broker_config = settings.broker.clone();
    let state = AppState::new(settings, dir.to_path_buf());
    let store = common::store_config(dir);
    let cleaner = CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    };
    let broker = tokio::task::spawn_blocking(move || Broker::open(&broker_config, store, cleaner))
        .await
        .unwrap()
        .unwrap();
    if let Some(gate) = gate {
        broker.join_cluster(gate as _).unwrap();
    }
    state.set_ready(broker);
    let router = tidelog_api::router(state.clone());
    (state, router)
}

/// Serves `router` on `listener` until the returned sender says stop.
fn serve_on(
    listener: tokio::net::TcpListener,
    state: &AppState,
    router: &Router,
) -> tokio::sync::watch::Sender<bool> {
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(serve(
        listener,
        router.clone(),
        state.clone(),
        LIMITS,
        None,
        stop_rx,
    ));
    stop
}

async fn close(state: &AppState) {
    let ready = state.take_ready(Duration::from_secs(10)).await.unwrap();
    let ready = ready.unwrap_or_else(|_| panic!("a request still holds the store"));
    tokio::task::spawn_blocking(move || ready.shutdown())
        .await
        .unwrap()
        .unwrap();
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// `status` and `error_code` of an error answer, and its message.
fn error(answer: &(StatusCode, axum::http::HeaderMap, String)) -> (u16, u64, String) {
    let body = parse(&answer.2);
    (
        answer.0.as_u16(),
        body["error_code"].as_u64().unwrap_or_default(),
        body["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// The partition's `[beginning, end)` on a node, `None` if the topic is
/// not there.
async fn offsets(router: &Router, topic: &str) -> Option<(u64, u64)> {
    let uri = format!("/topics/{topic}/partitions/0/offsets");
    let (status, _, body) = call(router, "GET", &uri, &[], None).await;
    if status == StatusCode::NOT_FOUND {
        return None;
    }
    assert_eq!(status, StatusCode::OK, "{body}");
    let body = parse(&body);
    Some((
        body["beginning_offset"].as_u64().unwrap(),
        body["end_offset"].as_u64().unwrap(),
    ))
}

fn records(values: &[&str]) -> Option<Value> {
    let records: Vec<Value> = values.iter().map(|v| json!({"value": v})).collect();
    Some(json!({ "records": records }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_is_a_cluster_of_one_and_shows_no_cluster_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (state, router) = node_api(dir.path(), None, None).await;
    let (status, _, body) = call(&router, "GET", "/v1/cluster", &[], None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        parse(&body),
        json!({"epoch": 0, "master": 0, "node_id": 0, "nodes": [{
            "node_id": 0, "http": "127.0.0.1:8080", "kafka": null, "role": "master",
            "in_sync": true, "lag_bytes": 0,
        }]})
    );
    let (status, _, body) = call(&router, "GET", "/status/ready", &[], None).await;
    assert_eq!(
        (status, parse(&body)),
        (StatusCode::OK, json!({"ready": true}))
    );
    let (_, _, metrics) = call(&router, "GET", "/metrics", &[], None).await;
    assert!(metrics.contains("tidelog_ready 1\n"), "{metrics}");
    for family in [
        "tidelog_cluster_epoch",
        "tidelog_cluster_is_master",
        "tidelog_insync_replicas",
        "tidelog_replica_lag_bytes",
        "tidelog_http_forwarded_total",
    ] {
        assert!(!metrics.contains(family), "{family} on a single node");
    }
    // A client's forwarded-by header means nothing to a single node.
    let (status, _, body) = call(
        &router,
        "POST",
        "/v3/clusters/tidelog/topics",
        &[(FORWARDED_BY, "5")],
        Some(json!({"topic_name": "t", "partitions_count": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    close(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_route_readiness_and_metrics_follow_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let master: SocketAddr = "10.0.0.1:8080".parse().unwrap();
    let replica: SocketAddr = "10.0.0.2:8080".parse().unwrap();
    let gate = FakeGate::new(false, two_nodes(2, master, replica));
    let (state, router) = node_api(dir.path(), Some(Arc::clone(&gate)), None).await;

    let (status, _, body) = call(&router, "GET", "/v1/cluster", &[], None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        parse(&body),
        json!({"epoch": 3, "master": 1, "node_id": 2, "nodes": [
            {"node_id": 1, "http": "10.0.0.1:8080", "kafka": "127.0.0.1:9091",
             "role": "master", "in_sync": true, "lag_bytes": 0},
            {"node_id": 2, "http": "10.0.0.2:8080", "kafka": "127.0.0.1:9092",
             "role": "replica", "in_sync": false, "lag_bytes": 4096},
        ]})
    );

    // Ready as the gate says, with its reason when not.
    let (status, _, _) = call(&router, "GET", "/status/ready", &[], None).await;
    assert_eq!(status, StatusCode::OK);
    *gate.ready.lock().unwrap() = Err("not copying from the master yet".into());
    let answer = call(&router, "GET", "/status/ready", &[], None).await;
    let (status, code, message) = error(&answer);
    assert_eq!((status, code), (503, 50301));
    assert!(
        message.contains("not copying from the master yet"),
        "{message}"
    );

    // The replica's metrics, then the same node as master.
    let (_, _, metrics) = call(&router, "GET", "/metrics", &[], None).await;
    for line in [
        "tidelog_cluster_epoch 3\n",
        "tidelog_cluster_is_master 0\n",
        "tidelog_insync_replicas 2\n",
        "# TYPE tidelog_replica_lag_bytes gauge\n",
        "tidelog_replica_lag_bytes{node_id=\"2\"} 4096\n",
        "tidelog_http_forwarded_total 0\n",
    ] {
        assert!(metrics.contains(line), "{line}{metrics}");
    }
    assert!(
        !metrics.contains("tidelog_replica_lag_bytes{node_id=\"1\"}"),
        "the master is no replica: {metrics}"
    );
    gate.set(|s| {
        s.node_id = 1;
        s.epoch = 4;
    });
    let (_, _, metrics) = call(&router, "GET", "/metrics", &[], None).await;
    assert!(metrics.contains("tidelog_cluster_epoch 4\n"), "{metrics}");
    assert!(
        metrics.contains("tidelog_cluster_is_master 1\n"),
        "{metrics}"
    );
    close(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicas_writes_are_answered_by_the_master_and_land_there_only() {
    let (master_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let master_addr = master_listener.local_addr().unwrap();
    let replica_addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let master_gate = FakeGate::new(true, two_nodes(1, master_addr, replica_addr));
    let replica_gate = FakeGate::new(false, two_nodes(2, master_addr, replica_addr));
    // The master wants the admin token; the replica has none of its own,
    // so whatever checks it is the master's, on the caller's header.
    let (master_state, master) =
        node_api(master_dir.path(), Some(master_gate), Some("secret")).await;
    let _stop = serve_on(master_listener, &master_state, &master);
    let (replica_state, replica) =
        node_api(replica_dir.path(), Some(Arc::clone(&replica_gate)), None).await;

    // An admin write without the token: the master's 401, passed back.
    let create = json!({"topic_name": "t", "partitions_count": 1});
    let answer = call(
        &replica,
        "POST",
        "/v3/clusters/tidelog/topics",
        &[],
        Some(create.clone()),
    )
    .await;
    assert_eq!(error(&answer).1, 40101, "{}", answer.2);
    assert_eq!(offsets(&master, "t").await, None);
    // With it: created on the master, not here.
    let (status, headers, body) = call(
        &replica,
        "POST",
        "/v3/clusters/tidelog/topics",
        &[("authorization", "Bearer secret")],
        Some(create),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(parse(&body)["topic_name"], "t", "{body}");
    assert_eq!(offsets(&master, "t").await, Some((0, 0)));
    assert_eq!(offsets(&replica, "t").await, None, "nothing written here");

    // A produce: the master's offsets, in its content type; the records
    // on the master. The same produce to the master answers the next ones.
    let (status, headers, body) =
        call(&replica, "POST", "/topics/t", &[], records(&["a", "b"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(headers["content-type"], "application/vnd.kafka.v2+json");
    let offsets_of = |body: &str| -> Vec<u64> {
        parse(body)["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["offset"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(offsets_of(&body), [0, 1]);
    assert_eq!(offsets(&master, "t").await, Some((0, 2)));
    let (_, _, body) = call(&master, "POST", "/topics/t", &[], records(&["c"])).await;
    assert_eq!(offsets_of(&body), [2]);
    let values_from = |offset: u64| {
        let master = master.clone();
        async move {
            let uri = format!("/topics/t/partitions/0/records?offset={offset}&timeout=10000");
            let (_, _, body) = call(
                &master,
                "GET",
                &uri,
                &[("accept", "application/json")],
                None,
            )
            .await;
            parse(&body)
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["value"].clone())
                .collect::<Vec<Value>>()
        }
    };
    assert_eq!(values_from(0).await[..2], [json!("a"), json!("b")]);
    assert_eq!(values_from(2).await, [json!("c")]);
    // A client error of the master's, as the master gave it.
    let answer = call(&replica, "POST", "/topics/nope", &[], records(&["x"])).await;
    assert_eq!(error(&answer).1, 40401, "{}", answer.2);

    // Consumer instances live on the master: created there, its base_uri.
    let (status, _, body) = call(
        &replica,
        "POST",
        "/consumers/g",
        &[],
        Some(json!({"name": "i", "format": "json"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(parse(&body)["instance_id"], "i");
    let (status, _, body) = call(
        &replica,
        "GET",
        "/consumers/g/instances/i/subscription",
        &[],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        replica_state.consumers().unwrap().instance_count(),
        0,
        "no instance here"
    );

    // Reads are this node's own.
    let (_, _, body) = call(&replica, "GET", "/topics", &[], None).await;
    assert_eq!(parse(&body), json!([]), "{body}");
    let (_, _, metrics) = call(&replica, "GET", "/metrics", &[], None).await;
    assert!(
        metrics.contains("tidelog_http_forwarded_total 6\n"),
        "{metrics}"
    );

    // No master known, then a master not among the live nodes, then one
    // that does not answer: 503/50301 saying so, nothing written.
    replica_gate.set(|s| s.master = None);
    let answer = call(&replica, "POST", "/topics/t", &[], records(&["x"])).await;
    let (status, code, message) = error(&answer);
    assert_eq!((status, code), (503, 50301));
    assert!(message.contains("knows no master"), "{message}");
    replica_gate.set(|s| s.master = Some(9));
    let answer = call(&replica, "POST", "/topics/t", &[], records(&["x"])).await;
    assert_eq!(error(&answer).1, 50301);
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_addr = closed.local_addr().unwrap();
    drop(closed);
    replica_gate.set(|s| {
        s.master = Some(1);
        s.nodes[0].http = closed_addr.to_string();
    });
    let answer = call(&replica, "POST", "/topics/t", &[], records(&["x"])).await;
    let (status, code, message) = error(&answer);
    assert_eq!((status, code), (503, 50301));
    assert!(
        message.contains(&format!(
            "could not forward this write to the master, node 1 at {closed_addr}"
        )),
        "{message}"
    );
    assert_eq!(offsets(&master, "t").await, Some((0, 3)));
    let (_, _, metrics) = call(&replica, "GET", "/metrics", &[], None).await;
    assert!(
        metrics.contains("tidelog_http_forward_failures_total 3\n"),
        "{metrics}"
    );

    close(&replica_state).await;
    close(&master_state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_write_is_never_forwarded_again() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let b_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let b_addr = b_listener.local_addr().unwrap();
    let a_addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
    // Two confused replicas: A (node 2) takes B for the master, and B
    // (node 1) takes A.
    let a_gate = FakeGate::new(false, two_nodes(2, b_addr, a_addr));
    let mut b_status = two_nodes(1, b_addr, a_addr);
    b_status.master = Some(2);
    let b_gate = FakeGate::new(false, b_status);
    let (b_state, b) = node_api(b_dir.path(), Some(b_gate), None).await;
    let _stop = serve_on(b_listener, &b_state, &b);
    let (a_state, a) = node_api(a_dir.path(), Some(a_gate), None).await;

    // A forwards to B, which refuses to forward it back: B's 503, as B
    // gave it.
    let answer = call(
        &a,
        "POST",
        "/v3/clusters/tidelog/topics",
        &[],
        Some(json!({"topic_name": "t", "partitions_count": 1})),
    )
    .await;
    let (status, code, message) = error(&answer);
    assert_eq!((status, code), (503, 50301));
    assert!(
        message.contains("node 2 forwarded this write to node 1"),
        "{message}"
    );
    assert!(message.contains("not forwarded again"), "{message}");
    // A request that says it was forwarded is not forwarded by A either.
    let answer = call(
        &a,
        "POST",
        "/topics/t",
        &[(FORWARDED_BY, "1")],
        records(&["x"]),
    )
    .await;
    let (status, code, message) = error(&answer);
    assert_eq!((status, code), (503, 50301));
    assert!(
        message.contains("node 1 forwarded this write to node 2"),
        "{message}"
    );
    assert_eq!(offsets(&a, "t").await, None);
    assert_eq!(offsets(&b, "t").await, None);
    close(&a_state).await;
    close(&b_state).await;
}
