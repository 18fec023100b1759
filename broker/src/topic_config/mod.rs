//! Per-topic configs: the Kafka names tidelog understands, their types,
//! bounds and defaults.
//!
//! One table ([`SPECS`]) serves the YAML loader (`topics[i].configs`), topic
//! creation and the config-alter endpoints, so a value accepted in one place
//! is accepted in all. Values travel as strings, as in Kafka's admin API; the
//! YAML loader turns scalars into strings first.
//!
//! What is stored per topic is the *overrides* map (name → canonical value);
//! the effective [`TopicConfig`] is computed from it. As in Kafka, a topic
//! that never set a config follows the default, and `is_default` means "not
//! overridden", not "equal to the default".
//!
//! Bounds follow Kafka's `LogConfig` where it has one: `-1` means unbounded
//! for `retention.ms` and `retention.bytes` only; `max.compaction.lag.ms`
//! is unbounded at `i64::MAX` (Kafka's `Long.MAX_VALUE`), not `-1`.
//! `segment.bytes` must be at least 1024 (OPERATIONS.md) and, like Kafka's `int`,
//! at most 2^31 − 1. `min.compaction.lag.ms` may not exceed
//! `max.compaction.lag.ms` (Kafka rejects that pair too).
//!
//! Stricter than Kafka, so that what is stored is what was meant:
//! * A value with whitespace around it is refused (Kafka trims it); inside
//!   a `cleanup.policy` list, spaces around commas are Kafka's list syntax
//!   and accepted.
//! * `min.cleanable.dirty.ratio` is a plain decimal in [0, 1] (`0.5`,
//!   `1`, `0.05`): no sign, exponent, `NaN` or `Infinity`, and none that
//!   an f64 rounds to 0 while its digits are not all zero (Kafka's
//!   `Double.parseDouble` takes `1e-400` as 0, "clean always").
//! * `max.message.bytes` is at least 1, like the store's
//!   `max_message_bytes` (Kafka accepts 0, where no record fits).
//! * `remote.storage.enable` is `true` or `false` in any case (Kafka's
//!   boolean parser), stored lower case.
//!
//! Tiered storage (KIP-405's names and rules): `remote.storage.enable` is
//! refused on compact topics, and once on, `local.retention.ms` /
//! `local.retention.bytes` (-2: follow `retention.*`, Kafka's default) may
//! not exceed `retention.ms` / `retention.bytes` or be unbounded (-1) while
//! those are bounded. Whether the server has a remote tier at all
//! (`tiered.url`) is the broker's check, not this table's.

use std::collections::BTreeMap;

use crate::error::BrokerError;

mod specs;

use specs::DAY_MS;
pub use specs::{spec, ConfigKind, ConfigSpec, Effect, SPECS};

/// What happens to old records of a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// CommitLog retention only.
    Delete,
    /// Key compaction of the topic's CompactedLog; keyless records rejected.
    Compact,
    /// Both: compaction, then `retention.ms`/`retention.bytes` on the
    /// CompactedLog.
    CompactDelete,
}

impl CleanupPolicy {
    /// The canonical spelling, as answered by the API.
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        }
    }

    /// Whether records of this topic go to a CompactedLog and are cleaned.
    pub fn compacts(self) -> bool {
        matches!(self, CleanupPolicy::Compact | CleanupPolicy::CompactDelete)
    }

    /// Kafka takes a list in any order (`delete,compact` too), with spaces
    /// around commas; duplicates and empty items are mistakes.
    fn parse(text: &str) -> Result<Self, String> {
        let mut compact = false;
        let mut delete = false;
        for item in text.split(',').map(str::trim) {
            let seen = match item {
                "compact" => &mut compact,
                "delete" => &mut delete,
                _ => {
                    return Err(format!(
                        "{item:?} is not a cleanup policy (use delete, compact or compact,delete)"
                    ))
                }
            };
            if *seen {
                return Err(format!("{item:?} is listed twice"));
            }
            *seen = true;
        }
        Ok(match (compact, delete) {
            (true, true) => CleanupPolicy::CompactDelete,
            (true, false) => CleanupPolicy::Compact,
            // The loop sets at least one flag or returns an error.
            _ => CleanupPolicy::Delete,
        })
    }
}

/// Checks one config and returns its canonical text (trimmed, policy
/// normalized to `compact,delete`, numbers re-printed).
pub fn validate(name: &str, value: &str) -> Result<String, BrokerError> {
    let invalid = |reason: String| BrokerError::InvalidTopicConfig {
        name: name.to_string(),
        reason,
    };
    let Some(spec) = spec(name) else {
        let known: Vec<&str> = SPECS.iter().map(|s| s.name).collect();
        return Err(invalid(format!(
            "unknown config (known: {})",
            known.join(", ")
        )));
    };
    let text = value.trim();
    if text != value {
        return Err(invalid(format!(
            "{value:?} has whitespace around it; send the value alone"
        )));
    }
    match spec.kind {
        ConfigKind::Policy => CleanupPolicy::parse(text)
            .map(|p| p.as_str().to_string())
            .map_err(invalid),
        ConfigKind::Integer { min, max } => {
            let n: i64 = text
                .parse()
                .map_err(|_| invalid(format!("{value:?} is not an integer")))?;
            if n < min || n > max {
                let unbounded = match min {
                    -1 => " (-1 means unbounded)",
                    -2 => " (-1 means unbounded, -2 the same as retention.*)",
                    _ => "",
                };
                return Err(invalid(format!(
                    "{n} is out of range [{min}, {max}]{unbounded}"
                )));
            }
            Ok(n.to_string())
        }
        ConfigKind::IntegerOr { min, max, also } => {
            let n: i64 = text
                .parse()
                .map_err(|_| invalid(format!("{value:?} is not an integer")))?;
            if n != also && (n < min || n > max) {
                return Err(invalid(format!(
                    "{n} is neither {also} nor in [{min}, {max}]"
                )));
            }
            Ok(n.to_string())
        }
        ConfigKind::Choice(choices) => match choices.iter().find(|c| **c == text) {
            Some(c) => Ok((*c).to_string()),
            None => Err(invalid(format!(
                "{value:?} is not one of {}",
                choices.join(", ")
            ))),
        },
        ConfigKind::Version => {
            if is_kafka_version(text) {
                Ok(text.to_string())
            } else {
                Err(invalid(format!(
                    "{value:?} is not a Kafka version (such as 2.8 or 3.0-IV1)"
                )))
            }
        }
        ConfigKind::ReplicaList => {
            let pair = |item: &str| {
                item.split_once(':').is_some_and(|(p, b)| {
                    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
                    digits(p) && digits(b)
                })
            };
            let items: Vec<&str> = text.split(',').map(str::trim).collect();
            if text.is_empty() || text == "*" || items.iter().all(|i| pair(i)) {
                Ok(items.join(","))
            } else {
                Err(invalid(format!(
                    "{value:?} is not *, empty, or partition:broker pairs separated by commas"
                )))
            }
        }
        ConfigKind::Boolean => match text.to_ascii_lowercase().as_str() {
            b @ ("true" | "false") => Ok(b.to_string()),
            _ => Err(invalid(format!(
                "{value:?} is not a boolean (true or false)"
            ))),
        },
        ConfigKind::Ratio => {
            let plain = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            let decimal = match text.split_once('.') {
                Some((whole, fraction)) => plain(whole) && plain(fraction),
                None => plain(text),
            };
            if !decimal {
                return Err(invalid(format!(
                    "{value:?} is not a plain decimal ratio in [0, 1] (such as 0.5)"
                )));
            }
            let r: f64 = text
                .parse()
                .map_err(|_| invalid(format!("{value:?} is not a number")))?;
            if r > 1.0 {
                return Err(invalid(format!("{value:?} is not a ratio in [0, 1]")));
            }
            if r == 0.0 && text.bytes().any(|b| matches!(b, b'1'..=b'9')) {
                return Err(invalid(format!(
                    "{value:?} is too small to tell from 0; send 0 if that is meant"
                )));
            }
            Ok(r.to_string())
        }
    }
}

/// Whether `text` names a Kafka version as `message.format.version`
/// takes it: two to four numbers with dots (`2.8`, `0.10.2`, `0.10.0.0`
/// as librdkafka's 0092 sends), optionally `-IV` and a number
/// (`3.0-IV1`), as Kafka's `MetadataVersion` and the older `ApiVersion`
/// spell them (they read the first two, or three for `0.x`, numbers).
fn is_kafka_version(text: &str) -> bool {
    let (release, iv) = match text.split_once("-IV") {
        Some((release, iv)) => (release, Some(iv)),
        None => (text, None),
    };
    let number = |s: &str| !s.is_empty() && s.len() <= 4 && s.bytes().all(|c| c.is_ascii_digit());
    let parts: Vec<&str> = release.split('.').collect();
    (2..=4).contains(&parts.len()) && parts.iter().all(|p| number(p)) && iv.is_none_or(number)
}

/// Validated overrides of one topic: config name → canonical value. This is
/// what gets persisted; defaults are not copied in.
pub type Overrides = BTreeMap<String, String>;

/// Applies `changes` to `overrides` all or nothing: every name and value is
/// validated, `None` removes an override (Kafka's `DELETE` operation), and
/// the result must be consistent, else `overrides` is left untouched.
pub fn apply<'a>(
    overrides: &mut Overrides,
    changes: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<(), BrokerError> {
    let mut next = overrides.clone();
    for (name, value) in changes {
        match value {
            Some(value) => {
                let canonical = validate(name, value)?;
                next.insert(name.to_string(), canonical);
            }
            None => {
                validate_name(name)?;
                next.remove(name);
            }
        }
    }
    TopicConfig::from_overrides(&next)?;
    *overrides = next;
    Ok(())
}

fn validate_name(name: &str) -> Result<(), BrokerError> {
    match spec(name) {
        Some(_) => Ok(()),
        // Reuse validate's message for unknown names.
        None => validate(name, "").map(|_| ()),
    }
}

/// Topic configs set for every topic at once: the values of Kafka's
/// dynamic `log.*` broker configs (`crate::dynamic_configs`), each the
/// default of every topic without a value of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    /// Validated and canonical, keyed by the topic config's name, as
    /// [`Overrides`].
    pub values: Overrides,
    /// The names whose value is this broker's own, not the cluster-wide
    /// default's (Kafka's DYNAMIC_BROKER_CONFIG against
    /// DYNAMIC_DEFAULT_BROKER_CONFIG).
    pub this_broker: std::collections::BTreeSet<String>,
}

impl Defaults {
    /// No defaults: Kafka's for every config.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, name: &str) -> Option<&String> {
        self.values.get(name)
    }

    /// Where the default of `name` comes from, if one is set.
    pub fn source(&self, name: &str) -> Option<ValueSource> {
        self.values.get(name).map(|_| {
            if self.this_broker.contains(name) {
                ValueSource::DynamicBrokerConfig
            } else {
                ValueSource::DynamicDefaultBrokerConfig
            }
        })
    }
}

/// Where a topic's config value comes from (Kafka's `ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ValueSource {
    /// The topic's own value.
    DynamicTopicConfig,
    /// This broker's default set at run time ([`Defaults`]).
    DynamicBrokerConfig,
    /// A cluster-wide default set at run time ([`Defaults`]).
    DynamicDefaultBrokerConfig,
    /// Kafka's default.
    DefaultConfig,
}

/// One row of `GET .../configs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigEntry {
    pub name: &'static str,
    pub value: String,
    /// Not the topic's own value (Kafka's meaning: "not overridden", not
    /// "equal to the default").
    pub is_default: bool,
    /// The value without the topic's own: the cluster-wide default if one
    /// is set, else Kafka's (ext: the console shows it beside an
    /// overridden value).
    pub default: String,
    pub source: ValueSource,
}

/// Every known config of a topic with its effective value, in [`SPECS`]
/// order: its own (`overrides`), else the cluster-wide one
/// (`defaults`), else Kafka's default.
pub fn entries(defaults: &Defaults, overrides: &Overrides) -> Vec<ConfigEntry> {
    SPECS
        .iter()
        .map(|spec| {
            let (default, default_source) =
                match (defaults.get(spec.name), defaults.source(spec.name)) {
                    (Some(value), Some(source)) => (value.clone(), source),
                    _ => (spec.default.to_string(), ValueSource::DefaultConfig),
                };
            match overrides.get(spec.name) {
                Some(value) => ConfigEntry {
                    name: spec.name,
                    value: value.clone(),
                    is_default: false,
                    default,
                    source: ValueSource::DynamicTopicConfig,
                },
                None => ConfigEntry {
                    name: spec.name,
                    value: default.clone(),
                    is_default: true,
                    default,
                    source: default_source,
                },
            }
        })
        .collect()
}

/// The effective, typed config of a topic.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    pub cleanup_policy: CleanupPolicy,
    /// −1: unbounded.
    pub retention_ms: i64,
    /// −1: unbounded.
    pub retention_bytes: i64,
    pub segment_bytes: u32,
    pub segment_ms: u64,
    pub min_cleanable_dirty_ratio: f64,
    pub min_compaction_lag_ms: u64,
    pub max_compaction_lag_ms: u64,
    pub delete_retention_ms: u64,
    pub max_message_bytes: u32,
    /// Tiered storage: records are uploaded to the remote tier.
    pub remote_storage_enable: bool,
    /// −2: `retention_ms`; −1: unbounded. See [`TopicConfig::local_retention`].
    pub local_retention_ms: i64,
    /// −2: `retention_bytes`; −1: unbounded.
    pub local_retention_bytes: i64,
    /// Whose clock a record's timestamp is (`message.timestamp.type`).
    pub timestamp_type: TimestampType,
    /// KIP-937's bounds as set (`message.timestamp.before.max.ms`,
    /// `after.max.ms`, the deprecated `difference.max.ms`); see
    /// [`TopicConfig::timestamp_bounds`].
    pub timestamp_before_max_ms: u64,
    pub timestamp_after_max_ms: u64,
    pub timestamp_difference_max_ms: u64,
    /// In-sync replicas an acks=all produce needs (one node has one).
    pub min_insync_replicas: u32,
    /// The topic's own flush bounds (`flush.messages`, `flush.ms`);
    /// `UNBOUNDED_MS` (Kafka's `Long.MAX_VALUE`) leaves it to the store.
    pub flush_messages: u64,
    pub flush_ms: u64,
    /// The codec fetches answer the topic's records in
    /// (`compression.type`), and its level (`compression.<codec>.level`,
    /// `None`: the codec's default).
    pub compression: CompressionType,
    pub gzip_level: Option<i32>,
    pub zstd_level: Option<i32>,
}

/// A topic's `compression.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionType {
    /// Kafka keeps the producer's codec; records here are stored one by
    /// one, so there is none to keep: fetches answer uncompressed.
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl TopicConfig {
    /// The level set for the topic's codec, if any.
    pub fn compression_level(&self) -> Option<i32> {
        match self.compression {
            CompressionType::Gzip => self.gzip_level,
            CompressionType::Zstd => self.zstd_level,
            _ => None,
        }
    }
}

/// Kafka's `Long.MAX_VALUE` for a bound: unbounded.
pub const UNBOUNDED: u64 = i64::MAX as u64;
const UNBOUNDED_MS: u64 = UNBOUNDED;

/// Whose clock a record's timestamp is (Kafka's `TimestampType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's: the timestamp it sent, kept.
    CreateTime,
    /// The broker's: every record is stamped with the time the broker took
    /// its request, whatever the producer sent.
    LogAppendTime,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            cleanup_policy: CleanupPolicy::Delete,
            retention_ms: 7 * DAY_MS,
            retention_bytes: -1,
            segment_bytes: 1 << 30,
            segment_ms: 7 * DAY_MS as u64,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX as u64,
            delete_retention_ms: DAY_MS as u64,
            max_message_bytes: 1_048_576,
            remote_storage_enable: false,
            local_retention_ms: -2,
            local_retention_bytes: -2,
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: UNBOUNDED_MS,
            timestamp_after_max_ms: UNBOUNDED_MS,
            timestamp_difference_max_ms: UNBOUNDED_MS,
            min_insync_replicas: 1,
            flush_messages: UNBOUNDED_MS,
            flush_ms: UNBOUNDED_MS,
            compression: CompressionType::Producer,
            gzip_level: None,
            // Kafka's default zstd level.
            zstd_level: Some(3),
        }
    }
}

impl TopicConfig {
    /// The effective config from validated or unvalidated overrides; checks
    /// each value and the min/max compaction lag pair.
    /// The effective config of a topic with its own `overrides` over the
    /// cluster-wide `defaults`: each value and the combination checked.
    pub fn resolve(defaults: &Defaults, overrides: &Overrides) -> Result<Self, BrokerError> {
        if defaults.values.is_empty() {
            return Self::from_overrides(overrides);
        }
        let mut merged = defaults.values.clone();
        merged.extend(overrides.iter().map(|(k, v)| (k.clone(), v.clone())));
        Self::from_overrides(&merged)
    }

    pub fn from_overrides(overrides: &Overrides) -> Result<Self, BrokerError> {
        let mut config = TopicConfig::default();
        for (name, value) in overrides {
            let canonical = validate(name, value)?;
            config.set_canonical(name, &canonical)?;
        }
        if config.min_compaction_lag_ms > config.max_compaction_lag_ms {
            return Err(BrokerError::InvalidTopicConfig {
                name: "min.compaction.lag.ms".into(),
                reason: format!(
                    "{} is greater than max.compaction.lag.ms {}",
                    config.min_compaction_lag_ms, config.max_compaction_lag_ms
                ),
            });
        }
        if config.remote_storage_enable {
            config.check_tiered()?;
        }
        Ok(config)
    }

    /// How far a CreateTime timestamp may lie before and after the
    /// broker's clock, in ms (`None`: unbounded): each of KIP-937's two
    /// configs, else (at its unbounded default) the deprecated
    /// `message.timestamp.difference.max.ms`, as Kafka 3.6–3.9 read them.
    pub fn timestamp_bounds(&self) -> (Option<u64>, Option<u64>) {
        let bound = |own: u64| {
            Some(if own == UNBOUNDED_MS {
                self.timestamp_difference_max_ms
            } else {
                own
            })
            .filter(|ms| *ms != UNBOUNDED_MS)
        };
        (
            bound(self.timestamp_before_max_ms),
            bound(self.timestamp_after_max_ms),
        )
    }

    /// The local retention of a tiered topic, with −2 resolved to
    /// `retention.*`: (ms, bytes), `None` = unbounded.
    pub fn local_retention(&self) -> (Option<i64>, Option<u64>) {
        let resolve = |local: i64, total: i64| if local == -2 { total } else { local };
        let ms = resolve(self.local_retention_ms, self.retention_ms);
        let bytes = resolve(self.local_retention_bytes, self.retention_bytes);
        ((ms >= 0).then_some(ms), u64::try_from(bytes).ok())
    }

    /// The remote tier's retention (`retention.ms`, `retention.bytes`),
    /// `None` = unbounded.
    pub fn remote_retention(&self) -> (Option<i64>, Option<u64>) {
        (
            (self.retention_ms >= 0).then_some(self.retention_ms),
            u64::try_from(self.retention_bytes).ok(),
        )
    }

    /// Kafka's rules for a topic with `remote.storage.enable=true`.
    fn check_tiered(&self) -> Result<(), BrokerError> {
        let invalid = |name: &str, reason: String| BrokerError::InvalidTopicConfig {
            name: name.into(),
            reason,
        };
        if self.cleanup_policy.compacts() {
            return Err(invalid(
                "remote.storage.enable",
                format!(
                    "remote storage is supported only for topics with cleanup.policy=delete, not {} (compact topics stay local; their compacted segments are uploaded as snapshots)",
                    self.cleanup_policy.as_str()
                ),
            ));
        }
        let pairs = [
            (
                "local.retention.ms",
                "retention.ms",
                self.local_retention_ms,
                self.retention_ms,
            ),
            (
                "local.retention.bytes",
                "retention.bytes",
                self.local_retention_bytes,
                self.retention_bytes,
            ),
        ];
        for (local_name, total_name, local, total) in pairs {
            if local == -2 || total == -1 {
                continue;
            }
            if local == -1 || local > total {
                return Err(invalid(
                    local_name,
                    format!("{local} is more than {total_name} {total}; the local part of a tiered topic cannot outlast the whole (-2 follows {total_name})"),
                ));
            }
        }
        Ok(())
    }

    /// What the compacted logs and the LogCleaner need of a compact topic:
    /// the one mapping from the API's configs to the cleaner's. Unsigned
    /// millisecond values beyond `i64::MAX` saturate (they mean "never"
    /// either way); `max.compaction.lag.ms` at its default `i64::MAX` stays
    /// the cleaner's "unbounded".
    pub fn compact_config(&self) -> tidelog_cleaner::CompactTopicConfig {
        let ms = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        tidelog_cleaner::CompactTopicConfig {
            segment_bytes: u64::from(self.segment_bytes),
            segment_ms: ms(self.segment_ms),
            min_cleanable_dirty_ratio: self.min_cleanable_dirty_ratio,
            min_compaction_lag_ms: ms(self.min_compaction_lag_ms),
            max_compaction_lag_ms: ms(self.max_compaction_lag_ms),
            delete_retention_ms: ms(self.delete_retention_ms),
            delete_too: self.cleanup_policy == CleanupPolicy::CompactDelete,
            retention_ms: self.retention_ms,
            retention_bytes: self.retention_bytes,
        }
    }

    /// Stores a value that `validate` already accepted, so parse failures
    /// here are bugs; they still become errors rather than panics.
    fn set_canonical(&mut self, name: &str, value: &str) -> Result<(), BrokerError> {
        let bug = || BrokerError::CanonicalConfig {
            name: name.to_string(),
            value: value.to_string(),
        };
        let int = || value.parse::<i64>().map_err(|_| bug());
        let unsigned = || value.parse::<u64>().map_err(|_| bug());
        match name {
            "cleanup.policy" => {
                self.cleanup_policy = CleanupPolicy::parse(value).map_err(|_| bug())?
            }
            "retention.ms" => self.retention_ms = int()?,
            "retention.bytes" => self.retention_bytes = int()?,
            "segment.bytes" => self.segment_bytes = value.parse().map_err(|_| bug())?,
            "segment.ms" => self.segment_ms = unsigned()?,
            "min.cleanable.dirty.ratio" => {
                self.min_cleanable_dirty_ratio = value.parse().map_err(|_| bug())?
            }
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = unsigned()?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = unsigned()?,
            "delete.retention.ms" => self.delete_retention_ms = unsigned()?,
            "max.message.bytes" => self.max_message_bytes = value.parse().map_err(|_| bug())?,
            "remote.storage.enable" => self.remote_storage_enable = value == "true",
            "local.retention.ms" => self.local_retention_ms = int()?,
            "local.retention.bytes" => self.local_retention_bytes = int()?,
            "message.timestamp.type" => {
                self.timestamp_type = match value {
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => TimestampType::CreateTime,
                }
            }
            "message.timestamp.before.max.ms" => self.timestamp_before_max_ms = unsigned()?,
            "message.timestamp.after.max.ms" => self.timestamp_after_max_ms = unsigned()?,
            "message.timestamp.difference.max.ms" => self.timestamp_difference_max_ms = unsigned()?,
            "min.insync.replicas" => self.min_insync_replicas = value.parse().map_err(|_| bug())?,
            "flush.messages" => self.flush_messages = unsigned()?,
            "flush.ms" => self.flush_ms = unsigned()?,
            "compression.type" => {
                self.compression = match value {
                    "uncompressed" => CompressionType::Uncompressed,
                    "gzip" => CompressionType::Gzip,
                    "snappy" => CompressionType::Snappy,
                    "lz4" => CompressionType::Lz4,
                    "zstd" => CompressionType::Zstd,
                    _ => CompressionType::Producer,
                }
            }
            // -1 (gzip's) is the codec's default.
            "compression.gzip.level" => self.gzip_level = Some(int()? as i32).filter(|l| *l >= 0),
            "compression.zstd.level" => self.zstd_level = Some(int()? as i32),
            // Accepted without effect (`specs::Effect::Accepted`).
            _ if spec(name).is_some_and(|s| s.effect != Effect::Applied) => {}
            _ => return Err(bug()),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
