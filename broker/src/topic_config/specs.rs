//! The table of topic configs: every one Kafka 3.x and 4.x define for a
//! topic, with Kafka's type, bounds and default, and what it does here.
//!
//! A config either takes effect ([`Effect::Applied`]) or is accepted,
//! validated and kept, and answered by DescribeConfigs and `GET
//! .../configs` like any other, without changing what the store does
//! ([`Effect::Accepted`], with the reason). Accepting them is what tools
//! that pass Kafka's configs through (Connect, Streams, Terraform
//! providers, Strimzi) need; refusing them broke those tools for configs
//! that could not matter here. docs/KAFKA.md lists both kinds.

/// The type and bounds of one config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConfigKind {
    Policy,
    /// An integer in `[min, max]`.
    Integer {
        min: i64,
        max: i64,
    },
    /// An integer in `[min, max]`, or `also` (Kafka's "-1: the codec's
    /// default level" of `compression.gzip.level`).
    IntegerOr {
        min: i64,
        max: i64,
        also: i64,
    },
    /// A ratio in `[0, 1]`.
    Ratio,
    /// `true` or `false`.
    Boolean,
    /// One of these spellings, exactly (Kafka's `ValidString.in`).
    Choice(&'static [&'static str]),
    /// A Kafka release or metadata version (`message.format.version`):
    /// `0.10.2`, `2.8`, `3.0-IV1`.
    Version,
    /// Kafka's throttled-replica list: empty, `*`, or
    /// `partition:broker` pairs separated by commas.
    ReplicaList,
}

/// What a config does on a single tidelog node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// It takes effect as in Kafka.
    Applied,
    /// Validated and kept, with no effect here; why.
    Accepted { why: &'static str },
}

/// A known topic config: name, type, Kafka's default (canonical text) and
/// what it does here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigSpec {
    pub name: &'static str,
    pub kind: ConfigKind,
    pub default: &'static str,
    pub effect: Effect,
}

pub(super) const DAY_MS: i64 = 86_400_000;
const INT_MAX: i64 = i32::MAX as i64;
const LONG_MAX: &str = "9223372036854775807";

const fn applied(name: &'static str, kind: ConfigKind, default: &'static str) -> ConfigSpec {
    ConfigSpec {
        name,
        kind,
        default,
        effect: Effect::Applied,
    }
}

const fn accepted(
    name: &'static str,
    kind: ConfigKind,
    default: &'static str,
    why: &'static str,
) -> ConfigSpec {
    ConfigSpec {
        name,
        kind,
        default,
        effect: Effect::Accepted { why },
    }
}

const fn int(min: i64, max: i64) -> ConfigKind {
    ConfigKind::Integer { min, max }
}

const ONE_NODE: &str = "a single node has one replica of each partition and no replication";

/// Every topic config tidelog knows, in the order the API lists them:
/// those that take effect first, then those accepted without effect.
pub const SPECS: [ConfigSpec; 36] = [
    applied("cleanup.policy", ConfigKind::Policy, "delete"),
    // 7 days, Kafka's default; governs CompactedLogs of compact,delete
    // topics (the shared CommitLog follows `retention.file_reserved_hours`).
    applied("retention.ms", int(-1, i64::MAX), "604800000"),
    applied("retention.bytes", int(-1, i64::MAX), "-1"),
    applied("segment.bytes", int(1024, INT_MAX), "1073741824"),
    applied("segment.ms", int(1, i64::MAX), "604800000"),
    applied("min.cleanable.dirty.ratio", ConfigKind::Ratio, "0.5"),
    applied("min.compaction.lag.ms", int(0, i64::MAX), "0"),
    applied("max.compaction.lag.ms", int(1, i64::MAX), LONG_MAX),
    applied("delete.retention.ms", int(0, i64::MAX), "86400000"),
    // At least 1, as the store's `max_message_bytes` (module doc).
    applied("max.message.bytes", int(1, INT_MAX), "1048576"),
    // Tiered storage (KIP-405): delete topics' old records go to the
    // object store; `local.retention.*` bound what stays readable locally.
    applied("remote.storage.enable", ConfigKind::Boolean, "false"),
    // -2: the same as retention.ms (Kafka's default); -1: unbounded.
    applied("local.retention.ms", int(-2, i64::MAX), "-2"),
    applied("local.retention.bytes", int(-2, i64::MAX), "-2"),
    // The broker stamps records with the time it took them (both
    // front-ends), and Kafka's fetch says so in each batch.
    applied(
        "message.timestamp.type",
        ConfigKind::Choice(&["CreateTime", "LogAppendTime"]),
        "CreateTime",
    ),
    // KIP-937: how far a CreateTime timestamp may lie before or after the
    // broker's clock (Kafka 3.x's defaults: unbounded).
    applied("message.timestamp.before.max.ms", int(0, i64::MAX), LONG_MAX),
    applied("message.timestamp.after.max.ms", int(0, i64::MAX), LONG_MAX),
    // Deprecated by KIP-937 and gone in Kafka 4: bounds both sides where
    // the two above are not set.
    applied(
        "message.timestamp.difference.max.ms",
        int(0, i64::MAX),
        LONG_MAX,
    ),
    // With acks=all, a produce needs this many in-sync replicas; a single
    // node has one, so more refuses acks=all (NOT_ENOUGH_REPLICAS).
    applied("min.insync.replicas", int(1, INT_MAX), "1"),
    // The topic's own flush bounds, under `store.flush: async` (sync
    // flushes every record before its answer already): after this many
    // records a produce is answered once flushed; records are flushed
    // within this many ms (0: each produce answered once flushed).
    applied("flush.messages", int(1, i64::MAX), LONG_MAX),
    applied("flush.ms", int(0, i64::MAX), LONG_MAX),
    // Fetches answer the topic's records in this codec; `producer` (and
    // `uncompressed`) answer them uncompressed, since records are stored
    // one by one and no producer's codec is kept.
    applied(
        "compression.type",
        ConfigKind::Choice(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        "producer",
    ),
    applied(
        "compression.gzip.level",
        ConfigKind::IntegerOr {
            min: 1,
            max: 9,
            also: -1,
        },
        "-1",
    ),
    applied("compression.zstd.level", int(-131_072, 22), "3"),
    accepted(
        "compression.lz4.level",
        int(1, 17),
        "9",
        "the LZ4 codec here (lz4_flex) has one speed",
    ),
    accepted(
        "file.delete.delay.ms",
        int(0, i64::MAX),
        "60000",
        "CommitLog segments are deleted by the store's own retention, ConsumeQueue files with their segments",
    ),
    accepted(
        "index.interval.bytes",
        int(0, INT_MAX),
        "4096",
        "every record has its 20-byte ConsumeQueue unit and a time index entry per file; there is no sparse offset index to space",
    ),
    accepted(
        "segment.index.bytes",
        int(4, INT_MAX),
        "10485760",
        "ConsumeQueue and IndexFile sizes are the store's (store.consume_queue_file_bytes, store.index_*)",
    ),
    accepted(
        "segment.jitter.ms",
        int(0, i64::MAX),
        "0",
        "CommitLog segments are shared by every topic and roll by size",
    ),
    accepted(
        "preallocate",
        ConfigKind::Boolean,
        "false",
        "CommitLog segments are always preallocated",
    ),
    accepted(
        "message.format.version",
        ConfigKind::Version,
        "3.0-IV1",
        "record batches are always format v2 (Kafka ignores it from 3.0 and removed it in 4.0)",
    ),
    accepted(
        "message.downconversion.enable",
        ConfigKind::Boolean,
        "true",
        "fetches are v4 and up, which read format v2: nothing is down-converted (removed in Kafka 4.0)",
    ),
    accepted(
        "unclean.leader.election.enable",
        ConfigKind::Boolean,
        "false",
        ONE_NODE,
    ),
    accepted(
        "leader.replication.throttled.replicas",
        ConfigKind::ReplicaList,
        "",
        ONE_NODE,
    ),
    accepted(
        "follower.replication.throttled.replicas",
        ConfigKind::ReplicaList,
        "",
        ONE_NODE,
    ),
    accepted(
        "remote.log.copy.disable",
        ConfigKind::Boolean,
        "false",
        "tiered topics upload every closed segment (KIP-950's copy pause is not kept here)",
    ),
    accepted(
        "remote.log.delete.on.disable",
        ConfigKind::Boolean,
        "false",
        "remote.storage.enable cannot be turned off once on",
    ),
];

const _: () = assert!(DAY_MS == 24 * 60 * 60 * 1000);

/// The spec for `name`, if tidelog knows it.
pub fn spec(name: &str) -> Option<&'static ConfigSpec> {
    SPECS.iter().find(|s| s.name == name)
}
