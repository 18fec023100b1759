//! CommitLog retention through HTTP against the real binary: a forced pass
//! deletes sealed segments, beginning offsets move up, a fetch from 0
//! starts at the first surviving record, produce and fetch go on, and the
//! beginnings survive a clean restart and a `kill -9`. A normal pass deletes
//! nothing while nothing has expired.
//!
//! Small segments (64 KiB) so a few hundred KiB make many of them; every
//! disk ratio at 1.0, so how full this machine's disk is never triggers a
//! pass or refuses a write; a check interval of an hour, so the scheduled
//! pass stays out of the way and every deletion is the test's.
#![allow(clippy::unwrap_used)]

mod common;

use common::TidelogProcess;
use serde_json::{json, Value};

const CONFIG: &str = "
topics:
  - name: r
    partitions: 2
";

const PARTITIONS: u32 = 2;
/// Records per produce request, and requests per partition in the first
/// round: 2 × 8 × 40 records of ~1 KiB is ~640 KiB, ten 64 KiB segments.
const BATCH: u64 = 40;
const ROUNDS: u64 = 8;
const RETENTION: &str = "/v3/clusters/tidelog/retention";

/// The value of record `offset` of partition `p`: recognisable, ~1 KiB.
fn value(p: u32, offset: u64) -> String {
    format!("p{p}-o{offset}-{}", "x".repeat(1000))
}

/// Appends `BATCH` records to partition `p`, whose next offset is `next`;
/// checks the offsets the server gives them.
fn produce_batch(s: &TidelogProcess, p: u32, next: u64) {
    let records: Vec<Value> = (next..next + BATCH)
        .map(|o| json!({"value": value(p, o)}))
        .collect();
    let answer = s
        .send_json(
            "POST",
            &format!("/topics/r/partitions/{p}"),
            &json!({"records": records}),
        )
        .expect(200);
    let offsets: Vec<u64> = answer["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, (next..next + BATCH).collect::<Vec<_>>());
}

/// `(beginning_offset, end_offset)` of partition `p`.
fn offsets(s: &TidelogProcess, p: u32) -> (u64, u64) {
    let o = s
        .get(&format!("/topics/r/partitions/{p}/offsets"))
        .expect(200);
    (
        o["beginning_offset"].as_u64().unwrap(),
        o["end_offset"].as_u64().unwrap(),
    )
}

/// Records of partition `p` from `offset`, waiting (long-poll, bounded by
/// the server's timeout) until at least one is there.
fn fetch(s: &TidelogProcess, p: u32, offset: u64, max_records: u64) -> Vec<Value> {
    s.get(&format!(
        "/topics/r/partitions/{p}/records?offset={offset}&max_records={max_records}&timeout=10000"
    ))
    .expect(200)
    .as_array()
    .unwrap()
    .clone()
}

/// Checks that a fetch of partition `p` from 0 starts at `beginning` with
/// the record produced there.
fn fetch_from_zero_starts_at(s: &TidelogProcess, p: u32, beginning: u64) {
    let got = fetch(s, p, 0, 3);
    assert!(!got.is_empty(), "partition {p}: nothing fetched from 0");
    assert_eq!(got[0]["offset"], beginning, "partition {p}: {}", got[0]);
    assert_eq!(got[0]["value"], value(p, beginning));
    assert_eq!(got[0]["partition"], p);
}

fn retention_pass(s: &TidelogProcess, body: Option<&[u8]>) -> Value {
    s.request(
        "POST",
        RETENTION,
        &[("Content-Type", "application/json")],
        body,
    )
    .expect(200)
}

fn stats(s: &TidelogProcess) -> Value {
    s.get("/v3/clusters/tidelog/stats").expect(200)
}

#[test]
fn forced_retention_moves_beginnings_and_survives_restarts() {
    let mut s = TidelogProcess::start_with_config(&format!(
        "{}{CONFIG}",
        common::SMALL_SEGMENTS_MANUAL_RETENTION
    ));

    // Nothing written yet: a normal pass has nothing to delete.
    let first = retention_pass(&s, None);
    assert_eq!(first["deleted_segments"], 0, "{first}");
    assert_eq!(first["freed_bytes"], 0, "{first}");
    assert_eq!(first["forced"], false, "{first}");

    // Many segments across both partitions, interleaved so that both have
    // records in the oldest segments.
    for round in 0..ROUNDS {
        for p in 0..PARTITIONS {
            produce_batch(&s, p, round * BATCH);
        }
    }
    let end = ROUNDS * BATCH;
    for p in 0..PARTITIONS {
        assert_eq!(fetch(&s, p, end - 1, 1)[0]["offset"], end - 1);
        assert_eq!(offsets(&s, p), (0, end));
    }
    let before = stats(&s);
    let segments_before = before["commitlog_segments"].as_u64().unwrap();
    assert!(segments_before >= 8, "{before}");

    // A normal pass: nothing is 72 hours old, so nothing goes.
    let normal = retention_pass(&s, Some(b"{}"));
    assert_eq!(normal["deleted_segments"], 0, "{normal}");
    assert_eq!(normal["reason"], "requested by an operator", "{normal}");
    for p in 0..PARTITIONS {
        assert_eq!(offsets(&s, p), (0, end));
    }

    // Bad calls change nothing.
    s.send_json(
        "POST",
        "/v3/clusters/other/retention",
        &json!({"force": true}),
    )
    .expect_error(404, 40400);
    s.send_json("POST", RETENTION, &json!({"force": "yes"}))
        .expect_error(422, 42206);
    s.get(RETENTION).expect_error(405, 40500);
    assert_eq!(stats(&s)["commitlog_segments"], segments_before);

    // A forced pass: every sealed segment the dispatcher has passed.
    let forced = retention_pass(&s, Some(b"{\"force\": true}"));
    let deleted = forced["deleted_segments"].as_u64().unwrap();
    let freed = forced["freed_bytes"].as_u64().unwrap();
    assert_eq!(forced["forced"], true, "{forced}");
    assert_eq!(forced["reason"], "forced by an operator", "{forced}");
    assert_eq!(deleted, segments_before - 1, "all but the active segment");
    assert!(freed >= deleted * 60_000, "{forced}");
    assert!(forced["queue_files_deleted"].is_u64(), "{forced}");
    assert!(forced["index_files_deleted"].is_u64(), "{forced}");
    let after = stats(&s);
    assert_eq!(after["commitlog_segments"], 1, "{after}");
    assert!(
        after["commitlog_min_offset"].as_u64().unwrap() > 0,
        "{after}"
    );
    assert_eq!(after["retention_segments_deleted"], deleted, "{after}");
    assert_eq!(after["retention_bytes_freed"], freed, "{after}");
    assert_eq!(after["retention_failures"], 0, "{after}");
    assert!(after["retention_last_pass_ms"].as_i64().unwrap() > 0);
    assert_eq!(after["disk_full"], false, "{after}");
    assert_eq!(
        s.metric("tidelog_retention_segments_deleted_total"),
        deleted as f64
    );
    assert_eq!(
        s.metric("tidelog_retention_bytes_freed_total"),
        freed as f64
    );
    assert_eq!(s.metric("tidelog_retention_failures_total"), 0.0);
    assert!(s.metric("tidelog_retention_last_pass_timestamp_seconds") > 1.6e9);
    assert_eq!(s.metric("tidelog_disk_full"), 0.0);
    assert!((0.0..=1.0).contains(&s.metric("tidelog_disk_used_ratio")));

    // Beginnings moved up, ends did not; a fetch from 0 starts at the
    // first surviving record. A partition whose records all lay in sealed
    // segments is now empty (beginning == end); the last record written is
    // in the active segment, so at least one partition keeps records.
    let mut beginnings = Vec::new();
    for p in 0..PARTITIONS {
        let (beginning, end_now) = offsets(&s, p);
        assert!(beginning > 0, "partition {p} kept its beginning");
        assert!(beginning <= end, "partition {p}: {beginning} > {end}");
        assert_eq!(end_now, end);
        if beginning < end {
            fetch_from_zero_starts_at(&s, p, beginning);
        }
        beginnings.push(beginning);
    }
    assert!(beginnings.iter().any(|&b| b < end), "{beginnings:?}");

    // Produce and fetch go on; a fetch from 0 now finds records in every
    // partition, starting at its beginning.
    for p in 0..PARTITIONS {
        produce_batch(&s, p, end);
        let got = fetch(&s, p, end, BATCH);
        assert_eq!(got[0]["offset"], end);
        assert_eq!(got[0]["value"], value(p, end));
        assert_eq!(offsets(&s, p), (beginnings[p as usize], end + BATCH));
        fetch_from_zero_starts_at(&s, p, beginnings[p as usize]);
    }
    let end = end + BATCH;

    // A clean restart keeps the beginnings; a normal pass right after
    // start deletes nothing (nothing has expired).
    let status = s.terminate();
    assert!(status.success(), "{status:?}\n{}", s.log());
    s.start_again();
    check_after_restart(&s, &beginnings, end);

    // So does a crash.
    s.restart();
    check_after_restart(&s, &beginnings, end);
}

fn check_after_restart(s: &TidelogProcess, beginnings: &[u64], end: u64) {
    for p in 0..PARTITIONS {
        let (beginning, _) = offsets(s, p);
        assert_eq!(beginning, beginnings[p as usize], "partition {p}");
        // The last record is fetchable again (waits out recovery's
        // dispatch), so the end is the end before the restart.
        assert_eq!(fetch(s, p, end - 1, 1)[0]["offset"], end - 1);
        assert_eq!(offsets(s, p), (beginnings[p as usize], end));
        fetch_from_zero_starts_at(s, p, beginnings[p as usize]);
    }
    let pass = retention_pass(s, None);
    assert_eq!(pass["deleted_segments"], 0, "{pass}");
    for p in 0..PARTITIONS {
        assert_eq!(offsets(s, p).0, beginnings[p as usize], "partition {p}");
    }
}
