//! KIP-848's consumer group protocol over real TCP: ConsumerGroupHeartbeat
//! joins, the revoke-then-assign handover between two members, fencing,
//! ConsumerGroupDescribe, OffsetCommit and OffsetFetch v9 with member
//! epochs, ListGroups v5's types, and a group id that is one protocol at
//! a time. A module of `protocol.rs`, whose server and framing it uses.
use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpStream;
use uuid::Uuid;

use super::{call, connect, server, Server};

const NONE: i16 = 0;
const INVALID_REQUEST: i16 = 42;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const GROUP_ID_NOT_FOUND: i16 = 69;
const UNKNOWN_MEMBER_ID: i16 = 25;
const FENCED_MEMBER_EPOCH: i16 = 110;
const UNSUPPORTED_ASSIGNOR: i16 = 112;
const STALE_MEMBER_EPOCH: i16 = 113;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// The server with topic `t` of 4 partitions; `t`'s id.
async fn server_with_topic() -> (Server, Uuid) {
    let srv = server().await;
    let b = Arc::clone(&srv.broker);
    let topic = tokio::task::spawn_blocking(move || b.get_or_create_topic("t", 4))
        .await
        .unwrap()
        .unwrap();
    (srv, topic.id)
}

fn join(member: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(Vec::new()))
}

fn beat(
    member: &str,
    epoch: i32,
    owned: &BTreeSet<i32>,
    id: Uuid,
) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic_id(id)
            .with_partitions(owned.iter().copied().collect())]))
}

async fn heartbeat(
    c: &mut TcpStream,
    v: i16,
    request: &ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    call(c, ApiKey::ConsumerGroupHeartbeat, v, request).await
}

/// The partitions of `t` an answer assigns; `None` if it assigns nothing
/// new (keep what you have).
fn assigned(answer: &ConsumerGroupHeartbeatResponse, id: Uuid) -> Option<BTreeSet<i32>> {
    answer.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .filter(|t| t.topic_id == id)
            .flat_map(|t| t.partitions.iter().copied())
            .collect()
    })
}

fn commit(member: &str, epoch: i32, partition: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id_or_member_epoch(epoch)
        .with_member_id(s(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)])])
}

fn commit_code(answer: &OffsetCommitResponse) -> i16 {
    answer.topics[0].partitions[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_hand_partitions_over_without_stopping() {
    let (srv, id) = server_with_topic().await;
    let mut c = connect(&srv).await;
    for v in [0, 1] {
        let mut request = join("");
        request.group_id = GroupId(s(&format!("empty-id-v{v}")));
        let answer = heartbeat(&mut c, v, &request).await;
        if v == 0 {
            // v0: the coordinator gives a member without an id one.
            assert_eq!(answer.error_code, NONE);
            assert!(!answer.member_id.unwrap().is_empty());
        } else {
            // v1 (KIP-1082): the member brings its own.
            assert_eq!(answer.error_code, INVALID_REQUEST);
        }
    }

    // The first member gets every partition at epoch 1.
    let a = heartbeat(&mut c, 1, &join("m1")).await;
    assert_eq!((a.error_code, a.member_epoch), (NONE, 1), "{a:?}");
    assert!(a.heartbeat_interval_ms > 0);
    let mut m1: BTreeSet<i32> = assigned(&a, id).unwrap();
    assert_eq!(m1, BTreeSet::from([0, 1, 2, 3]));

    // m2 joins at epoch 2 with nothing yet: m1 still owns its target.
    let b = heartbeat(&mut c, 1, &join("m2")).await;
    assert_eq!((b.error_code, b.member_epoch), (NONE, 2));
    assert_eq!(assigned(&b, id), Some(BTreeSet::new()));
    // m1 keeps half and stays at epoch 1 until it confirms.
    let a = heartbeat(&mut c, 1, &beat("m1", 1, &m1, id)).await;
    assert_eq!(a.member_epoch, 1);
    m1 = assigned(&a, id).unwrap();
    assert_eq!(m1.len(), 2);
    let a = heartbeat(&mut c, 1, &beat("m1", 1, &m1, id)).await;
    assert_eq!((a.member_epoch, a.assignment.is_none()), (2, true));
    // Now m2 gets the half m1 let go of.
    let b = heartbeat(&mut c, 1, &beat("m2", 2, &BTreeSet::new(), id)).await;
    let m2 = assigned(&b, id).unwrap();
    assert_eq!(m2.len(), 2);
    assert!(m1.is_disjoint(&m2));

    // ConsumerGroupDescribe shows both, Stable.
    let request = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(s("g")), GroupId(s("nothing"))])
        .with_include_authorized_operations(true);
    let d: ConsumerGroupDescribeResponse =
        call(&mut c, ApiKey::ConsumerGroupDescribe, 1, &request).await;
    let g = &d.groups[0];
    assert_eq!(g.error_code, NONE, "{g:?}");
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!((g.group_epoch, g.assignment_epoch), (2, 2));
    assert_eq!(g.assignor_name.as_str(), "uniform");
    assert_eq!(g.members.len(), 2);
    let m = &g.members[0];
    assert_eq!(m.member_id.as_str(), "m1");
    assert_eq!(m.subscribed_topic_names[0].0.as_str(), "t");
    assert_eq!(m.assignment.topic_partitions[0].topic_name.0.as_str(), "t");
    assert_eq!(m.assignment, m.target_assignment);
    assert!(g.authorized_operations > 0);
    assert_eq!(d.groups[1].error_code, GROUP_ID_NOT_FOUND);

    // Commits carry the member epoch (OffsetCommit v9): older is stale,
    // newer fenced.
    let p = *m1.first().unwrap();
    for (epoch, code) in [(2, NONE), (1, STALE_MEMBER_EPOCH), (3, FENCED_MEMBER_EPOCH)] {
        let answer: OffsetCommitResponse =
            call(&mut c, ApiKey::OffsetCommit, 9, &commit("m1", epoch, p, 7)).await;
        assert_eq!(commit_code(&answer), code, "epoch {epoch}");
    }
    let answer: OffsetCommitResponse =
        call(&mut c, ApiKey::OffsetCommit, 9, &commit("ghost", 2, p, 7)).await;
    assert_eq!(commit_code(&answer), UNKNOWN_MEMBER_ID);
    // OffsetFetch v9 checks the epoch of the member that asks.
    let fetch = |member: &str, epoch: i32| {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g")))
            .with_member_id(Some(s(member)))
            .with_member_epoch(epoch)
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(TopicName(s("t")))
                .with_partition_indexes(vec![p])]))])
    };
    let answer: OffsetFetchResponse = call(&mut c, ApiKey::OffsetFetch, 9, &fetch("m1", 2)).await;
    assert_eq!(answer.groups[0].error_code, NONE);
    assert_eq!(answer.groups[0].topics[0].partitions[0].committed_offset, 7);
    let answer: OffsetFetchResponse = call(&mut c, ApiKey::OffsetFetch, 9, &fetch("m1", 1)).await;
    assert_eq!(answer.groups[0].error_code, STALE_MEMBER_EPOCH);

    // ListGroups v5 names the group's type and filters by it.
    let list = |types: &[&str]| {
        ListGroupsRequest::default().with_types_filter(types.iter().map(|t| s(t)).collect())
    };
    let all: ListGroupsResponse = call(&mut c, ApiKey::ListGroups, 5, &list(&[])).await;
    let g = all
        .groups
        .iter()
        .find(|g| g.group_id.0.as_str() == "g")
        .unwrap();
    assert_eq!(g.group_type.as_str(), "consumer");
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.protocol_type.as_str(), "consumer");
    let classic: ListGroupsResponse =
        call(&mut c, ApiKey::ListGroups, 5, &list(&["Classic"])).await;
    assert!(classic.groups.iter().all(|g| g.group_id.0.as_str() != "g"));

    // DescribeGroups answers a KIP-848 group as Kafka does below v6:
    // Dead, no error, nothing of its members.
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]);
    let d: DescribeGroupsResponse = call(&mut c, ApiKey::DescribeGroups, 5, &request).await;
    let g = &d.groups[0];
    assert_eq!(
        (
            g.error_code,
            g.group_state.as_str(),
            g.protocol_type.as_str(),
            g.members.len()
        ),
        (0, "Dead", "", 0)
    );

    // A classic member cannot join it while it has members.
    let join_classic = JoinGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default().with_name(s("range"))
        ]);
    let j: JoinGroupResponse = call(&mut c, ApiKey::JoinGroup, 7, &join_classic).await;
    assert_eq!(j.error_code, INCONSISTENT_GROUP_PROTOCOL);

    // Fencing: an epoch above the member's; an unknown member.
    let a = heartbeat(&mut c, 1, &beat("m1", 9, &m1, id)).await;
    assert_eq!(a.error_code, FENCED_MEMBER_EPOCH);
    assert!(a.error_message.is_some());
    let a = heartbeat(&mut c, 1, &beat("ghost", 2, &BTreeSet::new(), id)).await;
    assert_eq!(a.error_code, UNKNOWN_MEMBER_ID);
    let mut bad = join("m3");
    bad.server_assignor = Some(s("sticky"));
    assert_eq!(
        heartbeat(&mut c, 1, &bad).await.error_code,
        UNSUPPORTED_ASSIGNOR
    );

    // Both leave: m2 gets m1's half first.
    let a = heartbeat(&mut c, 1, &beat("m1", -1, &BTreeSet::new(), id)).await;
    assert_eq!((a.error_code, a.member_epoch), (NONE, -1));
    let b = heartbeat(&mut c, 1, &beat("m2", 2, &m2, id)).await;
    assert_eq!(assigned(&b, id).unwrap().len(), 4);
    heartbeat(&mut c, 1, &beat("m2", b.member_epoch, &BTreeSet::new(), id)).await;
    let b = heartbeat(&mut c, 1, &beat("m2", -1, &BTreeSet::new(), id)).await;
    assert_eq!(b.error_code, NONE);
    // Empty, the group id can go classic; its offsets stay.
    let j: JoinGroupResponse = call(&mut c, ApiKey::JoinGroup, 3, &join_classic).await;
    assert_eq!(j.error_code, NONE);
    let answer: OffsetFetchResponse = call(
        &mut c,
        ApiKey::OffsetFetch,
        8,
        &OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(None)]),
    )
    .await;
    assert_eq!(answer.groups[0].topics[0].partitions[0].committed_offset, 7);
    // And a heartbeat into the classic group with a member is refused.
    let a = heartbeat(&mut c, 1, &join("m4")).await;
    assert_eq!(a.error_code, GROUP_ID_NOT_FOUND);
}
