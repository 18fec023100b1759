//! Tests of `error.rs`: the class of every variant (one table that
//! names each of them, and a check that it does), and the messages of the
//! typed variants that replaced free-form ones, which say what the old
//! messages said.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use tidelog_cleaner::CleanerError;
use tidelog_storage::{CorruptionKind, RecordProblem, SequenceProblem, StoreError};
use tidelog_tiered::object_store::Error as ObjectStoreError;
use tidelog_tiered::TieredError;

use super::*;
use tidelog_security::acl::{AclError, Operation, ResourceType};
use tidelog_security::users::UserError;
use BrokerError as B;

use crate::error_fixtures::{io, join_error, json_error, no_runtime, s};

/// Every variant, and every error of the store, the cleaner and the
/// remote tier that `kind` looks into (but the cleaner's `Corruption`,
/// which is classed with its `Io`), with its class.
fn every_variant() -> Vec<(BrokerError, ErrorKind)> {
    vec![
        (
            B::InvalidPartitionCount {
                requested: 0,
                max: 10_000,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::InternalTopicNotDeletable {
                topic: s("__consumer_offsets"),
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::InternalTopicConfigsFixed {
                topic: s("__consumer_offsets"),
            },
            ErrorKind::ClientMistake,
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
            ErrorKind::ClientMistake,
        ),
        (
            B::TopicNotCompacted {
                topic: s("t"),
                policy: "delete",
            },
            ErrorKind::ClientMistake,
        ),
        (B::ResetPartitionsEmpty, ErrorKind::ClientMistake),
        (B::GroupInstanceIdEmpty, ErrorKind::ClientMistake),
        (B::ServerSideMemberNotHttp, ErrorKind::ClientMistake),
        (
            B::ConsumerProtocolMalformed {
                byte: 6,
                reason: s("topic is not UTF-8"),
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::InvalidConfigOperation {
                name: s("retention.ms"),
                problem: ConfigOperationProblem::SetWithoutValue,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::InvalidName {
                kind: "topic",
                name: s("a/b"),
                reason: s("bad"),
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::InvalidName {
                kind: "consumer group",
                name: s("a/b"),
                reason: s("bad"),
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::InvalidTopicConfig {
                name: s("retention.ms"),
                reason: s("bad"),
            },
            ErrorKind::ClientMistake,
        ),
        (B::UnknownTopic { topic: s("t") }, ErrorKind::NotFound),
        (
            B::UnknownPartition {
                topic: s("t"),
                partition: 4,
                partitions: 4,
            },
            ErrorKind::NotFound,
        ),
        (B::TopicExists { topic: s("t") }, ErrorKind::Conflict),
        (
            B::OffsetOutOfRange {
                topic: s("t"),
                partition: 0,
                offset: 9,
                high_watermark: 3,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::RecordsNotDeletable {
                topic: s("t"),
                policy: "compact",
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::InternalTopic {
                topic: s("__consumer_offsets"),
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::PartitionMismatch {
                index: 3,
                own: 1,
                requested: 0,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::KeyRequired {
                index: 0,
                topic: s("t"),
                policy: "compact",
                indexes: vec![0, 3],
            },
            ErrorKind::ClientMistake,
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
            ErrorKind::ClientMistake,
        ),
        (
            B::NotEnoughReplicas {
                topic: s("t"),
                required: 2,
            },
            ErrorKind::ClientMistake,
        ),
        (B::NotMaster { master: Some(2) }, ErrorKind::Retriable),
        (
            B::TooFewInSync {
                topic: s("t"),
                required: 2,
                in_sync: 1,
            },
            ErrorKind::Retriable,
        ),
        (
            B::NotReplicated {
                required: 2,
                in_sync: 2,
                timeout_ms: 5000,
            },
            ErrorKind::Retriable,
        ),
        (
            B::TooManyHeaders {
                index: 0,
                count: 9,
                max: 1,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::HeaderNameTooLong {
                index: 0,
                header: 1,
                max: 8,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::RecordTooLarge {
                index: 0,
                size: 9,
                limit: 1,
                limit_source: s("max.message.bytes"),
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::BlockingTaskFailed {
                task: "read task",
                source: join_error(),
            },
            ErrorKind::Internal,
        ),
        (
            B::ThreadStart {
                thread: "tidelog-groups",
                source: io(),
            },
            ErrorKind::Internal,
        ),
        (
            B::NoRuntime {
                source: no_runtime(),
            },
            ErrorKind::Internal,
        ),
        (
            B::RegistryEncode {
                source: json_error(),
            },
            ErrorKind::Internal,
        ),
        (
            B::RegistryWrite {
                source: StoreError::DiskFull { reason: s("full") },
            },
            ErrorKind::Internal,
        ),
        (
            B::OffsetCommitEncode {
                source: json_error(),
            },
            ErrorKind::Internal,
        ),
        (
            B::CompactedLogsRemove {
                topic: s("t"),
                source: CleanerError::NotCompact { topic: s("t") },
            },
            ErrorKind::Internal,
        ),
        (B::GroupVanished { group: s("g") }, ErrorKind::Internal),
        (
            B::NotCompactedPartition { topic: s("t") },
            ErrorKind::Internal,
        ),
        (
            B::CanonicalConfig {
                name: s("segment.ms"),
                value: s("x"),
            },
            ErrorKind::Internal,
        ),
        (B::RecordsCallUnanswered, ErrorKind::Internal),
        (
            B::ManifestStalled {
                topic: s("t"),
                partition: 0,
                end: 7,
            },
            ErrorKind::Internal,
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
            ErrorKind::Retriable,
        ),
        (
            B::Tiered {
                source: TieredError::Corrupt {
                    what: s("object"),
                    detail: s("crc"),
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::Tiered {
                source: TieredError::Config { detail: s("url") },
            },
            ErrorKind::Internal,
        ),
        (
            B::Tiered {
                source: TieredError::InvalidInput { detail: s("order") },
            },
            ErrorKind::Internal,
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
            ErrorKind::NotFound,
        ),
        (
            B::Tiered {
                source: TieredError::Contended {
                    what: s("manifest"),
                    version: 3,
                    attempts: 5,
                },
            },
            ErrorKind::Internal,
        ),
        (B::TieringOff, ErrorKind::ClientMistake),
        (
            B::RemoteDeletePending { topic: s("t") },
            ErrorKind::Retriable,
        ),
        (
            B::Store {
                source: StoreError::Io {
                    path: "/d/f".into(),
                    source: io(),
                },
            },
            ErrorKind::Internal,
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
            ErrorKind::Internal,
        ),
        (
            B::Store {
                source: StoreError::Inconsistent {
                    file: "/d/commitlog".into(),
                    position: 4096,
                    reason: s("unit"),
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::Store {
                source: StoreError::InvalidInput { reason: s("x") },
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::Store {
                source: StoreError::RecordRefused {
                    index: 0,
                    problem: RecordProblem::TooLarge { size: 9, limit: 1 },
                },
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::Store {
                source: StoreError::RecordRefused {
                    index: 1,
                    problem: RecordProblem::TooManyHeaders { count: 9, max: 1 },
                },
            },
            ErrorKind::ClientMistake,
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
            ErrorKind::ClientMistake,
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
            ErrorKind::ClientMistake,
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
            ErrorKind::ClientMistake,
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
            ErrorKind::ClientMistake,
        ),
        (
            B::Store {
                source: StoreError::Poisoned { reason: s("fsync") },
            },
            ErrorKind::Retriable,
        ),
        (
            B::Store {
                source: StoreError::Locked { path: "/d".into() },
            },
            ErrorKind::Internal,
        ),
        (
            B::Store {
                source: StoreError::Closed,
            },
            ErrorKind::Retriable,
        ),
        (
            B::Store {
                source: StoreError::Replica,
            },
            ErrorKind::Retriable,
        ),
        (
            B::Store {
                source: StoreError::CopyRefused {
                    position: 8,
                    problem: tidelog_storage::CopyProblem::NotAtEnd { log_end: 0 },
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::Store {
                source: StoreError::CutBelowLogStart {
                    position: 0,
                    log_start: 4096,
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::Store {
                source: StoreError::DiskFull { reason: s("95%") },
            },
            ErrorKind::Retriable,
        ),
        (
            B::Store {
                source: StoreError::InvalidConfig {
                    key: "store.index_slots",
                    reason: s("too large"),
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::Store {
                source: StoreError::DispatchStalled {
                    sink: s("consume-queue"),
                    failing_ms: 30_000,
                    error: s("boom"),
                },
            },
            ErrorKind::Retriable,
        ),
        (
            B::Store {
                source: StoreError::FlushTimedOut { timeout_ms: 5000 },
            },
            ErrorKind::Retriable,
        ),
        (
            B::Store {
                source: StoreError::SegmentUnavailable {
                    base: 1 << 30,
                    reason: s("Too many open files"),
                },
            },
            ErrorKind::Retriable,
        ),
        (
            B::Store {
                source: StoreError::TopicDeleted { topic: s("t") },
            },
            ErrorKind::NotFound,
        ),
        (
            B::Compaction {
                source: CleanerError::Io {
                    path: "/d/c".into(),
                    source: io(),
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::Compaction {
                source: CleanerError::Store {
                    path: "/d/c".into(),
                    source: StoreError::DiskFull { reason: s("full") },
                },
            },
            ErrorKind::Retriable,
        ),
        (
            B::Compaction {
                source: CleanerError::InvalidConfig {
                    setting: "dedupe_buffer_bytes",
                    reason: s("0"),
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::Compaction {
                source: CleanerError::OutOfMemory {
                    purpose: "offset map",
                    bytes: 1 << 40,
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::Compaction {
                source: CleanerError::InvalidTopic {
                    topic: s("t t"),
                    reason: s("space"),
                },
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::Compaction {
                source: CleanerError::NotCached {
                    path: "/d/c".into(),
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::Compaction {
                source: CleanerError::NotCompact { topic: s("t") },
            },
            ErrorKind::NotFound,
        ),
        (
            B::Compaction {
                source: CleanerError::LeftoverSwap {
                    path: "/d/c.swap".into(),
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::Compaction {
                source: CleanerError::CheckpointTooLarge { entries: 9, max: 1 },
            },
            ErrorKind::Internal,
        ),
        (
            B::InvalidConfig {
                key: s("topics[0].partitions"),
                reason: s("0"),
            },
            ErrorKind::Internal,
        ),
        (
            B::CommitMetadataTooLarge {
                index: 0,
                len: 9,
                max: 1,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::StoreOpen {
                data_dir: "/d".into(),
                source: StoreError::Locked { path: "/d".into() },
            },
            ErrorKind::Internal,
        ),
        (
            B::CompactedLogsOpen {
                data_dir: "/d".into(),
                source: CleanerError::NotCached { path: "/d".into() },
            },
            ErrorKind::Internal,
        ),
        (
            B::ConsumerOffsets {
                topic: "__consumer_offsets",
                source: CleanerError::NotCached { path: "/d".into() },
            },
            ErrorKind::Internal,
        ),
        (
            B::TransactionLog {
                reason: s("bad record"),
            },
            ErrorKind::Internal,
        ),
        (
            B::TransactionRefused {
                refusal: crate::transactions::TxnRefusal::InvalidState {
                    what: "write to a partition outside",
                    state: "Empty",
                },
            },
            ErrorKind::Conflict,
        ),
        (
            B::TransactionRefused {
                refusal: crate::transactions::TxnRefusal::Concurrent,
            },
            ErrorKind::Retriable,
        ),
        (
            B::RegistryFile {
                path: "/d/topics.json".into(),
                reason: s("not JSON"),
            },
            ErrorKind::Internal,
        ),
        (
            B::DynamicConfigsFile {
                path: "/d/dynamic.json".into(),
                reason: s("not JSON"),
            },
            ErrorKind::Internal,
        ),
        (
            B::DynamicConfigsWrite {
                source: StoreError::DiskFull { reason: s("full") },
            },
            ErrorKind::Internal,
        ),
        (
            B::RegistryTopic {
                path: "/d/topics.json".into(),
                topic: s("t"),
                reason: s("bad"),
            },
            ErrorKind::Internal,
        ),
        (
            B::DeclaredTopic {
                topic: s("t"),
                reason: s("bad"),
            },
            ErrorKind::Internal,
        ),
        (
            B::Restore {
                data_dir: "/d".into(),
                reason: s("not empty"),
            },
            ErrorKind::Internal,
        ),
        (B::UnknownGroup { group: s("g") }, ErrorKind::NotFound),
        (
            B::UnknownMember {
                group: s("g"),
                member_id: s("m"),
            },
            ErrorKind::NotFound,
        ),
        (
            B::IllegalGeneration {
                group: s("g"),
                generation: 1,
                current: 2,
            },
            ErrorKind::Conflict,
        ),
        (
            B::RebalanceInProgress { group: s("g") },
            ErrorKind::Conflict,
        ),
        (
            B::GroupHasMembers {
                group: s("g"),
                members: 1,
            },
            ErrorKind::Conflict,
        ),
        (
            B::InconsistentGroupProtocol {
                group: s("g"),
                reason: s("mixed"),
            },
            ErrorKind::Conflict,
        ),
        (
            B::FencedInstanceId {
                group: s("g"),
                instance_id: s("i"),
            },
            ErrorKind::Conflict,
        ),
        (
            B::MemberIdRequired {
                group: s("g"),
                member_id: s("m"),
            },
            ErrorKind::Conflict,
        ),
        (
            B::MemberRefused {
                group: s("g"),
                refusal: crate::error::MemberRefusal::NotConsumerGroup,
            },
            ErrorKind::Conflict,
        ),
        (
            B::DynamicConfig {
                resource: s("broker 0"),
                name: s("log.retention.ms"),
                problem: crate::error::DynamicConfigProblem::InvalidValue {
                    reason: s("not a number"),
                },
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::InvalidSessionTimeout {
                timeout_ms: 1,
                min_ms: 6000,
                max_ms: 1_800_000,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::UnknownConsumerInstance {
                group: s("g"),
                instance: s("i"),
            },
            ErrorKind::NotFound,
        ),
        (
            B::ConsumerInstanceExists {
                group: s("g"),
                instance: s("i"),
            },
            ErrorKind::Conflict,
        ),
        (
            B::ConsumerState {
                group: s("g"),
                instance: s("i"),
                reason: s("assigned"),
            },
            ErrorKind::Conflict,
        ),
        (
            B::ConsumerConfig {
                field: s("format"),
                reason: s("bad"),
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::NoResetPosition {
                topic: s("t"),
                partition: 0,
                reason: s("no committed offset"),
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::GroupLimit {
                what: "members",
                len: 2,
                max: 1,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::ReplicationFactorImpossible {
                requested: 3,
                nodes: 1,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::InvalidReplicaAssignment {
                reason: s("broker 3"),
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::InternalTopicPartitionsFixed {
                topic: s("__consumer_offsets"),
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::PartitionCountNotIncreased {
                topic: s("t"),
                current: 3,
                requested: 2,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::NotAuthorized {
                operation: Operation::Write,
                resource_type: ResourceType::Topic,
                name: s("t"),
            },
            ErrorKind::NotAuthorized,
        ),
        (
            B::Acl {
                source: AclError::EmptyResourceName,
            },
            ErrorKind::ClientMistake,
        ),
        (
            B::Acl {
                source: AclError::Write {
                    path: s("acls.json"),
                    reason: s("disk full"),
                },
            },
            ErrorKind::Internal,
        ),
        (
            B::User {
                source: UserError::Exists { name: s("a") },
            },
            ErrorKind::Conflict,
        ),
        (
            B::User {
                source: UserError::NotFound { name: s("a") },
            },
            ErrorKind::NotFound,
        ),
        (
            B::User {
                source: UserError::InvalidName { name: s("*") },
            },
            ErrorKind::ClientMistake,
        ),
    ]
}

/// The position of `e`'s variant in [`every_variant`]'s order; a new
/// variant does not compile until it has one, and then
/// `every_variant_is_classed` fails until the table has it.
fn variant_index(e: &BrokerError) -> usize {
    match e {
        B::InvalidPartitionCount { .. } => 0,
        B::InternalTopicNotDeletable { .. } => 1,
        B::InternalTopicConfigsFixed { .. } => 2,
        B::PolicyChangeWithRecords { .. } => 3,
        B::TopicNotCompacted { .. } => 4,
        B::ResetPartitionsEmpty => 5,
        B::GroupInstanceIdEmpty => 6,
        B::ServerSideMemberNotHttp => 7,
        B::ConsumerProtocolMalformed { .. } => 8,
        B::InvalidConfigOperation { .. } => 9,
        B::InvalidName { .. } => 10,
        B::InvalidTopicConfig { .. } => 11,
        B::UnknownTopic { .. } => 12,
        B::UnknownPartition { .. } => 13,
        B::TopicExists { .. } => 14,
        B::OffsetOutOfRange { .. } => 15,
        B::RecordsNotDeletable { .. } => 16,
        B::InternalTopic { .. } => 17,
        B::PartitionMismatch { .. } => 18,
        B::KeyRequired { .. } => 19,
        B::TooManyHeaders { .. } => 20,
        B::HeaderNameTooLong { .. } => 21,
        B::RecordTooLarge { .. } => 22,
        B::BlockingTaskFailed { .. } => 23,
        B::ThreadStart { .. } => 24,
        B::NoRuntime { .. } => 25,
        B::RegistryEncode { .. } => 26,
        B::RegistryWrite { .. } => 27,
        B::OffsetCommitEncode { .. } => 28,
        B::CompactedLogsRemove { .. } => 29,
        B::GroupVanished { .. } => 30,
        B::NotCompactedPartition { .. } => 31,
        B::CanonicalConfig { .. } => 32,
        B::RecordsCallUnanswered => 33,
        B::ManifestStalled { .. } => 34,
        B::Tiered { .. } => 35,
        B::TieringOff => 36,
        B::RemoteDeletePending { .. } => 37,
        B::Store { .. } => 38,
        B::Compaction { .. } => 39,
        B::InvalidConfig { .. } => 40,
        B::CommitMetadataTooLarge { .. } => 41,
        B::StoreOpen { .. } => 42,
        B::CompactedLogsOpen { .. } => 43,
        B::ConsumerOffsets { .. } => 44,
        B::RegistryFile { .. } => 45,
        B::RegistryTopic { .. } => 46,
        B::DeclaredTopic { .. } => 47,
        B::Restore { .. } => 48,
        B::UnknownGroup { .. } => 49,
        B::UnknownMember { .. } => 50,
        B::IllegalGeneration { .. } => 51,
        B::RebalanceInProgress { .. } => 52,
        B::GroupHasMembers { .. } => 53,
        B::InconsistentGroupProtocol { .. } => 54,
        B::FencedInstanceId { .. } => 55,
        B::MemberIdRequired { .. } => 56,
        B::InvalidSessionTimeout { .. } => 57,
        B::UnknownConsumerInstance { .. } => 58,
        B::ConsumerInstanceExists { .. } => 59,
        B::ConsumerState { .. } => 60,
        B::ConsumerConfig { .. } => 61,
        B::NoResetPosition { .. } => 62,
        B::GroupLimit { .. } => 63,
        B::ReplicationFactorImpossible { .. } => 64,
        B::InvalidReplicaAssignment { .. } => 65,
        B::NotAuthorized { .. } => 66,
        B::Acl { .. } => 67,
        B::User { .. } => 68,
        B::InternalTopicPartitionsFixed { .. } => 69,
        B::PartitionCountNotIncreased { .. } => 70,
        B::TimestampOutOfBounds { .. } => 71,
        B::NotEnoughReplicas { .. } => 72,
        B::MemberRefused { .. } => 73,
        B::DynamicConfig { .. } => 74,
        B::DynamicConfigsWrite { .. } => 75,
        B::DynamicConfigsFile { .. } => 76,
        B::TransactionLog { .. } => 77,
        B::TransactionRefused { .. } => 78,
        B::NotMaster { .. } => 79,
        B::TooFewInSync { .. } => 80,
        B::NotReplicated { .. } => 81,
    }
}

const VARIANTS: usize = 79;

#[test]
fn every_variant_is_classed() {
    let mut seen = BTreeSet::new();
    for (e, kind) in every_variant() {
        seen.insert(variant_index(&e));
        assert_eq!(e.kind(), kind, "{e:?}");
    }
    let missing: Vec<usize> = (0..VARIANTS).filter(|i| !seen.contains(i)).collect();
    assert!(
        missing.is_empty(),
        "variants missing from the table: {missing:?}"
    );
}

/// Only an ACL's denial refuses a caller for who it is.
#[test]
fn only_a_denial_is_not_authorized() {
    for (e, kind) in every_variant() {
        let denial = matches!(e, B::NotAuthorized { .. });
        assert_eq!(kind == ErrorKind::NotAuthorized, denial, "{e:?}");
    }
}

/// The typed variants say what the free-form messages they replaced said
/// (front-ends answer the message; tests and docs quote them).
#[test]
fn typed_variants_keep_the_old_messages() {
    let cases = [
        (
            B::InvalidPartitionCount {
                requested: 0,
                max: 10_000,
            },
            "0 is not a partition count in 1..=10000",
        ),
        (
            B::InternalTopicNotDeletable {
                topic: s("__consumer_offsets"),
            },
            "topic \"__consumer_offsets\" is internal and cannot be deleted",
        ),
        (
            B::InternalTopicConfigsFixed {
                topic: s("__consumer_offsets"),
            },
            "topic \"__consumer_offsets\" is internal; its configs are fixed",
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
            "cleanup.policy of topic \"t\" cannot change from delete to compact because the topic already has records (partition 1 holds 3): records written under the delete policy were not copied to a compacted log, so a compact topic could not serve them. The policy can change only while a topic is empty; create a new topic with cleanup.policy=compact and copy the records instead",
        ),
        (
            B::PolicyChangeWithRecords {
                topic: s("t"),
                from: "compact",
                to: "delete",
                partition: 0,
                records: 1,
                loss: PolicyChangeLoss::NotServed,
            },
            "cleanup.policy of topic \"t\" cannot change from compact to delete because the topic already has records (partition 0 holds 1): its records live in compacted logs that a delete topic does not serve. The policy can change only while a topic is empty; create a new topic with cleanup.policy=delete and copy the records instead",
        ),
        (
            B::TopicNotCompacted {
                topic: s("events"),
                policy: "delete",
            },
            "topic \"events\" has cleanup.policy=delete; only topics whose policy contains compact are compacted",
        ),
        (
            B::ResetPartitionsEmpty,
            "partitions is empty; leave it out to reset every partition of the topic",
        ),
        (
            B::GroupInstanceIdEmpty,
            "a group instance id must not be empty",
        ),
        (
            B::ServerSideMemberNotHttp,
            "only an HTTP member can be a server-side member",
        ),
        (
            B::ConsumerProtocolMalformed {
                byte: 6,
                reason: s("topic is not UTF-8"),
            },
            "consumer protocol assignment, byte 6: topic is not UTF-8",
        ),
        (
            B::InvalidConfigOperation {
                name: s("retention.ms"),
                problem: ConfigOperationProblem::SetWithoutValue,
            },
            "SET retention.ms needs a value",
        ),
        (
            B::InvalidConfigOperation {
                name: s("retention.ms"),
                problem: ConfigOperationProblem::NotAList {
                    list_config: "cleanup.policy",
                },
            },
            "APPEND and SUBTRACT need a list config; retention.ms is not one (only cleanup.policy is)",
        ),
        (
            B::InvalidConfigOperation {
                name: s("retention.ms"),
                problem: ConfigOperationProblem::UnknownOperation { operation: 7 },
            },
            "config operation 7 is not SET, DELETE, APPEND or SUBTRACT",
        ),
        (
            B::ConsumerOffsets {
                topic: "__consumer_offsets",
                source: CleanerError::NotCompact { topic: s("__consumer_offsets") },
            },
            "cannot rebuild consumer offsets from __consumer_offsets: topic \"__consumer_offsets\" is not a compact topic",
        ),
        (
            B::GroupVanished { group: s("g") },
            "consumer group \"g\" vanished under the lock",
        ),
        (
            B::NotCompactedPartition { topic: s("t") },
            "topic \"t\" is not compacted",
        ),
        (
            B::CanonicalConfig {
                name: s("segment.ms"),
                value: s("x"),
            },
            "validated topic config segment.ms=\"x\" failed to convert",
        ),
        (
            B::RecordsCallUnanswered,
            "a records call neither waited nor rendered",
        ),
        (
            B::ManifestStalled {
                topic: s("t"),
                partition: 2,
                end: 7,
            },
            "t-2: the manifest did not advance past 7",
        ),
        (
            B::ThreadStart {
                thread: "tidelog-groups",
                source: io(),
            },
            "cannot start the tidelog-groups thread: boom",
        ),
    ];
    for (e, message) in cases {
        assert_eq!(e.to_string(), message);
    }
    let join = join_error();
    let expected = format!("read task failed: {join}");
    let task = B::BlockingTaskFailed {
        task: "read task",
        source: join,
    };
    assert_eq!(task.to_string(), expected);
    let encode = B::RegistryEncode {
        source: json_error(),
    };
    assert_eq!(
        encode.to_string(),
        format!("cannot encode the topic registry: {}", json_error())
    );
    let write = B::RegistryWrite {
        source: StoreError::DiskFull { reason: s("full") },
    };
    assert!(write
        .to_string()
        .starts_with("cannot write the topic registry: "));
    let runtime = B::NoRuntime {
        source: no_runtime(),
    };
    assert_eq!(
        runtime.to_string(),
        format!("a remote read needs the server's runtime: {}", no_runtime())
    );
}
