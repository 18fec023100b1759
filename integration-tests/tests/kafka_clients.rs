//! Real Kafka clients against the real binary's Kafka listener (the
//! harness gives every server its own free Kafka port): Python scripts run
//! with the venv the harness installs, Node scripts with its node_modules
//! (`tidelog_integration_tests::clients`).
//! Each script checks every record it produced and exits non-zero naming
//! the first mismatch.

mod common;

use std::process::Command;

use common::{run_client_script, TidelogProcess};
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

#[test]
fn kafka_python_produces_with_acks_1_and_all_and_consumes_with_assign_and_http_records_read_the_same(
) {
    run_client_script(
        &TidelogProcess::start(&[]),
        clients::python_command("kafka_python_produce_consume.py"),
        "kafka_python_produce_consume: every record came back",
    );
}

#[test]
fn kafka_python_consumers_in_a_group_rebalance_commit_resume_and_share_offsets_with_http() {
    run_client_script(
        &group_server(),
        clients::python_command("kafka_python_group.py"),
        "kafka_python_group: every record consumed once per group",
    );
}

#[test]
fn confluent_kafka_produces_every_codec_with_acks_1_and_all_consumes_with_assign_seeks_by_time_and_crosses_to_http(
) {
    run_client_script(
        &TidelogProcess::start(&[]),
        clients::python_command("confluent_kafka_produce_consume.py"),
        "confluent_kafka_produce_consume: every record came back",
    );
}

#[test]
fn confluent_kafka_consumers_in_a_group_rebalance_commit_resume_and_share_offsets_with_http() {
    run_client_script(
        &group_server(),
        clients::python_command("confluent_kafka_group.py"),
        "confluent_kafka_group: every record consumed once per group",
    );
}

/// DeleteGroups (API 42) from librdkafka's AdminClient, as its test 0081
/// calls it: a group without members is deleted with its offsets, a live
/// one refused NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.
#[test]
fn confluent_kafka_deletes_groups_without_members_and_refuses_live_and_unknown_ones() {
    run_client_script(
        &group_server(),
        clients::python_command("delete_groups.py"),
        "delete_groups confluent-kafka: deleted, refused while live, unknown refused",
    );
}

/// CreatePartitions as librdkafka's tests 0044, 0069 and 0081 use it:
/// validate-only, growth, Kafka's refusals, and a subscribed consumer that
/// reads a record from a new partition after its group rebalances.
#[test]
fn confluent_kafka_adds_partitions_that_a_subscribed_consumer_then_reads() {
    run_client_script(
        &group_server(),
        clients::python_command("create_partitions.py"),
        "create_partitions confluent-kafka: grown, refused as Kafka refuses, consumed from the new one",
    );
}

/// Kafka's topic configs as librdkafka's tests 0011, 0052, 0077, 0081 and
/// 0092 use them: every one accepted and described, LogAppendTime
/// stamping, KIP-937's timestamp bound, KIP-467's per-record errors and
/// min.insync.replicas on one node.
#[test]
fn confluent_kafka_creates_topics_with_kafkas_configs_and_sees_their_effects() {
    run_client_script(
        &TidelogProcess::start_with_config(common::SMALL_STORE),
        clients::python_command("topic_configs.py"),
        "topic_configs confluent-kafka: Kafka's configs accepted, the applied ones applied",
    );
}

/// Broker and group configs altered at run time (librdkafka's 0081,
/// kafka-configs.sh): the broker's topic defaults reach topics, a
/// group's session timeout is kept, what Kafka reads at start-up or does
/// not know is refused with its code.
#[test]
fn confluent_kafka_alters_and_describes_broker_and_group_configs() {
    run_client_script(
        &TidelogProcess::start_with_config(common::SMALL_STORE),
        clients::python_command("dynamic_configs.py"),
        "dynamic_configs confluent-kafka: broker and group configs altered and described",
    );
}

/// Group ids as Kafka takes them (librdkafka's 0132 names one
/// `roundrobin,range`): the whole group protocol, commits, listings and
/// HTTP's percent-encoded routes.
#[test]
fn confluent_kafka_groups_take_any_non_empty_id() {
    run_client_script(
        &group_server(),
        clients::python_command("group_ids.py"),
        "group_ids confluent-kafka: any non-empty group id is a group",
    );
}

/// KIP-848's consumer group protocol with librdkafka's
/// `group.protocol=consumer`: a second member takes its share without
/// the first stopping, every record read once, the admin client's
/// describe and list by type, a classic group beside it. Members
/// heartbeat every 500 ms here (Kafka's default is 5 s), so the handover
/// takes a second, not ten.
#[test]
fn confluent_kafka_consumer_protocol_groups_hand_partitions_over_incrementally() {
    let config = format!(
        "{}groups:\n  initial_rebalance_delay_ms: 100\n  consumer_heartbeat_interval_ms: 500\n",
        common::SMALL_STORE
    );
    run_client_script(
        &TidelogProcess::start_with_config(&config),
        clients::python_command("consumer_group_protocol.py"),
        "consumer_group_protocol confluent-kafka: KIP-848 group handed over incrementally, every record once",
    );
}

/// Fetch's byte limit as librdkafka's 0082 checks it: two partitions of
/// 900 KiB records under `fetch.max.bytes` 1,000,000; an answer past
/// `receive.message.max.bytes` would fail the consumer.
#[test]
fn confluent_kafka_fetches_never_exceed_the_byte_limit_past_the_first_partition() {
    run_client_script(
        &TidelogProcess::start_with_config(
            "store:
  commitlog_segment_bytes: 8388608
  consume_queue_units_per_file: 1000
  index_slots: 1000
  index_entries: 4000
  max_message_bytes: 1048576
",
        ),
        clients::python_command("fetch_max_bytes.py"),
        "fetch_max_bytes confluent-kafka: every record, no answer over the limit",
    );
}

/// CreateTopics with a manual replica assignment, as librdkafka's test
/// 0081 makes one on a single broker: `[0]` per partition is this broker
/// and is accepted; another broker id or two replicas are
/// INVALID_REPLICA_ASSIGNMENT.
#[test]
fn confluent_kafka_creates_a_topic_assigned_to_this_broker_and_refuses_others() {
    run_client_script(
        &TidelogProcess::start(&[]),
        clients::python_command("replica_assignment.py"),
        "replica_assignment confluent-kafka: broker 0 accepted, others refused",
    );
}

/// KIP-430's authorized operations, asked for by librdkafka's
/// AdminClient (its test 0081): with no authorizer, every operation of the
/// cluster, a topic and a group.
#[test]
fn confluent_kafka_describes_the_authorized_operations_of_cluster_topic_and_group() {
    run_client_script(
        &TidelogProcess::start(&[]),
        clients::python_command("authorized_operations.py"),
        "authorized_operations confluent-kafka: every operation without an authorizer",
    );
}

#[test]
fn kafkajs_produces_none_and_gzip_with_acks_1_and_all_consumes_seeks_by_time_and_crosses_to_http() {
    run_client_script(
        &TidelogProcess::start(&[]),
        clients::node_command("kafkajs_produce_consume.js"),
        "kafkajs_produce_consume: every record came back",
    );
}

#[test]
fn kafkajs_consumers_in_a_group_rebalance_commit_resume_and_share_offsets_with_http() {
    run_client_script(
        &group_server(),
        clients::node_command("kafkajs_group.js"),
        "kafkajs_group: every record consumed once per group",
    );
}

/// A client that resets its connection with an answer on its way (what a
/// consumer closing during a fetch long-poll does) is an ordinary hang-up,
/// not bad input: it was logged at warn once per closing client.
#[test]
fn a_client_resetting_its_connection_is_not_a_warning() {
    use std::io::Write;
    use std::os::fd::AsRawFd;

    // The listener's debug lines show when it has dealt with the reset.
    std::env::set_var("RUST_LOG", "info,tidelog_kafka::listener=debug");
    let server = TidelogProcess::start(&[]);
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    let mut stream = std::net::TcpStream::connect(kafka).expect("connect to the Kafka listener");
    // ApiVersions v0: length, api key 18, version 0, correlation id 1,
    // null client id.
    let request = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xFF, 0xFF];
    stream.write_all(&request).expect("send ApiVersions");
    // SO_LINGER 0: close sends a reset, as a client process that exits does.
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a `linger` of the size passed.
    let set = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::addr_of!(linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0, "setsockopt SO_LINGER");
    drop(stream);

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !server.log().contains("kafka client hung up")
        && !server.log().contains("kafka connection closed")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the listener never logged the reset connection:\n{}",
            server.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let log = server.log();
    assert!(
        !log.lines()
            .any(|line| line.contains("WARN") && line.contains("tidelog_kafka")),
        "a client's reset was logged as a warning:\n{log}"
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

/// DeleteRecords from a real admin client: `script` with `client_args`
/// runs its `delete` phase (the client deletes the records below 4; a
/// consumer from the beginning, ListOffsets earliest and HTTP's offsets and
/// fetch all start at 4), then tidelog is killed with SIGKILL and started
/// again, and the `after-restart` phase checks the same views before it
/// deletes the rest (-1).
fn delete_records_across_a_crash(
    command: impl Fn() -> Command,
    client_args: &[&str],
    closing: &str,
) {
    let mut server = TidelogProcess::start_with_config(common::SMALL_STORE);
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    for (i, phase) in ["delete", "after-restart"].into_iter().enumerate() {
        if i > 0 {
            server.restart();
        }
        let mut script = command();
        script
            .arg(server.url())
            .arg(kafka.to_string())
            .args(client_args)
            .arg(phase);
        let stdout = clients::run_script(script);
        let closing = format!("{closing} {phase}: every view agrees");
        assert!(
            stdout.contains(&closing),
            "the script exited 0 without {closing:?}:\n{stdout}"
        );
    }
}

#[test]
fn kafka_python_delete_records_moves_the_beginning_every_reader_sees_across_a_crash() {
    delete_records_across_a_crash(
        || clients::python_command("delete_records.py"),
        &["kafka-python"],
        "delete_records kafka-python",
    );
}

#[test]
fn confluent_kafka_delete_records_moves_the_beginning_every_reader_sees_across_a_crash() {
    delete_records_across_a_crash(
        || clients::python_command("delete_records.py"),
        &["confluent-kafka"],
        "delete_records confluent-kafka",
    );
}

#[test]
fn kafkajs_delete_topic_records_moves_the_beginning_every_reader_sees_across_a_crash() {
    delete_records_across_a_crash(
        || clients::node_command("kafkajs_delete_records.js"),
        &[],
        "kafkajs_delete_records",
    );
}

/// An idempotent producer of `client` (`idempotent_restart.py`) keeps
/// producing while the server, under `flush: sync`, is killed with SIGKILL
/// and started again: every acknowledged record is in the partition once.
fn idempotent_producer_across_a_kill_9(client: &str) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    let mut server = TidelogProcess::start_with_config(&format!(
        "{}\n  flush: sync\n",
        common::SMALL_STORE.trim_end()
    ));
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    let mut child = clients::python_command("idempotent_restart.py")
        .arg(client)
        .arg(server.url())
        .arg(kafka.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start idempotent_restart.py");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    // The script's own deadlines bound it; this bounds a hung one (and
    // kills only the script, only while it has not been waited for).
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let done = std::sync::Arc::clone(&done);
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + clients::SCRIPT_TIMEOUT;
            while std::time::Instant::now() < deadline {
                if done.load(std::sync::atomic::Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            // SAFETY: kill(2) of our own child, not reaped yet (the test
            // waits for it only after `done` is set).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        })
    };
    let mut lines = Vec::new();
    for line in stdout.lines() {
        let line = line.expect("script stdout");
        if line == "RESTART" {
            server.kill_9();
            server.start_again();
            writeln!(stdin, "RESTARTED").expect("tell the script");
        }
        lines.push(line);
    }
    // stdout hit EOF: the script is exiting. Stop the watchdog before the
    // wait reaps it, so its pid is never signalled after reuse.
    done.store(true, std::sync::atomic::Ordering::Release);
    watchdog.join().expect("watchdog");
    let output = child.wait_with_output().expect("script exit");
    let stdout = lines.join("\n");
    assert!(
        output.status.success(),
        "idempotent_restart.py {client} failed ({}):\n{stdout}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("every acknowledged record exactly once"),
        "the script exited 0 without its closing line:\n{stdout}"
    );
}

#[test]
fn kafka_python_default_idempotent_producer_across_a_kill_9_writes_every_record_once() {
    idempotent_producer_across_a_kill_9("kafka-python");
}

#[test]
fn confluent_kafka_idempotent_producer_across_a_kill_9_writes_every_record_once() {
    idempotent_producer_across_a_kill_9("confluent-kafka");
}

/// Transactions from librdkafka's transactional producer (issue 38):
/// commit, abort and commit again across two partitions; read_committed
/// consumers (and HTTP's read_committed fetch) see exactly the committed
/// records; a second producer of the same transactional id fences the
/// first; a transaction past its timeout is aborted by the broker.
#[test]
fn confluent_kafka_transactions_commit_abort_fence_and_time_out() {
    run_client_script(
        &group_server(),
        clients::python_command("transactions.py"),
        "transactions confluent-kafka: committed seen once, aborted never, zombie fenced, timeout aborted",
    );
}

/// Exactly-once consume-transform-produce from confluent-kafka
/// (`send_offsets_to_transaction`: AddOffsetsToTxn, TxnOffsetCommit):
/// one transaction aborted midway and its input read again; every input
/// record appears once in the read_committed output, and the group's
/// offsets are committed with the transactions.
#[test]
fn confluent_kafka_consume_transform_produce_is_exactly_once() {
    run_client_script(
        &group_server(),
        clients::python_command("consume_transform_produce.py"),
        "consume_transform_produce confluent-kafka: every input once in the output, offsets committed with it",
    );
}

/// kafka-python's transactional producer and read_committed consumer.
#[test]
fn kafka_python_transactions_commit_and_abort_for_read_committed_consumers() {
    run_client_script(
        &group_server(),
        clients::python_command("kafka_python_transactions.py"),
        "kafka_python_transactions: committed seen once, aborted never",
    );
}

/// kafkajs' transactions, with `sendOffsets`, and its consumer
/// (read_committed by default).
#[test]
fn kafkajs_transactions_commit_abort_and_send_offsets() {
    run_client_script(
        &group_server(),
        clients::node_command("kafkajs_transactions.js"),
        "kafkajs_transactions: committed seen once, aborted never, offsets committed with the transaction",
    );
}
