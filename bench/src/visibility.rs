//! The visibility phase (tidelog only): a long-poll waiting at the end of
//! an idle partition, one record produced, the time until the answer.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context as _};
use bytes::Bytes;
use hyper::StatusCode;
use tidelog_api::records::BINARY_V2;

use crate::admin::partition_offsets;
use crate::body::{keyed_produce_bodies, produce_body};
use crate::client::{count_occurrences, Conn};
use crate::histogram::Histogram;
use crate::measured::Visibility;
use crate::BenchArgs;

/// Long-poll timeout of the visibility fetcher (ms).
const VISIBILITY_TIMEOUT_MS: u64 = 1000;
/// How long the visibility fetcher is given to park in its long-poll
/// before the record is produced (loopback round trips take ~0.1 ms).
const VISIBILITY_PARK: Duration = Duration::from_millis(5);

/// `keyed`: the record has a key (a compact topic refuses keyless ones).
pub(crate) async fn visibility(
    addr: SocketAddr,
    topic: &str,
    keyed: bool,
    args: &BenchArgs,
) -> anyhow::Result<Visibility> {
    let mut producer = Conn::connect(addr).await?;
    let mut fetcher = Some(Conn::connect(addr).await?);
    let (_, mut end) = partition_offsets(&mut producer, topic, 0).await?;
    let body = Bytes::from(if keyed {
        keyed_produce_bodies(1, 1, args.record_bytes, 1)?.concat()
    } else {
        produce_body(1, args.record_bytes)?
    });
    let produce_path = format!("/topics/{topic}/partitions/0");
    let warmup = (args.visibility_samples / 10).max(1);
    let mut result = Visibility {
        after_ack: Histogram::new(),
        after_send: Histogram::new(),
        before_ack: 0,
        missed: 0,
        first_error: None,
    };
    let label = "visibility tidelog";
    let started = Instant::now();
    let mut next_progress = started + Duration::from_secs(1);
    for sample in 0..(warmup + args.visibility_samples) {
        let mut conn = fetcher
            .take()
            .ok_or_else(|| anyhow!("visibility fetcher connection lost"))?;
        let path = format!(
            "/topics/{topic}/partitions/0/records?offset={end}&max_records=1&timeout={VISIBILITY_TIMEOUT_MS}"
        );
        let waiting = tokio::spawn(async move {
            let answer = conn.get(&path, BINARY_V2).await;
            (answer, Instant::now(), conn)
        });
        tokio::time::sleep(VISIBILITY_PARK).await;
        let sent = Instant::now();
        let produced = producer
            .post(&produce_path, BINARY_V2, body.clone())
            .await?;
        let acked = Instant::now();
        ensure!(
            produced.status == StatusCode::OK,
            "visibility produce: status {}: {}",
            produced.status,
            String::from_utf8_lossy(&produced.body)
        );
        end += 1;
        let (answer, answered, conn) = waiting.await.context("the visibility fetcher panicked")?;
        fetcher = Some(conn);
        let got = match answer {
            Ok(a) if a.status == StatusCode::OK => count_occurrences(&a.body, b"\"offset\":"),
            Ok(a) => {
                result
                    .first_error
                    .get_or_insert(format!("status {}", a.status));
                0
            }
            Err(e) => {
                result.first_error.get_or_insert(format!("{e:#}"));
                // The connection may be broken: start a new one.
                fetcher = Some(Conn::connect(addr).await?);
                0
            }
        };
        if sample < warmup {
            continue;
        }
        if got == 0 {
            result.missed += 1;
            continue;
        }
        if answered < acked {
            result.before_ack += 1;
        }
        result
            .after_ack
            .record(answered.saturating_duration_since(acked));
        result.after_send.record(answered - sent);
        if Instant::now() >= next_progress {
            println!(
                "  [{label}] {:>3} s: {} samples",
                started.elapsed().as_secs(),
                result.after_ack.count()
            );
            next_progress += Duration::from_secs(1);
        }
    }
    Ok(result)
}
