//! `GET /topics/{t}/partitions/{p}/offsets?timestamp=ms` against the real
//! binary: the first offset whose record timestamp is at least `ms`
//! (Kafka's ListOffsets rule), for a delete topic whose timestamps are out
//! of order across several time index intervals and a compact topic; the
//! answer without `timestamp` unchanged; bad timestamps 400/40002; the same
//! answers after a kill -9 and a restart (the time index recovered or
//! rebuilt).
#![allow(clippy::unwrap_used)]

mod common;

use common::TidelogProcess;
use serde_json::{json, Value};

const JSON_V2: &str = "application/vnd.kafka.json.v2+json";
const TS: i64 = 1_700_000_000_000;

const CONFIG: &str = "
store:
  commitlog_segment_bytes: 1048576
  consume_queue_units_per_file: 1000
  index_slots: 1000
  index_entries: 4000
  flush_interval_ms: 50
http:
  max_records_per_request: 1000
topics:
  - name: events
    partitions: 2
  - name: table
    partitions: 1
    configs: { cleanup.policy: compact }
";

/// Records of `events` partition 1: a saw-tooth of timestamps (runs that
/// fall back by a minute), so the first record at or after T is often far
/// from where a monotonic log would have it. 1,600 records: three full
/// index intervals (512) and a tail.
fn sawtooth() -> Vec<i64> {
    (0..1600i64)
        .map(|i| TS + i * 10 + 60_000 * ((i / 300) % 3) - (i * 7919) % 500)
        .collect()
}

fn produce(s: &TidelogProcess, topic: &str, records: Vec<Value>) {
    for chunk in records.chunks(500) {
        let body = json!({ "records": chunk }).to_string();
        let answer = s
            .post_raw(&format!("/topics/{topic}"), JSON_V2, body.as_bytes())
            .expect(200);
        for o in answer["offsets"].as_array().unwrap() {
            assert!(o["error_code"].is_null(), "{answer}");
        }
    }
}

fn lookup(s: &TidelogProcess, topic: &str, partition: u32, ts: i64) -> Value {
    s.get(&format!(
        "/topics/{topic}/partitions/{partition}/offsets?timestamp={ts}"
    ))
    .expect(200)
}

/// The first offset at or after `ts` in `timestamps` (offsets from 0), or
/// the end.
fn by_scan(timestamps: &[i64], ts: i64) -> usize {
    timestamps
        .iter()
        .position(|&t| t >= ts)
        .unwrap_or(timestamps.len())
}

fn check(s: &TidelogProcess, what: &str) {
    // Partition 0: five records out of order.
    let small = [TS + 50, TS + 10, TS + 30, TS + 70, TS + 20];
    for (ts, want) in [
        (i64::MIN, 0),
        (0, 0),
        (TS + 10, 0),
        (TS + 50, 0),
        (TS + 51, 3),
        (TS + 70, 3),
        (TS + 71, 5),
        (i64::MAX, 5),
    ] {
        assert_eq!(by_scan(&small, ts), want, "the table itself");
        let got = lookup(s, "events", 0, ts);
        assert_eq!(
            got,
            json!({"beginning_offset": 0, "end_offset": 5, "offset": want}),
            "{what}: events-0 at {ts}"
        );
    }
    // Partition 1: every record's timestamp and its neighbours.
    let teeth = sawtooth();
    for (i, &t) in teeth.iter().enumerate().step_by(7) {
        for ts in [t - 1, t, t + 1] {
            let got = lookup(s, "events", 1, ts);
            assert_eq!(
                got["offset"],
                by_scan(&teeth, ts),
                "{what}: events-1 at {ts} (record {i}): {got}"
            );
        }
    }
    // The compact topic: over what it holds (no pass ran: all of it).
    for (ts, want) in [(0, 0), (TS + 3, 0), (TS + 4, 2), (TS + 5, 3)] {
        let got = lookup(s, "table", 0, ts);
        assert_eq!(
            got,
            json!({"beginning_offset": 0, "end_offset": 3, "offset": want}),
            "{what}: table at {ts}"
        );
    }
    // Without `timestamp` the answer is as before.
    let plain = s.get("/topics/events/partitions/0/offsets").expect(200);
    assert_eq!(plain, json!({"beginning_offset": 0, "end_offset": 5}));
}

#[test]
fn offsets_by_timestamp_follow_kafkas_rule_and_survive_a_crash() {
    let mut s = TidelogProcess::start_with_config(CONFIG);
    let small = [50, 10, 30, 70, 20];
    produce(
        &s,
        "events",
        small
            .iter()
            .map(|ts| json!({"partition": 0, "value": ts, "timestamp": TS + ts}))
            .collect(),
    );
    produce(
        &s,
        "events",
        sawtooth()
            .into_iter()
            .map(|ts| json!({"partition": 1, "value": 1, "timestamp": ts}))
            .collect(),
    );
    produce(
        &s,
        "table",
        [("a", 3), ("b", 1), ("c", 4)]
            .iter()
            .map(|(k, ts)| json!({"key": k, "value": 1, "timestamp": TS + ts}))
            .collect(),
    );
    // Long-poll until the last records are readable (dispatched, copied).
    for (topic, partition, last) in [("events", 1, 1599), ("table", 0, 2)] {
        let got = s
            .get(&format!(
                "/topics/{topic}/partitions/{partition}/records?offset={last}&timeout=30000&max_records=1"
            ))
            .expect(200);
        assert_eq!(got[0]["offset"], last, "{got}");
    }
    check(&s, "running");

    // Bad timestamps: 40002, naming the parameter.
    for bad in [
        "abc",
        "1.5",
        "",
        "%2B5",
        "-",
        "9223372036854775808",
        "-9223372036854775809",
        "1e3",
    ] {
        let message = s
            .get(&format!(
                "/topics/events/partitions/0/offsets?timestamp={bad}"
            ))
            .expect_error(400, 40002);
        assert!(message.contains("timestamp"), "{bad}: {message}");
    }
    s.get("/topics/nope/partitions/0/offsets?timestamp=0")
        .expect_error(404, 40401);
    s.get("/topics/events/partitions/9/offsets?timestamp=0")
        .expect_error(404, 40402);

    s.restart(); // kill -9, start again
    check(&s, "after kill -9");
    assert!(s.terminate().success());
    s.start_again();
    check(&s, "after a clean restart");
}
