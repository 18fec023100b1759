//! Tests of the HTTP error mapping (`error.rs`): every code's status and
//! body, and how the broker's, the store's, the cleaner's and the remote
//! tier's errors map (one table names every `BrokerError` variant).

use super::*;

fn msg(s: &str) -> String {
    s.to_string()
}

/// One of each variant with the code and status API.md gives it.
fn every_variant() -> Vec<(ApiError, u32, u16)> {
    vec![
        (
            ApiError::BadRequest {
                message: msg("bad offset"),
            },
            40002,
            400,
        ),
        (
            ApiError::InvalidName {
                kind: "topic",
                name: msg("../x"),
                reason: msg("contains '/'"),
            },
            40002,
            400,
        ),
        (
            ApiError::InvalidTopicConfig {
                name: msg("retention.ms"),
                reason: msg("not an integer"),
            },
            40002,
            400,
        ),
        (
            ApiError::Unauthorized {
                message: msg("no token"),
            },
            40101,
            401,
        ),
        (
            ApiError::Forbidden {
                message: msg("denied"),
            },
            40301,
            403,
        ),
        (
            ApiError::UserExists {
                message: msg("exists"),
            },
            40904,
            409,
        ),
        (
            ApiError::UnknownUser {
                message: msg("no user"),
            },
            40404,
            404,
        ),
        (
            ApiError::NotFound {
                message: msg("no route"),
            },
            40400,
            404,
        ),
        (
            ApiError::MethodNotAllowed {
                message: msg("use GET"),
            },
            40500,
            405,
        ),
        (ApiError::unknown_topic("t"), 40401, 404),
        (ApiError::unknown_partition("t", 9, 4), 40402, 404),
        (
            ApiError::UnknownConsumerInstance {
                message: msg("gone"),
            },
            40403,
            404,
        ),
        (ApiError::unknown_consumer_group("g"), 40405, 404),
        (ApiError::topic_exists("t"), 40901, 409),
        (ApiError::NotAcceptable { message: msg("a") }, 40601, 406),
        (
            ApiError::ConsumerInstanceExists { message: msg("i") },
            40902,
            409,
        ),
        (
            ApiError::IllegalConsumerState { message: msg("s") },
            40903,
            409,
        ),
        (
            ApiError::BadConsumerConfig { message: msg("c") },
            42204,
            422,
        ),
        (ApiError::NoResetPosition { message: msg("r") }, 42205, 422),
        (
            ApiError::RequestTimeout {
                message: msg("slow body"),
            },
            40801,
            408,
        ),
        (
            ApiError::TooLarge {
                message: msg("big"),
            },
            41301,
            413,
        ),
        (
            ApiError::UnsupportedContentType {
                message: msg("text/plain"),
            },
            41501,
            415,
        ),
        (ApiError::KeyInvalid { message: msg("k") }, 42201, 422),
        (ApiError::ValueInvalid { message: msg("v") }, 42202, 422),
        (ApiError::JsonConversion { message: msg("j") }, 42203, 422),
        (ApiError::PayloadMalformed { message: msg("p") }, 42206, 422),
        (
            ApiError::TooManyRequests {
                message: msg("slow down"),
            },
            42901,
            429,
        ),
        (
            ApiError::Internal {
                message: msg("bug"),
            },
            50001,
            500,
        ),
        (
            ApiError::NotReady {
                message: msg("recovering"),
            },
            50301,
            503,
        ),
        (
            ApiError::InflightBytesExhausted {
                message: msg("budget"),
            },
            50305,
            503,
        ),
        (
            ApiError::AnswerBytesExhausted {
                message: msg("answers"),
            },
            50307,
            503,
        ),
        (
            ApiError::UriTooLong {
                message: msg("uri"),
            },
            41401,
            414,
        ),
        (
            ApiError::HeadersTooLarge {
                message: msg("headers"),
            },
            43101,
            431,
        ),
        (
            ApiError::DispatchStalled {
                message: msg("stalled"),
            },
            50302,
            503,
        ),
        (
            ApiError::FlushTimedOut {
                message: msg("slow disk"),
            },
            50303,
            503,
        ),
        (
            ApiError::RemoteUnavailable {
                message: msg("remote tier unavailable"),
            },
            50304,
            503,
        ),
        (
            ApiError::DiskFull {
                message: msg("full"),
            },
            50701,
            507,
        ),
    ]
}

#[test]
fn every_code_and_status_matches_api_md() {
    for (err, code, status) in every_variant() {
        assert_eq!(err.error_code(), code, "{err:?}");
        assert_eq!(err.status().as_u16(), status, "{err:?}");
        assert_eq!(
            u32::from(status),
            code / 100,
            "status is the code's first digits"
        );
    }
}

#[tokio::test]
async fn every_response_has_status_json_content_type_and_body() {
    for (err, code, status) in every_variant() {
        let message = err.to_string();
        let response = err.into_response();
        assert_eq!(response.status().as_u16(), status);
        assert_eq!(
            response.headers().get(header::CONTENT_TYPE).unwrap(),
            "application/json"
        );
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error_code": code, "message": message})
        );
    }
}

#[test]
fn messages_name_the_thing() {
    assert_eq!(
        ApiError::unknown_partition("orders", 4, 4).to_string(),
        "partition 4 of topic \"orders\" does not exist (topic has 4 partitions)"
    );
    let err = ApiError::InvalidTopicConfig {
        name: "segment.bytes".into(),
        reason: "must be at least 1024".into(),
    };
    assert_eq!(
        err.to_string(),
        "invalid topic config \"segment.bytes\": must be at least 1024"
    );
}

/// The coordinator's, the consumer instances' and the operator group
/// calls' refusals, as a route answers them.
#[test]
fn consumer_errors_map_to_their_codes() {
    use tidelog_broker::BrokerError as B;
    let (g, i) = (|| "g".to_string(), || "i".to_string());
    let cases = [
        (B::UnknownGroup { group: g() }, 40405),
        (
            B::UnknownMember {
                group: g(),
                member_id: i(),
            },
            40403,
        ),
        (
            B::UnknownConsumerInstance {
                group: g(),
                instance: i(),
            },
            40403,
        ),
        (
            B::ConsumerInstanceExists {
                group: g(),
                instance: i(),
            },
            40902,
        ),
        (
            B::IllegalGeneration {
                group: g(),
                generation: 1,
                current: 2,
            },
            40903,
        ),
        (B::RebalanceInProgress { group: g() }, 40903),
        (
            B::GroupHasMembers {
                group: g(),
                members: 1,
            },
            40903,
        ),
        (
            B::InconsistentGroupProtocol {
                group: g(),
                reason: i(),
            },
            40903,
        ),
        (
            B::ConsumerState {
                group: g(),
                instance: i(),
                reason: i(),
            },
            40903,
        ),
        (
            B::ConsumerConfig {
                field: i(),
                reason: i(),
            },
            42204,
        ),
        (
            B::NoResetPosition {
                topic: g(),
                partition: 3,
                reason: i(),
            },
            42205,
        ),
        (
            B::FencedInstanceId {
                group: g(),
                instance_id: i(),
            },
            40903,
        ),
        (
            B::GroupLimit {
                what: "instances",
                len: 2,
                max: 1,
            },
            42901,
        ),
        // Kafka-only: an HTTP member never causes them, so over HTTP
        // either is a bug.
        (
            B::MemberIdRequired {
                group: g(),
                member_id: i(),
            },
            50001,
        ),
        (
            B::InvalidSessionTimeout {
                timeout_ms: 1,
                min_ms: 6000,
                max_ms: 1_800_000,
            },
            50001,
        ),
    ];
    for (e, code) in cases {
        let text = e.to_string();
        let api = ApiError::from(e);
        assert_eq!(api.error_code(), code, "{text}");
        assert_eq!(api.to_string(), text, "the broker's message is kept");
    }
}

#[test]
fn store_errors_map_to_their_codes() {
    use tidelog_broker::store::{RecordProblem, StoreError as S};
    let io = || std::io::Error::other("boom");
    let cases = [
        (
            S::RecordRefused {
                index: 0,
                problem: RecordProblem::TooLarge { size: 9, limit: 1 },
            },
            41301,
        ),
        (
            S::RecordRefused {
                index: 3,
                problem: RecordProblem::LargerThanSegment { size: 9, limit: 1 },
            },
            41301,
        ),
        (
            S::RecordRefused {
                index: 1,
                problem: RecordProblem::TooManyHeaders { count: 9, max: 1 },
            },
            42206,
        ),
        (
            S::DiskFull {
                reason: "95%".into(),
            },
            50701,
        ),
        (S::Closed, 50301),
        (S::InvalidInput { reason: "x".into() }, 40002),
        (
            S::Io {
                path: "/d/f".into(),
                source: io(),
            },
            50001,
        ),
        (
            S::Corruption {
                file: "/d/f".into(),
                position: 3,
                kind: tidelog_broker::store::CorruptionKind::CrcMismatch {
                    stored: 1,
                    computed: 2,
                },
            },
            50001,
        ),
        (
            S::Inconsistent {
                file: "/d/commitlog".into(),
                position: 4096,
                reason: "queue unit says 9 bytes, record has 7".into(),
            },
            50001,
        ),
        (
            S::Poisoned {
                reason: "fsync".into(),
            },
            50301,
        ),
        (
            S::SegmentUnavailable {
                base: 1 << 30,
                reason: "Too many open files".into(),
            },
            50701,
        ),
        (S::Locked { path: "/d".into() }, 50001),
        (
            S::DispatchStalled {
                sink: "compacted-logs".into(),
                failing_ms: 30_000,
                error: "boom".into(),
            },
            50302,
        ),
        (S::FlushTimedOut { timeout_ms: 5000 }, 50303),
        (
            S::InvalidConfig {
                key: "store.index_slots",
                reason: "too large".into(),
            },
            50001,
        ),
        (
            S::CopyRefused {
                position: 4096,
                problem: tidelog_broker::store::CopyProblem::NotAtEnd { log_end: 0 },
            },
            50001,
        ),
        (
            S::CutBelowLogStart {
                position: 0,
                log_start: 1 << 20,
            },
            50001,
        ),
        (S::Replica, 50301),
    ];
    for (store, code) in cases {
        let text = store.to_string();
        let verbatim = matches!(store, S::DiskFull { .. });
        let api = ApiError::from(store);
        if verbatim {
            assert_eq!(
                api.to_string(),
                text,
                "507 carries the store's message as is"
            );
        }
        assert_eq!(api.error_code(), code, "{text}");
        assert!(api.to_string().contains(&text), "{api} lacks {text}");
    }
}

/// The produce pre-check words 507 as the store does: one message
/// whichever of the two refuses, and OPERATIONS.md quotes it.
#[test]
fn a_topic_that_stopped_being_compact_is_unknown() {
    let e = ApiError::from(tidelog_broker::store::CleanerError::NotCompact {
        topic: "users".into(),
    });
    assert_eq!((e.error_code(), e.status().as_u16()), (40401, 404));
    assert!(e.to_string().contains("users"), "{e}");
}

/// The remote tier out of reach is 503/50304 "remote tier unavailable";
/// damage in the bucket a 500; a create waiting for a remote deletion a
/// 503 the client retries.
#[test]
fn tiered_errors_map_to_50304_or_50001() {
    use tidelog_broker::store::{ObjectStoreError, TieredError};
    use tidelog_broker::BrokerError;
    let down = ApiError::from(BrokerError::Tiered {
        source: TieredError::Unavailable {
            op: "get",
            source: ObjectStoreError::Generic {
                store: "S3",
                source: "connection refused".into(),
            },
        },
    });
    assert_eq!((down.error_code(), down.status().as_u16()), (50304, 503));
    assert!(
        down.to_string().starts_with("remote tier unavailable"),
        "{down}"
    );
    let corrupt = ApiError::from(BrokerError::Tiered {
        source: TieredError::Corrupt {
            what: "object".into(),
            detail: "crc".into(),
        },
    });
    assert_eq!(corrupt.error_code(), 50001);
    let pending = ApiError::from(BrokerError::RemoteDeletePending { topic: "t".into() });
    assert_eq!(pending.error_code(), 50304);
}

#[test]
fn disk_full_is_worded_as_the_store_words_it() {
    use std::sync::Arc;
    use tidelog_broker::produce::ProduceRecord;
    use tidelog_broker::store::{CleanerConfig, FixedDiskUsage, StoreConfig};
    let dir = tempfile::tempdir().unwrap();
    let mut config = StoreConfig::new(dir.path());
    config.commitlog_segment_bytes = 64 * 1024;
    config.consume_queue_units_per_file = 64;
    config.index_slots = 64;
    config.index_entries = 256;
    config.preallocate_next_segment = false;
    config.retention.disk = Arc::new(FixedDiskUsage::new(0.953));
    let cleaner = CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    };
    let auto_create = tidelog_broker::BrokerConfig {
        auto_create_topics: true,
        default_partitions: 1,
        ..Default::default()
    };
    let broker = tidelog_broker::Broker::open(&auto_create, config, cleaner).unwrap();
    assert!(
        broker.stats().store.disk_full,
        "the store measures the disk while opening"
    );
    broker.create_topic("t", 1, Default::default()).unwrap();
    let record = || {
        vec![ProduceRecord {
            key: None,
            value: Some(bytes::Bytes::from_static(b"v")),
            partition: None,
            headers: Vec::new(),
            timestamp_ms: None,
        }]
    };
    // An existing topic: refused by `Store::append`.
    let refused = broker.produce_blocking("t", None, record()).unwrap_err();
    let from_store = ApiError::from(refused);
    assert_eq!(from_store.error_code(), 50701);
    // An unknown topic that would be auto-created: the broker's
    // pre-check refuses before creating it.
    let prechecked = broker.produce_blocking("new", None, record()).unwrap_err();
    assert!(broker.registry().get("new").is_none());
    assert_eq!(
        ApiError::from(prechecked),
        from_store,
        "the pre-check's wording drifted from Store::append's"
    );
    assert_eq!(
        from_store.to_string(),
        "disk full: the data directory's disk is 95.3% used; writes stopped above disk_full_ratio 90.0% and resume when usage falls to disk_force_clean_ratio 85.0% or below (delete old segments or free space)"
    );
    broker.shutdown().unwrap();
}

#[test]
fn body_escapes_quotes_and_control_characters() {
    let err = ApiError::BadRequest {
        message: "bad \"x\"\n\u{0}".into(),
    };
    let body: serde_json::Value = serde_json::from_str(&err.body()).unwrap();
    assert_eq!(body["message"], "bad \"x\"\n\u{0}");
}

/// Every variant of the broker's error (and every error of the store, the
/// cleaner and the remote tier it wraps, but the cleaner's `Corruption`,
/// mapped with its `Io`) with its API.md code; the status is the code's
/// first three digits.
#[test]
fn every_broker_error_has_its_code() {
    use tidelog_broker::error::{ConfigOperationProblem, PolicyChangeLoss};
    use tidelog_broker::security::acl::{AclError, Operation, ResourceType};
    use tidelog_broker::security::users::UserError;
    use tidelog_broker::store::{
        CleanerError, CorruptionKind, ObjectStoreError, RecordProblem, SequenceProblem, StoreError,
        TieredError,
    };
    use tidelog_broker::BrokerError as B;

    use tidelog_broker::error_fixtures::{io, join_error, json_error, no_runtime, s};

    let cases: Vec<(B, u32)> = vec![
        (
            B::InvalidPartitionCount {
                requested: 0,
                max: 10_000,
            },
            40002,
        ),
        (
            B::InternalTopicNotDeletable {
                topic: s("__consumer_offsets"),
            },
            40002,
        ),
        (
            B::InternalTopicConfigsFixed {
                topic: s("__consumer_offsets"),
            },
            40002,
        ),
        (
            B::InternalTopicPartitionsFixed {
                topic: s("__consumer_offsets"),
            },
            40002,
        ),
        (
            B::PartitionCountNotIncreased {
                topic: s("t"),
                current: 3,
                requested: 3,
            },
            40002,
        ),
        (
            B::PolicyChangeWithRecords {
                topic: s("t"),
                from: "delete",
                to: "compact",
                partition: 1,
                records: 3,
                loss: PolicyChangeLoss::NotCopied,
            },
            40002,
        ),
        (
            B::TopicNotCompacted {
                topic: s("t"),
                policy: "delete",
            },
            40002,
        ),
        (B::ResetPartitionsEmpty, 40002),
        (B::GroupInstanceIdEmpty, 40002),
        (B::ServerSideMemberNotHttp, 40002),
        (
            B::ConsumerProtocolMalformed {
                byte: 6,
                reason: s("topic is not UTF-8"),
            },
            40002,
        ),
        (
            B::InvalidConfigOperation {
                name: s("retention.ms"),
                problem: ConfigOperationProblem::SetWithoutValue,
            },
            40002,
        ),
        (
            B::InvalidName {
                kind: "topic",
                name: s("a/b"),
                reason: s("bad"),
            },
            40002,
        ),
        (
            B::InvalidName {
                kind: "consumer group",
                name: s("a/b"),
                reason: s("bad"),
            },
            40002,
        ),
        (
            B::InvalidTopicConfig {
                name: s("retention.ms"),
                reason: s("bad"),
            },
            40002,
        ),
        (
            B::DynamicConfig {
                resource: s("broker 0"),
                name: s("log.retention.ms"),
                problem: tidelog_broker::error::DynamicConfigProblem::Unknown { hint: s("") },
            },
            40002,
        ),
        (B::UnknownTopic { topic: s("t") }, 40401),
        (
            B::UnknownPartition {
                topic: s("t"),
                partition: 4,
                partitions: 4,
            },
            40402,
        ),
        (B::TopicExists { topic: s("t") }, 40901),
        (
            B::OffsetOutOfRange {
                topic: s("t"),
                partition: 0,
                offset: 9,
                high_watermark: 3,
            },
            40002,
        ),
        (
            B::RecordsNotDeletable {
                topic: s("t"),
                policy: "compact",
            },
            40002,
        ),
        (
            B::InternalTopic {
                topic: s("__consumer_offsets"),
            },
            40002,
        ),
        (
            B::PartitionMismatch {
                index: 3,
                own: 1,
                requested: 0,
            },
            42206,
        ),
        (
            B::KeyRequired {
                index: 0,
                topic: s("t"),
                policy: "compact",
                indexes: vec![0, 3],
            },
            42201,
        ),
        (
            B::TimestampOutOfBounds {
                index: 2,
                topic: s("t"),
                timestamp_ms: 1000,
                now_ms: 5000,
                distance_ms: 4000,
                side: "before",
                max_ms: 10,
                config: "message.timestamp.before.max.ms",
                indexes: vec![2, 3],
            },
            42206,
        ),
        (
            B::NotEnoughReplicas {
                topic: s("t"),
                required: 2,
            },
            40002,
        ),
        (
            B::TooManyHeaders {
                index: 0,
                count: 9,
                max: 1,
            },
            42206,
        ),
        (
            B::HeaderNameTooLong {
                index: 0,
                header: 1,
                max: 8,
            },
            42206,
        ),
        (
            B::RecordTooLarge {
                index: 0,
                size: 9,
                limit: 1,
                limit_source: s("max.message.bytes"),
            },
            41301,
        ),
        (
            B::BlockingTaskFailed {
                task: "read task",
                source: join_error(),
            },
            50001,
        ),
        (
            B::ThreadStart {
                thread: "tidelog-groups",
                source: io(),
            },
            50001,
        ),
        (
            B::NoRuntime {
                source: no_runtime(),
            },
            50001,
        ),
        (
            B::RegistryEncode {
                source: json_error(),
            },
            50001,
        ),
        (
            B::RegistryWrite {
                source: StoreError::DiskFull { reason: s("full") },
            },
            50001,
        ),
        (
            B::OffsetCommitEncode {
                source: json_error(),
            },
            50001,
        ),
        (
            B::CompactedLogsRemove {
                topic: s("t"),
                source: CleanerError::NotCompact { topic: s("t") },
            },
            50001,
        ),
        (B::GroupVanished { group: s("g") }, 50001),
        (B::NotCompactedPartition { topic: s("t") }, 50001),
        (
            B::CanonicalConfig {
                name: s("segment.ms"),
                value: s("x"),
            },
            50001,
        ),
        (B::RecordsCallUnanswered, 50001),
        (
            B::ManifestStalled {
                topic: s("t"),
                partition: 0,
                end: 7,
            },
            50001,
        ),
        (
            B::Tiered {
                source: TieredError::Unavailable {
                    op: "get",
                    source: ObjectStoreError::Generic {
                        store: "S3",
                        source: "connection refused".into(),
                    },
                },
            },
            50304,
        ),
        (
            B::Tiered {
                source: TieredError::Corrupt {
                    what: s("object"),
                    detail: s("crc"),
                },
            },
            50001,
        ),
        (
            B::Tiered {
                source: TieredError::Config { detail: s("url") },
            },
            50001,
        ),
        (
            B::Tiered {
                source: TieredError::InvalidInput { detail: s("order") },
            },
            50001,
        ),
        (
            B::Tiered {
                source: TieredError::OutOfRange {
                    topic: s("t"),
                    partition: 0,
                    offset: 1,
                    beginning: 5,
                },
            },
            50001,
        ),
        (
            B::Tiered {
                source: TieredError::Contended {
                    what: s("manifest"),
                    version: 3,
                    attempts: 5,
                },
            },
            50001,
        ),
        (B::TieringOff, 40002),
        (B::RemoteDeletePending { topic: s("t") }, 50304),
        (
            B::Store {
                source: StoreError::Io {
                    path: "/d/f".into(),
                    source: io(),
                },
            },
            50001,
        ),
        (
            B::Store {
                source: StoreError::Corruption {
                    file: "/d/f".into(),
                    position: 3,
                    kind: CorruptionKind::CrcMismatch {
                        stored: 1,
                        computed: 2,
                    },
                },
            },
            50001,
        ),
        (
            B::Store {
                source: StoreError::Inconsistent {
                    file: "/d/commitlog".into(),
                    position: 4096,
                    reason: s("unit"),
                },
            },
            50001,
        ),
        (
            B::Store {
                source: StoreError::InvalidInput { reason: s("x") },
            },
            40002,
        ),
        (
            B::Store {
                source: StoreError::RecordRefused {
                    index: 0,
                    problem: RecordProblem::TooLarge { size: 9, limit: 1 },
                },
            },
            41301,
        ),
        (
            B::Store {
                source: StoreError::RecordRefused {
                    index: 1,
                    problem: RecordProblem::TooManyHeaders { count: 9, max: 1 },
                },
            },
            42206,
        ),
        (
            B::Store {
                source: StoreError::ProducerRefused {
                    topic: s("t"),
                    partition: 0,
                    problem: SequenceProblem::StaleEpoch {
                        producer_id: 1,
                        epoch: 0,
                        current: 1,
                    },
                },
            },
            40002,
        ),
        (
            B::Store {
                source: StoreError::ProducerRefused {
                    topic: s("t"),
                    partition: 0,
                    problem: SequenceProblem::OutOfOrder {
                        producer_id: 1,
                        expected: 2,
                        got: 5,
                    },
                },
            },
            40002,
        ),
        (
            B::Store {
                source: StoreError::ProducerRefused {
                    topic: s("t"),
                    partition: 0,
                    problem: SequenceProblem::UnknownProducer {
                        producer_id: 1,
                        got: 5,
                    },
                },
            },
            40002,
        ),
        (
            B::Store {
                source: StoreError::ProducerRefused {
                    topic: s("t"),
                    partition: 0,
                    problem: SequenceProblem::OutOfRange {
                        producer_id: -1,
                        max: 5,
                    },
                },
            },
            40002,
        ),
        (
            B::Store {
                source: StoreError::Poisoned { reason: s("fsync") },
            },
            50301,
        ),
        (
            B::Store {
                source: StoreError::Locked { path: "/d".into() },
            },
            50001,
        ),
        (
            B::Store {
                source: StoreError::Closed,
            },
            50301,
        ),
        (
            B::Store {
                source: StoreError::DiskFull { reason: s("95%") },
            },
            50701,
        ),
        (
            B::Store {
                source: StoreError::InvalidConfig {
                    key: "store.index_slots",
                    reason: s("too large"),
                },
            },
            50001,
        ),
        (
            B::Store {
                source: StoreError::DispatchStalled {
                    sink: s("consume-queue"),
                    failing_ms: 30_000,
                    error: s("boom"),
                },
            },
            50302,
        ),
        (
            B::Store {
                source: StoreError::FlushTimedOut { timeout_ms: 5000 },
            },
            50303,
        ),
        (
            B::Store {
                source: StoreError::SegmentUnavailable {
                    base: 1 << 30,
                    reason: s("Too many open files"),
                },
            },
            50701,
        ),
        (
            B::Store {
                source: StoreError::TopicDeleted { topic: s("t") },
            },
            40401,
        ),
        (
            B::Compaction {
                source: CleanerError::Io {
                    path: "/d/c".into(),
                    source: io(),
                },
            },
            50001,
        ),
        (
            B::Compaction {
                source: CleanerError::Store {
                    path: "/d/c".into(),
                    source: StoreError::DiskFull { reason: s("full") },
                },
            },
            50701,
        ),
        (
            B::Compaction {
                source: CleanerError::InvalidConfig {
                    setting: "dedupe_buffer_bytes",
                    reason: s("0"),
                },
            },
            50001,
        ),
        (
            B::Compaction {
                source: CleanerError::OutOfMemory {
                    purpose: "offset map",
                    bytes: 1 << 40,
                },
            },
            50001,
        ),
        (
            B::Compaction {
                source: CleanerError::InvalidTopic {
                    topic: s("t t"),
                    reason: s("space"),
                },
            },
            40002,
        ),
        (
            B::Compaction {
                source: CleanerError::NotCached {
                    path: "/d/c".into(),
                },
            },
            50001,
        ),
        (
            B::Compaction {
                source: CleanerError::NotCompact { topic: s("t") },
            },
            40401,
        ),
        (
            B::Compaction {
                source: CleanerError::LeftoverSwap {
                    path: "/d/c.swap".into(),
                },
            },
            50001,
        ),
        (
            B::Compaction {
                source: CleanerError::CheckpointTooLarge { entries: 9, max: 1 },
            },
            50001,
        ),
        (
            B::InvalidConfig {
                key: s("topics[0].partitions"),
                reason: s("0"),
            },
            50001,
        ),
        (
            B::CommitMetadataTooLarge {
                index: 0,
                len: 9,
                max: 1,
            },
            40002,
        ),
        (
            B::StoreOpen {
                data_dir: "/d".into(),
                source: StoreError::Locked { path: "/d".into() },
            },
            50001,
        ),
        (
            B::CompactedLogsOpen {
                data_dir: "/d".into(),
                source: CleanerError::NotCached { path: "/d".into() },
            },
            50001,
        ),
        (
            B::ConsumerOffsets {
                topic: "__consumer_offsets",
                source: CleanerError::NotCached { path: "/d".into() },
            },
            50001,
        ),
        (
            B::RegistryFile {
                path: "/d/topics.json".into(),
                reason: s("not JSON"),
            },
            50001,
        ),
        (
            B::DynamicConfigsFile {
                path: "/d/dynamic.json".into(),
                reason: s("not JSON"),
            },
            50001,
        ),
        (
            B::TransactionLog {
                reason: s("bad record"),
            },
            50001,
        ),
        (
            B::TransactionRefused {
                refusal: tidelog_broker::transactions::TxnRefusal::Concurrent,
            },
            40002,
        ),
        (
            B::DynamicConfigsWrite {
                source: StoreError::DiskFull { reason: s("full") },
            },
            50001,
        ),
        (
            B::RegistryTopic {
                path: "/d/topics.json".into(),
                topic: s("t"),
                reason: s("bad"),
            },
            50001,
        ),
        (
            B::DeclaredTopic {
                topic: s("t"),
                reason: s("bad"),
            },
            50001,
        ),
        (
            B::Restore {
                data_dir: "/d".into(),
                reason: s("not empty"),
            },
            50001,
        ),
        (B::UnknownGroup { group: s("g") }, 40405),
        (
            B::UnknownMember {
                group: s("g"),
                member_id: s("m"),
            },
            40403,
        ),
        (
            B::IllegalGeneration {
                group: s("g"),
                generation: 1,
                current: 2,
            },
            40903,
        ),
        (B::RebalanceInProgress { group: s("g") }, 40903),
        (
            B::GroupHasMembers {
                group: s("g"),
                members: 1,
            },
            40903,
        ),
        (
            B::InconsistentGroupProtocol {
                group: s("g"),
                reason: s("mixed"),
            },
            40903,
        ),
        (
            B::MemberRefused {
                group: s("g"),
                refusal: tidelog_broker::error::MemberRefusal::NotConsumerGroup,
            },
            40903,
        ),
        (
            B::FencedInstanceId {
                group: s("g"),
                instance_id: s("i"),
            },
            40903,
        ),
        (
            B::MemberIdRequired {
                group: s("g"),
                member_id: s("m"),
            },
            50001,
        ),
        (
            B::InvalidSessionTimeout {
                timeout_ms: 1,
                min_ms: 6000,
                max_ms: 1_800_000,
            },
            50001,
        ),
        (
            B::UnknownConsumerInstance {
                group: s("g"),
                instance: s("i"),
            },
            40403,
        ),
        (
            B::ConsumerInstanceExists {
                group: s("g"),
                instance: s("i"),
            },
            40902,
        ),
        (
            B::ConsumerState {
                group: s("g"),
                instance: s("i"),
                reason: s("assigned"),
            },
            40903,
        ),
        (
            B::ConsumerConfig {
                field: s("format"),
                reason: s("bad"),
            },
            42204,
        ),
        (
            B::NoResetPosition {
                topic: s("t"),
                partition: 0,
                reason: s("no committed offset"),
            },
            42205,
        ),
        (
            B::GroupLimit {
                what: "members",
                len: 2,
                max: 1,
            },
            42901,
        ),
        (
            B::NotAuthorized {
                operation: Operation::Write,
                resource_type: ResourceType::Topic,
                name: s("t"),
            },
            40301,
        ),
        (
            B::Acl {
                source: AclError::EmptyResourceName,
            },
            40002,
        ),
        (
            B::Acl {
                source: AclError::Write {
                    path: s("acls.json"),
                    reason: s("disk full"),
                },
            },
            50001,
        ),
        (
            B::User {
                source: UserError::Exists { name: s("a") },
            },
            40904,
        ),
        (
            B::User {
                source: UserError::NotFound { name: s("a") },
            },
            40404,
        ),
        (
            B::User {
                source: UserError::InvalidName { name: s("*") },
            },
            40002,
        ),
    ];
    for (e, code) in cases {
        let text = format!("{e:?}");
        let api = ApiError::from(e);
        assert_eq!(api.error_code(), code, "{text}");
        assert_eq!(u32::from(api.status().as_u16()), code / 100, "{text}");
    }
}
