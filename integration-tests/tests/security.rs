//! Logins, users and ACLs on the real binary (docs/SECURITY.md): real
//! Kafka clients logging in with SCRAM, ACLs created and enforced over
//! Kafka, HTTP Basic with its 401 and 403, and protected mode.

mod common;

use base64::Engine;
use common::{run_tidelog, TidelogProcess};
use tidelog_integration_tests::clients;

const ADMIN_PASSWORD: &str = "admin-secret";

/// A server that requires logins and checks ACLs, with the bootstrap
/// super user `admin` (its password file in `dir`).
fn secured_server(dir: &std::path::Path) -> TidelogProcess {
    let password_file = dir.join("admin.password");
    std::fs::write(&password_file, format!("{ADMIN_PASSWORD}\n")).expect("write the test file");
    TidelogProcess::start_with_config(&format!(
        "{}{}security:
  authentication: true
  authorization: true
  super_users: [admin]
  users:
    - name: admin
      password_file: {}
",
        common::SMALL_STORE,
        common::DISK_RATIOS_OFF,
        password_file.display()
    ))
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

#[test]
fn confluent_kafka_logs_in_with_scram_and_acls_decide_across_a_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = secured_server(dir.path());
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    for (i, phase) in ["setup", "after-restart"].into_iter().enumerate() {
        if i > 0 {
            server.restart();
        }
        let mut script = clients::python_command("confluent_kafka_security.py");
        script.arg(server.url()).arg(kafka.to_string()).arg(phase);
        let stdout = clients::run_script(script);
        let closing = format!("confluent_kafka_security: {phase} checked");
        assert!(
            stdout.contains(&closing),
            "the script exited 0 without {closing:?}:\n{stdout}"
        );
    }
    let log = server.log();
    for secret in [ADMIN_PASSWORD, "alice-pw"] {
        assert!(!log.contains(secret), "a password reached the log:\n{log}");
    }
}

#[test]
fn http_needs_a_user_and_an_acl_and_leaves_the_probes_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = secured_server(dir.path());
    let admin = basic("admin", ADMIN_PASSWORD);
    let topics = "/v3/clusters/tidelog/topics";

    // No credentials: 401 with the scheme to use; the probes stay open.
    let refused = server.get(topics);
    refused.expect_error(401, 40101);
    assert_eq!(
        refused.header("www-authenticate"),
        Some(r#"Basic realm="tidelog""#)
    );
    assert_eq!(server.get("/status/ready").status, 200);
    assert_eq!(server.get("/metrics").status, 200);
    server
        .get_with(topics, &[("Authorization", &basic("admin", "wrong"))])
        .expect_error(401, 40101);
    // A bearer token where none is set is a guess too: refused, counted.
    server
        .get_with(topics, &[("Authorization", "Bearer guess")])
        .expect_error(401, 40101);
    let metrics = server.get("/metrics").text();
    let failures = metrics
        .lines()
        .find(|l| l.starts_with("tidelog_http_auth_failures_total"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|n| n.parse::<u64>().ok());
    assert_eq!(failures, Some(2), "both failed logins counted:\n{metrics}");

    // The super user creates a topic and a user.
    let created = server.request(
        "POST",
        topics,
        &[
            ("Authorization", &admin),
            ("Content-Type", "application/json"),
        ],
        Some(br#"{"topic_name":"t","partitions_count":1}"#),
    );
    created.expect(201);
    let user = server.request(
        "POST",
        "/v1/security/users",
        &[
            ("Authorization", &admin),
            ("Content-Type", "application/json"),
        ],
        Some(br#"{"username":"bob","password":"bob-pw","algorithm":"SCRAM-SHA-256"}"#),
    );
    assert_eq!(user.status, 201, "{}", user.text());

    // bob logs in but may do nothing yet: 403, and lists come back empty.
    let bob = basic("bob", "bob-pw");
    let listed = server
        .get_with(topics, &[("Authorization", &bob)])
        .expect(200);
    assert_eq!(listed["data"], serde_json::json!([]), "{listed}");
    let produce = |auth: &str| {
        server.request(
            "POST",
            "/topics/t",
            &[
                ("Authorization", auth),
                ("Content-Type", "application/vnd.kafka.json.v2+json"),
            ],
            Some(br#"{"records":[{"value":{"n":1}}]}"#),
        )
    };
    produce(&bob).expect_error(403, 40301);

    // An ACL over HTTP lets him write and see the topic.
    let acl = server.request(
        "POST",
        "/v3/clusters/tidelog/acls",
        &[("Authorization", &admin), ("Content-Type", "application/json")],
        Some(
            br#"{"resource_type":"TOPIC","resource_name":"t","pattern_type":"LITERAL","principal":"User:bob","host":"*","operation":"WRITE","permission":"ALLOW"}"#,
        ),
    );
    assert_eq!(acl.status, 201, "{}", acl.text());
    produce(&bob).expect(200);
    let listed = server
        .get_with(topics, &[("Authorization", &bob)])
        .expect(200);
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(1), "{listed}");
    let acls = server
        .get_with(
            "/v3/clusters/tidelog/acls?principal=User:bob",
            &[("Authorization", &admin)],
        )
        .expect(200);
    assert_eq!(acls["data"].as_array().map(Vec::len), Some(1), "{acls}");
    // bob may not manage users or ACLs.
    server
        .get_with("/v1/security/users", &[("Authorization", &bob)])
        .expect_error(403, 40301);

    // Deleted, his next request is refused.
    let deleted = server.request(
        "DELETE",
        "/v1/security/users/bob",
        &[("Authorization", &admin)],
        None,
    );
    assert_eq!(deleted.status, 204, "{}", deleted.text());
    produce(&bob).expect_error(401, 40101);
}

#[test]
fn protected_mode_refuses_an_open_listener_beyond_loopback() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("open.yaml");
    std::fs::write(&config, "listen: 0.0.0.0:0\nkafka:\n  listen: null\n")
        .expect("write the test file");
    let checked = run_tidelog(&["check-config", config.to_str().expect("a UTF-8 path")]);
    assert!(!checked.status.success());
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(
        stderr.contains("listen") && stderr.contains("allow_unauthenticated_remote"),
        "{stderr}"
    );
    std::fs::write(
        &config,
        "listen: 0.0.0.0:0\nkafka:\n  listen: null\nsecurity:\n  allow_unauthenticated_remote: true\n",
    )
    .expect("write the test file");
    let checked = run_tidelog(&["check-config", config.to_str().expect("a UTF-8 path")]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// One HTTP route under ACLs: refused without its operation, served with
/// it.
struct Route {
    method: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    /// The ACL that lets it through: resource type, name, operation.
    needs: (&'static str, &'static str, &'static str),
}

#[test]
fn every_http_route_needs_the_operation_of_its_kafka_api() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = secured_server(dir.path());
    let admin = basic("admin", ADMIN_PASSWORD);
    let json = "application/json";
    let send = |auth: &str, method: &str, path: &str, body: Option<&str>| {
        let content_type = if path.starts_with("/topics/") && method == "POST" {
            "application/vnd.kafka.json.v2+json"
        } else if path.starts_with("/consumers/") {
            "application/vnd.kafka.v2+json"
        } else {
            json
        };
        server.request(
            method,
            path,
            &[("Authorization", auth), ("Content-Type", content_type)],
            body.map(str::as_bytes),
        )
    };
    for (topic, policy) in [("t", "delete"), ("c", "compact"), ("gone", "delete")] {
        let body = format!(
            r#"{{"topic_name":"{topic}","partitions_count":1,"configs":[{{"name":"cleanup.policy","value":"{policy}"}}]}}"#
        );
        send(&admin, "POST", "/v3/clusters/tidelog/topics", Some(&body)).expect(201);
    }
    send(
        &admin,
        "POST",
        "/topics/t",
        Some(r#"{"records":[{"value":1}]}"#),
    )
    .expect(200);
    let commit = r#"{"offsets":[{"topic":"t","partition":0,"offset":0}]}"#;
    send(&admin, "POST", "/consumer-groups/g/offsets", Some(commit)).expect(204);
    let user = r#"{"username":"bob","password":"bob-pw"}"#;
    send(&admin, "POST", "/v1/security/users", Some(user)).expect(201);
    let bob = basic("bob", "bob-pw");

    // The lists leave out what bob may not describe.
    let topics = send(&bob, "GET", "/v3/clusters/tidelog/topics", None).expect(200);
    assert_eq!(topics["data"], serde_json::json!([]));
    assert_eq!(
        send(&bob, "GET", "/topics", None).expect(200),
        serde_json::json!([])
    );
    assert_eq!(
        send(&bob, "GET", "/consumer-groups", None).expect(200)["groups"],
        serde_json::json!([])
    );

    // In an order where no earlier grant implies a later route's
    // operation (READ, WRITE, DELETE and ALTER imply DESCRIBE).
    let routes = [
        Route {
            method: "GET",
            path: "/topics/t/partitions/0/offsets",
            body: None,
            needs: ("TOPIC", "t", "DESCRIBE"),
        },
        Route {
            method: "GET",
            path: "/v3/clusters/tidelog/topics/t",
            body: None,
            needs: ("TOPIC", "t", "DESCRIBE"),
        },
        Route {
            method: "GET",
            path: "/v3/clusters/tidelog/topics/t/configs",
            body: None,
            needs: ("TOPIC", "t", "DESCRIBE_CONFIGS"),
        },
        Route {
            method: "POST",
            path: "/v3/clusters/tidelog/topics/t/configs:alter",
            body: Some(r#"{"data":[{"name":"retention.ms","value":"60000"}]}"#),
            needs: ("TOPIC", "t", "ALTER_CONFIGS"),
        },
        Route {
            method: "POST",
            path: "/topics/t",
            body: Some(r#"{"records":[{"value":2}]}"#),
            needs: ("TOPIC", "t", "WRITE"),
        },
        Route {
            method: "POST",
            path: "/topics/t/partitions/0",
            body: Some(r#"{"records":[{"value":3}]}"#),
            needs: ("TOPIC", "t", "WRITE"),
        },
        Route {
            method: "GET",
            path: "/topics/t/partitions/0/records?offset=0&timeout=0",
            body: None,
            needs: ("TOPIC", "t", "READ"),
        },
        Route {
            method: "GET",
            path: "/v3/clusters/tidelog/topics/c/compaction",
            body: None,
            needs: ("TOPIC", "c", "DESCRIBE"),
        },
        Route {
            method: "GET",
            path: "/topics/c/records?key=eA%3D%3D&format=binary",
            body: None,
            needs: ("TOPIC", "c", "READ"),
        },
        Route {
            method: "POST",
            path: "/v3/clusters/tidelog/topics/c/compaction",
            body: Some("{}"),
            needs: ("TOPIC", "c", "ALTER"),
        },
        Route {
            method: "POST",
            path: "/v3/clusters/tidelog/topics",
            body: Some(r#"{"topic_name":"made","partitions_count":1}"#),
            needs: ("TOPIC", "made", "CREATE"),
        },
        Route {
            method: "DELETE",
            path: "/v3/clusters/tidelog/topics/gone",
            body: None,
            needs: ("TOPIC", "gone", "DELETE"),
        },
        Route {
            method: "GET",
            path: "/consumer-groups/g/offsets",
            body: None,
            needs: ("GROUP", "g", "DESCRIBE"),
        },
        Route {
            method: "GET",
            path: "/consumer-groups/g",
            body: None,
            needs: ("GROUP", "g", "DESCRIBE"),
        },
        Route {
            method: "POST",
            path: "/consumer-groups/g/offsets",
            body: Some(r#"{"offsets":[{"topic":"t","partition":0,"offset":1}]}"#),
            needs: ("GROUP", "g", "READ"),
        },
        Route {
            method: "POST",
            path: "/consumer-groups/g/offsets:reset",
            body: Some(r#"{"topic":"t","to":"beginning"}"#),
            needs: ("GROUP", "g", "READ"),
        },
        Route {
            method: "POST",
            path: "/consumers/cg",
            body: Some(r#"{"name":"i1","format":"json"}"#),
            needs: ("GROUP", "cg", "READ"),
        },
        Route {
            method: "DELETE",
            path: "/consumer-groups/g",
            body: None,
            needs: ("GROUP", "g", "DELETE"),
        },
        Route {
            method: "GET",
            path: "/v3/clusters/tidelog/stats",
            body: None,
            needs: ("CLUSTER", "kafka-cluster", "DESCRIBE"),
        },
        Route {
            method: "GET",
            path: "/v3/clusters/tidelog/acls",
            body: None,
            needs: ("CLUSTER", "kafka-cluster", "DESCRIBE"),
        },
        Route {
            method: "GET",
            path: "/v1/security/users",
            body: None,
            needs: ("CLUSTER", "kafka-cluster", "DESCRIBE"),
        },
        Route {
            method: "POST",
            path: "/v3/clusters/tidelog/retention",
            body: Some("{}"),
            needs: ("CLUSTER", "kafka-cluster", "ALTER"),
        },
    ];
    // Granted one by one, so a route is tried before its ACL exists
    // (unless an earlier route needed the same one).
    let mut granted = std::collections::HashSet::new();
    for route in &routes {
        let what = format!("{} {}", route.method, route.path);
        let (resource_type, name, operation) = route.needs;
        if granted.insert(route.needs) {
            let refused = send(&bob, route.method, route.path, route.body);
            assert_eq!(
                refused.status,
                403,
                "{what} without its ACL: {}",
                refused.text()
            );
            let acl = format!(
                r#"{{"resource_type":"{resource_type}","resource_name":"{name}","pattern_type":"LITERAL","principal":"User:bob","host":"*","operation":"{operation}","permission":"ALLOW"}}"#
            );
            send(&admin, "POST", "/v3/clusters/tidelog/acls", Some(&acl)).expect(201);
        }
        let served = send(&bob, route.method, route.path, route.body);
        assert!(
            (200..300).contains(&served.status),
            "{what} with {operation} on {resource_type} {name}: {} {}",
            served.status,
            served.text()
        );
    }
}
