//! The broker configuration of OPERATIONS.md: the file's schema, composed of
//! the components' own sections, loading, and the file/key context of its
//! errors.
//!
//! Precedence is built-in defaults < YAML file < command-line flags
//! (`--data-dir`, `--listen`, `--kafka-listen`). Every key of OPERATIONS.md is a field here or in
//! a section type with OPERATIONS.md's default; unknown keys are errors
//! (`deny_unknown_fields`, here and in every section), so a typo such as
//! `retention.dlete_when` stops start-up instead of silently running with
//! the default.
//!
//! Each section lives with its component, with its defaults (written once,
//! in its `Default`) and its one `validate()`, which the component runs
//! too when it starts:
//! * `store:` — [`tidelog_storage::StoreConfig`], `retention:` —
//!   [`tidelog_storage::RetentionConfig`] (both checked by
//!   `StoreConfig::validate`, the one `Store::open` runs);
//! * `cleaner:` — [`tidelog_cleaner::CleanerConfig`] (`LogCleaner::new`
//!   runs its `validate`);
//! * `cluster_id`, `auto_create_topics`, `default_partitions`, `topics` —
//!   [`tidelog_broker::BrokerConfig`], top-level keys listed here (serde's
//!   `flatten` cannot be combined with `deny_unknown_fields`);
//! * `groups:` — [`tidelog_broker::coordinator::GroupsConfig`], carried in
//!   the `BrokerConfig` (whose `validate` runs the section's);
//! * `http:` and `admin_token` — [`tidelog_api::settings`];
//! * `kafka:` — [`tidelog_kafka::KafkaConfig`];
//! * `tls:` — [`tidelog_runtime::tls::TlsConfig`]: the one server
//!   identity of `http.tls` and of the SSL/SASL_SSL Kafka listeners;
//!   its files are read here too (through the same loader `serve` uses),
//!   so `check-config` refuses a bad certificate as `serve` would;
//! * `tiered:` — tidelog-tiered's `TieredConfig`, carried in the
//!   `BrokerConfig` like `groups:` (off unless `url` is set; docs/TIERED.md);
//! * `cluster:` — [`tidelog_cluster::ClusterConfig`]: a cluster's node
//!   (absent or null: a single node);
//! * `security:` — tidelog-security's `SecurityConfig`, carried likewise
//!   (logins, ACLs, bootstrap users; its password files are the config
//!   file's folder's). Protected mode is checked here, across sections:
//!   a non-loopback listener with nothing authenticating stops start-up.
//!
//! So `check-config` and `serve` accept and refuse the same files. This
//! file adds only `listen` and `data_dir`, and the context of a message:
//! every error names the file, the key as a dotted path
//! (`retention.disk_full_ratio`, `topics[1].configs.cleanup.policy`; list
//! indices count from 0) and what is wrong, and stops start-up.
//!
//! Decisions where OPERATIONS.md is silent:
//! * A relative `data_dir` is relative to the working directory, not to the
//!   config file, as with RocketMQ's and Kafka's property files. The
//!   `tls:` files are relative to the config file's folder (certificates
//!   are deployed beside the config, as the contract has it).
//! * `kafka.listeners` replaces `kafka.listen`: writing both (in the
//!   file, or `--kafka-listen` with listeners in the file) is an error,
//!   and the effective config shows `kafka.listen: null` when listeners
//!   are set. A listener without `advertised_host` takes
//!   `kafka.advertised_host`.
//! * An empty file means "all defaults".
//! * A topic entry without `partitions` gets `default_partitions`.
//! * Topic config values may be YAML strings or numbers; they are validated
//!   with the API's rules (`tidelog_broker::topic_config`) and kept in their
//!   canonical string form.
//! * A `max_message_bytes` larger than a segment can hold is not an error:
//!   the store clamps it (and warns once at start).
//! * The effective config printed by `check-config` and logged by `serve`
//!   shows `admin_token` as `<redacted>`, so it does not end up in logs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tidelog_api::settings::{validate_admin_token, HttpConfig, InvalidSetting};
use tidelog_broker::config::TopicDecl;
use tidelog_broker::coordinator::GroupsConfig;
use tidelog_broker::{BrokerConfig, BrokerError};
use tidelog_cleaner::{CleanerConfig, CleanerError};
use tidelog_storage::{RetentionConfig, StoreConfig, StoreError};

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
    /// `--kafka-listen ADDR|none`: `Some(None)` turns the listener off.
    pub kafka_listen: Option<Option<SocketAddr>>,
    /// `--log-format text|json`.
    pub log_format: Option<LogFormat>,
}

/// `log_format`: how `serve` writes its log on stderr. `text` for people
/// (coloured only on a terminal, and never with `NO_COLOR` set); `json`,
/// one JSON object per line, for log shippers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The whole broker configuration (OPERATIONS.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// HTTP request limits (not in OPERATIONS.md's list; added keys).
    pub http: HttpConfig,
    /// The consumer group coordinator.
    pub groups: GroupsConfig,
    /// The Kafka wire protocol listener (KAFKA.md).
    pub kafka: tidelog_kafka::KafkaConfig,
    /// File descriptors kept for the store; client connections past the
    /// open-file limit minus this are refused (docs/OPERATIONS.md).
    pub descriptors: tidelog_runtime::connections::DescriptorsConfig,
    /// Tiered storage: the remote tier (docs/TIERED.md); off without a url.
    pub tiered: tidelog_broker::store::TieredConfig,
    /// The server's TLS identity (certificate, key, client CA).
    pub tls: tidelog_runtime::tls::TlsConfig,
    /// Created at start if absent; their configs applied if present.
    pub topics: Vec<TopicDecl>,
    /// How the log is written (OPERATIONS.md's key).
    pub log_format: LogFormat,
    /// Logins, ACLs, users and protected mode (docs/SECURITY.md).
    pub security: tidelog_security::config::SecurityConfig,
    /// A cluster's node (docs/CLUSTER.md): absent or null, a single node.
    pub cluster: Option<tidelog_cluster::ClusterConfig>,
    /// Not a key: whether `kafka.listen` was written (in the file or as
    /// `--kafka-listen`), which `kafka.listeners` forbids (module doc).
    #[serde(skip)]
    pub kafka_listen_given: bool,
}

impl Default for Config {
    /// The components' defaults; only `listen` is this file's.
    fn default() -> Self {
        let broker = BrokerConfig::default();
        let store = StoreConfig::default();
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: store.data_dir.clone(),
            cluster_id: broker.cluster_id,
            admin_token: None,
            auto_create_topics: broker.auto_create_topics,
            default_partitions: broker.default_partitions,
            store,
            retention: RetentionConfig::default(),
            cleaner: CleanerConfig::default(),
            http: HttpConfig::default(),
            groups: broker.groups,
            kafka: tidelog_kafka::KafkaConfig::default(),
            descriptors: Default::default(),
            tiered: broker.tiered,
            tls: Default::default(),
            topics: broker.topics,
            log_format: LogFormat::default(),
            security: broker.security,
            cluster: None,
            kafka_listen_given: false,
        }
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
                let mut config = Config::parse_yaml(&label, &text)?;
                // Files the config names are its folder's, not the
                // working directory's.
                let base = path.parent().unwrap_or(Path::new(""));
                config.security.resolve_paths(base);
                config.tls.resolve_against(base);
                (label, config)
            }
        };
        if let Some(data_dir) = &cli.data_dir {
            config.data_dir = data_dir.clone();
        }
        if let Some(listen) = cli.listen {
            config.listen = listen;
        }
        if let Some(kafka_listen) = cli.kafka_listen {
            config.kafka.listen = kafka_listen;
            config.kafka_listen_given = true;
        }
        if let Some(log_format) = cli.log_format {
            config.log_format = log_format;
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
        let mut config: Config = serde_yaml::from_str(text).map_err(|e| yaml_error(file, &e))?;
        // Parsed once more as a tree, only to see whether the key was
        // written (serde fills the default in when it was not).
        config.kafka_listen_given = serde_yaml::from_str::<serde_yaml::Value>(text)
            .ok()
            .and_then(|tree| tree.get("kafka")?.get("listen").cloned())
            .is_some();
        Ok(config)
    }

    /// Every section's own `validate()`, with the file named in the error;
    /// fills in topic partitions and canonicalizes topic config values.
    pub fn validate(&mut self, file: &str) -> Result<(), ConfigError> {
        let bad = |key: &str, reason: String| ConfigError::Invalid {
            file: file.to_string(),
            key: key.to_string(),
            reason,
        };
        let mut broker = self.broker_config();
        broker.validate().map_err(|e| match e {
            BrokerError::InvalidConfig { key, reason } => bad(&key, reason),
            other => bad("(document)", other.to_string()),
        })?;
        self.topics = broker.topics;
        let setting = |e: InvalidSetting| bad(e.key, e.reason);
        validate_admin_token(self.admin_token.as_deref()).map_err(setting)?;
        self.store_config().validate().map_err(|e| match e {
            StoreError::InvalidConfig { key, reason } => bad(key, reason),
            other => bad("store", other.to_string()),
        })?;
        self.cleaner.validate().map_err(|e| match e {
            CleanerError::InvalidConfig { setting, reason } => bad(setting, reason),
            other => bad("cleaner", other.to_string()),
        })?;
        self.http.validate().map_err(setting)?;
        self.kafka
            .validate()
            .map_err(|(key, reason)| bad(&format!("kafka.{key}"), reason))?;
        self.descriptors
            .validate()
            .map_err(|(key, reason)| bad(key, reason))?;
        if let Some(cluster) = &self.cluster {
            cluster
                .validate()
                .map_err(|e| bad(&format!("cluster.{}", e.key), e.reason))?;
            if cluster.replication_listen == self.listen {
                return Err(bad(
                    "cluster.replication_listen",
                    format!("is the HTTP listen address {}", self.listen),
                ));
            }
        }
        self.validate_listeners(file)
    }

    /// The listeners against each other and against `tls:`: `http.tls`
    /// and SSL/SASL_SSL Kafka listeners need a certificate that loads.
    fn validate_listeners(&mut self, file: &str) -> Result<(), ConfigError> {
        let bad = |key: &str, reason: String| ConfigError::Invalid {
            file: file.to_string(),
            key: key.to_string(),
            reason,
        };
        if let Some(listeners) = &self.kafka.listeners {
            if self.kafka_listen_given {
                return Err(bad(
                    "kafka.listeners",
                    "kafka.listen is set too (or --kafka-listen given): listeners replace it, set one of the two".into(),
                ));
            }
            for (i, listener) in listeners.iter().enumerate() {
                if listener.listen == self.listen {
                    return Err(bad(
                        &format!("kafka.listeners[{i}].listen"),
                        format!("is the HTTP listen address {}", self.listen),
                    ));
                }
            }
            // What is served: the listeners, not the default address.
            self.kafka.listen = None;
        }
        if self.kafka.listen.is_some() && self.kafka.listen == Some(self.listen) {
            return Err(bad(
                "kafka.listen",
                format!("is the HTTP listen address {}", self.listen),
            ));
        }
        self.tls
            .validate()
            .map_err(|(key, reason)| bad(key, reason))?;
        let needs_certificate = |what: &str| {
            format!("{what} needs tls.cert_file and tls.key_file (the server's certificate)")
        };
        if self.http.tls && !self.tls.enabled() {
            return Err(bad("http.tls", needs_certificate("an HTTPS listener")));
        }
        for (i, listener) in self.kafka.listeners.iter().flatten().enumerate() {
            if listener.security_protocol.uses_tls() && !self.tls.enabled() {
                return Err(bad(
                    &format!("kafka.listeners[{i}].security_protocol"),
                    needs_certificate(listener.security_protocol.as_str()),
                ));
            }
        }
        if self.tls.enabled() {
            // The files as `serve` reads them: a bad certificate stops
            // `check-config` too.
            tidelog_runtime::tls::TlsAcceptor::load(&self.tls).map_err(|e| {
                let message = e.to_string();
                let reason = message
                    .strip_prefix(&format!("{}: ", e.key()))
                    .unwrap_or(&message);
                bad(e.key(), reason.to_string())
            })?;
        }
        if let Some(cluster) = &self.cluster {
            if self.tls.enabled() && self.tls.client_ca_file.is_none() {
                return Err(bad(
                    "tls.client_ca_file",
                    "a cluster with tls needs it: its nodes prove who they are to each other with certificates this CA signed (docs/CLUSTER.md \"Security\")".into(),
                ));
            }
            let addr = cluster.replication_listen;
            if !addr.ip().is_loopback()
                && !self.tls.enabled()
                && !self.security.allow_unauthenticated_remote
            {
                return Err(bad(
                    "cluster.replication_listen",
                    format!(
                        "{addr} is reachable from other hosts and replication without tls authenticates nobody: whoever connects could copy the whole CommitLog (protected mode). Set tls.cert_file, tls.key_file and tls.client_ca_file (the nodes then prove who they are with certificates), or security.allow_unauthenticated_remote: true to serve it open anyway"
                    ),
                ));
            }
        }
        if let Some((key, addr)) = self.unprotected_remote_listener() {
            return Err(bad(
                &key,
                format!(
                    "{addr} is reachable from other hosts and nothing on it authenticates (protected mode). Set security.authentication: true (and users), or security.allow_unauthenticated_remote: true to serve it open anyway"
                ),
            ));
        }
        Ok(())
    }

    /// Whether any listener speaks TLS (the certificate is then loaded,
    /// watched and reloaded on SIGHUP).
    pub fn serves_tls(&self) -> bool {
        self.http.tls
            || self
                .kafka
                .effective_listeners()
                .iter()
                .any(|l| l.security_protocol.uses_tls())
    }

    /// Protected mode (as Redis has it): the first listener that binds a
    /// non-loopback address with nothing on it authenticating, unless
    /// `security.allow_unauthenticated_remote` says so. With
    /// `security.authentication` every HTTP request needs a user and a
    /// Kafka PLAINTEXT listener serves nothing but ApiVersions before a
    /// login, so no listener is open.
    /// A listener authenticates on its own when it asks every client for
    /// a login (SASL_*) or for a client certificate (TLS with
    /// `tls.client_auth: required`).
    fn unprotected_remote_listener(&self) -> Option<(String, SocketAddr)> {
        if self.security.authentication || self.security.allow_unauthenticated_remote {
            return None;
        }
        let remote = |addr: &SocketAddr| !addr.ip().is_loopback();
        let certificates_required = self.tls.client_ca_file.is_some()
            && self.tls.client_auth == tidelog_runtime::tls::ClientAuth::Required;
        if remote(&self.listen) && !(self.http.tls && certificates_required) {
            return Some(("listen".into(), self.listen));
        }
        let listeners = self.kafka.effective_listeners();
        listeners.iter().enumerate().find_map(|(i, l)| {
            let protocol = l.security_protocol;
            let authenticates =
                protocol.uses_sasl() || (protocol.uses_tls() && certificates_required);
            (remote(&l.listen) && !authenticates).then(|| {
                let key = match &self.kafka.listeners {
                    Some(_) => format!("kafka.listeners[{i}].listen"),
                    None => "kafka.listen".to_owned(),
                };
                (key, l.listen)
            })
        })
    }

    /// The store's settings: the `store` and `retention` sections, in
    /// `data_dir`, as a cluster's node if there is a `cluster` section.
    /// Retention keeps the production clock and disk-usage source (the
    /// defaults) and the knobs OPERATIONS.md does not name
    /// (`max_segments_per_pass`, `pause_between_deletes_ms`).
    pub fn store_config(&self) -> StoreConfig {
        StoreConfig {
            data_dir: self.data_dir.clone(),
            retention: self.retention.clone(),
            cluster_member: self.cluster.is_some(),
            ..self.store.clone()
        }
    }

    /// The LogCleaner's settings (`cleaner:`).
    pub fn cleaner_config(&self) -> CleanerConfig {
        self.cleaner.clone()
    }

    /// The broker's settings (the top-level keys it owns).
    pub fn broker_config(&self) -> BrokerConfig {
        BrokerConfig {
            cluster_id: self.cluster_id.clone(),
            auto_create_topics: self.auto_create_topics,
            default_partitions: self.default_partitions,
            topics: self.topics.clone(),
            groups: self.groups.clone(),
            tiered: self.tiered.clone(),
            security: self.security.clone(),
        }
    }

    /// The HTTP listener's connection limits.
    pub fn listener_limits(&self) -> tidelog_api::ListenerLimits {
        tidelog_api::ListenerLimits {
            max_connections: self.http.max_connections,
            header_read_timeout: std::time::Duration::from_millis(self.http.header_read_timeout_ms),
            idle_timeout: std::time::Duration::from_millis(self.http.idle_timeout_ms),
            write_timeout: std::time::Duration::from_millis(self.http.write_timeout_ms),
        }
    }

    /// The HTTP API's settings.
    pub fn api_settings(&self) -> tidelog_api::ApiSettings {
        tidelog_api::ApiSettings::new(self.broker_config(), self.admin_token.clone(), &self.http)
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
#[path = "config_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "config_tls_tests.rs"]
mod tls_tests;
