//! The coordinator over a real store: a commit and an abort end every
//! partition the same way and read_committed sees exactly the committed
//! records; Produce's check; fencing by a new InitProducerId and by the
//! timeout; an end left decided finished by the tick. A crash at every
//! step of an end is `crash_tests.rs`.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tidelog_storage::{AppendRecord, ProducerAppend, ProducerBatch};

use super::*;
use crate::test_support;
use crate::transactions::TxnOffset;
use crate::Broker;

fn partitions(list: &[(&str, u32)]) -> Vec<TxnPartition> {
    list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

/// A transactional batch of one record to `topic`-`partition`, after
/// Produce's check.
fn produce(
    broker: &Broker,
    id: i64,
    epoch: i16,
    seq: i32,
    topic: &str,
    partition: u32,
) -> Result<u64, TxnRefusal> {
    produce_value(broker, (id, epoch, seq), topic, partition, "v")
}

/// [`produce`] of a record whose value is `value`: the producer's id,
/// epoch and sequence, the partition; its offset.
pub(super) fn produce_value(
    broker: &Broker,
    (id, epoch, seq): (i64, i16, i32),
    topic: &str,
    partition: u32,
    value: &'static str,
) -> Result<u64, TxnRefusal> {
    broker.check_transactional_produce(id, epoch, topic, partition)?;
    let record = AppendRecord {
        topic: Arc::from(topic),
        partition,
        key: None,
        value: Some(Bytes::from_static(value.as_bytes())),
        headers: Vec::new(),
        timestamp_ms: None,
    };
    let p = ProducerBatch {
        producer_id: id,
        epoch,
        base_sequence: seq,
        transactional: true,
    };
    match broker
        .store
        .append_as(&[record], u64::MAX, Some(&p))
        .unwrap()
    {
        ProducerAppend::Written(a) => Ok(a[0].queue_offset.get()),
        other => panic!("{other:?}"),
    }
}

/// (LSO, end, aborted first offsets) of `topic`-`partition`, dispatched.
fn view(broker: &Broker, topic: &str, partition: u32) -> (u64, u64, Vec<(i64, u64)>) {
    assert!(broker.store.wait_dispatched(Duration::from_secs(10)));
    let end = broker.store.offsets(topic, partition).1;
    let lso = broker.store.last_stable_offset(topic, partition);
    (
        lso,
        end,
        broker.store.aborted_transactions(topic, partition, 0, end),
    )
}

fn state(broker: &Broker, id: &str) -> TxnState {
    broker.txns.lock().get(id).unwrap().state
}

fn topics(broker: &Broker) {
    broker.create_topic("a", 2, Default::default()).unwrap();
    broker.create_topic("b", 1, Default::default()).unwrap();
}

/// A broker on a new data dir (kept alive by the caller) with [`topics`].
fn opened() -> (tempfile::TempDir, Arc<Broker>) {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_support::open(dir.path());
    topics(&broker);
    (dir, broker)
}

#[test]
fn commit_and_abort_end_every_partition_alike() {
    let (dir, broker) = opened();
    let (pid, epoch) = broker
        .init_transactional_producer("t1", 60_000, None)
        .unwrap();
    assert_eq!(epoch, 0);
    assert!(broker
        .registry
        .get(TRANSACTION_STATE_TOPIC)
        .unwrap()
        .is_internal());
    // Before the partition is added, a transactional batch is refused.
    assert!(matches!(
        broker.check_transactional_produce(pid, epoch, "a", 0),
        Err(TxnRefusal::InvalidState { .. })
    ));
    let parts = partitions(&[("a", 0), ("a", 1), ("b", 0)]);
    broker
        .add_partitions_to_txn("t1", pid, epoch, &parts)
        .unwrap();
    produce(&broker, pid, epoch, 0, "a", 0).unwrap();
    produce(&broker, pid, epoch, 0, "b", 0).unwrap();
    assert_eq!(view(&broker, "a", 0).0, 0, "open: the LSO holds");
    broker.end_txn("t1", pid, epoch, true).unwrap();
    assert_eq!(state(&broker, "t1"), TxnState::CompleteCommit);
    // A marker in every partition added, written to or not.
    assert_eq!(view(&broker, "a", 0), (2, 2, vec![]));
    assert_eq!(view(&broker, "a", 1), (1, 1, vec![]));
    assert_eq!(view(&broker, "b", 0), (2, 2, vec![]));
    // A retried commit answers at once; an abort now is refused.
    broker.end_txn("t1", pid, epoch, true).unwrap();
    assert!(matches!(
        broker.end_txn("t1", pid, epoch, false),
        Err(TxnError::Refused(TxnRefusal::InvalidState { .. }))
    ));
    // The next transaction aborts: named to read_committed readers.
    broker
        .add_partitions_to_txn("t1", pid, epoch, &parts[..1])
        .unwrap();
    let first = produce(&broker, pid, epoch, 1, "a", 0).unwrap();
    broker.end_txn("t1", pid, epoch, false).unwrap();
    assert_eq!(view(&broker, "a", 0), (4, 4, vec![(pid, first)]));
    // A partition not added is refused, and after the end so is any.
    assert!(produce(&broker, pid, epoch, 2, "a", 0).is_err());
    let broker = Arc::try_unwrap(broker).unwrap();
    broker.shutdown().unwrap();
    // The log rebuilds the same state.
    let broker = test_support::open(dir.path());
    assert_eq!(state(&broker, "t1"), TxnState::CompleteAbort);
    assert_eq!(view(&broker, "a", 0), (4, 4, vec![(pid, first)]));
    let (pid2, epoch2) = broker
        .init_transactional_producer("t1", 60_000, None)
        .unwrap();
    assert_eq!((pid2, epoch2), (pid, 1));
}

#[test]
fn a_new_producer_fences_the_old_and_aborts_its_transaction() {
    let (_dir, broker) = opened();
    let (pid, e0) = broker
        .init_transactional_producer("t", 60_000, None)
        .unwrap();
    broker
        .add_partitions_to_txn("t", pid, e0, &partitions(&[("a", 0)]))
        .unwrap();
    let first = produce(&broker, pid, e0, 0, "a", 0).unwrap();
    // The zombie's successor: its open transaction is aborted first.
    assert!(matches!(
        broker.init_transactional_producer("t", 60_000, None),
        Err(TxnError::Refused(TxnRefusal::Concurrent))
    ));
    assert_eq!(view(&broker, "a", 0), (2, 2, vec![(pid, first)]));
    let (_, e2) = broker
        .init_transactional_producer("t", 60_000, None)
        .unwrap();
    assert_eq!(e2, e0 + 2, "the fence bumped once, the init once more");
    // The zombie is fenced everywhere: coordinator and partition.
    assert!(matches!(
        broker.add_partitions_to_txn("t", pid, e0, &partitions(&[("a", 0)])),
        Err(TxnError::Refused(TxnRefusal::ProducerFenced { .. }))
    ));
    assert!(matches!(
        broker.check_transactional_produce(pid, e0, "a", 0),
        Err(TxnRefusal::ProducerFenced { .. })
    ));
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_by_the_tick() {
    let (_dir, broker) = opened();
    let (pid, epoch) = broker.init_transactional_producer("slow", 1, None).unwrap();
    broker
        .add_partitions_to_txn("slow", pid, epoch, &partitions(&[("b", 0)]))
        .unwrap();
    let first = produce(&broker, pid, epoch, 0, "b", 0).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    broker.txn_tick().unwrap();
    assert_eq!(state(&broker, "slow"), TxnState::CompleteAbort);
    assert_eq!(view(&broker, "b", 0), (2, 2, vec![(pid, first)]));
    assert!(matches!(
        broker.end_txn("slow", pid, epoch, true),
        Err(TxnError::Refused(TxnRefusal::ProducerFenced { .. }))
    ));
}

fn offset(o: u64) -> TxnOffset {
    TxnOffset {
        offset: o,
        leader_epoch: None,
        metadata: "m".into(),
    }
}

fn committed(broker: &Broker, group: &str) -> Vec<(String, u32, u64)> {
    broker
        .committed_offsets(group, None)
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.topic, c.partition, c.offset))
        .collect()
}

/// TxnOffsetCommit's offsets are committed with the transaction, and
/// only then: an abort drops them, and a crash after the commit was
/// decided commits them at the next start.
#[test]
fn a_transactions_offsets_commit_with_it_and_only_then() {
    let (dir, broker) = opened();
    let (pid, epoch) = broker
        .init_transactional_producer("t", 60_000, None)
        .unwrap();
    // Offsets outside an open transaction are refused.
    assert!(matches!(
        broker.txn_offset_commit("t", pid, epoch, "g", None, vec![("a".into(), 0, offset(5))]),
        Err(TxnError::Refused(TxnRefusal::InvalidState { .. }))
    ));
    let consumer_offsets = [(crate::registry::CONSUMER_OFFSETS_TOPIC.to_string(), 0)];
    broker
        .add_partitions_to_txn("t", pid, epoch, &consumer_offsets)
        .unwrap();
    broker
        .txn_offset_commit("t", pid, epoch, "g", None, vec![("a".into(), 0, offset(5))])
        .unwrap();
    // An unknown partition refuses the whole call.
    assert!(broker
        .txn_offset_commit("t", pid, epoch, "g", None, vec![("a".into(), 9, offset(1))])
        .is_err());
    assert_eq!(committed(&broker, "g"), [], "not before the commit");
    broker.end_txn("t", pid, epoch, false).unwrap();
    assert_eq!(committed(&broker, "g"), [], "an abort drops them");

    broker
        .add_partitions_to_txn("t", pid, epoch, &consumer_offsets)
        .unwrap();
    broker
        .txn_offset_commit("t", pid, epoch, "g", None, vec![("a".into(), 1, offset(7))])
        .unwrap();
    broker
        .txn_offset_commit("t", pid, epoch, "g", None, vec![("a".into(), 1, offset(9))])
        .unwrap();
    broker.end_txn("t", pid, epoch, true).unwrap();
    assert_eq!(committed(&broker, "g"), [("a".to_string(), 1, 9)]);

    // Decided, then a crash before its offsets were committed.
    broker
        .add_partitions_to_txn("t", pid, epoch, &consumer_offsets)
        .unwrap();
    broker
        .txn_offset_commit("t", pid, epoch, "g", None, vec![("b".into(), 0, offset(3))])
        .unwrap();
    let prepare = broker
        .txns
        .lock()
        .end("t", pid, epoch, true, 1)
        .unwrap()
        .unwrap();
    broker.txn_apply(&prepare).unwrap();
    assert!(broker.store.wait_dispatched(Duration::from_secs(10)));
    let broker = Arc::try_unwrap(broker).unwrap();
    broker.crash();
    let broker = test_support::open(dir.path());
    assert_eq!(state(&broker, "t"), TxnState::CompleteCommit);
    assert_eq!(
        committed(&broker, "g"),
        [("a".to_string(), 1, 9), ("b".to_string(), 0, 3)]
    );
}

/// An end decided but not carried out (its markers' write failed, say) is
/// finished by the coordinator's tick, in every partition.
#[test]
fn the_tick_finishes_an_end_left_decided() {
    let (_dir, broker) = opened();
    let (pid, epoch) = broker
        .init_transactional_producer("t", 60_000, None)
        .unwrap();
    let parts = partitions(&[("a", 0), ("b", 0)]);
    broker
        .add_partitions_to_txn("t", pid, epoch, &parts)
        .unwrap();
    produce(&broker, pid, epoch, 0, "a", 0).unwrap();
    let prepare = broker
        .txns
        .lock()
        .end("t", pid, epoch, false, 1)
        .unwrap()
        .unwrap();
    broker.txn_apply(&prepare).unwrap();
    assert_eq!(state(&broker, "t"), TxnState::PrepareAbort);
    assert_eq!(view(&broker, "a", 0).0, 0, "still open in the partition");
    // Left alone for longer than a tick, the end is retried.
    std::thread::sleep(Duration::from_millis(TXN_TICK_MS + 100));
    broker.txn_tick().unwrap();
    assert_eq!(state(&broker, "t"), TxnState::CompleteAbort);
    assert_eq!(view(&broker, "a", 0), (2, 2, vec![(pid, 0)]));
    assert_eq!(view(&broker, "b", 0), (1, 1, vec![]));
}

/// The producer map behind Produce's check holds each id's current
/// producer only: an id given a new producer id (its epochs used up)
/// leaves its old one, and an id forgotten after
/// `transactional.id.expiration.ms` leaves the map.
#[test]
fn the_producer_map_forgets_replaced_and_expired_producers() {
    let (_dir, broker) = opened();
    let (first, _) = broker
        .init_transactional_producer("t", 60_000, None)
        .unwrap();
    let mapped = |broker: &Broker| {
        let mut all: Vec<(i64, String)> = broker
            .txns
            .producers()
            .iter()
            .map(|(p, id)| (*p, id.clone()))
            .collect();
        all.sort();
        all
    };
    assert_eq!(mapped(&broker), [(first, "t".to_string())]);
    // Its epochs used up: the next InitProducerId gives a new id.
    broker.txns.lock().ids.get_mut("t").unwrap().epoch = crate::transactions::EPOCH_MAX;
    let (second, epoch) = broker
        .init_transactional_producer("t", 60_000, None)
        .unwrap();
    assert_ne!(second, first);
    assert_eq!(epoch, 0);
    assert_eq!(mapped(&broker), [(second, "t".to_string())]);
    assert!(matches!(
        broker.check_transactional_produce(first, 5, "a", 0),
        Err(TxnRefusal::InvalidProducerIdMapping { .. })
    ));
    // Unused past the expiration: forgotten, in the map too.
    broker.txns.lock().ids.get_mut("t").unwrap().updated_ms = 0;
    broker.txn_tick().unwrap();
    assert!(broker.txns.lock().get("t").is_none());
    assert_eq!(mapped(&broker), []);
}
