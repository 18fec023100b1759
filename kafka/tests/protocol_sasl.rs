//! A SASL_PLAINTEXT listener over real TCP on 127.0.0.1, against a real
//! broker with users (docs/SECURITY.md): what it serves before a login,
//! the login deadline, and hostile SASL input, raw frame by raw frame.
//! After each bad exchange the listener must still serve a new
//! connection; none may panic the server.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

#[path = "wire/mod.rs"]
mod wire;
use wire::{call, closed, read_frame, send_frame, try_call};

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::security::scram::Mechanism;
use tidelog_broker::store::{CleanerConfig, StoreConfig};
use tidelog_broker::{Broker, BrokerConfig, Principal};
use tidelog_kafka::metrics::KafkaMetrics;
use tidelog_kafka::{
    Budgets, KafkaConfig, Listener, ListenerName, NodeHandles, Ready, SecurityProtocol,
};
use tidelog_runtime::budget::ByteBudget;
use tidelog_runtime::connections::ConnectionSlots;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const NONE: i16 = 0;
const ILLEGAL_SASL_STATE: i16 = 34;
const SASL_AUTHENTICATION_FAILED: i16 = 58;
const PASSWORD: &str = "alice-pw";

struct Server {
    addr: std::net::SocketAddr,
    broker: Arc<Broker>,
    metrics: Arc<KafkaMetrics>,
    _stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

/// A broker with the user `alice` (SCRAM-SHA-256 and -512 credentials of
/// [`PASSWORD`]) behind a SASL_PLAINTEXT listener whose logins must be
/// done within `authentication_timeout_ms`.
async fn sasl_server(authentication_timeout_ms: u64) -> Server {
    sasl_server_with(authentication_timeout_ms, false).await
}

/// [`sasl_server`], with `security.authorization` as given.
async fn sasl_server_with(authentication_timeout_ms: u64, authorization: bool) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut store = StoreConfig::new(dir.path());
    store.commitlog_segment_bytes = 1 << 20;
    store.consume_queue_units_per_file = 1024;
    store.index_slots = 64;
    store.index_entries = 256;
    store.preallocate_next_segment = false;
    // How full this shared machine's disk is must not refuse writes.
    store.retention.disk = Arc::new(tidelog_broker::store::FixedDiskUsage::new(0.1));
    let cleaner = CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    };
    let mut config = BrokerConfig {
        auto_create_topics: true,
        ..Default::default()
    };
    // Failed logins answered at once: the test makes many.
    config.security.failed_auth_delay_ms = 0;
    config.security.authorization = authorization;
    let broker = Arc::new(
        tokio::task::spawn_blocking(move || Broker::open(&config, store, cleaner))
            .await
            .unwrap()
            .unwrap(),
    );
    let door = broker.door(&Principal::AdminToken);
    door.create_user("alice", PASSWORD.as_bytes().to_vec(), Mechanism::Sha256)
        .await
        .unwrap();
    let socket = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    let (stop, stop_rx) = watch::channel(false);
    let metrics = Arc::new(KafkaMetrics::default());
    let kafka = KafkaConfig {
        listen: None,
        max_request_bytes: 1 << 20,
        authentication_timeout_ms,
        ..KafkaConfig::default()
    };
    let handles = NodeHandles {
        ready: {
            let broker = Arc::clone(&broker);
            Arc::new(move || Some(Arc::clone(&broker))) as Ready
        },
        budgets: Budgets {
            requests: ByteBudget::new(64 << 20),
            answers: ByteBudget::new(64 << 20),
        },
        metrics: Arc::clone(&metrics),
        connections: ConnectionSlots::unlimited(),
        stop: stop_rx,
    };
    let listener = Listener {
        socket,
        name: ListenerName("SASL".into()),
        security_protocol: SecurityProtocol::SaslPlaintext,
        advertised_host: None,
        tls: None,
    };
    tokio::spawn(async move {
        tidelog_kafka::serve_in_node(listener, &kafka, handles).await;
    });
    Server {
        addr,
        broker,
        metrics,
        _stop: stop,
        _dir: dir,
    }
}

impl Server {
    /// Waits (bounded) until `n` connections have been counted as closed
    /// for a login not made or failed: the listener counts a close just
    /// after the client sees it.
    async fn assert_closed_for_authentication(&self, n: u64) {
        let counted = || {
            self.metrics
                .snapshot()
                .closed
                .iter()
                .find(|(label, _)| *label == "authentication")
                .map_or(0, |(_, n)| *n)
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while counted() < n && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(counted(), n, "connections closed for authentication");
    }
}

async fn connect(s: &Server) -> TcpStream {
    TcpStream::connect(s.addr).await.unwrap()
}

async fn handshake(c: &mut TcpStream, version: i16, mechanism: &str) -> SaslHandshakeResponse {
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.to_owned()));
    call(c, ApiKey::SaslHandshake, version, &request).await
}

async fn authenticate(c: &mut TcpStream, token: &[u8]) -> SaslAuthenticateResponse {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    call(c, ApiKey::SaslAuthenticate, 2, &request).await
}

/// Metadata v12 for every topic, `None` if the connection was closed.
async fn metadata(c: &mut TcpStream) -> Option<kafka_protocol::messages::MetadataResponse> {
    try_call(c, ApiKey::Metadata, 12, &MetadataRequest::default()).await
}

/// A new connection is served: ApiVersions, a PLAIN login, Metadata.
async fn assert_serves(s: &Server) {
    let mut c = connect(s).await;
    let versions: ApiVersionsResponse = call(
        &mut c,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
    assert_eq!(versions.error_code, NONE);
    assert_eq!(handshake(&mut c, 1, "PLAIN").await.error_code, NONE);
    let login = authenticate(&mut c, format!("\0alice\0{PASSWORD}").as_bytes()).await;
    assert_eq!(login.error_code, NONE, "{login:?}");
    assert!(metadata(&mut c).await.is_some(), "Metadata after a login");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_a_login_only_api_versions_and_the_sasl_apis_are_served() {
    let s = sasl_server(10_000).await;
    // ApiVersions, then Metadata: the connection closes, counted.
    let mut c = connect(&s).await;
    let versions: ApiVersionsResponse = call(
        &mut c,
        ApiKey::ApiVersions,
        0,
        &ApiVersionsRequest::default(),
    )
    .await;
    assert_eq!(versions.error_code, NONE);
    assert!(metadata(&mut c).await.is_none(), "Metadata before a login");
    s.assert_closed_for_authentication(1).await;
    // Mid-exchange (a handshake chose SCRAM, the client-first answered)
    // is not a login either.
    let mut c = connect(&s).await;
    assert_eq!(handshake(&mut c, 1, "SCRAM-SHA-256").await.error_code, NONE);
    let first = authenticate(&mut c, b"n,,n=alice,r=abcdefgh").await;
    assert_eq!(first.error_code, NONE);
    assert!(metadata(&mut c).await.is_none(), "Metadata mid-login");
    // SaslAuthenticate before a handshake: ILLEGAL_SASL_STATE, and still
    // nothing else is served.
    let mut c = connect(&s).await;
    let early = authenticate(&mut c, b"n,,n=alice,r=abc").await;
    assert_eq!(early.error_code, ILLEGAL_SASL_STATE);
    assert!(metadata(&mut c).await.is_none());
    s.assert_closed_for_authentication(3).await;
    // A login opens the rest.
    assert_serves(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_log_in_in_time_is_closed_and_a_logged_in_one_stays() {
    let s = sasl_server(300).await;
    let mut logged_in = connect(&s).await;
    assert_eq!(handshake(&mut logged_in, 1, "PLAIN").await.error_code, NONE);
    let login = authenticate(&mut logged_in, format!("\0alice\0{PASSWORD}").as_bytes()).await;
    assert_eq!(login.error_code, NONE);
    // Silent from the start, and silent after a handshake: both closed.
    let mut silent = connect(&s).await;
    let mut halfway = connect(&s).await;
    assert_eq!(
        handshake(&mut halfway, 1, "SCRAM-SHA-512").await.error_code,
        NONE
    );
    let started = tokio::time::Instant::now();
    assert!(closed(&mut silent).await);
    assert!(closed(&mut halfway).await);
    // Bounded by the read's own minute, not asserted to the millisecond.
    assert!(started.elapsed() < Duration::from_secs(30));
    s.assert_closed_for_authentication(2).await;
    // The login deadline does not apply once logged in.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(metadata(&mut logged_in).await.is_some());
    // A client that trickles a frame's bytes does not outlive it either.
    let mut trickle = connect(&s).await;
    let _ = trickle.write_all(&[0, 0, 0, 40, 0]).await;
    assert!(closed(&mut trickle).await);
    assert_serves(&s).await;
}

/// A client-first message (after a v1 SCRAM-SHA-256 handshake) the
/// server must refuse: SASL_AUTHENTICATION_FAILED, then a close.
async fn refused_client_first(s: &Server, message: &[u8]) {
    let mut c = connect(s).await;
    assert_eq!(handshake(&mut c, 1, "SCRAM-SHA-256").await.error_code, NONE);
    let answer = authenticate(&mut c, message).await;
    assert_eq!(
        answer.error_code,
        SASL_AUTHENTICATION_FAILED,
        "{:?}",
        String::from_utf8_lossy(&message[..message.len().min(80)])
    );
    assert!(closed(&mut c).await);
}

/// The server's first message to a good client-first, on `c`.
async fn server_first(c: &mut TcpStream, client_nonce: &str) -> String {
    assert_eq!(handshake(c, 1, "SCRAM-SHA-256").await.error_code, NONE);
    let answer = authenticate(c, format!("n,,n=alice,r={client_nonce}").as_bytes()).await;
    assert_eq!(answer.error_code, NONE);
    String::from_utf8(answer.auth_bytes.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_scram_messages_fail_the_login_cleanly() {
    let s = sasl_server(10_000).await;
    let long_nonce = format!("n,,n=alice,r={}", "a".repeat(10_000));
    let oversized = format!("n,,n=alice,r=abc,x={}", "y".repeat(5000));
    let client_firsts: [&[u8]; 11] = [
        b"",
        b"n,,n=ali",
        b"n,,n=alice",
        b"n,,n=alice,r=",
        b"n,,n=alice,r=bad,nonce",
        b"n,,n=alice,r=with space",
        b"n,,n=alice,r=del\x7f",
        b"n,,n=alice,r=\xff\xfe",
        b"x,,n=alice,r=abc",
        long_nonce.as_bytes(),
        oversized.as_bytes(),
    ];
    for message in client_firsts {
        refused_client_first(&s, message).await;
    }
    // Client-finals: the nonce not the server's, a proof of the wrong
    // length, base64 garbage, no proof, an absurd length, a right-shaped
    // proof that is wrong.
    let finals: [fn(&str) -> Vec<u8>; 6] = [
        |_| {
            b"c=biws,r=abcdefghNOTTHESERVERS,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
                .to_vec()
        },
        |nonce| format!("c=biws,r={nonce},p=AAAA").into_bytes(),
        |nonce| {
            format!("c=biws,r={nonce},p=!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!").into_bytes()
        },
        |nonce| format!("c=biws,r={nonce}").into_bytes(),
        |nonce| format!("c=biws,r={nonce},p={}", "A".repeat(8000)).into_bytes(),
        |nonce| {
            format!("c=biws,r={nonce},p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").into_bytes()
        },
    ];
    for make in finals {
        let mut c = connect(&s).await;
        let first = server_first(&mut c, "abcdefgh").await;
        let nonce = first
            .split(',')
            .find_map(|f| f.strip_prefix("r="))
            .unwrap()
            .to_owned();
        assert!(nonce.starts_with("abcdefgh") && nonce.len() > 8, "{first}");
        let message = make(&nonce);
        let answer = authenticate(&mut c, &message).await;
        assert_eq!(
            answer.error_code,
            SASL_AUTHENTICATION_FAILED,
            "{:?}",
            String::from_utf8_lossy(&message[..message.len().min(80)])
        );
        assert!(closed(&mut c).await);
    }
    assert_serves(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v0_raw_tokens_that_are_empty_or_garbage_close_the_connection() {
    let s = sasl_server(10_000).await;
    for token in [&b""[..], b"\0\0\0", &[0xffu8; 5000][..]] {
        for mechanism in ["SCRAM-SHA-256", "PLAIN"] {
            let mut c = connect(&s).await;
            assert_eq!(handshake(&mut c, 0, mechanism).await.error_code, NONE);
            send_frame(&mut c, token).await;
            assert!(closed(&mut c).await, "{mechanism} {} bytes", token.len());
        }
    }
    // Counted once each.
    s.assert_closed_for_authentication(6).await;
    // A good v0 PLAIN login is still answered by an empty frame.
    let mut c = connect(&s).await;
    assert_eq!(handshake(&mut c, 0, "PLAIN").await.error_code, NONE);
    send_frame(&mut c, format!("\0alice\0{PASSWORD}").as_bytes()).await;
    assert_eq!(read_frame(&mut c).await.unwrap().len(), 0);
    assert!(metadata(&mut c).await.is_some());
    assert_serves(&s).await;
}

/// What an open connection may do is decided again at each request: a
/// revoked ACL applies to its next request, and a deleted user's
/// connection closes at its next request (Kafka re-checks so too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_acl_and_a_deleted_user_apply_to_an_open_connections_next_request() {
    use tidelog_broker::security::acl::{
        AclBinding, AclFilter, Host, Operation, PatternType, Permission, ResourcePattern,
        ResourceType,
    };
    let s = sasl_server_with(10_000, true).await;
    let admin = s.broker.door(&Principal::AdminToken);
    admin
        .create_topic(
            tidelog_broker::topics::CreateTopic {
                name: "t".into(),
                partitions: Some(1),
                replication_factor: None,
                assignment: Vec::new(),
                configs: Vec::new(),
            },
            false,
        )
        .await
        .unwrap();
    let allow = AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: "t".into(),
            pattern_type: PatternType::Literal,
        },
        principal: "User:alice".into(),
        host: Host::Any,
        operation: Operation::Describe,
        permission: Permission::Allow,
    };
    admin.create_acls(vec![allow]).await.unwrap();

    let mut c = connect(&s).await;
    assert_eq!(handshake(&mut c, 1, "PLAIN").await.error_code, NONE);
    let login = authenticate(&mut c, format!("\0alice\0{PASSWORD}").as_bytes()).await;
    assert_eq!(login.error_code, NONE);
    let names = |m: &kafka_protocol::messages::MetadataResponse| -> Vec<String> {
        m.topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect()
    };
    let all = MetadataRequest::default().with_topics(None);
    let seen: kafka_protocol::messages::MetadataResponse =
        try_call(&mut c, ApiKey::Metadata, 12, &all)
            .await
            .expect("an answer");
    assert_eq!(names(&seen), ["t"]);

    // The ACL deleted: the same connection's next Metadata leaves t out.
    admin.delete_acls(vec![AclFilter::any()]).await.unwrap();
    let seen: kafka_protocol::messages::MetadataResponse =
        try_call(&mut c, ApiKey::Metadata, 12, &all)
            .await
            .expect("an answer");
    assert!(names(&seen).is_empty(), "{:?}", names(&seen));

    // The user deleted: its connection closes at its next request.
    admin.delete_user("alice").await.unwrap();
    assert!(metadata(&mut c).await.is_none(), "closed, not answered");
    s.assert_closed_for_authentication(1).await;
}
