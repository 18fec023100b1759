//! The group calls' waits against a real broker on a manual clock: the
//! coordinator's own deadlines never pass, so a wait ends only by what a
//! test does (another member, shutdown) or by the door's bound (with
//! tokio's clock paused, so no test sleeps through it).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;

use super::*;
use crate::broker::Broker;
use crate::coordinator::{GroupState, GroupsConfig, ManualClock, MemberProtocol};
use crate::principal::Principal;
use crate::test_support::{join_request, open_at};

/// How long a test waits for a door call that should answer (generous:
/// the machine is shared); never reached when the code is right.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

struct Fixture {
    _dir: tempfile::TempDir,
    broker: Arc<Broker>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let groups = GroupsConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupsConfig::default()
    };
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let broker = Arc::new(open_at(dir.path(), &groups, &clock));
    Fixture { _dir: dir, broker }
}

impl Fixture {
    fn door(&self) -> Door {
        self.broker.door(&Principal::Anonymous)
    }
}

fn kafka() -> MemberProtocol {
    MemberProtocol::Kafka {
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"metadata"))],
    }
}

/// A new Kafka member's join, or a known one's rejoin.
fn join(member_id: Option<&str>) -> JoinRequest {
    JoinRequest {
        member_id: member_id.map(str::to_owned),
        ..join_request(kafka())
    }
}

fn no_stop() -> watch::Receiver<bool> {
    // The sender dropped: no shutdown can be signalled.
    watch::channel(false).1
}

fn joined(answer: Result<JoinAnswer, BrokerError>) -> JoinResponse {
    match answer.unwrap() {
        JoinAnswer::Joined(joined) => joined,
        other => panic!("expected a generation, got {other:?}"),
    }
}

/// Awaits the group's state `state` with `members` members (a spawned
/// call got as far as the coordinator).
async fn until_group(door: &Door, state: GroupState, members: usize) {
    tokio::time::timeout(ANSWER_WAIT, async {
        while !door
            .group_snapshot("g")
            .unwrap()
            .is_some_and(|g| g.state == state && g.members.len() == members)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
}

/// A waits in its join until B rejoins: both get generation 2, and the
/// follower then waits in its sync for the leader's assignments.
#[tokio::test]
async fn a_waiting_join_answers_once_the_other_member_rejoins_and_a_sync_once_the_leader_syncs() {
    let f = fixture();
    let door = f.door();
    let first = joined(door.join_group("g", join(None), no_stop()).await);
    assert_eq!(first.generation, 1);
    let waiting = tokio::spawn({
        let door = f.door();
        async move { door.join_group("g", join(None), no_stop()).await }
    });
    until_group(&door, GroupState::PreparingRebalance, 2).await;
    assert!(!waiting.is_finished(), "answered before the window closed");
    let rejoined = joined(
        door.join_group("g", join(Some(&first.member_id)), no_stop())
            .await,
    );
    let second = joined(
        tokio::time::timeout(ANSWER_WAIT, waiting)
            .await
            .unwrap()
            .unwrap(),
    );
    assert_eq!((rejoined.generation, second.generation), (2, 2));
    assert_eq!(rejoined.leader_id, second.leader_id);

    let (leader, follower) = if rejoined.leader_id == rejoined.member_id {
        (rejoined, second)
    } else {
        (second, rejoined)
    };
    let follower_sync = tokio::spawn({
        let (door, member_id) = (f.door(), follower.member_id.clone());
        async move {
            door.sync_group("g", sync(&member_id, None), no_stop())
                .await
        }
    });
    let assignments = vec![
        (leader.member_id.clone(), Bytes::from_static(b"leader's")),
        (
            follower.member_id.clone(),
            Bytes::from_static(b"follower's"),
        ),
    ];
    let synced = door
        .sync_group("g", sync(&leader.member_id, Some(assignments)), no_stop())
        .await
        .unwrap();
    assert!(matches!(
        synced,
        SyncAnswer::Synced { assignment: MemberAssignment::Opaque(ref a), ref protocol }
            if a.as_ref() == b"leader's" && protocol.as_deref() == Some("range")
    ));
    let synced = tokio::time::timeout(ANSWER_WAIT, follower_sync)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(
        synced,
        SyncAnswer::Synced { assignment: MemberAssignment::Opaque(ref a), .. } if a.as_ref() == b"follower's"
    ));
}

fn sync(member_id: &str, assignments: Option<Vec<(String, Bytes)>>) -> SyncRequest {
    SyncRequest {
        member_id: member_id.to_owned(),
        instance_id: None,
        generation: 2,
        assignments,
    }
}

/// Two members in generation 2; (leader, follower).
async fn generation_two(door: &Door) -> (JoinResponse, JoinResponse) {
    let first = joined(door.join_group("g", join(None), no_stop()).await);
    let waiting = tokio::spawn({
        let door = door.clone();
        async move { door.join_group("g", join(None), no_stop()).await }
    });
    until_group(door, GroupState::PreparingRebalance, 2).await;
    let rejoined = joined(
        door.join_group("g", join(Some(&first.member_id)), no_stop())
            .await,
    );
    let second = joined(waiting.await.unwrap());
    if rejoined.leader_id == rejoined.member_id {
        (rejoined, second)
    } else {
        (second, rejoined)
    }
}

/// A join whose window the other member never closes, and a follower
/// whose leader never syncs, answer that they timed out (the client joins
/// again) once the door's bound passes; the coordinator's clock stands
/// still, so it is the door's bound that ends them.
#[tokio::test(start_paused = true)]
async fn join_and_sync_waits_that_outlive_their_bound_answer_timed_out() {
    let f = fixture();
    let door = f.door();
    let (_leader, follower) = generation_two(&door).await;
    let answer = door
        .sync_group("g", sync(&follower.member_id, None), no_stop())
        .await
        .unwrap();
    assert!(matches!(answer, SyncAnswer::TimedOut), "{answer:?}");

    // A third member: the others never rejoin.
    let answer = door.join_group("g", join(None), no_stop()).await.unwrap();
    let JoinAnswer::NotJoined { member_id, why } = answer else {
        panic!("joined without the others: {answer:?}");
    };
    assert!(matches!(why, NotJoined::TimedOut), "{why:?}");
    let group = door.group_snapshot("g").unwrap().unwrap();
    assert!(
        group.members.iter().any(|m| m.member_id == member_id),
        "the answer names the id the member waited under"
    );
}

/// Shutdown ends a waiting sync and a waiting join, each with its own
/// answer (the client looks for the coordinator again).
#[tokio::test]
async fn shutdown_ends_a_waiting_sync_and_a_waiting_join() {
    let f = fixture();
    let door = f.door();
    let (_leader, follower) = generation_two(&door).await;

    let (stop, stopped) = watch::channel(false);
    let follower_sync = tokio::spawn({
        let (door, member_id) = (f.door(), follower.member_id.clone());
        async move { door.sync_group("g", sync(&member_id, None), stopped).await }
    });
    // Most likely waiting by now; shutdown answers the same either way.
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop.send_replace(true);
    let syncing = tokio::time::timeout(ANSWER_WAIT, follower_sync)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(syncing, SyncAnswer::Stopping), "{syncing:?}");

    let (stop, stopped) = watch::channel(false);
    let third_join = tokio::spawn({
        let door = f.door();
        async move { door.join_group("g", join(None), stopped).await }
    });
    until_group(&door, GroupState::PreparingRebalance, 3).await;
    stop.send_replace(true);
    let joining = tokio::time::timeout(ANSWER_WAIT, third_join)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(
            joining,
            JoinAnswer::NotJoined {
                why: NotJoined::Stopping,
                ..
            }
        ),
        "{joining:?}"
    );
}
