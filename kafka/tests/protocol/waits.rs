//! Waits on the dispatcher over the Kafka listener, with the dispatcher
//! held by a fault point: read-your-writes (Fetch with max_wait 0 and
//! ListOffsets right after an acknowledged produce see the record) and
//! the lag bound (a held produce), none of them holding a thread.

use std::sync::atomic::{AtomicI64, Ordering};

use tidelog_broker::fault::{StoreFaultPoint as FaultPoint, StoreFaults as Faults};
use tidelog_broker::produce::ProduceRecord;
use tidelog_broker::store::DISPATCH_LAG_MAX_BYTES;

use super::*;

/// Heals a hung fault point when dropped (a broker cannot close with its
/// dispatcher hung, also when an assert fails).
struct HealOnDrop(Arc<Faults>, FaultPoint);

impl Drop for HealOnDrop {
    fn drop(&mut self) {
        self.0.heal(self.1);
    }
}

/// A two-worker runtime and how many of its threads (workers and the
/// blocking pool's) are alive.
fn counted_runtime() -> (tokio::runtime::Runtime, Arc<AtomicI64>) {
    let alive = Arc::new(AtomicI64::new(0));
    let (up, down) = (Arc::clone(&alive), Arc::clone(&alive));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            up.fetch_add(1, Ordering::SeqCst);
        })
        .on_thread_stop(move || {
            down.fetch_sub(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    (runtime, alive)
}

/// A server with topic `t` (2 partitions) holding `first` at offset 0 of
/// partition 0, fetchable; then the dispatcher hung (the guard heals it)
/// and `second` produced and acknowledged at offset 1, not yet fetchable.
async fn second_acknowledged_while_dispatch_hangs() -> (Server, Arc<Faults>, HealOnDrop) {
    let faults = Arc::new(Faults::default());
    let s = server_faulted(KafkaConfig::default(), Some(Arc::clone(&faults))).await;
    let mut c = connect(&s).await;
    metadata(&mut c, 12, &["t"]).await;
    for (value, offset) in [(&b"first"[..], 0), (b"second", 1)] {
        if offset == 1 {
            faults.hang(FaultPoint::Dispatch);
        }
        let one = [record(None, Some(value), 1_000)];
        let answer: ProduceResponse = call(
            &mut c,
            ApiKey::Produce,
            9,
            &produce_request("t", 0, 1, batch(&one)),
        )
        .await;
        let p = &answer.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, offset));
        if offset == 0 {
            assert_eq!(fetch_n(&mut c, 12, "t", 0, 0, 1).await.len(), 1);
        }
    }
    let heal = HealOnDrop(Arc::clone(&faults), FaultPoint::Dispatch);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while faults.blocked(FaultPoint::Dispatch) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "dispatch never hung"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (s, faults, heal)
}

fn latest(topic: &str) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                ListOffsetsPartition::default().with_timestamp(-1)
            ])])
}

/// A Fetch that must answer at once (max_wait 0), sent after a produce was
/// acknowledged, answers with that record once it is fetchable, not
/// empty at once (as HTTP fetch with timeout 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_with_max_wait_0_after_an_acknowledged_produce_sees_it() {
    let (s, faults, _heal) = second_acknowledged_while_dispatch_hangs().await;
    let mut c = connect(&s).await;
    let fetch = tokio::spawn(async move {
        let answer: FetchResponse =
            call(&mut c, ApiKey::Fetch, 12, &fetch_request("t", 0, 1, 0)).await;
        answer
    });
    // Without the wait it answers within a millisecond (a slow machine
    // only makes this pass vacuously).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !fetch.is_finished(),
        "the fetch answered without the acknowledged record"
    );
    faults.heal(FaultPoint::Dispatch);
    let answer = fetch.await.unwrap();
    let values: Vec<_> = records_of(&answer).into_iter().map(|r| r.value).collect();
    assert_eq!(values, [Some(Bytes::from_static(b"second"))]);
}

/// ListOffsets sent after an acknowledged produce answer its end once
/// the record is indexed, awaiting it: the requests waiting meanwhile
/// hold no thread of the blocking pool (each held one before).
#[test]
fn list_offsets_waiting_for_an_acknowledged_produce_hold_no_thread() {
    const WAITING: usize = 16;
    let (runtime, alive) = counted_runtime();
    runtime.block_on(async {
        let (s, faults, _heal) = second_acknowledged_while_dispatch_hangs().await;
        let before = alive.load(Ordering::SeqCst);
        let mut asked = Vec::new();
        for _ in 0..WAITING {
            let mut c = connect(&s).await;
            asked.push(tokio::spawn(async move {
                let answer: ListOffsetsResponse =
                    call(&mut c, ApiKey::ListOffsets, 7, &latest("t")).await;
                answer
            }));
        }
        // Each request had held a blocking thread within a millisecond;
        // wait well past that (a slow machine only makes this vacuous).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let grown = alive.load(Ordering::SeqCst) - before;
        assert!(
            grown < (WAITING / 2) as i64,
            "{WAITING} waiting ListOffsets took {grown} more threads"
        );
        assert!(
            asked.iter().all(|a| !a.is_finished()),
            "a ListOffsets answered without the acknowledged record"
        );
        faults.heal(FaultPoint::Dispatch);
        for a in asked {
            let answer = a.await.unwrap();
            let p = &answer.topics[0].partitions[0];
            assert_eq!((p.error_code, p.offset), (0, 2));
        }
    });
}

/// Produce requests held back by the dispatch-lag bound (a stuck
/// dispatcher) await it without a thread each, and are answered once it
/// moves again.
#[test]
fn produce_held_by_the_dispatch_lag_bound_holds_no_thread() {
    const HELD: usize = 16;
    let (runtime, alive) = counted_runtime();
    runtime.block_on(async {
        let (s, faults, _heal) = second_acknowledged_while_dispatch_hangs().await;
        // Appends take the lag past the bound while the dispatcher hangs.
        let filled = {
            let broker = Arc::clone(&s.broker);
            tokio::task::spawn_blocking(move || {
                let big = ProduceRecord {
                    key: None,
                    value: Some(Bytes::from(vec![b'x'; 512 << 10])),
                    partition: Some(1),
                    headers: Vec::new(),
                    timestamp_ms: None,
                };
                let mut filled = 0u64;
                while broker.store().stats().dispatch_lag_bytes <= DISPATCH_LAG_MAX_BYTES {
                    broker
                        .produce_blocking("t", Some(1), vec![big.clone()])
                        .unwrap();
                    filled += 1;
                }
                filled
            })
            .await
            .unwrap()
        };
        let waits_before = s.broker.store().stats().dispatch_lag_waits;
        let before = alive.load(Ordering::SeqCst);
        let mut held = Vec::new();
        for n in 0..HELD {
            let mut c = connect(&s).await;
            held.push(tokio::spawn(async move {
                let value = format!("held {n}");
                let one = [record(None, Some(value.as_bytes()), 1_000)];
                let answer: ProduceResponse = call(
                    &mut c,
                    ApiKey::Produce,
                    9,
                    &produce_request("t", 1, 1, batch(&one)),
                )
                .await;
                answer
            }));
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while s.broker.store().stats().dispatch_lag_waits < waits_before + HELD as u64 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the produce requests were never held by the lag bound"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let grown = alive.load(Ordering::SeqCst) - before;
        assert!(
            grown < (HELD / 2) as i64,
            "{HELD} held produce requests took {grown} more threads"
        );
        assert!(held.iter().all(|h| !h.is_finished()));
        faults.heal(FaultPoint::Dispatch);
        for h in held {
            let answer = h.await.unwrap();
            assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
        }
        assert!(s.broker.store().wait_dispatched(Duration::from_secs(60)));
        assert_eq!(
            s.broker.partition("t", 1).unwrap().offsets().1,
            filled + HELD as u64
        );
    });
}
