//! The broker configuration of CONFIG.md: schema, defaults, loading and
//! validation.
//!
//! Precedence is built-in defaults < YAML file < command-line flags
//! (`--data-dir`, `--listen`). Every key of CONFIG.md is a field here with
//! CONFIG.md's default; unknown keys are errors (`deny_unknown_fields`), so a
//! typo such as `retention.dlete_when` stops start-up instead of silently
//! running with the default.
//!
//! Every error names the file, the key as a dotted path
//! (`retention.disk_full_ratio`, `topics[1].configs.cleanup.policy`; list
//! indices count from 0) and what is wrong, and stops start-up.
//!
//! Decisions where CONFIG.md is silent:
//! * A relative `data_dir` is relative to the working directory, not to the
//!   config file, as with RocketMQ's and Kafka's property files.
//! * An empty file means "all defaults".
//! * A topic entry without `partitions` gets `default_partitions`.
//! * Topic config values may be YAML strings or numbers; they are validated
//!   with the API's rules (`tidelog_broker::topic_config`) and kept in their
//!   canonical string form.
//! * Lower bounds that keep the server sane: at least one partition, at most
//!   [`PARTITIONS_MAX`](tidelog_broker::registry::PARTITIONS_MAX); intervals, counts and thread numbers of at least 1.
//! * The `store:` and `retention:` sections are checked by the store's own
//!   `StoreConfig::validate`, the one `Store::open` runs, so `check-config`
//!   and `serve` accept and refuse the same files. A `max_message_bytes`
//!   larger than a segment can hold is not an error: the store clamps it
//!   (and warns once at start).
//! * The effective config printed by `check-config` and logged by `serve`
//!   shows `admin_token` as `<redacted>`, so it does not end up in logs.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tidelog_broker::registry::check_partitions;
use tidelog_broker::topic_config::{self, TopicConfig};
use tidelog_broker::{names, BrokerError};

/// Longest time between two disk-full checks of the store, whatever
/// `retention.check_interval_ms` says.
const DISK_CHECK_INTERVAL_MS_MAX: u64 = 1000;

/// Why start-up stopped.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {key}: {reason}")]
    Invalid {
        file: String,
        key: String,
        reason: String,
    },
}

/// Values given on the command line; they win over the file.
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    pub data_dir: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
}

/// The whole broker configuration (CONFIG.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub cluster_id: String,
    /// When set, mutating admin calls need `Authorization: Bearer <token>`.
    pub admin_token: Option<String>,
    /// Produce to an unknown topic creates it instead of answering 40401.
    pub auto_create_topics: bool,
    pub default_partitions: u32,
    pub store: StoreConfig,
    pub retention: RetentionConfig,
    pub cleaner: CleanerConfig,
    /// HTTP request limits (not in CONFIG.md's list; added keys).
    pub http: HttpConfig,
    /// Created at start if absent; their configs applied if present.
    pub topics: Vec<TopicDecl>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            cluster_id: "tidelog".into(),
            admin_token: None,
            auto_create_topics: false,
            default_partitions: 4,
            store: StoreConfig::default(),
            retention: RetentionConfig::default(),
            cleaner: CleanerConfig::default(),
            http: HttpConfig::default(),
            topics: Vec::new(),
        }
    }
}

/// CommitLog, ConsumeQueue and IndexFile sizing and flushing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    pub commitlog_segment_bytes: u64,
    /// 20-byte units per ConsumeQueue file.
    pub consume_queue_units_per_file: u64,
    pub index_slots: u64,
    pub index_entries: u64,
    pub flush: FlushMode,
    pub flush_interval_ms: u64,
    pub max_message_bytes: u64,
    /// `flush: sync`: an append waits this long for its flush, then answers
    /// 503/50303.
    pub sync_flush_timeout_ms: u64,
    /// Dispatch failing this long refuses produce with 503/50302.
    pub dispatch_stall_ms: u64,
    /// What recovery does with damage in the middle of the log.
    pub recovery_mode: RecoveryMode,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            commitlog_segment_bytes: 1 << 30,
            consume_queue_units_per_file: 300_000,
            index_slots: 500_000,
            index_entries: 2_000_000,
            flush: FlushMode::Async,
            flush_interval_ms: 500,
            max_message_bytes: 1_048_576,
            sync_flush_timeout_ms: 5_000,
            dispatch_stall_ms: 30_000,
            recovery_mode: RecoveryMode::Strict,
        }
    }
}

/// What recovery does when it finds an invalid record with valid records
/// after it (docs/recovery.md has the trade-off).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecoveryMode {
    /// Refuse to start, naming the segment and position.
    Strict,
    /// Cut the log at the first invalid record, losing what follows.
    Truncate,
}

/// When a produce is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlushMode {
    /// After the append; a background flush every `flush_interval_ms`.
    Async,
    /// After the fsync that covers the records (group commit).
    Sync,
}

/// CommitLog segment deletion, RocketMQ's rules and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    pub file_reserved_hours: u64,
    pub delete_when: DeleteWhen,
    pub check_interval_ms: u64,
    pub disk_max_used_ratio: f64,
    pub disk_force_clean_ratio: f64,
    pub disk_full_ratio: f64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            file_reserved_hours: 72,
            delete_when: DeleteWhen { hours: vec![4] },
            check_interval_ms: 10_000,
            disk_max_used_ratio: 0.75,
            disk_force_clean_ratio: 0.85,
            disk_full_ratio: 0.90,
        }
    }
}

/// Hours of the day (0..=23) in which expired segments are deleted,
/// RocketMQ's `deleteWhen`: written `"04"` or `"04;16"`, sorted and
/// deduplicated when parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteWhen {
    hours: Vec<u8>,
}

impl DeleteWhen {
    /// Parses `"04"`, `"4;16"`, ... An empty list or item is an error: an
    /// operator who wants no time window should say so with a wide one.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut hours = Vec::new();
        for item in text.split(';').map(str::trim) {
            let hour: u8 = item
                .parse()
                .ok()
                .filter(|h| *h <= 23)
                .ok_or_else(|| {
                    let within = if item == text { String::new() } else { format!(" in {text:?}") };
                    format!("{item:?}{within} is not an hour 0..=23 (hours are \";\"-separated, e.g. \"04;16\")")
                })?;
            hours.push(hour);
        }
        hours.sort_unstable();
        hours.dedup();
        Ok(DeleteWhen { hours })
    }

    /// The hours, sorted, each in 0..=23, at least one.
    pub fn hours(&self) -> &[u8] {
        &self.hours
    }
}

impl fmt::Display for DeleteWhen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self.hours.iter().map(|h| format!("{h:02}")).collect();
        f.write_str(&text.join(";"))
    }
}

impl Serialize for DeleteWhen {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeleteWhen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A visitor rather than an untagged enum: errors raised while the
        // YAML deserializer is on this scalar carry its path
        // (`retention.delete_when`), and an unquoted `delete_when: 4` (a YAML
        // integer) is accepted too.
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = DeleteWhen;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("hours of the day as a string, e.g. \"04;16\"")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<DeleteWhen, E> {
                DeleteWhen::parse(text).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, hour: u64) -> Result<DeleteWhen, E> {
                self.visit_str(&hour.to_string())
            }
            fn visit_i64<E: serde::de::Error>(self, hour: i64) -> Result<DeleteWhen, E> {
                self.visit_str(&hour.to_string())
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// LogCleaner settings, Kafka's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CleanerConfig {
    pub threads: u32,
    pub dedupe_buffer_bytes: u64,
    pub backoff_ms: u64,
    /// `None`: cleaner I/O is not throttled.
    pub io_max_bytes_per_second: Option<u64>,
}

impl Default for CleanerConfig {
    /// The cleaner's own defaults, so they are written once.
    fn default() -> Self {
        let c = tidelog_cleaner::CleanerConfig::default();
        CleanerConfig {
            threads: u32::try_from(c.threads).unwrap_or(u32::MAX),
            dedupe_buffer_bytes: c.dedupe_buffer_bytes as u64,
            backoff_ms: c.backoff_ms,
            io_max_bytes_per_second: c.io_max_bytes_per_second,
        }
    }
}

/// Limits of the HTTP API: every queue and buffer has a bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Largest request body; larger ones answer 413/41301.
    pub max_request_bytes: u64,
    /// Most records in one produce request; more answer 413/41301.
    pub max_records_per_request: u64,
    /// Requests served at once, long-polls included; more answer 429/42901.
    /// A request counts once its body is in.
    pub max_concurrent_requests: u64,
    /// Open connections; one more is closed at once and counted.
    pub max_connections: u64,
    /// Request body bytes held in memory by all connections together; a
    /// body that would pass it answers 503/50305.
    pub max_inflight_bytes: u64,
    /// From a request's first byte to the end of its headers.
    pub header_read_timeout_ms: u64,
    /// From the end of a request's headers to the end of its body (408/40801).
    pub body_read_timeout_ms: u64,
    /// A connection idle longer between requests (or after accept) is closed.
    pub idle_timeout_ms: u64,
    /// A response write that makes no progress for this long (the client
    /// does not read) closes the connection.
    pub write_timeout_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_request_bytes: tidelog_api::settings::MAX_REQUEST_BYTES_DEFAULT as u64,
            max_records_per_request: tidelog_api::settings::MAX_RECORDS_PER_REQUEST_DEFAULT as u64,
            max_concurrent_requests: tidelog_api::settings::MAX_CONCURRENT_REQUESTS_DEFAULT as u64,
            max_connections: 10_000,
            max_inflight_bytes: tidelog_api::settings::MAX_INFLIGHT_BYTES_DEFAULT,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: tidelog_api::settings::BODY_READ_TIMEOUT_MS_DEFAULT,
            idle_timeout_ms: 60_000,
            write_timeout_ms: 30_000,
        }
    }
}

/// Largest `http.max_request_bytes`: bodies are buffered whole.
pub const MAX_REQUEST_BYTES_MAX: u64 = 1 << 30;

/// Largest `http.max_concurrent_requests` (tokio's semaphore bound is far
/// higher; this keeps a typo from disabling the limit).
pub const MAX_CONCURRENT_REQUESTS_MAX: u64 = 1 << 20;

/// Largest `http.max_connections` (each is a file descriptor; this keeps a
/// typo from disabling the limit).
pub const MAX_CONNECTIONS_MAX: u64 = 1 << 20;

/// Largest `http.*_timeout_ms`: a day.
pub const HTTP_TIMEOUT_MS_MAX: u64 = 86_400_000;

/// A topic declared in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicDecl {
    pub name: String,
    /// `None` in the file: `default_partitions` (filled in by validation).
    #[serde(default)]
    pub partitions: Option<u32>,
    /// Kafka topic config name → value, canonical after validation.
    #[serde(default)]
    pub configs: BTreeMap<String, ConfigValue>,
}

/// A topic config value as a string, the form the API and storage use.
/// YAML numbers and booleans are accepted (`delete.retention.ms: 86400000`)
/// and turned into their text; lists and maps are type errors that serde
/// reports at the value's own path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ConfigValue(pub String);

impl<'de> Deserialize<'de> for ConfigValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ConfigValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl TopicDecl {
    /// The declared configs as the api crate's overrides map.
    pub fn overrides(&self) -> topic_config::Overrides {
        self.configs
            .iter()
            .map(|(name, value)| (name.clone(), value.0.clone()))
            .collect()
    }
}

impl Config {
    /// Loads the effective config: defaults, then `file` if given, then the
    /// command-line overrides; validates the result.
    pub fn load(file: Option<&Path>, cli: &CliOverrides) -> Result<Config, ConfigError> {
        let (label, mut config) = match file {
            None => ("built-in defaults".to_string(), Config::default()),
            Some(path) => {
                let label = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    file: label.clone(),
                    source,
                })?;
                let config = Config::parse_yaml(&label, &text)?;
                (label, config)
            }
        };
        if let Some(data_dir) = &cli.data_dir {
            config.data_dir = data_dir.clone();
        }
        if let Some(listen) = cli.listen {
            config.listen = listen;
        }
        config.validate(&label)?;
        Ok(config)
    }

    /// Parses YAML text into a config, defaults for absent keys, without the
    /// cross-field checks of [`Config::validate`]. `file` labels errors.
    pub fn parse_yaml(file: &str, text: &str) -> Result<Config, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        serde_yaml::from_str(text).map_err(|e| yaml_error(file, &e))
    }

    /// Cross-field and range checks; fills in topic partitions and
    /// canonicalizes topic config values.
    pub fn validate(&mut self, file: &str) -> Result<(), ConfigError> {
        let bad = |key: &str, reason: String| ConfigError::Invalid {
            file: file.to_string(),
            key: key.to_string(),
            reason,
        };

        if self.cluster_id.is_empty()
            || self
                .cluster_id
                .chars()
                .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(bad(
                "cluster_id",
                format!(
                    "{:?} must be non-empty, without spaces or control characters",
                    self.cluster_id
                ),
            ));
        }
        if self.admin_token.as_deref() == Some("") {
            return Err(bad(
                "admin_token",
                "must not be empty (use null to disable auth)".into(),
            ));
        }
        check_partitions(self.default_partitions)
            .map_err(|e| bad("default_partitions", broker_reason(e)))?;

        let store = &self.store;
        // The storage types are u32; everything else about the `store:` and
        // `retention:` sections is the store's own check.
        for (key, value) in [
            ("store.index_slots", store.index_slots),
            ("store.index_entries", store.index_entries),
        ] {
            if value > u64::from(u32::MAX) {
                return Err(bad(
                    key,
                    format!("{value} is too large, the maximum is {}", u32::MAX),
                ));
            }
        }
        self.store_config().validate().map_err(|e| match e {
            tidelog_storage::StoreError::InvalidConfig { key, reason } => bad(key, reason),
            other => bad("store", other.to_string()),
        })?;

        self.cleaner_config().validate().map_err(|e| match e {
            tidelog_cleaner::CleanerError::InvalidConfig { setting, reason } => {
                bad(setting, reason)
            }
            other => bad("cleaner", other.to_string()),
        })?;

        let http = &self.http;
        let in_range = |key: &str, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(bad(key, format!("{value} is not in [{min}, {max}]")))
            }
        };
        in_range(
            "http.max_request_bytes",
            http.max_request_bytes,
            1024,
            MAX_REQUEST_BYTES_MAX,
        )?;
        in_range(
            "http.max_records_per_request",
            http.max_records_per_request,
            1,
            u64::from(u32::MAX),
        )?;
        in_range(
            "http.max_concurrent_requests",
            http.max_concurrent_requests,
            1,
            MAX_CONCURRENT_REQUESTS_MAX,
        )?;
        in_range(
            "http.max_connections",
            http.max_connections,
            1,
            MAX_CONNECTIONS_MAX,
        )?;
        // Any body within max_request_bytes must fit in an empty budget.
        if http.max_inflight_bytes < http.max_request_bytes {
            return Err(bad(
                "http.max_inflight_bytes",
                format!(
                    "{} is less than http.max_request_bytes ({}): a body of the largest allowed size could never be read",
                    http.max_inflight_bytes, http.max_request_bytes
                ),
            ));
        }
        for (key, value) in [
            ("http.header_read_timeout_ms", http.header_read_timeout_ms),
            ("http.body_read_timeout_ms", http.body_read_timeout_ms),
            ("http.idle_timeout_ms", http.idle_timeout_ms),
            ("http.write_timeout_ms", http.write_timeout_ms),
        ] {
            in_range(key, value, 1, HTTP_TIMEOUT_MS_MAX)?;
        }
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (i, topic) in self.topics.iter_mut().enumerate() {
            let key = |field: &str| format!("topics[{i}].{field}");
            names::validate_topic_name(&topic.name)
                .map_err(|e| bad(&key("name"), broker_reason(e)))?;
            if let Some(first) = seen.insert(topic.name.clone(), i) {
                return Err(bad(
                    &key("name"),
                    format!(
                        "topic {:?} is already declared at topics[{first}]",
                        topic.name
                    ),
                ));
            }
            let partitions = topic.partitions.unwrap_or(self.default_partitions);
            check_partitions(partitions).map_err(|e| bad(&key("partitions"), broker_reason(e)))?;
            topic.partitions = Some(partitions);

            for (name, value) in topic.configs.iter_mut() {
                value.0 = topic_config::validate(name, &value.0)
                    .map_err(|e| bad(&key(&format!("configs.{name}")), broker_reason(e)))?;
            }
            if let Err(e) = TopicConfig::from_overrides(&topic.overrides()) {
                let name = match &e {
                    BrokerError::InvalidTopicConfig { name, .. } => name.clone(),
                    _ => String::new(),
                };
                return Err(bad(&key(&format!("configs.{name}")), broker_reason(e)));
            }
        }
        Ok(())
    }

    /// The store's settings: every key of the `store` and `retention`
    /// sections. Retention keeps the production clock and disk-usage source
    /// (the defaults) and the knobs CONFIG.md does not name
    /// (`max_segments_per_pass`, `pause_between_deletes_ms`).
    pub fn store_config(&self) -> tidelog_storage::StoreConfig {
        let s = &self.store;
        let mut c = tidelog_storage::StoreConfig::new(self.data_dir.clone());
        c.commitlog_segment_bytes = s.commitlog_segment_bytes;
        c.consume_queue_units_per_file = s.consume_queue_units_per_file;
        // `validate` bounds both by u32::MAX.
        c.index_slots = u32::try_from(s.index_slots).unwrap_or(u32::MAX);
        c.index_entries = u32::try_from(s.index_entries).unwrap_or(u32::MAX);
        c.flush = match s.flush {
            FlushMode::Async => tidelog_storage::FlushMode::Async,
            FlushMode::Sync => tidelog_storage::FlushMode::Sync,
        };
        c.flush_interval_ms = s.flush_interval_ms;
        c.max_message_bytes = s.max_message_bytes;
        c.sync_flush_timeout_ms = s.sync_flush_timeout_ms;
        c.dispatch_stall_ms = s.dispatch_stall_ms;
        c.recovery_mode = match s.recovery_mode {
            RecoveryMode::Strict => tidelog_storage::RecoveryMode::Strict,
            RecoveryMode::Truncate => tidelog_storage::RecoveryMode::TruncateAtCorruption,
        };
        let r = &self.retention;
        let retention = &mut c.retention;
        retention.file_reserved_hours = r.file_reserved_hours;
        retention.delete_when = r
            .delete_when
            .hours()
            .iter()
            .map(|&h| u32::from(h))
            .collect();
        retention.check_interval_ms = r.check_interval_ms;
        retention.disk_max_used_ratio = r.disk_max_used_ratio;
        retention.disk_force_clean_ratio = r.disk_force_clean_ratio;
        retention.disk_full_ratio = r.disk_full_ratio;
        // Writes must stop soon after the disk crosses the line, so the
        // disk-full flag is re-evaluated at least every second whatever the
        // retention pass's own interval.
        retention.disk_check_interval_ms = r.check_interval_ms.min(DISK_CHECK_INTERVAL_MS_MAX);
        c
    }

    /// The LogCleaner's settings (`cleaner:`); the load factor and the
    /// crash seam keep the cleaner's defaults.
    pub fn cleaner_config(&self) -> tidelog_cleaner::CleanerConfig {
        let c = &self.cleaner;
        tidelog_cleaner::CleanerConfig {
            threads: usize::try_from(c.threads).unwrap_or(usize::MAX),
            // `validate` bounds it; a 32-bit host gets what it can address.
            dedupe_buffer_bytes: usize::try_from(c.dedupe_buffer_bytes).unwrap_or(usize::MAX),
            backoff_ms: c.backoff_ms,
            io_max_bytes_per_second: c.io_max_bytes_per_second,
            ..tidelog_cleaner::CleanerConfig::default()
        }
    }

    /// The HTTP listener's connection limits.
    pub fn listener_limits(&self) -> crate::listener::ListenerLimits {
        crate::listener::ListenerLimits {
            max_connections: self.http.max_connections,
            header_read_timeout: std::time::Duration::from_millis(self.http.header_read_timeout_ms),
            idle_timeout: std::time::Duration::from_millis(self.http.idle_timeout_ms),
            write_timeout: std::time::Duration::from_millis(self.http.write_timeout_ms),
        }
    }

    /// The HTTP API's settings.
    pub fn api_settings(&self) -> tidelog_api::ApiSettings {
        let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        tidelog_api::ApiSettings {
            cluster_id: self.cluster_id.clone(),
            admin_token: self.admin_token.clone(),
            auto_create_topics: self.auto_create_topics,
            default_partitions: self.default_partitions,
            declared_topics: self
                .topics
                .iter()
                .map(|t| tidelog_broker::DeclaredTopic {
                    name: t.name.clone(),
                    partitions: t.partitions.unwrap_or(self.default_partitions),
                    overrides: t.overrides(),
                })
                .collect(),
            max_request_bytes: to_usize(self.http.max_request_bytes),
            max_records_per_request: to_usize(self.http.max_records_per_request),
            max_concurrent_requests: to_usize(self.http.max_concurrent_requests),
            max_inflight_bytes: self.http.max_inflight_bytes,
            body_read_timeout: std::time::Duration::from_millis(self.http.body_read_timeout_ms),
        }
    }

    /// The config as YAML, with `admin_token` redacted.
    pub fn to_redacted_yaml(&self) -> Result<String, serde_yaml::Error> {
        let mut shown = self.clone();
        if shown.admin_token.is_some() {
            shown.admin_token = Some("<redacted>".into());
        }
        serde_yaml::to_string(&shown)
    }
}

/// The reason part of a validation error from the broker (the key is ours
/// to name).
fn broker_reason(e: BrokerError) -> String {
    match e {
        BrokerError::InvalidName { reason, .. }
        | BrokerError::InvalidTopicConfig { reason, .. } => reason,
        other => other.to_string(),
    }
}

/// Turns a serde_yaml error into file + dotted key + reason. serde_yaml
/// prints `path: message at line L column C`; for unknown fields the path is
/// the parent map, so the field is appended to name the offending key.
fn yaml_error(file: &str, e: &serde_yaml::Error) -> ConfigError {
    let text = e.to_string();
    let (body, position) = match e.location() {
        Some(loc) => {
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            let body = text.strip_suffix(&suffix).unwrap_or(&text).to_string();
            (
                body,
                format!(" (line {}, column {})", loc.line(), loc.column()),
            )
        }
        None => (text, String::new()),
    };
    let (path, message) = match body.split_once(": ") {
        Some((path, message)) if is_path(path) => (Some(path.to_string()), message.to_string()),
        _ => (None, body.clone()),
    };
    let unknown_field = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
        .map(|(field, _)| field.to_string());
    let key = match (path, unknown_field) {
        (Some(path), Some(field)) => format!("{path}.{field}"),
        (None, Some(field)) => field,
        (Some(path), None) => path,
        (None, None) => "(document)".to_string(),
    };
    ConfigError::Invalid {
        file: file.to_string(),
        key,
        reason: format!("{message}{position}"),
    }
}

/// Whether `s` looks like a serde_yaml path (`store.flush`, `topics[1].name`).
fn is_path(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '-' | '?'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "test.yaml";

    fn load_str(text: &str) -> Result<Config, ConfigError> {
        let mut config = Config::parse_yaml(FILE, text)?;
        config.validate(FILE)?;
        Ok(config)
    }

    /// Asserts `text` fails naming `key` and a reason containing `why`.
    fn assert_rejects(text: &str, key: &str, why: &str) {
        let err = load_str(text).unwrap_err();
        let message = err.to_string();
        let ConfigError::Invalid { key: got, .. } = &err else {
            panic!("expected an invalid key, got {message}");
        };
        assert_eq!(got, key, "{message}");
        assert!(
            message.starts_with(&format!("{FILE}: {key}: ")),
            "{message}"
        );
        assert!(message.contains(why), "expected {why:?} in {message}");
    }

    #[test]
    fn shipped_broker_yaml_loads_and_matches_config_md() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/broker.yaml");
        let config = Config::load(Some(&path), &CliOverrides::default()).unwrap();
        let expected_topics = Config::parse_yaml(
            FILE,
            "topics:\n  - {name: events, partitions: 4, configs: {cleanup.policy: delete}}\n  - {name: users, partitions: 4, configs: {cleanup.policy: compact, delete.retention.ms: 86400000}}\n",
        )
        .unwrap()
        .topics;
        // The shipped file is CONFIG.md's: defaults plus the two example topics.
        assert_eq!(
            config,
            Config {
                topics: expected_topics,
                ..Config::default()
            }
        );
        assert_eq!(
            config.topics[1].configs["delete.retention.ms"].0,
            "86400000"
        );
    }

    #[test]
    fn defaults_are_config_md() {
        let config = load_str("").unwrap();
        assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(config.data_dir, PathBuf::from("./data"));
        assert_eq!(config.cluster_id, "tidelog");
        assert_eq!(config.admin_token, None);
        assert!(!config.auto_create_topics);
        assert_eq!(config.default_partitions, 4);
        assert_eq!(config.store.commitlog_segment_bytes, 1_073_741_824);
        assert_eq!(config.store.consume_queue_units_per_file, 300_000);
        assert_eq!(config.store.index_slots, 500_000);
        assert_eq!(config.store.index_entries, 2_000_000);
        assert_eq!(config.store.flush, FlushMode::Async);
        assert_eq!(config.store.flush_interval_ms, 500);
        assert_eq!(config.store.max_message_bytes, 1_048_576);
        assert_eq!(config.store.sync_flush_timeout_ms, 5_000);
        assert_eq!(config.store.dispatch_stall_ms, 30_000);
        assert_eq!(config.retention.file_reserved_hours, 72);
        assert_eq!(config.retention.delete_when.hours(), [4]);
        assert_eq!(config.retention.check_interval_ms, 10_000);
        assert_eq!(config.retention.disk_max_used_ratio, 0.75);
        assert_eq!(config.retention.disk_force_clean_ratio, 0.85);
        assert_eq!(config.retention.disk_full_ratio, 0.90);
        assert_eq!(config.cleaner.threads, 1);
        assert_eq!(config.cleaner.dedupe_buffer_bytes, 134_217_728);
        assert_eq!(config.cleaner.backoff_ms, 15_000);
        assert_eq!(config.cleaner.io_max_bytes_per_second, None);
        assert!(config.topics.is_empty());
        assert_eq!(
            Config::load(None, &CliOverrides::default()).unwrap(),
            config
        );
    }

    #[test]
    fn partial_sections_keep_other_defaults() {
        let config =
            load_str("store:\n  flush: sync\nretention:\n  delete_when: \"04;16;4\"\n").unwrap();
        assert_eq!(config.store.flush, FlushMode::Sync);
        assert_eq!(config.store.flush_interval_ms, 500);
        assert_eq!(config.retention.delete_when.hours(), [4, 16]);
        assert_eq!(config.retention.delete_when.to_string(), "04;16");
        assert_eq!(config.retention.file_reserved_hours, 72);
        assert_eq!(
            load_str("retention: {delete_when: 4}")
                .unwrap()
                .retention
                .delete_when
                .hours(),
            [4]
        );
    }

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.yaml");
        std::fs::write(
            &path,
            "listen: 127.0.0.1:9000\ndata_dir: /from/file\ncluster_id: c1\n",
        )
        .unwrap();

        let from_file = Config::load(Some(&path), &CliOverrides::default()).unwrap();
        assert_eq!(from_file.listen.to_string(), "127.0.0.1:9000");
        assert_eq!(from_file.data_dir, PathBuf::from("/from/file"));

        let cli = CliOverrides {
            data_dir: Some("/from/flag".into()),
            listen: Some("0.0.0.0:1234".parse().unwrap()),
        };
        let both = Config::load(Some(&path), &cli).unwrap();
        assert_eq!(both.listen.to_string(), "0.0.0.0:1234");
        assert_eq!(both.data_dir, PathBuf::from("/from/flag"));
        assert_eq!(
            both.cluster_id, "c1",
            "keys without a flag still come from the file"
        );
    }

    #[test]
    fn missing_file_names_the_file() {
        let err = Config::load(
            Some(Path::new("/nonexistent/tidelog.yaml")),
            &CliOverrides::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/nonexistent/tidelog.yaml: cannot read"),
            "{err}"
        );
    }

    #[test]
    fn unknown_keys_are_named_with_their_path() {
        assert_rejects("lisen: 127.0.0.1:1\n", "lisen", "unknown field");
        assert_rejects(
            "store:\n  flush_intervall_ms: 5\n",
            "store.flush_intervall_ms",
            "unknown field",
        );
        assert_rejects(
            "retention:\n  dlete_when: \"04\"\n",
            "retention.dlete_when",
            "unknown field",
        );
        assert_rejects(
            "topics:\n  - name: a\n    partition: 3\n",
            "topics[0].partition",
            "unknown field",
        );
    }

    #[test]
    fn bad_types_and_enums_name_the_key() {
        assert_rejects(
            "store:\n  flush: sometimes\n",
            "store.flush",
            "unknown variant `sometimes`",
        );
        assert_rejects(
            "default_partitions: -1\n",
            "default_partitions",
            "expected u32",
        );
        assert_rejects(
            "cleaner:\n  threads: many\n",
            "cleaner.threads",
            "invalid type",
        );
    }

    #[test]
    fn bad_listen_is_rejected() {
        assert_rejects("listen: localhost\n", "listen", "invalid socket address");
        assert_rejects(
            "listen: 127.0.0.1:99999\n",
            "listen",
            "invalid socket address",
        );
    }

    #[test]
    fn bad_delete_when_is_rejected() {
        assert_rejects(
            "retention:\n  delete_when: \"24\"\n",
            "retention.delete_when",
            "not an hour 0..=23",
        );
        assert_rejects(
            "retention:\n  delete_when: \"04,16\"\n",
            "retention.delete_when",
            "\"04,16\"",
        );
        assert_rejects(
            "retention:\n  delete_when: \"04;\"\n",
            "retention.delete_when",
            "not an hour",
        );
        assert_rejects(
            "retention:\n  delete_when: \"\"\n",
            "retention.delete_when",
            "not an hour",
        );
    }

    #[test]
    fn ratios_must_be_in_range_and_ordered() {
        assert_rejects(
            "retention:\n  disk_full_ratio: 1.5\n",
            "retention.disk_full_ratio",
            "not a ratio in (0, 1]",
        );
        assert_rejects(
            "retention:\n  disk_max_used_ratio: 0\n",
            "retention.disk_max_used_ratio",
            "not a ratio",
        );
        assert_rejects(
            "retention:\n  disk_max_used_ratio: .nan\n",
            "retention.disk_max_used_ratio",
            "not a ratio",
        );
        assert_rejects(
            "retention:\n  disk_force_clean_ratio: 0.95\n",
            "retention.disk_full_ratio",
            "must be disk_max_used_ratio <= disk_force_clean_ratio <= disk_full_ratio",
        );
        assert_rejects(
            "retention:\n  disk_max_used_ratio: 0.9\n",
            "retention.disk_force_clean_ratio",
            "is below retention.disk_max_used_ratio",
        );
        // Equal ratios are allowed.
        load_str("retention: {disk_max_used_ratio: 0.9, disk_force_clean_ratio: 0.9, disk_full_ratio: 0.9}").unwrap();
    }

    #[test]
    fn store_and_cleaner_bounds() {
        assert_rejects(
            "store: {commitlog_segment_bytes: 100}\n",
            "store.commitlog_segment_bytes",
            "not in [4096, ",
        );
        assert_rejects(
            "store: {flush_interval_ms: 0}\n",
            "store.flush_interval_ms",
            "not in [1, ",
        );
        assert_rejects(
            "store: {sync_flush_timeout_ms: 0}\n",
            "store.sync_flush_timeout_ms",
            "not in [1, ",
        );
        assert_rejects(
            "store: {dispatch_stall_ms: 0}\n",
            "store.dispatch_stall_ms",
            "not in [1, ",
        );
        // The store's own bounds, which `serve` would hit at open.
        assert_rejects(
            "store: {index_slots: 100000000}\n",
            "store.index_slots",
            "not in [1, 67108864]",
        );
        assert_rejects(
            "store: {index_entries: 1}\n",
            "store.index_entries",
            "not in [2, ",
        );
        assert_rejects(
            "store: {consume_queue_units_per_file: 100000000}\n",
            "store.consume_queue_units_per_file",
            "not in [1, 67108864]",
        );
        // A record limit larger than a segment is clamped, not refused.
        load_str("store: {commitlog_segment_bytes: 65536, max_message_bytes: 65536}\n").unwrap();
        load_str("store: {commitlog_segment_bytes: 65536}\n").unwrap();
        assert_rejects(
            "cleaner: {threads: 0}\n",
            "cleaner.threads",
            "not in [1, 64]",
        );
        assert_rejects(
            "cleaner: {threads: 1000}\n",
            "cleaner.threads",
            "not in [1, 64]",
        );
        assert_rejects(
            "cleaner: {dedupe_buffer_bytes: 1000000000000}\n",
            "cleaner.dedupe_buffer_bytes",
            "at most 2 GiB per cleaner thread",
        );
        assert_rejects(
            "cleaner: {dedupe_buffer_bytes: 100}\n",
            "cleaner.dedupe_buffer_bytes",
            "not in [1024, ",
        );
        // Each thread may hold 2 GiB: four threads may hold 8.
        load_str("cleaner: {threads: 4, dedupe_buffer_bytes: 8589934592}\n").unwrap();
        assert_rejects(
            "cleaner: {io_max_bytes_per_second: 0}\n",
            "cleaner.io_max_bytes_per_second",
            "minimum is 1",
        );
        assert_rejects("admin_token: \"\"\n", "admin_token", "must not be empty");
        assert_rejects("cluster_id: \"a b\"\n", "cluster_id", "without spaces");
        assert_rejects("default_partitions: 0\n", "default_partitions", "1..=10000");
        load_str("store: {commitlog_segment_bytes: 65536, max_message_bytes: 4096}\n").unwrap();
    }

    #[test]
    fn bad_topic_names_are_rejected() {
        assert_rejects("topics:\n  - name: ../x\n", "topics[0].name", "'/'");
        assert_rejects(
            "topics:\n  - name: ok\n  - name: \"\"\n",
            "topics[1].name",
            "empty",
        );
        assert_rejects(
            "topics:\n  - name: a\n  - name: a\n",
            "topics[1].name",
            "already declared at topics[0]",
        );
        assert_rejects(
            "topics:\n  - name: a\n    partitions: 0\n",
            "topics[0].partitions",
            "1..=10000",
        );
        assert_rejects(
            "topics:\n  - partitions: 1\n",
            "topics[0]",
            "missing field `name`",
        );
    }

    #[test]
    fn bad_topic_configs_name_the_config_key() {
        assert_rejects(
            "topics:\n  - name: a\n  - name: b\n    configs: {cleanup.policy: purge}\n",
            "topics[1].configs.cleanup.policy",
            "\"purge\" is not a cleanup policy",
        );
        assert_rejects(
            "topics:\n  - name: a\n    configs: {retention.mss: 5}\n",
            "topics[0].configs.retention.mss",
            "unknown config",
        );
        assert_rejects(
            "topics:\n  - name: a\n    configs: {segment.bytes: 10}\n",
            "topics[0].configs.segment.bytes",
            "out of range [1024",
        );
        assert_rejects(
            "topics:\n  - name: a\n    configs: {min.cleanable.dirty.ratio: 2}\n",
            "topics[0].configs.min.cleanable.dirty.ratio",
            "not a ratio",
        );
        assert_rejects(
            "topics:\n  - name: a\n    configs: {min.compaction.lag.ms: 10, max.compaction.lag.ms: 5}\n",
            "topics[0].configs.min.compaction.lag.ms",
            "greater than max.compaction.lag.ms",
        );
        assert_rejects(
            "topics:\n  - name: a\n    configs: {retention.ms: [1]}\n",
            "topics[0].configs.retention.ms",
            "expected a string or a number",
        );
    }

    #[test]
    fn topic_configs_are_canonicalized_and_partitions_defaulted() {
        let config = load_str(
            "default_partitions: 3\ntopics:\n  - name: t\n    configs: {cleanup.policy: 'delete, compact', min.cleanable.dirty.ratio: 0.25}\n",
        )
        .unwrap();
        assert_eq!(config.topics[0].partitions, Some(3));
        assert_eq!(
            config.topics[0].configs["cleanup.policy"].0,
            "compact,delete"
        );
        assert_eq!(
            config.topics[0].configs["min.cleanable.dirty.ratio"].0,
            "0.25"
        );
    }

    #[test]
    fn yaml_syntax_errors_name_a_position() {
        let err = load_str("store: {flush: sync\n").unwrap_err();
        assert!(err.to_string().starts_with(&format!("{FILE}: ")), "{err}");
        assert!(err.to_string().contains("line"), "{err}");
    }

    #[test]
    fn effective_yaml_round_trips_and_redacts_the_token() {
        let config = load_str("admin_token: s3cret\nretention: {delete_when: '16;04'}\ntopics:\n  - {name: u, configs: {cleanup.policy: compact}}\n").unwrap();
        let yaml = config.to_redacted_yaml().unwrap();
        assert!(!yaml.contains("s3cret"), "{yaml}");
        assert!(yaml.contains("<redacted>"), "{yaml}");
        let mut again = load_str(&yaml).unwrap();
        again.admin_token = config.admin_token.clone();
        assert_eq!(again, config);
    }

    #[test]
    fn http_limits_and_index_bounds_are_checked() {
        let config = load_str("http:\n  max_concurrent_requests: 8\n").unwrap();
        assert_eq!(config.http.max_concurrent_requests, 8);
        assert_eq!(config.http.max_request_bytes, 16 << 20);
        assert_rejects(
            "http:\n  max_request_bytes: 10\n",
            "http.max_request_bytes",
            "not in",
        );
        assert_rejects(
            "http:\n  max_concurrent_requests: 0\n",
            "http.max_concurrent_requests",
            "not in",
        );
        assert_rejects(
            "http:\n  max_records_per_request: 0\n",
            "http.max_records_per_request",
            "not in",
        );
        assert_rejects("http:\n  max_reqs: 1\n", "http.max_reqs", "unknown field");
        assert_rejects(
            "store:\n  index_slots: 4294967296\n",
            "store.index_slots",
            "too large",
        );
    }

    #[test]
    fn http_connection_limits_are_checked_and_carried() {
        let config = load_str(
            "http:\n  max_connections: 7\n  max_inflight_bytes: 4096\n  max_request_bytes: 2048\n  \
             header_read_timeout_ms: 11\n  body_read_timeout_ms: 13\n  idle_timeout_ms: 17\n  \
             write_timeout_ms: 19\n",
        )
        .unwrap();
        let limits = config.listener_limits();
        assert_eq!(limits.max_connections, 7);
        assert_eq!(
            limits.header_read_timeout,
            std::time::Duration::from_millis(11)
        );
        assert_eq!(limits.idle_timeout, std::time::Duration::from_millis(17));
        assert_eq!(limits.write_timeout, std::time::Duration::from_millis(19));
        let api = config.api_settings();
        assert_eq!(api.max_inflight_bytes, 4096);
        assert_eq!(api.body_read_timeout, std::time::Duration::from_millis(13));
        let defaults = Config::default();
        assert_eq!(defaults.http.max_connections, 10_000);
        assert_eq!(defaults.http.write_timeout_ms, 30_000);
        assert_eq!(defaults.http.max_inflight_bytes, 256 << 20);
        assert_eq!(
            (
                defaults.http.header_read_timeout_ms,
                defaults.http.body_read_timeout_ms,
                defaults.http.idle_timeout_ms
            ),
            (10_000, 30_000, 60_000)
        );
        assert_rejects(
            "http:\n  max_connections: 0\n",
            "http.max_connections",
            "not in",
        );
        assert_rejects(
            "http:\n  max_inflight_bytes: 2047\n  max_request_bytes: 2048\n",
            "http.max_inflight_bytes",
            "less than http.max_request_bytes",
        );
        for key in [
            "header_read_timeout_ms",
            "body_read_timeout_ms",
            "idle_timeout_ms",
            "write_timeout_ms",
        ] {
            assert_rejects(
                &format!("http:\n  {key}: 0\n"),
                &format!("http.{key}"),
                "not in",
            );
        }
    }

    #[test]
    fn store_and_api_settings_carry_every_key() {
        let mut config = load_str(
            "cluster_id: c1\nadmin_token: t\nauto_create_topics: true\ndefault_partitions: 2\n\
             store:\n  commitlog_segment_bytes: 65536\n  consume_queue_units_per_file: 7\n  index_slots: 11\n  \
             index_entries: 13\n  flush: sync\n  flush_interval_ms: 17\n  max_message_bytes: 19\n  \
             sync_flush_timeout_ms: 23\n  dispatch_stall_ms: 29\n  recovery_mode: truncate\n\
             retention:\n  file_reserved_hours: 5\n  delete_when: \"16;04\"\n  check_interval_ms: 300\n  \
             disk_max_used_ratio: 0.5\n  disk_force_clean_ratio: 0.6\n  disk_full_ratio: 0.95\n\
             http:\n  max_request_bytes: 2048\n  max_records_per_request: 3\n  max_concurrent_requests: 5\n\
             topics:\n  - name: a\n    configs: {cleanup.policy: compact}\n",
        )
        .unwrap();
        config.data_dir = PathBuf::from("/d");
        let store = config.store_config();
        assert_eq!(store.data_dir, PathBuf::from("/d"));
        assert_eq!(store.commitlog_segment_bytes, 65536);
        assert_eq!(store.consume_queue_units_per_file, 7);
        assert_eq!(store.index_slots, 11);
        assert_eq!(store.index_entries, 13);
        assert_eq!(store.flush, tidelog_storage::FlushMode::Sync);
        assert_eq!(store.flush_interval_ms, 17);
        assert_eq!(store.max_message_bytes, 19);
        assert_eq!(store.sync_flush_timeout_ms, 23);
        assert_eq!(store.dispatch_stall_ms, 29);
        assert_eq!(
            store.recovery_mode,
            tidelog_storage::RecoveryMode::TruncateAtCorruption
        );
        assert_eq!(
            Config::default().store_config().recovery_mode,
            tidelog_storage::RecoveryMode::Strict
        );
        let r = &store.retention;
        assert_eq!(r.file_reserved_hours, 5);
        assert_eq!(r.delete_when, vec![4, 16]);
        assert_eq!(r.check_interval_ms, 300);
        assert_eq!(
            (
                r.disk_max_used_ratio,
                r.disk_force_clean_ratio,
                r.disk_full_ratio
            ),
            (0.5, 0.6, 0.95)
        );
        assert_eq!(r.disk_check_interval_ms, 300, "at most check_interval_ms");
        let defaults = Config::default().store_config().retention;
        assert_eq!(defaults.disk_check_interval_ms, 1000, "at most a second");
        assert_eq!(defaults.delete_when, vec![4]);
        let api = config.api_settings();
        assert_eq!(api.cluster_id, "c1");
        assert_eq!(api.admin_token.as_deref(), Some("t"));
        assert!(api.auto_create_topics);
        assert_eq!(api.default_partitions, 2);
        assert_eq!(
            (
                api.max_request_bytes,
                api.max_records_per_request,
                api.max_concurrent_requests
            ),
            (2048, 3, 5)
        );
        assert_eq!(api.declared_topics.len(), 1);
        assert_eq!(
            api.declared_topics[0].partitions, 2,
            "default_partitions filled in"
        );
        assert_eq!(
            api.declared_topics[0]
                .overrides
                .get("cleanup.policy")
                .map(String::as_str),
            Some("compact")
        );
    }

    #[test]
    fn cleaner_section_maps_to_the_cleaner_config() {
        let config = load_str(
            "cleaner:\n  threads: 3\n  dedupe_buffer_bytes: 65536\n  backoff_ms: 250\n  io_max_bytes_per_second: 1000000\n",
        )
        .unwrap();
        let c = config.cleaner_config();
        assert_eq!(
            (c.threads, c.dedupe_buffer_bytes, c.backoff_ms),
            (3, 65536, 250)
        );
        assert_eq!(c.io_max_bytes_per_second, Some(1_000_000));
        let d = Config::default().cleaner_config();
        let want = tidelog_cleaner::CleanerConfig::default();
        assert_eq!(
            (
                d.threads,
                d.dedupe_buffer_bytes,
                d.backoff_ms,
                d.io_max_bytes_per_second
            ),
            (
                want.threads,
                want.dedupe_buffer_bytes,
                want.backoff_ms,
                want.io_max_bytes_per_second
            ),
            "CONFIG.md's defaults are the cleaner's"
        );
    }
}
