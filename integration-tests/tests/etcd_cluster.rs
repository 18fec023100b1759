//! The cluster layer's etcd client and election (`cluster/src/etcd/`,
//! `cluster/src/election/`) against a real etcd (`src/etcd.rs`): keys,
//! txns, leases and watches round-trip; two campaigns from one read make
//! one master and one epoch more; a master whose session dies is replaced
//! by the next in line with the next epoch and its in-sync write refused;
//! the fencing deadline passes before the lease can expire while etcd is
//! down, and a session renews again after etcd's restart and reports its
//! lease lost once etcd says so.
//!
//! Timing is asserted only as the order of instants, never as a duration:
//! every wait is bounded by a round count and a deadline.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use tidelog_cluster::election::{
    CampaignOutcome, Election, EpochSeen, InsyncChange, InsyncSet, Keys, NodeInfo, Session,
    SessionState, Step,
};
use tidelog_cluster::etcd::{
    Compare, CompareOp, EtcdClient, EtcdError, EtcdErrorKind, Op, OpResponse, Revision, Txn,
};
use tidelog_integration_tests::etcd::Etcd;

/// Sessions ask for etcd's minimum TTL with its default timeouts.
const TTL: Duration = Duration::from_secs(2);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long anything the tests wait for may take, at most.
const PATIENCE: Duration = Duration::from_secs(30);
/// Polls of a state that changes by itself.
const POLL: Duration = Duration::from_millis(20);

/// A bounded wait: each round asserts the deadline and the count.
struct Bound {
    what: &'static str,
    deadline: Instant,
    rounds_left: u32,
}

impl Bound {
    fn new(what: &'static str) -> Bound {
        Bound {
            what,
            deadline: Instant::now() + PATIENCE,
            rounds_left: 5000,
        }
    }

    fn round(&mut self) {
        assert!(
            Instant::now() < self.deadline && self.rounds_left > 0,
            "{}: not within {PATIENCE:?}",
            self.what
        );
        self.rounds_left -= 1;
    }
}

fn start_etcd() -> Etcd {
    tokio::task::block_in_place(Etcd::start)
}

fn client(etcd: &Etcd) -> EtcdClient {
    EtcdClient::new(&[etcd.endpoint()], REQUEST_TIMEOUT).unwrap()
}

fn info(node_id: u32, log_end: u64) -> NodeInfo {
    NodeInfo {
        node_id,
        http: format!("127.0.0.1:{}", 8080 + node_id),
        kafka: format!("127.0.0.1:{}", 9092 + node_id),
        replication: format!("127.0.0.1:{}", 9500 + node_id),
        log_end,
        epoch: 0,
    }
}

async fn session(client: &EtcdClient, keys: &Keys, node_id: u32, log_end: u64) -> Session {
    Session::start(client.clone(), keys.clone(), &info(node_id, log_end), TTL)
        .await
        .unwrap()
}

fn election(client: &EtcdClient, keys: &Keys, node_id: u32, grace: Duration) -> Election {
    Election::new(client.clone(), keys.clone(), node_id, grace).unwrap()
}

fn value(response: &OpResponse) -> Vec<u8> {
    match response {
        OpResponse::Get { kvs } => kvs[0].value.clone(),
        other => panic!("not a get: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_txns_leases_and_watches_round_trip() {
    let etcd = start_etcd();
    // A dead endpoint first: the client goes on to the next.
    let etcd_client = EtcdClient::new(
        &["http://127.0.0.1:1".into(), etcd.endpoint()],
        REQUEST_TIMEOUT,
    )
    .unwrap();
    let c = &etcd_client;

    let absent = c.get(b"/t/a").await.unwrap();
    assert_eq!(absent.kv, None);
    let first = c.put(b"/t/a", b"1", None).await.unwrap();
    assert!(first > absent.revision);
    let second = c.put(b"/t/a", b"2", None).await.unwrap();
    let a = c.get(b"/t/a").await.unwrap().kv.unwrap();
    assert_eq!(
        (a.key.as_slice(), a.value.as_slice()),
        (&b"/t/a"[..], &b"2"[..])
    );
    assert_eq!(
        (a.create_revision, a.mod_revision, a.version, a.lease),
        (first, second, 2, None)
    );
    c.put(b"/t/b", b"3", None).await.unwrap();
    c.put(b"/u/c", b"4", None).await.unwrap();
    let range = c.range_prefix(b"/t/").await.unwrap();
    let keys: Vec<&[u8]> = range.kvs.iter().map(|kv| kv.key.as_slice()).collect();
    assert_eq!(keys, [&b"/t/a"[..], &b"/t/b"[..]]);

    // Compares that hold run the success branch...
    let held = c
        .txn(
            &Txn::new()
                .when(Compare::value(b"/t/a", CompareOp::Equal, b"2"))
                .when(Compare::version(b"/t/a", CompareOp::Greater, 1))
                .when(Compare::create_revision(
                    b"/t/none",
                    CompareOp::Equal,
                    Revision(0),
                ))
                .when(Compare::mod_revision(
                    b"/t/b",
                    CompareOp::Less,
                    Revision(i64::MAX),
                ))
                .and_then(Op::put(b"/t/c", b"5", None))
                .and_then(Op::get(b"/t/b"))
                .or_else(Op::delete(b"/t/a")),
        )
        .await
        .unwrap();
    assert!(held.succeeded);
    assert_eq!(held.responses.len(), 2);
    assert_eq!(held.responses[0], OpResponse::Put);
    assert_eq!(value(&held.responses[1]), b"3");
    // ...one that fails runs the failure branch, and nothing of the other.
    let failed = c
        .txn(
            &Txn::new()
                .when(Compare::value(b"/t/a", CompareOp::Equal, b"2"))
                .when(Compare::value(b"/t/a", CompareOp::NotEqual, b"2"))
                .and_then(Op::put(b"/t/a", b"never", None))
                .or_else(Op::get(b"/t/a"))
                .or_else(Op::get_prefix(b"/t/"))
                .or_else(Op::delete(b"/u/c")),
        )
        .await
        .unwrap();
    assert!(!failed.succeeded);
    assert_eq!(value(&failed.responses[0]), b"2");
    assert!(matches!(&failed.responses[1], OpResponse::Get { kvs } if kvs.len() == 3));
    assert_eq!(failed.responses[2], OpResponse::Delete { deleted: 1 });
    assert!(failed.revision > held.revision, "the delete wrote");
    assert_eq!(c.get(b"/t/a").await.unwrap().kv.unwrap().value, b"2");

    let deleted = c.delete(b"/t/a").await.unwrap();
    assert_eq!(deleted.deleted, 1);
    assert_eq!(c.delete(b"/t/a").await.unwrap().deleted, 0);

    // Leases: a key under one goes with it.
    let lease = c.grant(TTL).await.unwrap();
    assert!(lease.ttl >= TTL);
    c.put(b"/t/leased", b"x", Some(lease.id)).await.unwrap();
    assert_eq!(
        c.get(b"/t/leased").await.unwrap().kv.unwrap().lease,
        Some(lease.id)
    );
    assert!(c.keep_alive_once(lease.id).await.unwrap() >= TTL);
    c.revoke(lease.id).await.unwrap();
    assert_eq!(c.get(b"/t/leased").await.unwrap().kv, None);
    let expired = |r: Result<_, EtcdError>| matches!(r, Err(EtcdError::LeaseExpired { lease: l }) if l == lease.id);
    assert!(expired(c.keep_alive_once(lease.id).await.map(|_| ())));
    assert!(expired(c.revoke(lease.id).await));
    assert!(expired(
        c.put(b"/t/leased", b"y", Some(lease.id)).await.map(|_| ())
    ));

    // Watches: a change already made after the revision is seen at once,
    // one made while waiting is seen, and none is a timeout.
    let before = c.get(b"/w/").await.unwrap().revision;
    let put = c.put(b"/w/x", b"1", None).await.unwrap();
    let seen = c.wait_for_change(b"/w/", before, PATIENCE).await.unwrap();
    assert_eq!(seen, Some(put));
    assert_eq!(
        c.wait_for_change(b"/w/", put, Duration::from_millis(300))
            .await
            .unwrap(),
        None
    );
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { c.wait_for_change(b"/w/", put, PATIENCE).await })
    };
    // The waiter's watch starts from `put`, so a put made before it is
    // established is seen as well.
    let unrelated = c.put(b"/x/y", b"1", None).await.unwrap();
    let deleted = c.delete(b"/w/x").await.unwrap();
    let seen = waiter.await.unwrap().unwrap().unwrap();
    assert_eq!(seen, deleted.revision);
    assert!(seen > unrelated);

    // No endpoint reachable: a typed error, no panic.
    let dead = EtcdClient::new(&["http://127.0.0.1:1".into()], REQUEST_TIMEOUT).unwrap();
    let err = dead.get(b"/t/a").await.unwrap_err();
    assert!(matches!(err, EtcdError::Unreachable { .. }), "{err}");
    assert_eq!(err.kind(), EtcdErrorKind::Unavailable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_campaigns_from_one_read_make_one_master_and_one_epoch_more() {
    let etcd = start_etcd();
    let c = client(&etcd);
    let keys = Keys::new("race").unwrap();
    let (s1, s2) = (
        session(&c, &keys, 1, 0).await,
        session(&c, &keys, 2, 0).await,
    );
    let (e1, e2) = (
        election(&c, &keys, 1, Duration::ZERO),
        election(&c, &keys, 2, Duration::ZERO),
    );
    let view = e1.view().await.unwrap();
    assert_eq!(
        (view.epoch.epoch, view.master, view.insync),
        (0, None, None)
    );
    assert_eq!(view.nodes, [info(1, 0), info(2, 0)]);

    let (o1, o2) = tokio::join!(e1.campaign(&s1, view.epoch), e2.campaign(&s2, view.epoch));
    let (won, lost, winner, loser) = match (o1.unwrap(), o2.unwrap()) {
        (CampaignOutcome::Won(t), l @ CampaignOutcome::Lost { .. }) => {
            (t, l, (&e1, &s1), (&e2, &s2))
        }
        (l @ CampaignOutcome::Lost { .. }, CampaignOutcome::Won(t)) => {
            (t, l, (&e2, &s2), (&e1, &s1))
        }
        other => panic!("not exactly one winner: {other:?}"),
    };
    assert_eq!(won.epoch, 1);
    assert_eq!(won.lease, winner.1.lease_id());
    let CampaignOutcome::Lost { holder, epoch, .. } = lost else {
        unreachable!()
    };
    let holder = holder.unwrap();
    assert_eq!(
        (holder.record.node_id, holder.record.epoch),
        (won.node_id, 1)
    );
    assert_eq!(
        (holder.create_revision, holder.lease),
        (won.create_revision, Some(won.lease))
    );
    assert_eq!(epoch.epoch, 1);
    let epoch_key = c.get(keys.epoch().as_bytes()).await.unwrap().kv.unwrap();
    assert_eq!(epoch_key.value, b"1");
    assert_eq!(epoch_key.lease, None, "the epoch outlives masters");

    // Campaigning again from the stale read changes nothing.
    let again = loser.0.campaign(loser.1, view.epoch).await.unwrap();
    assert!(matches!(again, CampaignOutcome::Lost { .. }), "{again:?}");
    let mut winner_election = election(&c, &keys, won.node_id, Duration::ZERO);
    let step = winner_election.step(winner.1, 0).await.unwrap().step;
    assert_eq!(step, Step::Leading(won));
    let mut loser_election = election(&c, &keys, loser.1.node_id(), Duration::ZERO);
    assert!(
        matches!(loser_election.step(loser.1, 0).await.unwrap().step, Step::Following(h) if h.record == holder.record)
    );

    // The winner leaves cleanly (revokes): the loser wins the next epoch.
    let (s_winner, s_loser) = if won.node_id == 1 { (s1, s2) } else { (s2, s1) };
    s_winner.close().await.unwrap();
    let step = loser_election.step(&s_loser, 0).await.unwrap().step;
    match step {
        Step::Won(term) => assert_eq!((term.node_id, term.epoch), (s_loser.node_id(), 2)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_master_is_replaced_with_the_next_epoch_and_its_insync_write_refused() {
    let etcd = start_etcd();
    let c = client(&etcd);
    let keys = Keys::new("failover").unwrap();
    let grace = Duration::from_millis(500);

    // Node 1 alone: it becomes master of epoch 1 and names 1, 2, 3 in sync.
    let s1 = session(&c, &keys, 1, 100).await;
    let mut e1 = election(&c, &keys, 1, grace);
    let Step::Won(term1) = e1.step(&s1, 100).await.unwrap().step else {
        panic!("node 1 alone")
    };
    assert_eq!(term1.epoch, 1);
    // Node 2 is behind node 3; node 4 is ahead of all but not in sync.
    let s2 = session(&c, &keys, 2, 50).await;
    let s3 = session(&c, &keys, 3, 100).await;
    let s4 = session(&c, &keys, 4, 500).await;
    let (mut e2, mut e3, mut e4) = (
        election(&c, &keys, 2, grace),
        election(&c, &keys, 3, grace),
        election(&c, &keys, 4, grace),
    );
    let written = e1.change_insync(&term1, &[3, 1, 2]).await.unwrap();
    assert!(
        matches!(written, InsyncChange::Written { .. }),
        "{written:?}"
    );
    let insync = e4.insync().await.unwrap();
    assert_eq!(
        insync,
        Some(InsyncSet {
            epoch: 1,
            nodes: vec![1, 2, 3]
        })
    );
    assert!(
        matches!(e2.step(&s2, 50).await.unwrap().step, Step::Following(m) if m.record.node_id == 1)
    );

    // Node 1 dies: its renewals stop, its keys stay until the TTL runs out.
    let fenced_at = s1.safe_until().unwrap();
    drop(s1);
    let mut bound = Bound::new("node 2 sees the master key gone");
    let (absent_seen, until) = loop {
        bound.round();
        let result = e2.step(&s2, 50).await.unwrap();
        let read = Instant::now();
        match result.step {
            Step::Following(_) => {}
            // Node 3's log is longer: node 2 waits its turn.
            Step::Waiting { until } => break (read, until),
            other => panic!("{other:?}"),
        }
        let root = keys.root().as_bytes();
        c.wait_for_change(root, result.revision, Duration::from_millis(500))
            .await
            .unwrap();
    };
    assert!(
        fenced_at < absent_seen,
        "the old master was fenced before its key could go"
    );
    // Node 4 is outside the in-sync set: it never campaigns.
    assert_eq!(e4.step(&s4, 500).await.unwrap().step, Step::Ineligible);
    // Node 3 says nothing (slow); after the grace node 2 campaigns.
    let mut bound = Bound::new("node 2's grace ends");
    let term2 = loop {
        bound.round();
        match e2.step(&s2, 50).await.unwrap().step {
            Step::Waiting { until: u } => {
                assert_eq!(u, until);
                tokio::time::sleep(POLL).await;
            }
            Step::Won(term) => break term,
            other => panic!("{other:?}"),
        }
    };
    assert!(Instant::now() >= until);
    assert_eq!((term2.node_id, term2.epoch), (2, 2));

    // The deposed master's in-sync write is refused; the new master's lands.
    assert_eq!(
        e1.change_insync(&term1, &[1, 2]).await.unwrap(),
        InsyncChange::Deposed
    );
    assert!(matches!(
        e2.change_insync(&term2, &[2, 3]).await.unwrap(),
        InsyncChange::Written { .. }
    ));
    assert_eq!(
        e3.insync().await.unwrap(),
        Some(InsyncSet {
            epoch: 2,
            nodes: vec![2, 3]
        })
    );
    assert!(
        matches!(e3.step(&s3, 100).await.unwrap().step, Step::Following(m) if m.record.node_id == 2 && m.record.epoch == 2)
    );
    assert_eq!(
        c.get(keys.node(1).as_bytes()).await.unwrap().kv,
        None,
        "node 1's entry went with its lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_with_etcd_down_then_renewal_after_its_restart_then_a_lost_lease_reported() {
    let mut etcd = start_etcd();
    let c = client(&etcd);
    let keys = Keys::new("fencing").unwrap();
    let s = session(&c, &keys, 1, 0).await;
    let e = election(&c, &keys, 1, Duration::ZERO);
    let ttl = s.lease().ttl;
    let granted = s.state().last_renewal_sent();
    let mut bound = Bound::new("a first renewal");
    while s.state().last_renewal_sent() == granted {
        bound.round();
        tokio::time::sleep(POLL).await;
    }
    assert!(s.is_safe_now());

    // etcd crashes: no renewal can succeed from here on.
    tokio::task::block_in_place(|| etcd.stop());
    let stopped = Instant::now();
    let mut bound = Bound::new("the session turns unsafe with etcd down");
    let last = loop {
        bound.round();
        let state = s.state();
        let now = Instant::now();
        if !state.is_safe_at(now) {
            break state;
        }
        // Safe only before the lease could expire.
        assert!(
            now < state.last_renewal_sent() + ttl,
            "{state:?} at {now:?}"
        );
        tokio::time::sleep(POLL).await;
    };
    let SessionState::Held {
        last_renewal_sent,
        safe_until,
        ..
    } = last
    else {
        panic!("{last:?}")
    };
    assert!(
        last_renewal_sent < stopped,
        "no renewal succeeds with etcd down"
    );
    assert!(safe_until < last_renewal_sent + ttl);
    assert!(!s.is_safe_now());
    // No campaign without a lease safely held (refused before etcd is asked).
    let seen = EpochSeen {
        epoch: 0,
        mod_revision: Revision(0),
    };
    let unsafe_campaign = e.campaign(&s, seen).await;
    assert!(
        matches!(unsafe_campaign, Err(EtcdError::SessionNotHeld { .. })),
        "{unsafe_campaign:?}"
    );

    // etcd comes back (it extends its leases as it starts): the session
    // renews and is safe again, its entry still there.
    tokio::task::block_in_place(|| etcd.start_again());
    let restarted = Instant::now();
    let mut bound = Bound::new("a renewal after etcd's restart");
    while !(s.is_safe_now() && s.state().last_renewal_sent() > stopped) {
        bound.round();
        tokio::time::sleep(POLL).await;
    }
    let entry = c.get(keys.node(1).as_bytes()).await.unwrap().kv.unwrap();
    assert_eq!(entry.lease, Some(s.lease_id()));
    assert!(s.state().last_renewal_sent() < restarted + PATIENCE);

    // etcd drops the lease (revoked from elsewhere): the session says so.
    c.revoke(s.lease_id()).await.unwrap();
    let mut bound = Bound::new("the session reports its lease lost");
    while !matches!(s.state(), SessionState::Lost { .. }) {
        bound.round();
        tokio::time::sleep(POLL).await;
    }
    assert!(!s.is_safe_now());
    assert_eq!(s.safe_until(), None);
    let published = s.publish(&info(1, 10)).await;
    assert!(
        matches!(published, Err(EtcdError::LeaseExpired { .. })),
        "{published:?}"
    );
    assert_eq!(c.get(keys.node(1).as_bytes()).await.unwrap().kv, None);
    let view = e.view().await.unwrap();
    let lost_campaign = e.campaign(&s, view.epoch).await;
    assert!(
        matches!(lost_campaign, Err(EtcdError::SessionNotHeld { .. })),
        "{lost_campaign:?}"
    );
}
