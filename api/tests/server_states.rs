//! Answers that depend on the server's state, not on the request: 503/50301
//! while recovery runs, then 200 once the store is published; 500/50001
//! when the store fails under a request, and the server still answering
//! after it; 503/50302 while dispatch is stalled, 503/50303 when a sync
//! flush hangs, 413/41301 at the record limit a small segment allows;
//! reads that wait for dispatch to show what was acknowledged before them;
//! consumer lag in metrics and stats. The router runs in process (the real binary finishes recovery
//! too fast to catch it in the act, and cannot be made to fail a write).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use serde_json::{json, Value};
use tidelog_api::{ApiSettings, AppState, Broker};
use tidelog_broker::fault::{StoreFaultPoint as FaultPoint, StoreFaults as Faults};
use tidelog_broker::store::{CleanerConfig, StoreConfig};
use tidelog_broker::BrokerConfig;

async fn call(
    router: &Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, String) {
    let (status, _, body) = common::call_with(router, method, uri, &[], body).await;
    (status, body)
}

/// Status and error code of an error answer.
fn error_code(answer: &(StatusCode, String)) -> (u16, u64) {
    let body: Value =
        serde_json::from_str(&answer.1).unwrap_or_else(|e| panic!("not JSON ({e}): {}", answer.1));
    (answer.0.as_u16(), body["error_code"].as_u64().unwrap_or(0))
}

fn settings() -> ApiSettings {
    ApiSettings {
        broker: BrokerConfig {
            auto_create_topics: true,
            default_partitions: 1,
            ..BrokerConfig::default()
        },
        ..ApiSettings::default()
    }
}

use common::store_config;

async fn open(dir: &std::path::Path, faults: Option<Arc<Faults>>) -> Broker {
    open_with(store_config(dir), faults).await
}

/// Opens the broker, with `faults` installed in its store if given.
async fn open_with(config: StoreConfig, faults: Option<Arc<Faults>>) -> Broker {
    let cleaner = CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    };
    let faults = tidelog_broker::fault::Faults {
        store: faults,
        cleaner: None,
    };
    tokio::task::spawn_blocking(move || {
        Broker::open_with_faults(&settings().broker, config, cleaner, faults)
    })
    .await
    .unwrap()
    .unwrap()
}

async fn close(state: &AppState) -> Result<(), tidelog_broker::store::StoreError> {
    let ready = state.take_ready(Duration::from_secs(10)).await.unwrap();
    let ready = ready.unwrap_or_else(|_| panic!("a request still holds the store"));
    tokio::task::spawn_blocking(move || ready.shutdown())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_recovery_every_store_route_is_503_50301_then_all_serve() {
    let dir = tempfile::tempdir().unwrap();
    let state = AppState::new(settings(), dir.path().to_path_buf());
    let router = tidelog_api::router(state.clone());

    // Before the store is published: readiness, records, admin and offsets
    // answer 503/50301; metrics answer, saying not ready.
    let produce = json!({"records": [{"value": "v"}]});
    for (method, uri, body) in [
        ("GET", "/status/ready", None),
        ("POST", "/topics/t", Some(produce.clone())),
        ("GET", "/topics/t/partitions/0/records?offset=0", None),
        ("GET", "/topics", None),
        ("GET", "/v3/clusters/tidelog/topics", None),
        ("GET", "/v3/clusters/tidelog/stats", None),
        ("GET", "/consumer-groups/g/offsets", None),
        ("POST", "/consumers/g", Some(json!({}))),
        ("GET", "/consumers/g/instances/i/records", None),
    ] {
        let answer = call(&router, method, uri, body).await;
        assert_eq!(
            error_code(&answer),
            (503, 50301),
            "{method} {uri}: {}",
            answer.1
        );
    }
    let (status, text) = call(&router, "GET", "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("\ntidelog_ready 0\n"), "{text}");

    state.set_ready(open(dir.path(), None).await);
    let (status, body) = call(&router, "GET", "/status/ready", None).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, r#"{"ready":true}"#)
    );
    let (status, body) = call(&router, "POST", "/topics/t", Some(produce)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, text) = call(&router, "GET", "/metrics", None).await;
    assert!(text.contains("\ntidelog_ready 1\n"), "{text}");
    // The consumer-instance manager started with the broker, and a clean
    // close stops it (its weak hold lets the broker be taken back).
    let (status, body) = call(&router, "POST", "/consumers/g", Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    close(&state).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_is_503_50301_ready_says_so_and_the_server_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let state = AppState::new(settings(), dir.path().to_path_buf());
    state.set_ready(open(dir.path(), Some(Arc::clone(&faults))).await);
    let router = tidelog_api::router(state.clone());
    let produce = |v: &str| Some(json!({"records": [{"value": v}]}));

    let (status, body) = call(&router, "POST", "/topics/t", produce("kept")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The disk refuses the next write (a read-only disk, issue 35 item
    // 10): the request fails with the store's message, and the log refuses
    // writes from then on (poisoned until a restart runs recovery) with the
    // same documented code, 503/50301 (not ready for writes), not a bare
    // 500: no hang, nothing half-written.
    faults.fail_after(FaultPoint::CommitLogWrite, 0);
    for attempt in ["lost", "after"] {
        let answer = call(&router, "POST", "/topics/t", produce(attempt)).await;
        assert_eq!(error_code(&answer), (503, 50301), "{attempt}: {}", answer.1);
        assert!(answer.1.contains("refuses appends"), "{}", answer.1);
    }
    // Reads, admin and readiness keep answering; only the acknowledged
    // record is there.
    let (status, body) = call(
        &router,
        "GET",
        "/topics/t/partitions/0/records?offset=0&timeout=10000",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let records: Value = serde_json::from_str(&body).unwrap();
    let values: Vec<&Value> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["value"])
        .collect();
    assert_eq!(values, [&json!("kept")]);
    // Ready says what the store says: it refuses writes (it answered 200
    // while every produce failed).
    let answer = call(&router, "GET", "/status/ready", None).await;
    assert_eq!(error_code(&answer), (503, 50301), "{}", answer.1);
    assert!(answer.1.contains("write to"), "{}", answer.1);
    let (status, _) = call(&router, "GET", "/v3/clusters/tidelog/topics/t", None).await;
    assert_eq!(status, StatusCode::OK);
    let (_, text) = call(&router, "GET", "/metrics", None).await;
    assert!(
        // Two refused produce requests and the not-ready answer.
        text.contains("tidelog_http_responses_total{class=\"5xx\"} 3"),
        "{text}"
    );
    // A poisoned log cannot write its checkpoint: shutdown may say so; the
    // next start runs recovery.
    let _ = close(&state).await;
}

/// A published store over `config` and the router in front of it.
async fn serving(config: StoreConfig, faults: Option<Arc<Faults>>) -> (AppState, Router) {
    let state = AppState::new(settings(), config.data_dir.clone());
    state.set_ready(open_with(config, faults).await);
    let router = tidelog_api::router(state.clone());
    (state, router)
}

/// A produce body of one record with the JSON string `value`.
fn one_record(value: &str) -> Option<Value> {
    Some(json!({"records": [{"value": value}]}))
}

/// Polls `GET uri` until its status is `want` (bounded; a noisy machine).
async fn wait_status(router: &Router, uri: &str, want: StatusCode) -> (StatusCode, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let answer = call(router, "GET", uri, None).await;
        if answer.0 == want {
            return answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{uri} never answered {want}: {}",
            answer.1
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn values(router: &Router) -> Vec<Value> {
    let (status, body) = call(
        router,
        "GET",
        "/topics/t/partitions/0/records?offset=0&timeout=10000",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    values_of(&body)
}

/// The `value` of every record of a JSON array answer (fetch, records
/// call, query by key).
fn values_of(body: &str) -> Vec<Value> {
    let records: Value = serde_json::from_str(body).unwrap();
    records
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {body}"))
        .iter()
        .map(|r| r["value"].clone())
        .collect()
}

/// [`values`] once at least `n` records are visible (dispatch makes them
/// so a moment after a produce is answered), or what is there after 30 s.
async fn values_once_there(router: &Router, n: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut seen = values(router).await;
    while seen.len() < n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
        seen = values(router).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_dispatch_is_503_50302_for_produce_and_readiness_until_it_heals() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let mut config = store_config(dir.path());
    config.dispatch_stall_ms = 200;
    let (state, router) = serving(config, Some(Arc::clone(&faults))).await;
    let (status, body) = call(&router, "POST", "/topics/t", one_record("before")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(values(&router).await, [json!("before")]);

    // Every sink hand-over fails from now on. Not yet stalled: taken.
    faults.fail_after(FaultPoint::Dispatch, 0);
    let (status, body) = call(&router, "POST", "/topics/t", one_record("late")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer = wait_status(&router, "/status/ready", StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(error_code(&answer), (503, 50302), "{}", answer.1);
    assert!(answer.1.contains("dispatch stalled"), "{}", answer.1);
    let answer = call(&router, "POST", "/topics/t", one_record("refused")).await;
    assert_eq!(error_code(&answer), (503, 50302), "{}", answer.1);
    assert!(
        answer
            .1
            .contains("dispatch stalled: records would not become visible"),
        "{}",
        answer.1
    );
    let (status, body) = call(&router, "GET", "/v3/clusters/tidelog/stats", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stats: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stats["dispatch_stalled"], json!(true), "{body}");
    assert_eq!(stats["dispatch_stalls"], json!(1), "{body}");
    let (_, text) = call(&router, "GET", "/metrics", None).await;
    assert!(text.contains("\ntidelog_dispatch_stalled 1\n"), "{text}");
    assert!(
        text.contains("\ntidelog_dispatch_stalls_total 1\n"),
        "{text}"
    );

    // The sink heals: the retry dispatches what was taken, produce and
    // readiness answer again, by themselves.
    faults.heal(FaultPoint::Dispatch);
    wait_status(&router, "/status/ready", StatusCode::OK).await;
    let (status, body) = call(&router, "POST", "/topics/t", one_record("after")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        values_once_there(&router, 3).await,
        [json!("before"), json!("late"), json!("after")]
    );
    let (_, text) = call(&router, "GET", "/metrics", None).await;
    assert!(text.contains("\ntidelog_dispatch_stalled 0\n"), "{text}");
    close(&state).await.unwrap();
}

/// Heals a hung fault point when dropped.
struct HealOnDrop(Arc<Faults>, FaultPoint);

impl Drop for HealOnDrop {
    fn drop(&mut self) {
        self.0.heal(self.1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_begun_after_an_acknowledged_produce_wait_until_it_is_fetchable() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (state, router) = serving(store_config(dir.path()), Some(Arc::clone(&faults))).await;
    let (status, body) = call(&router, "POST", "/topics/t", one_record("first")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(values_once_there(&router, 1).await, [json!("first")]);

    // The dispatcher stops before its next hand-over to the indexes.
    // Produce does not wait for dispatch: the record is acknowledged.
    faults.hang(FaultPoint::Dispatch);
    // Dropped before the broker (declared after it), also when an assert
    // fails: a broker cannot close with its dispatcher hung.
    let _heal = HealOnDrop(Arc::clone(&faults), FaultPoint::Dispatch);
    let keyed = json!({"records": [{"key": "k", "value": "second"}]});
    let (status, body) = call(&router, "POST", "/topics/t", Some(keyed)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while faults.blocked(FaultPoint::Dispatch) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "dispatch never hung"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // A fetch that must answer at once (timeout 0) and the end offset,
    // both asked after that acknowledgement, do not answer without it.
    let get = |uri: &'static str| {
        let router = router.clone();
        tokio::spawn(async move { call(&router, "GET", uri, None).await })
    };
    let fetch = get("/topics/t/partitions/0/records?offset=1&timeout=0");
    let offsets = get("/topics/t/partitions/0/offsets");
    let by_key = get("/topics/t/records?key=%22k%22");
    // A reset to the end, as a read: the end it commits covers the
    // acknowledged record.
    let reset = {
        let router = router.clone();
        let body = json!({"topic": "t", "to": "end"});
        tokio::spawn(async move {
            call(
                &router,
                "POST",
                "/consumer-groups/g/offsets:reset",
                Some(body),
            )
            .await
        })
    };
    // Without the wait each answers within a millisecond; with it none
    // can before the heal (a slow machine only makes this pass vacuously).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !fetch.is_finished(),
        "fetch answered without the acknowledged record"
    );
    assert!(
        !offsets.is_finished(),
        "offsets answered without the acknowledged record"
    );
    assert!(
        !by_key.is_finished(),
        "the key query answered without the acknowledged record"
    );
    assert!(
        !reset.is_finished(),
        "the reset answered without the acknowledged record"
    );

    faults.heal(FaultPoint::Dispatch);
    let (status, body) = fetch.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(values_of(&body), [json!("second")], "{body}");
    let (status, body) = offsets.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let offsets: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(offsets["end_offset"], json!(2), "{body}");
    let (status, body) = by_key.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(values_of(&body), [json!("second")], "{body}");
    let (status, body) = reset.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let reset: Value = serde_json::from_str(&body).unwrap();
    let partition_0 = reset["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["partition"] == json!(0))
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(partition_0["offset"], json!(2), "{body}");
    close(&state).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_requested_after_an_acknowledged_produce_cleans_it() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (state, router) = serving(store_config(dir.path()), Some(Arc::clone(&faults))).await;
    let create = json!({"topic_name": "c", "partitions_count": 1,
        "configs": [{"name": "cleanup.policy", "value": "compact"}]});
    let (status, body) = call(&router, "POST", "/v3/clusters/tidelog/topics", Some(create)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // Three values of one key, acknowledged while the dispatcher (which
    // copies them into the compacted log) is held.
    faults.hang(FaultPoint::Dispatch);
    let _heal = HealOnDrop(Arc::clone(&faults), FaultPoint::Dispatch);
    let records = json!({"records": [{"key": "a", "value": 1}, {"key": "a", "value": 2},
        {"key": "a", "value": 3}]});
    let (status, body) = call(&router, "POST", "/topics/c", Some(records)).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The compaction waits for them to be copied before it rolls and cleans.
    let compaction = {
        let router = router.clone();
        tokio::spawn(async move {
            let ask = json!({"wait": true, "roll_active": true});
            call(
                &router,
                "POST",
                "/v3/clusters/tidelog/topics/c/compaction",
                Some(ask),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !compaction.is_finished(),
        "compaction ran before the acknowledged records were copied"
    );
    faults.heal(FaultPoint::Dispatch);
    let (status, body) = compaction.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");

    let (status, body) = call(
        &router,
        "GET",
        "/topics/c/partitions/0/records?offset=0&timeout=1000",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        values_of(&body),
        [json!(3)],
        "one record per key after the pass: {body}"
    );
    close(&state).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_sync_flush_is_503_50303_and_the_record_is_still_appended() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let mut config = store_config(dir.path());
    config.flush = tidelog_broker::store::FlushMode::Sync;
    // Long enough that the healthy produces before and after the hang
    // flush in time on a loaded machine (at 100 ms they did not, once),
    // short enough for a test: the hung one waits this long.
    config.sync_flush_timeout_ms = 2_000;
    let (state, router) = serving(config, Some(Arc::clone(&faults))).await;
    let (status, body) = call(&router, "POST", "/topics/t", one_record("durable")).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    faults.hang(FaultPoint::CommitLogFlush);
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        call(&router, "POST", "/topics/t", one_record("unknown")),
    )
    .await
    .expect("a produce hung with the fsync");
    assert_eq!(error_code(&answer), (503, 50303), "{}", answer.1);
    assert!(
        answer
            .1
            .contains("flush timed out: the record is appended but its durability is unknown"),
        "{}",
        answer.1
    );
    // The fsync returns: the server goes on, and the timed-out record is
    // there (a client that retried would see it twice).
    faults.heal(FaultPoint::CommitLogFlush);
    let (status, body) = call(&router, "POST", "/topics/t", one_record("later")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Visible once dispatched, a moment after the answer.
    assert_eq!(
        values_once_there(&router, 3).await,
        [json!("durable"), json!("unknown"), json!("later")]
    );
    close(&state).await.unwrap();
}

/// This process's OS threads (`/proc/self/status`).
fn os_threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line["Threads:".len()..].trim().parse().unwrap()
}

/// Many sync-flush produces waiting on one fsync hold no thread each: they
/// await the flushed position (a waker each), so the process's thread count
/// stays small while all of them wait (a blocking thread per waiter, as
/// before, is one thread per produce); and every one is answered 200 once
/// the fsync returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_sync_produces_hold_no_thread_each_and_all_answer_after_the_fsync() {
    const PRODUCES: usize = 500;
    // Two runtime workers, the store's and broker's named threads, the
    // test harness and a few blocking threads from opening: far below one
    // per waiting produce.
    const MAX_THREADS: usize = 64;
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let mut config = store_config(dir.path());
    config.flush = tidelog_broker::store::FlushMode::Sync;
    // Far past the test: every answer below is the fsync's, none a timeout.
    config.sync_flush_timeout_ms = 300_000;
    let (state, router) = serving(config, Some(Arc::clone(&faults))).await;
    // The topic exists before the fsync hangs (an auto-create blocks).
    let (status, body) = call(&router, "POST", "/topics/t", one_record("first")).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    faults.hang(FaultPoint::CommitLogFlush);
    let produces: Vec<_> = (0..PRODUCES)
        .map(|i| {
            let router = router.clone();
            tokio::spawn(async move {
                call(&router, "POST", "/topics/t", one_record(&i.to_string())).await
            })
        })
        .collect();
    // Every produce appended and awaits the fsync, none answered.
    let broker = state.ready().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let waiting = broker.store().stats().sync_flush_waiters;
        if waiting == PRODUCES {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{waiting} of {PRODUCES} produces await the fsync"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let threads = os_threads();
    let none_answered = produces.iter().all(|p| !p.is_finished());
    let hung = faults.blocked(FaultPoint::CommitLogFlush);
    // Nothing is fetchable before its fsync: the end offset still counts
    // the first record only (a power loss now would take the others, and
    // their offsets would be handed out again).
    let (_, body) = call(&router, "GET", "/topics/t/partitions/0/offsets", None).await;
    let end_while_hung: Value = serde_json::from_str(&body).unwrap();

    // Healed before the checks: a failed check then ends the test instead
    // of leaving waiters behind the hung fsync.
    faults.heal(FaultPoint::CommitLogFlush);
    for produce in produces {
        let (status, body) = tokio::time::timeout(Duration::from_secs(60), produce)
            .await
            .expect("a produce never answered after the fsync")
            .unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // Once answered, every record is fetchable (read-your-writes).
    let (_, body) = call(&router, "GET", "/topics/t/partitions/0/offsets", None).await;
    let end_after: Value = serde_json::from_str(&body).unwrap();
    drop(broker);
    close(&state).await.unwrap();
    assert_eq!(hung, 1, "one fsync hung");
    assert!(none_answered, "answered before the fsync");
    assert_eq!(
        end_while_hung["end_offset"],
        json!(1),
        "visible before the fsync"
    );
    assert_eq!(end_after["end_offset"], json!(PRODUCES + 1));
    assert!(
        threads < MAX_THREADS,
        "{threads} OS threads with {PRODUCES} sync produces waiting"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_segments_start_with_the_default_record_limit_clamped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = store_config(dir.path());
    config.commitlog_segment_bytes = 65536;
    assert_eq!(config.max_message_bytes, 1 << 20, "the default");
    let limit = config.record_payload_max();
    assert!(limit < 65536);
    let (state, router) = serving(config, None).await;
    // A JSON string value is stored with its quotes.
    let record = |len: u64| Some(json!({"records": [{"value": "x".repeat(len as usize - 2)}]}));
    let (status, body) = call(&router, "POST", "/topics/t", record(limit)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The topic's max.message.bytes (1 MiB) is larger: the store's clamped
    // limit is the one named.
    let answer = call(&router, "POST", "/topics/t", record(limit + 1)).await;
    assert_eq!(error_code(&answer), (413, 41301), "{}", answer.1);
    assert!(
        answer
            .1
            .contains(&format!("over the {limit} of the store's record limit")),
        "{}",
        answer.1
    );
    assert!(answer.1.contains("clamped"), "{}", answer.1);
    close(&state).await.unwrap();
}

/// Consumer lag and the group coordinator's counts in `/metrics` and in
/// stats: a commit below a partition's end shows `end − committed`, one
/// past it (the ext route allows it) shows 0, never negative.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_lag_is_end_minus_committed_in_metrics_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let (state, router) = serving(store_config(dir.path()), None).await;
    for value in ["a", "b", "c"] {
        let (status, body) = call(&router, "POST", "/topics/t", one_record(value)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // Records count once dispatched (the end the fetch and offsets routes
    // answer): wait for all three, bounded.
    assert_eq!(values_once_there(&router, 3).await.len(), 3);
    for (group, offset) in [("behind", 1), ("ahead", 5)] {
        let commit = json!({"offsets": [{"topic": "t", "partition": 0, "offset": offset}]});
        let uri = format!("/consumer-groups/{group}/offsets");
        let (status, body) = call(&router, "POST", &uri, Some(commit)).await;
        assert!(status.is_success(), "{status}: {body}");
    }

    let (status, text) = call(&router, "GET", "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    for line in [
        "# TYPE tidelog_consumer_group_lag gauge\n",
        "\ntidelog_consumer_group_lag{group=\"behind\",topic=\"t\",partition=\"0\"} 2\n",
        "\ntidelog_consumer_group_lag{group=\"ahead\",topic=\"t\",partition=\"0\"} 0\n",
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
            {"group": "ahead", "topic": "t", "partition": 0, "committed_offset": 5, "end_offset": 3, "lag": 0},
            {"group": "behind", "topic": "t", "partition": 0, "committed_offset": 1, "end_offset": 3, "lag": 2},
        ])
    );
    assert_eq!(stats["consumer_group_members"], json!(0));
    assert_eq!(stats["consumer_group_rebalances"], json!(0));
    close(&state).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_records_call_with_timeout_0_after_an_acknowledged_produce_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (state, router) = serving(store_config(dir.path()), Some(Arc::clone(&faults))).await;
    let (status, body) = call(&router, "POST", "/topics/t", one_record("first")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let base = "/consumers/g/instances/i";
    let create = json!({"name": "i", "format": "json", "auto.offset.reset": "earliest"});
    let (status, body) = call(&router, "POST", "/consumers/g", Some(create)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let assign = json!({"partitions": [{"topic": "t", "partition": 0}]});
    let (status, body) = call(
        &router,
        "POST",
        &format!("{base}/assignments"),
        Some(assign),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let uri = format!("{base}/records?timeout=0");
    let accept = [("accept", "application/vnd.kafka.json.v2+json")];
    let (status, _, body) = common::call_with(&router, "GET", &uri, &accept, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(values_of(&body), [json!("first")], "{body}");

    // Acknowledged while the dispatcher is held before indexing it.
    faults.hang(FaultPoint::Dispatch);
    let _heal = HealOnDrop(Arc::clone(&faults), FaultPoint::Dispatch);
    let keyed = json!({"records": [{"key": "k", "value": "second"}]});
    let (status, body) = call(&router, "POST", "/topics/t", Some(keyed)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while faults.blocked(FaultPoint::Dispatch) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "dispatch never hung"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A records call with timeout 0 begun after the acknowledgement
    // answers with the record, once it is fetchable (not empty at once).
    let polled = {
        let router = router.clone();
        tokio::spawn(async move { common::call_with(&router, "GET", &uri, &accept, None).await })
    };
    // Without the wait it answers `[]` within a millisecond (a slow
    // machine only makes this pass vacuously).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !polled.is_finished(),
        "the records call answered without the acknowledged record"
    );
    faults.heal(FaultPoint::Dispatch);
    let (status, _, body) = polled.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(values_of(&body), [json!("second")], "{body}");
    let (status, body) = call(&router, "DELETE", base, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    close(&state).await.unwrap();
}

/// Threads of a runtime built by [`counted_runtime`] alive now.
struct ThreadCount(Arc<std::sync::atomic::AtomicI64>);

impl ThreadCount {
    fn alive(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A two-worker runtime that counts its live threads (workers and the
/// blocking pool's).
fn counted_runtime() -> (tokio::runtime::Runtime, ThreadCount) {
    use std::sync::atomic::{AtomicI64, Ordering};
    let alive = Arc::new(AtomicI64::new(0));
    let (up, down) = (Arc::clone(&alive), Arc::clone(&alive));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            up.fetch_add(1, Ordering::SeqCst);
        })
        .on_thread_stop(move || {
            down.fetch_sub(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    (runtime, ThreadCount(alive))
}

/// Produce requests held back by the dispatch-lag bound (a stuck sink)
/// await the dispatcher: none of them holds a thread of the blocking pool
/// meanwhile (each did before, so a long lag grew the pool to one thread
/// per waiting request), and all are answered once it moves again.
#[test]
fn produce_held_by_the_dispatch_lag_bound_holds_no_thread() {
    use tidelog_broker::store::DISPATCH_LAG_MAX_BYTES;
    const HELD: usize = 16;
    let (runtime, threads) = counted_runtime();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let faults = Arc::new(Faults::default());
        let mut config = store_config(dir.path());
        config.commitlog_segment_bytes = 8 << 20;
        let (state, router) = serving(config, Some(Arc::clone(&faults))).await;
        let (status, body) = call(&router, "POST", "/topics/t", one_record("first")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let broker = state.ready().unwrap();

        // The dispatcher stops; appends take the lag past the bound.
        faults.hang(FaultPoint::Dispatch);
        let _heal = HealOnDrop(Arc::clone(&faults), FaultPoint::Dispatch);
        let big = json!({"records": [{"value": "x".repeat(512 << 10)}]});
        let mut filled = 0u64;
        while broker.store().stats().dispatch_lag_bytes <= DISPATCH_LAG_MAX_BYTES {
            let (status, body) = call(&router, "POST", "/topics/t", Some(big.clone())).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            filled += 1;
        }
        let waits_before = broker.store().stats().dispatch_lag_waits;
        let alive_before = threads.alive();

        let held: Vec<_> = (0..HELD)
            .map(|n| {
                let router = router.clone();
                let value = format!("held {n}");
                tokio::spawn(
                    async move { call(&router, "POST", "/topics/t", one_record(&value)).await },
                )
            })
            .collect();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while broker.store().stats().dispatch_lag_waits < waits_before + HELD as u64 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the produce requests were never held by the lag bound"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let grown = threads.alive() - alive_before;
        assert!(
            grown < (HELD / 2) as i64,
            "{HELD} held produce requests took {grown} more threads"
        );
        assert!(held.iter().all(|h| !h.is_finished()));

        faults.heal(FaultPoint::Dispatch);
        for h in held {
            let (status, body) = h.await.unwrap();
            assert_eq!(status, StatusCode::OK, "{body}");
        }
        assert!(broker.store().wait_dispatched(Duration::from_secs(60)));
        assert_eq!(broker.store().offsets("t", 0).1, 1 + filled + HELD as u64);
        drop(broker);
        close(&state).await.unwrap();
    });
}

/// Issue 35's livelock, through the API: with CommitLog segment creation
/// failing for good (a full disk, no file descriptors), `/status/ready`
/// answers at once and says writes are refused, produce is refused with
/// the documented 507/50701 instead of hanging, a retention pass runs,
/// and produce works again (ready too) once creation does, without a
/// restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_segment_creation_is_507_ready_answers_and_writes_resume() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::store_config(dir.path());
    config.commitlog_segment_bytes = 64 << 10;
    config.preallocate_next_segment = true;
    let faults = Arc::new(Faults::default());
    let (state, router) = serving(config, Some(Arc::clone(&faults))).await;
    let big = "v".repeat(8 << 10);
    let (status, body) = call(&router, "POST", "/topics/t", one_record(&big)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    faults.fail_after(FaultPoint::SegmentCreate, 0);
    // Fill what is made; then every produce is refused, each at once.
    let mut acked = 1;
    let refused = loop {
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            call(&router, "POST", "/topics/t", one_record(&big)),
        )
        .await
        .expect("produce hung while segment creation fails");
        if answer.0 != StatusCode::OK {
            break answer;
        }
        acked += 1;
        assert!(acked < 200, "produce was never refused");
    };
    assert_eq!(error_code(&refused), (507, 50701), "{}", refused.1);
    for _ in 0..5 {
        let ready = tokio::time::timeout(
            Duration::from_secs(2),
            call(&router, "GET", "/status/ready", None),
        )
        .await
        .expect("/status/ready did not answer within 2 s");
        assert_eq!(error_code(&ready), (507, 50701), "{}", ready.1);
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            call(&router, "POST", "/topics/t", one_record(&big)),
        )
        .await
        .expect("produce hung");
        assert_eq!(error_code(&answer), (507, 50701), "{}", answer.1);
    }
    let (status, body) = tokio::time::timeout(
        Duration::from_secs(20),
        call(
            &router,
            "POST",
            "/v3/clusters/tidelog/retention",
            Some(json!({"force": true})),
        ),
    )
    .await
    .expect("retention hung");
    assert_eq!(status, StatusCode::OK, "{body}");
    faults.heal(FaultPoint::SegmentCreate);
    wait_status(&router, "/status/ready", StatusCode::OK).await;
    let (status, body) = call(&router, "POST", "/topics/t", one_record(&big)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    close(&state).await.unwrap();
}
