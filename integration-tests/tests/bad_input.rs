//! Bad input that used to be accepted, against the real binary: every JSON
//! body must be an object where API.md says object (a sequence is not read
//! as the fields in order), and a refused request changes nothing.
//!
//! One server, small CommitLog segments so a few hundred KiB make several
//! of them; every disk ratio at 1.0 and an hour between scheduled retention
//! passes, so every deletion would be a request's.
#![allow(clippy::unwrap_used)]

mod common;

use common::TidelogProcess;
use serde_json::{json, Value};

const CONFIG: &str = "
cleaner:
  backoff_ms: 100
  dedupe_buffer_bytes: 1048576
topics:
  - name: plain
    partitions: 1
  - name: table
    partitions: 1
    configs: { cleanup.policy: compact, segment.bytes: 1048576 }
";

const JSON_V2: &str = "application/vnd.kafka.json.v2+json";
const CLUSTER: &str = "/v3/clusters/tidelog";

/// `method path` with `body` sent as it is (`Content-Type: application/json`).
fn send(s: &TidelogProcess, method: &str, path: &str, body: &str) -> common::Response {
    s.request(
        method,
        path,
        &[("Content-Type", "application/json")],
        Some(body.as_bytes()),
    )
}

fn produce(s: &TidelogProcess, topic: &str, records: Value) -> Value {
    let body = json!({ "records": records }).to_string();
    s.post_raw(&format!("/topics/{topic}"), JSON_V2, body.as_bytes())
        .expect(200)
}

/// The config entry `name` of `topic`: `(value, is_default)`.
fn config(s: &TidelogProcess, topic: &str, name: &str) -> (Value, bool) {
    let answer = s
        .get(&format!("{CLUSTER}/topics/{topic}/configs"))
        .expect(200);
    let entry = answer["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {answer}"))
        .clone();
    (
        entry["value"].clone(),
        entry["is_default"].as_bool().unwrap(),
    )
}

#[test]
fn a_sequence_where_an_object_belongs_is_42206_and_changes_nothing() {
    let s = TidelogProcess::start_with_config(&format!(
        "{}{CONFIG}",
        common::SMALL_SEGMENTS_MANUAL_RETENTION
    ));

    // Retention: `[true]` was a forced pass. Several sealed segments are
    // there to delete.
    let filler: Vec<Value> = (0..40)
        .map(|i| json!({"value": format!("{i}-{}", "x".repeat(1000))}))
        .collect();
    for _ in 0..8 {
        produce(&s, "plain", Value::Array(filler.clone()));
    }
    let segments = s.get(&format!("{CLUSTER}/stats")).expect(200)["commitlog_segments"].clone();
    assert!(segments.as_u64().unwrap() >= 4, "{segments}");
    for body in ["[true]", "[]", "true", "\"force\"", "[{\"force\":true}]"] {
        let message =
            send(&s, "POST", &format!("{CLUSTER}/retention"), body).expect_error(422, 42206);
        assert!(
            message.contains("must be a JSON object"),
            "{body}: {message}"
        );
    }
    assert_eq!(
        s.get(&format!("{CLUSTER}/stats")).expect(200)["commitlog_segments"],
        segments
    );
    let offsets = s.get("/topics/plain/partitions/0/offsets").expect(200);
    assert_eq!(offsets["beginning_offset"], 0, "{offsets}");

    // Compaction: `[true,true]` was a waited pass after a roll. The
    // table's records all sit in its active segment, so no pass runs by
    // itself.
    produce(
        &s,
        "table",
        json!([{"key": "a", "value": 1}, {"key": "a", "value": 2}]),
    );
    let compaction = format!("{CLUSTER}/topics/table/compaction");
    for body in ["[true,true]", "[true]", "[]", "1"] {
        send(&s, "POST", &compaction, body).expect_error(422, 42206);
    }
    let status = s.get(&compaction).expect(200);
    assert_eq!(status["partitions"][0]["runs"], 0, "{status}");
    assert!(status["partitions"][0]["last_run"].is_null(), "{status}");

    // Offsets commit: neither the body nor an entry may be an array.
    let commits = "/consumer-groups/g1/offsets";
    for body in [
        r#"[[{"topic":"plain","partition":0,"offset":5}]]"#,
        r#"{"offsets":[["plain",0,5]]}"#,
        r#"{"offsets":[{"topic":"plain","partition":0,"offset":5},["plain",0,6]]}"#,
    ] {
        let message = send(&s, "POST", commits, body).expect_error(422, 42206);
        assert!(
            message.contains("must be a JSON object"),
            "{body}: {message}"
        );
    }
    assert_eq!(s.get(commits).status, 404);

    // PUT one config, alter configs (body and each `data` item).
    let retention_bytes = format!("{CLUSTER}/topics/plain/configs/retention.bytes");
    for body in [r#"["4242"]"#, r#""4242""#, "4242"] {
        send(&s, "PUT", &retention_bytes, body).expect_error(422, 42206);
    }
    let alter = format!("{CLUSTER}/topics/plain/configs:alter");
    for body in [
        r#"{"data":[["retention.bytes","4444","SET"]]}"#,
        r#"[[{"name":"retention.bytes","value":"4444"}]]"#,
        r#"{"data":[{"name":"segment.ms","value":"3600000"},["retention.bytes","4444"]]}"#,
    ] {
        let message = send(&s, "POST", &alter, body).expect_error(422, 42206);
        assert!(
            message.contains("must be a JSON object"),
            "{body}: {message}"
        );
    }
    assert!(config(&s, "plain", "retention.bytes").1);
    assert!(config(&s, "plain", "segment.ms").1);

    // Topic create (body and each `configs` item).
    let topics = format!("{CLUSTER}/topics");
    for body in [
        r#"["made",1]"#,
        r#"{"topic_name":"made","configs":[["retention.ms","5"]]}"#,
    ] {
        send(&s, "POST", &topics, body).expect_error(422, 42206);
    }
    s.get(&format!("{CLUSTER}/topics/made"))
        .expect_error(404, 40401);

    // Produce already refused these; it still does.
    for body in [r#"[[{"value":1}]]"#, r#"{"records":[[1]]}"#] {
        s.post_raw("/topics/plain", JSON_V2, body.as_bytes())
            .expect_error(422, 42206);
    }

    // The same calls as objects do what the sequences were taken for, so
    // the checks above would have seen it.
    send(&s, "PUT", &retention_bytes, r#"{"value":"4242"}"#).expect(204);
    assert_eq!(
        config(&s, "plain", "retention.bytes"),
        (json!("4242"), false)
    );
    let forced = send(
        &s,
        "POST",
        &format!("{CLUSTER}/retention"),
        r#"{"force":true}"#,
    )
    .expect(200);
    assert!(forced["deleted_segments"].as_u64().unwrap() > 0, "{forced}");
}

/// Blocks (long-poll) until the record at `offset` is readable.
fn await_offset(s: &TidelogProcess, topic: &str, offset: u64) {
    let got = s
        .get(&format!(
            "/topics/{topic}/partitions/0/records?offset={offset}&timeout=30000&max_records=1"
        ))
        .expect(200);
    assert_eq!(got[0]["offset"], offset, "{got}");
}

/// Produces raw JSON text (serde_json would respell the numbers).
fn produce_text(s: &TidelogProcess, topic: &str, records: &str) {
    let body = format!(r#"{{"records":[{records}]}}"#);
    s.post_raw(&format!("/topics/{topic}"), JSON_V2, body.as_bytes())
        .expect(200);
}

#[test]
fn json_numbers_keep_their_text_as_keys_and_values() {
    let s = TidelogProcess::start_with_config(&format!(
        "{}{CONFIG}",
        common::SMALL_SEGMENTS_MANUAL_RETENTION
    ));
    const BIG: &str = "18446744073709551616"; // 2^64
    const BIG_1: &str = "18446744073709551617"; // 2^64 + 1

    // A compact topic: keys that are different JSON text are different
    // keys, even where an f64 cannot tell them apart.
    produce_text(
        &s,
        "table",
        &format!(
            r#"{{"key":{BIG},"value":"big-1"}},
            {{"key":{BIG_1},"value":"big+1"}},
            {{"key":{BIG},"value":"big-2"}},
            {{"key":-0,"value":"minus zero"}},
            {{"key":0,"value":"zero"}},
            {{"key":1e2,"value":"1e2"}},
            {{"key":100,"value":"100"}},
            {{"key":{{ "b" : 1, "a" : {BIG_1} }},"value":{{"z": 1.50, "y": -0, "x": 1E+2}}}}"#
        ),
    );
    await_offset(&s, "table", 7);
    let answer = s
        .send_json(
            "POST",
            &format!("{CLUSTER}/topics/table/compaction"),
            &json!({"wait": true, "roll_active": true}),
        )
        .expect(200);
    assert_eq!(answer["timed_out"], false, "{answer}");
    assert_eq!(answer["partitions"][0]["completed"], true, "{answer}");
    let fetched = s.get("/topics/table/partitions/0/records?offset=0&timeout=0");
    let records = fetched.expect(200);
    let offsets: Vec<u64> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offset"].as_u64().unwrap())
        .collect();
    // Only the first version of 2^64 is gone.
    assert_eq!(offsets, [1, 2, 3, 4, 5, 6, 7], "{}", fetched.text());
    // The text comes back as written (members sorted, spaces gone).
    let text = fetched.text();
    for expected in [
        format!(r#""key":{BIG_1},"value":"big+1""#),
        format!(r#""key":{BIG},"value":"big-2""#),
        r#""key":-0,"value":"minus zero""#.to_string(),
        r#""key":1e2,"value":"1e2""#.to_string(),
        r#""key":100,"value":"100""#.to_string(),
        format!(r#""key":{{"a":{BIG_1},"b":1}},"value":{{"x":1E+2,"y":-0,"z":1.50}}"#),
    ] {
        assert!(text.contains(&expected), "{expected} not in {text}");
    }

    // Key queries find exactly the key written, on a compact topic and on
    // a delete topic (the IndexFile).
    produce_text(
        &s,
        "plain",
        &format!(r#"{{"key":{BIG},"value":1}},{{"key":1e2,"value":2}}"#),
    );
    await_offset(&s, "plain", 1);
    for (topic, key, found) in [
        ("plain", BIG, Some("1")),
        ("plain", BIG_1, None),
        ("plain", "1e2", Some("2")),
        ("plain", "100", None),
        ("table", BIG_1, Some(r#""big+1""#)),
        ("table", "-0", Some(r#""minus zero""#)),
        ("table", "1E2", None),
        // `{"b":1,"a":2^64+1}`, spaced, in another order.
        (
            "table",
            "%7B%22b%22%3A1%2C%20%22a%22%3A18446744073709551617%7D",
            Some(r#"{"x":1E+2,"y":-0,"z":1.50}"#),
        ),
    ] {
        let answer = s.get(&format!("/topics/{topic}/records?key={key}"));
        let text = answer.text();
        let records = answer.expect(200);
        match found {
            None => assert_eq!(records, json!([]), "{topic} {key}: {text}"),
            Some(value) => {
                assert_eq!(
                    records.as_array().unwrap().len(),
                    1,
                    "{topic} {key}: {text}"
                );
                assert!(
                    text.contains(&format!(r#""value":{value}"#)),
                    "{topic} {key}: {text}"
                );
            }
        }
    }
    // Bad JSON as a key is refused, whatever a lenient parser would make
    // of it.
    for key in ["%7B%22a%22%3A1%2C%7D", "01", "1e400", "%22unterminated"] {
        s.get(&format!("/topics/plain/records?key={key}"))
            .expect_error(400, 40002);
    }
    // So is bad JSON in a record, and a number beyond an f64.
    for record in [r#"{"key":01,"value":1}"#, r#"{"key":1e400,"value":1}"#] {
        let body = format!(r#"{{"records":[{record}]}}"#);
        s.post_raw("/topics/plain", JSON_V2, body.as_bytes())
            .expect_error(422, 42206);
    }
}

#[test]
fn lenient_values_and_names_are_refused_naming_the_field() {
    let s = TidelogProcess::start_with_config(&format!(
        "{}{CONFIG}",
        common::SMALL_SEGMENTS_MANUAL_RETENTION
    ));
    let put = |name: &str, value: Value| {
        s.send_json(
            "PUT",
            &format!("{CLUSTER}/topics/plain/configs/{name}"),
            &json!({ "value": value }),
        )
    };

    // Config values: whitespace around them, a ratio that an f64 rounds
    // to 0 (or that is not a plain decimal), a record limit of 0.
    for (name, value) in [
        ("retention.ms", json!(" 1000 ")),
        ("retention.bytes", json!("4444\n")),
        ("cleanup.policy", json!(" delete")),
        ("min.cleanable.dirty.ratio", json!("1e-400")),
        ("min.cleanable.dirty.ratio", json!("5e-1")),
        ("min.cleanable.dirty.ratio", json!("NaN")),
        ("max.message.bytes", json!("0")),
        ("max.message.bytes", json!(0)),
    ] {
        let message = put(name, value.clone()).expect_error(400, 40002);
        assert!(message.contains(name), "{name} {value}: {message}");
    }
    for name in [
        "retention.ms",
        "retention.bytes",
        "cleanup.policy",
        "min.cleanable.dirty.ratio",
        "max.message.bytes",
    ] {
        assert!(config(&s, "plain", name).1, "{name} changed");
    }
    put("min.cleanable.dirty.ratio", json!("0.05")).expect(204);
    put("max.message.bytes", json!(1)).expect(204);

    // Alter operations are Confluent's upper-case SET and DELETE only.
    let alter = format!("{CLUSTER}/topics/plain/configs:alter");
    for operation in ["set", "Set", "delete", "REMOVE"] {
        let message = s
            .send_json(
                "POST",
                &alter,
                &json!({"data": [{"name": "retention.ms", "value": "1000", "operation": operation}]}),
            )
            .expect_error(400, 40002);
        assert!(
            message.contains("data[0].operation") && message.contains(operation),
            "{message}"
        );
    }
    assert!(config(&s, "plain", "retention.ms").1);
    s.send_json(
        "POST",
        &alter,
        &json!({"data": [{"name": "retention.ms", "value": "1000", "operation": "SET"}]}),
    )
    .expect(204);

    // A create with a spaced config value creates nothing.
    let message = s
        .send_json(
            "POST",
            &format!("{CLUSTER}/topics"),
            &json!({"topic_name": "made", "configs": [{"name": "retention.ms", "value": " 5"}]}),
        )
        .expect_error(400, 40002);
    assert!(message.contains("retention.ms"), "{message}");
    s.get(&format!("{CLUSTER}/topics/made"))
        .expect_error(404, 40401);

    // Group names: any non-empty one Kafka takes (percent-encoded in the
    // path), up to 4,096 bytes; longer is refused naming the rule.
    let commit = json!({"offsets": [{"topic": "plain", "partition": 0, "offset": 1}]});
    for group in ["__consumer_offsets", "__mine", "my%20group", "gr%C3%BCppe"] {
        let path = format!("/consumer-groups/{group}/offsets");
        s.send_json("POST", &path, &commit).expect(204);
        assert_eq!(
            s.get(&path).expect(200)["offsets"][0]["offset"],
            1,
            "{group}"
        );
    }
    let long = format!("/consumer-groups/{}/offsets", "g".repeat(4097));
    let message = s.send_json("POST", &long, &commit).expect_error(400, 40002);
    assert!(
        message.contains("consumer group") && message.contains("4096"),
        "{message}"
    );
    s.send_json("POST", "/consumer-groups/app_1.v2:x@y/offsets", &commit)
        .expect(204);

    // A commit is bounded like a produce: 100,000 entries are refused
    // whole (http.max_records_per_request, 10,000 by default).
    let entries: Vec<Value> = (0..100_000u64)
        .map(|o| json!({"topic": "plain", "partition": 0, "offset": o}))
        .collect();
    let message = s
        .send_json(
            "POST",
            "/consumer-groups/many/offsets",
            &json!({ "offsets": entries }),
        )
        .expect_error(400, 40002);
    assert!(
        message.contains("offsets has 100000 entries")
            && message.contains("http.max_records_per_request"),
        "{message}"
    );
    assert_eq!(s.get("/consumer-groups/many/offsets").status, 404);
}
