//! `--cluster`: failovers, one after another, on a whole cluster.
//!
//! One round: the master (the node the whole cluster names, never a
//! guess) is killed with SIGKILL; from just before the kill, every other
//! node is probed at once, each by its own task, with an HTTP produce of
//! one record every [`PROBE_EVERY`]; the round's time is from the kill to
//! the first 200 answer. A probe carries `x-tidelog-forwarded-by: 0`, so a
//! replica refuses it (503 50301) instead of forwarding it to the master
//! (API.md "Cluster"): the first 200 is the new master's own
//! acknowledgement, given once the in-sync set (the new master and the
//! remaining replica, `min_insync_replicas: 2`) holds the record. The
//! killed node is then started again on its data dir, and the next round
//! waits until the cluster is whole.
//!
//! The time carries the probes' granularity: up to [`PROBE_EVERY`] plus
//! a request's own time late. Bounded: each round's probes stop at
//! [`FAILOVER_TIMEOUT`], every wait in `cluster_nodes` has its own.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use bytes::Bytes;
use hyper::StatusCode;
use tidelog_api::records::BINARY_V2;

use crate::body::produce_body;
use crate::client::Conn;
use crate::cluster_nodes::ClusterNodes;

/// Between one probe's answer (or failure) and its next produce.
pub(crate) const PROBE_EVERY: Duration = Duration::from_millis(10);
/// How long one probe request may take before it is given up.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a round may take from the kill to an acknowledged produce
/// (CLUSTER.md promises a master within `session_ttl_ms` + 5 s).
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest run of failovers accepted.
pub(crate) const FAILOVERS_MAX: u32 = 100;

/// One round.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failover {
    /// The kill to the new master's first acknowledged produce.
    pub(crate) took: Duration,
    /// The killed node's restart to the cluster whole again.
    pub(crate) whole_again: Duration,
}

/// `rounds` failovers of `cluster`, producing to partition 0 of `topic`
/// (which exists on every node). Prints a line per round.
pub(crate) async fn run(
    cluster: &mut ClusterNodes,
    topic: &str,
    record_bytes: usize,
    rounds: u32,
) -> anyhow::Result<Vec<Failover>> {
    ensure!(
        (1..=FAILOVERS_MAX).contains(&rounds),
        "--failovers must be 1..={FAILOVERS_MAX}"
    );
    let body = Bytes::from(produce_body(1, record_bytes)?);
    let path = format!("/topics/{topic}/partitions/0");
    let mut done = Vec::with_capacity(rounds as usize);
    let mut master = cluster.wait_whole().await?;
    for round in 1..=rounds {
        let survivors = cluster.http_addrs_except(master);
        let killed_at = Instant::now();
        cluster.kill(master)?;
        let (new_master, acked_at) = first_acknowledged(&survivors, &path, &body, killed_at)
            .await
            .with_context(|| format!("failover {round}/{rounds}, node {master} killed"))?;
        let took = acked_at.saturating_duration_since(killed_at);
        let restarted_at = Instant::now();
        cluster
            .restart(master)
            .await
            .with_context(|| format!("failover {round}/{rounds}: restarting node {master}"))?;
        let next = cluster.wait_whole().await.with_context(|| {
            format!("failover {round}/{rounds}: node {master} back in the cluster")
        })?;
        let whole_again = restarted_at.elapsed();
        println!(
            "  [failover {round}/{rounds}] node {master} killed; node {new_master} acknowledged a produce after {:.3} s; node {master} restarted, the cluster whole again after {:.1} s (master: node {next})",
            took.as_secs_f64(),
            whole_again.as_secs_f64()
        );
        done.push(Failover { took, whole_again });
        master = next;
    }
    Ok(done)
}

/// Probes every node of `nodes` at once until one acknowledges a
/// produce; that node and when its answer came.
async fn first_acknowledged(
    nodes: &[(u32, SocketAddr)],
    path: &str,
    body: &Bytes,
    killed_at: Instant,
) -> anyhow::Result<(u32, Instant)> {
    let deadline = killed_at + FAILOVER_TIMEOUT;
    let mut probes = tokio::task::JoinSet::new();
    for &(id, addr) in nodes {
        probes.spawn(probe(id, addr, path.to_string(), body.clone(), deadline));
    }
    let mut why = Vec::new();
    while let Some(joined) = probes.join_next().await {
        match joined {
            Ok(Ok(hit)) => {
                probes.abort_all();
                return Ok(hit);
            }
            Ok(Err(e)) => why.push(format!("{e:#}")),
            Err(e) => why.push(format!("a probe panicked: {e}")),
        }
    }
    bail!(
        "no node acknowledged a produce within {FAILOVER_TIMEOUT:?} of the kill: {}",
        why.join("; ")
    )
}

/// Produces to node `id` until it answers 200 or `deadline` passes.
async fn probe(
    id: u32,
    addr: SocketAddr,
    path: String,
    body: Bytes,
    deadline: Instant,
) -> anyhow::Result<(u32, Instant)> {
    let mut conn: Option<Conn> = None;
    let mut last = String::from("no attempt yet");
    // Bounded by the deadline; the count is a second bound.
    let attempts_max = FAILOVER_TIMEOUT.as_millis() / PROBE_EVERY.as_millis().max(1) + 1;
    for _ in 0..attempts_max {
        if Instant::now() >= deadline {
            break;
        }
        let mut c = match conn.take() {
            Some(c) => c,
            None => match Conn::connect(addr).await {
                Ok(c) => c,
                Err(e) => {
                    last = format!("{e:#}");
                    tokio::time::sleep(PROBE_EVERY).await;
                    continue;
                }
            },
        };
        let sent = c.post_with(
            &path,
            BINARY_V2,
            &[("x-tidelog-forwarded-by", "0")],
            body.clone(),
        );
        match tokio::time::timeout(PROBE_TIMEOUT, sent).await {
            Ok(Ok(answer)) if answer.status == StatusCode::OK => return Ok((id, Instant::now())),
            Ok(Ok(answer)) => {
                last = format!(
                    "status {}: {}",
                    answer.status,
                    String::from_utf8_lossy(&answer.body[..answer.body.len().min(200)])
                );
                conn = Some(c);
            }
            Ok(Err(e)) => last = format!("{e:#}"),
            Err(_) => last = format!("no answer within {PROBE_TIMEOUT:?}"),
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
    bail!("node {id} at {addr}: {last}")
}
