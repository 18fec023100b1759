//! Transition tests of one group, coordinator tests, and the seeded model
//! test of membership invariants. No wall clock: every time is a number
//! given to the group or a [`ManualClock`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use event_listener::Listener;

use super::*;
use tidelog_storage::test_rng::SplitMix64 as Rng;

const SESSION_MS: u64 = 10_000;
const REBALANCE_MS: u64 = 30_000;

fn no_delay() -> GroupsConfig {
    GroupsConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupsConfig::default()
    }
}

fn topics() -> BTreeMap<String, u32> {
    [("a".to_string(), 4), ("b".to_string(), 2)]
        .into_iter()
        .collect()
}

fn http(list: &[&str]) -> MemberProtocol {
    MemberProtocol::Http {
        topics: list.iter().map(|t| t.to_string()).collect(),
        assignor: Assignor::Range,
    }
}

fn kafka(protocols: &[(&str, &'static [u8])]) -> MemberProtocol {
    MemberProtocol::Kafka {
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|(n, m)| (n.to_string(), Bytes::from_static(m)))
            .collect(),
    }
}

fn req(client: &str, protocol: MemberProtocol) -> JoinRequest {
    JoinRequest {
        member_id: None,
        instance_id: None,
        client_id: client.into(),
        host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol,
        require_known_member_id: false,
        server_side: false,
    }
}

fn rejoin(member_id: &str, protocol: MemberProtocol) -> JoinRequest {
    JoinRequest {
        member_id: Some(member_id.into()),
        ..req("c", protocol)
    }
}

/// One group driven by hand.
struct Harness {
    group: Group,
    config: GroupsConfig,
    ids: SequentialIds,
    topics: BTreeMap<String, u32>,
}

impl Harness {
    fn new(config: GroupsConfig) -> Self {
        Harness {
            group: Group::new("g", 0),
            config,
            ids: SequentialIds::default(),
            topics: topics(),
        }
    }

    fn join(&mut self, req: JoinRequest, now_ms: u64) -> Result<JoinOutcome, BrokerError> {
        self.group
            .join(req, now_ms, &self.config, &mut self.ids, &self.topics)
    }

    fn tick(&mut self, now_ms: u64) {
        self.group.tick(now_ms, &self.config, &self.topics);
    }

    fn leave(&mut self, member_id: &str, now_ms: u64) {
        self.group
            .leave(Some(member_id), None, now_ms, &self.topics)
            .unwrap();
    }

    fn partitions(&self, member_id: &str) -> Vec<TopicPartition> {
        let snap = self.group.snapshot();
        let member = snap.members.iter().find(|m| m.member_id == member_id);
        match member.and_then(|m| m.assignment.clone()) {
            Some(MemberAssignment::Partitions(p)) => p,
            other => panic!("no partitions for {member_id}: {other:?}"),
        }
    }
}

fn joined(outcome: Result<JoinOutcome, BrokerError>) -> JoinResponse {
    match outcome {
        Ok(JoinOutcome::Joined(r)) => r,
        other => panic!("expected a completed join, got {other:?}"),
    }
}

fn pending(outcome: Result<JoinOutcome, BrokerError>) -> String {
    match outcome {
        Ok(JoinOutcome::Pending { member_id }) => member_id,
        other => panic!("expected a pending join, got {other:?}"),
    }
}

fn tps(list: &[(&str, u32)]) -> Vec<TopicPartition> {
    list.iter()
        .map(|(t, p)| TopicPartition::new(t, *p))
        .collect()
}

/// Two HTTP members on topic a, Stable at generation 2.
fn two_members(h: &mut Harness) -> (String, String) {
    let m1 = joined(h.join(req("c", http(&["a"])), 0)).member_id;
    let m2 = pending(h.join(req("c", http(&["a"])), 10));
    let r1 = joined(h.join(rejoin(&m1, http(&["a"])), 20));
    assert_eq!(r1.generation, 2);
    assert_eq!(h.group.state(), GroupState::Stable);
    (m1, m2)
}

#[test]
fn a_lone_http_member_joins_and_is_stable_with_every_partition() {
    let mut h = Harness::new(no_delay());
    let r = joined(h.join(req("c", http(&["a", "b"])), 0));
    assert_eq!(r.member_id, "c-00000000-0000-0000-0000-000000000001");
    assert_eq!(
        (r.generation, r.leader_id.as_str()),
        (1, r.member_id.as_str())
    );
    assert_eq!(r.protocol_name, "range");
    assert_eq!(h.group.state(), GroupState::Stable);
    let all = tps(&[("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("b", 1)]);
    assert_eq!(
        r.assignment,
        Some(MemberAssignment::Partitions(all.clone()))
    );
    let synced = h.group.sync(&r.member_id, None, 1, None, 5).unwrap();
    assert_eq!(
        synced,
        SyncOutcome::Synced(MemberAssignment::Partitions(all))
    );
    h.group.heartbeat(&r.member_id, None, 1, 6).unwrap();
}

#[test]
fn a_second_member_rebalances_and_the_partitions_split() {
    let mut h = Harness::new(no_delay());
    let m1 = joined(h.join(req("c", http(&["a"])), 0)).member_id;
    let m2 = pending(h.join(req("c", http(&["a"])), 10));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert_eq!(pending(h.group.poll_join(&m2)), m2);
    // The old member learns of it through its heartbeat and rejoins.
    assert!(matches!(
        h.group.heartbeat(&m1, None, 1, 11),
        Err(BrokerError::RebalanceInProgress { .. })
    ));
    let r1 = joined(h.join(rejoin(&m1, http(&["a"])), 12));
    let r2 = joined(h.group.poll_join(&m2));
    assert_eq!((r1.generation, r2.generation), (2, 2));
    assert_eq!(h.partitions(&m1), tps(&[("a", 0), ("a", 1)]));
    assert_eq!(h.partitions(&m2), tps(&[("a", 2), ("a", 3)]));
    assert!(matches!(
        h.group.heartbeat(&m1, None, 1, 13),
        Err(BrokerError::IllegalGeneration {
            generation: 1,
            current: 2,
            ..
        })
    ));
}

#[test]
fn the_same_subscription_again_changes_nothing_and_another_rebalances() {
    let mut h = Harness::new(no_delay());
    let (m1, m2) = two_members(&mut h);
    let rebalances = h.group.rebalances();
    // m1 is the leader: in an HTTP group that does not matter.
    for id in [&m1, &m2] {
        assert_eq!(joined(h.join(rejoin(id, http(&["a"])), 30)).generation, 2);
    }
    assert_eq!(h.group.rebalances(), rebalances);
    assert_eq!(h.group.state(), GroupState::Stable);
    pending(h.join(rejoin(&m2, http(&["a", "b"])), 31));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    joined(h.join(rejoin(&m1, http(&["a"])), 32));
    assert_eq!(
        h.partitions(&m2),
        tps(&[("a", 2), ("a", 3), ("b", 0), ("b", 1)])
    );
}

#[test]
fn a_leave_rebalances_and_the_last_leave_empties_the_group() {
    let mut h = Harness::new(no_delay());
    let (m1, m2) = two_members(&mut h);
    h.leave(&m2, 30);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    let r = joined(h.join(rejoin(&m1, http(&["a"])), 31));
    assert_eq!(r.generation, 3);
    assert_eq!(h.partitions(&m1).len(), 4);
    h.leave(&m1, 40);
    assert_eq!(h.group.state(), GroupState::Empty);
    assert_eq!(h.group.generation(), 4);
    assert_eq!(h.group.empty_since_ms(), Some(40));
    assert!(matches!(
        h.group.heartbeat(&m1, None, 4, 41),
        Err(BrokerError::UnknownMember { .. })
    ));
}

#[test]
fn a_member_that_stops_heartbeating_expires_and_the_other_takes_over() {
    let mut h = Harness::new(no_delay());
    let (m1, m2) = two_members(&mut h);
    h.group.heartbeat(&m1, None, 2, 9_000).unwrap();
    h.tick(SESSION_MS + 19);
    assert_eq!(h.group.state(), GroupState::Stable, "m2 was seen at 20");
    h.tick(SESSION_MS + 20);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert!(h.group.snapshot().members.iter().all(|m| m.member_id != m2));
    assert!(h.group.take_changes().contains(&Change::MemberRemoved {
        member_id: m2.clone(),
        reason: Removal::SessionExpired
    }));
    let r = joined(h.join(rejoin(&m1, http(&["a"])), SESSION_MS + 30));
    assert_eq!(r.generation, 3);
    assert_eq!(h.partitions(&m1).len(), 4);
}

/// Server-side members (HTTP consumer instances) rejoin on their own
/// behalf: a join, a leave or an expiry rebalances the group within the
/// call, nobody has to poll, and no one is removed for missing the window.
#[test]
fn server_side_members_rebalance_at_once_without_rejoining() {
    let mut h = Harness::new(no_delay());
    let server = |client: &str| JoinRequest {
        server_side: true,
        session_timeout_ms: 100,
        ..req(client, http(&["a"]))
    };
    let m1 = joined(h.join(server("c"), 0)).member_id;
    let r2 = joined(h.join(server("c"), 10));
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(r2.generation, 2);
    assert_eq!(joined(h.group.poll_join(&m1)).generation, 2);
    assert_eq!(h.partitions(&m1), tps(&[("a", 0), ("a", 1)]));
    assert_eq!(h.partitions(&r2.member_id), tps(&[("a", 2), ("a", 3)]));
    let m3 = joined(h.join(server("c"), 20)).member_id;
    h.leave(&r2.member_id, 30);
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(h.group.generation(), 4);
    assert_eq!(h.partitions(&m1).len() + h.partitions(&m3).len(), 4);
    // m3 stops being seen: its session (the server's timeout) ends it.
    h.group.heartbeat(&m1, None, 4, 100).unwrap();
    h.tick(130);
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(h.partitions(&m1).len(), 4);
    let changes = h.group.take_changes();
    assert!(!changes.iter().any(|c| matches!(
        c,
        Change::MemberRemoved {
            reason: Removal::MissedRebalance,
            ..
        }
    )));
    // Server-side timeouts are not the clients' bounds, and only HTTP
    // members can be server-side.
    let kafka_server = JoinRequest {
        server_side: true,
        ..req("k", kafka(&[("range", b"")]))
    };
    assert!(matches!(
        Harness::new(no_delay()).join(kafka_server, 0),
        Err(BrokerError::ServerSideMemberNotHttp)
    ));
}

#[test]
fn a_static_member_restarting_keeps_its_partitions_without_a_rebalance() {
    let mut h = Harness::new(no_delay());
    let mut s = req("s", http(&["a"]));
    s.instance_id = Some("instance-1".into());
    let old = joined(h.join(s.clone(), 0)).member_id;
    let m2 = pending(h.join(req("c", http(&["a"])), 1));
    joined(h.join(
        JoinRequest {
            member_id: Some(old.clone()),
            ..s.clone()
        },
        2,
    ));
    let before = h.partitions(&old);
    let rebalances = h.group.rebalances();

    let new = joined(h.join(s.clone(), 100));
    assert_ne!(new.member_id, old);
    assert_eq!(new.generation, 2);
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(h.group.rebalances(), rebalances, "no rebalance");
    assert_eq!(h.partitions(&new.member_id), before);
    assert_eq!(new.assignment, Some(MemberAssignment::Partitions(before)));
    // The old member id is gone; naming the instance with it is fenced.
    assert!(matches!(
        h.group.heartbeat(&old, None, 2, 101),
        Err(BrokerError::UnknownMember { .. })
    ));
    assert!(matches!(
        h.group.heartbeat(&old, Some("instance-1"), 2, 101),
        Err(BrokerError::FencedInstanceId { .. })
    ));
    h.group.heartbeat(&m2, None, 2, 101).unwrap();

    // A restart with another subscription does rebalance.
    s.protocol = http(&["a", "b"]);
    let newer = pending(h.join(s, 200));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    joined(h.join(rejoin(&m2, http(&["a"])), 201));
    assert_eq!(joined(h.group.poll_join(&newer)).generation, 3);
}

#[test]
fn commits_of_a_stale_generation_or_without_membership_are_refused() {
    let mut h = Harness::new(no_delay());
    let m1 = joined(h.join(req("c", http(&["a"])), 0)).member_id;
    let at = |generation| CommitOrigin::Member {
        member_id: &m1,
        instance_id: None,
        generation,
    };
    h.group.validate_commit(at(1), 1).unwrap();
    let m2 = pending(h.join(req("c", http(&["a"])), 2));
    // The window is open: generation 1 may still commit what it read.
    h.group.validate_commit(at(1), 3).unwrap();
    joined(h.join(rejoin(&m1, http(&["a"])), 4));
    assert!(matches!(
        h.group.validate_commit(at(1), 5),
        Err(BrokerError::IllegalGeneration {
            generation: 1,
            current: 2,
            ..
        })
    ));
    h.group.validate_commit(at(2), 5).unwrap();
    let stranger = CommitOrigin::Member {
        member_id: "nobody",
        instance_id: None,
        generation: 2,
    };
    assert!(matches!(
        h.group.validate_commit(stranger, 5),
        Err(BrokerError::UnknownMember { .. })
    ));
    assert!(matches!(
        h.group.validate_commit(CommitOrigin::Stateless, 5),
        Err(BrokerError::GroupHasMembers { members: 2, .. })
    ));
    h.leave(&m1, 6);
    h.leave(&m2, 6);
    h.group.validate_commit(CommitOrigin::Stateless, 7).unwrap();
}

#[test]
fn the_first_rebalance_waits_the_initial_delay_extended_while_members_come() {
    let config = GroupsConfig {
        initial_rebalance_delay_ms: 3000,
        ..GroupsConfig::default()
    };
    let mut h = Harness::new(config);
    let mut r = req("c", http(&["a"]));
    r.rebalance_timeout_ms = 10_000;
    let m1 = pending(h.join(r.clone(), 0));
    let m2 = pending(h.join(r.clone(), 1000));
    h.tick(2999);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    // A member came during the delay: it starts again.
    h.tick(3000);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    let m3 = pending(h.join(r.clone(), 5000));
    h.tick(6000);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    // Members keep coming, but the window never passes the rebalance timeout.
    for (i, now) in [7000, 8000, 9000].into_iter().enumerate() {
        pending(h.join(r.clone(), now));
        h.tick(now + 500 + i as u64);
    }
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    h.tick(9999);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    h.tick(10_000);
    assert_eq!(h.group.state(), GroupState::Stable);
    for m in [&m1, &m2, &m3] {
        assert_eq!(joined(h.group.poll_join(m)).generation, 1);
    }
    assert_eq!(h.group.member_count(), 6);
}

#[test]
fn without_newcomers_the_initial_delay_closes_once() {
    let config = GroupsConfig {
        initial_rebalance_delay_ms: 3000,
        ..GroupsConfig::default()
    };
    let mut h = Harness::new(config);
    let m1 = pending(h.join(req("c", http(&["a"])), 0));
    h.tick(3000);
    assert_eq!(joined(h.group.poll_join(&m1)).generation, 1);
}

#[test]
fn the_rebalance_timeout_removes_members_that_did_not_rejoin() {
    let mut h = Harness::new(no_delay());
    let mut r = req("c", http(&["a"]));
    r.session_timeout_ms = 60_000;
    r.rebalance_timeout_ms = 5_000;
    let m1 = joined(h.join(r.clone(), 0)).member_id;
    let m2 = pending(h.join(r.clone(), 0));
    joined(h.join(
        JoinRequest {
            member_id: Some(m1.clone()),
            ..r.clone()
        },
        0,
    ));
    let m3 = pending(h.join(r.clone(), 1000));
    pending(h.join(
        JoinRequest {
            member_id: Some(m1.clone()),
            ..r.clone()
        },
        1100,
    ));
    // m2 heartbeats but does not rejoin: that does not keep it.
    assert!(matches!(
        h.group.heartbeat(&m2, None, 2, 5000),
        Err(BrokerError::RebalanceInProgress { .. })
    ));
    h.tick(5999);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    h.tick(6000);
    assert_eq!(h.group.state(), GroupState::Stable);
    assert!(h.group.take_changes().contains(&Change::MemberRemoved {
        member_id: m2.clone(),
        reason: Removal::MissedRebalance
    }));
    assert_eq!(joined(h.group.poll_join(&m1)).generation, 3);
    assert_eq!(joined(h.group.poll_join(&m3)).generation, 3);
    assert!(matches!(
        h.group.poll_join(&m2),
        Err(BrokerError::UnknownMember { .. })
    ));
    assert_eq!(h.partitions(&m1).len() + h.partitions(&m3).len(), 4);
}

#[test]
fn a_kafka_group_relays_the_leaders_assignment_to_waiting_followers() {
    let mut h = Harness::new(no_delay());
    let k1 = joined(h.join(
        req("k", kafka(&[("roundrobin", b"m1rr"), ("range", b"m1")])),
        0,
    ));
    assert_eq!(
        (k1.generation, k1.protocol_name.as_str()),
        (1, "roundrobin")
    );
    assert_eq!(h.group.state(), GroupState::CompletingRebalance);
    assert_eq!(k1.assignment, None);
    let own = h.group.sync(
        &k1.member_id,
        None,
        1,
        Some(vec![(k1.member_id.clone(), Bytes::from_static(b"x"))]),
        1,
    );
    assert_eq!(
        own.unwrap(),
        SyncOutcome::Synced(MemberAssignment::Opaque(Bytes::from_static(b"x")))
    );
    assert_eq!(h.group.state(), GroupState::Stable);

    let k2 = pending(h.join(req("k", kafka(&[("range", b"m2")])), 10));
    let leader = joined(h.join(
        rejoin(
            &k1.member_id,
            kafka(&[("roundrobin", b"m1rr"), ("range", b"m1")]),
        ),
        11,
    ));
    let follower = joined(h.group.poll_join(&k2));
    // Only "range" is supported by both.
    assert_eq!(leader.protocol_name, "range");
    assert_eq!(leader.leader_id, k1.member_id);
    let metadata: Vec<(&str, &[u8])> = leader
        .members
        .iter()
        .map(|m| (m.member_id.as_str(), &m.metadata[..]))
        .collect();
    assert_eq!(
        metadata,
        vec![
            (k1.member_id.as_str(), &b"m1"[..]),
            (k2.as_str(), &b"m2"[..])
        ]
    );
    assert!(follower.members.is_empty());

    assert_eq!(
        h.group.sync(&k2, None, 2, None, 12).unwrap(),
        SyncOutcome::Pending
    );
    assert_eq!(h.group.poll_sync(&k2, 2).unwrap(), SyncOutcome::Pending);
    let plan = vec![
        (k1.member_id.clone(), Bytes::from_static(b"a1")),
        (k2.clone(), Bytes::from_static(b"a2")),
        ("not-a-member".into(), Bytes::from_static(b"zz")),
    ];
    assert_eq!(
        h.group
            .sync(&k1.member_id, None, 2, Some(plan), 13)
            .unwrap(),
        SyncOutcome::Synced(MemberAssignment::Opaque(Bytes::from_static(b"a1")))
    );
    assert_eq!(
        h.group.poll_sync(&k2, 2).unwrap(),
        SyncOutcome::Synced(MemberAssignment::Opaque(Bytes::from_static(b"a2")))
    );
}

#[test]
fn a_kafka_member_that_never_syncs_is_removed_at_the_rebalance_timeout() {
    let mut h = Harness::new(no_delay());
    let k1 = joined(h.join(req("k", kafka(&[("range", b"")])), 0)).member_id;
    h.group.sync(&k1, None, 1, Some(Vec::new()), 0).unwrap();
    let k2 = pending(h.join(req("k", kafka(&[("range", b"")])), 0));
    joined(h.join(rejoin(&k1, kafka(&[("range", b"")])), 0));
    assert_eq!(h.group.state(), GroupState::CompletingRebalance);
    // k2 syncs; the leader never does.
    assert_eq!(
        h.group.sync(&k2, None, 2, None, 1).unwrap(),
        SyncOutcome::Pending
    );
    assert!(matches!(
        h.group.validate_commit(
            CommitOrigin::Member {
                member_id: &k2,
                instance_id: None,
                generation: 2
            },
            2
        ),
        Err(BrokerError::RebalanceInProgress { .. })
    ));
    // The leader heartbeats (so its session holds) but never syncs.
    for now in [9_000, 18_000, 27_000] {
        h.group.heartbeat(&k1, None, 2, now).unwrap();
        h.group.heartbeat(&k2, None, 2, now).unwrap();
    }
    h.tick(REBALANCE_MS - 1);
    assert_eq!(h.group.state(), GroupState::CompletingRebalance);
    h.tick(REBALANCE_MS);
    assert!(h.group.take_changes().contains(&Change::MemberRemoved {
        member_id: k1.clone(),
        reason: Removal::MissedSync
    }));
    assert_eq!(h.group.member_count(), 1);
    assert!(matches!(
        h.group.poll_sync(&k2, 2),
        Err(BrokerError::RebalanceInProgress { .. })
    ));
}

#[test]
fn the_other_kind_or_another_assignor_cannot_join() {
    let mut h = Harness::new(no_delay());
    joined(h.join(req("c", http(&["a"])), 0));
    assert!(matches!(
        h.join(req("k", kafka(&[("range", b"")])), 1),
        Err(BrokerError::InconsistentGroupProtocol { .. })
    ));
    let rr = MemberProtocol::Http {
        topics: vec!["a".into()],
        assignor: Assignor::RoundRobin,
    };
    assert!(matches!(
        h.join(req("c", rr), 1),
        Err(BrokerError::InconsistentGroupProtocol { .. })
    ));

    let mut k = Harness::new(no_delay());
    joined(k.join(req("k", kafka(&[("range", b"")])), 0));
    assert!(matches!(
        k.join(req("k", kafka(&[("sticky", b"")])), 1),
        Err(BrokerError::InconsistentGroupProtocol { .. })
    ));
    assert_eq!(k.group.member_count(), 1);
}

#[test]
fn a_new_kafka_member_may_be_asked_to_rejoin_with_its_id() {
    let mut h = Harness::new(no_delay());
    let mut r = req("k", kafka(&[("range", b"")]));
    r.require_known_member_id = true;
    let Err(BrokerError::MemberIdRequired { member_id, .. }) = h.join(r.clone(), 0) else {
        panic!("expected MEMBER_ID_REQUIRED");
    };
    assert_eq!(h.group.member_count(), 0);
    r.member_id = Some(member_id.clone());
    assert_eq!(joined(h.join(r.clone(), 1)).member_id, member_id);
    // A handed-out id lapses after a session.
    r.member_id = None;
    let Err(BrokerError::MemberIdRequired {
        member_id: lapsed, ..
    }) = h.join(r.clone(), 2)
    else {
        panic!("expected MEMBER_ID_REQUIRED");
    };
    h.group.heartbeat(&member_id, None, 1, SESSION_MS).unwrap();
    h.tick(SESSION_MS + 2);
    r.member_id = Some(lapsed);
    assert!(matches!(
        h.join(r, SESSION_MS + 3),
        Err(BrokerError::UnknownMember { .. })
    ));
}

#[test]
fn client_controlled_sizes_are_bounded() {
    let mut h = Harness::new(no_delay());
    let too_long = "x".repeat(config::CLIENT_TEXT_MAX_BYTES + 1);
    let limit =
        |r: Result<JoinOutcome, BrokerError>| matches!(r, Err(BrokerError::GroupLimit { .. }));
    assert!(limit(h.join(req(&too_long, http(&["a"])), 0)));
    assert!(limit(h.join(
        JoinRequest {
            host: too_long.clone(),
            ..req("c", http(&["a"]))
        },
        0
    )));
    assert!(limit(h.join(
        JoinRequest {
            member_id: Some("m".repeat(config::MEMBER_ID_MAX_BYTES + 1)),
            ..req("c", http(&["a"]))
        },
        0
    )));
    assert!(limit(h.join(
        JoinRequest {
            instance_id: Some("i".repeat(config::INSTANCE_ID_MAX_BYTES + 1)),
            ..req("c", http(&["a"]))
        },
        0
    )));
    let many: Vec<String> = (0..=config::SUBSCRIPTION_TOPICS_MAX)
        .map(|i| format!("t{i}"))
        .collect();
    let many = MemberProtocol::Http {
        topics: many,
        assignor: Assignor::Range,
    };
    assert!(limit(h.join(req("c", many), 0)));
    let big: &'static [u8] =
        Box::leak(vec![0u8; config::PROTOCOL_METADATA_MAX_BYTES + 1].into_boxed_slice());
    assert!(limit(h.join(req("k", kafka(&[("range", big)])), 0)));
    assert!(matches!(
        h.join(
            JoinRequest {
                session_timeout_ms: 10,
                ..req("c", http(&["a"]))
            },
            0
        ),
        Err(BrokerError::InvalidSessionTimeout { timeout_ms: 10, .. })
    ));
    assert_eq!(h.group.member_count(), 0, "nothing refused was stored");

    for _ in 0..config::GROUP_MEMBERS_MAX {
        h.join(req("c", http(&["a"])), 0).unwrap();
    }
    assert!(matches!(
        h.join(req("c", http(&["a"])), 0),
        Err(BrokerError::GroupLimit { len, max, .. }) if len == max + 1
    ));

    let mut k = Harness::new(no_delay());
    let leader = joined(k.join(req("k", kafka(&[("range", b"")])), 0)).member_id;
    let huge = Bytes::from(vec![0u8; config::ASSIGNMENT_MAX_BYTES + 1]);
    assert!(matches!(
        k.group
            .sync(&leader, None, 1, Some(vec![(leader.clone(), huge)]), 1),
        Err(BrokerError::GroupLimit { .. })
    ));
    assert_eq!(k.group.state(), GroupState::CompletingRebalance);
}

#[test]
fn offsets_expire_only_without_members_after_the_later_of_commit_and_empty() {
    let day = 24 * 3600 * 1000;
    assert!(
        !offsets_expired(1, 0, 0, 100 * day, day),
        "members keep offsets"
    );
    assert!(!offsets_expired(0, 0, 5 * day, 5 * day + day - 1, day));
    assert!(offsets_expired(0, 0, 5 * day, 6 * day, day));
    assert!(!offsets_expired(
        0,
        7 * day,
        5 * day,
        7 * day + day - 1,
        day
    ));
    assert!(offsets_expired(0, 7 * day, 5 * day, 8 * day, day));
}

fn coordinator(clock: &Arc<ManualClock>) -> Coordinator {
    Coordinator::new(
        no_delay(),
        clock.clone(),
        Box::new(SequentialIds::default()),
    )
    .unwrap()
}

#[test]
fn the_coordinator_wakes_a_waiting_join_and_reports_tick_changes() {
    let clock = Arc::new(ManualClock::new(1_000));
    let c = coordinator(&clock);
    let t = topics();
    let m1 = joined(c.join("g", req("c", http(&["a"])), &t)).member_id;
    let m2 = pending(c.join("g", req("c", http(&["a"])), &t));
    let listener = c.listen("g").unwrap();
    assert_eq!(pending(c.poll_join("g", &m2)), m2);
    joined(c.join("g", rejoin(&m1, http(&["a"])), &t));
    assert!(
        listener.wait_timeout(Duration::ZERO).is_some(),
        "the completed join notified"
    );
    assert_eq!(joined(c.poll_join("g", &m2)).generation, 2);

    assert_eq!(c.next_deadline_ms(), Some(1_000 + SESSION_MS));
    clock.advance(5_000);
    c.heartbeat("g", &m1, None, 2).unwrap();
    clock.advance(SESSION_MS - 5_000 - 1);
    assert!(c.tick(&t).is_empty());
    clock.advance(1);
    let listener = c.listen("g").unwrap();
    let changes = c.tick(&t);
    assert!(changes.contains(&GroupChange {
        group: "g".into(),
        change: Change::MemberRemoved {
            member_id: m2.clone(),
            reason: Removal::SessionExpired
        }
    }));
    assert!(listener.wait_timeout(Duration::ZERO).is_some());
    let snap = c.describe("g").unwrap();
    assert_eq!(
        (snap.state, snap.kind),
        (GroupState::PreparingRebalance, Some(ProtocolKind::Http))
    );
    assert_eq!(c.list().len(), 1);
}

#[test]
fn the_coordinator_refuses_bad_groups_and_deleting_a_group_with_members() {
    let clock = Arc::new(ManualClock::new(0));
    let c = coordinator(&clock);
    let t = topics();
    assert!(matches!(
        c.join("", req("c", http(&["a"])), &t),
        Err(BrokerError::InvalidName { .. })
    ));
    assert!(matches!(
        c.join(
            "g",
            JoinRequest {
                session_timeout_ms: 1,
                ..req("c", http(&["a"]))
            },
            &t
        ),
        Err(BrokerError::InvalidSessionTimeout { .. })
    ));
    assert!(
        c.describe("g").is_none(),
        "a refused first join leaves no group"
    );
    c.validate_commit("g", CommitOrigin::Stateless).unwrap();

    let m = joined(c.join("g", req("c", http(&["a"])), &t)).member_id;
    assert!(matches!(
        c.delete_group("g"),
        Err(BrokerError::GroupHasMembers { members: 1, .. })
    ));
    assert!(matches!(
        c.validate_commit("g", CommitOrigin::Stateless),
        Err(BrokerError::GroupHasMembers { .. })
    ));
    assert!(!c.offsets_expired("g", 0));
    c.leave("g", Some(&m), None, &t).unwrap();
    clock.advance(c.config().offsets_retention_ms() - 1);
    assert!(
        !c.offsets_expired("g", 0),
        "retention counts from when it became empty"
    );
    clock.advance(1);
    assert!(c.offsets_expired("g", 0));
    c.delete_group("g").unwrap();
    assert!(c.describe("g").is_none());
    // A group the coordinator never saw counts as empty since it started.
    assert!(c.offsets_expired("other", 0));
    assert!(!c.offsets_expired("other", c.config().offsets_retention_ms()));
}

#[test]
fn the_coordinator_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Coordinator>();
}

/// A simulated client of the model test.
#[derive(Debug, Clone)]
struct Client {
    member_id: Option<String>,
    instance_id: Option<String>,
    topics: Vec<&'static str>,
    /// Last generation it joined.
    generation: Option<u32>,
    /// Waiting on a join.
    waiting: bool,
    /// A Kafka follower waiting on the leader's assignment.
    syncing: bool,
}

struct Model {
    rng: Rng,
    clock: Arc<ManualClock>,
    c: Coordinator,
    topics: BTreeMap<String, u32>,
    clients: Vec<Client>,
    /// Every (member id, generation) a join ever answered.
    history: Vec<(String, u32)>,
    last_generation: u32,
    steps_stable: usize,
    /// Half the seeds use round-robin (crossed with the initial delay).
    assignor: Assignor,
    /// Kafka members: the leader assigns (with the same assignors) and the
    /// coordinator relays.
    kafka: bool,
    /// Member id → the topics it last joined with.
    subscriptions: BTreeMap<String, Vec<String>>,
    initial_delay_ms: u64,
    /// A third of the HTTP seeds: server-side members (consumer
    /// instances), which rejoin on their own behalf.
    server_side: bool,
}

const MODEL_TOPICS: [&str; 3] = ["a", "b", "c"];

impl Model {
    fn new(seed: u64) -> Self {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let initial_delay_ms = if seed % 2 == 0 { 0 } else { 1500 };
        let config = GroupsConfig {
            initial_rebalance_delay_ms: initial_delay_ms,
            ..GroupsConfig::default()
        };
        let c =
            Coordinator::new(config, clock.clone(), Box::new(SequentialIds::default())).unwrap();
        Model {
            rng: Rng(seed),
            clock,
            c,
            topics: [("a", 3), ("b", 5), ("c", 1)]
                .into_iter()
                .map(|(t, n)| (t.to_string(), n))
                .collect(),
            clients: Vec::new(),
            history: Vec::new(),
            last_generation: 0,
            steps_stable: 0,
            assignor: if seed % 4 < 2 {
                Assignor::Range
            } else {
                Assignor::RoundRobin
            },
            kafka: seed % 5 >= 3,
            subscriptions: BTreeMap::new(),
            initial_delay_ms,
            server_side: seed % 5 < 3 && seed % 3 == 0,
        }
    }

    fn random_topics(&mut self) -> Vec<&'static str> {
        let mask = 1 + self.rng.below(7);
        MODEL_TOPICS
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, t)| *t)
            .collect()
    }

    fn join_request(
        client: &Client,
        with_id: bool,
        assignor: Assignor,
        kafka: bool,
        server_side: bool,
    ) -> JoinRequest {
        JoinRequest {
            member_id: if with_id {
                client.member_id.clone()
            } else {
                None
            },
            instance_id: client.instance_id.clone(),
            client_id: "m".into(),
            host: "/127.0.0.1".into(),
            session_timeout_ms: 6000,
            rebalance_timeout_ms: 8000,
            protocol: if kafka {
                MemberProtocol::Kafka {
                    protocol_type: "consumer".into(),
                    protocols: vec![(
                        assignor.name().to_string(),
                        Bytes::from(client.topics.join(",")),
                    )],
                }
            } else {
                MemberProtocol::Http {
                    topics: client.topics.iter().map(|t| t.to_string()).collect(),
                    assignor,
                }
            },
            require_known_member_id: false,
            server_side,
        }
    }

    fn record(&mut self, i: usize, outcome: Result<JoinOutcome, BrokerError>) {
        let client = &mut self.clients[i];
        match outcome {
            Ok(JoinOutcome::Joined(r)) => {
                client.member_id = Some(r.member_id.clone());
                client.generation = Some(r.generation);
                client.waiting = false;
                self.history.push((r.member_id.clone(), r.generation));
                if self.kafka {
                    self.sync_after_join(i, &r);
                }
            }
            Ok(JoinOutcome::Pending { member_id }) => {
                client.member_id = Some(member_id);
                client.waiting = true;
            }
            // Removed while it waited, or fenced: it starts over as new.
            Err(BrokerError::UnknownMember { .. } | BrokerError::FencedInstanceId { .. }) => {
                client.member_id = None;
                client.generation = None;
                client.waiting = false;
                client.syncing = false;
            }
            Err(e) => panic!("unexpected join error {e}"),
        }
    }

    /// A Kafka member's SyncGroup after its join: the leader assigns from
    /// the members' metadata, as a Kafka client does.
    fn sync_after_join(&mut self, i: usize, r: &JoinResponse) {
        let plan = (r.leader_id == r.member_id).then(|| {
            let topics: Vec<Vec<String>> = r
                .members
                .iter()
                .map(|m| {
                    let text = std::str::from_utf8(&m.metadata).unwrap();
                    text.split(',').map(str::to_string).collect()
                })
                .collect();
            let subscribers: Vec<assignor::Subscriber<'_>> = r
                .members
                .iter()
                .zip(&topics)
                .map(|(m, topics)| assignor::Subscriber {
                    member_id: &m.member_id,
                    instance_id: m.instance_id.as_deref(),
                    topics,
                })
                .collect();
            assignor::assign(self.assignor, &subscribers, &self.topics)
                .into_iter()
                .map(|(id, list)| (id, encode(&list)))
                .collect()
        });
        let instance = self.clients[i].instance_id.clone();
        let outcome = self
            .c
            .sync("g", &r.member_id, instance.as_deref(), r.generation, plan);
        self.record_sync(i, outcome);
    }

    fn record_sync(&mut self, i: usize, outcome: Result<SyncOutcome, BrokerError>) {
        self.clients[i].syncing = matches!(outcome, Ok(SyncOutcome::Pending));
        if let Err(e) = outcome {
            self.rejoin_after(i, e);
        }
    }

    /// A client told by a heartbeat or sync that it must join again.
    fn rejoin_after(&mut self, i: usize, error: BrokerError) {
        match error {
            BrokerError::RebalanceInProgress { .. } | BrokerError::IllegalGeneration { .. } => {
                self.join(i, true)
            }
            BrokerError::UnknownMember { .. } | BrokerError::FencedInstanceId { .. } => {
                self.clients[i].member_id = None;
                self.join(i, false);
            }
            e => panic!("unexpected error {e}"),
        }
    }

    fn join(&mut self, i: usize, with_id: bool) {
        let request = Self::join_request(
            &self.clients[i],
            with_id && self.clients[i].member_id.is_some(),
            self.assignor,
            self.kafka,
            self.server_side,
        );
        let outcome = self.c.join("g", request, &self.topics);
        let member_id = match &outcome {
            Ok(JoinOutcome::Joined(r)) => Some(r.member_id.clone()),
            Ok(JoinOutcome::Pending { member_id }) => Some(member_id.clone()),
            Err(_) => None,
        };
        if let Some(id) = member_id {
            let topics = self.clients[i]
                .topics
                .iter()
                .map(|t| t.to_string())
                .collect();
            self.subscriptions.insert(id, topics);
        }
        self.record(i, outcome);
    }

    /// What a live client does on its turn: poll a pending join, else
    /// heartbeat and rejoin when told to.
    fn act(&mut self, i: usize) {
        let client = self.clients[i].clone();
        let Some(id) = client.member_id.clone() else {
            return self.join(i, false);
        };
        let generation = client.generation.unwrap_or(0);
        if client.waiting {
            let outcome = self.c.poll_join("g", &id);
            return self.record(i, outcome);
        }
        if client.syncing {
            let outcome = self.c.poll_sync("g", &id, generation);
            return self.record_sync(i, outcome);
        }
        let beat = self
            .c
            .heartbeat("g", &id, client.instance_id.as_deref(), generation);
        if let Err(e) = beat {
            self.rejoin_after(i, e);
        }
    }

    fn step(&mut self) {
        let live = self.clients.len();
        match self.rng.below(100) {
            // A new client, a third of them static.
            0..=11 if live < 8 => {
                let instance_id =
                    (self.rng.below(3) == 0).then(|| format!("inst-{}", self.rng.below(4)));
                // A static id held by a live client is that client restarting.
                if let Some(at) = self
                    .clients
                    .iter()
                    .position(|c| c.instance_id.is_some() && c.instance_id == instance_id)
                {
                    self.clients[at].waiting = false;
                    return self.join(at, false);
                }
                let topics = self.random_topics();
                self.clients.push(Client {
                    member_id: None,
                    instance_id,
                    topics,
                    generation: None,
                    waiting: false,
                    syncing: false,
                });
                self.join(live, false);
            }
            12..=59 if live > 0 => {
                let i = self.rng.below(live as u64) as usize;
                self.act(i);
            }
            60..=65 if live > 0 => {
                // Leave.
                let i = self.rng.below(live as u64) as usize;
                let client = self.clients.remove(i);
                if let Some(id) = client.member_id {
                    let _ = self.c.leave("g", Some(&id), None, &self.topics);
                }
            }
            66..=70 if live > 0 => {
                // Crash: gone without a word; its session will expire.
                let i = self.rng.below(live as u64) as usize;
                self.clients.remove(i);
            }
            71..=74 if live > 0 => {
                // New subscription.
                let i = self.rng.below(live as u64) as usize;
                self.clients[i].topics = self.random_topics();
                self.join(i, true);
            }
            75..=79 if live > 0 => {
                // A commit with the client's own generation.
                let i = self.rng.below(live as u64) as usize;
                let client = self.clients[i].clone();
                if let (Some(id), Some(generation)) = (client.member_id, client.generation) {
                    let origin = CommitOrigin::Member {
                        member_id: &id,
                        instance_id: client.instance_id.as_deref(),
                        generation,
                    };
                    if self.c.validate_commit("g", origin).is_ok() {
                        let snap = self.c.describe("g").unwrap();
                        assert_eq!(
                            generation, snap.generation,
                            "a commit of another generation landed"
                        );
                        assert!(snap.members.iter().any(|m| m.member_id == id));
                    }
                }
            }
            _ => {
                self.clock.advance(self.rng.below(2500));
                let changes = self.c.tick(&self.topics);
                if self.server_side {
                    assert!(
                        !changes.iter().any(|c| matches!(
                            c.change,
                            Change::MemberRemoved {
                                reason: Removal::MissedRebalance,
                                ..
                            }
                        )),
                        "an HTTP member was removed for missing a join window: {changes:?}"
                    );
                }
            }
        }
    }

    fn check(&mut self) {
        let Some(snap) = self.c.describe("g") else {
            return;
        };
        assert!(
            snap.generation >= self.last_generation,
            "the generation went back"
        );
        self.last_generation = snap.generation;
        // Server-side members rejoin on their own behalf: without an
        // initial delay their group never waits in a join window.
        if self.server_side && self.initial_delay_ms == 0 {
            assert_ne!(
                snap.state,
                GroupState::PreparingRebalance,
                "an HTTP group waits for members to rejoin"
            );
        }
        // Every old generation's commit is refused.
        for (member_id, generation) in &self.history {
            if *generation < snap.generation {
                let origin = CommitOrigin::Member {
                    member_id,
                    instance_id: None,
                    generation: *generation,
                };
                assert!(
                    self.c.validate_commit("g", origin).is_err(),
                    "stale commit of {member_id} at {generation} accepted at {}",
                    snap.generation
                );
            }
        }
        let mut owners: BTreeMap<TopicPartition, &str> = BTreeMap::new();
        let mut subscribed: BTreeSet<&String> = BTreeSet::new();
        for m in &snap.members {
            let topics = if self.kafka {
                &self.subscriptions[&m.member_id]
            } else {
                &m.subscription
            };
            subscribed.extend(topics);
            let decoded;
            let assignment = match &m.assignment {
                Some(MemberAssignment::Opaque(bytes)) => {
                    assert!(self.kafka, "an HTTP group got an opaque assignment");
                    decoded = decode(bytes);
                    Some(&decoded)
                }
                Some(MemberAssignment::Partitions(list)) => {
                    assert!(!self.kafka, "a Kafka group got a computed assignment");
                    Some(list)
                }
                None => None,
            };
            match assignment {
                Some(list) => {
                    for tp in list {
                        assert!(
                            tp.partition < self.topics[tp.topic.as_str()],
                            "{tp:?} does not exist"
                        );
                        assert!(
                            topics.contains(&tp.topic),
                            "{} got {tp:?} it does not subscribe to",
                            m.member_id
                        );
                        if let Some(other) = owners.insert(tp.clone(), &m.member_id) {
                            panic!("{tp:?} owned by {other} and {}", m.member_id);
                        }
                    }
                }
                None => assert_ne!(
                    snap.state,
                    GroupState::Stable,
                    "a Stable member without assignment"
                ),
            }
        }
        if snap.state == GroupState::Stable {
            self.steps_stable += 1;
            for topic in subscribed {
                for p in 0..self.topics[topic.as_str()] {
                    assert!(
                        owners.contains_key(&TopicPartition::new(topic, p)),
                        "{topic}/{p} has no owner in a Stable group"
                    );
                }
            }
        }
        if let Some(leader) = &snap.leader {
            assert!(
                snap.members.iter().any(|m| &m.member_id == leader),
                "the leader is not a member"
            );
        }
    }

    /// Every live client keeps acting until the group settles.
    fn settle(&mut self) {
        for _ in 0..200 {
            for i in 0..self.clients.len() {
                self.act(i);
            }
            self.check();
            let snap = self.c.describe("g");
            let settled = snap.as_ref().is_some_and(|s| {
                s.state == GroupState::Stable
                    && s.members.len() == self.clients.len()
                    && self
                        .clients
                        .iter()
                        .all(|c| !c.waiting && !c.syncing && c.generation == Some(s.generation))
            });
            if settled
                || (self.clients.is_empty() && snap.is_none_or(|s| s.state == GroupState::Empty))
            {
                return;
            }
            self.clock.advance(1000);
            self.c.tick(&self.topics);
        }
        panic!("the group did not settle: {:?}", self.c.describe("g"));
    }
}

/// A Kafka member's assignment as the model's leader writes it:
/// `topic:partition` joined by `,`.
fn encode(list: &[TopicPartition]) -> Bytes {
    let parts: Vec<String> = list
        .iter()
        .map(|tp| format!("{}:{}", tp.topic, tp.partition))
        .collect();
    Bytes::from(parts.join(","))
}

fn decode(bytes: &[u8]) -> Vec<TopicPartition> {
    let text = std::str::from_utf8(bytes).unwrap();
    text.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (topic, partition) = p.split_once(':').unwrap();
            TopicPartition::new(topic, partition.parse().unwrap())
        })
        .collect()
}

#[test]
fn model_random_joins_leaves_expiries_and_crashes_keep_the_invariants() {
    let mut stable_steps = 0;
    let mut kafka_stable_steps = 0;
    let mut generations = 0;
    let mut server_side_stable_steps = 0;
    for seed in 0..50u64 {
        let mut model = Model::new(seed);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for _ in 0..200 {
                model.step();
                model.check();
            }
            model.settle();
        }));
        if let Err(panic) = result {
            eprintln!("model test failed with seed {seed}");
            std::panic::resume_unwind(panic);
        }
        stable_steps += model.steps_stable;
        if model.kafka {
            kafka_stable_steps += model.steps_stable;
        }
        if model.server_side {
            server_side_stable_steps += model.steps_stable;
        }
        generations += model.last_generation;
    }
    // The runs must exercise something: Stable groups and many rebalances.
    assert!(stable_steps > 1000, "only {stable_steps} stable steps");
    assert!(
        kafka_stable_steps > 300,
        "only {kafka_stable_steps} stable steps of Kafka groups"
    );
    assert!(generations > 500, "only {generations} generations");
    assert!(
        server_side_stable_steps > 300,
        "only {server_side_stable_steps} stable steps of server-side groups"
    );
}

fn big_kafka(protocols: usize, metadata_bytes: usize) -> MemberProtocol {
    MemberProtocol::Kafka {
        protocol_type: "consumer".into(),
        protocols: (0..protocols)
            .map(|p| {
                (
                    format!("assignor-{p}"),
                    Bytes::from(vec![p as u8; metadata_bytes]),
                )
            })
            .collect(),
    }
}

/// Member metadata is bounded per member (256 KiB in all) and over all
/// groups (`groups.max_member_metadata_bytes`): past it a join is
/// refused with GroupLimit (GROUP_MAX_SIZE_REACHED), a member that leaves
/// gives its bytes back, and a member already in may rejoin at the limit.
#[test]
fn member_metadata_is_bounded_per_member_and_over_all_groups() {
    let clock = Arc::new(ManualClock::new(0));
    let config = GroupsConfig {
        max_member_metadata_bytes: 600 * 1024,
        ..no_delay()
    };
    let t = topics();
    // 16 protocols of 64 KiB: within each bound alone, 1 MiB in all,
    // refused on its own (with room for it over all groups).
    let roomy = GroupsConfig {
        max_member_metadata_bytes: 4 << 20,
        ..no_delay()
    };
    let c = Coordinator::new(roomy, clock.clone(), Box::new(SequentialIds::default())).unwrap();
    assert!(matches!(
        c.join("g", req("c", big_kafka(16, 64 * 1024)), &t),
        Err(BrokerError::GroupLimit {
            what: "protocol bytes of a member",
            ..
        })
    ));
    assert_eq!(c.member_bytes(), 0);
    let c = Coordinator::new(config, clock.clone(), Box::new(SequentialIds::default())).unwrap();
    // 200 KiB members in two groups: the third passes 600 KiB.
    let m1 = joined(c.join("g", req("c", big_kafka(4, 50 * 1024)), &t)).member_id;
    let m2 = joined(c.join("h", req("c", big_kafka(4, 50 * 1024)), &t)).member_id;
    let held = c.member_bytes();
    assert!(held > 400 * 1024, "{held}");
    let refused = c.join("k", req("c", big_kafka(4, 50 * 1024)), &t);
    assert!(
        matches!(refused, Err(BrokerError::GroupLimit { what, .. }) if what.contains("max_member_metadata_bytes")),
        "{refused:?}"
    );
    assert!(
        c.describe("k").is_none(),
        "a refused first join leaves no group"
    );
    // A member already in rejoins with the same metadata.
    joined(c.join("g", rejoin(&m1, big_kafka(4, 50 * 1024)), &t));
    assert_eq!(c.member_bytes(), held);
    // A leave gives the bytes back; the third member fits then.
    c.leave("h", Some(&m2), None, &t).unwrap();
    assert!(c.member_bytes() < held);
    joined(c.join("k", req("c", big_kafka(4, 50 * 1024)), &t));
    // An HTTP instance's subscription counts too.
    let small = GroupsConfig {
        max_member_metadata_bytes: 256 * 1024,
        ..no_delay()
    };
    let c = Coordinator::new(small, clock, Box::new(SequentialIds::default())).unwrap();
    let long: Vec<String> = (0..1000).map(|i| format!("{i:0>240}")).collect();
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    joined(c.join("a", req("c", http(&long)), &t));
    assert!(c.member_bytes() >= 240_000);
    assert!(matches!(
        c.join("b", req("c", http(&long[..200])), &t),
        Err(BrokerError::GroupLimit { .. })
    ));
}

/// A catalog of one topic, `a`, with 2 partitions.
struct OneTopic;

impl TopicCatalog for OneTopic {
    fn topic(&self, name: &str) -> Option<consumer::assignors::TopicShape> {
        (name == "a").then_some(consumer::assignors::TopicShape {
            id: uuid::Uuid::from_u128(9),
            partitions: 2,
        })
    }
    fn principal(&self) -> String {
        "User:ANONYMOUS".into()
    }
    fn names(&self) -> Vec<String> {
        vec!["a".into()]
    }
}

fn consumer_join(member_id: &str) -> Heartbeat {
    Heartbeat {
        member_id: member_id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        topic_names: Some(vec!["a".into()]),
        owned: Some(consumer::Partitions::new()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Heartbeat::default()
    }
}

#[test]
fn a_group_id_speaks_one_protocol_at_a_time() {
    let clock = Arc::new(ManualClock::new(1_000));
    let c = Coordinator::new(
        no_delay(),
        clock.clone(),
        Box::new(SequentialIds::default()),
    )
    .unwrap();
    let a = c
        .consumer_heartbeat("g", consumer_join("m1"), &OneTopic)
        .unwrap();
    assert_eq!(a.member_epoch, 1);
    // A classic join into it while it has members is refused.
    assert!(matches!(
        c.join("g", req("k", kafka(&[("range", b"")])), &topics()),
        Err(BrokerError::InconsistentGroupProtocol { .. })
    ));
    let seen = c.describe("g").unwrap();
    assert_eq!(seen.group_type, GroupType::Consumer);
    assert_eq!(seen.state, GroupState::Stable);
    assert_eq!(seen.protocol.as_deref(), Some("uniform"));
    assert_eq!(seen.members[0].subscription, ["a"]);
    assert_eq!(c.kind_of("g"), Some(ProtocolKind::Kafka));
    assert_eq!(c.list().len(), 1);
    assert_eq!(c.stats().members, 1);
    c.validate_commit(
        "g",
        CommitOrigin::Member {
            member_id: "m1",
            instance_id: None,
            generation: 1,
        },
    )
    .unwrap();
    assert!(c.delete_group("g").is_err());
    // The session ends: the group is empty and a classic join takes it.
    assert_eq!(c.next_deadline_ms(), Some(1_000 + 45_000));
    clock.advance(45_000);
    let changes = c.tick(&topics());
    assert!(changes
        .iter()
        .any(|ch| matches!(ch.change, Change::Empty { .. })));
    assert!(c.describe_consumer("g").is_some());
    c.join("g", req("k", kafka(&[("range", b"")])), &topics())
        .unwrap();
    assert!(c.describe_consumer("g").is_none());
    assert_eq!(c.describe("g").unwrap().group_type, GroupType::Classic);
    // And a heartbeat into a classic group with members is refused.
    assert!(matches!(
        c.consumer_heartbeat("g", consumer_join("m2"), &OneTopic),
        Err(BrokerError::MemberRefused {
            refusal: MemberRefusal::NotConsumerGroup,
            ..
        })
    ));
    // A heartbeat of a member of a group that does not exist: rejoin.
    let mut lost = consumer_join("m3");
    lost.member_epoch = 4;
    assert!(matches!(
        c.consumer_heartbeat("other", lost, &OneTopic),
        Err(BrokerError::UnknownMember { .. })
    ));
    assert!(c.describe("other").is_none());
}

#[test]
fn a_kip848_group_s_own_timeouts_replace_the_broker_s_at_its_next_heartbeat() {
    let clock = Arc::new(ManualClock::new(1_000));
    let c = Coordinator::new(
        no_delay(),
        clock.clone(),
        Box::new(SequentialIds::default()),
    )
    .unwrap();
    let broker = c.config().clone();
    c.set_group_timeouts(
        "g",
        config::GroupTimeouts {
            session_timeout_ms: Some(50_000),
            heartbeat_interval_ms: Some(2_000),
        },
    );
    let a = c
        .consumer_heartbeat("g", consumer_join("m1"), &OneTopic)
        .unwrap();
    assert_eq!(a.heartbeat_interval_ms, 2_000);
    assert_eq!(c.next_deadline_ms(), Some(1_000 + 50_000));
    // Another group keeps the broker's.
    let b = c
        .consumer_heartbeat("h", consumer_join("m2"), &OneTopic)
        .unwrap();
    assert_eq!(
        b.heartbeat_interval_ms,
        broker.consumer_heartbeat_interval_ms
    );
    // Removed: the broker's again from the next heartbeat on.
    c.set_group_timeouts("g", config::GroupTimeouts::default());
    let mut again = consumer_join("m1");
    again.member_id = a.member_id.clone();
    again.member_epoch = a.member_epoch;
    again.owned = a.assignment.clone();
    let a = c.consumer_heartbeat("g", again, &OneTopic).unwrap();
    assert_eq!(
        a.heartbeat_interval_ms,
        broker.consumer_heartbeat_interval_ms
    );
}
