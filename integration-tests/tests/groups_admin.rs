//! The operator's consumer group routes of API.md ("Groups and time
//! lookups") against the real binary: list, describe with lag, reset in
//! every form and scope, delete and a restart after it, the admin token,
//! and every error code they answer.
//!
//! One server, one test, many steps (the binary starts once per file).
//! Reset and delete of a group that has members (409/40903) need a member,
//! which only the consumer-instance routes make over HTTP; that refusal is
//! tested at the broker (`broker/src/group_admin.rs`) and its code in
//! `api/src/error.rs`.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Response, TidelogProcess};
use serde_json::{json, Value};

const CONFIG: &str = "
admin_token: s3cret
topics:
  - name: events
    partitions: 2
  - name: users
    partitions: 1
    configs: { cleanup.policy: compact }
  - name: gone
    partitions: 1
  - name: timed
    partitions: 1
";

const AUTH: (&str, &str) = ("Authorization", "Bearer s3cret");
const JSON: (&str, &str) = ("Content-Type", "application/json");

/// Produces `n` records to one partition and waits (long-poll, no polling
/// loop) until the last is fetchable, so it counts in the partition's end.
fn produce(s: &TidelogProcess, topic: &str, partition: u32, n: usize) {
    let records: Vec<Value> = (0..n).map(|i| json!({"key": "k", "value": i})).collect();
    let r = s.send_json(
        "POST",
        &format!("/topics/{topic}/partitions/{partition}"),
        &json!({ "records": records }),
    );
    let last = r.expect(200)["offsets"][n - 1]["offset"].as_u64().unwrap();
    let got = s
        .get(&format!(
            "/topics/{topic}/partitions/{partition}/records?offset={last}&timeout=10000"
        ))
        .expect(200);
    assert_eq!(got[0]["offset"], last, "{got}");
}

fn commit(s: &TidelogProcess, group: &str, offsets: Value) {
    s.send_json(
        "POST",
        &format!("/consumer-groups/{group}/offsets"),
        &json!({ "offsets": offsets }),
    )
    .expect(204);
}

/// `POST /consumer-groups/{group}/offsets:reset` with the token.
fn reset(s: &TidelogProcess, group: &str, body: Value) -> Response {
    s.request(
        "POST",
        &format!("/consumer-groups/{group}/offsets:reset"),
        &[JSON, AUTH],
        Some(body.to_string().as_bytes()),
    )
}

fn delete(s: &TidelogProcess, group: &str) -> Response {
    s.request(
        "DELETE",
        &format!("/consumer-groups/{group}"),
        &[AUTH],
        None,
    )
}

/// The group's committed offsets as (topic, partition, offset).
fn offsets(s: &TidelogProcess, group: &str) -> Vec<(String, u64, u64)> {
    let got = s
        .get(&format!("/consumer-groups/{group}/offsets"))
        .expect(200);
    triples(&got["offsets"])
}

fn triples(list: &Value) -> Vec<(String, u64, u64)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["topic"].as_str().unwrap().to_string(),
                o["partition"].as_u64().unwrap(),
                o["offset"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn owned(list: &[(&str, u64, u64)]) -> Vec<(String, u64, u64)> {
    list.iter()
        .map(|(t, p, o)| (t.to_string(), *p, *o))
        .collect()
}

fn listed(s: &TidelogProcess) -> Vec<String> {
    let got = s.get("/consumer-groups").expect(200);
    got["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn list_describe_reset_delete_and_a_restart() {
    let mut s = TidelogProcess::start_with_config(&format!("{}{CONFIG}", common::SMALL_STORE));
    produce(&s, "events", 0, 5);
    produce(&s, "events", 1, 2);
    produce(&s, "users", 0, 1);
    commit(
        &s,
        "g1",
        json!([
            {"topic": "events", "partition": 0, "offset": 2, "metadata": "m"},
            {"topic": "gone", "partition": 0, "offset": 0},
        ]),
    );
    commit(
        &s,
        "g2",
        json!([{"topic": "events", "partition": 1, "offset": 1}]),
    );
    s.request("DELETE", "/v3/clusters/tidelog/topics/gone", &[AUTH], None)
        .expect(204);

    list_and_describe(&s);
    errors_and_auth(&s);
    resets(&s);
    let before_delete = offsets(&s, "g1");

    // Delete: the group is gone from every route.
    delete(&s, "g2").expect(204);
    assert_eq!(listed(&s), ["g1", "seeded"]);
    s.get("/consumer-groups/g2").expect_error(404, 40405);
    s.get("/consumer-groups/g2/offsets")
        .expect_error(404, 40405);
    delete(&s, "g2").expect_error(404, 40405);

    // A group whose id holds `/`, a space and a comma (Kafka takes any):
    // its offsets are kept under `group/topic/partition` keys split from
    // the right, so they come back whole after the restart below.
    let odd = "a%2Fb%20c%2Cd";
    commit(
        &s,
        odd,
        json!([{"topic": "events", "partition": 1, "offset": 2}]),
    );
    let odd_offsets = offsets(&s, odd);
    assert_eq!(odd_offsets, owned(&[("events", 1, 2)]));

    // ... and stays gone after a restart; the others keep their offsets.
    let status = s.terminate();
    assert!(status.success(), "SIGTERM exit: {status:?}\n{}", s.log());
    s.start_again();
    assert_eq!(listed(&s), ["a/b c,d", "g1", "seeded"]);
    assert_eq!(offsets(&s, odd), odd_offsets);
    s.get("/consumer-groups/g2/offsets")
        .expect_error(404, 40405);
    assert_eq!(offsets(&s, "g1"), before_delete);
    assert_eq!(offsets(&s, "seeded"), owned(&[("users", 0, 1)]));
}

fn list_and_describe(s: &TidelogProcess) {
    // Groups with offsets only: Empty, no protocol, no members, by name.
    let list = s.get("/consumer-groups").expect(200);
    assert_eq!(
        list,
        json!({"groups": [
            {"group": "g1", "state": "Empty", "protocol": null, "members": 0},
            {"group": "g2", "state": "Empty", "protocol": null, "members": 0},
        ]})
    );

    let d = s.get("/consumer-groups/g1").expect(200);
    assert_eq!(d["group"], "g1");
    assert_eq!(d["state"], "Empty");
    assert_eq!(d["generation"], 0);
    assert_eq!(d["protocol"], Value::Null);
    assert_eq!(d["members"], json!([]));
    assert_eq!(
        d["offsets"],
        json!([
            {"topic": "events", "partition": 0, "offset": 2, "metadata": "m", "end_offset": 5, "lag": 3},
            // A deleted topic's offsets stay listed, with no end to compare.
            {"topic": "gone", "partition": 0, "offset": 0, "metadata": "", "end_offset": null, "lag": null},
        ])
    );
    // Lag follows produce.
    produce(s, "events", 0, 2);
    let d = s.get("/consumer-groups/g1").expect(200);
    assert_eq!(d["offsets"][0]["end_offset"], 7);
    assert_eq!(d["offsets"][0]["lag"], 5);
    // A commit past the end has no negative lag.
    commit(
        s,
        "g2",
        json!([{"topic": "events", "partition": 1, "offset": 9}]),
    );
    let d = s.get("/consumer-groups/g2").expect(200);
    assert_eq!(d["offsets"][0]["lag"], 0);
    commit(
        s,
        "g2",
        json!([{"topic": "events", "partition": 1, "offset": 1}]),
    );
}

fn errors_and_auth(s: &TidelogProcess) {
    s.get("/consumer-groups/nobody").expect_error(404, 40405);
    delete(s, "nobody").expect_error(404, 40405);
    reset(s, "nobody", json!({"to": "end"})).expect_error(404, 40405);
    // Any group id Kafka takes is a group (`/`, spaces, commas): percent-
    // encoded in the path, and unknown until it has offsets.
    s.get("/consumer-groups/a%2Fb").expect_error(404, 40405);
    delete(s, "a%2Fb").expect_error(404, 40405);
    reset(s, "a%2Fb", json!({"to": "end"})).expect_error(404, 40405);

    // Reset and delete are admin calls; reading and committing are not.
    let body = json!({"to": "end"}).to_string();
    for path in [
        "/consumer-groups/g1/offsets:reset",
        "/consumer-groups/g1/offsets%3Areset",
    ] {
        s.request("POST", path, &[JSON], Some(body.as_bytes()))
            .expect_error(401, 40101);
        s.request(
            "POST",
            path,
            &[JSON, ("Authorization", "Bearer wrong")],
            Some(body.as_bytes()),
        )
        .expect_error(401, 40101);
    }
    s.request("DELETE", "/consumer-groups/g1", &[], None)
        .expect_error(401, 40101);
    s.get("/consumer-groups").expect(200);
    s.get("/consumer-groups/g1").expect(200);
    assert_eq!(
        offsets(s, "g1"),
        owned(&[("events", 0, 2), ("gone", 0, 0)]),
        "refused calls changed nothing"
    );
}

fn resets(s: &TidelogProcess) {
    // The whole group: every partition of every topic it has offsets for
    // (events/1 had none); the deleted topic's offset is left as it is.
    let r = reset(s, "g1", json!({"to": "beginning"})).expect(200);
    assert_eq!(
        r,
        json!({"offsets": [
            {"topic": "events", "partition": 0, "offset": 0, "metadata": ""},
            {"topic": "events", "partition": 1, "offset": 0, "metadata": ""},
        ]})
    );
    assert_eq!(
        offsets(s, "g1"),
        owned(&[("events", 0, 0), ("events", 1, 0), ("gone", 0, 0)])
    );

    // One topic, to the end.
    let r = reset(s, "g1", json!({"topic": "events", "to": "end"})).expect(200);
    assert_eq!(
        triples(&r["offsets"]),
        owned(&[("events", 0, 7), ("events", 1, 2)])
    );
    // Some partitions, to an offset; one past the end is clamped to it.
    let r = reset(
        s,
        "g1",
        json!({"topic": "events", "partitions": [1], "to": {"offset": 1}}),
    )
    .expect(200);
    assert_eq!(triples(&r["offsets"]), owned(&[("events", 1, 1)]));
    let r = reset(
        s,
        "g1",
        json!({"topic": "events", "partitions": [0], "to": {"offset": 1000}}),
    )
    .expect(200);
    assert_eq!(triples(&r["offsets"]), owned(&[("events", 0, 7)]));
    let d = s.get("/consumer-groups/g1").expect(200);
    assert_eq!(d["offsets"][1]["lag"], 1, "describe sees the reset");

    // To a timestamp: the first offset whose record timestamp is at least
    // it (producers' timestamps, out of order), the end when none is.
    let records: Vec<Value> = [10, 50, 30, 70, 20]
        .iter()
        .map(|ts| json!({"key": "k", "value": ts, "timestamp": ts}))
        .collect();
    s.send_json(
        "POST",
        "/topics/timed/partitions/0",
        &json!({ "records": records }),
    )
    .expect(200);
    s.get("/topics/timed/partitions/0/records?offset=4&timeout=10000")
        .expect(200);
    for (ts, want) in [(0, 0), (11, 1), (30, 1), (51, 3), (71, 5)] {
        let body = json!({"topic": "timed", "to": {"timestamp": ts}});
        // A reset naming a topic seeds a group of its own here.
        let r = reset(s, "timed-group", body).expect(200);
        assert_eq!(triples(&r["offsets"]), owned(&[("timed", 0, want)]), "{ts}");
    }
    delete(s, "timed-group").expect(204);

    // Refused, and nothing changes.
    let before = offsets(s, "g1");
    let refused = [
        (json!({"topic": "nope", "to": "end"}), 404, 40401),
        (
            json!({"topic": "events", "partitions": [5], "to": "end"}),
            404,
            40402,
        ),
        (json!({"partitions": [0], "to": "end"}), 400, 40002),
        (
            json!({"topic": "events", "partitions": [], "to": "end"}),
            400,
            40002,
        ),
        (
            json!({"topic": "events", "partitions": [-1], "to": "end"}),
            400,
            40002,
        ),
        (json!({"to": {"offset": -1}}), 400, 40002),
        (json!({"to": "middle"}), 400, 40002),
        (json!({"to": {"timestamp": -5}}), 400, 40002),
        (json!({"topic": "..", "to": "end"}), 400, 40002),
        (json!({"to": 5}), 422, 42206),
        (json!({"to": {"offset": "1"}}), 422, 42206),
        (json!({"topic": "events"}), 422, 42206),
        (json!({"to": "end", "group": "g1"}), 422, 42206),
        (json!(["end"]), 422, 42206),
    ];
    for (body, status, code) in refused {
        let r = reset(s, "g1", body.clone());
        assert_eq!(r.status, status, "{body}: {}", r.text());
        r.expect_error(status, code);
    }
    s.request(
        "POST",
        "/consumer-groups/g1/offsets:reset",
        &[JSON, AUTH],
        Some(b"{"),
    )
    .expect_error(422, 42206);
    assert_eq!(offsets(s, "g1"), before);

    // A topic scope seeds a group that has no offsets yet.
    let r = reset(s, "seeded", json!({"topic": "users", "to": "end"})).expect(200);
    assert_eq!(triples(&r["offsets"]), owned(&[("users", 0, 1)]));
    assert_eq!(listed(s), ["g1", "g2", "seeded"]);
}
