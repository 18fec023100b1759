//! The Kafka APIs on a node of a cluster (issue 39, docs/KAFKA.md
//! "Cluster"), over real TCP against a real broker whose cluster gate the
//! test sets: Metadata and DescribeCluster name the live nodes and the
//! master, FindCoordinator the master; a replica answers Produce, Fetch
//! and ListOffsets NOT_LEADER_OR_FOLLOWER and every coordinator API
//! NOT_COORDINATOR; a client's leader epoch is checked against the
//! cluster's; CreateTopics takes a factor up to the number of nodes. And
//! a node without a gate answers as a single node always did. A module of
//! `protocol.rs`, whose server and framing helpers it uses.
use std::sync::{Arc, Mutex};

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::cluster::{ClusterGate, ClusterNode, ClusterStatus, GateFuture, Role};
use tidelog_broker::BrokerError;
use tokio::net::TcpStream;

use super::{
    batch, call, connect, fetch_request, metadata, name, produce_request, record, server, Server,
};

// Kafka's error codes the tests expect.
const NONE: i16 = 0;
const LEADER_NOT_AVAILABLE: i16 = 5;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const NOT_CONTROLLER: i16 = 41;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// This node's id in the tests' cluster.
const THIS: u32 = 2;
const EPOCH: u64 = 7;

/// A gate whose status the test sets; this node may write when the status
/// names it master, unless `refuse_writes` (a master past its lease's
/// margin).
struct FakeGate {
    status: Mutex<ClusterStatus>,
    refuse_writes: Mutex<bool>,
}

impl FakeGate {
    fn set(&self, change: impl FnOnce(&mut ClusterStatus)) {
        change(&mut self.status.lock().unwrap());
    }
}

impl ClusterGate for FakeGate {
    fn may_write(&self) -> Result<(), BrokerError> {
        let status = self.status.lock().unwrap();
        match status.master == Some(status.node_id) && !*self.refuse_writes.lock().unwrap() {
            true => Ok(()),
            false => Err(BrokerError::NotMaster {
                master: status.master,
            }),
        }
    }
    fn in_sync(&self) -> usize {
        1
    }
    fn min_insync(&self) -> usize {
        1
    }
    fn replicated(&self, _end: u64, _min_insync: usize) -> GateFuture<'_> {
        Box::pin(async { Ok(()) })
    }
    fn status(&self) -> ClusterStatus {
        self.status.lock().unwrap().clone()
    }
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }
}

fn node(node_id: u32, kafka: Option<&str>, master: bool, in_sync: bool) -> ClusterNode {
    ClusterNode {
        node_id,
        http: format!("127.0.0.1:{}", 8000 + node_id),
        kafka: kafka.map(str::to_owned),
        role: if master { Role::Master } else { Role::Replica },
        in_sync,
        lag_bytes: 0,
    }
}

/// Four live nodes: 1 the master (Kafka at 127.0.0.1:19092), 2 this one
/// (a replica, in sync), 3 a replica out of sync with an IPv6 address, 4
/// in sync without a Kafka listener; epoch [`EPOCH`].
fn four_nodes(this_kafka: &str) -> ClusterStatus {
    ClusterStatus {
        epoch: EPOCH,
        node_id: THIS,
        master: Some(1),
        nodes: vec![
            node(1, Some("127.0.0.1:19092"), true, true),
            node(THIS, Some(this_kafka), false, true),
            node(3, Some("[::1]:39092"), false, false),
            node(4, None, false, true),
        ],
    }
}

/// The protocol tests' server with topic `t` of 2 partitions and a record
/// in partition 0 (written alone, before the gate), then put in the
/// four-node cluster as this node, a replica.
async fn clustered() -> (Server, Arc<FakeGate>) {
    let srv = server().await;
    let mut c = connect(&srv).await;
    metadata(&mut c, 12, &["t"]).await;
    let produced: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("t", 0, -1, batch(&[record(None, Some(b"v"), 1)])),
    )
    .await;
    assert_eq!(
        produced.responses[0].partition_responses[0].error_code,
        NONE
    );
    let gate = Arc::new(FakeGate {
        status: Mutex::new(four_nodes(&srv.addr.to_string())),
        refuse_writes: Mutex::new(false),
    });
    srv.broker.join_cluster(Arc::clone(&gate) as _).unwrap();
    (srv, gate)
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// (id, host, port) of each broker a Metadata answer names.
fn brokers(answer: &MetadataResponse) -> Vec<(i32, String, i32)> {
    answer
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect()
}

/// A partition as Metadata describes it: (error, leader, epoch,
/// replicas, isr).
type Led = (i16, i32, i32, Vec<i32>, Vec<i32>);

/// Every partition of a Metadata answer.
fn leaders(answer: &MetadataResponse) -> Vec<Led> {
    answer
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            (
                p.error_code,
                p.leader_id.0,
                p.leader_epoch,
                p.replica_nodes.iter().map(|b| b.0).collect(),
                p.isr_nodes.iter().map(|b| b.0).collect(),
            )
        })
        .collect()
}

#[tokio::test]
async fn metadata_and_describe_cluster_name_the_live_nodes_and_the_master() {
    let (srv, gate) = clustered().await;
    let mut c = connect(&srv).await;
    let this = (2, "127.0.0.1".to_owned(), i32::from(srv.addr.port()));
    let expected_brokers = vec![
        this.clone(),
        (1, "127.0.0.1".to_owned(), 19092),
        (3, "::1".to_owned(), 39092),
    ];
    for version in [0, 1, 7, 12] {
        let answer = metadata(&mut c, version, &["t"]).await;
        assert_eq!(brokers(&answer), expected_brokers, "v{version}");
        // The controller is a field from v1 on.
        let controller = if version >= 1 { 1 } else { -1 };
        assert_eq!(answer.controller_id.0, controller, "v{version}");
        // The leader epoch is a field from v7 on.
        let epoch = if version >= 7 { EPOCH as i32 } else { -1 };
        let partition = (NONE, 1, epoch, vec![1, 2, 3, 4], vec![1, 2, 4]);
        assert_eq!(
            leaders(&answer),
            vec![partition.clone(), partition],
            "v{version}"
        );
    }
    let described: DescribeClusterResponse = call(
        &mut c,
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default().with_endpoint_type(1),
    )
    .await;
    assert_eq!(described.error_code, NONE);
    assert_eq!(described.controller_id.0, 1);
    let named: Vec<_> = described
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.host.to_string(), b.port))
        .collect();
    assert_eq!(named, expected_brokers);

    // An unknown topic is not auto-created on a replica: the master
    // creates it, once the client asks there.
    let answer = metadata(&mut c, 12, &["new"]).await;
    assert_eq!(answer.topics[0].error_code, LEADER_NOT_AVAILABLE);
    let door = srv.broker.door(&tidelog_broker::Principal::Anonymous);
    assert!(door.list_topics().iter().all(|t| &*t.name != "new"));

    // No master known (an election): no leader, no controller; the
    // partitions say so with a retriable code.
    gate.set(|s| s.master = None);
    let answer = metadata(&mut c, 12, &["t"]).await;
    assert_eq!(answer.controller_id.0, -1);
    let partition = (
        LEADER_NOT_AVAILABLE,
        -1,
        EPOCH as i32,
        vec![1, 2, 3, 4],
        vec![1, 2, 4],
    );
    assert_eq!(leaders(&answer), vec![partition.clone(), partition]);
    let described: DescribeClusterResponse = call(
        &mut c,
        ApiKey::DescribeCluster,
        0,
        &DescribeClusterRequest::default(),
    )
    .await;
    assert_eq!(described.controller_id.0, -1);

    // A master known but with no Kafka listener is no leader a client
    // can reach either.
    gate.set(|s| s.master = Some(4));
    let answer = metadata(&mut c, 12, &["t"]).await;
    assert_eq!(answer.controller_id.0, -1);
    assert!(leaders(&answer).iter().all(|p| p.0 == LEADER_NOT_AVAILABLE));

    // This node the master: named at the listener the client came in on.
    gate.set(|s| s.master = Some(THIS));
    let answer = metadata(&mut c, 12, &["t"]).await;
    assert_eq!(answer.controller_id.0, 2);
    assert!(leaders(&answer).iter().all(|p| (p.0, p.1) == (NONE, 2)));
}

/// (error, node, port) FindCoordinator answers for `key` of `key_type`
/// at `version` (v4 batched with a second key, both answered alike).
async fn coordinator_of(
    c: &mut TcpStream,
    version: i16,
    key_type: i8,
    key: &str,
) -> (i16, i32, i32) {
    let request = FindCoordinatorRequest::default().with_key_type(key_type);
    if version < 4 {
        let answer: FindCoordinatorResponse = call(
            c,
            ApiKey::FindCoordinator,
            version,
            &request.with_key(s(key)),
        )
        .await;
        return (answer.error_code, answer.node_id.0, answer.port);
    }
    let answer: FindCoordinatorResponse = call(
        c,
        ApiKey::FindCoordinator,
        version,
        &request.with_coordinator_keys(vec![s(key), s("other")]),
    )
    .await;
    let found: Vec<_> = answer
        .coordinators
        .iter()
        .map(|k| (k.error_code, k.node_id.0, k.port))
        .collect();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0], found[1], "every key the same coordinator");
    found[0]
}

#[tokio::test]
async fn find_coordinator_names_the_master_or_none_while_unknown() {
    let (srv, gate) = clustered().await;
    let mut c = connect(&srv).await;
    let this_port = i32::from(srv.addr.port());
    for (version, key_type) in [(0, 0), (3, 0), (3, 1), (4, 0), (4, 1)] {
        let asked = (version, key_type);
        gate.set(|s| s.master = Some(1));
        assert_eq!(
            coordinator_of(&mut c, version, key_type, "g").await,
            (NONE, 1, 19092),
            "{asked:?}: the master, not this node"
        );
        gate.set(|s| s.master = None);
        assert_eq!(
            coordinator_of(&mut c, version, key_type, "g").await,
            (COORDINATOR_NOT_AVAILABLE, -1, -1),
            "{asked:?}: no master known"
        );
        gate.set(|s| s.master = Some(THIS));
        assert_eq!(
            coordinator_of(&mut c, version, key_type, "g").await,
            (NONE, 2, this_port),
            "{asked:?}: this node, the master"
        );
    }
}

#[tokio::test]
async fn a_replica_refuses_partitions_as_no_leader_and_coordination_as_no_coordinator() {
    let (srv, _gate) = clustered().await;
    let mut c = connect(&srv).await;

    let produced: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("t", 0, 1, batch(&[record(None, Some(b"w"), 2)])),
    )
    .await;
    assert_eq!(
        produced.responses[0].partition_responses[0].error_code,
        NOT_LEADER_OR_FOLLOWER
    );
    for version in [4, 12] {
        let fetched: FetchResponse =
            call(&mut c, ApiKey::Fetch, version, &fetch_request("t", 0, 0, 0)).await;
        let p = &fetched.responses[0].partitions[0];
        assert_eq!(p.error_code, NOT_LEADER_OR_FOLLOWER, "Fetch v{version}");
        assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
    }
    for version in [1, 7] {
        let listed = list_offsets(&mut c, version, -1, -1).await;
        assert_eq!(listed.0, NOT_LEADER_OR_FOLLOWER, "ListOffsets v{version}");
    }
    // An unknown partition is still that first.
    let fetched: FetchResponse =
        call(&mut c, ApiKey::Fetch, 12, &fetch_request("t", 9, 0, 0)).await;
    assert_eq!(fetched.responses[0].partitions[0].error_code, 3);

    assert_eq!(
        coordinator_codes(&mut c).await,
        vec![NOT_COORDINATOR; COORDINATOR_APIS.len()],
        "{COORDINATOR_APIS:?}"
    );
    // ListGroups and ListTransactions: a replica coordinates none, so
    // lists none, as a Kafka broker lists only its own.
    let groups: ListGroupsResponse =
        call(&mut c, ApiKey::ListGroups, 4, &ListGroupsRequest::default()).await;
    assert_eq!((groups.error_code, groups.groups.len()), (NONE, 0));
    let txns: ListTransactionsResponse = call(
        &mut c,
        ApiKey::ListTransactions,
        0,
        &ListTransactionsRequest::default(),
    )
    .await;
    assert_eq!((txns.error_code, txns.transaction_states.len()), (NONE, 0));
}

#[tokio::test]
async fn a_master_that_may_not_write_answers_coordinator_writes_not_coordinator() {
    // The status names this node master, but the gate refuses its writes
    // (its lease's margin is gone): the door's NotMaster behind the
    // coordinator check is NOT_COORDINATOR too, never a partition's code.
    let (srv, gate) = clustered().await;
    gate.set(|s| s.master = Some(THIS));
    *gate.refuse_writes.lock().unwrap() = true;
    let mut c = connect(&srv).await;
    let join = join_group(&mut c).await;
    assert_eq!(join, NOT_COORDINATOR);
    let init: InitProducerIdResponse =
        call(&mut c, ApiKey::InitProducerId, 4, &init_transactional()).await;
    assert_eq!(init.error_code, NOT_COORDINATOR);
    // Produce stays a partition's refusal.
    let produced: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("t", 0, 1, batch(&[record(None, Some(b"w"), 2)])),
    )
    .await;
    assert_eq!(
        produced.responses[0].partition_responses[0].error_code,
        NOT_LEADER_OR_FOLLOWER
    );

    // Writes allowed again: the same calls are served.
    *gate.refuse_writes.lock().unwrap() = false;
    assert_eq!(join_group(&mut c).await, NONE);
    let init: InitProducerIdResponse =
        call(&mut c, ApiKey::InitProducerId, 4, &init_transactional()).await;
    assert_eq!(init.error_code, NONE);
}

/// The coordinator APIs [`coordinator_codes`] asks, in its order.
const COORDINATOR_APIS: [&str; 16] = [
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch v7",
    "OffsetFetch v8",
    "DescribeGroups",
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
    "InitProducerId (transactional)",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "TxnOffsetCommit",
    "DescribeTransactions",
];

fn init_transactional() -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s("tx"))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

async fn join_group(c: &mut TcpStream) -> i16 {
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(bytes::Bytes::new())]);
    // v3: no MEMBER_ID_REQUIRED round trip.
    let answer: JoinGroupResponse = call(c, ApiKey::JoinGroup, 3, &request).await;
    answer.error_code
}

/// The code each of [`COORDINATOR_APIS`] answers, in order.
async fn coordinator_codes(c: &mut TcpStream) -> Vec<i16> {
    let group = || GroupId(s("g"));
    let mut codes = vec![join_group(c).await];
    let sync: SyncGroupResponse = call(
        c,
        ApiKey::SyncGroup,
        5,
        &SyncGroupRequest::default()
            .with_group_id(group())
            .with_generation_id(1)
            .with_member_id(s("m"))
            .with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s("range"))),
    )
    .await;
    codes.push(sync.error_code);
    let beat: HeartbeatResponse = call(
        c,
        ApiKey::Heartbeat,
        4,
        &HeartbeatRequest::default()
            .with_group_id(group())
            .with_generation_id(1)
            .with_member_id(s("m")),
    )
    .await;
    codes.push(beat.error_code);
    let leave: LeaveGroupResponse = call(
        c,
        ApiKey::LeaveGroup,
        4,
        &LeaveGroupRequest::default()
            .with_group_id(group())
            .with_members(vec![MemberIdentity::default().with_member_id(s("m"))]),
    )
    .await;
    codes.push(leave.error_code);
    let commit: OffsetCommitResponse = call(
        c,
        ApiKey::OffsetCommit,
        8,
        &OffsetCommitRequest::default()
            .with_group_id(group())
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1)])]),
    )
    .await;
    codes.push(commit.topics[0].partitions[0].error_code);
    let fetched: OffsetFetchResponse = call(
        c,
        ApiKey::OffsetFetch,
        7,
        &OffsetFetchRequest::default()
            .with_group_id(group())
            .with_topics(None),
    )
    .await;
    codes.push(fetched.error_code);
    let fetched: OffsetFetchResponse = call(
        c,
        ApiKey::OffsetFetch,
        8,
        &OffsetFetchRequest::default().with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default().with_group_id(group()),
        ]),
    )
    .await;
    codes.push(fetched.groups[0].error_code);
    let described: DescribeGroupsResponse = call(
        c,
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default().with_groups(vec![group()]),
    )
    .await;
    codes.push(described.groups[0].error_code);
    let beat: ConsumerGroupHeartbeatResponse = call(
        c,
        ApiKey::ConsumerGroupHeartbeat,
        0,
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group())
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(10_000)
            .with_subscribed_topic_names(Some(vec![name("t")]))
            .with_topic_partitions(Some(Vec::new())),
    )
    .await;
    codes.push(beat.error_code);
    let described: ConsumerGroupDescribeResponse = call(
        c,
        ApiKey::ConsumerGroupDescribe,
        0,
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![group()]),
    )
    .await;
    codes.push(described.groups[0].error_code);
    let init: InitProducerIdResponse =
        call(c, ApiKey::InitProducerId, 4, &init_transactional()).await;
    codes.push(init.error_code);
    let added: AddPartitionsToTxnResponse = call(
        c,
        ApiKey::AddPartitionsToTxn,
        3,
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s("tx")))
            .with_v3_and_below_producer_id(ProducerId(1))
            .with_v3_and_below_producer_epoch(0)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![0])]),
    )
    .await;
    codes.push(added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code);
    let added: AddOffsetsToTxnResponse = call(
        c,
        ApiKey::AddOffsetsToTxn,
        3,
        &AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(s("tx")))
            .with_producer_id(ProducerId(1))
            .with_group_id(group()),
    )
    .await;
    codes.push(added.error_code);
    let ended: EndTxnResponse = call(
        c,
        ApiKey::EndTxn,
        3,
        &EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s("tx")))
            .with_producer_id(ProducerId(1))
            .with_committed(true),
    )
    .await;
    codes.push(ended.error_code);
    let committed: TxnOffsetCommitResponse = call(
        c,
        ApiKey::TxnOffsetCommit,
        3,
        &TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s("tx")))
            .with_group_id(group())
            .with_producer_id(ProducerId(1))
            .with_generation_id(-1)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1)])]),
    )
    .await;
    codes.push(committed.topics[0].partitions[0].error_code);
    let described: DescribeTransactionsResponse = call(
        c,
        ApiKey::DescribeTransactions,
        0,
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(s("tx"))]),
    )
    .await;
    codes.push(described.transaction_states[0].error_code);
    codes
}

/// (error, offset, leader epoch) ListOffsets answers for `t`-0 at
/// `timestamp` with the client's `current_leader_epoch`.
async fn list_offsets(
    c: &mut TcpStream,
    version: i16,
    timestamp: i64,
    current_leader_epoch: i32,
) -> (i16, i64, i32) {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("t"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(current_leader_epoch)
                .with_timestamp(timestamp)])]);
    let answer: ListOffsetsResponse = call(c, ApiKey::ListOffsets, version, &request).await;
    let p = &answer.topics[0].partitions[0];
    (p.error_code, p.offset, p.leader_epoch)
}

/// The error a Fetch v`version` of `t`-0 from 0 answers with the client's
/// `current_leader_epoch`, and how many records it carried.
async fn fetch_with_epoch(
    c: &mut TcpStream,
    version: i16,
    current_leader_epoch: i32,
) -> (i16, usize) {
    let mut request = fetch_request("t", 0, 0, 0);
    request.topics[0].partitions[0].current_leader_epoch = current_leader_epoch;
    let answer: FetchResponse = call(c, ApiKey::Fetch, version, &request).await;
    let p = &answer.responses[0].partitions[0];
    let records = p.records.as_ref().map_or(0, |r| {
        let mut budget = usize::MAX;
        tidelog_kafka::records::decode_batches(r, &mut budget)
            .unwrap()
            .len()
    });
    (p.error_code, records)
}

#[tokio::test]
async fn the_master_serves_reads_at_the_clusters_leader_epoch() {
    let (srv, gate) = clustered().await;
    gate.set(|s| s.master = Some(THIS));
    let mut c = connect(&srv).await;
    let epoch = EPOCH as i32;
    // Not given (-1) or the cluster's: served. Older: fenced (the
    // client's metadata is stale). Newer: unknown (this node's is).
    for (asked, code) in [
        (-1, NONE),
        (epoch, NONE),
        (epoch - 1, FENCED_LEADER_EPOCH),
        (0, FENCED_LEADER_EPOCH),
        (epoch + 1, UNKNOWN_LEADER_EPOCH),
    ] {
        let fetched = fetch_with_epoch(&mut c, 12, asked).await;
        assert_eq!(
            fetched,
            (code, usize::from(code == NONE)),
            "Fetch, epoch {asked}"
        );
        let listed = list_offsets(&mut c, 7, -1, asked).await;
        match code {
            NONE => assert_eq!(listed, (NONE, 1, epoch), "ListOffsets, epoch {asked}"),
            _ => assert_eq!(listed.0, code, "ListOffsets, epoch {asked}"),
        }
    }
    // Fetch before v9 and ListOffsets before v4 carry no epoch: served.
    assert_eq!(fetch_with_epoch(&mut c, 4, 0).await, (NONE, 1));
    assert_eq!(list_offsets(&mut c, 1, -2, 0).await, (NONE, 0, -1));
    assert_eq!(list_offsets(&mut c, 4, -2, -1).await, (NONE, 0, epoch));

    // A replica at an older epoch than the client's says so first.
    gate.set(|s| {
        s.master = Some(1);
        s.epoch = EPOCH - 1;
    });
    assert_eq!(
        fetch_with_epoch(&mut c, 12, epoch).await.0,
        UNKNOWN_LEADER_EPOCH
    );
    assert_eq!(
        fetch_with_epoch(&mut c, 12, epoch - 1).await.0,
        NOT_LEADER_OR_FOLLOWER
    );
}

/// (error, replication factor) CreateTopics v7 answers for `topic`
/// created with `factor`.
async fn create(c: &mut TcpStream, topic: &str, factor: i16) -> (i16, i16) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(factor)]);
    let answer: CreateTopicsResponse = call(c, ApiKey::CreateTopics, 7, &request).await;
    (
        answer.topics[0].error_code,
        answer.topics[0].replication_factor,
    )
}

#[tokio::test]
async fn create_topics_takes_a_factor_up_to_the_number_of_nodes() {
    let (srv, gate) = clustered().await;
    gate.set(|s| s.master = Some(THIS));
    let mut c = connect(&srv).await;
    // Four live nodes, each holding every topic: the answer's factor.
    assert_eq!(create(&mut c, "f1", 1).await, (NONE, 4));
    assert_eq!(create(&mut c, "f4", 4).await, (NONE, 4));
    assert_eq!(create(&mut c, "fd", -1).await, (NONE, 4));
    assert_eq!(
        create(&mut c, "f5", 5).await,
        (INVALID_REPLICATION_FACTOR, -1)
    );
    assert_eq!(
        create(&mut c, "f0", 0).await,
        (INVALID_REPLICATION_FACTOR, -1)
    );
    // A replica creates nothing: the admin client's stale controller,
    // which it refreshes on NOT_CONTROLLER and asks again.
    gate.set(|s| s.master = Some(1));
    assert_eq!(create(&mut c, "fr", 1).await, (NOT_CONTROLLER, -1));
}

/// A broker's configs are this node's under its own broker id, the one
/// Metadata names (an admin client describes broker N as Metadata told
/// it), not 0, which no cluster node is.
#[tokio::test]
async fn describe_configs_names_this_broker_by_its_node_id() {
    let (srv, _gate) = clustered().await;
    let mut c = connect(&srv).await;
    const BROKER: i8 = 4;
    let this = THIS.to_string();
    let answer: DescribeConfigsResponse = call(
        &mut c,
        ApiKey::DescribeConfigs,
        4,
        &super::admin::describe_request(&[(BROKER, &this, None), (BROKER, "0", None)]),
    )
    .await;
    let codes: Vec<i16> = answer.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes[0], NONE, "{answer:?}");
    assert!(!answer.results[0].configs.is_empty());
    assert_ne!(codes[1], NONE, "broker 0 is no node of the cluster");
}

#[tokio::test]
async fn a_single_node_answers_as_it_always_did() {
    let srv = server().await;
    let mut c = connect(&srv).await;
    // Auto-created, then described.
    metadata(&mut c, 12, &["t"]).await;
    let answer = metadata(&mut c, 12, &["t"]).await;
    let this = (0, "127.0.0.1".to_owned(), i32::from(srv.addr.port()));
    assert_eq!(brokers(&answer), vec![this]);
    assert_eq!(answer.controller_id.0, 0);
    let partition = (NONE, 0, 0, vec![0], vec![0]);
    assert_eq!(leaders(&answer), vec![partition.clone(), partition]);
    for (version, key_type) in [(0, 0), (4, 1)] {
        assert_eq!(
            coordinator_of(&mut c, version, key_type, "g").await,
            (NONE, 0, i32::from(srv.addr.port()))
        );
    }
    // A client's leader epoch is not checked, and the answer's is 0.
    let produced: ProduceResponse = call(
        &mut c,
        ApiKey::Produce,
        9,
        &produce_request("t", 0, -1, batch(&[record(None, Some(b"v"), 1)])),
    )
    .await;
    assert_eq!(
        produced.responses[0].partition_responses[0].error_code,
        NONE
    );
    assert_eq!(fetch_with_epoch(&mut c, 12, 5).await.0, NONE);
    assert_eq!(list_offsets(&mut c, 7, -1, 5).await, (NONE, 1, 0));
    assert_eq!(create(&mut c, "f1", 1).await, (NONE, 1));
    assert_eq!(
        create(&mut c, "f2", 2).await,
        (INVALID_REPLICATION_FACTOR, -1)
    );
    assert_eq!(join_group(&mut c).await, NONE);
}
