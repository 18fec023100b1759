//! `kill -9` during produce under `flush: sync`, then restart: every
//! acknowledged record is fetched at its offset with its value, and nothing
//! else is half-visible (every record served is one a producer sent, and
//! each partition's offsets run without holes from 0).
//!
//! The topic is auto-created by the first produce, which also covers
//! `auto_create_topics: true`.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::TidelogProcess;
use serde_json::{json, Value};

const CONFIG: &str = "
auto_create_topics: true
default_partitions: 3
store:
  commitlog_segment_bytes: 262144
  consume_queue_units_per_file: 500
  index_slots: 1000
  index_entries: 4000
  flush: sync
  max_message_bytes: 16384
";

const PRODUCERS: usize = 4;
const BATCH: usize = 5;
/// Acknowledged records to wait for before the kill.
const ACKED_BEFORE_KILL: usize = 1500;

/// What one produce request came to.
enum Produced {
    /// 200: the answer, with the acknowledged offsets.
    Acked(Value),
    /// 503 with 50303: the sync flush did not cover the records within
    /// `sync_flush_timeout_ms`. Appended, durability unknown: not
    /// acknowledged, and the client may retry (API.md). A slow disk, such
    /// as one the rest of the test suite keeps busy, is enough for it.
    FlushTimedOut,
    /// Connection refused or reset mid-request: the server is gone.
    Gone,
}

/// One produce request on a fresh connection. Any answer other than a
/// success or a flush timeout is a failure of the test, with the answer.
fn try_produce(addr: std::net::SocketAddr, body: &[u8]) -> Result<Produced, String> {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return Ok(Produced::Gone);
    };
    let head = format!(
        "POST /topics/crashy HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut raw = Vec::new();
    let sent = stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .and_then(|()| stream.write_all(head.as_bytes()))
        .and_then(|()| stream.write_all(body))
        .and_then(|()| stream.read_to_end(&mut raw));
    if sent.is_err() || raw.is_empty() {
        return Ok(Produced::Gone);
    }
    let text = String::from_utf8_lossy(&raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Ok(Produced::Gone); // cut off by the kill
    };
    let Ok(answer) = serde_json::from_str::<Value>(body) else {
        return Ok(Produced::Gone); // a body cut off by the kill
    };
    if head.starts_with("HTTP/1.1 200") {
        return Ok(Produced::Acked(answer));
    }
    if head.starts_with("HTTP/1.1 503") && answer["error_code"] == 50303 {
        return Ok(Produced::FlushTimedOut);
    }
    Err(format!("unexpected answer to a produce request:\n{text}"))
}

#[test]
fn kill_9_under_sync_flush_loses_no_acknowledged_record() {
    let mut s = TidelogProcess::start_with_config(CONFIG);
    s.get("/topics/crashy/partitions/0/offsets")
        .expect_error(404, 40401);

    // (partition, offset) -> value, for acknowledged records.
    let acked: Arc<Mutex<BTreeMap<(u64, u64), String>>> = Arc::default();
    // Every value ever sent, acknowledged or not.
    let sent: Arc<Mutex<HashSet<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    // Flush timeouts seen, and the first unexpected answer.
    let timeouts = Arc::new(AtomicUsize::new(0));
    let failure: Arc<Mutex<Option<String>>> = Arc::default();
    let addr = s.addr;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|w| {
            let (acked, sent, stop) = (Arc::clone(&acked), Arc::clone(&sent), Arc::clone(&stop));
            let (timeouts, failure) = (Arc::clone(&timeouts), Arc::clone(&failure));
            std::thread::spawn(move || {
                let pad = "p".repeat(200);
                for n in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let values: Vec<String> =
                        (0..BATCH).map(|i| format!("w{w}-n{n}-i{i}-{pad}")).collect();
                    sent.lock().unwrap().extend(values.iter().cloned());
                    let body = json!({"records": values.iter().map(|v| json!({"value": v})).collect::<Vec<_>>()});
                    let answer = match try_produce(addr, body.to_string().as_bytes()) {
                        Ok(Produced::Acked(answer)) => answer,
                        Ok(Produced::FlushTimedOut) => {
                            timeouts.fetch_add(1, Ordering::Relaxed);
                            continue; // sent, not acknowledged: go on
                        }
                        Ok(Produced::Gone) => return,
                        Err(e) => {
                            failure.lock().unwrap().get_or_insert(e);
                            return;
                        }
                    };
                    let mut acked = acked.lock().unwrap();
                    for (o, v) in answer["offsets"].as_array().unwrap().iter().zip(values) {
                        let key = (o["partition"].as_u64().unwrap(), o["offset"].as_u64().unwrap());
                        assert!(acked.insert(key, v).is_none(), "offset {key:?} acknowledged twice");
                    }
                }
            })
        })
        .collect();

    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.lock().unwrap().len() < ACKED_BEFORE_KILL {
        if let Some(e) = failure.lock().unwrap().take() {
            panic!("{e}\n{}", s.log());
        }
        assert!(
            Instant::now() < deadline,
            "producers made no progress ({} acknowledged, {} flush timeouts)\n{}",
            acked.lock().unwrap().len(),
            timeouts.load(Ordering::Relaxed),
            s.log()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    s.kill_9();
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        p.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let sent = sent.lock().unwrap().clone();

    let log_before = s.log_len();
    s.start_again();
    assert!(
        s.log()[log_before..].contains("did not shut down cleanly"),
        "kill -9 leaves abort behind, so recovery runs"
    );
    let topic = s.get("/v3/clusters/tidelog/topics/crashy").expect(200);
    assert_eq!(
        topic["partitions_count"], 3,
        "auto-created with default_partitions"
    );

    let mut served = 0;
    for p in 0..3u64 {
        let end = s
            .get(&format!("/topics/crashy/partitions/{p}/offsets"))
            .expect(200)["end_offset"]
            .as_u64()
            .unwrap();
        let mut next = 0u64;
        while next < end {
            let got = s
                .get(&format!(
                    "/topics/crashy/partitions/{p}/records?offset={next}&timeout=0"
                ))
                .expect(200);
            let got = got.as_array().unwrap();
            assert!(
                !got.is_empty(),
                "partition {p}: nothing at {next} below end {end}"
            );
            for r in got {
                let offset = r["offset"].as_u64().unwrap();
                assert_eq!(offset, next, "partition {p}: offsets run without holes");
                let value = r["value"].as_str().unwrap().to_string();
                assert!(
                    sent.contains(&value),
                    "partition {p} offset {offset}: never sent: {value:?}"
                );
                if let Some(expected) = acked.get(&(p, offset)) {
                    assert_eq!(&value, expected, "partition {p} offset {offset}");
                }
                next += 1;
                served += 1;
            }
        }
        let last_acked = acked.range((p, 0)..(p + 1, 0)).next_back();
        if let Some(((_, o), _)) = last_acked {
            assert!(
                *o < end,
                "partition {p}: acknowledged offset {o} missing (end {end})"
            );
        }
    }
    assert!(
        served >= acked.len(),
        "served {served} < acknowledged {}",
        acked.len()
    );

    // The restarted server takes writes where the log left off.
    let r = s.post_raw(
        "/topics/crashy/partitions/0",
        "application/json",
        b"{\"records\":[{\"value\":\"after\"}]}",
    );
    let offset = r.expect(200)["offsets"][0]["offset"].as_u64().unwrap();
    let end0 = acked
        .range((0, 0)..(1, 0))
        .next_back()
        .map_or(0, |((_, o), _)| o + 1);
    assert!(offset >= end0);
}
