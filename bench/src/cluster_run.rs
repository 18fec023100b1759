//! `tidelog bench --protocol kafka --cluster`: what the cluster of issue
//! 39 costs, on this machine, in one run (docs/CLUSTER.md; the issue's
//! goals: acks=all produce to a three-node cluster, master and two
//! replicas with `min_insync_replicas: 2`, at least 50 % of a single
//! node's acks=-1 records/s at the same load; the replication lag's p99
//! under that load and the failover time's p50 and max over 20
//! failovers reported):
//!
//! 1. Starts the targets: the single node (the run's started server,
//!    `run.rs`) and a cluster of three nodes and their etcd
//!    (`cluster_nodes`), every one a child `tidelog serve` of the binary
//!    being benchmarked with the same config (`--server-config`,
//!    `--flush`), the cluster's nodes with a `cluster:` section beside
//!    it. All of them, the etcd and the load generator share this
//!    machine's cores.
//! 2. Produce, in alternating slices: `single` (the single node's Kafka
//!    listener) and `cluster` (the master's), the same Produce requests of
//!    the `--protocol kafka` run (`kafka_run::produce_job`: one batch of
//!    `--batch` records a request, connection i to partition i %
//!    partitions), acks -1 whatever `--acks` says. Meanwhile the
//!    replication lag and each node's CPU are sampled over the cluster's
//!    measured slices (`replication_lag`).
//! 3. `--failovers` rounds of `kill -9` of the master → the first
//!    acknowledged produce on the new master (`failover`).
//!
//! Server CPU per record: the single node's process against the three
//! nodes' summed (the master's and the replicas' apart in the report);
//! with the load generator's, it says what the cores can carry.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::admin::{cluster_id, ensure_topic};
use crate::client::Conn;
use crate::cluster_nodes::{ClusterNodes, NODES, SESSION_TTL_MS};
use crate::cpu::{self, CpuSource};
use crate::failover::{self, Failover};
use crate::kafka_run;
use crate::load::{alternate_all, Target};
use crate::measured::PhaseResult;
use crate::render::{client_micros, ratio, server_micros, table, verdict, CPU_HEADING};
use crate::replication_lag::{quantile, ReplicationLag, ReplicationSampler, SAMPLE_EVERY};
use crate::results::{PhaseFigures, RunResults};
use crate::BenchArgs;

/// Goal of issue 39: acks=all produce to the cluster at least this share
/// of a single node's acks=-1 records/s.
pub(crate) const CLUSTER_PRODUCE_GOAL: f64 = 0.50;
/// acks=all.
const ACKS: i16 = -1;

/// The whole `--cluster` run; `single` is the started single node's HTTP
/// listener (and whose CPU is its own), `single_kafka` its Kafka listener.
pub(crate) async fn measure(
    args: &BenchArgs,
    topic: &str,
    single: Target,
    single_kafka: SocketAddr,
) -> anyhow::Result<RunResults> {
    let mut args = args.clone();
    args.acks = ACKS;
    let args = &args;
    kafka_run::wait_kafka_ready(single_kafka).await?;
    let mut admin = Conn::connect(single.addr).await?;
    let single_cluster = cluster_id(&mut admin).await?;
    let partitions = ensure_topic(&mut admin, &single_cluster, topic, args.partitions).await?;

    let mut cluster = ClusterNodes::start(args).await?;
    let outcome =
        measure_cluster(args, topic, partitions, single, single_kafka, &mut cluster).await;
    if outcome.is_err() {
        eprintln!("{}", cluster.log_tails());
    }
    outcome
}

async fn measure_cluster(
    args: &BenchArgs,
    topic: &str,
    partitions: u32,
    single: Target,
    single_kafka: SocketAddr,
    cluster: &mut ClusterNodes,
) -> anyhow::Result<RunResults> {
    let master = cluster.wait_whole().await?;
    let master_http = cluster.node(master)?.addr;
    let master_kafka = cluster.kafka_addr(master)?;
    let mut admin = Conn::connect(master_http).await?;
    let cluster_name = cluster_id(&mut admin).await?;
    let cluster_partitions = ensure_topic(&mut admin, &cluster_name, topic, partitions).await?;
    anyhow::ensure!(
        cluster_partitions == partitions,
        "the cluster's {topic} has {cluster_partitions} partitions, the single node's {partitions}"
    );
    let probe_topic = format!("{topic}-failover");
    ensure_topic(&mut admin, &cluster_name, &probe_topic, 1).await?;
    kafka_run::wait_kafka_ready(master_kafka).await?;
    // The topics reach the replicas through the master's log.
    cluster.wait_whole().await?;
    println!(
        "topic: {topic} ({partitions} partitions) on both; master: node {master} (kafka {master_kafka}); acks {ACKS}"
    );

    let job = kafka_run::produce_job(args, topic, partitions)?;
    let single_target = Target::plain(single_kafka, single.cpu);
    let measuring = Arc::new(AtomicBool::new(false));
    let pids = cluster.pids();
    let cluster_target = Target::plain(master_kafka, CpuSource::Processes(pids))
        .with_measuring_flag(Arc::clone(&measuring));
    let sampler = ReplicationSampler::start(master_http, &cluster_name, measuring, pids).await?;
    let produced = alternate_all(
        "produce",
        &[
            ("single", &single_target, &job),
            ("cluster", &cluster_target, &job),
        ],
        args,
    )
    .await;
    let lag = sampler.stop().await;
    let [single_p, cluster_p] = produced?;
    let lag = lag?;

    println!(
        "failovers: {} rounds of kill -9 of the master, then the first acknowledged produce on the new master",
        args.failovers
    );
    let failovers = failover::run(cluster, &probe_topic, args.record_bytes, args.failovers).await?;

    let figures = Figures {
        single: &single_p,
        cluster: &cluster_p,
        master,
        lag: &lag,
        failovers: &failovers,
    };
    figures.report(args);
    Ok(figures.results(args))
}

/// Everything the run measured.
struct Figures<'a> {
    single: &'a PhaseResult,
    cluster: &'a PhaseResult,
    /// The master's node id during the produce phase.
    master: u32,
    lag: &'a ReplicationLag,
    failovers: &'a [Failover],
}

impl Figures<'_> {
    /// µs of node CPU per record the cluster acknowledged: the master's,
    /// and the replicas' summed.
    fn node_micros(&self) -> (Option<f64>, Option<f64>) {
        let records = self.cluster.measured.records;
        let mut master = None;
        let mut replicas = Some(std::time::Duration::ZERO);
        for (i, cpu) in self.lag.node_cpu.iter().enumerate() {
            if i + 1 == self.master as usize {
                master = *cpu;
            } else {
                replicas = replicas.zip(*cpu).map(|(a, b)| a + b);
            }
        }
        (
            cpu::micros_per_record(master, records),
            cpu::micros_per_record(replicas, records),
        )
    }

    /// The failovers' times in ms, sorted.
    fn failover_ms(&self) -> Vec<u64> {
        let mut ms: Vec<u64> = self
            .failovers
            .iter()
            .map(|f| u64::try_from(f.took.as_millis()).unwrap_or(u64::MAX))
            .collect();
        ms.sort_unstable();
        ms
    }

    fn report(&self, args: &BenchArgs) {
        println!();
        println!(
            "results (kafka protocol, acks {ACKS}, {} connections, {} records x {} B per produce; a single node against a {NODES}-node cluster's master, min_insync_replicas 2; latency per request):",
            args.connections, args.batch, args.record_bytes
        );
        table(&[
            ("produce", "single", self.single),
            ("produce", "cluster", self.cluster),
        ]);
        println!();
        let share = ratio(self.cluster, self.single);
        println!(
            "goal cluster produce: cluster / single = {:.1} % (goal >= {:.0} %): {}",
            share * 100.0,
            CLUSTER_PRODUCE_GOAL * 100.0,
            verdict(share >= CLUSTER_PRODUCE_GOAL)
        );
        let kib = |b: Option<u64>| {
            b.map_or_else(|| "n/a".into(), |b| format!("{:.1} KiB", b as f64 / 1024.0))
        };
        let as_ms = |b: Option<u64>| {
            b.and_then(|b| self.lag.as_ms(b))
                .map_or_else(|| "n/a".into(), |ms| format!("{ms:.2} ms"))
        };
        let (p50, p99, max) = (
            self.lag.quantile(0.5),
            self.lag.quantile(0.99),
            self.lag.quantile(1.0),
        );
        println!(
            "replication lag (each replica's lag_bytes in the master's GET /v1/cluster, every {} ms of the cluster's measured slices; {} samples): p50 {}, p99 {}, max {}; at the master's log growth of {:.1} MB/s that is p50 {}, p99 {}, max {}",
            SAMPLE_EVERY.as_millis(),
            self.lag.samples.len(),
            kib(p50),
            kib(p99),
            kib(max),
            self.lag.log_bytes_per_s() / 1e6,
            as_ms(p50),
            as_ms(p99),
            as_ms(max),
        );
        let ms = self.failover_ms();
        let secs = |q: f64| {
            quantile(&ms, q).map_or_else(|| "n/a".into(), |ms| format!("{:.3} s", ms as f64 / 1e3))
        };
        println!(
            "failover (kill -9 of the master -> first acknowledged produce on the new master, {} rounds, session_ttl_ms {SESSION_TTL_MS}): p50 {}, max {}, min {}",
            ms.len(),
            secs(0.5),
            secs(1.0),
            secs(0.0)
        );
        println!();
        println!("{CPU_HEADING}");
        let (master_us, replicas_us) = self.node_micros();
        let us = |v: Option<f64>| v.map_or_else(|| "n/a".into(), |v| format!("{v:.3}"));
        println!(
            "produce  server: single node {}, cluster {} (master {}, both replicas {}); load generator: {} against the single node, {} against the cluster",
            server_micros(self.single),
            server_micros(self.cluster),
            us(master_us),
            us(replicas_us),
            client_micros(self.single),
            client_micros(self.cluster),
        );
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let bound = |r: &PhaseResult| {
            let total = cpu::micros_per_record(r.cpu.server, r.measured.records)?
                + cpu::micros_per_record(r.cpu.client, r.measured.records)?;
            (total > 0.0).then(|| cores as f64 * 1e6 / total)
        };
        let rate = |v: Option<f64>| v.map_or_else(|| "n/a".into(), |v| format!("{:.0}", v));
        println!(
            "what {cores} cores carry at that CPU (servers + load generator, nothing else): single node {} records/s, cluster {} records/s",
            rate(bound(self.single)),
            rate(bound(self.cluster)),
        );
    }

    fn results(&self, args: &BenchArgs) -> RunResults {
        let mut results = RunResults::for_args("cluster", args);
        results.acks = Some(ACKS);
        results.phases = vec![
            PhaseFigures::of("produce", "single", self.single),
            PhaseFigures::of("produce", "cluster", self.cluster),
        ];
        let extra = &mut results.extra;
        let mut put = |name: &str, v: Option<f64>| {
            if let Some(v) = v {
                extra.insert(name.to_string(), v);
            }
        };
        put("nodes", Some(NODES as f64));
        put("session_ttl_ms", Some(SESSION_TTL_MS as f64));
        put("lag_samples", Some(self.lag.samples.len() as f64));
        put("lag_sample_every_ms", Some(SAMPLE_EVERY.as_millis() as f64));
        for (name, q) in [("p50", 0.5), ("p99", 0.99), ("max", 1.0)] {
            let bytes = self.lag.quantile(q);
            put(&format!("lag_{name}_bytes"), bytes.map(|b| b as f64));
            put(
                &format!("lag_{name}_ms"),
                bytes.and_then(|b| self.lag.as_ms(b)),
            );
        }
        put(
            "master_log_mb_per_s",
            Some(self.lag.log_bytes_per_s() / 1e6),
        );
        let (master_us, replicas_us) = self.node_micros();
        put("master_us_per_record", master_us);
        put("replicas_us_per_record", replicas_us);
        put(
            "cores",
            std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as f64),
        );
        let ms = self.failover_ms();
        put("failovers", Some(ms.len() as f64));
        put("failover_p50_ms", quantile(&ms, 0.5).map(|v| v as f64));
        put("failover_max_ms", quantile(&ms, 1.0).map(|v| v as f64));
        put("failover_min_ms", quantile(&ms, 0.0).map(|v| v as f64));
        let mut rejoin: Vec<u64> = self
            .failovers
            .iter()
            .map(|f| u64::try_from(f.whole_again.as_millis()).unwrap_or(u64::MAX))
            .collect();
        rejoin.sort_unstable();
        put("rejoin_p50_ms", quantile(&rejoin, 0.5).map(|v| v as f64));
        results
    }
}
