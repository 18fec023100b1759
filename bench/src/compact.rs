//! Compact topics in the bench (issue 17 §2): keyed produce jobs, the
//! dispatch-lag sampler, and `--compare-delete`.
//!
//! A compact topic's records are served from its compacted logs, which the
//! dispatcher fills behind the CommitLog, so what a consumer of one waits
//! for is the dispatch lag: the CommitLog bytes committed but not yet
//! dispatched (`dispatch_lag_bytes` of `GET /v3/clusters/{c}/stats`). The
//! sampler reads it every [`LAG_SAMPLE_EVERY`] while produce runs and keeps
//! the largest and the last value.
//!
//! `--compare-delete` produces to a delete topic and to a compact topic of
//! the same partitions, in alternating slices beside the ceiling (as every
//! phase alternates), so the ratio compact / delete is between equally
//! loaded slices of one run; then it measures both topics' long-poll
//! visibility.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;

use crate::admin::{cluster_id, ensure_topic_with_policy};
use crate::body::{keyed_produce_bodies, produce_body};
use crate::client::Conn;
use crate::load::{alternate_all, Job, Target};
use crate::measured::PhaseResult;
use crate::render::{ratio, table, verdict};
use crate::report::visibility_lines;
use crate::results::{PhaseFigures, RunResults, VisibilityFigures};
use crate::visibility::visibility;
use crate::BenchArgs;

/// How often the sampler reads the server's stats.
const LAG_SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// Hard cap of samples, beside the stop flag (an hour at the interval).
const LAG_SAMPLES_MAX: u64 = 72_000;
/// Goal of issue 17 §2: the dispatch lag stays within this throughout.
const LAG_GOAL_BYTES: u64 = 64 << 20;
/// Goal of issue 17 §2: compact produce at least this share of delete's.
const COMPACT_RATIO_GOAL: f64 = 0.7;
/// Produce bodies of a keyed job at most (each a different run of keys).
const KEYED_BODIES_MAX: u64 = 1000;

/// The keyed produce job of a compact topic: bodies that run through
/// `--keys` distinct keys, `--batch` records each.
pub(crate) fn keyed_job(topic: &str, partitions: u32, args: &BenchArgs) -> anyhow::Result<Job> {
    let batch = args.batch as u64;
    let bodies = args.keys.div_ceil(batch).clamp(1, KEYED_BODIES_MAX) as usize;
    let bodies = keyed_produce_bodies(bodies, args.batch, args.record_bytes, args.keys)?
        .into_iter()
        .map(Bytes::from)
        .collect();
    Ok(Job::ProduceKeyed {
        topic: topic.to_string(),
        partitions,
        bodies,
    })
}

/// What the sampler saw.
pub(crate) struct Lag {
    pub(crate) max_bytes: u64,
    pub(crate) last_bytes: u64,
    pub(crate) samples: u64,
}

impl Lag {
    /// Into a run's JSON, where `scripts/bench.sh`'s table reads it.
    pub(crate) fn record_in(&self, results: &mut RunResults) {
        results
            .extra
            .insert("dispatch_lag_max_bytes".into(), self.max_bytes as f64);
        results
            .extra
            .insert("dispatch_lag_final_bytes".into(), self.last_bytes as f64);
    }
}

/// Reads `dispatch_lag_bytes` every [`LAG_SAMPLE_EVERY`] until stopped.
pub(crate) struct LagSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<anyhow::Result<Lag>>,
}

impl LagSampler {
    pub(crate) async fn start(addr: SocketAddr, cluster: &str) -> anyhow::Result<LagSampler> {
        let mut conn = Conn::connect(addr).await?;
        let path = format!("/v3/clusters/{cluster}/stats");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut lag = Lag {
                max_bytes: 0,
                last_bytes: 0,
                samples: 0,
            };
            let mut tick = tokio::time::interval(LAG_SAMPLE_EVERY);
            while lag.samples < LAG_SAMPLES_MAX && !stopped.load(Ordering::Acquire) {
                tick.tick().await;
                let bytes = conn.stats_field(&path, "dispatch_lag_bytes").await?;
                lag.max_bytes = lag.max_bytes.max(bytes);
                lag.last_bytes = bytes;
                lag.samples += 1;
            }
            // The final sample, after the load stopped.
            let bytes = conn.stats_field(&path, "dispatch_lag_bytes").await?;
            lag.max_bytes = lag.max_bytes.max(bytes);
            lag.last_bytes = bytes;
            lag.samples += 1;
            Ok(lag)
        });
        Ok(LagSampler { stop, task })
    }

    pub(crate) async fn stop(self) -> anyhow::Result<Lag> {
        self.stop.store(true, Ordering::Release);
        self.task.await.context("the lag sampler panicked")?
    }
}

/// The lag line of a report, with the goal.
pub(crate) fn lag_line(lag: &Lag) {
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    println!(
        "goal dispatch lag: max {:.2} MiB, final {:.2} MiB over {} samples every {} ms during produce (goal max <= {} MiB): {}",
        mib(lag.max_bytes),
        mib(lag.last_bytes),
        lag.samples,
        LAG_SAMPLE_EVERY.as_millis(),
        LAG_GOAL_BYTES >> 20,
        verdict(lag.max_bytes <= LAG_GOAL_BYTES)
    );
}

/// `--compare-delete`: produce to a delete and a compact topic beside the
/// ceiling, the lag throughout, then both topics' visibility.
pub(crate) async fn measure_compare(
    args: &BenchArgs,
    topic: &str,
    tidelog: Target,
    ceiling: Target,
) -> anyhow::Result<RunResults> {
    let mut admin = Conn::connect(tidelog.addr).await?;
    let cluster = cluster_id(&mut admin).await?;
    let delete_topic = format!("{topic}-delete");
    let compact_topic = format!("{topic}-compact");
    let mut visibility_topics = Vec::new();
    for (name, policy) in [(&delete_topic, "delete"), (&compact_topic, "compact")] {
        ensure_topic_with_policy(&mut admin, &cluster, name, args.partitions, policy).await?;
        let vis = format!("{name}-visibility");
        ensure_topic_with_policy(&mut admin, &cluster, &vis, 1, policy).await?;
        visibility_topics.push((vis, policy == "compact"));
    }
    println!(
        "topics: {delete_topic} (delete) and {compact_topic} (compact, {} keys), {} partitions each",
        args.keys, args.partitions
    );
    let delete = Arc::new(Job::Produce {
        topic: delete_topic.clone(),
        partitions: args.partitions,
        body: Bytes::from(produce_body(args.batch, args.record_bytes)?),
    });
    let compact = Arc::new(keyed_job(&compact_topic, args.partitions, args)?);
    let ceiling_job = Arc::new(Job::Produce {
        topic: topic.to_string(),
        partitions: args.partitions,
        body: Bytes::from(produce_body(args.batch, args.record_bytes)?),
    });
    let targets = [
        ("delete", &tidelog, &delete),
        ("compact", &tidelog, &compact),
        ("ceiling", &ceiling, &ceiling_job),
    ];
    let sampler = LagSampler::start(tidelog.addr, &cluster).await?;
    let produced = alternate_all("produce", &targets, args).await;
    let lag = sampler.stop().await?;
    let [delete, compact, ceiling] = produced?;
    let mut seen = Vec::new();
    for (vis_topic, keyed) in &visibility_topics {
        seen.push(visibility(tidelog.addr, vis_topic, *keyed, args).await?);
    }
    report_compare(args, [&delete, &compact, &ceiling], &lag, &seen);
    // The suite's compact rows: the compact topic is `tidelog`, the delete
    // topic of the same run `tidelog-delete`.
    let mut results = RunResults::for_args("http", args);
    results.phases = vec![
        PhaseFigures::of("produce", "tidelog", &compact),
        PhaseFigures::of("produce", "tidelog-delete", &delete),
        PhaseFigures::of("produce", "ceiling", &ceiling),
    ];
    if let [delete_seen, compact_seen] = seen.as_slice() {
        results.visibility = Some(VisibilityFigures::of(compact_seen));
        results.extra.insert(
            "delete_visibility_p99_ms".into(),
            VisibilityFigures::of(delete_seen).p99_ms,
        );
    }
    lag.record_in(&mut results);
    Ok(results)
}

fn report_compare(
    args: &BenchArgs,
    [delete, compact, ceiling]: [&PhaseResult; 3],
    lag: &Lag,
    seen: &[crate::measured::Visibility],
) {
    println!();
    println!(
        "results ({} connections, {} records x {} B per request; MB/s = record values, 10^6 B/s; latency per request):",
        args.connections, args.batch, args.record_bytes
    );
    table(&[
        ("produce", "delete", delete),
        ("produce", "compact", compact),
        ("produce", "ceiling", ceiling),
    ]);
    println!();
    println!(
        "delete / ceiling = {:.1} %, compact / ceiling = {:.1} %",
        ratio(delete, ceiling) * 100.0,
        ratio(compact, ceiling) * 100.0
    );
    let r = ratio(compact, delete);
    println!(
        "goal compact produce: compact / delete = {:.1} % (goal >= {:.0} %): {}",
        r * 100.0,
        COMPACT_RATIO_GOAL * 100.0,
        verdict(r >= COMPACT_RATIO_GOAL)
    );
    lag_line(lag);
    for (label, vis) in ["visibility delete", "visibility compact"].iter().zip(seen) {
        visibility_lines(label, vis);
    }
}
