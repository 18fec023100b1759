#![allow(clippy::unwrap_used)]

use super::*;

/// Producer ids handed out from 1000 up.
struct Ids(i64);

impl Ids {
    fn next(&mut self) -> Result<i64, TxnRefusal> {
        self.0 += 1;
        Ok(self.0)
    }
}

fn p(topic: &str, partition: u32) -> TxnPartition {
    (topic.to_owned(), partition)
}

/// Makes `t` durable at once (what the caller does) and applies it.
fn durable(txns: &mut Transactions, t: &Transition) -> (i64, i16) {
    txns.complete(t);
    (t.producer_id, t.epoch)
}

fn init(
    txns: &mut Transactions,
    ids: &mut Ids,
    id: &str,
    expected: Option<(i64, i16)>,
) -> (i64, i16) {
    match txns
        .init_producer_id(id, 60_000, expected, 0, &mut || ids.next())
        .unwrap()
    {
        InitOutcome::Ready(t) => durable(txns, &t),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_transaction_commits_through_kafka_s_states() {
    let (mut txns, mut ids) = (Transactions::new(), Ids(1000));
    let producer = init(&mut txns, &mut ids, "tx", None);
    assert_eq!(producer, (1001, 0));
    assert_eq!(txns.get("tx").unwrap().state, TxnState::Empty);

    let t = txns
        .add_partitions("tx", 1001, 0, &[p("a", 0), p("b", 1)], 5)
        .unwrap()
        .unwrap();
    // Until it is durable, every other call on the id waits.
    assert_eq!(
        txns.add_partitions("tx", 1001, 0, &[p("a", 0)], 5),
        Err(TxnRefusal::Concurrent)
    );
    txns.complete(&t);
    let m = txns.get("tx").unwrap();
    assert_eq!(
        (m.state, m.started_ms, m.partitions.len()),
        (TxnState::Ongoing, Some(5), 2)
    );
    // Adding what is in already changes nothing; more partitions add.
    assert_eq!(
        txns.add_partitions("tx", 1001, 0, &[p("a", 0)], 6),
        Ok(None)
    );
    let more = txns
        .add_partitions("tx", 1001, 0, &[p("c", 0)], 7)
        .unwrap()
        .unwrap();
    assert_eq!((more.partitions.len(), more.started_ms), (3, Some(5)));
    txns.complete(&more);

    let prepare = txns.end("tx", 1001, 0, true, 10).unwrap().unwrap();
    assert_eq!(
        (prepare.state, prepare.marker(), prepare.partitions.len()),
        (TxnState::PrepareCommit, Some(true), 3)
    );
    txns.complete(&prepare);
    // While the markers are written, a retried commit waits and an abort
    // does not fit.
    assert_eq!(
        txns.end("tx", 1001, 0, true, 11),
        Err(TxnRefusal::Concurrent)
    );
    assert!(matches!(
        txns.end("tx", 1001, 0, false, 11),
        Err(TxnRefusal::InvalidState { .. })
    ));
    let done = txns.finish("tx", 12).unwrap();
    txns.complete(&done);
    let m = txns.get("tx").unwrap();
    assert_eq!((m.state, m.partitions.len()), (TxnState::CompleteCommit, 0));
    // The retried commit whose answer was lost succeeds; an abort is wrong.
    assert_eq!(txns.end("tx", 1001, 0, true, 13), Ok(None));
    assert!(matches!(
        txns.end("tx", 1001, 0, false, 13),
        Err(TxnRefusal::InvalidState { .. })
    ));
    // The next transaction starts from CompleteCommit, at a new start time.
    let next = txns
        .add_partitions("tx", 1001, 0, &[p("a", 0)], 20)
        .unwrap()
        .unwrap();
    assert_eq!((next.state, next.started_ms), (TxnState::Ongoing, Some(20)));
}

#[test]
fn ending_nothing_and_unknown_producers_are_refused() {
    let (mut txns, mut ids) = (Transactions::new(), Ids(1000));
    let (pid, epoch) = init(&mut txns, &mut ids, "tx", None);
    assert!(matches!(
        txns.end("tx", pid, epoch, true, 1),
        Err(TxnRefusal::InvalidState { state: "Empty", .. })
    ));
    assert_eq!(
        txns.add_partitions("tx", 7, epoch, &[p("a", 0)], 1),
        Err(TxnRefusal::InvalidProducerIdMapping { producer_id: 7 })
    );
    assert_eq!(
        txns.add_partitions("nobody", pid, epoch, &[p("a", 0)], 1),
        Err(TxnRefusal::InvalidProducerIdMapping { producer_id: pid })
    );
    assert!(matches!(
        txns.add_partitions("tx", pid, epoch, &[], 1),
        Err(TxnRefusal::InvalidRequest { .. })
    ));
    for timeout in [0, -1, i64::from(TRANSACTION_MAX_TIMEOUT_MS) + 1] {
        assert!(matches!(
            txns.init_producer_id("other", timeout, None, 0, &mut || ids.next()),
            Err(TxnRefusal::InvalidTimeout { .. })
        ));
    }
    assert!(matches!(
        txns.init_producer_id("", 1000, None, 0, &mut || ids.next()),
        Err(TxnRefusal::InvalidRequest { .. })
    ));
    // A client naming a producer id this id never had is another's.
    assert_eq!(
        txns.init_producer_id("fresh", 1000, Some((5, 0)), 0, &mut || ids.next()),
        Err(TxnRefusal::InvalidProducerIdMapping { producer_id: 5 })
    );
    assert!(txns.get("fresh").is_none());
}

#[test]
fn a_new_producer_fences_the_old_one_and_aborts_its_open_transaction() {
    let (mut txns, mut ids) = (Transactions::new(), Ids(1000));
    let zombie = init(&mut txns, &mut ids, "tx", None);
    let t = txns
        .add_partitions("tx", zombie.0, zombie.1, &[p("a", 0)], 1)
        .unwrap()
        .unwrap();
    txns.complete(&t);

    // The new instance (no id of its own yet): the open transaction is
    // aborted under a bumped epoch first, and the instance retries.
    let abort = match txns
        .init_producer_id("tx", 60_000, None, 2, &mut || ids.next())
        .unwrap()
    {
        InitOutcome::AbortFirst(t) => t,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (
            abort.state,
            abort.epoch,
            abort.marker(),
            abort.partitions.len()
        ),
        (TxnState::PrepareAbort, 1, Some(false), 1)
    );
    assert_eq!(
        txns.init_producer_id("tx", 60_000, None, 3, &mut || ids.next()),
        Err(TxnRefusal::Concurrent)
    );
    txns.complete(&abort);
    // The zombie is fenced from the moment the abort is durable.
    assert_eq!(
        txns.add_partitions("tx", zombie.0, zombie.1, &[p("a", 0)], 4),
        Err(TxnRefusal::ProducerFenced {
            epoch: 0,
            current: 1
        })
    );
    assert_eq!(
        txns.end("tx", zombie.0, zombie.1, true, 4),
        Err(TxnRefusal::ProducerFenced {
            epoch: 0,
            current: 1
        })
    );
    let done = txns.finish("tx", 5).unwrap();
    assert_eq!(done.state, TxnState::CompleteAbort);
    txns.complete(&done);
    // The retry gets the next epoch, with the same producer id.
    let fresh = init(&mut txns, &mut ids, "tx", None);
    assert_eq!(fresh, (zombie.0, 2));
}

#[test]
fn an_open_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let (mut txns, mut ids) = (Transactions::new(), Ids(1000));
    let t = txns
        .init_producer_id("slow", 1000, None, 0, &mut || ids.next())
        .unwrap();
    let InitOutcome::Ready(t) = t else { panic!() };
    let producer = durable(&mut txns, &t);
    let quick = init(&mut txns, &mut ids, "quick", None);
    for (id, (pid, epoch)) in [("slow", producer), ("quick", quick)] {
        let t = txns
            .add_partitions(id, pid, epoch, &[p("a", 0)], 100)
            .unwrap()
            .unwrap();
        txns.complete(&t);
    }
    assert!(txns.expire(1100).is_empty(), "not past it yet");
    let expired = txns.expire(1101);
    assert_eq!(expired.len(), 1);
    let abort = &expired[0];
    assert_eq!(
        (abort.transactional_id.as_str(), abort.state, abort.epoch),
        ("slow", TxnState::PrepareAbort, 1)
    );
    // A second sweep while it is being made durable leaves it alone.
    assert!(txns.expire(1200).is_empty());
    txns.complete(abort);
    assert!(matches!(
        txns.end("slow", producer.0, producer.1, true, 1201),
        Err(TxnRefusal::ProducerFenced { .. })
    ));
    let done = txns.finish("slow", 1202).unwrap();
    txns.complete(&done);
    assert_eq!(txns.get("slow").unwrap().state, TxnState::CompleteAbort);
    assert_eq!(txns.get("quick").unwrap().state, TxnState::Ongoing);
}

#[test]
fn kip_360_bumps_and_retries_and_a_spent_epoch_takes_a_new_id() {
    let (mut txns, mut ids) = (Transactions::new(), Ids(1000));
    let first = init(&mut txns, &mut ids, "tx", None);
    // The producer re-initializes with its own id and epoch: bumped.
    let bumped = init(&mut txns, &mut ids, "tx", Some(first));
    assert_eq!(bumped, (first.0, 1));
    // Its answer was lost: the retry names the old epoch and gets the
    // same answer, nothing bumped again.
    assert_eq!(
        txns.init_producer_id("tx", 60_000, Some(first), 0, &mut || ids.next()),
        Ok(InitOutcome::Same {
            producer_id: first.0,
            epoch: 1
        })
    );
    // An older epoch than that is a zombie; another id is another's.
    let t = txns
        .init_producer_id("tx", 60_000, Some(bumped), 0, &mut || ids.next())
        .unwrap();
    let InitOutcome::Ready(t) = t else { panic!() };
    durable(&mut txns, &t);
    assert_eq!(
        txns.init_producer_id("tx", 60_000, Some(first), 0, &mut || ids.next()),
        Err(TxnRefusal::ProducerFenced {
            epoch: 0,
            current: 2
        })
    );
    assert_eq!(
        txns.init_producer_id("tx", 60_000, Some((4, 0)), 0, &mut || ids.next()),
        Err(TxnRefusal::InvalidProducerIdMapping { producer_id: 4 })
    );

    // At the last epoch, the next InitProducerId takes a new id.
    txns.ids.get_mut("tx").unwrap().epoch = EPOCH_MAX;
    let spent = (first.0, EPOCH_MAX);
    let renewed = init(&mut txns, &mut ids, "tx", Some(spent));
    assert_eq!(renewed, (1002, 0));
    assert_eq!(txns.get("tx").unwrap().last, Some(spent));
    // ... and its retry, naming the spent pair, gets the new one again.
    assert_eq!(
        txns.init_producer_id("tx", 60_000, Some(spent), 0, &mut || ids.next()),
        Ok(InitOutcome::Same {
            producer_id: 1002,
            epoch: 0
        })
    );
}

#[test]
fn a_transition_that_could_not_be_made_durable_changes_nothing() {
    let (mut txns, mut ids) = (Transactions::new(), Ids(1000));
    let InitOutcome::Ready(t) = txns
        .init_producer_id("tx", 1000, None, 0, &mut || ids.next())
        .unwrap()
    else {
        panic!()
    };
    txns.abandon(&t);
    assert!(
        txns.get("tx").is_none(),
        "a new id goes with its transition"
    );
    let producer = init(&mut txns, &mut ids, "tx", None);
    let t = txns
        .add_partitions("tx", producer.0, producer.1, &[p("a", 0)], 1)
        .unwrap()
        .unwrap();
    txns.abandon(&t);
    let m = txns.get("tx").unwrap();
    assert_eq!((m.state, m.pending.is_none()), (TxnState::Empty, true));
    // A stale transition applies nothing.
    txns.complete(&t);
    assert_eq!(txns.get("tx").unwrap().state, TxnState::Empty);
}

/// Tiny seeded generator (no dependency), as the KIP-848 model test has.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Two producer instances share one transactional id and call at random;
/// transitions are made durable, abandoned or left pending at random; the
/// clock jumps. Whatever the order: every state change is one Kafka
/// allows, the epoch never goes back, a call with an older epoch than the
/// id's is never taken, and every transaction that prepared an end
/// completes to that end and no other.
#[test]
fn model_no_fenced_producer_is_ever_taken_and_every_end_completes_as_prepared() {
    // What the runs reached, so the model is known to cover it.
    let (mut commits, mut aborts, mut fenced) = (0u32, 0u32, 0u32);
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (mut txns, mut ids) = (Transactions::new(), Ids(1000));
        let mut producers: [Option<(i64, i16)>; 2] = [None, None];
        let mut pending: Vec<Transition> = Vec::new();
        let mut now = 0u64;
        let mut high_epoch: Option<(i64, i16)> = None;
        for _ in 0..400 {
            now += rng.below(400);
            let who = rng.below(2) as usize;
            let before = txns.get("tx").cloned();
            let mut started: Option<Transition> = None;
            match rng.below(7) {
                0 => match txns.init_producer_id(
                    "tx",
                    1000,
                    producers[who].filter(|_| rng.below(2) == 0),
                    now,
                    &mut || ids.next(),
                ) {
                    Ok(InitOutcome::Ready(t)) | Ok(InitOutcome::AbortFirst(t)) => {
                        if t.state == TxnState::Empty {
                            producers[who] = Some((t.producer_id, t.epoch));
                        }
                        started = Some(t);
                    }
                    Ok(InitOutcome::Same { producer_id, epoch }) => {
                        producers[who] = Some((producer_id, epoch))
                    }
                    Err(_) => {}
                },
                1 | 2 => {
                    if let Some((pid, epoch)) = producers[who] {
                        let part = p("t", rng.below(3) as u32);
                        match txns.add_partitions("tx", pid, epoch, &[part], now) {
                            Ok(Some(t)) => started = Some(t),
                            Err(TxnRefusal::ProducerFenced { .. }) => fenced += 1,
                            Ok(None) | Err(_) => {}
                        }
                        if let Some(m) = txns.get("tx") {
                            if started.is_some() {
                                assert_eq!((pid, epoch), (m.producer_id, m.epoch), "seed {seed}");
                            }
                        }
                    }
                }
                3 => {
                    if let Some((pid, epoch)) = producers[who] {
                        if let Ok(Some(t)) = txns.end("tx", pid, epoch, rng.below(2) == 0, now) {
                            let m = txns.get("tx").unwrap();
                            assert_eq!((pid, epoch), (m.producer_id, m.epoch), "seed {seed}");
                            started = Some(t);
                        }
                    }
                }
                4 => pending.extend(txns.expire(now)),
                5 => {
                    if let Some(t) = txns.finish("tx", now) {
                        started = Some(t);
                    }
                }
                _ => {
                    // Make the oldest pending transition durable, or lose it.
                    if !pending.is_empty() {
                        let t = pending.remove(0);
                        let state_before = txns.get("tx").map(|m| m.state);
                        if rng.below(5) == 0 {
                            txns.abandon(&t);
                        } else {
                            let applies = txns
                                .get("tx")
                                .and_then(|m| m.pending.as_ref())
                                .is_some_and(|p| *p == t);
                            txns.complete(&t);
                            if applies {
                                if let Some(state) = state_before.filter(|_| t.epoch >= 0) {
                                    let m = txns.get("tx").unwrap();
                                    assert!(
                                        state.may_become(m.state) || state == m.state,
                                        "seed {seed}: {state:?} -> {:?}",
                                        m.state
                                    );
                                    // A completed end is the end prepared.
                                    match state {
                                        TxnState::PrepareCommit => {
                                            assert_eq!(m.state, TxnState::CompleteCommit);
                                            commits += 1;
                                        }
                                        TxnState::PrepareAbort => {
                                            assert_eq!(m.state, TxnState::CompleteAbort);
                                            aborts += 1;
                                        }
                                        _ => {}
                                    }
                                }
                                let m = txns.get("tx").unwrap();
                                let now_at = (m.producer_id, m.epoch);
                                if let Some(high) = high_epoch {
                                    assert!(
                                        now_at.0 != high.0 || now_at.1 >= high.1,
                                        "seed {seed}: epoch went back {high:?} -> {now_at:?}"
                                    );
                                }
                                high_epoch = Some(now_at);
                            }
                        }
                    }
                }
            }
            if let Some(t) = started {
                assert!(
                    before.as_ref().is_none_or(|m| m.pending.is_none()),
                    "seed {seed}: a call was taken while a transition was pending"
                );
                pending.push(t);
            }
        }
    }
    assert!(
        commits > 20 && aborts > 20 && fenced > 20,
        "the runs reached {commits} commits, {aborts} aborts, {fenced} fenced calls"
    );
}

mod log_records {
    use super::super::log::{parse, rebuild, record_key, record_value, Recovery};
    use super::*;

    /// Every transition the coordinator makes, as records, rebuilds to
    /// the state it has in memory.
    fn history() -> (Transactions, Vec<(u64, Bytes, Option<Bytes>)>) {
        let (mut txns, mut ids) = (Transactions::new(), Ids(1000));
        let mut log = Vec::new();
        let mut write = |txns: &mut Transactions, t: Transition| {
            log.push((
                log.len() as u64,
                record_key(&t.transactional_id),
                Some(record_value(&t)),
            ));
            txns.complete(&t);
        };
        for id in ["committed", "ending", "open"] {
            let InitOutcome::Ready(t) = txns
                .init_producer_id(id, 60_000, None, 1, &mut || ids.next())
                .unwrap()
            else {
                panic!()
            };
            let (pid, epoch) = (t.producer_id, t.epoch);
            write(&mut txns, t);
            let t = txns
                .add_partitions(id, pid, epoch, &[p("orders", 0), p("audit", 2)], 2)
                .unwrap()
                .unwrap();
            write(&mut txns, t);
            if id != "open" {
                let t = txns.end(id, pid, epoch, true, 3).unwrap().unwrap();
                write(&mut txns, t);
            }
            if id == "committed" {
                let t = txns.finish(id, 4).unwrap();
                write(&mut txns, t);
            }
        }
        (txns, log)
    }

    use bytes::Bytes;

    #[test]
    fn a_log_rebuilds_the_state_and_says_what_a_crash_left_half_done() {
        let (live, log) = history();
        let (rebuilt, recovery) =
            rebuild(log.iter().map(|(o, k, v)| (*o, k.as_ref(), v.as_deref()))).unwrap();
        for (id, m) in live.list() {
            assert_eq!(rebuilt.get(id), Some(m), "{id}");
        }
        assert_eq!(rebuilt.len(), 3);
        // "ending" decided to commit: its markers are written again and it
        // completes; "open" stays open for its timeout.
        assert_eq!(recovery.open, 1);
        assert_eq!(recovery.ending.len(), 1);
        let ending = &recovery.ending[0];
        assert_eq!(
            (
                ending.transactional_id.as_str(),
                ending.marker(),
                ending.partitions.len()
            ),
            ("ending", Some(true), 2)
        );
        // A tombstone forgets an id.
        let mut with_tombstone = log.clone();
        with_tombstone.push((log.len() as u64, record_key("committed"), None));
        let (rebuilt, _) = rebuild(
            with_tombstone
                .iter()
                .map(|(o, k, v)| (*o, k.as_ref(), v.as_deref())),
        )
        .unwrap();
        assert!(rebuilt.get("committed").is_none());
        assert_eq!(rebuild(std::iter::empty()).unwrap().1, Recovery::default());
    }

    #[test]
    fn values_have_a_pinned_shape() {
        let t = Transition {
            transactional_id: "tx".into(),
            producer_id: 1001,
            epoch: 3,
            last: Some((1001, 2)),
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: [p("orders", 0)].into_iter().collect(),
            offsets: TxnOffsets::new(),
            started_ms: Some(1_700_000_000_000),
            at_ms: 1_700_000_000_500,
        };
        assert_eq!(
            std::str::from_utf8(&record_value(&t)).unwrap(),
            r#"{"v":1,"producer_id":1001,"epoch":3,"last":[1001,2],"timeout_ms":60000,"state":"Ongoing","partitions":[["orders",0]],"started_ms":1700000000000,"updated_ms":1700000000500}"#
        );
        // A transaction's consumer offsets, and back.
        let with_offsets = Transition {
            offsets: [
                (
                    ("g".to_string(), "in".to_string(), 0),
                    TxnOffset {
                        offset: 42,
                        leader_epoch: None,
                        metadata: String::new(),
                    },
                ),
                (
                    ("g".to_string(), "in".to_string(), 1),
                    TxnOffset {
                        offset: 7,
                        leader_epoch: Some(0),
                        metadata: "m".into(),
                    },
                ),
            ]
            .into_iter()
            .collect(),
            ..t.clone()
        };
        let value = record_value(&with_offsets);
        assert_eq!(
            std::str::from_utf8(&value).unwrap(),
            r#"{"v":1,"producer_id":1001,"epoch":3,"last":[1001,2],"timeout_ms":60000,"state":"Ongoing","partitions":[["orders",0]],"started_ms":1700000000000,"updated_ms":1700000000500,"offsets":[{"group":"g","topic":"in","partition":0,"offset":42},{"group":"g","topic":"in","partition":1,"offset":7,"leader_epoch":0,"metadata":"m"}]}"#
        );
        let (_, back) = parse(0, b"tx", Some(&value)).unwrap();
        assert_eq!(back.unwrap().offsets, with_offsets.offsets);
        // Offsets belong to an open transaction only; a bad group is refused.
        let settled_with = r#"{"v":1,"producer_id":1,"epoch":0,"timeout_ms":1000,"state":"Empty","updated_ms":0,"offsets":[{"group":"g","topic":"in","partition":0,"offset":1}]}"#;
        assert!(parse(0, b"tx", Some(settled_with.as_bytes())).is_err());
        let bad_group = r#"{"v":1,"producer_id":1,"epoch":0,"timeout_ms":1000,"state":"Ongoing","partitions":[["in",0]],"started_ms":1,"updated_ms":0,"offsets":[{"group":"","topic":"in","partition":0,"offset":1}]}"#;
        assert!(parse(0, b"tx", Some(bad_group.as_bytes())).is_err());
        let settled = Transition {
            state: TxnState::Empty,
            last: None,
            partitions: BTreeSet::new(),
            started_ms: None,
            ..t
        };
        assert_eq!(
            std::str::from_utf8(&record_value(&settled)).unwrap(),
            r#"{"v":1,"producer_id":1001,"epoch":3,"timeout_ms":60000,"state":"Empty","updated_ms":1700000000500}"#
        );
    }

    #[test]
    fn damaged_or_hand_made_records_are_refused_by_name() {
        let good =
            r#"{"v":1,"producer_id":1,"epoch":0,"timeout_ms":1000,"state":"Empty","updated_ms":0}"#;
        assert!(parse(0, b"tx", Some(good.as_bytes())).is_ok());
        let cases: [(&[u8], &str, &str); 9] = [
            (b"\xff", good, "UTF-8"),
            (b"", good, "transactional id"),
            (b"tx", "{", "not a transaction value"),
            (
                b"tx",
                r#"{"v":2,"producer_id":1,"epoch":0,"timeout_ms":1000,"state":"Empty","updated_ms":0}"#,
                "version 2",
            ),
            (
                b"tx",
                r#"{"v":1,"producer_id":1,"epoch":-1,"timeout_ms":1000,"state":"Empty","updated_ms":0}"#,
                "negative",
            ),
            (
                b"tx",
                r#"{"v":1,"producer_id":1,"epoch":0,"timeout_ms":0,"state":"Empty","updated_ms":0}"#,
                "timeout",
            ),
            (
                b"tx",
                r#"{"v":1,"producer_id":1,"epoch":0,"timeout_ms":1000,"state":"Dead","updated_ms":0}"#,
                "unknown state",
            ),
            (
                b"tx",
                r#"{"v":1,"producer_id":1,"epoch":0,"timeout_ms":1000,"state":"Ongoing","updated_ms":0}"#,
                "do not agree",
            ),
            (
                b"tx",
                r#"{"v":1,"producer_id":1,"epoch":0,"timeout_ms":1000,"state":"Empty","partitions":[["a/b",0]],"updated_ms":0}"#,
                "invalid topic",
            ),
        ];
        for (key, value, expect) in cases {
            let err = parse(7, key, Some(value.as_bytes())).unwrap_err();
            assert_eq!(err.offset, 7);
            assert!(err.to_string().contains(expect), "{value}: {err}");
        }
        let huge = vec![b' '; super::super::log::VALUE_MAX_BYTES + 1];
        assert!(parse(0, b"tx", Some(&huge))
            .unwrap_err()
            .to_string()
            .contains("longer"));
        // Out of log order: refused, not reordered.
        let v = Some(good.as_bytes());
        assert!(rebuild([(5, &b"a"[..], v), (5, &b"b"[..], v)]).is_err());
    }

    #[test]
    fn unused_ids_expire_and_open_ones_do_not() {
        let (mut txns, mut ids) = (Transactions::new(), Ids(1000));
        let idle = init(&mut txns, &mut ids, "idle", None);
        let busy = init(&mut txns, &mut ids, "busy", None);
        let t = txns
            .add_partitions("busy", busy.0, busy.1, &[p("a", 0)], 0)
            .unwrap()
            .unwrap();
        txns.complete(&t);
        assert!(txns.expire_ids(1000, 1000).is_empty());
        assert_eq!(txns.expire_ids(1001, 1000), ["idle"]);
        assert!(txns.get("idle").is_none());
        assert!(txns.get("busy").is_some());
        let _ = idle;
    }
}
