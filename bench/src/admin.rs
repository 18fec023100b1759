//! The REST calls a run makes around the load: the cluster id, creating
//! the bench topics, and a partition's offsets.

use std::net::SocketAddr;

use anyhow::{anyhow, bail, ensure, Context as _};
use bytes::Bytes;
use hyper::StatusCode;

use crate::client::{self, Conn};
use crate::secure::Secure;

pub(crate) async fn cluster_id(conn: &mut Conn) -> anyhow::Result<String> {
    let answer = conn.get("/v3/clusters", "application/json").await?;
    let body = expect_json(&answer, StatusCode::OK, "GET /v3/clusters")?;
    body["data"][0]["cluster_id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("GET /v3/clusters: no cluster_id in {body}"))
}

/// Creates `topic` with `partitions`; an existing topic is used as it is.
/// Returns its partition count.
pub(crate) async fn ensure_topic(
    conn: &mut Conn,
    cluster: &str,
    topic: &str,
    partitions: u32,
) -> anyhow::Result<u32> {
    ensure_topic_with_policy(conn, cluster, topic, partitions, "delete").await
}

/// [`ensure_topic`] with `cleanup.policy` set to `policy` on creation.
pub(crate) async fn ensure_topic_with_policy(
    conn: &mut Conn,
    cluster: &str,
    topic: &str,
    partitions: u32,
    policy: &str,
) -> anyhow::Result<u32> {
    let mut body = serde_json::json!({"topic_name": topic, "partitions_count": partitions});
    if policy != "delete" {
        // The default is not sent: a delete topic is created as it was.
        body["configs"] = serde_json::json!([{"name": "cleanup.policy", "value": policy}]);
    }
    let path = format!("/v3/clusters/{cluster}/topics");
    let answer = conn
        .post(&path, "application/json", Bytes::from(body.to_string()))
        .await?;
    if answer.status == StatusCode::CONFLICT {
        let path = format!("/v3/clusters/{cluster}/topics/{topic}");
        let answer = conn.get(&path, "application/json").await?;
        let body = expect_json(&answer, StatusCode::OK, &path)?;
        return body["partitions_count"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| anyhow!("GET {path}: no partitions_count in {body}"));
    }
    expect_json(&answer, StatusCode::CREATED, &format!("POST {path}"))?;
    Ok(partitions)
}

/// `[beginning_offset, end_offset)` of a partition.
pub(crate) async fn partition_offsets(
    conn: &mut Conn,
    topic: &str,
    partition: u32,
) -> anyhow::Result<(u64, u64)> {
    let path = format!("/topics/{topic}/partitions/{partition}/offsets");
    let answer = conn.get(&path, "application/json").await?;
    let body = expect_json(&answer, StatusCode::OK, &path)?;
    match (
        body["beginning_offset"].as_u64(),
        body["end_offset"].as_u64(),
    ) {
        (Some(begin), Some(end)) => Ok((begin, end)),
        _ => bail!("GET {path}: unexpected answer {body}"),
    }
}

/// [`partition_offsets`] of each of `topic`'s `partitions`, in order:
/// what a fetch phase reads over. On a connection of its own: the run's
/// admin connection sat idle through the produce phase, longer than the
/// server keeps an idle connection open once phases are long.
pub(crate) async fn partition_ranges(
    addr: SocketAddr,
    secure: Option<&Secure>,
    topic: &str,
    partitions: u32,
) -> anyhow::Result<Vec<(u64, u64)>> {
    let mut conn = Conn::connect_secure(addr, secure).await?;
    let mut ranges = Vec::with_capacity(partitions as usize);
    for p in 0..partitions {
        ranges.push(partition_offsets(&mut conn, topic, p).await?);
    }
    Ok(ranges)
}

fn expect_json(
    answer: &client::Answer,
    status: StatusCode,
    what: &str,
) -> anyhow::Result<serde_json::Value> {
    ensure!(
        answer.status == status,
        "{what}: expected {status}, got {}: {}",
        answer.status,
        String::from_utf8_lossy(&answer.body)
    );
    serde_json::from_slice(&answer.body).with_context(|| format!("{what}: the answer is not JSON"))
}
