//! Real client libraries against the real binary: Python scripts run with
//! the venv the harness installs (`tidelog_integration_tests::clients`),
//! and a Node smoke test of the npm install. Each script checks every
//! record it produced and exits non-zero naming the first mismatch.

mod common;

use common::TidelogProcess;
use tidelog_integration_tests::clients;

/// Runs `script` against a fresh server; it passes when it exits 0 having
/// printed `closing_line` (its last, after every check).
fn python_script_passes(script: &str, closing_line: &str) {
    let server = TidelogProcess::start(&[]);
    let mut command = clients::python_command(script);
    command.arg(server.url());
    let stdout = clients::run_script(command);
    assert!(
        stdout.contains(closing_line),
        "{script} exited 0 without its closing line:\n{stdout}"
    );
}

#[test]
fn requests_produce_then_fetch_returns_every_record_in_order() {
    python_script_passes(
        "rest_produce_fetch.py",
        "rest_produce_fetch: all records came back",
    );
}

#[test]
fn kafka_bridge_client_producer_writes_what_the_fetch_reads() {
    python_script_passes(
        "bridge_producer.py",
        "bridge_producer: all messages came back",
    );
}

/// Consumer groups settle in tests without the 3 s production delay
/// (`groups.initial_rebalance_delay_ms`); the rebalance itself is the same.
const GROUPS_CONFIG: &str = "groups:\n  initial_rebalance_delay_ms: 300\n";

#[test]
fn kafka_bridge_client_consumer_reads_commits_and_resumes_in_confluent_mode() {
    let server = TidelogProcess::start_with_config(GROUPS_CONFIG);
    let mut command = clients::python_command("bridge_consumer.py");
    command.arg(server.url());
    let stdout = clients::run_script(command);
    assert!(
        stdout.contains("bridge_consumer: every message once, across a client restart"),
        "bridge_consumer.py exited 0 without its closing line:\n{stdout}"
    );
}

/// Two instances split a topic and hand over; then tidelog stops and starts
/// on the same data dir between the script's two phases, and the group
/// resumes at its committed offsets.
#[test]
fn requests_consumer_group_splits_hands_over_and_resumes_after_a_restart() {
    let mut server = TidelogProcess::start_with_config(GROUPS_CONFIG);
    let phase = |server: &TidelogProcess, phase: &str, closing_line: &str| {
        let mut command = clients::python_command("rest_consumer_group.py");
        command.arg(server.url()).arg(phase);
        let stdout = clients::run_script(command);
        assert!(
            stdout.contains(closing_line),
            "rest_consumer_group.py {phase} exited 0 without its closing line:\n{stdout}"
        );
    };
    phase(&server, "split", "split: done");
    assert!(server.terminate().success(), "{}", server.log());
    server.start_again();
    phase(
        &server,
        "resume",
        "rest_consumer_group: every record once, resumed across restarts",
    );
}

#[test]
fn kafkajs_installs_at_its_pinned_version() {
    let stdout = clients::run_script(clients::node_command("kafkajs_version.js"));
    assert_eq!(stdout.trim(), "kafkajs 2.2.4");
}
