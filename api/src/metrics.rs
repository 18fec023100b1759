//! Counters and histograms for `/metrics`, in Prometheus' text format.
//!
//! Hand-written exposition (format 0.0.4): a handful of atomics updated on
//! the request path, rendered on scrape together with a snapshot of the
//! store's stats. Every update is a relaxed atomic add; nothing here locks.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tidelog_broker::cluster::{ClusterStatus, Role};
use tidelog_broker::coordinator::{CoordinatorStats, GroupState};
use tidelog_broker::groups::ConsumerLag;
use tidelog_broker::store::{CleanerMetricsSnapshot, StoreStats};
use tidelog_runtime::metrics::{counter, gauge};
use tidelog_runtime::MetricFamilies;

/// Upper bounds of the latency buckets, in seconds: 250 µs to 30 s, so both
/// a page-cache produce and a long-poll that runs to its timeout land in a
/// bucket of their own.
pub const LATENCY_BUCKETS_SECONDS: [f64; 16] = [
    0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0,
];

/// A cumulative latency histogram with fixed buckets.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per bucket (not cumulative; summed on render), plus +Inf.
    buckets: [AtomicU64; LATENCY_BUCKETS_SECONDS.len() + 1],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let i = LATENCY_BUCKETS_SECONDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS_SECONDS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut cumulative = 0u64;
        for (i, bound) in LATENCY_BUCKETS_SECONDS.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.buckets[LATENCY_BUCKETS_SECONDS.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {}", self.count.load(Ordering::Relaxed));
    }
}

/// Counters of one kind of request (produce or fetch).
#[derive(Debug, Default)]
pub struct RequestMetrics {
    pub ok: AtomicU64,
    pub errors: AtomicU64,
    pub records: AtomicU64,
    /// Key + value + header bytes of the records.
    pub bytes: AtomicU64,
    pub latency: Histogram,
}

impl RequestMetrics {
    /// Counts one finished request; `records` and `bytes` only when it
    /// succeeded.
    pub fn finish(&self, ok: bool, records: u64, bytes: u64, elapsed: Duration) {
        if ok {
            self.ok.fetch_add(1, Ordering::Relaxed);
            self.records.fetch_add(records, Ordering::Relaxed);
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
        } else {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.latency.observe(elapsed);
    }
}

/// Everything `/metrics` shows that the API itself counts.
#[derive(Debug, Default)]
pub struct Metrics {
    pub produce: RequestMetrics,
    pub fetch: RequestMetrics,
    /// Responses by status class: 1xx..5xx (index 0..4).
    responses: [AtomicU64; 5],
    /// Requests answered 429 because `max_concurrent_requests` were busy.
    pub rejected_overload: AtomicU64,
    /// Offset commits written.
    pub offset_commits: AtomicU64,
    /// Fetches parked now, waiting for a record or their timeout (Kafka's
    /// fetch purgatory size).
    pub fetches_waiting: AtomicU64,
    /// Requests whose headers are in and whose body is still arriving (not
    /// yet counted against `max_concurrent_requests`).
    pub requests_reading_body: AtomicU64,
    /// Requests answered 503/50305: their body would have passed
    /// `http.max_inflight_bytes`.
    pub rejected_inflight_bytes: AtomicU64,
    /// Requests answered 408/40801: their body did not arrive within
    /// `http.body_read_timeout_ms`.
    pub body_read_timeouts: AtomicU64,
    /// Fetch answers made smaller than asked because the answer budget
    /// (`http.max_inflight_response_bytes`) had less room.
    pub answers_shrunk: AtomicU64,
    /// Fetch calls answered 503/50307: the answer budget had no room.
    pub rejected_answer_bytes: AtomicU64,
    /// Admin calls with a wrong bearer token (each answered 401 after
    /// `http.auth_failure_delay_ms`).
    pub auth_failures: AtomicU64,
    /// A replica's writes answered by the master (`crate::forward`).
    pub forwarded: AtomicU64,
    /// A replica's writes that could not be forwarded (no master known,
    /// unreachable, a forwarded request to forward again), each answered
    /// 503/50301.
    pub forward_failures: AtomicU64,
    pub connections: ConnectionMetrics,
}

/// The HTTP listener's connections (the server's accept loop counts them).
#[derive(Debug, Default)]
pub struct ConnectionMetrics {
    /// Connections open now.
    pub open: AtomicU64,
    /// Connections closed at once because `http.max_connections` were open.
    pub rejected_over_limit: AtomicU64,
    /// Connections closed because a request's headers did not arrive within
    /// `http.header_read_timeout_ms`.
    pub header_read_timeouts: AtomicU64,
    /// Keep-alive connections closed after `http.idle_timeout_ms` without a
    /// request.
    pub idle_timeouts: AtomicU64,
    /// Connections closed because writing a response made no progress for
    /// `http.write_timeout_ms` (the client does not read).
    pub write_timeouts: AtomicU64,
    /// Request heads refused before routing (malformed, an over-long URI,
    /// too many or too large headers), each answered with a JSON error and
    /// its connection closed.
    pub rejected_heads: AtomicU64,
}

/// The cluster's families: the epoch, whether this node is the master,
/// the in-sync count, and each replica's lag as this node's gate sees it
/// (the master knows every replica's; a replica, its own at most).
fn render_cluster(out: &mut String, cluster: &ClusterSnapshot) {
    let status = &cluster.status;
    gauge(
        out,
        "tidelog_cluster_epoch",
        "the epoch of the master this node serves or follows (0: none yet).",
        status.epoch as f64,
    );
    gauge(
        out,
        "tidelog_cluster_is_master",
        "1 while this node is the cluster's master.",
        f64::from(u8::from(status.master == Some(status.node_id))),
    );
    gauge(
        out,
        "tidelog_insync_replicas",
        "nodes in the in-sync set now, the master included.",
        cluster.in_sync as f64,
    );
    let _ = writeln!(
        out,
        "# HELP tidelog_replica_lag_bytes how far a replica's copy is behind the master's log."
    );
    let _ = writeln!(out, "# TYPE tidelog_replica_lag_bytes gauge");
    for node in status.nodes.iter().filter(|n| n.role == Role::Replica) {
        let _ = writeln!(
            out,
            "tidelog_replica_lag_bytes{{node_id=\"{}\"}} {}",
            node.node_id, node.lag_bytes
        );
    }
}

/// Counts one in a gauge while it lives: a request dropped mid-wait (its
/// client went away) is uncounted too.
pub struct GaugeGuard<'a>(&'a AtomicU64);

impl<'a> GaugeGuard<'a> {
    pub fn new(gauge: &'a AtomicU64) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        GaugeGuard(gauge)
    }
}

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A point-in-time view of the parts `/metrics` reads from elsewhere.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub ready: bool,
    /// The store's counters, disk usage and retention (`None` during
    /// recovery: those families are absent until the store is open).
    pub store: Option<StoreStats>,
    pub topics: usize,
    pub consumer_groups: usize,
    pub in_flight_requests: usize,
    /// Request body bytes held now (`http.max_inflight_bytes`' budget).
    pub inflight_bytes: u64,
    /// Fetch answer bytes held now (`http.max_inflight_response_bytes`).
    pub answer_bytes: u64,
    /// The LogCleaner's metrics (`None` during recovery).
    pub cleaner: Option<CleanerMetricsSnapshot>,
    /// Compacted logs (partitions of compact topics) and their bytes.
    pub compacted_logs: usize,
    pub compacted_log_segments: usize,
    pub compacted_log_bytes: u64,
    /// The group coordinator's counts (`None` during recovery).
    pub coordinator: Option<CoordinatorStats>,
    /// Every committed offset against its partition's end.
    pub consumer_lag: Vec<ConsumerLag>,
    /// HTTP consumer instances of every group (`http.max_consumer_instances`).
    pub consumer_instances: usize,
    /// Both listeners' connections against the open-file limit (`None`
    /// until the server sets a cap).
    pub connection_slots: Option<tidelog_runtime::connections::ConnectionSlotsSnapshot>,
    /// The process's open file descriptors (`None` without procfs).
    pub open_files: Option<u64>,
    /// Families of components the API does not know, as the node
    /// registered them (the Kafka listener's; empty when the server runs
    /// none), rendered in that order after the connections' families.
    pub families: Vec<Arc<dyn MetricFamilies>>,
    /// Tiered storage (`None` without a remote tier, or during recovery).
    pub tiered: Option<tidelog_broker::tiering::TieringStats>,
    /// The cluster as this node sees it (`None` for a single node, or
    /// during recovery: the cluster families are absent then).
    pub cluster: Option<ClusterSnapshot>,
}

/// What the cluster families show (OPERATIONS.md "Metrics").
#[derive(Debug, Clone)]
pub struct ClusterSnapshot {
    pub status: ClusterStatus,
    /// The gate's count of nodes in sync now, the master included.
    pub in_sync: usize,
}

impl Metrics {
    pub fn count_response(&self, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.responses[class].fetch_add(1, Ordering::Relaxed);
    }

    /// The exposition text.
    pub fn render(&self, snap: &Snapshot) -> String {
        let mut out = String::with_capacity(8 << 10);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);

        let _ = writeln!(
            out,
            "# HELP tidelog_ready 1 once recovery has finished and the API serves."
        );
        let _ = writeln!(out, "# TYPE tidelog_ready gauge");
        let _ = writeln!(out, "tidelog_ready {}", u8::from(snap.ready));
        if let Some(cluster) = &snap.cluster {
            render_cluster(&mut out, cluster);
            counter(
                &mut out,
                "tidelog_http_forwarded_total",
                "a replica's HTTP writes answered by the master.",
                load(&self.forwarded),
            );
            counter(
                &mut out,
                "tidelog_http_forward_failures_total",
                "a replica's HTTP writes answered 503/50301: no master known, unreachable, or forwarded twice.",
                load(&self.forward_failures),
            );
        }

        for (kind, m) in [("produce", &self.produce), ("fetch", &self.fetch)] {
            let name = format!("tidelog_{kind}_requests_total");
            let _ = writeln!(out, "# HELP {name} {kind} requests answered, by result.");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name}{{result=\"ok\"}} {}", load(&m.ok));
            let _ = writeln!(out, "{name}{{result=\"error\"}} {}", load(&m.errors));
            counter(
                &mut out,
                &format!("tidelog_{kind}_records_total"),
                &format!("records of successful {kind} requests."),
                load(&m.records),
            );
            counter(
                &mut out,
                &format!("tidelog_{kind}_bytes_total"),
                &format!("key, value and header bytes of successful {kind} requests."),
                load(&m.bytes),
            );
            m.latency.render(
                &mut out,
                &format!("tidelog_{kind}_latency_seconds"),
                &format!("time to answer a {kind} request (fetch: long-poll wait included)."),
            );
        }

        let _ = writeln!(
            out,
            "# HELP tidelog_http_responses_total HTTP responses by status class."
        );
        let _ = writeln!(out, "# TYPE tidelog_http_responses_total counter");
        for (i, n) in self.responses.iter().enumerate() {
            let _ = writeln!(
                out,
                "tidelog_http_responses_total{{class=\"{}xx\"}} {}",
                i + 1,
                load(n)
            );
        }
        counter(
            &mut out,
            "tidelog_http_rejected_overload_total",
            "requests answered 429 because max_concurrent_requests were in flight.",
            load(&self.rejected_overload),
        );
        gauge(
            &mut out,
            "tidelog_http_in_flight_requests",
            "requests holding a max_concurrent_requests slot now: bodies read, long-polls included.",
            snap.in_flight_requests as f64,
        );
        gauge(
            &mut out,
            "tidelog_http_requests_reading_body",
            "requests whose body is still arriving (not yet in flight).",
            load(&self.requests_reading_body) as f64,
        );
        gauge(
            &mut out,
            "tidelog_http_inflight_bytes",
            "request body bytes held in memory now (http.max_inflight_bytes).",
            snap.inflight_bytes as f64,
        );
        counter(
            &mut out,
            "tidelog_http_rejected_inflight_bytes_total",
            "requests answered 503 because their body would pass max_inflight_bytes.",
            load(&self.rejected_inflight_bytes),
        );
        gauge(
            &mut out,
            "tidelog_http_answer_bytes",
            "fetch answer bytes rendered and not yet written, HTTP and Kafka (http.max_inflight_response_bytes).",
            snap.answer_bytes as f64,
        );
        counter(
            &mut out,
            "tidelog_http_answers_shrunk_total",
            "fetch answers made smaller than asked because max_inflight_response_bytes had less room.",
            load(&self.answers_shrunk),
        );
        counter(
            &mut out,
            "tidelog_http_rejected_answer_bytes_total",
            "fetch calls answered 503 because max_inflight_response_bytes had no room.",
            load(&self.rejected_answer_bytes),
        );
        counter(
            &mut out,
            "tidelog_http_auth_failures_total",
            "admin calls with a wrong bearer token, each answered 401 after auth_failure_delay_ms.",
            load(&self.auth_failures),
        );
        let c = &self.connections;
        gauge(
            &mut out,
            "tidelog_http_connections",
            "HTTP connections open now.",
            load(&c.open) as f64,
        );
        counter(
            &mut out,
            "tidelog_http_connections_rejected_total",
            "connections closed at once because max_connections were open.",
            load(&c.rejected_over_limit),
        );
        counter(
            &mut out,
            "tidelog_http_rejected_heads_total",
            "request heads refused before routing (malformed, URI too long, too many or too large headers).",
            load(&c.rejected_heads),
        );
        let name = "tidelog_http_timeouts_total";
        let _ = writeln!(
            out,
            "# HELP {name} requests and connections ended by a read or write timeout, by phase."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        for (phase, n) in [
            ("header", &c.header_read_timeouts),
            ("body", &self.body_read_timeouts),
            ("idle", &c.idle_timeouts),
            ("write", &c.write_timeouts),
        ] {
            let _ = writeln!(out, "{name}{{phase=\"{phase}\"}} {}", load(n));
        }
        gauge(
            &mut out,
            "tidelog_fetch_long_polls_waiting",
            "fetches parked now until a record arrives or their timeout ends.",
            load(&self.fetches_waiting) as f64,
        );
        counter(
            &mut out,
            "tidelog_offset_commits_total",
            "consumer group offset commit requests written.",
            load(&self.offset_commits),
        );
        gauge(
            &mut out,
            "tidelog_topics",
            "topics in the registry, internal ones included.",
            snap.topics as f64,
        );
        gauge(
            &mut out,
            "tidelog_consumer_groups",
            "consumer groups with committed offsets.",
            snap.consumer_groups as f64,
        );
        gauge(
            &mut out,
            "tidelog_consumer_instances",
            "HTTP consumer instances of every group (at most http.max_consumer_instances).",
            snap.consumer_instances as f64,
        );

        if let Some(s) = &snap.store {
            gauge(
                &mut out,
                "tidelog_commitlog_segments",
                "CommitLog segment files.",
                s.commitlog_segments as f64,
            );
            gauge(
                &mut out,
                "tidelog_commitlog_min_offset_bytes",
                "physical offset of the oldest CommitLog byte kept.",
                s.commitlog_min_offset as f64,
            );
            gauge(
                &mut out,
                "tidelog_commitlog_max_offset_bytes",
                "physical offset after the last committed record.",
                s.commitlog_max_offset as f64,
            );
            gauge(
                &mut out,
                "tidelog_commitlog_flushed_offset_bytes",
                "physical offset up to which the CommitLog is on disk.",
                s.commitlog_flushed_offset as f64,
            );
            gauge(
                &mut out,
                "tidelog_dispatch_lag_bytes",
                "committed CommitLog bytes not yet indexed (not yet fetchable).",
                s.dispatch_lag_bytes as f64,
            );
            counter(
                &mut out,
                "tidelog_dispatch_errors_total",
                "errors of the dispatcher thread.",
                s.dispatch_errors,
            );
            gauge(
                &mut out,
                "tidelog_dispatch_stalled",
                "1 while produce is refused because dispatch has failed for store.dispatch_stall_ms.",
                f64::from(u8::from(s.dispatch_stalled)),
            );
            counter(
                &mut out,
                "tidelog_dispatch_stalls_total",
                "times dispatch became stalled.",
                s.dispatch_stalls,
            );
            gauge(
                &mut out,
                "tidelog_index_files",
                "IndexFile files.",
                s.index_files as f64,
            );
            gauge(
                &mut out,
                "tidelog_consumequeue_files",
                "ConsumeQueue files of every partition.",
                s.consume_queue_files as f64,
            );
            gauge(
                &mut out,
                "tidelog_partitions",
                "partitions with a ConsumeQueue.",
                s.partitions as f64,
            );
            counter(
                &mut out,
                "tidelog_thread_restarts_total",
                "store background threads restarted after a panic.",
                s.thread_restarts,
            );
            gauge(
                &mut out,
                "tidelog_disk_used_ratio",
                "used fraction of the data directory's filesystem, as the store last measured it.",
                s.disk_used_ratio,
            );
            gauge(
                &mut out,
                "tidelog_disk_full",
                "1 while produce is refused because the disk is above retention.disk_full_ratio or has less free space than the store's reserve.",
                f64::from(u8::from(s.disk_full)),
            );
            gauge(
                &mut out,
                "tidelog_disk_reserve_bytes",
                "free space the disk-full gate keeps for the files the store must still create (next segment, index and queue files).",
                s.disk_reserve_bytes as f64,
            );
            if let Some(available) = s.disk_available_bytes {
                gauge(
                    &mut out,
                    "tidelog_disk_available_bytes",
                    "bytes available on the data directory's filesystem, as the store last measured it.",
                    available as f64,
                );
            }
            gauge(
                &mut out,
                "tidelog_store_writes_refused",
                "1 while the store refuses writes (disk full, dispatch stalled or short of space, a segment that cannot be made, a failed write); /status/ready is not ready then.",
                f64::from(u8::from(s.writes_refused.is_some())),
            );
            counter(
                &mut out,
                "tidelog_segment_create_failures_total",
                "CommitLog segment creations that failed (full disk, no file descriptors); retried with back-off.",
                s.segment_create_failures,
            );
            counter(
                &mut out,
                "tidelog_retention_segments_deleted_total",
                "CommitLog segments deleted by retention passes.",
                s.retention_segments_deleted,
            );
            counter(
                &mut out,
                "tidelog_retention_bytes_freed_total",
                "bytes of CommitLog segments deleted by retention passes.",
                s.retention_bytes_freed,
            );
            counter(
                &mut out,
                "tidelog_retention_failures_total",
                "segment deletions that failed (retried by a later pass).",
                s.retention_failures,
            );
            gauge(
                &mut out,
                "tidelog_retention_last_pass_timestamp_seconds",
                "Unix time of the last retention pass, scheduled or manual (0: none yet).",
                s.retention_last_pass_ms as f64 / 1000.0,
            );
        }
        if let Some(c) = &snap.cleaner {
            render_cleaner(&mut out, c, snap);
        }
        if let Some(c) = &snap.coordinator {
            render_groups(&mut out, c, &snap.consumer_lag);
        }
        if let Some(n) = snap.open_files {
            gauge(
                &mut out,
                "tidelog_open_files",
                "file descriptors the process holds now (store files and connections).",
                n as f64,
            );
        }
        if let Some(c) = &snap.connection_slots {
            gauge(
                &mut out,
                "tidelog_connections_max",
                "connections both listeners may hold together: the open-file limit minus descriptors.store_reserve.",
                c.max as f64,
            );
            gauge(
                &mut out,
                "tidelog_connections_open",
                "connections both listeners hold now.",
                c.open as f64,
            );
            counter(
                &mut out,
                "tidelog_connections_refused_total",
                "connections closed at accept because tidelog_connections_max were open (descriptors kept for the store).",
                c.refused,
            );
        }
        for families in &snap.families {
            families.render(&mut out);
        }
        if let Some(t) = &snap.tiered {
            render_tiered(&mut out, t);
        }
        out
    }
}

/// Tiered storage's families: what was uploaded and read, the read cache,
/// and each tiered partition's upload lag (offsets and bytes not yet in the
/// remote tier; bytes count only what the last round read).
fn render_tiered(out: &mut String, t: &tidelog_broker::tiering::TieringStats) {
    let r = &t.remote;
    for (name, help, value) in [
        ("tidelog_tiered_uploaded_bytes_total", "record-object bytes uploaded to the remote tier.", r.uploaded_bytes),
        ("tidelog_tiered_uploaded_objects_total", "record objects uploaded to the remote tier.", r.uploaded_objects),
        ("tidelog_tiered_uploaded_records_total", "records uploaded to the remote tier.", t.uploaded_records),
        ("tidelog_tiered_upload_failures_total", "partition uploads that failed (retried after a backoff; the records stay held locally).", t.upload_errors),
        ("tidelog_tiered_upload_retries_total", "object-store calls of the write side retried.", r.upload_retries),
        ("tidelog_tiered_topic_meta_failures_total", "topic meta writes or deletions that failed (retried at the next round).", t.meta_errors),
        ("tidelog_tiered_remote_reads_total", "reads served from the remote tier (below a partition's local beginning).", t.remote_reads),
        ("tidelog_tiered_remote_read_failures_total", "remote reads that failed (answered 503/50304 or KAFKA_STORAGE_ERROR).", t.remote_read_errors),
        ("tidelog_tiered_remote_read_bytes_total", "bytes read from the object store (cache misses).", r.remote_read_bytes),
        ("tidelog_tiered_cache_hits_total", "read-cache lookups answered from the cache.", r.cache_hits),
        ("tidelog_tiered_cache_misses_total", "read-cache lookups that went to the object store.", r.cache_misses),
        ("tidelog_tiered_rounds_total", "uploader rounds run.", t.rounds),
    ] {
        counter(out, name, help, value);
    }
    gauge(
        out,
        "tidelog_tiered_cache_bytes",
        "bytes the read cache holds now.",
        r.cache_bytes as f64,
    );
    gauge(
        out,
        "tidelog_tiered_pending_topic_metas",
        "topic metas waiting to be written to or deleted from the remote tier.",
        t.pending_metas as f64,
    );
    for (name, help, pick) in [
        (
            "tidelog_tiered_upload_lag_offsets",
            "offsets of a tiered partition not yet uploaded.",
            (|p: &tidelog_broker::tiering::PartitionTiering| p.lag_records) as fn(&_) -> u64,
        ),
        (
            "tidelog_tiered_upload_lag_bytes",
            "payload bytes of a tiered partition read but not yet uploaded.",
            |p| p.lag_bytes,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for p in &t.partitions {
            let _ = writeln!(
                out,
                "{name}{{topic=\"{}\",partition=\"{}\"}} {}",
                label(&p.topic),
                p.partition,
                pick(p)
            );
        }
    }
}

/// The group coordinator's families and consumer lag (Kafka exporters'
/// `kafka_consumergroup_lag` shape: one series per group and partition).
fn render_groups(out: &mut String, c: &CoordinatorStats, lag: &[ConsumerLag]) {
    let name = "tidelog_consumer_group_states";
    let _ = writeln!(
        out,
        "# HELP {name} consumer groups the coordinator holds, by state."
    );
    let _ = writeln!(out, "# TYPE {name} gauge");
    for state in [
        GroupState::Empty,
        GroupState::PreparingRebalance,
        GroupState::CompletingRebalance,
        GroupState::Stable,
        GroupState::Dead,
        GroupState::Assigning,
        GroupState::Reconciling,
    ] {
        let n = c.groups_by_state.get(state.name()).copied().unwrap_or(0);
        let _ = writeln!(out, "{name}{{state=\"{}\"}} {n}", state.name());
    }
    gauge(
        out,
        "tidelog_consumer_group_members",
        "members of every consumer group.",
        c.members as f64,
    );
    gauge(
        out,
        "tidelog_consumer_group_member_metadata_bytes",
        "bytes of member metadata every group holds (bounded by groups.max_member_metadata_bytes).",
        c.member_metadata_bytes as f64,
    );
    counter(
        out,
        "tidelog_consumer_group_rebalances_total",
        "rebalances (join windows closed, one generation each) of every group since start.",
        c.rebalances_total,
    );
    let name = "tidelog_consumer_group_generation";
    let _ = writeln!(out, "# HELP {name} a consumer group's current generation.");
    let _ = writeln!(out, "# TYPE {name} gauge");
    for (group, generation) in &c.generations {
        let _ = writeln!(out, "{name}{{group=\"{}\"}} {generation}", label(group));
    }
    let name = "tidelog_consumer_group_lag";
    let _ = writeln!(
        out,
        "# HELP {name} records between a group's committed offset and the partition's end offset (never negative)."
    );
    let _ = writeln!(out, "# TYPE {name} gauge");
    for l in lag {
        let _ = writeln!(
            out,
            "{name}{{group=\"{}\",topic=\"{}\",partition=\"{}\"}} {}",
            label(&l.group),
            label(&l.topic),
            l.partition,
            l.lag
        );
    }
}

/// A label value escaped as the text format wants (group and topic names
/// cannot hold these characters, but a damaged offsets log could).
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The LogCleaner's families, with Kafka's meanings (`kafka.log:type=
/// LogCleaner` and `LogCleanerManager`), in seconds and ratios as
/// Prometheus prefers.
fn render_cleaner(out: &mut String, c: &CleanerMetricsSnapshot, snap: &Snapshot) {
    let seconds = |ms: u64| ms as f64 / 1000.0;
    gauge(
        out,
        "tidelog_cleaner_max_dirty_percent",
        "highest dirty ratio (dirty bytes / cleanable bytes) of any compacted log, in percent, as of the last selection.",
        c.max_dirty_percent as f64,
    );
    gauge(
        out,
        "tidelog_cleaner_recopy_percent",
        "bytes written / bytes read by the last cleaning pass, in percent.",
        c.recopy_percent as f64,
    );
    gauge(
        out,
        "tidelog_cleaner_max_clean_time_seconds",
        "duration of the last cleaning pass.",
        seconds(c.max_clean_time_ms),
    );
    gauge(
        out,
        "tidelog_cleaner_max_compaction_delay_seconds",
        "how long the oldest dirty record of the last cleaned log waited beyond min.compaction.lag.ms.",
        seconds(c.max_compaction_delay_ms),
    );
    gauge(
        out,
        "tidelog_cleaner_time_since_last_run_seconds",
        "time since the last cleaning pass ended (0 before the first).",
        seconds(c.time_since_last_run_ms),
    );
    gauge(
        out,
        "tidelog_cleaner_uncleanable_partitions",
        "partitions whose last pass failed; retried after cleaner.backoff_ms.",
        c.uncleanable_partitions as f64,
    );
    gauge(
        out,
        "tidelog_cleaner_uncleanable_bytes",
        "bytes of the compacted logs of uncleanable partitions.",
        c.uncleanable_bytes as f64,
    );
    counter(
        out,
        "tidelog_cleaner_thread_restarts_total",
        "cleaner threads restarted after a panic.",
        c.thread_restarts,
    );
    gauge(
        out,
        "tidelog_cleaner_buffer_utilization",
        "fraction of the offset map (dedupe buffer) the last pass used.",
        c.buffer_utilization,
    );
    counter(
        out,
        "tidelog_cleaner_runs_total",
        "cleaning passes finished.",
        c.runs,
    );
    counter(
        out,
        "tidelog_cleaner_failures_total",
        "cleaning passes that failed (the partition is marked uncleanable).",
        c.failures,
    );
    gauge(
        out,
        "tidelog_compacted_logs",
        "compacted logs (partitions of compact topics).",
        snap.compacted_logs as f64,
    );
    gauge(
        out,
        "tidelog_compacted_log_segments",
        "segments of every compacted log.",
        snap.compacted_log_segments as f64,
    );
    gauge(
        out,
        "tidelog_compacted_log_bytes",
        "bytes of every compacted log segment.",
        snap.compacted_log_bytes as f64,
    );
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
