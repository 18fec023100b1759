//! The `tidelog` command line, run as a real process.

mod common;

use common::{run_tidelog, workspace_root};

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
