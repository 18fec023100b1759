//! Real Kafka clients (kafka-python, confluent-kafka, kafkajs) across what
//! happens to a server: a clean restart and a `kill -9` under `flush: sync`
//! in the middle of a produce stream with a group consumer committing, and
//! a compact topic read after its cleaning; and across the other protocol
//! where `kafka_clients.rs` does not go (HTTP json-format records read byte
//! for byte, committed offsets both ways through `committed()`).
//!
//! The restart tests run their script in the background and drive it
//! through files in a state directory (the script's docstring has the
//! handshake), so each restart lands while records are in flight. The
//! script checks what its clients saw; this test checks the log itself
//! over HTTP: every acknowledged record at its acknowledged offset.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{run_client_script, TidelogProcess};
use tidelog_integration_tests::clients;

/// Acknowledged means on disk (so `kill -9` loses nothing acknowledged),
/// and the group's rejoin after each restart waits only briefly.
const RESTART_CONFIG: &str = "  flush: sync
groups:
  initial_rebalance_delay_ms: 100
";

/// How many records past a milestone must be acknowledged before the
/// restart: proof the producer is sending when the server goes away.
const ACKED_PAST_MILESTONE: u64 = 20;

/// How long one wait on the script may take (its own waits are bounded too).
const WAIT: Duration = Duration::from_secs(90);

/// A client script running in the background, its output in files.
struct Background {
    child: Child,
    out: tempfile::NamedTempFile,
    err: tempfile::NamedTempFile,
}

impl Background {
    fn spawn(mut command: Command) -> Background {
        let out = tempfile::NamedTempFile::new().expect("stdout file");
        let err = tempfile::NamedTempFile::new().expect("stderr file");
        let child = command
            .stdin(Stdio::null())
            .stdout(out.reopen().expect("reopen stdout file"))
            .stderr(err.reopen().expect("reopen stderr file"))
            .spawn()
            .expect("spawn the client script");
        Background { child, out, err }
    }

    fn output(&self) -> String {
        let read = |file: &tempfile::NamedTempFile| {
            std::fs::read_to_string(file.path()).unwrap_or_default()
        };
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            read(&self.out),
            read(&self.err)
        )
    }

    /// Fails the test with the output if the script has exited.
    fn assert_running(&mut self, waiting_for: &str) {
        if let Some(status) = self.child.try_wait().expect("try_wait") {
            panic!(
                "the script exited ({status}) while the test waited for {waiting_for}\n{}",
                self.output()
            );
        }
    }

    /// Waits (bounded) for the script to exit 0 and returns its stdout.
    fn finish(mut self) -> String {
        let deadline = Instant::now() + clients::SCRIPT_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                assert!(
                    status.success(),
                    "the script failed ({status})\n{}",
                    self.output()
                );
                return std::fs::read_to_string(self.out.path()).expect("read stdout");
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the script did not finish in time\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until `condition` holds, the script still running.
fn wait_until(
    script: &mut Background,
    server: &TidelogProcess,
    what: &str,
    mut condition: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        script.assert_running(what);
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}\n--- server log ---\n{}",
            script.output(),
            server.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Every record of a partition over HTTP (json format), offset → value.
fn log_of(
    server: &TidelogProcess,
    topic: &str,
    partition: u64,
) -> BTreeMap<u64, serde_json::Value> {
    let mut log = BTreeMap::new();
    let mut from = 0;
    for _ in 0..1000 {
        let page = server
            .get(&format!(
                "/topics/{topic}/partitions/{partition}/records?offset={from}&timeout=0&max_records=1000"
            ))
            .expect(200);
        let page = page.as_array().expect("a fetch answers an array");
        let Some(last) = page.last() else {
            return log;
        };
        for record in page {
            let offset = record["offset"].as_u64().expect("offset");
            log.insert(offset, record["value"].clone());
        }
        from = last["offset"].as_u64().expect("offset") + 1;
    }
    panic!("{topic}/{partition}: more pages than a bounded test writes");
}

/// Runs `command` (a restart-stream script, the state directory its last
/// argument) against a `flush: sync` server: restarts it cleanly at the
/// first milestone and `kill -9`s it at the second, each while records are
/// in flight; then every acknowledged record must be in the log at its
/// acknowledged offset.
fn stream_through_restarts(
    server: &mut TidelogProcess,
    mut command: Command,
    state: &Path,
    topic: &str,
) {
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    command.arg(server.url()).arg(kafka.to_string()).arg(state);
    let mut script = Background::spawn(command);
    for (k, crash) in [(0, false), (1, true)] {
        let at = state.join(format!("at-{k}"));
        wait_until(&mut script, server, &format!("milestone {k}"), || {
            at.exists()
        });
        let milestone = read_number(&at).expect("at-k holds the milestone");
        std::fs::write(state.join(format!("go-{k}")), "").expect("write go-k");
        let acked = state.join("acked");
        wait_until(
            &mut script,
            server,
            &format!("{ACKED_PAST_MILESTONE} acknowledgements past {milestone}"),
            || read_number(&acked).is_some_and(|n| n >= milestone + ACKED_PAST_MILESTONE),
        );
        if crash {
            server.kill_9();
        } else {
            let status = server.terminate();
            assert!(
                status.success(),
                "a clean shutdown exits 0: {status}\n{}",
                server.log()
            );
        }
        server.start_again();
        assert_eq!(
            server.kafka_addr,
            Some(kafka),
            "the Kafka port stays the same"
        );
        std::fs::write(state.join(format!("restarted-{k}")), "").expect("write restarted-k");
    }
    let stdout = script.finish();
    eprintln!("{stdout}");
    assert!(
        stdout.contains("every acknowledged record reported"),
        "the script exited 0 without its closing line:\n{stdout}"
    );

    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("report.json")).expect("report.json"),
    )
    .expect("report.json is JSON");
    let acked = report["acked"].as_array().expect("acked is an array");
    assert!(!acked.is_empty(), "nothing acknowledged");
    let mut logs = BTreeMap::new();
    for entry in acked {
        let partition = entry[0].as_u64().expect("partition");
        let offset = entry[1].as_u64().expect("offset");
        let value = entry[2].as_str().expect("value");
        let log = logs
            .entry(partition)
            .or_insert_with(|| log_of(server, topic, partition));
        // The values are decimal numbers, so the json format reads them as
        // JSON numbers with the same text.
        assert_eq!(
            log.get(&offset).map(|v| v.to_string()).as_deref(),
            Some(value),
            "{topic}/{partition}@{offset}: acknowledged record {value} is not there"
        );
    }
    eprintln!(
        "{topic}: {} acknowledged records checked at their offsets over HTTP",
        acked.len()
    );
}

fn restart_server() -> TidelogProcess {
    TidelogProcess::start_with_config(&format!("{}{RESTART_CONFIG}", common::SMALL_STORE))
}

fn python_restart_stream(client: &str) {
    let mut server = restart_server();
    let state = tempfile::tempdir().expect("state dir");
    let mut command = clients::python_command("kafka_restart_stream.py");
    command.arg(client);
    stream_through_restarts(
        &mut server,
        command,
        state.path(),
        &format!("restarts-{client}"),
    );
}

#[test]
fn kafka_python_stream_survives_a_clean_restart_and_a_kill_9_without_losing_an_acknowledged_record()
{
    python_restart_stream("kafka-python");
}

#[test]
fn confluent_kafka_stream_survives_a_clean_restart_and_a_kill_9_without_losing_an_acknowledged_record(
) {
    python_restart_stream("confluent-kafka");
}

#[test]
fn kafkajs_stream_survives_a_clean_restart_and_a_kill_9_without_losing_an_acknowledged_record() {
    let mut server = restart_server();
    let state = tempfile::tempdir().expect("state dir");
    let command = clients::node_command("kafkajs_restart_stream.js");
    stream_through_restarts(&mut server, command, state.path(), "restarts-kafkajs");
}

/// One compact topic per client with small segments, a small dirty ratio
/// and a short `segment.ms` (the cleaner rolls the idle active segment), so
/// the LogCleaner cleans what the script produced by itself, soon.
fn compaction_server() -> TidelogProcess {
    let topics: String = ["kafka-python", "confluent-kafka", "kafkajs", "txn"]
        .iter()
        .map(|client| {
            format!(
                "  - name: compacted-{client}
    partitions: 1
    configs: {{ cleanup.policy: compact, segment.bytes: 1024, min.cleanable.dirty.ratio: 0.01, segment.ms: 300 }}
"
            )
        })
        .collect();
    TidelogProcess::start_with_config(&format!(
        "{}cleaner:
  backoff_ms: 100
topics:
{topics}",
        common::SMALL_STORE
    ))
}

/// Runs a compacted-read script against a fresh [`compaction_server`].
fn read_compacted(command: Command) {
    run_client_script(
        &compaction_server(),
        command,
        "kafka_compacted_read: the compacted log read back",
    );
}

/// A compact topic written by confluent-kafka's transactional producer:
/// read_committed never shows an aborted value, and the cleaner leaves
/// each key's newest committed value (docs/compaction.md, "Transactions").
#[test]
fn confluent_kafka_transactions_on_a_compact_topic_are_cleaned_to_the_committed_values() {
    run_client_script(
        &compaction_server(),
        clients::python_command("compact_transactions.py"),
        "compact_transactions: aborted values never read, cleaned to each key's newest committed value",
    );
}

#[test]
fn kafka_python_reads_a_compact_topic_after_cleaning_one_record_per_key_at_its_offset() {
    let mut command = clients::python_command("kafka_compacted_read.py");
    command.arg("kafka-python");
    read_compacted(command);
}

#[test]
fn confluent_kafka_reads_a_compact_topic_after_cleaning_one_record_per_key_at_its_offset() {
    let mut command = clients::python_command("kafka_compacted_read.py");
    command.arg("confluent-kafka");
    read_compacted(command);
}

#[test]
fn kafkajs_reads_a_compact_topic_after_cleaning_one_record_per_key_at_its_offset() {
    read_compacted(clients::node_command("kafkajs_compacted_read.js"));
}

/// Runs a cross-protocol script (`kafka_cross_protocol.py` or its kafkajs
/// twin) against a fresh server.
fn cross_protocol(command: Command) {
    run_client_script(
        &TidelogProcess::start(&[]),
        command,
        "kafka_cross_protocol: every crossing checked",
    );
}

#[test]
fn kafka_python_reads_http_json_records_byte_for_byte_and_shares_committed_offsets_with_the_ext_route(
) {
    let mut command = clients::python_command("kafka_cross_protocol.py");
    command.arg("kafka-python");
    cross_protocol(command);
}

#[test]
fn confluent_kafka_reads_http_json_records_byte_for_byte_and_shares_committed_offsets_with_the_ext_route(
) {
    let mut command = clients::python_command("kafka_cross_protocol.py");
    command.arg("confluent-kafka");
    cross_protocol(command);
}

#[test]
fn kafkajs_reads_http_json_records_byte_for_byte_and_shares_committed_offsets_with_the_ext_route() {
    cross_protocol(clients::node_command("kafkajs_cross_protocol.js"));
}

/// A transaction open when the server is killed (`kill -9`, `flush:
/// sync`): after the restart a new producer of the same transactional id
/// aborts it and commits its own; read_committed readers see the
/// committed transactions' records once each, the open one's never.
#[test]
fn confluent_kafka_transaction_open_across_a_kill_9_is_aborted_and_the_rest_exactly_once() {
    let mut server = restart_server();
    let mut before = clients::python_command("transaction_kill9.py");
    before.arg("before");
    run_client_script(
        &server,
        before,
        "transaction_kill9 before: A committed, B open",
    );
    server.kill_9();
    server.start_again();
    let mut after = clients::python_command("transaction_kill9.py");
    after.arg("after");
    run_client_script(
        &server,
        after,
        "transaction_kill9 after: A and C once each, B aborted",
    );
}
