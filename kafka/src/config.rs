//! The `kafka:` section of broker.yaml (OPERATIONS.md), its one `Default`
//! and its one `validate()`.

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaConfig {
    /// `None`: no Kafka listener.
    pub listen: Option<SocketAddr>,
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
            advertised_host: None,
            max_request_bytes: 104_857_600,
            max_connections: 4096,
            max_batch_inflated_bytes: 16 << 20,
            max_records_per_request: 500_000,
            fetch_max_bytes: FETCH_MAX_BYTES_DEFAULT,
            sasl_mechanisms: SASL_MECHANISMS.iter().map(|m| (*m).to_owned()).collect(),
            admin_token: None,
            cluster_id: None,
        }
    }
}

impl KafkaConfig {
    /// `Err((key, reason))` for the first refused key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
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
        if let Some(host) = &self.advertised_host {
            let ok = !host.is_empty()
                && host.len() <= 253
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.:_".contains(&b));
            if !ok {
                return Err((
                    "advertised_host",
                    "must be a host name or IP address".into(),
                ));
            }
        }
        Ok(())
    }
}
