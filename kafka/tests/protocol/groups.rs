//! The group APIs over real TCP on 127.0.0.1, against a real broker in a
//! temporary data dir: each at its lowest (non-flexible) and highest
//! (flexible) served version, a follower waiting for its leader's
//! assignment, the coordinator's refusals as Kafka codes, per-partition
//! commit answers, answers before the broker is ready, and a lying count
//! in a group request closing its connection. A module of `protocol.rs`,
//! whose server and framing helpers it uses.
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tidelog_kafka::KafkaConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::{call, read_frame, request_frame, server, Server};

// Kafka's error codes the tests expect.
const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const ILLEGAL_GENERATION: i16 = 22;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const INVALID_GROUP_ID: i16 = 24;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;
const OFFSET_METADATA_TOO_LARGE: i16 = 12;
const FENCED_INSTANCE_ID: i16 = 82;

const SESSION_MS: i32 = 10_000;

/// The protocol tests' server (no delay before a group's first rebalance)
/// with topic `t` of 2 partitions.
async fn server_with_topic() -> Server {
    let srv = server().await;
    let b = Arc::clone(&srv.broker);
    tokio::task::spawn_blocking(move || b.get_or_create_topic("t", 2))
        .await
        .unwrap()
        .unwrap();
    srv
}

/// A listener whose broker is not ready (recovery running).
pub(super) async fn not_ready_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (_stop, stop_rx) = watch::channel(false);
        let ready: tidelog_kafka::Ready = Arc::new(|| None);
        tidelog_kafka::serve(listener, &KafkaConfig::default(), ready, stop_rx).await;
    });
    addr
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// The served versions one run uses, lowest or highest of each API.
#[derive(Clone, Copy)]
struct Versions {
    find: i16,
    join: i16,
    sync: i16,
    heartbeat: i16,
    leave: i16,
    commit: i16,
    fetch: i16,
    list: i16,
    describe: i16,
}

const LOWEST: Versions = Versions {
    find: 0,
    join: 0,
    sync: 0,
    heartbeat: 0,
    leave: 0,
    commit: 2,
    fetch: 1,
    list: 0,
    describe: 0,
};

const HIGHEST: Versions = Versions {
    find: 4,
    join: 7,
    sync: 5,
    heartbeat: 4,
    leave: 4,
    commit: 8,
    fetch: 8,
    list: 4,
    describe: 5,
};

fn join_request(group: &str, member_id: &str, instance: Option<&str>, v: i16) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(SESSION_MS)
        .with_rebalance_timeout_ms(if v >= 1 { SESSION_MS } else { -1 })
        .with_member_id(s(member_id))
        .with_group_instance_id(instance.map(s))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(b"subscription of t"))])
}

/// Joins `group` at version `v` (taking MEMBER_ID_REQUIRED's id and
/// joining again from v4); the answer of the join that completed.
async fn join(c: &mut TcpStream, group: &str, v: i16) -> JoinGroupResponse {
    let mut answer: JoinGroupResponse =
        call(c, ApiKey::JoinGroup, v, &join_request(group, "", None, v)).await;
    if v >= 4 {
        assert_eq!(answer.error_code, MEMBER_ID_REQUIRED);
        assert!(!answer.member_id.is_empty());
        let again = join_request(group, answer.member_id.as_str(), None, v);
        answer = call(c, ApiKey::JoinGroup, v, &again).await;
    }
    assert_eq!(answer.error_code, NONE, "{answer:?}");
    answer
}

fn sync_request(
    group: &str,
    joined: &JoinGroupResponse,
    assignments: Vec<(StrBytes, &'static [u8])>,
    v: i16,
) -> SyncGroupRequest {
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_assignments(
            assignments
                .into_iter()
                .map(|(member, bytes)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(member)
                        .with_assignment(Bytes::from_static(bytes))
                })
                .collect(),
        );
    if v >= 5 {
        request
            .with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s("range")))
    } else {
        request
    }
}

fn commit_request(
    group: &str,
    generation: i32,
    member_id: &str,
    partitions: &[(&str, i32, i64)],
    v: i16,
) -> OffsetCommitRequest {
    let topics = partitions
        .iter()
        .map(|(topic, partition, offset)| {
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset)
                    .with_committed_metadata(Some(s("meta")))])
        })
        .collect();
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member_id))
        .with_topics(topics);
    if v <= 4 {
        request.with_retention_time_ms(-1)
    } else {
        request
    }
}

fn commit_codes(answer: &OffsetCommitResponse) -> Vec<i16> {
    answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// The group's committed offsets of `t`'s partitions 0 and 1 (-1: none)
/// and the group's code, through OffsetFetch at `v`.
async fn fetch_offsets(c: &mut TcpStream, group: &str, v: i16) -> (i16, Vec<(i32, i64)>) {
    if v >= 8 {
        let request =
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_indexes(vec![0, 1])]))]);
        let answer: OffsetFetchResponse = call(c, ApiKey::OffsetFetch, v, &request).await;
        let g = &answer.groups[0];
        let found = g
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| (p.partition_index, p.committed_offset))
            .collect();
        return (g.error_code, found);
    }
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(s("t")))
            .with_partition_indexes(vec![0, 1])]));
    let answer: OffsetFetchResponse = call(c, ApiKey::OffsetFetch, v, &request).await;
    let found = answer
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.partition_index, p.committed_offset))
        .collect();
    // v0-1 carry the group's code in each partition.
    let code = if v >= 2 {
        answer.error_code
    } else {
        answer.topics[0].partitions[0].error_code
    };
    (code, found)
}

/// One member's whole life in a group at the versions `v`: find the
/// coordinator, join, sync its own assignment, heartbeat, commit, fetch
/// the offsets, list and describe the group, leave.
async fn one_member_round_trip(v: Versions) {
    let srv = server_with_topic().await;
    let mut c = TcpStream::connect(srv.addr).await.unwrap();
    let group = "g1";

    let find = FindCoordinatorRequest::default();
    let find = if v.find >= 4 {
        find.with_key_type(0)
            .with_coordinator_keys(vec![s(group), s("")])
    } else {
        find.with_key(s(group))
    };
    let found: FindCoordinatorResponse = call(&mut c, ApiKey::FindCoordinator, v.find, &find).await;
    if v.find >= 4 {
        let coordinators: Vec<_> = found
            .coordinators
            .iter()
            .map(|k| (k.key.to_string(), k.error_code, k.node_id.0, k.port))
            .collect();
        assert_eq!(
            coordinators,
            [
                (group.to_owned(), NONE, 0, i32::from(srv.addr.port())),
                (String::new(), INVALID_GROUP_ID, -1, -1)
            ]
        );
    } else {
        assert_eq!(found.error_code, NONE);
        assert_eq!(
            (found.node_id.0, found.port),
            (0, i32::from(srv.addr.port()))
        );
        assert_eq!(found.host.as_str(), "127.0.0.1");
    }

    let joined = join(&mut c, group, v.join).await;
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, joined.member_id);
    assert_eq!(joined.protocol_name.as_ref().unwrap().as_str(), "range");
    assert!(joined.member_id.starts_with("test-"));
    let members: Vec<_> = joined
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.metadata.clone()))
        .collect();
    assert_eq!(
        members,
        [(
            joined.member_id.clone(),
            Bytes::from_static(b"subscription of t")
        )]
    );

    let sync = sync_request(
        group,
        &joined,
        vec![(joined.member_id.clone(), b"t: 0, 1")],
        v.sync,
    );
    let synced: SyncGroupResponse = call(&mut c, ApiKey::SyncGroup, v.sync, &sync).await;
    assert_eq!(synced.error_code, NONE);
    assert_eq!(synced.assignment, Bytes::from_static(b"t: 0, 1"));
    if v.sync >= 5 {
        assert_eq!(synced.protocol_name.unwrap().as_str(), "range");
    }

    let beat = HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone());
    let beaten: HeartbeatResponse = call(&mut c, ApiKey::Heartbeat, v.heartbeat, &beat).await;
    assert_eq!(beaten.error_code, NONE);

    // A commit of the member's generation: partition 0 and an unknown
    // partition, answered each on its own; the good one lands.
    let commit = commit_request(
        group,
        joined.generation_id,
        joined.member_id.as_str(),
        &[("t", 0, 5), ("t", 9, 1)],
        v.commit,
    );
    let committed: OffsetCommitResponse =
        call(&mut c, ApiKey::OffsetCommit, v.commit, &commit).await;
    assert_eq!(commit_codes(&committed), [NONE, UNKNOWN_TOPIC_OR_PARTITION]);
    assert_eq!(
        fetch_offsets(&mut c, group, v.fetch).await,
        (NONE, vec![(0, 5), (1, -1)])
    );
    let stored = srv.broker.committed_offsets(group, Some("t")).unwrap();
    assert_eq!((stored[0].offset, stored[0].metadata.as_str()), (5, "meta"));

    let list = if v.list >= 4 {
        ListGroupsRequest::default().with_states_filter(vec![s("stable")])
    } else {
        ListGroupsRequest::default()
    };
    let listed: ListGroupsResponse = call(&mut c, ApiKey::ListGroups, v.list, &list).await;
    let groups: Vec<_> = listed
        .groups
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.protocol_type.to_string()))
        .collect();
    assert_eq!(groups, [(group.to_owned(), "consumer".to_owned())]);
    if v.list >= 4 {
        assert_eq!(listed.groups[0].group_state.as_str(), "Stable");
        let none = ListGroupsRequest::default().with_states_filter(vec![s("Empty")]);
        let listed: ListGroupsResponse = call(&mut c, ApiKey::ListGroups, v.list, &none).await;
        assert!(listed.groups.is_empty());
    }

    let describe = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(s(group)), GroupId(s("never-seen"))]);
    let described: DescribeGroupsResponse =
        call(&mut c, ApiKey::DescribeGroups, v.describe, &describe).await;
    let g = &described.groups[0];
    assert_eq!(
        (
            g.error_code,
            g.group_state.as_str(),
            g.protocol_type.as_str(),
            g.protocol_data.as_str()
        ),
        (NONE, "Stable", "consumer", "range")
    );
    let m = &g.members[0];
    assert_eq!(m.member_id, joined.member_id);
    assert_eq!(m.client_id.as_str(), "test");
    assert_eq!(m.client_host.as_str(), "/127.0.0.1");
    assert_eq!(m.member_metadata, Bytes::from_static(b"subscription of t"));
    assert_eq!(m.member_assignment, Bytes::from_static(b"t: 0, 1"));
    assert_eq!(described.groups[1].group_state.as_str(), "Dead");

    let leave = if v.leave >= 3 {
        LeaveGroupRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_members(vec![
                MemberIdentity::default().with_member_id(joined.member_id.clone()),
                MemberIdentity::default().with_member_id(s("nobody")),
            ])
    } else {
        LeaveGroupRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_member_id(joined.member_id.clone())
    };
    let left: LeaveGroupResponse = call(&mut c, ApiKey::LeaveGroup, v.leave, &leave).await;
    assert_eq!(left.error_code, NONE);
    if v.leave >= 3 {
        let codes: Vec<_> = left.members.iter().map(|m| m.error_code).collect();
        assert_eq!(codes, [NONE, UNKNOWN_MEMBER_ID]);
    }
    // Empty now, its offsets kept.
    let described: DescribeGroupsResponse =
        call(&mut c, ApiKey::DescribeGroups, v.describe, &describe).await;
    assert_eq!(described.groups[0].group_state.as_str(), "Empty");
    assert!(described.groups[0].members.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_member_round_trip_at_the_lowest_versions() {
    one_member_round_trip(LOWEST).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_member_round_trip_at_the_highest_versions() {
    one_member_round_trip(HIGHEST).await;
}

/// Two members: the second's join rebalances the group (the first's
/// heartbeat says so and it joins again), the follower's SyncGroup waits
/// until the leader's brings the assignment, and a commit of the old
/// generation is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_member_rebalances_and_its_sync_waits_for_the_leader() {
    let srv = server_with_topic().await;
    let v = HIGHEST;
    let group = "g2";
    let mut a = TcpStream::connect(srv.addr).await.unwrap();
    let mut b = TcpStream::connect(srv.addr).await.unwrap();
    let first = join(&mut a, group, v.join).await;
    let sync = sync_request(
        group,
        &first,
        vec![(first.member_id.clone(), b"all")],
        v.sync,
    );
    let synced: SyncGroupResponse = call(&mut a, ApiKey::SyncGroup, v.sync, &sync).await;
    assert_eq!(synced.assignment, Bytes::from_static(b"all"));

    // b's join waits for a to rejoin: run it beside a's heartbeat.
    let b_join = tokio::spawn(async move {
        let joined = join(&mut b, group, v.join).await;
        (b, joined)
    });
    let beat = HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(first.generation_id)
        .with_member_id(first.member_id.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let beaten: HeartbeatResponse = call(&mut a, ApiKey::Heartbeat, v.heartbeat, &beat).await;
        if beaten.error_code == REBALANCE_IN_PROGRESS {
            break;
        }
        assert_eq!(beaten.error_code, NONE);
        assert!(tokio::time::Instant::now() < deadline, "no rebalance began");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rejoin = join_request(group, first.member_id.as_str(), None, v.join);
    let a_joined: JoinGroupResponse = call(&mut a, ApiKey::JoinGroup, v.join, &rejoin).await;
    let (b, b_joined) = b_join.await.unwrap();
    assert_eq!(a_joined.error_code, NONE);
    assert_eq!(a_joined.generation_id, 2);
    assert_eq!(b_joined.generation_id, 2);
    let (leader, mut leader_conn, follower, mut follower_conn) =
        if a_joined.leader == a_joined.member_id {
            (a_joined, a, b_joined, b)
        } else {
            (b_joined, b, a_joined, a)
        };
    assert_eq!(leader.members.len(), 2);
    assert!(follower.members.is_empty());

    // The old generation's commit is stale; a stateless one is refused
    // while the group has members.
    let stale = commit_request(
        group,
        1,
        leader.member_id.as_str(),
        &[("t", 0, 1)],
        v.commit,
    );
    let answer: OffsetCommitResponse =
        call(&mut leader_conn, ApiKey::OffsetCommit, v.commit, &stale).await;
    assert_eq!(commit_codes(&answer), [ILLEGAL_GENERATION]);
    let stateless = commit_request(group, -1, "", &[("t", 0, 1)], v.commit);
    let answer: OffsetCommitResponse =
        call(&mut leader_conn, ApiKey::OffsetCommit, v.commit, &stateless).await;
    assert_eq!(commit_codes(&answer), [UNKNOWN_MEMBER_ID]);

    // The follower asks first and waits for the leader's assignment.
    let follower_sync = sync_request(group, &follower, Vec::new(), v.sync);
    let waiting = tokio::spawn(async move {
        let answer: SyncGroupResponse = call(
            &mut follower_conn,
            ApiKey::SyncGroup,
            v.sync,
            &follower_sync,
        )
        .await;
        answer
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "the follower was answered before the leader synced"
    );
    let leader_sync = sync_request(
        group,
        &leader,
        vec![
            (leader.member_id.clone(), b"leader's"),
            (follower.member_id.clone(), b"follower's"),
        ],
        v.sync,
    );
    let synced: SyncGroupResponse =
        call(&mut leader_conn, ApiKey::SyncGroup, v.sync, &leader_sync).await;
    assert_eq!(synced.assignment, Bytes::from_static(b"leader's"));
    let follower_synced = waiting.await.unwrap();
    assert_eq!(follower_synced.error_code, NONE);
    assert_eq!(
        follower_synced.assignment,
        Bytes::from_static(b"follower's")
    );
    assert_eq!(
        srv.broker
            .door(&tidelog_broker::Principal::Anonymous)
            .group_snapshot(group)
            .unwrap()
            .unwrap()
            .members
            .len(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_answer_their_kafka_codes() {
    let srv = server_with_topic().await;
    let mut c = TcpStream::connect(srv.addr).await.unwrap();
    let v = LOWEST;
    let bad = join_request("", "", None, v.join);
    let answer: JoinGroupResponse = call(&mut c, ApiKey::JoinGroup, v.join, &bad).await;
    assert_eq!(answer.error_code, INVALID_GROUP_ID);
    let short = join_request("g3", "", None, v.join).with_session_timeout_ms(1);
    let answer: JoinGroupResponse = call(&mut c, ApiKey::JoinGroup, v.join, &short).await;
    assert_eq!(answer.error_code, INVALID_SESSION_TIMEOUT);
    let beat = HeartbeatRequest::default()
        .with_group_id(GroupId(s("g3")))
        .with_generation_id(1)
        .with_member_id(s("nobody"));
    let answer: HeartbeatResponse = call(&mut c, ApiKey::Heartbeat, v.heartbeat, &beat).await;
    assert_eq!(answer.error_code, UNKNOWN_MEMBER_ID);
    let joined = join(&mut c, "g3", v.join).await;
    // Another protocol type in the same group.
    let other = join_request("g3", "", None, v.join).with_protocol_type(s("connect"));
    let mut d = TcpStream::connect(srv.addr).await.unwrap();
    let answer: JoinGroupResponse = call(&mut d, ApiKey::JoinGroup, v.join, &other).await;
    assert_eq!(answer.error_code, INCONSISTENT_GROUP_PROTOCOL);
    // A Kafka member cannot join an HTTP group with members.
    let http = tidelog_broker::coordinator::JoinRequest {
        member_id: None,
        instance_id: None,
        client_id: "http-instance".into(),
        host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol: tidelog_broker::coordinator::MemberProtocol::Http {
            topics: vec!["t".into()],
            assignor: tidelog_broker::coordinator::Assignor::Range,
        },
        require_known_member_id: false,
        server_side: false,
    };
    let partitions = |topic: &str| (topic == "t").then_some(2);
    srv.broker
        .coordinator()
        .join("g-http", http, &partitions)
        .unwrap();
    let kafka = join_request("g-http", "", None, v.join);
    let answer: JoinGroupResponse = call(&mut d, ApiKey::JoinGroup, v.join, &kafka).await;
    assert_eq!(answer.error_code, INCONSISTENT_GROUP_PROTOCOL);
    // A stateless commit to an empty group lands.
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("g3")))
        .with_member_id(joined.member_id.clone());
    let left: LeaveGroupResponse = call(&mut c, ApiKey::LeaveGroup, v.leave, &leave).await;
    assert_eq!(left.error_code, NONE);
    let stateless = commit_request("g3", -1, "", &[("t", 1, 7)], v.commit);
    let answer: OffsetCommitResponse =
        call(&mut c, ApiKey::OffsetCommit, v.commit, &stateless).await;
    assert_eq!(commit_codes(&answer), [NONE]);
    assert_eq!(
        fetch_offsets(&mut c, "g3", v.fetch).await,
        (NONE, vec![(0, -1), (1, 7)])
    );
    // Metadata over the bound fails its own partition only.
    let mut commit = commit_request("g3", -1, "", &[("t", 0, 2), ("t", 1, 8)], v.commit);
    commit.topics[0].partitions[0].committed_metadata = Some(s(&"m".repeat(4097)));
    let answer: OffsetCommitResponse = call(&mut c, ApiKey::OffsetCommit, v.commit, &commit).await;
    assert_eq!(commit_codes(&answer), [OFFSET_METADATA_TOO_LARGE, NONE]);
    assert_eq!(
        fetch_offsets(&mut c, "g3", v.fetch).await,
        (NONE, vec![(0, -1), (1, 8)])
    );
    // OffsetFetch of the one bad group name, the empty one.
    assert_eq!(fetch_offsets(&mut c, "", v.fetch).await.0, INVALID_GROUP_ID);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_the_broker_is_ready_group_calls_answer_retriable_codes() {
    let addr = not_ready_server().await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    let find = FindCoordinatorRequest::default().with_key(s("g"));
    let found: FindCoordinatorResponse = call(&mut c, ApiKey::FindCoordinator, 0, &find).await;
    assert_eq!(found.error_code, COORDINATOR_NOT_AVAILABLE);
    let answer: JoinGroupResponse = call(
        &mut c,
        ApiKey::JoinGroup,
        7,
        &join_request("g", "", None, 7),
    )
    .await;
    assert_eq!(answer.error_code, COORDINATOR_LOAD_IN_PROGRESS);
    let commit = commit_request("g", -1, "", &[("t", 0, 1)], 8);
    let answer: OffsetCommitResponse = call(&mut c, ApiKey::OffsetCommit, 8, &commit).await;
    assert_eq!(commit_codes(&answer), [COORDINATOR_LOAD_IN_PROGRESS]);
    assert_eq!(
        fetch_offsets(&mut c, "g", 8).await.0,
        COORDINATOR_LOAD_IN_PROGRESS
    );
    let listed: ListGroupsResponse =
        call(&mut c, ApiKey::ListGroups, 4, &ListGroupsRequest::default()).await;
    assert_eq!(listed.error_code, COORDINATOR_LOAD_IN_PROGRESS);
    let deleted: OffsetDeleteResponse = call(
        &mut c,
        ApiKey::OffsetDelete,
        0,
        &offset_delete_request("g", &[("t", 0)]),
    )
    .await;
    assert_eq!(deleted.error_code, COORDINATOR_LOAD_IN_PROGRESS);
    let describe = DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]);
    let described: DescribeGroupsResponse =
        call(&mut c, ApiKey::DescribeGroups, 5, &describe).await;
    assert_eq!(described.groups[0].error_code, COORDINATOR_LOAD_IN_PROGRESS);
    let beat = HeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id(1)
        .with_member_id(s("m"));
    let beat: HeartbeatResponse = call(&mut c, ApiKey::Heartbeat, 4, &beat).await;
    assert_eq!(beat.error_code, COORDINATOR_LOAD_IN_PROGRESS);
    let joined = JoinGroupResponse::default()
        .with_generation_id(1)
        .with_member_id(s("m"));
    let synced: SyncGroupResponse = call(
        &mut c,
        ApiKey::SyncGroup,
        5,
        &sync_request("g", &joined, Vec::new(), 5),
    )
    .await;
    assert_eq!(synced.error_code, COORDINATOR_LOAD_IN_PROGRESS);
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_members(vec![MemberIdentity::default().with_member_id(s("m"))]);
    let left: LeaveGroupResponse = call(&mut c, ApiKey::LeaveGroup, 4, &leave).await;
    assert_eq!(left.error_code, COORDINATOR_LOAD_IN_PROGRESS);
}

fn offset_delete_request(group: &str, partitions: &[(&str, i32)]) -> OffsetDeleteRequest {
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    let topics = partitions
        .iter()
        .map(|(topic, partition)| {
            OffsetDeleteRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(*partition)
                ])
        })
        .collect();
    OffsetDeleteRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(topics)
}

fn offset_delete_codes(answer: &OffsetDeleteResponse) -> Vec<i16> {
    answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// A ConsumerProtocol Subscription v0 of `topics`, as a Kafka consumer
/// joins with.
fn subscription(topics: &[&str]) -> Bytes {
    let mut b = vec![0, 0];
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(b)
}

/// OffsetDelete v0 (KAFKA.md "Groups"): an unknown group is
/// GROUP_ID_NOT_FOUND; a group without members loses the offsets asked
/// (unknown partitions answered UNKNOWN_TOPIC_OR_PARTITION); with a live
/// member, the topics its Subscription names are GROUP_SUBSCRIBED_TO_TOPIC
/// and the others go; the group's OffsetFetch shows what is left; a lying
/// count closes its connection only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_delete_deletes_unsubscribed_offsets_of_a_group() {
    const GROUP_ID_NOT_FOUND: i16 = 69;
    const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
    let srv = server_with_topic().await;
    let b = Arc::clone(&srv.broker);
    tokio::task::spawn_blocking(move || b.get_or_create_topic("other", 1))
        .await
        .unwrap()
        .unwrap();
    let mut c = TcpStream::connect(srv.addr).await.unwrap();
    let delete = |partitions: &[(&str, i32)]| offset_delete_request("od", partitions);
    let answer: OffsetDeleteResponse =
        call(&mut c, ApiKey::OffsetDelete, 0, &delete(&[("t", 0)])).await;
    assert_eq!(answer.error_code, GROUP_ID_NOT_FOUND);
    assert!(answer.topics.is_empty());
    let commit = commit_request(
        "od",
        -1,
        "",
        &[("t", 0, 4), ("t", 1, 5), ("other", 0, 6)],
        8,
    );
    let answer: OffsetCommitResponse = call(&mut c, ApiKey::OffsetCommit, 8, &commit).await;
    assert_eq!(commit_codes(&answer), [NONE, NONE, NONE]);

    // No members: deleted; unknown partitions and topics answered.
    let answer: OffsetDeleteResponse = call(
        &mut c,
        ApiKey::OffsetDelete,
        0,
        &delete(&[("t", 0), ("t", 7), ("nope", 0), ("t", -1)]),
    )
    .await;
    assert_eq!(answer.error_code, NONE);
    assert_eq!(
        offset_delete_codes(&answer),
        [
            NONE,
            UNKNOWN_TOPIC_OR_PARTITION,
            UNKNOWN_TOPIC_OR_PARTITION,
            UNKNOWN_TOPIC_OR_PARTITION
        ]
    );
    assert_eq!(
        fetch_offsets(&mut c, "od", 8).await,
        (NONE, vec![(0, -1), (1, 5)])
    );

    // A member subscribed to `other`: it stays, `t` goes.
    let join =
        join_request("od", "", None, 3).with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(subscription(&["other"]))]);
    let joined: JoinGroupResponse = call(&mut c, ApiKey::JoinGroup, 3, &join).await;
    assert_eq!(joined.error_code, NONE, "{joined:?}");
    let answer: OffsetDeleteResponse = call(
        &mut c,
        ApiKey::OffsetDelete,
        0,
        &delete(&[("other", 0), ("t", 1)]),
    )
    .await;
    assert_eq!(answer.error_code, NONE);
    assert_eq!(
        offset_delete_codes(&answer),
        [GROUP_SUBSCRIBED_TO_TOPIC, NONE]
    );
    assert_eq!(
        fetch_offsets(&mut c, "od", 8).await,
        (NONE, vec![(0, -1), (1, -1)])
    );
    let committed = srv.broker.committed_offsets("od", None).unwrap();
    assert_eq!(committed.len(), 1, "{committed:?}");
    assert_eq!(
        (committed[0].topic.as_str(), committed[0].offset),
        ("other", 6)
    );

    // A topics count past the frame's end closes only its connection.
    let mut bytes = request_frame(
        ApiKey::OffsetDelete,
        0,
        7,
        &offset_delete_request("od", &[]),
    );
    let at = bytes.len() - 4;
    bytes[at..].copy_from_slice(&i32::MAX.to_be_bytes());
    let mut lying = TcpStream::connect(srv.addr).await.unwrap();
    super::send_frame(&mut lying, &bytes).await;
    assert!(read_frame(&mut lying).await.is_none(), "not closed");
    let answer: OffsetDeleteResponse =
        call(&mut c, ApiKey::OffsetDelete, 0, &delete(&[("t", 0)])).await;
    assert_eq!(offset_delete_codes(&answer), [NONE]);
}

/// A group holds at most `GROUP_MEMBERS_MAX` members, pending ones (a
/// v4+ join answered MEMBER_ID_REQUIRED) included, as Kafka's
/// `group.max.size`: the next join is GROUP_MAX_SIZE_REACHED, and another
/// group still takes members.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_past_the_groups_member_limit_is_group_max_size_reached() {
    const GROUP_MAX_SIZE_REACHED: i16 = 81;
    let srv = server_with_topic().await;
    let mut c = TcpStream::connect(srv.addr).await.unwrap();
    let max = tidelog_broker::coordinator::config::GROUP_MEMBERS_MAX;
    for i in 0..max {
        let answer: JoinGroupResponse = call(
            &mut c,
            ApiKey::JoinGroup,
            7,
            &join_request("full", "", None, 7),
        )
        .await;
        assert_eq!(answer.error_code, MEMBER_ID_REQUIRED, "join {i}");
    }
    let answer: JoinGroupResponse = call(
        &mut c,
        ApiKey::JoinGroup,
        7,
        &join_request("full", "", None, 7),
    )
    .await;
    assert_eq!(answer.error_code, GROUP_MAX_SIZE_REACHED);
    let other = join(&mut c, "roomy", 7).await;
    assert_eq!(other.generation_id, 1);
}

/// A JoinGroup whose protocols array claims more elements than its frame
/// holds closes its connection before anything is allocated for it; the
/// server goes on serving others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_count_in_a_group_request_closes_its_connection() {
    let srv = server_with_topic().await;
    let mut c = TcpStream::connect(srv.addr).await.unwrap();
    let request = join_request("g4", "", None, 0).with_protocols(Vec::new());
    let mut bytes = request_frame(ApiKey::JoinGroup, 0, 7, &request);
    // The empty protocols array is the last four bytes: claim 2^31 - 1.
    let at = bytes.len() - 4;
    bytes[at..].copy_from_slice(&i32::MAX.to_be_bytes());
    super::send_frame(&mut c, &bytes).await;
    assert!(
        read_frame(&mut c).await.is_none(),
        "the connection was not closed"
    );
    let mut other = TcpStream::connect(srv.addr).await.unwrap();
    let joined = join(&mut other, "g4", 0).await;
    assert_eq!(joined.generation_id, 1);
}

/// A static member (`group.instance.id`) that joins again without its
/// member id (a restarted client) takes the place of its old self, whose
/// calls are then FENCED_INSTANCE_ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_rejoining_fences_its_old_member_id() {
    let srv = server_with_topic().await;
    let v = HIGHEST;
    let mut c = TcpStream::connect(srv.addr).await.unwrap();
    let first = join_request("g5", "", Some("static-1"), v.join);
    let old: JoinGroupResponse = call(&mut c, ApiKey::JoinGroup, v.join, &first).await;
    assert_eq!(old.error_code, NONE, "{old:?}");
    let sync = sync_request("g5", &old, vec![(old.member_id.clone(), b"p")], v.sync);
    let synced: SyncGroupResponse = call(&mut c, ApiKey::SyncGroup, v.sync, &sync).await;
    assert_eq!(synced.error_code, NONE);

    let mut restarted = TcpStream::connect(srv.addr).await.unwrap();
    let new: JoinGroupResponse = call(&mut restarted, ApiKey::JoinGroup, v.join, &first).await;
    assert_eq!(new.error_code, NONE, "{new:?}");
    assert_ne!(new.member_id, old.member_id);
    let beat = HeartbeatRequest::default()
        .with_group_id(GroupId(s("g5")))
        .with_generation_id(old.generation_id)
        .with_member_id(old.member_id.clone())
        .with_group_instance_id(Some(s("static-1")));
    let answer: HeartbeatResponse = call(&mut c, ApiKey::Heartbeat, v.heartbeat, &beat).await;
    assert_eq!(answer.error_code, FENCED_INSTANCE_ID);
    let described: DescribeGroupsResponse = call(
        &mut c,
        ApiKey::DescribeGroups,
        v.describe,
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g5"))]),
    )
    .await;
    let members: Vec<_> = described.groups[0]
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.group_instance_id.clone()))
        .collect();
    assert_eq!(members, [(new.member_id.clone(), Some(s("static-1")))]);
}
