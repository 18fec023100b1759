//! Compact topics through HTTP against the real binary: many versions of
//! many keys, a compaction requested with `wait` and `roll_active`, then
//! fetch from 0 gives one record per key with its latest value at its
//! original offset, before and after a clean restart and a `kill -9`;
//! consumer offsets survive the compaction of `__consumer_offsets`; the
//! policy-change rule; status and metrics.
//!
//! One server process, restarted twice. Waits are events, not sleeps: a
//! long-poll fetch of the last produced offset returns once its compacted
//! copy is readable, and `wait: true` returns when the pass is done.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::TidelogProcess;
use serde_json::{json, Value};

const CONFIG: &str = "
store:
  commitlog_segment_bytes: 1048576
  consume_queue_units_per_file: 1000
  index_slots: 1000
  index_entries: 4000
  flush_interval_ms: 50
  max_message_bytes: 65536
cleaner:
  backoff_ms: 100
  dedupe_buffer_bytes: 1048576
topics:
  - name: table
    partitions: 2
    configs: { cleanup.policy: compact, segment.bytes: 4096 }
  - name: events
    partitions: 1
  - name: later
    partitions: 1
";

const KEYS: usize = 50;
const VERSIONS: usize = 20;
/// Keys `k0`..`k4` end with a tombstone.
const DELETED: usize = 5;
const JSON_V2: &str = "application/vnd.kafka.json.v2+json";
const COMMITS: u64 = 30;

/// Where each key's latest record is: partition, offset, value.
type Latest = BTreeMap<String, (u64, u64, Value)>;

fn produce(s: &TidelogProcess, topic: &str, records: Value) -> Vec<(u64, u64)> {
    let body = json!({ "records": records }).to_string();
    let answer = s
        .post_raw(&format!("/topics/{topic}"), JSON_V2, body.as_bytes())
        .expect(200);
    answer["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["partition"].as_u64().unwrap(),
                o["offset"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Every record of a partition from offset 0, following next offsets.
fn fetch_all(s: &TidelogProcess, topic: &str, partition: u64) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut from = 0;
    for _ in 0..1000 {
        let batch = s
            .get(&format!(
                "/topics/{topic}/partitions/{partition}/records?offset={from}&timeout=0&max_records=10000"
            ))
            .expect(200);
        let batch = batch.as_array().unwrap();
        let Some(last) = batch.last() else {
            return out;
        };
        from = last["offset"].as_u64().unwrap() + 1;
        out.extend(batch.iter().cloned());
    }
    panic!("fetch of {topic}/{partition} did not reach the end");
}

/// Blocks (long-poll) until the record at `offset` is readable.
fn await_offset(s: &TidelogProcess, topic: &str, partition: u64, offset: u64) {
    let got = s
        .get_with(
            &format!(
                "/topics/{topic}/partitions/{partition}/records?offset={offset}&timeout=30000&max_records=1"
            ),
            &[("Accept", "application/vnd.kafka.binary.v2+json")],
        )
        .expect(200);
    assert_eq!(got[0]["offset"], offset, "{got}");
}

fn request_compaction(s: &TidelogProcess, topic: &str) -> Value {
    let answer = s
        .send_json(
            "POST",
            &format!("/v3/clusters/tidelog/topics/{topic}/compaction"),
            &json!({"wait": true, "roll_active": true}),
        )
        .expect(200);
    assert_eq!(answer["timed_out"], false, "{answer}");
    answer
}

/// One record per key: the latest value at its original offset; offsets
/// strictly increase with gaps; deleted keys are gone or a tombstone.
fn check_table(s: &TidelogProcess, latest: &Latest, produced_per_partition: &[u64; 2]) {
    let mut seen = BTreeMap::new();
    for p in 0..2u64 {
        let records = fetch_all(s, "table", p);
        let offsets: Vec<u64> = records
            .iter()
            .map(|r| r["offset"].as_u64().unwrap())
            .collect();
        assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "offsets strictly increase: {offsets:?}"
        );
        assert!(
            (offsets.len() as u64) < produced_per_partition[p as usize],
            "partition {p} was compacted: {} of {} records left",
            offsets.len(),
            produced_per_partition[p as usize]
        );
        for r in records {
            let key = r["key"].as_str().unwrap().to_string();
            assert_eq!(r["partition"], p);
            assert_eq!(r["topic"], "table");
            let previous = seen.insert(
                key.clone(),
                (p, r["offset"].as_u64().unwrap(), r["value"].clone()),
            );
            assert!(previous.is_none(), "key {key} appears twice");
        }
        // The end offset is unchanged by cleaning.
        let offsets = s
            .get(&format!("/topics/table/partitions/{p}/offsets"))
            .expect(200);
        assert_eq!(offsets["end_offset"], produced_per_partition[p as usize]);
    }
    for (key, want) in latest {
        match seen.get(key) {
            Some(got) => assert_eq!(got, want, "key {key}"),
            None => assert!(want.2.is_null(), "live key {key} is missing"),
        }
    }
    assert!(
        seen.keys().all(|k| latest.contains_key(k)),
        "no unknown keys"
    );
}

fn group_offset(s: &TidelogProcess, group: &str) -> Value {
    s.get(&format!("/consumer-groups/{group}/offsets"))
        .expect(200)["offsets"][0]["offset"]
        .clone()
}

#[test]
fn compact_topics_keep_the_latest_value_of_every_key_across_restarts() {
    let mut s = TidelogProcess::start_with_config(CONFIG);

    // Many versions of many keys, version by version, then tombstones.
    let mut latest = Latest::new();
    let mut produced = [0u64; 2];
    for v in 0..VERSIONS {
        let records: Vec<Value> = (0..KEYS)
            .map(|k| json!({"key": format!("k{k}"), "value": {"k": k, "v": v}}))
            .collect();
        for (k, (p, offset)) in produce(&s, "table", json!(records)).into_iter().enumerate() {
            latest.insert(format!("k{k}"), (p, offset, json!({"k": k, "v": v})));
            produced[p as usize] = produced[p as usize].max(offset + 1);
        }
    }
    let tombstones: Vec<Value> = (0..DELETED)
        .map(|k| json!({"key": format!("k{k}"), "value": null}))
        .collect();
    for (k, (p, offset)) in produce(&s, "table", json!(tombstones))
        .into_iter()
        .enumerate()
    {
        latest.insert(format!("k{k}"), (p, offset, Value::Null));
        produced[p as usize] = produced[p as usize].max(offset + 1);
    }

    // Consumer offsets: many commits of one key, the last one wins.
    for i in 0..COMMITS {
        s.send_json(
            "POST",
            "/consumer-groups/g1/offsets",
            &json!({"offsets": [{"topic": "table", "partition": 0, "offset": i}]}),
        )
        .expect(204);
    }

    // Everything written is in the compacted logs before the roll.
    for p in 0..2u64 {
        await_offset(&s, "table", p, produced[p as usize] - 1);
    }
    await_offset(&s, "__consumer_offsets", 0, COMMITS - 1);

    let answer = request_compaction(&s, "table");
    let partitions = answer["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 2, "{answer}");
    assert!(
        partitions.iter().all(|p| p["completed"] == true),
        "{answer}"
    );
    request_compaction(&s, "__consumer_offsets");

    check_table(&s, &latest, &produced);
    assert_eq!(group_offset(&s, "g1"), COMMITS - 1);

    // Status: every partition ran, and the runs removed old versions.
    let status = s
        .get("/v3/clusters/tidelog/topics/table/compaction")
        .expect(200);
    let parts = status["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "{status}");
    let mut removed = 0;
    for p in parts {
        let run = &p["last_run"];
        assert!(run.is_object(), "{status}");
        for field in [
            "bytes_read",
            "bytes_written",
            "records_kept",
            "records_removed",
            "duration_ms",
        ] {
            assert!(run[field].is_u64(), "{field}: {status}");
        }
        assert!(run["map_utilization"].is_f64(), "{status}");
        assert!(p["dirty_ratio"].is_f64(), "{status}");
        assert!(p["state"].is_string(), "{status}");
        removed += run["records_removed"].as_u64().unwrap();
    }
    assert!(removed > 0, "{status}");
    let offsets_status = s
        .get("/v3/clusters/tidelog/topics/__consumer_offsets/compaction")
        .expect(200);
    assert!(
        offsets_status["partitions"][0]["last_run"]["records_removed"]
            .as_u64()
            .unwrap()
            > 0,
        "{offsets_status}"
    );

    // Query by key reads the compacted log: the latest record only.
    let found = s.get("/topics/table/records?key=%22k7%22").expect(200);
    let found = found.as_array().unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["value"], json!({"k": 7, "v": VERSIONS - 1}));
    assert_eq!(found[0]["offset"], latest["k7"].1);
    assert!(found[0]["physical_offset"].is_u64());

    let metrics = s.get("/metrics").text();
    let runs: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("tidelog_cleaner_runs_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(runs >= 3, "{metrics}");
    for family in [
        "tidelog_cleaner_max_dirty_percent",
        "tidelog_cleaner_recopy_percent",
        "tidelog_cleaner_uncleanable_partitions 0",
        "tidelog_cleaner_buffer_utilization",
    ] {
        assert!(metrics.contains(family), "missing {family}");
    }

    // A clean restart, then a crash: the same table and offsets.
    assert!(s.terminate().success(), "{}", s.log());
    s.start_again();
    check_table(&s, &latest, &produced);
    assert_eq!(group_offset(&s, "g1"), COMMITS - 1);
    s.kill_9();
    s.start_again();
    check_table(&s, &latest, &produced);
    assert_eq!(group_offset(&s, "g1"), COMMITS - 1);

    // Changing the policy between delete and compact: refused once the
    // topic has records, allowed while it is empty.
    produce(&s, "events", json!([{"key": "a", "value": 1}]));
    let m = s
        .send_json(
            "PUT",
            "/v3/clusters/tidelog/topics/events/configs/cleanup.policy",
            &json!({"value": "compact"}),
        )
        .expect_error(400, 40002);
    assert!(m.contains("already has records"), "{m}");
    assert!(m.contains("create a new topic"), "{m}");
    s.send_json(
        "PUT",
        "/v3/clusters/tidelog/topics/later/configs/cleanup.policy",
        &json!({"value": "compact"}),
    )
    .expect(204);
    // compact <-> compact,delete is always allowed.
    s.send_json(
        "PUT",
        "/v3/clusters/tidelog/topics/table/configs/cleanup.policy",
        &json!({"value": "compact,delete"}),
    )
    .expect(204);
    // The newly compact topic is served from its compacted log.
    let (_, offset) = produce(&s, "later", json!([{"key": "x", "value": "y"}]))[0];
    await_offset(&s, "later", 0, offset);
    s.send_json(
        "POST",
        "/v3/clusters/tidelog/topics/later/compaction",
        &json!({}),
    )
    .expect(202);
    // Compact to delete on a topic with records is refused too.
    s.send_json(
        "PUT",
        "/v3/clusters/tidelog/topics/later/configs/cleanup.policy",
        &json!({"value": "delete"}),
    )
    .expect_error(400, 40002);
    s.get("/v3/clusters/nope/topics/table/compaction")
        .expect_error(404, 40400);
    s.send_json(
        "POST",
        "/v3/clusters/tidelog/topics/nope/compaction",
        &json!({}),
    )
    .expect_error(404, 40401);
}
