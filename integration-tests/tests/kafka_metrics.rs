//! The Kafka listener's counters reach the HTTP API's `/metrics`: the
//! server hands the listener the counters `/metrics` renders, so an
//! operator sees Kafka traffic and bad frames beside HTTP's.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::TidelogProcess;

/// One request frame: key, version, correlation id, a null client id
/// (request header v1), then `body`.
fn frame(key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut inner = Vec::new();
    inner.extend_from_slice(&key.to_be_bytes());
    inner.extend_from_slice(&version.to_be_bytes());
    inner.extend_from_slice(&7i32.to_be_bytes());
    inner.extend_from_slice(&(-1i16).to_be_bytes());
    inner.extend_from_slice(body);
    let mut out = (inner.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&inner);
    out
}

/// The value of the series `series` (name and labels as rendered), once it
/// reaches `at_least`, within a bounded wait (a connection's close is
/// counted by its task after the client sees it).
fn wait_for_series(server: &TidelogProcess, series: &str, at_least: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = server.get("/metrics").text();
        let value = text.lines().find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .parse::<f64>()
                .ok()
        });
        if let Some(v) = value {
            if v >= at_least {
                return v;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{series} did not reach {at_least}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kafka_requests_connections_and_bad_frames_show_in_metrics() {
    let server = TidelogProcess::start(&[]);
    let addr = server.kafka_addr.expect("the harness gives a Kafka port");

    // Before any Kafka traffic the families are there, at zero.
    let text = server.get("/metrics").text();
    assert!(text.contains("tidelog_kafka_connections 0\n"), "{text}");
    assert!(
        !text.contains("tidelog_kafka_requests_total{"),
        "no API counted yet:\n{text}"
    );

    // Two ApiVersions v0 on one connection.
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = frame(18, 0, &[]);
    for _ in 0..2 {
        stream.write_all(&request).unwrap();
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).unwrap();
        let mut answer = vec![0u8; i32::from_be_bytes(len) as usize];
        stream.read_exact(&mut answer).unwrap();
        assert_eq!(&answer[..4], &7i32.to_be_bytes(), "correlation id");
    }
    assert_eq!(
        wait_for_series(&server, "tidelog_kafka_connections", 1.0),
        1.0
    );
    assert_eq!(
        wait_for_series(
            &server,
            "tidelog_kafka_requests_total{api=\"ApiVersions\"}",
            2.0
        ),
        2.0
    );
    let requested = wait_for_series(&server, "tidelog_kafka_request_bytes_total", 1.0);
    assert_eq!(requested, 2.0 * (request.len() - 4) as f64);
    assert!(wait_for_series(&server, "tidelog_kafka_response_bytes_total", 1.0) > 0.0);
    drop(stream);
    wait_for_series(&server, "tidelog_kafka_connections_accepted_total", 1.0);

    // An unserved API key closes its connection, counted by reason; the
    // listener goes on serving.
    let mut bad = TcpStream::connect(addr).unwrap();
    bad.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    bad.write_all(&frame(999, 0, &[])).unwrap();
    let mut rest = Vec::new();
    let read = bad.read_to_end(&mut rest);
    assert!(
        matches!(read, Ok(0)) || read.is_err(),
        "closed without an answer: {read:?} {rest:?}"
    );
    assert_eq!(
        wait_for_series(
            &server,
            "tidelog_kafka_connections_closed_total{reason=\"unknown_api\"}",
            1.0
        ),
        1.0
    );
    // Both connections are gone again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server
        .get("/metrics")
        .text()
        .contains("tidelog_kafka_connections 0\n")
    {
        assert!(Instant::now() < deadline, "connections still counted open");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        wait_for_series(&server, "tidelog_kafka_connections_accepted_total", 2.0),
        2.0
    );
}

#[test]
fn a_server_without_a_kafka_listener_shows_no_kafka_families() {
    let server = TidelogProcess::start(&["--kafka-listen", "none"]);
    let text = server.get("/metrics").text();
    assert!(text.contains("tidelog_ready 1"), "{text}");
    assert!(!text.contains("tidelog_kafka_"), "{text}");
}
