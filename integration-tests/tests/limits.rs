//! Admin auth (401/40101), overload (429/42901), disk full (507/50701) and
//! a graceful shutdown with long-polls in flight, against one server whose
//! config makes each of them reachable: a token, two concurrent requests,
//! and a disk-full ratio every real disk is above.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::TidelogProcess;
use serde_json::json;

const CONFIG: &str = "
admin_token: s3cret
store:
  commitlog_segment_bytes: 1048576
  consume_queue_units_per_file: 1000
  index_slots: 1000
  index_entries: 4000
  max_message_bytes: 65536
retention:
  disk_max_used_ratio: 0.000001
  disk_force_clean_ratio: 0.000001
  disk_full_ratio: 0.000001
http:
  max_concurrent_requests: 2
topics:
  - name: t
    partitions: 1
";

const AUTH: (&str, &str) = ("Authorization", "Bearer s3cret");
const JSON: (&str, &str) = ("Content-Type", "application/json");

#[test]
fn auth_overload_disk_full_and_shutdown_with_requests_in_flight() {
    let mut s = TidelogProcess::start_with_config(CONFIG);
    let topics = "/v3/clusters/tidelog/topics";
    let create = json!({"topic_name": "made", "partitions_count": 1}).to_string();

    // 401: every mutating v3 call needs the token; reads do not.
    let m = s
        .request("POST", topics, &[JSON], Some(create.as_bytes()))
        .expect_error(401, 40101);
    assert!(m.contains("Bearer"), "{m}");
    s.request(
        "POST",
        topics,
        &[JSON, ("Authorization", "Bearer wrong")],
        Some(create.as_bytes()),
    )
    .expect_error(401, 40101);
    s.request(
        "POST",
        topics,
        &[JSON, ("Authorization", "s3cret")],
        Some(create.as_bytes()),
    )
    .expect_error(401, 40101);
    s.request("DELETE", &format!("{topics}/t"), &[], None)
        .expect_error(401, 40101);
    s.request(
        "PUT",
        &format!("{topics}/t/configs/retention.ms"),
        &[JSON],
        Some(b"{\"value\":\"1\"}"),
    )
    .expect_error(401, 40101);
    s.request(
        "POST",
        &format!("{topics}/t/configs:alter"),
        &[JSON],
        Some(b"{\"data\":[]}"),
    )
    .expect_error(401, 40101);
    s.get(topics).expect(200);
    s.request("POST", topics, &[JSON, AUTH], Some(create.as_bytes()))
        .expect(201);
    s.request("DELETE", &format!("{topics}/made"), &[AUTH], None)
        .expect(204);

    // 507: the disk is "full", so writes are refused and nothing is written
    // (not even an auto-created topic); reads still work.
    let m = s
        .post_raw(
            "/topics/t",
            "application/json",
            b"{\"records\":[{\"value\":1}]}",
        )
        .expect_error(507, 50701);
    assert!(m.contains("disk_full_ratio"), "{m}");
    s.send_json(
        "POST",
        "/consumer-groups/g/offsets",
        &json!({"offsets": [{"topic": "t", "partition": 0, "offset": 1}]}),
    )
    .expect_error(507, 50701);
    assert_eq!(
        s.get("/topics/t/partitions/0/offsets").expect(200),
        json!({"beginning_offset": 0, "end_offset": 0})
    );
    let stats = s.get("/v3/clusters/tidelog/stats").expect(200);
    assert_eq!(stats["disk_full"], true, "{stats}");
    assert!(s.get("/metrics").text().contains("tidelog_disk_full 1"));

    // 429: two long-polls take both slots; the next request is refused at
    // once, while health checks and scrapes still answer.
    let addr = s.addr;
    let pollers: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                common::http(
                    addr,
                    "GET",
                    "/topics/t/partitions/0/records?offset=0&timeout=30000",
                    &[],
                    None,
                )
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s
        .get("/metrics")
        .text()
        .contains("tidelog_http_in_flight_requests 2\n")
    {
        assert!(Instant::now() < deadline, "long-polls never went in flight");
        std::thread::sleep(Duration::from_millis(5));
    }
    let m = s.get("/topics").expect_error(429, 42901);
    assert!(m.contains("max_concurrent_requests"), "{m}");
    s.get("/status/ready").expect(200);
    assert!(s
        .get("/metrics")
        .text()
        .contains("tidelog_http_rejected_overload_total 1\n"));

    // SIGTERM with the long-polls in flight: they are answered (empty), the
    // store shuts down cleanly, the exit is 0.
    let status = s.terminate();
    assert!(status.success(), "{status:?}\n{}", s.log());
    for poller in pollers {
        assert_eq!(poller.join().unwrap().expect(200), json!([]));
    }
    assert!(!s.data_dir.path().join("abort").exists());
}
