//! Null header values end to end against the real binary, with
//! confluent-kafka (the venv the harness installs): Kafka produce → HTTP
//! fetch shows `"value": null`; HTTP produce (binary and json) → the Kafka
//! consumer sees `None`; duplicate names in order; and a compact topic
//! keeps the null through a compaction (`clients/python/null_headers.py`).

mod common;

use common::TidelogProcess;
use tidelog_integration_tests::clients;

#[test]
fn null_header_values_cross_kafka_http_and_compaction() {
    let server = TidelogProcess::start(&[]);
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    let mut command = clients::python_command("null_headers.py");
    command.arg(server.url()).arg(kafka.to_string());
    let stdout = clients::run_script(command);
    assert!(
        stdout.contains("null_headers: null header values kept across Kafka, HTTP and compaction"),
        "null_headers.py exited 0 without its closing line:\n{stdout}"
    );
}
