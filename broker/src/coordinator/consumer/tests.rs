#![allow(clippy::unwrap_used)]

use std::cell::RefCell;

use super::*;

/// Topics by name, changed by the tests.
#[derive(Default)]
struct Catalog(RefCell<BTreeMap<String, TopicShape>>);

impl Catalog {
    fn with(topics: &[(&str, u128, u32)]) -> Self {
        let c = Catalog::default();
        for (name, id, partitions) in topics {
            c.set(name, *id, *partitions);
        }
        c
    }

    fn set(&self, name: &str, id: u128, partitions: u32) {
        self.0.borrow_mut().insert(
            name.to_string(),
            TopicShape {
                id: Uuid::from_u128(id),
                partitions,
            },
        );
    }
}

impl TopicCatalog for Catalog {
    fn topic(&self, name: &str) -> Option<TopicShape> {
        self.0.borrow().get(name).copied()
    }
    fn principal(&self) -> String {
        "User:ANONYMOUS".into()
    }
    fn names(&self) -> Vec<String> {
        self.0.borrow().keys().cloned().collect()
    }
}

fn config() -> GroupsConfig {
    GroupsConfig {
        consumer_session_timeout_ms: 45_000,
        consumer_heartbeat_interval_ms: 5_000,
        ..GroupsConfig::default()
    }
}

fn join(id: &str, topics: &[&str]) -> Heartbeat {
    Heartbeat {
        member_id: id.to_string(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        owned: Some(Partitions::new()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Heartbeat::default()
    }
}

/// A steady heartbeat reporting `owned`.
fn beat(id: &str, epoch: i32, owned: &Partitions) -> Heartbeat {
    Heartbeat {
        member_id: id.to_string(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned.clone()),
        ..Heartbeat::default()
    }
}

fn t(id: u128, partitions: &[u32]) -> Partitions {
    Partitions::from([(Uuid::from_u128(id), partitions.iter().copied().collect())])
}

fn count(p: &Partitions) -> usize {
    p.values().map(BTreeSet::len).sum()
}

/// Drives one group the way clients do: each member heartbeats with
/// what it was last given.
struct Run {
    group: ConsumerGroup,
    catalog: Catalog,
    now: u64,
    /// Member id → (epoch, owned) as the client knows them.
    clients: BTreeMap<String, (i32, Partitions)>,
}

impl Run {
    fn new(topics: &[(&str, u128, u32)]) -> Self {
        Run {
            group: ConsumerGroup::new("g", 0),
            catalog: Catalog::with(topics),
            now: 1_000,
            clients: BTreeMap::new(),
        }
    }

    fn send(&mut self, hb: Heartbeat) -> Result<HeartbeatAnswer, BrokerError> {
        self.group
            .heartbeat(hb, self.now, &config(), &self.catalog, || "made".into())
    }

    fn join(&mut self, id: &str, topics: &[&str]) -> HeartbeatAnswer {
        let a = self.send(join(id, topics)).unwrap();
        self.learn(&a);
        a
    }

    fn learn(&mut self, a: &HeartbeatAnswer) {
        let entry = self
            .clients
            .entry(a.member_id.clone())
            .or_insert((0, Partitions::new()));
        entry.0 = a.member_epoch;
        if let Some(assignment) = &a.assignment {
            entry.1 = assignment.clone();
        }
    }

    fn beat(&mut self, id: &str) -> HeartbeatAnswer {
        let (epoch, owned) = self.clients[id].clone();
        let a = self.send(beat(id, epoch, &owned)).unwrap();
        self.learn(&a);
        a
    }

    /// Heartbeats every member in turn until the group is Stable; the
    /// rounds it took.
    fn settle(&mut self) -> usize {
        for round in 1..=20 {
            let ids: Vec<String> = self.clients.keys().cloned().collect();
            for id in ids {
                self.beat(&id);
                self.assert_no_partition_twice();
            }
            if self.group.state() == ConsumerGroupState::Stable {
                return round;
            }
        }
        panic!("not stable after 20 rounds: {:?}", self.group.snapshot());
    }

    /// What clients hold never overlaps: no partition is consumed twice.
    fn assert_no_partition_twice(&self) {
        let mut seen = BTreeSet::new();
        for (id, (_, owned)) in &self.clients {
            for (topic, ps) in owned {
                for p in ps {
                    assert!(seen.insert((*topic, *p)), "{topic} {p} twice (last {id})");
                }
            }
        }
    }

    fn owned(&self, id: &str) -> &Partitions {
        &self.clients[id].1
    }
}

#[test]
fn a_first_member_gets_every_partition_at_epoch_1() {
    let mut run = Run::new(&[("a", 1, 3)]);
    let a = run.join("m1", &["a"]);
    assert_eq!(a.member_epoch, 1);
    assert_eq!(a.heartbeat_interval_ms, 5_000);
    assert_eq!(a.assignment, Some(t(1, &[0, 1, 2])));
    assert_eq!(run.group.state(), ConsumerGroupState::Stable);
    // A steady heartbeat answers no assignment: nothing changed.
    let again = run.beat("m1");
    assert_eq!((again.member_epoch, again.assignment), (1, None));
}

#[test]
fn a_joining_member_waits_for_the_partitions_another_revokes() {
    let mut run = Run::new(&[("a", 1, 4)]);
    run.join("m1", &["a"]);
    // m2 joins: epoch 2; all of its target is still owned by m1.
    let a = run.join("m2", &["a"]);
    assert_eq!(a.member_epoch, 2);
    assert_eq!(a.assignment, Some(Partitions::new()));
    // Short of its target, it is asked back in a tenth of the interval.
    assert_eq!(a.heartbeat_interval_ms, 500);
    assert_eq!(run.group.state(), ConsumerGroupState::Reconciling);
    // m1 is told to keep half: it stays at epoch 1 until it has let go.
    let r = run.beat("m1");
    assert_eq!(r.member_epoch, 1);
    assert_eq!(count(r.assignment.as_ref().unwrap()), 2);
    // m2 gets nothing while m1 has not confirmed.
    assert_eq!(run.beat("m2").assignment, None);
    // m1's next heartbeat lists only what it kept: it reaches epoch 2.
    let r = run.beat("m1");
    assert_eq!(r.member_epoch, 2);
    // Now m2 is given the released half.
    let r = run.beat("m2");
    assert_eq!(count(r.assignment.as_ref().unwrap()), 2);
    assert_eq!(r.heartbeat_interval_ms, 5_000, "at its target again");
    assert_eq!(run.group.state(), ConsumerGroupState::Stable);
    run.assert_no_partition_twice();
}

#[test]
fn ten_members_converge_balanced_without_any_partition_twice() {
    let mut run = Run::new(&[("a", 1, 20), ("b", 2, 7)]);
    for i in 0..9 {
        run.join(&format!("m{i}"), &["a", "b"]);
        run.settle();
    }
    let before: BTreeMap<String, Partitions> = run
        .clients
        .iter()
        .map(|(id, (_, p))| (id.clone(), p.clone()))
        .collect();
    run.join("m9", &["a", "b"]);
    let rounds = run.settle();
    assert!(rounds <= 3, "{rounds} rounds");
    let counts: Vec<usize> = run.clients.values().map(|(_, p)| count(p)).collect();
    assert_eq!(counts.iter().sum::<usize>(), 27);
    assert!(
        counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
        "{counts:?}"
    );
    // Sticky: old members only gave partitions up, none moved between them.
    for (id, had) in &before {
        for (topic, ps) in run.owned(id) {
            assert!(ps.is_subset(&had[topic]), "{id} gained {ps:?}");
        }
    }
}

#[test]
fn epochs_are_fenced_except_a_lost_answer() {
    let mut run = Run::new(&[("a", 1, 2)]);
    run.join("m1", &["a"]);
    run.join("m2", &["a"]);
    run.settle();
    let (epoch, owned) = run.clients["m1"].clone();
    // Above the member's epoch.
    let err = run.send(beat("m1", epoch + 1, &owned)).unwrap_err();
    assert!(matches!(
        err,
        BrokerError::MemberRefused {
            refusal: MemberRefusal::FencedMemberEpoch { .. },
            ..
        }
    ));
    // The previous epoch, with no more than it owns: its last answer was
    // lost, and it is answered again.
    let previous = run.group.members["m1"].previous_epoch;
    let a = run
        .send(beat("m1", i32::try_from(previous).unwrap(), &owned))
        .unwrap();
    assert_eq!(a.member_epoch, epoch);
    // An older one, or partitions it does not own, are fenced.
    let err = run.send(beat("m1", -5 + 5, &owned)).unwrap_err();
    assert!(matches!(err, BrokerError::MemberRefused { .. }), "{err}");
    let stranger = t(1, &[0, 1]);
    let err = run
        .send(beat("m1", i32::try_from(previous).unwrap(), &stranger))
        .unwrap_err();
    assert!(matches!(err, BrokerError::MemberRefused { .. }), "{err}");
    // Unknown members are UNKNOWN_MEMBER_ID.
    let err = run.send(beat("nobody", 3, &Partitions::new())).unwrap_err();
    assert!(matches!(err, BrokerError::UnknownMember { .. }));
}

#[test]
fn a_silent_member_expires_and_its_partitions_move() {
    let mut run = Run::new(&[("a", 1, 4)]);
    run.join("m1", &["a"]);
    run.join("m2", &["a"]);
    run.settle();
    assert_eq!(run.group.next_deadline_ms(), Some(run.now + 45_000));
    run.now += 30_000;
    run.beat("m2");
    run.now += 20_000;
    run.group.tick(run.now);
    let (departures, _) = run.group.take_departures();
    assert_eq!(departures, [("m1".to_string(), Departure::SessionExpired)]);
    run.clients.remove("m1");
    run.settle();
    assert_eq!(count(run.owned("m2")), 4);
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_removed() {
    let mut run = Run::new(&[("a", 1, 4)]);
    run.join("m1", &["a"]);
    run.join("m2", &["a"]);
    // m1 is told to revoke but never confirms.
    let (epoch, owned) = run.clients["m1"].clone();
    run.send(beat("m1", epoch, &owned)).unwrap();
    run.now += 29_000;
    run.group.tick(run.now);
    assert_eq!(run.group.member_count(), 2);
    run.now += 2_000;
    run.group.tick(run.now);
    let (departures, _) = run.group.take_departures();
    assert_eq!(
        departures,
        [("m1".to_string(), Departure::RevocationExpired)]
    );
    run.clients.remove("m1");
    run.settle();
    assert_eq!(count(run.owned("m2")), 4);
}

#[test]
fn a_leave_hands_the_partitions_on() {
    let mut run = Run::new(&[("a", 1, 4)]);
    run.join("m1", &["a"]);
    run.join("m2", &["a"]);
    run.settle();
    let epoch = run.group.epoch();
    let a = run.send(beat("m1", -1, &Partitions::new())).unwrap();
    assert_eq!(a.member_epoch, -1);
    assert_eq!(run.group.epoch(), epoch + 1);
    run.clients.remove("m1");
    run.settle();
    assert_eq!(count(run.owned("m2")), 4);
    // The last member leaving empties the group.
    run.send(beat("m2", -1, &Partitions::new())).unwrap();
    assert_eq!(run.group.state(), ConsumerGroupState::Empty);
    assert_eq!(run.group.empty_since_ms(), Some(run.now));
}

#[test]
fn a_static_member_comes_back_to_its_partitions() {
    let mut run = Run::new(&[("a", 1, 4)]);
    let mut first = join("p1", &["a"]);
    first.instance_id = Some("host-1".into());
    let a = run.send(first).unwrap();
    run.learn(&a);
    run.join("m2", &["a"]);
    run.settle();
    let kept = run.owned("p1").clone();
    let epoch = run.group.epoch();
    let mut away = beat("p1", -2, &kept);
    away.instance_id = Some("host-1".into());
    assert_eq!(run.send(away).unwrap().member_epoch, -2);
    // Another process with the same instance id while it is away takes
    // over its partitions and epoch: nothing moves.
    let mut back = join("p1-restarted", &["a"]);
    back.instance_id = Some("host-1".into());
    let a = run.send(back.clone()).unwrap();
    assert_eq!(a.assignment, Some(kept));
    assert_eq!(run.group.epoch(), epoch);
    // While it is live, the instance id cannot be taken.
    back.member_id = "p1-third".into();
    let err = run.send(back).unwrap_err();
    assert!(matches!(
        err,
        BrokerError::MemberRefused {
            refusal: MemberRefusal::UnreleasedInstanceId { .. },
            ..
        }
    ));
}

#[test]
fn topics_created_grown_or_matched_later_move_the_epoch() {
    let mut run = Run::new(&[("a", 1, 2)]);
    run.join("m1", &["a", "later"]);
    let epoch = run.group.epoch();
    run.catalog.set("later", 2, 1);
    let a = run.beat("m1");
    assert_eq!(run.group.epoch(), epoch + 1);
    assert_eq!(count(a.assignment.as_ref().unwrap()), 3);
    run.catalog.set("a", 1, 4);
    let a = run.beat("m1");
    assert_eq!(count(a.assignment.as_ref().unwrap()), 5);
    // A pattern matches the topics there are at each refresh.
    let mut pattern = join("m2", &[]);
    pattern.topic_names = None;
    pattern.topic_regex = Some("pat-.*".into());
    let a = run.send(pattern).unwrap();
    run.learn(&a);
    assert_eq!(
        run.group.snapshot().members[1].subscribed,
        Vec::<String>::new()
    );
    run.catalog.set("pat-1", 3, 2);
    run.now += REGEX_REFRESH_MS;
    run.settle();
    assert_eq!(run.owned("m2"), &t(3, &[0, 1]));
    // A recreated topic (new id) is another topic: the old id's
    // partitions are revoked, the new one's assigned.
    run.catalog.set("pat-1", 4, 2);
    run.settle();
    assert_eq!(run.owned("m2"), &t(4, &[0, 1]));
}

#[test]
fn bad_heartbeats_are_refused_before_anything_changes() {
    let mut run = Run::new(&[("a", 1, 2)]);
    let invalid = |run: &mut Run, hb: Heartbeat| {
        let err = run.send(hb).unwrap_err();
        match err {
            BrokerError::MemberRefused { refusal, .. } => refusal,
            other => panic!("{other}"),
        }
    };
    let mut no_timeout = join("m", &["a"]);
    no_timeout.rebalance_timeout_ms = -1;
    let mut no_topics = join("m", &[]);
    no_topics.topic_names = None;
    let mut owning = join("m", &["a"]);
    owning.owned = Some(t(1, &[0]));
    let mut empty_instance = join("m", &["a"]);
    empty_instance.instance_id = Some(String::new());
    let mut bad_epoch = beat("m", -3, &Partitions::new());
    bad_epoch.member_epoch = -3;
    for hb in [no_timeout, no_topics, owning, empty_instance, bad_epoch] {
        assert!(matches!(
            invalid(&mut run, hb),
            MemberRefusal::InvalidRequest { .. }
        ));
    }
    let mut assignor = join("m", &["a"]);
    assignor.server_assignor = Some("sticky".into());
    assert!(matches!(
        invalid(&mut run, assignor),
        MemberRefusal::UnsupportedAssignor { .. }
    ));
    let mut regex = join("m", &[]);
    regex.topic_regex = Some("(".into());
    assert!(matches!(
        invalid(&mut run, regex),
        MemberRefusal::InvalidRegex { .. }
    ));
    let mut long = join("m", &[]);
    long.topic_regex = Some("a".repeat(REGEX_MAX_BYTES + 1));
    assert!(matches!(
        invalid(&mut run, long),
        MemberRefusal::InvalidRegex { .. }
    ));
    let mut bad_name = join("m", &["../x"]);
    bad_name.topic_names = Some(vec!["../x".into()]);
    assert!(run.send(bad_name).is_err());
    assert_eq!(run.group.member_count(), 0);
    assert_eq!(run.group.epoch(), 0);
}

#[test]
fn the_assignor_most_members_ask_for_is_used() {
    let mut run = Run::new(&[("a", 1, 4), ("b", 2, 4)]);
    let mut m1 = join("m1", &["a", "b"]);
    m1.server_assignor = Some("range".into());
    let a = run.send(m1).unwrap();
    run.learn(&a);
    run.join("m2", &["a", "b"]);
    run.settle();
    assert_eq!(run.group.snapshot().assignor, "range");
    // Range: the same partition numbers of both topics.
    let owned = run.owned("m1");
    assert_eq!(owned[&Uuid::from_u128(1)], owned[&Uuid::from_u128(2)]);
}

#[test]
fn commits_need_the_members_current_epoch() {
    let mut run = Run::new(&[("a", 1, 2)]);
    run.join("m1", &["a"]);
    let epoch = run.clients["m1"].0;
    run.group.validate_commit("m1", epoch).unwrap();
    assert!(matches!(
        run.group.validate_commit("m1", epoch - 1),
        Err(BrokerError::MemberRefused {
            refusal: MemberRefusal::StaleMemberEpoch { .. },
            ..
        })
    ));
    assert!(matches!(
        run.group.validate_commit("m1", epoch + 1),
        Err(BrokerError::MemberRefused {
            refusal: MemberRefusal::FencedMemberEpoch { .. },
            ..
        })
    ));
    assert!(matches!(
        run.group.validate_commit("other", epoch),
        Err(BrokerError::UnknownMember { .. })
    ));
    // An admin commit only into an empty group.
    assert!(matches!(
        run.group.validate_commit("", -1),
        Err(BrokerError::GroupHasMembers { .. })
    ));
    run.send(beat("m1", -1, &Partitions::new())).unwrap();
    run.group.validate_commit("", -1).unwrap();
}

/// The model test: seeded random joins, heartbeats (with what each client
/// last heard), leaves, crashes (a client goes silent), topic growth and
/// clock jumps. After every step no partition is held by two live
/// clients, and no member's epoch goes back; once the clients settle, the
/// group is Stable with every partition held once and balanced.
#[test]
fn model_no_partition_is_ever_held_twice() {
    use tidelog_storage::test_rng::SplitMix64 as Rng;
    for seed in 0..40 {
        let mut rng = Rng(seed);
        let mut run = Run::new(&[("a", 1, 7), ("b", 2, 5)]);
        let mut next_id = 0;
        let mut epochs: BTreeMap<String, i32> = BTreeMap::new();
        for _ in 0..300 {
            match rng.below(10) {
                0 | 1 if run.clients.len() < 8 => {
                    next_id += 1;
                    run.join(&format!("m{next_id}"), &["a", "b"]);
                }
                2 if !run.clients.is_empty() => {
                    let id = pick(&mut rng, &run.clients);
                    let (epoch, owned) = run.clients.remove(&id).unwrap();
                    if rng.one_in(2) {
                        run.send(beat(&id, -1, &owned)).unwrap();
                    }
                    // else: it crashed, silent until its session ends.
                    let _ = epoch;
                }
                3 => run.now += rng.below(20_000),
                4 if rng.one_in(10) => {
                    let grown = 5 + u32::try_from(rng.below(4)).unwrap();
                    run.catalog.set(
                        "b",
                        2,
                        grown.max(run.catalog.topic("b").unwrap().partitions),
                    );
                }
                _ if !run.clients.is_empty() => {
                    let id = pick(&mut rng, &run.clients);
                    let (epoch, owned) = run.clients[&id].clone();
                    match run.send(beat(&id, epoch, &owned)) {
                        Ok(a) => run.learn(&a),
                        // Expired or fenced: the client gives up what it
                        // held and joins again, as librdkafka does.
                        Err(_) => {
                            run.clients.remove(&id);
                            run.join(&id, &["a", "b"]);
                        }
                    }
                }
                _ => {}
            }
            run.group.tick(run.now);
            // Clients that the coordinator removed hold nothing any more
            // as far as it is concerned; a live client's view never
            // overlaps another's.
            run.clients
                .retain(|id, _| run.group.members.contains_key(id));
            run.assert_no_partition_twice();
            for (id, (epoch, _)) in &run.clients {
                let before = epochs.insert(id.clone(), *epoch).unwrap_or(0);
                assert!(
                    *epoch >= before,
                    "seed {seed}: {id} went from {before} to {epoch}"
                );
            }
        }
        // The crashed members' sessions end while the live ones keep
        // heartbeating; then the live ones settle.
        for _ in 0..12 {
            let ids: Vec<String> = run.clients.keys().cloned().collect();
            for id in ids {
                run.beat(&id);
            }
            run.now += 5_000;
            run.group.tick(run.now);
            run.assert_no_partition_twice();
        }
        assert_eq!(run.group.member_count(), run.clients.len(), "seed {seed}");
        if run.clients.is_empty() {
            continue;
        }
        run.settle();
        let counts: Vec<usize> = run.clients.values().map(|(_, p)| count(p)).collect();
        let total: u32 = ["a", "b"]
            .iter()
            .map(|t| run.catalog.topic(t).unwrap().partitions)
            .sum();
        assert_eq!(counts.iter().sum::<usize>(), total as usize, "seed {seed}");
        assert!(
            counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
            "seed {seed}: {counts:?}"
        );
    }
}

fn pick(
    rng: &mut tidelog_storage::test_rng::SplitMix64,
    clients: &BTreeMap<String, (i32, Partitions)>,
) -> String {
    let i = usize::try_from(rng.below(clients.len() as u64)).unwrap();
    clients.keys().nth(i).unwrap().clone()
}

/// librdkafka's 0045 and 0113 (n_wildcard) as Kafka answers them: a new
/// pattern's literal topics come first and its matches at a later
/// heartbeat; members with one pattern see a new matching topic in one
/// resolution, so none is given a partition it must then revoke.
#[test]
fn patterns_are_the_groups_and_resolved_after_the_heartbeat_that_brings_them() {
    let mut run = Run::new(&[("lit", 1, 2), ("re-1", 2, 2), ("re-2", 3, 2)]);
    let mut both = join("m1", &["lit"]);
    both.topic_regex = Some("re-.*".into());
    let a = run.send(both).unwrap();
    run.learn(&a);
    assert_eq!(a.assignment, Some(t(1, &[0, 1])), "literal topics first");
    assert!(
        a.heartbeat_interval_ms < 5_000,
        "asked back soon: its pattern is unresolved"
    );
    let a = run.beat("m1");
    assert_eq!(count(a.assignment.as_ref().unwrap()), 6, "then the matches");

    // Two members of one pattern; two matching topics appear.
    let mut run = Run::new(&[]);
    for id in ["c1", "c2"] {
        let mut hb = join(id, &[]);
        hb.topic_names = None;
        hb.topic_regex = Some("wild-.*".into());
        let a = run.send(hb).unwrap();
        run.learn(&a);
    }
    run.settle();
    run.catalog.set("wild-1", 4, 2);
    run.catalog.set("wild-2", 5, 2);
    run.now += REGEX_REFRESH_MS;
    let epoch = run.group.epoch();
    // The first heartbeat after resolves for both: c1 is given its half
    // only (resolved for c1 alone, it would take all four and give two
    // back when c2's own resolution came).
    let a = run.beat("c1");
    assert_eq!(count(a.assignment.as_ref().unwrap()), 2);
    let a = run.beat("c2");
    assert_eq!(count(a.assignment.as_ref().unwrap()), 2);
    run.settle();
    assert_eq!(run.group.epoch(), epoch + 1, "one resolution, one epoch");
    assert_eq!(count(run.owned("c1")), 2);
    assert_eq!(count(run.owned("c2")), 2);
    assert!(run.group.member_bytes() > 0);
    // The pattern goes with its last member.
    for id in ["c1", "c2"] {
        let owned = run.owned(id).clone();
        run.send(beat(id, -1, &owned)).unwrap();
    }
    assert!(run.group.patterns.is_empty());
}

/// A pattern that matches more topics than a member may subscribe to
/// refuses only its own members, and matches again once it fits.
#[test]
fn a_pattern_matching_too_many_topics_refuses_only_its_members() {
    let mut run = Run::new(&[("lit", 1, 2)]);
    run.join("plain", &["lit"]);
    let mut wide = join("wide", &[]);
    wide.topic_names = None;
    wide.topic_regex = Some("many-.*".into());
    let a = run.send(wide).unwrap();
    run.learn(&a);
    let max = u128::try_from(SUBSCRIPTION_TOPICS_MAX).unwrap();
    for i in 0..=max {
        run.catalog.set(&format!("many-{i}"), 100 + i, 1);
    }
    let (epoch, owned) = run.clients["wide"].clone();
    let err = run.send(beat("wide", epoch, &owned)).unwrap_err();
    assert!(matches!(err, BrokerError::GroupLimit { .. }), "{err}");
    // The other member goes on.
    run.beat("plain");
    assert_eq!(count(run.owned("plain")), 2);
    // One topic fewer and the pattern fits again.
    run.catalog.0.borrow_mut().remove("many-0");
    run.now += REGEX_REFRESH_MS;
    let a = run.send(beat("wide", epoch, &owned)).unwrap();
    run.learn(&a);
    run.settle();
    let total: usize = run.clients.values().map(|(_, p)| count(p)).sum();
    assert_eq!(total, 2 + SUBSCRIPTION_TOPICS_MAX);
}
