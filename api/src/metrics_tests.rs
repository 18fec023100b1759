//! Tests of `metrics.rs`: histogram buckets, every family of the
//! `/metrics` text (names, labels, HELP and TYPE lines) from counters and
//! snapshots.
use super::*;

#[test]
fn histogram_buckets_are_cumulative() {
    let h = Histogram::default();
    h.observe(Duration::from_micros(100));
    h.observe(Duration::from_millis(3));
    h.observe(Duration::from_secs(60));
    let mut out = String::new();
    h.render(&mut out, "x", "help");
    assert!(out.contains("x_bucket{le=\"0.00025\"} 1\n"), "{out}");
    assert!(out.contains("x_bucket{le=\"0.005\"} 2\n"), "{out}");
    assert!(out.contains("x_bucket{le=\"30\"} 2\n"), "{out}");
    assert!(out.contains("x_bucket{le=\"+Inf\"} 3\n"), "{out}");
    assert!(out.contains("x_count 3\n"), "{out}");
}

#[test]
fn tiered_families_show_uploads_reads_cache_and_lag_per_partition() {
    use tidelog_broker::tiering::{PartitionTiering, RemoteStats, TieringStats};
    let snap = Snapshot {
        tiered: Some(TieringStats {
            uploaded_records: 40,
            upload_errors: 2,
            remote_reads: 5,
            remote: RemoteStats {
                uploaded_bytes: 4096,
                uploaded_objects: 3,
                cache_hits: 7,
                cache_misses: 1,
                ..RemoteStats::default()
            },
            partitions: vec![PartitionTiering {
                topic: "t".into(),
                partition: 1,
                uploaded_end: Some(40),
                remote_beginning: Some(0),
                local_beginning: 40,
                lag_records: 12,
                lag_bytes: 900,
                failures: 0,
            }],
            ..TieringStats::default()
        }),
        ..Snapshot::default()
    };
    let out = Metrics::default().render(&snap);
    for line in [
        "tidelog_tiered_uploaded_bytes_total 4096\n",
        "tidelog_tiered_uploaded_objects_total 3\n",
        "tidelog_tiered_uploaded_records_total 40\n",
        "tidelog_tiered_upload_failures_total 2\n",
        "tidelog_tiered_remote_reads_total 5\n",
        "tidelog_tiered_cache_hits_total 7\n",
        "tidelog_tiered_cache_misses_total 1\n",
        "tidelog_tiered_upload_lag_offsets{topic=\"t\",partition=\"1\"} 12\n",
        "tidelog_tiered_upload_lag_bytes{topic=\"t\",partition=\"1\"} 900\n",
    ] {
        assert!(out.contains(line), "{line} not in {out}");
    }
    assert!(!Metrics::default()
        .render(&Snapshot::default())
        .contains("tidelog_tiered_"));
}

#[test]
fn a_gauge_guard_counts_while_it_lives() {
    let m = Metrics::default();
    let waiting = |m: &Metrics| {
        m.render(&Snapshot::default()).lines().find_map(|l| {
            l.strip_prefix("tidelog_fetch_long_polls_waiting ")
                .map(str::to_owned)
        })
    };
    assert_eq!(waiting(&m).as_deref(), Some("0"));
    let a = GaugeGuard::new(&m.fetches_waiting);
    let b = GaugeGuard::new(&m.fetches_waiting);
    assert_eq!(waiting(&m).as_deref(), Some("2"));
    drop(a);
    assert_eq!(waiting(&m).as_deref(), Some("1"));
    drop(b);
    assert_eq!(waiting(&m).as_deref(), Some("0"));
}

#[test]
fn render_has_the_families_the_issue_names() {
    let m = Metrics::default();
    m.produce.finish(true, 3, 30, Duration::from_millis(1));
    m.count_response(200);
    m.count_response(429);
    let text = m.render(&Snapshot {
        ready: true,
        store: Some(StoreStats {
            disk_used_ratio: 0.5,
            disk_full: true,
            dispatch_stalled: true,
            dispatch_stalls: 3,
            retention_segments_deleted: 7,
            retention_bytes_freed: 65536,
            retention_failures: 2,
            retention_last_pass_ms: 1_700_000_000_500,
            ..StoreStats::default()
        }),
        cleaner: Some(CleanerMetricsSnapshot {
            max_dirty_percent: 75,
            max_clean_time_ms: 1500,
            uncleanable_partitions: 1,
            thread_restarts: 2,
            buffer_utilization: 0.25,
            runs: 9,
            ..CleanerMetricsSnapshot::default()
        }),
        compacted_log_bytes: 4096,
        ..Snapshot::default()
    });
    for needle in [
        "tidelog_produce_requests_total{result=\"ok\"} 1",
        "tidelog_produce_records_total 3",
        "tidelog_produce_bytes_total 30",
        "tidelog_fetch_latency_seconds_bucket",
        "tidelog_dispatch_lag_bytes 0",
        "tidelog_commitlog_segments 0",
        "tidelog_disk_used_ratio 0.5\n",
        "tidelog_disk_full 1\n",
        "tidelog_dispatch_stalled 1\n",
        "# TYPE tidelog_dispatch_stalls_total counter\n",
        "tidelog_dispatch_stalls_total 3\n",
        "tidelog_retention_segments_deleted_total 7\n",
        "tidelog_retention_bytes_freed_total 65536\n",
        "tidelog_retention_failures_total 2\n",
        "tidelog_retention_last_pass_timestamp_seconds 1700000000.5\n",
        "# TYPE tidelog_retention_segments_deleted_total counter\n",
        "tidelog_http_responses_total{class=\"4xx\"} 1",
        "tidelog_cleaner_max_dirty_percent 75\n",
        "tidelog_cleaner_recopy_percent 0\n",
        "tidelog_cleaner_max_clean_time_seconds 1.5\n",
        "tidelog_cleaner_max_compaction_delay_seconds 0\n",
        "tidelog_cleaner_time_since_last_run_seconds 0\n",
        "tidelog_cleaner_uncleanable_partitions 1\n",
        "tidelog_cleaner_uncleanable_bytes 0\n",
        "# TYPE tidelog_cleaner_thread_restarts_total counter\n",
        "tidelog_cleaner_thread_restarts_total 2\n",
        "tidelog_cleaner_buffer_utilization 0.25\n",
        "tidelog_cleaner_runs_total 9\n",
        "tidelog_cleaner_failures_total 0\n",
        "tidelog_compacted_log_bytes 4096\n",
        "tidelog_compacted_log_segments 0\n",
        "tidelog_consumequeue_files 0\n",
    ] {
        assert!(text.contains(needle), "missing {needle}:\n{text}");
    }
}

#[test]
fn listener_families_render_their_counters() {
    let m = Metrics::default();
    m.connections.open.store(3, Ordering::Relaxed);
    m.connections
        .rejected_over_limit
        .store(2, Ordering::Relaxed);
    m.connections
        .header_read_timeouts
        .store(5, Ordering::Relaxed);
    m.body_read_timeouts.store(7, Ordering::Relaxed);
    m.connections.idle_timeouts.store(11, Ordering::Relaxed);
    m.connections.write_timeouts.store(17, Ordering::Relaxed);
    m.connections.rejected_heads.store(31, Ordering::Relaxed);
    m.rejected_inflight_bytes.store(13, Ordering::Relaxed);
    m.answers_shrunk.store(19, Ordering::Relaxed);
    m.rejected_answer_bytes.store(23, Ordering::Relaxed);
    m.auth_failures.store(29, Ordering::Relaxed);
    let _reading = GaugeGuard::new(&m.requests_reading_body);
    let text = m.render(&Snapshot {
        inflight_bytes: 4096,
        answer_bytes: 8192,
        consumer_instances: 3,
        ..Snapshot::default()
    });
    for needle in [
        "tidelog_consumer_instances 3\n",
        "tidelog_http_connections 3\n",
        "# TYPE tidelog_http_connections_rejected_total counter\n",
        "tidelog_http_connections_rejected_total 2\n",
        "# TYPE tidelog_http_timeouts_total counter\n",
        "tidelog_http_timeouts_total{phase=\"header\"} 5\n",
        "tidelog_http_timeouts_total{phase=\"body\"} 7\n",
        "tidelog_http_timeouts_total{phase=\"idle\"} 11\n",
        "tidelog_http_timeouts_total{phase=\"write\"} 17\n",
        "tidelog_http_rejected_inflight_bytes_total 13\n",
        "tidelog_http_inflight_bytes 4096\n",
        "tidelog_http_requests_reading_body 1\n",
        "tidelog_http_answer_bytes 8192\n",
        "tidelog_http_answers_shrunk_total 19\n",
        "tidelog_http_rejected_answer_bytes_total 23\n",
        "tidelog_http_auth_failures_total 29\n",
        "tidelog_http_rejected_heads_total 31\n",
    ] {
        assert!(text.contains(needle), "missing {needle}:\n{text}");
    }
}

/// Families the node registers (the Kafka listener's: their own text is
/// tested in `tidelog_kafka::metrics`) are rendered only when registered,
/// each as it writes itself.
#[test]
fn kafka_families_render_only_with_a_listener() {
    #[derive(Debug)]
    struct Kafka;
    impl MetricFamilies for Kafka {
        fn render(&self, out: &mut String) {
            counter(out, "tidelog_kafka_request_bytes_total", "bytes.", 100);
        }
    }
    let m = Metrics::default();
    let text = m.render(&Snapshot::default());
    assert!(!text.contains("tidelog_kafka_"), "{text}");

    let text = m.render(&Snapshot {
        families: vec![Arc::new(Kafka)],
        ..Snapshot::default()
    });
    for needle in [
        "# TYPE tidelog_kafka_request_bytes_total counter\n",
        "tidelog_kafka_request_bytes_total 100\n",
    ] {
        assert!(text.contains(needle), "missing {needle}:\n{text}");
    }
}
