//! Signals against the real binary: SIGINT stops the server as gracefully
//! as SIGTERM; a second signal while a shutdown waits for a request in
//! flight exits at once with 1, leaving `abort` so the next start runs full
//! recovery. Acknowledged records survive both.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write as _;
use std::time::{Duration, Instant};

use common::TidelogProcess;
use serde_json::{json, Value};

const CONFIG: &str = "
auto_create_topics: true
default_partitions: 1
";

fn produce(s: &TidelogProcess, value: &str) {
    let body = json!({"records": [{"value": value}]});
    let r = common::http(
        s.addr,
        "POST",
        "/topics/t/partitions/0",
        &[("Content-Type", "application/vnd.kafka.json.v2+json")],
        Some(body.to_string().as_bytes()),
    );
    r.expect(200);
}

fn values(s: &TidelogProcess) -> Vec<Value> {
    let got = s
        .get("/topics/t/partitions/0/records?offset=0&timeout=5000")
        .expect(200);
    got.as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].clone())
        .collect()
}

fn wait_for_log(s: &TidelogProcess, from: usize, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s.log()[from..].contains(needle) {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the log:\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigint_is_graceful_and_a_second_signal_exits_at_once() {
    let mut s = TidelogProcess::start_with_config(&format!("{}{CONFIG}", common::SMALL_STORE));
    let abort = s.data_dir.path().join("abort");
    produce(&s, "one");

    // SIGINT alone: a clean shutdown, like SIGTERM.
    s.signal(libc::SIGINT);
    let status = s.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{}", s.log());
    assert!(!abort.exists(), "a clean shutdown removes abort");
    s.start_again();
    assert_eq!(values(&s), [json!("one")]);
    produce(&s, "two");

    // A produce whose body stops half-way stays in progress (for
    // http.body_read_timeout_ms, 30 s here), so the shutdown that SIGTERM
    // starts waits for it; a second signal ends the wait.
    let mut stalled = std::net::TcpStream::connect(s.addr).unwrap();
    let head = format!(
        "POST /topics/t/partitions/0 HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: application/vnd.kafka.json.v2+json\r\nContent-Length: 1000\r\n\r\n\
         {{\"records\":[",
        s.addr
    );
    stalled.write_all(head.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s
        .get("/metrics")
        .text()
        .contains("\ntidelog_http_requests_reading_body 1\n")
    {
        assert!(
            Instant::now() < deadline,
            "the stalled produce never started reading its body"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let log_before = s.log_len();
    s.signal(libc::SIGTERM);
    wait_for_log(&s, log_before, "shutting down");
    assert!(
        s.is_running(),
        "exited with a request in flight:\n{}",
        s.log()
    );
    s.signal(libc::SIGINT);
    let status = s.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{}", s.log());
    assert!(
        s.log()[log_before..].contains("second signal"),
        "{}",
        s.log()
    );
    assert!(
        abort.exists(),
        "an exit without a clean shutdown leaves abort"
    );
    drop(stalled);

    // The next start is an unclean one and finds both records.
    let log_before = s.log_len();
    s.start_again();
    assert!(
        s.log()[log_before..].contains("did not shut down cleanly"),
        "{}",
        s.log()
    );
    assert_eq!(values(&s), [json!("one"), json!("two")]);
}
