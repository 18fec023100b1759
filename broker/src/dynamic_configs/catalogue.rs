//! The broker configs Kafka changes at run time (its `DynamicBrokerConfig`)
//! and what each does here, and the two group configs of KIP-848.
//!
//! A broker config is one of three kinds:
//! * a topic default ([`BrokerEffect::TopicDefault`]): Kafka's `log.*`
//!   synonym of a topic config (`log.retention.ms` of `retention.ms`),
//!   validated as that topic config is, and the value of every topic
//!   without one of its own, live;
//! * accepted without effect ([`BrokerEffect::Accepted`], with the reason):
//!   thread pools, Kerberos, replica fetchers, which a single tidelog node
//!   does not have; kept and described, so tools that set them work;
//! * read at start-up here ([`BrokerEffect::ReadOnly`]): Kafka changes it
//!   at run time, but tidelog's counterpart (named) is in broker.yaml, and
//!   taking a value it would not use would be a lie. INVALID_REQUEST, as
//!   Kafka answers a static config.
//!
//! Every other name is INVALID_CONFIG: an unknown name is more likely a
//! typo than a plugin's config (Kafka takes those; tidelog has no plugins).

use crate::topic_config;

/// What one broker config does here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerEffect {
    /// The cluster-wide value of topic config `topic_config`.
    TopicDefault { topic_config: &'static str },
    /// Validated and kept as `kind`, with Kafka's `default`; no effect.
    Accepted {
        kind: ValueKind,
        default: &'static str,
        why: &'static str,
    },
    /// Refused: set where this says, in broker.yaml.
    ReadOnly { where_set: &'static str },
}

/// The type of a config accepted without effect, with Kafka's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// An integer in `[min, max]`.
    Integer { min: i64, max: i64 },
    /// A decimal of at least 0 (Kafka's `DOUBLE`).
    Decimal,
    /// Any text (Kafka's `STRING` and `LIST`).
    Text,
}

/// One dynamic broker config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerConfigSpec {
    pub name: &'static str,
    pub effect: BrokerEffect,
}

const fn topic_default(name: &'static str, topic_config: &'static str) -> BrokerConfigSpec {
    BrokerConfigSpec {
        name,
        effect: BrokerEffect::TopicDefault { topic_config },
    }
}

const fn accepted(
    name: &'static str,
    kind: ValueKind,
    default: &'static str,
    why: &'static str,
) -> BrokerConfigSpec {
    BrokerConfigSpec {
        name,
        effect: BrokerEffect::Accepted { kind, default, why },
    }
}

const fn read_only(name: &'static str, where_set: &'static str) -> BrokerConfigSpec {
    BrokerConfigSpec {
        name,
        effect: BrokerEffect::ReadOnly { where_set },
    }
}

const THREADS: ValueKind = ValueKind::Integer {
    min: 1,
    max: i32::MAX as i64,
};
const MILLIS: ValueKind = ValueKind::Integer {
    min: 0,
    max: i64::MAX,
};
const POOLS: &str = "tidelog's work runs on its async runtime and a few fixed threads (dispatcher, flusher, retention, cleaner), not on Kafka's pools";
const KERBEROS: &str =
    "tidelog offers no GSSAPI (Kerberos) login; its SASL mechanisms are PLAIN and SCRAM";

/// Kafka's dynamic broker configs, by name.
pub const BROKER_CONFIGS: &[BrokerConfigSpec] = &[
    // Topic defaults: Kafka's `ServerTopicConfigSynonyms`, where tidelog
    // knows the topic config.
    topic_default("log.cleanup.policy", "cleanup.policy"),
    topic_default("log.retention.ms", "retention.ms"),
    topic_default("log.retention.bytes", "retention.bytes"),
    topic_default("log.segment.bytes", "segment.bytes"),
    topic_default("log.roll.ms", "segment.ms"),
    topic_default("log.roll.jitter.ms", "segment.jitter.ms"),
    topic_default("log.index.size.max.bytes", "segment.index.bytes"),
    topic_default("log.index.interval.bytes", "index.interval.bytes"),
    topic_default("log.flush.interval.messages", "flush.messages"),
    topic_default("log.flush.interval.ms", "flush.ms"),
    topic_default("log.cleaner.delete.retention.ms", "delete.retention.ms"),
    topic_default("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms"),
    topic_default("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms"),
    topic_default(
        "log.cleaner.min.cleanable.ratio",
        "min.cleanable.dirty.ratio",
    ),
    topic_default("log.segment.delete.delay.ms", "file.delete.delay.ms"),
    topic_default("log.preallocate", "preallocate"),
    topic_default("log.message.timestamp.type", "message.timestamp.type"),
    topic_default(
        "log.message.timestamp.difference.max.ms",
        "message.timestamp.difference.max.ms",
    ),
    topic_default(
        "log.message.timestamp.before.max.ms",
        "message.timestamp.before.max.ms",
    ),
    topic_default(
        "log.message.timestamp.after.max.ms",
        "message.timestamp.after.max.ms",
    ),
    topic_default(
        "log.message.downconversion.enable",
        "message.downconversion.enable",
    ),
    topic_default("log.local.retention.ms", "local.retention.ms"),
    topic_default("log.local.retention.bytes", "local.retention.bytes"),
    topic_default("message.max.bytes", "max.message.bytes"),
    topic_default("compression.type", "compression.type"),
    topic_default("compression.gzip.level", "compression.gzip.level"),
    topic_default("compression.lz4.level", "compression.lz4.level"),
    topic_default("compression.zstd.level", "compression.zstd.level"),
    topic_default("min.insync.replicas", "min.insync.replicas"),
    topic_default(
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
    ),
    // Kafka's thread pools.
    accepted("background.threads", THREADS, "10", POOLS),
    accepted("num.io.threads", THREADS, "8", POOLS),
    accepted("num.network.threads", THREADS, "3", POOLS),
    accepted(
        "num.recovery.threads.per.data.dir",
        THREADS,
        "2",
        "recovery replays the one CommitLog in order, on one thread",
    ),
    accepted(
        "num.replica.fetchers",
        THREADS,
        "1",
        "a single node has no replicas to fetch for",
    ),
    // Kerberos, per listener in Kafka.
    accepted(
        "sasl.kerberos.kinit.cmd",
        ValueKind::Text,
        "/usr/bin/kinit",
        KERBEROS,
    ),
    accepted(
        "sasl.kerberos.min.time.before.relogin",
        MILLIS,
        "60000",
        KERBEROS,
    ),
    accepted(
        "sasl.kerberos.principal.to.local.rules",
        ValueKind::Text,
        "DEFAULT",
        KERBEROS,
    ),
    accepted("sasl.kerberos.service.name", ValueKind::Text, "", KERBEROS),
    accepted(
        "sasl.kerberos.ticket.renew.jitter",
        ValueKind::Decimal,
        "0.05",
        KERBEROS,
    ),
    accepted(
        "sasl.kerberos.ticket.renew.window.factor",
        ValueKind::Decimal,
        "0.8",
        KERBEROS,
    ),
    // Kafka changes these at run time; tidelog reads its own at start-up.
    read_only("log.cleaner.threads", "cleaner.threads"),
    read_only(
        "log.cleaner.dedupe.buffer.size",
        "cleaner.dedupe_buffer_bytes",
    ),
    read_only("log.cleaner.backoff.ms", "cleaner.backoff_ms"),
    read_only("log.cleaner.io.max.bytes.per.second", "cleaner:"),
    read_only("log.cleaner.io.buffer.size", "cleaner:"),
    read_only("max.connections", "kafka.max_connections"),
    read_only("max.connections.per.ip", "kafka.max_connections"),
    read_only("max.connection.creation.rate", "kafka.max_connections"),
    read_only("listeners", "kafka.listeners"),
    read_only("advertised.listeners", "kafka.advertised_host"),
    read_only("sasl.enabled.mechanisms", "security:"),
    read_only("sasl.jaas.config", "security:"),
    read_only("ssl.keystore.location", "tls:"),
    read_only("ssl.keystore.password", "tls:"),
    read_only("ssl.truststore.location", "tls:"),
    // Kafka's static ones DescribeConfigs answers.
    read_only("auto.create.topics.enable", "auto_create_topics"),
    read_only("num.partitions", "default_partitions"),
    read_only("default.replication.factor", "a single node: always 1"),
    read_only("socket.request.max.bytes", "kafka.max_request_bytes"),
];

/// The spec of broker config `name`.
pub fn broker_spec(name: &str) -> Option<&'static BrokerConfigSpec> {
    BROKER_CONFIGS.iter().find(|s| s.name == name)
}

/// The topic config a topic default stands for, and its default.
pub fn topic_default_of(spec: &BrokerConfigSpec) -> Option<&'static topic_config::ConfigSpec> {
    match spec.effect {
        BrokerEffect::TopicDefault { topic_config } => topic_config::spec(topic_config),
        _ => None,
    }
}

/// KIP-848's group configs a KIP-848 group takes instead of the broker's
/// (`groups.consumer_session_timeout_ms`, `..._heartbeat_interval_ms`).
pub const GROUP_SESSION_TIMEOUT: &str = "consumer.session.timeout.ms";
pub const GROUP_HEARTBEAT_INTERVAL: &str = "consumer.heartbeat.interval.ms";
pub const GROUP_CONFIGS: &[&str] = &[GROUP_SESSION_TIMEOUT, GROUP_HEARTBEAT_INTERVAL];
