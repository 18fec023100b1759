//! Tiered storage against a real S3-compatible server (SeaweedFS,
//! `tidelog_integration_tests::s3`) and the real binary: old offsets read
//! back from the bucket exactly as written (HTTP and a Kafka client), an
//! outage of the object store mid-upload and mid-read (nothing lost,
//! 503/50304 and KAFKA_STORAGE_ERROR for remote reads only, uploads
//! resumed), `kill -9` of tidelog during uploads at several points (the
//! manifest invariants hold), and a restore into a fresh data dir, offline
//! and at start, of records, a compact table and a group's offsets.
//!
//! Each test has its own SeaweedFS (a few seconds to start) and bucket
//! prefix. Uploads are triggered with `POST .../tiering:upload`; every
//! wait polls a condition with a bounded deadline. A record is sealed into
//! an upload by filling the CommitLog's 64 KiB segment with another
//! topic's records (a tiered partition uploads what sits in sealed
//! segments, or `object_bytes` of pending records).
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{TidelogProcess, SMALL_SEGMENTS_MANUAL_RETENTION};
use serde_json::{json, Value};
use tidelog_integration_tests::kafka_wire;
use tidelog_integration_tests::s3::Seaweed;
use tidelog_tiered::object_store::path::Path as StorePath;
use tidelog_tiered::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tidelog_tiered::{RemoteTier, TieredConfig};

const CLUSTER: &str = "/v3/clusters/tidelog";
/// Generous: SeaweedFS and tidelog share two cores with other builds.
const DEADLINE: Duration = Duration::from_secs(120);
const BINARY: &str = "application/vnd.kafka.binary.v2+json";
/// Kafka's KAFKA_STORAGE_ERROR.
const KAFKA_STORAGE_ERROR: i16 = 56;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The `tiered:` section for `seaweed` under `prefix`, as the server and
/// the tests' own `RemoteTier` use it.
fn tier_config(seaweed: &Seaweed, prefix: &str) -> TieredConfig {
    TieredConfig {
        url: Some(seaweed.url(prefix)),
        endpoint: Some(seaweed.endpoint()),
        allow_http: true,
        upload_interval_ms: 3_600_000,
        object_bytes: 64 << 10,
        read_cache_bytes: 1 << 20,
        ..TieredConfig::default()
    }
}

/// A fresh view of the bucket (no cache of the server's).
fn remote_tier(seaweed: &Seaweed, prefix: &str) -> RemoteTier {
    RemoteTier::open(&tier_config(seaweed, prefix)).expect("open the tier")
}

/// 64 KiB segments, manual retention, and the remote tier: uploads only
/// when the test asks (an hour between rounds), 64 KiB objects (the
/// smallest `object_bytes`).
fn server_yaml(seaweed: &Seaweed, prefix: &str) -> String {
    let c = tier_config(seaweed, prefix);
    format!(
        "{SMALL_SEGMENTS_MANUAL_RETENTION}tiered:
  url: {}
  endpoint: {}
  allow_http: true
  upload_interval_ms: {}
  object_bytes: {}
  read_cache_bytes: {}
",
        seaweed.url(prefix),
        seaweed.endpoint(),
        c.upload_interval_ms,
        c.object_bytes,
        c.read_cache_bytes
    )
}

/// One record as produced and as read back.
#[derive(Debug, Clone, PartialEq)]
struct Rec {
    offset: u64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Record `offset` of the tests' tiered topic: every shape (no key, a null
/// value, headers with a null value), 60..960 bytes of value.
fn rec(offset: u64) -> Rec {
    let len = 60 + (offset * 37 % 900) as usize;
    let value = (0..len).map(|i| (offset as usize * 7 + i) as u8).collect();
    Rec {
        offset,
        key: (offset % 3 != 0).then(|| format!("key-{}", offset % 50).into_bytes()),
        value: (offset % 17 != 5).then_some(value),
        headers: match offset % 4 {
            0 => Vec::new(),
            1 => vec![("h".into(), Some(offset.to_be_bytes().to_vec()))],
            2 => vec![("h".into(), None), ("h".into(), Some(b"again".to_vec()))],
            _ => vec![("trace".into(), Some(b"t".to_vec()))],
        },
    }
}

fn create_topic(s: &TidelogProcess, name: &str, configs: &[(&str, &str)]) {
    let configs: Vec<Value> = configs
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    s.send_json(
        "POST",
        &format!("{CLUSTER}/topics"),
        &json!({"topic_name": name, "partitions_count": 1, "configs": configs}),
    )
    .expect(201);
}

/// A tiered delete topic whose records leave local disk as soon as they
/// are uploaded.
fn create_tiered_topic(s: &TidelogProcess, name: &str) {
    create_topic(
        s,
        name,
        &[
            ("remote.storage.enable", "true"),
            ("local.retention.ms", "1"),
        ],
    );
}

/// Produces records `from..to` of [`rec`] to `topic`-0 (binary format)
/// and checks the offsets they got.
fn produce(s: &TidelogProcess, topic: &str, from: u64, to: u64) {
    for chunk_start in (from..to).step_by(100) {
        let chunk_end = (chunk_start + 100).min(to);
        let records: Vec<Value> = (chunk_start..chunk_end)
            .map(|o| {
                let r = rec(o);
                let headers: Vec<Value> = r
                    .headers
                    .iter()
                    .map(|(n, v)| json!({"name": n, "value": v.as_deref().map(b64)}))
                    .collect();
                json!({
                    "key": r.key.as_deref().map(b64),
                    "value": r.value.as_deref().map(b64),
                    "headers": headers,
                })
            })
            .collect();
        let body = json!({ "records": records }).to_string();
        let answer = s
            .post_raw(
                &format!("/topics/{topic}/partitions/0"),
                BINARY,
                body.as_bytes(),
            )
            .expect(200);
        let offsets: Vec<u64> = answer["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["offset"].as_u64().unwrap())
            .collect();
        assert_eq!(offsets, (chunk_start..chunk_end).collect::<Vec<_>>());
    }
}

/// 70 KiB to a plain topic: the CommitLog segment holding what was
/// produced before is sealed, so the uploader takes all of it.
fn seal_segment(s: &TidelogProcess) {
    if s.get("/topics/filler").status == 404 {
        create_topic(s, "filler", &[]);
    }
    let records: Vec<Value> = (0..10)
        .map(|_| json!({"value": "f".repeat(7 << 10)}))
        .collect();
    s.send_json(
        "POST",
        "/topics/filler/partitions/0",
        &json!({ "records": records }),
    )
    .expect(200);
}

fn parse_b64(v: &Value) -> Option<Vec<u8>> {
    v.as_str().map(|s| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .expect("base64")
    })
}

fn parse_record(v: &Value) -> Rec {
    Rec {
        offset: v["offset"].as_u64().unwrap(),
        key: parse_b64(&v["key"]),
        value: parse_b64(&v["value"]),
        headers: v["headers"]
            .as_array()
            .map(|hs| {
                hs.iter()
                    .map(|h| {
                        (
                            h["name"].as_str().unwrap().to_string(),
                            parse_b64(&h["value"]),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Fetches `topic`-0 from `from` until `count` records are read (binary
/// format, bounded).
fn fetch_all(s: &TidelogProcess, topic: &str, from: u64, count: usize) -> Vec<Rec> {
    let mut out: Vec<Rec> = Vec::new();
    let mut next = from;
    let deadline = Instant::now() + DEADLINE;
    while out.len() < count {
        assert!(Instant::now() < deadline, "read {} of {count}", out.len());
        let got = s
            .get_with(
                &format!("/topics/{topic}/partitions/0/records?offset={next}&max_records=200&timeout=1000"),
                &[("Accept", BINARY)],
            )
            .expect(200);
        for r in got.as_array().unwrap() {
            let r = parse_record(r);
            next = r.offset + 1;
            out.push(r);
        }
    }
    out.truncate(count);
    out
}

/// `POST .../tiering:upload` for `topic`: the round's answer for its
/// partition 0.
fn upload_round(s: &TidelogProcess, topic: &str) -> Value {
    let answer = s
        .send_json(
            "POST",
            &format!("{CLUSTER}/topics/{topic}/tiering:upload"),
            &json!({}),
        )
        .expect(200);
    answer["partitions"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["partition"] == 0).cloned())
        .unwrap_or(Value::Null)
}

/// Runs upload rounds until `topic`-0's manifest ends at `end` and its
/// local beginning reached it (local.retention.ms is 1).
fn upload_until(s: &TidelogProcess, topic: &str, end: u64) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let round = upload_round(s, topic);
        if round["uploaded_end"] == end && round["local_beginning"] == end {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}: not uploaded to {end} in time; last round {round}\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A forced retention pass: every sealed segment the dispatcher passed
/// goes, except what the tiering hold keeps (not yet uploaded).
fn force_retention(s: &TidelogProcess) -> Value {
    s.send_json(
        "POST",
        &format!("{CLUSTER}/retention"),
        &json!({"force": true}),
    )
    .expect(200)
}

/// The manifest invariants, checked from a fresh view of the bucket:
/// every object the newest manifest lists exists, passes its checks and
/// holds its offsets; together they are `[beginning, end)` as produced
/// (no gaps: the tests never delete records). Returns the manifest's end.
fn check_manifest_invariants(seaweed: &Seaweed, prefix: &str, topic: &str) -> u64 {
    let tier = remote_tier(seaweed, prefix);
    runtime().block_on(async {
        let Some(manifest) = tier.manifest(topic, 0).await.expect("manifest") else {
            return 0;
        };
        let mut next = manifest.beginning;
        for object in &manifest.objects {
            assert_eq!(object.base_offset, next, "objects contiguous: {manifest:?}");
            let records = tier
                .read(topic, 0, object.base_offset, usize::MAX, usize::MAX)
                .await
                .unwrap_or_else(|e| panic!("object {} unreadable: {e}", object.name));
            let in_object: Vec<_> = records
                .iter()
                .take_while(|r| r.offset <= object.last_offset)
                .collect();
            assert_eq!(in_object.len() as u64, object.records, "{}", object.name);
            for r in in_object {
                let want = rec(r.offset);
                assert_eq!(r.key.as_deref(), want.key.as_deref(), "offset {}", r.offset);
                assert_eq!(
                    r.value.as_deref(),
                    want.value.as_deref(),
                    "offset {}",
                    r.offset
                );
            }
            next = object.last_offset + 1;
        }
        assert_eq!(next, manifest.end, "{manifest:?}");
        manifest.end
    })
}

/// How many record objects the bucket holds for `topic`-0 (listed or not).
fn data_objects(store: &Arc<dyn ObjectStore>, prefix: &str, topic: &str) -> usize {
    use futures::StreamExt as _;
    let dir = StorePath::from(format!("{prefix}/topics/{topic}/0/data"));
    runtime().block_on(async {
        let mut listing = store.list(Some(&dir));
        let mut n = 0;
        while let Some(meta) = listing.next().await {
            if meta.is_ok() {
                n += 1;
            }
        }
        n
    })
}

/// `POST .../tiering:upload` for `topic` on a thread of its own: the
/// answer, or `None` when the connection broke (the server was killed).
fn round_in_background(
    s: &TidelogProcess,
    topic: &str,
) -> std::thread::JoinHandle<Option<common::Response>> {
    let (addr, path) = (s.addr, format!("{CLUSTER}/topics/{topic}/tiering:upload"));
    std::thread::spawn(move || {
        std::panic::catch_unwind(|| {
            common::http(
                addr,
                "POST",
                &path,
                &[("Content-Type", "application/json")],
                Some(b"{}"),
            )
        })
        .ok()
    })
}

/// Polls until the bucket holds `at_least` record objects of `topic`-0
/// or `round` finished, whichever comes first (bounded).
fn wait_for_objects<T>(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    topic: &str,
    at_least: usize,
    round: &std::thread::JoinHandle<T>,
) {
    let deadline = Instant::now() + DEADLINE;
    while data_objects(store, prefix, topic) < at_least && !round.is_finished() {
        assert!(Instant::now() < deadline, "no upload began");
    }
}

/// `tidelog restore` of `seaweed`'s prefix `prefix` into `data_dir`.
fn restore_cli(seaweed: &Seaweed, prefix: &str, data_dir: &str) -> std::process::Output {
    common::run_tidelog(&[
        "restore",
        "--from",
        &seaweed.url(prefix),
        "--endpoint",
        &seaweed.endpoint(),
        "--allow-http",
        "--data-dir",
        data_dir,
    ])
}

/// One Kafka request (header v1) and its answer's body.
fn kafka_call(addr: SocketAddr, key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    kafka_wire::call(addr, "tiered-test", key, version, body, DEADLINE)
}

/// Fetch v4 of `topic`-0 from `offset`: the partition's error code.
fn kafka_fetch_error(addr: SocketAddr, topic: &str, offset: i64) -> i16 {
    let mut body = Vec::new();
    body.extend_from_slice(&(-1i32).to_be_bytes()); // replica id
    body.extend_from_slice(&100i32.to_be_bytes()); // max wait ms
    body.extend_from_slice(&1i32.to_be_bytes()); // min bytes
    body.extend_from_slice(&(1i32 << 20).to_be_bytes()); // max bytes
    body.push(0); // isolation level
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic.as_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes()); // partition
    body.extend_from_slice(&offset.to_be_bytes());
    body.extend_from_slice(&(1i32 << 20).to_be_bytes());
    let a = kafka_call(addr, 1, 4, &body);
    // throttle, topics count, name, partitions count, partition, error
    let name_len = i16::from_be_bytes([a[8], a[9]]) as usize;
    let p = 10 + name_len + 4 + 4;
    i16::from_be_bytes([a[p], a[p + 1]])
}

#[test]
fn object_stores_s3_backend_puts_and_gets_through_seaweedfs() {
    let seaweed = Seaweed::start("smoke");
    let tier = remote_tier(&seaweed, "smoke");
    let store: Arc<dyn ObjectStore> = Arc::clone(tier.store());
    let path = StorePath::from("smoke/some/object.bin");
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    runtime().block_on(async {
        let put = store.put(&path, PutPayload::from(bytes.clone())).await;
        put.unwrap_or_else(|e| panic!("put: {e:?}"));
        let got = store
            .get(&path)
            .await
            .expect("get")
            .bytes()
            .await
            .expect("body");
        assert_eq!(got.as_ref(), &bytes[..]);
    });
}

/// Records uploaded, then gone from the local CommitLog, read back from
/// the bucket over HTTP and with kafka-python exactly as they were sent.
#[test]
fn old_offsets_are_read_from_the_remote_tier_exactly_as_written() {
    const N: u64 = 400;
    let seaweed = Seaweed::start("tiered");
    let server = TidelogProcess::start_with_config(&server_yaml(&seaweed, "reads"));
    create_tiered_topic(&server, "logs");
    produce(&server, "logs", 0, N);
    seal_segment(&server);
    upload_until(&server, "logs", N);
    let pass = force_retention(&server);
    assert!(
        pass["deleted_segments"].as_u64().unwrap() >= 2,
        "the uploaded records left the local disk: {pass}"
    );
    assert_eq!(check_manifest_invariants(&seaweed, "reads", "logs"), N);

    let offsets = server.get("/topics/logs/partitions/0/offsets").expect(200);
    assert_eq!(
        (
            offsets["beginning_offset"].as_u64(),
            offsets["end_offset"].as_u64()
        ),
        (Some(0), Some(N))
    );
    let read = fetch_all(&server, "logs", 0, N as usize);
    let want: Vec<Rec> = (0..N).map(rec).collect();
    assert_eq!(read, want);
    // From the middle of an object too.
    assert_eq!(fetch_all(&server, "logs", 123, 5), want[123..128]);

    let mut script = tidelog_integration_tests::clients::python_command("kafka_tiered_fetch.py");
    script.arg("logs").arg(N.to_string());
    let kafka = server.kafka_addr.expect("a Kafka port");
    script.arg(server.url()).arg(kafka.to_string());
    let stdout = tidelog_integration_tests::clients::run_script(script);
    assert!(stdout.contains(&format!("read {N} records")), "{stdout}");
    let via_kafka: Vec<Rec> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Rec {
                offset: v["offset"].as_u64().unwrap(),
                key: parse_b64(&v["key"]),
                value: parse_b64(&v["value"]),
                headers: v["headers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| (h[0].as_str().unwrap().to_string(), parse_b64(&h[1])))
                    .collect(),
            }
        })
        .collect();
    assert_eq!(via_kafka, want);
}

/// SeaweedFS killed while an upload is under way and while records are
/// read from it: nothing acknowledged is lost, remote reads answer
/// 503/50304 (Kafka: KAFKA_STORAGE_ERROR) while local ones go on, the
/// tiering hold keeps what is not uploaded through a forced retention
/// pass, and uploads resume once it is back.
#[test]
fn an_object_store_outage_loses_nothing_and_fails_only_remote_reads() {
    const FIRST: u64 = 200;
    const SECOND: u64 = 2200;
    let mut seaweed = Seaweed::start("tiered");
    let server = TidelogProcess::start_with_config(&server_yaml(&seaweed, "outage"));
    create_tiered_topic(&server, "logs");
    produce(&server, "logs", 0, FIRST);
    seal_segment(&server);
    upload_until(&server, "logs", FIRST);
    force_retention(&server);
    let store = Arc::clone(remote_tier(&seaweed, "outage").store());
    let objects_before = data_objects(&store, "outage", "logs");

    // Mid-upload: a round of many objects, SeaweedFS killed once some of
    // them are in the bucket.
    produce(&server, "logs", FIRST, SECOND);
    seal_segment(&server);
    let round = round_in_background(&server, "logs");
    wait_for_objects(&store, "outage", "logs", objects_before + 2, &round);
    seaweed.stop();
    let answered = round.join().unwrap().expect("the round answers");
    assert_eq!(answered.status, 200, "{}", answered.text());

    // Mid-read: the remote part fails as unavailable, the local part is
    // served, over HTTP and Kafka alike.
    let remote = server.get_with(
        "/topics/logs/partitions/0/records?offset=0&timeout=0",
        &[("Accept", BINARY)],
    );
    remote.expect_error(503, 50304);
    let kafka = server.kafka_addr.expect("a Kafka port");
    assert_eq!(kafka_fetch_error(kafka, "logs", 0), KAFKA_STORAGE_ERROR);
    let local = fetch_all(&server, "logs", SECOND - 50, 50);
    assert_eq!(local, (SECOND - 50..SECOND).map(rec).collect::<Vec<_>>());
    assert_eq!(kafka_fetch_error(kafka, "logs", (SECOND - 1) as i64), 0);
    // Upload rounds fail and say so; retention keeps what is not uploaded.
    assert!(!upload_round(&server, "logs")["error"].is_null());
    force_retention(&server);
    let end = server.get("/topics/logs/partitions/0/offsets").expect(200)["end_offset"].as_u64();
    assert_eq!(end, Some(SECOND));

    seaweed.start_again();
    upload_until(&server, "logs", SECOND);
    assert_eq!(
        check_manifest_invariants(&seaweed, "outage", "logs"),
        SECOND
    );
    force_retention(&server);
    let read = fetch_all(&server, "logs", 0, SECOND as usize);
    assert_eq!(read, (0..SECOND).map(rec).collect::<Vec<_>>());
}

/// tidelog killed with SIGKILL during upload rounds, at a different point
/// each time (before the first object, after one, after several): the
/// bucket's manifest only ever lists whole, readable objects holding
/// acknowledged records in order, and after the restarts every record is
/// uploaded exactly once in the manifest's offsets.
#[test]
fn kill_9_during_uploads_keeps_the_manifest_invariants() {
    const PER_ROUND: u64 = 800;
    let seaweed = Seaweed::start("tiered");
    let mut server = TidelogProcess::start_with_config(&server_yaml(&seaweed, "crash"));
    create_tiered_topic(&server, "logs");
    let store = Arc::clone(remote_tier(&seaweed, "crash").store());
    let mut acked = 0;
    for objects_before_kill in [0usize, 1, 4] {
        produce(&server, "logs", acked, acked + PER_ROUND);
        acked += PER_ROUND;
        seal_segment(&server);
        let before = data_objects(&store, "crash", "logs");
        let round = round_in_background(&server, "logs");
        wait_for_objects(
            &store,
            "crash",
            "logs",
            before + objects_before_kill,
            &round,
        );
        server.kill_9();
        round.join().unwrap();
        let end = check_manifest_invariants(&seaweed, "crash", "logs");
        assert!(
            end <= acked,
            "manifest end {end} past the {acked} acknowledged"
        );
        server.start_again();
    }
    seal_segment(&server);
    upload_until(&server, "logs", acked);
    assert_eq!(check_manifest_invariants(&seaweed, "crash", "logs"), acked);
    force_retention(&server);
    assert_eq!(
        fetch_all(&server, "logs", 0, acked as usize),
        (0..acked).map(rec).collect::<Vec<_>>()
    );
}

/// What the restore tests check on a restored server: the tiered topic's
/// records (from the bucket), the compact table, the group's committed
/// offset, and that new records continue after the uploaded ones.
fn check_restored(s: &TidelogProcess, uploaded: u64) {
    assert_eq!(
        fetch_all(s, "logs", 0, uploaded as usize),
        (0..uploaded).map(rec).collect::<Vec<_>>()
    );
    let table = s
        .get("/topics/users/partitions/0/records?offset=0&timeout=1000")
        .expect(200);
    let kv: Vec<(String, String)> = table
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().into(),
                r["value"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(kv, [("b".into(), "2".into()), ("a".into(), "3".into())]);
    let offsets = s.get("/consumer-groups/billing/offsets").expect(200);
    assert_eq!(offsets["offsets"][0]["offset"], 123, "{offsets}");
    let configs = s.get(&format!("{CLUSTER}/topics/logs/configs")).expect(200);
    assert!(
        configs["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "remote.storage.enable" && c["value"] == "true"),
        "{configs}"
    );
    let next = s
        .send_json(
            "POST",
            "/topics/logs/partitions/0",
            &json!({"records": [{"value": "after the restore"}]}),
        )
        .expect(200);
    assert_eq!(next["offsets"][0]["offset"], uploaded);
}

/// A node's bucket brought back into fresh data dirs: at start (an empty
/// data dir and `tiered.url` set) and offline (`tidelog restore`).
#[test]
fn a_restore_brings_back_records_tables_and_group_offsets() {
    const N: u64 = 300;
    let seaweed = Seaweed::start("tiered");
    let yaml = server_yaml(&seaweed, "node");
    let mut first = TidelogProcess::start_with_config(&yaml);
    create_tiered_topic(&first, "logs");
    create_topic(&first, "users", &[("cleanup.policy", "compact")]);
    produce(&first, "logs", 0, N);
    for (k, v) in [("a", "1"), ("b", "2"), ("a", "3")] {
        first
            .send_json(
                "POST",
                "/topics/users/partitions/0",
                &json!({"records": [{"key": k, "value": v}]}),
            )
            .expect(200);
    }
    first
        .send_json(
            "POST",
            "/consumer-groups/billing/offsets",
            &json!({"offsets": [{"topic": "logs", "partition": 0, "offset": 123}]}),
        )
        .expect(204);
    seal_segment(&first);
    upload_until(&first, "logs", N);
    // The compact topics' cleaned segments go up as snapshots.
    for topic in ["users", "__consumer_offsets"] {
        first
            .send_json(
                "POST",
                &format!("{CLUSTER}/topics/{topic}/compaction"),
                &json!({"wait": true, "roll_active": true}),
            )
            .expect(200);
    }
    let tier = remote_tier(&seaweed, "node");
    let deadline = Instant::now() + DEADLINE;
    for topic in ["users", "__consumer_offsets"] {
        loop {
            // A topic's round uploads its snapshot after a clean.
            upload_round(&first, topic);
            let manifest = runtime()
                .block_on(tier.manifest(topic, 0))
                .expect("manifest");
            if manifest.is_some_and(|m| m.snapshot.is_some()) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no snapshot of {topic}\n{}",
                first.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    first.terminate();

    // At start: an empty data dir and the bucket's url.
    let mut second = TidelogProcess::start_with_config(&yaml);
    check_restored(&second, N);
    second.kill_9();

    // Offline, into the same (emptied) data dir, then started on it.
    for entry in std::fs::read_dir(second.data_dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let data_dir = second.data_dir.path().display().to_string();
    let restored = restore_cli(&seaweed, "node", &data_dir);
    let stdout = String::from_utf8_lossy(&restored.stdout);
    assert!(
        restored.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    // logs, users, filler and __consumer_offsets.
    assert!(stdout.contains("restored 4 topics"), "{stdout}");
    // A second restore into it is refused: it is no longer empty.
    let again = restore_cli(&seaweed, "node", &data_dir);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    second.start_again();
    // The record the first restored server appended was never uploaded:
    // the bucket, and so this restore, ends at N again.
    check_restored(&second, N);
}

/// `tidelog bench --tiered-mib` end to end against SeaweedFS: the upload,
/// the remote fetch and the plain put/get all measured and in its JSON.
#[test]
fn the_tiered_bench_measures_against_seaweedfs() {
    let seaweed = Seaweed::start("bench");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tiered.yaml");
    std::fs::write(
        &config,
        format!(
            "store:\n  commitlog_segment_bytes: 1048576\ntiered:\n  url: {}\n  endpoint: {}\n  allow_http: true\n  upload_interval_ms: 3600000\n  object_bytes: 1048576\n{}",
            seaweed.url("run"),
            seaweed.endpoint(),
            common::DISK_RATIOS_OFF
        ),
    )
    .unwrap();
    let json_path = dir.path().join("tiered.json");
    let out = common::run_tidelog(&[
        "bench",
        "--tiered-mib",
        "4",
        "--server-config",
        config.to_str().unwrap(),
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--batch",
        "100",
        "--record-bytes",
        "1024",
        "--json",
        json_path.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("remote fetch"), "{stdout}");
    let results: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    assert_eq!(results["mode"], "tiered");
    for figure in [
        "tiered_upload_mb_per_s",
        "tiered_plain_put_mb_per_s",
        "tiered_remote_fetch_mb_per_s",
        "tiered_plain_get_mb_per_s",
    ] {
        assert!(
            results["extra"][figure].as_f64().unwrap() > 0.0,
            "{figure}: {results}"
        );
    }
    // 4 MiB in whole requests of 100 x 1 KiB.
    let bytes = results["extra"]["tiered_bytes"].as_f64().unwrap();
    let (at_least, below) = (f64::from(4u32 << 20), f64::from((4u32 << 20) + 102_400));
    assert!((at_least..below).contains(&bytes), "{bytes}");
}
