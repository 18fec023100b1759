//! What topics cost in files and memory: a deleted topic's ConsumeQueue
//! files are closed and removed, and opening a data dir with many
//! partitions costs memory in proportion to their data, not to their
//! (sparse, 6 MB) queue files.
//!
//! Measured from outside, in `/proc/<pid>/`: `VmRSS` of `status` and the
//! entries of `fd`. Assertions compare with the same server's own
//! baseline, with wide margins, never with a time.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::time::{Duration, Instant};

use common::TidelogProcess;
use serde_json::json;

const TOPICS: &str = "/v3/clusters/tidelog/topics";

/// Resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

fn create(s: &TidelogProcess, topic: &str, partitions: u32) {
    s.send_json(
        "POST",
        TOPICS,
        &json!({"topic_name": topic, "partitions_count": partitions}),
    )
    .expect(201);
}

/// One record to each of `partitions` partitions of `topic`, in one request.
fn produce_one_each(s: &TidelogProcess, topic: &str, partitions: u32) {
    let records: Vec<_> = (0..partitions)
        .map(|p| json!({"partition": p, "value": format!("{topic}-{p}")}))
        .collect();
    s.send_json(
        "POST",
        &format!("/topics/{topic}"),
        &json!({ "records": records }),
    )
    .expect(200);
}

fn end_offset(s: &TidelogProcess, topic: &str, p: u32) -> u64 {
    s.get(&format!("/topics/{topic}/partitions/{p}/offsets"))
        .expect(200)["end_offset"]
        .as_u64()
        .unwrap()
}

/// Waits (bounded) until the partition's end offset is `want` (records are
/// indexed a moment after produce answers); returns the last one seen.
fn wait_end_offset(s: &TidelogProcess, topic: &str, p: u32, want: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let end = end_offset(s, topic, p);
        if end == want || Instant::now() >= deadline {
            return end;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) until `pid` has at most `limit` open files; returns the
/// last count.
fn wait_open_files_at_most(pid: u32, limit: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let n = open_files(pid);
        if n <= limit || Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn many_partitions_cost_memory_by_data_and_deleted_topics_close_their_files() {
    // ConsumeQueue files of 20,000 units (400 KB, preallocated): 1,300
    // partitions take 0.5 GB of the shared disk rather than the default's
    // 8 GB, and a server that touched whole files at open would still
    // break the RSS bound below twice over (1,000 x 400 KB). Small
    // segments and IndexFiles: the store keeps the next of each in
    // reserve on the disk, which the defaults make over 1 GB.
    let mut s = TidelogProcess::start_with_config(&format!(
        "store:\n  commitlog_segment_bytes: 4194304\n  consume_queue_units_per_file: 20000\n  index_slots: 1000\n  index_entries: 4000\n{}",
        common::DISK_RATIOS_OFF
    ));
    let empty_rss = rss_kib(s.pid());

    // 1,000 partitions of one record each.
    for t in 0..100 {
        let topic = format!("many-{t}");
        create(&s, &topic, 10);
        produce_one_each(&s, &topic, 10);
    }
    assert_eq!(wait_end_offset(&s, "many-99", 9, 1), 1);
    s.terminate();
    s.start_again();
    let rss = rss_kib(s.pid());
    eprintln!(
        "VmRSS: {empty_rss} KiB with an empty data dir, {rss} KiB after reopening 1,000 partitions"
    );
    assert!(
        rss < empty_rss + 200 * 1024,
        "RSS after reopening 1,000 partitions: {rss} KiB, empty data dir: {empty_rss} KiB"
    );
    assert_eq!(end_offset(&s, "many-42", 3), 1);
    let got = s
        .get_with(
            "/topics/many-42/partitions/3/records?offset=0&timeout=0",
            &[("Accept", "application/vnd.kafka.json.v2+json")],
        )
        .expect(200);
    assert_eq!(got[0]["value"], "many-42-3");

    // Create, write one record to and delete 300 topics: the open file
    // count comes back to where it was.
    let pid = s.pid();
    let before = open_files(pid);
    for t in 0..300 {
        let topic = format!("gone-{t}");
        create(&s, &topic, 1);
        produce_one_each(&s, &topic, 1);
    }
    assert_eq!(wait_end_offset(&s, "gone-299", 0, 1), 1);
    let grown = open_files(pid);
    for t in 0..300 {
        s.request("DELETE", &format!("{TOPICS}/gone-{t}"), &[], None)
            .expect(204);
    }
    let after = wait_open_files_at_most(pid, before + 10);
    eprintln!(
        "open files: {before} before, {grown} with 300 more topics, {after} after deleting them"
    );
    assert!(
        after <= before + 10,
        "open files: {before} before, {grown} with 300 topics, {after} after deleting them"
    );
    assert!(!s.data_dir.path().join("consumequeue/gone-7").exists());

    // A topic created again continues its partition's offsets, also after
    // a crash that makes recovery replay the deleted topic's record.
    s.kill_9();
    s.start_again();
    create(&s, "gone-7", 1);
    assert_eq!(end_offset(&s, "gone-7", 0), 1);
    let answer = s
        .send_json(
            "POST",
            "/topics/gone-7",
            &json!({"records": [{"value": "second life"}]}),
        )
        .expect(200);
    assert_eq!(answer["offsets"][0]["offset"], 1);
    // A long poll: the record is indexed a moment after produce answers.
    let got = s
        .get_with(
            "/topics/gone-7/partitions/0/records?offset=0&timeout=30000",
            &[("Accept", "application/vnd.kafka.json.v2+json")],
        )
        .expect(200);
    let values: Vec<_> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].clone())
        .collect();
    assert_eq!(values, vec![json!("second life")]);
    s.terminate();
}
