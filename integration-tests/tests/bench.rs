//! `tidelog bench` as a real process, with tiny durations: it starts its own
//! server and bare endpoint, runs every phase and prints the expected
//! lines with nonzero rates. No timing is asserted (numbers on a shared
//! machine say nothing in a test); docs/BENCHMARKS.md has the real run.

mod common;

use common::{run_tidelog, DISK_RATIOS_OFF};

/// The records/s column of the result row `phase target`.
fn records_per_s(stdout: &str, phase: &str, target: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| {
            let mut words = l.split_whitespace();
            words.next() == Some(phase) && words.next() == Some(target)
        })
        .unwrap_or_else(|| panic!("no result row for {phase} {target} in\n{stdout}"));
    line.split_whitespace()
        .nth(2)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no records/s in {line:?}"))
}

/// `tidelog bench` with `extra` and a short run (4 connections, phases
/// of 300 ms) against a server it starts on `dir`; it must succeed. Its
/// stdout.
fn run_bench(dir: &std::path::Path, extra: &[&str]) -> String {
    // Small segments: a fresh 1 GiB segment takes seconds to prepare on a
    // cold machine, and the phases here last a fraction of a second.
    let config = dir.join("bench.yaml");
    // The shared disk's fill must not refuse writes (`DISK_RATIOS_OFF`).
    std::fs::write(
        &config,
        format!("store:\n  commitlog_segment_bytes: 4194304\n{DISK_RATIOS_OFF}"),
    )
    .expect("write the config");
    let mut args = vec!["bench"];
    args.extend_from_slice(extra);
    args.extend([
        "--duration-ms",
        "300",
        "--warmup-ms",
        "100",
        "--connections",
        "4",
        "--server-config",
        config.to_str().expect("a UTF-8 temp path"),
        "--data-dir",
        dir.to_str().expect("a UTF-8 temp path"),
    ]);
    let out = run_tidelog(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "status {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    stdout
}

#[test]
fn bench_runs_every_phase_and_reports_rates() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = run_bench(dir.path(), &["--visibility-samples", "20"]);
    for phase in ["produce", "fetch"] {
        for target in ["tidelog", "ceiling"] {
            let rate = records_per_s(&stdout, phase, target);
            assert!(rate > 0.0, "{phase} {target}: {rate} records/s\n{stdout}");
        }
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("goal {phase}: tidelog / ceiling = "))),
            "no {phase} ratio in\n{stdout}"
        );
    }
    let visibility = stdout
        .lines()
        .find(|l| l.starts_with("visibility: p50 "))
        .unwrap_or_else(|| panic!("no visibility line in\n{stdout}"));
    let samples: u64 = visibility
        .split(" samples")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no sample count in {visibility:?}"));
    assert!(samples > 0, "no visibility sample answered: {visibility}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("goal visibility: p99 ")),
        "{stdout}"
    );
    // The started server and its data dir are gone afterwards.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != "bench.yaml")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `--protocol kafka`: the started server gets a Kafka listener, every
/// phase runs against it, the bare Kafka listener and (produce) tidelog's
/// HTTP produce, and the goal lines are printed. Counts only.
#[test]
fn bench_over_kafka_runs_every_phase_and_reports_rates() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = run_bench(dir.path(), &["--protocol", "kafka", "--acks", "-1"]);
    for (phase, target) in [
        ("produce", "tidelog"),
        ("produce", "ceiling"),
        ("produce", "tidelog-http"),
        ("fetch", "tidelog"),
        ("fetch", "ceiling"),
    ] {
        let rate = records_per_s(&stdout, phase, target);
        assert!(rate > 0.0, "{phase} {target}: {rate} records/s\n{stdout}");
    }
    for goal in [
        "goal produce: tidelog / ceiling = ",
        "goal fetch: tidelog / ceiling = ",
        "goal produce over HTTP: ",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(goal)),
            "no {goal:?} in\n{stdout}"
        );
    }
    assert!(
        !stdout.contains("visibility"),
        "no visibility phase over Kafka\n{stdout}"
    );
}

/// `--security --protocol kafka`: one server's PLAINTEXT and SASL_SSL
/// listeners (TLS with the run's own certificate, SCRAM-SHA-512 logins
/// by the bench's own client) and a second server with authorization on
/// and 10,000 ACLs the bench created through CreateAcls all serve the
/// load without one error, the login phase logs in, and the figures
/// reach the JSON. Counts only.
#[test]
fn bench_security_over_kafka_measures_sasl_ssl_acls_and_logins() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let stdout = run_bench(
        dir.path(),
        &[
            "--protocol",
            "kafka",
            "--security",
            "--logins",
            "3",
            "--json",
            json.to_str().expect("a UTF-8 temp path"),
        ],
    );
    for (phase, target) in [
        ("produce", "plaintext"),
        ("produce", "sasl-ssl"),
        ("produce", "sasl-ssl-acls"),
        ("fetch", "plaintext"),
        ("fetch", "sasl-ssl"),
    ] {
        let rate = records_per_s(&stdout, phase, target);
        assert!(rate > 0.0, "{phase} {target}: {rate} records/s\n{stdout}");
    }
    assert!(stdout.contains("[acls] 10000 of 10000 created"), "{stdout}");
    for goal in [
        "goal produce: sasl-ssl / plaintext = ",
        "goal fetch: sasl-ssl / plaintext = ",
        "goal produce: 10000 ACLs / authorization off (both sasl-ssl) = ",
        "logins: 3 connections, each TCP + TLS handshake + SCRAM-SHA-512",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(goal)),
            "no {goal:?} in\n{stdout}"
        );
    }
    let run = read_json(&json);
    assert_eq!(run["mode"], "kafka-security", "{run}");
    for phase in run["phases"].as_array().expect("phases") {
        assert_eq!(phase["errors"], 0, "{phase}");
    }
    assert_eq!(run["extra"]["logins"], 3.0, "{run}");
    // Present; three logins may fall within one clock tick of /proc.
    assert!(
        run["extra"]["login_server_cpu_ms"].as_f64().is_some(),
        "{run}"
    );
}

/// `--transactions --protocol kafka`: idempotent and transactional
/// producers (the bench's own InitProducerId, AddPartitionsToTxn,
/// sequenced batches and EndTxn) write without one refusal, what the
/// transactions committed is fetched read_committed and read_uncommitted,
/// and every LSO lag sample's waiting read_committed fetch brings the
/// committed record back. Counts only.
#[test]
fn bench_transactions_over_kafka_commits_fetches_and_reports_the_lso_lag() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("txn.json");
    let stdout = run_bench(
        dir.path(),
        &[
            "--protocol",
            "kafka",
            "--transactions",
            "--txn-batches",
            "3",
            "--visibility-samples",
            "10",
            "--json",
            json.to_str().expect("a UTF-8 temp path"),
        ],
    );
    for (phase, target) in [
        ("produce", "idempotent"),
        ("produce", "transactional"),
        ("fetch", "read-committed"),
        ("fetch", "read-uncommitted"),
    ] {
        let rate = records_per_s(&stdout, phase, target);
        assert!(rate > 0.0, "{phase} {target}: {rate} records/s\n{stdout}");
    }
    for line in [
        "goal transactional produce: transactional / idempotent = ",
        "goal read_committed fetch: read-committed / read-uncommitted = ",
        "EndTxn commit of 3 batches: ",
        "lso lag (read_committed): p50 ",
        "plain visibility (read_uncommitted): p50 ",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(line)),
            "no {line:?} in\n{stdout}"
        );
    }
    assert!(!stdout.contains("ceiling"), "{stdout}");
    let run = read_json(&json);
    assert_eq!(run["mode"], "kafka-txn", "{run}");
    for phase in run["phases"].as_array().expect("phases") {
        assert_eq!(phase["errors"], 0, "{phase}");
    }
    assert_eq!(run["visibility"]["samples"], 10, "{run}");
    assert_eq!(run["visibility"]["missed"], 0, "{run}");
    assert_eq!(run["extra"]["plain_visibility_missed"], 0.0, "{run}");
}

/// `--cluster --protocol kafka`: a single node and a three-node cluster
/// with its etcd (the cluster tests' Debian etcd, installed by the harness
/// when missing; the bench itself never installs it), acks -1 produce to
/// both without one refusal, the replicas' lag sampled, two failovers,
/// and nothing left behind. Counts and shapes only.
#[test]
fn bench_cluster_measures_a_cluster_beside_a_single_node_and_fails_over() {
    tidelog_integration_tests::etcd::ensure_etcd();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cluster.json");
    let stdout = run_bench(
        dir.path(),
        &[
            "--protocol",
            "kafka",
            "--cluster",
            "--failovers",
            "2",
            "--json",
            json.to_str().expect("a UTF-8 temp path"),
        ],
    );
    for target in ["single", "cluster"] {
        let rate = records_per_s(&stdout, "produce", target);
        assert!(rate > 0.0, "produce {target}: {rate} records/s\n{stdout}");
    }
    for line in [
        "goal cluster produce: cluster / single = ",
        "replication lag (each replica's lag_bytes",
        "failover (kill -9 of the master",
        "  [failover 2/2] node ",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(line)),
            "no {line:?} in\n{stdout}"
        );
    }
    assert!(!stdout.contains("ceiling"), "{stdout}");
    let run = read_json(&json);
    assert_eq!(run["mode"], "cluster", "{run}");
    assert_eq!(run["acks"], -1, "{run}");
    for phase in run["phases"].as_array().expect("phases") {
        assert_eq!(phase["errors"], 0, "{phase}");
    }
    let extra = &run["extra"];
    assert_eq!(extra["failovers"], 2.0, "{run}");
    assert!(extra["lag_samples"].as_f64().unwrap() > 0.0, "{run}");
    let (p50, max) = (
        extra["failover_p50_ms"].as_f64().unwrap(),
        extra["failover_max_ms"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= max, "{run}");
    assert!(extra["master_us_per_record"].as_f64().is_some(), "{run}");
    // The nodes, etcd and their data dirs are gone afterwards.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != "bench.yaml" && name != "cluster.json")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `--security --protocol http`: an HTTP and an HTTPS server, produce to
/// and fetch from both, over TLS with the run's own CA for the second.
#[test]
fn bench_security_over_http_measures_https_beside_http() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = run_bench(dir.path(), &["--security"]);
    for (phase, target) in [
        ("produce", "http"),
        ("produce", "https"),
        ("fetch", "http"),
        ("fetch", "https"),
    ] {
        let rate = records_per_s(&stdout, phase, target);
        assert!(rate > 0.0, "{phase} {target}: {rate} records/s\n{stdout}");
    }
    for goal in [
        "goal produce: https / http = ",
        "goal fetch: https / http = ",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(goal)),
            "no {goal:?} in\n{stdout}"
        );
    }
    assert!(!stdout.contains("ceiling"), "{stdout}");
}

/// The JSON file `--json` writes, decoded.
fn read_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("the run wrote its --json file");
    serde_json::from_str(&text).expect("the --json file is JSON")
}

/// `--json`: the figures of the text table, the started server's memory
/// and the in-process memcpy limit, in a file (what scripts/bench.sh
/// builds its table from). Presence and counts only.
#[test]
fn bench_writes_its_figures_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let stdout = run_bench(
        dir.path(),
        &[
            "--visibility-samples",
            "5",
            "--json",
            json.to_str().expect("a UTF-8 temp path"),
        ],
    );
    let run = read_json(&json);
    assert_eq!(run["mode"], "http", "{run}");
    let phases = run["phases"].as_array().expect("phases");
    for (phase, target) in [
        ("produce", "tidelog"),
        ("produce", "ceiling"),
        ("fetch", "tidelog"),
        ("fetch", "ceiling"),
    ] {
        let row = phases
            .iter()
            .find(|p| p["phase"] == phase && p["target"] == target)
            .unwrap_or_else(|| panic!("no {phase} {target} in {run}"));
        assert!(row["records_per_s"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["p99_ms"].as_f64().is_some(), "{row}");
    }
    assert!(run["visibility"]["samples"].as_u64().unwrap() > 0, "{run}");
    assert!(run["server"]["rss_anon_kib"].as_u64().unwrap() > 0, "{run}");
    assert!(run["server"]["open_files"].as_u64().unwrap() > 0, "{run}");
    assert!(run["memcpy_mb_per_s"].as_f64().unwrap() > 0.0, "{run}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("server after the run: RssAnon ")),
        "{stdout}"
    );
}

/// `--recovery-mib`: the started server is filled past the size, killed
/// with SIGKILL, its files dropped from the page cache, restarted and
/// timed to ready, and a cold cat of the recovered log timed beside it.
/// What was filled, recovered and read is checked; no timing is.
#[test]
fn bench_recovery_fills_kills_and_times_a_cold_restart() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("recovery.json");
    let stdout = run_bench(
        dir.path(),
        &[
            "--recovery-mib",
            "8",
            "--record-bytes",
            "1024",
            "--batch",
            "10",
            "--json",
            json.to_str().expect("a UTF-8 temp path"),
        ],
    );
    let run = read_json(&json);
    assert_eq!(run["mode"], "recovery", "{run}");
    let rec = &run["recovery"];
    let mib = 1u64 << 20;
    assert!(rec["filled_bytes"].as_u64().unwrap() >= 8 * mib, "{rec}");
    // What the restarted server recovered is at least what was seen
    // written before the kill, over several 4 MiB segments.
    assert!(
        rec["log_bytes"].as_u64().unwrap() >= rec["filled_bytes"].as_u64().unwrap(),
        "{rec}"
    );
    assert!(rec["segments"].as_u64().unwrap() >= 2, "{rec}");
    assert!(rec["files_dropped"].as_u64().unwrap() > 0, "{rec}");
    assert!(rec["recovery_s"].as_f64().unwrap() > 0.0, "{rec}");
    assert!(rec["cat_s"].as_f64().unwrap() > 0.0, "{rec}");
    assert!(run["server"]["rss_anon_kib"].as_u64().unwrap() > 0, "{run}");
    for line in ["recovery: killed with SIGKILL", "goal recovery: "] {
        assert!(
            stdout.lines().any(|l| l.starts_with(line)),
            "no {line:?} in\n{stdout}"
        );
    }
}

/// `--compare-delete`: a delete and a compact topic (keyed records) both
/// take produce, beside the ceiling; the ratio, the dispatch-lag line (its
/// samples read from the server's stats) and both topics' visibility are
/// printed. Counts only.
#[test]
fn bench_compare_delete_produces_to_both_policies_and_reports_the_lag() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = run_bench(
        dir.path(),
        &[
            "--compare-delete",
            "--keys",
            "50",
            "--visibility-samples",
            "10",
        ],
    );
    for target in ["delete", "compact", "ceiling"] {
        let rate = records_per_s(&stdout, "produce", target);
        assert!(rate > 0.0, "produce {target}: {rate} records/s\n{stdout}");
    }
    for goal in [
        "goal compact produce: compact / delete = ",
        "goal dispatch lag: max ",
        "goal visibility delete: p99 ",
        "goal visibility compact: p99 ",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(goal)),
            "no {goal:?} in\n{stdout}"
        );
    }
    let compact = stdout
        .lines()
        .find(|l| l.starts_with("visibility compact: p50 "))
        .unwrap_or_else(|| panic!("no compact visibility line in\n{stdout}"));
    assert!(compact.contains(" 0 missed"), "{compact}");
}

/// `--flush sync --compare-async`: a second server with `flush: async`
/// takes the same produce requests in alternating slices with the sync
/// one; both figures land in the JSON (what the suite's sync-100 row
/// divides) and both servers' data dirs are gone afterwards. Counts only.
#[test]
fn bench_compare_async_measures_sync_and_async_servers_in_one_phase() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sync.json");
    let stdout = run_bench(
        dir.path(),
        &[
            "--flush",
            "sync",
            "--compare-async",
            "--visibility-samples",
            "5",
            "--json",
            json.to_str().expect("a UTF-8 temp path"),
        ],
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("sync / async produce (alternating slices): ")),
        "no sync / async line in\n{stdout}"
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for target in ["tidelog", "async"] {
        let phase = results["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["phase"] == "produce-vs-async" && p["target"] == target)
            .unwrap_or_else(|| panic!("no produce-vs-async {target} phase in {results}"));
        assert!(
            phase["records_per_s"].as_f64().unwrap() > 0.0,
            "produce-vs-async {target}: {phase}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != "bench.yaml" && name != "sync.json")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn bench_refuses_hosts_other_than_localhost() {
    let out = run_tidelog(&["bench", "--url", "http://192.0.2.1:8080"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("127.0.0.1"), "{stderr}");
}
