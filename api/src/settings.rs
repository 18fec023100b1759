//! What the HTTP layer is configured with: the `http:` section of
//! broker.yaml ([`HttpConfig`], OPERATIONS.md's keys and units, its defaults
//! written once in `Default`, its one check [`HttpConfig::validate`]) and
//! the settings the router runs with ([`ApiSettings`]), built from it, the
//! admin token and the broker's settings.
//!
//! The server crate owns the file (OPERATIONS.md) and composes the sections;
//! the api crate does not depend on it, and its tests build settings
//! directly.

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use tidelog_broker::{BrokerConfig, DeclaredTopic};

/// Largest `http.max_request_bytes`: bodies are buffered whole.
pub const MAX_REQUEST_BYTES_MAX: u64 = 1 << 30;

/// Smallest `http.max_request_bytes`.
pub const MAX_REQUEST_BYTES_MIN: u64 = 1024;

/// Largest `http.max_concurrent_requests` (tokio's semaphore bound is far
/// higher; this keeps a typo from disabling the limit).
pub const MAX_CONCURRENT_REQUESTS_MAX: u64 = 1 << 20;

/// Largest `http.max_connections` (each is a file descriptor; this keeps a
/// typo from disabling the limit).
pub const MAX_CONNECTIONS_MAX: u64 = 1 << 20;

/// Largest `http.max_consumer_instances` (each holds positions and a
/// group membership).
pub const MAX_CONSUMER_INSTANCES_MAX: u64 = 1_000_000;

/// Longest `http.advertised_url`.
pub const ADVERTISED_URL_MAX_BYTES: usize = 2048;

/// Smallest `http.max_inflight_response_bytes`: the default fetch's
/// `max_bytes`.
pub const MAX_INFLIGHT_RESPONSE_BYTES_MIN: u64 = 1 << 20;

/// Largest `http.max_inflight_response_bytes` (a typo does not disable it).
pub const MAX_INFLIGHT_RESPONSE_BYTES_MAX: u64 = 1 << 40;

/// Largest `http.auth_failure_delay_ms`: a minute.
pub const AUTH_FAILURE_DELAY_MS_MAX: u64 = 60_000;

/// Failed admin token checks whose delay runs at once, over every
/// connection; more wait for one to end, so guesses in parallel are no
/// faster than this many per `http.auth_failure_delay_ms`.
pub const AUTH_FAILURES_AT_ONCE: usize = 4;

/// Largest `http.*_timeout_ms`: a day.
pub const HTTP_TIMEOUT_MS_MAX: u64 = 86_400_000;

/// The `http:` section: every queue and buffer of the HTTP side has a
/// bound. Absent keys keep the defaults, unknown keys are errors.
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
    /// Fetch answer bytes rendered and not yet written, all connections
    /// together; past it answers are smaller, or 503/50307 (API.md).
    pub max_inflight_response_bytes: u64,
    /// A call with a wrong admin token is answered 401 after this long;
    /// [`AUTH_FAILURES_AT_ONCE`] such delays run at once, more wait.
    pub auth_failure_delay_ms: u64,
    /// From a request's first byte to the end of its headers.
    pub header_read_timeout_ms: u64,
    /// From the end of a request's headers to the end of its body (408/40801).
    pub body_read_timeout_ms: u64,
    /// A connection idle longer between requests (or after accept) is closed.
    pub idle_timeout_ms: u64,
    /// A response write that makes no progress for this long (the client
    /// does not read) closes the connection.
    pub write_timeout_ms: u64,
    /// The base of consumer instances' `base_uri` (clients behind a proxy
    /// need the proxy's address); `None`: `http://<listen address>`
    /// (`https://` with `tls`).
    pub advertised_url: Option<String>,
    /// A consumer instance idle this long expires.
    pub consumer_instance_timeout_ms: u64,
    /// Consumer instances of every group together; one more is 42901.
    pub max_consumer_instances: u64,
    /// The listener speaks HTTPS only, with the `tls:` section's
    /// certificate (the server checks that one is configured).
    pub tls: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_request_bytes: 16 << 20,
            max_records_per_request: 10_000,
            max_concurrent_requests: 1024,
            max_connections: 10_000,
            max_inflight_bytes: 256 << 20,
            max_inflight_response_bytes: 256 << 20,
            auth_failure_delay_ms: 1000,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
            write_timeout_ms: 30_000,
            advertised_url: None,
            consumer_instance_timeout_ms: 300_000,
            max_consumer_instances: 1000,
            tls: false,
        }
    }
}

/// A refused setting of the HTTP side; `key` is its path in broker.yaml.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct InvalidSetting {
    pub key: &'static str,
    pub reason: String,
}

impl HttpConfig {
    /// Range and cross-field checks of the `http:` section.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        let in_range = |key: &'static str, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(InvalidSetting {
                    key,
                    reason: format!("{value} is not in [{min}, {max}]"),
                })
            }
        };
        in_range(
            "http.max_request_bytes",
            self.max_request_bytes,
            MAX_REQUEST_BYTES_MIN,
            MAX_REQUEST_BYTES_MAX,
        )?;
        in_range(
            "http.max_records_per_request",
            self.max_records_per_request,
            1,
            u64::from(u32::MAX),
        )?;
        in_range(
            "http.max_concurrent_requests",
            self.max_concurrent_requests,
            1,
            MAX_CONCURRENT_REQUESTS_MAX,
        )?;
        in_range(
            "http.max_connections",
            self.max_connections,
            1,
            MAX_CONNECTIONS_MAX,
        )?;
        // Any body within max_request_bytes must fit in an empty budget.
        if self.max_inflight_bytes < self.max_request_bytes {
            return Err(InvalidSetting {
                key: "http.max_inflight_bytes",
                reason: format!(
                    "{} is less than http.max_request_bytes ({}): a body of the largest allowed size could never be read",
                    self.max_inflight_bytes, self.max_request_bytes
                ),
            });
        }
        in_range(
            "http.max_inflight_response_bytes",
            self.max_inflight_response_bytes,
            MAX_INFLIGHT_RESPONSE_BYTES_MIN,
            MAX_INFLIGHT_RESPONSE_BYTES_MAX,
        )?;
        in_range(
            "http.auth_failure_delay_ms",
            self.auth_failure_delay_ms,
            1,
            AUTH_FAILURE_DELAY_MS_MAX,
        )?;
        for (key, value) in [
            ("http.header_read_timeout_ms", self.header_read_timeout_ms),
            ("http.body_read_timeout_ms", self.body_read_timeout_ms),
            ("http.idle_timeout_ms", self.idle_timeout_ms),
            ("http.write_timeout_ms", self.write_timeout_ms),
        ] {
            in_range(key, value, 1, HTTP_TIMEOUT_MS_MAX)?;
        }
        in_range(
            "http.consumer_instance_timeout_ms",
            self.consumer_instance_timeout_ms,
            1000,
            HTTP_TIMEOUT_MS_MAX,
        )?;
        in_range(
            "http.max_consumer_instances",
            self.max_consumer_instances,
            1,
            MAX_CONSUMER_INSTANCES_MAX,
        )?;
        if let Some(url) = &self.advertised_url {
            let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
            let host = url.split_once("://").map_or("", |(_, rest)| rest);
            if !scheme_ok
                || host.is_empty()
                || url.len() > ADVERTISED_URL_MAX_BYTES
                || url.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(InvalidSetting {
                    key: "http.advertised_url",
                    reason: format!(
                        "{url:?} is not an http:// or https:// URL with a host (at most {ADVERTISED_URL_MAX_BYTES} bytes, no spaces)"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The `admin_token` rule: `None` (no auth) or a non-empty token.
pub fn validate_admin_token(token: Option<&str>) -> Result<(), InvalidSetting> {
    if token == Some("") {
        return Err(InvalidSetting {
            key: "admin_token",
            reason: "must not be empty (use null to disable auth)".into(),
        });
    }
    Ok(())
}

/// Settings of the HTTP API, as the router uses them.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiSettings {
    /// The broker's settings the HTTP side answers with (cluster id,
    /// auto-create, the default partition count).
    pub broker: BrokerConfig,
    /// `Some`: mutating v3 calls need `Authorization: Bearer <token>`.
    pub admin_token: Option<String>,
    /// Largest request body; larger ones answer 413/41301.
    pub max_request_bytes: usize,
    /// Most records in one produce request; more answer 413/41301.
    pub max_records_per_request: usize,
    /// Requests served at once (long-polling fetches included); one more
    /// answers 429/42901 at once instead of queueing without bound. A
    /// request counts once its body is in, not while it waits for bytes.
    pub max_concurrent_requests: usize,
    /// Request body bytes held in memory by all connections together; a
    /// body that would pass it answers 503/50305.
    pub max_inflight_bytes: u64,
    /// Fetch answer bytes rendered and not yet written, all connections
    /// together (`crate::answers`).
    pub max_inflight_response_bytes: u64,
    /// How long a call with a wrong admin token waits for its 401
    /// (`crate::failed_auth`).
    pub auth_failure_delay: Duration,
    /// From the end of a request's headers to the end of its body; a body
    /// still arriving then answers 408/40801 and the connection closes.
    pub body_read_timeout: Duration,
    /// `http.advertised_url` as configured.
    pub advertised_url: Option<String>,
    /// The base of consumer instances' `base_uri`: `advertised_url`, else
    /// `http://<listen address>` (`https://` with `http.tls`,
    /// [`ApiSettings::with_listen`]).
    pub base_url: String,
    /// `http.tls`: the listener speaks HTTPS only.
    pub tls: bool,
    /// `host:port` other nodes and clients reach this node's HTTP API at:
    /// the authority of `advertised_url`, else the listen address
    /// ([`ApiSettings::with_listen`]). A single node's `GET /v1/cluster`
    /// names it.
    pub http_address: String,
    /// `host:port` of this node's Kafka listener, once the node names it
    /// ([`ApiSettings::with_kafka_address`]); a single node's
    /// `GET /v1/cluster` names it (`null` until then).
    pub kafka_address: Option<String>,
    /// The consumer-instance manager's settings.
    pub consumers: tidelog_broker::consumers::ConsumersConfig,
}

impl ApiSettings {
    /// The router's settings from the broker's, the admin token and the
    /// `http:` section (validated: its bounds fit in `usize`).
    pub fn new(broker: BrokerConfig, admin_token: Option<String>, http: &HttpConfig) -> Self {
        let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        ApiSettings {
            broker,
            admin_token,
            max_request_bytes: to_usize(http.max_request_bytes),
            max_records_per_request: to_usize(http.max_records_per_request),
            max_concurrent_requests: to_usize(http.max_concurrent_requests),
            max_inflight_bytes: http.max_inflight_bytes,
            max_inflight_response_bytes: http.max_inflight_response_bytes,
            auth_failure_delay: Duration::from_millis(http.auth_failure_delay_ms),
            body_read_timeout: Duration::from_millis(http.body_read_timeout_ms),
            advertised_url: http.advertised_url.clone(),
            base_url: http
                .advertised_url
                .clone()
                .unwrap_or_else(|| "http://127.0.0.1:8080".into()),
            tls: http.tls,
            http_address: http
                .advertised_url
                .as_deref()
                .and_then(url_authority)
                .unwrap_or("127.0.0.1:8080")
                .to_string(),
            kafka_address: None,
            consumers: tidelog_broker::consumers::ConsumersConfig {
                instance_timeout_ms: http.consumer_instance_timeout_ms,
                max_instances: to_usize(http.max_consumer_instances),
            },
        }
    }

    /// The settings with the address the server listens on: the default
    /// `base_uri` base when `http.advertised_url` is not set.
    pub fn with_listen(mut self, listen: std::net::SocketAddr) -> Self {
        if self.advertised_url.is_none() {
            let scheme = if self.tls { "https" } else { "http" };
            self.base_url = format!("{scheme}://{listen}");
            self.http_address = listen.to_string();
        }
        self
    }

    /// The settings with the `host:port` Kafka clients reach this node
    /// at (its first listener's advertised address), for `GET
    /// /v1/cluster` on a single node.
    pub fn with_kafka_address(mut self, address: impl Into<String>) -> Self {
        self.kafka_address = Some(address.into());
        self
    }
}

/// The `host:port` of an `http://` or `https://` URL (its path dropped).
fn url_authority(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    (!authority.is_empty()).then_some(authority)
}

impl Default for ApiSettings {
    /// Every default is its section's.
    fn default() -> Self {
        ApiSettings::new(BrokerConfig::default(), None, &HttpConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_carry_the_sections_defaults() {
        let s = ApiSettings::default();
        let http = HttpConfig::default();
        assert_eq!(s.max_request_bytes, 16 << 20);
        assert_eq!(s.max_records_per_request, 10_000);
        assert_eq!(s.max_concurrent_requests, 1024);
        assert_eq!(s.max_inflight_bytes, http.max_inflight_bytes);
        assert_eq!(s.max_inflight_response_bytes, 256 << 20);
        assert_eq!(s.auth_failure_delay, Duration::from_millis(1000));
        assert_eq!(s.body_read_timeout, Duration::from_millis(30_000));
        assert_eq!(s.broker, BrokerConfig::default());
        http.validate().unwrap();
    }

    #[test]
    fn validate_names_the_key() {
        let refused = |change: fn(&mut HttpConfig)| {
            let mut c = HttpConfig::default();
            change(&mut c);
            c.validate().unwrap_err().key
        };
        assert_eq!(
            refused(|c| c.max_request_bytes = 10),
            "http.max_request_bytes"
        );
        assert_eq!(refused(|c| c.max_connections = 0), "http.max_connections");
        assert_eq!(
            refused(|c| c.max_inflight_bytes = c.max_request_bytes - 1),
            "http.max_inflight_bytes"
        );
        assert_eq!(refused(|c| c.idle_timeout_ms = 0), "http.idle_timeout_ms");
        assert_eq!(
            refused(|c| c.max_inflight_response_bytes = 1000),
            "http.max_inflight_response_bytes"
        );
        assert_eq!(
            refused(|c| c.auth_failure_delay_ms = 0),
            "http.auth_failure_delay_ms"
        );
        assert_eq!(
            refused(|c| c.auth_failure_delay_ms = 60_001),
            "http.auth_failure_delay_ms"
        );
        assert_eq!(
            refused(|c| c.consumer_instance_timeout_ms = 10),
            "http.consumer_instance_timeout_ms"
        );
        assert_eq!(
            refused(|c| c.max_consumer_instances = 0),
            "http.max_consumer_instances"
        );
        for bad in ["ftp://x", "http://", "http://a b", "localhost:8080"] {
            let c = HttpConfig {
                advertised_url: Some(bad.into()),
                ..HttpConfig::default()
            };
            assert_eq!(
                c.validate().unwrap_err().key,
                "http.advertised_url",
                "{bad}"
            );
        }
        let listen = "127.0.0.1:9".parse().unwrap();
        let mut http = HttpConfig::default();
        let s = ApiSettings::new(BrokerConfig::default(), None, &http).with_listen(listen);
        assert_eq!(s.base_url, "http://127.0.0.1:9");
        assert_eq!(s.http_address, "127.0.0.1:9");
        http.advertised_url = Some("https://proxy.example/kafka".into());
        http.validate().unwrap();
        let s = ApiSettings::new(BrokerConfig::default(), None, &http).with_listen(listen);
        assert_eq!(s.base_url, "https://proxy.example/kafka");
        assert_eq!(s.http_address, "proxy.example", "the URL's authority");
        let s = s.with_kafka_address("broker.example:9092");
        assert_eq!(s.kafka_address.as_deref(), Some("broker.example:9092"));
        assert_eq!(
            validate_admin_token(Some("")).unwrap_err().key,
            "admin_token"
        );
        validate_admin_token(None).unwrap();
        validate_admin_token(Some("t")).unwrap();
    }
}
