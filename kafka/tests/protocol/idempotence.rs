//! Idempotent producers over real TCP on 127.0.0.1: InitProducerId at its
//! lowest and highest served version, and Produce batches with a producer
//! id, epoch and base sequence, encoded as Kafka clients send them: a
//! retried batch answers its original base offset and writes nothing, a
//! gap, an old epoch and an unknown producer are refused per partition, a
//! batch of several records moves the sequence by its count, and two
//! partitions keep their own sequences. A module of `protocol.rs`, whose
//! server and framing helpers it uses.
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use tokio::net::TcpStream;

use super::{batch, call, connect, fetch_n, metadata, name, produce_request, record, server};

/// `records` as an idempotent producer's batch: the batch header's
/// producer id, epoch and base sequence set and its CRC32C recomputed.
pub(super) fn idempotent(
    records: &[(&[u8], &[u8])],
    producer_id: i64,
    epoch: i16,
    sequence: i32,
) -> Bytes {
    let out: Vec<_> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            let mut r = record(Some(k), Some(v), 1_700_000_000_000 + i as i64);
            r.offset = i as u64;
            r
        })
        .collect();
    let mut b = batch(&out).to_vec();
    // baseOffset 8, batchLength 4, leader epoch 4, magic 1, crc 4,
    // attributes 2, lastOffsetDelta 4, baseTimestamp 8, maxTimestamp 8.
    const PRODUCER_ID_AT: usize = 43;
    b[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&producer_id.to_be_bytes());
    b[PRODUCER_ID_AT + 8..PRODUCER_ID_AT + 10].copy_from_slice(&epoch.to_be_bytes());
    b[PRODUCER_ID_AT + 10..PRODUCER_ID_AT + 14].copy_from_slice(&sequence.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

pub(super) async fn init(
    c: &mut TcpStream,
    version: i16,
    current: Option<(i64, i16)>,
) -> InitProducerIdResponse {
    let (id, epoch) = current.unwrap_or((-1, -1));
    let request = InitProducerIdRequest::default()
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch);
    call(c, ApiKey::InitProducerId, version, &request).await
}

/// Produce v9 of one batch to `topic`-`partition`: (error code, base
/// offset).
pub(super) async fn produce(
    c: &mut TcpStream,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> (i16, i64) {
    let answer: ProduceResponse = call(
        c,
        ApiKey::Produce,
        9,
        &produce_request(topic, partition, -1, records),
    )
    .await;
    let p = &answer.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_producer_id_hands_out_ids_and_bumps_epochs() {
    let s = server().await;
    let mut c = connect(&s).await;
    let first = init(&mut c, 0, None).await;
    assert_eq!(first.error_code, 0);
    assert!(first.producer_id.0 >= 0);
    assert_eq!(first.producer_epoch, 0);
    let second = init(&mut c, 4, None).await;
    assert_eq!(second.error_code, 0);
    assert_ne!(second.producer_id, first.producer_id);
    // v3+ with the current id and epoch: the same id, the next epoch.
    let bumped = init(&mut c, 4, Some((second.producer_id.0, 0))).await;
    assert_eq!(
        (bumped.error_code, bumped.producer_id, bumped.producer_epoch),
        (0, second.producer_id, 1)
    );
    // An id never handed out gets a new one.
    let stranger = init(&mut c, 3, Some((1 << 40, 3))).await;
    assert_eq!(stranger.producer_epoch, 0);
    assert_ne!(stranger.producer_id.0, 1 << 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_batches_are_checked_as_kafka_checks_them() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["idem"]).await;
    let id = init(&mut c, 4, None).await.producer_id.0;
    let three: &[(&[u8], &[u8])] = &[(b"a", b"1"), (b"b", b"2"), (b"c", b"3")];
    // A batch of three records, then its retry: the original offset, not
    // written again.
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent(three, id, 0, 0)).await,
        (0, 0)
    );
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent(three, id, 0, 0)).await,
        (0, 0)
    );
    // A gap: the next sequence is 3.
    let one: &[(&[u8], &[u8])] = &[(b"d", b"4")];
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent(one, id, 0, 5))
            .await
            .0,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent(one, id, 0, 3)).await,
        (0, 3)
    );
    // A new epoch starts at 0; then the old epoch is fenced.
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent(one, id, 1, 4))
            .await
            .0,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent(one, id, 1, 0)).await,
        (0, 4)
    );
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent(one, id, 0, 4))
            .await
            .0,
        ResponseError::InvalidProducerEpoch.code()
    );
    // A producer with no state here whose batch does not start at 0.
    let stranger = init(&mut c, 4, None).await.producer_id.0;
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent(one, stranger, 0, 9))
            .await
            .0,
        ResponseError::UnknownProducerId.code()
    );
    // Every record once, in order.
    let got = fetch_n(&mut c, 12, "idem", 0, 0, 5).await;
    let values: Vec<&[u8]> = got.iter().map(|r| r.value.as_deref().unwrap()).collect();
    assert_eq!(values, [&b"1"[..], b"2", b"3", b"4", b"4"]);
    assert_eq!(s.broker.partition("idem", 0).unwrap().offsets(), (0, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_partitions_of_one_request_keep_their_own_sequences() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["pair"]).await;
    let id = init(&mut c, 4, None).await.producer_id.0;
    let two: &[(&[u8], &[u8])] = &[(b"a", b"1"), (b"b", b"2")];
    let request = |seq0: i32, seq1: i32| {
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("pair"))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(idempotent(two, id, 0, seq0))),
                    PartitionProduceData::default()
                        .with_index(1)
                        .with_records(Some(idempotent(two, id, 0, seq1))),
                ])])
    };
    // (error code, base offset) of each partition.
    let answers = |answer: ProduceResponse| -> Vec<(i16, i64)> {
        answer.responses[0]
            .partition_responses
            .iter()
            .map(|p| (p.error_code, p.base_offset))
            .collect()
    };
    let answer = call(&mut c, ApiKey::Produce, 3, &request(0, 0)).await;
    assert_eq!(answers(answer), [(0, 0), (0, 0)]);
    // Partition 0 retried (a duplicate), partition 1 one batch on; then
    // partition 1 out of order while 0 goes on: errors are per partition.
    let answer = call(&mut c, ApiKey::Produce, 9, &request(0, 2)).await;
    assert_eq!(answers(answer), [(0, 0), (0, 2)]);
    let answer = call(&mut c, ApiKey::Produce, 9, &request(2, 7)).await;
    let got = answers(answer);
    assert_eq!(got[0], (0, 2));
    assert_eq!(got[1].0, ResponseError::OutOfOrderSequenceNumber.code());
    // Two batches of two in each partition, nothing more.
    for p in 0..2 {
        let got = fetch_n(&mut c, 12, "pair", p, 0, 4).await;
        assert_eq!(got.len(), 4, "partition {p}");
    }
    // Two batches of one producer in one partition: Kafka refuses it.
    let both = Bytes::from(
        [
            idempotent(two, id, 0, 4).to_vec(),
            idempotent(two, id, 0, 6).to_vec(),
        ]
        .concat(),
    );
    assert_eq!(
        produce(&mut c, "pair", 0, both).await.0,
        ResponseError::InvalidRecord.code()
    );
}
