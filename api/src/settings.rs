//! What the HTTP layer needs to know from the broker configuration.
//!
//! The server crate owns the YAML schema (CONFIG.md) and fills this struct;
//! keeping it here, as plain data, means the api crate does not depend on the
//! server's config types and its tests can build one directly.

use crate::topic_config::Overrides;

/// A topic declared in the config file (`topics:`), already validated.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredTopic {
    pub name: String,
    pub partitions: u32,
    /// Canonical config values; the file wins for these keys at start.
    pub overrides: Overrides,
}

/// Settings of the HTTP API.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiSettings {
    pub cluster_id: String,
    /// `Some`: mutating v3 calls need `Authorization: Bearer <token>`.
    pub admin_token: Option<String>,
    /// Produce to an unknown topic creates it with `default_partitions`.
    pub auto_create_topics: bool,
    pub default_partitions: u32,
    pub declared_topics: Vec<DeclaredTopic>,
    /// Largest request body; larger ones answer 413/41301.
    pub max_request_bytes: usize,
    /// Most records in one produce request; more answer 413/41301.
    pub max_records_per_request: usize,
    /// Requests served at once (long-polling fetches included); one more
    /// answers 429/42901 at once instead of queueing without bound.
    pub max_concurrent_requests: usize,
}

/// Defaults of CONFIG.md's keys and of the `http` section.
pub const MAX_REQUEST_BYTES_DEFAULT: usize = 16 << 20;
pub const MAX_RECORDS_PER_REQUEST_DEFAULT: usize = 10_000;
pub const MAX_CONCURRENT_REQUESTS_DEFAULT: usize = 1024;

impl Default for ApiSettings {
    fn default() -> Self {
        ApiSettings {
            cluster_id: "tidelog".into(),
            admin_token: None,
            auto_create_topics: false,
            default_partitions: 4,
            declared_topics: Vec::new(),
            max_request_bytes: MAX_REQUEST_BYTES_DEFAULT,
            max_records_per_request: MAX_RECORDS_PER_REQUEST_DEFAULT,
            max_concurrent_requests: MAX_CONCURRENT_REQUESTS_DEFAULT,
        }
    }
}
