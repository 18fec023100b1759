//! The bare Kafka listener: this machine's Kafka-protocol ceiling, measured
//! with the same load and client as tidelog's Kafka listener.
//!
//! It frames requests as tidelog's listener does (reads through a buffer
//! of the same size, length checked before the frame's buffer is
//! allocated, one request at a time per connection, answers in order) and serves the two APIs the load sends:
//! * Produce: the request decoded with `kafka-protocol`, every partition's
//!   record batches decoded with tidelog's own decoder
//!   (`tidelog_kafka::records::decode_batches`: CRC32C, every record's
//!   lengths, slices of the frame), which is what a broker must pay before
//!   it can store anything; answered with made-up offsets, stored nowhere.
//!   acks 0 gets no answer.
//! * Fetch: the request decoded, every partition answered with one batch
//!   of `batch` records of `record_bytes` built once at start (as the HTTP
//!   ceiling answers a pre-built array), whatever offset was asked.
//!
//! Any other API key closes the connection. It runs on its own runtime
//! ([`THREAD_NAME`] threads), as the HTTP ceiling does.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, RequestHeader,
    ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use tidelog_kafka::records::{decode_batches, encode_batch, OutRecord};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::ceiling::{serve_on_own_runtime, CeilingServer};

/// Threads of the bare listener's runtime (their CPU time is reported).
pub const THREAD_NAME: &str = "tidelog-bench-kafka-ceiling";
/// tidelog's default `kafka.max_request_bytes`: larger frames close the
/// connection, and a request's batches inflate into at most this.
const MAX_REQUEST_BYTES: usize = 100 << 20;
/// The offset the pre-built fetch batch starts at: realistic varint
/// widths, as deep in a partition.
const FETCH_BASE_OFFSET: u64 = 1_000_000;

struct Bare {
    fetch_batch: Bytes,
    next_offset: AtomicI64,
}

/// Starts the bare listener on 127.0.0.1 (a free port); fetches are
/// answered with `batch` records of `record_bytes`.
pub fn start(batch: usize, record_bytes: usize) -> anyhow::Result<CeilingServer> {
    let bare = Arc::new(Bare {
        fetch_batch: fetch_batch(batch, record_bytes),
        next_offset: AtomicI64::new(0),
    });
    serve_on_own_runtime(THREAD_NAME, "the bare Kafka listener", move |listener| {
        accept(listener, bare)
    })
}

async fn accept(listener: TcpListener, bare: Arc<Bare>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                eprintln!("tidelog bench: the bare Kafka listener stopped: {e}");
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let bare = Arc::clone(&bare);
        tokio::spawn(async move {
            // A load connection closing at the end of its slice is the
            // ordinary end; anything else the load reports on its side.
            let _ = connection(stream, &bare).await;
        });
    }
}

async fn connection(stream: TcpStream, bare: &Bare) -> anyhow::Result<()> {
    // Read as tidelog's listener reads (its buffer size, its frame read).
    let mut stream = BufReader::with_capacity(tidelog_kafka::listener::READ_BUFFER_BYTES, stream);
    loop {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).await.is_err() {
            return Ok(()); // closed between requests
        }
        let length = i32::from_be_bytes(len);
        let size = usize::try_from(length)
            .ok()
            .filter(|l| *l <= MAX_REQUEST_BYTES)
            .ok_or_else(|| anyhow!("a frame of {length} bytes"))?;
        let frame = tidelog_kafka::listener::read_frame_body(&mut stream, size).await?;
        if let Some(answer) = answer(bare, frame.freeze())? {
            stream.write_all(&answer).await?;
        }
    }
}

/// The answer frame to one request frame; `None` for a Produce with acks 0.
fn answer(bare: &Bare, frame: Bytes) -> anyhow::Result<Option<BytesMut>> {
    let prefix = frame
        .get(..4)
        .context("a frame without a key and version")?;
    let key = ApiKey::try_from(i16::from_be_bytes([prefix[0], prefix[1]]))
        .map_err(|_| anyhow!("an unknown API key"))?;
    let version = i16::from_be_bytes([prefix[2], prefix[3]]);
    let mut buf = frame;
    let header = RequestHeader::decode(&mut buf, key.request_header_version(version))?;
    let id = header.correlation_id;
    match key {
        ApiKey::Produce => {
            let request = ProduceRequest::decode(&mut buf, version)?;
            let answer = produce(bare, request)?;
            answer.map(|a| encode(id, key, version, &a)).transpose()
        }
        ApiKey::Fetch => {
            let request = FetchRequest::decode(&mut buf, version)?;
            encode(id, key, version, &fetch(bare, request)).map(Some)
        }
        other => bail!("the bare listener serves Produce and Fetch, not {other:?}"),
    }
}

fn produce(bare: &Bare, request: ProduceRequest) -> anyhow::Result<Option<ProduceResponse>> {
    let mut budget = MAX_REQUEST_BYTES;
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let records = data.records.context("a partition without records")?;
            let decoded = decode_batches(&records, &mut budget)?;
            let count = i64::try_from(decoded.len())?;
            std::hint::black_box(&decoded);
            let base = bare.next_offset.fetch_add(count, Ordering::Relaxed);
            partitions.push(
                PartitionProduceResponse::default()
                    .with_index(data.index)
                    .with_base_offset(base)
                    .with_log_append_time_ms(-1)
                    .with_log_start_offset(0),
            );
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions),
        );
    }
    Ok((request.acks != 0).then(|| ProduceResponse::default().with_responses(responses)))
}

fn fetch(bare: &Bare, request: FetchRequest) -> FetchResponse {
    let end = (FETCH_BASE_OFFSET * 2) as i64;
    let responses = request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    PartitionData::default()
                        .with_partition_index(p.partition)
                        .with_high_watermark(end)
                        .with_last_stable_offset(end)
                        .with_log_start_offset(0)
                        .with_aborted_transactions(Some(Vec::new()))
                        .with_preferred_read_replica(BrokerId(-1))
                        .with_records(Some(bare.fetch_batch.clone()))
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        })
        .collect();
    FetchResponse::default().with_responses(responses)
}

/// One uncompressed batch of `batch` keyless records of `record_bytes`.
fn fetch_batch(batch: usize, record_bytes: usize) -> Bytes {
    let value = crate::body::record_value(record_bytes, 0);
    let timestamp = crate::body::now_ms();
    let mut out = Vec::new();
    encode_batch(
        &mut out,
        (0..batch as u64).map(|i| OutRecord {
            offset: FETCH_BASE_OFFSET + i,
            timestamp_ms: timestamp,
            key: None,
            value: Some(&value),
            headers: Vec::new(),
        }),
    );
    Bytes::from(out)
}

/// Length prefix, response header, body, in one buffer sized up front.
fn encode<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    key: ApiKey,
    version: i16,
    body: &R,
) -> anyhow::Result<BytesMut> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = key.response_header_version(version);
    let size = header.compute_size(header_version)? + body.compute_size(version)?;
    let mut out = BytesMut::with_capacity(4 + size);
    out.put_i32(i32::try_from(size)?);
    header.encode(&mut out, header_version)?;
    body.encode(&mut out, version)?;
    Ok(out)
}
