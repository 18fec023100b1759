//! The broker's one error type.
//!
//! Every front-end maps it in one place (the HTTP API in `api/src/error.rs`).
//! A client mistake (`Invalid`, `InvalidName`, `InvalidTopicConfig`,
//! `UnknownTopic`, `UnknownPartition`, `TopicExists`) and an internal
//! inconsistency (`Internal`, to be logged) are different variants; the
//! store's and the cleaner's own errors pass through whole (`Store`,
//! `Compaction`). The
//! validation variants keep their parts apart so that the server's config
//! loader can put them under its own key path
//! (`topics[1].configs.cleanup.policy: ...`) without parsing a string.

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
    /// A bug or an I/O failure; the message says which.
    #[error("{message}")]
    Internal { message: String },
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
