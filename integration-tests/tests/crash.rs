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
use std::sync::atomic::{AtomicBool, Ordering};
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

/// One produce request on a fresh connection; `None` if the server is gone
/// (connection refused or reset mid-request).
fn try_produce(addr: std::net::SocketAddr, body: &[u8]) -> Option<Value> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    let head = format!(
        "POST /topics/crashy HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    serde_json::from_str(body).ok()
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
    let addr = s.addr;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|w| {
            let (acked, sent, stop) = (Arc::clone(&acked), Arc::clone(&sent), Arc::clone(&stop));
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
                    let Some(answer) = try_produce(addr, body.to_string().as_bytes()) else {
                        return; // the server is gone
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
        assert!(
            Instant::now() < deadline,
            "producers made no progress\n{}",
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
