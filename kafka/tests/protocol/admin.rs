//! The admin APIs over real TCP on 127.0.0.1, against a real broker in a
//! temporary data dir: each at its lowest (non-flexible) and highest
//! (flexible) served version, per-topic refusals as Kafka codes, the
//! same validation and persistence as the HTTP admin API (the broker's
//! registry is checked, not just the answer), the admin lock when
//! `admin_token` is set, and a lying count closing its connection. A
//! module of `protocol.rs`, whose server and framing helpers it uses.
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tidelog_kafka::config::AdminToken;
use tidelog_kafka::KafkaConfig;
use tokio::net::TcpStream;

use super::{
    batch, call, closed, connect, fetch_n, fetch_request, name, produce_request, read_frame,
    record, request_frame, send_frame, server, server_configured,
};

// Kafka's error codes the tests expect.
const NONE: i16 = 0;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

const TOKEN: &str = "s3cret-token";
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_REQUEST: i16 = 42;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const INVALID_CONFIG: i16 = 40;
const UNKNOWN_TOPIC_ID: i16 = 100;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const POLICY_VIOLATION: i16 = 44;

fn topic(topic: &str, partitions: i32, rf: i16, configs: &[(&str, &str)]) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(rf)
        .with_configs(
            configs
                .iter()
                .map(|(n, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string((*n).to_owned()))
                        .with_value(Some(StrBytes::from_string((*v).to_owned())))
                })
                .collect(),
        )
}

async fn create(
    c: &mut TcpStream,
    version: i16,
    validate_only: bool,
    topics: Vec<CreatableTopic>,
) -> CreateTopicsResponse {
    let request = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5000)
        .with_validate_only(validate_only);
    call(c, ApiKey::CreateTopics, version, &request).await
}

fn codes(answer: &CreateTopicsResponse) -> Vec<(String, i16)> {
    answer
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.error_code))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_creates_with_configs_and_refuses_per_topic() {
    let s = server().await;
    let mut c = connect(&s).await;
    for version in [2, 7] {
        let good = format!("made-v{version}");
        let answer = create(
            &mut c,
            version,
            false,
            vec![
                topic(&good, 3, 1, &[("retention.ms", "3600000")]),
                topic(&format!("rf3-v{version}"), 1, 3, &[]),
                topic(&format!("zero-v{version}"), 0, 1, &[]),
                topic(
                    &format!("badcfg-v{version}"),
                    1,
                    -1,
                    &[("no.such.config", "1")],
                ),
                topic(
                    &format!("badval-v{version}"),
                    1,
                    -1,
                    &[("retention.ms", "soon")],
                ),
                topic("bad/name", 1, 1, &[]),
            ],
        )
        .await;
        assert_eq!(
            codes(&answer),
            [
                (good.clone(), NONE),
                (format!("rf3-v{version}"), INVALID_REPLICATION_FACTOR),
                (format!("zero-v{version}"), INVALID_PARTITIONS),
                (format!("badcfg-v{version}"), INVALID_CONFIG),
                (format!("badval-v{version}"), INVALID_CONFIG),
                ("bad/name".to_owned(), INVALID_TOPIC_EXCEPTION),
            ]
        );
        // Persisted as the HTTP create would: the registry has it, with
        // its partitions and its override; no refused topic exists.
        let made = s.broker.registry().require(&good).unwrap();
        assert_eq!(made.partitions.get(), 3);
        assert_eq!(
            made.overrides.get("retention.ms").map(String::as_str),
            Some("3600000")
        );
        for refused in &answer.topics[1..] {
            assert!(s.broker.registry().get(refused.name.0.as_str()).is_none());
            assert!(refused.error_message.is_some());
        }
        if version >= 5 {
            let t = &answer.topics[0];
            assert_eq!((t.num_partitions, t.replication_factor), (3, 1));
            let configs = t.configs.as_ref().unwrap();
            let retention = configs
                .iter()
                .find(|e| e.name.as_str() == "retention.ms")
                .unwrap();
            assert_eq!(retention.value.as_deref(), Some("3600000"));
            assert_eq!(retention.config_source, 1);
            let policy = configs
                .iter()
                .find(|e| e.name.as_str() == "cleanup.policy")
                .unwrap();
            assert_eq!(
                (policy.value.as_deref(), policy.config_source),
                (Some("delete"), 5)
            );
        }
        // A second create of the same name is refused, the first kept.
        let again = create(&mut c, version, false, vec![topic(&good, 1, 1, &[])]).await;
        assert_eq!(codes(&again), [(good.clone(), TOPIC_ALREADY_EXISTS)]);
        assert_eq!(
            s.broker.registry().require(&good).unwrap().partitions.get(),
            3
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_validate_only_checks_and_creates_nothing() {
    let s = server().await;
    let mut c = connect(&s).await;
    let answer = create(
        &mut c,
        7,
        true,
        vec![
            topic("dry", -1, -1, &[("cleanup.policy", "compact")]),
            topic("dry-rf", 1, 2, &[]),
        ],
    )
    .await;
    assert_eq!(
        codes(&answer),
        [
            ("dry".to_owned(), NONE),
            ("dry-rf".to_owned(), INVALID_REPLICATION_FACTOR)
        ]
    );
    // −1 partitions is the broker's default (2 in these tests).
    assert_eq!(answer.topics[0].num_partitions, 2);
    assert!(s.broker.registry().get("dry").is_none());
    // An existing topic fails validation as it would fail the create.
    create(&mut c, 2, false, vec![topic("wet", 1, 1, &[])]).await;
    let answer = create(&mut c, 2, true, vec![topic("wet", 1, 1, &[])]).await;
    assert_eq!(codes(&answer), [("wet".to_owned(), TOPIC_ALREADY_EXISTS)]);
    // A manual replica assignment names this broker (0), once a
    // partition; anything else is INVALID_REPLICA_ASSIGNMENT, and makes
    // nothing, also under validate_only.
    let on = |partition: i32, brokers: &[i32]| {
        create_topics_request::CreatableReplicaAssignment::default()
            .with_partition_index(partition)
            .with_broker_ids(brokers.iter().map(|b| BrokerId(*b)).collect())
    };
    for (assignment, code) in [
        (vec![on(0, &[])], INVALID_REPLICA_ASSIGNMENT),
        (vec![on(0, &[1])], INVALID_REPLICA_ASSIGNMENT),
        (vec![on(0, &[0]), on(2, &[0])], INVALID_REPLICA_ASSIGNMENT),
        (vec![on(1, &[0]), on(0, &[0])], NONE),
    ] {
        for validate_only in [true, false] {
            let mut assigned = topic("assigned", -1, -1, &[]);
            assigned.assignments = assignment.clone();
            let answer = create(&mut c, 7, validate_only, vec![assigned]).await;
            assert_eq!(codes(&answer), [("assigned".to_owned(), code)]);
        }
    }
    let made = s
        .broker
        .registry()
        .get("assigned")
        .expect("the last one made it");
    assert_eq!(made.partitions.get(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_have_ids_that_metadata_answers_and_looks_up() {
    let s = server().await;
    let mut c = connect(&s).await;
    let made = create(&mut c, 7, false, vec![topic("with-id", 2, 1, &[])]).await;
    let id = made.topics[0].topic_id;
    assert!(!id.is_nil());
    assert_eq!(s.broker.registry().get("with-id").unwrap().id, id);
    // Validation only makes no topic, so no id.
    let checked = create(&mut c, 7, true, vec![topic("not-made", 1, 1, &[])]).await;
    assert!(checked.topics[0].topic_id.is_nil());

    let by = |name: Option<&str>, id: uuid::Uuid| {
        metadata_request::MetadataRequestTopic::default()
            .with_name(name.map(super::name))
            .with_topic_id(id)
    };
    let unknown = uuid::Uuid::from_u128(42);
    let request = MetadataRequest::default().with_topics(Some(vec![
        by(Some("with-id"), uuid::Uuid::nil()),
        by(None, id),
        by(None, unknown),
    ]));
    let answer: MetadataResponse = call(&mut c, ApiKey::Metadata, 12, &request).await;
    let got: Vec<_> = answer
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()),
                t.topic_id,
                t.error_code,
                t.partitions.len(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (Some("with-id".to_owned()), id, NONE, 2),
            (Some("with-id".to_owned()), id, NONE, 2),
            (None, unknown, UNKNOWN_TOPIC_ID, 0),
        ]
    );
    // Every topic listed carries its id too.
    let all: MetadataResponse = call(
        &mut c,
        ApiKey::Metadata,
        10,
        &MetadataRequest::default().with_topics(None),
    )
    .await;
    assert!(all.topics.iter().all(|t| !t.topic_id.is_nil()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_topics_deletes_and_refuses_per_topic() {
    let s = server().await;
    let mut c = connect(&s).await;
    create(
        &mut c,
        7,
        false,
        vec![topic("gone-1", 1, 1, &[]), topic("gone-6", 1, 1, &[])],
    )
    .await;

    let request = DeleteTopicsRequest::default()
        .with_topic_names(vec![name("gone-1"), name("never")])
        .with_timeout_ms(5000);
    let answer: DeleteTopicsResponse = call(&mut c, ApiKey::DeleteTopics, 1, &request).await;
    let got: Vec<_> = answer
        .responses
        .iter()
        .map(|r| (r.name.clone().unwrap().0.to_string(), r.error_code))
        .collect();
    assert_eq!(
        got,
        [
            ("gone-1".to_owned(), NONE),
            ("never".to_owned(), UNKNOWN_TOPIC_OR_PARTITION)
        ]
    );
    assert!(s.broker.registry().get("gone-1").is_none());

    // v6 by name, or by id alone (KIP-516): an id that names no topic is
    // UNKNOWN_TOPIC_ID.
    create(&mut c, 7, false, vec![topic("gone-id", 1, 1, &[])]).await;
    let id = s.broker.registry().get("gone-id").unwrap().id;
    let request = DeleteTopicsRequest::default()
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(name("gone-6"))),
            DeleteTopicState::default().with_topic_id(id),
            DeleteTopicState::default().with_topic_id(uuid::Uuid::from_u128(7)),
        ])
        .with_timeout_ms(5000);
    let answer: DeleteTopicsResponse = call(&mut c, ApiKey::DeleteTopics, 6, &request).await;
    let got: Vec<_> = answer.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(got, [NONE, NONE, UNKNOWN_TOPIC_ID]);
    assert!(answer.responses[2].error_message.is_some());
    assert!(s.broker.registry().get("gone-6").is_none());
    assert!(s.broker.registry().get("gone-id").is_none());
    // A deleted name can be created again, empty.
    let again = create(&mut c, 7, false, vec![topic("gone-6", 1, 1, &[])]).await;
    assert_eq!(codes(&again), [("gone-6".to_owned(), NONE)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_admin_token_set_mutating_admin_apis_are_refused() {
    let s = server_configured(KafkaConfig {
        admin_token: Some(AdminToken(TOKEN.into())),
        ..KafkaConfig::default()
    })
    .await;
    let mut c = connect(&s).await;
    let answer = create(&mut c, 7, false, vec![topic("locked", 1, 1, &[])]).await;
    assert_eq!(
        codes(&answer),
        [("locked".to_owned(), TOPIC_AUTHORIZATION_FAILED)]
    );
    assert!(s.broker.registry().get("locked").is_none());
    // Also validate_only: it reveals which topics exist.
    let answer = create(&mut c, 2, true, vec![topic("locked", 1, 1, &[])]).await;
    assert_eq!(
        codes(&answer),
        [("locked".to_owned(), TOPIC_AUTHORIZATION_FAILED)]
    );

    s.broker
        .create_topic("kept", 1, Default::default())
        .unwrap();
    let request = DeleteTopicsRequest::default()
        .with_topic_names(vec![name("kept")])
        .with_timeout_ms(5000);
    let answer: DeleteTopicsResponse = call(&mut c, ApiKey::DeleteTopics, 1, &request).await;
    assert_eq!(answer.responses[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(s.broker.registry().get("kept").is_some());

    produce_five(&mut c, "kept").await;
    for version in [0, 2] {
        let answer = delete_records(&mut c, version, &[("kept", &[(0, -1)])]).await;
        assert_eq!(
            low_watermarks(&answer),
            [("kept".to_owned(), 0, -1, TOPIC_AUTHORIZATION_FAILED)]
        );
    }
    let part = s.broker.partition("kept", 0).unwrap();
    assert_eq!(part.offsets(), (0, 5), "nothing deleted");
    // OffsetDelete is an operator's call on a group, as HTTP's group
    // delete: GROUP_AUTHORIZATION_FAILED, the offset kept.
    let commit = tidelog_broker::groups::OffsetCommit {
        topic: "kept".into(),
        partition: 0,
        value: tidelog_broker::groups::CommitValue {
            offset: 3,
            metadata: String::new(),
            ..Default::default()
        },
    };
    s.broker
        .commit_offsets(
            "ops",
            vec![commit],
            tidelog_broker::coordinator::CommitOrigin::Stateless,
        )
        .unwrap();
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("ops")))
        .with_topics(vec![OffsetDeleteRequestTopic::default()
            .with_name(name("kept"))
            .with_partitions(vec![OffsetDeleteRequestPartition::default()])]);
    let answer: OffsetDeleteResponse = call(&mut c, ApiKey::OffsetDelete, 0, &request).await;
    assert_eq!(answer.error_code, 30, "GROUP_AUTHORIZATION_FAILED");
    assert_eq!(s.broker.committed_offsets("ops", None).unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_count_in_an_admin_request_closes_its_connection() {
    let s = server().await;
    for (key, version) in [
        (ApiKey::CreateTopics, 2),
        (ApiKey::CreateTopics, 7),
        (ApiKey::DeleteTopics, 1),
        (ApiKey::DeleteTopics, 6),
        (ApiKey::DescribeConfigs, 1),
        (ApiKey::DescribeConfigs, 4),
        (ApiKey::AlterConfigs, 0),
        (ApiKey::AlterConfigs, 2),
        (ApiKey::IncrementalAlterConfigs, 0),
        (ApiKey::IncrementalAlterConfigs, 1),
        (ApiKey::DeleteRecords, 0),
        (ApiKey::DeleteRecords, 2),
    ] {
        let mut c = connect(&s).await;
        // Each body's first field is its topics or resources array: claim
        // four billion of them in the bytes of a few.
        let mut frame = bytes::BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(1)
            .encode(&mut frame, key.request_header_version(version))
            .unwrap();
        let flexible = key.request_header_version(version) >= 2;
        if flexible {
            frame.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        } else {
            frame.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
        }
        frame.extend_from_slice(&[0; 8]);
        send_frame(&mut c, &frame).await;
        assert!(closed(&mut c).await, "{key:?} v{version}");
    }
    // The server still serves.
    let mut c = connect(&s).await;
    let answer = create(&mut c, 2, false, vec![topic("after", 1, 1, &[])]).await;
    assert_eq!(codes(&answer), [("after".to_owned(), NONE)]);
}

pub(crate) fn describe_request(
    resources: &[(i8, &str, Option<&[&str]>)],
) -> DescribeConfigsRequest {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    DescribeConfigsRequest::default()
        .with_resources(
            resources
                .iter()
                .map(|(t, n, keys)| {
                    DescribeConfigsResource::default()
                        .with_resource_type(*t)
                        .with_resource_name(StrBytes::from_string((*n).to_owned()))
                        .with_configuration_keys(keys.map(|k| {
                            k.iter()
                                .map(|k| StrBytes::from_string((*k).to_owned()))
                                .collect()
                        }))
                })
                .collect(),
        )
        .with_include_synonyms(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_answers_sources_synonyms_and_the_broker() {
    let s = server().await;
    let mut c = connect(&s).await;
    create(
        &mut c,
        7,
        false,
        vec![topic("described", 1, 1, &[("retention.ms", "60000")])],
    )
    .await;
    for version in [1, 4] {
        let request = describe_request(&[
            (2, "described", None),
            (2, "described", Some(&["retention.ms", "no.such"])),
            (4, "0", None),
            (2, "missing", None),
            (4, "7", None),
        ]);
        let answer: DescribeConfigsResponse =
            call(&mut c, ApiKey::DescribeConfigs, version, &request).await;
        let codes: Vec<_> = answer.results.iter().map(|r| r.error_code).collect();
        assert_eq!(
            codes,
            [
                NONE,
                NONE,
                NONE,
                UNKNOWN_TOPIC_OR_PARTITION,
                INVALID_REQUEST
            ]
        );
        let all = &answer.results[0].configs;
        // Every known config, as HTTP's configs list has them.
        assert_eq!(all.len(), tidelog_broker::topic_config::SPECS.len());
        let retention = all
            .iter()
            .find(|e| e.name.as_str() == "retention.ms")
            .unwrap();
        assert_eq!(retention.value.as_deref(), Some("60000"));
        assert_eq!(retention.config_source, 1);
        assert!(!retention.read_only);
        let synonyms: Vec<_> = retention
            .synonyms
            .iter()
            .map(|s| (s.value.as_deref().unwrap().to_owned(), s.source))
            .collect();
        assert_eq!(
            synonyms,
            [("60000".to_owned(), 1), ("604800000".to_owned(), 5)]
        );
        let policy = all
            .iter()
            .find(|e| e.name.as_str() == "cleanup.policy")
            .unwrap();
        assert_eq!(
            (policy.value.as_deref(), policy.config_source),
            (Some("delete"), 5)
        );
        // The type from v3: retention.ms a LONG (5), cleanup.policy a LIST (7).
        let types = (retention.config_type, policy.config_type);
        assert_eq!(types, if version >= 3 { (5, 7) } else { (0, 0) });
        // Filtered: the unknown key is left out.
        let names: Vec<_> = answer.results[1]
            .configs
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(names, ["retention.ms"]);
        let broker: Vec<_> = answer.results[2]
            .configs
            .iter()
            .map(|e| {
                (
                    e.name.as_str(),
                    e.value.as_deref().unwrap(),
                    e.read_only,
                    e.config_source,
                )
            })
            .collect();
        assert!(
            broker.contains(&("num.partitions", "2", true, 4)),
            "{broker:?}"
        );
        assert!(broker.contains(&("auto.create.topics.enable", "true", true, 4)));
    }
}

fn incremental(
    topic: &str,
    ops: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default()
        .with_resources(vec![alter_resource(2, topic, ops)])
        .with_validate_only(validate_only)
}

fn overrides(s: &super::Server, topic: &str) -> Vec<(String, String)> {
    s.broker
        .registry()
        .require(topic)
        .unwrap()
        .overrides
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Two SUBTRACTs of `cleanup.policy` at once on two connections, from
/// `compact,delete` (an empty topic, so the policy may change): applied
/// one after the other, the second would leave an empty list, which is
/// refused. So exactly one succeeds and the policy is what it left. When
/// each computed its list from the topic as it was before either applied
/// (a read-modify-write outside the registry's lock), both succeeded and
/// the later one's list lost the earlier one's change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_list_edits_of_one_topic_lose_neither() {
    let s = server().await;
    let mut a = connect(&s).await;
    let mut b = connect(&s).await;
    create(&mut a, 7, false, vec![topic("race", 1, 1, &[])]).await;
    for round in 0..20 {
        let set = [(
            "cleanup.policy".to_owned(),
            Some("compact,delete".to_owned()),
        )];
        s.broker.alter_topic("race", &set).unwrap();
        let minus = |item: &str| incremental("race", &[("cleanup.policy", 3, Some(item))], false);
        // Both requests are on their way before either answer is read.
        send_frame(
            &mut a,
            &request_frame(ApiKey::IncrementalAlterConfigs, 1, 1, &minus("compact")),
        )
        .await;
        send_frame(
            &mut b,
            &request_frame(ApiKey::IncrementalAlterConfigs, 1, 2, &minus("delete")),
        )
        .await;
        let mut codes = Vec::new();
        for c in [&mut a, &mut b] {
            let mut answer = read_frame(c).await.expect("an answer");
            ResponseHeader::decode(&mut answer, 1).unwrap();
            let answer = IncrementalAlterConfigsResponse::decode(&mut answer, 1).unwrap();
            codes.push(answer.responses[0].error_code);
        }
        let policy =
            s.broker.registry().require("race").unwrap().overrides["cleanup.policy"].clone();
        match codes[..] {
            [NONE, c] if c != NONE => assert_eq!(policy, "delete", "round {round}"),
            [c, NONE] if c != NONE => assert_eq!(policy, "compact", "round {round}"),
            _ => panic!(
                "round {round}: answers {codes:?} with the policy {policy:?}: one edit was lost"
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_alter_configs_sets_deletes_and_edits_the_list() {
    let s = server().await;
    let mut c = connect(&s).await;
    create(
        &mut c,
        7,
        false,
        vec![topic("inc", 1, 1, &[("retention.ms", "60000")])],
    )
    .await;
    for version in [0, 1] {
        // SET and DELETE together, all or nothing.
        let request = incremental(
            "inc",
            &[
                ("retention.bytes", 0, Some("1000")),
                ("retention.ms", 1, None),
            ],
            false,
        );
        let answer: IncrementalAlterConfigsResponse =
            call(&mut c, ApiKey::IncrementalAlterConfigs, version, &request).await;
        assert_eq!(answer.responses[0].error_code, NONE);
        assert_eq!(overrides(&s, "inc"), pairs(&[("retention.bytes", "1000")]));
        // A bad value refuses the whole request: nothing changes.
        let request = incremental(
            "inc",
            &[
                ("retention.bytes", 1, None),
                ("segment.ms", 0, Some("never")),
            ],
            false,
        );
        let answer: IncrementalAlterConfigsResponse =
            call(&mut c, ApiKey::IncrementalAlterConfigs, version, &request).await;
        assert_eq!(answer.responses[0].error_code, INVALID_CONFIG);
        assert!(answer.responses[0].error_message.is_some());
        assert_eq!(overrides(&s, "inc"), pairs(&[("retention.bytes", "1000")]));
        // APPEND on a config that is not a list.
        let request = incremental("inc", &[("retention.ms", 2, Some("5"))], false);
        let answer: IncrementalAlterConfigsResponse =
            call(&mut c, ApiKey::IncrementalAlterConfigs, version, &request).await;
        assert_eq!(answer.responses[0].error_code, INVALID_REQUEST);
        // validate_only checks and changes nothing.
        let request = incremental("inc", &[("retention.ms", 0, Some("5"))], true);
        let answer: IncrementalAlterConfigsResponse =
            call(&mut c, ApiKey::IncrementalAlterConfigs, version, &request).await;
        assert_eq!(answer.responses[0].error_code, NONE);
        assert_eq!(overrides(&s, "inc"), pairs(&[("retention.bytes", "1000")]));
        let request = incremental("inc", &[("retention.ms", 0, Some("x"))], true);
        let answer: IncrementalAlterConfigsResponse =
            call(&mut c, ApiKey::IncrementalAlterConfigs, version, &request).await;
        assert_eq!(answer.responses[0].error_code, INVALID_CONFIG);
        // Unknown topic.
        let request = incremental("absent", &[("retention.ms", 0, Some("5"))], false);
        let answer: IncrementalAlterConfigsResponse =
            call(&mut c, ApiKey::IncrementalAlterConfigs, version, &request).await;
        assert_eq!(answer.responses[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    }
    // APPEND and SUBTRACT on cleanup.policy, an empty topic (a policy
    // change on one with records is refused, as over HTTP).
    create(&mut c, 7, false, vec![topic("listed", 1, 1, &[])]).await;
    let request = incremental("listed", &[("cleanup.policy", 2, Some("compact"))], false);
    let answer: IncrementalAlterConfigsResponse =
        call(&mut c, ApiKey::IncrementalAlterConfigs, 1, &request).await;
    assert_eq!(answer.responses[0].error_code, NONE);
    assert_eq!(
        overrides(&s, "listed"),
        pairs(&[("cleanup.policy", "compact,delete")])
    );
    let request = incremental("listed", &[("cleanup.policy", 3, Some("delete"))], false);
    let answer: IncrementalAlterConfigsResponse =
        call(&mut c, ApiKey::IncrementalAlterConfigs, 1, &request).await;
    assert_eq!(answer.responses[0].error_code, NONE);
    assert_eq!(
        overrides(&s, "listed"),
        pairs(&[("cleanup.policy", "compact")])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_configs_replaces_a_topics_configs() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let s = server().await;
    let mut c = connect(&s).await;
    create(
        &mut c,
        7,
        false,
        vec![topic(
            "legacy",
            1,
            1,
            &[("retention.ms", "60000"), ("segment.ms", "3600000")],
        )],
    )
    .await;
    for (version, value) in [(0, "1000"), (2, "2000")] {
        let request = AlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("legacy"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.bytes"))
                    .with_value(Some(StrBytes::from_string(value.to_owned())))]),
            // The broker's dynamic configs are replaced too; one Kafka
            // reads only at start-up is refused.
            AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str("0"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("num.io.threads"))
                    .with_value(Some(StrBytes::from_string(value.to_owned())))]),
            AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str(""))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("num.partitions"))
                    .with_value(Some(StrBytes::from_static_str("3")))]),
        ]);
        let answer: AlterConfigsResponse =
            call(&mut c, ApiKey::AlterConfigs, version, &request).await;
        let codes: Vec<_> = answer.responses.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, [NONE, NONE, INVALID_REQUEST]);
        // Replaced: the overrides not named are gone.
        assert_eq!(
            overrides(&s, "legacy"),
            pairs(&[("retention.bytes", value)])
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_cluster_names_the_one_broker() {
    let s = server().await;
    let mut c = connect(&s).await;
    for version in [0, 1] {
        let request = DescribeClusterRequest::default().with_endpoint_type(1);
        let answer: DescribeClusterResponse =
            call(&mut c, ApiKey::DescribeCluster, version, &request).await;
        assert_eq!(answer.error_code, NONE);
        assert_eq!(answer.cluster_id.as_str(), s.broker.cluster_id());
        assert_eq!(answer.controller_id.0, 0);
        let brokers: Vec<_> = answer
            .brokers
            .iter()
            .map(|b| (b.broker_id.0, b.host.to_string(), b.port))
            .collect();
        assert_eq!(
            brokers,
            [(0, "127.0.0.1".to_owned(), i32::from(s.addr.port()))]
        );
    }
    let request = DescribeClusterRequest::default().with_endpoint_type(2);
    let answer: DescribeClusterResponse = call(&mut c, ApiKey::DescribeCluster, 1, &request).await;
    assert_eq!(answer.error_code, 115);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_admin_token_set_config_alters_are_refused_and_describes_answered() {
    let s = server_configured(KafkaConfig {
        admin_token: Some(AdminToken(TOKEN.into())),
        ..KafkaConfig::default()
    })
    .await;
    s.broker
        .create_topic("fixed", 1, Default::default())
        .unwrap();
    let mut c = connect(&s).await;
    let request = incremental("fixed", &[("retention.ms", 0, Some("5"))], false);
    let answer: IncrementalAlterConfigsResponse =
        call(&mut c, ApiKey::IncrementalAlterConfigs, 1, &request).await;
    assert_eq!(answer.responses[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(overrides(&s, "fixed").is_empty());
    let mut request = incremental("0", &[], false);
    request.resources[0].resource_type = 4;
    let answer: IncrementalAlterConfigsResponse =
        call(&mut c, ApiKey::IncrementalAlterConfigs, 1, &request).await;
    assert_eq!(answer.responses[0].error_code, CLUSTER_AUTHORIZATION_FAILED);
    // A group's configs are the group's: GROUP_AUTHORIZATION_FAILED, and
    // nothing kept.
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![alter_resource(
        32,
        "orders",
        &[("consumer.session.timeout.ms", 0, Some("50000"))],
    )]);
    let answer: IncrementalAlterConfigsResponse =
        call(&mut c, ApiKey::IncrementalAlterConfigs, 1, &request).await;
    const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    assert_eq!(answer.responses[0].error_code, GROUP_AUTHORIZATION_FAILED);
    let answer: DescribeConfigsResponse = call(
        &mut c,
        ApiKey::DescribeConfigs,
        4,
        &describe_request(&[(32, "orders", None)]),
    )
    .await;
    let session = answer.results[0]
        .configs
        .iter()
        .find(|e| e.name.as_str() == "consumer.session.timeout.ms")
        .unwrap();
    assert_eq!(session.config_source, 5, "the broker's, not set");
    let answer: DescribeConfigsResponse = call(
        &mut c,
        ApiKey::DescribeConfigs,
        4,
        &describe_request(&[(2, "fixed", None)]),
    )
    .await;
    assert_eq!(answer.results[0].error_code, NONE);
}

async fn handshake(c: &mut TcpStream, version: i16, mechanism: &str) -> SaslHandshakeResponse {
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.to_owned()));
    call(c, ApiKey::SaslHandshake, version, &request).await
}

async fn authenticate(c: &mut TcpStream, version: i16, plain: &[u8]) -> SaslAuthenticateResponse {
    let request =
        SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::copy_from_slice(plain));
    call(c, ApiKey::SaslAuthenticate, version, &request).await
}

fn plain(password: &str) -> Vec<u8> {
    format!("\0admin\0{password}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sasl_plain_login_with_the_token_opens_the_admin_apis_to_its_connection() {
    let s = server_configured(KafkaConfig {
        admin_token: Some(AdminToken(TOKEN.into())),
        ..KafkaConfig::default()
    })
    .await;
    for (handshake_version, auth_version) in [(1, 0), (1, 2)] {
        let mut c = connect(&s).await;
        // Authenticate before a handshake is out of order.
        let answer = authenticate(&mut c, auth_version, &plain(TOKEN)).await;
        assert_eq!(answer.error_code, ILLEGAL_SASL_STATE);
        let answer = handshake(&mut c, handshake_version, "GSSAPI").await;
        assert_eq!(answer.error_code, UNSUPPORTED_SASL_MECHANISM);
        let offered = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"].map(StrBytes::from_static_str);
        assert_eq!(answer.mechanisms, offered);
        // A wrong password, an oversized or a malformed message fail, and
        // the connection closes after the answer.
        let oversized = plain(&"x".repeat(5000));
        for bad in [
            plain("wrong"),
            oversized,
            b"admin-no-nul".to_vec(),
            plain(""),
        ] {
            let mut failing = connect(&s).await;
            assert_eq!(
                handshake(&mut failing, handshake_version, "PLAIN")
                    .await
                    .error_code,
                NONE
            );
            let answer = authenticate(&mut failing, auth_version, &bad).await;
            assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
            assert!(closed(&mut failing).await);
        }
        let topic_name = format!("sasl-{auth_version}");
        let refused = create(&mut c, 7, false, vec![topic(&topic_name, 1, 1, &[])]).await;
        assert_eq!(refused.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
        // The token as password opens the admin APIs to this connection.
        assert_eq!(
            handshake(&mut c, handshake_version, "PLAIN")
                .await
                .error_code,
            NONE
        );
        let answer = authenticate(&mut c, auth_version, &plain(TOKEN)).await;
        assert_eq!(answer.error_code, NONE);
        let made = create(&mut c, 7, false, vec![topic(&topic_name, 1, 1, &[])]).await;
        assert_eq!(made.topics[0].error_code, NONE);
        assert!(s.broker.registry().get(&topic_name).is_some());
        // Only to this one.
        let mut other = connect(&s).await;
        let request = DeleteTopicsRequest::default()
            .with_topic_names(vec![name(&topic_name)])
            .with_timeout_ms(5000);
        let answer: DeleteTopicsResponse =
            call(&mut other, ApiKey::DeleteTopics, 5, &request).await;
        assert_eq!(answer.responses[0].error_code, TOPIC_AUTHORIZATION_FAILED);
        let answer: DeleteTopicsResponse = call(&mut c, ApiKey::DeleteTopics, 5, &request).await;
        assert_eq!(answer.responses[0].error_code, NONE);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v0_handshake_takes_the_token_as_a_bare_frame() {
    let s = server_configured(KafkaConfig {
        admin_token: Some(AdminToken(TOKEN.into())),
        ..KafkaConfig::default()
    })
    .await;
    let mut c = connect(&s).await;
    assert_eq!(handshake(&mut c, 0, "PLAIN").await.error_code, NONE);
    send_frame(&mut c, &plain(TOKEN)).await;
    assert_eq!(read_frame(&mut c).await.unwrap().len(), 0);
    let made = create(&mut c, 2, false, vec![topic("bare", 1, 1, &[])]).await;
    assert_eq!(made.topics[0].error_code, NONE);
    // A wrong bare token closes the connection; the server goes on.
    let mut c = connect(&s).await;
    assert_eq!(handshake(&mut c, 0, "PLAIN").await.error_code, NONE);
    send_frame(&mut c, &plain("wrong")).await;
    assert!(closed(&mut c).await);
    let mut c = connect(&s).await;
    let refused = create(&mut c, 2, false, vec![topic("bare2", 1, 1, &[])]).await;
    assert_eq!(refused.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_admin_token_admin_is_open_and_plain_needs_a_user() {
    let s = server().await;
    let mut c = connect(&s).await;
    let answer = handshake(&mut c, 1, "PLAIN").await;
    assert_eq!(answer.error_code, NONE);
    assert_eq!(answer.mechanisms.len(), 3);
    // No user exists, and there is no token to match.
    let answer = authenticate(&mut c, 1, &plain("anything")).await;
    assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
    assert!(closed(&mut c).await);
    let mut c = connect(&s).await;
    let made = create(&mut c, 7, false, vec![topic("open", 1, 1, &[])]).await;
    assert_eq!(made.topics[0].error_code, NONE);
    // A lying length in a SaslAuthenticate closes its connection.
    let mut frame = request_frame(
        ApiKey::SaslAuthenticate,
        0,
        1,
        &SaslAuthenticateRequest::default(),
    );
    let len = frame.len();
    frame[len - 4..].copy_from_slice(&0x7fff_ffffi32.to_be_bytes());
    send_frame(&mut c, &frame).await;
    assert!(closed(&mut c).await);
}

async fn delete_records(
    c: &mut TcpStream,
    version: i16,
    topics: &[(&str, &[(i32, i64)])],
) -> DeleteRecordsResponse {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    let request = DeleteRecordsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|(t, parts)| {
                    DeleteRecordsTopic::default()
                        .with_name(name(t))
                        .with_partitions(
                            parts
                                .iter()
                                .map(|&(p, offset)| {
                                    DeleteRecordsPartition::default()
                                        .with_partition_index(p)
                                        .with_offset(offset)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
        .with_timeout_ms(5000);
    call(c, ApiKey::DeleteRecords, version, &request).await
}

/// (topic, partition, low watermark, error code) of every answer.
fn low_watermarks(answer: &DeleteRecordsResponse) -> Vec<(String, i32, i64, i16)> {
    answer
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.low_watermark,
                    p.error_code,
                )
            })
        })
        .collect()
}

/// Five records into partition 0 of `topic`, fetched back
/// so the dispatcher has indexed them (the high watermark is 5).
async fn produce_five(c: &mut TcpStream, topic: &str) {
    let five: Vec<_> = (0..5)
        .map(|i| record(Some(b"k"), Some(b"v"), 1_000 + i))
        .collect();
    let answer: ProduceResponse = call(
        c,
        ApiKey::Produce,
        9,
        &produce_request(topic, 0, 1, batch(&five)),
    )
    .await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, NONE);
    fetch_n(c, 12, topic, 0, 0, 5).await;
}

/// The beginning of partition 0, past 0, as Fetch (from 0:
/// OFFSET_OUT_OF_RANGE with the log start) and ListOffsets -2 (the
/// earliest) answer it.
async fn beginning_over_kafka(c: &mut TcpStream, topic: &str) -> (i64, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let answer: FetchResponse = call(c, ApiKey::Fetch, 12, &fetch_request(topic, 0, 0, 0)).await;
    let p = &answer.responses[0].partitions[0];
    assert_eq!(p.error_code, OFFSET_OUT_OF_RANGE, "a fetch from 0");
    let from_fetch = p.log_start_offset;
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-2)])]);
    let answer: ListOffsetsResponse = call(c, ApiKey::ListOffsets, 7, &request).await;
    (from_fetch, answer.topics[0].partitions[0].offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_beginning_and_refuses_per_partition() {
    let s = server().await;
    let mut c = connect(&s).await;
    s.broker
        .create_topic(
            "kept-compact",
            1,
            [("cleanup.policy".to_string(), "compact".to_string())].into(),
        )
        .unwrap();
    for (version, topic) in [(0, "dr-v0"), (2, "dr-v2")] {
        s.broker.create_topic(topic, 1, Default::default()).unwrap();
        produce_five(&mut c, topic).await;
        let answer = delete_records(
            &mut c,
            version,
            &[
                (topic, &[(0, 2), (0, 6), (0, -5), (9, 0), (0, 1)]),
                ("nope", &[(0, 0)]),
                ("kept-compact", &[(0, 0)]),
                ("__consumer_offsets", &[(0, 0)]),
            ],
        )
        .await;
        assert_eq!(
            low_watermarks(&answer),
            [
                (topic.to_owned(), 0, 2, NONE),
                (topic.to_owned(), 0, -1, OFFSET_OUT_OF_RANGE),
                (topic.to_owned(), 0, -1, OFFSET_OUT_OF_RANGE),
                (topic.to_owned(), 9, -1, UNKNOWN_TOPIC_OR_PARTITION),
                // Backwards: nothing moves, the low watermark is answered.
                (topic.to_owned(), 0, 2, NONE),
                ("nope".to_owned(), 0, -1, UNKNOWN_TOPIC_OR_PARTITION),
                ("kept-compact".to_owned(), 0, -1, POLICY_VIOLATION),
                (
                    "__consumer_offsets".to_owned(),
                    0,
                    -1,
                    INVALID_TOPIC_EXCEPTION
                ),
            ],
            "v{version}"
        );
        assert_eq!(beginning_over_kafka(&mut c, topic).await, (2, 2));
        let got = fetch_n(&mut c, 12, topic, 0, 2, 3).await;
        assert_eq!(
            got[0].timestamp_ms,
            Some(1_002),
            "the record at 2 comes first"
        );
        // -1: up to the high watermark.
        let answer = delete_records(&mut c, version, &[(topic, &[(0, -1)])]).await;
        assert_eq!(low_watermarks(&answer), [(topic.to_owned(), 0, 5, NONE)]);
        assert_eq!(beginning_over_kafka(&mut c, topic).await, (5, 5));
        let part = s.broker.partition(topic, 0).unwrap();
        assert_eq!(part.offsets(), (5, 5));
    }
}

/// While recovery runs every admin API answers each resource
/// LEADER_NOT_AVAILABLE (retriable; KAFKA.md "Not ready"): clients retry
/// rather than give up, and nothing is created or changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_the_broker_is_ready_admin_calls_answer_a_retriable_code() {
    use kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
    const LEADER_NOT_AVAILABLE: i16 = 5;
    let addr = super::groups::not_ready_server().await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    let created = create(&mut c, 7, false, vec![topic("t", 1, 1, &[])]).await;
    assert_eq!(codes(&created), [("t".to_owned(), LEADER_NOT_AVAILABLE)]);
    let request = DeleteTopicsRequest::default()
        .with_topic_names(vec![name("t")])
        .with_timeout_ms(5000);
    let deleted: DeleteTopicsResponse = call(&mut c, ApiKey::DeleteTopics, 5, &request).await;
    assert_eq!(deleted.responses[0].error_code, LEADER_NOT_AVAILABLE);
    let described: DescribeConfigsResponse = call(
        &mut c,
        ApiKey::DescribeConfigs,
        4,
        &describe_request(&[(2, "t", None)]),
    )
    .await;
    assert_eq!(described.results[0].error_code, LEADER_NOT_AVAILABLE);
    let request = incremental("t", &[("retention.ms", 0, Some("5"))], false);
    let altered: IncrementalAlterConfigsResponse =
        call(&mut c, ApiKey::IncrementalAlterConfigs, 1, &request).await;
    assert_eq!(altered.responses[0].error_code, LEADER_NOT_AVAILABLE);
    let request =
        AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("t"))]);
    let altered: AlterConfigsResponse = call(&mut c, ApiKey::AlterConfigs, 2, &request).await;
    assert_eq!(altered.responses[0].error_code, LEADER_NOT_AVAILABLE);
    let request = DescribeClusterRequest::default();
    let cluster: DescribeClusterResponse = call(&mut c, ApiKey::DescribeCluster, 1, &request).await;
    assert_eq!(cluster.error_code, LEADER_NOT_AVAILABLE);
    let answer = delete_records(&mut c, 2, &[("t", &[(0, 1)])]).await;
    assert_eq!(
        low_watermarks(&answer),
        [("t".to_owned(), 0, -1, LEADER_NOT_AVAILABLE)]
    );
}

/// One IncrementalAlterConfigs resource: `(resource type, name)` and its
/// `(config, operation, value)`s.
fn alter_resource(
    resource_type: i8,
    resource: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(resource.to_owned()))
        .with_configs(
            ops.iter()
                .map(|(n, op, v)| {
                    AlterableConfig::default()
                        .with_name(StrBytes::from_string((*n).to_owned()))
                        .with_config_operation(*op)
                        .with_value(v.map(|v| StrBytes::from_string(v.to_owned())))
                })
                .collect(),
        )
}

/// `(value, source)` of config `name` in a described resource, and its
/// synonyms' sources.
fn described(
    result: &kafka_protocol::messages::describe_configs_response::DescribeConfigsResult,
    name: &str,
) -> (String, i8, Vec<i8>) {
    let entry = result
        .configs
        .iter()
        .find(|e| e.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} is not described"));
    (
        entry.value.as_deref().unwrap_or_default().to_owned(),
        entry.config_source,
        entry.synonyms.iter().map(|s| s.source).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_and_group_configs_are_altered_described_and_defaults_reach_topics() {
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;
    const SUBTRACT: i8 = 3;
    let s = server().await;
    let mut c = connect(&s).await;
    create(
        &mut c,
        7,
        false,
        vec![
            topic("follows", 1, 1, &[]),
            topic("own", 1, 1, &[("retention.ms", "60000")]),
        ],
    )
    .await;
    // librdkafka's 0081 sets these: a Kerberos config (accepted without
    // effect), a thread pool, a group's session timeout.
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        alter_resource(
            4,
            "0",
            &[
                ("sasl.kerberos.min.time.before.relogin", SET, Some("58000")),
                ("log.retention.ms", SET, Some("3600000")),
            ],
        ),
        alter_resource(4, "", &[("background.threads", SET, Some("9"))]),
        alter_resource(4, "7", &[("background.threads", SET, Some("9"))]),
        alter_resource(
            32,
            "orders",
            &[("consumer.session.timeout.ms", SET, Some("50000"))],
        ),
        alter_resource(
            32,
            "other",
            &[("consumer.session.timeout.ms", SET, Some("1"))],
        ),
        alter_resource(
            32,
            "third",
            &[("share.session.timeout.ms", SET, Some("50000"))],
        ),
    ]);
    let answer: IncrementalAlterConfigsResponse =
        call(&mut c, ApiKey::IncrementalAlterConfigs, 1, &request).await;
    let codes: Vec<_> = answer.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(
        codes,
        [
            NONE,
            NONE,
            INVALID_REQUEST,
            NONE,
            INVALID_CONFIG,
            INVALID_CONFIG
        ]
    );
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        alter_resource(4, "0", &[("num.partitions", SET, Some("3"))]),
        alter_resource(4, "0", &[("no.such.config", SET, Some("3"))]),
    ]);
    let answer: IncrementalAlterConfigsResponse =
        call(&mut c, ApiKey::IncrementalAlterConfigs, 1, &request).await;
    let codes: Vec<_> = answer.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [INVALID_REQUEST, INVALID_CONFIG]);

    // The topic default reaches the topic without its own value, live.
    let retention = |name: &str| s.broker.registry().get(name).unwrap().config.retention_ms;
    assert_eq!(
        (retention("follows"), retention("own")),
        (3_600_000, 60_000)
    );

    let request = describe_request(&[
        (4, "0", None),
        (4, "", None),
        (32, "orders", None),
        (2, "follows", Some(&["retention.ms"])),
        (32, "", None),
    ]);
    let answer: DescribeConfigsResponse = call(&mut c, ApiKey::DescribeConfigs, 4, &request).await;
    let codes: Vec<_> = answer.results.iter().map(|r| r.error_code).collect();
    const INVALID_GROUP_ID: i16 = 24;
    assert_eq!(codes, [NONE, NONE, NONE, NONE, INVALID_GROUP_ID]);
    let broker = &answer.results[0];
    assert_eq!(
        described(broker, "log.retention.ms"),
        ("3600000".into(), 2, vec![2, 5])
    );
    assert_eq!(
        described(broker, "background.threads"),
        ("9".into(), 3, vec![3, 5])
    );
    assert_eq!(
        described(broker, "sasl.kerberos.min.time.before.relogin").0,
        "58000"
    );
    let cluster: Vec<_> = answer.results[1]
        .configs
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(cluster, ["background.threads"]);
    let group = &answer.results[2];
    assert_eq!(
        described(group, "consumer.session.timeout.ms"),
        ("50000".into(), 8, vec![8, 5])
    );
    assert_eq!(
        described(group, "consumer.heartbeat.interval.ms"),
        ("5000".into(), 5, vec![5])
    );
    assert_eq!(
        described(&answer.results[3], "retention.ms"),
        ("3600000".into(), 2, vec![2, 5])
    );

    // APPEND and SUBTRACT of the broker's list config, while the topics
    // are empty: they follow it.
    let policy = |name: &str| {
        s.broker
            .registry()
            .get(name)
            .unwrap()
            .config
            .cleanup_policy
            .as_str()
    };
    for (op, expect) in [(APPEND, "compact,delete"), (SUBTRACT, "delete")] {
        let request =
            IncrementalAlterConfigsRequest::default().with_resources(vec![alter_resource(
                4,
                "0",
                &[("log.cleanup.policy", op, Some("compact"))],
            )]);
        let answer: IncrementalAlterConfigsResponse =
            call(&mut c, ApiKey::IncrementalAlterConfigs, 1, &request).await;
        assert_eq!(answer.responses[0].error_code, NONE);
        assert_eq!(policy("follows"), expect);
    }
    // DELETE goes back to Kafka's default.
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![alter_resource(
        4,
        "0",
        &[("log.retention.ms", DELETE, None)],
    )]);
    let answer: IncrementalAlterConfigsResponse =
        call(&mut c, ApiKey::IncrementalAlterConfigs, 1, &request).await;
    assert_eq!(answer.responses[0].error_code, NONE);
    assert_eq!(retention("follows"), 604_800_000);
}
