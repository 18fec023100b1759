//! The crate's errors and its one mapping of the broker's: a frame the
//! connection cannot go on after ([`FrameError`]: the connection is
//! closed), a record batch that fails its partition ([`RecordError`]:
//! CORRUPT_MESSAGE, nothing written), an admin API's refusal of one
//! resource ([`Refusal`]: its code and message in the answer), and
//! [`broker_code`], the Kafka error code of every [`BrokerError`].
//!
//! Invariant: every match here names every variant (of the broker's error
//! and of the store's and remote tier's errors it looks into), with no
//! wildcard arm, so a new variant does not compile until it has a code.

use crate::metrics::{ClosedFor, Refused};
use kafka_protocol::error::ResponseError;
use tidelog_broker::error::{DynamicConfigProblem, MemberRefusal};
use tidelog_broker::security::acl::{AclError, ResourceType};
use tidelog_broker::security::users::UserError;
use tidelog_broker::store::{SequenceProblem, StoreError, TieredError};
use tidelog_broker::BrokerError;

/// A record batch of a produce request that cannot be taken: its partition
/// answers CORRUPT_MESSAGE (or INVALID_RECORD) and nothing of it is written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("{what}: {needed} bytes needed, {left} left")]
    Truncated {
        what: &'static str,
        needed: usize,
        left: usize,
    },
    #[error("{what}: a varint longer than its type")]
    BadVarint { what: &'static str },
    #[error("{what} {value} is out of range")]
    BadLength { what: &'static str, value: i64 },
    #[error("record batch magic {magic} (only 2 is served)")]
    Magic { magic: i8 },
    #[error("record batch CRC32C {stored:#010x}, computed {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("compression codec {codec} is unknown")]
    Codec { codec: u8 },
    #[error("the {codec} batch does not decompress: {reason}")]
    Decompress { codec: &'static str, reason: String },
    #[error("the batch inflates past the {budget}-byte frame budget (kafka.max_request_bytes)")]
    Inflates { budget: usize },
    #[error("the batch's records inflate past {limit} bytes (kafka.max_batch_inflated_bytes)")]
    BatchTooLarge { limit: usize },
    #[error(
        "{count} records in a batch, {left} left of the request's kafka.max_records_per_request"
    )]
    TooManyRecords { count: usize, left: usize },
    #[error("the request's records would hold more memory than the in-flight byte budget has left (http.max_inflight_bytes, {used} of {limit} bytes held)")]
    OverBudget { used: u64, limit: u64 },
    #[error("record timestamp: base timestamp {base} plus delta {delta} overflows")]
    TimestampOverflow { base: i64, delta: i64 },
    #[error("record {source}")]
    Timestamp {
        source: tidelog_broker::produce::BadTimestamp,
    },
    #[error("{bytes} bytes follow the last record of the batch")]
    TrailingBytes { bytes: usize },
    #[error("a header name is not UTF-8")]
    HeaderName,
    #[error("a control batch is the transaction coordinator's to write, never a client's")]
    Transactional,
    #[error("an idempotent producer's batch must be its partition's only one ({batches} sent)")]
    ProducerBatches { batches: usize },
    #[error(
        "producer id {producer_id}, epoch {epoch}, base sequence {base_sequence} are out of range"
    )]
    BadProducer {
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
    },
}

impl RecordError {
    /// The partition's error code in the Produce answer.
    pub fn code(&self) -> i16 {
        use RecordError as R;
        let code = match self {
            R::Transactional | R::ProducerBatches { .. } | R::BadProducer { .. } => {
                ResponseError::InvalidRecord
            }
            // Kafka's answer to a batch over max.message.bytes; the Java
            // producer splits such a batch and retries, librdkafka and
            // kafka-python fail its messages (not retriable).
            R::BatchTooLarge { .. } | R::Inflates { .. } => ResponseError::MessageTooLarge,
            // Kafka's "message batch larger than the server accepts"; not
            // retriable in the clients either.
            R::TooManyRecords { .. } => ResponseError::RecordListTooLarge,
            // The server is short of memory for now: a retriable code
            // (every client retries REQUEST_TIMED_OUT), as HTTP's 503.
            R::OverBudget { .. } => ResponseError::RequestTimedOut,
            R::TimestampOverflow { .. } | R::Timestamp { .. } => ResponseError::InvalidTimestamp,
            R::Truncated { .. }
            | R::BadVarint { .. }
            | R::BadLength { .. }
            | R::Magic { .. }
            | R::Crc { .. }
            | R::Codec { .. }
            | R::Decompress { .. }
            | R::TrailingBytes { .. }
            | R::HeaderName => ResponseError::CorruptMessage,
        };
        code.code()
    }
}

impl RecordError {
    /// The memory bound that refused the batch, for `/metrics`; `None`
    /// for a batch that is wrong rather than too much.
    pub fn refused(&self) -> Option<Refused> {
        match self {
            RecordError::OverBudget { .. } => Some(Refused::ProduceInflightBytes),
            RecordError::BatchTooLarge { .. } | RecordError::Inflates { .. } => {
                Some(Refused::BatchInflatedBytes)
            }
            RecordError::TooManyRecords { .. } => Some(Refused::RecordsPerRequest),
            RecordError::Truncated { .. }
            | RecordError::BadVarint { .. }
            | RecordError::BadLength { .. }
            | RecordError::Magic { .. }
            | RecordError::Crc { .. }
            | RecordError::Codec { .. }
            | RecordError::Decompress { .. }
            | RecordError::TrailingBytes { .. }
            | RecordError::HeaderName
            | RecordError::Transactional
            | RecordError::ProducerBatches { .. }
            | RecordError::BadProducer { .. }
            | RecordError::TimestampOverflow { .. }
            | RecordError::Timestamp { .. } => None,
        }
    }
}

/// A frame after which the connection is closed (KAFKA.md "Bad input").
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame length {length} is over kafka.max_request_bytes {limit}")]
    TooLarge { length: i64, limit: usize },
    #[error("frame length {length} is over the whole in-flight byte budget {limit} (http.max_inflight_bytes)")]
    OverBudget { length: u64, limit: u64 },
    #[error("the request header does not decode: {reason}")]
    Header { reason: String },
    #[error("API key {key} is not served")]
    UnknownKey { key: i16 },
    #[error("{api} version {version} is not served ({min}..={max})")]
    Version {
        api: &'static str,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("the {api} v{version} request does not decode: {reason}")]
    Body {
        api: &'static str,
        version: i16,
        reason: String,
    },
    #[error("the {api} response does not encode: {reason}")]
    Encode { api: &'static str, reason: String },
    #[error("the connection failed: {source}")]
    Io {
        #[from]
        source: std::io::Error,
    },
    #[error("{what} timed out")]
    Timeout { what: &'static str },
    /// A bare SASL token (after a v0 handshake) that failed its login,
    /// or a deleted user's next request: Kafka closes such a connection.
    #[error("SASL authentication failed")]
    Authentication,
    /// A request other than ApiVersions and the SASL APIs on a SASL
    /// listener before a login: Kafka fails such a connection (an illegal
    /// SASL state).
    #[error("{api} before a SASL login on a {protocol} listener")]
    NotLoggedIn {
        api: &'static str,
        protocol: &'static str,
    },
    /// No login within `kafka.authentication_timeout_ms` on a SASL
    /// listener.
    #[error("no SASL login within kafka.authentication_timeout_ms ({timeout_ms} ms)")]
    LoginTimeout { timeout_ms: u128 },
}

impl FrameError {
    /// Why the connection it closes is counted as closed in `/metrics`;
    /// `None` for a socket that failed (a client gone, the ordinary end
    /// of many connections) and for an answer that does not encode (a
    /// bug, logged).
    pub fn closed_for(&self) -> Option<ClosedFor> {
        match self {
            FrameError::TooLarge { .. } | FrameError::OverBudget { .. } => {
                Some(ClosedFor::TooLarge)
            }
            FrameError::Header { .. } | FrameError::Body { .. } => Some(ClosedFor::Malformed),
            FrameError::UnknownKey { .. } => Some(ClosedFor::UnknownApi),
            FrameError::Version { .. } => Some(ClosedFor::Version),
            FrameError::Timeout { .. } => Some(ClosedFor::Timeout),
            FrameError::Authentication
            | FrameError::NotLoggedIn { .. }
            | FrameError::LoginTimeout { .. } => Some(ClosedFor::Authentication),
            FrameError::Encode { .. } | FrameError::Io { .. } => None,
        }
    }
}

/// The Kafka error code of a broker error, for a partition or topic of an
/// answer. Internal failures are logged here, once, with the request's
/// context left to the caller.
pub fn broker_code(e: &BrokerError) -> i16 {
    use BrokerError as B;
    let code = match e {
        B::UnknownTopic { .. } | B::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition
        }
        B::InvalidName {
            kind: "consumer group",
            ..
        } => ResponseError::InvalidGroupId,
        B::InvalidName { .. } | B::InternalTopic { .. } => ResponseError::InvalidTopicException,
        B::KeyRequired { .. } | B::TooManyHeaders { .. } | B::HeaderNameTooLong { .. } => {
            ResponseError::InvalidRecord
        }
        B::RecordTooLarge { .. } => ResponseError::MessageTooLarge,
        B::TimestampOutOfBounds { .. } => ResponseError::InvalidTimestamp,
        B::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas,
        // The cluster (issue 39): a replica, or a master that cannot vouch
        // for its lease: the client refreshes its metadata and finds the
        // master. Too few in sync, before or after the append: the
        // contract's NOT_ENOUGH_REPLICAS, retriable.
        B::NotMaster { .. } => ResponseError::NotLeaderOrFollower,
        B::TooFewInSync { .. } | B::NotReplicated { .. } => ResponseError::NotEnoughReplicas,
        // A transactional batch outside its producer's transaction.
        B::TransactionRefused { refusal } => {
            return txn_refusal_code(refusal, ResponseError::InvalidProducerEpoch)
        }
        // The admin APIs' refusals (KAFKA.md "Admin").
        B::TopicExists { .. } => ResponseError::TopicAlreadyExists,
        B::InvalidTopicConfig { .. } => ResponseError::InvalidConfig,
        // Kafka: a config only read at start-up, or more groups than kept,
        // is a request the broker will not take; a bad name or value, or
        // a default some topic cannot take, an invalid config.
        B::DynamicConfig { problem, .. } => match problem {
            DynamicConfigProblem::ReadOnly { .. } | DynamicConfigProblem::TooManyGroups { .. } => {
                ResponseError::InvalidRequest
            }
            DynamicConfigProblem::Unknown { .. }
            | DynamicConfigProblem::InvalidValue { .. }
            | DynamicConfigProblem::RefusedByTopic { .. } => ResponseError::InvalidConfig,
        },
        // Only CreateTopics asks for a count (auto-creation uses
        // default_partitions, checked at start-up).
        B::InvalidPartitionCount { .. } | B::PartitionCountNotIncreased { .. } => {
            ResponseError::InvalidPartitions
        }
        B::InternalTopicNotDeletable { .. }
        | B::InternalTopicConfigsFixed { .. }
        | B::InternalTopicPartitionsFixed { .. }
        | B::PolicyChangeWithRecords { .. }
        | B::TopicNotCompacted { .. }
        | B::ResetPartitionsEmpty
        | B::GroupInstanceIdEmpty
        | B::ServerSideMemberNotHttp
        | B::ConsumerProtocolMalformed { .. }
        | B::InvalidConfigOperation { .. } => ResponseError::InvalidRequest,
        B::InvalidReplicaAssignment { .. } => ResponseError::InvalidReplicaAssignment,
        B::ReplicationFactorImpossible { .. } => ResponseError::InvalidReplicationFactor,
        // DeleteRecords' refusals, as Kafka's.
        B::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        B::RecordsNotDeletable { .. } => ResponseError::PolicyViolation,
        // The coordinator's refusals (KAFKA.md "Groups").
        B::UnknownMember { .. } => ResponseError::UnknownMemberId,
        // A commit without membership (generation -1) to a group with
        // members: what Kafka answers it.
        B::GroupHasMembers { .. } => ResponseError::UnknownMemberId,
        B::IllegalGeneration { .. } => ResponseError::IllegalGeneration,
        B::RebalanceInProgress { .. } => ResponseError::RebalanceInProgress,
        // Also a Kafka member joining an HTTP group with members.
        B::InconsistentGroupProtocol { .. } => ResponseError::InconsistentGroupProtocol,
        B::FencedInstanceId { .. } => ResponseError::FencedInstanceId,
        B::MemberIdRequired { .. } => ResponseError::MemberIdRequired,
        // KIP-848 groups' refusals, one Kafka error each.
        B::MemberRefused { refusal, .. } => match refusal {
            MemberRefusal::FencedMemberEpoch { .. } => ResponseError::FencedMemberEpoch,
            MemberRefusal::StaleMemberEpoch { .. } => ResponseError::StaleMemberEpoch,
            MemberRefusal::UnsupportedAssignor { .. } => ResponseError::UnsupportedAssignor,
            MemberRefusal::UnreleasedInstanceId { .. } => ResponseError::UnreleasedInstanceId,
            MemberRefusal::InvalidRegex { .. } => ResponseError::InvalidRegularExpression,
            MemberRefusal::InvalidRequest { .. } => ResponseError::InvalidRequest,
            MemberRefusal::NotConsumerGroup => ResponseError::GroupIdNotFound,
        },
        B::InvalidSessionTimeout { .. } => ResponseError::InvalidSessionTimeout,
        B::GroupLimit { .. } => ResponseError::GroupMaxSizeReached,
        B::UnknownGroup { .. } => ResponseError::GroupIdNotFound,
        B::CommitMetadataTooLarge { .. } => ResponseError::OffsetMetadataTooLarge,
        // Tiered storage (KAFKA.md "Tiered storage"): the object store out
        // of reach fails that partition only, as Kafka's remote fetch does;
        // a create waiting for an old incarnation's remote deletion retries.
        B::Tiered { source } => match source {
            TieredError::Unavailable { .. } => ResponseError::KafkaStorageError,
            TieredError::OutOfRange { .. } => ResponseError::OffsetOutOfRange,
            TieredError::Corrupt { .. }
            | TieredError::Config { .. }
            | TieredError::InvalidInput { .. }
            | TieredError::Contended { .. } => unknown("broker", e),
        },
        // Access control (the security contract): a denial names the
        // resource's type, as Kafka's codes do.
        B::NotAuthorized { resource_type, .. } => match resource_type {
            ResourceType::Topic => ResponseError::TopicAuthorizationFailed,
            ResourceType::Group => ResponseError::GroupAuthorizationFailed,
            ResourceType::Cluster => ResponseError::ClusterAuthorizationFailed,
            ResourceType::TransactionalId => ResponseError::TransactionalIdAuthorizationFailed,
        },
        B::Acl { source } => match source {
            AclError::File { .. } | AclError::Write { .. } => unknown("broker", e),
            AclError::EmptyResourceName
            | AclError::ResourceNameTooLong { .. }
            | AclError::ClusterName { .. }
            | AclError::Principal { .. }
            | AclError::Host { .. }
            | AclError::TooMany { .. } => ResponseError::InvalidRequest,
        },
        B::User { source } => match source {
            UserError::NotFound { .. } | UserError::NoCredential { .. } => {
                ResponseError::ResourceNotFound
            }
            UserError::Exists { .. } => ResponseError::DuplicateResource,
            UserError::InvalidName { .. }
            | UserError::TooMany { .. }
            | UserError::Credential(_) => ResponseError::UnacceptableCredential,
            UserError::File { .. } | UserError::Write { .. } => unknown("broker", e),
        },
        // Kafka answers a create of a topic still marked for deletion so.
        B::RemoteDeletePending { .. } => ResponseError::TopicAlreadyExists,
        B::Store { source } => match source {
            // The store refuses writes: a full disk, a segment that cannot
            // be made, stalled dispatch, or a failed write or flush (a
            // read-only disk): Kafka's answer for a log dir that cannot
            // take the write.
            StoreError::DiskFull { .. }
            | StoreError::SegmentUnavailable { .. }
            | StoreError::DispatchStalled { .. }
            | StoreError::Poisoned { .. } => ResponseError::KafkaStorageError,
            StoreError::FlushTimedOut { .. } => ResponseError::RequestTimedOut,
            StoreError::Closed => ResponseError::LeaderNotAvailable,
            // A replica: the client refreshes its metadata and goes to
            // the master.
            StoreError::Replica => ResponseError::NotLeaderOrFollower,
            // Kafka's sequence rules (KAFKA.md "Idempotent producers").
            StoreError::ProducerRefused { problem, .. } => match problem {
                SequenceProblem::StaleEpoch { .. } => ResponseError::InvalidProducerEpoch,
                SequenceProblem::OutOfOrder { .. } => ResponseError::OutOfOrderSequenceNumber,
                SequenceProblem::UnknownProducer { .. } => ResponseError::UnknownProducerId,
                SequenceProblem::OutOfRange { .. } => ResponseError::InvalidRecord,
                // Kafka's transaction rules: a write outside the producer's
                // open transaction, or a partition with as many open as it
                // may hold (retriable: CONCURRENT_TRANSACTIONS).
                SequenceProblem::TransactionOpen { .. } => ResponseError::InvalidTxnState,
                SequenceProblem::TooManyTransactions { .. } => {
                    ResponseError::ConcurrentTransactions
                }
            },
            StoreError::Io { .. }
            | StoreError::Corruption { .. }
            | StoreError::Inconsistent { .. }
            | StoreError::InvalidInput { .. }
            | StoreError::RecordRefused { .. }
            | StoreError::Locked { .. }
            | StoreError::InvalidConfig { .. }
            | StoreError::TopicDeleted { .. }
            // The replication between nodes: no Kafka request reaches it.
            | StoreError::CopyRefused { .. }
            | StoreError::CutBelowLogStart { .. } => unknown("store", source),
        },
        // No Kafka request reaches these (HTTP's consumer instances, a
        // produce's record for another partition, tiered routes), or they
        // are failures: UNKNOWN_SERVER_ERROR, logged.
        B::PartitionMismatch { .. }
        | B::TieringOff
        | B::UnknownConsumerInstance { .. }
        | B::ConsumerInstanceExists { .. }
        | B::ConsumerState { .. }
        | B::ConsumerConfig { .. }
        | B::NoResetPosition { .. }
        | B::Compaction { .. }
        | B::InvalidConfig { .. }
        | B::StoreOpen { .. }
        | B::CompactedLogsOpen { .. }
        | B::ConsumerOffsets { .. }
        | B::TransactionLog { .. }
        | B::RegistryFile { .. }
        | B::DynamicConfigsFile { .. }
        | B::RegistryTopic { .. }
        | B::DeclaredTopic { .. }
        | B::Restore { .. }
        | B::BlockingTaskFailed { .. }
        | B::ThreadStart { .. }
        | B::NoRuntime { .. }
        | B::RegistryEncode { .. }
        | B::RegistryWrite { .. }
        | B::DynamicConfigsWrite { .. }
        | B::OffsetCommitEncode { .. }
        | B::CompactedLogsRemove { .. }
        | B::GroupVanished { .. }
        | B::NotCompactedPartition { .. }
        | B::CanonicalConfig { .. }
        | B::RecordsCallUnanswered
        | B::ManifestStalled { .. } => unknown("broker", e),
    };
    code.code()
}

/// The code of a group or transaction coordinator's refusal:
/// [`broker_code`], except that a node that may not write (a replica, or
/// a master past its lease's margin: `NotMaster`, or the store's own
/// refusal beneath) is NOT_COORDINATOR, the code Kafka clients look for
/// the coordinator again on; NOT_LEADER_OR_FOLLOWER is a partition's
/// answer, not one a coordinator call expects.
pub fn coordinator_code(e: &BrokerError) -> i16 {
    match e {
        BrokerError::NotMaster { .. }
        | BrokerError::Store {
            source: StoreError::Replica,
        } => ResponseError::NotCoordinator.code(),
        e => broker_code(e),
    }
}

/// The code of an admin API's refusal (a [`Refusal::Broker`]):
/// [`broker_code`], except that a node that may not write is
/// NOT_CONTROLLER: the admin clients send CreateTopics, DeleteTopics,
/// CreatePartitions and the config changes to the controller Metadata
/// names (the master), and on NOT_CONTROLLER refresh it and send again.
pub fn controller_code(e: &BrokerError) -> i16 {
    match e {
        BrokerError::NotMaster { .. }
        | BrokerError::Store {
            source: StoreError::Replica,
        } => ResponseError::NotController.code(),
        e => broker_code(e),
    }
}

/// UNKNOWN_SERVER_ERROR for a failure of `layer` (`"broker"` or
/// `"store"`), logged at error.
fn unknown(layer: &'static str, e: &dyn std::error::Error) -> ResponseError {
    tracing::error!(error = %e, "{layer} failure answered UNKNOWN_SERVER_ERROR");
    ResponseError::UnknownServerError
}

/// Which admin resource an unauthenticated connection was refused
/// ([`Refusal::NotAuthorized`]), and so which authorization error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminResource {
    /// A topic: TOPIC_AUTHORIZATION_FAILED.
    Topic,
    /// The broker resource: CLUSTER_AUTHORIZATION_FAILED.
    Cluster,
    /// A group's committed offsets (OffsetDelete):
    /// GROUP_AUTHORIZATION_FAILED.
    Group,
}

impl AdminResource {
    pub fn code(self) -> i16 {
        match self {
            AdminResource::Topic => ResponseError::TopicAuthorizationFailed.code(),
            AdminResource::Cluster => ResponseError::ClusterAuthorizationFailed.code(),
            AdminResource::Group => ResponseError::GroupAuthorizationFailed.code(),
        }
    }
}

/// Why an admin API refused one resource (a topic of CreateTopics or
/// DeleteTopics, a resource of DescribeConfigs, AlterConfigs or
/// IncrementalAlterConfigs): [`Refusal::code`] and the message are what
/// that resource's answer carries.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The broker refused: [`controller_code`] and its message.
    #[error("{0}")]
    Broker(#[from] BrokerError),
    /// Recovery has not finished: LEADER_NOT_AVAILABLE (retriable).
    #[error("the broker is recovering")]
    NotReady,
    /// `admin_token` is set and the connection did not log in with it.
    #[error("admin_token is set: log in with SASL/PLAIN, the token as password")]
    NotAuthorized { resource: AdminResource },
    /// A broker resource named other than `""` or `"0"`: INVALID_REQUEST.
    #[error("broker {name:?} does not exist; this is broker 0")]
    UnknownBroker { name: String },
    /// A config resource type other than a topic (2), the broker (4) or a
    /// group (32): INVALID_REQUEST.
    #[error("resource type {resource_type} is not a topic (2), the broker (4) or a group (32)")]
    UnknownResourceType { resource_type: i8 },
    /// A topic id (DeleteTopics v6) that names no topic: UNKNOWN_TOPIC_ID.
    #[error("no topic has this id")]
    UnknownTopicId,
    /// A topic named twice in one admin request (CreatePartitions):
    /// INVALID_REQUEST for each, as Kafka answers.
    #[error("duplicate topic in request")]
    DuplicateTopic,
}

impl Refusal {
    /// The error code the resource's answer carries.
    pub fn code(&self) -> i16 {
        match self {
            Refusal::Broker(e) => controller_code(e),
            Refusal::NotReady => ResponseError::LeaderNotAvailable.code(),
            Refusal::NotAuthorized { resource } => resource.code(),
            Refusal::UnknownBroker { .. }
            | Refusal::UnknownResourceType { .. }
            | Refusal::DuplicateTopic => ResponseError::InvalidRequest.code(),
            Refusal::UnknownTopicId => ResponseError::UnknownTopicId.code(),
        }
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;

/// A transaction coordinator call's refusal as Kafka answers it
/// (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
/// TxnOffsetCommit): a broker's refusal as [`coordinator_code`].
pub fn txn_error_code(e: &tidelog_broker::transactions::service::TxnError) -> i16 {
    use tidelog_broker::transactions::service::TxnError;
    match e {
        TxnError::Refused(r) => txn_refusal_code(r, ResponseError::ProducerFenced),
        TxnError::Broker(b) => coordinator_code(b),
    }
}

/// The coordinator's refusal `r`; a fenced producer is `fenced` (Produce
/// answers INVALID_PRODUCER_EPOCH, the transaction calls PRODUCER_FENCED).
pub fn txn_refusal_code(
    r: &tidelog_broker::transactions::TxnRefusal,
    fenced: ResponseError,
) -> i16 {
    use tidelog_broker::transactions::TxnRefusal as T;
    match r {
        T::InvalidTimeout { .. } => ResponseError::InvalidTransactionTimeout,
        T::InvalidProducerIdMapping { .. } => ResponseError::InvalidProducerIdMapping,
        T::ProducerFenced { .. } => fenced,
        T::Concurrent => ResponseError::ConcurrentTransactions,
        T::InvalidState { .. } => ResponseError::InvalidTxnState,
        T::InvalidRequest { .. } | T::Limit { .. } => ResponseError::InvalidRequest,
    }
    .code()
}
