//! The open-file limit, against the real binary started under a low one
//! (`ulimit -n 1024`, soft and hard): about 1,000 idle connections across
//! the HTTP and Kafka listeners must not take the store's descriptors. The
//! server refuses connections past the limit minus
//! `descriptors.store_reserve` (counted in `/metrics`), the connections
//! already open and the store keep working (produce rolls segments and
//! makes new queue files), nothing logs "Too many open files", and once
//! connections close a fresh one is served again.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{parse_response, Response, TidelogProcess};
use serde_json::{json, Value};

const LIMIT: u64 = 1024;
const RESERVE: u64 = 256;
const IDLE: usize = 1000;
const PARTITIONS: u32 = 8;

fn config() -> String {
    format!(
        "{}
descriptors:
  store_reserve: {RESERVE}
http:
  idle_timeout_ms: 600000
topics:
  - name: t
    partitions: {PARTITIONS}
",
        common::SMALL_SEGMENTS_MANUAL_RETENTION
    )
}

/// One keep-alive HTTP/1.1 connection, opened before the others.
struct KeepAlive {
    stream: TcpStream,
    addr: SocketAddr,
}

impl KeepAlive {
    fn connect(addr: SocketAddr) -> KeepAlive {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        KeepAlive { stream, addr }
    }

    fn request(&mut self, method: &str, path: &str, body: Option<&Value>) -> Response {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/vnd.kafka.v2+json\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        self.stream.write_all(head.as_bytes()).unwrap();
        self.stream.write_all(body.as_bytes()).unwrap();
        // One answer: its headers, then a Content-Length body or chunks.
        let mut raw = Vec::new();
        let mut buf = [0u8; 16 << 10];
        let header_end = loop {
            if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let n = self.stream.read(&mut buf).unwrap();
            assert!(n > 0, "the server closed the kept connection");
            raw.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&raw[..header_end]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse::<usize>().unwrap());
        let body = match length {
            Some(len) => {
                while raw.len() < header_end + len {
                    let n = self.stream.read(&mut buf).unwrap();
                    assert!(n > 0, "closed mid-body");
                    raw.extend_from_slice(&buf[..n]);
                }
                raw[header_end..header_end + len].to_vec()
            }
            None => {
                assert!(head.contains("transfer-encoding: chunked"), "{head}");
                let mut body = Vec::new();
                let mut at = header_end;
                loop {
                    let line_end = loop {
                        if let Some(p) = raw[at..].windows(2).position(|w| w == b"\r\n") {
                            break at + p;
                        }
                        let n = self.stream.read(&mut buf).unwrap();
                        assert!(n > 0, "closed mid-chunk");
                        raw.extend_from_slice(&buf[..n]);
                    };
                    let size = usize::from_str_radix(
                        std::str::from_utf8(&raw[at..line_end]).unwrap().trim(),
                        16,
                    )
                    .unwrap();
                    while raw.len() < line_end + 2 + size + 2 {
                        let n = self.stream.read(&mut buf).unwrap();
                        assert!(n > 0, "closed mid-chunk");
                        raw.extend_from_slice(&buf[..n]);
                    }
                    body.extend_from_slice(&raw[line_end + 2..line_end + 2 + size]);
                    at = line_end + 2 + size + 2;
                    if size == 0 {
                        break;
                    }
                }
                body
            }
        };
        let mut answer = parse_response(&raw[..header_end]).unwrap();
        answer.body = body;
        answer
    }
}

fn metrics(keep: &mut KeepAlive) -> String {
    keep.request("GET", "/metrics", None).text()
}

#[test]
fn idle_connections_never_take_the_stores_descriptors() {
    let s = TidelogProcess::start_with_config_and_nofile(&config(), Some(LIMIT));
    let kafka = s.kafka_addr.unwrap();
    let log = s.log();
    assert!(log.contains("open-file limit"), "{log}");
    let mut keep = KeepAlive::connect(s.addr);
    let m = metrics(&mut keep);
    let max = common::metric_in(&m, "tidelog_connections_max") as u64;
    assert_eq!(max, LIMIT - RESERVE, "{m}");

    // ~1,000 idle connections, half to each listener: they send nothing.
    let mut idle = Vec::with_capacity(IDLE);
    for i in 0..IDLE {
        let addr = if i % 2 == 0 { s.addr } else { kafka };
        idle.push(TcpStream::connect(addr).unwrap());
    }
    // Every one accepted or refused by now (bounded wait, not a timing
    // assertion): the open ones plus the refused ones are all of them.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (open, refused) = loop {
        let m = metrics(&mut keep);
        let open = common::metric_in(&m, "tidelog_connections_open") as u64;
        let refused = common::metric_in(&m, "tidelog_connections_refused_total") as u64;
        if open + refused > IDLE as u64 || Instant::now() > deadline {
            break (open, refused);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(open, max, "the cap is reached, not passed");
    assert_eq!(
        open + refused,
        IDLE as u64 + 1,
        "open {open}, refused {refused}"
    );

    // The store still works through a connection already open: produce
    // about 600 KiB to 8 partitions (new queue and time index files, ten
    // new 64 KiB segments), then read every record back.
    for round in 0..15u32 {
        for p in 0..PARTITIONS {
            let records: Vec<Value> = (0..5)
                .map(|i| json!({"value": format!("r{round}-{i}-{}", "y".repeat(1000))}))
                .collect();
            let r = keep.request(
                "POST",
                &format!("/topics/t/partitions/{p}"),
                Some(&json!({"records": records})),
            );
            r.expect(200);
        }
    }
    for p in 0..PARTITIONS {
        let mut got = 0;
        while got < 75 {
            let r = keep.request(
                "GET",
                &format!("/topics/t/partitions/{p}/records?offset={got}&timeout=0"),
                None,
            );
            let records = r.expect(200).as_array().unwrap().len();
            assert!(records > 0, "partition {p} ends at {got}");
            got += records;
        }
        assert_eq!(got, 75);
    }
    let log = s.log();
    assert!(!log.contains("Too many open files"), "{log}");
    assert!(log.contains("refusing new connections"), "{log}");

    // Connections close: a fresh one is served again.
    idle.truncate(IDLE / 2);
    let deadline = Instant::now() + Duration::from_secs(30);
    while (common::metric_in(&metrics(&mut keep), "tidelog_connections_open") as u64) >= max {
        assert!(
            Instant::now() < deadline,
            "closed connections never freed their slots"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = s.send_json(
        "POST",
        "/topics/t/partitions/0",
        &json!({"records": [{"value": "fresh"}]}),
    );
    assert_eq!(r.expect(200)["offsets"][0]["offset"], 75);
    drop(idle);
}
