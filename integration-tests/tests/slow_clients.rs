//! Clients that stall, trickle, hold connections or declare huge bodies,
//! against the real binary (OPERATIONS.md `http:` limits): none of them takes
//! the request slots, each is closed by the server, a connection past
//! `max_connections` is closed at once, an idle keep-alive connection lives
//! past the header timeout and closes after the idle one, bodies held in
//! memory stay within `max_inflight_bytes` and take only the bytes that
//! arrived (a declared length or a Kafka frame's length holds nothing), a
//! declared length over `max_request_bytes` is refused before its body is
//! read, a client that never reads its answer is closed after
//! `write_timeout_ms` and answers not read stay within
//! `max_inflight_response_bytes` (the server's RssAnon against its own
//! baseline), a shutdown waits for a body being read but not for
//! connections without a request, heads hyper refuses get the JSON error
//! body, wrong admin tokens are delayed and counted, and deleting a
//! consumer instance answers its long-poll.
//!
//! Nothing here measures time: each wait is for a condition (a metric, an
//! answer, a close) with a deadline far above the configured timeouts, so
//! only a server that never acts fails it. The exceptions are the generous
//! bounds issue 35 names: wrong tokens answered at most a few a second,
//! and a deleted instance's long-poll answered well before its timeout.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{Response, TidelogProcess};
use serde_json::json;

/// How long a test waits for the server to close a connection or answer.
const GENEROUS: Duration = Duration::from_secs(30);

/// Headers of a produce to `t`, without their end.
const PRODUCE_HEAD: &str = "POST /topics/t/partitions/0 HTTP/1.1\r\nHost: tidelog\r\n\
                            Content-Type: application/vnd.kafka.json.v2+json\r\n";

fn start(config: &str) -> TidelogProcess {
    TidelogProcess::start_with_config(&format!("{}{config}", common::SMALL_STORE))
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    // Short reads, so the loops below check their deadline.
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    stream
}

/// A connection that has sent `sent` and then waits. A write error is
/// ignored: a server that closes the connection at once (over
/// `max_connections`) is seen by the read that follows.
fn stalled(addr: SocketAddr, sent: &str) -> TcpStream {
    let mut stream = connect(addr);
    let _ = stream.write_all(sent.as_bytes());
    stream
}

/// A connection that sends `head` at once, then `slow` one byte per 0.2 s
/// until the server closes it (or `slow` runs out).
fn trickle(addr: SocketAddr, head: &str, slow: Vec<u8>) -> (TcpStream, JoinHandle<()>) {
    let stream = stalled(addr, head);
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        for byte in slow {
            if writer.write_all(&[byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    (stream, sender)
}

/// Reads until the server closes `stream` (end of file or reset); what it
/// sent before, or `Err` if it is still open after [`GENEROUS`].
fn read_until_closed(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let deadline = Instant::now() + GENEROUS;
    let mut got = Vec::new();
    let mut buf = [0u8; 16 << 10];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if Instant::now() >= deadline {
                    return Err(format!(
                        "still open after {GENEROUS:?}, having sent {:?}",
                        String::from_utf8_lossy(&got)
                    ));
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // Reset: closed.
            Err(_) => return Ok(got),
        }
    }
}

/// The one answer the server sends before it closes `stream`.
fn answer_then_close(stream: &mut TcpStream) -> Response {
    let raw = read_until_closed(stream).unwrap();
    common::parse_response(&raw)
        .unwrap_or_else(|why| panic!("{why}: {:?}", String::from_utf8_lossy(&raw)))
}

/// Reads one `Content-Length` framed answer from a keep-alive connection.
fn read_answer(stream: &mut TcpStream) -> Response {
    let deadline = Instant::now() + GENEROUS;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 << 10];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if raw.len() >= end + 4 + length {
                return common::parse_response(&raw).unwrap();
            }
        }
        assert!(Instant::now() < deadline, "no whole answer: {raw:?}");
        match stream.read(&mut buf) {
            Ok(0) => panic!("closed mid-answer: {:?}", String::from_utf8_lossy(&raw)),
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("reading an answer: {e}"),
        }
    }
}

/// A request that keeps its connection open.
fn keep_alive_get(stream: &mut TcpStream, path: &str) -> Response {
    write!(stream, "GET {path} HTTP/1.1\r\nHost: tidelog\r\n\r\n").unwrap();
    read_answer(stream)
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + GENEROUS;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {GENEROUS:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn produce(s: &TidelogProcess, value: &str) -> Response {
    s.post_raw(
        "/topics/t/partitions/0",
        "application/vnd.kafka.json.v2+json",
        json!({"records": [{"value": value}]})
            .to_string()
            .as_bytes(),
    )
}

/// One chunk of a chunked body.
fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// Sends a chunked produce `chunk_bytes` at a time (at most `max_chunks`)
/// until the server answers; that answer.
fn chunked_until_answered(addr: SocketAddr, chunk_bytes: usize, max_chunks: usize) -> Response {
    let mut stream = stalled(
        addr,
        &format!("{PRODUCE_HEAD}Transfer-Encoding: chunked\r\n\r\n"),
    );
    let data = chunk(&vec![b'a'; chunk_bytes]);
    for _ in 0..max_chunks {
        if stream.write_all(&data).is_err() {
            break; // closed after answering
        }
        // Give the server the chunk before the next one, so that what it
        // answers is what this client reads.
        let mut peek = [0u8; 1];
        match stream.peek(&mut peek) {
            Ok(_) => break,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    answer_then_close(&mut stream)
}

const STALL_CONFIG: &str = "
http:
  max_concurrent_requests: 4
  header_read_timeout_ms: 1000
  body_read_timeout_ms: 10000
  idle_timeout_ms: 3000
topics:
  - name: t
    partitions: 1
";

#[test]
fn stalled_clients_take_no_slots_and_are_closed() {
    let s = start(STALL_CONFIG);
    // Of each kind, more than max_concurrent_requests (4).
    const EACH: usize = 5;
    let head_cut = format!("{PRODUCE_HEAD}Content-Le");
    let body_cut = format!("{PRODUCE_HEAD}Content-Length: 1000\r\n\r\n{{\"records\":[");
    // 33 bytes of a declared million.
    let first_33 = format!("{{\"records\":[{{\"value\":\"{}", "x".repeat(11));
    assert_eq!(first_33.len(), 33);
    let million_cut = format!("{PRODUCE_HEAD}Content-Length: 1000000\r\n\r\n{first_33}");
    let mut heads: Vec<TcpStream> = (0..EACH).map(|_| stalled(s.addr, &head_cut)).collect();
    let mut bodies: Vec<TcpStream> = (0..EACH)
        .flat_map(|_| [stalled(s.addr, &body_cut), stalled(s.addr, &million_cut)])
        .collect();
    let mut senders = Vec::new();
    for _ in 0..EACH {
        let (stream, sender) = trickle(s.addr, PRODUCE_HEAD, b"X-Slow: ".repeat(20));
        heads.push(stream);
        senders.push(sender);
        let body_head = format!("{PRODUCE_HEAD}Content-Length: 1000\r\n\r\n");
        let (stream, sender) = trickle(s.addr, &body_head, vec![b' '; 200]);
        bodies.push(stream);
        senders.push(sender);
    }
    // Silent connections: fresh ones, and keep-alive ones after an answer.
    let mut idle: Vec<TcpStream> = (0..EACH).map(|_| connect(s.addr)).collect();
    for _ in 0..EACH {
        let mut stream = connect(s.addr);
        keep_alive_get(&mut stream, "/status/ready").expect(200);
        idle.push(stream);
    }

    // Every body is being read (the body timeout leaves ample time to see
    // it), none holds a slot: requests are answered (more of them than
    // there are slots), health checks too.
    wait_for("every stalled body being read", || {
        s.metric("tidelog_http_requests_reading_body") >= (3 * EACH) as f64
    });
    for i in 0..8 {
        produce(&s, &format!("v{i}")).expect(200);
    }
    s.get("/status/ready").expect(200);
    // A fetch answers what is dispatched when it comes (an acked record
    // becomes readable a moment later), so wait for all eight.
    wait_for("the eight records to be fetchable", || {
        let fetched = s.get("/topics/t/partitions/0/records?offset=0").expect(200);
        fetched.as_array().map_or(0, Vec::len) == 8
    });

    // Each stalled connection is closed by the server: unfinished headers
    // and silence without an answer, unfinished bodies with 408.
    for (i, stream) in heads.iter_mut().chain(idle.iter_mut()).enumerate() {
        let sent = read_until_closed(stream).unwrap_or_else(|e| panic!("{i}: {e}"));
        assert!(sent.is_empty(), "{:?}", String::from_utf8_lossy(&sent));
    }
    for stream in &mut bodies {
        let m = answer_then_close(stream).expect_error(408, 40801);
        assert!(m.contains("http.body_read_timeout_ms"), "{m}");
    }
    for sender in senders {
        sender.join().unwrap();
    }
    let timeouts =
        |phase: &str| s.metric(&format!("tidelog_http_timeouts_total{{phase=\"{phase}\"}}"));
    assert_eq!(timeouts("header"), (2 * EACH) as f64);
    assert_eq!(timeouts("body"), (3 * EACH) as f64);
    assert_eq!(timeouts("idle"), (2 * EACH) as f64);
    // All given back: one connection (this scrape), no body bytes held.
    wait_for("connections to close", || {
        s.metric("tidelog_http_connections") == 1.0
    });
    assert_eq!(s.metric("tidelog_http_inflight_bytes"), 0.0);
    assert_eq!(s.metric("tidelog_http_requests_reading_body"), 0.0);
    assert_eq!(s.metric("tidelog_http_rejected_overload_total"), 0.0);
}

#[test]
fn a_connection_past_max_connections_is_closed_at_once_and_counted() {
    let s = start("http:\n  max_connections: 4\n");
    // Only the scrape itself: the start-up probes have gone.
    wait_for("start-up probes to close", || {
        s.metric("tidelog_http_connections") == 1.0
    });
    let mut kept: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = connect(s.addr);
            keep_alive_get(&mut stream, "/status/ready").expect(200);
            stream
        })
        .collect();
    // The idle timeout (60 s) is far away: only the cap closes this one.
    let mut over = stalled(s.addr, "GET /metrics HTTP/1.1\r\nHost: tidelog\r\n\r\n");
    let sent = read_until_closed(&mut over).unwrap();
    assert!(sent.is_empty(), "{:?}", String::from_utf8_lossy(&sent));
    // The connections within the cap still serve.
    keep_alive_get(&mut kept[0], "/status/ready").expect(200);

    // One closes; new connections are served again (once the server has
    // seen the close) and the refusal is counted.
    drop(kept.pop());
    let mut metrics = None;
    wait_for("a free connection", || {
        let mut stream = stalled(
            s.addr,
            "GET /metrics HTTP/1.1\r\nHost: tidelog\r\nConnection: close\r\n\r\n",
        );
        let raw = read_until_closed(&mut stream).unwrap();
        metrics = (!raw.is_empty()).then(|| common::parse_response(&raw).unwrap());
        metrics.is_some()
    });
    let text = metrics.unwrap().text();
    let value = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series}:\n{text}"))
    };
    assert!(
        value("tidelog_http_connections_rejected_total") >= 1.0,
        "{text}"
    );
    assert_eq!(value("tidelog_http_connections"), 4.0, "{text}");
}

#[test]
fn an_idle_keep_alive_connection_outlives_the_header_timeout_not_the_idle_one() {
    let s = start("http:\n  header_read_timeout_ms: 1000\n  idle_timeout_ms: 5000\n");
    let mut stream = connect(s.addr);
    keep_alive_get(&mut stream, "/status/ready").expect(200);
    // Idle for more than the header timeout: still open.
    std::thread::sleep(Duration::from_millis(2500));
    keep_alive_get(&mut stream, "/status/ready").expect(200);
    // Idle for longer than the idle timeout: closed, and counted as idle.
    let sent = read_until_closed(&mut stream).unwrap();
    assert!(sent.is_empty(), "{:?}", String::from_utf8_lossy(&sent));
    assert_eq!(s.metric("tidelog_http_timeouts_total{phase=\"idle\"}"), 1.0);
    assert_eq!(
        s.metric("tidelog_http_timeouts_total{phase=\"header\"}"),
        0.0
    );
}

const BUDGET_CONFIG: &str = "
http:
  max_request_bytes: 262144
  max_inflight_bytes: 1048576
  body_read_timeout_ms: 60000
topics:
  - name: t
    partitions: 1
";

/// A body of the largest size (256 KiB), sent but for its last byte:
/// what it holds in the budget once read.
fn almost_whole_body() -> String {
    format!(
        "{PRODUCE_HEAD}Content-Length: 262144\r\n\r\n{}",
        "x".repeat(262_143)
    )
}

/// Bodies take from the budget as their bytes arrive, never more than it
/// has: four of the largest size, sent but for their last byte, fill it,
/// and any more is refused once its bytes do not fit.
#[test]
fn bodies_held_in_memory_stay_within_max_inflight_bytes() {
    let s = start(BUDGET_CONFIG);
    let big_head = format!("{PRODUCE_HEAD}Content-Length: 262144\r\n\r\n");
    let part = format!("{big_head}{}", "x".repeat(1024));
    let held = || s.metric("tidelog_http_inflight_bytes");

    let mut holding: Vec<TcpStream> = (0..4)
        .map(|_| stalled(s.addr, &almost_whole_body()))
        .collect();
    wait_for("four bodies in the budget", || held() >= 4.0 * 262_143.0);
    assert!(held() <= 1_048_576.0);
    // Any more, large or small, declared or chunked, is refused as soon
    // as its bytes arrive.
    let m = answer_then_close(&mut stalled(s.addr, &part)).expect_error(503, 50305);
    assert!(m.contains("http.max_inflight_bytes"), "{m}");
    produce(&s, "small").expect_error(503, 50305);
    chunked_until_answered(s.addr, 1024, 8).expect_error(503, 50305);
    assert!(held() <= 1_048_576.0);
    assert_eq!(s.metric("tidelog_http_rejected_inflight_bytes_total"), 3.0);
    // Reads without a body still answer.
    s.get("/topics/t/partitions/0/offsets").expect(200);

    // One gives up: its bytes come back, and a produce fits again.
    drop(holding.pop());
    wait_for("the budget to have room", || held() <= 786_432.0);
    produce(&s, "fits").expect(200);
    drop(holding);
    wait_for("the budget to be empty", || held() == 0.0);
}

/// An ApiVersions v0 request (correlation id `id`) padded to `len` bytes
/// of frame: the listener holds a frame whole before decoding it, and the
/// decoder leaves what follows the body alone, so its size is the test's.
fn kafka_frame(id: i32, len: usize) -> Vec<u8> {
    let mut frame = (len as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&18i16.to_be_bytes()); // ApiVersions
    frame.extend_from_slice(&0i16.to_be_bytes()); // v0
    frame.extend_from_slice(&id.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
    frame.resize(4 + len, 0);
    frame
}

/// The correlation id and error code of the next Kafka answer on
/// `stream`, `None` if the server closed it; waits up to `within`.
fn kafka_answer(stream: &mut TcpStream, within: Duration) -> Option<(i32, i16)> {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("no Kafka answer within {within:?}")
        }
        Err(_) => return None,
    }
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).ok()?;
    let id = i32::from_be_bytes(body[..4].try_into().unwrap());
    Some((id, i16::from_be_bytes([body[4], body[5]])))
}

/// Nothing arrives on `stream` for a while: the listener is not reading
/// it. (A correct server never fails this; a server that answered at once
/// fails it.)
fn kafka_waits(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut one = [0u8; 1];
    matches!(stream.read(&mut one), Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}

/// The Kafka listener's frames take from the same budget as HTTP bodies
/// (KAFKA.md "Bad input"): a Kafka frame held part-sent takes what has
/// arrived (its buffer, grown by doubling up to its length), HTTP bodies
/// fit in what is left, and its bytes come back once it is answered. The other way, HTTP
/// bodies filling the budget make a Kafka frame wait (its connection is
/// not read, not closed) until one gives its bytes back; a frame larger
/// than the whole budget closes only its own connection.
#[test]
fn kafka_frames_and_http_bodies_share_one_budget() {
    let s = start(&format!(
        "{BUDGET_CONFIG}kafka:\n  max_request_bytes: 4194304\n"
    ));
    let kafka = s.kafka_addr.unwrap();

    // A Kafka frame of 800000 bytes, 700000 sent: its buffer, grown to
    // the frame's length, is held.
    let frame = kafka_frame(7, 800_000);
    let mut held = stalled_bytes(kafka, &frame[..700_004]);
    wait_for("the Kafka frame in the budget", || {
        s.metric("tidelog_http_inflight_bytes") == 800_000.0
    });
    // HTTP fits in the rest.
    produce(&s, "small").expect(200);
    assert_eq!(s.metric("tidelog_http_inflight_bytes"), 800_000.0);
    // The rest of the frame: answered, and its bytes come back.
    held.write_all(&frame[700_004..]).unwrap();
    assert_eq!(kafka_answer(&mut held, GENEROUS), Some((7, 0)));
    wait_for("the budget to be empty", || {
        s.metric("tidelog_http_inflight_bytes") == 0.0
    });

    // Four slow HTTP bodies fill the budget: a Kafka frame waits for it.
    let mut holding: Vec<TcpStream> = (0..4)
        .map(|_| stalled(s.addr, &almost_whole_body()))
        .collect();
    wait_for("four bodies in the budget", || {
        s.metric("tidelog_http_inflight_bytes") >= 4.0 * 262_143.0
    });
    let mut waiting = stalled_bytes(kafka, &kafka_frame(8, 1000));
    assert!(
        kafka_waits(&mut waiting),
        "a Kafka frame over the budget is not read"
    );
    // Larger than the whole budget: its connection is closed at once,
    // the waiting one is not.
    let mut over = stalled_bytes(kafka, &kafka_frame(9, 1_048_577)[..64]);
    assert_eq!(kafka_answer(&mut over, GENEROUS), None);
    // One body gives up: the Kafka frame fits and is answered.
    drop(holding.pop());
    assert_eq!(kafka_answer(&mut waiting, GENEROUS), Some((8, 0)));
    wait_for("three bodies left", || {
        let held = s.metric("tidelog_http_inflight_bytes");
        (3.0 * 262_143.0..=786_432.0).contains(&held)
    });
    // The listener goes on serving, and so does HTTP.
    let mut fresh = stalled_bytes(kafka, &kafka_frame(10, 100));
    assert_eq!(kafka_answer(&mut fresh, GENEROUS), Some((10, 0)));
    drop(holding);
    wait_for("the budget to be empty again", || {
        s.metric("tidelog_http_inflight_bytes") == 0.0
    });
    produce(&s, "after").expect(200);
}

/// A connection that sends `sent` and then nothing.
fn stalled_bytes(addr: SocketAddr, sent: &[u8]) -> TcpStream {
    let mut stream = connect(addr);
    stream.write_all(sent).unwrap();
    stream
}

#[test]
fn a_declared_length_over_max_request_bytes_is_refused_before_its_body() {
    let s = start(BUDGET_CONFIG);
    // 2^30 declared, two bytes sent: answered without waiting for the rest
    // (the body timeout is a minute, twice the test's patience).
    let mut huge = stalled(
        s.addr,
        &format!("{PRODUCE_HEAD}Content-Length: 1073741824\r\n\r\n{{}}"),
    );
    let m = answer_then_close(&mut huge).expect_error(413, 41301);
    assert!(
        m.contains("1073741824") && m.contains("http.max_request_bytes"),
        "{m}"
    );
    // A chunked body has no declared length: refused once it passes the
    // limit, while it streams.
    let m = chunked_until_answered(s.addr, 64 << 10, 16).expect_error(413, 41301);
    assert!(m.contains("http.max_request_bytes"), "{m}");
    // Nothing of either is held or written.
    assert_eq!(s.metric("tidelog_http_inflight_bytes"), 0.0);
    assert_eq!(
        s.get("/topics/t/partitions/0/offsets").expect(200),
        json!({"beginning_offset": 0, "end_offset": 0})
    );
}

#[test]
fn shutdown_does_not_wait_for_connections_without_a_request_in_flight() {
    // Header and idle timeouts far beyond the test's patience: only the
    // shutdown closes those connections. A body stalled half-way is a
    // request in flight: the shutdown waits for it, as long as the body
    // timeout.
    let mut s = start(
        "http:\n  header_read_timeout_ms: 600000\n  idle_timeout_ms: 600000\n  \
         body_read_timeout_ms: 2000\ntopics:\n  - name: t\n    partitions: 1\n",
    );
    let _fresh = connect(s.addr);
    let _half_headers = stalled(s.addr, PRODUCE_HEAD);
    let mut kept = connect(s.addr);
    keep_alive_get(&mut kept, "/status/ready").expect(200);
    let mut half_body = stalled(
        s.addr,
        &format!("{PRODUCE_HEAD}Content-Length: 100\r\n\r\n{{\"records\":["),
    );
    wait_for("all four connections, the body being read", || {
        s.metric("tidelog_http_connections") == 5.0
            && s.metric("tidelog_http_requests_reading_body") == 1.0
    });
    let status = s.terminate();
    assert!(status.success(), "{status:?}\n{}", s.log());
    assert!(!s.data_dir.path().join("abort").exists());
    answer_then_close(&mut half_body).expect_error(408, 40801);
}

/// A client that asks for a large fetch answer and never reads it: once the
/// socket buffers are full the server's write blocks, and after
/// `http.write_timeout_ms` without progress the connection is closed (the
/// answer's memory freed) and counted, while other requests are answered.
#[test]
fn a_client_that_never_reads_its_answer_is_closed_after_the_write_timeout() {
    let s = start("http:\n  write_timeout_ms: 1000\ntopics:\n  - name: t\n    partitions: 1\n");
    // 40 × 5 records of 60 kB: a 12 MB answer, far more than the socket
    // buffers of both ends hold.
    let value = "x".repeat(60_000);
    for _ in 0..40 {
        let records: Vec<_> = (0..5).map(|_| json!({"value": value})).collect();
        s.post_raw(
            "/topics/t/partitions/0",
            "application/vnd.kafka.json.v2+json",
            json!({ "records": records }).to_string().as_bytes(),
        )
        .expect(200);
    }
    let mut reader = connect(s.addr);
    // A small receive buffer (set explicitly, so the kernel does not grow
    // it), so the server's writes block soon.
    let rcvbuf: libc::c_int = 4096;
    // SAFETY: a valid socket descriptor and a c_int option of its size.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&reader),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&rcvbuf as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    write!(
        reader,
        "GET /topics/t/partitions/0/records?offset=0&max_records=200&max_bytes=67108864&timeout=0 \
         HTTP/1.1\r\nHost: tidelog\r\n\r\n"
    )
    .unwrap();
    let series = "tidelog_http_timeouts_total{phase=\"write\"}";
    wait_for("the stalled write is timed out", || {
        // Answered while the stalled answer waits.
        s.get("/status/ready").expect(200);
        s.metric(series) >= 1.0
    });
    // Closed on the server's side: only the `/metrics` request that asks
    // is open. (Not read to its end here: what the kernel still sends
    // through a 4 kB window would take minutes.)
    wait_for("the stalled connection is closed", || {
        s.metric("tidelog_http_connections") <= 1.0
    });
    let mut head = [0u8; 12];
    reader.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the answer had begun");
    assert_eq!(s.metric(series), 1.0);
    produce(&s, "after").expect(200);
}

/// A connection with a small receive buffer (set explicitly, so the kernel
/// does not grow it), so the server's writes to it block soon.
fn non_reading(addr: SocketAddr) -> TcpStream {
    let stream = connect(addr);
    let rcvbuf: libc::c_int = 4096;
    // SAFETY: a valid socket descriptor and a c_int option of its size.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&stream),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&rcvbuf as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    stream
}

/// Clients that declare the largest body (HTTP `Content-Length`, a Kafka
/// frame's length) and send nothing more hold nothing of the byte budget:
/// seventeen HTTP connections declaring 16 MiB and three Kafka
/// connections sending only a 16 MiB length, against a 32 MiB budget two
/// such declarations used to fill, while a producer beside them on each
/// front-end is served. (Issue 35 item 8.)
#[test]
fn clients_that_declare_bodies_and_send_nothing_hold_no_budget() {
    let s = start(
        "http:\n  max_request_bytes: 16777216\n  max_inflight_bytes: 33554432\n  \
         body_read_timeout_ms: 60000\nkafka:\n  max_request_bytes: 16777216\n\
         topics:\n  - name: t\n    partitions: 1\n",
    );
    let kafka = s.kafka_addr.unwrap();
    let declared = format!("{PRODUCE_HEAD}Content-Length: 16777216\r\n\r\n");
    let _http: Vec<TcpStream> = (0..17).map(|_| stalled(s.addr, &declared)).collect();
    let _kafka: Vec<TcpStream> = (0..3)
        .map(|_| stalled_bytes(kafka, &16_777_216i32.to_be_bytes()))
        .collect();
    wait_for("every silent body is being read", || {
        s.metric("tidelog_http_requests_reading_body") == 17.0
            && s.metric("tidelog_kafka_connections") == 3.0
    });
    assert_eq!(s.metric("tidelog_http_inflight_bytes"), 0.0);
    // Served beside them, on both front-ends.
    produce(&s, "served").expect(200);
    let mut fresh = stalled_bytes(kafka, &kafka_frame(11, 100));
    assert_eq!(kafka_answer(&mut fresh, GENEROUS), Some((11, 0)));
    assert_eq!(s.metric("tidelog_http_rejected_inflight_bytes_total"), 0.0);
    assert_eq!(s.metric("tidelog_http_inflight_bytes"), 0.0);
}

/// Twenty-four clients ask for a large fetch answer (about 16 MB each)
/// and never read it: the answers held until written stay within
/// `http.max_inflight_response_bytes` (8 MiB here), so the server's
/// anonymous memory grows by about that, not by 24 answers (which took it
/// to several times its baseline). Each is answered smaller or refused
/// 503/50307, and once they go, fetches are served whole again. (Issue 35
/// item 9.)
#[test]
fn answers_held_for_clients_that_do_not_read_stay_within_their_budget() {
    let s = start(
        "http:\n  max_inflight_response_bytes: 8388608\n  write_timeout_ms: 600000\n\
         topics:\n  - name: t\n    partitions: 1\n",
    );
    // 280 records of 60 kB: about 16.8 MB of values.
    let value = "x".repeat(60_000);
    for _ in 0..14 {
        let records: Vec<_> = (0..20).map(|_| json!({"value": value})).collect();
        s.post_raw(
            "/topics/t/partitions/0",
            "application/vnd.kafka.json.v2+json",
            json!({ "records": records }).to_string().as_bytes(),
        )
        .expect(200);
    }
    let fetch =
        "/topics/t/partitions/0/records?offset=0&max_records=10000&max_bytes=67108864&timeout=0";
    // One answer read whole first: its render is in the baseline.
    let whole = s.get(fetch).expect(200);
    assert!(!whole.as_array().unwrap().is_empty());
    let baseline = s.rss_anon_kib();
    let answered = || {
        s.metric("tidelog_http_responses_total{class=\"2xx\"}")
            + s.metric("tidelog_http_responses_total{class=\"5xx\"}")
    };
    let before = answered();
    let mut readers = Vec::new();
    for _ in 0..24 {
        let mut reader = non_reading(s.addr);
        write!(reader, "GET {fetch} HTTP/1.1\r\nHost: tidelog\r\n\r\n").unwrap();
        readers.push(reader);
    }
    // Each of them answered (its answer held, or refused).
    wait_for("24 answers", || answered() >= before + 24.0);
    let held = s.rss_anon_kib();
    common::assert_rss_within(baseline, held, 2.5, "with 24 answers not read");
    assert!(
        s.metric("tidelog_http_answer_bytes") <= 8_388_608.0,
        "the answer budget passed"
    );
    assert!(s.metric("tidelog_http_answers_shrunk_total") >= 1.0);
    drop(readers);
    wait_for("the held answers to be freed", || {
        s.metric("tidelog_http_answer_bytes") == 0.0
    });
    let again = s.get(fetch).expect(200);
    assert_eq!(
        again.as_array().unwrap().len(),
        whole.as_array().unwrap().len()
    );
}

/// Request heads hyper refuses before routing (a control character in a
/// header, an over-long URI, too many headers) are answered with the JSON
/// error body of every other error, on a fresh connection and on a
/// keep-alive one after a good request. (Issue 35 item 15.)
#[test]
fn heads_refused_before_routing_get_the_json_error_body() {
    let s = start("topics:\n  - name: t\n    partitions: 1\n");
    let json_error = |raw: &str, status: u16, code: u64| {
        let answer = answer_then_close(&mut stalled(s.addr, raw));
        assert_eq!(
            answer.header("content-type"),
            Some("application/json"),
            "{raw:?}"
        );
        answer.expect_error(status, code)
    };
    let m = json_error(
        "GET /topics HTTP/1.1\r\nHost: tidelog\r\nX-Bad: a\x01b\r\n\r\n",
        400,
        40002,
    );
    assert!(m.contains("malformed request head"), "{m}");
    let long = format!(
        "GET /topics?x={} HTTP/1.1\r\nHost: tidelog\r\n\r\n",
        "a".repeat(70_000)
    );
    let m = json_error(&long, 414, 41401);
    assert!(m.contains("request target"), "{m}");
    let many: String = (0..150).map(|i| format!("X-H{i}: v\r\n")).collect();
    let m = json_error(
        &format!("GET /topics HTTP/1.1\r\nHost: tidelog\r\n{many}\r\n"),
        431,
        43101,
    );
    assert!(m.contains("header fields"), "{m}");
    // After a good request on the same connection.
    let mut kept = connect(s.addr);
    keep_alive_get(&mut kept, "/topics").expect(200);
    kept.write_all(b"GET /topics HTTP/1.1\r\nX-Bad: \x7f\r\n\r\n")
        .unwrap();
    answer_then_close(&mut kept).expect_error(400, 40002);
    // And after a request with a body.
    let mut kept = connect(s.addr);
    let body = json!({"records": [{"value": "kept"}]}).to_string();
    write!(
        kept,
        "{PRODUCE_HEAD}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    read_answer(&mut kept).expect(200);
    kept.write_all(b"GET /topics HTTP/1.1\r\nX-Bad: \x7f\r\n\r\n")
        .unwrap();
    answer_then_close(&mut kept).expect_error(400, 40002);
    assert_eq!(s.metric("tidelog_http_rejected_heads_total"), 5.0);
    // Requests pipelined in one write are all served, in order.
    let mut piped = stalled(
        s.addr,
        "GET /topics HTTP/1.1\r\nHost: t\r\n\r\nGET /topics/t HTTP/1.1\r\nHost: t\r\n\r\n\
         GET /status/ready HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let all = String::from_utf8_lossy(&read_until_closed(&mut piped).unwrap()).into_owned();
    assert_eq!(all.matches("HTTP/1.1 200 OK").count(), 3, "{all}");
    // Good requests, with and without bodies, are untouched.
    produce(&s, "after").expect(200);
    s.get("/topics/t/partitions/0/offsets").expect(200);
}

/// Guesses of the admin token are answered 401 only after
/// `http.auth_failure_delay_ms` (1 s), a few at a time over all
/// connections: sixteen connections guessing for three seconds get a
/// handful of answers (one connection got 20,459 in 3 s before), every one
/// counted, logged at most once per 10 s and never with the token; the
/// right token is served meanwhile. (Issue 35 item 14.)
#[test]
fn wrong_admin_tokens_are_delayed_and_counted() {
    let s = start("admin_token: s3cret\ntopics:\n  - name: t\n    partitions: 1\n");
    let started = Instant::now();
    let guessers: Vec<JoinHandle<u32>> = (0..16)
        .map(|g| {
            let addr = s.addr;
            std::thread::spawn(move || {
                let mut stream = connect(addr);
                let mut answered = 0;
                while started.elapsed() < Duration::from_secs(3) {
                    write!(
                        stream,
                        "POST /v3/clusters/tidelog/retention HTTP/1.1\r\nHost: tidelog\r\n\
                         Authorization: Bearer guess-{g}-{answered}\r\n\
                         Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
                    )
                    .unwrap();
                    read_answer(&mut stream).expect_error(401, 40101);
                    answered += 1;
                }
                answered
            })
        })
        .collect();
    // The right token, while they guess.
    let right = s.request(
        "POST",
        "/v3/clusters/tidelog/topics",
        &[
            ("Authorization", "Bearer s3cret"),
            ("Content-Type", "application/json"),
        ],
        Some(br#"{"topic_name":"made","partitions_count":1}"#),
    );
    right.expect(201);
    let answered: u32 = guessers.into_iter().map(|g| g.join().unwrap()).sum();
    let elapsed = started.elapsed().as_secs_f64();
    // At most four answers per second (four delays of 1 s at once), and
    // a second's more for the ones in progress.
    assert!(
        f64::from(answered) <= 4.0 * (elapsed + 1.0),
        "{answered} wrong tokens answered in {elapsed:.1} s"
    );
    assert!(answered >= 1);
    assert_eq!(
        s.metric("tidelog_http_auth_failures_total"),
        f64::from(answered)
    );
    let log = s.log();
    let warned = log.matches("failed HTTP login").count();
    assert!(
        (1..=(elapsed / 10.0) as usize + 1).contains(&warned),
        "{warned} WARN lines:\n{log}"
    );
    assert!(!log.contains("guess-"), "a token sent was logged:\n{log}");
}

/// Deleting a consumer instance answers its waiting records call at once
/// with 404/40403, not after the call's 30 s timeout. (Issue 35 item 11.)
#[test]
fn deleting_a_consumer_instance_answers_its_long_poll_at_once() {
    let s = start("topics:\n  - name: t\n    partitions: 1\n");
    s.send_json("POST", "/consumers/g", &json!({"name": "c"}))
        .expect(200);
    let base = "/consumers/g/instances/c";
    s.send_json(
        "POST",
        &format!("{base}/assignments"),
        &json!({"partitions": [{"topic": "t", "partition": 0}]}),
    )
    .expect(204);
    let addr = s.addr;
    let started = Instant::now();
    let poll = std::thread::spawn(move || {
        common::http(
            addr,
            "GET",
            "/consumers/g/instances/c/records?timeout=30000",
            &[("Accept", "application/vnd.kafka.binary.v2+json")],
            None,
        )
    });
    wait_for("the records call to wait", || {
        s.metric("tidelog_fetch_long_polls_waiting") == 1.0
    });
    s.request("DELETE", base, &[], None).expect(204);
    poll.join().unwrap().expect_error(404, 40403);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "answered after {:?}, its timeout was 30 s",
        started.elapsed()
    );
}
