//! TLS on the real binary's listeners, with certificates made by the test
//! (`tidelog_integration_tests::certs`) and real clients: curl against
//! the HTTPS listener (with and without a client certificate), and
//! confluent-kafka, kafka-python and kafkajs against an SSL Kafka
//! listener beside a PLAINTEXT one. Also what must not hurt a listener:
//! plaintext on the TLS port, TLS on the plaintext port, garbage, a
//! stalled handshake; and a certificate rotation (SIGHUP, and the file
//! watcher) seen by new handshakes while an open connection keeps
//! working. No timing is asserted: every wait is a bounded poll.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{curl_status, free_local_addr, TidelogProcess};
use tidelog_integration_tests::certs::TestPki;
use tidelog_integration_tests::{clients, kafka_wire};

/// A bound on every read a test makes of a connection the server should
/// close (the server's handshake timeout is 2 s in these configs).
const CLOSE_WAIT: Duration = Duration::from_secs(60);

fn arg(path: &std::path::Path) -> String {
    path.display().to_string()
}

/// `curl <args> https://addr/path`: (exit success, stdout).
fn curl(addr: SocketAddr, args: &[String], path: &str) -> (bool, String) {
    let output = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "30"])
        .args(args)
        .arg(format!("https://{addr}{path}"))
        .stdin(Stdio::null())
        .output()
        .expect("run curl");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// Sends `bytes` (maybe none) on a new connection to `addr` and reads
/// until the server closes it (bounded by [`CLOSE_WAIT`]); returns what
/// came back. Panics if the server kept the connection open.
fn send_and_read_to_close(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(CLOSE_WAIT))
        .expect("read timeout");
    stream.write_all(bytes).expect("send");
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server did not close the connection: {e} (read {got:?})"),
    }
    got
}

/// ApiVersions v0 as a bare frame (what a plaintext Kafka client sends first).
const API_VERSIONS_V0: [u8; 14] = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xFF, 0xFF];

/// The plain listener still answers Kafka requests.
fn assert_kafka_answers(addr: SocketAddr) {
    let answer = kafka_wire::call(addr, "probe", 18, 0, &[], Duration::from_secs(30));
    assert_eq!(answer[..2], [0, 0], "ApiVersions error code");
}

/// (host, port) of the first broker a Metadata v1 answer of `addr` names.
fn metadata_broker(addr: SocketAddr) -> (String, i32) {
    // v1: a null topic array asks for all topics.
    let answer = kafka_wire::call(
        addr,
        "probe",
        3,
        1,
        &(-1i32).to_be_bytes(),
        Duration::from_secs(30),
    );
    let brokers = i32::from_be_bytes(answer[0..4].try_into().expect("4 bytes"));
    assert!(brokers >= 1, "no broker in {answer:?}");
    let host_len = i16::from_be_bytes(answer[8..10].try_into().expect("2 bytes")) as usize;
    let host = String::from_utf8(answer[10..10 + host_len].to_vec()).expect("a UTF-8 host");
    let port = i32::from_be_bytes(
        answer[10 + host_len..14 + host_len]
            .try_into()
            .expect("4 bytes"),
    );
    (host, port)
}

fn create_topic(server: &TidelogProcess, topic: &str) {
    server
        .send_json(
            "POST",
            "/v3/clusters/tidelog/topics",
            &serde_json::json!({"topic_name": topic, "partitions_count": 1}),
        )
        .expect(201);
}

/// A server with a PLAINTEXT and an SSL Kafka listener (plain HTTP), and
/// their addresses.
fn kafka_tls_server(
    pki: &TestPki,
    client_auth: Option<&str>,
) -> (TidelogProcess, SocketAddr, SocketAddr) {
    let plain = free_local_addr();
    let secure = common::free_local_addr_besides(plain);
    let yaml = format!(
        "{}{}{}kafka:\n  listeners:\n    - {{name: PLAIN, listen: \"{plain}\", security_protocol: PLAINTEXT}}\n    - {{name: SECURE, listen: \"{secure}\", security_protocol: SSL}}\n",
        common::SMALL_STORE,
        common::DISK_RATIOS_OFF,
        pki.tls_section(client_auth)
    );
    (
        TidelogProcess::start_with_own_listeners(&yaml, None),
        plain,
        secure,
    )
}

#[test]
fn https_serves_curl_with_the_ca_and_refuses_plain_http_cleanly() {
    let pki = TestPki::new();
    let yaml = format!(
        "{}{}kafka:\n  listen: null\nhttp:\n  tls: true\n{}",
        common::SMALL_STORE,
        common::DISK_RATIOS_OFF,
        pki.tls_section(None)
    );
    let ca = vec!["--cacert".to_string(), arg(&pki.path("ca.crt"))];
    let server = TidelogProcess::start_with_own_listeners(&yaml, Some(ca.clone()));
    let (ok, topics) = curl(server.addr, &ca, "/v3/clusters/tidelog/topics");
    assert!(ok, "curl over HTTPS failed:\n{}", server.log());
    assert!(topics.contains("\"data\""), "{topics}");

    // Plain HTTP to the HTTPS port: no HTTP answer, the connection closed.
    let got = send_and_read_to_close(
        server.addr,
        b"GET /status/ready HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert!(
        !got.starts_with(b"HTTP/"),
        "plain HTTP was answered: {got:?}"
    );
    // Without the CA curl refuses the server; with it, it is still served.
    assert!(!curl(server.addr, &[], "/status/ready").0);
    assert_eq!(curl_status(server.addr, &ca, "/status/ready"), Some(200));
    let (_, metrics) = curl(server.addr, &ca, "/metrics");
    let failed = common::metric_in(&metrics, "tidelog_tls_handshakes_failed_total");
    assert!(
        failed >= 1.0,
        "the plain HTTP attempt was not counted:\n{metrics}"
    );
}

#[test]
fn https_with_required_client_certificates_refuses_curl_without_one() {
    let pki = TestPki::new();
    let (cert, key) = pki.client("alice");
    let yaml = format!(
        "{}{}kafka:\n  listen: null\nhttp:\n  tls: true\n{}",
        common::SMALL_STORE,
        common::DISK_RATIOS_OFF,
        pki.tls_section(Some("required"))
    );
    let ca = vec!["--cacert".to_string(), arg(&pki.path("ca.crt"))];
    let with_cert: Vec<String> = ca
        .iter()
        .cloned()
        .chain(["--cert".into(), arg(&cert), "--key".into(), arg(&key)])
        .collect();
    let server = TidelogProcess::start_with_own_listeners(&yaml, Some(with_cert.clone()));
    assert_eq!(
        curl_status(server.addr, &ca, "/status/ready"),
        None,
        "served without a certificate"
    );
    assert_eq!(
        curl_status(server.addr, &with_cert, "/status/ready"),
        Some(200)
    );
    // A certificate of another CA is refused too.
    let stranger = TestPki::new();
    let (other_cert, other_key) = stranger.client("mallory");
    let wrong: Vec<String> = ca
        .iter()
        .cloned()
        .chain([
            "--cert".into(),
            arg(&other_cert),
            "--key".into(),
            arg(&other_key),
        ])
        .collect();
    assert_eq!(curl_status(server.addr, &wrong, "/status/ready"), None);
    assert_eq!(
        curl_status(server.addr, &with_cert, "/status/ready"),
        Some(200)
    );
}

#[test]
fn kafka_ssl_serves_confluent_kafka_kafka_python_and_kafkajs_and_each_listener_advertises_itself() {
    let pki = TestPki::new();
    let (server, plain, secure) = kafka_tls_server(&pki, None);
    let ca = arg(&pki.path("ca.crt"));
    for topic in ["tls-confluent", "tls-kafka-python", "tls-kafkajs"] {
        create_topic(&server, topic);
    }

    let mut confluent = clients::python_command("ssl_clients.py");
    confluent.args(["confluent-kafka", &secure.to_string(), "tls-confluent", &ca]);
    let out = clients::run_script(confluent);
    assert!(out.contains("ssl_clients: confluent-kafka done"), "{out}");
    // Metadata over the SSL listener names the SSL listener...
    assert!(out.contains(&format!("broker {secure}")), "{out}");
    // ...and over the PLAINTEXT one, the PLAINTEXT one.
    assert_eq!(
        metadata_broker(plain),
        (plain.ip().to_string(), i32::from(plain.port()))
    );

    let mut kafka_python = clients::python_command("ssl_clients.py");
    kafka_python.args(["kafka-python", &secure.to_string(), "tls-kafka-python", &ca]);
    let out = clients::run_script(kafka_python);
    assert!(out.contains("ssl_clients: kafka-python done"), "{out}");

    let mut kafkajs = clients::node_command("kafkajs_ssl.js");
    kafkajs.args([&secure.to_string(), "tls-kafkajs", &ca]);
    let out = clients::run_script(kafkajs);
    assert!(out.contains("kafkajs_ssl: every record came back"), "{out}");
}

#[test]
fn kafka_ssl_with_required_client_certificates_serves_confluent_kafka_with_one_only() {
    let pki = TestPki::new();
    let (cert, key) = pki.client("alice");
    let (server, _plain, secure) = kafka_tls_server(&pki, Some("required"));
    let ca = arg(&pki.path("ca.crt"));
    create_topic(&server, "tls-mtls");

    let mut refused = clients::python_command("ssl_clients.py");
    refused.args([
        "confluent-kafka",
        &secure.to_string(),
        "tls-mtls",
        &ca,
        "--expect-refused",
    ]);
    let out = clients::run_script(refused);
    assert!(out.contains("confluent-kafka refused"), "{out}");

    let mut with_cert = clients::python_command("ssl_clients.py");
    with_cert.args([
        "confluent-kafka",
        &secure.to_string(),
        "tls-mtls",
        &ca,
        &arg(&cert),
        &arg(&key),
    ]);
    let out = clients::run_script(with_cert);
    assert!(out.contains("ssl_clients: confluent-kafka done"), "{out}");

    let mut kafka_python = clients::python_command("ssl_clients.py");
    create_topic(&server, "tls-mtls-kp");
    kafka_python.args([
        "kafka-python",
        &secure.to_string(),
        "tls-mtls-kp",
        &ca,
        &arg(&cert),
        &arg(&key),
    ]);
    let out = clients::run_script(kafka_python);
    assert!(out.contains("ssl_clients: kafka-python done"), "{out}");
}

#[test]
fn wrong_protocols_garbage_and_stalled_handshakes_are_closed_and_the_listeners_keep_serving() {
    let pki = TestPki::new();
    let (server, plain, secure) = kafka_tls_server(&pki, None);
    let ca = arg(&pki.path("ca.crt"));

    // A plaintext Kafka client on the SSL listener: no Kafka answer.
    let got = send_and_read_to_close(secure, &API_VERSIONS_V0);
    assert!(
        got.is_empty() || got[0] == 0x15,
        "a plaintext request was answered: {got:?}"
    );
    // Garbage, and a TLS record header that never gets its body.
    send_and_read_to_close(secure, &[0xAB; 64]);
    send_and_read_to_close(secure, &[0x16, 0x03, 0x01, 0x02, 0x00]);
    // A client that connects and says nothing: closed by the handshake timeout.
    send_and_read_to_close(secure, &[]);
    // A TLS client on the PLAINTEXT listener: refused (its ClientHello is
    // a frame length far past kafka.max_request_bytes).
    let tls_on_plain = curl(plain, &["--cacert".to_string(), ca.clone()], "/");
    assert!(
        !tls_on_plain.0,
        "a TLS handshake succeeded on the PLAINTEXT listener"
    );

    // Both listeners still serve.
    assert_kafka_answers(plain);
    create_topic(&server, "tls-after-abuse");
    let mut confluent = clients::python_command("ssl_clients.py");
    confluent.args([
        "confluent-kafka",
        &secure.to_string(),
        "tls-after-abuse",
        &ca,
    ]);
    let out = clients::run_script(confluent);
    assert!(out.contains("ssl_clients: confluent-kafka done"), "{out}");
    let metrics = server.get("/metrics").text();
    assert!(
        common::metric_in(&metrics, "tidelog_tls_handshakes_failed_total") >= 2.0,
        "{metrics}"
    );
    assert!(
        common::metric_in(&metrics, "tidelog_tls_handshakes_timed_out_total") >= 1.0,
        "{metrics}"
    );
}

/// A rotation by the script (rename the new files over the old ones),
/// then SIGHUP (`sighup`) or nothing (the file watcher).
fn rotation_is_seen_by_new_handshakes_only(sighup: bool) {
    let pki = TestPki::new();
    let (server, _plain, secure) = kafka_tls_server(&pki, None);
    pki.next_server("rotated server");
    let mut reload = clients::python_command("tls_reload.py");
    let pid = if sighup {
        server.pid().to_string()
    } else {
        "0".into()
    };
    reload
        .arg(secure.to_string())
        .arg(pki.path("ca.crt"))
        .arg(pki.dir())
        .arg("rotated server")
        .arg(pid);
    let out = clients::run_script(reload);
    assert!(
        out.contains("tls_reload: new handshakes present rotated server"),
        "{out}"
    );
    // The reload the test asked for is logged (with SIGHUP the watcher
    // may reload too; the signal's own reload still happens).
    let why = if sighup { "SIGHUP" } else { "files changed" };
    let deadline = std::time::Instant::now() + CLOSE_WAIT;
    while !server
        .log()
        .lines()
        .any(|line| line.contains("TLS certificate reloaded") && line.contains(why))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no reload for {why} logged:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_certificate_rotation_with_sighup_reaches_new_handshakes_and_keeps_open_connections() {
    rotation_is_seen_by_new_handshakes_only(true);
}

#[test]
fn a_certificate_rotation_is_noticed_by_the_file_watcher_without_a_signal() {
    rotation_is_seen_by_new_handshakes_only(false);
}
