//! Transactions over real TCP on 127.0.0.1 (issue 38): FindCoordinator of
//! a transactional id, InitProducerId with one (epochs bumped, the old
//! producer fenced), AddPartitionsToTxn at v0 and v3 (an unknown
//! partition fails the call by name), transactional Produce only to added
//! partitions, EndTxn, and what read_committed fetches see meanwhile. A
//! module of `protocol.rs`, whose server and framing helpers it uses.
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpStream;

use super::idempotence::{idempotent, produce};
use super::{call, connect, fetch_request, metadata, name, server};

fn tx(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

async fn init(
    c: &mut TcpStream,
    version: i16,
    id: &str,
    current: (i64, i16),
) -> InitProducerIdResponse {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(tx(id)))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(current.0))
        .with_producer_epoch(current.1);
    call(c, ApiKey::InitProducerId, version, &request).await
}

/// AddPartitionsToTxn: each (partition, error code) asked, in order.
async fn add(
    c: &mut TcpStream,
    version: i16,
    producer: (i64, i16),
    partitions: &[(&str, i32)],
) -> Vec<(String, i32, i16)> {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (topic, p) in partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == *topic) {
            Some(t) => t.partitions.push(*p),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![*p]),
            ),
        }
    }
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(tx("t1"))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(topics);
    let answer: AddPartitionsToTxnResponse =
        call(c, ApiKey::AddPartitionsToTxn, version, &request).await;
    answer
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition.iter().map(move |p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.partition_error_code,
                )
            })
        })
        .collect()
}

async fn end(c: &mut TcpStream, version: i16, producer: (i64, i16), commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(tx("t1"))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    let answer: EndTxnResponse = call(c, ApiKey::EndTxn, version, &request).await;
    answer.error_code
}

/// `records` as the transaction's batch: the idempotent batch with the
/// transactional attribute (bit 4) and its CRC again.
fn transactional(records: &[(&[u8], &[u8])], producer: (i64, i16), sequence: i32) -> bytes::Bytes {
    let mut b = idempotent(records, producer.0, producer.1, sequence).to_vec();
    b[22] |= 0x10;
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes::Bytes::from(b)
}

/// (LSO, records) of a read_committed fetch of txp-0 from 0.
async fn committed(c: &mut TcpStream) -> (i64, usize) {
    let request = fetch_request("txp", 0, 0, 0).with_isolation_level(1);
    let answer: FetchResponse = call(c, ApiKey::Fetch, 12, &request).await;
    let p = &answer.responses[0].partitions[0];
    let bytes = p.records.clone().unwrap_or_default();
    // Count records by the batches' counts (control batches included).
    let mut at = 0;
    let mut n = 0;
    while at + 61 <= bytes.len() {
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let control = bytes[at + 22] & 0x20 != 0;
        if !control {
            n += i32::from_be_bytes(bytes[at + 57..at + 61].try_into().unwrap()) as usize;
        }
        at += 12 + length;
    }
    (p.last_stable_offset, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_through_the_kafka_apis() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["txp"]).await;

    let find = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("t1"))
        .with_key_type(1);
    let answer: FindCoordinatorResponse = call(&mut c, ApiKey::FindCoordinator, 3, &find).await;
    assert_eq!(answer.error_code, 0);
    // An empty transactional id names no coordinator.
    let empty = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str(""))
        .with_key_type(1);
    let answer: FindCoordinatorResponse = call(&mut c, ApiKey::FindCoordinator, 3, &empty).await;
    assert_eq!(answer.error_code, ResponseError::InvalidRequest.code());

    let first = init(&mut c, 0, "t1", (-1, -1)).await;
    assert_eq!((first.error_code, first.producer_epoch), (0, 0));
    let pid = first.producer_id.0;
    // KIP-360 (v3+): the current id and epoch name the producer; the
    // next epoch fences the previous one.
    let again = init(&mut c, 4, "t1", (pid, 0)).await;
    assert_eq!(
        (again.error_code, again.producer_id.0, again.producer_epoch),
        (0, pid, 1)
    );
    let producer = (pid, 1);
    let old = (pid, 0);

    // Not added yet: a transactional batch is refused.
    let (code, _) = produce(
        &mut c,
        "txp",
        0,
        transactional(&[(b"k", b"v0")], producer, 0),
    )
    .await;
    assert_eq!(code, ResponseError::InvalidTxnState.code());
    // An unknown partition fails the call by name, the rest not attempted.
    let got = add(&mut c, 3, producer, &[("txp", 0), ("txp", 9)]).await;
    assert_eq!(
        got,
        [
            (
                "txp".to_string(),
                0,
                ResponseError::OperationNotAttempted.code()
            ),
            (
                "txp".to_string(),
                9,
                ResponseError::UnknownTopicOrPartition.code()
            )
        ]
    );
    for version in [0, 3] {
        let got = add(&mut c, version, producer, &[("txp", 0), ("txp", 1)]).await;
        assert!(
            got.iter().all(|(_, _, code)| *code == 0),
            "v{version}: {got:?}"
        );
    }
    assert_eq!(
        add(&mut c, 3, old, &[("txp", 0)]).await[0].2,
        ResponseError::ProducerFenced.code()
    );
    let (code, base) = produce(
        &mut c,
        "txp",
        0,
        transactional(&[(b"k", b"v0"), (b"k", b"v1")], producer, 0),
    )
    .await;
    assert_eq!((code, base), (0, 0));
    // The old epoch's batch is fenced in the partition too.
    let (code, _) = produce(&mut c, "txp", 0, transactional(&[(b"k", b"z")], old, 0)).await;
    assert_eq!(code, ResponseError::InvalidProducerEpoch.code());
    // Open: read_committed sees nothing yet.
    assert_eq!(committed(&mut c).await, (0, 0));
    assert_eq!(
        end(&mut c, 3, old, true).await,
        ResponseError::ProducerFenced.code()
    );
    assert_eq!(end(&mut c, 0, producer, true).await, 0);
    // Committed: both records, and the LSO past the marker once the
    // dispatcher has it (a fetch that finds records answers at once, with
    // the LSO of that moment, as Kafka's may lag its EndTxn).
    let dispatched = s
        .broker
        .store()
        .wait_dispatched(std::time::Duration::from_secs(10));
    assert!(dispatched);
    assert_eq!(committed(&mut c).await, (3, 2));
    // A retried commit is answered as made; an abort now is refused.
    assert_eq!(end(&mut c, 3, producer, true).await, 0);
    assert_eq!(
        end(&mut c, 3, producer, false).await,
        ResponseError::InvalidTxnState.code()
    );
    // The next transaction aborts: read_committed still sees two.
    assert!(add(&mut c, 3, producer, &[("txp", 0)])
        .await
        .iter()
        .all(|r| r.2 == 0));
    let (code, _) = produce(
        &mut c,
        "txp",
        0,
        transactional(&[(b"k", b"gone")], producer, 2),
    )
    .await;
    assert_eq!(code, 0);
    assert_eq!(end(&mut c, 3, producer, false).await, 0);
    assert!(s
        .broker
        .store()
        .wait_dispatched(std::time::Duration::from_secs(10)));
    let request = fetch_request("txp", 0, 0, 0).with_isolation_level(1);
    let answer: FetchResponse = call(&mut c, ApiKey::Fetch, 12, &request).await;
    let p = &answer.responses[0].partitions[0];
    assert_eq!(p.last_stable_offset, 5);
    assert_eq!(p.aborted_transactions.as_ref().unwrap().len(), 1);
}

/// AddOffsetsToTxn and TxnOffsetCommit (v0 and v3): the offsets commit
/// with the transaction; v3's generation fences a consumer that is not
/// the group's member (KIP-447).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactions_offsets_commit_with_it() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["txp"]).await;
    let first = init(&mut c, 4, "t1", (-1, -1)).await;
    let producer = (first.producer_id.0, first.producer_epoch);
    for version in [0, 3] {
        let add = AddOffsetsToTxnRequest::default()
            .with_transactional_id(tx("t1"))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_group_id(GroupId(StrBytes::from_static_str("g2")));
        let answer: AddOffsetsToTxnResponse =
            call(&mut c, ApiKey::AddOffsetsToTxn, version, &add).await;
        assert_eq!(answer.error_code, 0, "v{version}");
    }
    let commit = |offset: i64, generation: i32| {
        use kafka_protocol::messages::txn_offset_commit_request::{
            TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
        };
        TxnOffsetCommitRequest::default()
            .with_transactional_id(tx("t1"))
            .with_group_id(GroupId(StrBytes::from_static_str("g2")))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_generation_id(generation)
            .with_member_id(if generation >= 0 {
                StrBytes::from_static_str("nobody")
            } else {
                StrBytes::default()
            })
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(name("txp"))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(-1)])])
    };
    let answer: TxnOffsetCommitResponse =
        call(&mut c, ApiKey::TxnOffsetCommit, 0, &commit(1, -1)).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, 0);
    // v3 from a member the group does not have: refused, nothing added.
    let answer: TxnOffsetCommitResponse =
        call(&mut c, ApiKey::TxnOffsetCommit, 3, &commit(2, 5)).await;
    assert_ne!(answer.topics[0].partitions[0].error_code, 0);
    let answer: TxnOffsetCommitResponse =
        call(&mut c, ApiKey::TxnOffsetCommit, 3, &commit(1, -1)).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, 0);
    assert_eq!(group_offset(&mut c).await, -1, "nothing before the commit");
    assert_eq!(end(&mut c, 3, producer, true).await, 0);
    assert_eq!(group_offset(&mut c).await, 1);
}

/// g2's committed offset of txp-0 (OffsetFetch v5), -1 for none.
async fn group_offset(c: &mut TcpStream) -> i64 {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g2")))
        .with_topics(Some(vec![
            kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(name("txp"))
                .with_partition_indexes(vec![0]),
        ]));
    let answer: OffsetFetchResponse = call(c, ApiKey::OffsetFetch, 5, &request).await;
    answer.topics[0].partitions[0].committed_offset
}

/// ListTransactions (v0, v1) and DescribeTransactions (KIP-664).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_are_listed_and_described() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["txp"]).await;
    let first = init(&mut c, 4, "t1", (-1, -1)).await;
    let producer = (first.producer_id.0, first.producer_epoch);
    assert!(add(&mut c, 3, producer, &[("txp", 1)])
        .await
        .iter()
        .all(|r| r.2 == 0));

    let list = |states: &[&str], _version: i16| {
        ListTransactionsRequest::default()
            .with_state_filters(
                states
                    .iter()
                    .map(|s| StrBytes::from_string(s.to_string()))
                    .collect(),
            )
            .with_duration_filter(-1)
    };
    for version in [0, 1] {
        let answer: ListTransactionsResponse = call(
            &mut c,
            ApiKey::ListTransactions,
            version,
            &list(&[], version),
        )
        .await;
        let got: Vec<_> = answer
            .transaction_states
            .iter()
            .map(|t| {
                (
                    t.transactional_id.0.to_string(),
                    t.producer_id.0,
                    t.transaction_state.to_string(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [("t1".to_string(), producer.0, "Ongoing".to_string())],
            "v{version}"
        );
    }
    let answer: ListTransactionsResponse = call(
        &mut c,
        ApiKey::ListTransactions,
        1,
        &list(&["CompleteCommit", "Nope"], 1),
    )
    .await;
    assert!(answer.transaction_states.is_empty());
    assert_eq!(
        answer.unknown_state_filters,
        [StrBytes::from_static_str("Nope")]
    );

    let describe =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![tx("t1"), tx("nope")]);
    let answer: DescribeTransactionsResponse =
        call(&mut c, ApiKey::DescribeTransactions, 0, &describe).await;
    let t1 = &answer.transaction_states[0];
    assert_eq!(t1.error_code, 0);
    assert_eq!(t1.transaction_state.as_str(), "Ongoing");
    assert_eq!((t1.producer_id.0, t1.producer_epoch), producer);
    assert_eq!(t1.transaction_timeout_ms, 60_000);
    assert!(t1.transaction_start_time_ms > 0);
    assert_eq!(t1.topics.len(), 1);
    assert_eq!(
        (t1.topics[0].topic.0.as_str(), &t1.topics[0].partitions[..]),
        ("txp", &[1][..])
    );
    assert_eq!(
        answer.transaction_states[1].error_code,
        ResponseError::TransactionalIdNotFound.code()
    );
}

/// DescribeProducers (KIP-664): each producer with state in a partition,
/// its epoch, last sequence and the first offset of its open transaction;
/// an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_are_described() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["txp"]).await;
    // An idempotent producer writes 3 records to txp-0.
    let answer: InitProducerIdResponse = call(
        &mut c,
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    )
    .await;
    let plain = answer.producer_id.0;
    let records: [(&[u8], &[u8]); 3] = [(b"k", b"0"), (b"k", b"1"), (b"k", b"2")];
    assert_eq!(
        produce(&mut c, "txp", 0, idempotent(&records, plain, 0, 0))
            .await
            .0,
        0
    );
    // A transactional one opens a transaction there at offset 3.
    let first = init(&mut c, 4, "t1", (-1, -1)).await;
    let producer = (first.producer_id.0, first.producer_epoch);
    assert!(add(&mut c, 3, producer, &[("txp", 0)])
        .await
        .iter()
        .all(|r| r.2 == 0));
    let (code, offset) = produce(
        &mut c,
        "txp",
        0,
        transactional(&[(b"k", b"t")], producer, 0),
    )
    .await;
    assert_eq!((code, offset), (0, 3));

    let request = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(name("txp"))
            .with_partition_indexes(vec![0, 1, 99]),
        describe_producers_request::TopicRequest::default()
            .with_name(name("nope"))
            .with_partition_indexes(vec![0]),
    ]);
    let answer: DescribeProducersResponse =
        call(&mut c, ApiKey::DescribeProducers, 0, &request).await;
    let txp = &answer.topics[0].partitions;
    let got: Vec<_> = txp[0]
        .active_producers
        .iter()
        .map(|p| {
            (
                p.producer_id.0,
                p.producer_epoch,
                p.last_sequence,
                p.current_txn_start_offset,
            )
        })
        .collect();
    assert_eq!(
        got,
        [(plain, 0, 2, -1), (producer.0, i32::from(producer.1), 0, 3)]
    );
    assert!(txp[0].active_producers.iter().all(|p| p.last_timestamp > 0));
    assert_eq!((txp[1].error_code, txp[1].active_producers.len()), (0, 0));
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(txp[2].error_code, unknown);
    assert_eq!(answer.topics[1].partitions[0].error_code, unknown);

    // Once the transaction commits, none is open.
    assert_eq!(end(&mut c, 3, producer, true).await, 0);
    let answer: DescribeProducersResponse =
        call(&mut c, ApiKey::DescribeProducers, 0, &request).await;
    assert!(answer.topics[0].partitions[0]
        .active_producers
        .iter()
        .all(|p| p.current_txn_start_offset == -1));
}
