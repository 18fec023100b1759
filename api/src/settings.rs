//! What the HTTP layer needs to know from the broker configuration.
//!
//! The server crate owns the YAML schema (CONFIG.md) and fills this struct;
//! keeping it here, as plain data, means the api crate does not depend on the
//! server's config types and its tests can build one directly.

use std::time::Duration;

pub use tidelog_broker::DeclaredTopic;

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
    /// answers 429/42901 at once instead of queueing without bound. A
    /// request counts once its body is in, not while it waits for bytes.
    pub max_concurrent_requests: usize,
    /// Request body bytes held in memory by all connections together; a
    /// body that would pass it answers 503/50305.
    pub max_inflight_bytes: u64,
    /// From the end of a request's headers to the end of its body; a body
    /// still arriving then answers 408/40801 and the connection closes.
    pub body_read_timeout: Duration,
}

/// Defaults of CONFIG.md's keys and of the `http` section.
pub const MAX_REQUEST_BYTES_DEFAULT: usize = 16 << 20;
pub const MAX_RECORDS_PER_REQUEST_DEFAULT: usize = 10_000;
pub const MAX_CONCURRENT_REQUESTS_DEFAULT: usize = 1024;
pub const MAX_INFLIGHT_BYTES_DEFAULT: u64 = 256 << 20;
pub const BODY_READ_TIMEOUT_MS_DEFAULT: u64 = 30_000;

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
            max_inflight_bytes: MAX_INFLIGHT_BYTES_DEFAULT,
            body_read_timeout: Duration::from_millis(BODY_READ_TIMEOUT_MS_DEFAULT),
        }
    }
}
