//! The Kafka listener over real TCP on 127.0.0.1, against a real broker
//! in a temporary data dir: each served API at its lowest and highest
//! version (a non-flexible and a flexible one), and bad frames, after
//! each of which the server still serves other connections.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

#[path = "wire/mod.rs"]
mod wire;
use wire::{call, closed, read_frame, request_frame, send_frame};

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use tidelog_broker::store::{CleanerConfig, FlushMode, Header, StoreConfig};
use tidelog_broker::{Broker, BrokerConfig};
use tidelog_kafka::records::{decode_batches, encode_batch, BatchRecord, OutRecord};
use tidelog_kafka::KafkaConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

// The group APIs' tests, on this file's server and framing.
#[path = "protocol/groups.rs"]
mod groups;
// KIP-848's consumer group protocol, likewise.
#[path = "protocol/consumer_groups.rs"]
mod consumer_groups;
// The admin APIs' tests, likewise.
#[path = "protocol/admin.rs"]
mod admin;
// Idempotent producers' tests, likewise.
#[path = "protocol/idempotence.rs"]
mod idempotence;
// Waits for the dispatcher (read-your-writes, the lag bound), likewise.
#[path = "protocol/waits.rs"]
mod waits;
// Transactions through the Kafka APIs, likewise.
#[path = "protocol/transactions.rs"]
mod transactions;
// Transactions' records read at both isolation levels, likewise.
#[path = "protocol/read_committed.rs"]
mod read_committed;
// The APIs on a node of a cluster (a gate the test sets), likewise.
#[path = "protocol/cluster.rs"]
mod cluster;

const MAX_REQUEST_BYTES: u64 = 1 << 20;

struct Server {
    broker: Arc<Broker>,
    addr: std::net::SocketAddr,
    _stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

async fn server() -> Server {
    server_with(KafkaConfig::default().max_connections).await
}

async fn server_with(max_connections: u64) -> Server {
    server_configured(KafkaConfig {
        max_connections,
        ..KafkaConfig::default()
    })
    .await
}

/// A server whose listener has `kafka`'s limits and admin lock (its
/// address and max_request_bytes are the test's).
async fn server_configured(kafka: KafkaConfig) -> Server {
    server_faulted(kafka, None).await
}

/// [`server_configured`] with `faults` installed in the store.
async fn server_faulted(
    kafka: KafkaConfig,
    faults: Option<Arc<tidelog_broker::fault::StoreFaults>>,
) -> Server {
    server_opened(kafka, faults, FlushMode::Async).await
}

/// [`server_faulted`] with the store's flush mode.
async fn server_opened(
    kafka: KafkaConfig,
    faults: Option<Arc<tidelog_broker::fault::StoreFaults>>,
    flush: FlushMode,
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut store = StoreConfig::new(dir.path());
    if flush == FlushMode::Sync {
        store.flush = flush;
        // No periodic flush within the test: what makes an unawaited
        // (acks 0) record durable, and so fetchable, is the dispatcher's
        // own request.
        store.flush_interval_ms = 3_600_000;
        store.sync_checkpoint_interval_ms = 3_600_000;
    }
    store.commitlog_segment_bytes = 1 << 20;
    store.consume_queue_units_per_file = 1024;
    store.index_slots = 64;
    store.index_entries = 256;
    store.preallocate_next_segment = false;
    // How full this shared machine's disk is must not refuse writes.
    store.retention.disk = Arc::new(tidelog_broker::store::FixedDiskUsage::new(0.1));
    let cleaner = CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    };
    let config = BrokerConfig {
        auto_create_topics: true,
        default_partitions: 2,
        // A group's first rebalance does not wait for more members.
        groups: tidelog_broker::coordinator::GroupsConfig {
            initial_rebalance_delay_ms: 0,
            ..Default::default()
        },
        ..Default::default()
    };
    let broker = Arc::new(
        tokio::task::spawn_blocking(move || {
            let faults = tidelog_broker::fault::Faults {
                store: faults,
                cleaner: None,
            };
            Broker::open_with_faults(&config, store, cleaner, faults)
        })
        .await
        .unwrap()
        .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stop_rx) = watch::channel(false);
    let ready_broker = Arc::clone(&broker);
    let config = KafkaConfig {
        listen: Some(addr),
        max_request_bytes: MAX_REQUEST_BYTES,
        ..kafka
    };
    tokio::spawn(async move {
        let ready: tidelog_kafka::Ready = Arc::new(move || Some(Arc::clone(&ready_broker)));
        tidelog_kafka::serve(listener, &config, ready, stop_rx).await;
    });
    Server {
        broker,
        addr,
        _stop: stop,
        _dir: dir,
    }
}

async fn connect(s: &Server) -> TcpStream {
    TcpStream::connect(s.addr).await.unwrap()
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

async fn metadata(stream: &mut TcpStream, version: i16, topics: &[&str]) -> MetadataResponse {
    let topics = topics
        .iter()
        .map(|t| MetadataRequestTopic::default().with_name(Some(name(t))))
        .collect();
    let request = MetadataRequest::default()
        .with_topics(Some(topics))
        .with_allow_auto_topic_creation(true);
    call(stream, ApiKey::Metadata, version, &request).await
}

fn batch(records: &[OutRecord<'_>]) -> Bytes {
    let mut out = Vec::new();
    encode_batch(&mut out, records.iter().cloned());
    Bytes::from(out)
}

fn produce_request(topic: &str, partition: i32, acks: i16, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

fn fetch_request(topic: &str, partition: i32, offset: i64, wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

fn records_of(answer: &FetchResponse) -> Vec<BatchRecord> {
    let data = answer.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default();
    let mut budget = usize::MAX;
    decode_batches(&data, &mut budget).unwrap()
}

/// `n` records from `from` on, fetched with long-polls until all are
/// there (a produce is acknowledged before the dispatcher indexes it).
async fn fetch_n(
    c: &mut TcpStream,
    version: i16,
    topic: &str,
    p: i32,
    from: i64,
    n: usize,
) -> Vec<BatchRecord> {
    let mut got = Vec::new();
    for _ in 0..100 {
        let at = from + got.len() as i64;
        let answer: FetchResponse = call(
            c,
            ApiKey::Fetch,
            version,
            &fetch_request(topic, p, at, 5000),
        )
        .await;
        got.extend(records_of(&answer));
        if got.len() >= n {
            return got;
        }
    }
    panic!("{n} records from {from} did not arrive: {}", got.len());
}

fn record<'a>(key: Option<&'a [u8]>, value: Option<&'a [u8]>, ts: i64) -> OutRecord<'a> {
    OutRecord {
        offset: 0,
        timestamp_ms: ts,
        key,
        value,
        // A null value (length -1 on the wire) between two headers of the
        // same name: stored null, fetched back null, in order.
        headers: [Some(&b"1"[..]), None, Some(b"2")]
            .into_iter()
            .map(|value| Header {
                name: "h".into(),
                value: value.map(Bytes::from_static),
            })
            .collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_advertises_only_the_served_apis_and_answers_unknown_versions() {
    let s = server().await;
    let mut c = connect(&s).await;
    for version in [0, 3] {
        let answer: ApiVersionsResponse = call(
            &mut c,
            ApiKey::ApiVersions,
            version,
            &ApiVersionsRequest::default(),
        )
        .await;
        assert_eq!(answer.error_code, 0);
        let keys: Vec<_> = answer
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(
            keys,
            [
                (0, 3, 9),
                (1, 4, 12),
                (2, 1, 7),
                (3, 0, 12),
                (18, 0, 3),
                (8, 2, 9),
                (9, 1, 9),
                (10, 0, 4),
                (11, 0, 7),
                (12, 0, 4),
                (13, 0, 4),
                (14, 0, 5),
                (15, 0, 5),
                (16, 0, 5),
                (47, 0, 0),
                (42, 0, 2),
                (68, 0, 1),
                (69, 0, 1),
                (19, 2, 7),
                (20, 1, 6),
                (37, 0, 3),
                (21, 0, 2),
                (32, 1, 4),
                (33, 0, 2),
                (44, 0, 1),
                (60, 0, 1),
                (22, 0, 4),
                (24, 0, 3),
                (25, 0, 3),
                (26, 0, 3),
                (28, 0, 3),
                (65, 0, 0),
                (66, 0, 1),
                (61, 0, 0),
                (29, 1, 3),
                (30, 1, 3),
                (31, 1, 3),
                (50, 0, 0),
                (51, 0, 0),
                (17, 0, 1),
                (36, 0, 2)
            ]
        );
    }
    // KIP-511: a version it does not know gets UNSUPPORTED_VERSION and its
    // range, in a v0 body.
    let mut frame = request_frame(ApiKey::ApiVersions, 3, 7, &ApiVersionsRequest::default());
    frame[2..4].copy_from_slice(&99i16.to_be_bytes());
    send_frame(&mut c, &frame).await;
    let mut answer = read_frame(&mut c).await.unwrap();
    assert_eq!(answer.get_i32(), 7);
    let body = ApiVersionsResponse::decode(&mut answer, 0).unwrap();
    assert_eq!(body.error_code, 35);
    assert_eq!(body.api_keys.len(), 41);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_auto_creates_and_lists_one_leader_for_every_partition() {
    let s = server().await;
    let mut c = connect(&s).await;
    for (version, topic) in [(0, "meta-v0"), (12, "meta-v12")] {
        let answer = metadata(&mut c, version, &[topic]).await;
        assert_eq!(answer.brokers.len(), 1);
        assert_eq!(answer.brokers[0].port, i32::from(s.addr.port()));
        assert_eq!(answer.brokers[0].host.as_str(), "127.0.0.1");
        let t = &answer.topics[0];
        assert_eq!((t.error_code, t.partitions.len()), (0, 2), "v{version}");
        assert!(t
            .partitions
            .iter()
            .all(|p| p.leader_id.0 == 0 && p.isr_nodes.len() == 1));
        assert!(s.broker.registry().get(topic).is_some());
    }
    // A bad name is refused, and nothing is created for it.
    let answer = metadata(&mut c, 12, &["bad/name"]).await;
    assert_eq!(answer.topics[0].error_code, 17);
    // All topics (null list) lists both, and the internal offsets topic as internal.
    let request = MetadataRequest::default().with_topics(None);
    let all: MetadataResponse = call(&mut c, ApiKey::Metadata, 12, &request).await;
    let names: Vec<_> = all
        .topics
        .iter()
        .filter_map(|t| t.name.clone())
        .map(|n| n.0.to_string())
        .collect();
    assert!(names.contains(&"meta-v0".to_string()) && names.contains(&"meta-v12".to_string()));
    assert!(all
        .topics
        .iter()
        .all(|t| t.is_internal == t.name.as_ref().unwrap().0.starts_with("__")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_fetch_round_trip_at_the_lowest_and_highest_versions() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["rt"]).await;
    let records = [
        record(Some(b"k1"), Some(b"v1"), 1_700_000_000_000),
        record(None, Some(b""), 1_600_000_000_000),
        record(Some(b"k3"), None, 1_800_000_000_000),
    ];
    let mut next = 0;
    for (produce_v, fetch_v) in [(3, 4), (9, 12)] {
        let answer: ProduceResponse = call(
            &mut c,
            ApiKey::Produce,
            produce_v,
            &produce_request("rt", 1, -1, batch(&records)),
        )
        .await;
        let p = &answer.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (0, next),
            "produce v{produce_v}"
        );
        let got = fetch_n(&mut c, fetch_v, "rt", 1, next, 3).await;
        assert_eq!(got.len(), 3, "fetch v{fetch_v}");
        for (got, sent) in got.iter().zip(&records) {
            assert_eq!(got.key.as_deref(), sent.key);
            assert_eq!(got.value.as_deref(), sent.value);
            let sent_headers: Vec<(String, Option<Bytes>)> = sent
                .headers
                .iter()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect();
            assert_eq!(
                got.headers, sent_headers,
                "duplicate header names kept in order, the null one null"
            );
            assert_eq!(got.headers[1], ("h".to_string(), None));
            assert_eq!(got.timestamp_ms, Some(sent.timestamp_ms));
        }
        next += 3;
    }
    // The offsets each record came back with are its own, and the
    // watermarks are filled.
    let answer: FetchResponse =
        call(&mut c, ApiKey::Fetch, 12, &fetch_request("rt", 1, 4, 0)).await;
    let part = &answer.responses[0].partitions[0];
    assert_eq!(
        (
            part.error_code,
            part.high_watermark,
            part.last_stable_offset,
            part.log_start_offset
        ),
        (0, 6, 6, 0)
    );
    let data = part.records.clone().unwrap();
    assert_eq!(
        i64::from_be_bytes(data[..8].try_into().unwrap()),
        4,
        "base offset"
    );
    assert_eq!(records_of(&answer).len(), 2);
}

/// Under `flush: sync` a record is fetchable only once flushed, and an
/// acks-0 record has no waiter asking for its flush: the dispatcher asks
/// itself, so a consumer gets it without waiting for the periodic flush
/// (an hour here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_sync_flush_an_acks_zero_record_is_fetchable_once_flushed() {
    let s = server_opened(KafkaConfig::default(), None, FlushMode::Sync).await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["acks0"]).await;
    let one = [record(Some(b"a"), Some(b"1"), 1)];
    send_frame(
        &mut c,
        &request_frame(
            ApiKey::Produce,
            9,
            1,
            &produce_request("acks0", 0, 0, batch(&one)),
        ),
    )
    .await;
    let got = fetch_n(&mut c, 12, "acks0", 0, 0, 1).await;
    assert_eq!(got.len(), 1);
    let stats = s.broker.store().stats();
    assert_eq!(
        stats.commitlog_flushed_offset, stats.commitlog_max_offset,
        "served before its flush"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_is_not_answered_and_answers_keep_request_order() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["acks"]).await;
    let one = [record(Some(b"a"), Some(b"1"), 1)];
    // Pipelined: an acks-0 produce, then an acks-1 produce, then a fetch,
    // all written before any answer is read.
    send_frame(
        &mut c,
        &request_frame(
            ApiKey::Produce,
            9,
            1,
            &produce_request("acks", 0, 0, batch(&one)),
        ),
    )
    .await;
    send_frame(
        &mut c,
        &request_frame(
            ApiKey::Produce,
            9,
            2,
            &produce_request("acks", 0, 1, batch(&one)),
        ),
    )
    .await;
    send_frame(
        &mut c,
        &request_frame(ApiKey::Fetch, 12, 3, &fetch_request("acks", 0, 0, 0)),
    )
    .await;
    let mut first = read_frame(&mut c).await.unwrap();
    let header = ResponseHeader::decode(&mut first, 1).unwrap();
    assert_eq!(header.correlation_id, 2, "acks 0 got no answer");
    let produced = ProduceResponse::decode(&mut first, 9).unwrap();
    assert_eq!(produced.responses[0].partition_responses[0].base_offset, 1);
    let mut second = read_frame(&mut c).await.unwrap();
    assert_eq!(
        ResponseHeader::decode(&mut second, 1)
            .unwrap()
            .correlation_id,
        3
    );
    FetchResponse::decode(&mut second, 12).unwrap();
    assert_eq!(
        fetch_n(&mut c, 12, "acks", 0, 0, 2).await.len(),
        2,
        "the acks-0 record was written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_at_the_end_waits_and_is_woken_by_a_produce() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["poll"]).await;
    let mut waiting = connect(&s).await;
    // 30 s: far longer than the test needs; the produce must wake it.
    let fetch = tokio::spawn(async move {
        call::<_, FetchResponse>(
            &mut waiting,
            ApiKey::Fetch,
            12,
            &fetch_request("poll", 0, 0, 30_000),
        )
        .await
    });
    // Give the fetch a moment to start waiting (if the produce comes first
    // the fetch answers at once: the test passes either way, no timing is
    // asserted).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let one = [record(Some(b"a"), Some(b"woken"), 5)];
    let _: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("poll", 0, 1, batch(&one)),
    )
    .await;
    let answer = tokio::time::timeout(Duration::from_secs(25), fetch)
        .await
        .expect("woken by the produce, before its 30 s wait")
        .unwrap();
    assert_eq!(records_of(&answer)[0].value.as_deref(), Some(&b"woken"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_and_out_of_range_fetches() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["lo"]).await;
    // Timestamps out of order: 20, then 10.
    let two = [
        record(Some(b"a"), Some(b"1"), 20),
        record(Some(b"b"), Some(b"2"), 10),
    ];
    let _: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("lo", 0, 1, batch(&two)),
    )
    .await;
    fetch_n(&mut c, 12, "lo", 0, 0, 2).await;
    for version in [1, 6, 7] {
        let request = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name("lo"))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-2),
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                    ListOffsetsPartition::default()
                        .with_partition_index(9)
                        .with_timestamp(-1),
                    // By timestamp: the first record at or after it, with
                    // its timestamp; none after the largest: -1, -1.
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(5),
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(20),
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(21),
                    // -3 (largest timestamp, v7): the record at 20;
                    // INVALID_REQUEST before v7.
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-3),
                ])]);
        let largest = if version >= 7 {
            (0, 0, 20)
        } else {
            (42, -1, -1)
        };
        let answer: ListOffsetsResponse =
            call(&mut c, ApiKey::ListOffsets, version, &request).await;
        let got: Vec<_> = answer.topics[0]
            .partitions
            .iter()
            .map(|p| (p.error_code, p.offset, p.timestamp))
            .collect();
        assert_eq!(
            got,
            [
                (0, 0, -1),
                (0, 2, -1),
                (3, -1, -1),
                (0, 0, 20),
                (0, 0, 20),
                (0, -1, -1),
                largest
            ],
            "v{version}"
        );
    }
    let answer: FetchResponse =
        call(&mut c, ApiKey::Fetch, 12, &fetch_request("lo", 0, 3, 0)).await;
    assert_eq!(
        answer.responses[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
    let answer: FetchResponse =
        call(&mut c, ApiKey::Fetch, 4, &fetch_request("nope", 0, 0, 0)).await;
    assert_eq!(answer.responses[0].partitions[0].error_code, 3);
}

/// A fetch's first record comes back even past its byte limits (Kafka's
/// rule: a consumer always makes progress), whether the limit is smaller
/// than the record or zero; a second partition of the same fetch gets
/// nothing once the first took the budget. With max_bytes 0 the first
/// read was skipped (no budget left) and the consumer never moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_returns_its_first_record_past_max_bytes() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["big"]).await;
    let value = vec![b'v'; 2000];
    for p in [0, 1] {
        let one = [record(Some(b"k"), Some(&value), 1)];
        let _: ProduceResponse = call(
            &mut c,
            ApiKey::Produce,
            9,
            &produce_request("big", p, 1, batch(&one)),
        )
        .await;
        fetch_n(&mut c, 12, "big", p, 0, 1).await;
    }
    // (3000, ..): after the first record (about 2 KB) 1 KB is left, less
    // than the second partition's record: it must not come too (Kafka
    // lets only the first partition with records exceed max_bytes).
    for (max_bytes, partition_max_bytes) in [(0, 1 << 20), (10, 10), (1 << 20, 0), (3000, 1 << 20)]
    {
        let mut request = fetch_request("big", 0, 0, 0).with_max_bytes(max_bytes);
        let both = FetchPartition::default()
            .with_partition(1)
            .with_fetch_offset(0)
            .with_partition_max_bytes(partition_max_bytes);
        let partitions = &mut request.topics[0].partitions;
        partitions[0].partition_max_bytes = partition_max_bytes;
        partitions.push(both);
        let answer: FetchResponse = call(&mut c, ApiKey::Fetch, 12, &request).await;
        let got = records_of(&answer);
        assert_eq!(
            got.len(),
            1,
            "max_bytes {max_bytes}, partition {partition_max_bytes}"
        );
        assert_eq!(got[0].value.as_deref(), Some(&value[..]));
        let second = answer.responses[0].partitions[1]
            .records
            .clone()
            .unwrap_or_default();
        if max_bytes < 4000 {
            assert!(
                second.is_empty(),
                "max_bytes {max_bytes}: the budget went to the first partition"
            );
        }
    }
}

/// ListOffsets -3 (v7, KIP-734): the first record with the largest
/// timestamp, with it, among timestamps out of order and tied; an empty
/// partition answers -1, -1 as Kafka does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_max_timestamp_is_the_first_record_with_the_largest() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["maxts"]).await;
    let five = [
        record(Some(b"a"), Some(b"1"), 5),
        record(Some(b"b"), Some(b"2"), 30),
        record(Some(b"c"), Some(b"3"), 10),
        record(Some(b"d"), Some(b"4"), 30),
        record(Some(b"e"), Some(b"5"), 20),
    ];
    let _: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("maxts", 0, 1, batch(&five)),
    )
    .await;
    let request = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("maxts"))
            .with_partitions(vec![
                ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-3),
                ListOffsetsPartition::default()
                    .with_partition_index(1)
                    .with_timestamp(-3),
            ])]);
    let answer: ListOffsetsResponse = call(&mut c, ApiKey::ListOffsets, 7, &request).await;
    let got: Vec<_> = answer.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.offset, p.timestamp))
        .collect();
    assert_eq!(got, [(0, 1, 30), (0, -1, -1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_batch_fails_its_partition_and_writes_nothing() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["bad"]).await;
    let good = batch(&[record(Some(b"a"), Some(b"1"), 1)]);
    let mut corrupt = good.to_vec();
    *corrupt.last_mut().unwrap() ^= 0xff;
    // Two batches in one partition: the good one is not written either.
    let both = Bytes::from([good.to_vec(), corrupt].concat());
    let answer: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("bad", 0, 1, both.clone()),
    )
    .await;
    assert_eq!(
        answer.responses[0].partition_responses[0].error_code, 2,
        "CORRUPT_MESSAGE"
    );
    assert_eq!(s.broker.partition("bad", 0).unwrap().offsets(), (0, 0));
    // Unknown topic and partition.
    let answer: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("bad", 7, 1, good.clone()),
    )
    .await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 3);
    let answer: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("absent", 0, 1, good),
    )
    .await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 3);
    // The topic and partition are checked before the records are
    // decoded, as Kafka does: a corrupt batch to an unknown topic or
    // partition is UNKNOWN_TOPIC_OR_PARTITION, not CORRUPT_MESSAGE.
    for (topic, partition) in [("absent", 0), ("bad", 7)] {
        let answer: ProduceResponse = call(
            &mut c,
            ApiKey::Produce,
            9,
            &produce_request(topic, partition, 1, both.clone()),
        )
        .await;
        assert_eq!(
            answer.responses[0].partition_responses[0].error_code, 3,
            "{topic}/{partition}"
        );
    }
}

/// After each bad frame its connection is closed and a new one is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_close_their_connection_and_the_server_keeps_serving() {
    let s = server().await;
    let api_versions = request_frame(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default());
    let metadata_v12 = request_frame(
        ApiKey::Metadata,
        12,
        1,
        &MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("x")))
        ])),
    );
    let mut unknown_key = api_versions.clone();
    unknown_key[..2].copy_from_slice(&999i16.to_be_bytes());
    let mut unserved_key = api_versions.clone();
    unserved_key[..2].copy_from_slice(&(ApiKey::JoinGroup as i16).to_be_bytes());
    let mut wrong_version = metadata_v12.clone();
    wrong_version[2..4].copy_from_slice(&13i16.to_be_bytes());
    let truncated = metadata_v12[..metadata_v12.len() - 3].to_vec();
    // The topics array's count (after the header: 8 bytes, client id
    // "test" as int16 + 4, tagged fields 1) claims 2^31 topics.
    let mut lying_count = metadata_v12.to_vec();
    let at = 8 + 2 + 4 + 1;
    lying_count.splice(at..at + 1, [0xff, 0xff, 0xff, 0xff, 0x07]);
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("unknown key", unknown_key.to_vec()),
        ("unserved key", unserved_key.to_vec()),
        ("wrong version", wrong_version.to_vec()),
        ("truncated", truncated),
        ("lying array count", lying_count),
        ("too short for a header", vec![0, 18]),
    ];
    for (what, frame) in bad {
        let mut c = connect(&s).await;
        send_frame(&mut c, &frame).await;
        assert!(closed(&mut c).await, "{what}: closed");
        let mut other = connect(&s).await;
        let answer: ApiVersionsResponse = call(
            &mut other,
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default(),
        )
        .await;
        assert_eq!(answer.error_code, 0, "served after {what}");
    }
    // A length over max_request_bytes (and a negative one) closes the
    // connection before anything that large is read or allocated.
    for length in [MAX_REQUEST_BYTES as i32 + 1, -1] {
        let mut c = connect(&s).await;
        c.write_all(&length.to_be_bytes()).await.unwrap();
        assert!(closed(&mut c).await, "length {length}");
    }
    let mut other = connect(&s).await;
    let _: ApiVersionsResponse = call(
        &mut other,
        ApiKey::ApiVersions,
        0,
        &ApiVersionsRequest::default(),
    )
    .await;
    // A stalled client mid-frame does not hold up another connection.
    let mut stalled = connect(&s).await;
    let mut half = BytesMut::new();
    half.put_i32(100);
    half.put_slice(&[0; 10]);
    stalled.write_all(&half).await.unwrap();
    let _: ApiVersionsResponse = call(
        &mut other,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_max_connections_are_closed_at_once() {
    let s = server_with(1).await;
    let mut first = connect(&s).await;
    let _: ApiVersionsResponse = call(
        &mut first,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
    let mut second = connect(&s).await;
    send_frame(
        &mut second,
        &request_frame(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default()),
    )
    .await;
    assert!(
        closed(&mut second).await,
        "the second connection is over the limit"
    );
    // The first is still served, and its slot is freed when it closes.
    let _: ApiVersionsResponse = call(
        &mut first,
        ApiKey::ApiVersions,
        0,
        &ApiVersionsRequest::default(),
    )
    .await;
    drop(first);
    let mut served = false;
    for _ in 0..100 {
        let mut again = connect(&s).await;
        send_frame(
            &mut again,
            &request_frame(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default()),
        )
        .await;
        if !closed(&mut again).await {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served, "a freed slot is taken again");
}

/// While recovery runs (no broker yet) the listener answers: ApiVersions
/// as always, partitions LEADER_NOT_AVAILABLE (retriable), KAFKA.md "Not
/// ready"; Metadata already names the cluster (a client that sees no id,
/// then one, may take it for another cluster).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_the_broker_is_ready_partitions_answer_leader_not_available() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_stop, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        let ready: tidelog_kafka::Ready = Arc::new(|| None);
        let config = KafkaConfig {
            cluster_id: Some("c-1".into()),
            ..KafkaConfig::default()
        };
        tidelog_kafka::serve(listener, &config, ready, stop_rx).await;
    });
    let mut c = TcpStream::connect(addr).await.unwrap();
    let answer: ApiVersionsResponse = call(
        &mut c,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
    assert_eq!(answer.error_code, 0);
    let answer = metadata(&mut c, 12, &["t"]).await;
    assert_eq!(answer.topics[0].error_code, 5);
    assert_eq!(answer.cluster_id.as_deref(), Some("c-1"));
    let one = [record(Some(b"a"), Some(b"1"), 1)];
    let answer: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("t", 0, 1, batch(&one)),
    )
    .await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 5);
    let answer: FetchResponse = call(&mut c, ApiKey::Fetch, 12, &fetch_request("t", 0, 0, 0)).await;
    assert_eq!(answer.responses[0].partitions[0].error_code, 5);
    let lookup = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("t"))
            .with_partitions(vec![
                ListOffsetsPartition::default().with_timestamp(-1)
            ])]);
    let answer: ListOffsetsResponse = call(&mut c, ApiKey::ListOffsets, 7, &lookup).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, 5);
}

/// A record acknowledged by Produce is found by the ListOffsets sent right
/// after it (Kafka's high watermark moves with the append): the end and a
/// lookup by its timestamp see it even before the dispatcher has indexed
/// it. Pipelined on one connection, so the lookup arrives microseconds
/// after the append; confluent-kafka's `offsets_for_times` right after its
/// produce answered -1 (none) on a loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_right_after_a_produce_sees_the_acknowledged_record() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["fresh"]).await;
    for i in 0..40i64 {
        let ts = 1_000 + i;
        let one = [record(Some(b"k"), Some(b"v"), ts)];
        send_frame(
            &mut c,
            &request_frame(
                ApiKey::Produce,
                9,
                1,
                &produce_request("fresh", 0, 1, batch(&one)),
            ),
        )
        .await;
        let lookup = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name("fresh"))
                .with_partitions(vec![
                    ListOffsetsPartition::default().with_timestamp(-1),
                    ListOffsetsPartition::default().with_timestamp(ts),
                ])]);
        send_frame(&mut c, &request_frame(ApiKey::ListOffsets, 7, 2, &lookup)).await;
        let mut produced = read_frame(&mut c).await.expect("a produce answer");
        ResponseHeader::decode(&mut produced, 1).unwrap();
        let produced = ProduceResponse::decode(&mut produced, 9).unwrap();
        assert_eq!(produced.responses[0].partition_responses[0].base_offset, i);
        let mut found = read_frame(&mut c).await.expect("a ListOffsets answer");
        ResponseHeader::decode(&mut found, 1).unwrap();
        let found = ListOffsetsResponse::decode(&mut found, 7).unwrap();
        let partitions = &found.topics[0].partitions;
        assert_eq!(partitions[0].offset, i + 1, "the end after produce {i}");
        assert_eq!(
            (partitions[1].offset, partitions[1].timestamp),
            (i, ts),
            "the lookup of timestamp {ts} right after its produce"
        );
    }
}

/// Compaction leaves gaps above a compact partition's log start and never
/// moves it, as Kafka's cleaner: a fetch from an offset it removed reads on
/// from the next record kept (it was OFFSET_OUT_OF_RANGE, and librdkafka,
/// resetting to its default "latest", then read nothing), and ListOffsets
/// -2 answers the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_from_an_offset_compaction_removed_reads_on_from_the_next_record() {
    let s = server().await;
    let mut c = connect(&s).await;
    s.broker
        .create_topic(
            "table",
            1,
            [("cleanup.policy".to_string(), "compact".to_string())].into(),
        )
        .unwrap();
    let three = [
        record(Some(b"a"), Some(b"1"), 1_000),
        record(Some(b"a"), Some(b"2"), 1_001),
        record(Some(b"b"), Some(b"3"), 1_002),
    ];
    let answer: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("table", 0, 1, batch(&three)),
    )
    .await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    fetch_n(&mut c, 12, "table", 0, 0, 3).await;
    let ticket = s
        .broker
        .door(&tidelog_broker::Principal::Anonymous)
        .compact("table", true)
        .await
        .unwrap();
    let waited = ticket.wait(Duration::from_secs(30)).await.unwrap();
    assert!(waited.iter().all(|p| p.completed), "{waited:?}");
    let part = s.broker.partition("table", 0).unwrap();
    assert_eq!(part.offsets(), (1, 3), "the cleaner removed offset 0");

    for version in [4, 12] {
        let answer: FetchResponse = call(
            &mut c,
            ApiKey::Fetch,
            version,
            &fetch_request("table", 0, 0, 0),
        )
        .await;
        let p = &answer.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "v{version}: a fetch from the removed 0");
        if version >= 5 {
            assert_eq!(p.log_start_offset, 0, "the field is in v5 on");
        }
        assert_eq!(p.high_watermark, 3);
        let data = p.records.clone().unwrap_or_default();
        let base = i64::from_be_bytes(data[..8].try_into().unwrap());
        assert_eq!(base, 1, "the batch starts at the first record kept");
        let values: Vec<_> = records_of(&answer)
            .into_iter()
            .map(|r| r.value.unwrap())
            .collect();
        assert_eq!(values, [&b"2"[..], &b"3"[..]]);
    }
    let request = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("table"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-2)])]);
    let answer: ListOffsetsResponse = call(&mut c, ApiKey::ListOffsets, 7, &request).await;
    assert_eq!(answer.topics[0].partitions[0].offset, 0, "the log start");
}

/// A fetch short of `min_bytes` wakes on a record added to a partition
/// that already answered some (it listened only on partitions that
/// answered none, so with every partition answering something it slept to
/// its deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_short_of_min_bytes_wakes_on_a_partition_that_answered_records() {
    let s = server().await;
    let mut c = connect(&s).await;
    let mut producer = connect(&s).await;
    s.broker.create_topic("mb", 2, Default::default()).unwrap();
    for p in 0..2 {
        let one = [record(Some(b"k"), Some(b"small"), 1_000)];
        let answer: ProduceResponse = call(
            &mut producer,
            ApiKey::Produce,
            9,
            &produce_request("mb", p, 1, batch(&one)),
        )
        .await;
        assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
        fetch_n(&mut c, 12, "mb", p, 0, 1).await;
    }
    let partitions = (0..2)
        .map(|p| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)
        })
        .collect();
    let request = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(30_000)
        .with_min_bytes(4_000)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("mb"))
            .with_partitions(partitions)]);
    send_frame(&mut c, &request_frame(ApiKey::Fetch, 12, 42, &request)).await;
    // Let the fetch read both partitions and wait (ordering only: if the
    // produce lands first the fetch answers at once, and passes too).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let big = vec![b'x'; 5_000];
    let one = [record(Some(b"k"), Some(&big), 1_001)];
    let answer: ProduceResponse = call(
        &mut producer,
        ApiKey::Produce,
        9,
        &produce_request("mb", 0, 1, batch(&one)),
    )
    .await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    // Well before the 30 s deadline the old code waited out.
    let mut frame = tokio::time::timeout(Duration::from_secs(20), read_frame(&mut c))
        .await
        .expect("the fetch woke on the new record, not at its deadline")
        .expect("an answer");
    let header =
        ResponseHeader::decode(&mut frame, ApiKey::Fetch.response_header_version(12)).unwrap();
    assert_eq!(header.correlation_id, 42);
    let answer = FetchResponse::decode(&mut frame, 12).unwrap();
    assert_eq!(records_of(&answer).len(), 2, "partition 0's two records");
}

/// A Fetch naming one partition several times (in one topic entry and in
/// a second entry of the same topic) with max_bytes 2^31-1 is answered
/// with the partition once, its records within `kafka.fetch_max_bytes`
/// (plus the first record, which comes back whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_partition_is_read_once_and_the_answer_capped() {
    let s = server_configured(KafkaConfig {
        fetch_max_bytes: 200 * 1024,
        ..KafkaConfig::default()
    })
    .await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["rep"]).await;
    let value = vec![9u8; 100 * 1024];
    for _ in 0..3 {
        let records: Vec<OutRecord<'_>> = (0..2)
            .map(|i| OutRecord {
                offset: i,
                timestamp_ms: 1_700_000_000_000,
                key: None,
                value: Some(&value),
                headers: Vec::new(),
            })
            .collect();
        let answer: ProduceResponse = call(
            &mut c,
            ApiKey::Produce,
            9,
            &produce_request("rep", 0, -1, batch(&records)),
        )
        .await;
        assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    }
    let partitions = |n: usize| -> Vec<FetchPartition> {
        (0..n)
            .map(|_| {
                FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(i32::MAX)
            })
            .collect()
    };
    let request = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(i32::MAX)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name("rep"))
                .with_partitions(partitions(30)),
            FetchTopic::default()
                .with_topic(name("rep"))
                .with_partitions(partitions(2)),
        ]);
    for version in [4, 12] {
        let answer: FetchResponse = call(&mut c, ApiKey::Fetch, version, &request).await;
        assert_eq!(answer.responses.len(), 1, "v{version}");
        assert_eq!(answer.responses[0].partitions.len(), 1, "v{version}");
        let records = records_of(&answer);
        let bytes = answer.responses[0].partitions[0]
            .records
            .as_ref()
            .map_or(0, Bytes::len);
        assert!(!records.is_empty());
        assert!(records.len() < 6, "v{version}: {} records", records.len());
        assert!(
            bytes <= 200 * 1024 + 101 * 1024,
            "v{version}: {bytes} bytes"
        );
    }
}

/// DeleteGroups answers each distinct group once, in the request's order:
/// a name no group can have is INVALID_GROUP_ID, one no group has
/// GROUP_ID_NOT_FOUND, at every version (v2 is flexible).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_groups_answers_each_distinct_group_once() {
    use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};
    let s = server().await;
    let mut c = connect(&s).await;
    let names = ["", "nobody", "nobody", "a b"];
    // Any non-empty group id is one (Kafka's rule): "a b" has nothing.
    let request = DeleteGroupsRequest::default().with_groups_names(
        names
            .iter()
            .map(|n| GroupId(StrBytes::from_static_str(n)))
            .collect(),
    );
    for version in 0..=2 {
        let answer: DeleteGroupsResponse =
            call(&mut c, ApiKey::DeleteGroups, version, &request).await;
        let results: Vec<(&str, i16)> = answer
            .results
            .iter()
            .map(|r| (r.group_id.0.as_str(), r.error_code))
            .collect();
        assert_eq!(
            results,
            [("", 24), ("nobody", 69), ("a b", 69)],
            "v{version}"
        );
    }
}

/// KIP-430's authorized operations, asked for, with no authorizer running:
/// every operation Kafka defines for the resource's type, as Kafka's
/// broker answers without an authorizer (librdkafka's 0081 checks them);
/// not asked for, `i32::MIN`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorized_operations_asked_for_are_every_operation_without_an_authorizer() {
    use kafka_protocol::messages::{
        DescribeClusterRequest, DescribeClusterResponse, DescribeGroupsRequest,
        DescribeGroupsResponse, GroupId,
    };
    let bits = |codes: &[i32]| codes.iter().fold(0, |b, c| b | 1 << c);
    // READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
    // CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
    // IDEMPOTENT_WRITE 12.
    let topic_ops = bits(&[3, 4, 5, 6, 7, 8, 10, 11]);
    let cluster_ops = bits(&[5, 7, 8, 9, 10, 11, 12]);
    let group_ops = bits(&[3, 6, 8]);
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["ops"]).await;
    for (include, topic, cluster) in [(true, topic_ops, cluster_ops), (false, i32::MIN, i32::MIN)] {
        let request = MetadataRequest::default()
            .with_topics(None)
            .with_include_topic_authorized_operations(include)
            .with_include_cluster_authorized_operations(include);
        let answer: MetadataResponse = call(&mut c, ApiKey::Metadata, 10, &request).await;
        assert_eq!(answer.topics[0].topic_authorized_operations, topic);
        assert_eq!(answer.cluster_authorized_operations, cluster);
        let request =
            DescribeClusterRequest::default().with_include_cluster_authorized_operations(include);
        let answer: DescribeClusterResponse =
            call(&mut c, ApiKey::DescribeCluster, 1, &request).await;
        assert_eq!(answer.cluster_authorized_operations, cluster);
    }
    // A group nobody has is described as Dead, with its operations.
    let request = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_static_str("opsgroup"))])
        .with_include_authorized_operations(true);
    let answer: DescribeGroupsResponse = call(&mut c, ApiKey::DescribeGroups, 5, &request).await;
    assert_eq!(answer.groups[0].error_code, 0);
    assert_eq!(answer.groups[0].authorized_operations, group_ops);
}

/// CreatePartitions grows a topic as Kafka's does, each topic answered on
/// its own: a topic named twice is INVALID_REQUEST both times and is not
/// grown; unknown is UNKNOWN_TOPIC_OR_PARTITION; a count not above the
/// topic's INVALID_PARTITIONS; an assignment of another broker or of the
/// wrong length INVALID_REPLICA_ASSIGNMENT; validate-only changes nothing.
/// The new partitions take records at once, from offset 0, at every
/// version (v2 on is flexible).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_grows_a_topic_by_kafkas_rules() {
    use kafka_protocol::messages::create_partitions_request::{
        CreatePartitionsAssignment, CreatePartitionsTopic,
    };
    use kafka_protocol::messages::{BrokerId, CreatePartitionsRequest, CreatePartitionsResponse};
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["grow", "twice"]).await;
    let before = partition_count(&mut c, "grow").await;
    let topic = |n: &str, count: i32, assignment: Option<Vec<i32>>| {
        CreatePartitionsTopic::default()
            .with_name(name(n))
            .with_count(count)
            .with_assignments(assignment.map(|brokers| {
                brokers
                    .into_iter()
                    .map(|b| {
                        CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(b)])
                    })
                    .collect()
            }))
    };
    let codes = |answer: &CreatePartitionsResponse| -> Vec<(String, i16)> {
        answer
            .results
            .iter()
            .map(|r| (r.name.0.to_string(), r.error_code))
            .collect()
    };
    let refused = CreatePartitionsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![
            topic("twice", 9, None),
            topic("nope", 9, None),
            topic("grow", before as i32, None),
            topic("grow", 1, None),
            topic("twice", 9, None),
        ]);
    let answer: CreatePartitionsResponse =
        call(&mut c, ApiKey::CreatePartitions, 3, &refused).await;
    assert_eq!(
        codes(&answer),
        [
            ("twice".into(), 42),
            ("nope".into(), 3),
            ("grow".into(), 42),
            ("grow".into(), 42),
            ("twice".into(), 42),
        ]
    );
    let one = |t: CreatePartitionsTopic, validate_only: bool| {
        CreatePartitionsRequest::default()
            .with_timeout_ms(5000)
            .with_validate_only(validate_only)
            .with_topics(vec![t])
    };
    for (request, code) in [
        (one(topic("twice", before as i32, None), false), 37),
        (
            one(topic("grow", before as i32 + 1, Some(vec![1])), false),
            39,
        ),
        (
            one(topic("grow", before as i32 + 2, Some(vec![0])), false),
            39,
        ),
        (
            one(topic("grow", before as i32 + 1, Some(vec![0])), true),
            0,
        ),
    ] {
        let answer: CreatePartitionsResponse =
            call(&mut c, ApiKey::CreatePartitions, 1, &request).await;
        assert_eq!(answer.results[0].error_code, code, "{request:?}");
        assert!(code == 0 || answer.results[0].error_message.is_some());
    }
    assert_eq!(
        partition_count(&mut c, "grow").await,
        before,
        "nothing changed"
    );
    assert_eq!(
        partition_count(&mut c, "twice").await,
        before,
        "nothing changed"
    );

    for (version, count) in [(0, before + 1), (2, before + 2), (3, before + 4)] {
        let answer: CreatePartitionsResponse = call(
            &mut c,
            ApiKey::CreatePartitions,
            version,
            &one(topic("grow", count as i32, None), false),
        )
        .await;
        assert_eq!(codes(&answer), [("grow".into(), 0)], "v{version}");
        assert_eq!(partition_count(&mut c, "grow").await, count);
    }
    let last = (before + 3) as i32;
    let answer: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("grow", last, 1, batch(&[record(None, Some(b"v"), 1)])),
    )
    .await;
    let p = &answer.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0));
    let got = fetch_n(&mut c, 12, "grow", last, 0, 1).await;
    assert_eq!(got[0].value.as_deref(), Some(&b"v"[..]));
}

/// How many partitions Metadata lists for `topic`.
async fn partition_count(c: &mut TcpStream, topic: &str) -> u32 {
    metadata(c, 12, &[topic]).await.topics[0].partitions.len() as u32
}
