//! The load generator's Kafka client: one TCP connection per load task
//! (TLS and a SCRAM login over it towards a SASL_SSL listener:
//! `secure.rs`), requests encoded with the `kafka-protocol` crate, one request in
//! flight per connection (as the HTTP load sends one request at a time per
//! keep-alive connection, so the two protocols' figures compare), and the
//! answers checked and counted without decoding every record.
//!
//! Produce frames are encoded once per partition at the start of a phase
//! and sent as they are (the same batch again and again: without a
//! producer id the broker does not look at sequences); fetch frames are
//! encoded per request, since each names the next offset.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context as _};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, RequestHeader,
    ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tidelog_kafka::records::{encode_batch, OutRecord};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use tidelog_security::scram::client::ClientLogin;

use crate::secure::{self, Login, Secure, Stream};

/// The versions the load sends: the highest tidelog serves (flexible, as
/// current librdkafka and the Java client pick).
pub(crate) const PRODUCE_VERSION: i16 = 9;
pub(crate) const FETCH_VERSION: i16 = 12;
/// The one correlation id of every request (one in flight at a time).
const CORRELATION_ID: i32 = 1;
/// An answer frame longer than this is refused before it is allocated.
const ANSWER_BYTES_MAX: usize = 256 << 20;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One connection to a Kafka listener.
pub(crate) struct KafkaConn {
    stream: Stream,
}

impl KafkaConn {
    /// A plain connection.
    pub(crate) async fn connect(addr: SocketAddr) -> anyhow::Result<KafkaConn> {
        KafkaConn::connect_secure(addr, None).await
    }

    /// A connection over TLS, logged in, when `secure` says so.
    pub(crate) async fn connect_secure(
        addr: SocketAddr,
        secure: Option<&Secure>,
    ) -> anyhow::Result<KafkaConn> {
        let stream = secure::connect(addr, secure).await?;
        let mut conn = KafkaConn { stream };
        if let Some(login) = secure.and_then(Secure::login) {
            sasl_login(&mut conn, login)
                .await
                .with_context(|| format!("logging in to {addr} as {}", login.user))?;
        }
        Ok(conn)
    }

    /// Sends `frame` (length prefix included) and returns its answer's
    /// frame without the length prefix.
    pub(crate) async fn call(&mut self, frame: &[u8]) -> anyhow::Result<Bytes> {
        tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(frame))
            .await
            .map_err(|_| anyhow!("no answer within {REQUEST_TIMEOUT:?}"))?
    }

    async fn exchange(&mut self, frame: &[u8]) -> anyhow::Result<Bytes> {
        self.stream
            .write_all(frame)
            .await
            .context("sending a request")?;
        // TLS may hold the last record until flushed (plain TCP: a no-op).
        self.stream.flush().await.context("sending a request")?;
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .await
            .context("reading an answer's length")?;
        let len = usize::try_from(i32::from_be_bytes(len))
            .ok()
            .filter(|l| *l <= ANSWER_BYTES_MAX)
            .ok_or_else(|| anyhow!("answer length {len:?} out of bounds"))?;
        let mut answer = BytesMut::zeroed(len);
        self.stream
            .read_exact(&mut answer)
            .await
            .context("reading an answer")?;
        Ok(answer.freeze())
    }
}

/// A request frame: length prefix, header, body.
pub(crate) fn request_frame<R: Encodable>(
    key: ApiKey,
    version: i16,
    body: &R,
) -> anyhow::Result<Bytes> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(CORRELATION_ID)
        .with_client_id(Some(StrBytes::from_static_str("tidelog-bench")));
    let mut out = BytesMut::new();
    out.put_i32(0);
    header.encode(&mut out, key.request_header_version(version))?;
    body.encode(&mut out, version)?;
    let length = i32::try_from(out.len() - 4).context("a request frame over 2 GiB")?;
    out[..4].copy_from_slice(&length.to_be_bytes());
    Ok(out.freeze())
}

/// One uncompressed batch of `records` keyless values of `record_bytes`
/// (the HTTP load's values), as a producer without idempotence sends it.
pub(crate) fn produce_batch(records: usize, record_bytes: usize) -> Bytes {
    let values: Vec<Vec<u8>> = (0..records)
        .map(|i| crate::body::record_value(record_bytes, i as u64))
        .collect();
    let timestamp = crate::body::now_ms();
    let mut out = Vec::new();
    encode_batch(
        &mut out,
        values.iter().enumerate().map(|(i, value)| OutRecord {
            offset: i as u64,
            timestamp_ms: timestamp,
            key: None,
            value: Some(value),
            headers: Vec::new(),
        }),
    );
    Bytes::from(out)
}

/// A Produce of `batch` to `topic`'s `partition` with `acks`.
pub(crate) fn produce_frame(
    topic: &str,
    partition: i32,
    acks: i16,
    batch: Bytes,
) -> anyhow::Result<Bytes> {
    produce_frame_as(topic, partition, acks, None, batch)
}

/// [`produce_frame`] naming the producer's `transactional_id`, as a
/// transactional producer's Produce does.
pub(crate) fn produce_frame_as(
    topic: &str,
    partition: i32,
    acks: i16,
    transactional_id: Option<&str>,
    batch: Bytes,
) -> anyhow::Result<Bytes> {
    let request = ProduceRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_owned()))),
        )
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]);
    request_frame(ApiKey::Produce, PRODUCE_VERSION, &request)
}

/// A Fetch of `topic`'s `partition` from `offset`, at most `max_bytes`,
/// answered at once (`max_wait_ms` 0, as the HTTP load's `timeout=0`).
pub(crate) fn fetch_frame(
    topic: &TopicName,
    partition: i32,
    offset: u64,
    max_bytes: i32,
) -> anyhow::Result<Bytes> {
    fetch_frame_with(topic, partition, offset, max_bytes, FetchMode::default())
}

/// How a Fetch reads: its `isolation_level` (0 read_uncommitted, 1
/// read_committed) and how long it may wait for a first byte.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FetchMode {
    pub(crate) isolation_level: i8,
    pub(crate) max_wait_ms: i32,
}

/// [`fetch_frame`] read as `mode` says (`min_bytes` 1: a wait ends at
/// the first record).
pub(crate) fn fetch_frame_with(
    topic: &TopicName,
    partition: i32,
    offset: u64,
    max_bytes: i32,
    mode: FetchMode,
) -> anyhow::Result<Bytes> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(mode.max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_isolation_level(mode.isolation_level)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic.clone())
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset as i64)
                .with_partition_max_bytes(max_bytes)])]);
    request_frame(ApiKey::Fetch, FETCH_VERSION, &request)
}

pub(crate) fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// The answer's header, checked to be this connection's.
fn answer_body(mut answer: Bytes, key: ApiKey, version: i16) -> anyhow::Result<Bytes> {
    let header = ResponseHeader::decode(&mut answer, key.response_header_version(version))?;
    ensure!(
        header.correlation_id == CORRELATION_ID,
        "an answer with correlation id {}, not {CORRELATION_ID}",
        header.correlation_id
    );
    Ok(answer)
}

/// Checks a Produce answer: every partition acknowledged without error.
pub(crate) fn check_produced(answer: Bytes) -> anyhow::Result<()> {
    produced_offset(answer).map(|_| ())
}

/// [`check_produced`], and the base offset of the last partition's
/// records.
pub(crate) fn produced_offset(answer: Bytes) -> anyhow::Result<i64> {
    let mut body = answer_body(answer, ApiKey::Produce, PRODUCE_VERSION)?;
    let response = ProduceResponse::decode(&mut body, PRODUCE_VERSION)?;
    let mut partitions = 0;
    let mut base_offset = -1;
    for topic in &response.responses {
        for p in &topic.partition_responses {
            partitions += 1;
            base_offset = p.base_offset;
            if p.error_code != 0 || p.base_offset < 0 {
                bail!(
                    "produce to partition {} refused: error {} ({})",
                    p.index,
                    p.error_code,
                    p.error_message.as_deref().unwrap_or("")
                );
            }
        }
    }
    ensure!(partitions > 0, "a produce answer without partitions");
    Ok(base_offset)
}

/// Checks a Fetch answer (no partition error) and counts its records from
/// the batch headers (batchLength, record count), without decoding every
/// record.
pub(crate) fn check_fetched(answer: Bytes) -> anyhow::Result<u64> {
    Ok(check_fetched_batches(answer)?.records)
}

/// What a Fetch answer carried, read from its batch headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fetched {
    /// Records of data batches; a transaction marker (a control batch,
    /// attribute bit 5) is not a record a consumer sees.
    pub(crate) records: u64,
    /// The offset after the last batch (control batches included: a
    /// marker takes an offset of its own), where the next fetch starts.
    pub(crate) next_offset: Option<u64>,
    /// The last partition's high watermark and last stable offset.
    pub(crate) high_watermark: i64,
    pub(crate) last_stable_offset: i64,
}

/// [`check_fetched`], with the next offset and the high watermark.
pub(crate) fn check_fetched_batches(answer: Bytes) -> anyhow::Result<Fetched> {
    let mut body = answer_body(answer, ApiKey::Fetch, FETCH_VERSION)?;
    let response = FetchResponse::decode(&mut body, FETCH_VERSION)?;
    ensure!(
        response.error_code == 0,
        "fetch refused: error {}",
        response.error_code
    );
    let mut fetched = Fetched {
        records: 0,
        next_offset: None,
        high_watermark: -1,
        last_stable_offset: -1,
    };
    for topic in &response.responses {
        for p in &topic.partitions {
            ensure!(
                p.error_code == 0,
                "fetch of partition {} refused: error {}",
                p.partition_index,
                p.error_code
            );
            fetched.high_watermark = p.high_watermark;
            fetched.last_stable_offset = p.last_stable_offset;
            let data = p.records.as_deref().unwrap_or_default();
            let mut at = 0;
            while at < data.len() {
                let batch = batch_header(&data[at..])?;
                if !batch.control {
                    fetched.records += batch.count;
                }
                fetched.next_offset = Some(batch.next_offset);
                at += batch.size;
            }
        }
    }
    Ok(fetched)
}

/// What the load reads of a batch's header.
struct BatchHeader {
    count: u64,
    size: usize,
    control: bool,
    next_offset: u64,
}

/// The header of the batch at the start of `data`.
fn batch_header(data: &[u8]) -> anyhow::Result<BatchHeader> {
    let field = |at: usize, len: usize| -> anyhow::Result<&[u8]> {
        data.get(at..at + len)
            .ok_or_else(|| anyhow!("a batch header cut short ({} bytes)", data.len()))
    };
    let be_i32 = |at: usize| -> anyhow::Result<i32> {
        let b = field(at, 4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    // baseOffset, then batchLength; the record count ends the 61-byte
    // header (layout: `batch` below).
    let base = field(batch::BASE_OFFSET_AT, 8)?;
    let base = i64::from_be_bytes([
        base[0], base[1], base[2], base[3], base[4], base[5], base[6], base[7],
    ]);
    let length = be_i32(batch::LENGTH_AT)?;
    let attributes = field(batch::ATTRIBUTES_AT, 2)?;
    let attributes = i16::from_be_bytes([attributes[0], attributes[1]]);
    let last_delta = be_i32(batch::LAST_OFFSET_DELTA_AT)?;
    let count = be_i32(batch::RECORDS_COUNT_AT)?;
    let size = usize::try_from(length)
        .ok()
        .map(|l| l + batch::LENGTH_AT + 4)
        .filter(|s| *s <= data.len())
        .ok_or_else(|| anyhow!("a batch of length {length} in {} bytes", data.len()))?;
    let count = u64::try_from(count).map_err(|_| anyhow!("a batch of {count} records"))?;
    let next_offset = u64::try_from(base)
        .ok()
        .zip(u64::try_from(last_delta).ok())
        .map(|(base, delta)| base + delta + 1)
        .ok_or_else(|| anyhow!("a batch at offset {base} with last offset delta {last_delta}"))?;
    Ok(BatchHeader {
        count,
        size,
        control: attributes & batch::ATTR_CONTROL != 0,
        next_offset,
    })
}

/// Where the fields of a record batch (magic 2) are, from its first byte:
/// baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8,
/// crc u32 (CRC32C of everything from attributes to the batch's end),
/// attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp
/// i64, producerId i64, producerEpoch i16, baseSequence i32, records
/// count i32: 61 bytes, then the records.
pub(crate) mod batch {
    pub(crate) const BASE_OFFSET_AT: usize = 0;
    pub(crate) const LENGTH_AT: usize = BASE_OFFSET_AT + 8;
    const LEADER_EPOCH_AT: usize = LENGTH_AT + 4;
    const MAGIC_AT: usize = LEADER_EPOCH_AT + 4;
    pub(crate) const CRC_AT: usize = MAGIC_AT + 1;
    pub(crate) const ATTRIBUTES_AT: usize = CRC_AT + 4;
    pub(crate) const LAST_OFFSET_DELTA_AT: usize = ATTRIBUTES_AT + 2;
    const BASE_TIMESTAMP_AT: usize = LAST_OFFSET_DELTA_AT + 4;
    const MAX_TIMESTAMP_AT: usize = BASE_TIMESTAMP_AT + 8;
    pub(crate) const PRODUCER_ID_AT: usize = MAX_TIMESTAMP_AT + 8;
    pub(crate) const PRODUCER_EPOCH_AT: usize = PRODUCER_ID_AT + 8;
    pub(crate) const BASE_SEQUENCE_AT: usize = PRODUCER_EPOCH_AT + 2;
    pub(crate) const RECORDS_COUNT_AT: usize = BASE_SEQUENCE_AT + 4;
    pub(crate) const HEADER_BYTES: usize = RECORDS_COUNT_AT + 4;
    const _: () = assert!(HEADER_BYTES == 61);
    /// Attribute bit 4: a transaction's batch.
    pub(crate) const ATTR_TRANSACTIONAL: i16 = 0x10;
    /// Attribute bit 5: a control batch (a transaction marker).
    pub(crate) const ATTR_CONTROL: i16 = 0x20;
}

/// A SCRAM login on a fresh Kafka connection, as librdkafka makes it:
/// SaslHandshake v1 naming the mechanism, then the client-first and
/// client-final messages in SaslAuthenticate v2, and the server's
/// signature checked.
async fn sasl_login(conn: &mut KafkaConn, login: &Login) -> anyhow::Result<()> {
    const HANDSHAKE_VERSION: i16 = 1;
    const AUTHENTICATE_VERSION: i16 = 2;
    let handshake = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_static_str(secure::MECHANISM.name()));
    let frame = request_frame(ApiKey::SaslHandshake, HANDSHAKE_VERSION, &handshake)?;
    let answer: SaslHandshakeResponse = decode(
        conn.call(&frame).await?,
        ApiKey::SaslHandshake,
        HANDSHAKE_VERSION,
    )?;
    ensure!(
        answer.error_code == 0,
        "SaslHandshake {}: error {} (mechanisms {:?})",
        secure::MECHANISM.name(),
        answer.error_code,
        answer.mechanisms
    );
    let (client, first) =
        ClientLogin::start(secure::MECHANISM, &login.user, login.password.as_bytes())?;
    let server_first = authenticate(conn, first, AUTHENTICATE_VERSION).await?;
    let (last, expected) = client.finish(&server_first)?;
    let server_final = authenticate(conn, last, AUTHENTICATE_VERSION).await?;
    expected.verify(&server_final)?;
    Ok(())
}

/// One SaslAuthenticate round: the server's bytes, or its refusal.
async fn authenticate(conn: &mut KafkaConn, bytes: Vec<u8>, version: i16) -> anyhow::Result<Bytes> {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
    let frame = request_frame(ApiKey::SaslAuthenticate, version, &request)?;
    let answer: SaslAuthenticateResponse =
        decode(conn.call(&frame).await?, ApiKey::SaslAuthenticate, version)?;
    if answer.error_code != 0 {
        bail!(
            "SaslAuthenticate refused: error {} ({})",
            answer.error_code,
            answer.error_message.as_deref().unwrap_or("")
        );
    }
    Ok(answer.auth_bytes)
}

/// An answer's body of `key` at `version`, past its header.
pub(crate) fn decode<T: Decodable>(
    mut answer: Bytes,
    key: ApiKey,
    version: i16,
) -> anyhow::Result<T> {
    ResponseHeader::decode(&mut answer, key.response_header_version(version))?;
    T::decode(&mut answer, version)
}
