//! Logins over TLS on the real binary (docs/SECURITY.md), with
//! certificates made by the test (`tidelog_integration_tests::certs`) and
//! real clients: confluent-kafka (SCRAM-SHA-512), kafka-python and kafkajs
//! (SCRAM-SHA-256) on a SASL_SSL listener; confluent-kafka with a client
//! certificate on an SSL listener, its CN the principal the ACLs decide
//! for; raw clients that skip or stall the login on a SASL listener; and
//! curl over HTTPS with a password or with a client certificate. No
//! timing is asserted: every wait is a bounded poll or read.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use base64::Engine;
use common::{curl_https as curl, free_local_addr, free_local_addr_besides, TidelogProcess};
use tidelog_integration_tests::certs::TestPki;
use tidelog_integration_tests::{clients, kafka_wire};

const ADMIN_PASSWORD: &str = "admin-secret";
/// A bound on every read of a connection the server should close (the
/// login deadline is 1 s in these configs).
const CLOSE_WAIT: Duration = Duration::from_secs(60);

fn arg(path: &std::path::Path) -> String {
    path.display().to_string()
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

/// The `security:` section: logins and ACLs required, `admin` the super
/// user (its password file in `dir`).
fn security_section(dir: &std::path::Path) -> String {
    let password_file = dir.join("admin.password");
    std::fs::write(&password_file, format!("{ADMIN_PASSWORD}\n")).expect("write the test file");
    format!(
        "security:\n  authentication: true\n  authorization: true\n  super_users: [admin]\n  users:\n    - name: admin\n      password_file: {}\n",
        password_file.display()
    )
}

/// The Kafka listeners of [`kafka_server`].
struct Listeners {
    sasl_ssl: SocketAddr,
    ssl: SocketAddr,
    sasl_plaintext: SocketAddr,
}

/// A server requiring logins and checking ACLs, with a SASL_SSL, an SSL
/// (client certificates optional: its CN is the principal) and a
/// SASL_PLAINTEXT Kafka listener, a 1 s login deadline, and plain HTTP
/// for the test's own setup.
fn kafka_server(pki: &TestPki, dir: &std::path::Path) -> (TidelogProcess, Listeners) {
    let sasl_ssl = free_local_addr();
    let ssl = free_local_addr_besides(sasl_ssl);
    let sasl_plaintext = loop {
        let addr = free_local_addr_besides(ssl);
        if addr != sasl_ssl {
            break addr;
        }
    };
    let yaml = format!(
        "{}{}{}{}kafka:\n  authentication_timeout_ms: 1000\n  listeners:\n    - {{name: SASL_TLS, listen: \"{sasl_ssl}\", security_protocol: SASL_SSL}}\n    - {{name: MTLS, listen: \"{ssl}\", security_protocol: SSL}}\n    - {{name: SASL_PLAIN, listen: \"{sasl_plaintext}\", security_protocol: SASL_PLAINTEXT}}\n",
        common::SMALL_STORE,
        common::DISK_RATIOS_OFF,
        pki.tls_section(Some("optional")),
        security_section(dir),
    );
    (
        TidelogProcess::start_with_own_listeners(&yaml, None),
        Listeners {
            sasl_ssl,
            ssl,
            sasl_plaintext,
        },
    )
}

/// `admin` (over plain HTTP) creates `user` with `algorithm`.
fn create_user(server: &TidelogProcess, user: &str, password: &str, algorithm: &str) {
    let body = serde_json::json!({"username": user, "password": password, "algorithm": algorithm});
    let created = server.request(
        "POST",
        "/v1/security/users",
        &[
            ("Authorization", &basic("admin", ADMIN_PASSWORD)),
            ("Content-Type", "application/json"),
        ],
        Some(body.to_string().as_bytes()),
    );
    assert_eq!(created.status, 201, "{}", created.text());
}

/// `admin` (over plain HTTP) grants `principal` ALL on the topics and
/// READ on the groups whose names start with `sec-`.
fn grant_sec_prefix(server: &TidelogProcess, principal: &str) {
    for (resource_type, operation) in [("TOPIC", "ALL"), ("GROUP", "READ")] {
        let acl = serde_json::json!({
            "resource_type": resource_type, "resource_name": "sec-", "pattern_type": "PREFIXED",
            "principal": principal, "host": "*", "operation": operation, "permission": "ALLOW",
        });
        let created = server.request(
            "POST",
            "/v3/clusters/tidelog/acls",
            &[
                ("Authorization", &basic("admin", ADMIN_PASSWORD)),
                ("Content-Type", "application/json"),
            ],
            Some(acl.to_string().as_bytes()),
        );
        assert_eq!(created.status, 201, "{}", created.text());
    }
}

/// Runs `sasl_ssl_clients.py <args>`; it must end with its closing line.
fn python_client(args: &[&str]) {
    let mut script = clients::python_command("sasl_ssl_clients.py");
    script.args(args);
    let out = clients::run_script(script);
    let closing = format!("sasl_ssl_clients: {} done", args[0]);
    assert!(out.contains(&closing), "no {closing:?} in:\n{out}");
}

#[test]
fn sasl_ssl_and_client_certificates_serve_real_clients_under_acls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = TestPki::new();
    let (server, listeners) = kafka_server(&pki, dir.path());
    let ca = arg(&pki.path("ca.crt"));
    let sasl_ssl = listeners.sasl_ssl.to_string();
    create_user(&server, "alice", "alice-pw", "SCRAM-SHA-512");
    create_user(&server, "bob", "bob-pw", "SCRAM-SHA-256");
    for principal in ["User:alice", "User:bob", "User:carol"] {
        grant_sec_prefix(&server, principal);
    }

    python_client(&[
        "confluent-scram",
        &sasl_ssl,
        &ca,
        "sec-confluent",
        "alice",
        "alice-pw",
    ]);
    python_client(&[
        "kafka-python-scram",
        &sasl_ssl,
        &ca,
        "sec-kafka-python",
        "bob",
        "bob-pw",
    ]);
    let mut kafkajs = clients::node_command("kafkajs_sasl_ssl.js");
    kafkajs.args([&sasl_ssl, &ca, "sec-kafkajs", "bob", "bob-pw"]);
    let out = clients::run_script(kafkajs);
    assert!(out.contains("kafkajs_sasl_ssl: done"), "{out}");

    // mTLS: carol's CN has the ACLs, mallory's none.
    let ssl = listeners.ssl.to_string();
    let (carol_cert, carol_key) = pki.client("carol");
    let (mallory_cert, mallory_key) = pki.client("mallory");
    python_client(&[
        "confluent-cert",
        &ssl,
        &ca,
        "sec-mtls",
        &arg(&carol_cert),
        &arg(&carol_key),
    ]);
    python_client(&[
        "confluent-cert",
        &ssl,
        &ca,
        "sec-mtls",
        &arg(&mallory_cert),
        &arg(&mallory_key),
        "--denied",
    ]);

    let log = server.log();
    for secret in [ADMIN_PASSWORD, "alice-pw", "bob-pw"] {
        assert!(!log.contains(secret), "a password reached the log:\n{log}");
    }
}

/// Reads `stream` until the server closes it (bounded by [`CLOSE_WAIT`]);
/// panics if it stays open.
fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(CLOSE_WAIT))
        .expect("read timeout");
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server did not close the connection: {e} (read {got:?})"),
    }
    got
}

#[test]
fn a_sasl_listener_closes_clients_that_skip_or_stall_the_login_and_keeps_serving() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = TestPki::new();
    let (server, listeners) = kafka_server(&pki, dir.path());
    let addr = listeners.sasl_plaintext;

    // Metadata v1 (all topics) before a login: no answer, the connection
    // closed.
    let mut frame = Vec::new();
    frame.extend_from_slice(&3i16.to_be_bytes());
    frame.extend_from_slice(&1i16.to_be_bytes());
    frame.extend_from_slice(&7i32.to_be_bytes());
    kafka_wire::put_str(&mut frame, Some("skipper"));
    frame.extend_from_slice(&(-1i32).to_be_bytes());
    let mut skipper = TcpStream::connect(addr).expect("connect");
    skipper
        .write_all(&(frame.len() as i32).to_be_bytes())
        .expect("send the length");
    skipper.write_all(&frame).expect("send the frame");
    assert!(read_to_close(&mut skipper).is_empty(), "Metadata answered");

    // Silent after connecting: closed by the login deadline.
    let mut silent = TcpStream::connect(addr).expect("connect");
    assert!(read_to_close(&mut silent).is_empty());

    // Both counted; the listener still answers ApiVersions before a login.
    let deadline = std::time::Instant::now() + CLOSE_WAIT;
    let closed = r#"tidelog_kafka_connections_closed_total{reason="authentication"}"#;
    while common::metric_in(&server.get("/metrics").text(), closed) < 2.0 {
        assert!(std::time::Instant::now() < deadline, "closes not counted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let answer = kafka_wire::call(addr, "probe", 18, 0, &[], Duration::from_secs(30));
    assert_eq!(answer[..2], [0, 0], "ApiVersions error code");
}

#[test]
fn https_takes_a_password_or_a_client_certificate_as_the_principal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = TestPki::new();
    let ca = vec!["--cacert".to_string(), arg(&pki.path("ca.crt"))];
    let yaml = format!(
        "{}{}kafka:\n  listen: null\nhttp:\n  tls: true\n{}{}",
        common::SMALL_STORE,
        common::DISK_RATIOS_OFF,
        pki.tls_section(Some("optional")),
        security_section(dir.path()),
    );
    let server = TidelogProcess::start_with_own_listeners(&yaml, Some(ca.clone()));
    let with = |extra: &[&str]| -> Vec<String> {
        ca.iter()
            .cloned()
            .chain(extra.iter().map(|s| (*s).to_owned()))
            .collect()
    };
    let admin = with(&["-u", &format!("admin:{ADMIN_PASSWORD}")]);
    let topics = "/v3/clusters/tidelog/topics";

    // A password over TLS; none is 401.
    let (status, body) = curl(server.addr, &admin, "GET", topics, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(curl(server.addr, &ca, "GET", topics, None).0, 401);
    assert_eq!(
        curl(
            server.addr,
            &with(&["-u", "admin:wrong"]),
            "GET",
            topics,
            None
        )
        .0,
        401
    );
    let (status, body) = curl(
        server.addr,
        &admin,
        "POST",
        topics,
        Some(r#"{"topic_name":"t","partitions_count":1}"#),
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = curl(
        server.addr,
        &admin,
        "POST",
        "/v3/clusters/tidelog/acls",
        Some(
            r#"{"resource_type":"TOPIC","resource_name":"t","pattern_type":"LITERAL","principal":"User:carol","host":"*","operation":"WRITE","permission":"ALLOW"}"#,
        ),
    );
    assert_eq!(status, 201, "{body}");

    // A client certificate and no password: its CN is the principal, a
    // login for security.authentication; the ACL on it decides.
    let (carol_cert, carol_key) = pki.client("carol");
    let (mallory_cert, mallory_key) = pki.client("mallory");
    let carol = with(&["--cert", &arg(&carol_cert), "--key", &arg(&carol_key)]);
    let mallory = with(&["--cert", &arg(&mallory_cert), "--key", &arg(&mallory_key)]);
    let produce = |who: &[String]| {
        let mut args = who.to_vec();
        args.extend([
            "-H".into(),
            "Content-Type: application/vnd.kafka.json.v2+json".into(),
        ]);
        args.extend([
            "--data-binary".into(),
            r#"{"records":[{"value":{"n":1}}]}"#.into(),
        ]);
        curl(server.addr, &args, "POST", "/topics/t", None)
    };
    let (status, body) = produce(&carol);
    assert_eq!(status, 200, "{body}");
    let (status, body) = produce(&mallory);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("40301"), "{body}");
    // carol may write t, and so describe it: the topic list shows it.
    let (status, body) = curl(server.addr, &carol, "GET", topics, None);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"t\""), "{body}");
    // A password beside a certificate wins: a wrong one is 401.
    let carol_wrong = [carol.clone(), vec!["-u".into(), "carol:nope".into()]].concat();
    assert_eq!(curl(server.addr, &carol_wrong, "GET", topics, None).0, 401);

    // The CLI over https: the CA, a user and password file; or carol's
    // certificate, which sees what her ACLs let her.
    let url = format!("https://{}", server.addr);
    let ca_file = arg(&pki.path("ca.crt"));
    let password_file = arg(&dir.path().join("admin.password"));
    let cli = |extra: &[&str]| {
        let mut args = vec![
            "topics",
            "list",
            "--json",
            "--url",
            &url,
            "--ca-file",
            &ca_file,
        ];
        args.extend(extra);
        common::run_tidelog(&args)
    };
    let listed = cli(&["--user", "admin", "--password-file", &password_file]);
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(
        stdout.contains("__consumer_offsets") && stdout.contains("\"t\""),
        "{stdout}"
    );
    let (carol_cert, carol_key) = (arg(&carol_cert), arg(&carol_key));
    let listed = cli(&["--cert-file", &carol_cert, "--key-file", &carol_key]);
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(
        stdout.contains("\"t\"") && !stdout.contains("__consumer_offsets"),
        "{stdout}"
    );
    let refused = cli(&[]);
    assert_eq!(
        refused.status.code(),
        Some(1),
        "401 is the server's refusal"
    );
    let no_ca = common::run_tidelog(&["topics", "list", "--url", &url]);
    assert_eq!(
        no_ca.status.code(),
        Some(2),
        "https without --ca-file is a usage error"
    );
}
