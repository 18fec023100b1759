//! `tidelog bench --protocol kafka`: produce and fetch over the Kafka
//! protocol, against tidelog's Kafka listener and the bare Kafka listener
//! (`kafka_ceiling`) in alternating slices, with tidelog's own HTTP
//! produce of the same records as a third target of the produce phase
//! (the "≥ 2× tidelog's HTTP produce", in the same run).
//!
//! Produce: connection i sends one Produce of one batch of `--batch`
//! uncompressed records of `--record-bytes` to partition i % partitions,
//! with `--acks`, and waits for its answer. Fetch: connection i reads its
//! partition from a spread-out start, one Fetch of at most
//! [`fetch_max_bytes`] at a time (`max_wait_ms` 0), wrapping around at the
//! end. The topic is created and its offsets read over HTTP, as the HTTP
//! run does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;

use crate::admin::{cluster_id, ensure_topic, partition_ranges};
use crate::body::produce_body;
use crate::client::Conn;
use crate::cpu::CpuSource;
use crate::kafka_ceiling;
use crate::kafka_client::{self, KafkaConn};
use crate::load::{alternate_all, Job, Target};
use crate::measured::PhaseResult;
use crate::render::{client_micros, ratio, ratio_goal, server_micros, table, verdict, CPU_HEADING};
use crate::results::{PhaseFigures, RunResults};
use crate::BenchArgs;

/// Goal of issue 16: Kafka produce at least this many times tidelog's
/// HTTP produce, in records/s.
const HTTP_FACTOR_GOAL: f64 = 2.0;
/// How long the started server's Kafka listener may take to accept.
const KAFKA_READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes a fetch may carry per record beyond its value. tidelog counts
/// `partition_max_bytes` against its stored records (a 100-byte keyless
/// value is 108 stored bytes), a broker against its batches (107 bytes in
/// a batch): with 8, one fetch brings back about `--batch` records, as the
/// HTTP fetch's `max_records` does. The report prints records per fetch.
const FETCH_BYTES_PER_RECORD_EXTRA: usize = 8;

/// `partition_max_bytes` of each Fetch.
pub(crate) fn fetch_max_bytes(batch: usize, record_bytes: usize) -> i32 {
    i32::try_from(batch * (record_bytes + FETCH_BYTES_PER_RECORD_EXTRA)).unwrap_or(i32::MAX)
}

/// The Kafka run: `http` is tidelog's HTTP listener (the topic's admin
/// calls and the HTTP produce), `kafka` its Kafka listener, `ceiling` the
/// bare Kafka listener.
pub(crate) async fn measure(
    args: &BenchArgs,
    topic: &str,
    http: Target,
    kafka: SocketAddr,
    ceiling: SocketAddr,
) -> anyhow::Result<RunResults> {
    wait_kafka_ready(kafka).await?;
    println!("tidelog kafka: {kafka}; ceiling: {ceiling} (bare Kafka listener in this process: frames, decodes requests and record batches, stores nothing)");
    let mut admin = Conn::connect(http.addr).await?;
    let cluster = cluster_id(&mut admin).await?;
    let partitions = ensure_topic(&mut admin, &cluster, topic, args.partitions).await?;
    println!(
        "topic: {topic} ({partitions} partitions), acks {}",
        args.acks
    );

    let kafka_produce = produce_job(args, topic, partitions)?;
    let http_produce = Arc::new(Job::Produce {
        topic: topic.to_string(),
        partitions,
        body: Bytes::from(produce_body(args.batch, args.record_bytes)?),
    });
    let tidelog = Target::plain(kafka, http.cpu);
    let bare = Target::plain(ceiling, CpuSource::Threads(kafka_ceiling::THREAD_NAME));
    let produce = alternate_all(
        "produce",
        &[
            ("tidelog", &tidelog, &kafka_produce),
            ("ceiling", &bare, &kafka_produce),
            ("tidelog-http", &http, &http_produce),
        ],
        args,
    )
    .await?;

    let fetch = fetch_job(
        args,
        topic,
        partition_ranges(http.addr, None, topic, partitions).await?,
    );
    let fetched = alternate_all(
        "fetch",
        &[("tidelog", &tidelog, &fetch), ("ceiling", &bare, &fetch)],
        args,
    )
    .await?;
    report(args, &produce, &fetched);
    let mut results = RunResults::for_args("kafka", args);
    let targets = ["tidelog", "ceiling", "tidelog-http"];
    results.phases = (produce.iter().zip(targets))
        .map(|(r, target)| PhaseFigures::of("produce", target, r))
        .chain(
            (fetched.iter().zip(targets)).map(|(r, target)| PhaseFigures::of("fetch", target, r)),
        )
        .collect();
    Ok(results)
}

/// Produce of one `--batch` batch per request, connection i to partition
/// i % `partitions` (module doc), with `--acks`.
pub(crate) fn produce_job(
    args: &BenchArgs,
    topic: &str,
    partitions: u32,
) -> anyhow::Result<Arc<Job>> {
    let batch = kafka_client::produce_batch(args.batch, args.record_bytes);
    let frames = (0..partitions)
        .map(|p| kafka_client::produce_frame(topic, p as i32, args.acks, batch.clone()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Arc::new(Job::KafkaProduce {
        frames,
        records: args.batch as u64,
    }))
}

/// Fetches of at most [`fetch_max_bytes`] over the partitions' `ranges`.
pub(crate) fn fetch_job(args: &BenchArgs, topic: &str, ranges: Vec<(u64, u64)>) -> Arc<Job> {
    Arc::new(Job::KafkaFetch {
        topic: kafka_client::topic_name(topic),
        ranges,
        max_bytes: fetch_max_bytes(args.batch, args.record_bytes),
    })
}

/// Waits (bounded) until the Kafka listener accepts a connection.
pub(crate) async fn wait_kafka_ready(addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + KAFKA_READY_TIMEOUT;
    loop {
        match KafkaConn::connect(addr).await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(e).context(format!(
                    "the Kafka listener {addr} did not accept within {KAFKA_READY_TIMEOUT:?}"
                ))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

fn report(args: &BenchArgs, produce: &[PhaseResult; 3], fetch: &[PhaseResult; 2]) {
    let [kafka, bare, http] = produce;
    let [fetch_kafka, fetch_bare] = fetch;
    println!();
    println!(
        "results (kafka protocol, acks {}, {} connections, {} records x {} B per produce, fetches of at most {} B; MB/s = record values, 10^6 B/s; latency per request):",
        args.acks,
        args.connections,
        args.batch,
        args.record_bytes,
        fetch_max_bytes(args.batch, args.record_bytes)
    );
    table(&[
        ("produce", "tidelog", kafka),
        ("produce", "ceiling", bare),
        ("produce", "tidelog-http", http),
        ("fetch", "tidelog", fetch_kafka),
        ("fetch", "ceiling", fetch_bare),
    ]);
    println!();
    ratio_goal("produce", kafka, bare);
    ratio_goal("fetch", fetch_kafka, fetch_bare);
    let factor = ratio(kafka, http);
    println!(
        "goal produce over HTTP: tidelog kafka / tidelog http = {factor:.2}x (goal >= {HTTP_FACTOR_GOAL}x): {}",
        verdict(factor >= HTTP_FACTOR_GOAL)
    );
    let per_request = |r: &PhaseResult| {
        if r.measured.requests > 0 {
            r.measured.records as f64 / r.measured.requests as f64
        } else {
            0.0
        }
    };
    println!(
        "records per fetch: tidelog {:.1}, ceiling {:.1}",
        per_request(fetch_kafka),
        per_request(fetch_bare)
    );
    println!();
    println!("{CPU_HEADING}");
    println!(
        "produce  server: tidelog {}, ceiling {}, tidelog over HTTP {}; load generator: {} against tidelog, {} against the ceiling, {} against tidelog over HTTP",
        server_micros(kafka),
        server_micros(bare),
        server_micros(http),
        client_micros(kafka),
        client_micros(bare),
        client_micros(http),
    );
    println!(
        "fetch    server: tidelog {}, ceiling {}; load generator: {} against tidelog, {} against the ceiling",
        server_micros(fetch_kafka),
        server_micros(fetch_bare),
        client_micros(fetch_kafka),
        client_micros(fetch_bare),
    );
}
