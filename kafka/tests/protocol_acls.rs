//! Every served Kafka API under ACLs (docs/SECURITY.md "ACLs"): a
//! principal without the operation is refused with the resource's
//! authorization code and nothing changes; granted the operation, the
//! same request succeeds. Requests go through the dispatcher as a
//! connection logged in as `User:bob` would send them (the session's
//! principal set as a SASL login sets it), so each API is checked where
//! the wire is, not below it.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tidelog_broker::security::acl::{
    AclBinding, Host, Operation, PatternType, Permission, ResourcePattern, ResourceType,
};
use tidelog_broker::store::{CleanerConfig, StoreConfig};
use tidelog_broker::{Broker, BrokerConfig, Door, Principal};
use tidelog_kafka::metrics::KafkaMetrics;
use tidelog_kafka::session::Session;
use tidelog_kafka::{Budgets, Context, KafkaConfig, ListenerName, Ready, SecurityProtocol};
use tidelog_runtime::budget::ByteBudget;
use tokio::sync::watch;

const NONE: i16 = 0;
const TOPIC_DENIED: i16 = 29;
const GROUP_DENIED: i16 = 30;
const CLUSTER_DENIED: i16 = 31;

struct Fixture {
    broker: Arc<Broker>,
    ctx: Context,
    _stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut store = StoreConfig::new(dir.path());
    store.commitlog_segment_bytes = 1 << 20;
    store.consume_queue_units_per_file = 1024;
    store.index_slots = 64;
    store.index_entries = 256;
    store.preallocate_next_segment = false;
    // How full this shared machine's disk is must not refuse writes.
    store.retention.disk_max_used_ratio = 1.0;
    store.retention.disk_force_clean_ratio = 1.0;
    store.retention.disk_full_ratio = 1.0;
    let cleaner = CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    };
    let mut config = BrokerConfig {
        auto_create_topics: true,
        ..Default::default()
    };
    config.security.authorization = true;
    config.security.super_users = vec!["root".into()];
    let broker = Arc::new(
        tokio::task::spawn_blocking(move || Broker::open(&config, store, cleaner))
            .await
            .unwrap()
            .unwrap(),
    );
    let (stop, stop_rx) = watch::channel(false);
    let ready: Ready = {
        let broker = Arc::clone(&broker);
        Arc::new(move || Some(Arc::clone(&broker)))
    };
    let ctx = Context::new(
        &KafkaConfig::default(),
        (ListenerName("PLAIN".into()), SecurityProtocol::Plaintext),
        ready,
        ("127.0.0.1".into(), 9092),
        Budgets {
            requests: ByteBudget::new(64 << 20),
            answers: ByteBudget::new(64 << 20),
        },
        Arc::new(KafkaMetrics::default()),
        stop_rx,
    );
    let f = Fixture {
        broker,
        ctx,
        _stop: stop,
        _dir: dir,
    };
    let root = f.root();
    // Bob's account, which the dispatcher looks up before each request.
    root.create_user(
        "bob",
        b"bob-pw".to_vec(),
        tidelog_broker::security::scram::Mechanism::Sha256,
    )
    .await
    .unwrap();
    for topic in ["t", "gone"] {
        root.create_topic(
            tidelog_broker::topics::CreateTopic {
                name: topic.into(),
                partitions: Some(1),
                replication_factor: None,
                assignment: Vec::new(),
                configs: Vec::new(),
            },
            false,
        )
        .await
        .unwrap();
    }
    f
}

impl Fixture {
    fn root(&self) -> Door {
        self.broker.door(&Principal::user("root"))
    }

    /// Bob's answer to one request, as his logged-in connection gets it.
    async fn as_bob<Q: Encodable, A: Decodable + HeaderVersion>(
        &self,
        key: ApiKey,
        version: i16,
        body: &Q,
    ) -> A {
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("acl-test")));
        let mut frame = BytesMut::new();
        header
            .encode(&mut frame, key.request_header_version(version))
            .unwrap();
        body.encode(&mut frame, version).unwrap();
        let mut session = Session {
            principal: Principal::user("bob"),
            logged_in: true,
            ..Session::default()
        };
        let answer = tidelog_kafka::dispatch::handle_in(
            &self.ctx,
            frame.freeze(),
            Some("127.0.0.1:5000".parse().unwrap()),
            &mut session,
        )
        .await
        .unwrap()
        .expect("an answer");
        let mut answer = answer.freeze();
        let _len = answer.split_to(4);
        let _header =
            ResponseHeader::decode(&mut answer, key.response_header_version(version)).unwrap();
        A::decode(&mut answer, version).unwrap()
    }

    async fn grant(&self, resource_type: ResourceType, name: &str, operation: Operation) {
        let acl = AclBinding {
            pattern: ResourcePattern {
                resource_type,
                name: name.into(),
                pattern_type: PatternType::Literal,
            },
            principal: "User:bob".into(),
            host: Host::Any,
            operation,
            permission: Permission::Allow,
        };
        let created = self.root().create_acls(vec![acl]).await.unwrap();
        assert!(created.iter().all(Result::is_ok));
    }

    /// The end offset, once every acknowledged record is visible.
    async fn end_offset(&self, topic: &str) -> u64 {
        let root = self.root();
        root.until_acknowledged_visible().await;
        root.partition(topic, 0).unwrap().offsets().1
    }
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn group(s: &str) -> GroupId {
    GroupId(StrBytes::from_string(s.into()))
}

fn batch(values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            delete_horizon: false,
            offset: i as i64,
            sequence: -1,
            timestamp: 1_700_000_000_000,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    out.freeze()
}

fn produce_request(topic: &str) -> ProduceRequest {
    let partition = produce_request::PartitionProduceData::default()
        .with_index(0)
        .with_records(Some(batch(&["v"])));
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![partition])])
}

async fn produce_code(f: &Fixture, topic: &str) -> i16 {
    let answer: ProduceResponse = f.as_bob(ApiKey::Produce, 9, &produce_request(topic)).await;
    answer.responses[0].partition_responses[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_apis_need_write_read_and_describe_on_the_topic() {
    let f = fixture().await;
    // Produce: WRITE.
    assert_eq!(produce_code(&f, "t").await, TOPIC_DENIED);
    assert_eq!(
        f.end_offset("t").await,
        0,
        "a refused produce writes nothing"
    );
    f.grant(ResourceType::Topic, "t", Operation::Write).await;
    assert_eq!(produce_code(&f, "t").await, NONE);
    assert_eq!(f.end_offset("t").await, 1);

    // Fetch: READ (WRITE does not imply it).
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let answer: FetchResponse = f.as_bob(ApiKey::Fetch, 12, &fetch).await;
    assert_eq!(answer.responses[0].partitions[0].error_code, TOPIC_DENIED);
    let records = |a: &FetchResponse| {
        a.responses[0].partitions[0]
            .records
            .as_ref()
            .map_or(0, Bytes::len)
    };
    assert_eq!(records(&answer), 0, "nothing read");
    f.grant(ResourceType::Topic, "t", Operation::Read).await;
    let answer: FetchResponse = f.as_bob(ApiKey::Fetch, 12, &fetch).await;
    assert_eq!(answer.responses[0].partitions[0].error_code, NONE);
    assert!(records(&answer) > 0, "the produced record is read");

    // ListOffsets: DESCRIBE ("gone" has no ACL of bob's).
    let list = |topic: &str| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ])])
    };
    let answer: ListOffsetsResponse = f.as_bob(ApiKey::ListOffsets, 7, &list("gone")).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, TOPIC_DENIED);
    let answer: ListOffsetsResponse = f.as_bob(ApiKey::ListOffsets, 7, &list("t")).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, NONE);
    assert_eq!(answer.topics[0].partitions[0].offset, 1);

    // Metadata: all topics lists only what bob may describe; a topic
    // named is TOPIC_AUTHORIZATION_FAILED, and is not auto-created
    // without CREATE.
    let all: MetadataResponse = f
        .as_bob(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(None),
        )
        .await;
    let listed: Vec<&str> = all
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.as_str()))
        .collect();
    assert_eq!(listed, ["t"]);
    // Asked for (KIP-430), a topic's authorized operations are bob's:
    // WRITE and READ, and the DESCRIBE they imply; not asked, none.
    let asked = MetadataRequest::default()
        .with_topics(None)
        .with_include_topic_authorized_operations(true);
    let answer: MetadataResponse = f.as_bob(ApiKey::Metadata, 12, &asked).await;
    let bits = |op: Operation| 1 << op.code();
    assert_eq!(
        answer.topics[0].topic_authorized_operations,
        bits(Operation::Read) | bits(Operation::Write) | bits(Operation::Describe)
    );
    assert_eq!(all.topics[0].topic_authorized_operations, i32::MIN);
    let named = MetadataRequest::default()
        .with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name("gone"))),
            metadata_request::MetadataRequestTopic::default().with_name(Some(name("new"))),
        ]))
        .with_allow_auto_topic_creation(true);
    let answer: MetadataResponse = f.as_bob(ApiKey::Metadata, 12, &named).await;
    assert_eq!(answer.topics[0].error_code, TOPIC_DENIED);
    assert_eq!(answer.topics[1].error_code, TOPIC_DENIED);
    assert!(f.root().describe_topic("new").is_err(), "not auto-created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_apis_need_create_delete_and_the_config_operations() {
    let f = fixture().await;
    // CreateTopics: CREATE on the cluster or the topic.
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(name("made"))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    let answer: CreateTopicsResponse = f.as_bob(ApiKey::CreateTopics, 7, &create).await;
    assert_eq!(answer.topics[0].error_code, TOPIC_DENIED);
    assert!(f.root().describe_topic("made").is_err());
    f.grant(ResourceType::Cluster, "kafka-cluster", Operation::Create)
        .await;
    let answer: CreateTopicsResponse = f.as_bob(ApiKey::CreateTopics, 7, &create).await;
    assert_eq!(answer.topics[0].error_code, NONE);
    assert!(f.root().describe_topic("made").is_ok());

    // DescribeConfigs: DESCRIBE_CONFIGS; the broker's on the cluster.
    let describe = |resource_type: i8, resource: &str| {
        DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(resource.into())),
        ])
    };
    let answer: DescribeConfigsResponse = f
        .as_bob(ApiKey::DescribeConfigs, 4, &describe(2, "t"))
        .await;
    assert_eq!(answer.results[0].error_code, TOPIC_DENIED);
    let answer: DescribeConfigsResponse = f
        .as_bob(ApiKey::DescribeConfigs, 4, &describe(4, "0"))
        .await;
    assert_eq!(answer.results[0].error_code, CLUSTER_DENIED);
    // CreatePartitions: ALTER on the topic (ALTER_CONFIGS is not it).
    let grow = CreatePartitionsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(name("made"))
                .with_count(3),
        ]);
    let answer: CreatePartitionsResponse = f.as_bob(ApiKey::CreatePartitions, 3, &grow).await;
    assert_eq!(answer.results[0].error_code, TOPIC_DENIED);
    f.grant(ResourceType::Topic, "made", Operation::Alter).await;
    let answer: CreatePartitionsResponse = f.as_bob(ApiKey::CreatePartitions, 3, &grow).await;
    assert_eq!(answer.results[0].error_code, NONE);
    assert_eq!(f.root().describe_topic("made").unwrap().partitions.get(), 3);

    f.grant(ResourceType::Topic, "t", Operation::AlterConfigs)
        .await;
    let answer: DescribeConfigsResponse = f
        .as_bob(ApiKey::DescribeConfigs, 4, &describe(2, "t"))
        .await;
    assert_eq!(
        answer.results[0].error_code, NONE,
        "ALTER_CONFIGS implies DESCRIBE_CONFIGS"
    );

    // IncrementalAlterConfigs: ALTER_CONFIGS ("gone" has none).
    let alter = |topic: &str| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![
            incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(topic.into()))
                .with_configs(vec![
                    incremental_alter_configs_request::AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("retention.ms"))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_static_str("60000"))),
                ]),
        ])
    };
    let answer: IncrementalAlterConfigsResponse = f
        .as_bob(ApiKey::IncrementalAlterConfigs, 1, &alter("gone"))
        .await;
    assert_eq!(answer.responses[0].error_code, TOPIC_DENIED);
    let answer: IncrementalAlterConfigsResponse = f
        .as_bob(ApiKey::IncrementalAlterConfigs, 1, &alter("t"))
        .await;
    assert_eq!(answer.responses[0].error_code, NONE);
    let overrides = f.root().topic_configs("t").unwrap().overrides.clone();
    assert_eq!(
        overrides.get("retention.ms").map(String::as_str),
        Some("60000")
    );
    assert!(f.root().topic_configs("gone").unwrap().overrides.is_empty());

    // DeleteRecords and DeleteTopics: DELETE on the topic.
    let delete_records = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(name("gone"))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(-1),
            ])]);
    let answer: DeleteRecordsResponse = f.as_bob(ApiKey::DeleteRecords, 2, &delete_records).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, TOPIC_DENIED);
    let delete = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topic_names(vec![name("gone")]);
    let answer: DeleteTopicsResponse = f.as_bob(ApiKey::DeleteTopics, 5, &delete).await;
    assert_eq!(answer.responses[0].error_code, TOPIC_DENIED);
    assert!(f.root().describe_topic("gone").is_ok(), "nothing deleted");
    f.grant(ResourceType::Topic, "gone", Operation::Delete)
        .await;
    let answer: DeleteRecordsResponse = f.as_bob(ApiKey::DeleteRecords, 2, &delete_records).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, NONE);
    let answer: DeleteTopicsResponse = f.as_bob(ApiKey::DeleteTopics, 5, &delete).await;
    assert_eq!(answer.responses[0].error_code, NONE);
    assert!(f.root().describe_topic("gone").is_err());

    // InitProducerId: IDEMPOTENT_WRITE on the cluster, or WRITE on some
    // topic.
    let init = InitProducerIdRequest::default()
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let answer: InitProducerIdResponse = f.as_bob(ApiKey::InitProducerId, 4, &init).await;
    assert_eq!(answer.error_code, CLUSTER_DENIED);
    f.grant(ResourceType::Topic, "t", Operation::Write).await;
    let answer: InitProducerIdResponse = f.as_bob(ApiKey::InitProducerId, 4, &init).await;
    assert_eq!(answer.error_code, NONE);

    // The ACL and user APIs: DESCRIBE and ALTER on the cluster.
    let acls = DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    let answer: DescribeAclsResponse = f.as_bob(ApiKey::DescribeAcls, 3, &acls).await;
    assert_eq!(
        answer.error_code, CLUSTER_DENIED,
        "{:?}",
        answer.error_message
    );
    let users: DescribeUserScramCredentialsResponse = f
        .as_bob(
            ApiKey::DescribeUserScramCredentials,
            0,
            &DescribeUserScramCredentialsRequest::default(),
        )
        .await;
    assert_eq!(users.error_code, CLUSTER_DENIED);
    let create_acl = CreateAclsRequest::default().with_creations(vec![
        create_acls_request::AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("*"))
            .with_resource_pattern_type(3)
            .with_principal(StrBytes::from_static_str("User:bob"))
            .with_host(StrBytes::from_static_str("*"))
            .with_operation(2)
            .with_permission_type(3),
    ]);
    let answer: CreateAclsResponse = f.as_bob(ApiKey::CreateAcls, 3, &create_acl).await;
    assert_eq!(
        answer.results[0].error_code, CLUSTER_DENIED,
        "no granting oneself"
    );
    f.grant(ResourceType::Cluster, "kafka-cluster", Operation::Alter)
        .await;
    let answer: CreateAclsResponse = f.as_bob(ApiKey::CreateAcls, 3, &create_acl).await;
    assert_eq!(answer.results[0].error_code, NONE);
    let answer: DescribeAclsResponse = f.as_bob(ApiKey::DescribeAcls, 3, &acls).await;
    assert_eq!(answer.error_code, NONE, "ALTER implies DESCRIBE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_apis_need_read_on_the_group_and_describe_to_see_it() {
    let f = fixture().await;
    let commit = OffsetCommitRequest::default()
        .with_group_id(group("g"))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(0),
                ]),
        ]);
    let code = |answer: &OffsetCommitResponse| answer.topics[0].partitions[0].error_code;
    let answer: OffsetCommitResponse = f.as_bob(ApiKey::OffsetCommit, 8, &commit).await;
    assert_eq!(code(&answer), GROUP_DENIED);
    f.grant(ResourceType::Group, "g", Operation::Read).await;
    let answer: OffsetCommitResponse = f.as_bob(ApiKey::OffsetCommit, 8, &commit).await;
    assert_eq!(code(&answer), TOPIC_DENIED, "READ on the topic too");
    f.grant(ResourceType::Topic, "t", Operation::Read).await;
    let answer: OffsetCommitResponse = f.as_bob(ApiKey::OffsetCommit, 8, &commit).await;
    assert_eq!(
        code(&answer),
        NONE,
        "{:?}",
        kafka_protocol::error::ResponseError::try_from_code(code(&answer))
    );

    // Reads of the group: DESCRIBE, which READ implies; others' groups
    // are left out of ListGroups.
    let answer: ListGroupsResponse = f
        .as_bob(ApiKey::ListGroups, 4, &ListGroupsRequest::default())
        .await;
    let listed: Vec<&str> = answer
        .groups
        .iter()
        .map(|g| g.group_id.0.as_str())
        .collect();
    assert_eq!(listed, ["g"]);
    let describe = |g: &str| DescribeGroupsRequest::default().with_groups(vec![group(g)]);
    let answer: DescribeGroupsResponse = f
        .as_bob(ApiKey::DescribeGroups, 5, &describe("other"))
        .await;
    assert_eq!(answer.groups[0].error_code, GROUP_DENIED);
    let answer: DescribeGroupsResponse = f.as_bob(ApiKey::DescribeGroups, 5, &describe("g")).await;
    assert_eq!(answer.groups[0].error_code, NONE);
    let fetch = |g: &str| {
        OffsetFetchRequest::default()
            .with_group_id(group(g))
            .with_topics(None)
    };
    let answer: OffsetFetchResponse = f.as_bob(ApiKey::OffsetFetch, 7, &fetch("other")).await;
    assert_eq!(answer.error_code, GROUP_DENIED);
    let answer: OffsetFetchResponse = f.as_bob(ApiKey::OffsetFetch, 7, &fetch("g")).await;
    assert_eq!(answer.error_code, NONE);

    // FindCoordinator: DESCRIBE on the group.
    let find = |g: &str| {
        FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_string(g.into())])
    };
    let answer: FindCoordinatorResponse =
        f.as_bob(ApiKey::FindCoordinator, 4, &find("other")).await;
    assert_eq!(answer.coordinators[0].error_code, GROUP_DENIED);
    let answer: FindCoordinatorResponse = f.as_bob(ApiKey::FindCoordinator, 4, &find("g")).await;
    assert_eq!(answer.coordinators[0].error_code, NONE);

    // Membership: READ on the group.
    let join = |g: &str| {
        JoinGroupRequest::default()
            .with_group_id(group(g))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(StrBytes::from_static_str(""))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::from_static(b"\0\0\0\0\0\0\0\0"))])
    };
    let answer: JoinGroupResponse = f.as_bob(ApiKey::JoinGroup, 7, &join("other")).await;
    assert_eq!(answer.error_code, GROUP_DENIED);
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(group("other"))
        .with_member_id(StrBytes::from_static_str("m"))
        .with_generation_id(1);
    let answer: HeartbeatResponse = f.as_bob(ApiKey::Heartbeat, 4, &heartbeat).await;
    assert_eq!(answer.error_code, GROUP_DENIED);
    let sync = SyncGroupRequest::default()
        .with_group_id(group("other"))
        .with_member_id(StrBytes::from_static_str("m"))
        .with_generation_id(1);
    let answer: SyncGroupResponse = f.as_bob(ApiKey::SyncGroup, 5, &sync).await;
    assert_eq!(answer.error_code, GROUP_DENIED);
    let leave = LeaveGroupRequest::default()
        .with_group_id(group("other"))
        .with_members(vec![leave_group_request::MemberIdentity::default()
            .with_member_id(StrBytes::from_static_str("m"))]);
    let answer: LeaveGroupResponse = f.as_bob(ApiKey::LeaveGroup, 4, &leave).await;
    assert_eq!(answer.error_code, GROUP_DENIED);
    // Granted, a join goes through (a new member is asked to rejoin with
    // its id: Kafka's MEMBER_ID_REQUIRED, not a denial).
    let answer: JoinGroupResponse = f.as_bob(ApiKey::JoinGroup, 7, &join("g")).await;
    assert_ne!(answer.error_code, GROUP_DENIED);

    // OffsetDelete: DELETE on the group.
    let delete = OffsetDeleteRequest::default()
        .with_group_id(group("g"))
        .with_topics(vec![
            offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(0),
                ]),
        ]);
    let answer: OffsetDeleteResponse = f.as_bob(ApiKey::OffsetDelete, 0, &delete).await;
    assert_eq!(answer.error_code, GROUP_DENIED);
    assert!(f.root().committed_offsets("g", None).unwrap().is_some());
    // DeleteGroups: DELETE on each group, answered per group.
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![group("g")]);
    let answer: DeleteGroupsResponse = f.as_bob(ApiKey::DeleteGroups, 2, &delete).await;
    assert_eq!(answer.results.len(), 1);
    assert_eq!(answer.results[0].error_code, GROUP_DENIED);
    assert!(f.root().committed_offsets("g", None).unwrap().is_some());
}

/// The transaction APIs: WRITE on the transactional id (DESCRIBE, implied
/// by it, to find, list and describe it), WRITE on each topic a
/// transaction adds, READ on the group whose offsets it commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_apis_need_write_on_the_transactional_id() {
    const TXN_DENIED: i16 = 53;
    let f = fixture().await;
    let tx = || TransactionalId(StrBytes::from_static_str("tx"));
    let find = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("tx"))
        .with_key_type(1);
    let answer: FindCoordinatorResponse = f.as_bob(ApiKey::FindCoordinator, 3, &find).await;
    assert_eq!(answer.error_code, TXN_DENIED);
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(tx()))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let answer: InitProducerIdResponse = f.as_bob(ApiKey::InitProducerId, 4, &init).await;
    assert_eq!(answer.error_code, TXN_DENIED);
    let list: ListTransactionsResponse = f
        .as_bob(
            ApiKey::ListTransactions,
            1,
            &ListTransactionsRequest::default(),
        )
        .await;
    assert!(list.transaction_states.is_empty());

    f.grant(ResourceType::TransactionalId, "tx", Operation::Write)
        .await;
    let answer: FindCoordinatorResponse = f.as_bob(ApiKey::FindCoordinator, 3, &find).await;
    assert_eq!(answer.error_code, NONE, "WRITE implies DESCRIBE");
    let init: InitProducerIdResponse = f.as_bob(ApiKey::InitProducerId, 4, &init).await;
    assert_eq!(init.error_code, NONE);
    let (producer_id, epoch) = (init.producer_id, init.producer_epoch);

    // A topic the transaction adds needs WRITE on it too (the
    // fixture made `t`).
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(tx())
        .with_v3_and_below_producer_id(producer_id)
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![0]),
        ]);
    let answer: AddPartitionsToTxnResponse = f.as_bob(ApiKey::AddPartitionsToTxn, 3, &add).await;
    assert_eq!(
        answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        TOPIC_DENIED
    );
    f.grant(ResourceType::Topic, "t", Operation::Write).await;
    let answer: AddPartitionsToTxnResponse = f.as_bob(ApiKey::AddPartitionsToTxn, 3, &add).await;
    assert_eq!(
        answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        NONE
    );

    // A group's offsets need READ on the group.
    let offsets = AddOffsetsToTxnRequest::default()
        .with_transactional_id(tx())
        .with_producer_id(producer_id)
        .with_producer_epoch(epoch)
        .with_group_id(group("g"));
    let answer: AddOffsetsToTxnResponse = f.as_bob(ApiKey::AddOffsetsToTxn, 3, &offsets).await;
    assert_eq!(answer.error_code, GROUP_DENIED);
    f.grant(ResourceType::Group, "g", Operation::Read).await;
    let answer: AddOffsetsToTxnResponse = f.as_bob(ApiKey::AddOffsetsToTxn, 3, &offsets).await;
    assert_eq!(answer.error_code, NONE);

    let list: ListTransactionsResponse = f
        .as_bob(
            ApiKey::ListTransactions,
            1,
            &ListTransactionsRequest::default(),
        )
        .await;
    assert_eq!(list.transaction_states.len(), 1);
    let end = EndTxnRequest::default()
        .with_transactional_id(tx())
        .with_producer_id(producer_id)
        .with_producer_epoch(epoch)
        .with_committed(true);
    let answer: EndTxnResponse = f.as_bob(ApiKey::EndTxn, 3, &end).await;
    assert_eq!(answer.error_code, NONE);

    // DescribeProducers needs READ on the topic (WRITE is not enough).
    let describe = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(name("t"))
            .with_partition_indexes(vec![0]),
    ]);
    let answer: DescribeProducersResponse = f.as_bob(ApiKey::DescribeProducers, 0, &describe).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, TOPIC_DENIED);
    f.grant(ResourceType::Topic, "t", Operation::Read).await;
    let answer: DescribeProducersResponse = f.as_bob(ApiKey::DescribeProducers, 0, &describe).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, NONE);
}
