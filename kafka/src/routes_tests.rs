//! The table's invariants, and handlers called through it with a
//! [`Context`] and a typed request, no socket: each test encodes the
//! request body, runs its row's route and decodes the answer frame.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::HashSet;
use std::sync::Arc;

use crate::metrics::KafkaMetrics;
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tidelog_broker::store::{CleanerConfig, StoreConfig};
use tidelog_broker::{Broker, BrokerConfig};
use tidelog_runtime::budget::ByteBudget;
use tokio::sync::watch;

use super::{route, ROUTES};
use crate::call::Call;
use crate::config::{AdminToken, KafkaConfig};
use crate::context::{Budgets, Context, Ready};
use crate::session::Session;

#[test]
fn no_key_has_two_rows() {
    let mut keys = HashSet::new();
    for r in ROUTES {
        assert!(keys.insert(r.key), "{:?} has two rows", r.key);
    }
    assert_eq!(keys.len(), 41, "KAFKA.md's table serves 41 APIs");
}

#[test]
fn what_a_sasl_listener_serves_before_a_login_is_served() {
    for key in super::BEFORE_LOGIN {
        assert!(route(key).is_some(), "{key:?} has no row");
    }
    assert!(super::served_before_login(ApiKey::SaslAuthenticate));
    assert!(!super::served_before_login(ApiKey::Metadata));
}

/// Every range lies inside what kafka-protocol decodes and encodes for
/// its key, so a served version never reaches a codec that lacks it; and
/// a row's name is its key's.
#[test]
fn every_range_is_one_kafka_protocol_supports() {
    for r in ROUTES {
        let codec = r.key.valid_versions();
        assert!(
            codec.min <= r.min && r.min <= r.max && r.max <= codec.max,
            "{}: {}..={} outside kafka-protocol's {}..={}",
            r.name,
            r.min,
            r.max,
            codec.min,
            codec.max
        );
        assert_eq!(r.name, format!("{:?}", r.key));
        assert!(std::ptr::eq(route(r.key).unwrap(), r));
    }
    assert!(
        route(ApiKey::WriteTxnMarkers).is_none(),
        "WriteTxnMarkers is between brokers: not served"
    );
}

/// `/metrics` names a frame by its row; an unserved or unknown key, or a
/// frame too short for a key, is "unserved".
#[test]
fn api_labels_come_from_the_table() {
    let session = Session::default();
    let label = |frame: &[u8]| crate::dispatch::api_label(&session, frame);
    assert_eq!(label(&[0, 3, 0, 12]), (3, "Metadata"));
    assert_eq!(label(&[0, 60]), (60, "DescribeCluster"));
    assert_eq!(label(&[0, 27, 0, 0]), (27, "unserved"), "WriteTxnMarkers");
    assert_eq!(label(&[0x7f, 0x7f]), (0x7f7f, "unserved"));
    assert_eq!(label(&[0]), (-1, "unserved"));
}

/// A listener's context: `broker` as the ready one (`None`: recovering),
/// `admin_token` locking the mutating admin APIs.
struct Listener {
    ctx: Context,
    _stop: watch::Sender<bool>,
}

fn listener(broker: Option<Arc<Broker>>, admin_token: Option<&str>) -> Listener {
    let config = KafkaConfig {
        admin_token: admin_token.map(|t| AdminToken(t.to_owned())),
        ..KafkaConfig::default()
    };
    let ready: Ready = Arc::new(move || broker.clone());
    let budgets = Budgets {
        requests: ByteBudget::new(1 << 30),
        answers: ByteBudget::new(1 << 30),
    };
    let (stop, stop_rx) = watch::channel(false);
    let ctx = Context::new(
        &config,
        (
            crate::config::ListenerName("PLAINTEXT".into()),
            crate::config::SecurityProtocol::Plaintext,
        ),
        ready,
        ("kafka.test".to_owned(), 9092),
        budgets,
        Arc::new(KafkaMetrics::default()),
        stop_rx,
    );
    Listener { ctx, _stop: stop }
}

/// A broker in `dir`, small files, no auto-create.
fn broker_in(dir: &std::path::Path) -> Arc<Broker> {
    let mut store = StoreConfig::new(dir);
    store.commitlog_segment_bytes = 1 << 20;
    store.consume_queue_units_per_file = 1024;
    store.index_slots = 64;
    store.index_entries = 256;
    store.preallocate_next_segment = false;
    // How full this shared machine's disk is must not refuse writes.
    store.retention.disk = Arc::new(tidelog_broker::store::FixedDiskUsage::new(0.1));
    let cleaner = CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    };
    Arc::new(Broker::open(&BrokerConfig::default(), store, cleaner).unwrap())
}

/// `request` at `version` through the row of `key` on `session`: the
/// typed answer, decoded from the frame the route encoded.
async fn through_table<Q: Encodable, A: Decodable>(
    ctx: &Context,
    session: &mut Session,
    key: ApiKey,
    version: i16,
    request: &Q,
) -> A {
    let r = route(key).unwrap();
    assert!((r.min..=r.max).contains(&version));
    let mut body = BytesMut::new();
    request.encode(&mut body, version).unwrap();
    crate::precheck::body(key, r.walk, version, &body).unwrap();
    let call = Call {
        ctx,
        session,
        peer: None,
        header: RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(41),
        key,
        version,
        api: r.name,
        body: Bytes::from(body),
    };
    let mut frame = (r.serve)(call).await.unwrap().unwrap();
    assert_eq!(frame.get_i32() as usize, frame.len(), "the length prefix");
    let header = ResponseHeader::decode(&mut frame, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 41);
    let answer = A::decode(&mut frame, version).unwrap();
    assert!(frame.is_empty(), "nothing after the answer");
    answer
}

fn topic(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn create(name: &str, partitions: i32) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic(name))
            .with_num_partitions(partitions)
            .with_replication_factor(1)])
        .with_timeout_ms(5_000)
}

fn metadata_of(names: &[&str]) -> MetadataRequest {
    let topics = names
        .iter()
        .map(|n| MetadataRequestTopic::default().with_name(Some(topic(n))))
        .collect();
    MetadataRequest::default().with_topics(Some(topics))
}

/// ApiVersions lists the table's rows, in its order, at either end of
/// its range; it needs no broker.
#[tokio::test]
async fn api_versions_answers_the_table() {
    let l = listener(None, None);
    for version in [0, 3] {
        let answer: ApiVersionsResponse = through_table(
            &l.ctx,
            &mut Session::default(),
            ApiKey::ApiVersions,
            version,
            &ApiVersionsRequest::default(),
        )
        .await;
        assert_eq!(answer.error_code, 0);
        let listed: Vec<_> = answer
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        let table: Vec<_> = ROUTES
            .iter()
            .map(|r| (r.key as i16, r.min, r.max))
            .collect();
        assert_eq!(listed, table, "v{version}");
    }
}

/// A topic created through CreateTopics' row is described by Metadata's,
/// with the listener's advertised address, on a broker in a temp dir.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_describes_a_topic_created_through_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_in(dir.path());
    let l = listener(Some(Arc::clone(&broker)), None);
    let mut session = Session::default();
    let created: CreateTopicsResponse = through_table(
        &l.ctx,
        &mut session,
        ApiKey::CreateTopics,
        7,
        &create("routed", 3),
    )
    .await;
    assert_eq!(created.topics[0].error_code, 0);
    for version in [0, 12] {
        let answer: MetadataResponse = through_table(
            &l.ctx,
            &mut session,
            ApiKey::Metadata,
            version,
            &metadata_of(&["routed", "absent"]),
        )
        .await;
        assert_eq!(answer.brokers.len(), 1);
        assert_eq!(answer.brokers[0].host.as_str(), "kafka.test");
        assert_eq!(answer.brokers[0].port, 9092);
        let t = &answer.topics[0];
        assert_eq!((t.error_code, t.partitions.len()), (0, 3), "v{version}");
        assert_eq!(
            answer.topics[1].error_code,
            ResponseError::UnknownTopicOrPartition.code(),
            "v{version}: no auto-create"
        );
    }
    drop(l);
    Arc::into_inner(broker).unwrap().shutdown().unwrap();
}

/// Under `admin_token`, CreateTopics on a connection that did not log in
/// is refused with TOPIC_AUTHORIZATION_FAILED and creates nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_without_a_login_is_refused_under_the_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_in(dir.path());
    let l = listener(Some(Arc::clone(&broker)), Some("s3cret"));
    let mut session = Session::default();
    let refused: CreateTopicsResponse = through_table(
        &l.ctx,
        &mut session,
        ApiKey::CreateTopics,
        2,
        &create("locked", 1),
    )
    .await;
    assert_eq!(
        refused.topics[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );
    let answer: MetadataResponse = through_table(
        &l.ctx,
        &mut session,
        ApiKey::Metadata,
        12,
        &metadata_of(&["locked"]),
    )
    .await;
    assert_eq!(
        answer.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code(),
        "nothing created"
    );
    drop(l);
    Arc::into_inner(broker).unwrap().shutdown().unwrap();
}

/// KIP-511 through dispatch: an ApiVersions version past the row's range
/// answers UNSUPPORTED_VERSION with the table, in a v0 body; any other
/// API's closes the connection.
#[tokio::test]
async fn an_unknown_api_versions_version_answers_the_table_in_v0() {
    let l = listener(None, None);
    let frame = |key: ApiKey, version: i16| {
        let mut out = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            // Both keys' highest served versions have v2 headers.
            .encode(&mut out, 2)
            .unwrap();
        out.freeze()
    };
    let mut answer = crate::dispatch::handle(&l.ctx, frame(ApiKey::ApiVersions, 99))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer.get_i32() as usize, answer.len());
    assert_eq!(
        answer.get_i32(),
        7,
        "v0 response header: the correlation id"
    );
    let body = ApiVersionsResponse::decode(&mut answer, 0).unwrap();
    assert_eq!(body.error_code, ResponseError::UnsupportedVersion.code());
    assert_eq!(body.api_keys.len(), ROUTES.len());
    let closed = crate::dispatch::handle(&l.ctx, frame(ApiKey::Metadata, 99)).await;
    assert!(matches!(
        closed,
        Err(crate::error::FrameError::Version {
            api: "Metadata",
            version: 99,
            min: 0,
            max: 12
        })
    ));
}
