//! One `tidelog bench` run: checks the options, starts both targets and
//! the client runtime, runs the phases in order and prints the report.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Context as _};
use bytes::Bytes;

use crate::admin::{cluster_id, ensure_topic_with_policy, partition_ranges};
use crate::body::produce_body;
use crate::ceiling;
use crate::client::{self, Conn};
use crate::compact::{self, LagSampler};
use crate::cpu::{CpuSource, CLIENT_THREAD_NAME};
use crate::load::{alternate, alternate_all, Job, Target};
use crate::machine::ServerFigures;
use crate::report::report;
use crate::results::{PhaseFigures, RunResults, VisibilityFigures};
use crate::target::{parse_local_url, ChildServer};
use crate::visibility::visibility;
use crate::{kafka_ceiling, kafka_run, recovery, BenchArgs, Policy, Protocol};

/// Ready wait for the started server (recovery of an empty dir is instant;
/// preallocating the first segment is not, on a cold VM).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest phase accepted (warm-up or measurement).
const PHASE_MS_MAX: u64 = 3_600_000;

/// The whole run; the caller prints the error and picks the exit code.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(dir) = &args.suite_table {
        return crate::suite::print_table(dir);
    }
    check_args(&args)?;
    if let Some(mib) = args.recovery_mib {
        crate::recovery::check_args(&args, mib)?;
    }
    if let Some(mib) = args.tiered_mib {
        ensure!(
            (1..=crate::tiered::TIERED_MIB_MAX).contains(&mib),
            "--tiered-mib must be 1..={}",
            crate::tiered::TIERED_MIB_MAX
        );
        crate::tiered::tiered_config(&args)?;
    }
    // Before any load, on an idle process: the ceiling of every byte rate.
    let memcpy = crate::machine::memcpy_mb_per_s();
    println!("memcpy limit (in this process, 64 MiB buffers): {memcpy:.0} MB/s");
    let topic = match &args.topic {
        Some(topic) => topic.clone(),
        None => format!("bench-{}", unix_ms()),
    };
    // Started before the client runtime; dropped (stopped) after it. A
    // security run compares secured with plain listeners, a transactions
    // run transactions with none, a cluster run a cluster with a single
    // node, not with it.
    let ceiling = match (
        args.security || args.transactions || args.cluster,
        args.protocol,
    ) {
        (true, _) => None,
        (false, Protocol::Http) => Some(ceiling::start(&topic, args.batch, args.record_bytes)?),
        (false, Protocol::Kafka) => Some(kafka_ceiling::start(args.batch, args.record_bytes)?),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(CLIENT_THREAD_NAME)
        .build()
        .context("starting the client runtime")?;
    let result = if args.security {
        runtime.block_on(crate::security_run::run(&args, &topic))
    } else {
        runtime.block_on(bench(&args, &topic, ceiling.as_ref().map(|c| c.addr)))
    };
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(ceiling);
    let mut results = result?;
    results.memcpy_mb_per_s = Some(memcpy);
    if let Some(path) = &args.json {
        results.write(path)?;
        println!("results written to {}", path.display());
    }
    Ok(())
}

fn check_args(args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(url) = &args.url {
        parse_local_url(url)?;
    }
    ensure!(
        (1..=1000).contains(&args.connections),
        "--connections must be 1..=1000 (the server's default limit is 1024 requests at once)"
    );
    ensure!(
        (1..=10_000).contains(&args.batch),
        "--batch must be 1..=10000 (the server's records-per-request and max_records limit)"
    );
    ensure!(
        (1..=512 * 1024).contains(&args.record_bytes),
        "--record-bytes must be 1..=524288"
    );
    ensure!(
        args.batch * args.record_bytes <= 8 << 20,
        "--batch x --record-bytes must stay within 8 MiB (base64 of it must fit the 16 MiB request limit)"
    );
    ensure!(
        (1..=PHASE_MS_MAX).contains(&args.duration_ms),
        "--duration-ms must be 1..={PHASE_MS_MAX}"
    );
    ensure!(
        args.warmup_ms <= PHASE_MS_MAX,
        "--warmup-ms must be at most {PHASE_MS_MAX}"
    );
    ensure!(
        (1..=100).contains(&args.rounds) && u64::from(args.rounds) <= args.duration_ms,
        "--rounds must be 1..=100 and at most --duration-ms"
    );
    ensure!(
        (1..=1024).contains(&args.partitions),
        "--partitions must be 1..=1024"
    );
    ensure!(
        (1..=100_000).contains(&args.visibility_samples),
        "--visibility-samples must be 1..=100000"
    );
    ensure!(
        [1, -1].contains(&args.acks),
        "--acks must be 1 or -1 (acks 0 gets no answer to count)"
    );
    ensure!(
        args.protocol == Protocol::Http || (args.policy == Policy::Delete && !args.compare_delete),
        "--policy compact and --compare-delete are HTTP only"
    );
    ensure!(args.keys >= 1, "--keys must be at least 1");
    ensure!(
        (1..=10_000).contains(&args.logins),
        "--logins must be 1..=10000"
    );
    ensure!(
        !args.compare_async
            || (args.flush == Some(crate::Flush::Sync)
                && args.protocol == Protocol::Http
                && args.policy == Policy::Delete),
        "--compare-async needs --flush sync, --protocol http and --policy delete"
    );
    if let Some(addr) = args.kafka_addr {
        ensure!(
            addr.ip().is_loopback(),
            "--kafka-addr {addr}: the bench only talks to 127.0.0.1"
        );
    }
    ensure!(
        !args.transactions || args.protocol == Protocol::Kafka,
        "--transactions needs --protocol kafka"
    );
    ensure!(
        !args.cluster || args.protocol == Protocol::Kafka,
        "--cluster needs --protocol kafka"
    );
    ensure!(
        (1..=crate::failover::FAILOVERS_MAX).contains(&args.failovers),
        "--failovers must be 1..={}",
        crate::failover::FAILOVERS_MAX
    );
    ensure!(
        (1..=1_000_000).contains(&args.txn_batches),
        "--txn-batches must be 1..=1000000"
    );
    if args.protocol == Protocol::Kafka && args.url.is_some() {
        ensure!(
            args.kafka_addr.is_some(),
            "--protocol kafka with --url needs --kafka-addr (the server's Kafka listener)"
        );
    }
    Ok(())
}

/// The run of every mode but `--security`; `ceiling_addr`, the bare
/// endpoint or listener, is `None` for `--transactions` and `--cluster`,
/// which compare with none.
pub(crate) async fn bench(
    args: &BenchArgs,
    topic: &str,
    ceiling_addr: Option<SocketAddr>,
) -> anyhow::Result<RunResults> {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "tidelog bench: {} connections, batches of {} records x {} B, {} ms warm-up + {} ms measured per phase and target in {} alternating rounds, {} partitions, {} cores",
        args.connections,
        args.batch,
        args.record_bytes,
        args.warmup_ms,
        args.duration_ms,
        args.rounds,
        args.partitions,
        cores
    );
    let mut started_server;
    let (tidelog_addr, tidelog_cpu) = match &args.url {
        Some(url) => {
            started_server = None;
            let addr = parse_local_url(url)?;
            client::wait_ready(addr, Duration::from_secs(10), || Ok(())).await?;
            println!("tidelog: {url} (running server; its CPU time is not reported)");
            (addr, CpuSource::Unknown)
        }
        None => {
            let mut server = ChildServer::start(args)?;
            let addr = server.addr;
            client::wait_ready(addr, READY_TIMEOUT, || server.check_alive()).await?;
            println!(
                "tidelog: http://{addr} (child process {}, data dir {})",
                server.child.id(),
                server.data_dir.path().display()
            );
            let cpu = CpuSource::Process(server.child.id());
            started_server = Some(server);
            (addr, cpu)
        }
    };
    let tidelog = Target::plain(tidelog_addr, tidelog_cpu);
    let started_kafka = started_server.as_ref().and_then(|s| s.kafka_addr);
    // --compare-async: the same server with `flush: async`, stopped at the
    // end of the run (check_args: never with --url).
    let mut async_server = None;
    if args.compare_async {
        let mut async_args = args.clone();
        async_args.flush = Some(crate::Flush::Async);
        let mut server = ChildServer::start(&async_args)?;
        client::wait_ready(server.addr, READY_TIMEOUT, || server.check_alive()).await?;
        println!(
            "async tidelog: http://{} (child process {}, flush: async)",
            server.addr,
            server.child.id()
        );
        async_server = Some(server);
    }
    let async_target = async_server
        .as_ref()
        .map(|s| Target::plain(s.addr, CpuSource::Process(s.child.id())));
    let outcome = match (args.recovery_mib, started_server.as_mut()) {
        (Some(mib), Some(server)) => {
            let mut results = RunResults::for_args("recovery", args);
            recovery::measure(args, topic, server, mib)
                .await
                .map(|(figures, held)| {
                    results.recovery = Some(figures);
                    results.server = Some(held);
                    results
                })
        }
        (Some(_), None) => Err(anyhow::anyhow!("--recovery-mib needs the started server")),
        (None, _) if args.tiered_mib.is_some() => {
            let mib = args.tiered_mib.unwrap_or_default();
            let mut results = RunResults::for_args("tiered", args);
            let mut conn = client::Conn::connect(tidelog_addr).await?;
            crate::tiered::run(args, &mut conn, topic, mib)
                .await
                .map(|figures| {
                    figures.print();
                    figures.record(&mut results);
                    results
                })
        }
        (None, _) => {
            measure_load(
                args,
                topic,
                tidelog,
                ceiling_addr,
                started_kafka,
                async_target,
            )
            .await
        }
    };
    if let Some(mut server) = async_server {
        server.stop();
    }
    if let Some(mut server) = started_server {
        // What the server holds after the run (the recovery run read it
        // before stopping the server for its cold cat).
        let outcome = outcome.map(|mut results| {
            let held = results
                .server
                .get_or_insert_with(|| ServerFigures::read(server.child.id()));
            println!("server after the run: {}", held.describe());
            results
        });
        server.stop();
        if outcome.is_err() {
            eprintln!(
                "--- server log ---\n{}",
                std::fs::read_to_string(&server.log_path).unwrap_or_default()
            );
        }
        return outcome;
    }
    outcome
}

/// The load phases of `--protocol`, against the started server or `--url`.
async fn measure_load(
    args: &BenchArgs,
    topic: &str,
    tidelog: Target,
    ceiling_addr: Option<SocketAddr>,
    started_kafka: Option<SocketAddr>,
    async_target: Option<Target>,
) -> anyhow::Result<RunResults> {
    let kafka = started_kafka.or(args.kafka_addr);
    match (args.protocol, ceiling_addr) {
        (Protocol::Kafka, _) if args.transactions => match kafka {
            Some(kafka) => crate::txn_run::measure(args, topic, tidelog, kafka).await,
            None => Err(anyhow::anyhow!("no Kafka listener to measure")),
        },
        (Protocol::Kafka, _) if args.cluster => match kafka {
            Some(kafka) => crate::cluster_run::measure(args, topic, tidelog, kafka).await,
            None => Err(anyhow::anyhow!("no Kafka listener to measure")),
        },
        (_, None) => Err(anyhow::anyhow!("no ceiling to measure beside tidelog")),
        (Protocol::Http, Some(ceiling_addr)) => {
            println!("ceiling: http://{ceiling_addr} (bare axum endpoint in this process: parse + base64-decode, store nothing)");
            let ceiling = Target::plain(ceiling_addr, CpuSource::Threads(ceiling::THREAD_NAME));
            if args.compare_delete {
                compact::measure_compare(args, topic, tidelog, ceiling).await
            } else {
                measure_all(args, topic, tidelog, ceiling, async_target).await
            }
        }
        (Protocol::Kafka, Some(ceiling_addr)) => {
            // check_args made sure --url comes with --kafka-addr.
            match kafka {
                Some(kafka) => kafka_run::measure(args, topic, tidelog, kafka, ceiling_addr).await,
                None => Err(anyhow::anyhow!("no Kafka listener to measure")),
            }
        }
    }
}

async fn measure_all(
    args: &BenchArgs,
    topic: &str,
    tidelog: Target,
    ceiling: Target,
    async_target: Option<Target>,
) -> anyhow::Result<RunResults> {
    let mut admin = Conn::connect(tidelog.addr).await?;
    let cluster = cluster_id(&mut admin).await?;
    let compact = args.policy == Policy::Compact;
    let policy = if compact { "compact" } else { "delete" };
    let partitions =
        ensure_topic_with_policy(&mut admin, &cluster, topic, args.partitions, policy).await?;
    let visibility_topic = format!("{topic}-visibility");
    ensure_topic_with_policy(&mut admin, &cluster, &visibility_topic, 1, policy).await?;
    println!(
        "topic: {topic} ({partitions} partitions, {policy}), visibility topic: {visibility_topic}"
    );

    let produce = Arc::new(if compact {
        compact::keyed_job(topic, partitions, args)?
    } else {
        Job::Produce {
            topic: topic.to_string(),
            partitions,
            body: Bytes::from(produce_body(args.batch, args.record_bytes)?),
        }
    });
    let sampler = match compact {
        true => Some(LagSampler::start(tidelog.addr, &cluster).await?),
        false => None,
    };
    let produced = alternate("produce", &tidelog, &ceiling, &produce, args).await;
    let lag = match sampler {
        Some(sampler) => Some(sampler.stop().await?),
        None => None,
    };
    let (tidelog_produce, ceiling_produce) = produced?;
    // --compare-async: this (sync) server against the async one, the same
    // requests in alternating slices.
    let versus_async = match async_target {
        Some(async_target) => {
            let mut async_admin = Conn::connect(async_target.addr).await?;
            let async_cluster = cluster_id(&mut async_admin).await?;
            let async_partitions = ensure_topic_with_policy(
                &mut async_admin,
                &async_cluster,
                topic,
                args.partitions,
                policy,
            )
            .await?;
            ensure!(
                async_partitions == partitions,
                "the async server's {topic} has {async_partitions} partitions, not {partitions}"
            );
            let targets = [
                ("tidelog", &tidelog, &produce),
                ("async", &async_target, &produce),
            ];
            let [sync_p, async_p] = alternate_all("produce-vs-async", &targets, args).await?;
            println!(
                "sync / async produce (alternating slices): {:.1} %",
                100.0 * sync_p.records_per_s() / async_p.records_per_s().max(f64::MIN_POSITIVE)
            );
            Some((sync_p, async_p))
        }
        None => None,
    };

    let fetch = Arc::new(Job::Fetch {
        topic: topic.to_string(),
        ranges: partition_ranges(tidelog.addr, None, topic, partitions).await?,
        batch: args.batch,
    });
    let (tidelog_fetch, ceiling_fetch) =
        alternate("fetch", &tidelog, &ceiling, &fetch, args).await?;

    let visibility = visibility(tidelog.addr, &visibility_topic, compact, args).await?;

    report(
        args,
        [
            ("produce", &tidelog_produce, &ceiling_produce),
            ("fetch", &tidelog_fetch, &ceiling_fetch),
        ],
        &visibility,
    );
    let mut results = RunResults::for_args("http", args);
    results.phases = vec![
        PhaseFigures::of("produce", "tidelog", &tidelog_produce),
        PhaseFigures::of("produce", "ceiling", &ceiling_produce),
        PhaseFigures::of("fetch", "tidelog", &tidelog_fetch),
        PhaseFigures::of("fetch", "ceiling", &ceiling_fetch),
    ];
    if let Some((sync_p, async_p)) = &versus_async {
        results
            .phases
            .push(PhaseFigures::of("produce-vs-async", "tidelog", sync_p));
        results
            .phases
            .push(PhaseFigures::of("produce-vs-async", "async", async_p));
    }
    results.visibility = Some(VisibilityFigures::of(&visibility));
    if let Some(lag) = &lag {
        compact::lag_line(lag);
        lag.record_in(&mut results);
    }
    Ok(results)
}

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}
