//! Reads of a transaction's records over real TCP on 127.0.0.1 (issue
//! 38): the store is written directly (no transaction API is served yet),
//! then Fetch at both isolation levels and ListOffsets answer as Kafka's
//! broker does: a transaction's records in batches of their producer, its
//! markers as control batches, read_committed reads ending at the last
//! stable offset with the aborted transactions they span named. A module
//! of `protocol.rs`, whose server and framing helpers it uses.
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;
use tidelog_broker::store::{AppendRecord, MarkerSpec, ProducerAppend, ProducerBatch, Store};

use super::{call, connect, fetch_request, metadata, name, server};

/// One batch of an answer, as its header says.
#[derive(Debug, PartialEq, Eq)]
struct Batch {
    base_offset: i64,
    count: i32,
    transactional: bool,
    control: bool,
    producer_id: i64,
    base_sequence: i32,
}

/// The batches of a partition's records, read from their headers (the
/// crate's decoder takes a producer's batches only, not control ones).
fn batches(records: &Bytes) -> Vec<Batch> {
    let b = &records[..];
    let mut out = Vec::new();
    let mut at = 0;
    while at + 61 <= b.len() {
        let be64 = |o: usize| i64::from_be_bytes(b[at + o..at + o + 8].try_into().unwrap());
        let be32 = |o: usize| i32::from_be_bytes(b[at + o..at + o + 4].try_into().unwrap());
        let attributes = i16::from_be_bytes([b[at + 21], b[at + 22]]);
        // The CRC covers everything after it.
        let length = be32(8) as usize;
        let crc = u32::from_be_bytes(b[at + 17..at + 21].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&b[at + 21..at + 12 + length]));
        out.push(Batch {
            base_offset: be64(0),
            count: be32(57),
            transactional: attributes & 0x10 != 0,
            control: attributes & 0x20 != 0,
            producer_id: be64(43),
            base_sequence: be32(53),
        });
        at += 12 + length;
    }
    assert_eq!(at, b.len());
    out
}

fn record(value: &str) -> AppendRecord {
    AppendRecord {
        topic: Arc::from("tx"),
        partition: 0,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Vec::new(),
        timestamp_ms: None,
    }
}

/// Producer `id`'s transactional batch at sequence `seq`, epoch 0.
fn txn(id: i64, seq: i32) -> ProducerBatch {
    ProducerBatch {
        producer_id: id,
        epoch: 0,
        base_sequence: seq,
        transactional: true,
    }
}

/// `records` written as `p`'s batch: the first one's offset.
fn write(store: &Store, records: &[AppendRecord], p: ProducerBatch) -> u64 {
    match store.append_as(records, u64::MAX, Some(&p)).unwrap() {
        ProducerAppend::Written(a) => a[0].queue_offset.get(),
        other => panic!("{other:?}"),
    }
}

/// Producer `id`'s COMMIT (or ABORT) marker in `topic`-0: its offset.
fn end(store: &Store, topic: &str, id: i64, commit: bool) -> u64 {
    let m = MarkerSpec {
        producer_id: id,
        epoch: 0,
        commit,
        coordinator_epoch: 0,
    };
    store
        .append_marker(&Arc::from(topic), 0, m)
        .unwrap()
        .wait()
        .unwrap()
        .queue_offset
        .get()
}

fn fetch(offset: i64, isolation: i8) -> FetchRequest {
    fetch_request("tx", 0, offset, 0).with_isolation_level(isolation)
}

fn list_latest(isolation: i8) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("tx"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_and_list_offsets_at_both_isolation_levels() {
    let s = server().await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["tx"]).await;
    let store = s.broker.store();
    let write = |records: &[AppendRecord], p| write(store, records, p);
    let end = |id, commit| end(store, "tx", id, commit);
    // 0-1 p7's, 2 plain, 3 p8's, 4 p7 commits, 5 p8 aborts, 6 p9's, open.
    assert_eq!(write(&[record("a0"), record("a1")], txn(7, 0)), 0);
    store.append(&[record("plain")]).unwrap();
    assert_eq!(write(&[record("b0")], txn(8, 0)), 3);
    assert_eq!(end(7, true), 4);
    assert_eq!(end(8, false), 5);
    assert_eq!(write(&[record("c0")], txn(9, 0)), 6);
    assert!(store.wait_dispatched(Duration::from_secs(10)));

    for version in [4, 12] {
        // read_uncommitted: every record and both markers, each run of a
        // producer's in a batch of its own; the LSO is still answered.
        let answer: FetchResponse = call(&mut c, ApiKey::Fetch, version, &fetch(0, 0)).await;
        let p = &answer.responses[0].partitions[0];
        assert_eq!(
            (p.high_watermark, p.last_stable_offset),
            (7, 6),
            "v{version}"
        );
        assert_eq!(p.aborted_transactions.as_deref(), Some(&[][..]));
        let got = batches(p.records.as_ref().unwrap());
        let want = [
            (0, 2, true, false, 7, 0),
            (2, 1, false, false, -1, -1),
            (3, 1, true, false, 8, 0),
            (4, 1, true, true, 7, -1),
            (5, 1, true, true, 8, -1),
            (6, 1, true, false, 9, 0),
        ];
        let got: Vec<_> = got
            .iter()
            .map(|b| {
                (
                    b.base_offset,
                    b.count,
                    b.transactional,
                    b.control,
                    b.producer_id,
                    b.base_sequence,
                )
            })
            .collect();
        assert_eq!(got, want, "v{version}");

        // read_committed: up to the LSO, p8's abort named.
        let answer: FetchResponse = call(&mut c, ApiKey::Fetch, version, &fetch(0, 1)).await;
        let p = &answer.responses[0].partitions[0];
        assert_eq!(p.last_stable_offset, 6);
        let aborted: Vec<_> = p
            .aborted_transactions
            .as_ref()
            .unwrap()
            .iter()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect();
        assert_eq!(aborted, [(8, 3)], "v{version}");
        let got = batches(p.records.as_ref().unwrap());
        assert_eq!(got.last().map(|b| b.base_offset), Some(5));
        assert_eq!(got.iter().map(|b| b.count).sum::<i32>(), 6);
        // From the committed part's end: nothing yet, and no abort named.
        let answer: FetchResponse = call(&mut c, ApiKey::Fetch, version, &fetch(6, 1)).await;
        let p = &answer.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert!(p.records.as_ref().unwrap().is_empty());
        // From past the abort: it is not named.
        let answer: FetchResponse = call(&mut c, ApiKey::Fetch, version, &fetch(5, 1)).await;
        let p = &answer.responses[0].partitions[0];
        assert_eq!(p.aborted_transactions.as_ref().unwrap().len(), 1);
        let answer: FetchResponse = call(&mut c, ApiKey::Fetch, version, &fetch(4, 1)).await;
        assert_eq!(
            answer.responses[0].partitions[0]
                .aborted_transactions
                .as_ref()
                .unwrap()
                .len(),
            1
        );
    }
    for (version, isolation, latest) in [(2, 1, 6), (7, 1, 6), (7, 0, 7)] {
        let answer: ListOffsetsResponse = call(
            &mut c,
            ApiKey::ListOffsets,
            version,
            &list_latest(isolation),
        )
        .await;
        assert_eq!(
            answer.topics[0].partitions[0].offset, latest,
            "v{version} isolation {isolation}"
        );
    }
    // p9 commits: the LSO catches up with the end.
    end(9, true);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let answer: FetchResponse = call(&mut c, ApiKey::Fetch, 12, &fetch(6, 1)).await;
    let p = &answer.responses[0].partitions[0];
    assert_eq!((p.high_watermark, p.last_stable_offset), (8, 8));
    assert_eq!(batches(p.records.as_ref().unwrap()).len(), 2);
}

/// A read of compact topic `ctx` from 0: high watermark, LSO and the
/// records' offsets and values. No aborted transaction is ever named.
async fn read_ctx(c: &mut tokio::net::TcpStream, isolation: i8) -> (i64, i64, Vec<(i64, String)>) {
    let request = fetch_request("ctx", 0, 0, 0).with_isolation_level(isolation);
    let answer: FetchResponse = call(c, ApiKey::Fetch, 12, &request).await;
    let p = &answer.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.aborted_transactions.as_deref(), Some(&[][..]));
    let mut data = p.records.clone().unwrap_or_default();
    let values = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut data)
        .unwrap()
        .into_iter()
        .flat_map(|set| set.records)
        .map(|r| {
            (
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            )
        })
        .collect();
    (p.high_watermark, p.last_stable_offset, values)
}

/// A compact topic's transactions (docs/compaction.md, "Transactions"):
/// its reads come from the compacted log, which holds no markers, so a
/// read_committed fetch leaves the aborted records out itself and names
/// none; an open transaction holds the cleaner back; once it ends, the
/// cleaner drops the aborted records, which never superseded anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_topics_transactions_are_read_committed_and_cleaned() {
    let s = server().await;
    let mut c = connect(&s).await;
    s.broker
        .create_topic(
            "ctx",
            1,
            [("cleanup.policy".to_string(), "compact".to_string())].into(),
        )
        .unwrap();
    let store = s.broker.store();
    let kv = |key: &'static str, value: &'static str| AppendRecord {
        topic: Arc::from("ctx"),
        key: Some(Bytes::from_static(key.as_bytes())),
        ..record(value)
    };
    let write = |records: &[AppendRecord], p| write(store, records, p);
    let end = |id, commit| end(store, "ctx", id, commit);
    // 0 plain k1, 1-2 p7's k1 k2, 3 plain k3, 4 p8's k1, 5 p7 commits,
    // 6 p8 aborts, 7 p9's k2, open.
    store.append(&[kv("k1", "v0")]).unwrap();
    assert_eq!(write(&[kv("k1", "a1"), kv("k2", "a2")], txn(7, 0)), 1);
    store.append(&[kv("k3", "p3")]).unwrap();
    assert_eq!(write(&[kv("k1", "b4")], txn(8, 0)), 4);
    assert_eq!(end(7, true), 5);
    assert_eq!(end(8, false), 6);
    assert_eq!(write(&[kv("k2", "c7")], txn(9, 0)), 7);
    let part = s.broker.partition("ctx", 0).unwrap();
    let copied = |end: u64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while part.offsets().1 < end {
            assert!(std::time::Instant::now() < deadline, "{:?}", part.offsets());
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    copied(8);
    let pairs = |v: &[(i64, &str)]| -> Vec<(i64, String)> {
        v.iter().map(|(o, s)| (*o, s.to_string())).collect()
    };
    assert_eq!(
        read_ctx(&mut c, 1).await,
        (8, 7, pairs(&[(0, "v0"), (1, "a1"), (2, "a2"), (3, "p3")])),
        "read_committed: up to p9's open transaction, without p8's abort"
    );
    assert_eq!(
        read_ctx(&mut c, 0).await.2,
        pairs(&[
            (0, "v0"),
            (1, "a1"),
            (2, "a2"),
            (3, "p3"),
            (4, "b4"),
            (7, "c7")
        ]),
        "read_uncommitted: every record, markers never"
    );
    let door = s.broker.door(&tidelog_broker::Principal::Anonymous);
    let clean = || async {
        let ticket = door.compact("ctx", true).await.unwrap();
        let waited = ticket.wait(Duration::from_secs(30)).await.unwrap();
        assert!(waited.iter().all(|p| p.completed), "{waited:?}");
    };
    // p9's open transaction shares the only sealed segment: nothing is
    // cleaned.
    clean().await;
    assert_eq!(read_ctx(&mut c, 0).await.2.len(), 6, "held back by p9");
    assert_eq!(end(9, true), 8);
    clean().await;
    // k1's newest committed value is p7's (p8's aborted record superseded
    // nothing and is gone), k2's is p9's.
    let want = pairs(&[(1, "a1"), (3, "p3"), (7, "c7")]);
    assert_eq!(read_ctx(&mut c, 0).await.2, want);
    assert_eq!(read_ctx(&mut c, 1).await, (8, 8, want));
}
