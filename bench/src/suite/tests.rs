//! The table builder on sample results: every kind of verdict (met,
//! missed, reported, failed from a `.failed` file, a missing step, a bad
//! file, a missing field), no timing.

use super::*;
use crate::machine::ServerFigures;
use crate::results::{RecoveryFigures, VisibilityFigures};

fn figures(phase: &str, target: &str, records_per_s: f64, record_bytes: f64) -> PhaseFigures {
    PhaseFigures {
        phase: phase.into(),
        target: target.into(),
        records_per_s,
        mb_per_s: records_per_s * record_bytes / 1e6,
        p50_ms: 2.0,
        p99_ms: 8.0,
        p999_ms: 12.0,
        requests: 1000,
        errors: 0,
        server_us_per_record: Some(0.8),
        client_us_per_record: Some(0.3),
    }
}

/// A run's four rows: (tidelog, ceiling) records/s of produce and fetch.
fn four(produce: (f64, f64), fetch: (f64, f64), record_bytes: f64) -> Vec<PhaseFigures> {
    vec![
        figures("produce", "tidelog", produce.0, record_bytes),
        figures("produce", "ceiling", produce.1, record_bytes),
        figures("fetch", "tidelog", fetch.0, record_bytes),
        figures("fetch", "ceiling", fetch.1, record_bytes),
    ]
}

fn held(rss_anon_mib: u64) -> Option<ServerFigures> {
    Some(ServerFigures {
        rss_anon_kib: Some(rss_anon_mib * 1024),
        vm_rss_kib: Some(rss_anon_mib * 2048),
        threads: Some(20),
        open_files: Some(40),
        mappings: Some(300),
    })
}

fn write_json(dir: &Path, name: &str, value: &impl Serialize) {
    let text = serde_json::to_string(value).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), text).unwrap();
}

const CLEANER_LOG: &str = "\
== compaction bench: Plan { full: true }
cleaner / cp: cold 1.20x, warm 0.80x (MB/s of log)
offset map at the default buffer (134217728 B per thread, 1 thread(s), load factor 0.9): 20 B per slot (Kafka 24), 134217720 B allocated, 6710886 slots, 6039797 keys per pass (Kafka 5033164); allocated / keys per pass = 22.22 B per key (Kafka 26.67)
produce busy / idle (4 busy slices between 5 idle ones, records over seconds of each kind): 1.05x appended, 1.10x through the sink
";

const LIBRDKAFKA_LOG: &str = "\
uptime:  20:00:00 up 1 day, load average: 1.00, 1.00, 1.00
confluent-kafka producer: 1000000 of 1000000 records x 100 B acknowledged in 3.33 s (all queued after 3.30 s): 300300 records/s, 30.03 MB/s; 0 failed, 0 not delivered
client CPU: process 70 % of one core (librdkafka threads included), Python main thread 55 %
verdict: client-bound: the produce() loop took 99 % of the run
server CPU: 18 % of one core over the client run (3.40 s)
";

/// A results dir with one sample of each kind of outcome.
fn sample_suite() -> (tempfile::TempDir, Suite) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_json(
        d,
        "meta",
        &Meta {
            commit: "abc1234".into(),
            date: "2026-12-01 21:00 UTC".into(),
            uptime_start: "load average: 1.00".into(),
            uptime_end: "load average: 2.00".into(),
            quick: false,
        },
    );
    write_json(
        d,
        "limits",
        &Limits {
            dd_write_mb_s: Some(1000.0),
            dd_dsync_ops_s: Some(5000.0),
            dd_memcpy_mb_s: Some(30_000.0),
            cat_cold_mb_s: Some(800.0),
        },
    );
    let http = |phases: Vec<PhaseFigures>, rss: u64| RunResults {
        mode: "http".into(),
        connections: 64,
        batch: 100,
        record_bytes: 100,
        partitions: 8,
        duration_ms: 10_000,
        phases,
        visibility: Some(VisibilityFigures {
            p50_ms: 0.1,
            p99_ms: 0.2,
            max_ms: 0.5,
            samples: 300,
            missed: 0,
        }),
        server: held(rss),
        memcpy_mb_per_s: Some(20_000.0),
        ..RunResults::default()
    };
    // Produce 60 % of the ceiling (met), fetch 40 % (missed).
    write_json(
        d,
        "http-100",
        &http(four((1.2e6, 2.0e6), (1.0e6, 2.5e6), 100.0), 100),
    );
    write_json(
        d,
        "http-1k",
        &http(four((500e3, 600e3), (1.0e6, 1.5e6), 1024.0), 120),
    );
    // 1,000 partitions: over the memory goal.
    write_json(
        d,
        "http-p1000",
        &http(four((0.6e6, 2.0e6), (0.5e6, 2.5e6), 100.0), 300),
    );
    // A compact run without the figures its row needs.
    let mut compact = http(
        vec![
            figures("produce", "tidelog", 1.0e6, 100.0),
            figures("produce", "ceiling", 2.0e6, 100.0),
        ],
        100,
    );
    if let Some(v) = compact.visibility.as_mut() {
        v.p99_ms = 7.0;
    }
    write_json(d, "compact", &compact);
    write_json(
        d,
        "recovery",
        &RunResults {
            mode: "recovery".into(),
            recovery: Some(RecoveryFigures {
                filled_bytes: 4 << 30,
                log_bytes: 4 << 30,
                segments: 5,
                fill_s: 30.0,
                files_dropped: 40,
                recovery_s: 6.0,
                cat_s: 5.0,
                ratio: 1.2,
            }),
            server: held(90),
            ..RunResults::default()
        },
    );
    std::fs::write(d.join("http-10.failed"), "exit 1: connection refused\n").unwrap();
    std::fs::write(
        d.join("sync-1.failed"),
        "exit 2: error: unexpected argument '--flush' found\n",
    )
    .unwrap();
    std::fs::write(d.join("kafka-acks1.json"), "{").unwrap();
    std::fs::write(d.join("cleaner.log"), CLEANER_LOG).unwrap();
    std::fs::write(d.join("librdkafka.log"), LIBRDKAFKA_LOG).unwrap();
    let suite = Suite::open(d).unwrap();
    (dir, suite)
}

fn find<'a>(rows: &'a [Row], figure: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.figure.starts_with(figure))
        .unwrap_or_else(|| panic!("no row {figure:?} in {rows:#?}"))
}

fn failed_with(row: &Row, why: &str) {
    match &row.verdict {
        Verdict::Failed(reason) => assert!(reason.contains(why), "{reason:?} lacks {why:?}"),
        other => panic!("{}: {other:?}, expected failed: {why}", row.figure),
    }
}

#[test]
fn met_and_missed_come_from_the_figures_against_their_goals() {
    let (_dir, suite) = sample_suite();
    let rows = suite.rows();
    let produce = find(&rows, "HTTP produce, 64 connections × 100 records × 100 B");
    assert_eq!(produce.verdict, Verdict::Met);
    assert_eq!(produce.ratio, "60.0 %");
    assert!(produce.value.starts_with("1.20 M records/s"), "{produce:?}");
    assert!(produce.limit.contains("2.00 M records/s"), "{produce:?}");
    let fetch = find(&rows, "HTTP fetch, 64 connections, max_records 100");
    assert_eq!(fetch.verdict, Verdict::Missed);
    assert_eq!(fetch.ratio, "40.0 %");
    assert_eq!(find(&rows, "HTTP visibility").verdict, Verdict::Met);
    assert_eq!(
        find(&rows, "compact topic visibility").verdict,
        Verdict::Missed
    );
    let recovery = find(&rows, "recovery after kill -9");
    assert_eq!(recovery.verdict, Verdict::Met);
    assert_eq!(recovery.ratio, "1.20×");
    // The largest RssAnon is the 1,000-partition run's 300 MiB.
    let memory = find(&rows, "server RssAnon after each issue-17 run");
    assert_eq!(memory.verdict, Verdict::Missed);
    assert!(
        memory.value.contains("300.0 MiB (`http-p1000`)"),
        "{memory:?}"
    );
}

#[test]
fn the_cleaner_and_librdkafka_rows_are_read_from_their_logs() {
    let (_dir, suite) = sample_suite();
    let rows = suite.rows();
    assert_eq!(
        find(&rows, "cleaner pass over cp, cold").verdict,
        Verdict::Met
    );
    let warm = find(&rows, "cleaner pass over cp, warm");
    assert_eq!(warm.verdict, Verdict::Missed);
    assert_eq!(warm.value, "0.80×");
    let per_key = find(&rows, "offset map, allocated bytes per key");
    assert_eq!(per_key.verdict, Verdict::Missed);
    assert_eq!(per_key.value, "22.22 B per key");
    let keys = find(&rows, "offset map, keys per pass");
    assert_eq!(keys.verdict, Verdict::Met);
    assert_eq!(keys.value, "6.04 M keys");
    assert_eq!(
        find(&rows, "produce with the cleaner busy").verdict,
        Verdict::Met
    );
    let client = find(&rows, "librdkafka producer");
    assert_eq!(client.verdict, Verdict::Reported);
    assert!(
        client.value.starts_with("300.3 k records/s; client-bound"),
        "{client:?}"
    );
}

#[test]
fn figures_without_a_goal_are_reported_beside_their_limits() {
    let (_dir, suite) = sample_suite();
    let rows = suite.rows();
    let kib = find(&rows, "HTTP produce, 64 connections × 100 records × 1 KiB");
    assert_eq!(kib.verdict, Verdict::Reported);
    assert!(kib.value.starts_with("512 MB/s"), "{kib:?}");
    assert!(
        kib.limit.contains("1000 MB/s") && kib.limit.contains("20000 MB/s"),
        "{kib:?}"
    );
    assert_eq!(kib.ratio, "51.2 % of dd");
    let many = find(&rows, "HTTP produce, 1,000 partitions");
    assert_eq!(many.verdict, Verdict::Reported);
    assert_eq!(many.ratio, "0.50×");
    let held = find(&rows, "what the server holds with 1,000 partitions");
    assert_eq!(held.value, "40 open files, 300 mappings");
}

#[test]
fn a_failed_or_missing_step_fails_its_rows_and_only_those() {
    let (_dir, suite) = sample_suite();
    let rows = suite.rows();
    failed_with(
        find(&rows, "HTTP produce, 64 connections × 10 records"),
        "http-10: exit 1: connection refused",
    );
    // Every sync row names the flag the step lacked.
    for figure in [
        "sync produce (`--flush sync`), 64 connections × 1 record",
        "sync produce, 64 × 1, over the disk",
        "sync produce, 64 × 1, latency",
        "sync produce, 64 × 1, server CPU",
    ] {
        failed_with(find(&rows, figure), "unexpected argument '--flush' found");
    }
    failed_with(find(&rows, "sync produce, 64 × 100"), "sync-100: not run");
    failed_with(
        find(&rows, "compact topic produce"),
        "no produce row for tidelog-delete",
    );
    failed_with(
        find(&rows, "compact topic dispatch lag"),
        "the run reported no dispatch_lag_max_bytes",
    );
    failed_with(
        find(
            &rows,
            "Kafka produce, 64 connections × one batch of 100 × 100 B, acks 1",
        ),
        "kafka-acks1.json",
    );
    failed_with(find(&rows, "HTTP produce, 1 partition"), "http-p1: not run");
    let markdown = suite.markdown();
    assert!(
        markdown.contains("| failed: sync-1: exit 2: error: unexpected argument '--flush' found |"),
        "{markdown}"
    );
    assert!(
        markdown.contains("| `abc1234` | 2026-12-01 21:00 UTC |"),
        "{markdown}"
    );
    assert!(
        markdown.contains("Load: `load average: 1.00` before"),
        "{markdown}"
    );
    // One line per row, every row with all eight columns.
    let table: Vec<_> = markdown.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(table.len(), rows.len() + 1, "{markdown}");
    for line in table {
        assert_eq!(line.matches(" | ").count(), 7, "{line}");
    }
}

#[test]
fn a_results_dir_needs_its_meta() {
    let dir = tempfile::tempdir().unwrap();
    assert!(Suite::open(dir.path()).is_err());
}

#[test]
fn the_tiered_rows_put_the_server_beside_plain_object_store_calls() {
    let (dir, _) = sample_suite();
    let mut tiered = RunResults {
        mode: "tiered".into(),
        ..RunResults::default()
    };
    for (name, value) in [
        ("tiered_upload_mb_per_s", 30.0),
        ("tiered_plain_put_mb_per_s", 40.0),
        ("tiered_remote_fetch_mb_per_s", 50.0),
        ("tiered_plain_get_mb_per_s", 200.0),
    ] {
        tiered.extra.insert(name.into(), value);
    }
    // Its read cache (256 MiB by default) is filled on purpose: 400 MiB is
    // within its own bound and is not issue 17's largest.
    tiered.server = held(400);
    write_json(dir.path(), "tiered", &tiered);
    let rows = Suite::open(dir.path()).unwrap().rows();
    let memory = find(&rows, "server RssAnon after the tiered run");
    assert_eq!(memory.verdict, Verdict::Met);
    assert_eq!(memory.value, "400.0 MiB");
    assert!(memory.limit.contains("256 MiB"), "{memory:?}");
    let issue17 = find(&rows, "server RssAnon after each issue-17 run");
    assert!(issue17.value.contains("(`http-p1000`)"), "{issue17:?}");
    let upload = find(&rows, "tiered storage upload");
    assert_eq!(upload.verdict, Verdict::Reported);
    assert_eq!(upload.value, "30.0 MB/s");
    assert!(
        upload
            .limit
            .contains("plain object_store put of the same bytes: 40.0 MB/s"),
        "{upload:?}"
    );
    let fetch = find(&rows, "tiered storage remote fetch");
    assert_eq!(
        (fetch.value.as_str(), fetch.ratio.as_str()),
        ("50.0 MB/s", "25.0 %")
    );
    // Without the step, both rows say why.
    let (_other, suite) = sample_suite();
    let rows = suite.rows();
    failed_with(find(&rows, "tiered storage upload"), "not run");
}

#[test]
fn the_sync_100_row_divides_by_the_async_server_of_its_own_phase() {
    let (dir, _) = sample_suite();
    let sync = |phases: Vec<PhaseFigures>| RunResults {
        mode: "http".into(),
        phases,
        ..RunResults::default()
    };
    // `--compare-async`: 650 k against 1.0 M in one phase (met), whatever
    // the `http-100` step measured minutes apart (1.2 M: it would miss).
    write_json(
        dir.path(),
        "sync-100",
        &sync(vec![
            figures("produce", "tidelog", 650e3, 100.0),
            figures("produce", "ceiling", 2.0e6, 100.0),
            figures("produce-vs-async", "tidelog", 650e3, 100.0),
            figures("produce-vs-async", "async", 1.0e6, 100.0),
        ]),
    );
    let rows = Suite::open(dir.path()).unwrap().rows();
    let row = find(&rows, "sync produce, 64 × 100 records");
    assert_eq!(
        (row.ratio.as_str(), &row.verdict),
        ("65.0 %", &Verdict::Met)
    );
    assert!(row.limit.contains("alternating slices"), "{row:?}");
    // An older run without those rows falls back to the async step.
    write_json(
        dir.path(),
        "sync-100",
        &sync(vec![figures("produce", "tidelog", 650e3, 100.0)]),
    );
    let rows = Suite::open(dir.path()).unwrap().rows();
    let row = find(&rows, "sync produce, 64 × 100 records");
    assert_eq!(row.verdict, Verdict::Missed);
    assert!(row.limit.contains("`http-100`"), "{row:?}");
}

#[test]
fn the_sync_latency_row_puts_the_bare_endpoints_p99_beside_tidelogs() {
    let (dir, _) = sample_suite();
    std::fs::remove_file(dir.path().join("sync-1.failed")).unwrap();
    let with_p99 = |target: &str, p50_ms: f64, p99_ms: f64| PhaseFigures {
        p50_ms,
        p99_ms,
        ..figures("produce", target, 30e3, 100.0)
    };
    let sync = |tidelog_p99_ms: f64| RunResults {
        mode: "http".into(),
        phases: vec![
            with_p99("tidelog", 1.9, tidelog_p99_ms),
            with_p99("ceiling", 0.8, 4.0),
        ],
        ..RunResults::default()
    };
    write_json(dir.path(), "sync-1", &sync(9.0));
    let rows = Suite::open(dir.path()).unwrap().rows();
    let row = find(&rows, "sync produce, 64 × 1, latency");
    assert_eq!(row.value, "p99 9.00 ms (p50 1.90, p999 12.00)");
    assert_eq!(
        row.limit,
        "bare endpoint, 1 record, same run: p99 4.00 ms (p50 0.80)"
    );
    assert_eq!(
        (row.ratio.as_str(), &row.verdict),
        ("2.25×", &Verdict::Missed)
    );
    // The goal is tidelog's own p99, whatever the bare endpoint's.
    write_json(dir.path(), "sync-1", &sync(2.5));
    let rows = Suite::open(dir.path()).unwrap().rows();
    let row = find(&rows, "sync produce, 64 × 1, latency");
    assert_eq!(row.verdict, Verdict::Met);
}

#[test]
fn the_security_rows_put_secured_listeners_beside_plain_ones_of_the_same_run() {
    let (dir, suite) = sample_suite();
    // Not run yet: every security row says so, the others stand.
    let rows = suite.rows();
    failed_with(
        find(&rows, "Kafka produce over SASL_SSL (TLS 1.3"),
        "kafka-security",
    );
    failed_with(find(&rows, "HTTPS produce"), "http-security");

    let mut kafka = RunResults {
        mode: "kafka-security".into(),
        phases: vec![
            figures("produce", "plaintext", 1.0e6, 100.0),
            figures("produce", "sasl-ssl", 0.8e6, 100.0),
            figures("produce", "sasl-ssl-acls", 0.78e6, 100.0),
            figures("fetch", "plaintext", 2.0e6, 100.0),
            // 60 % of plaintext: missed.
            figures("fetch", "sasl-ssl", 1.2e6, 100.0),
        ],
        ..RunResults::default()
    };
    kafka.extra.insert("logins".into(), 200.0);
    kafka.extra.insert("login_p50_ms".into(), 4.5);
    kafka.extra.insert("login_server_cpu_ms".into(), 0.62);
    write_json(dir.path(), "kafka-security", &kafka);
    write_json(
        dir.path(),
        "http-security",
        &RunResults {
            mode: "http-security".into(),
            phases: vec![
                figures("produce", "http", 1.0e6, 100.0),
                figures("produce", "https", 0.9e6, 100.0),
                figures("fetch", "http", 2.0e6, 100.0),
                figures("fetch", "https", 1.0e6, 100.0),
            ],
            ..RunResults::default()
        },
    );
    let rows = Suite::open(dir.path()).unwrap().rows();
    let produce = find(&rows, "Kafka produce over SASL_SSL (TLS 1.3");
    assert_eq!(
        (&produce.verdict, produce.ratio.as_str()),
        (&Verdict::Met, "80.0 %")
    );
    assert!(
        produce.limit.starts_with(
            "PLAINTEXT listener of the same server, same run: 1.00 M records/s; 0.80 µs"
        ),
        "{produce:?}"
    );
    let fetch = find(&rows, "Kafka fetch over SASL_SSL");
    assert_eq!(
        (&fetch.verdict, fetch.ratio.as_str()),
        (&Verdict::Missed, "60.0 %")
    );
    let acls = find(&rows, "Kafka produce over SASL_SSL with authorization on");
    assert_eq!(
        (&acls.verdict, acls.ratio.as_str()),
        (&Verdict::Met, "97.5 %")
    );
    let login = find(&rows, "a SASL_SSL login");
    assert_eq!(login.verdict, Verdict::Reported);
    assert_eq!(login.value, "0.62 ms server CPU a login");
    assert!(login.limit.contains("200 logins"), "{login:?}");
    let https = find(&rows, "HTTPS produce");
    assert_eq!(
        (&https.verdict, https.ratio.as_str()),
        (&Verdict::Met, "90.0 %")
    );
    let https_fetch = find(&rows, "HTTPS fetch");
    assert_eq!(
        (&https_fetch.verdict, https_fetch.ratio.as_str()),
        (&Verdict::Reported, "50.0 %")
    );
}

#[test]
fn the_transaction_rows_divide_by_idempotent_and_read_uncommitted_of_the_same_run() {
    let (dir, suite) = sample_suite();
    // Not run: each row says so, the others stand.
    let rows = suite.rows();
    failed_with(
        find(&rows, "Kafka transactional produce"),
        "kafka-txn: not run",
    );
    failed_with(find(&rows, "Kafka LSO lag"), "kafka-txn: not run");

    let mut txn = RunResults {
        mode: "kafka-txn".into(),
        phases: vec![
            figures("produce", "idempotent", 1.0e6, 100.0),
            // 70 % of idempotent: met.
            figures("produce", "transactional", 0.7e6, 100.0),
            // 85 % of read_uncommitted: missed.
            figures("fetch", "read-committed", 1.7e6, 100.0),
            figures("fetch", "read-uncommitted", 2.0e6, 100.0),
        ],
        visibility: Some(VisibilityFigures {
            p50_ms: 0.4,
            p99_ms: 1.2,
            max_ms: 2.5,
            samples: 300,
            missed: 0,
        }),
        ..RunResults::default()
    };
    for (name, value) in [
        ("end_txn_p50_ms", 3.0),
        ("end_txn_p99_ms", 9.0),
        ("plain_visibility_p50_ms", 0.2),
        ("plain_visibility_p99_ms", 0.4),
        ("lso_lag_before_commit", 12.0),
        ("lso_lag_from_send_p99_ms", 1.5),
    ] {
        txn.extra.insert(name.into(), value);
    }
    write_json(dir.path(), "kafka-txn", &txn);
    let rows = Suite::open(dir.path()).unwrap().rows();
    let produce = find(&rows, "Kafka transactional produce");
    assert_eq!(
        (&produce.verdict, produce.ratio.as_str()),
        (&Verdict::Met, "70.0 %")
    );
    assert!(
        produce
            .value
            .ends_with("server CPU per record; EndTxn p50 3.00 ms, p99 9.00 ms"),
        "{produce:?}"
    );
    assert!(
        produce
            .limit
            .starts_with("idempotent producers, same server, alternating slices: 1.00 M records/s"),
        "{produce:?}"
    );
    let fetch = find(&rows, "Kafka read_committed fetch");
    assert_eq!(
        (&fetch.verdict, fetch.ratio.as_str()),
        (&Verdict::Missed, "85.0 %")
    );
    let lag = find(&rows, "Kafka LSO lag");
    assert_eq!(lag.verdict, Verdict::Reported);
    assert_eq!(
        lag.value,
        "p99 1.200 ms (p50 0.400, max 2.500; 300 samples, 12 answered before EndTxn, 0 missed); p99 1.500 ms from EndTxn sent"
    );
    assert!(lag.limit.ends_with("p99 0.400 ms (p50 0.200)"), "{lag:?}");
    assert_eq!(lag.ratio, "3.00×");
}

#[test]
fn the_cluster_rows_divide_by_the_single_node_of_the_same_run_and_report_lag_and_failover() {
    let (dir, suite) = sample_suite();
    let rows = suite.rows();
    for figure in [
        "Kafka produce, acks -1, to a 3-node cluster",
        "replication lag under that load",
        "failover: kill -9 of the master",
    ] {
        failed_with(find(&rows, figure), "cluster: not run");
    }
    // A skipped step (no etcd) says why in every row.
    std::fs::write(
        dir.path().join("cluster.failed"),
        "skipped: no /usr/bin/etcd\n",
    )
    .unwrap();
    let rows = Suite::open(dir.path()).unwrap().rows();
    failed_with(
        find(&rows, "failover: kill -9 of the master"),
        "cluster: skipped: no /usr/bin/etcd",
    );
    std::fs::remove_file(dir.path().join("cluster.failed")).unwrap();

    let mut cluster = RunResults {
        mode: "cluster".into(),
        phases: vec![
            figures("produce", "single", 1.0e6, 100.0),
            // 40 % of the single node: missed.
            figures("produce", "cluster", 0.4e6, 100.0),
        ],
        ..RunResults::default()
    };
    for (name, value) in [
        ("master_us_per_record", 1.5),
        ("replicas_us_per_record", 2.25),
        ("lag_p50_bytes", 1024.0),
        ("lag_p99_bytes", 10240.0),
        ("lag_max_bytes", 20480.0),
        ("lag_p50_ms", 0.1),
        ("lag_p99_ms", 1.0),
        ("lag_max_ms", 2.0),
        ("lag_samples", 600.0),
        ("master_log_mb_per_s", 10.5),
        ("failovers", 20.0),
        ("failover_p50_ms", 3500.0),
        ("failover_max_ms", 4800.0),
        ("failover_min_ms", 3100.0),
        ("session_ttl_ms", 3000.0),
    ] {
        cluster.extra.insert(name.into(), value);
    }
    write_json(dir.path(), "cluster", &cluster);
    let rows = Suite::open(dir.path()).unwrap().rows();
    let produce = find(&rows, "Kafka produce, acks -1, to a 3-node cluster");
    assert_eq!(
        (&produce.verdict, produce.ratio.as_str()),
        (&Verdict::Missed, "40.0 %")
    );
    assert!(
        produce
            .value
            .ends_with("(three nodes: master 1.50, both replicas 2.25)"),
        "{produce:?}"
    );
    assert!(
        produce.limit.starts_with(
            "a single node, acks -1, alternating slices of the same run: 1.00 M records/s"
        ),
        "{produce:?}"
    );
    let lag = find(&rows, "replication lag under that load");
    assert_eq!(lag.verdict, Verdict::Reported);
    assert_eq!(
        lag.value,
        "p99 10.0 KiB ≈ 1.00 ms (p50 1.0 KiB ≈ 0.10 ms, max 20.0 KiB ≈ 2.00 ms; 600 samples)"
    );
    assert!(lag.limit.contains("10.5 MB/s"), "{lag:?}");
    let failover = find(&rows, "failover: kill -9 of the master");
    assert_eq!(failover.verdict, Verdict::Reported);
    assert_eq!(
        failover.value,
        "p50 3.50 s, max 4.80 s (min 3.10 s) over 20 failovers"
    );
    assert_eq!(failover.ratio, "1.17×");
}
