//! `tidelog bench --tiered-mib N --server-config FILE`: tiered storage's
//! upload throughput and remote fetch rate, beside a plain `object_store`
//! put and get of the same bytes to the same bucket (issue 19,
//! "Benchmark"). FILE's `tiered:` section names the bucket (an
//! S3-compatible server such as the SeaweedFS `scripts/bench.sh` starts).
//!
//! 1. Fill: the started server gets N MiB of `--record-bytes` records in
//!    `--batch`es over one connection into a one-partition topic with
//!    `remote.storage.enable` and `local.retention.ms: 1`, then a little
//!    more into another topic, so the CommitLog segment holding the tail
//!    is sealed and all of it is uploadable.
//! 2. Upload: `POST .../tiering:upload` rounds, timed from the first until
//!    the manifest ends at the topic's end: record value bytes per second.
//! 3. Remote fetch: the topic read from offset 0 (every offset is below
//!    the local beginning now, so every record comes from the bucket) in
//!    `--batch`-record fetches, timed: value bytes per second.
//! 4. Plain: the same number of bytes put as objects of the config's
//!    `object_bytes` under `<prefix>/bench-plain/` and read back, each
//!    timed, with the `object_store` client the server uses
//!    (`RemoteTier::store`), then deleted.
//!
//! Every loop is bounded by a count and a deadline; the only addresses
//! are the started server's and the config's endpoint.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context as _};
use bytes::Bytes;
use hyper::StatusCode;
use tidelog_api::records::BINARY_V2;
use tidelog_tiered::object_store::{ObjectStoreExt as _, PutPayload};
use tidelog_tiered::{RemoteTier, TieredConfig};

use crate::admin::cluster_id;
use crate::body::{produce_body, record_value};
use crate::client::Conn;
use crate::results::RunResults;
use crate::BenchArgs;

/// Largest fill the bench accepts (16 GiB).
pub(crate) const TIERED_MIB_MAX: u64 = 16 << 10;
/// How long each step may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(1800);

/// What the run measured, in MB/s of record values (10^6 B/s).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TieredFigures {
    pub bytes: u64,
    pub records: u64,
    pub upload_mb_per_s: f64,
    pub plain_put_mb_per_s: f64,
    pub remote_fetch_mb_per_s: f64,
    pub plain_get_mb_per_s: f64,
}

impl TieredFigures {
    /// Into the run's JSON (`extra`, read by the suite table).
    pub(crate) fn record(&self, results: &mut RunResults) {
        for (name, value) in [
            ("tiered_bytes", self.bytes as f64),
            ("tiered_upload_mb_per_s", self.upload_mb_per_s),
            ("tiered_plain_put_mb_per_s", self.plain_put_mb_per_s),
            ("tiered_remote_fetch_mb_per_s", self.remote_fetch_mb_per_s),
            ("tiered_plain_get_mb_per_s", self.plain_get_mb_per_s),
        ] {
            results.extra.insert(name.to_string(), value);
        }
    }

    pub(crate) fn print(&self) {
        println!(
            "tiered, {:.1} MiB in {} records:",
            self.bytes as f64 / f64::from(1u32 << 20),
            self.records
        );
        println!(
            "  upload        {:>8.1} MB/s   plain put {:>8.1} MB/s   ({:.0} %)",
            self.upload_mb_per_s,
            self.plain_put_mb_per_s,
            100.0 * self.upload_mb_per_s / self.plain_put_mb_per_s
        );
        println!(
            "  remote fetch  {:>8.1} MB/s   plain get {:>8.1} MB/s   ({:.0} %)",
            self.remote_fetch_mb_per_s,
            self.plain_get_mb_per_s,
            100.0 * self.remote_fetch_mb_per_s / self.plain_get_mb_per_s
        );
    }
}

/// The `tiered:` section of `--server-config`, which must set a url.
pub(crate) fn tiered_config(args: &BenchArgs) -> anyhow::Result<TieredConfig> {
    let path = args
        .server_config
        .as_ref()
        .ok_or_else(|| anyhow!("--tiered-mib needs --server-config with a tiered: section"))?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let yaml: serde_yaml::Value =
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let section = yaml
        .get("tiered")
        .cloned()
        .ok_or_else(|| anyhow!("{}: no tiered: section", path.display()))?;
    let cfg: TieredConfig = serde_yaml::from_value(section)
        .with_context(|| format!("{}: the tiered: section", path.display()))?;
    ensure!(cfg.enabled(), "{}: tiered.url is not set", path.display());
    Ok(cfg)
}

fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64().max(1e-9)
}

/// The whole tiered run against the started server at `conn`.
pub(crate) async fn run(
    args: &BenchArgs,
    conn: &mut Conn,
    topic: &str,
    mib: u64,
) -> anyhow::Result<TieredFigures> {
    let cfg = tiered_config(args)?;
    let cluster = cluster_id(conn).await?;
    create_tiered_topic(conn, &cluster, topic).await?;

    // 1. Fill.
    let body = Bytes::from(produce_body(args.batch, args.record_bytes)?);
    let per_request = (args.batch * args.record_bytes) as u64;
    let requests = (mib << 20).div_ceil(per_request.max(1));
    let path = format!("/topics/{topic}/partitions/0");
    for i in 0..requests {
        let answer = conn.post(&path, BINARY_V2, body.clone()).await?;
        ensure!(
            answer.status == StatusCode::OK,
            "produce: {}",
            answer.status
        );
        if i % 1000 == 999 {
            println!("tiered: filled {} of {requests} requests", i + 1);
        }
    }
    let records = requests * args.batch as u64;
    let bytes = records * args.record_bytes as u64;
    seal_segment(conn, &cluster, topic).await?;

    // 2. Upload.
    let round = format!("/v3/clusters/{cluster}/topics/{topic}/tiering:upload");
    let started = Instant::now();
    loop {
        let answer = conn
            .post(&round, "application/json", Bytes::from_static(b"{}"))
            .await?;
        let body: serde_json::Value = serde_json::from_slice(&answer.body)
            .with_context(|| format!("POST {round}: {}", answer.status))?;
        let partition = &body["partitions"][0];
        if let Some(error) = partition["error"].as_str() {
            bail!("upload round failed: {error}");
        }
        if partition["uploaded_end"].as_u64() == Some(records) {
            break;
        }
        ensure!(started.elapsed() < STEP_TIMEOUT, "upload not done: {body}");
    }
    let upload_time = started.elapsed();
    println!(
        "tiered: uploaded {records} records in {:.2} s",
        upload_time.as_secs_f64()
    );

    // 3. Remote fetch (every offset is below the local beginning now).
    let started = Instant::now();
    let mut next = 0u64;
    let mut fetched = 0u64;
    while next < records {
        let path = format!(
            "/topics/{topic}/partitions/0/records?offset={next}&max_records={}&max_bytes=8388608&timeout=0",
            args.batch
        );
        let answer = conn.get(&path, BINARY_V2).await?;
        ensure!(
            answer.status == StatusCode::OK,
            "remote fetch {path}: {} {:?}",
            answer.status,
            answer.body
        );
        let got: Vec<serde_json::Value> =
            serde_json::from_slice(&answer.body).context("remote fetch answer")?;
        let last = got
            .last()
            .and_then(|r| r["offset"].as_u64())
            .ok_or_else(|| anyhow!("remote fetch from {next}: no records"))?;
        fetched += got.len() as u64;
        next = last + 1;
        ensure!(
            started.elapsed() < STEP_TIMEOUT,
            "remote fetch not done at {next}"
        );
    }
    ensure!(fetched == records, "fetched {fetched} of {records} records");
    let fetch_time = started.elapsed();

    // 4. The same bytes through object_store alone.
    let tier = RemoteTier::open(&cfg).map_err(|e| anyhow!("opening the bucket: {e}"))?;
    let (put_time, get_time) = plain_put_get(&tier, bytes, cfg.object_bytes).await?;

    Ok(TieredFigures {
        bytes,
        records,
        upload_mb_per_s: mb_per_s(bytes, upload_time),
        plain_put_mb_per_s: mb_per_s(bytes, put_time),
        remote_fetch_mb_per_s: mb_per_s(bytes, fetch_time),
        plain_get_mb_per_s: mb_per_s(bytes, get_time),
    })
}

async fn create_tiered_topic(conn: &mut Conn, cluster: &str, topic: &str) -> anyhow::Result<()> {
    let body = serde_json::json!({
        "topic_name": topic,
        "partitions_count": 1,
        "configs": [
            {"name": "remote.storage.enable", "value": "true"},
            {"name": "local.retention.ms", "value": "1"},
        ],
    });
    let path = format!("/v3/clusters/{cluster}/topics");
    let answer = conn
        .post(&path, "application/json", Bytes::from(body.to_string()))
        .await?;
    ensure!(
        answer.status == StatusCode::CREATED,
        "POST {path}: {} {:?}",
        answer.status,
        answer.body
    );
    Ok(())
}

/// Enough records into another topic to seal the CommitLog segment that
/// holds the tiered topic's tail: 1 MiB requests of 16 KiB records (small
/// enough for any segment size) until the log has another segment, at
/// most 1.1 GiB (the default segment is 1 GiB).
async fn seal_segment(conn: &mut Conn, cluster: &str, topic: &str) -> anyhow::Result<()> {
    let filler = format!("{topic}-filler");
    crate::admin::ensure_topic(conn, cluster, &filler, 1).await?;
    let body = Bytes::from(produce_body(64, 16 << 10)?);
    let path = format!("/topics/{filler}/partitions/0");
    let stats = format!("/v3/clusters/{cluster}/stats");
    let start: serde_json::Value =
        serde_json::from_slice(&conn.get(&stats, "application/json").await?.body)?;
    let segments = |v: &serde_json::Value| v["commitlog_segments"].as_u64().unwrap_or(0);
    for _ in 0..1100 {
        let answer = conn.post(&path, BINARY_V2, body.clone()).await?;
        ensure!(
            answer.status == StatusCode::OK,
            "filler produce: {}",
            answer.status
        );
        let now: serde_json::Value =
            serde_json::from_slice(&conn.get(&stats, "application/json").await?.body)?;
        if segments(&now) > segments(&start) {
            return Ok(());
        }
    }
    bail!("the CommitLog did not roll to a new segment")
}

/// Puts `bytes` as objects of `object_bytes` and gets them back: the two
/// elapsed times. The objects are deleted after.
async fn plain_put_get(
    tier: &RemoteTier,
    bytes: u64,
    object_bytes: u64,
) -> anyhow::Result<(Duration, Duration)> {
    let store = tier.store();
    let objects = bytes.div_ceil(object_bytes.max(1));
    let payload = Bytes::from(record_value(object_bytes as usize, 7));
    let path = |i: u64| {
        tier.prefix()
            .clone()
            .join("bench-plain")
            .join(format!("{i:020}"))
    };
    let started = Instant::now();
    for i in 0..objects {
        store
            .put(&path(i), PutPayload::from(payload.clone()))
            .await
            .map_err(|e| anyhow!("plain put: {e}"))?;
    }
    let put_time = started.elapsed();
    let started = Instant::now();
    for i in 0..objects {
        let got = store
            .get(&path(i))
            .await
            .map_err(|e| anyhow!("plain get: {e}"))?
            .bytes()
            .await
            .map_err(|e| anyhow!("plain get body: {e}"))?;
        ensure!(got.len() == payload.len(), "plain get: {} bytes", got.len());
    }
    let get_time = started.elapsed();
    for i in 0..objects {
        let _ = store.delete(&path(i)).await;
    }
    Ok((put_time, get_time))
}
