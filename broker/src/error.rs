//! The broker's one error type, and the class each of its variants is of.
//!
//! Every front-end maps it in one place (the HTTP API in `api/src/error.rs`,
//! Kafka in `kafka/src/error.rs`), each with a match that names every
//! variant, so a new variant does not compile until both say what it
//! answers. [`BrokerError::kind`] sorts the variants into the classes
//! [`ErrorKind`] names (a client's mistake, something not found, a
//! conflict with the state, a refusal to retry, an internal failure); the
//! front-ends' codes are finer than the class, never across it.
//!
//! Invariants:
//! * No variant carries only a free-form message: a client mistake and an
//!   internal failure each say what went wrong in fields of their own
//!   (`InvalidPartitionCount { requested, max }`,
//!   `BlockingTaskFailed { task, source }`), so code branches on the
//!   variant, never on its text.
//! * A client mistake (`InvalidName`, `InvalidTopicConfig`,
//!   `UnknownTopic`, `UnknownPartition`, `TopicExists`, the record rules of
//!   a produce, ...) and an internal inconsistency (a bug or an I/O
//!   failure, to be logged) are different variants; the store's, the
//!   cleaner's and the remote tier's own errors pass through whole
//!   (`Store`, `Compaction`, `Tiered`) and [`BrokerError::kind`] looks into
//!   them.
//! * Start-up failures ([`Broker::open`](crate::Broker::open)) have
//!   variants of their own, which name the file or topic.
//! * This file is a leaf of the crate: it imports nothing from it (what a
//!   message needs, such as the internal topic's name, is a field).
//!
//! The validation variants keep their parts apart so that the server's
//! config loader can put them under its own key path
//! (`topics[1].configs.cleanup.policy: ...`) without parsing a string, and
//! a front-end adds its own field path (`records[3]`) to the record rules'
//! variants, which carry the record's index.

use std::path::PathBuf;

use tidelog_cleaner::CleanerError;
use tidelog_security::acl::{AclError, Operation, ResourceType};
use tidelog_security::users::UserError;
use tidelog_storage::StoreError;
use tidelog_tiered::TieredError;

/// The class of a [`BrokerError`]: what the caller can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The request can never succeed as sent (a bad name, value, count or
    /// record); the client must change it. HTTP 4xx.
    ClientMistake,
    /// What the request names (a topic, partition, group, member, consumer
    /// instance) does not exist.
    NotFound,
    /// The request conflicts with the state it finds (a topic that already
    /// exists, a stale generation, a group with members); it may succeed
    /// once that state changes.
    Conflict,
    /// The caller may not do this: an ACL (or the lack of one) denies
    /// the operation on the resource. HTTP 403, Kafka's
    /// `*_AUTHORIZATION_FAILED` of the resource's type.
    NotAuthorized,
    /// The server cannot take it now (a full disk, stalled dispatch, a
    /// remote tier out of reach, shutdown); the same request may succeed
    /// later.
    Retriable,
    /// A bug, damage or an I/O failure on the server's side, or a start-up
    /// failure; logged.
    Internal,
}

/// What a broker operation refused, and why.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// A partition count outside `1..=max` (a create, a topic of the
    /// registry file or broker.yaml).
    #[error("{requested} is not a partition count in 1..={max}")]
    InvalidPartitionCount { requested: i64, max: u32 },
    /// A delete of one of tidelog's own topics (`__consumer_offsets`).
    #[error("topic {topic:?} is internal and cannot be deleted")]
    InternalTopicNotDeletable { topic: String },
    /// A config change of one of tidelog's own topics.
    #[error("topic {topic:?} is internal; its configs are fixed")]
    InternalTopicConfigsFixed { topic: String },
    /// A partition count change of one of tidelog's own topics.
    #[error("topic {topic:?} is internal; its partition count is fixed")]
    InternalTopicPartitionsFixed { topic: String },
    /// CreatePartitions asked for no more partitions than the topic has:
    /// partitions are never removed (Kafka's INVALID_PARTITIONS).
    #[error("topic {topic:?} has {current} partitions and {requested} is not more; a partition count can only grow")]
    PartitionCountNotIncreased {
        topic: String,
        current: u32,
        requested: u32,
    },
    /// A `cleanup.policy` change between `delete` and a compacting policy
    /// on a topic with records (`registry::check_policy_change`):
    /// `partition` holds `records` records, and `loss` says what the
    /// change would lose.
    #[error("cleanup.policy of topic {topic:?} cannot change from {from} to {to} because the topic already has records (partition {partition} holds {records}): {loss}. The policy can change only while a topic is empty; create a new topic with cleanup.policy={to} and copy the records instead")]
    PolicyChangeWithRecords {
        topic: String,
        from: &'static str,
        to: &'static str,
        partition: u32,
        records: u64,
        loss: PolicyChangeLoss,
    },
    /// A compaction request or status of a topic whose `cleanup.policy`
    /// (`policy`) does not compact.
    #[error("topic {topic:?} has cleanup.policy={policy}; only topics whose policy contains compact are compacted")]
    TopicNotCompacted { topic: String, policy: &'static str },
    /// An offset reset naming a topic with an empty partition list (leave
    /// the list out to reset every partition).
    #[error("partitions is empty; leave it out to reset every partition of the topic")]
    ResetPartitionsEmpty,
    /// A join with an empty group instance id (absent is dynamic
    /// membership; empty is neither).
    #[error("a group instance id must not be empty")]
    GroupInstanceIdEmpty,
    /// A server-side join (the HTTP consumer instances') of a member whose
    /// protocol is not HTTP.
    #[error("only an HTTP member can be a server-side member")]
    ServerSideMemberNotHttp,
    /// Kafka's ConsumerProtocol bytes (an Assignment or a Subscription,
    /// `crate::consumer_protocol`) that do not decode: `byte` is where the
    /// reader stood, `reason` what the field there broke.
    #[error("consumer protocol assignment, byte {byte}: {reason}")]
    ConsumerProtocolMalformed { byte: usize, reason: String },
    /// A config operation a front-end computes a topic's changes with
    /// (Kafka's IncrementalAlterConfigs: SET, DELETE, APPEND, SUBTRACT)
    /// that cannot apply to config `name`.
    #[error("{}", problem.describe(name))]
    InvalidConfigOperation {
        name: String,
        problem: ConfigOperationProblem,
    },
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
    /// A config of a broker or a group (`crate::dynamic_configs`) that
    /// cannot be set or removed: config `name` of `resource` (`broker 0`,
    /// `the cluster-wide broker default`, `group "g"`), and why.
    #[error("{resource}: config {name:?}: {problem}")]
    DynamicConfig {
        resource: String,
        name: String,
        problem: DynamicConfigProblem,
    },
    /// Each node holds one copy: a topic's replication factor is at most
    /// the number of nodes, 1 alone (-1 or none asks for the default).
    #[error("replication factor {requested} is impossible: {nodes} node(s) hold one copy each; use 1..={nodes}, or -1 or none for the default")]
    ReplicationFactorImpossible { requested: i64, nodes: usize },
    /// A create's replica assignment this node cannot hold (Kafka's
    /// INVALID_REPLICA_ASSIGNMENT).
    #[error("invalid replica assignment: {reason}")]
    InvalidReplicaAssignment { reason: String },
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
    /// Records of a produce to a compact topic have no key: `index` is
    /// the first, `indexes` every one (Kafka's `record_errors`, KIP-467).
    #[error(
        "record {index} has no key, but topic {topic:?} is compacted (cleanup.policy={policy})"
    )]
    KeyRequired {
        index: usize,
        topic: String,
        policy: &'static str,
        indexes: Vec<usize>,
    },
    /// Records whose CreateTime lies further from the broker's clock than
    /// the topic allows (KIP-937: `config` is
    /// `message.timestamp.before.max.ms` or `after.max.ms`); `index` is
    /// the first, with its timestamp, `indexes` every one.
    #[error("record {index} has timestamp {timestamp_ms}, {distance_ms} ms {side} the broker's clock ({now_ms}); topic {topic:?} allows at most {max_ms} ({config})")]
    TimestampOutOfBounds {
        index: usize,
        topic: String,
        timestamp_ms: i64,
        now_ms: i64,
        distance_ms: u64,
        side: &'static str,
        max_ms: u64,
        config: &'static str,
        indexes: Vec<usize>,
    },
    /// An acks=all produce to a topic whose `min.insync.replicas` is more
    /// than the one replica a single node has (Kafka's
    /// NOT_ENOUGH_REPLICAS).
    #[error("topic {topic:?} has min.insync.replicas={required}, but this single node holds 1 replica; produce with acks 0 or 1, or set min.insync.replicas=1")]
    NotEnoughReplicas { topic: String, required: u32 },
    /// A write to a cluster's replica, or to a master that can no longer
    /// vouch for its lease (issue 39): the master takes it (Kafka's
    /// NOT_LEADER_OR_FOLLOWER; HTTP forwards writes to the master).
    #[error("this node is not the cluster's master{}; writes go to the master", master.map(|m| format!(" (the master is node {m})")).unwrap_or_default())]
    NotMaster { master: Option<u32> },
    /// An acks=all write when fewer nodes are in sync than it needs
    /// (`min.insync.replicas`, `cluster.min_insync_replicas`): refused
    /// before anything is written (Kafka's NOT_ENOUGH_REPLICAS).
    #[error("{in_sync} node(s) in sync, {required} needed for acks=all on topic {topic:?}; nothing was written")]
    TooFewInSync {
        topic: String,
        required: usize,
        in_sync: usize,
    },
    /// An acks=all write the in-sync set did not confirm within
    /// `cluster.replication_timeout_ms` (Kafka's NOT_ENOUGH_REPLICAS, HTTP
    /// 503 50306). It is written on the master and may still reach the
    /// replicas: a retry can find it twice.
    #[error("the in-sync set did not confirm the write within {timeout_ms} ms ({in_sync} in sync, {required} needed); it is written on the master, its replication unknown")]
    NotReplicated {
        required: usize,
        in_sync: usize,
        timeout_ms: u64,
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
    // Internal failures: a bug, or the system under the broker failing.
    /// A task on tokio's blocking pool panicked or was cancelled (`task`
    /// says which: `read task`, `start-up task`, ...): a bug.
    #[error("{task} failed: {source}")]
    BlockingTaskFailed {
        task: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
    /// A background thread (`tidelog-groups`, `tidelog-consumers`) could
    /// not be started.
    #[error("cannot start the {thread} thread: {source}")]
    ThreadStart {
        thread: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A remote read called outside the server's tokio runtime: a bug.
    #[error("a remote read needs the server's runtime: {source}")]
    NoRuntime {
        #[source]
        source: tokio::runtime::TryCurrentError,
    },
    /// The topic registry did not encode as JSON: a bug.
    #[error("cannot encode the topic registry: {source}")]
    RegistryEncode {
        #[source]
        source: serde_json::Error,
    },
    /// The topic registry file could not be written (atomically): the
    /// change is not made.
    #[error("cannot write the topic registry: {source}")]
    RegistryWrite {
        #[source]
        source: StoreError,
    },
    /// The dynamic configs file (`config/dynamic.json`) could not be
    /// written (atomically): the change is not made.
    #[error("cannot write the dynamic configs: {source}")]
    DynamicConfigsWrite {
        #[source]
        source: StoreError,
    },
    /// An offset commit's value did not encode as JSON: a bug.
    #[error("cannot encode an offset commit: {source}")]
    OffsetCommitEncode {
        #[source]
        source: serde_json::Error,
    },
    /// A deleted topic's compacted logs and cleaner checkpoint entries
    /// could not be removed.
    #[error("cannot remove the compacted logs of topic {topic:?}: {source}")]
    CompactedLogsRemove {
        topic: String,
        #[source]
        source: CleanerError,
    },
    /// A group the coordinator inserted under its lock was not there
    /// under the same lock: a bug.
    #[error("consumer group {group:?} vanished under the lock")]
    GroupVanished { group: String },
    /// A compacted log asked of a partition of a topic that does not
    /// compact: a bug (callers check the policy first).
    #[error("topic {topic:?} is not compacted")]
    NotCompactedPartition { topic: String },
    /// A topic config value that validation accepted and that then failed
    /// to convert: a bug, an error rather than a panic.
    #[error("validated topic config {name}={value:?} failed to convert")]
    CanonicalConfig { name: String, value: String },
    /// A consumer instance's records call that neither waited nor
    /// rendered: a bug.
    #[error("a records call neither waited nor rendered")]
    RecordsCallUnanswered,
    /// An upload to the remote tier whose manifest did not advance past
    /// `end`; the uploader stops rather than loop: a bug.
    #[error("{topic}-{partition}: the manifest did not advance past {end}")]
    ManifestStalled {
        topic: String,
        partition: u32,
        end: u64,
    },
    /// The remote tier failed: `Unavailable` (503/50304, Kafka
    /// KAFKA_STORAGE_ERROR) when the object store cannot be reached, else
    /// damage in the bucket or a bug (500, logged).
    #[error("{source}")]
    Tiered {
        #[from]
        source: TieredError,
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
        source: StoreError,
    },
    /// A compacted log or the LogCleaner failed; kept whole likewise.
    #[error("{source}")]
    Compaction {
        #[from]
        source: CleanerError,
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
        source: StoreError,
    },
    /// Start-up: the compacted logs could not be opened or prepared.
    #[error("compacted logs in {data_dir}: {source}")]
    CompactedLogsOpen {
        data_dir: PathBuf,
        #[source]
        source: CleanerError,
    },
    /// Start-up: consumer group offsets could not be read back from
    /// `topic` (the internal offsets topic, `__consumer_offsets`).
    #[error("cannot rebuild consumer offsets from {topic}: {source}")]
    ConsumerOffsets {
        topic: &'static str,
        #[source]
        source: CleanerError,
    },
    /// A transactional batch its producer's transaction does not allow
    /// (not open, another epoch, a partition it did not add): the
    /// coordinator's refusal, checked on the produce path.
    #[error("{refusal}")]
    TransactionRefused {
        #[source]
        refusal: crate::transactions::TxnRefusal,
    },
    /// Start-up: a `__transaction_state` record does not decode: a
    /// transaction's outcome is never guessed.
    #[error("cannot rebuild transactions from __transaction_state: {reason}")]
    TransactionLog { reason: String },
    /// Start-up: the topic registry file cannot be read or is not one.
    #[error("topic registry: {path}: {reason}")]
    RegistryFile { path: PathBuf, reason: String },
    /// Start-up: the dynamic configs file cannot be read, is not one, or
    /// holds a value an alter would refuse.
    #[error("dynamic configs: {path}: {reason}")]
    DynamicConfigsFile { path: PathBuf, reason: String },
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
    /// A KIP-848 group's refusal of a member (`coordinator::consumer`),
    /// one Kafka error each ([`MemberRefusal`]).
    #[error("consumer group {group:?}: {refusal}")]
    MemberRefused {
        group: String,
        refusal: MemberRefusal,
    },
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
    // Access control's refusals (`crate::access`).
    /// The principal may not do `operation` on the resource: an ACL
    /// denies it, or none allows it. Names the resource and the
    /// operation, never the principal's ACLs.
    #[error("not authorized to {} {} {name:?}", operation.name(), resource_type.name())]
    NotAuthorized {
        operation: Operation,
        resource_type: ResourceType,
        name: String,
    },
    /// An ACL or ACL filter that is refused, or the ACL file failed.
    #[error("{source}")]
    Acl {
        #[from]
        source: AclError,
    },
    /// A user change that is refused, or the users file failed.
    #[error("{source}")]
    User {
        #[from]
        source: UserError,
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

/// What a `cleanup.policy` change on a topic with records would lose
/// ([`BrokerError::PolicyChangeWithRecords`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PolicyChangeLoss {
    /// `delete` to a compacting policy: the records so far were never
    /// copied to a compacted log.
    #[error("records written under the delete policy were not copied to a compacted log, so a compact topic could not serve them")]
    NotCopied,
    /// A compacting policy to `delete`: the records live in compacted logs.
    #[error("its records live in compacted logs that a delete topic does not serve")]
    NotServed,
}

/// Why a config operation cannot apply to a config
/// ([`BrokerError::InvalidConfigOperation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigOperationProblem {
    /// SET without a value.
    SetWithoutValue,
    /// APPEND or SUBTRACT of a config that is not a list; `list_config`
    /// is the one list config.
    NotAList { list_config: &'static str },
    /// An operation code that is none of SET (0), DELETE (1), APPEND (2),
    /// SUBTRACT (3).
    UnknownOperation { operation: i8 },
}

impl ConfigOperationProblem {
    /// The message for config `name`.
    fn describe(&self, name: &str) -> String {
        match self {
            ConfigOperationProblem::SetWithoutValue => format!("SET {name} needs a value"),
            ConfigOperationProblem::NotAList { list_config } => format!(
                "APPEND and SUBTRACT need a list config; {name} is not one (only {list_config} is)"
            ),
            ConfigOperationProblem::UnknownOperation { operation } => {
                format!("config operation {operation} is not SET, DELETE, APPEND or SUBTRACT")
            }
        }
    }
}

/// Why a broker or group config cannot be set
/// ([`BrokerError::DynamicConfig`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynamicConfigProblem {
    /// A name that is no config of this kind of resource.
    #[error("unknown config{hint}")]
    Unknown { hint: String },
    /// A broker config Kafka reads only at start-up (Kafka: "cannot be
    /// updated dynamically"); tidelog's counterpart is in broker.yaml.
    #[error("not a dynamic config: it is read at start-up ({where_set})")]
    ReadOnly { where_set: String },
    /// A value the config does not take.
    #[error("{reason}")]
    InvalidValue { reason: String },
    /// A topic default some topic cannot take (its configs would be
    /// invalid together, or its cleanup policy would change while it holds
    /// records): set the topic's own value first.
    #[error("topic {topic:?} cannot take it: {reason}")]
    RefusedByTopic { topic: String, reason: String },
    /// Configs of more groups than the broker keeps.
    #[error("configs are kept for at most {max} groups; delete some first")]
    TooManyGroups { max: usize },
}

/// Why a KIP-848 group refused a member ([`BrokerError::MemberRefused`]);
/// each is one Kafka error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberRefusal {
    /// FENCED_MEMBER_EPOCH: the member must give up its partitions and
    /// join again with epoch 0.
    #[error("member epoch {received} is fenced (the member is at {current}): rejoin")]
    FencedMemberEpoch { received: i32, current: u32 },
    /// STALE_MEMBER_EPOCH: a commit with an older epoch than the member's.
    #[error("member epoch {received} is stale (the member is at {current})")]
    StaleMemberEpoch { received: i32, current: u32 },
    /// UNSUPPORTED_ASSIGNOR: not `uniform` or `range`.
    #[error("server assignor {assignor:?} is not supported (uniform, range)")]
    UnsupportedAssignor { assignor: String },
    /// UNRELEASED_INSTANCE_ID: another live member has the instance id.
    #[error("group instance id {instance_id:?} is still used by another member")]
    UnreleasedInstanceId { instance_id: String },
    /// INVALID_REGULAR_EXPRESSION: the subscription pattern.
    #[error("subscribed topic regex is invalid: {reason}")]
    InvalidRegex { reason: String },
    /// INVALID_REQUEST: a field the protocol requires is missing or wrong.
    #[error("{reason}")]
    InvalidRequest { reason: String },
    /// GROUP_ID_NOT_FOUND: the group is a classic group with members.
    #[error("the group is not a consumer group: it has classic-protocol members")]
    NotConsumerGroup,
}

impl BrokerError {
    /// The records of a produce this error names, in the batch's order
    /// (Kafka's `record_errors`, KIP-467): every keyless record of a
    /// compact topic, every timestamp out of bounds, the one record over a
    /// header limit; empty for an error of the whole request.
    pub fn record_indexes(&self) -> Vec<usize> {
        use BrokerError as B;
        match self {
            B::KeyRequired { indexes, .. } | B::TimestampOutOfBounds { indexes, .. } => {
                indexes.clone()
            }
            B::TooManyHeaders { index, .. } | B::HeaderNameTooLong { index, .. } => vec![*index],
            _ => Vec::new(),
        }
    }

    /// The class of this error. The store's, the cleaner's and the remote
    /// tier's errors are looked into, since one of them can be a client's
    /// mistake (a record over a limit), a refusal to retry (a full disk)
    /// or a failure (I/O, damage).
    pub fn kind(&self) -> ErrorKind {
        use BrokerError as B;
        match self {
            B::InvalidPartitionCount { .. }
            | B::ReplicationFactorImpossible { .. }
            | B::InvalidReplicaAssignment { .. }
            | B::InternalTopicNotDeletable { .. }
            | B::InternalTopicConfigsFixed { .. }
            | B::InternalTopicPartitionsFixed { .. }
            | B::PartitionCountNotIncreased { .. }
            | B::PolicyChangeWithRecords { .. }
            | B::TopicNotCompacted { .. }
            | B::ResetPartitionsEmpty
            | B::GroupInstanceIdEmpty
            | B::ServerSideMemberNotHttp
            | B::ConsumerProtocolMalformed { .. }
            | B::InvalidConfigOperation { .. }
            | B::InvalidName { .. }
            | B::InvalidTopicConfig { .. }
            | B::DynamicConfig { .. }
            | B::OffsetOutOfRange { .. }
            | B::RecordsNotDeletable { .. }
            | B::InternalTopic { .. }
            | B::PartitionMismatch { .. }
            | B::KeyRequired { .. }
            | B::TimestampOutOfBounds { .. }
            | B::NotEnoughReplicas { .. }
            | B::TooManyHeaders { .. }
            | B::HeaderNameTooLong { .. }
            | B::RecordTooLarge { .. }
            | B::TieringOff
            | B::CommitMetadataTooLarge { .. }
            | B::InvalidSessionTimeout { .. }
            | B::ConsumerConfig { .. }
            | B::NoResetPosition { .. }
            | B::GroupLimit { .. } => ErrorKind::ClientMistake,
            B::UnknownTopic { .. }
            | B::UnknownPartition { .. }
            | B::UnknownGroup { .. }
            | B::UnknownMember { .. }
            | B::UnknownConsumerInstance { .. } => ErrorKind::NotFound,
            B::TopicExists { .. }
            | B::ConsumerInstanceExists { .. }
            | B::IllegalGeneration { .. }
            | B::RebalanceInProgress { .. }
            | B::GroupHasMembers { .. }
            | B::InconsistentGroupProtocol { .. }
            | B::FencedInstanceId { .. }
            | B::MemberIdRequired { .. }
            | B::MemberRefused { .. }
            | B::ConsumerState { .. } => ErrorKind::Conflict,
            B::RemoteDeletePending { .. } => ErrorKind::Retriable,
            // Another node takes it, or the in-sync set recovers.
            B::NotMaster { .. } | B::TooFewInSync { .. } | B::NotReplicated { .. } => {
                ErrorKind::Retriable
            }
            B::NotAuthorized { .. } => ErrorKind::NotAuthorized,
            B::Acl { source } => acl_kind(source),
            B::User { source } => user_kind(source),
            B::Tiered { source } => tiered_kind(source),
            B::Store { source } => store_kind(source),
            B::Compaction { source } => cleaner_kind(source),
            B::TransactionRefused { refusal } => txn_kind(refusal),
            // Start-up failures: no request caused them.
            B::InvalidConfig { .. }
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
            | B::ManifestStalled { .. } => ErrorKind::Internal,
        }
    }

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

/// The class of an ACL error: the file's failures are the server's.
fn acl_kind(e: &AclError) -> ErrorKind {
    match e {
        AclError::File { .. } | AclError::Write { .. } => ErrorKind::Internal,
        AclError::EmptyResourceName
        | AclError::ResourceNameTooLong { .. }
        | AclError::ClusterName { .. }
        | AclError::Principal { .. }
        | AclError::Host { .. }
        | AclError::TooMany { .. } => ErrorKind::ClientMistake,
    }
}

/// The class of a user store error.
fn user_kind(e: &UserError) -> ErrorKind {
    match e {
        UserError::InvalidName { .. } | UserError::TooMany { .. } | UserError::Credential(_) => {
            ErrorKind::ClientMistake
        }
        UserError::Exists { .. } => ErrorKind::Conflict,
        UserError::NotFound { .. } | UserError::NoCredential { .. } => ErrorKind::NotFound,
        UserError::File { .. } | UserError::Write { .. } => ErrorKind::Internal,
    }
}

/// The class of a store error.
fn store_kind(e: &StoreError) -> ErrorKind {
    use StoreError as S;
    match e {
        // A record over a limit, a bad name, an idempotent producer out
        // of sequence: the request as sent.
        S::InvalidInput { .. } | S::RecordRefused { .. } | S::ProducerRefused { .. } => {
            ErrorKind::ClientMistake
        }
        S::TopicDeleted { .. } => ErrorKind::NotFound,
        // Writes refused until space is freed, dispatch recovers, a restart
        // runs recovery, or another server answers.
        S::DiskFull { .. }
        | S::SegmentUnavailable { .. }
        | S::DispatchStalled { .. }
        | S::FlushTimedOut { .. }
        | S::Poisoned { .. }
        | S::Closed
        // Another node (the master) takes the write.
        | S::Replica => ErrorKind::Retriable,
        S::Io { .. }
        | S::Corruption { .. }
        | S::Inconsistent { .. }
        | S::Locked { .. }
        | S::InvalidConfig { .. }
        // The replication stream between nodes, never a client's request.
        | S::CopyRefused { .. }
        | S::CutBelowLogStart { .. } => ErrorKind::Internal,
    }
}

/// The class of a transaction refusal on the produce path.
fn txn_kind(r: &crate::transactions::TxnRefusal) -> ErrorKind {
    use crate::transactions::TxnRefusal as T;
    match r {
        T::InvalidTimeout { .. } | T::InvalidRequest { .. } | T::Limit { .. } => {
            ErrorKind::ClientMistake
        }
        T::InvalidProducerIdMapping { .. } | T::ProducerFenced { .. } | T::InvalidState { .. } => {
            ErrorKind::Conflict
        }
        T::Concurrent => ErrorKind::Retriable,
    }
}

/// The class of a cleaner error.
fn cleaner_kind(e: &CleanerError) -> ErrorKind {
    use CleanerError as C;
    match e {
        C::Store { source, .. } => store_kind(source),
        C::InvalidTopic { .. } => ErrorKind::ClientMistake,
        // Deleted (or made non-compact) under the request.
        C::NotCompact { .. } => ErrorKind::NotFound,
        C::Io { .. }
        | C::Corruption { .. }
        | C::InvalidConfig { .. }
        | C::OutOfMemory { .. }
        | C::NotCached { .. }
        | C::LeftoverSwap { .. }
        | C::CheckpointTooLarge { .. } => ErrorKind::Internal,
    }
}

/// The class of a remote tier error.
fn tiered_kind(e: &TieredError) -> ErrorKind {
    use TieredError as T;
    match e {
        T::Unavailable { .. } => ErrorKind::Retriable,
        // Below the remote beginning: remote retention dropped them.
        T::OutOfRange { .. } => ErrorKind::NotFound,
        // Damage, a bad setting, the broker handing the tier what it
        // refuses, or two servers on one bucket prefix.
        T::Corrupt { .. } | T::Config { .. } | T::InvalidInput { .. } | T::Contended { .. } => {
            ErrorKind::Internal
        }
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
