//! The `kafka:` section of broker.yaml (OPERATIONS.md), its one `Default`
//! and its one `validate()`.
//!
//! Listeners: either `listen` (one PLAINTEXT listener, named
//! [`DEFAULT_LISTENER_NAME`]) or `listeners` (named, each with its
//! security protocol, as Kafka's `listeners` and
//! `listener.security.protocol.map`); [`KafkaConfig::effective_listeners`]
//! is the one list the server binds. Whether both were written is the
//! binary's check (it knows which keys the file has).

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// Largest `kafka.max_request_bytes`: 1 GiB (a frame is held in memory).
pub const MAX_REQUEST_BYTES_MAX: u64 = 1 << 30;
/// Largest `kafka.max_connections` (each is a file descriptor).
pub const MAX_CONNECTIONS_MAX: u64 = 1_000_000;
/// The SASL mechanisms served, the default `kafka.sasl_mechanisms`.
pub const SASL_MECHANISMS: [&str; 3] = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"];
/// Kafka's broker `fetch.max.bytes` default: 55 MiB.
pub const FETCH_MAX_BYTES_DEFAULT: u64 = 55 * 1024 * 1024;
/// The name of the listener `kafka.listen` makes (Kafka's name for it).
pub const DEFAULT_LISTENER_NAME: &str = "PLAINTEXT";
/// Longest listener name.
pub const LISTENER_NAME_BYTES_MAX: usize = 64;
/// The default `kafka.authentication_timeout_ms`: Kafka clients finish a
/// SASL login in milliseconds; 10 s leaves room for a slow network.
pub const AUTHENTICATION_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// The range of `kafka.authentication_timeout_ms`.
pub const AUTHENTICATION_TIMEOUT_MS_RANGE: std::ops::RangeInclusive<u64> = 100..=300_000;

/// What a listener's connections speak (Kafka's `security.protocol`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Connections are TLS (`SSL`, `SASL_SSL`).
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Connections log in with SASL before anything else
    /// (`SASL_PLAINTEXT`, `SASL_SSL`).
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// The name Kafka gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// A listener's name: `[A-Z0-9_]+`, unique among the listeners
/// (checked by [`KafkaConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ListenerName(pub String);

impl std::fmt::Display for ListenerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One entry of `kafka.listeners`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    pub name: ListenerName,
    pub listen: SocketAddr,
    #[serde(default)]
    pub security_protocol: SecurityProtocol,
    /// The host Metadata names to clients of this listener; `None`:
    /// `kafka.advertised_host`, else the listen host.
    #[serde(default)]
    pub advertised_host: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaConfig {
    /// `None`: no Kafka listener (unless `listeners` names some).
    pub listen: Option<SocketAddr>,
    /// Named listeners, each with its security protocol; set, they
    /// replace `listen`.
    pub listeners: Option<Vec<ListenerConfig>>,
    /// The host Metadata answers name; `None`: the listen host.
    pub advertised_host: Option<String>,
    /// Larger frames close the connection; also the budget a request's
    /// compressed batches may inflate into.
    pub max_request_bytes: u64,
    pub max_connections: u64,
    /// One compressed batch's records, inflated, at most: Kafka's
    /// `max.message.bytes` check of a batch, made on the inflated bytes
    /// (where the memory is). Larger: MESSAGE_TOO_LARGE.
    pub max_batch_inflated_bytes: u64,
    /// Records one Produce request may carry, all partitions together
    /// (each becomes an append record in memory). More:
    /// RECORD_LIST_TOO_LARGE.
    pub max_records_per_request: u64,
    /// The most record bytes one Fetch answer carries, whatever its
    /// `max_bytes` asks (Kafka's broker `fetch.max.bytes`); a partition's
    /// first batch still comes back when larger, so consumers progress.
    pub fetch_max_bytes: u64,
    /// The SASL mechanisms a handshake may choose, offered in this order:
    /// `SCRAM-SHA-256`, `SCRAM-SHA-512`, `PLAIN`.
    pub sasl_mechanisms: Vec<String>,
    /// On a SASL listener (`SASL_PLAINTEXT`, `SASL_SSL`), how long a
    /// connection may take to log in (from its first byte after any TLS
    /// handshake) before it is closed (`listener`).
    pub authentication_timeout_ms: u64,
    /// Not a YAML key: the top-level `admin_token`. When set, the
    /// mutating admin APIs need a SASL/PLAIN login with it as password
    /// (`handlers::sasl`, `handlers::admin`).
    #[serde(skip)]
    pub admin_token: Option<AdminToken>,
    /// Not a YAML key: the top-level `cluster_id`, answered by Metadata
    /// from the first request, before the broker is ready (a client that
    /// sees the id change, or none, treats it as another cluster).
    #[serde(skip)]
    pub cluster_id: Option<String>,
}

/// The admin token; its `Debug` never shows it (configs are logged).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct AdminToken(pub String);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 9092))),
            listeners: None,
            advertised_host: None,
            max_request_bytes: 104_857_600,
            max_connections: 4096,
            max_batch_inflated_bytes: 16 << 20,
            max_records_per_request: 500_000,
            fetch_max_bytes: FETCH_MAX_BYTES_DEFAULT,
            sasl_mechanisms: SASL_MECHANISMS.iter().map(|m| (*m).to_owned()).collect(),
            authentication_timeout_ms: AUTHENTICATION_TIMEOUT_MS_DEFAULT,
            admin_token: None,
            cluster_id: None,
        }
    }
}

impl KafkaConfig {
    /// The listeners to bind: `listeners` when set, else `listen` as one
    /// PLAINTEXT listener named [`DEFAULT_LISTENER_NAME`] (none if null).
    /// A listener without its own `advertised_host` gets the section's.
    pub fn effective_listeners(&self) -> Vec<ListenerConfig> {
        let listeners = match &self.listeners {
            Some(listeners) => listeners.clone(),
            None => self
                .listen
                .map(|listen| ListenerConfig {
                    name: ListenerName(DEFAULT_LISTENER_NAME.to_string()),
                    listen,
                    security_protocol: SecurityProtocol::Plaintext,
                    advertised_host: None,
                })
                .into_iter()
                .collect(),
        };
        listeners
            .into_iter()
            .map(|mut l| {
                if l.advertised_host.is_none() {
                    l.advertised_host = self.advertised_host.clone();
                }
                l
            })
            .collect()
    }

    /// `Err((key, reason))` for the first refused key (relative to
    /// `kafka.`).
    pub fn validate(&self) -> Result<(), (String, String)> {
        self.validate_limits()
            .map_err(|(key, reason)| (key.to_string(), reason))?;
        let Some(listeners) = &self.listeners else {
            return Ok(());
        };
        if listeners.is_empty() {
            return Err((
                "listeners".into(),
                "must name at least one listener (leave it out to use kafka.listen)".into(),
            ));
        }
        for (i, listener) in listeners.iter().enumerate() {
            let key = |field: &str| format!("listeners[{i}].{field}");
            let name = &listener.name.0;
            let well_formed = !name.is_empty()
                && name.len() <= LISTENER_NAME_BYTES_MAX
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if !well_formed {
                return Err((
                    key("name"),
                    format!("{name:?} must be 1 to {LISTENER_NAME_BYTES_MAX} of A-Z, 0-9 and _"),
                ));
            }
            if let Some(first) = listeners[..i].iter().position(|l| l.name == listener.name) {
                return Err((
                    key("name"),
                    format!("{name} is also the name of listeners[{first}]"),
                ));
            }
            if let Some(first) = listeners[..i]
                .iter()
                .position(|l| l.listen == listener.listen)
            {
                return Err((
                    key("listen"),
                    format!("{} is also listeners[{first}]'s address", listener.listen),
                ));
            }
            if let Some(host) = &listener.advertised_host {
                if !valid_host(host) {
                    return Err((
                        key("advertised_host"),
                        "must be a host name or IP address".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The limits and the section's advertised host.
    fn validate_limits(&self) -> Result<(), (&'static str, String)> {
        if !(1024..=MAX_REQUEST_BYTES_MAX).contains(&self.max_request_bytes) {
            return Err((
                "max_request_bytes",
                format!("must be 1024..={MAX_REQUEST_BYTES_MAX}"),
            ));
        }
        if !(1..=MAX_CONNECTIONS_MAX).contains(&self.max_connections) {
            return Err((
                "max_connections",
                format!("must be 1..={MAX_CONNECTIONS_MAX}"),
            ));
        }
        if !(1024..=MAX_REQUEST_BYTES_MAX).contains(&self.max_batch_inflated_bytes) {
            return Err((
                "max_batch_inflated_bytes",
                format!("must be 1024..={MAX_REQUEST_BYTES_MAX}"),
            ));
        }
        if !(1..=100_000_000).contains(&self.max_records_per_request) {
            return Err(("max_records_per_request", "must be 1..=100000000".into()));
        }
        if !(1024..=MAX_REQUEST_BYTES_MAX).contains(&self.fetch_max_bytes) {
            return Err((
                "fetch_max_bytes",
                format!("must be 1024..={MAX_REQUEST_BYTES_MAX}"),
            ));
        }
        for (i, name) in self.sasl_mechanisms.iter().enumerate() {
            if !SASL_MECHANISMS.contains(&name.as_str()) {
                return Err((
                    "sasl_mechanisms",
                    format!(
                        "[{i}] {name:?} is not one of {}",
                        SASL_MECHANISMS.join(", ")
                    ),
                ));
            }
            if self.sasl_mechanisms[..i].contains(name) {
                return Err(("sasl_mechanisms", format!("[{i}] {name} is listed twice")));
            }
        }
        if !AUTHENTICATION_TIMEOUT_MS_RANGE.contains(&self.authentication_timeout_ms) {
            return Err((
                "authentication_timeout_ms",
                format!(
                    "must be {}..={}",
                    AUTHENTICATION_TIMEOUT_MS_RANGE.start(),
                    AUTHENTICATION_TIMEOUT_MS_RANGE.end()
                ),
            ));
        }
        if let Some(host) = &self.advertised_host {
            if !valid_host(host) {
                return Err((
                    "advertised_host",
                    "must be a host name or IP address".into(),
                ));
            }
        }
        Ok(())
    }
}

/// A host name or IP address Metadata may name.
fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:_".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(name: &str, port: u16, protocol: SecurityProtocol) -> ListenerConfig {
        ListenerConfig {
            name: ListenerName(name.into()),
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            security_protocol: protocol,
            advertised_host: None,
        }
    }

    #[test]
    fn security_protocols_say_what_they_use() {
        use SecurityProtocol::*;
        let uses: Vec<_> = [Plaintext, Ssl, SaslPlaintext, SaslSsl]
            .iter()
            .map(|p| (p.as_str(), p.uses_tls(), p.uses_sasl()))
            .collect();
        assert_eq!(
            uses,
            [
                ("PLAINTEXT", false, false),
                ("SSL", true, false),
                ("SASL_PLAINTEXT", false, true),
                ("SASL_SSL", true, true)
            ]
        );
        let parsed: SecurityProtocol = serde_yaml::from_str("SASL_SSL").unwrap();
        assert_eq!(parsed, SaslSsl);
        assert!(serde_yaml::from_str::<SecurityProtocol>("ssl").is_err());
    }

    #[test]
    fn the_authentication_timeout_is_bounded() {
        let with = |ms| {
            KafkaConfig {
                authentication_timeout_ms: ms,
                ..KafkaConfig::default()
            }
            .validate()
        };
        assert_eq!(KafkaConfig::default().authentication_timeout_ms, 10_000);
        assert_eq!(with(100), Ok(()));
        assert_eq!(with(300_000), Ok(()));
        for refused in [0, 99, 300_001] {
            assert_eq!(
                with(refused).unwrap_err().0,
                "authentication_timeout_ms",
                "{refused}"
            );
        }
        let parsed: KafkaConfig = serde_yaml::from_str("authentication_timeout_ms: 2500").unwrap();
        assert_eq!(parsed.authentication_timeout_ms, 2500);
    }

    #[test]
    fn listeners_replace_listen_and_are_checked() {
        let mut config = KafkaConfig {
            advertised_host: Some("broker.example".into()),
            ..KafkaConfig::default()
        };
        let only = config.effective_listeners();
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].name.0, DEFAULT_LISTENER_NAME);
        assert_eq!(only[0].advertised_host.as_deref(), Some("broker.example"));

        config.listeners = Some(vec![
            listener("PLAIN", 1, SecurityProtocol::Plaintext),
            listener("TLS_1", 2, SecurityProtocol::Ssl),
        ]);
        assert_eq!(config.validate(), Ok(()));
        let names: Vec<_> = config
            .effective_listeners()
            .into_iter()
            .map(|l| (l.name.0, l.listen.port(), l.security_protocol))
            .collect();
        assert_eq!(
            names,
            [
                ("PLAIN".to_string(), 1, SecurityProtocol::Plaintext),
                ("TLS_1".to_string(), 2, SecurityProtocol::Ssl)
            ]
        );

        let refused = |listeners: Vec<ListenerConfig>| {
            KafkaConfig {
                listeners: Some(listeners),
                ..KafkaConfig::default()
            }
            .validate()
            .unwrap_err()
            .0
        };
        assert_eq!(refused(vec![]), "listeners");
        assert_eq!(
            refused(vec![listener("plain", 1, SecurityProtocol::Plaintext)]),
            "listeners[0].name"
        );
        assert_eq!(
            refused(vec![
                listener("A", 1, SecurityProtocol::Plaintext),
                listener("A", 2, SecurityProtocol::Ssl)
            ]),
            "listeners[1].name"
        );
        assert_eq!(
            refused(vec![
                listener("A", 1, SecurityProtocol::Plaintext),
                listener("B", 1, SecurityProtocol::Ssl)
            ]),
            "listeners[1].listen"
        );
        let mut bad_host = listener("A", 1, SecurityProtocol::Plaintext);
        bad_host.advertised_host = Some("a b".into());
        assert_eq!(refused(vec![bad_host]), "listeners[0].advertised_host");
    }
}
