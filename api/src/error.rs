//! Every error the HTTP API can answer, and its mapping to HTTP.
//!
//! This is the only place that turns an error into a status code and a body
//! (one file maps every HTTP error, so the codes cannot drift). The body
//! is always Confluent REST Proxy's `{"error_code": <int>, "message": "..."}`
//! and the HTTP status is always the code's first three digits, so a client
//! that only looks at the status and a client that only looks at the body
//! agree.
//!
//! Most variants carry a ready-made `message` (what was wrong and why). The
//! validation variants (`InvalidName`, `InvalidTopicConfig`) keep their parts
//! apart so that the server's config loader can put them under its own key
//! path (`topics[1].configs.cleanup.policy: ...`) without parsing a string.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// An API error: one variant per error code of API.md, plus two structured
/// forms of 40002 used by validators.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// 40002: a bad query parameter, path segment or admin body.
    #[error("{message}")]
    BadRequest { message: String },
    /// 40002: a topic or consumer group name that can never be valid.
    #[error("invalid {kind} name {name:?}: {reason}")]
    InvalidName {
        /// `"topic"` or `"consumer group"`.
        kind: &'static str,
        name: String,
        reason: String,
    },
    /// 40002: an unknown topic config name or a bad value for a known one.
    #[error("invalid topic config {name:?}: {reason}")]
    InvalidTopicConfig { name: String, reason: String },
    /// 40400: no such route or resource that has no code of its own
    /// (unknown cluster id, nothing at a physical offset). Not in API.md's
    /// list; the status is still the code's first three digits.
    #[error("{message}")]
    NotFound { message: String },
    /// 40500: the route exists but not with this method.
    #[error("{message}")]
    MethodNotAllowed { message: String },
    /// 40101: missing or wrong bearer token.
    #[error("{message}")]
    Unauthorized { message: String },
    /// 40301: the principal may not do this (an ACL denies it, or none
    /// allows it).
    #[error("{message}")]
    Forbidden { message: String },
    /// 40904: the user exists (`POST /v1/security/users`).
    #[error("{message}")]
    UserExists { message: String },
    /// 40404: no such user.
    #[error("{message}")]
    UnknownUser { message: String },
    /// 40401
    #[error("{message}")]
    UnknownTopic { message: String },
    /// 40402
    #[error("{message}")]
    UnknownPartition { message: String },
    /// 40405 (Confluent's code; 40403 is its unknown consumer instance)
    #[error("{message}")]
    UnknownConsumerGroup { message: String },
    /// 40403: no such consumer instance (deleted, expired, never created,
    /// or a group member the coordinator no longer holds).
    #[error("{message}")]
    UnknownConsumerInstance { message: String },
    /// 40601: a records call's `Accept` is not the instance's format.
    #[error("{message}")]
    NotAcceptable { message: String },
    /// 40901
    #[error("{message}")]
    TopicExists { message: String },
    /// 40902
    #[error("{message}")]
    ConsumerInstanceExists { message: String },
    /// 40903: subscribe and assign mixed, a commit of a stale generation or
    /// of a partition not held, a group of the other protocol, a group with
    /// members reset, deleted or committed to without membership.
    #[error("{message}")]
    IllegalConsumerState { message: String },
    /// 40801: the body did not arrive within `http.body_read_timeout_ms`.
    #[error("{message}")]
    RequestTimeout { message: String },
    /// 41301: body or a single record too large.
    #[error("{message}")]
    TooLarge { message: String },
    /// 41501: request content type is not one of the record formats.
    #[error("{message}")]
    UnsupportedContentType { message: String },
    /// 42201: key invalid, or missing where one is required (compact topic).
    #[error("{message}")]
    KeyInvalid { message: String },
    /// 42202
    #[error("{message}")]
    ValueInvalid { message: String },
    /// 42203: stored bytes cannot be rendered in the requested format.
    #[error("{message}")]
    JsonConversion { message: String },
    /// 42204
    #[error("{message}")]
    BadConsumerConfig { message: String },
    /// 42205: no committed offset (or out of range) and
    /// `auto.offset.reset: none`.
    #[error("{message}")]
    NoResetPosition { message: String },
    /// 42206: body is not JSON, lacks `records`, has bad base64, ...
    #[error("{message}")]
    PayloadMalformed { message: String },
    /// 42901
    #[error("{message}")]
    TooManyRequests { message: String },
    /// 50001: a bug or an I/O failure; the message says which.
    #[error("{message}")]
    Internal { message: String },
    /// 50301: recovery has not finished.
    #[error("{message}")]
    NotReady { message: String },
    /// 50305: the body would pass `http.max_inflight_bytes`, the budget of
    /// request bytes all connections may hold in memory; retry shortly.
    #[error("{message}")]
    InflightBytesExhausted { message: String },
    /// 50307: a fetch answer would pass `http.max_inflight_response_bytes`,
    /// the budget of rendered answers not yet written; retry shortly.
    #[error("{message}")]
    AnswerBytesExhausted { message: String },
    /// 41401: the request target is longer than the server reads (checked
    /// before routing, by the listener).
    #[error("{message}")]
    UriTooLong { message: String },
    /// 43101: too many header fields, or a request head larger than the
    /// server reads (checked before routing, by the listener).
    #[error("{message}")]
    HeadersTooLarge { message: String },
    /// 50306: a cluster's acks=all write (every HTTP produce) with too few
    /// nodes in sync, or not confirmed by the in-sync set within
    /// `cluster.replication_timeout_ms` (the cluster contract's code).
    #[error("{message}")]
    NotEnoughReplicas { message: String },
    /// 50302: dispatch has failed for `store.dispatch_stall_ms`; produce is
    /// refused, since its records would not become visible.
    #[error("{message}")]
    DispatchStalled { message: String },
    /// 50303: `flush: sync` and the flush did not finish within
    /// `store.sync_flush_timeout_ms`: appended, durability unknown.
    #[error("{message}")]
    FlushTimedOut { message: String },
    /// 50304: a read below a tiered partition's local beginning, and the
    /// remote tier (the object store) cannot be reached; local offsets are
    /// still served. Also a create of a topic whose earlier incarnation's
    /// remote data is still being deleted (retry later).
    #[error("{message}")]
    RemoteUnavailable { message: String },
    /// 50701: disk above `retention.disk_full_ratio`; writes refused.
    #[error("{message}")]
    DiskFull { message: String },
}

impl ApiError {
    /// 40401 for `topic`, with the message every route should use.
    pub fn unknown_topic(topic: &str) -> Self {
        ApiError::UnknownTopic {
            message: format!("topic {topic:?} does not exist"),
        }
    }

    /// 40402 for `partition` of `topic`, saying how many partitions there are
    /// so the client can see its off-by-one at a glance.
    pub fn unknown_partition(topic: &str, partition: u32, partitions: u32) -> Self {
        ApiError::UnknownPartition {
            message: format!(
                "partition {partition} of topic {topic:?} does not exist (topic has {partitions} partitions)"
            ),
        }
    }

    /// 40405 for `group`.
    pub fn unknown_consumer_group(group: &str) -> Self {
        ApiError::UnknownConsumerGroup {
            message: format!("consumer group {group:?} has no committed offsets"),
        }
    }

    /// 40901 for `topic`.
    pub fn topic_exists(topic: &str) -> Self {
        ApiError::TopicExists {
            message: format!("topic {topic:?} already exists"),
        }
    }

    /// Confluent's five-digit code: HTTP status × 100 + a sub-code.
    pub fn error_code(&self) -> u32 {
        match self {
            ApiError::BadRequest { .. }
            | ApiError::InvalidName { .. }
            | ApiError::InvalidTopicConfig { .. } => 40002,
            ApiError::Unauthorized { .. } => 40101,
            ApiError::Forbidden { .. } => 40301,
            ApiError::UserExists { .. } => 40904,
            ApiError::UnknownUser { .. } => 40404,
            ApiError::NotFound { .. } => 40400,
            ApiError::MethodNotAllowed { .. } => 40500,
            ApiError::UnknownTopic { .. } => 40401,
            ApiError::UnknownPartition { .. } => 40402,
            ApiError::UnknownConsumerInstance { .. } => 40403,
            ApiError::UnknownConsumerGroup { .. } => 40405,
            ApiError::NotAcceptable { .. } => 40601,
            ApiError::TopicExists { .. } => 40901,
            ApiError::ConsumerInstanceExists { .. } => 40902,
            ApiError::IllegalConsumerState { .. } => 40903,
            ApiError::BadConsumerConfig { .. } => 42204,
            ApiError::NoResetPosition { .. } => 42205,
            ApiError::RequestTimeout { .. } => 40801,
            ApiError::TooLarge { .. } => 41301,
            ApiError::UnsupportedContentType { .. } => 41501,
            ApiError::KeyInvalid { .. } => 42201,
            ApiError::ValueInvalid { .. } => 42202,
            ApiError::JsonConversion { .. } => 42203,
            ApiError::PayloadMalformed { .. } => 42206,
            ApiError::TooManyRequests { .. } => 42901,
            ApiError::Internal { .. } => 50001,
            ApiError::NotReady { .. } => 50301,
            ApiError::InflightBytesExhausted { .. } => 50305,
            ApiError::AnswerBytesExhausted { .. } => 50307,
            ApiError::NotEnoughReplicas { .. } => 50306,
            ApiError::UriTooLong { .. } => 41401,
            ApiError::HeadersTooLarge { .. } => 43101,
            ApiError::DispatchStalled { .. } => 50302,
            ApiError::FlushTimedOut { .. } => 50303,
            ApiError::RemoteUnavailable { .. } => 50304,
            ApiError::DiskFull { .. } => 50701,
        }
    }

    /// The HTTP status: the error code's first three digits.
    pub fn status(&self) -> StatusCode {
        match self.error_code() / 100 {
            400 => StatusCode::BAD_REQUEST,
            401 => StatusCode::UNAUTHORIZED,
            403 => StatusCode::FORBIDDEN,
            404 => StatusCode::NOT_FOUND,
            405 => StatusCode::METHOD_NOT_ALLOWED,
            406 => StatusCode::NOT_ACCEPTABLE,
            408 => StatusCode::REQUEST_TIMEOUT,
            409 => StatusCode::CONFLICT,
            413 => StatusCode::PAYLOAD_TOO_LARGE,
            414 => StatusCode::URI_TOO_LONG,
            415 => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            422 => StatusCode::UNPROCESSABLE_ENTITY,
            429 => StatusCode::TOO_MANY_REQUESTS,
            431 => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            503 => StatusCode::SERVICE_UNAVAILABLE,
            507 => StatusCode::INSUFFICIENT_STORAGE,
            // 500 and any code added without a status arm above: an internal
            // error is the honest answer, and the unit test catches the miss.
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON body, `{"error_code":<int>,"message":"..."}`.
    pub fn body(&self) -> String {
        // `Value`'s Display cannot fail, unlike `to_vec` on arbitrary types.
        serde_json::json!({
            "error_code": self.error_code(),
            "message": self.to_string(),
        })
        .to_string()
    }
}

/// The one mapping of storage errors to API errors.
///
/// * `RecordRefused`: 41301 for a record over a limit, 42206 for bad
///   headers; a produce gets the broker's record variants instead (they say
///   whose limit), so this is the store's own segment bound or a caller
///   other than produce.
/// * `DiskFull`: 50701, writes refused until space is freed (by the
///   disk-full ratio, the store's reserve, or a file the store could not
///   create); `SegmentUnavailable` (the next CommitLog segment cannot be
///   made: no file descriptors, or creation hung): 50701 with its own
///   message, writes resume once a creation succeeds.
/// * `Poisoned`: 50301 with the store's message: a failed write or flush
///   (a read-only or failing disk) made the store refuse writes until a
///   restart runs recovery; `/status/ready` answers the same.
/// * `Closed`: 50301, the server is shutting down; a retry elsewhere or later
///   will do.
/// * `InvalidInput`: 40002; the API validates first, so reaching this means a
///   limit the store has and the API does not know about. `ProducerRefused`
///   (a Kafka idempotent producer's sequence; HTTP sends none): 40002.
/// * `DispatchStalled`: 50302; `FlushTimedOut`: 50303 (appended, durability
///   unknown: the client may retry, and may then find the record twice).
/// * `InvalidConfig`: 50001; only `Store::open` returns it.
/// * `Io`, `Corruption`, `Inconsistent`, `Locked`: 50001 with
///   the store's own message, which names the file and position (logged at
///   warn with every 5xx answer). `Inconsistent` is the store's structures
///   disagreeing (a queue unit and its record): a bug or damage, never the
///   client's mistake.
/// * `CopyRefused`, `CutBelowLogStart`: 50001; they belong to the
///   replication between nodes and never answer a client's request.
/// * `Replica`: 50301, not ready for writes here (writes are forwarded
///   to the master before they reach a replica's store).
impl From<tidelog_broker::store::StoreError> for ApiError {
    fn from(e: tidelog_broker::store::StoreError) -> Self {
        use tidelog_broker::store::{RecordProblem, StoreError as S};
        let message = e.to_string();
        match e {
            S::RecordRefused { problem, .. } => match problem {
                RecordProblem::TooLarge { .. } | RecordProblem::LargerThanSegment { .. } => {
                    ApiError::TooLarge { message }
                }
                RecordProblem::TooManyHeaders { .. } | RecordProblem::HeaderNameTooLong { .. } => {
                    ApiError::PayloadMalformed { message }
                }
            },
            S::DiskFull { .. } | S::SegmentUnavailable { .. } => ApiError::DiskFull { message },
            // A failed write or flush (a read-only or failing disk): the
            // store refuses every write until a restart runs recovery, so
            // the server is not ready for writes, as `/status/ready` says.
            S::Poisoned { .. } => ApiError::NotReady { message },
            S::Closed => ApiError::NotReady {
                message: format!("{message}: the server is shutting down"),
            },
            // A write that reached a replica's store (HTTP forwards writes
            // to the master first): not ready for it here.
            S::Replica => ApiError::NotReady { message },
            S::InvalidInput { .. } => ApiError::BadRequest { message },
            // Only a Kafka idempotent producer's batch carries a sequence;
            // HTTP sends none, so reaching this is a caller's mistake.
            S::ProducerRefused { .. } => ApiError::BadRequest { message },
            S::DispatchStalled { .. } => ApiError::DispatchStalled { message },
            S::FlushTimedOut { .. } => ApiError::FlushTimedOut { message },
            S::TopicDeleted { topic } => ApiError::unknown_topic(&topic),
            S::Io { .. }
            | S::Corruption { .. }
            | S::Inconsistent { .. }
            | S::Locked { .. }
            | S::InvalidConfig { .. }
            | S::CopyRefused { .. }
            | S::CutBelowLogStart { .. } => ApiError::Internal { message },
        }
    }
}

/// The broker's errors, one HTTP code each: a refused request is 40002, an
/// unknown topic or partition 40401/40402, an existing topic 40901, an
/// unknown consumer group 40405, the coordinator's refusals 40403 (a
/// member that is gone), 40903 (generation, membership, protocol) and
/// 42901 (group bounds), a bug or I/O failure 50001, the store's errors as
/// the store's. The validation
/// variants keep their parts. The record rules of a produce: a record for
/// another partition than the route's, too many headers or a header name
/// too long are 42206, a missing key on a compact topic 42201, a record
/// over the limit 41301, each message naming the record as the body does
/// (`records[3]`); a produce to an internal topic is 40002. Start-up
/// failures never reach a request: 50001 if one did. The match names every
/// variant (and every remote tier error), so a new one does not compile
/// until it has a code here.
/// The other records a refusal names beside the first, for its message:
/// `" (and records[4], records[7])"`, at most ten named.
fn others(indexes: &[usize]) -> String {
    let rest = indexes.get(1..).unwrap_or_default();
    if rest.is_empty() {
        return String::new();
    }
    let named: Vec<String> = rest
        .iter()
        .take(10)
        .map(|i| format!("records[{i}]"))
        .collect();
    let more = rest.len().saturating_sub(10);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(" (and {}{more})", named.join(", "))
}

impl From<tidelog_broker::BrokerError> for ApiError {
    fn from(e: tidelog_broker::BrokerError) -> Self {
        use tidelog_broker::security::acl::AclError;
        use tidelog_broker::security::users::UserError;
        use tidelog_broker::store::TieredError as T;
        use tidelog_broker::BrokerError as B;
        let message = e.to_string();
        match e {
            // Requests that can never succeed as sent.
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
            | B::CommitMetadataTooLarge { .. } => ApiError::BadRequest { message },
            // Kafka only (IncrementalAlterConfigs' operations): HTTP's
            // config routes send values, not operations.
            B::InvalidConfigOperation { .. } => ApiError::BadRequest { message },
            // Kafka only (broker and group configs): HTTP has no route.
            B::DynamicConfig { .. } => ApiError::BadRequest { message },
            // DeleteRecords' refusals (Kafka only: HTTP has no route).
            B::OffsetOutOfRange { .. } | B::RecordsNotDeletable { .. } => {
                ApiError::BadRequest { message }
            }
            B::InvalidName { kind, name, reason } => ApiError::InvalidName { kind, name, reason },
            B::InvalidTopicConfig { name, reason } => ApiError::InvalidTopicConfig { name, reason },
            B::UnknownTopic { .. } => ApiError::UnknownTopic { message },
            B::UnknownPartition { .. } => ApiError::UnknownPartition { message },
            B::TopicExists { .. } => ApiError::TopicExists { message },
            B::InternalTopic { topic } => ApiError::BadRequest {
                message: format!(
                    "topic {topic:?} is internal; commit offsets with POST /consumer-groups/{{group}}/offsets"
                ),
            },
            B::PartitionMismatch {
                index,
                own,
                requested,
            } => ApiError::PayloadMalformed {
                message: format!(
                    "records[{index}].partition is {own}, but the request is for partition {requested}"
                ),
            },
            B::KeyRequired {
                index,
                topic,
                policy,
                indexes,
            } => ApiError::KeyInvalid {
                message: format!(
                    "records[{index}] has no key{}, but topic {topic:?} is compacted (cleanup.policy={policy}): every record needs a key; nothing of the request was written",
                    others(&indexes)
                ),
            },
            B::TimestampOutOfBounds {
                index,
                topic,
                timestamp_ms,
                now_ms,
                distance_ms,
                side,
                max_ms,
                config,
                indexes,
            } => ApiError::PayloadMalformed {
                message: format!(
                    "records[{index}].timestamp {timestamp_ms} is {distance_ms} ms {side} the broker's clock ({now_ms}){}; topic {topic:?} allows at most {max_ms} ({config}); nothing of the request was written",
                    others(&indexes)
                ),
            },
            B::NotEnoughReplicas { .. } => ApiError::BadRequest { message },
            // A write that reached a replica (HTTP forwards writes to the
            // master first), or a master that cannot vouch for its lease.
            B::NotMaster { .. } => ApiError::NotReady { message },
            B::TooFewInSync { .. } | B::NotReplicated { .. } => {
                ApiError::NotEnoughReplicas { message }
            }
            // Kafka's alone sends transactional batches.
            B::TransactionRefused { .. } => ApiError::BadRequest { message },
            B::TooManyHeaders { index, count, max } => ApiError::PayloadMalformed {
                message: format!("records[{index}] has {count} headers; at most {max} are allowed"),
            },
            B::HeaderNameTooLong { index, header, max } => ApiError::PayloadMalformed {
                message: format!("records[{index}].headers[{header}].name is longer than {max} bytes"),
            },
            B::RecordTooLarge {
                index,
                size,
                limit,
                limit_source,
            } => ApiError::TooLarge {
                message: format!(
                    "records[{index}] is {size} bytes (key + value + headers), over the {limit} of {limit_source}; nothing of the request was written"
                ),
            },
            // A bug or the system under the broker failing.
            B::BlockingTaskFailed { .. }
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
            | B::RecordsCallUnanswered => ApiError::Internal { message },
            // Start-up settings are checked before anything serves.
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
            | B::ManifestStalled { .. } => ApiError::Internal { message },
            B::Store { source } => source.into(),
            B::Compaction { source } => source.into(),
            B::UnknownGroup { .. } => ApiError::UnknownConsumerGroup { message },
            // Access control (the security contract).
            B::NotAuthorized { .. } => ApiError::Forbidden { message },
            B::Acl { source } => match source {
                AclError::File { .. } | AclError::Write { .. } => ApiError::Internal { message },
                AclError::EmptyResourceName
                | AclError::ResourceNameTooLong { .. }
                | AclError::ClusterName { .. }
                | AclError::Principal { .. }
                | AclError::Host { .. }
                | AclError::TooMany { .. } => ApiError::BadRequest { message },
            },
            B::User { source } => match source {
                UserError::Exists { .. } => ApiError::UserExists { message },
                UserError::NotFound { .. } | UserError::NoCredential { .. } => {
                    ApiError::UnknownUser { message }
                }
                UserError::InvalidName { .. }
                | UserError::TooMany { .. }
                | UserError::Credential(_) => ApiError::BadRequest { message },
                UserError::File { .. } | UserError::Write { .. } => ApiError::Internal { message },
            },
            // The coordinator's: over HTTP a member is a consumer
            // instance (40403), and the membership refusals are illegal
            // consumer states (40903). The Kafka-only ones never reach a
            // route (a server-side member's join asks for neither).
            B::UnknownMember { .. } | B::UnknownConsumerInstance { .. } => {
                ApiError::UnknownConsumerInstance { message }
            }
            B::IllegalGeneration { .. }
            | B::RebalanceInProgress { .. }
            | B::GroupHasMembers { .. }
            | B::InconsistentGroupProtocol { .. }
            | B::FencedInstanceId { .. }
            | B::MemberRefused { .. }
            | B::ConsumerState { .. } => ApiError::IllegalConsumerState { message },
            B::GroupLimit { .. } => ApiError::TooManyRequests { message },
            B::ConsumerInstanceExists { .. } => ApiError::ConsumerInstanceExists { message },
            B::ConsumerConfig { .. } => ApiError::BadConsumerConfig { message },
            B::NoResetPosition { .. } => ApiError::NoResetPosition { message },
            // Kafka-only: HTTP instances never join with
            // require_known_member_id, and their session timeout is the
            // server's http.consumer_instance_timeout_ms, so over HTTP
            // either is a bug.
            B::MemberIdRequired { .. } | B::InvalidSessionTimeout { .. } => {
                ApiError::Internal { message }
            }
            // Tiered storage: the object store out of reach is a 503 the
            // client retries; damage in the bucket or a bug is a 500.
            B::Tiered { source } => match source {
                T::Unavailable { .. } => ApiError::RemoteUnavailable {
                    message: format!("remote tier unavailable: {message}"),
                },
                T::Corrupt { .. }
                | T::Config { .. }
                | T::InvalidInput { .. }
                | T::OutOfRange { .. }
                | T::Contended { .. } => ApiError::Internal { message },
            },
            B::RemoteDeletePending { .. } => ApiError::RemoteUnavailable { message },
            B::TieringOff => ApiError::BadRequest { message },
        }
    }
}

/// The cleaner crate's errors (compacted logs, the LogCleaner): a failure
/// of the store underneath maps as the store's own; a topic name the
/// cleaner checkpoint cannot hold is 40002; a topic that stopped being
/// compact under a request (deleted) is 40401; everything else (I/O, a damaged
/// compacted segment, a bad setting) is 50001 with the cleaner's message,
/// which names the file.
impl From<tidelog_broker::store::CleanerError> for ApiError {
    fn from(e: tidelog_broker::store::CleanerError) -> Self {
        use tidelog_broker::store::CleanerError as C;
        match e {
            C::Store { source, .. } => source.into(),
            C::InvalidTopic { .. } => ApiError::BadRequest {
                message: e.to_string(),
            },
            // Deleted (or made non-compact) while the request was running.
            C::NotCompact { topic } => ApiError::unknown_topic(&topic),
            C::Io { .. }
            | C::Corruption { .. }
            | C::InvalidConfig { .. }
            | C::OutOfMemory { .. }
            | C::CheckpointTooLarge { .. }
            | C::LeftoverSwap { .. }
            // Never leaves `read_cached`, which answers `None` for it.
            | C::NotCached { .. } => ApiError::Internal {
                message: e.to_string(),
            },
        }
    }
}

/// Axum's body rejections: over the body limit is 413/41301 with our body
/// (instead of axum's plain-text 413); a body that breaks off is 400.
impl From<axum::extract::rejection::BytesRejection> for ApiError {
    fn from(e: axum::extract::rejection::BytesRejection) -> Self {
        use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
        match e {
            BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(e)) => {
                ApiError::TooLarge {
                    message: format!("request body is larger than the server's limit ({e})"),
                }
            }
            other => ApiError::BadRequest {
                message: format!("cannot read the request body: {}", other.body_text()),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            // Expected while the disk is full, possibly for every produce:
            // the store logs the transition once at error, and the 5xx
            // counters count the answers. A warn line per request would
            // grow the logs on the disk that is already full. A body over
            // the in-flight byte budget is load shedding, like a 429:
            // counted in `/metrics`, not logged per request.
            ApiError::DiskFull { .. }
            | ApiError::InflightBytesExhausted { .. }
            | ApiError::AnswerBytesExhausted { .. }
            | ApiError::NotEnoughReplicas { .. } => {
                tracing::debug!(error_code = self.error_code(), "{self}");
            }
            _ if self.error_code() >= 50000 => {
                tracing::warn!(error_code = self.error_code(), "{self}");
            }
            _ => {}
        }
        let mut response = (
            self.status(),
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            self.body(),
        )
            .into_response();
        // A client without valid credentials is told how to give them
        // (RFC 7235; the console logs in with Basic).
        if matches!(self, ApiError::Unauthorized { .. }) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(r#"Basic realm="tidelog""#),
            );
        }
        response
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
