//! The manager against a real broker on a manual clock (expiry and auto
//! commit are driven by `tick`, never by waiting).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use event_listener::Listener;
use tidelog_storage::AppendRecord;

use super::*;
use crate::config::BrokerConfig;
use crate::coordinator::{Clock, CommitOrigin, GroupsConfig, ManualClock, TopicPartition};
use crate::fault::Faults;
use crate::groups::{CommitValue, OffsetCommit};
use crate::test_support::{cleaner_config, store_config, wait_until};
use crate::topic_config::Overrides;

const T0_MS: u64 = 1_700_000_000_000;
const TIMEOUT_MS: u64 = 10_000;

/// A subscriber whom nothing is refused: these tests run without
/// authorization.
fn anyone() -> crate::principal::Caller {
    crate::principal::Caller::anonymous()
}

struct Fixture {
    _dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    broker: Arc<Broker>,
    consumers: Arc<Consumers>,
}

fn fixture(partitions: u32) -> Fixture {
    fixture_with(partitions, 1000)
}

fn fixture_with(partitions: u32, max_instances: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0_MS));
    let config = BrokerConfig {
        groups: GroupsConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupsConfig::default()
        },
        ..BrokerConfig::default()
    };
    let broker = Arc::new(
        Broker::open_inner(
            &config,
            store_config(dir.path()),
            cleaner_config(),
            Faults::default(),
            Arc::clone(&clock) as Arc<dyn Clock>,
        )
        .unwrap(),
    );
    broker
        .create_topic("t", partitions, Overrides::new())
        .unwrap();
    let consumers = Consumers::new(
        &broker,
        ConsumersConfig {
            instance_timeout_ms: TIMEOUT_MS,
            max_instances,
        },
    );
    Fixture {
        _dir: dir,
        clock,
        broker,
        consumers,
    }
}

fn earliest(name: &str, auto_commit: bool) -> InstanceConfig {
    InstanceConfig {
        name: Some(name.into()),
        auto_offset_reset: OffsetReset::Earliest,
        auto_commit,
        ..InstanceConfig::default()
    }
}

/// A records call's answer as (partition, offset) pairs.
fn pairs(batches: &[PolledRecords]) -> Result<Vec<(u32, u64)>, BrokerError> {
    Ok(batches
        .iter()
        .flat_map(|b| b.records.iter().map(|r| (r.partition(), r.offset())))
        .collect())
}

impl Fixture {
    /// `n` records to each of `partitions` of topic t, visible when it
    /// returns.
    fn produce(&self, partitions: &[u32], n: usize) {
        let batch: Vec<AppendRecord> = partitions
            .iter()
            .flat_map(|p| {
                (0..n).map(move |i| AppendRecord {
                    topic: Arc::from("t"),
                    partition: *p,
                    key: None,
                    value: Some(Bytes::from(format!("p{p}-{i}"))),
                    headers: Vec::new(),
                    timestamp_ms: None,
                })
            })
            .collect();
        let appended = self.broker.store.append(&batch).unwrap();
        let want: BTreeMap<u32, u64> = batch
            .iter()
            .zip(&appended)
            .map(|(r, a)| (r.partition, a.queue_offset.get() + 1))
            .collect();
        for (p, end) in want {
            let part = self.broker.partition("t", p).unwrap();
            wait_until("the records to be dispatched", || part.offsets().1 >= end);
        }
    }

    fn subscribe(&self, name: &str) {
        self.consumers
            .subscribe("g", name, Subscription::Topics(vec!["t".into()]), &anyone())
            .unwrap();
    }

    /// Every record a last-try records call returns: (partition, offset).
    fn poll(&self, name: &str, max_bytes: usize) -> Vec<(u32, u64)> {
        match self
            .consumers
            .poll("g", name, max_bytes, true, pairs)
            .unwrap()
        {
            Poll::Records(pairs) => pairs,
            Poll::Wait(_) => panic!("a last try waits"),
        }
    }

    fn held(&self, name: &str) -> Vec<u32> {
        let mut held: Vec<u32> = self
            .consumers
            .assignments("g", name)
            .unwrap()
            .iter()
            .map(|tp| tp.partition)
            .collect();
        held.sort_unstable();
        held
    }

    fn committed(&self) -> BTreeMap<u32, u64> {
        self.broker
            .groups
            .get("g", Some("t"))
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.partition, c.offset))
            .collect()
    }
}

/// Two auto-commit instances split the topic; what the first returned is
/// committed before its partitions move, so the second does not read it
/// again; a deleted instance's partitions go to the other, again without
/// a duplicate or a loss.
#[test]
fn a_clean_handover_commits_first_and_duplicates_nothing() {
    let f = fixture(4);
    f.produce(&[0, 1, 2, 3], 3);
    f.consumers.create("g", earliest("a", true)).unwrap();
    f.subscribe("a");
    assert_eq!(f.held("a"), [0, 1, 2, 3]);
    let mut seen = f.poll("a", 1 << 20);
    assert_eq!(seen.len(), 12);
    f.consumers.create("g", earliest("b", true)).unwrap();
    f.subscribe("b");
    assert_eq!(
        f.committed(),
        BTreeMap::from([(0, 3), (1, 3), (2, 3), (3, 3)]),
        "a's records were committed before the rebalance"
    );
    assert_eq!((f.held("a"), f.held("b")), (vec![0, 1], vec![2, 3]));
    assert!(f.poll("b", 1 << 20).is_empty(), "b resumes at a's commits");
    f.produce(&[0, 1, 2, 3], 1);
    seen.extend(f.poll("a", 1 << 20));
    seen.extend(f.poll("b", 1 << 20));
    f.consumers.delete("g", "b").unwrap();
    assert_eq!(f.held("a"), [0, 1, 2, 3]);
    f.produce(&[2], 1);
    seen.extend(f.poll("a", 1 << 20));
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        seen.len(),
        "a record was read twice: {seen:?}"
    );
    assert_eq!(seen.len(), 17, "every record once");
    assert!(matches!(
        f.consumers.poll("g", "b", 1, true, pairs),
        Err(BrokerError::UnknownConsumerInstance { .. })
    ));
}

/// A commit carries the generation the instance last saw: one from before
/// a rebalance is refused, and so is one of a partition the instance no
/// longer holds; the ext route (no membership) is refused while the group
/// has members.
#[test]
fn stale_or_foreign_commits_are_refused() {
    let f = fixture(4);
    f.produce(&[0, 1, 2, 3], 2);
    f.consumers.create("g", earliest("a", false)).unwrap();
    f.subscribe("a");
    assert_eq!(f.poll("a", 1 << 20).len(), 8);
    f.consumers.create("g", earliest("b", false)).unwrap();
    f.subscribe("b");
    assert!(f.committed().is_empty(), "manual commit: nothing committed");
    let stale = f.consumers.commit("g", "a", None);
    assert!(
        matches!(stale, Err(BrokerError::IllegalGeneration { .. })),
        "{stale:?}"
    );
    assert_eq!(f.held("a"), [0, 1]);
    let foreign = OffsetCommit {
        topic: "t".into(),
        partition: 3,
        value: CommitValue {
            offset: 1,
            metadata: String::new(),
            ..Default::default()
        },
    };
    assert!(matches!(
        f.consumers.commit("g", "a", Some(vec![foreign.clone()])),
        Err(BrokerError::ConsumerState { .. })
    ));
    assert!(matches!(
        f.broker
            .commit_offsets("g", vec![foreign.clone()], CommitOrigin::Stateless),
        Err(BrokerError::GroupHasMembers { .. })
    ));
    // Its own partition at the current generation: offset + 1 is stored.
    let own = OffsetCommit {
        partition: 1,
        ..foreign
    };
    f.consumers.commit("g", "a", Some(vec![own])).unwrap();
    assert_eq!(f.committed(), BTreeMap::from([(1, 2)]));
}

/// A partition resumes at the group's committed offset, else by
/// auto.offset.reset (`none`: an error naming it); a committed offset past
/// the end (a truncating recovery) is reset, not read from.
#[test]
fn positions_resume_at_commits_else_by_reset() {
    let f = fixture(2);
    f.produce(&[0, 1], 5);
    let commit = |partition, offset| OffsetCommit {
        topic: "t".into(),
        partition,
        value: CommitValue {
            offset,
            metadata: String::new(),
            ..Default::default()
        },
    };
    f.broker
        .commit_offsets("g", vec![commit(0, 3)], CommitOrigin::Stateless)
        .unwrap();
    let latest = InstanceConfig {
        name: Some("l".into()),
        ..InstanceConfig::default()
    };
    f.consumers.create("g", latest).unwrap();
    f.subscribe("l");
    assert_eq!(
        f.poll("l", 1 << 20),
        [(0, 3), (0, 4)],
        "p1 starts at its end"
    );
    f.consumers.delete("g", "l").unwrap();
    let none = InstanceConfig {
        name: Some("n".into()),
        auto_offset_reset: OffsetReset::None,
        ..InstanceConfig::default()
    };
    f.consumers.create("g", none).unwrap();
    f.subscribe("n");
    let refused = f.consumers.poll("g", "n", 1 << 20, true, pairs);
    assert!(
        matches!(
            &refused,
            Err(BrokerError::NoResetPosition { partition: 1, .. })
        ),
        "{refused:?}"
    );
    f.consumers.delete("g", "n").unwrap();
    f.broker
        .commit_offsets(
            "g",
            vec![commit(0, 99), commit(1, 2)],
            CommitOrigin::Stateless,
        )
        .unwrap();
    f.consumers.create("g", earliest("e", false)).unwrap();
    f.subscribe("e");
    let got = f.poll("e", 1 << 20);
    assert_eq!(got.iter().filter(|(p, _)| *p == 0).count(), 5, "{got:?}");
    assert_eq!(got.iter().filter(|(p, _)| *p == 1).count(), 3, "{got:?}");
}

/// Idle instances expire by the coordinator's clock (a used one does not),
/// their partitions go to the others, and the server-wide bound counts
/// live instances only.
#[test]
fn idle_instances_expire_and_the_instance_bound_holds() {
    let f = fixture_with(4, 2);
    f.consumers.create("g", earliest("a", true)).unwrap();
    f.consumers.create("g", earliest("b", true)).unwrap();
    assert!(matches!(
        f.consumers.create("g", earliest("c", true)),
        Err(BrokerError::GroupLimit { .. })
    ));
    assert!(matches!(
        f.consumers.create("g2", earliest("a", true)),
        Err(BrokerError::GroupLimit { .. })
    ));
    f.subscribe("a");
    f.subscribe("b");
    assert_eq!(f.held("a"), [0, 1]);
    f.clock.advance(TIMEOUT_MS - 1);
    f.consumers.tick();
    assert_eq!(f.consumers.instance_count(), 2);
    assert_eq!(f.held("a"), [0, 1], "a is used");
    f.clock.advance(1);
    f.consumers.tick();
    assert_eq!(f.consumers.instance_count(), 1);
    assert!(matches!(
        f.consumers.assignments("g", "b"),
        Err(BrokerError::UnknownConsumerInstance { .. })
    ));
    assert_eq!(f.held("a"), [0, 1, 2, 3]);
    f.consumers.create("g", earliest("c", true)).unwrap();
}

/// Auto commit lands at the next records call or within the interval,
/// whichever first.
#[test]
fn auto_commit_lands_at_the_next_call_or_within_the_interval() {
    let f = fixture(1);
    f.produce(&[0], 2);
    f.consumers.create("g", earliest("a", true)).unwrap();
    f.subscribe("a");
    assert_eq!(f.poll("a", 1 << 20).len(), 2);
    f.consumers.tick();
    assert!(f.committed().is_empty(), "not yet due");
    f.clock.advance(AUTO_COMMIT_INTERVAL_MS);
    f.consumers.tick();
    assert_eq!(f.committed(), BTreeMap::from([(0, 2)]));
    f.produce(&[0], 1);
    assert_eq!(f.poll("a", 1 << 20).len(), 1);
    assert!(f.poll("a", 1 << 20).is_empty());
    assert_eq!(
        f.committed(),
        BTreeMap::from([(0, 3)]),
        "the next call commits"
    );
}

/// Stopping the manager (a clean shutdown) commits what auto-commit
/// instances returned, and only theirs.
#[test]
fn stopping_commits_the_auto_commit_instances() {
    let f = fixture(2);
    f.produce(&[0, 1], 2);
    f.consumers.create("g", earliest("a", true)).unwrap();
    f.consumers.create("g", earliest("m", false)).unwrap();
    f.subscribe("a");
    f.subscribe("m");
    assert_eq!(f.poll("a", 1 << 20).len(), 2);
    assert_eq!(f.poll("m", 1 << 20).len(), 2);
    assert!(f.committed().is_empty());
    f.consumers.stop();
    assert_eq!(f.committed(), BTreeMap::from([(0, 2)]));
}

/// With room for one record per call, each call starts one partition
/// further: both partitions are served evenly, neither starves.
#[test]
fn records_calls_rotate_over_the_partitions() {
    let f = fixture(2);
    f.produce(&[0, 1], 20);
    f.consumers.create("g", earliest("a", false)).unwrap();
    f.subscribe("a");
    let mut per_partition = [0usize; 2];
    for _ in 0..10 {
        let got = f.poll("a", 1);
        assert_eq!(got.len(), 1, "max_bytes leaves room for one record");
        per_partition[got[0].0 as usize] += 1;
    }
    assert_eq!(per_partition, [5, 5]);
}

/// Nothing to read: the call answers listeners, and a produce to a held
/// partition fires one (the long-poll's wake-up, no polling).
#[test]
fn an_empty_records_call_waits_on_listeners_a_produce_fires() {
    let f = fixture(2);
    f.consumers.create("g", earliest("a", true)).unwrap();
    f.subscribe("a");
    let Poll::Wait(listeners) = f.consumers.poll("g", "a", 1 << 20, false, pairs).unwrap() else {
        panic!("nothing to read, yet records");
    };
    assert!(listeners.len() >= 2, "the partitions' and the group's");
    f.produce(&[1], 1);
    // Whichever listener fires first (each waits on a thread of its own).
    let (fired, woke) = std::sync::mpsc::channel();
    for l in listeners {
        let fired = fired.clone();
        std::thread::spawn(move || {
            if l.wait_timeout(Duration::from_secs(30)).is_some() {
                let _ = fired.send(());
            }
        });
    }
    assert!(woke.recv_timeout(Duration::from_secs(30)).is_ok());
    assert_eq!(f.poll("a", 1 << 20), [(1, 0)]);
}

/// A records call whose answer cannot be rendered (a value not valid in
/// the instance's format) moves no position: the records come again.
#[test]
fn a_failed_render_consumes_nothing() {
    let f = fixture(1);
    f.produce(&[0], 2);
    f.consumers.create("g", earliest("a", true)).unwrap();
    f.subscribe("a");
    let failed = f.consumers.poll("g", "a", 1 << 20, true, |_| {
        Err::<(), _>(BrokerError::ConsumerConfig {
            field: "format".into(),
            reason: "cannot render".into(),
        })
    });
    assert!(failed.is_err());
    assert_eq!(f.poll("a", 1 << 20), [(0, 0), (0, 1)]);
}

/// Subscribing and assigning cannot be mixed; names are unique per group;
/// a manually assigned instance reads without a group membership.
#[test]
fn manual_assignment_excludes_subscription() {
    let f = fixture(2);
    f.produce(&[1], 1);
    f.consumers.create("g", earliest("m", false)).unwrap();
    assert!(matches!(
        f.consumers.create("g", earliest("m", false)),
        Err(BrokerError::ConsumerInstanceExists { .. })
    ));
    f.consumers
        .assign("g", "m", vec![TopicPartition::new("t", 1)])
        .unwrap();
    assert!(matches!(
        f.consumers
            .subscribe("g", "m", Subscription::Topics(vec!["t".into()]), &anyone()),
        Err(BrokerError::ConsumerState { .. })
    ));
    assert!(f.broker.coordinator.describe("g").is_none());
    assert_eq!(f.poll("m", 1 << 20), [(1, 0)]);
    assert!(matches!(
        f.consumers
            .assign("g", "m", vec![TopicPartition::new("t", 5)]),
        Err(BrokerError::UnknownPartition { .. })
    ));
}

/// A pattern subscription picks up a topic created later: the tick sees
/// the new match and the group rebalances.
#[test]
fn a_pattern_picks_up_topics_created_later() {
    let f = fixture(1);
    f.consumers.create("g", earliest("a", true)).unwrap();
    f.consumers
        .subscribe("g", "a", Subscription::Pattern("t|ev.*".into()), &anyone())
        .unwrap();
    assert_eq!(f.consumers.subscription("g", "a").unwrap(), ["t"]);
    f.broker
        .create_topic("events", 2, Overrides::new())
        .unwrap();
    f.broker.create_topic("xev", 1, Overrides::new()).unwrap();
    f.consumers.tick();
    assert_eq!(f.consumers.subscription("g", "a").unwrap(), ["events", "t"]);
    let held = f.consumers.assignments("g", "a").unwrap();
    assert_eq!(held.len(), 3, "{held:?}");
    assert!(matches!(
        f.consumers
            .subscribe("g", "a", Subscription::Pattern("(".into()), &anyone()),
        Err(BrokerError::ConsumerConfig { .. })
    ));
}

/// DeleteRecords moves what an instance's `positions/beginning` seeks to,
/// and a position left below the new beginning is reset by
/// `auto.offset.reset` (earliest: the new beginning), never read from.
#[test]
fn a_deleterecords_moves_the_beginning_instances_seek_to_and_reset_to() {
    let f = fixture(1);
    f.produce(&[0], 6);
    f.consumers.create("g", earliest("m", false)).unwrap();
    f.consumers
        .assign("g", "m", vec![TopicPartition::new("t", 0)])
        .unwrap();
    f.consumers
        .seek("g", "m", vec![(TopicPartition::new("t", 0), 1)])
        .unwrap();
    f.broker.delete_records("t", 0, 3).unwrap();
    // Position 1 is below the beginning now: reset to 3.
    assert_eq!(f.poll("m", 1 << 20), [(0, 3), (0, 4), (0, 5)]);
    f.consumers
        .seek_to(
            "g",
            "m",
            vec![TopicPartition::new("t", 0)],
            SeekTo::Beginning,
        )
        .unwrap();
    assert_eq!(f.poll("m", 1 << 20), [(0, 3), (0, 4), (0, 5)]);
}

/// Deleting an instance wakes a records call waiting on it (its own
/// listener is among those it waits on), which then finds it gone; the
/// same for an instance that expires. Manual assignment: no group
/// listener stands in for it.
#[test]
fn deleting_or_expiring_an_instance_wakes_its_waiting_records_call() {
    let f = fixture(1);
    for (name, expire) in [("deleted", false), ("expired", true)] {
        f.consumers.create("g", earliest(name, false)).unwrap();
        f.consumers
            .assign("g", name, vec![TopicPartition::new("t", 0)])
            .unwrap();
        let Poll::Wait(listeners) = f.consumers.poll("g", name, 1 << 20, false, pairs).unwrap()
        else {
            panic!("nothing to read, yet records");
        };
        let (fired, woke) = std::sync::mpsc::channel();
        for l in listeners {
            let fired = fired.clone();
            std::thread::spawn(move || {
                if l.wait_timeout(Duration::from_secs(30)).is_some() {
                    let _ = fired.send(());
                }
            });
        }
        if expire {
            f.clock.advance(TIMEOUT_MS + 1);
            f.consumers.tick();
        } else {
            f.consumers.delete("g", name).unwrap();
        }
        assert!(
            woke.recv_timeout(Duration::from_secs(10)).is_ok(),
            "{name}: the waiting call is not woken"
        );
        assert!(matches!(
            f.consumers.poll("g", name, 1 << 20, true, pairs),
            Err(BrokerError::UnknownConsumerInstance { .. })
        ));
    }
}

/// The pattern is parsed on its own and the parsed expression anchored:
/// text that closes the anchoring group itself is not a pattern (it
/// matched every topic when wrapped as text), a verbose-mode comment
/// cannot swallow the anchor, and nesting is bounded.
#[test]
fn a_pattern_cannot_escape_its_anchors() {
    let f = fixture(1);
    f.broker
        .create_topic("events", 1, Overrides::new())
        .unwrap();
    f.broker.create_topic("other", 1, Overrides::new()).unwrap();
    f.consumers.create("g", earliest("a", true)).unwrap();
    for escape in ["events)|(.*", "t)|(?:.*", "(?:t))|((.*"] {
        assert!(
            matches!(
                f.consumers
                    .subscribe("g", "a", Subscription::Pattern(escape.into()), &anyone()),
                Err(BrokerError::ConsumerConfig { .. })
            ),
            "{escape}"
        );
    }
    assert!(f.consumers.subscription("g", "a").unwrap().is_empty());
    // A comment to the end of the pattern: the anchor still applies.
    f.consumers
        .subscribe(
            "g",
            "a",
            Subscription::Pattern("(?x) ev ents # the events".into()),
            &anyone(),
        )
        .unwrap();
    assert_eq!(f.consumers.subscription("g", "a").unwrap(), ["events"]);
    f.consumers
        .subscribe("g", "a", Subscription::Pattern("ev|oth".into()), &anyone())
        .unwrap();
    assert!(f.consumers.subscription("g", "a").unwrap().is_empty());
    let deep = format!("{}t{}", "(".repeat(100), ")".repeat(100));
    assert!(matches!(
        f.consumers
            .subscribe("g", "a", Subscription::Pattern(deep), &anyone()),
        Err(BrokerError::ConsumerConfig { .. })
    ));
}
