//! Admin auth (401/40101, compaction requests included), overload (429/42901), disk full (507/50701) and
//! a graceful shutdown with long-polls in flight, against one server whose
//! config makes each of them reachable: a token, two concurrent requests,
//! and a disk-full ratio every real disk is above.
//!
//! The disk-full gate is the store's: its `tidelog-disk` thread measures the
//! real disk against `retention.disk_full_ratio`, and `Store::append`
//! refuses. With the force-clean ratio as tiny, the store's retention would
//! also delete the oldest sealed segments; nothing can be written here, so
//! there are none, and a manual pass says why it ran and deletes nothing.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::TidelogProcess;
use serde_json::json;

const CONFIG: &str = "
admin_token: s3cret
auto_create_topics: true
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
    let mut s = TidelogProcess::start_with_config(&format!("{}{CONFIG}", common::SMALL_STORE));
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
    let retention = "/v3/clusters/tidelog/retention";
    s.request("POST", retention, &[JSON], Some(b"{\"force\":true}"))
        .expect_error(401, 40101);
    s.request("POST", retention, &[], None)
        .expect_error(401, 40101);
    // Compaction requests are admin calls too; with the token, a topic that
    // does not compact is refused (400), and reading the status needs none.
    let compaction = format!("{topics}/t/compaction");
    s.request("POST", &compaction, &[JSON], Some(b"{\"wait\":true}"))
        .expect_error(401, 40101);
    let m = s
        .request("POST", &compaction, &[JSON, AUTH], Some(b"{}"))
        .expect_error(400, 40002);
    assert!(m.contains("cleanup.policy=delete"), "{m}");
    s.get(&compaction).expect_error(400, 40002);

    // 507: the disk is "full", so writes are refused and nothing is written
    // (not even an auto-created topic); reads still work.
    let m = s
        .post_raw(
            "/topics/t",
            "application/json",
            b"{\"records\":[{\"value\":1}]}",
        )
        .expect_error(507, 50701);
    assert!(
        m.starts_with("disk full: the data directory's disk is "),
        "{m}"
    );
    assert!(
        m.contains("writes stopped above disk_full_ratio 0.0% and resume when usage falls to disk_force_clean_ratio 0.0% or below"),
        "{m}"
    );
    // An unknown topic is not auto-created for a refused request.
    let m = s
        .post_raw(
            "/topics/fresh",
            "application/json",
            b"{\"records\":[{\"value\":1}]}",
        )
        .expect_error(507, 50701);
    assert!(m.starts_with("disk full: "), "{m}");
    s.get("/topics/fresh").expect_error(404, 40401);
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
    assert!(
        stats["disk_used_ratio"].as_f64().unwrap() > 0.000001,
        "{stats}"
    );
    assert!(s.get("/metrics").text().contains("tidelog_disk_full 1"));
    // An operator's pass runs under the disk-pressure rule; with nothing
    // sealed it deletes nothing, and the disk stays "full".
    let pass = s.request("POST", retention, &[AUTH], None).expect(200);
    assert_eq!(pass["deleted_segments"], 0, "{pass}");
    assert_eq!(pass["freed_bytes"], 0, "{pass}");
    assert_eq!(
        pass["reason"], "disk above disk_force_clean_ratio",
        "{pass}"
    );
    s.post_raw(
        "/topics/t",
        "application/json",
        b"{\"records\":[{\"value\":1}]}",
    )
    .expect_error(507, 50701);

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
    // Readiness is exempt from the request limit, and says what the store
    // says: writes are refused, the disk is "full".
    let m = s.get("/status/ready").expect_error(507, 50701);
    assert!(m.starts_with("disk full: "), "{m}");
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
