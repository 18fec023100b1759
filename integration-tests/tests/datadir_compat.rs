//! Backward compatibility (redb's `tests/backward_compatibility.rs` idea):
//! `testdata/datadir-v1/` is a data dir written by this format version of
//! tidelog, checked in. The test copies it to a temporary dir (the checked-in
//! files are never opened for writing), starts the real binary on the copy
//! and reads everything back exactly: every record of a delete topic, a
//! lookup by key, offsets, a compact topic's cleaned state with its
//! tombstone, a consumer group's committed offsets, a deleted topic staying
//! deleted. An encoder and decoder changed together pass their own
//! round-trip tests; they fail this one.
//!
//! The dir is written by `generate_datadir_v1` (ignored; see
//! docs/formats.md for when and how). A format change needs a new
//! `datadir-v<N>` and a migration, never an edit of this one.
//!
//! `testdata/datadir-v2/` adds what issue 38's formats wrote: the
//! CommitLog's version-4 entries and markers of transactions committed,
//! aborted and left open, the producer-state snapshot's version 2 with the
//! open transaction, `aborted.txnindex` files, the `__transaction_state`
//! log, and a compact topic cleaned with a transaction's records in it
//! (compacted record version 3). Written by `generate_datadir_v2`.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use base64::Engine;
use common::TidelogProcess;
use serde_json::{json, Value};
use tidelog_integration_tests::clients;

/// Small files (64 KiB CommitLog segments, 64-unit queue files, a 5 KiB
/// IndexFile) so the checked-in dir stays small; retention never deletes
/// (ten years, every ratio at 1.0), so the data is what the test finds
/// however old the files are.
const CONFIG: &str = "
store:
  commitlog_segment_bytes: 65536
  consume_queue_units_per_file: 64
  index_slots: 64
  index_entries: 256
  flush_interval_ms: 50
  max_message_bytes: 16384
retention:
  file_reserved_hours: 87600
  check_interval_ms: 3600000
  disk_max_used_ratio: 1.0
  disk_force_clean_ratio: 1.0
  disk_full_ratio: 1.0
cleaner:
  backoff_ms: 100
  dedupe_buffer_bytes: 1048576
";

const JSON_V2: &str = "application/vnd.kafka.json.v2+json";
const BINARY_V2: &str = "application/vnd.kafka.binary.v2+json";
const TS: i64 = 1_700_000_000_000;
/// Ten years: the tombstone outlives any run of this test.
const DELETE_RETENTION_MS: &str = "315360000000";

/// Records of the delete topic `events`: partition, key, value, timestamp
/// offset from `TS`, headers (name, value).
type Event = (
    u64,
    Option<&'static str>,
    &'static str,
    i64,
    &'static [(&'static str, &'static [u8])],
);
const EVENTS: &[Event] = &[
    (0, Some("u1"), "a", 1, &[]),
    (0, Some("u2"), "b", 2, &[("trace", b"t1")]),
    (0, Some("u1"), "c", 3, &[]),
    (1, None, "d", 4, &[("empty", b""), ("trace", b"\x00\xff")]),
    (1, Some("u2"), "e", 5, &[]),
];

/// Records of the compact topic `table` (one partition), in order; `None`
/// is a tombstone.
const TABLE: &[(&str, Option<&str>)] = &[
    ("k0", Some("v0")),
    ("k1", Some("v1")),
    ("k2", Some("v2")),
    ("k0", Some("v0b")),
    ("k1", None),
    ("k3", Some("v3")),
];

/// After cleaning: offset, key, value of what `table` keeps.
const TABLE_CLEANED: &[(u64, &str, Option<&str>)] = &[
    (2, "k2", Some("v2")),
    (3, "k0", Some("v0b")),
    (4, "k1", None),
    (5, "k3", Some("v3")),
];

/// Committed offsets of group `g1`: topic, partition, offset, metadata.
const GROUP_OFFSETS: &[(&str, u64, u64, &str)] = &[("events", 0, 2, "m0"), ("events", 1, 1, "")];

/// Physical offsets of the records of key `u1` in `events`, newest first:
/// the CommitLog's byte layout, pinned.
const U1_PHYSICAL: &[u64] = &[208, 52];

fn testdata() -> PathBuf {
    common::workspace_root().join("integration-tests/testdata/datadir-v1")
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn produce(s: &TidelogProcess, topic: &str, records: Value) {
    let body = json!({ "records": records }).to_string();
    let answer = s
        .post_raw(&format!("/topics/{topic}"), JSON_V2, body.as_bytes())
        .expect(200);
    for o in answer["offsets"].as_array().unwrap() {
        assert!(o["error_code"].is_null(), "{answer}");
    }
}

fn create_topic(s: &TidelogProcess, name: &str, partitions: u64, configs: Value) {
    s.send_json(
        "POST",
        "/v3/clusters/tidelog/topics",
        &json!({"topic_name": name, "partitions_count": partitions, "configs": configs}),
    )
    .expect(201);
}

/// Write `testdata/datadir-v1` anew. Run only for a new format version
/// (into a new dir, after changing the path above): see docs/formats.md.
#[test]
#[ignore = "writes the checked-in data dir; run by hand for a new format version"]
fn generate_datadir_v1() {
    let out = testdata();
    assert!(
        !out.exists(),
        "{} exists: a checked-in data dir is never rewritten (remove it by hand only if it was never committed)",
        out.display()
    );
    let mut s = TidelogProcess::start_with_config(CONFIG);
    create_topic(&s, "events", 2, json!([]));
    create_topic(
        &s,
        "table",
        1,
        json!([
            {"name": "cleanup.policy", "value": "compact"},
            {"name": "segment.bytes", "value": "1024"},
            {"name": "delete.retention.ms", "value": DELETE_RETENTION_MS},
        ]),
    );
    create_topic(&s, "gone", 1, json!([]));
    for &(partition, key, value, ts, headers) in EVENTS {
        let headers: Vec<Value> = headers
            .iter()
            .map(|(name, value)| json!({"name": name, "value": b64(value)}))
            .collect();
        produce(
            &s,
            "events",
            json!([{"partition": partition, "key": key, "value": value, "timestamp": TS + ts, "headers": headers}]),
        );
    }
    for (i, &(key, value)) in TABLE.iter().enumerate() {
        produce(
            &s,
            "table",
            json!([{"key": key, "value": value, "timestamp": TS + 100 + i as i64}]),
        );
    }
    produce(
        &s,
        "gone",
        json!([{"key": "x", "value": 1}, {"key": "y", "value": 2}]),
    );
    s.request("DELETE", "/v3/clusters/tidelog/topics/gone", &[], None)
        .expect(204);
    let offsets: Vec<Value> = GROUP_OFFSETS
        .iter()
        .map(|&(topic, partition, offset, metadata)| {
            json!({"topic": topic, "partition": partition, "offset": offset, "metadata": metadata})
        })
        .collect();
    s.send_json(
        "POST",
        "/consumer-groups/g1/offsets",
        &json!({ "offsets": offsets }),
    )
    .expect(204);
    // Long-poll the last record: it returns once the compacted copy has it.
    let last = TABLE.len() - 1;
    let got = s
        .get(&format!(
            "/topics/table/partitions/0/records?offset={last}&timeout=30000&max_records=1"
        ))
        .expect(200);
    assert_eq!(got[0]["offset"], last, "{got}");
    compact_now(&s, "table");
    check(&s);
    // A clean shutdown writes the checkpoint.
    assert!(s.terminate().success());
    copy_dir(s.data_dir.path(), &out);
}

/// The checked-in dir, copied, opened by the real binary, read back.
#[test]
fn datadir_v1_opens_and_reads_back_exactly() {
    let mut s = started_on_a_copy_of(&testdata());
    let dir = s.data_dir.path().to_path_buf();
    check(&s);
    // The version-1 registry was given topic ids and written back as
    // version 2 at the first open.
    let ids = registry_ids(&dir);
    assert_eq!(ids.len(), 3, "events, table, __consumer_offsets: {ids:?}");
    // And once more: what the first open wrote (recovery, a checkpoint,
    // the cleaner) leaves the data as it was, ids included.
    assert!(s.terminate().success());
    s.start_again();
    check(&s);
    assert_eq!(registry_ids(&dir), ids);
}

/// Each topic's id in the data dir's registry, which must be version 2.
fn registry_ids(data_dir: &std::path::Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(data_dir.join("config/topics.json")).unwrap();
    let file: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(file["version"], 2, "{file}");
    file["topics"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, t)| (name.clone(), t["id"].as_str().unwrap().to_string()))
        .collect()
}

/// Everything the data dir holds, read through the API.
fn check(s: &TidelogProcess) {
    let mut topics: Vec<String> = s
        .get("/topics")
        .expect(200)
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    topics.sort();
    assert_eq!(
        topics,
        ["events", "table"],
        "internal topics are not listed"
    );

    // Every record of `events`, exactly.
    for partition in 0..2u64 {
        let want: Vec<Value> = EVENTS
            .iter()
            .filter(|e| e.0 == partition)
            .enumerate()
            .map(|(offset, &(_, key, value, ts, headers))| {
                let headers: Vec<Value> = headers
                    .iter()
                    .map(|(name, value)| json!({"name": name, "value": b64(value)}))
                    .collect();
                json!({
                    "topic": "events",
                    "key": key,
                    "value": value,
                    "partition": partition,
                    "offset": offset,
                    "timestamp": TS + ts,
                    "headers": headers,
                })
            })
            .collect();
        let got = s
            .get(&format!(
                "/topics/events/partitions/{partition}/records?offset=0&timeout=0"
            ))
            .expect(200);
        assert_eq!(got, Value::Array(want.clone()), "events-{partition}");
        let offsets = s
            .get(&format!("/topics/events/partitions/{partition}/offsets"))
            .expect(200);
        assert_eq!(offsets["beginning_offset"], 0, "{offsets}");
        assert_eq!(offsets["end_offset"], want.len(), "{offsets}");
        // Timestamp lookups: this dir has no time index files, so they are
        // built at open; every answer is the first record at or after T.
        let mut asked: Vec<(i64, usize)> = vec![(0, 0), (i64::MAX, want.len())];
        for (offset, w) in want.iter().enumerate() {
            let ts = w["timestamp"].as_i64().unwrap();
            asked.extend([(ts, offset), (ts + 1, offset + 1)]);
        }
        for (ts, offset) in asked {
            let got = s
                .get(&format!(
                    "/topics/events/partitions/{partition}/offsets?timestamp={ts}"
                ))
                .expect(200);
            assert_eq!(got["offset"], offset, "events-{partition} at {ts}: {got}");
        }
    }

    // Lookup by key through the IndexFile, newest first, at pinned
    // physical offsets; each one reads back as its record.
    let got = s.get("/topics/events/records?key=%22u1%22").expect(200);
    let got = got.as_array().unwrap();
    let found: Vec<(u64, &str, u64)> = got
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["value"].as_str().unwrap(),
                r["physical_offset"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [(2, "c", U1_PHYSICAL[0]), (0, "a", U1_PHYSICAL[1])],
        "{got:?}"
    );
    for &physical in U1_PHYSICAL {
        let r = s.get(&format!("/commitlog/{physical}")).expect(200);
        assert_eq!(
            (&r["topic"], &r["partition"], &r["physical_offset"]),
            (&json!("events"), &json!(0), &json!(physical)),
            "{r}"
        );
    }

    // The compact topic: what the cleaning kept, the tombstone included.
    let got = s
        .get("/topics/table/partitions/0/records?offset=0&timeout=0")
        .expect(200);
    let kept: Vec<(u64, &str, Option<&str>)> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["key"].as_str().unwrap(),
                r["value"].as_str(),
            )
        })
        .collect();
    assert_eq!(kept, TABLE_CLEANED, "{got}");
    let offsets = s.get("/topics/table/partitions/0/offsets").expect(200);
    assert_eq!(offsets["end_offset"], TABLE.len(), "{offsets}");
    // Timestamp lookups answer over what the cleaning kept (record i was
    // produced at TS + 100 + i).
    for (ts, offset) in [
        (0, 2),
        (TS + 100, 2),
        (TS + 103, 3),
        (TS + 105, 5),
        (TS + 106, 6),
    ] {
        let got = s
            .get(&format!(
                "/topics/table/partitions/0/offsets?timestamp={ts}"
            ))
            .expect(200);
        assert_eq!(got["offset"], offset, "table at {ts}: {got}");
    }
    // The cleaner-offset checkpoint: the next pass starts past the end.
    let status = s
        .get("/v3/clusters/tidelog/topics/table/compaction")
        .expect(200);
    assert_eq!(
        status["partitions"][0]["checkpoint_offset"],
        TABLE.len(),
        "{status}"
    );
    let configs = s
        .get("/v3/clusters/tidelog/topics/table/configs")
        .expect(200);
    let config = |name: &str| {
        configs["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["value"].clone())
    };
    assert_eq!(config("cleanup.policy"), Some(json!("compact")));
    assert_eq!(
        config("delete.retention.ms"),
        Some(json!(DELETE_RETENTION_MS))
    );

    // The consumer group's commits.
    let got = s.get("/consumer-groups/g1/offsets").expect(200);
    let mut committed: Vec<(String, u64, u64, String)> = got["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["topic"].as_str().unwrap().to_string(),
                o["partition"].as_u64().unwrap(),
                o["offset"].as_u64().unwrap(),
                o["metadata"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    committed.sort();
    let want: Vec<(String, u64, u64, String)> = GROUP_OFFSETS
        .iter()
        .map(|&(t, p, o, m)| (t.to_string(), p, o, m.to_string()))
        .collect();
    assert_eq!(committed, want, "{got}");

    // The deleted topic stays deleted.
    s.get("/topics/gone/partitions/0/offsets")
        .expect_error(404, 40401);
}

fn testdata_v2() -> PathBuf {
    common::workspace_root().join("integration-tests/testdata/datadir-v2")
}

/// Write `testdata/datadir-v2` anew (see `generate_datadir_v1`): the
/// topics, then confluent-kafka's transactions
/// (`clients/python/datadir_v2_transactions.py`), a plain record, a
/// cleaning of `ledger`, a clean shutdown.
#[test]
#[ignore = "writes the checked-in data dir; run by hand for a new format version"]
fn generate_datadir_v2() {
    let out = testdata_v2();
    assert!(
        !out.exists(),
        "{} exists: a checked-in data dir is never rewritten",
        out.display()
    );
    let mut s = TidelogProcess::start_with_config(CONFIG);
    create_topic(&s, "orders", 2, json!([]));
    create_topic(
        &s,
        "ledger",
        1,
        json!([
            {"name": "cleanup.policy", "value": "compact"},
            {"name": "segment.bytes", "value": "1024"},
            {"name": "delete.retention.ms", "value": DELETE_RETENTION_MS},
        ]),
    );
    common::run_client_script(
        &s,
        clients::python_command("datadir_v2_transactions.py"),
        "datadir_v2_transactions: committed, aborted, one left open",
    );
    let plain = json!({"records": [{"key": b64(b"k2"), "value": b64(b"plain")}]}).to_string();
    s.post_raw("/topics/ledger", BINARY_V2, plain.as_bytes())
        .expect(200);
    let got = s
        .get_with(
            "/topics/ledger/partitions/0/records?offset=5&timeout=30000&max_records=1",
            &[("Accept", BINARY_V2)],
        )
        .expect(200);
    assert_eq!(got[0]["offset"], 5, "{got}");
    compact_now(&s, "ledger");
    check_v2(&s, Some(false));
    assert!(s.terminate().success());
    copy_dir(s.data_dir.path(), &out);
}

/// The checked-in v2 dir, copied, opened by the real binary, read back at
/// both isolation levels; then its producer comes back
/// (`clients/python/datadir_v2_fence.py`) and the coordinator rebuilt from
/// the dir aborts the transaction it holds open (its 15-minute timeout may
/// have done so first: the dir is older than that in every run but the
/// first minutes after it was written).
#[test]
fn datadir_v2_opens_and_reads_transactions_back() {
    let mut s = started_on_a_copy_of(&testdata_v2());
    check_v2(&s, None);
    common::run_client_script(
        &s,
        clients::python_command("datadir_v2_fence.py"),
        "datadir_v2_fence: tx-v2 is back at a new epoch",
    );
    // The abort's marker is durable before the answer, and indexed a
    // moment after it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while s.get("/topics/orders/partitions/0/offsets").expect(200)["end_offset"] != 7 {
        assert!(
            std::time::Instant::now() < deadline,
            "the open transaction was not aborted"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    check_v2(&s, Some(true));
    assert!(s.terminate().success());
    s.start_again();
    check_v2(&s, Some(true));
}

/// Offsets and values of a partition read from 0 in the binary format at
/// `isolation` (`read_committed` or `read_uncommitted`).
fn read_binary(
    s: &TidelogProcess,
    topic: &str,
    partition: u32,
    isolation: &str,
) -> Vec<(u64, String)> {
    let got = s
        .get_with(
            &format!(
                "/topics/{topic}/partitions/{partition}/records?offset=0&timeout=0&isolation_level={isolation}"
            ),
            &[("Accept", BINARY_V2)],
        )
        .expect(200);
    got.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let value = base64::engine::general_purpose::STANDARD
                .decode(r["value"].as_str().unwrap())
                .unwrap();
            (
                r["offset"].as_u64().unwrap(),
                String::from_utf8(value).unwrap(),
            )
        })
        .collect()
}

/// What `datadir-v2` holds: every transaction's records where it put them
/// (markers take offsets of their own and are never served), only the
/// committed ones at read_committed, and `ledger` cleaned to each key's
/// newest committed value. `aborted`: the open transaction was aborted
/// (its marker at orders-0 offset 6), or is still open; `None`: either.
fn check_v2(s: &TidelogProcess, aborted: Option<bool>) {
    let pairs = |v: &[(u64, &str)]| -> Vec<(u64, String)> {
        v.iter().map(|&(o, t)| (o, t.to_string())).collect()
    };
    let mut topics: Vec<String> = s
        .get("/topics")
        .expect(200)
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    topics.sort();
    assert_eq!(
        topics,
        ["ledger", "orders"],
        "internal topics are not listed"
    );
    // orders-0: c0 c1, COMMIT, a0, ABORT, o0 (open, or aborted at 6).
    assert_eq!(
        read_binary(s, "orders", 0, "read_uncommitted"),
        pairs(&[(0, "c0"), (1, "c1"), (3, "a0"), (5, "o0")])
    );
    assert_eq!(
        read_binary(s, "orders", 0, "read_committed"),
        pairs(&[(0, "c0"), (1, "c1")])
    );
    let end = s.get("/topics/orders/partitions/0/offsets").expect(200);
    let end = end["end_offset"].as_u64().unwrap();
    match aborted {
        Some(true) => assert_eq!(end, 7, "aborted: its marker at 6"),
        Some(false) => assert_eq!(end, 6, "still open"),
        None => assert!(end == 6 || end == 7, "end {end}"),
    }
    // orders-1: c2, COMMIT, a1, ABORT.
    assert_eq!(
        read_binary(s, "orders", 1, "read_uncommitted"),
        pairs(&[(0, "c2"), (2, "a1")])
    );
    assert_eq!(
        read_binary(s, "orders", 1, "read_committed"),
        pairs(&[(0, "c2")])
    );
    // ledger: l1 l2, COMMIT, bad (k1), ABORT, plain (k2), cleaned: k1
    // keeps its committed l1 (the aborted record superseded nothing and
    // went), k2 its newest, the plain record.
    let cleaned = pairs(&[(0, "l1"), (5, "plain")]);
    assert_eq!(read_binary(s, "ledger", 0, "read_uncommitted"), cleaned);
    assert_eq!(read_binary(s, "ledger", 0, "read_committed"), cleaned);
}

/// The server started on a copy of the checked-in dir `testdata` (whose
/// files are never opened for writing), in a data dir of its own.
fn started_on_a_copy_of(testdata: &Path) -> TidelogProcess {
    let mut s = TidelogProcess::start_with_config(CONFIG);
    assert!(s.terminate().success());
    let dir = s.data_dir.path().to_path_buf();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    copy_dir(testdata, &dir);
    s.start_again();
    s
}

/// A cleaning of `topic`, its active segment rolled first, waited for.
fn compact_now(s: &TidelogProcess, topic: &str) {
    let answer = s
        .send_json(
            "POST",
            &format!("/v3/clusters/tidelog/topics/{topic}/compaction"),
            &json!({"wait": true, "roll_active": true}),
        )
        .expect(200);
    assert_eq!(answer["timed_out"], false, "{answer}");
}

/// Copy the regular files of `from` into `to`, recursively, leaving out the
/// lock and the unclean-exit marker (files of a running server).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "lock" || name == "abort" {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(&name));
        } else {
            std::fs::copy(&path, to.join(&name)).unwrap();
        }
    }
}
