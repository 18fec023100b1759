//! The Kafka listener's counters and their `/metrics` families.
//!
//! The HTTP API renders `/metrics` and does not depend on this crate: the
//! node hands it the listener's [`KafkaMetrics`] as a
//! [`tidelog_runtime::MetricFamilies`], whose `render` writes the
//! `tidelog_kafka_*` families here, so their names and shapes are this
//! crate's alone. Every update is a relaxed atomic add on the
//! connection's task; nothing here locks.
//!
//! Requests are counted per API key in a fixed table of [`API_SLOTS`]
//! (Kafka's keys are small and dense); a slot is named by the first
//! request counted in it, and only named slots are rendered, so a scrape
//! lists the APIs clients use, not every one the listener serves.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tidelog_runtime::metrics::{counter, gauge};
use tidelog_runtime::MetricFamilies;

/// API keys counted one by one; a larger or negative key (none is
/// served) goes to the last slot.
pub const API_SLOTS: usize = 128;

/// Why a connection was closed for its frame (KAFKA.md "Bad input"), or
/// by a timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClosedFor {
    /// Longer than `kafka.max_request_bytes` or the whole byte budget.
    TooLarge,
    /// An API key the listener does not serve.
    UnknownApi,
    /// A version outside the served range.
    Version,
    /// A header or body that does not decode (or lies about its counts).
    Malformed,
    /// A frame that did not arrive, an answer not taken, or the budget not
    /// free in time.
    Timeout,
    /// A failed SASL/PLAIN login.
    Authentication,
}

impl ClosedFor {
    const ALL: [ClosedFor; 6] = [
        ClosedFor::TooLarge,
        ClosedFor::UnknownApi,
        ClosedFor::Version,
        ClosedFor::Malformed,
        ClosedFor::Timeout,
        ClosedFor::Authentication,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            ClosedFor::TooLarge => "too_large",
            ClosedFor::UnknownApi => "unknown_api",
            ClosedFor::Version => "version",
            ClosedFor::Malformed => "malformed",
            ClosedFor::Timeout => "timeout",
            ClosedFor::Authentication => "authentication",
        }
    }
}

/// Which bound refused part of a request, without closing its
/// connection (docs/OPERATIONS.md "What a Kafka client can make the
/// server hold").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A Produce partition whose decoded records did not fit the in-flight
    /// byte budget (REQUEST_TIMED_OUT).
    ProduceInflightBytes,
    /// A compressed batch past `kafka.max_batch_inflated_bytes` or the
    /// request's `kafka.max_request_bytes` (MESSAGE_TOO_LARGE).
    BatchInflatedBytes,
    /// A Produce past `kafka.max_records_per_request` (RECORD_LIST_TOO_LARGE).
    RecordsPerRequest,
    /// A Fetch partition answered empty: its read did not fit the budget.
    FetchInflightBytes,
}

impl Refused {
    const ALL: [Refused; 4] = [
        Refused::ProduceInflightBytes,
        Refused::BatchInflatedBytes,
        Refused::RecordsPerRequest,
        Refused::FetchInflightBytes,
    ];

    /// The `limit` label.
    pub fn label(self) -> &'static str {
        match self {
            Refused::ProduceInflightBytes => "produce_inflight_bytes",
            Refused::BatchInflatedBytes => "batch_inflated_bytes",
            Refused::RecordsPerRequest => "records_per_request",
            Refused::FetchInflightBytes => "fetch_inflight_bytes",
        }
    }
}

#[derive(Debug, Default)]
struct ApiSlot {
    name: OnceLock<&'static str>,
    requests: AtomicU64,
    micros: AtomicU64,
}

/// Counters of one Kafka listener.
#[derive(Debug)]
pub struct KafkaMetrics {
    apis: Box<[ApiSlot]>,
    connections_open: AtomicU64,
    connections_accepted: AtomicU64,
    connections_rejected: AtomicU64,
    request_bytes: AtomicU64,
    response_bytes: AtomicU64,
    closed: [AtomicU64; ClosedFor::ALL.len()],
    refused: [AtomicU64; Refused::ALL.len()],
}

impl Default for KafkaMetrics {
    fn default() -> Self {
        KafkaMetrics {
            apis: (0..API_SLOTS).map(|_| ApiSlot::default()).collect(),
            connections_open: AtomicU64::new(0),
            connections_accepted: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            request_bytes: AtomicU64::new(0),
            response_bytes: AtomicU64::new(0),
            closed: Default::default(),
            refused: Default::default(),
        }
    }
}

/// One API's figures, as a scrape reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiCount {
    pub api: &'static str,
    pub requests: u64,
    /// Time from a request's decoded header to its encoded answer.
    pub micros: u64,
}

/// Everything, read at once (each counter on its own: a scrape during
/// traffic may see one request in `requests` and not yet in `micros`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KafkaMetricsSnapshot {
    pub apis: Vec<ApiCount>,
    pub connections_open: u64,
    pub connections_accepted: u64,
    pub connections_rejected: u64,
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// Per [`ClosedFor::label`].
    pub closed: Vec<(&'static str, u64)>,
    /// Per [`Refused::label`].
    pub refused: Vec<(&'static str, u64)>,
}

impl KafkaMetrics {
    /// A connection was accepted; [`KafkaMetrics::connection_closed`] when
    /// it ends.
    pub fn connection_opened(&self) {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        self.connections_open.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self) {
        // Never below zero, even if a close were counted twice.
        let _ = self
            .connections_open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// A connection closed at once: `kafka.max_connections` were open.
    pub fn connection_rejected(&self) {
        self.connections_rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// A request frame of `bytes` (its length prefix not counted) read.
    pub fn request_read(&self, bytes: usize) {
        self.request_bytes
            .fetch_add(u64::try_from(bytes).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// An answer of `bytes` (length prefix included) written.
    pub fn response_written(&self, bytes: usize) {
        self.response_bytes
            .fetch_add(u64::try_from(bytes).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// A request of API `key` (named `api`) answered in `elapsed`.
    pub fn request_served(&self, key: i16, api: &'static str, elapsed: Duration) {
        let last = API_SLOTS - 1;
        let index = usize::try_from(key).map_or(last, |k| k.min(last));
        let slot = &self.apis[index];
        slot.name.get_or_init(|| api);
        slot.requests.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        slot.micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// A connection closed because of its frame or a timeout.
    pub fn connection_closed_for(&self, why: ClosedFor) {
        let index = ClosedFor::ALL
            .iter()
            .position(|c| *c == why)
            .unwrap_or_default();
        self.closed[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Part of a request refused by a memory bound (its connection kept).
    pub fn refused(&self, why: Refused) {
        let index = Refused::ALL
            .iter()
            .position(|r| *r == why)
            .unwrap_or_default();
        self.refused[index].fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> KafkaMetricsSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        KafkaMetricsSnapshot {
            apis: self
                .apis
                .iter()
                .filter_map(|slot| {
                    slot.name.get().map(|api| ApiCount {
                        api,
                        requests: load(&slot.requests),
                        micros: load(&slot.micros),
                    })
                })
                .collect(),
            connections_open: load(&self.connections_open),
            connections_accepted: load(&self.connections_accepted),
            connections_rejected: load(&self.connections_rejected),
            request_bytes: load(&self.request_bytes),
            response_bytes: load(&self.response_bytes),
            closed: ClosedFor::ALL
                .iter()
                .zip(&self.closed)
                .map(|(why, n)| (why.label(), load(n)))
                .collect(),
            refused: Refused::ALL
                .iter()
                .zip(&self.refused)
                .map(|(why, n)| (why.label(), load(n)))
                .collect(),
        }
    }
}

impl MetricFamilies for KafkaMetrics {
    fn render(&self, out: &mut String) {
        render_kafka(out, &self.snapshot());
    }
}

/// The Kafka listener's families: requests and time per API (average
/// latency is the rate of one over the rate of the other), bytes, and
/// connections, with those closed for a bad frame or a timeout by reason.
fn render_kafka(out: &mut String, k: &KafkaMetricsSnapshot) {
    gauge(
        out,
        "tidelog_kafka_connections",
        "Kafka connections open now.",
        k.connections_open as f64,
    );
    counter(
        out,
        "tidelog_kafka_connections_accepted_total",
        "Kafka connections accepted.",
        k.connections_accepted,
    );
    counter(
        out,
        "tidelog_kafka_connections_rejected_total",
        "Kafka connections closed at once because kafka.max_connections were open.",
        k.connections_rejected,
    );
    let name = "tidelog_kafka_connections_closed_total";
    let _ = writeln!(
        out,
        "# HELP {name} Kafka connections closed for a bad frame or a timeout, by reason."
    );
    let _ = writeln!(out, "# TYPE {name} counter");
    for (reason, n) in &k.closed {
        let _ = writeln!(out, "{name}{{reason=\"{reason}\"}} {n}");
    }
    let name = "tidelog_kafka_refused_total";
    let _ = writeln!(
        out,
        "# HELP {name} parts of Kafka requests refused by a memory bound (the connection kept), by limit."
    );
    let _ = writeln!(out, "# TYPE {name} counter");
    for (limit, n) in &k.refused {
        let _ = writeln!(out, "{name}{{limit=\"{limit}\"}} {n}");
    }
    let name = "tidelog_kafka_requests_total";
    let _ = writeln!(out, "# HELP {name} Kafka requests answered, by API.");
    let _ = writeln!(out, "# TYPE {name} counter");
    for a in &k.apis {
        let _ = writeln!(out, "{name}{{api=\"{}\"}} {}", a.api, a.requests);
    }
    let name = "tidelog_kafka_request_seconds_total";
    let _ = writeln!(
        out,
        "# HELP {name} time spent answering Kafka requests (long-polls included), by API."
    );
    let _ = writeln!(out, "# TYPE {name} counter");
    for a in &k.apis {
        let _ = writeln!(out, "{name}{{api=\"{}\"}} {}", a.api, a.micros as f64 / 1e6);
    }
    counter(
        out,
        "tidelog_kafka_request_bytes_total",
        "bytes of Kafka request frames read.",
        k.request_bytes,
    );
    counter(
        out,
        "tidelog_kafka_response_bytes_total",
        "bytes of Kafka answers written.",
        k.response_bytes,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_used_apis_are_listed_with_their_counts() {
        let m = KafkaMetrics::default();
        assert!(m.snapshot().apis.is_empty());
        m.request_served(0, "Produce", Duration::from_micros(30));
        m.request_served(0, "Produce", Duration::from_micros(12));
        m.request_served(18, "ApiVersions", Duration::from_micros(5));
        let snap = m.snapshot();
        assert_eq!(
            snap.apis,
            vec![
                ApiCount {
                    api: "Produce",
                    requests: 2,
                    micros: 42
                },
                ApiCount {
                    api: "ApiVersions",
                    requests: 1,
                    micros: 5
                },
            ]
        );
    }

    #[test]
    fn keys_out_of_the_table_share_its_last_slot() {
        let m = KafkaMetrics::default();
        m.request_served(-1, "negative", Duration::ZERO);
        m.request_served(i16::MAX, "huge", Duration::ZERO);
        let snap = m.snapshot();
        let names: Vec<_> = snap.apis.iter().map(|a| a.api).collect();
        assert_eq!(names, vec!["negative"], "one slot, named by its first");
        assert_eq!(snap.apis[0].requests, 2);
    }

    #[test]
    fn connections_are_counted_and_never_below_zero() {
        let m = KafkaMetrics::default();
        m.connection_opened();
        m.connection_opened();
        m.connection_closed();
        m.connection_closed();
        m.connection_closed();
        m.connection_rejected();
        let snap = m.snapshot();
        assert_eq!(snap.connections_open, 0);
        assert_eq!(snap.connections_accepted, 2);
        assert_eq!(snap.connections_rejected, 1);
    }

    #[test]
    fn closed_connections_are_counted_by_reason() {
        let m = KafkaMetrics::default();
        m.connection_closed_for(ClosedFor::TooLarge);
        m.connection_closed_for(ClosedFor::Malformed);
        m.connection_closed_for(ClosedFor::Malformed);
        let closed = m.snapshot().closed;
        assert!(closed.contains(&("too_large", 1)));
        assert!(closed.contains(&("malformed", 2)));
        assert!(closed.contains(&("timeout", 0)));
        assert_eq!(closed.len(), 6);
    }

    #[test]
    fn refusals_are_counted_by_limit() {
        let m = KafkaMetrics::default();
        m.refused(Refused::RecordsPerRequest);
        m.refused(Refused::FetchInflightBytes);
        m.refused(Refused::FetchInflightBytes);
        let refused = m.snapshot().refused;
        assert!(refused.contains(&("records_per_request", 1)));
        assert!(refused.contains(&("fetch_inflight_bytes", 2)));
        assert!(refused.contains(&("produce_inflight_bytes", 0)));
        assert_eq!(refused.len(), 4);
    }

    /// Moved from the HTTP API's metrics tests with the renderer: every
    /// family a listener's counters make, in the text `/metrics` serves.
    #[test]
    fn kafka_families_render_their_counters() {
        let kafka = KafkaMetrics::default();
        kafka.connection_opened();
        kafka.connection_rejected();
        kafka.request_read(100);
        kafka.response_written(40);
        kafka.request_served(0, "Produce", Duration::from_micros(1500));
        kafka.connection_closed_for(ClosedFor::Version);
        let mut text = String::new();
        MetricFamilies::render(&kafka, &mut text);
        for needle in [
            "tidelog_kafka_connections 1\n",
            "tidelog_kafka_connections_accepted_total 1\n",
            "tidelog_kafka_connections_rejected_total 1\n",
            "# TYPE tidelog_kafka_requests_total counter\n",
            "tidelog_kafka_requests_total{api=\"Produce\"} 1\n",
            "tidelog_kafka_request_seconds_total{api=\"Produce\"} 0.0015\n",
            "tidelog_kafka_request_bytes_total 100\n",
            "tidelog_kafka_response_bytes_total 40\n",
            "tidelog_kafka_connections_closed_total{reason=\"version\"} 1\n",
            "tidelog_kafka_connections_closed_total{reason=\"malformed\"} 0\n",
        ] {
            assert!(text.contains(needle), "missing {needle}:\n{text}");
        }
    }
}
