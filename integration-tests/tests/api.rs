//! The HTTP contract of API.md against the real binary: every route with
//! good input, every error code with bad input.
//!
//! Two servers, one per test (nextest runs tests in parallel, and each test
//! is a process of its own), each checked in many steps: records (produce,
//! fetch, long-poll, query, errors, a burst of bad requests) and admin
//! (topics, configs, consumer groups, restart).
#![allow(clippy::unwrap_used)]

mod common;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use common::{Response, TidelogProcess};
use serde_json::{json, Value};

const JSON_V2: &str = "application/vnd.kafka.json.v2+json";
const BINARY_V2: &str = "application/vnd.kafka.binary.v2+json";
const V2: &str = "application/vnd.kafka.v2+json";

/// Small files so the server starts fast and rolls segments in tests.
const CONFIG: &str = "
store:
  commitlog_segment_bytes: 1048576
  consume_queue_units_per_file: 1000
  index_slots: 1000
  index_entries: 4000
  flush_interval_ms: 50
  max_message_bytes: 16384
http:
  max_request_bytes: 65536
  max_records_per_request: 50
topics:
  - name: events
    partitions: 4
  - name: users
    partitions: 2
    configs: { cleanup.policy: compact }
  - name: small
    partitions: 1
    configs: { max.message.bytes: 100 }
";

fn produce(s: &TidelogProcess, path: &str, content_type: &str, body: Value) -> Response {
    s.post_raw(path, content_type, body.to_string().as_bytes())
}

fn end_offsets(s: &TidelogProcess, topic: &str, partitions: u32) -> Vec<u64> {
    (0..partitions)
        .map(|p| {
            s.get(&format!("/topics/{topic}/partitions/{p}/offsets"))
                .expect(200)["end_offset"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

fn fetch(s: &TidelogProcess, topic: &str, p: u32, query: &str, accept: &str) -> Vec<Value> {
    let r = s.get_with(
        &format!("/topics/{topic}/partitions/{p}/records?{query}"),
        &[("Accept", accept)],
    );
    let body = r.expect(200);
    assert_eq!(r.header("content-type"), Some(V2));
    body.as_array().unwrap().clone()
}

/// Waits (long-poll, no polling loop) until `offset` of a partition is
/// fetchable: produce acknowledges on append, and the dispatcher makes
/// records fetchable microseconds later.
fn wait_visible(s: &TidelogProcess, topic: &str, p: u32, offset: u64) {
    let got = fetch(
        s,
        topic,
        p,
        &format!("offset={offset}&timeout=10000"),
        BINARY_V2,
    );
    assert!(
        !got.is_empty(),
        "{topic}/{p} offset {offset} never became fetchable"
    );
}

#[test]
fn records_produce_fetch_query_and_their_errors() {
    let s = TidelogProcess::start_with_config(CONFIG);
    produce_and_fetch(&s);
    fetch_counts_what_produce_counted(&s);
    long_poll(&s);
    query_by_key_and_physical_offset(&s);
    record_errors(&s);
    burst_of_bad_requests_then_still_serving(&s);
}

fn produce_and_fetch(s: &TidelogProcess) {
    // Keyed records, explicit partition, headers, timestamp, tombstone.
    let r = produce(
        s,
        "/topics/events",
        JSON_V2,
        json!({"records": [
            {"key": "k1", "value": {"n": 1}, "timestamp": 1_700_000_000_000u64,
             "headers": [{"name": "h", "value": "AQ=="}, {"name": "h", "value": null},
                         {"name": "h", "value": ""}]},
            {"key": "k1", "value": {"n": 2}},
            {"value": "p3", "partition": 3},
            {"key": "k1", "value": null},
        ]}),
    );
    let body = r.expect(200);
    assert_eq!(r.header("content-type"), Some(V2));
    assert_eq!(body["key_schema_id"], Value::Null);
    let offsets = body["offsets"].as_array().unwrap();
    assert_eq!(offsets.len(), 4);
    let p = offsets[0]["partition"].as_u64().unwrap();
    for (i, o) in [0usize, 1, 3].iter().zip(0u64..) {
        assert_eq!(offsets[*i]["partition"], p, "same key, same partition");
        assert_eq!(offsets[*i]["offset"], o);
        assert_eq!(offsets[*i]["error_code"], Value::Null);
    }
    assert_eq!(offsets[2]["partition"], 3);

    // Keyless records go round-robin: 8 records, 2 per partition.
    let r = produce(
        s,
        "/topics/events",
        "application/json",
        json!({"records": (0..8).map(|i| json!({"value": i})).collect::<Vec<_>>()}),
    );
    let mut per_partition = [0; 4];
    for o in r.expect(200)["offsets"].as_array().unwrap() {
        per_partition[o["partition"].as_u64().unwrap() as usize] += 1;
    }
    assert_eq!(per_partition, [2, 2, 2, 2]);

    // Binary format; Kafka's murmur2("foobar") = -790332482, so the key
    // lands in toPositive(h) % 4 = 2, where a Kafka producer puts it.
    let r = produce(
        s,
        "/topics/events",
        BINARY_V2,
        json!({"records": [{"key": B64.encode("foobar"), "value": "AP8="}]}),
    );
    let binary = r.expect(200)["offsets"][0].clone();
    assert_eq!(binary["partition"], 2);
    let binary_offset = binary["offset"].as_u64().unwrap();
    wait_visible(s, "events", p as u32, 2);
    wait_visible(s, "events", 2, binary_offset);

    // Fetch in json: values, headers in order with duplicates (a null
    // value null, apart from an empty one), timestamp, tombstone.
    let records = fetch(
        s,
        "events",
        p as u32,
        "offset=0&max_records=3&timeout=0",
        "*/*",
    );
    assert!(records.len() >= 3, "{records:?}");
    assert_eq!(records[0]["topic"], "events");
    assert_eq!(records[0]["key"], "k1");
    assert_eq!(records[0]["value"], json!({"n": 1}));
    assert_eq!(records[0]["offset"], 0);
    assert_eq!(records[0]["partition"], p);
    assert_eq!(records[0]["timestamp"], 1_700_000_000_000u64);
    assert_eq!(
        records[0]["headers"],
        json!([
            {"name": "h", "value": "AQ=="},
            {"name": "h", "value": null},
            {"name": "h", "value": ""}
        ])
    );
    assert_eq!(records[1]["value"], json!({"n": 2}));
    assert_eq!(records[1]["headers"], json!([]));
    assert_eq!(records[2]["key"], "k1");
    assert_eq!(records[2]["value"], Value::Null, "tombstone");

    // Binary: the stored bytes of JSON keys and values are their compact
    // text.
    let records = fetch(s, "events", p as u32, "offset=1&timeout=0", BINARY_V2);
    assert_eq!(records[0]["offset"], 1);
    assert_eq!(records[0]["key"], B64.encode("\"k1\""));
    assert_eq!(records[0]["value"], B64.encode("{\"n\":2}"));

    // max_records and max_bytes (at least one record even if over).
    assert_eq!(
        fetch(
            s,
            "events",
            p as u32,
            "offset=0&max_records=1&timeout=0",
            "*/*"
        )
        .len(),
        1
    );
    assert_eq!(
        fetch(
            s,
            "events",
            p as u32,
            "offset=0&max_bytes=1&timeout=0",
            "*/*"
        )
        .len(),
        1
    );
    // Past the end is not an error.
    assert!(fetch(s, "events", p as u32, "offset=1000&timeout=0", "*/*").is_empty());

    // A binary value that is not JSON, fetched as json: 42203.
    s.get(&format!(
        "/topics/events/partitions/2/records?offset={binary_offset}&timeout=0"
    ))
    .expect_error(422, 42203);
    let records = fetch(
        s,
        "events",
        2,
        &format!("offset={binary_offset}&timeout=0"),
        BINARY_V2,
    );
    let last = &records[0];
    assert_eq!(last["key"], B64.encode("foobar"));
    assert_eq!(last["value"], "AP8=");

    let r = s.get(&format!("/topics/events/partitions/{p}/offsets"));
    let o = r.expect(200);
    assert_eq!(r.header("content-type"), Some(V2));
    assert_eq!(o["beginning_offset"], 0);
    assert!(o["end_offset"].as_u64().unwrap() >= 3);

    // Produce to one partition by path.
    let r = produce(
        s,
        "/topics/events/partitions/1",
        JSON_V2,
        json!({"records": [{"value": "a"}, {"key": "x", "value": "b", "partition": 1}]}),
    );
    let offsets = r.expect(200)["offsets"].clone();
    assert_eq!(offsets[0]["partition"], 1);
    assert_eq!(offsets[1]["partition"], 1);
    wait_visible(s, "events", 1, offsets[1]["offset"].as_u64().unwrap());

    // Compact topic with keys, and an empty request.
    let r = produce(
        s,
        "/topics/users",
        JSON_V2,
        json!({"records": [{"key": {"id": 1}, "value": "u1"}]}),
    );
    let p = r.expect(200)["offsets"][0]["partition"].as_u64().unwrap();
    wait_visible(s, "users", p as u32, 0);
    let r = produce(s, "/topics/users", JSON_V2, json!({"records": []}));
    assert_eq!(r.expect(200)["offsets"], json!([]));
}

/// A record's key, value and header bytes count the same in the produce and
/// the fetch byte counters (binary format: the stored bytes are the raw
/// ones). Nothing else runs against this server meanwhile.
fn fetch_counts_what_produce_counted(s: &TidelogProcess) {
    let counters = || {
        [
            s.metric("tidelog_produce_records_total"),
            s.metric("tidelog_produce_bytes_total"),
            s.metric("tidelog_fetch_records_total"),
            s.metric("tidelog_fetch_bytes_total"),
        ]
    };
    let [p_records, p_bytes, ..] = counters();
    let r = produce(
        s,
        "/topics/events/partitions/2",
        BINARY_V2,
        json!({"records": [{
            "key": B64.encode("ab"),
            "value": B64.encode("hello"),
            "headers": [{"name": "h1", "value": B64.encode("xyz")}]
        }]}),
    );
    let offset = r.expect(200)["offsets"][0]["offset"].as_u64().unwrap();
    wait_visible(s, "events", 2, offset);
    let [p_records2, p_bytes2, f_records, f_bytes] = counters();
    assert_eq!(p_records2 - p_records, 1.0);
    let produced = p_bytes2 - p_bytes;
    // Key and value are 7 bytes; the header block (name, value and their
    // lengths) counts too.
    assert!(produced > 7.0 + 5.0, "produce counted {produced} bytes");
    let got = fetch(
        s,
        "events",
        2,
        &format!("offset={offset}&max_records=1"),
        BINARY_V2,
    );
    assert_eq!(got.len(), 1);
    let [.., f_records2, f_bytes2] = counters();
    assert_eq!(f_records2 - f_records, 1.0);
    assert_eq!(f_bytes2 - f_bytes, produced);
}

fn long_poll(s: &TidelogProcess) {
    let before = end_offsets(s, "events", 4)[0];
    // Times out empty.
    assert!(fetch(
        s,
        "events",
        0,
        &format!("offset={before}&timeout=200"),
        "*/*"
    )
    .is_empty());

    // Wakes on a produce: the fetch waits (up to 30 s) in another thread;
    // once it is parked (it has found nothing and waits on the partition),
    // a produce must wake it with the record: without the wake-up it would
    // answer empty after 30 s.
    let addr = s.addr;
    let waiter = std::thread::spawn(move || {
        common::http(
            addr,
            "GET",
            &format!("/topics/events/partitions/0/records?offset={before}&timeout=30000"),
            &[],
            None,
        )
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while s.metric("tidelog_fetch_long_polls_waiting") < 1.0 {
        assert!(std::time::Instant::now() < deadline, "fetch never parked");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    produce(
        s,
        "/topics/events/partitions/0",
        JSON_V2,
        json!({"records": [{"value": "wake"}]}),
    )
    .expect(200);
    let woken = waiter.join().unwrap().expect(200);
    assert_eq!(woken[0]["value"], "wake", "{woken}");
    assert_eq!(woken[0]["offset"], before);
    assert_eq!(s.metric("tidelog_fetch_long_polls_waiting"), 0.0);
}

fn query_by_key_and_physical_offset(s: &TidelogProcess) {
    // k1: two values and a tombstone, newest first.
    let r = s.get("/topics/events/records?key=%22k1%22");
    let found = r.expect(200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let found = found.as_array().unwrap();
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(found[0]["value"], Value::Null);
    assert_eq!(found[1]["value"], json!({"n": 2}));
    assert_eq!(found[2]["value"], json!({"n": 1}));
    let physical = found[1]["physical_offset"].as_u64().unwrap();
    assert_eq!(
        s.get("/topics/events/records?key=%22k1%22&max_records=1")
            .expect(200)
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        s.get("/topics/events/records?key=%22nope%22").expect(200),
        json!([])
    );
    // Binary keys, and a time window that excludes everything.
    let found = s
        .get("/topics/events/records?format=binary&key=Zm9vYmFy")
        .expect(200);
    assert_eq!(found[0]["value"], "AP8=");
    assert_eq!(
        s.get("/topics/events/records?key=%22k1%22&begin_timestamp=0&end_timestamp=1")
            .expect(200),
        json!([])
    );

    let r = s.get(&format!("/commitlog/{physical}"));
    let rec = r.expect(200);
    assert_eq!(rec["topic"], "events");
    assert_eq!(rec["offset"], 1);
    assert_eq!(rec["value"], json!({"n": 2}));
    assert_eq!(rec["physical_offset"], physical);
    s.get(&format!("/commitlog/{}", physical + 1))
        .expect_error(404, 40400);
    s.get("/commitlog/999999999").expect_error(404, 40400);
    s.get("/commitlog/-1").expect_error(400, 40002);
    s.get("/commitlog/abc").expect_error(400, 40002);
}

fn record_errors(s: &TidelogProcess) {
    let before = end_offsets(s, "events", 4);

    // 40002: offsets and fetch parameters.
    for query in [
        "",
        "offset=-1",
        "offset=abc",
        "offset=9223372036854775808",
        "offset=1.5",
        "offset=0&max_records=0",
        "offset=0&max_bytes=x",
        "offset=0&timeout=30001",
        "offset=0&timeout=-5",
    ] {
        let m = s
            .get(&format!("/topics/events/partitions/0/records?{query}"))
            .expect_error(400, 40002);
        assert!(!m.is_empty(), "{query}");
    }
    // 40002: hostile names and partitions.
    for path in [
        "/topics/../partitions/0/records?offset=0",
        "/topics/a%2Fb/partitions/0/records?offset=0",
        "/topics/%2E%2E/partitions/0/offsets",
        "/topics/a%20b/partitions/0/offsets",
        "/topics/events/partitions/x/offsets",
        "/topics/events/partitions/-1/offsets",
        "/topics/events/partitions/4294967296/offsets",
        "/topics/events/records",
        "/topics/events/records?key=not-json",
        "/topics/events/records?format=avro&key=1",
        "/topics/events/records?format=binary&key=@@",
        "/topics/events/records?key=1&begin_timestamp=5&end_timestamp=1",
    ] {
        s.get(path).expect_error(400, 40002);
    }
    let m = produce(s, "/topics/a%2Fb", JSON_V2, json!({"records": []})).expect_error(400, 40002);
    assert!(m.contains("a/b"), "{m}");
    produce(s, "/topics/..", JSON_V2, json!({"records": []})).expect_error(400, 40002);

    // 40401
    s.get("/topics/nope/partitions/0/records?offset=0")
        .expect_error(404, 40401);
    s.get("/topics/nope/partitions/0/offsets")
        .expect_error(404, 40401);
    s.get("/topics/nope/records?key=1").expect_error(404, 40401);
    produce(
        s,
        "/topics/nope",
        JSON_V2,
        json!({"records": [{"value": 1}]}),
    )
    .expect_error(404, 40401);

    // 40402, and the valid records of the request are not written.
    s.get("/topics/events/partitions/4/records?offset=0")
        .expect_error(404, 40402);
    s.get("/topics/events/partitions/4/offsets")
        .expect_error(404, 40402);
    let m = produce(
        s,
        "/topics/events",
        JSON_V2,
        json!({"records": [{"value": 1, "partition": 0}, {"value": 2, "partition": 9}]}),
    )
    .expect_error(404, 40402);
    assert!(m.contains("partition 9"), "{m}");
    produce(
        s,
        "/topics/events/partitions/7",
        JSON_V2,
        json!({"records": [{"value": 1}]}),
    )
    .expect_error(404, 40402);

    // 41301: body, record count, the store's and the topic's
    // max.message.bytes.
    let big = json!({"records": [{"value": "x".repeat(70_000)}]});
    produce(s, "/topics/events", JSON_V2, big).expect_error(413, 41301);
    let many = json!({"records": (0..51).map(|i| json!({"value": i})).collect::<Vec<_>>()});
    produce(s, "/topics/events", JSON_V2, many).expect_error(413, 41301);
    // A record over the store's limit (16 KiB here), then one over a
    // topic's own: the second record of each request is refused by name,
    // and nothing of its request is written.
    for (topic, partitions, big, limit) in [
        ("events", 4, "z".repeat(20_000), "store.max_message_bytes"),
        (
            "small",
            1,
            "y".repeat(200),
            "topic \"small\" max.message.bytes",
        ),
    ] {
        let ends = end_offsets(s, topic, partitions);
        let m = produce(
            s,
            &format!("/topics/{topic}/partitions/0"),
            JSON_V2,
            json!({"records": [{"value": "ok"}, {"value": big}]}),
        )
        .expect_error(413, 41301);
        assert!(m.contains("records[1]") && m.contains(limit), "{m}");
        assert_eq!(
            end_offsets(s, topic, partitions),
            ends,
            "nothing of the request written"
        );
    }

    // 41501
    s.post_raw("/topics/events", "text/plain", b"{\"records\":[]}")
        .expect_error(415, 41501);
    s.post_raw(
        "/topics/events",
        "application/vnd.kafka.avro.v2+json",
        b"{}",
    )
    .expect_error(415, 41501);
    s.request("POST", "/topics/events", &[], Some(b"{\"records\":[]}"))
        .expect_error(415, 41501);

    // 42201: keyless on a compact topic, nothing written; bad binary key.
    let m = produce(
        s,
        "/topics/users",
        JSON_V2,
        json!({"records": [{"key": "a", "value": 1}, {"value": 2}]}),
    )
    .expect_error(422, 42201);
    assert!(m.contains("records[1]"), "{m}");
    assert_eq!(
        end_offsets(s, "users", 2).iter().sum::<u64>(),
        1,
        "only the earlier record"
    );
    produce(
        s,
        "/topics/events",
        BINARY_V2,
        json!({"records": [{"key": 5, "value": "AA=="}]}),
    )
    .expect_error(422, 42201);

    // 42202: no value.
    produce(
        s,
        "/topics/events",
        JSON_V2,
        json!({"records": [{"key": "k"}]}),
    )
    .expect_error(422, 42202);

    // 42206: not JSON, no records, bad base64, bad shapes.
    s.post_raw("/topics/events", JSON_V2, b"{not json")
        .expect_error(422, 42206);
    s.post_raw("/topics/events", JSON_V2, b"")
        .expect_error(422, 42206);
    produce(s, "/topics/events", JSON_V2, json!({"recs": []})).expect_error(422, 42206);
    produce(s, "/topics/events", JSON_V2, json!({"records": {}})).expect_error(422, 42206);
    produce(
        s,
        "/topics/events",
        BINARY_V2,
        json!({"records": [{"value": "%%%"}]}),
    )
    .expect_error(422, 42206);
    produce(
        s,
        "/topics/events",
        JSON_V2,
        json!({"records": [{"value": 1, "headers": [{"name": "h", "value": "!"}]}]}),
    )
    .expect_error(422, 42206);
    produce(
        s,
        "/topics/events",
        JSON_V2,
        json!({"records": [{"value": 1, "partition": -1}]}),
    )
    .expect_error(422, 42206);

    // Internal topic: readable, not writable by clients.
    produce(
        s,
        "/topics/__consumer_offsets",
        JSON_V2,
        json!({"records": [{"key": "k", "value": 1}]}),
    )
    .expect_error(400, 40002);

    // Unknown routes and methods answer JSON errors too.
    s.get("/nope").expect_error(404, 40400);
    s.request("DELETE", "/topics", &[], None)
        .expect_error(405, 40500);

    assert_eq!(
        end_offsets(s, "events", 4),
        before,
        "no failed request wrote anything"
    );
}

fn burst_of_bad_requests_then_still_serving(s: &TidelogProcess) {
    let bad: [(&str, &str, &str, &[u8]); 6] = [
        ("POST", "/topics/events", JSON_V2, b"\xff\xfe\x00"),
        (
            "POST",
            "/topics/events",
            BINARY_V2,
            b"{\"records\":[{\"value\":\"=\"}]}",
        ),
        ("POST", "/topics/..%2F..%2Fetc", JSON_V2, b"{}"),
        (
            "GET",
            "/topics/events/partitions/0/records?offset=-9",
            "",
            b"",
        ),
        (
            "POST",
            "/v3/clusters/tidelog/topics",
            "application/json",
            b"[[[[[[[[",
        ),
        (
            "POST",
            "/consumer-groups/g/offsets",
            "application/json",
            b"{\"offsets\":7}",
        ),
    ];
    let before = s.get("/v3/clusters/tidelog/stats").expect(200)["commitlog_max_offset"].clone();
    for i in 0..300 {
        let (method, path, ct, body) = bad[i % bad.len()];
        let headers: &[(&str, &str)] = if ct.is_empty() {
            &[]
        } else {
            &[("Content-Type", ct)]
        };
        let r = s.request(method, path, headers, (method == "POST").then_some(body));
        assert!(
            (400..500).contains(&r.status),
            "{method} {path}: {}",
            r.text()
        );
    }
    assert_eq!(
        s.get("/v3/clusters/tidelog/stats").expect(200)["commitlog_max_offset"],
        before,
        "bad requests wrote nothing"
    );
    s.get("/status/ready").expect(200);
    let r = produce(
        s,
        "/topics/events/partitions/3",
        JSON_V2,
        json!({"records": [{"value": "still here"}]}),
    );
    let offset = r.expect(200)["offsets"][0]["offset"].as_u64().unwrap();
    let got = fetch(
        s,
        "events",
        3,
        &format!("offset={offset}&timeout=5000"),
        "*/*",
    );
    assert_eq!(got[0]["value"], "still here");
    assert!(s.metric("tidelog_http_responses_total{class=\"4xx\"}") >= 300.0);
    assert!(s.metric("tidelog_produce_records_total") >= 1.0);
}

#[test]
fn topics_configs_groups_and_a_graceful_restart() {
    let mut s = TidelogProcess::start_with_config(CONFIG);
    clusters_and_topic_lists(&s);
    create_get_configs_delete(&s);
    consumer_groups(&s);
    stats_and_metrics(&s);
    restart_keeps_everything(&mut s);
    a_crash_keeps_acknowledged_admin_changes(&mut s);
}

fn clusters_and_topic_lists(s: &TidelogProcess) {
    let r = s.get("/v3/clusters");
    let body = r.expect(200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(body["kind"], "KafkaClusterList");
    assert_eq!(body["data"][0]["cluster_id"], "tidelog");
    s.get("/v3/clusters/other/topics").expect_error(404, 40400);
    // Every route under a cluster checks it first, then the topic name.
    for path in [
        "/v3/clusters/other/topics/events",
        "/v3/clusters/other/topics/a%2Fb",
        "/v3/clusters/other/topics/events/configs",
        "/v3/clusters/other/topics/events/compaction",
        "/v3/clusters/other/retention",
    ] {
        let method = if path.ends_with("retention") {
            "POST"
        } else {
            "GET"
        };
        s.request(method, path, &[], None).expect_error(404, 40400);
    }
    for (method, path) in [
        ("GET", "/v3/clusters/tidelog/topics/a%2Fb"),
        ("GET", "/v3/clusters/tidelog/topics/..%2Fx/configs"),
        ("GET", "/v3/clusters/tidelog/topics/a%2Fb/compaction"),
        (
            "PUT",
            "/v3/clusters/tidelog/topics/a%2Fb/configs/retention.ms",
        ),
    ] {
        s.request(method, path, &[], None).expect_error(400, 40002);
    }

    let list = s.get("/v3/clusters/tidelog/topics").expect(200);
    assert_eq!(list["kind"], "KafkaTopicList");
    let data = list["data"].as_array().unwrap();
    let internal = data
        .iter()
        .find(|t| t["topic_name"] == "__consumer_offsets")
        .unwrap();
    assert_eq!(internal["is_internal"], true);
    let events = data.iter().find(|t| t["topic_name"] == "events").unwrap();
    assert_eq!(events["partitions_count"], 4);
    assert_eq!(events["is_internal"], false);

    let r = s.get("/topics");
    assert_eq!(r.expect(200), json!(["events", "small", "users"]));
    assert_eq!(r.header("content-type"), Some(V2));

    let users = s.get("/topics/users").expect(200);
    assert_eq!(users["name"], "users");
    assert_eq!(users["configs"]["cleanup.policy"], "compact");
    assert_eq!(users["configs"]["retention.ms"], "604800000");
    assert_eq!(users["partitions"].as_array().unwrap().len(), 2);
    assert_eq!(users["partitions"][1]["partition"], 1);
    assert_eq!(users["partitions"][1]["leader"], 0);
    s.get("/topics/nope").expect_error(404, 40401);
    s.get("/topics/..").expect_error(400, 40002);
}

fn create_get_configs_delete(s: &TidelogProcess) {
    let base = "/v3/clusters/tidelog/topics";
    let r = s.send_json(
        "POST",
        base,
        &json!({"topic_name": "orders", "partitions_count": 3, "configs": [
            {"name": "cleanup.policy", "value": "compact"},
            {"name": "retention.ms", "value": "60000"},
        ]}),
    );
    let created = r.expect(201);
    assert_eq!(created["topic_name"], "orders");
    assert_eq!(created["partitions_count"], 3);
    assert_eq!(created["is_internal"], false);

    // Create errors.
    s.send_json("POST", base, &json!({"topic_name": "orders"}))
        .expect_error(409, 40901);
    s.send_json("POST", base, &json!({"topic_name": "../x"}))
        .expect_error(400, 40002);
    s.send_json(
        "POST",
        base,
        &json!({"topic_name": "z", "partitions_count": 0}),
    )
    .expect_error(400, 40002);
    s.send_json(
        "POST",
        base,
        &json!({"topic_name": "z", "partitions_count": 100000}),
    )
    .expect_error(400, 40002);
    let m = s
        .send_json(
            "POST",
            base,
            &json!({"topic_name": "z", "configs": [{"name": "retention.mss", "value": "1"}]}),
        )
        .expect_error(400, 40002);
    assert!(m.contains("retention.mss"), "{m}");
    let m = s
        .send_json(
            "POST",
            base,
            &json!({"topic_name": "z", "configs": [{"name": "cleanup.policy", "value": "purge"}]}),
        )
        .expect_error(400, 40002);
    assert!(m.contains("cleanup.policy"), "{m}");
    s.request(
        "POST",
        base,
        &[("Content-Type", "application/json")],
        Some(b"nope"),
    )
    .expect_error(422, 42206);
    s.send_json("POST", base, &json!({"partitions_count": 1}))
        .expect_error(422, 42206);
    s.get(&format!("{base}/z")).expect_error(404, 40401);

    // Default partition count.
    let auto = s
        .send_json("POST", base, &json!({"topic_name": "defaults"}))
        .expect(201);
    assert_eq!(auto["partitions_count"], 4);

    let got = s.get(&format!("{base}/orders")).expect(200);
    assert_eq!(got["topic_name"], "orders");
    assert_eq!(got["partitions_count"], 3);

    // Configs: list, PUT, alter, errors.
    let configs = s.get(&format!("{base}/orders/configs")).expect(200);
    let entry = |configs: &Value, name: &str| {
        configs["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    assert_eq!(
        entry(&configs, "retention.ms"),
        json!({"name": "retention.ms", "value": "60000", "is_default": false, "default": "604800000", "source": "DYNAMIC_TOPIC_CONFIG"})
    );
    assert_eq!(entry(&configs, "segment.ms")["is_default"], true);
    // Every topic config Kafka 3.x and 4.x define (KAFKA.md "Topic
    // configs").
    assert_eq!(configs["data"].as_array().unwrap().len(), 36);

    s.send_json(
        "PUT",
        &format!("{base}/orders/configs/retention.ms"),
        &json!({"value": "120000"}),
    )
    .expect(204);
    s.send_json(
        "PUT",
        &format!("{base}/orders/configs/max.message.bytes"),
        &json!({"value": 2048}),
    )
    .expect(204);
    let m = s
        .send_json(
            "PUT",
            &format!("{base}/orders/configs/retention.mss"),
            &json!({"value": "1"}),
        )
        .expect_error(400, 40002);
    assert!(m.contains("retention.mss"), "{m}");
    let m = s
        .send_json(
            "PUT",
            &format!("{base}/orders/configs/segment.bytes"),
            &json!({"value": "12"}),
        )
        .expect_error(400, 40002);
    assert!(m.contains("segment.bytes"), "{m}");
    s.send_json(
        "PUT",
        &format!("{base}/nope/configs/retention.ms"),
        &json!({"value": "1"}),
    )
    .expect_error(404, 40401);
    s.send_json(
        "PUT",
        &format!("{base}/orders/configs/retention.ms"),
        &json!({"v": "1"}),
    )
    .expect_error(422, 42206);

    let alter = format!("{base}/orders/configs:alter");
    s.send_json(
        "POST",
        &alter,
        &json!({"data": [
            {"name": "segment.ms", "value": "1000"},
            {"name": "max.message.bytes", "operation": "DELETE"},
        ]}),
    )
    .expect(204);
    // All or nothing: one bad entry changes nothing.
    s.send_json(
        "POST",
        &alter,
        &json!({"data": [{"name": "segment.ms", "value": "5"}, {"name": "nope", "value": "1"}]}),
    )
    .expect_error(400, 40002);
    s.send_json("POST", &alter, &json!({"data": [{"name": "segment.ms"}]}))
        .expect_error(400, 40002);
    s.send_json(
        "POST",
        &alter,
        &json!({"data": [{"name": "segment.ms", "value": "1", "operation": "APPEND"}]}),
    )
    .expect_error(400, 40002);
    let configs = s.get(&format!("{base}/orders/configs")).expect(200);
    assert_eq!(entry(&configs, "segment.ms")["value"], "1000");
    assert_eq!(entry(&configs, "retention.ms")["value"], "120000");
    assert_eq!(entry(&configs, "max.message.bytes")["is_default"], true);
    s.get(&format!("{base}/nope/configs"))
        .expect_error(404, 40401);

    // Delete, and a new topic of the same name does not see the old records.
    s.send_json(
        "POST",
        base,
        &json!({"topic_name": "tmp", "partitions_count": 1}),
    )
    .expect(201);
    produce(
        s,
        "/topics/tmp",
        JSON_V2,
        json!({"records": [{"value": 1}, {"value": 2}, {"value": 3}]}),
    )
    .expect(200);
    s.request("DELETE", &format!("{base}/tmp"), &[], None)
        .expect(204);
    s.get(&format!("{base}/tmp")).expect_error(404, 40401);
    s.get("/topics/tmp/partitions/0/records?offset=0")
        .expect_error(404, 40401);
    produce(
        s,
        "/topics/tmp",
        JSON_V2,
        json!({"records": [{"value": 4}]}),
    )
    .expect_error(404, 40401);
    s.request("DELETE", &format!("{base}/tmp"), &[], None)
        .expect_error(404, 40401);
    s.send_json(
        "POST",
        base,
        &json!({"topic_name": "tmp", "partitions_count": 1}),
    )
    .expect(201);
    assert_eq!(
        s.get("/topics/tmp/partitions/0/offsets").expect(200),
        json!({"beginning_offset": 3, "end_offset": 3})
    );
    assert!(fetch(s, "tmp", 0, "offset=0&timeout=0", "*/*").is_empty());
    let r = produce(
        s,
        "/topics/tmp",
        JSON_V2,
        json!({"records": [{"value": "new"}]}),
    );
    assert_eq!(r.expect(200)["offsets"][0]["offset"], 3);
    wait_visible(s, "tmp", 0, 3);
    let got = fetch(s, "tmp", 0, "offset=0&timeout=0", "*/*");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["value"], "new");

    s.request("DELETE", &format!("{base}/__consumer_offsets"), &[], None)
        .expect_error(400, 40002);
    s.request("DELETE", &format!("{base}/a%2Fb"), &[], None)
        .expect_error(400, 40002);

    add_partitions(s, base);
}

/// `PATCH .../topics/{name}` `{"partitions_count"}` grows a topic (here a
/// compact one, whose new partitions are compacted too), as Kafka's
/// CreatePartitions: never shrinks, not the internal topic.
fn add_partitions(s: &TidelogProcess, base: &str) {
    let orders = format!("{base}/orders");
    let grown = s
        .send_json("PATCH", &orders, &json!({"partitions_count": 5}))
        .expect(200);
    assert_eq!(grown["topic_name"], "orders");
    assert_eq!(grown["partitions_count"], 5);
    assert_eq!(s.get(&orders).expect(200)["partitions_count"], 5);
    for count in [5, 2] {
        let m = s
            .send_json("PATCH", &orders, &json!({"partitions_count": count}))
            .expect_error(400, 40002);
        assert!(m.contains("can only grow"), "{m}");
    }
    s.send_json("PATCH", &orders, &json!({"partitions": 6}))
        .expect_error(422, 42206);
    s.send_json(
        "PATCH",
        &format!("{base}/nope"),
        &json!({"partitions_count": 6}),
    )
    .expect_error(404, 40401);
    s.send_json(
        "PATCH",
        &format!("{base}/__consumer_offsets"),
        &json!({"partitions_count": 6}),
    )
    .expect_error(400, 40002);

    let r = produce(
        s,
        "/topics/orders/partitions/4",
        JSON_V2,
        json!({"records": [{"key": "k", "value": "in a new partition"}]}),
    );
    assert_eq!(r.expect(200)["offsets"][0]["offset"], 0);
    wait_visible(s, "orders", 4, 0);
    let got = fetch(s, "orders", 4, "offset=0&timeout=0", "*/*");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["value"], "in a new partition");
}

fn consumer_groups(s: &TidelogProcess) {
    let path = "/consumer-groups/g1/offsets";
    s.get(path).expect_error(404, 40405);
    s.send_json(
        "POST",
        path,
        &json!({"offsets": [
            {"topic": "events", "partition": 0, "offset": 5, "metadata": "m"},
            {"topic": "events", "partition": 1, "offset": 7},
            {"topic": "users", "partition": 0, "offset": 1},
        ]}),
    )
    .expect(204);
    s.send_json(
        "POST",
        path,
        &json!({"offsets": [{"topic": "events", "partition": 0, "offset": 6}]}),
    )
    .expect(204);
    let got = s.get(path).expect(200);
    assert_eq!(
        got,
        json!({"offsets": [
            {"topic": "events", "partition": 0, "offset": 6, "metadata": ""},
            {"topic": "events", "partition": 1, "offset": 7, "metadata": ""},
            {"topic": "users", "partition": 0, "offset": 1, "metadata": ""},
        ]})
    );
    let only = s.get(&format!("{path}?topic=users")).expect(200);
    assert_eq!(only["offsets"].as_array().unwrap().len(), 1);
    // Group names: API.md's characters, `:` and `@` included.
    s.send_json(
        "POST",
        "/consumer-groups/my.group:v2@host/offsets",
        &json!({"offsets": [{"topic": "events", "partition": 2, "offset": 0}]}),
    )
    .expect(204);
    assert_eq!(
        s.get("/consumer-groups/my.group:v2@host/offsets")
            .expect(200)["offsets"][0]["partition"],
        2
    );

    // Errors.
    // Any group id Kafka takes is a group: `a/b` has no offsets; a name
    // over 4,096 bytes is refused.
    s.get("/consumer-groups/a%2Fb/offsets")
        .expect_error(404, 40405);
    s.get(&format!("/consumer-groups/{}/offsets", "g".repeat(4097)))
        .expect_error(400, 40002);
    s.get(&format!("{path}?topic=..")).expect_error(400, 40002);
    let commit = |body: Value| s.send_json("POST", path, &body);
    commit(json!({"offsets": [{"topic": "nope", "partition": 0, "offset": 1}]}))
        .expect_error(404, 40401);
    commit(json!({"offsets": [{"topic": "events", "partition": 9, "offset": 1}]}))
        .expect_error(404, 40402);
    commit(json!({"offsets": [{"topic": "events", "partition": 0, "offset": -1}]}))
        .expect_error(400, 40002);
    commit(json!({"offsets": [{"topic": "events", "partition": 0, "offset": 1, "metadata": "x".repeat(5000)}]}))
        .expect_error(400, 40002);
    commit(json!({"offsets": "all"})).expect_error(422, 42206);
    s.request(
        "POST",
        path,
        &[("Content-Type", "application/json")],
        Some(b"{"),
    )
    .expect_error(422, 42206);
    assert_eq!(
        s.get(path).expect(200)["offsets"][0]["offset"],
        6,
        "failed commits change nothing"
    );
}

fn stats_and_metrics(s: &TidelogProcess) {
    let stats = s.get("/v3/clusters/tidelog/stats").expect(200);
    for field in [
        "commitlog_segments",
        "commitlog_min_offset",
        "commitlog_max_offset",
        "dispatch_lag_bytes",
        "disk_used_ratio",
        "disk_full",
        "index_files",
        "consume_queue_files",
    ] {
        assert!(!stats[field].is_null(), "{field} missing in {stats}");
    }
    assert!(stats["commitlog_segments"].as_u64().unwrap() >= 1);
    // Offset commits went to __consumer_offsets: a queue file and a
    // compacted log segment at least.
    assert!(
        stats["consume_queue_files"].as_u64().unwrap() >= 1,
        "{stats}"
    );
    assert_eq!(stats["disk_full"], false);
    s.get("/v3/clusters/other/stats").expect_error(404, 40400);

    let r = s.get("/metrics");
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    let text = r.text();
    for family in [
        "tidelog_ready 1",
        "tidelog_produce_requests_total{result=\"ok\"}",
        "tidelog_fetch_requests_total{result=\"ok\"}",
        "tidelog_produce_latency_seconds_bucket{le=\"+Inf\"}",
        "tidelog_fetch_latency_seconds_count",
        "tidelog_dispatch_lag_bytes",
        "tidelog_commitlog_segments",
        "tidelog_disk_used_ratio",
        "tidelog_offset_commits_total",
    ] {
        assert!(text.contains(family), "missing {family}:\n{text}");
    }
    assert!(s.metric("tidelog_offset_commits_total") >= 2.0);
    assert!(s.metric("tidelog_consumequeue_files") >= 1.0);
    // The compacted log gets the commits from the dispatcher, a moment
    // after they were answered.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while s.metric("tidelog_compacted_log_segments") < 1.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no compacted log segment"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn restart_keeps_everything(s: &mut TidelogProcess) {
    let status = s.terminate();
    assert!(status.success(), "SIGTERM exit: {status:?}\n{}", s.log());
    assert!(
        !s.data_dir.path().join("abort").exists(),
        "clean shutdown removes abort"
    );
    let log_before = s.log_len();
    s.start_again();
    let new_log = s.log()[log_before..].to_string();
    assert!(!new_log.contains("did not shut down cleanly"), "{new_log}");

    let base = "/v3/clusters/tidelog/topics";
    let configs = s.get(&format!("{base}/orders/configs")).expect(200);
    let value = |name: &str| {
        configs["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap()["value"]
            .clone()
    };
    assert_eq!(value("retention.ms"), "120000");
    assert_eq!(value("segment.ms"), "1000");
    assert_eq!(value("cleanup.policy"), "compact");
    // Grown from 3 by `add_partitions`.
    assert_eq!(
        s.get(&format!("{base}/orders")).expect(200)["partitions_count"],
        5
    );
    assert_eq!(
        s.get(&format!("{base}/defaults")).expect(200)["partitions_count"],
        4
    );
    assert_eq!(
        s.get("/consumer-groups/g1/offsets").expect(200)["offsets"][0]["offset"],
        6
    );
    assert_eq!(
        s.get("/consumer-groups/my.group:v2@host/offsets")
            .expect(200)["offsets"][0]["partition"],
        2
    );
    // The recreated topic keeps hiding its predecessor's records.
    let got = fetch(s, "tmp", 0, "offset=0&timeout=0", "*/*");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["offset"], 3);
    // Commits after the restart still win over the rebuilt state.
    s.send_json(
        "POST",
        "/consumer-groups/g1/offsets",
        &json!({"offsets": [{"topic": "events", "partition": 0, "offset": 8}]}),
    )
    .expect(204);
    assert_eq!(
        s.get("/consumer-groups/g1/offsets").expect(200)["offsets"][0]["offset"],
        8
    );
}

/// Topic and config changes answered before a `kill -9` are there after it:
/// the registry is written (temp file, fsync, rename) before the answer.
fn a_crash_keeps_acknowledged_admin_changes(s: &mut TidelogProcess) {
    let base = "/v3/clusters/tidelog/topics";
    s.send_json(
        "PUT",
        &format!("{base}/orders/configs/retention.ms"),
        &json!({"value": "240000"}),
    )
    .expect(204);
    s.send_json(
        "POST",
        base,
        &json!({"topic_name": "after-crash", "partitions_count": 2, "configs": [
            {"name": "segment.ms", "value": "5000"},
        ]}),
    )
    .expect(201);
    s.request("DELETE", &format!("{base}/defaults"), &[], None)
        .expect(204);
    let log_before = s.log_len();
    s.restart();
    let new_log = s.log()[log_before..].to_string();
    assert!(
        new_log.contains("did not shut down cleanly"),
        "the start after kill -9 is an unclean one:\n{new_log}"
    );
    let configs = s.get(&format!("{base}/orders/configs")).expect(200);
    let retention = configs["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "retention.ms")
        .unwrap()["value"]
        .clone();
    assert_eq!(retention, "240000");
    let created = s.get(&format!("{base}/after-crash")).expect(200);
    assert_eq!(created["partitions_count"], 2);
    let created_configs = s.get(&format!("{base}/after-crash/configs")).expect(200);
    assert!(
        created_configs["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "segment.ms" && e["value"] == "5000"),
        "{created_configs}"
    );
    s.get(&format!("{base}/defaults")).expect_error(404, 40401);
}
