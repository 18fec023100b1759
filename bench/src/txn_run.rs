//! `tidelog bench --protocol kafka --transactions`: what transactions
//! cost, against one started server in one run (issue 38's goals:
//! transactional produce, one transaction per 100 batches of 100 × 100 B
//! over 8 partitions, at least 60 % of idempotent produce's records/s;
//! read_committed fetch at least 90 % of read_uncommitted's; the LSO lag
//! reported):
//!
//! 1. Produce, in alternating slices: `idempotent` producers (a producer
//!    id from InitProducerId, no transactional id) to `{topic}-idempotent`
//!    and `transactional` ones (each connection its own transactional id)
//!    to `{topic}-txn`, acks -1, each connection's batches going to every
//!    partition in turn (`kafka_producer.rs`). A transaction is
//!    AddPartitionsToTxn, `--txn-batches` batches, EndTxn commit, and its
//!    records count when the commit is answered.
//! 2. Fetch, in alternating slices: `read-committed` (isolation_level 1)
//!    and `read-uncommitted` (0) fetches of `{topic}-txn`, what the
//!    transactions wrote, markers and all, one partition a connection and
//!    about `--batch` records a fetch, as the `--protocol kafka` run's.
//! 3. LSO lag, on `{topic}-lso` (one partition), sample by sample: a
//!    transaction of one record is produced; a read_committed Fetch
//!    (`max_wait_ms` [`WAIT_MS`], `min_bytes` 1) sent from the record's
//!    offset waits there, the record being above the last stable offset;
//!    [`PARK`] later the producer's EndTxn commit; the sample is from
//!    EndTxn's answer to the Fetch's answer carrying the record. Each
//!    sample is followed by its plain counterpart: a read_uncommitted
//!    Fetch waiting at the end and an idempotent producer's record, from
//!    its produce ack to the Fetch's answer (the HTTP run's visibility,
//!    over Kafka), the figure the LSO lag is read beside.
//!
//! No bare listener: both sides of each ratio are the same server, the
//! same connections and records, with and without transactions.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context as _};

use crate::admin::{cluster_id, ensure_topic, partition_ranges};
use crate::client::Conn;
use crate::histogram::Histogram;
use crate::kafka_client::{self, FetchMode, Fetched, KafkaConn};
use crate::kafka_producer::{Producer, ProducerJob, ProducerSpec};
use crate::kafka_run::{self, fetch_max_bytes};
use crate::load::{alternate_all, Job, Target};
use crate::measured::{PhaseResult, Visibility};
use crate::render::{client_micros, ms, ratio, server_micros, table, verdict, CPU_HEADING};
use crate::results::{PhaseFigures, RunResults, VisibilityFigures};
use crate::BenchArgs;

/// Goal of issue 38: transactional produce at least this share of
/// idempotent produce's records/s.
pub(crate) const TXN_PRODUCE_GOAL: f64 = 0.60;
/// Goal of issue 38: read_committed fetch at least this share of
/// read_uncommitted's records/s.
pub(crate) const COMMITTED_FETCH_GOAL: f64 = 0.90;
/// The producers' acks: an idempotent producer's are all.
const ACKS: i16 = -1;
/// `max_wait_ms` of the LSO lag's waiting fetches.
const WAIT_MS: i32 = 1000;
/// How long a waiting fetch is given to park in its long-poll before the
/// commit or the produce it waits for (loopback round trips take ~0.1 ms).
const PARK: Duration = Duration::from_millis(5);

/// The whole `--transactions` run against tidelog's Kafka listener
/// `kafka`; `http` is its HTTP listener (the topics' admin calls) and
/// whose CPU the server's is.
pub(crate) async fn measure(
    args: &BenchArgs,
    topic: &str,
    http: Target,
    kafka: SocketAddr,
) -> anyhow::Result<RunResults> {
    kafka_run::wait_kafka_ready(kafka).await?;
    let mut admin = Conn::connect(http.addr).await?;
    let cluster = cluster_id(&mut admin).await?;
    let idempotent_topic = format!("{topic}-idempotent");
    let txn_topic = format!("{topic}-txn");
    let lso_topic = format!("{topic}-lso");
    let partitions = ensure_topic(&mut admin, &cluster, &txn_topic, args.partitions).await?;
    let idempotent_partitions =
        ensure_topic(&mut admin, &cluster, &idempotent_topic, args.partitions).await?;
    ensure!(
        idempotent_partitions == partitions,
        "{idempotent_topic} has {idempotent_partitions} partitions, {txn_topic} {partitions}"
    );
    ensure_topic(&mut admin, &cluster, &lso_topic, 1).await?;
    println!(
        "tidelog kafka: {kafka}; topics: {idempotent_topic} and {txn_topic} ({partitions} partitions each), {lso_topic} (1 partition); acks {ACKS}, a transaction is {} batches of {} x {} B",
        args.txn_batches, args.batch, args.record_bytes
    );

    let tidelog = Target::plain(kafka, http.cpu);
    let batch = kafka_client::produce_batch(args.batch, args.record_bytes);
    let records = u32::try_from(args.batch).context("--batch over u32")?;
    let spec = |topic: &str| ProducerSpec {
        topic: topic.to_owned(),
        partitions,
        acks: ACKS,
        batch: batch.clone(),
        records,
    };
    let idempotent = Arc::new(Job::KafkaProducer(ProducerJob {
        spec: spec(&idempotent_topic),
        txn_batches: None,
        txn_id_prefix: String::new(),
        connections: args.connections,
    }));
    let transactional = Arc::new(Job::KafkaProducer(ProducerJob {
        spec: spec(&txn_topic),
        txn_batches: Some(args.txn_batches),
        txn_id_prefix: format!("{topic}-producer"),
        connections: args.connections,
    }));
    let produced = alternate_all(
        "produce",
        &[
            ("idempotent", &tidelog, &idempotent),
            ("transactional", &tidelog, &transactional),
        ],
        args,
    )
    .await?;

    let ranges = partition_ranges(http.addr, None, &txn_topic, partitions).await?;
    all_stable(kafka, &txn_topic, &ranges).await?;
    let fetch = |isolation_level: i8| {
        Arc::new(Job::KafkaFetchTxn {
            topic: kafka_client::topic_name(&txn_topic),
            ranges: ranges.clone(),
            max_bytes: fetch_max_bytes(args.batch, args.record_bytes),
            isolation_level,
        })
    };
    let (committed, uncommitted) = (fetch(1), fetch(0));
    let fetched = alternate_all(
        "fetch",
        &[
            ("read-committed", &tidelog, &committed),
            ("read-uncommitted", &tidelog, &uncommitted),
        ],
        args,
    )
    .await?;

    let lag = lso_lag(kafka, &lso_topic, &format!("{topic}-lso-producer"), args).await?;
    report(args, &produced, &fetched, &lag);

    let mut results = RunResults::for_args("kafka-txn", args);
    results.acks = Some(ACKS);
    let produce_targets = ["idempotent", "transactional"];
    let fetch_targets = ["read-committed", "read-uncommitted"];
    results.phases = (produced.iter().zip(produce_targets))
        .map(|(r, target)| PhaseFigures::of("produce", target, r))
        .chain(
            (fetched.iter().zip(fetch_targets))
                .map(|(r, target)| PhaseFigures::of("fetch", target, r)),
        )
        .collect();
    results.visibility = Some(VisibilityFigures::of(&lag.committed));
    let extra = &mut results.extra;
    extra.insert("txn_batches".into(), f64::from(args.txn_batches));
    let commits = &produced[1].measured.commits;
    if commits.count() > 0 {
        extra.insert("end_txn_p50_ms".into(), ms(commits.quantile(0.5)));
        extra.insert("end_txn_p99_ms".into(), ms(commits.quantile(0.99)));
        extra.insert("end_txns".into(), commits.count() as f64);
    }
    let plain = VisibilityFigures::of(&lag.plain);
    extra.insert("plain_visibility_p50_ms".into(), plain.p50_ms);
    extra.insert("plain_visibility_p99_ms".into(), plain.p99_ms);
    extra.insert("plain_visibility_max_ms".into(), plain.max_ms);
    extra.insert("plain_visibility_missed".into(), plain.missed as f64);
    extra.insert(
        "lso_lag_before_commit".into(),
        lag.committed.before_ack as f64,
    );
    extra.insert(
        "lso_lag_from_send_p99_ms".into(),
        ms(lag.committed.after_send.quantile(0.99)),
    );
    Ok(results)
}

/// Checks that no transaction was left open in `topic`: each partition's
/// last stable offset is its end (`ranges`), as a fetch there answers
/// it. Else the read_committed fetches would stop short of what the
/// read_uncommitted ones read, and the ratio would say so for the wrong
/// reason.
async fn all_stable(kafka: SocketAddr, topic: &str, ranges: &[(u64, u64)]) -> anyhow::Result<()> {
    let mut conn = KafkaConn::connect(kafka).await?;
    let name = kafka_client::topic_name(topic);
    let mode = FetchMode {
        isolation_level: 1,
        max_wait_ms: 0,
    };
    for (partition, (_, end)) in ranges.iter().enumerate() {
        let index = i32::try_from(partition).context("a partition number over i32")?;
        let frame = kafka_client::fetch_frame_with(&name, index, *end, 1, mode)?;
        let fetched = kafka_client::check_fetched_batches(conn.call(&frame).await?)?;
        ensure!(
            u64::try_from(fetched.last_stable_offset).ok() == Some(*end),
            "{topic}-{partition}: last stable offset {} at the end of the produce phase, end {end}: a transaction was left open",
            fetched.last_stable_offset
        );
    }
    Ok(())
}

/// What the LSO lag phase measured.
struct Lag {
    /// EndTxn answered → the waiting read_committed fetch answered.
    committed: Visibility,
    /// Produce acknowledged → the waiting read_uncommitted fetch answered.
    plain: Visibility,
}

fn visibility() -> Visibility {
    Visibility {
        after_ack: Histogram::new(),
        after_send: Histogram::new(),
        before_ack: 0,
        missed: 0,
        first_error: None,
    }
}

/// A fetch of `partition` 0 of `topic` from `offset`, waiting in `mode`,
/// on a task of its own: its answer, when it came, and the connection.
type Waiting = tokio::task::JoinHandle<(anyhow::Result<Fetched>, Instant, KafkaConn)>;

fn wait_at(
    mut conn: KafkaConn,
    topic: &kafka_protocol::messages::TopicName,
    offset: u64,
    max_bytes: i32,
    isolation_level: i8,
) -> anyhow::Result<Waiting> {
    let mode = FetchMode {
        isolation_level,
        max_wait_ms: WAIT_MS,
    };
    let frame = kafka_client::fetch_frame_with(topic, 0, offset, max_bytes, mode)?;
    Ok(tokio::spawn(async move {
        let answer = match conn.call(&frame).await {
            Ok(answer) => kafka_client::check_fetched_batches(answer),
            Err(e) => Err(e),
        };
        (answer, Instant::now(), conn)
    }))
}

/// One sample's outcome into `vis`: `sent` and `acked` bracket the call
/// the fetch waited for, `answered` is the fetch's answer; counted only
/// when `measured`. A fetch that failed or carried no record is missed.
fn record(
    vis: &mut Visibility,
    measured: bool,
    (sent, acked): (Instant, Instant),
    (fetched, answered): (&anyhow::Result<Fetched>, Instant),
) {
    let got = match fetched {
        Ok(f) => f.records,
        Err(e) => {
            vis.first_error.get_or_insert(format!("{e:#}"));
            0
        }
    };
    if !measured {
        return;
    }
    if got == 0 {
        vis.missed += 1;
        return;
    }
    if answered < acked {
        vis.before_ack += 1;
    }
    vis.after_ack
        .record(answered.saturating_duration_since(acked));
    vis.after_send.record(answered - sent);
}

/// The LSO lag phase (module doc, 3.) on `topic`, the transactional
/// producer's id `transactional_id`.
async fn lso_lag(
    kafka: SocketAddr,
    topic: &str,
    transactional_id: &str,
    args: &BenchArgs,
) -> anyhow::Result<Lag> {
    let spec = ProducerSpec {
        topic: topic.to_owned(),
        partitions: 1,
        acks: ACKS,
        batch: kafka_client::produce_batch(1, args.record_bytes),
        records: 1,
    };
    let mut txn_conn = KafkaConn::connect(kafka).await?;
    let mut txn = Producer::start(&mut txn_conn, &spec, Some(transactional_id.to_owned())).await?;
    let mut plain_conn = KafkaConn::connect(kafka).await?;
    let mut plain = Producer::start(&mut plain_conn, &spec, None).await?;
    let mut fetcher = Some(KafkaConn::connect(kafka).await?);
    let name = kafka_client::topic_name(topic);
    let max_bytes = fetch_max_bytes(args.batch, args.record_bytes);
    let warmup = (args.visibility_samples / 10).max(1);
    let mut lag = Lag {
        committed: visibility(),
        plain: visibility(),
    };
    let label = "lso lag";
    let started = Instant::now();
    let mut next_progress = started + Duration::from_secs(1);
    for sample in 0..(warmup + args.visibility_samples) {
        let measured = sample >= warmup;
        // A transaction of one record, the fetch waiting at it.
        txn.add_partitions(&mut txn_conn, topic, &[0])
            .await?
            .map_err(|refused| anyhow!("{label}: {refused}"))?;
        let at = txn
            .produce(&mut txn_conn, 0)
            .await?
            .map_err(|refused| anyhow!("{label}: a transaction's produce: {refused}"))?;
        let at = u64::try_from(at).context("a negative base offset")?;
        let conn = fetcher
            .take()
            .ok_or_else(|| anyhow!("the {label} fetcher's connection lost"))?;
        let waiting = wait_at(conn, &name, at, max_bytes, 1)?;
        tokio::time::sleep(PARK).await;
        let sent = Instant::now();
        txn.end(&mut txn_conn, true)
            .await?
            .map_err(|refused| anyhow!("{label}: {refused}"))?;
        let acked = Instant::now();
        let (fetched, answered, conn) = waiting.await.context("a waiting fetch panicked")?;
        record(
            &mut lag.committed,
            measured,
            (sent, acked),
            (&fetched, answered),
        );
        fetcher = Some(match fetched {
            Ok(_) => conn,
            // The connection may be broken: a new one.
            Err(_) => KafkaConn::connect(kafka).await?,
        });

        // The same without a transaction: the next record lands after
        // the transaction's record and its marker.
        let end = at + 2;
        let conn = fetcher
            .take()
            .ok_or_else(|| anyhow!("the {label} fetcher's connection lost"))?;
        let waiting = wait_at(conn, &name, end, max_bytes, 0)?;
        tokio::time::sleep(PARK).await;
        let sent = Instant::now();
        let landed = plain
            .produce(&mut plain_conn, 0)
            .await?
            .map_err(|refused| anyhow!("{label}: a plain produce: {refused}"))?;
        let acked = Instant::now();
        let (mut fetched, answered, conn) = waiting.await.context("a waiting fetch panicked")?;
        if u64::try_from(landed).ok() != Some(end) {
            fetched = Err(anyhow!(
                "the plain record landed at offset {landed}, its fetch waited at {end}"
            ));
        }
        record(
            &mut lag.plain,
            measured,
            (sent, acked),
            (&fetched, answered),
        );
        fetcher = Some(match fetched {
            Ok(_) => conn,
            Err(_) => KafkaConn::connect(kafka).await?,
        });
        if Instant::now() >= next_progress {
            println!(
                "  [{label}] {:>3} s: {} samples",
                started.elapsed().as_secs(),
                lag.committed.after_ack.count()
            );
            next_progress += Duration::from_secs(1);
        }
    }
    Ok(lag)
}

/// `a`'s records/s over `b`'s, as a goal line.
fn goal_line(what: &str, a: &PhaseResult, b: &PhaseResult, goal: f64) {
    let r = ratio(a, b);
    println!(
        "goal {what} = {:.1} % (goal >= {:.0} %): {}",
        r * 100.0,
        goal * 100.0,
        verdict(r >= goal)
    );
}

/// A latency line: `label: p50, p99, max after <what>; counts`.
fn lag_line(label: &str, after: &str, vis: &Visibility) {
    println!(
        "{label}: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms after {after} (p50 {:.3} ms, p99 {:.3} ms after it was sent); {} samples, {} answered before it, {} missed",
        ms(vis.after_ack.quantile(0.5)),
        ms(vis.after_ack.quantile(0.99)),
        ms(vis.after_ack.quantile(1.0)),
        ms(vis.after_send.quantile(0.5)),
        ms(vis.after_send.quantile(0.99)),
        vis.after_ack.count(),
        vis.before_ack,
        vis.missed
    );
    if let Some(e) = &vis.first_error {
        println!("{label}: first failure: {e}");
    }
}

fn report(args: &BenchArgs, produce: &[PhaseResult; 2], fetch: &[PhaseResult; 2], lag: &Lag) {
    let [idempotent, transactional] = produce;
    let [committed, uncommitted] = fetch;
    println!();
    println!(
        "results (kafka protocol, transactions: {} connections, acks {ACKS}, batches of {} records x {} B, each connection's over all {} partitions in turn; a transaction = {} batches; records counted when acknowledged (idempotent) or when their transaction's EndTxn commit was answered (transactional); fetches of at most {} B; latency per request, a transaction's AddPartitionsToTxn and EndTxn in the requests of its first and last batch):",
        args.connections,
        args.batch,
        args.record_bytes,
        args.partitions,
        args.txn_batches,
        fetch_max_bytes(args.batch, args.record_bytes)
    );
    table(&[
        ("produce", "idempotent", idempotent),
        ("produce", "transactional", transactional),
        ("fetch", "read-committed", committed),
        ("fetch", "read-uncommitted", uncommitted),
    ]);
    println!();
    goal_line(
        "transactional produce: transactional / idempotent",
        transactional,
        idempotent,
        TXN_PRODUCE_GOAL,
    );
    goal_line(
        "read_committed fetch: read-committed / read-uncommitted",
        committed,
        uncommitted,
        COMMITTED_FETCH_GOAL,
    );
    let commits = &transactional.measured.commits;
    println!(
        "EndTxn commit of {} batches: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} measured commits",
        args.txn_batches,
        ms(commits.quantile(0.5)),
        ms(commits.quantile(0.99)),
        ms(commits.quantile(1.0)),
        commits.count()
    );
    lag_line(
        "lso lag (read_committed)",
        "EndTxn's answer",
        &lag.committed,
    );
    lag_line(
        "plain visibility (read_uncommitted)",
        "the produce ack",
        &lag.plain,
    );
    println!();
    println!("{CPU_HEADING}");
    println!(
        "produce  server: idempotent {}, transactional {}; load generator: {} idempotent, {} transactional",
        server_micros(idempotent),
        server_micros(transactional),
        client_micros(idempotent),
        client_micros(transactional),
    );
    println!(
        "fetch    server: read-committed {}, read-uncommitted {}; load generator: {} read-committed, {} read-uncommitted",
        server_micros(committed),
        server_micros(uncommitted),
        client_micros(committed),
        client_micros(uncommitted),
    );
}
