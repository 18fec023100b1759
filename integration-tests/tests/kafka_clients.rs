//! Real Kafka clients against the real binary's Kafka listener (the
//! harness gives every server its own free Kafka port): Python scripts run
//! with the venv the harness installs (`tidelog_integration_tests::clients`).
//! Each script checks every record it produced and exits non-zero naming
//! the first mismatch.

mod common;

use common::TidelogProcess;
use tidelog_integration_tests::clients;

#[test]
fn kafka_python_produces_with_acks_1_and_all_and_consumes_with_assign_and_http_records_read_the_same(
) {
    let server = TidelogProcess::start(&[]);
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    let mut command = clients::python_command("kafka_python_produce_consume.py");
    command.arg(server.url()).arg(kafka.to_string());
    let stdout = clients::run_script(command);
    assert!(
        stdout.contains("kafka_python_produce_consume: every record came back"),
        "kafka_python_produce_consume.py exited 0 without its closing line:\n{stdout}"
    );
}

/// The group's first rebalance waits only briefly for more members.
const GROUP_CONFIG: &str = "groups:
  initial_rebalance_delay_ms: 100
";

#[test]
fn kafka_python_consumers_in_a_group_rebalance_commit_resume_and_share_offsets_with_http() {
    let server =
        TidelogProcess::start_with_config(&format!("{}{GROUP_CONFIG}", common::SMALL_STORE));
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    let mut command = clients::python_command("kafka_python_group.py");
    command.arg(server.url()).arg(kafka.to_string());
    let stdout = clients::run_script(command);
    assert!(
        stdout.contains("kafka_python_group: every record consumed once per group"),
        "kafka_python_group.py exited 0 without its closing line:\n{stdout}"
    );
}

const ADMIN_TOKEN: &str = "kafka-admin-token-0123456789";

#[test]
fn kafka_python_admin_client_logs_in_with_sasl_plain_and_creates_describes_alters_and_deletes() {
    let server = TidelogProcess::start_with_config(&format!(
        "{}admin_token: {ADMIN_TOKEN}\n",
        common::SMALL_STORE
    ));
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    let mut command = clients::python_command("kafka_python_admin.py");
    command
        .arg(server.url())
        .arg(kafka.to_string())
        .arg(ADMIN_TOKEN);
    let stdout = clients::run_script(command);
    assert!(
        stdout.contains("kafka_python_admin: every admin call checked"),
        "kafka_python_admin.py exited 0 without its closing line:\n{stdout}"
    );
}
