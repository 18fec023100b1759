//! API.md's "Consumer instances" (REST Proxy v2) against the real binary:
//! every route and error code, a group's instances splitting a topic and
//! taking over a deleted one's partitions, long-polls woken by a produce,
//! regex subscriptions picking up new topics, and committed offsets
//! resuming after a restart and over the ext offsets route.
//!
//! One server per test (nextest runs each test in a process of its own),
//! each checked in many steps.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;

use common::{Response, TidelogProcess};
use serde_json::{json, Value};

const JSON_V2: &str = "application/vnd.kafka.json.v2+json";
const BINARY_V2: &str = "application/vnd.kafka.binary.v2+json";
const V2: &str = "application/vnd.kafka.v2+json";

const CONFIG: &str = "
store:
  commitlog_segment_bytes: 1048576
  consume_queue_units_per_file: 1000
  index_slots: 1000
  index_entries: 4000
  flush_interval_ms: 50
http:
  max_request_bytes: 65536
  max_consumer_instances: 6
  advertised_url: http://proxy.example:9999
groups:
  initial_rebalance_delay_ms: 0
topics:
  - name: events
    partitions: 4
  - name: other
    partitions: 1
";

/// A v2 call the way kafka-bridge-client makes it: `Content-Type:
/// application/vnd.kafka.v2+json` and a `{}` body when there is none.
fn call(s: &TidelogProcess, method: &str, path: &str, body: Option<Value>) -> Response {
    let body = body.unwrap_or_else(|| json!({})).to_string();
    s.request(method, path, &[("Content-Type", V2)], Some(body.as_bytes()))
}

fn instance(group: &str, name: &str) -> String {
    format!("/consumers/{group}/instances/{name}")
}

fn create(s: &TidelogProcess, group: &str, body: Value) -> Value {
    call(s, "POST", &format!("/consumers/{group}"), Some(body)).expect(200)
}

fn subscribe(s: &TidelogProcess, group: &str, name: &str, topics: &[&str]) {
    let r = call(
        s,
        "POST",
        &format!("{}/subscription", instance(group, name)),
        Some(json!({ "topics": topics })),
    );
    assert_eq!(r.status, 204, "{}", r.text());
}

/// Produces JSON values `"{tag}-{i}"` to a partition.
fn produce(s: &TidelogProcess, topic: &str, partition: u32, tag: &str, n: usize) {
    let records: Vec<Value> = (0..n)
        .map(|i| {
            json!({ "value": format!("{tag}-{i}"),
                    "headers": [{"name": "h", "value": "aGk="}, {"name": "h", "value": null}] })
        })
        .collect();
    s.post_raw(
        &format!("/topics/{topic}/partitions/{partition}"),
        JSON_V2,
        json!({ "records": records }).to_string().as_bytes(),
    )
    .expect(200);
}

/// One records call (json instances) with `timeout` ms.
fn records(s: &TidelogProcess, group: &str, name: &str, timeout_ms: u64) -> Vec<Value> {
    let r = s.request(
        "GET",
        &format!("{}/records?timeout={timeout_ms}", instance(group, name)),
        &[("Accept", JSON_V2), ("Content-Type", V2)],
        Some(b"{}"),
    );
    assert_eq!(r.header("content-type"), Some(V2));
    r.expect(200).as_array().unwrap().clone()
}

/// Records calls until `n` records came (bounded).
fn records_until(s: &TidelogProcess, group: &str, name: &str, n: usize) -> Vec<Value> {
    let mut got = Vec::new();
    for _ in 0..50 {
        if got.len() >= n {
            break;
        }
        got.extend(records(s, group, name, 200));
    }
    got
}

fn assigned(s: &TidelogProcess, group: &str, name: &str) -> BTreeSet<(String, u64)> {
    call(
        s,
        "GET",
        &format!("{}/assignments", instance(group, name)),
        None,
    )
    .expect(200)["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["topic"].as_str().unwrap().to_string(),
                p["partition"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn keys(records: &[Value]) -> Vec<(u64, u64)> {
    records
        .iter()
        .map(|r| {
            (
                r["partition"].as_u64().unwrap(),
                r["offset"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn consumer_instances_split_hand_over_wake_and_refuse_what_api_md_refuses() {
    let s = TidelogProcess::start_with_config(CONFIG);

    // Create: generated name, base_uri from http.advertised_url; a name
    // taken is 40902, a bad config 42204, a bad body
    // 42206, a wrong content type 41501.
    let created = create(&s, "g", json!({}));
    let generated = created["instance_id"].as_str().unwrap().to_string();
    assert_eq!(
        created["base_uri"],
        format!("http://proxy.example:9999/consumers/g/instances/{generated}")
    );
    let a = json!({"name": "a", "format": "json", "auto.offset.reset": "earliest", "auto.commit.enable": "false"});
    assert_eq!(create(&s, "g", a.clone())["instance_id"], "a");
    call(&s, "POST", "/consumers/g", Some(a)).expect_error(409, 40902);
    for bad in [
        json!({"format": "avro"}),
        json!({"auto.offset.reset": "first"}),
        json!({"auto.commit.enable": "maybe"}),
        json!({"fetch.min.bytes": "x"}),
        json!({"no.such.setting": "1"}),
        json!({"name": "a/b"}),
    ] {
        call(&s, "POST", "/consumers/g", Some(bad)).expect_error(422, 42204);
    }
    // Any group id Kafka takes: its base_uri percent-encodes it, and the
    // instance answers there.
    let odd = create(&s, "a%2Fb%20c", json!({"name": "o"}));
    assert_eq!(
        odd["base_uri"],
        "http://proxy.example:9999/consumers/a%2Fb%20c/instances/o"
    );
    call(&s, "DELETE", "/consumers/a%2Fb%20c/instances/o", None).expect(204);
    let big = format!("{{\"name\":\"{}\"}}", "x".repeat(70_000));
    s.request(
        "POST",
        "/consumers/g",
        &[("Content-Type", V2)],
        Some(big.as_bytes()),
    )
    .expect_error(413, 41301);
    s.request(
        "POST",
        "/consumers/g",
        &[("Content-Type", V2)],
        Some(b"[1]"),
    )
    .expect_error(422, 42206);
    s.request(
        "POST",
        "/consumers/g",
        &[("Content-Type", "text/plain")],
        Some(b"{}"),
    )
    .expect_error(415, 41501);
    call(&s, "DELETE", &instance("g", &generated), None).expect(204);
    // Deleting an unknown instance is 404/40403 (kafka-bridge-client
    // deletes before it creates, expecting 204 or 404).
    call(&s, "DELETE", &instance("g", &generated), None).expect_error(404, 40403);
    call(
        &s,
        "GET",
        &format!("{}/assignments", instance("g", "nope")),
        None,
    )
    .expect_error(404, 40403);

    // Two instances of one group split a 4-partition topic.
    produce(&s, "events", 0, "p0", 3);
    produce(&s, "events", 1, "p1", 3);
    produce(&s, "events", 2, "p2", 3);
    produce(&s, "events", 3, "p3", 3);
    subscribe(&s, "g", "a", &["events"]);
    let sub = call(
        &s,
        "GET",
        &format!("{}/subscription", instance("g", "a")),
        None,
    )
    .expect(200);
    assert_eq!(sub, json!({"topics": ["events"]}));
    create(
        &s,
        "g",
        json!({"name": "b", "format": "json", "auto.offset.reset": "earliest", "auto.commit.enable": "false"}),
    );
    subscribe(&s, "g", "b", &["events"]);
    let (held_a, held_b) = (assigned(&s, "g", "a"), assigned(&s, "g", "b"));
    assert_eq!(held_a.len() + held_b.len(), 4, "{held_a:?} {held_b:?}");
    assert!(held_a.is_disjoint(&held_b));
    let got_a = records_until(&s, "g", "a", 6);
    let got_b = records_until(&s, "g", "b", 6);
    assert_eq!((got_a.len(), got_b.len()), (6, 6));
    let first = &got_a[0];
    assert!(first["value"].as_str().unwrap().starts_with('p'));
    assert!(first["timestamp"].as_i64().unwrap() > 0);
    assert_eq!(
        first["headers"],
        json!([{"name": "h", "value": "aGk="}, {"name": "h", "value": null}]),
        "a null header value reads as null"
    );
    assert_eq!(first["topic"], "events");

    // Bad query parameters are 40002.
    s.request(
        "GET",
        &format!("{}/records?timeout=abc", instance("g", "a")),
        &[("Accept", JSON_V2)],
        None,
    )
    .expect_error(400, 40002);
    s.request(
        "GET",
        &format!("{}/records?max_bytes=0", instance("g", "a")),
        &[("Accept", JSON_V2)],
        None,
    )
    .expect_error(400, 40002);

    // Accept must be the instance's format.
    s.request(
        "GET",
        &format!("{}/records", instance("g", "a")),
        &[("Accept", BINARY_V2)],
        None,
    )
    .expect_error(406, 40601);

    // Commit without a body: everything a returned (Confluent: 200);
    // GET offsets answers the committed offsets as stored (next to read).
    let commit = call(&s, "POST", &format!("{}/offsets", instance("g", "a")), None);
    assert_eq!(commit.status, 200, "{}", commit.text());
    let wanted: Vec<Value> = held_a
        .iter()
        .map(|(t, p)| json!({"topic": t, "partition": p}))
        .collect();
    let committed = call(
        &s,
        "GET",
        &format!("{}/offsets", instance("g", "a")),
        Some(json!({ "partitions": wanted })),
    )
    .expect(200);
    for o in committed["offsets"].as_array().unwrap() {
        assert_eq!(o["offset"], 3, "{committed}");
    }
    assert_eq!(committed["offsets"].as_array().unwrap().len(), 2);
    // An explicit commit stores offset + 1, and only of held partitions;
    // the ext route is refused while the group has members.
    let (bt, bp) = held_b.iter().next().unwrap().clone();
    call(
        &s,
        "POST",
        &format!("{}/offsets", instance("g", "b")),
        Some(json!({"offsets": [{"topic": bt, "partition": bp, "offset": 1}]})),
    )
    .expect(200);
    let (at, ap) = held_a.iter().next().unwrap().clone();
    call(
        &s,
        "POST",
        &format!("{}/offsets", instance("g", "b")),
        Some(json!({"offsets": [{"topic": at, "partition": ap, "offset": 1}]})),
    )
    .expect_error(409, 40903);
    s.send_json(
        "POST",
        "/consumer-groups/g/offsets",
        &json!({"offsets": [{"topic": "events", "partition": 0, "offset": 0}]}),
    )
    .expect_error(409, 40903);
    let stored = s.get("/consumer-groups/g/offsets?topic=events").expect(200);
    let of = |p: u64| {
        stored["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["partition"] == p)
            .map(|o| o["offset"].as_u64().unwrap())
    };
    assert_eq!(of(bp), Some(2), "offset 1 consumed: 2 is next");
    assert_eq!(of(ap), Some(3));

    // Long-poll: a records call waiting for 30 s returns the record a
    // produce adds, long before (the wake, not a timeout: a timeout
    // would answer []).
    let (wt, wp) = held_a.iter().last().unwrap().clone();
    let addr_s = &s;
    let woken = std::thread::scope(|scope| {
        let waiter = scope.spawn(move || records(addr_s, "g", "a", 30_000));
        // Give the call time to start waiting; correctness does not depend
        // on it (a record already there is returned at once too).
        std::thread::sleep(std::time::Duration::from_millis(300));
        produce(addr_s, &wt, wp as u32, "late", 1);
        waiter.join().unwrap()
    });
    assert_eq!(woken.len(), 1, "{woken:?}");
    assert_eq!(woken[0]["value"], "late-0");

    // Positions: seek back to the beginning and read again; seek to an
    // offset; seek to the end; a partition not held is 40903.
    let held: Vec<Value> = held_a
        .iter()
        .map(|(t, p)| json!({"topic": t, "partition": p}))
        .collect();
    call(
        &s,
        "POST",
        &format!("{}/positions/beginning", instance("g", "a")),
        Some(json!({ "partitions": held })),
    )
    .expect(204);
    assert_eq!(records_until(&s, "g", "a", 7).len(), 7);
    call(
        &s,
        "POST",
        &format!("{}/positions", instance("g", "a")),
        Some(json!({"offsets": [{"topic": at, "partition": ap, "offset": 2}]})),
    )
    .expect(204);
    let again = records_until(&s, "g", "a", 1);
    assert_eq!(keys(&again), [(ap, 2)]);
    call(
        &s,
        "POST",
        &format!("{}/positions/end", instance("g", "a")),
        Some(json!({ "partitions": held })),
    )
    .expect(204);
    assert!(records(&s, "g", "a", 0).is_empty());
    call(
        &s,
        "POST",
        &format!("{}/positions", instance("g", "a")),
        Some(json!({"offsets": [{"topic": bt, "partition": bp, "offset": 0}]})),
    )
    .expect_error(409, 40903);

    // Delete b: a takes every partition, and resumes b's at b's commit.
    call(&s, "DELETE", &instance("g", "b"), None).expect(204);
    assert_eq!(assigned(&s, "g", "a").len(), 4);
    let resumed = records_until(&s, "g", "a", 1);
    assert!(
        keys(&resumed).contains(&(bp, 2)),
        "b's partition resumes at its commit: {resumed:?}"
    );

    // Manual assignment: no group, and mixing with a subscription is
    // 40903 both ways.
    create(
        &s,
        "m",
        json!({"name": "m", "format": "json", "auto.offset.reset": "earliest"}),
    );
    call(
        &s,
        "POST",
        &format!("{}/assignments", instance("m", "m")),
        Some(json!({"partitions": [{"topic": "other", "partition": 0}]})),
    )
    .expect(204);
    call(
        &s,
        "POST",
        &format!("{}/subscription", instance("m", "m")),
        Some(json!({"topics": ["other"]})),
    )
    .expect_error(409, 40903);
    call(
        &s,
        "POST",
        &format!("{}/assignments", instance("g", "a")),
        Some(json!({"partitions": [{"topic": "other", "partition": 0}]})),
    )
    .expect_error(409, 40903);
    produce(&s, "other", 0, "o", 2);
    assert_eq!(records_until(&s, "m", "m", 2).len(), 2);

    // A regex subscription picks up a topic created later.
    create(
        &s,
        "r",
        json!({"name": "r", "format": "json", "auto.offset.reset": "earliest"}),
    );
    call(
        &s,
        "POST",
        &format!("{}/subscription", instance("r", "r")),
        Some(json!({"topic_pattern": "new-.*"})),
    )
    .expect(204);
    call(
        &s,
        "POST",
        &format!("{}/subscription", instance("r", "r")),
        Some(json!({"topic_pattern": "("})),
    )
    .expect_error(422, 42204);
    assert!(assigned(&s, "r", "r").is_empty());
    s.send_json(
        "POST",
        "/v3/clusters/tidelog/topics",
        &json!({"topic_name": "new-topic", "partitions_count": 1}),
    )
    .expect(201);
    produce(&s, "new-topic", 0, "n", 2);
    let mut picked = Vec::new();
    for _ in 0..50 {
        picked.extend(records(&s, "r", "r", 500));
        if picked.len() >= 2 {
            break;
        }
    }
    assert_eq!(picked.len(), 2, "{picked:?}");
    let sub = call(
        &s,
        "GET",
        &format!("{}/subscription", instance("r", "r")),
        None,
    )
    .expect(200);
    assert_eq!(sub, json!({"topics": ["new-topic"]}));
    call(
        &s,
        "DELETE",
        &format!("{}/subscription", instance("r", "r")),
        None,
    )
    .expect(204);
    assert!(assigned(&s, "r", "r").is_empty());

    // auto.offset.reset none: a partition without a commit is 42205.
    create(
        &s,
        "n",
        json!({"name": "n", "format": "json", "auto.offset.reset": "none"}),
    );
    subscribe(&s, "n", "n", &["other"]);
    let r = s.request(
        "GET",
        &format!("{}/records?timeout=0", instance("n", "n")),
        &[("Accept", JSON_V2)],
        None,
    );
    let message = r.expect_error(422, 42205);
    assert!(message.contains("other"), "{message}");

    // At most http.max_consumer_instances (6) on the server.
    let live = 4; // a, m, r, n
    for i in 0..(6 - live) {
        create(&s, "full", json!({ "name": format!("f{i}") }));
    }
    call(&s, "POST", "/consumers/full", None).expect_error(429, 42901);
}

/// Commits survive a restart: instances (not durable) are created again
/// and resume at the committed offsets, nothing lost and nothing read
/// twice beyond the uncommitted tail; and a group created over HTTP
/// resumes over the ext offsets route at the same offset.
#[test]
fn committed_offsets_resume_after_a_restart_and_over_the_ext_route() {
    let mut s = TidelogProcess::start_with_config(CONFIG);
    for p in 0..4 {
        produce(&s, "events", p, &format!("p{p}"), 5);
    }
    let config = json!({"name": "c", "format": "json", "auto.offset.reset": "earliest", "auto.commit.enable": "false"});
    create(&s, "g", config.clone());
    subscribe(&s, "g", "c", &["events"]);
    let first = records_until(&s, "g", "c", 20);
    assert_eq!(first.len(), 20);
    call(&s, "POST", &format!("{}/offsets", instance("g", "c")), None).expect(200);
    for p in 0..4 {
        produce(&s, "events", p, &format!("q{p}"), 2);
    }
    let tail = records_until(&s, "g", "c", 8);
    assert_eq!(tail.len(), 8, "the uncommitted tail");
    s.terminate();
    s.start_again();
    call(
        &s,
        "GET",
        &format!("{}/assignments", instance("g", "c")),
        None,
    )
    .expect_error(404, 40403);
    create(&s, "g", config);
    subscribe(&s, "g", "c", &["events"]);
    let after = records_until(&s, "g", "c", 8);
    assert_eq!(
        keys(&after).into_iter().collect::<BTreeSet<_>>(),
        keys(&tail).into_iter().collect::<BTreeSet<_>>(),
        "exactly the uncommitted tail again, nothing lost"
    );
    assert!(records(&s, "g", "c", 0).is_empty());
    call(&s, "POST", &format!("{}/offsets", instance("g", "c")), None).expect(200);
    // The group over the ext route: the same committed offsets, and once
    // its instance is gone a stateless commit lands.
    let stored = s.get("/consumer-groups/g/offsets").expect(200);
    let offsets = stored["offsets"].as_array().unwrap();
    assert_eq!(offsets.len(), 4);
    assert!(offsets.iter().all(|o| o["offset"] == 7), "{stored}");
    call(&s, "DELETE", &instance("g", "c"), None).expect(204);
    let r = s.send_json(
        "POST",
        "/consumer-groups/g/offsets",
        &json!({"offsets": [{"topic": "events", "partition": 0, "offset": 7}]}),
    );
    assert_eq!(r.status, 204, "{}", r.text());
}

/// An instance nobody uses expires after `http.consumer_instance_timeout_ms`
/// (on `tidelog-consumers`, with no request coming): its name is free
/// again and its partitions go to the group's other instance.
#[test]
fn idle_instances_expire_on_their_own() {
    let s = TidelogProcess::start_with_config(&CONFIG.replace(
        "  advertised_url: http://proxy.example:9999\n",
        "  advertised_url: http://proxy.example:9999\n  consumer_instance_timeout_ms: 1000\n",
    ));
    let config =
        |name: &str| json!({"name": name, "format": "json", "auto.offset.reset": "earliest"});
    create(&s, "g", config("idle"));
    subscribe(&s, "g", "idle", &["events"]);
    create(&s, "g", config("busy"));
    subscribe(&s, "g", "busy", &["events"]);
    assert_eq!(assigned(&s, "g", "busy").len(), 2);
    // Creating the idle one's name again does not use it: 409 while it
    // lives, 200 once it expired (bounded; the busy one keeps itself
    // alive by asking for its assignments).
    let mut expired = false;
    for _ in 0..300 {
        let r = call(&s, "POST", "/consumers/g", Some(config("idle")));
        if r.status == 200 {
            expired = true;
            break;
        }
        assert_eq!(r.status, 409, "{}", r.text());
        assert!(!assigned(&s, "g", "busy").is_empty());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(expired, "the idle instance never expired");
    assert_eq!(assigned(&s, "g", "busy").len(), 4);
}

/// A `topic_pattern` is a regex over whole topic names on its own:
/// `events)|(.*`, which closed the anchoring group and matched every topic
/// when the pattern was wrapped as text, is 422/42204 and subscribes to
/// nothing; a pattern that is valid alone still matches only whole names.
/// (Issue 35 item 12.)
#[test]
fn a_topic_pattern_cannot_escape_its_anchors() {
    let s = TidelogProcess::start_with_config(CONFIG);
    create(&s, "pg", json!({"name": "p"}));
    let path = format!("{}/subscription", instance("pg", "p"));
    let m = call(
        &s,
        "POST",
        &path,
        Some(json!({"topic_pattern": "events)|(.*"})),
    )
    .expect_error(422, 42204);
    assert!(m.contains("topic_pattern"), "{m}");
    assert_eq!(
        call(&s, "GET", &path, None).expect(200),
        json!({"topics": []})
    );
    let r = call(
        &s,
        "POST",
        &path,
        Some(json!({"topic_pattern": "ev.*|oth"})),
    );
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(
        call(&s, "GET", &path, None).expect(200),
        json!({"topics": ["events"]})
    );
}
