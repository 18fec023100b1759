//! The `tidelog` command line, run as a real process: the server's
//! subcommands, and the client commands (docs/CLI.md) against a real
//! server, checked through the HTTP API.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    free_local_addr, http_get_status, run_tidelog, tidelog_bin, workspace_root, TidelogProcess,
    SMALL_STORE,
};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_lists_the_subcommands() {
    let out = run_tidelog(&["--help"]);
    assert!(out.status.success(), "{out:?}");
    let help = text(&out.stdout);
    assert!(help.contains("serve"), "{help}");
    assert!(help.contains("check-config"), "{help}");
}

#[test]
fn check_config_accepts_the_shipped_broker_yaml() {
    let out = run_tidelog(&["check-config", "configs/broker.yaml"]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let yaml = text(&out.stdout);
    for expected in [
        "- name: events",
        "- name: users",
        "cleanup.policy: compact",
        "listen: 127.0.0.1:8080",
    ] {
        assert!(yaml.contains(expected), "missing {expected:?} in\n{yaml}");
    }
}

#[test]
fn check_config_output_is_itself_a_valid_config() {
    let out = run_tidelog(&["check-config", "configs/broker.yaml"]);
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let again = dir.path().join("effective.yaml");
    std::fs::write(&again, &out.stdout).unwrap();
    let out2 = run_tidelog(&["check-config", again.to_str().unwrap()]);
    assert!(out2.status.success(), "stderr: {}", text(&out2.stderr));
    assert_eq!(out.stdout, out2.stdout, "effective config is a fixed point");
}

#[test]
fn check_config_rejects_a_bad_file_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "retention:\n  disk_full_ratio: 0.5\n",
            "retention.disk_full_ratio",
        ),
        ("store:\n  flsh: sync\n", "store.flsh"),
        (
            "topics:\n  - name: a\n  - name: b\n    configs: {cleanup.policy: purge}\n",
            "topics[1].configs.cleanup.policy",
        ),
        ("topics:\n  - name: ../x\n", "topics[0].name"),
    ];
    for (i, (yaml, key)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("bad{i}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        let out = run_tidelog(&["check-config", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{yaml}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&file.display().to_string()),
            "file not named: {stderr}"
        );
        assert!(
            stderr.contains(&format!(": {key}: ")),
            "key {key} not named: {stderr}"
        );
        assert!(out.stdout.is_empty(), "nothing printed on stdout on error");
    }
}

#[test]
fn check_config_of_a_missing_file_fails() {
    let out = run_tidelog(&["check-config", "does/not/exist.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("does/not/exist.yaml: cannot read"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn serve_with_a_bad_config_stops_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, "retention:\n  delete_when: \"25\"\n").unwrap();
    let out = run_tidelog(&[
        "serve",
        "--config",
        file.to_str().unwrap(),
        "--data-dir",
        dir.path().join("data").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("retention.delete_when"), "{stderr}");
    assert!(
        !dir.path().join("data").exists(),
        "nothing created on a config error"
    );
}

#[test]
fn serve_rejects_a_bad_listen_flag() {
    let out = run_tidelog(&["serve", "--listen", "not-an-address"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--listen"),
        "{}",
        text(&out.stderr)
    );
    // Sanity: the harness runs from the workspace root.
    assert!(workspace_root().join("configs/broker.yaml").is_file());
}

/// Does `tidelog serve --config file` come up? `Ok(())` once
/// `/status/ready` answers 200 (then it is stopped with SIGTERM), `Err`
/// with its stderr if it exits first.
fn serve_accepts(file: &std::path::Path, data_dir: &std::path::Path) -> Result<(), String> {
    let addr = free_local_addr();
    let log_path = data_dir.with_extension("log");
    let log = std::fs::File::create(&log_path).expect("server log file");
    let mut child = Command::new(tidelog_bin())
        .args(["serve", "--config"])
        .arg(file)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--listen")
        .arg(addr.to_string())
        .args(["--kafka-listen", "none"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn tidelog serve");
    let deadline = Instant::now() + Duration::from_secs(30);
    let outcome = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let stderr = std::fs::read_to_string(&log_path).unwrap_or_default();
            break Err(format!("exited with {status}: {stderr}"));
        }
        if http_get_status(addr, "/status/ready") == Some(200) {
            // SAFETY: plain syscall on a child we own and have not reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let status = child.wait().expect("wait");
            assert!(status.success(), "a clean stop: {status}");
            break Ok(());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve neither became ready nor exited within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&log_path);
    outcome
}

/// `check-config` and `serve` run the same validation: every file one
/// accepts the other starts with, every file one refuses the other refuses
/// before it starts (exit 2, naming the key).
#[test]
fn check_config_and_serve_accept_and_refuse_the_same_files() {
    const SMALL: &str =
        "  consume_queue_units_per_file: 1000\n  index_slots: 1000\n  index_entries: 4000\n";
    // (store section, or a whole file after the small store; key refused)
    let cases: &[(&str, Option<&str>)] = &[
        // Small segments with the default 1 MiB record limit: clamped.
        ("store:\n  commitlog_segment_bytes: 65536\n{SMALL}", None),
        (
            "store:\n  commitlog_segment_bytes: 65536\n  max_message_bytes: 65536\n{SMALL}",
            None,
        ),
        ("store:\n  commitlog_segment_bytes: 4096\n{SMALL}", None),
        (
            "store:\n  commitlog_segment_bytes: 65536\n  consume_queue_units_per_file: 1\n  index_slots: 1\n  index_entries: 2\n",
            None,
        ),
        // Bounds the store checks at open.
        (
            "store:\n  commitlog_segment_bytes: 65536\n  index_slots: 100000000\n",
            Some("store.index_slots"),
        ),
        (
            "store:\n  commitlog_segment_bytes: 65536\n  index_entries: 1\n",
            Some("store.index_entries"),
        ),
        (
            "store:\n  commitlog_segment_bytes: 65536\n  consume_queue_units_per_file: 100000000\n",
            Some("store.consume_queue_units_per_file"),
        ),
        // The cleaner's bounds: its offset map is allocated at start, so a
        // huge buffer must be refused before serve tries to take it.
        (
            "cleaner:\n  dedupe_buffer_bytes: 1000000000000\n",
            Some("cleaner.dedupe_buffer_bytes"),
        ),
        ("cleaner:\n  threads: 1000\n", Some("cleaner.threads")),
        // Every thread builds its offset map from its share of the buffer
        // at start: 1024 / 32 = 32 bytes hold one key, 1024 / 33 none
        // (check-config used to accept it, and serve then failed to start).
        (
            "store:\n  commitlog_segment_bytes: 65536\n{SMALL}cleaner:\n  threads: 32\n  dedupe_buffer_bytes: 1024\n",
            None,
        ),
        (
            "cleaner:\n  threads: 33\n  dedupe_buffer_bytes: 1024\n",
            Some("cleaner.dedupe_buffer_bytes"),
        ),
        (
            "store:\n  commitlog_segment_bytes: 4095\n",
            Some("store.commitlog_segment_bytes"),
        ),
        (
            "store:\n  commitlog_segment_bytes: 65536\n  sync_flush_timeout_ms: 0\n",
            Some("store.sync_flush_timeout_ms"),
        ),
        (
            "store:\n  commitlog_segment_bytes: 65536\n  dispatch_stall_ms: 0\n",
            Some("store.dispatch_stall_ms"),
        ),
        (
            "store:\n  commitlog_segment_bytes: 65536\nretention:\n  disk_force_clean_ratio: 0.95\n",
            Some("retention.disk_full_ratio"),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (i, (yaml, refused_key)) in cases.iter().enumerate() {
        let mut yaml = yaml.replace("{SMALL}", SMALL);
        if !yaml.contains("retention:") {
            // A server is ready only while it takes writes: the shared
            // disk's fill must not decide whether serve looks accepted.
            yaml.push_str(common::DISK_RATIOS_OFF);
        }
        let file = dir.path().join(format!("case{i}.yaml"));
        std::fs::write(&file, &yaml).unwrap();
        let checked = run_tidelog(&["check-config", file.to_str().unwrap()]);
        let data_dir = dir.path().join(format!("data{i}"));
        let served = serve_accepts(&file, &data_dir);
        match refused_key {
            None => {
                assert!(
                    checked.status.success(),
                    "check-config refused {yaml:?}: {}",
                    text(&checked.stderr)
                );
                served.unwrap_or_else(|e| panic!("serve refused {yaml:?}: {e}"));
            }
            Some(key) => {
                assert_eq!(checked.status.code(), Some(2), "check-config took {yaml:?}");
                let stderr = text(&checked.stderr);
                assert!(stderr.contains(&format!(": {key}: ")), "{stderr}");
                let why = served.expect_err(&format!("serve started with {yaml:?}"));
                assert!(why.contains("exit status: 2"), "{why}");
                assert!(why.contains(&format!(": {key}: ")), "{why}");
                assert!(!data_dir.exists(), "refused before creating anything");
            }
        }
    }
}

// ---- the client commands, against a real server ----

/// A test server's config: small files (a default server preallocates a
/// 1 GiB CommitLog segment), every disk ratio at 1.0 so how full this
/// machine's disk is never refuses a write, then `extra`.
fn small_config(extra: &str) -> String {
    format!(
        "{SMALL_STORE}retention:\n  disk_max_used_ratio: 1.0\n  disk_force_clean_ratio: 1.0\n  disk_full_ratio: 1.0\n{extra}"
    )
}

/// `tidelog <args>` against `url` (through `TIDELOG_URL`, so the flag's
/// environment default is what is tested), `stdin` fed whole.
fn client_at(url: &str, args: &[&str], stdin: &[u8]) -> std::process::Output {
    use std::io::Write as _;
    let mut child = Command::new(tidelog_bin())
        .args(args)
        .env("TIDELOG_URL", url)
        .env_remove("TIDELOG_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the tidelog client");
    let mut input = child.stdin.take().expect("stdin piped");
    let stdin = stdin.to_vec();
    // Written from a thread: a client that answers before reading all of
    // stdin must not dead-lock the test on a full pipe.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let out = wait_bounded(child, Duration::from_secs(120));
    let _ = writer.join();
    out
}

/// Waits for a client process, killing it (and failing) past `timeout`.
fn wait_bounded(mut child: std::process::Child, timeout: Duration) -> std::process::Output {
    let deadline = Instant::now() + timeout;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "the client did not finish within {timeout:?}; stderr: {}",
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect the output")
}

fn client(server: &TidelogProcess, args: &[&str]) -> std::process::Output {
    client_at(&server.url(), args, b"")
}

/// Runs the client and asserts it exited 0; returns stdout.
fn ok(server: &TidelogProcess, args: &[&str], stdin: &[u8]) -> String {
    let out = client_at(&server.url(), args, stdin);
    assert!(
        out.status.success(),
        "tidelog {args:?}: {:?}\nstderr: {}",
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn json_of(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout:?}"))
}

/// The first `count` records of a partition, through the HTTP API
/// (binary: key and value bytes as stored), read with long-polls: an
/// acknowledged record becomes fetchable once dispatched (and, on a
/// compact topic, copied to its compacted log), a moment after the answer.
fn fetch_n(
    server: &TidelogProcess,
    topic: &str,
    partition: u32,
    count: usize,
) -> Vec<(Option<String>, String)> {
    use base64::Engine as _;
    let decode = |v: &serde_json::Value| {
        v.as_str().map(|b| {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b).unwrap();
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    let mut offset = 0;
    while got.len() < count {
        assert!(
            Instant::now() < deadline,
            "only {} of {count} records in {topic}/{partition}: {got:?}",
            got.len()
        );
        let records = server
            .get_with(
                &format!("/topics/{topic}/partitions/{partition}/records?offset={offset}&max_records=10000&timeout=2000"),
                &[("Accept", "application/vnd.kafka.binary.v2+json")],
            )
            .expect(200);
        for r in records.as_array().unwrap() {
            offset = r["offset"].as_u64().unwrap() + 1;
            got.push((decode(&r["key"]), decode(&r["value"]).unwrap_or_default()));
        }
    }
    got
}

/// Every record of a partition: up to its end offset.
fn fetch_all(
    server: &TidelogProcess,
    topic: &str,
    partition: u32,
) -> Vec<(Option<String>, String)> {
    let offsets = server
        .get(&format!("/topics/{topic}/partitions/{partition}/offsets"))
        .expect(200);
    let end = offsets["end_offset"].as_u64().unwrap();
    let beginning = offsets["beginning_offset"].as_u64().unwrap();
    fetch_n(
        server,
        topic,
        partition,
        usize::try_from(end - beginning).unwrap(),
    )
}

fn create_topic(server: &TidelogProcess, name: &str, partitions: u32, configs: serde_json::Value) {
    server
        .send_json(
            "POST",
            "/v3/clusters/tidelog/topics",
            &serde_json::json!({"topic_name": name, "partitions_count": partitions, "configs": configs}),
        )
        .expect(201);
}

fn config_of(server: &TidelogProcess, topic: &str, name: &str) -> serde_json::Value {
    let configs = server
        .get(&format!("/v3/clusters/tidelog/topics/{topic}/configs"))
        .expect(200);
    configs["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no config {name} in {configs}"))
}

#[test]
fn topics_create_describe_alter_list_delete() {
    let server = TidelogProcess::start_with_config(&small_config(""));
    let out = ok(
        &server,
        &[
            "topics",
            "create",
            "orders",
            "-p",
            "3",
            "--config",
            "cleanup.policy=compact",
            "--config",
            "min.cleanable.dirty.ratio=0.1",
        ],
        b"",
    );
    assert!(
        out.contains("created topic orders with 3 partitions"),
        "{out}"
    );
    let info = server.get("/v3/clusters/tidelog/topics/orders").expect(200);
    assert_eq!(info["partitions_count"], 3);
    let policy = config_of(&server, "orders", "cleanup.policy");
    assert_eq!(
        (policy["value"].as_str(), policy["is_default"].as_bool()),
        (Some("compact"), Some(false))
    );
    assert_eq!(
        config_of(&server, "orders", "min.cleanable.dirty.ratio")["value"],
        "0.1"
    );

    server
        .post_raw(
            "/topics/orders/partitions/1",
            "application/vnd.kafka.json.v2+json",
            br#"{"records":[{"key":"a","value":1},{"key":"b","value":2}]}"#,
        )
        .expect(200);
    fetch_n(&server, "orders", 1, 2);
    let described = json_of(&ok(
        &server,
        &["topics", "describe", "orders", "--json"],
        b"",
    ));
    assert_eq!(described["policy"], "compact");
    assert_eq!(described["partitions"].as_array().unwrap().len(), 3);
    assert_eq!(described["partitions"][1]["beginning_offset"], 0);
    assert_eq!(described["partitions"][1]["end_offset"], 2);
    let retention = described["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "retention.ms")
        .unwrap();
    assert_eq!(retention["is_default"], true);
    let table = ok(&server, &["topics", "describe", "orders"], b"");
    assert!(table.contains("Policy: compact"), "{table}");
    let partition_1: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("1 "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(partition_1, ["1", "0", "2"], "{table}");
    let ratio_line = table
        .lines()
        .find(|l| l.starts_with("min.cleanable.dirty.ratio"))
        .unwrap();
    assert!(!ratio_line.contains("(default)"), "{table}");
    let segment_line = table.lines().find(|l| l.starts_with("segment.ms")).unwrap();
    assert!(segment_line.contains("(default)"), "{table}");

    ok(
        &server,
        &[
            "topics",
            "alter",
            "orders",
            "--set",
            "retention.ms=1000",
            "--delete",
            "min.cleanable.dirty.ratio",
        ],
        b"",
    );
    let retention = config_of(&server, "orders", "retention.ms");
    assert_eq!(
        (
            retention["value"].as_str(),
            retention["is_default"].as_bool()
        ),
        (Some("1000"), Some(false))
    );
    assert_eq!(
        config_of(&server, "orders", "min.cleanable.dirty.ratio")["is_default"],
        true
    );

    let listed = json_of(&ok(&server, &["topics", "list", "--json"], b""));
    let orders = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "orders")
        .unwrap();
    assert_eq!(
        (orders["partitions"].as_u64(), orders["internal"].as_bool()),
        (Some(3), Some(false))
    );
    assert!(ok(&server, &["topics", "list"], b"").contains("orders"));

    // Partitions grow, with a config change in the same call; they never
    // shrink (the server's 400, quoted, exit 1).
    let grown = ok(
        &server,
        &[
            "topics",
            "alter",
            "orders",
            "--partitions",
            "5",
            "--set",
            "retention.ms=2000",
        ],
        b"",
    );
    assert!(grown.contains("orders now has 5 partitions"), "{grown}");
    assert_eq!(
        config_of(&server, "orders", "retention.ms")["value"],
        "2000"
    );
    assert_eq!(
        server.get("/v3/clusters/tidelog/topics/orders").expect(200)["partitions_count"],
        5
    );
    let out = client(&server, &["topics", "alter", "orders", "-p", "4"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("can only grow"),
        "{}",
        text(&out.stderr)
    );

    ok(&server, &["topics", "delete", "orders"], b"");
    server
        .get("/v3/clusters/tidelog/topics/orders")
        .expect_error(404, 40401);
}

/// `broker-configs`: the broker's configs listed with their sources, a
/// cluster-wide topic default set and reaching a topic, a config the
/// server reads at start-up refused with exit 1 and nothing kept, and
/// every change kept across kill -9.
#[test]
fn broker_configs_are_listed_and_altered() {
    let mut server = TidelogProcess::start_with_config(&small_config(""));
    create_topic(&server, "follows", 1, serde_json::json!([]));
    let out = ok(
        &server,
        &[
            "broker-configs",
            "alter",
            "--cluster-default",
            "--set",
            "log.retention.ms=86400000",
        ],
        b"",
    );
    assert!(
        out.contains("altered 1 config(s) of the cluster-wide defaults"),
        "{out}"
    );
    ok(
        &server,
        &["broker-configs", "alter", "--set", "background.threads=4"],
        b"",
    );
    assert_eq!(
        config_of(&server, "follows", "retention.ms")["value"],
        "86400000"
    );
    let listed = ok(&server, &["broker-configs", "list"], b"");
    let line = |name: &str| {
        listed
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not listed:\n{listed}"))
            .to_owned()
    };
    assert!(
        line("background.threads").contains("DYNAMIC_BROKER_CONFIG"),
        "{listed}"
    );
    assert!(
        line("background.threads").contains("no effect here"),
        "{listed}"
    );
    assert!(
        line("log.retention.ms").contains("DYNAMIC_DEFAULT_BROKER_CONFIG"),
        "{listed}"
    );
    assert!(line("num.partitions").contains("read-only"), "{listed}");
    let json_out = ok(
        &server,
        &["broker-configs", "list", "--cluster-default", "--json"],
        b"",
    );
    let rows: serde_json::Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(rows[0]["name"], "log.retention.ms");
    assert_eq!(rows.as_array().unwrap().len(), 1);

    let out = client(
        &server,
        &[
            "broker-configs",
            "alter",
            "--set",
            "num.io.threads=2",
            "--set",
            "num.partitions=9",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("num.partitions"),
        "{}",
        text(&out.stderr)
    );
    let listed = ok(&server, &["broker-configs", "list", "--json"], b"");
    let rows: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let io = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "num.io.threads")
        .unwrap();
    assert_eq!(io["source"], "DEFAULT_CONFIG", "all or nothing");

    // Durable before the answer: kill -9 and a restart keep every change,
    // and the topic still follows the cluster-wide default.
    server.kill_9();
    server.restart();
    let listed = ok(&server, &["broker-configs", "list", "--json"], b"");
    let rows: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let value_of = |name: &str| {
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        (row["value"].clone(), row["source"].clone())
    };
    assert_eq!(
        value_of("background.threads"),
        (
            serde_json::json!("4"),
            serde_json::json!("DYNAMIC_BROKER_CONFIG")
        )
    );
    assert_eq!(
        value_of("log.retention.ms"),
        (
            serde_json::json!("86400000"),
            serde_json::json!("DYNAMIC_DEFAULT_BROKER_CONFIG")
        )
    );
    assert_eq!(
        config_of(&server, "follows", "retention.ms")["value"],
        "86400000"
    );
}

#[test]
fn produce_lines_with_keys_then_fetch_and_consume_them_back() {
    let server = TidelogProcess::start_with_config(&small_config(""));
    create_topic(&server, "lines", 1, serde_json::json!([]));
    create_topic(&server, "spread", 3, serde_json::json!([]));

    let input: String = (0..10).map(|i| format!("k{i}|v{i}\n")).collect();
    let out = client_at(
        &server.url(),
        &["produce", "lines", "-k", "|", "--batch-size", "4"],
        input.as_bytes(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary = text(&out.stderr);
    assert!(
        summary.contains("produced 10 records to lines in 3 requests"),
        "{summary}"
    );
    assert!(summary.contains("records/s"), "{summary}");
    let stored = fetch_n(&server, "lines", 0, 10);
    let expected: Vec<(Option<String>, String)> = (0..10)
        .map(|i| (Some(format!("k{i}")), format!("v{i}")))
        .collect();
    assert_eq!(stored, expected);

    // Many lines, keyed, over every partition; the empty line is skipped.
    let input: String = (0..500)
        .map(|i| format!("key-{}:value {i}\n", i % 7))
        .collect::<String>()
        + "\n";
    let summary = json_of(&ok(
        &server,
        &["produce", "spread", "-k", ":", "--json"],
        input.as_bytes(),
    ));
    assert_eq!(summary["records"], 500);
    // The partitions' end offsets move as records are dispatched.
    let mut all: Vec<(Option<String>, String)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while all.len() < 500 {
        assert!(
            Instant::now() < deadline,
            "{} of 500 records fetchable",
            all.len()
        );
        std::thread::sleep(Duration::from_millis(20));
        all = (0..3)
            .flat_map(|p| fetch_all(&server, "spread", p))
            .collect();
    }
    all.sort_by_key(|(_, v)| v[6..].parse::<u32>().unwrap());
    assert_eq!(all.len(), 500);
    for (i, (key, value)) in all.iter().enumerate() {
        assert_eq!(
            (key.as_deref(), value.as_str()),
            (
                Some(format!("key-{}", i % 7).as_str()),
                format!("value {i}").as_str()
            )
        );
    }

    // -o N, -c, -F: exactly these lines.
    let out = ok(
        &server,
        &[
            "consume",
            "lines",
            "-p",
            "0",
            "-o",
            "2",
            "-c",
            "3",
            "-F",
            "%t %p %o %k %s\\n",
        ],
        b"",
    );
    assert_eq!(out, "lines 0 2 k2 v2\nlines 0 3 k3 v3\nlines 0 4 k4 v4\n");
    // -o -N: the last N; the default format is the value per line.
    assert_eq!(
        ok(&server, &["consume", "lines", "-o", "-2"], b""),
        "v8\nv9\n"
    );
    assert_eq!(
        ok(&server, &["consume", "lines", "-o", "end", "-e"], b""),
        ""
    );
    assert_eq!(
        ok(&server, &["consume", "lines", "-F", "%K:%S,"], b""),
        "2:2,".repeat(10)
    );
    // Every partition read to its end.
    let values = ok(&server, &["consume", "spread", "-F", "%s\\n"], b"");
    assert_eq!(values.lines().count(), 500);

    // Timestamps, headers, --json.
    create_topic(&server, "timed", 1, serde_json::json!([]));
    server
        .post_raw(
            "/topics/timed",
            "application/vnd.kafka.binary.v2+json",
            br#"{"records":[{"value":"YQ==","timestamp":1000},
                {"key":"aw==","value":"Yg==","timestamp":2000,"headers":[{"name":"h","value":"eA=="},{"name":"n","value":null}]},
                {"value":"Yw==","timestamp":3000}]}"#,
        )
        .expect(200);
    fetch_n(&server, "timed", 0, 3);
    let out = ok(
        &server,
        &[
            "consume",
            "timed",
            "-o",
            "@1500",
            "-F",
            "%o %T %k %s [%h]\\n",
        ],
        b"",
    );
    assert_eq!(out, "1 2000 k b [h=x,n]\n2 3000  c []\n");
    let line = ok(
        &server,
        &["consume", "timed", "-o", "1", "-c", "1", "--json"],
        b"",
    );
    assert_eq!(
        json_of(line.trim_end()),
        serde_json::json!({"topic":"timed","partition":0,"offset":1,"timestamp":2000,"key":"k","value":"b",
                           "headers":[{"name":"h","value":"x"},{"name":"n","value":null}]})
    );

    // The json and binary input formats.
    ok(
        &server,
        &["produce", "lines", "--format", "json", "-k", "\t"],
        b"{\"id\":1}\t{\"n\": 1e2}\n",
    );
    let last = fetch_n(&server, "lines", 0, 11).pop().unwrap();
    assert_eq!(
        last,
        (Some("{\"id\":1}".to_string()), "{\"n\":1e2}".to_string())
    );
    ok(
        &server,
        &["produce", "lines", "--format", "binary"],
        b"AP8=\n",
    );
    fetch_n(&server, "lines", 0, 12);
    let line = ok(&server, &["consume", "lines", "-o", "-1", "--json"], b"");
    let record = json_of(line.trim_end());
    assert_eq!(
        (record["offset"].as_u64(), &record["key"]),
        (Some(11), &serde_json::Value::Null)
    );
    assert_eq!(record["value"], serde_json::json!({"base64": "AP8="}));

    // A bad line stops the run before its batch is sent.
    let out = client_at(
        &server.url(),
        &["produce", "lines", "--format", "json"],
        b"1\n{bad\n",
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("stdin line 2"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        fetch_all(&server, "lines", 0).len(),
        12,
        "nothing of the bad batch written"
    );
}

/// A server whose groups rebalance at once (the first join of an empty
/// group waits `initial_rebalance_delay_ms` otherwise).
fn server_for_groups() -> TidelogProcess {
    TidelogProcess::start_with_config(&small_config("groups:\n  initial_rebalance_delay_ms: 0\n"))
}

fn committed(server: &TidelogProcess, group: &str) -> (u64, u64) {
    let described = server.get(&format!("/consumer-groups/{group}")).expect(200);
    let offset = &described["offsets"][0];
    (
        offset["offset"].as_u64().unwrap(),
        offset["lag"].as_u64().unwrap(),
    )
}

#[test]
fn group_consume_commits_what_it_printed_and_reset_moves_it() {
    let server = server_for_groups();
    create_topic(&server, "jobs", 1, serde_json::json!([]));
    let input: String = (0..10).map(|i| format!("v{i}\n")).collect();
    ok(&server, &["produce", "jobs"], input.as_bytes());
    fetch_n(&server, "jobs", 0, 10);

    let out = ok(
        &server,
        &[
            "consume", "jobs", "-g", "workers", "-c", "4", "-F", "%o %s\\n",
        ],
        b"",
    );
    assert_eq!(out, "0 v0\n1 v1\n2 v2\n3 v3\n");
    assert_eq!(
        committed(&server, "workers"),
        (4, 6),
        "committed the 4 printed, lag 6"
    );
    let described = server.get("/consumer-groups/workers").expect(200);
    assert_eq!(
        described["members"],
        serde_json::json!([]),
        "the instance left the group"
    );

    let table = ok(&server, &["groups", "describe", "workers"], b"");
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("jobs"))
        .unwrap_or_else(|| panic!("{table}"))
        .split_whitespace()
        .collect();
    assert_eq!(row, ["jobs", "0", "4", "10", "6", "-"], "{table}");
    let described = json_of(&ok(
        &server,
        &["groups", "describe", "workers", "--json"],
        b"",
    ));
    assert_eq!(described["offsets"][0]["lag"], 6);
    let listed = json_of(&ok(&server, &["groups", "list", "--json"], b""));
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["group"] == "workers"),
        "{listed}"
    );

    // The rest, then the end: the group's committed offset is where it
    // resumes.
    let out = ok(&server, &["consume", "jobs", "-g", "workers"], b"");
    assert_eq!(out, "v4\nv5\nv6\nv7\nv8\nv9\n");
    assert_eq!(committed(&server, "workers"), (10, 0));

    ok(
        &server,
        &["groups", "reset-offsets", "workers", "--to-earliest"],
        b"",
    );
    assert_eq!(committed(&server, "workers"), (0, 10));
    let reset = json_of(&ok(
        &server,
        &[
            "groups",
            "reset-offsets",
            "workers",
            "--topic",
            "jobs",
            "--partition",
            "0",
            "--to-offset",
            "7",
            "--json",
        ],
        b"",
    ));
    assert_eq!(reset["offsets"][0]["offset"], 7);
    assert_eq!(committed(&server, "workers"), (7, 3));
    ok(
        &server,
        &["groups", "reset-offsets", "workers", "--to-latest"],
        b"",
    );
    assert_eq!(committed(&server, "workers"), (10, 0));
    ok(
        &server,
        &[
            "groups",
            "reset-offsets",
            "workers",
            "--to-datetime",
            "1970-01-01T00:00:00Z",
        ],
        b"",
    );
    assert_eq!(committed(&server, "workers"), (0, 10));
    let out = ok(
        &server,
        &["consume", "jobs", "-g", "workers", "-c", "1"],
        b"",
    );
    assert_eq!(out, "v0\n");
}

#[test]
fn compact_wait_leaves_one_record_per_key() {
    let server = TidelogProcess::start_with_config(&small_config(""));
    create_topic(
        &server,
        "users",
        1,
        serde_json::json!([{"name": "cleanup.policy", "value": "compact"}]),
    );
    let input: String = (0..30).map(|i| format!("user-{}=v{i}\n", i % 5)).collect();
    ok(&server, &["produce", "users", "-k", "="], input.as_bytes());
    // A pass cleans what has reached the compacted log.
    fetch_n(&server, "users", 0, 30);
    let out = ok(
        &server,
        &["compact", "users", "--wait", "--roll-active"],
        b"",
    );
    let row: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("0 "))
        .unwrap_or_else(|| panic!("{out}"))
        .split_whitespace()
        .collect();
    assert_eq!(&row[..5], ["0", "true", "idle", "5", "25"], "{out}");
    let kept = fetch_all(&server, "users", 0);
    let expected: Vec<(Option<String>, String)> = (25..30)
        .map(|i| (Some(format!("user-{}", i % 5)), format!("v{i}")))
        .collect();
    assert_eq!(kept, expected);
    assert_eq!(
        ok(&server, &["consume", "users", "-F", "%k=%s\\n"], b""),
        "user-0=v25\nuser-1=v26\nuser-2=v27\nuser-3=v28\nuser-4=v29\n"
    );
    let answer = json_of(&ok(&server, &["compact", "users", "--json"], b""));
    assert!(
        answer["task_id"].as_str().unwrap().starts_with("users:"),
        "{answer}"
    );
    let stats = json_of(&ok(&server, &["stats", "--json"], b""));
    assert!(stats["topics"].as_u64().unwrap() >= 2, "{stats}");
    assert!(ok(&server, &["stats"], b"").contains("commitlog_segments"));
    // A single node: the one master of epoch 0, at its listen address.
    let cluster = json_of(&ok(&server, &["cluster", "status", "--json"], b""));
    let http = server.url().trim_start_matches("http://").to_string();
    assert_eq!(
        (
            &cluster["epoch"],
            &cluster["master"],
            &cluster["nodes"][0]["http"]
        ),
        (
            &serde_json::json!(0),
            &serde_json::json!(0),
            &serde_json::json!(http)
        ),
        "{cluster}"
    );
    let text = ok(&server, &["cluster", "status"], b"");
    let row: Vec<&str> = text.lines().nth(2).unwrap().split_whitespace().collect();
    assert_eq!(row[..4], ["0*", "master", "true", "0"], "{text}");
}

#[test]
fn exit_codes_tell_failures_apart() {
    let server = TidelogProcess::start_with_config(&small_config("admin_token: s3cret\n"));

    let out = client(&server, &["topics", "describe", "nope"]);
    assert_eq!(
        out.status.code(),
        Some(5),
        "not found: {}",
        text(&out.stderr)
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error_code 40401") && stderr.contains("topic \"nope\" does not exist"),
        "{stderr}"
    );
    assert_eq!(client(&server, &["consume", "nope"]).status.code(), Some(5));

    for usage in [
        &["consume", "t", "-o", "soon"][..],
        &["consume", "t", "-F", "%x"],
        &["groups", "reset-offsets", "g"],
        &["topics", "create"],
        &["topics", "alter", "t"],
        &["nonsense"],
    ] {
        let out = client(&server, usage);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{usage:?}: {}",
            text(&out.stderr)
        );
        assert!(!text(&out.stderr).is_empty(), "{usage:?} says why");
    }

    let nobody = format!("http://{}", free_local_addr());
    let out = client_at(&nobody, &["topics", "list"], b"");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("cannot connect to http://127.0.0.1:"),
        "{}",
        text(&out.stderr)
    );

    // A mutating call without the admin token: the server's 401, quoted.
    let out = client(&server, &["topics", "create", "secret", "-p", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("401") && stderr.contains("error_code 40101"),
        "{stderr}"
    );
    let said = server
        .send_json(
            "POST",
            "/v3/clusters/tidelog/topics",
            &serde_json::json!({"topic_name": "secret"}),
        )
        .expect_error(401, 40101);
    assert!(
        stderr.contains(&said),
        "the server's message {said:?} in {stderr}"
    );
    server
        .get("/v3/clusters/tidelog/topics/secret")
        .expect_error(404, 40401);

    // With the token (flag, then environment) it goes through.
    ok(
        &server,
        &["topics", "create", "secret", "-p", "1", "--token", "s3cret"],
        b"",
    );
    server.get("/v3/clusters/tidelog/topics/secret").expect(200);
    let deleted = Command::new(tidelog_bin())
        .args(["topics", "delete", "secret"])
        .env("TIDELOG_URL", server.url())
        .env("TIDELOG_TOKEN", "s3cret")
        .output()
        .expect("spawn");
    assert!(deleted.status.success(), "{}", text(&deleted.stderr));
    server
        .get("/v3/clusters/tidelog/topics/secret")
        .expect_error(404, 40401);
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = run_tidelog(&["--version"]);
    assert!(out.status.success());
    let version = text(&out.stdout);
    assert!(
        version.starts_with(&format!("tidelog {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(workspace_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| text(&o.stdout).trim().to_string());
    match head {
        Some(commit) => assert!(
            version.contains(&format!("(commit {commit}")),
            "{version} vs {commit}"
        ),
        None => assert!(version.contains("(commit unknown)"), "{version}"),
    }
}

#[test]
fn log_format_json_writes_json_lines_and_text_has_no_colours_off_a_terminal() {
    let check_json = |server: &TidelogProcess| {
        let log = server.log();
        let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!lines.is_empty(), "the server logged something");
        for line in lines {
            let entry: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"));
            assert!(
                entry["level"].is_string() && entry["fields"]["message"].is_string(),
                "{line}"
            );
            assert!(entry["timestamp"].is_string(), "{line}");
        }
    };
    let from_file = TidelogProcess::start_with_config(&small_config("log_format: json\n"));
    check_json(&from_file);
    assert!(
        from_file.log().contains("effective config"),
        "{}",
        from_file.log()
    );
    // The flag with a config file: small_config's.
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.yaml");
    std::fs::write(&small, small_config("")).unwrap();
    let small = small.to_str().unwrap();
    let from_flag = TidelogProcess::start(&["--config", small, "--log-format", "json"]);
    check_json(&from_flag);

    // stderr is a file here: text without escape sequences.
    let text_log = TidelogProcess::start(&["--config", small]);
    let log = text_log.log();
    assert!(log.contains(" INFO "), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a log file: {log:?}"
    );
}

#[test]
fn group_consume_following_leaves_the_group_on_ctrl_c() {
    use std::io::BufRead as _;
    let server = server_for_groups();
    create_topic(&server, "feed", 1, serde_json::json!([]));
    ok(&server, &["produce", "feed"], b"a\nb\n");
    fetch_n(&server, "feed", 0, 2);
    let mut child = Command::new(tidelog_bin())
        .args(["consume", "feed", "-g", "tail", "-f"])
        .env("TIDELOG_URL", server.url())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the consumer");
    let stdout = child.stdout.take().expect("stdout piped");
    let (lines, printed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    for expected in ["a", "b"] {
        let line = printed
            .recv_timeout(Duration::from_secs(60))
            .expect("the consumer printed a record within 60 s")
            .expect("stdout is text");
        assert_eq!(line, expected);
    }
    let members = server.get("/consumer-groups/tail").expect(200)["members"].clone();
    assert_eq!(members.as_array().map(Vec::len), Some(1), "{members}");

    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: plain syscall on a child we own and have not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = wait_bounded(child, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        text(&out.stderr)
    );
    let group = server.get("/consumer-groups/tail").expect(200);
    assert_eq!(
        group["members"],
        serde_json::json!([]),
        "the instance was deleted: {group}"
    );
    assert_eq!(
        committed(&server, "tail"),
        (2, 0),
        "what it printed is committed"
    );
}
