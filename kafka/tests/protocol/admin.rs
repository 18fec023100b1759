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
use kafka_protocol::protocol::StrBytes;
use tidelog_kafka::KafkaConfig;
use tokio::net::TcpStream;

use super::{call, closed, connect, name, request_frame, send_frame, server, server_configured};

// Kafka's error codes the tests expect.
const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_REQUEST: i16 = 42;
const INVALID_CONFIG: i16 = 40;
const UNKNOWN_TOPIC_ID: i16 = 100;
const INVALID_TOPIC_EXCEPTION: i16 = 17;

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
        let made = s.broker.registry.require(&good).unwrap();
        assert_eq!(made.partitions.get(), 3);
        assert_eq!(
            made.overrides.get("retention.ms").map(String::as_str),
            Some("3600000")
        );
        for refused in &answer.topics[1..] {
            assert!(s.broker.registry.get(refused.name.0.as_str()).is_none());
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
            s.broker.registry.require(&good).unwrap().partitions.get(),
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
    assert!(s.broker.registry.get("dry").is_none());
    // An existing topic fails validation as it would fail the create.
    create(&mut c, 2, false, vec![topic("wet", 1, 1, &[])]).await;
    let answer = create(&mut c, 2, true, vec![topic("wet", 1, 1, &[])]).await;
    assert_eq!(codes(&answer), [("wet".to_owned(), TOPIC_ALREADY_EXISTS)]);
    // Manual replica assignments are refused.
    let mut assigned = topic("assigned", -1, -1, &[]);
    assigned.assignments = vec![Default::default()];
    let answer = create(&mut c, 7, false, vec![assigned]).await;
    assert_eq!(codes(&answer), [("assigned".to_owned(), INVALID_REQUEST)]);
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
    assert!(s.broker.registry.get("gone-1").is_none());

    let request = DeleteTopicsRequest::default()
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(name("gone-6"))),
            // By id only: tidelog has no topic ids.
            DeleteTopicState::default(),
        ])
        .with_timeout_ms(5000);
    let answer: DeleteTopicsResponse = call(&mut c, ApiKey::DeleteTopics, 6, &request).await;
    let got: Vec<_> = answer.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(got, [NONE, UNKNOWN_TOPIC_ID]);
    assert!(answer.responses[1].error_message.is_some());
    assert!(s.broker.registry.get("gone-6").is_none());
    // A deleted name can be created again, empty.
    let again = create(&mut c, 7, false, vec![topic("gone-6", 1, 1, &[])]).await;
    assert_eq!(codes(&again), [("gone-6".to_owned(), NONE)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_admin_token_set_mutating_admin_apis_are_refused() {
    let s = server_configured(KafkaConfig {
        admin_locked: true,
        ..KafkaConfig::default()
    })
    .await;
    let mut c = connect(&s).await;
    let answer = create(&mut c, 7, false, vec![topic("locked", 1, 1, &[])]).await;
    assert_eq!(
        codes(&answer),
        [("locked".to_owned(), TOPIC_AUTHORIZATION_FAILED)]
    );
    assert!(s.broker.registry.get("locked").is_none());
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
    assert!(s.broker.registry.get("kept").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_count_in_an_admin_request_closes_its_connection() {
    let s = server().await;
    for (key, version) in [
        (ApiKey::CreateTopics, 2),
        (ApiKey::CreateTopics, 7),
        (ApiKey::DeleteTopics, 1),
        (ApiKey::DeleteTopics, 6),
    ] {
        let mut c = connect(&s).await;
        // An empty body's first field is the topics array: claim two
        // billion of them in the bytes of one.
        let mut frame = match key {
            ApiKey::CreateTopics => request_frame(key, version, 1, &CreateTopicsRequest::default()),
            _ => request_frame(key, version, 1, &DeleteTopicsRequest::default()),
        };
        let flexible = match key {
            ApiKey::CreateTopics => version >= 5,
            _ => version >= 4,
        };
        // Rebuild: header, then a lying count, then a few bytes.
        let empty_body_len = {
            let mut b = bytes::BytesMut::new();
            use kafka_protocol::protocol::Encodable;
            match key {
                ApiKey::CreateTopics => CreateTopicsRequest::default()
                    .encode(&mut b, version)
                    .unwrap(),
                _ => DeleteTopicsRequest::default()
                    .encode(&mut b, version)
                    .unwrap(),
            }
            b.len()
        };
        frame.truncate(frame.len() - empty_body_len);
        if flexible {
            frame.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
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
