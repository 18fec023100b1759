//! What a consumer instance is created with (API.md's `POST
//! /consumers/{group}` body), parsed and checked once here, and the
//! manager's own settings (`http.consumer_instance_timeout_ms`,
//! `http.max_consumer_instances`).
//!
//! A front-end hands over the body's fields as text (a JSON string as it
//! is, a number or boolean as its JSON spelling), so every rule lives here
//! and a Kafka-style front-end could reuse it.

use crate::error::BrokerError;
use crate::names;

/// Largest `consumer.request.timeout.ms` and records-call `timeout`: the
/// stateless fetch's bound.
pub const REQUEST_TIMEOUT_MS_MAX: u64 = 30_000;

/// Default `consumer.request.timeout.ms` (API.md).
pub const REQUEST_TIMEOUT_MS_DEFAULT: u64 = 1000;

/// Largest `fetch.min.bytes` and records-call `max_bytes`: the stateless
/// fetch's `max_bytes` bound.
pub const FETCH_BYTES_MAX: u64 = 64 << 20;

/// Default records-call `max_bytes` (the stateless fetch's).
pub const FETCH_BYTES_MAX_DEFAULT: u64 = 1 << 20;

/// Longest `topic_pattern`, and the compiled automaton's size bound, so a
/// client's regex cannot take the server's memory.
pub const TOPIC_PATTERN_MAX_BYTES: usize = 1024;
pub const TOPIC_PATTERN_COMPILED_MAX_BYTES: usize = 1 << 20;
/// Deepest nesting of groups and repetitions in a `topic_pattern`.
pub const TOPIC_PATTERN_NEST_MAX: u32 = 64;

/// The embedded format of an instance's records (`format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceFormat {
    Binary,
    Json,
}

impl InstanceFormat {
    pub fn name(self) -> &'static str {
        match self {
            InstanceFormat::Binary => "binary",
            InstanceFormat::Json => "json",
        }
    }
}

/// `auto.offset.reset`: where a partition without a usable position
/// starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// The records call answers 42205 naming the partition.
    None,
}

/// A consumer instance's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceConfig {
    /// `None`: the manager makes one up.
    pub name: Option<String>,
    pub format: InstanceFormat,
    pub auto_offset_reset: OffsetReset,
    pub auto_commit: bool,
    /// A records call waits (up to its timeout) until this many payload
    /// bytes are there; 0 and 1 answer as soon as there is a record.
    pub fetch_min_bytes: u64,
    /// A records call's default `timeout`.
    pub request_timeout_ms: u64,
    /// `isolation.level` `read_committed`: records only below each
    /// partition's last stable offset, none of an aborted transaction.
    pub read_committed: bool,
}

impl Default for InstanceConfig {
    /// API.md's defaults.
    fn default() -> Self {
        InstanceConfig {
            name: None,
            format: InstanceFormat::Binary,
            auto_offset_reset: OffsetReset::Latest,
            auto_commit: true,
            fetch_min_bytes: 0,
            request_timeout_ms: REQUEST_TIMEOUT_MS_DEFAULT,
            read_committed: false,
        }
    }
}

fn bad(field: &str, reason: impl Into<String>) -> BrokerError {
    BrokerError::ConsumerConfig {
        field: field.to_string(),
        reason: reason.into(),
    }
}

fn parse_bool(field: &str, value: &str) -> Result<bool, BrokerError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(field, format!("{value:?} is not true or false"))),
    }
}

fn parse_bounded(field: &str, value: &str, max: u64) -> Result<u64, BrokerError> {
    // Confluent's defaults spell "unset" as -1.
    if value == "-1" {
        return Ok(0);
    }
    value
        .parse::<u64>()
        .ok()
        .filter(|v| *v <= max)
        .ok_or_else(|| bad(field, format!("{value:?} is not an integer in [0, {max}]")))
}

/// An instance name: tidelog's plain name rule (URL-path safe, no `/`),
/// refused as a bad config (42204) since it comes in the create body.
pub fn validate_instance_name(name: &str) -> Result<(), BrokerError> {
    names::validate_plain_name("consumer instance", name).map_err(|e| match e {
        BrokerError::InvalidName { reason, .. } => bad("name", reason),
        other => other,
    })
}

impl InstanceConfig {
    /// The create body's fields, as text; unknown fields are refused, so a
    /// misspelt setting is not silently ignored.
    pub fn parse<'a>(
        fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, BrokerError> {
        let mut config = InstanceConfig::default();
        for (field, value) in fields {
            match field {
                "name" => {
                    validate_instance_name(value)?;
                    config.name = Some(value.to_string());
                }
                "format" => {
                    config.format = match value {
                        "binary" => InstanceFormat::Binary,
                        "json" => InstanceFormat::Json,
                        _ => {
                            return Err(bad(
                                field,
                                format!(
                                    "{value:?} is not binary or json (the formats tidelog stores)"
                                ),
                            ))
                        }
                    }
                }
                "auto.offset.reset" => {
                    config.auto_offset_reset = match value {
                        "earliest" | "smallest" => OffsetReset::Earliest,
                        "latest" | "largest" => OffsetReset::Latest,
                        "none" => OffsetReset::None,
                        _ => {
                            return Err(bad(
                                field,
                                format!("{value:?} is not earliest, latest or none"),
                            ))
                        }
                    }
                }
                // Confluent's name, and Strimzi's Kafka Bridge's.
                "auto.commit.enable" | "enable.auto.commit" => {
                    config.auto_commit = parse_bool(field, value)?;
                }
                "fetch.min.bytes" => {
                    config.fetch_min_bytes = parse_bounded(field, value, FETCH_BYTES_MAX)?;
                }
                "consumer.request.timeout.ms" => {
                    config.request_timeout_ms =
                        parse_bounded(field, value, REQUEST_TIMEOUT_MS_MAX)?;
                }
                // Kafka's consumer setting, read_uncommitted by default.
                "isolation.level" => {
                    config.read_committed = match value {
                        "read_committed" => true,
                        "read_uncommitted" => false,
                        _ => {
                            return Err(bad(
                                field,
                                format!("{value:?} is not read_committed or read_uncommitted"),
                            ))
                        }
                    }
                }
                _ => return Err(bad(field, "is not a consumer instance setting")),
            }
        }
        Ok(config)
    }
}

/// The manager's settings, from the `http:` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumersConfig {
    /// `http.consumer_instance_timeout_ms`: an instance idle this long
    /// expires.
    pub instance_timeout_ms: u64,
    /// `http.max_consumer_instances`: instances of every group together.
    pub max_instances: usize,
}

impl Default for ConsumersConfig {
    fn default() -> Self {
        ConsumersConfig {
            instance_timeout_ms: 300_000,
            max_instances: 1000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_create_body_parses_with_defaults_and_refuses_bad_values() {
        assert_eq!(
            InstanceConfig::parse([]).unwrap(),
            InstanceConfig::default()
        );
        let c = InstanceConfig::parse([
            ("name", "c1"),
            ("format", "json"),
            ("auto.offset.reset", "earliest"),
            ("auto.commit.enable", "false"),
            ("fetch.min.bytes", "10"),
            ("consumer.request.timeout.ms", "500"),
            ("isolation.level", "read_committed"),
        ])
        .unwrap();
        assert!(c.read_committed);
        assert_eq!(c.name.as_deref(), Some("c1"));
        assert_eq!(c.format, InstanceFormat::Json);
        assert_eq!(c.auto_offset_reset, OffsetReset::Earliest);
        assert!(!c.auto_commit);
        assert_eq!((c.fetch_min_bytes, c.request_timeout_ms), (10, 500));
        assert!(
            !InstanceConfig::parse([("enable.auto.commit", "false")])
                .unwrap()
                .auto_commit
        );
        for (field, value) in [
            ("format", "avro"),
            ("auto.offset.reset", "first"),
            ("auto.commit.enable", "yes"),
            ("fetch.min.bytes", "x"),
            ("consumer.request.timeout.ms", "30001"),
            ("name", "a/b"),
            ("name", ""),
            ("isolation.level", "serializable"),
        ] {
            assert!(
                matches!(
                    InstanceConfig::parse([(field, value)]),
                    Err(BrokerError::ConsumerConfig { .. })
                ),
                "{field}={value}"
            );
        }
    }
}
