//! `--cluster`: how far the replicas trail the master under the produce
//! load, and what each node's process spends meanwhile.
//!
//! What a sample is: `lag_bytes` of each replica in the master's `GET
//! /v1/cluster` (API.md "Cluster"): the master's CommitLog end minus the
//! last position that replica confirmed, as the master's acknowledgement
//! gate sees it. Every [`SAMPLE_EVERY`] while the cluster's slices are
//! measured (the target's measuring flag, `load.rs`), one sample per
//! replica; the slices of the single node and every warm-up are left out.
//! Beside the samples, over the same windows: the master's CommitLog
//! growth (`commitlog_max_offset` of its stats), which turns bytes of lag
//! into time at the rate the log grew, and each node's CPU time.
//!
//! Bounded: at most [`POLLS_MAX`] polls, stopped by [`ReplicationSampler::stop`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::client::Conn;
use crate::cluster_nodes::{cluster_status, NODES};
use crate::cpu::CpuSource;

/// How often the sampler asks the master.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(10);
/// Hard cap of polls, beside the stop flag (an hour at the interval).
const POLLS_MAX: u64 = 360_000;

/// What the sampler saw over the measured windows.
pub(crate) struct ReplicationLag {
    /// Every replica's `lag_bytes` of every poll, sorted.
    pub(crate) samples: Vec<u64>,
    /// The master's CommitLog growth over the windows.
    pub(crate) log_bytes: u64,
    /// The windows' total length.
    pub(crate) window: Duration,
    /// Each node's CPU time over the windows (node 1 first); `None` where
    /// /proc could not be read.
    pub(crate) node_cpu: [Option<Duration>; NODES],
}

impl ReplicationLag {
    /// The `q` quantile of the samples (highest sample at or below it).
    pub(crate) fn quantile(&self, q: f64) -> Option<u64> {
        quantile(&self.samples, q)
    }

    /// The master's CommitLog growth, bytes a second.
    pub(crate) fn log_bytes_per_s(&self) -> f64 {
        let secs = self.window.as_secs_f64();
        if secs > 0.0 {
            self.log_bytes as f64 / secs
        } else {
            0.0
        }
    }

    /// `bytes` of lag as the time the master's log took to grow by them.
    pub(crate) fn as_ms(&self, bytes: u64) -> Option<f64> {
        let rate = self.log_bytes_per_s();
        (rate > 0.0).then(|| bytes as f64 / rate * 1e3)
    }
}

/// The `q` quantile of `sorted` (nearest rank, rounded up).
pub(crate) fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n);
    sorted.get(rank - 1).copied()
}

/// The running sampler.
pub(crate) struct ReplicationSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<anyhow::Result<ReplicationLag>>,
}

/// An open measured window: when, and what the log and the nodes had then.
struct Window {
    at: Instant,
    log_end: u64,
    cpu: [Option<Duration>; NODES],
}

impl ReplicationSampler {
    /// Samples the master at `master` (HTTP; `cluster` its cluster id) while
    /// `measuring` is raised; `pids` are the nodes' processes.
    pub(crate) async fn start(
        master: SocketAddr,
        cluster: &str,
        measuring: Arc<AtomicBool>,
        pids: [u32; NODES],
    ) -> anyhow::Result<ReplicationSampler> {
        let mut conn = Conn::connect(master).await?;
        let stats = format!("/v3/clusters/{cluster}/stats");
        // Fail now, not in the middle of the load, if the stats do not read.
        conn.stats_field(&stats, "commitlog_max_offset").await?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut lag = ReplicationLag {
                samples: Vec::new(),
                log_bytes: 0,
                window: Duration::ZERO,
                node_cpu: [Some(Duration::ZERO); NODES],
            };
            let mut open: Option<Window> = None;
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            for _ in 0..POLLS_MAX {
                if stopped.load(Ordering::Acquire) {
                    break;
                }
                tick.tick().await;
                let active = measuring.load(Ordering::Acquire);
                match (active, open.take()) {
                    (true, None) => {
                        open = Some(Window {
                            at: Instant::now(),
                            log_end: conn.stats_field(&stats, "commitlog_max_offset").await?,
                            cpu: cpu_of(pids),
                        })
                    }
                    (true, Some(window)) => {
                        open = Some(window);
                        let status = cluster_status(&mut conn).await?;
                        let replicas = status.nodes.iter().filter(|n| n.role == "replica");
                        lag.samples.extend(replicas.map(|n| n.lag_bytes));
                    }
                    (false, Some(window)) => {
                        close(&mut lag, window, &mut conn, &stats, pids).await?
                    }
                    (false, None) => {}
                }
            }
            if let Some(window) = open {
                close(&mut lag, window, &mut conn, &stats, pids).await?;
            }
            lag.samples.sort_unstable();
            Ok(lag)
        });
        Ok(ReplicationSampler { stop, task })
    }

    pub(crate) async fn stop(self) -> anyhow::Result<ReplicationLag> {
        self.stop.store(true, Ordering::Release);
        self.task
            .await
            .context("the replication lag sampler panicked")?
    }
}

/// Ends `window`: the log's growth, the time and each node's CPU since.
async fn close(
    lag: &mut ReplicationLag,
    window: Window,
    conn: &mut Conn,
    stats: &str,
    pids: [u32; NODES],
) -> anyhow::Result<()> {
    let end = conn.stats_field(stats, "commitlog_max_offset").await?;
    lag.log_bytes += end.saturating_sub(window.log_end);
    lag.window += window.at.elapsed();
    let now = cpu_of(pids);
    for ((sum, before), after) in lag.node_cpu.iter_mut().zip(window.cpu).zip(now) {
        *sum = match (*sum, before, after) {
            (Some(sum), Some(before), Some(after)) => Some(sum + after.saturating_sub(before)),
            _ => None,
        };
    }
    Ok(())
}

fn cpu_of(pids: [u32; NODES]) -> [Option<Duration>; NODES] {
    pids.map(|pid| CpuSource::Process(pid).cpu_time())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        assert_eq!(quantile(&[], 0.99), None);
        assert_eq!(quantile(&[7], 0.5), Some(7));
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&hundred, 0.5), Some(50));
        assert_eq!(quantile(&hundred, 0.99), Some(99));
        assert_eq!(quantile(&hundred, 1.0), Some(100));
        assert_eq!(quantile(&hundred, 0.0), Some(1));
    }

    #[test]
    fn lag_in_time_is_at_the_rate_the_log_grew() {
        let lag = ReplicationLag {
            samples: vec![0, 1000, 2000],
            log_bytes: 10_000_000,
            window: Duration::from_secs(2),
            node_cpu: [None; NODES],
        };
        assert_eq!(lag.log_bytes_per_s(), 5_000_000.0);
        assert_eq!(lag.as_ms(5_000), Some(1.0));
        assert_eq!(lag.quantile(0.99), Some(2000));
        let idle = ReplicationLag {
            window: Duration::ZERO,
            ..lag
        };
        assert_eq!(idle.as_ms(5_000), None);
    }
}
