//! Real Kafka clients against the real binary's Kafka listener (the
//! harness gives every server its own free Kafka port): Python scripts run
//! with the venv the harness installs, Node scripts with its node_modules
//! (`tidelog_integration_tests::clients`).
//! Each script checks every record it produced and exits non-zero naming
//! the first mismatch.

mod common;

use std::process::Command;

use common::TidelogProcess;
use tidelog_integration_tests::clients;

/// The group's first rebalance waits only briefly for more members.
const GROUP_CONFIG: &str = "groups:
  initial_rebalance_delay_ms: 100
";

/// A server for the group scripts: a small store, a short initial
/// rebalance delay.
fn group_server() -> TidelogProcess {
    TidelogProcess::start_with_config(&format!("{}{GROUP_CONFIG}", common::SMALL_STORE))
}

/// Runs a client script against `server`'s HTTP and Kafka addresses; it
/// must exit 0 and print its `closing` line (proof it ran to the end).
fn run_against(server: &TidelogProcess, mut command: Command, closing: &str) {
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    command.arg(server.url()).arg(kafka.to_string());
    let stdout = clients::run_script(command);
    assert!(
        stdout.contains(closing),
        "the script exited 0 without its closing line {closing:?}:\n{stdout}"
    );
}

#[test]
fn kafka_python_produces_with_acks_1_and_all_and_consumes_with_assign_and_http_records_read_the_same(
) {
    run_against(
        &TidelogProcess::start(&[]),
        clients::python_command("kafka_python_produce_consume.py"),
        "kafka_python_produce_consume: every record came back",
    );
}

#[test]
fn kafka_python_consumers_in_a_group_rebalance_commit_resume_and_share_offsets_with_http() {
    run_against(
        &group_server(),
        clients::python_command("kafka_python_group.py"),
        "kafka_python_group: every record consumed once per group",
    );
}

#[test]
fn confluent_kafka_produces_every_codec_with_acks_1_and_all_consumes_with_assign_seeks_by_time_and_crosses_to_http(
) {
    run_against(
        &TidelogProcess::start(&[]),
        clients::python_command("confluent_kafka_produce_consume.py"),
        "confluent_kafka_produce_consume: every record came back",
    );
}

#[test]
fn confluent_kafka_consumers_in_a_group_rebalance_commit_resume_and_share_offsets_with_http() {
    run_against(
        &group_server(),
        clients::python_command("confluent_kafka_group.py"),
        "confluent_kafka_group: every record consumed once per group",
    );
}

#[test]
fn kafkajs_produces_none_and_gzip_with_acks_1_and_all_consumes_seeks_by_time_and_crosses_to_http() {
    run_against(
        &TidelogProcess::start(&[]),
        clients::node_command("kafkajs_produce_consume.js"),
        "kafkajs_produce_consume: every record came back",
    );
}

#[test]
fn kafkajs_consumers_in_a_group_rebalance_commit_resume_and_share_offsets_with_http() {
    run_against(
        &group_server(),
        clients::node_command("kafkajs_group.js"),
        "kafkajs_group: every record consumed once per group",
    );
}
