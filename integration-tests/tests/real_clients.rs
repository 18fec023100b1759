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

#[test]
fn kafkajs_installs_at_its_pinned_version() {
    let stdout = clients::run_script(clients::node_command("kafkajs_version.js"));
    assert_eq!(stdout.trim(), "kafkajs 2.2.4");
}
