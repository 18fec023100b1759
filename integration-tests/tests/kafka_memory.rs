//! What a Kafka client can make the server hold, against the real binary
//! (docs/OPERATIONS.md "What a Kafka client can make the server hold"):
//! compressed batches of tiny records, a Fetch naming one large partition
//! many times with `max_bytes` 2^31-1 and a client that never reads, a
//! crowd of group members with large metadata; and the one timestamp rule
//! both front-ends apply.
//!
//! Memory is the server process's RssAnon (`/proc/<pid>/status`),
//! measured before and at the worst point of each case, as a ratio
//! against its own baseline; nothing here measures time (each wait is
//! for a condition, with a generous deadline).
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::TidelogProcess;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, GroupId, JoinGroupRequest, JoinGroupResponse,
    ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use serde_json::json;

const GENEROUS: Duration = Duration::from_secs(60);

/// The server's anonymous resident memory, in KiB.
fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// A length-prefixed request frame (the codec crate's header and body).
fn frame<R: Encodable>(key: ApiKey, version: i16, correlation: i32, body: &R) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(s("memory-test")));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, key.request_header_version(version))
        .unwrap();
    body.encode(&mut out, version).unwrap();
    let mut framed = (out.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&out);
    framed
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(GENEROUS)).unwrap();
    stream
}

/// One answer's body from `stream` (its header checked and stripped).
fn read_answer<A: Decodable + HeaderVersion>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
) -> A {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).unwrap();
    let mut body = Bytes::from(body);
    ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
    A::decode(&mut body, version).unwrap()
}

fn call<Q: Encodable, A: Decodable + HeaderVersion>(
    addr: SocketAddr,
    key: ApiKey,
    version: i16,
    body: &Q,
) -> A {
    let mut stream = connect(addr);
    stream.write_all(&frame(key, version, 1, body)).unwrap();
    read_answer(&mut stream, key, version)
}

/// A v2 record batch: `section` is its record section (compressed when
/// `codec` is not 0), `count` records, base timestamp `base_ts`.
fn batch(section: &[u8], count: i32, codec: i16, base_ts: i64) -> Vec<u8> {
    let mut after_crc = Vec::new();
    after_crc.extend_from_slice(&codec.to_be_bytes()); // attributes
    after_crc.extend_from_slice(&(count - 1).to_be_bytes()); // lastOffsetDelta
    after_crc.extend_from_slice(&base_ts.to_be_bytes());
    after_crc.extend_from_slice(&base_ts.to_be_bytes()); // maxTimestamp
    after_crc.extend_from_slice(&(-1i64).to_be_bytes()); // producerId
    after_crc.extend_from_slice(&(-1i16).to_be_bytes());
    after_crc.extend_from_slice(&(-1i32).to_be_bytes());
    after_crc.extend_from_slice(&count.to_be_bytes());
    after_crc.extend_from_slice(section);
    let crc = crc32c::crc32c(&after_crc);
    let mut out = Vec::new();
    out.extend_from_slice(&0i64.to_be_bytes());
    out.extend_from_slice(&((4 + 1 + 4 + after_crc.len()) as i32).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out.push(2);
    out.extend_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(&after_crc);
    out
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// One record: timestamp delta `ts_delta`, offset delta `i`, no key,
/// `value`, no headers.
fn record(out: &mut Vec<u8>, i: i64, ts_delta: i64, value: &[u8]) {
    let mut r = vec![0u8];
    put_varint(&mut r, ts_delta);
    put_varint(&mut r, i);
    put_varint(&mut r, -1);
    put_varint(&mut r, value.len() as i64);
    r.extend_from_slice(value);
    put_varint(&mut r, 0);
    put_varint(out, r.len() as i64);
    out.extend_from_slice(&r);
}

fn produce(topic: &str, batches: Vec<u8>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batches)))])])
}

/// The partition's error code of a one-partition Produce answer.
fn produce_code(answer: &ProduceResponse) -> i16 {
    answer.responses[0].partition_responses[0].error_code
}

const MESSAGE_TOO_LARGE: i16 = 10;
const REQUEST_TIMED_OUT: i16 = 7;
const RECORD_LIST_TOO_LARGE: i16 = 18;
const INVALID_TIMESTAMP: i16 = 32;
const GROUP_MAX_SIZE_REACHED: i16 = 81;

/// Several zstd batches of a million-plus tiny records at once: each
/// request is answered with an error code (not a closed connection), the
/// server's memory stays a small multiple of its baseline (the decoded
/// records count against the in-flight budget, the records per request
/// are capped, one batch inflates to a bounded size), and a normal
/// producer beside them is served.
#[test]
fn compressed_tiny_records_are_bounded_and_answered() {
    let server = TidelogProcess::start_with_config(&format!(
        "{}topics:\n  - name: t\n    partitions: 1\n\
         http:\n  max_inflight_bytes: 33554432\n\
         kafka:\n  max_records_per_request: 3000000\n",
        common::SMALL_STORE
    ));
    let addr = server.kafka_addr.unwrap();
    // A normal produce first: the topic is there and the server warm.
    let mut section = Vec::new();
    record(&mut section, 0, 0, b"warm");
    let answer: ProduceResponse = call(
        addr,
        ApiKey::Produce,
        7,
        &produce("t", batch(&section, 1, 0, 1_700_000_000_000)),
    );
    assert_eq!(produce_code(&answer), 0);
    let baseline = server.rss_anon_kib();

    // 1.2 M records of an empty value: 8.4 MB of records, a few KiB
    // compressed; within one batch's inflated limit (16 MiB) and the
    // records cap set above, so only the byte budget stops them: 1.2 M
    // append records are ~150 MiB each, the budget 32 MiB.
    let count = 1_200_000;
    let mut section = Vec::with_capacity(count * 8);
    for i in 0..count {
        record(&mut section, i as i64, 0, b"");
    }
    let packed = zstd::stream::encode_all(&section[..], 3).unwrap();
    assert!(packed.len() < 1 << 20, "{} bytes", packed.len());
    let bomb = frame(
        ApiKey::Produce,
        7,
        1,
        &produce("t", batch(&packed, count as i32, 4, 1_700_000_000_000)),
    );
    // A batch past one batch's inflated limit (16 MiB): 3 M records.
    let big_count = 3_000_000;
    let mut big = Vec::with_capacity(big_count * 8);
    for i in 0..big_count {
        record(&mut big, i as i64, 0, b"");
    }
    let big_packed = zstd::stream::encode_all(&big[..], 3).unwrap();
    let too_large = frame(
        ApiKey::Produce,
        7,
        1,
        &produce(
            "t",
            batch(&big_packed, big_count as i32, 4, 1_700_000_000_000),
        ),
    );
    drop((section, big));

    let mut bombers: Vec<TcpStream> = (0..6)
        .map(|i| {
            let mut c = connect(addr);
            let f = if i == 0 { &too_large } else { &bomb };
            c.write_all(f).unwrap();
            c
        })
        .collect();
    // Memory while they are decoded: sampled until every bomber has its
    // answer.
    let sampler = {
        let pid = server.pid();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&done);
        let handle = std::thread::spawn(move || {
            let mut peak = 0u64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(common::rss_anon_kib_of(pid));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        });
        (done, handle)
    };
    // A normal producer beside them is served (retried while the budget
    // is full: REQUEST_TIMED_OUT is retriable).
    let mut section = Vec::new();
    record(&mut section, 0, 0, b"normal");
    let normal = produce("t", batch(&section, 1, 0, 1_700_000_000_000));
    let deadline = Instant::now() + GENEROUS;
    loop {
        let answer: ProduceResponse = call(addr, ApiKey::Produce, 7, &normal);
        match produce_code(&answer) {
            0 => break,
            REQUEST_TIMED_OUT if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            other => panic!("the normal producer got {other}"),
        }
    }
    let mut codes = Vec::new();
    for c in &mut bombers {
        let answer: ProduceResponse = read_answer(c, ApiKey::Produce, 7);
        codes.push(produce_code(&answer));
    }
    sampler.0.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.1.join().unwrap().max(server.rss_anon_kib());
    assert_eq!(codes[0], MESSAGE_TOO_LARGE, "{codes:?}");
    assert!(
        codes[1..]
            .iter()
            .all(|c| [0, REQUEST_TIMED_OUT].contains(c)),
        "{codes:?}"
    );
    assert!(
        codes[1..].contains(&REQUEST_TIMED_OUT),
        "a 150 MiB decode cannot fit a 32 MiB budget: {codes:?}"
    );
    // Each refusal is counted by the limit that made it.
    let metrics = server.get("/metrics").text();
    assert!(
        metrics.contains("tidelog_kafka_refused_total{limit=\"batch_inflated_bytes\"} 1\n"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("tidelog_kafka_refused_total{limit=\"produce_inflight_bytes\"} 0\n"),
        "{metrics}"
    );
    // Unbounded, five 1.2 M-record decodes held ~750 MiB at once.
    common::assert_rss_within(baseline, peak, 4.0, "at the worst");
    // The records cap: 600 000 records over a cap of 500 000 (default).
    drop(server);
    let server = TidelogProcess::start_with_config(&format!(
        "{}topics:\n  - name: t\n    partitions: 1\n",
        common::SMALL_STORE
    ));
    let addr = server.kafka_addr.unwrap();
    let mut section = Vec::new();
    for i in 0..600_000 {
        record(&mut section, i, 0, b"");
    }
    let packed = zstd::stream::encode_all(&section[..], 3).unwrap();
    let answer: ProduceResponse = call(
        addr,
        ApiKey::Produce,
        7,
        &produce("t", batch(&packed, 600_000, 4, 1_700_000_000_000)),
    );
    assert_eq!(produce_code(&answer), RECORD_LIST_TOO_LARGE);
}

/// A 600-byte Fetch naming one 32 MiB partition 30 times with max_bytes
/// 2^31-1, from two clients that never read: the server builds at most
/// `kafka.fetch_max_bytes` an answer, reads the partition once, and holds
/// a bounded amount; a client that reads gets the partition once. The
/// answers held for them count in the answer budget, not in the request
/// budget (here smaller than the two answers together): producers on both
/// front-ends are served beside them.
#[test]
fn a_fetch_of_one_partition_thirty_times_is_capped_and_read_once() {
    let server = TidelogProcess::start_with_config(
        "topics:
  - name: big
    partitions: 1
store:
  commitlog_segment_bytes: 16777216
  consume_queue_units_per_file: 1000
  index_slots: 1000
  index_entries: 4000
  max_message_bytes: 1048576
retention:
  disk_max_used_ratio: 1.0
  disk_force_clean_ratio: 1.0
  disk_full_ratio: 1.0
http:
  max_request_bytes: 4194304
  max_inflight_bytes: 8388608
kafka:
  fetch_max_bytes: 8388608
  max_request_bytes: 4194304
",
    );
    let addr = server.kafka_addr.unwrap();
    // 32 MiB: 64 records of 512 KiB, 4 to a request.
    let value = vec![0x5au8; 512 * 1024];
    let mut section = Vec::new();
    for i in 0..4 {
        record(&mut section, i, 0, &value);
    }
    let four = produce("big", batch(&section, 4, 0, 1_700_000_000_000));
    let mut offset = 0;
    for _ in 0..16 {
        let answer: ProduceResponse = call(addr, ApiKey::Produce, 7, &four);
        assert_eq!(produce_code(&answer), 0);
        offset += 4;
    }
    assert_eq!(offset, 64);
    let baseline = server.rss_anon_kib();

    let partitions: Vec<FetchPartition> = (0..30)
        .map(|_| {
            FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(i32::MAX)
        })
        .collect();
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(i32::MAX)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(s("big")))
            .with_partitions(partitions)]);
    let fetch = frame(ApiKey::Fetch, 11, 1, &request);
    assert!(fetch.len() < 1024, "{} bytes", fetch.len());
    // Two clients that never read, with small receive buffers.
    let silent: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut c = connect(addr);
            c.write_all(&fetch).unwrap();
            c
        })
        .collect();
    // A client that reads, after them: the answer names the partition
    // once, within the cap (plus one record: a batch comes back whole).
    let answer: FetchResponse = call(addr, ApiKey::Fetch, 11, &request);
    assert_eq!(answer.responses.len(), 1);
    assert_eq!(answer.responses[0].partitions.len(), 1, "read once");
    let records = answer.responses[0].partitions[0]
        .records
        .as_ref()
        .map_or(0, Bytes::len);
    assert!(records > 0);
    assert!(records <= 8 * 1024 * 1024 + 600 * 1024, "{records} bytes");
    // The silent clients' answers are built (or refused) by now.
    std::thread::sleep(Duration::from_millis(500));
    let held = server.rss_anon_kib();
    // Unbounded, each silent client's answer was 30 x 32 MiB, twice over.
    common::assert_rss_within(baseline, held, 2.0, "with two silent fetches");
    // Their answers (more than the 8 MiB request budget together) hold
    // the answer budget; producers beside them are served at once.
    let answers_held = server.metric("tidelog_http_answer_bytes");
    assert!(
        answers_held > 8_388_608.0,
        "{answers_held} answer bytes held: both silent answers are"
    );
    let answer: ProduceResponse = call(addr, ApiKey::Produce, 7, &four);
    assert_eq!(produce_code(&answer), 0, "a Kafka produce beside them");
    server
        .post_raw(
            "/topics/big",
            "application/vnd.kafka.json.v2+json",
            br#"{"records":[{"value":"beside"}]}"#,
        )
        .expect(200);
    drop(silent);
}

fn join_request(group: &str, protocols: usize, metadata_bytes: usize) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(60_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(
            (0..protocols)
                .map(|p| {
                    JoinGroupRequestProtocol::default()
                        .with_name(s(&format!("assignor-{p}")))
                        .with_metadata(Bytes::from(vec![p as u8; metadata_bytes]))
                })
                .collect(),
        )
}

/// 2,400 members with 96 KiB of metadata each join (eight groups of
/// 300): past `groups.max_member_metadata_bytes` (32 MiB here) they are
/// refused with GROUP_MAX_SIZE_REACHED, and the server's memory stays
/// bounded; a member offering 16 protocols of 64 KiB is refused on its own.
#[test]
fn group_members_metadata_is_bounded_in_bytes() {
    let server = TidelogProcess::start_with_config(&format!(
        "{}groups:\n  max_member_metadata_bytes: 33554432\n",
        common::SMALL_STORE
    ));
    let addr = server.kafka_addr.unwrap();
    let answer: JoinGroupResponse = call(
        addr,
        ApiKey::JoinGroup,
        3,
        &join_request("alone", 16, 64 * 1024),
    );
    assert_eq!(answer.error_code, GROUP_MAX_SIZE_REACHED);
    let baseline = server.rss_anon_kib();

    let mut members = Vec::new();
    for i in 0..2400 {
        let mut c = connect(addr);
        let group = format!("g{}", i % 8);
        c.write_all(&frame(
            ApiKey::JoinGroup,
            3,
            1,
            &join_request(&group, 2, 48 * 1024),
        ))
        .unwrap();
        c.set_nonblocking(true).unwrap();
        members.push(Some(c));
    }
    // Refusals come at once; accepted joins wait for their rebalance.
    let mut refused = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && refused < 2000 {
        for slot in members.iter_mut() {
            let Some(c) = slot else { continue };
            let mut len = [0u8; 4];
            match c.peek(&mut len) {
                Ok(4) => {}
                Ok(0) => panic!("a join's connection was closed"),
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
            c.set_nonblocking(false).unwrap();
            let answer: JoinGroupResponse = read_answer(c, ApiKey::JoinGroup, 3);
            if answer.error_code == GROUP_MAX_SIZE_REACHED {
                refused += 1;
                *slot = None;
            } else {
                c.set_nonblocking(true).unwrap();
                assert_eq!(answer.error_code, 0);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let held = server.rss_anon_kib();
    let metrics = server.get("/metrics").text();
    let metadata_bytes: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("tidelog_consumer_group_member_metadata_bytes "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(
        metadata_bytes > 16_000_000.0 && metadata_bytes <= 33_554_432.0,
        "{metadata_bytes}"
    );
    // 32 MiB hold ~340 members of 96 KiB; the rest are refused.
    assert!(refused >= 2000, "{refused} of 2400 refused");
    // Unbounded, 2,400 x 96 KiB is 225 MiB of metadata.
    common::assert_rss_within(baseline, held, 2.5, "with the members");
    drop(members);
}

/// Kafka applies HTTP's timestamp rule: -2^63 and a base timestamp plus
/// delta that overflows are INVALID_TIMESTAMP (were stored, the second
/// wrapped negative); over HTTP the rule is unchanged (a negative
/// timestamp is 42206, a real one is kept).
#[test]
fn timestamps_follow_one_rule_over_both_front_ends() {
    let server = TidelogProcess::start_with_config(&format!(
        "{}topics:\n  - name: ts\n    partitions: 1\n",
        common::SMALL_STORE
    ));
    let addr = server.kafka_addr.unwrap();
    for (base, delta) in [(i64::MIN, 0), (i64::MAX, 1 << 40), (0, -2)] {
        let mut section = Vec::new();
        record(&mut section, 0, delta, b"1");
        let answer: ProduceResponse = call(
            addr,
            ApiKey::Produce,
            7,
            &produce("ts", batch(&section, 1, 0, base)),
        );
        assert_eq!(produce_code(&answer), INVALID_TIMESTAMP, "{base} + {delta}");
    }
    let mut section = Vec::new();
    record(&mut section, 0, 5, b"1");
    let answer: ProduceResponse = call(
        addr,
        ApiKey::Produce,
        7,
        &produce("ts", batch(&section, 1, 0, 1_700_000_000_000)),
    );
    assert_eq!(produce_code(&answer), 0);

    let json_type = "application/vnd.kafka.json.v2+json";
    for bad in [json!(-1), json!(i64::MIN)] {
        let body = json!({"records": [{"value": 1, "timestamp": bad}]});
        server
            .post_raw(
                "/topics/ts/partitions/0",
                json_type,
                body.to_string().as_bytes(),
            )
            .expect_error(422, 42206);
    }
    let body = json!({"records": [{"value": 1, "timestamp": 1_700_000_000_007i64}]});
    server
        .post_raw(
            "/topics/ts/partitions/0",
            json_type,
            body.to_string().as_bytes(),
        )
        .expect(200);
    // Nothing refused was stored: the two accepted records, in order.
    let records = server
        .get_with(
            "/topics/ts/partitions/0/records?offset=0&timeout=0",
            &[("Accept", json_type)],
        )
        .expect(200);
    let stamps: Vec<i64> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["timestamp"].as_i64().unwrap())
        .collect();
    assert_eq!(stamps, [1_700_000_000_005, 1_700_000_000_007]);
}
