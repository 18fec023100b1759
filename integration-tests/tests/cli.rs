//! The `tidelog` command line, run as a real process.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_local_addr, http_get_status, run_tidelog, tidelog_bin, workspace_root};

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
        // at start: 1024 / 25 = 40 bytes hold one key, 1024 / 26 none
        // (check-config used to accept it, and serve then failed to start).
        (
            "store:\n  commitlog_segment_bytes: 65536\n{SMALL}cleaner:\n  threads: 25\n  dedupe_buffer_bytes: 1024\n",
            None,
        ),
        (
            "cleaner:\n  threads: 26\n  dedupe_buffer_bytes: 1024\n",
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
        let yaml = yaml.replace("{SMALL}", SMALL);
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
