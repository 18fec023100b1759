//! Tests of `error.rs`: the Kafka code of every broker error (one table
//! naming every variant, and every store, cleaner and remote tier error it
//! wraps), of every admin refusal, and the store's refusals of a write.

use tidelog_broker::error::{ConfigOperationProblem, PolicyChangeLoss};
use tidelog_broker::store::{
    CleanerError, CorruptionKind, ObjectStoreError, RecordProblem, SequenceProblem,
};
use tidelog_broker::BrokerError as B;

use super::*;
use tidelog_broker::security::acl::Operation;

use tidelog_broker::error_fixtures::{io, join_error, json_error, no_runtime, s};

/// Every variant of the broker's error (and every error of the store, the
/// cleaner and the remote tier it wraps, but the cleaner's `Corruption`,
/// answered with its `Io`) with the Kafka code KAFKA.md gives it.
#[test]
fn every_broker_error_has_its_code() {
    let cases: Vec<(B, ResponseError)> = vec![
        (
            B::InvalidPartitionCount {
                requested: 0,
                max: 10_000,
            },
            ResponseError::InvalidPartitions,
        ),
        (
            B::InternalTopicNotDeletable {
                topic: s("__consumer_offsets"),
            },
            ResponseError::InvalidRequest,
        ),
        (
            B::InternalTopicConfigsFixed {
                topic: s("__consumer_offsets"),
            },
            ResponseError::InvalidRequest,
        ),
        (
            B::InternalTopicPartitionsFixed {
                topic: s("__consumer_offsets"),
            },
            ResponseError::InvalidRequest,
        ),
        (
            B::PartitionCountNotIncreased {
                topic: s("t"),
                current: 3,
                requested: 3,
            },
            ResponseError::InvalidPartitions,
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
            ResponseError::InvalidRequest,
        ),
        (
            B::TopicNotCompacted {
                topic: s("t"),
                policy: "delete",
            },
            ResponseError::InvalidRequest,
        ),
        (B::ResetPartitionsEmpty, ResponseError::InvalidRequest),
        (B::GroupInstanceIdEmpty, ResponseError::InvalidRequest),
        (B::ServerSideMemberNotHttp, ResponseError::InvalidRequest),
        (
            B::ConsumerProtocolMalformed {
                byte: 6,
                reason: s("topic is not UTF-8"),
            },
            ResponseError::InvalidRequest,
        ),
        (
            B::InvalidConfigOperation {
                name: s("retention.ms"),
                problem: ConfigOperationProblem::SetWithoutValue,
            },
            ResponseError::InvalidRequest,
        ),
        (
            B::InvalidName {
                kind: "topic",
                name: s("a/b"),
                reason: s("bad"),
            },
            ResponseError::InvalidTopicException,
        ),
        (
            B::InvalidName {
                kind: "consumer group",
                name: s("a/b"),
                reason: s("bad"),
            },
            ResponseError::InvalidGroupId,
        ),
        (
            B::InvalidTopicConfig {
                name: s("retention.ms"),
                reason: s("bad"),
            },
            ResponseError::InvalidConfig,
        ),
        (
            B::DynamicConfig {
                resource: s("broker 0"),
                name: s("num.partitions"),
                problem: tidelog_broker::error::DynamicConfigProblem::ReadOnly {
                    where_set: s("broker.yaml default_partitions"),
                },
            },
            ResponseError::InvalidRequest,
        ),
        (
            B::DynamicConfig {
                resource: s("group \"g\""),
                name: s("consumer.session.timeout.ms"),
                problem: tidelog_broker::error::DynamicConfigProblem::InvalidValue {
                    reason: s("below 6000"),
                },
            },
            ResponseError::InvalidConfig,
        ),
        (
            B::UnknownTopic { topic: s("t") },
            ResponseError::UnknownTopicOrPartition,
        ),
        (
            B::UnknownPartition {
                topic: s("t"),
                partition: 4,
                partitions: 4,
            },
            ResponseError::UnknownTopicOrPartition,
        ),
        (
            B::TopicExists { topic: s("t") },
            ResponseError::TopicAlreadyExists,
        ),
        (
            B::OffsetOutOfRange {
                topic: s("t"),
                partition: 0,
                offset: 9,
                high_watermark: 3,
            },
            ResponseError::OffsetOutOfRange,
        ),
        (
            B::RecordsNotDeletable {
                topic: s("t"),
                policy: "compact",
            },
            ResponseError::PolicyViolation,
        ),
        (
            B::InternalTopic {
                topic: s("__consumer_offsets"),
            },
            ResponseError::InvalidTopicException,
        ),
        (
            B::PartitionMismatch {
                index: 3,
                own: 1,
                requested: 0,
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::KeyRequired {
                index: 0,
                topic: s("t"),
                policy: "compact",
                indexes: vec![0, 3],
            },
            ResponseError::InvalidRecord,
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
            ResponseError::InvalidTimestamp,
        ),
        (
            B::NotEnoughReplicas {
                topic: s("t"),
                required: 2,
            },
            ResponseError::NotEnoughReplicas,
        ),
        (
            B::TooManyHeaders {
                index: 0,
                count: 9,
                max: 1,
            },
            ResponseError::InvalidRecord,
        ),
        (
            B::HeaderNameTooLong {
                index: 0,
                header: 1,
                max: 8,
            },
            ResponseError::InvalidRecord,
        ),
        (
            B::RecordTooLarge {
                index: 0,
                size: 9,
                limit: 1,
                limit_source: s("max.message.bytes"),
            },
            ResponseError::MessageTooLarge,
        ),
        (
            B::BlockingTaskFailed {
                task: "read task",
                source: join_error(),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::ThreadStart {
                thread: "tidelog-groups",
                source: io(),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::NoRuntime {
                source: no_runtime(),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::RegistryEncode {
                source: json_error(),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::RegistryWrite {
                source: StoreError::DiskFull { reason: s("full") },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::OffsetCommitEncode {
                source: json_error(),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::CompactedLogsRemove {
                topic: s("t"),
                source: CleanerError::NotCompact { topic: s("t") },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::GroupVanished { group: s("g") },
            ResponseError::UnknownServerError,
        ),
        (
            B::NotCompactedPartition { topic: s("t") },
            ResponseError::UnknownServerError,
        ),
        (
            B::CanonicalConfig {
                name: s("segment.ms"),
                value: s("x"),
            },
            ResponseError::UnknownServerError,
        ),
        (B::RecordsCallUnanswered, ResponseError::UnknownServerError),
        (
            B::ManifestStalled {
                topic: s("t"),
                partition: 0,
                end: 7,
            },
            ResponseError::UnknownServerError,
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
            ResponseError::KafkaStorageError,
        ),
        (
            B::Tiered {
                source: TieredError::Corrupt {
                    what: s("object"),
                    detail: s("crc"),
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Tiered {
                source: TieredError::Config { detail: s("url") },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Tiered {
                source: TieredError::InvalidInput { detail: s("order") },
            },
            ResponseError::UnknownServerError,
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
            ResponseError::OffsetOutOfRange,
        ),
        (
            B::Tiered {
                source: TieredError::Contended {
                    what: s("manifest"),
                    version: 3,
                    attempts: 5,
                },
            },
            ResponseError::UnknownServerError,
        ),
        (B::TieringOff, ResponseError::UnknownServerError),
        (
            B::RemoteDeletePending { topic: s("t") },
            ResponseError::TopicAlreadyExists,
        ),
        (
            B::Store {
                source: StoreError::Io {
                    path: "/d/f".into(),
                    source: io(),
                },
            },
            ResponseError::UnknownServerError,
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
            ResponseError::UnknownServerError,
        ),
        (
            B::Store {
                source: StoreError::Inconsistent {
                    file: "/d/commitlog".into(),
                    position: 4096,
                    reason: s("unit"),
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Store {
                source: StoreError::InvalidInput { reason: s("x") },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Store {
                source: StoreError::RecordRefused {
                    index: 0,
                    problem: RecordProblem::TooLarge { size: 9, limit: 1 },
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Store {
                source: StoreError::RecordRefused {
                    index: 1,
                    problem: RecordProblem::TooManyHeaders { count: 9, max: 1 },
                },
            },
            ResponseError::UnknownServerError,
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
            ResponseError::InvalidProducerEpoch,
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
            ResponseError::OutOfOrderSequenceNumber,
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
            ResponseError::UnknownProducerId,
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
            ResponseError::InvalidRecord,
        ),
        (
            B::Store {
                source: StoreError::Poisoned { reason: s("fsync") },
            },
            ResponseError::KafkaStorageError,
        ),
        (
            B::Store {
                source: StoreError::Locked { path: "/d".into() },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Store {
                source: StoreError::Closed,
            },
            ResponseError::LeaderNotAvailable,
        ),
        (
            B::Store {
                source: StoreError::DiskFull { reason: s("95%") },
            },
            ResponseError::KafkaStorageError,
        ),
        (
            B::Store {
                source: StoreError::InvalidConfig {
                    key: "store.index_slots",
                    reason: s("too large"),
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Store {
                source: StoreError::DispatchStalled {
                    sink: s("consume-queue"),
                    failing_ms: 30_000,
                    error: s("boom"),
                },
            },
            ResponseError::KafkaStorageError,
        ),
        (
            B::Store {
                source: StoreError::FlushTimedOut { timeout_ms: 5000 },
            },
            ResponseError::RequestTimedOut,
        ),
        (
            B::Store {
                source: StoreError::SegmentUnavailable {
                    base: 1 << 30,
                    reason: s("Too many open files"),
                },
            },
            ResponseError::KafkaStorageError,
        ),
        (
            B::Store {
                source: StoreError::TopicDeleted { topic: s("t") },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Compaction {
                source: CleanerError::Io {
                    path: "/d/c".into(),
                    source: io(),
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Compaction {
                source: CleanerError::Store {
                    path: "/d/c".into(),
                    source: StoreError::DiskFull { reason: s("full") },
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Compaction {
                source: CleanerError::InvalidConfig {
                    setting: "dedupe_buffer_bytes",
                    reason: s("0"),
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Compaction {
                source: CleanerError::OutOfMemory {
                    purpose: "offset map",
                    bytes: 1 << 40,
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Compaction {
                source: CleanerError::InvalidTopic {
                    topic: s("t t"),
                    reason: s("space"),
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Compaction {
                source: CleanerError::NotCached {
                    path: "/d/c".into(),
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Compaction {
                source: CleanerError::NotCompact { topic: s("t") },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Compaction {
                source: CleanerError::LeftoverSwap {
                    path: "/d/c.swap".into(),
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Compaction {
                source: CleanerError::CheckpointTooLarge { entries: 9, max: 1 },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::InvalidConfig {
                key: s("topics[0].partitions"),
                reason: s("0"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::CommitMetadataTooLarge {
                index: 0,
                len: 9,
                max: 1,
            },
            ResponseError::OffsetMetadataTooLarge,
        ),
        (
            B::StoreOpen {
                data_dir: "/d".into(),
                source: StoreError::Locked { path: "/d".into() },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::CompactedLogsOpen {
                data_dir: "/d".into(),
                source: CleanerError::NotCached { path: "/d".into() },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::ConsumerOffsets {
                topic: "__consumer_offsets",
                source: CleanerError::NotCached { path: "/d".into() },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::RegistryFile {
                path: "/d/topics.json".into(),
                reason: s("not JSON"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::DynamicConfigsFile {
                path: "/d/dynamic.json".into(),
                reason: s("not JSON"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::TransactionLog {
                reason: s("bad record"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::TransactionRefused {
                refusal: tidelog_broker::transactions::TxnRefusal::ProducerFenced {
                    epoch: 1,
                    current: 2,
                },
            },
            ResponseError::InvalidProducerEpoch,
        ),
        (
            B::TransactionRefused {
                refusal: tidelog_broker::transactions::TxnRefusal::InvalidState {
                    what: "write to a partition outside",
                    state: "Empty",
                },
            },
            ResponseError::InvalidTxnState,
        ),
        (
            B::DynamicConfigsWrite {
                source: StoreError::DiskFull { reason: s("full") },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::RegistryTopic {
                path: "/d/topics.json".into(),
                topic: s("t"),
                reason: s("bad"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::DeclaredTopic {
                topic: s("t"),
                reason: s("bad"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::Restore {
                data_dir: "/d".into(),
                reason: s("not empty"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::UnknownGroup { group: s("g") },
            ResponseError::GroupIdNotFound,
        ),
        (
            B::UnknownMember {
                group: s("g"),
                member_id: s("m"),
            },
            ResponseError::UnknownMemberId,
        ),
        (
            B::IllegalGeneration {
                group: s("g"),
                generation: 1,
                current: 2,
            },
            ResponseError::IllegalGeneration,
        ),
        (
            B::RebalanceInProgress { group: s("g") },
            ResponseError::RebalanceInProgress,
        ),
        (
            B::GroupHasMembers {
                group: s("g"),
                members: 1,
            },
            ResponseError::UnknownMemberId,
        ),
        (
            B::InconsistentGroupProtocol {
                group: s("g"),
                reason: s("mixed"),
            },
            ResponseError::InconsistentGroupProtocol,
        ),
        (
            B::MemberRefused {
                group: s("g"),
                refusal: tidelog_broker::error::MemberRefusal::FencedMemberEpoch {
                    received: 3,
                    current: 2,
                },
            },
            ResponseError::FencedMemberEpoch,
        ),
        (
            B::MemberRefused {
                group: s("g"),
                refusal: tidelog_broker::error::MemberRefusal::StaleMemberEpoch {
                    received: 1,
                    current: 2,
                },
            },
            ResponseError::StaleMemberEpoch,
        ),
        (
            B::MemberRefused {
                group: s("g"),
                refusal: tidelog_broker::error::MemberRefusal::UnsupportedAssignor {
                    assignor: s("sticky"),
                },
            },
            ResponseError::UnsupportedAssignor,
        ),
        (
            B::MemberRefused {
                group: s("g"),
                refusal: tidelog_broker::error::MemberRefusal::UnreleasedInstanceId {
                    instance_id: s("i"),
                },
            },
            ResponseError::UnreleasedInstanceId,
        ),
        (
            B::MemberRefused {
                group: s("g"),
                refusal: tidelog_broker::error::MemberRefusal::InvalidRegex { reason: s("(") },
            },
            ResponseError::InvalidRegularExpression,
        ),
        (
            B::MemberRefused {
                group: s("g"),
                refusal: tidelog_broker::error::MemberRefusal::InvalidRequest { reason: s("r") },
            },
            ResponseError::InvalidRequest,
        ),
        (
            B::MemberRefused {
                group: s("g"),
                refusal: tidelog_broker::error::MemberRefusal::NotConsumerGroup,
            },
            ResponseError::GroupIdNotFound,
        ),
        (
            B::FencedInstanceId {
                group: s("g"),
                instance_id: s("i"),
            },
            ResponseError::FencedInstanceId,
        ),
        (
            B::MemberIdRequired {
                group: s("g"),
                member_id: s("m"),
            },
            ResponseError::MemberIdRequired,
        ),
        (
            B::InvalidSessionTimeout {
                timeout_ms: 1,
                min_ms: 6000,
                max_ms: 1_800_000,
            },
            ResponseError::InvalidSessionTimeout,
        ),
        (
            B::UnknownConsumerInstance {
                group: s("g"),
                instance: s("i"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::ConsumerInstanceExists {
                group: s("g"),
                instance: s("i"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::ConsumerState {
                group: s("g"),
                instance: s("i"),
                reason: s("assigned"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::ConsumerConfig {
                field: s("format"),
                reason: s("bad"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::NoResetPosition {
                topic: s("t"),
                partition: 0,
                reason: s("no committed offset"),
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::GroupLimit {
                what: "members",
                len: 2,
                max: 1,
            },
            ResponseError::GroupMaxSizeReached,
        ),
        (
            B::NotAuthorized {
                operation: Operation::Write,
                resource_type: ResourceType::Topic,
                name: s("t"),
            },
            ResponseError::TopicAuthorizationFailed,
        ),
        (
            B::NotAuthorized {
                operation: Operation::Read,
                resource_type: ResourceType::Group,
                name: s("g"),
            },
            ResponseError::GroupAuthorizationFailed,
        ),
        (
            B::NotAuthorized {
                operation: Operation::Alter,
                resource_type: ResourceType::Cluster,
                name: s("kafka-cluster"),
            },
            ResponseError::ClusterAuthorizationFailed,
        ),
        (
            B::NotAuthorized {
                operation: Operation::Write,
                resource_type: ResourceType::TransactionalId,
                name: s("tx"),
            },
            ResponseError::TransactionalIdAuthorizationFailed,
        ),
        (
            B::Acl {
                source: AclError::EmptyResourceName,
            },
            ResponseError::InvalidRequest,
        ),
        (
            B::Acl {
                source: AclError::Write {
                    path: s("acls.json"),
                    reason: s("disk full"),
                },
            },
            ResponseError::UnknownServerError,
        ),
        (
            B::User {
                source: UserError::Exists { name: s("a") },
            },
            ResponseError::DuplicateResource,
        ),
        (
            B::User {
                source: UserError::NotFound { name: s("a") },
            },
            ResponseError::ResourceNotFound,
        ),
        (
            B::User {
                source: UserError::InvalidName { name: s("*") },
            },
            ResponseError::UnacceptableCredential,
        ),
    ];
    for (e, code) in cases {
        assert_eq!(broker_code(&e), code.code(), "{e:?}");
    }
}

/// Every admin refusal's code, and the messages the answers carried when
/// they were built by hand.
#[test]
fn every_refusal_has_its_code_and_message() {
    let cases = [
        (
            Refusal::Broker(B::InvalidPartitionCount {
                requested: 0,
                max: 10_000,
            }),
            ResponseError::InvalidPartitions,
            "0 is not a partition count in 1..=10000",
        ),
        (
            Refusal::NotReady,
            ResponseError::LeaderNotAvailable,
            "the broker is recovering",
        ),
        (
            Refusal::NotAuthorized {
                resource: AdminResource::Topic,
            },
            ResponseError::TopicAuthorizationFailed,
            "admin_token is set: log in with SASL/PLAIN, the token as password",
        ),
        (
            Refusal::NotAuthorized {
                resource: AdminResource::Cluster,
            },
            ResponseError::ClusterAuthorizationFailed,
            "admin_token is set: log in with SASL/PLAIN, the token as password",
        ),
        (
            Refusal::NotAuthorized {
                resource: AdminResource::Group,
            },
            ResponseError::GroupAuthorizationFailed,
            "admin_token is set: log in with SASL/PLAIN, the token as password",
        ),
        (
            Refusal::UnknownBroker { name: s("7") },
            ResponseError::InvalidRequest,
            "broker \"7\" does not exist; this is broker 0",
        ),
        (
            Refusal::UnknownResourceType { resource_type: 9 },
            ResponseError::InvalidRequest,
            "resource type 9 is not a topic (2), the broker (4) or a group (32)",
        ),
        (
            Refusal::Broker(B::ReplicationFactorImpossible {
                requested: 3,
                nodes: 1,
            }),
            ResponseError::InvalidReplicationFactor,
            "replication factor 3 is impossible: 1 node(s) hold one copy each; use 1..=1, or -1 or none for the default",
        ),
        (
            Refusal::Broker(B::InvalidReplicaAssignment {
                reason: "partition 0: broker 3 does not exist; this node is broker 0".into(),
            }),
            ResponseError::InvalidReplicaAssignment,
            "invalid replica assignment: partition 0: broker 3 does not exist; this node is broker 0",
        ),
        (
            Refusal::UnknownTopicId,
            ResponseError::UnknownTopicId,
            "no topic has this id",
        ),
        (
            Refusal::DuplicateTopic,
            ResponseError::InvalidRequest,
            "duplicate topic in request",
        ),
        (
            Refusal::Broker(B::PartitionCountNotIncreased {
                topic: "t".into(),
                current: 3,
                requested: 2,
            }),
            ResponseError::InvalidPartitions,
            "topic \"t\" has 3 partitions and 2 is not more; a partition count can only grow",
        ),
    ];
    for (refusal, code, message) in cases {
        assert_eq!(refusal.code(), code.code(), "{refusal:?}");
        assert_eq!(refusal.to_string(), message);
    }
}

/// Every way the store refuses a write for want of a usable disk (full,
/// a segment that cannot be made, a failed write on a read-only disk,
/// stalled dispatch) is KAFKA_STORAGE_ERROR, Kafka's answer for a log
/// dir that cannot take the write (issue 35), not UNKNOWN_SERVER_ERROR.
#[test]
fn store_refusals_are_kafka_storage_error() {
    let storage = ResponseError::KafkaStorageError.code();
    for source in [
        StoreError::DiskFull {
            reason: "full".into(),
        },
        StoreError::SegmentUnavailable {
            base: 1 << 20,
            reason: "Too many open files".into(),
        },
        StoreError::Poisoned {
            reason: "write to 00000000000000000000 failed: Read-only file system".into(),
        },
        StoreError::DispatchStalled {
            sink: "consume-queue".into(),
            failing_ms: 30_000,
            error: "boom".into(),
        },
    ] {
        let text = source.to_string();
        assert_eq!(
            broker_code(&BrokerError::Store { source }),
            storage,
            "{text}"
        );
    }
}

/// A node of a cluster that may not write (a replica, or a master past
/// its lease's margin, as the door or the store beneath says it) answers
/// each kind of API the code its clients look for the master again on:
/// a partition's NOT_LEADER_OR_FOLLOWER, a coordinator's NOT_COORDINATOR,
/// an admin API's NOT_CONTROLLER; any other refusal keeps its code.
#[test]
fn not_the_master_is_each_api_kinds_own_code() {
    let refusals = [
        B::NotMaster { master: Some(1) },
        B::NotMaster { master: None },
        B::Store {
            source: StoreError::Replica,
        },
    ];
    for e in &refusals {
        assert_eq!(
            broker_code(e),
            ResponseError::NotLeaderOrFollower.code(),
            "{e}"
        );
        assert_eq!(
            coordinator_code(e),
            ResponseError::NotCoordinator.code(),
            "{e}"
        );
        assert_eq!(
            controller_code(e),
            ResponseError::NotController.code(),
            "{e}"
        );
    }
    let txn =
        tidelog_broker::transactions::service::TxnError::Broker(B::NotMaster { master: Some(1) });
    assert_eq!(txn_error_code(&txn), ResponseError::NotCoordinator.code());
    let other = B::UnknownGroup { group: s("g") };
    assert_eq!(coordinator_code(&other), broker_code(&other));
    assert_eq!(controller_code(&other), broker_code(&other));
}
