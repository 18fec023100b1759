//! An idempotent producer on the Kafka protocol against the real binary
//! under `flush: sync`: batches acknowledged before a `kill -9`, and before
//! a clean restart, are sent again afterwards and answered with their
//! original base offsets, and nothing is written twice (the next batch
//! lands right after the acknowledged ones). Raw frames over a std TCP
//! stream: InitProducerId v0, Produce v3 of v2 record batches carrying the
//! producer id, epoch and base sequence, as Kafka clients build them.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::TidelogProcess;
use serde_json::json;
use tidelog_integration_tests::kafka_wire::{self, put_str, put_varint};

const CONFIG: &str = "
auto_create_topics: true
default_partitions: 1
store:
  flush: sync
  commitlog_segment_bytes: 262144
  consume_queue_units_per_file: 500
  index_slots: 1000
  index_entries: 4000
";

const INIT_PRODUCER_ID: i16 = 22;
const PRODUCE: i16 = 0;

/// One request (header v1) and its answer's body (header v0 stripped).
fn call(addr: SocketAddr, key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    kafka_wire::call(
        addr,
        "idempotence-test",
        key,
        version,
        body,
        Duration::from_secs(60),
    )
}

/// InitProducerId v0 without a transactional id: (error, id, epoch).
fn init_producer_id(addr: SocketAddr) -> (i16, i64, i16) {
    let mut body = Vec::new();
    put_str(&mut body, None);
    body.extend_from_slice(&60_000i32.to_be_bytes());
    let a = call(addr, INIT_PRODUCER_ID, 0, &body);
    // throttle_time_ms, error_code, producer_id, producer_epoch
    (
        i16::from_be_bytes([a[4], a[5]]),
        i64::from_be_bytes(a[6..14].try_into().unwrap()),
        i16::from_be_bytes([a[14], a[15]]),
    )
}

/// A v2 record batch of `values` (keyless, no headers) as producer `id`
/// at epoch 0 from `sequence`.
fn batch(id: i64, sequence: i32, values: &[&str]) -> Vec<u8> {
    let ts: i64 = 1_700_000_000_000;
    let mut records = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let mut r = vec![0u8]; // attributes
        put_varint(&mut r, 0); // timestamp delta
        put_varint(&mut r, i as i64); // offset delta
        put_varint(&mut r, -1); // null key
        put_varint(&mut r, v.len() as i64);
        r.extend_from_slice(v.as_bytes());
        put_varint(&mut r, 0); // headers
        put_varint(&mut records, r.len() as i64);
        records.extend_from_slice(&r);
    }
    // From attributes to the end: what the CRC covers.
    let mut tail = Vec::new();
    tail.extend_from_slice(&0i16.to_be_bytes()); // attributes: no codec
    tail.extend_from_slice(&(values.len() as i32 - 1).to_be_bytes());
    tail.extend_from_slice(&ts.to_be_bytes());
    tail.extend_from_slice(&ts.to_be_bytes());
    tail.extend_from_slice(&id.to_be_bytes());
    tail.extend_from_slice(&0i16.to_be_bytes());
    tail.extend_from_slice(&sequence.to_be_bytes());
    tail.extend_from_slice(&(values.len() as i32).to_be_bytes());
    tail.extend_from_slice(&records);
    let mut b = Vec::new();
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&((4 + 1 + 4 + tail.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&crc32c::crc32c(&tail).to_be_bytes());
    b.extend_from_slice(&tail);
    b
}

/// Produce v3 (acks -1) of `records` to `topic`-0: (error, base offset).
fn produce(addr: SocketAddr, topic: &str, records: &[u8]) -> (i16, i64) {
    let mut body = Vec::new();
    put_str(&mut body, None); // transactional id
    body.extend_from_slice(&(-1i16).to_be_bytes()); // acks
    body.extend_from_slice(&30_000i32.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes()); // one topic
    put_str(&mut body, Some(topic));
    body.extend_from_slice(&1i32.to_be_bytes()); // one partition
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&(records.len() as i32).to_be_bytes());
    body.extend_from_slice(records);
    let a = call(addr, PRODUCE, 3, &body);
    // topics count, name, partitions count, index, error_code, base_offset
    let name_len = i16::from_be_bytes([a[4], a[5]]) as usize;
    let p = 6 + name_len + 4 + 4;
    (
        i16::from_be_bytes([a[p], a[p + 1]]),
        i64::from_be_bytes(a[p + 2..p + 10].try_into().unwrap()),
    )
}

#[test]
fn retried_idempotent_batches_after_kill_9_and_a_clean_restart_are_not_written_twice() {
    let mut server = TidelogProcess::start_with_config(CONFIG);
    let kafka = server.kafka_addr.unwrap();
    // The topic, created over HTTP (Kafka's Produce does not auto-create).
    server
        .send_json(
            "POST",
            "/topics/idem",
            &json!({"records": [{"value": "first"}]}),
        )
        .expect(200);
    let (error, id, epoch) = init_producer_id(kafka);
    assert_eq!((error, epoch), (0, 0));
    let a = batch(id, 0, &["a0", "a1", "a2"]);
    let b = batch(id, 3, &["b0", "b1"]);
    assert_eq!(produce(kafka, "idem", &a), (0, 1));
    assert_eq!(produce(kafka, "idem", &b), (0, 4));

    // kill -9: both batches were acknowledged after their fsync.
    server.kill_9();
    server.start_again();
    let kafka = server.kafka_addr.unwrap();
    assert_eq!(
        produce(kafka, "idem", &a),
        (0, 1),
        "retry of a after kill -9"
    );
    assert_eq!(
        produce(kafka, "idem", &b),
        (0, 4),
        "retry of b after kill -9"
    );
    // Nothing was written again: the next batch follows b.
    let c = batch(id, 5, &["c0"]);
    assert_eq!(produce(kafka, "idem", &c), (0, 6));
    // A new producer never gets the old id.
    let (_, other, _) = init_producer_id(kafka);
    assert_ne!(other, id);

    // A clean restart.
    assert!(server.terminate().success());
    server.start_again();
    let kafka = server.kafka_addr.unwrap();
    assert_eq!(
        produce(kafka, "idem", &b),
        (0, 4),
        "retry of b after a restart"
    );
    assert_eq!(
        produce(kafka, "idem", &c),
        (0, 6),
        "retry of c after a restart"
    );
    let d = batch(id, 6, &["d0"]);
    assert_eq!(produce(kafka, "idem", &d), (0, 7));
    // Over HTTP: the partition holds each record once.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let offsets = server.get("/topics/idem/partitions/0/offsets").expect(200);
        if offsets["end_offset"] == 8 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{offsets}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
