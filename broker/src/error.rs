//! The broker's one error type.
//!
//! Every front-end maps it in one place (the HTTP API in `api/src/error.rs`).
//! A client mistake (`Invalid`, `InvalidName`, `InvalidTopicConfig`,
//! `UnknownTopic`, `UnknownPartition`, `TopicExists`, the record rules of
//! a produce) and an internal inconsistency (`Internal`, to be logged) are
//! different variants; the store's and the cleaner's own errors pass
//! through whole (`Store`, `Compaction`). Start-up failures
//! ([`Broker::open`](crate::Broker::open)) have variants of their own,
//! which name the file or topic. The validation variants keep their parts
//! apart so that the server's config loader can put them under its own key
//! path (`topics[1].configs.cleanup.policy: ...`) without parsing a string,
//! and a front-end adds its own field path (`records[3]`) to the record
//! rules' variants, which carry the record's index.

use std::path::PathBuf;

use crate::registry::CONSUMER_OFFSETS_TOPIC;

/// What a broker operation refused, and why.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// A request that can never succeed as sent (a bad partition count, a
    /// change to an internal topic, a policy change on a topic with records).
    #[error("{message}")]
    Invalid { message: String },
    /// A topic or consumer group name that can never be valid.
    #[error("invalid {kind} name {name:?}: {reason}")]
    InvalidName {
        /// `"topic"` or `"consumer group"`.
        kind: &'static str,
        name: String,
        reason: String,
    },
    /// An unknown topic config name or a bad value for a known one.
    #[error("invalid topic config {name:?}: {reason}")]
    InvalidTopicConfig { name: String, reason: String },
    #[error("{requested} is not a partition count in 1..={max}")]
    InvalidPartitionCount { requested: i64, max: u32 },
    /// One node holds one copy: a topic's replication factor is 1 (-1 or
    /// none asks for that default).
    #[error("replication factor {requested} is impossible on a single node; use 1, or -1 or none for the default")]
    ReplicationFactorImpossible { requested: i64 },
    #[error("manual replica assignments are not supported on a single node")]
    ReplicaAssignmentUnsupported,
    #[error("topic {topic:?} does not exist")]
    UnknownTopic { topic: String },
    /// Says how many partitions there are so the client can see its
    /// off-by-one at a glance.
    #[error("partition {partition} of topic {topic:?} does not exist (topic has {partitions} partitions)")]
    UnknownPartition {
        topic: String,
        partition: u32,
        partitions: u32,
    },
    #[error("topic {topic:?} already exists")]
    TopicExists { topic: String },
    /// DeleteRecords to an offset past the partition's high watermark (or
    /// a negative one other than -1, Kafka's "the high watermark").
    #[error("offset {offset} of partition {partition} of topic {topic:?} is out of range: records can be deleted up to the high watermark {high_watermark}")]
    OffsetOutOfRange {
        topic: String,
        partition: u32,
        offset: i64,
        high_watermark: u64,
    },
    /// DeleteRecords on a topic whose `cleanup.policy` has no `delete`
    /// (Kafka's rule: compaction alone keeps the latest record per key).
    #[error("records of topic {topic:?} cannot be deleted: its cleanup.policy is {policy} (DeleteRecords needs delete in it)")]
    RecordsNotDeletable { topic: String, policy: &'static str },
    /// A produce to one of tidelog's own topics: only the broker writes
    /// them, so their records stay decodable.
    #[error("topic {topic:?} is internal")]
    InternalTopic { topic: String },
    /// Record `index` of a produce names a partition other than the one the
    /// whole request is for.
    #[error("record {index} is for partition {own}, but the request is for partition {requested}")]
    PartitionMismatch {
        index: usize,
        own: u32,
        requested: u32,
    },
    /// Record `index` of a produce to a compact topic has no key.
    #[error(
        "record {index} has no key, but topic {topic:?} is compacted (cleanup.policy={policy})"
    )]
    KeyRequired {
        index: usize,
        topic: String,
        policy: &'static str,
    },
    /// Record `index` has more headers than the store's format holds.
    #[error("record {index} has {count} headers; at most {max} are allowed")]
    TooManyHeaders {
        index: usize,
        count: usize,
        max: usize,
    },
    /// Header `header` of record `index` has a name longer than the store's
    /// format holds.
    #[error("record {index} header {header} has a name longer than {max} bytes")]
    HeaderNameTooLong {
        index: usize,
        header: usize,
        max: usize,
    },
    /// Record `index` is over the record limit; `limit_source` says whose
    /// limit it is (the topic's `max.message.bytes`, the store's).
    #[error("record {index} is {size} bytes (key + value + headers), over the {limit} of {limit_source}")]
    RecordTooLarge {
        index: usize,
        size: u64,
        limit: u64,
        limit_source: String,
    },
    /// A bug or an I/O failure; the message says which.
    #[error("{message}")]
    Internal { message: String },
    /// The remote tier failed: `Unavailable` (503/50304, Kafka
    /// KAFKA_STORAGE_ERROR) when the object store cannot be reached, else
    /// damage in the bucket or a bug (500, logged).
    #[error("{source}")]
    Tiered {
        #[from]
        source: tidelog_tiered::TieredError,
    },
    /// A tiered-storage call on a server without a remote tier (`tiered.url`
    /// unset).
    #[error("tiered storage is off on this server (tiered.url is unset)")]
    TieringOff,
    /// A topic of this name was deleted and its remote data is still being
    /// deleted: it cannot be created again until that is done (retry).
    #[error("topic {topic:?} was deleted and its data in the remote tier is still being deleted; retry the create later")]
    RemoteDeletePending { topic: String },
    /// The store refused or failed (disk full, I/O, a poisoned log, ...);
    /// kept whole so a front-end maps it as it maps the store's errors.
    #[error("{source}")]
    Store {
        #[from]
        source: tidelog_storage::StoreError,
    },
    /// A compacted log or the LogCleaner failed; kept whole likewise.
    #[error("{source}")]
    Compaction {
        #[from]
        source: tidelog_cleaner::CleanerError,
    },
    /// A setting of [`BrokerConfig`](crate::config::BrokerConfig) is
    /// refused; `key` is its path in broker.yaml
    /// (`topics[1].configs.cleanup.policy`).
    #[error("{key}: {reason}")]
    InvalidConfig { key: String, reason: String },
    /// Entry `index` of an offset commit carries more metadata than a
    /// commit keeps (Kafka's `offset.metadata.max.bytes`).
    #[error("offsets[{index}].metadata is {len} bytes; at most {max} are allowed")]
    CommitMetadataTooLarge {
        index: usize,
        len: usize,
        max: usize,
    },
    /// Start-up: the store could not be opened (recovery failed, the data
    /// dir is locked by another server, ...).
    #[error("cannot open the store in {data_dir}: {source}")]
    StoreOpen {
        data_dir: PathBuf,
        #[source]
        source: tidelog_storage::StoreError,
    },
    /// Start-up: the compacted logs could not be opened or prepared.
    #[error("compacted logs in {data_dir}: {source}")]
    CompactedLogsOpen {
        data_dir: PathBuf,
        #[source]
        source: tidelog_cleaner::CleanerError,
    },
    /// Start-up: consumer group offsets could not be read back.
    #[error("cannot rebuild consumer offsets from {CONSUMER_OFFSETS_TOPIC}: {source}")]
    ConsumerOffsets {
        #[source]
        source: tidelog_cleaner::CleanerError,
    },
    /// Start-up: the topic registry file cannot be read or is not one.
    #[error("topic registry: {path}: {reason}")]
    RegistryFile { path: PathBuf, reason: String },
    /// Start-up: a topic of the registry file is invalid.
    #[error("topic registry: {path}: topic {topic:?}: {reason}")]
    RegistryTopic {
        path: PathBuf,
        topic: String,
        reason: String,
    },
    /// Start-up: a topic of the config file (or the internal topic) cannot
    /// be created or changed as declared.
    #[error("topic registry: declared topic {topic:?}: {reason}")]
    DeclaredTopic { topic: String, reason: String },
    /// A restore from the remote tier ([`crate::restore`]) cannot go on:
    /// the data dir is not empty, what the bucket holds fails a check, or
    /// a file cannot be written. Nothing is served from a data dir whose
    /// restore did not finish.
    #[error("restore into {data_dir}: {reason}")]
    Restore { data_dir: PathBuf, reason: String },
    // The group coordinator's refusals (`crate::coordinator`). Kafka's
    // error names are given so the Kafka front-end maps them one to one;
    // over HTTP the membership ones are 409/40903.
    /// A group with neither members nor committed offsets (describe,
    /// reset and delete of the operator routes; Kafka: GROUP_ID_NOT_FOUND).
    #[error("consumer group {group:?} has no members and no committed offsets")]
    UnknownGroup { group: String },
    /// UNKNOWN_MEMBER_ID: the member left, expired or was never in the group.
    #[error("member {member_id:?} is not in consumer group {group:?}")]
    UnknownMember { group: String, member_id: String },
    /// ILLEGAL_GENERATION: a request from a member of another generation.
    #[error("generation {generation} of consumer group {group:?} is stale (the group is at generation {current})")]
    IllegalGeneration {
        group: String,
        generation: u32,
        current: u32,
    },
    /// REBALANCE_IN_PROGRESS: the member must rejoin first.
    #[error("consumer group {group:?} is rebalancing: rejoin the group")]
    RebalanceInProgress { group: String },
    /// A commit without a membership (or a reset, or a deletion) while the
    /// group has members.
    #[error("consumer group {group:?} has {members} members: only they may commit, and it cannot be reset or deleted")]
    GroupHasMembers { group: String, members: usize },
    /// INCONSISTENT_GROUP_PROTOCOL: HTTP and Kafka members mixed, or no
    /// protocol every member supports.
    #[error("consumer group {group:?}: {reason}")]
    InconsistentGroupProtocol { group: String, reason: String },
    /// FENCED_INSTANCE_ID: another member now holds this static instance id.
    #[error(
        "group instance id {instance_id:?} of consumer group {group:?} belongs to another member"
    )]
    FencedInstanceId { group: String, instance_id: String },
    /// MEMBER_ID_REQUIRED: rejoin with the member id given.
    #[error("consumer group {group:?}: rejoin with member id {member_id:?}")]
    MemberIdRequired { group: String, member_id: String },
    /// INVALID_SESSION_TIMEOUT: outside `groups.min/max_session_timeout_ms`.
    #[error("session timeout {timeout_ms} ms is outside [{min_ms}, {max_ms}] ms")]
    InvalidSessionTimeout {
        timeout_ms: u64,
        min_ms: u64,
        max_ms: u64,
    },
    // The HTTP consumer instances' refusals (`crate::consumers`).
    /// No consumer instance of this name in the group (deleted, expired,
    /// or never created).
    #[error("consumer instance {instance:?} of group {group:?} does not exist")]
    UnknownConsumerInstance { group: String, instance: String },
    #[error("consumer instance {instance:?} of group {group:?} already exists")]
    ConsumerInstanceExists { group: String, instance: String },
    /// A call the instance's state does not allow: subscribe and assign
    /// mixed, a commit or seek of a partition it does not hold.
    #[error("consumer instance {instance:?} of group {group:?}: {reason}")]
    ConsumerState {
        group: String,
        instance: String,
        reason: String,
    },
    /// A consumer instance's config (create) or subscription that can
    /// never be valid.
    #[error("consumer config {field:?}: {reason}")]
    ConsumerConfig { field: String, reason: String },
    /// A partition without a position to start from: no committed offset
    /// (or a position out of range) and `auto.offset.reset` is `none`.
    #[error("partition {partition} of topic {topic:?}: {reason}, and auto.offset.reset is none")]
    NoResetPosition {
        topic: String,
        partition: u32,
        reason: String,
    },
    /// GROUP_MAX_SIZE_REACHED, and the other bounds on what a client
    /// controls in a group (ids' lengths, subscription size, metadata and
    /// assignment bytes, groups per server).
    #[error("{what} is {len}, the maximum is {max}")]
    GroupLimit {
        what: &'static str,
        len: usize,
        max: usize,
    },
}

impl BrokerError {
    pub fn unknown_topic(topic: &str) -> Self {
        BrokerError::UnknownTopic {
            topic: topic.to_string(),
        }
    }

    pub fn unknown_partition(topic: &str, partition: u32, partitions: u32) -> Self {
        BrokerError::UnknownPartition {
            topic: topic.to_string(),
            partition,
            partitions,
        }
    }

    pub fn topic_exists(topic: &str) -> Self {
        BrokerError::TopicExists {
            topic: topic.to_string(),
        }
    }
}
