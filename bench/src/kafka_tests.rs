//! The Kafka load generator and the bare listener talk the protocol: a
//! short bounded run of each phase against tidelog's real Kafka listener
//! (a broker in a temporary dir, in process) and against the bare
//! listener, then every acknowledged record counted and read back. Counts
//! only, never timings.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader};
use kafka_protocol::protocol::Decodable;
use tidelog_broker::store::{CleanerConfig, StoreConfig};
use tidelog_broker::{Broker, BrokerConfig};
use tidelog_kafka::records::decode_batches;
use tidelog_kafka::KafkaConfig;
use tokio::sync::watch;

use crate::cpu::CpuSource;
use crate::kafka_client::{self, KafkaConn, FETCH_VERSION};
use crate::load::{alternate_all, Job, Target};
use crate::{kafka_ceiling, kafka_run, BenchArgs, Protocol};

const TOPIC: &str = "kafka-bench-test";
const PARTITIONS: u32 = 2;
const CONNECTIONS: usize = 3;
const BATCH: usize = 10;
const RECORD_BYTES: usize = 50;

fn args() -> BenchArgs {
    BenchArgs {
        protocol: Protocol::Kafka,
        acks: -1,
        kafka_addr: None,
        url: None,
        connections: CONNECTIONS,
        batch: BATCH,
        record_bytes: RECORD_BYTES,
        duration_ms: 300,
        // No warm-up: every request after the first of each connection is
        // measured, so the acknowledged records are known exactly.
        warmup_ms: 0,
        partitions: PARTITIONS,
        rounds: 1,
        visibility_samples: 1,
        topic: None,
        data_dir: None,
        server_config: None,
        json: None,
        recovery_mib: None,
        tiered_mib: None,
        suite_table: None,
        flush: None,
        policy: crate::Policy::Delete,
        keys: 1,
        compare_delete: false,
        compare_async: false,
        security: false,
        logins: 200,
        transactions: false,
        txn_batches: 100,
        cluster: false,
        failovers: 20,
    }
}

/// A broker with `TOPIC` behind tidelog's Kafka listener on a free port.
async fn tidelog(dir: &std::path::Path) -> (Arc<Broker>, SocketAddr, watch::Sender<bool>) {
    let mut store = StoreConfig::new(dir);
    store.commitlog_segment_bytes = 4 << 20;
    store.preallocate_next_segment = false;
    // How full this shared machine's disk is must not refuse writes.
    store.retention.disk = Arc::new(tidelog_broker::store::FixedDiskUsage::new(0.1));
    let broker = Arc::new(
        tokio::task::spawn_blocking(move || {
            Broker::open(&BrokerConfig::default(), store, CleanerConfig::default())
        })
        .await
        .unwrap()
        .unwrap(),
    );
    broker.get_or_create_topic(TOPIC, PARTITIONS).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stop_rx) = watch::channel(false);
    let ready_broker = Arc::clone(&broker);
    tokio::spawn(async move {
        let ready: tidelog_kafka::Ready = Arc::new(move || Some(Arc::clone(&ready_broker)));
        let config = KafkaConfig {
            listen: Some(addr),
            ..KafkaConfig::default()
        };
        tidelog_kafka::serve(listener, &config, ready, stop_rx).await;
    });
    (broker, addr, stop)
}

/// The partitions' ends once the dispatcher has indexed `expected`
/// records (a produce is answered before it indexes them), bounded.
async fn ends_reaching(broker: &Arc<Broker>, expected: u64) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ends: Vec<u64> = (0..PARTITIONS)
            .map(|p| broker.partition(TOPIC, p).unwrap().offsets().1)
            .collect();
        if ends.iter().sum::<u64>() >= expected || Instant::now() >= deadline {
            return ends;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every record of `partition` below `end`, fetched with the load's own
/// frames, counted from batch headers and decoded in full.
async fn read_back(addr: SocketAddr, partition: i32, end: u64) -> (u64, Vec<Vec<u8>>) {
    let mut conn = KafkaConn::connect(addr).await.unwrap();
    let topic = kafka_client::topic_name(TOPIC);
    let max_bytes = kafka_run::fetch_max_bytes(BATCH, RECORD_BYTES);
    let (mut counted, mut values) = (0u64, Vec::new());
    for _ in 0..10_000 {
        if values.len() as u64 >= end {
            break;
        }
        let frame =
            kafka_client::fetch_frame(&topic, partition, values.len() as u64, max_bytes).unwrap();
        let answer = conn.call(&frame).await.unwrap();
        counted += kafka_client::check_fetched(answer.clone()).unwrap();
        let mut body = answer;
        ResponseHeader::decode(
            &mut body,
            ApiKey::Fetch.response_header_version(FETCH_VERSION),
        )
        .unwrap();
        let response = FetchResponse::decode(&mut body, FETCH_VERSION).unwrap();
        let records = response.responses[0].partitions[0].records.clone().unwrap();
        let mut budget = usize::MAX;
        for r in decode_batches(&records, &mut budget).unwrap() {
            values.push(r.value.unwrap().to_vec());
        }
    }
    (counted, values)
}

#[test]
fn kafka_load_is_acknowledged_and_read_back_by_tidelog_and_the_bare_listener() {
    // The bare listener brings its own runtime, started outside any other.
    let bare = kafka_ceiling::start(BATCH, RECORD_BYTES).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        let (broker, addr, _stop) = tidelog(dir.path()).await;
        let args = args();
        let batch = kafka_client::produce_batch(BATCH, RECORD_BYTES);
        let frames = (0..PARTITIONS as i32)
            .map(|p| kafka_client::produce_frame(TOPIC, p, args.acks, batch.clone()).unwrap())
            .collect();
        let produce = Arc::new(Job::KafkaProduce {
            frames,
            records: BATCH as u64,
        });
        let tidelog = Target::plain(addr, CpuSource::Unknown);
        let ceiling = Target::plain(bare.addr, CpuSource::Unknown);
        let [at_tidelog, at_bare] = alternate_all(
            "produce",
            &[
                ("tidelog", &tidelog, &produce),
                ("ceiling", &ceiling, &produce),
            ],
            &args,
        )
        .await
        .unwrap();
        for (target, r) in [("tidelog", &at_tidelog), ("ceiling", &at_bare)] {
            assert_eq!(
                r.measured.errors, 0,
                "{target}: {:?}",
                r.measured.first_error
            );
            assert!(r.measured.requests > 0, "{target}: no produce answered");
            assert_eq!(r.measured.records, r.measured.requests * BATCH as u64);
        }
        // Everything acknowledged is there: the measured requests and each
        // connection's unmeasured first one.
        let acknowledged = at_tidelog.measured.records + (CONNECTIONS * BATCH) as u64;
        let ends = ends_reaching(&broker, acknowledged).await;
        assert_eq!(ends.iter().sum::<u64>(), acknowledged);

        let expected_values: Vec<Vec<u8>> = (0..BATCH as u64)
            .map(|i| crate::body::record_value(RECORD_BYTES, i))
            .collect();
        for (p, end) in ends.iter().enumerate() {
            let (counted, values) = read_back(addr, p as i32, *end).await;
            assert_eq!(counted, *end, "partition {p}: counted from batch headers");
            assert_eq!(values.len() as u64, *end, "partition {p}: decoded");
            for (i, value) in values.iter().enumerate() {
                assert_eq!(
                    value,
                    &expected_values[i % BATCH],
                    "partition {p} record {i}"
                );
            }
        }

        let fetch = Arc::new(Job::KafkaFetch {
            topic: kafka_client::topic_name(TOPIC),
            ranges: ends.iter().map(|end| (0, *end)).collect(),
            max_bytes: kafka_run::fetch_max_bytes(BATCH, RECORD_BYTES),
        });
        let [from_tidelog, from_bare] = alternate_all(
            "fetch",
            &[("tidelog", &tidelog, &fetch), ("ceiling", &ceiling, &fetch)],
            &args,
        )
        .await
        .unwrap();
        for (target, r) in [("tidelog", &from_tidelog), ("ceiling", &from_bare)] {
            assert_eq!(
                r.measured.errors, 0,
                "{target}: {:?}",
                r.measured.first_error
            );
            assert!(r.measured.records > 0, "{target}: nothing fetched");
        }
        // The bare listener answers every fetch with one whole batch.
        assert_eq!(
            from_bare.measured.records,
            from_bare.measured.requests * BATCH as u64
        );
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(bare);
}
