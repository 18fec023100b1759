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

/// The type and bounds of one config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConfigKind {
    Policy,
    /// An integer in `[min, max]`.
    Integer {
        min: i64,
        max: i64,
    },
    /// A ratio in `[0, 1]`.
    Ratio,
    /// `true` or `false`.
    Boolean,
}

/// A known topic config: name, type and Kafka's default (canonical text).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigSpec {
    pub name: &'static str,
    pub kind: ConfigKind,
    pub default: &'static str,
}

const DAY_MS: i64 = 86_400_000;
const INT_MAX: i64 = i32::MAX as i64;

/// Every topic config tidelog knows, in the order the API lists them.
pub const SPECS: [ConfigSpec; 13] = [
    ConfigSpec {
        name: "cleanup.policy",
        kind: ConfigKind::Policy,
        default: "delete",
    },
    // 7 days, Kafka's default; governs CompactedLogs of compact,delete topics
    // (the shared CommitLog follows `retention.file_reserved_hours`).
    ConfigSpec {
        name: "retention.ms",
        kind: ConfigKind::Integer {
            min: -1,
            max: i64::MAX,
        },
        default: "604800000",
    },
    ConfigSpec {
        name: "retention.bytes",
        kind: ConfigKind::Integer {
            min: -1,
            max: i64::MAX,
        },
        default: "-1",
    },
    ConfigSpec {
        name: "segment.bytes",
        kind: ConfigKind::Integer {
            min: 1024,
            max: INT_MAX,
        },
        default: "1073741824",
    },
    ConfigSpec {
        name: "segment.ms",
        kind: ConfigKind::Integer {
            min: 1,
            max: i64::MAX,
        },
        default: "604800000",
    },
    ConfigSpec {
        name: "min.cleanable.dirty.ratio",
        kind: ConfigKind::Ratio,
        default: "0.5",
    },
    ConfigSpec {
        name: "min.compaction.lag.ms",
        kind: ConfigKind::Integer {
            min: 0,
            max: i64::MAX,
        },
        default: "0",
    },
    ConfigSpec {
        name: "max.compaction.lag.ms",
        kind: ConfigKind::Integer {
            min: 1,
            max: i64::MAX,
        },
        default: "9223372036854775807",
    },
    ConfigSpec {
        name: "delete.retention.ms",
        kind: ConfigKind::Integer {
            min: 0,
            max: i64::MAX,
        },
        default: "86400000",
    },
    // At least 1, as the store's `max_message_bytes` (module doc).
    ConfigSpec {
        name: "max.message.bytes",
        kind: ConfigKind::Integer {
            min: 1,
            max: INT_MAX,
        },
        default: "1048576",
    },
    // Tiered storage (KIP-405): delete topics' old records go to the
    // object store; `local.retention.*` bound what stays readable locally.
    ConfigSpec {
        name: "remote.storage.enable",
        kind: ConfigKind::Boolean,
        default: "false",
    },
    // -2: the same as retention.ms (Kafka's default); -1: unbounded.
    ConfigSpec {
        name: "local.retention.ms",
        kind: ConfigKind::Integer {
            min: -2,
            max: i64::MAX,
        },
        default: "-2",
    },
    ConfigSpec {
        name: "local.retention.bytes",
        kind: ConfigKind::Integer {
            min: -2,
            max: i64::MAX,
        },
        default: "-2",
    },
];

const _: () = assert!(SPECS.len() == 13);
const _: () = assert!(DAY_MS == 24 * 60 * 60 * 1000);

/// The spec for `name`, if tidelog knows it.
pub fn spec(name: &str) -> Option<&'static ConfigSpec> {
    SPECS.iter().find(|s| s.name == name)
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

/// One row of `GET .../configs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigEntry {
    pub name: &'static str,
    pub value: String,
    pub is_default: bool,
    /// The value without an override (ext: the console shows it beside an
    /// overridden value).
    pub default: &'static str,
}

/// Every known config of a topic with its effective value, in [`SPECS`]
/// order.
pub fn entries(overrides: &Overrides) -> Vec<ConfigEntry> {
    SPECS
        .iter()
        .map(|spec| match overrides.get(spec.name) {
            Some(value) => ConfigEntry {
                name: spec.name,
                value: value.clone(),
                is_default: false,
                default: spec.default,
            },
            None => ConfigEntry {
                name: spec.name,
                value: spec.default.to_string(),
                is_default: true,
                default: spec.default,
            },
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
        }
    }
}

impl TopicConfig {
    /// The effective config from validated or unvalidated overrides; checks
    /// each value and the min/max compaction lag pair.
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
            _ => return Err(bug()),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(err: BrokerError) -> (String, String) {
        match err {
            BrokerError::InvalidTopicConfig { name, reason } => (name, reason),
            other => panic!("expected InvalidTopicConfig, got {other:?}"),
        }
    }

    fn overrides(pairs: &[(&str, &str)]) -> Overrides {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn compact_config_maps_every_cleaner_setting() {
        assert_eq!(
            TopicConfig::default().compact_config(),
            tidelog_cleaner::CompactTopicConfig::default(),
            "Kafka's defaults agree on both sides"
        );
        let c = TopicConfig::from_overrides(&overrides(&[
            ("cleanup.policy", "delete,compact"),
            ("segment.bytes", "4096"),
            ("segment.ms", "9223372036854775807"),
            ("min.cleanable.dirty.ratio", "0.25"),
            ("min.compaction.lag.ms", "10"),
            ("max.compaction.lag.ms", "20"),
            ("delete.retention.ms", "30"),
            ("retention.ms", "-1"),
            ("retention.bytes", "50"),
        ]))
        .unwrap()
        .compact_config();
        assert_eq!(
            c,
            tidelog_cleaner::CompactTopicConfig {
                segment_bytes: 4096,
                segment_ms: i64::MAX,
                min_cleanable_dirty_ratio: 0.25,
                min_compaction_lag_ms: 10,
                max_compaction_lag_ms: 20,
                delete_retention_ms: 30,
                delete_too: true,
                retention_ms: -1,
                retention_bytes: 50,
            }
        );
    }

    #[test]
    fn defaults_table_agrees_with_typed_defaults() {
        let from_table = TopicConfig::from_overrides(
            &SPECS
                .iter()
                .map(|s| (s.name.to_string(), s.default.to_string()))
                .collect(),
        )
        .unwrap();
        assert_eq!(from_table, TopicConfig::default());
        for spec in SPECS {
            assert_eq!(
                validate(spec.name, spec.default).unwrap(),
                spec.default,
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn cleanup_policy_spellings() {
        assert_eq!(validate("cleanup.policy", "delete").unwrap(), "delete");
        assert_eq!(validate("cleanup.policy", "compact").unwrap(), "compact");
        assert_eq!(
            validate("cleanup.policy", "compact,delete").unwrap(),
            "compact,delete"
        );
        assert_eq!(
            validate("cleanup.policy", "delete, compact").unwrap(),
            "compact,delete"
        );
        for bad in ["", "Compact", "compact,compact", "compact,", "purge"] {
            let (name, why) = reason(validate("cleanup.policy", bad).unwrap_err());
            assert_eq!(name, "cleanup.policy");
            assert!(!why.is_empty());
        }
        assert!(CleanupPolicy::CompactDelete.compacts());
        assert!(!CleanupPolicy::Delete.compacts());
    }

    #[test]
    fn tiered_configs_follow_kafkas_rules() {
        assert_eq!(validate("remote.storage.enable", "TRUE").unwrap(), "true");
        assert!(
            reason(validate("remote.storage.enable", "yes").unwrap_err())
                .1
                .contains("not a boolean")
        );
        assert!(reason(validate("local.retention.ms", "-3").unwrap_err())
            .1
            .contains("-2 the same as retention"));
        let c = TopicConfig::from_overrides(&overrides(&[
            ("remote.storage.enable", "true"),
            ("retention.ms", "1000"),
            ("local.retention.bytes", "10"),
        ]))
        .unwrap();
        assert!(c.remote_storage_enable);
        assert_eq!(c.local_retention(), (Some(1000), Some(10)));
        assert_eq!(c.remote_retention(), (Some(1000), None));
        // Compact topics stay local, as in Kafka.
        for policy in ["compact", "compact,delete"] {
            let (name, why) = reason(
                TopicConfig::from_overrides(&overrides(&[
                    ("remote.storage.enable", "true"),
                    ("cleanup.policy", policy),
                ]))
                .unwrap_err(),
            );
            assert_eq!(name, "remote.storage.enable");
            assert!(why.contains("cleanup.policy=delete"), "{why}");
        }
        // The local part may not outlast the whole.
        for (local, value) in [("local.retention.ms", "2000"), ("local.retention.ms", "-1")] {
            let (name, why) = reason(
                TopicConfig::from_overrides(&overrides(&[
                    ("remote.storage.enable", "true"),
                    ("retention.ms", "1000"),
                    (local, value),
                ]))
                .unwrap_err(),
            );
            assert_eq!(name, local);
            assert!(why.contains("more than retention.ms 1000"), "{why}");
        }
        // Without remote storage the local keys are inert and not checked.
        let plain = TopicConfig::from_overrides(&overrides(&[
            ("retention.ms", "1000"),
            ("local.retention.ms", "2000"),
        ]))
        .unwrap();
        assert!(!plain.remote_storage_enable);
    }

    #[test]
    fn integer_bounds_follow_kafka() {
        assert_eq!(validate("retention.ms", "-1").unwrap(), "-1");
        assert_eq!(validate("retention.bytes", "42").unwrap(), "42");
        assert_eq!(validate("max.message.bytes", "1").unwrap(), "1");
        assert!(reason(validate("max.message.bytes", "0").unwrap_err())
            .1
            .contains("[1, 2147483647]"));
        assert!(reason(validate("retention.ms", "-2").unwrap_err())
            .1
            .contains("-1 means unbounded"));
        assert!(reason(validate("delete.retention.ms", "-1").unwrap_err())
            .1
            .contains("out of range"));
        assert!(reason(validate("segment.bytes", "1023").unwrap_err())
            .1
            .contains("[1024, 2147483647]"));
        assert_eq!(validate("segment.bytes", "1024").unwrap(), "1024");
        assert!(reason(validate("segment.bytes", "2147483648").unwrap_err())
            .1
            .contains("out of range"));
        assert!(reason(validate("segment.ms", "0").unwrap_err())
            .1
            .contains("out of range"));
        assert!(reason(validate("max.compaction.lag.ms", "-1").unwrap_err())
            .1
            .contains("out of range"));
        assert!(reason(validate("max.message.bytes", "1.5").unwrap_err())
            .1
            .contains("not an integer"));
        assert!(
            reason(validate("retention.ms", "9223372036854775808").unwrap_err())
                .1
                .contains("not an integer")
        );
    }

    #[test]
    fn ratio_is_zero_to_one() {
        assert_eq!(validate("min.cleanable.dirty.ratio", "0").unwrap(), "0");
        assert_eq!(validate("min.cleanable.dirty.ratio", "1").unwrap(), "1");
        assert_eq!(
            validate("min.cleanable.dirty.ratio", "0.25").unwrap(),
            "0.25"
        );
        assert_eq!(validate("min.cleanable.dirty.ratio", "0.000").unwrap(), "0");
        assert_eq!(validate("min.cleanable.dirty.ratio", "1.0").unwrap(), "1");
        for bad in [
            "-0.1", "1.01", "NaN", "inf", "half", "1e-400", "5e-1", "+0.5", ".5", "0.", "",
        ] {
            let (name, why) = reason(validate("min.cleanable.dirty.ratio", bad).unwrap_err());
            assert_eq!(name, "min.cleanable.dirty.ratio");
            assert!(why.contains(&format!("{bad:?}")), "{why}");
        }
        // An f64 rounds it to 0, but it is not 0.
        let tiny = format!("0.{}1", "0".repeat(400));
        assert!(
            reason(validate("min.cleanable.dirty.ratio", &tiny).unwrap_err())
                .1
                .contains("too small")
        );
    }

    #[test]
    fn values_with_whitespace_around_them_are_refused() {
        for (name, value) in [
            ("retention.bytes", " 42 "),
            ("retention.ms", "1000\n"),
            ("min.cleanable.dirty.ratio", " 0.5"),
            ("cleanup.policy", "compact "),
            ("segment.ms", "\t3600000"),
        ] {
            let (at, why) = reason(validate(name, value).unwrap_err());
            assert_eq!(at, name);
            assert!(why.contains("whitespace"), "{why}");
        }
        // Kafka's list syntax: spaces around commas.
        assert_eq!(
            validate("cleanup.policy", "delete , compact").unwrap(),
            "compact,delete"
        );
    }

    #[test]
    fn unknown_names_are_rejected_listing_the_known_ones() {
        let (name, why) = reason(validate("cleanup.polcy", "delete").unwrap_err());
        assert_eq!(name, "cleanup.polcy");
        assert!(
            why.contains("unknown config") && why.contains("cleanup.policy"),
            "{why}"
        );
    }

    #[test]
    fn apply_is_all_or_nothing() {
        let mut current = overrides(&[("cleanup.policy", "compact")]);
        apply(
            &mut current,
            [("retention.ms", Some("1000")), ("cleanup.policy", None)],
        )
        .unwrap();
        assert_eq!(current, overrides(&[("retention.ms", "1000")]));

        let before = current.clone();
        let err = apply(
            &mut current,
            [("segment.ms", Some("5")), ("bogus", Some("1"))],
        )
        .unwrap_err();
        assert_eq!(reason(err).0, "bogus");
        assert_eq!(current, before, "a failed batch changes nothing");
        let err = apply(&mut current, [("bogus", None)]).unwrap_err();
        assert_eq!(reason(err).0, "bogus");
    }

    #[test]
    fn min_compaction_lag_may_not_exceed_max() {
        let mut current = Overrides::new();
        let err = apply(
            &mut current,
            [
                ("min.compaction.lag.ms", Some("10")),
                ("max.compaction.lag.ms", Some("5")),
            ],
        )
        .unwrap_err();
        assert!(reason(err).1.contains("greater than max.compaction.lag.ms"));
        assert!(current.is_empty());
    }

    #[test]
    fn effective_config_and_entries_reflect_overrides() {
        let current = overrides(&[
            ("cleanup.policy", "compact"),
            ("delete.retention.ms", "86400000"),
        ]);
        let config = TopicConfig::from_overrides(&current).unwrap();
        assert_eq!(config.cleanup_policy, CleanupPolicy::Compact);
        assert_eq!(config.delete_retention_ms, 86_400_000);
        assert_eq!(config.segment_bytes, 1 << 30);

        let rows = entries(&current);
        assert_eq!(rows.len(), SPECS.len());
        let policy = rows.iter().find(|r| r.name == "cleanup.policy").unwrap();
        assert_eq!(
            (policy.value.as_str(), policy.is_default, policy.default),
            ("compact", false, "delete")
        );
        // Overridden with the default value is still an override, as in Kafka.
        let delete_retention = rows
            .iter()
            .find(|r| r.name == "delete.retention.ms")
            .unwrap();
        assert!(!delete_retention.is_default);
        let ratio = rows
            .iter()
            .find(|r| r.name == "min.cleanable.dirty.ratio")
            .unwrap();
        assert_eq!(
            (ratio.value.as_str(), ratio.is_default, ratio.default),
            ("0.5", true, "0.5")
        );
    }
}
