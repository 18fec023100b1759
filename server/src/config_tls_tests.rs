//! Tests of `config.rs` for the `tls:` section, `http.tls` and
//! `kafka.listeners`: paths, the cross-section checks and their keys.
use super::*;

const FILE: &str = "test.yaml";

fn load_str(text: &str) -> Result<Config, ConfigError> {
    let mut config = Config::parse_yaml(FILE, text)?;
    config.validate(FILE)?;
    Ok(config)
}

fn rejected_key(text: &str) -> (String, String) {
    match load_str(text) {
        Err(ConfigError::Invalid { key, reason, .. }) => (key, reason),
        other => panic!("expected an invalid key, got {other:?}"),
    }
}

/// A self-signed certificate and its key written as `server.crt` and
/// `server.key` in `dir`.
fn write_certificate(dir: &Path) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("server.crt"), made.cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), made.signing_key.serialize_pem()).unwrap();
}

#[test]
fn tls_is_off_by_default_and_its_keys_are_named() {
    let config = load_str("").unwrap();
    assert_eq!(config.tls, tidelog_runtime::tls::TlsConfig::default());
    assert!(!config.http.tls);
    assert!(!config.serves_tls());
    assert_eq!(config.kafka.listeners, None);
    assert_eq!(rejected_key("tls:\n  cert: a.pem\n").0, "tls.cert");
    assert_eq!(rejected_key("tls:\n  cert_file: a.pem\n").0, "tls.key_file");
    assert_eq!(
        rejected_key("tls:\n  client_auth: maybe\n").0,
        "tls.client_auth"
    );
    let (key, reason) = rejected_key("http:\n  tls: true\n");
    assert_eq!(key, "http.tls");
    assert!(reason.contains("tls.cert_file"), "{reason}");
}

#[test]
fn tls_files_are_relative_to_the_config_file_and_read_at_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("certs")).unwrap();
    write_certificate(&dir.path().join("certs"));
    let file = dir.path().join("broker.yaml");
    std::fs::write(
        &file,
        "http:\n  tls: true\ntls:\n  cert_file: certs/server.crt\n  key_file: certs/server.key\n",
    )
    .unwrap();
    let config = Config::load(Some(&file), &CliOverrides::default()).unwrap();
    assert_eq!(
        config.tls.cert_file.as_deref(),
        Some(dir.path().join("certs/server.crt").as_path())
    );
    assert!(config.serves_tls());

    // A key that is not PEM stops loading, naming the file's key.
    std::fs::write(dir.path().join("certs/server.key"), "not a key\n").unwrap();
    match Config::load(Some(&file), &CliOverrides::default()) {
        Err(ConfigError::Invalid { key, reason, .. }) => {
            assert_eq!(key, "tls.key_file");
            assert!(reason.contains("server.key"), "{reason}");
        }
        other => panic!("expected tls.key_file to be refused, got {other:?}"),
    }
}

#[test]
fn kafka_listeners_replace_listen_and_tls_ones_need_a_certificate() {
    let two = "kafka:\n  listeners:\n    - {name: PLAIN, listen: 127.0.0.1:19092}\n    - {name: SECURE, listen: 127.0.0.1:19093, security_protocol: SSL, advertised_host: kafka.example}\n";
    let (key, reason) = rejected_key(two);
    assert_eq!(key, "kafka.listeners[1].security_protocol");
    assert!(reason.contains("SSL"), "{reason}");

    let dir = tempfile::tempdir().unwrap();
    write_certificate(dir.path());
    let tls = format!(
        "tls:\n  cert_file: {}\n  key_file: {}\n",
        dir.path().join("server.crt").display(),
        dir.path().join("server.key").display()
    );
    let config = load_str(&format!("{two}{tls}")).unwrap();
    assert_eq!(config.kafka.listen, None, "listeners replace kafka.listen");
    assert!(config.serves_tls());
    let listeners = config.kafka.effective_listeners();
    assert_eq!(listeners.len(), 2);
    assert_eq!(
        listeners[1].security_protocol,
        tidelog_kafka::SecurityProtocol::Ssl
    );
    assert!(config.to_redacted_yaml().unwrap().contains("SECURE"));

    let both = "kafka:\n  listen: 127.0.0.1:19094\n  listeners:\n    - {name: PLAIN, listen: 127.0.0.1:19092}\n";
    assert_eq!(rejected_key(both).0, "kafka.listeners");
    let mut flagged = Config::parse_yaml(
        FILE,
        "kafka:\n  listeners:\n    - {name: PLAIN, listen: 127.0.0.1:19092}\n",
    )
    .unwrap();
    flagged.kafka_listen_given = true; // as `--kafka-listen` sets it
    assert!(flagged.validate(FILE).is_err());

    assert_eq!(
        rejected_key("listen: 127.0.0.1:19092\nkafka:\n  listeners:\n    - {name: PLAIN, listen: 127.0.0.1:19092}\n").0,
        "kafka.listeners[0].listen"
    );
    assert_eq!(
        rejected_key("kafka:\n  listeners:\n    - {name: plain, listen: 127.0.0.1:19092}\n").0,
        "kafka.listeners[0].name"
    );
    assert_eq!(
        rejected_key("kafka:\n  listeners:\n    - {name: A, listen: 127.0.0.1:19092, security_protocol: TLS}\n").0,
        "kafka.listeners[0].security_protocol"
    );
}

#[test]
fn a_cluster_with_tls_needs_the_nodes_ca_and_protected_mode_covers_replication() {
    let dir = tempfile::tempdir().unwrap();
    write_certificate(dir.path());
    let cert = dir.path().join("server.crt");
    let key = dir.path().join("server.key");
    let cluster = |listen: &str| {
        format!("cluster:\n  node_id: 1\n  etcd_endpoints: [\"http://127.0.0.1:2379\"]\n  replication_listen: {listen}\n")
    };
    let tls = format!(
        "tls:\n  cert_file: {}\n  key_file: {}\n",
        cert.display(),
        key.display()
    );

    // tls without the CA the nodes' certificates are checked against.
    let (key_name, reason) = rejected_key(&format!("{}{tls}", cluster("127.0.0.1:9500")));
    assert_eq!(key_name, "tls.client_ca_file");
    assert!(reason.contains("prove who they are"), "{reason}");
    let with_ca = format!("{tls}  client_ca_file: {}\n", cert.display());
    load_str(&format!("{}{with_ca}", cluster("127.0.0.1:9500"))).unwrap();

    // Replication open to other hosts: refused without tls, whatever
    // security.authentication says (it does not cover replication).
    let open = format!(
        "{}security:\n  authentication: true\n  allow_unauthenticated_remote: false\n",
        cluster("0.0.0.0:9500")
    );
    let (key_name, reason) = rejected_key(&open);
    assert_eq!(key_name, "cluster.replication_listen");
    assert!(reason.contains("protected mode"), "{reason}");
    // With tls the nodes' certificates authenticate it; or the operator
    // says so.
    load_str(&format!(
        "{}{with_ca}security:\n  authentication: true\n",
        cluster("0.0.0.0:9500")
    ))
    .unwrap();
    load_str(&format!(
        "{}security:\n  allow_unauthenticated_remote: true\n",
        cluster("0.0.0.0:9500")
    ))
    .unwrap();
}
