//! Which requests a replica forwards, and what it decides from the
//! cluster as its gate sees it; the forwarding itself, end to end between
//! two servers, is tests/cluster.rs.
#![allow(clippy::unwrap_used)]

use tidelog_broker::cluster::{ClusterNode, Role};

use super::*;

#[test]
fn writes_and_every_consumer_instance_call_are_forwarded_reads_and_node_local_calls_not() {
    let forwarded = [
        (Method::POST, "/topics/t"),
        (Method::POST, "/topics/t/partitions/0"),
        (Method::POST, "/consumer-groups/g/offsets"),
        (Method::POST, "/consumer-groups/g/offsets:reset"),
        (Method::DELETE, "/consumer-groups/g"),
        (Method::POST, "/consumers/g"),
        (Method::GET, "/consumers/g/instances/i/records"),
        (Method::GET, "/consumers/g/instances/i/assignments"),
        (Method::GET, "/consumer-groups"),
        (Method::GET, "/consumer-groups/g"),
        (Method::GET, "/consumer-groups/g/offsets"),
        (Method::DELETE, "/consumers/g/instances/i"),
        (Method::POST, "/v3/clusters/c/topics"),
        (Method::PATCH, "/v3/clusters/c/topics/t"),
        (Method::DELETE, "/v3/clusters/c/topics/t"),
        (Method::PUT, "/v3/clusters/c/topics/t/configs/retention.ms"),
        (Method::POST, "/v3/clusters/c/topics/t/configs:alter"),
        (Method::POST, "/v3/clusters/c/broker-configs:alter"),
        (Method::POST, "/v3/clusters/c/topics/t/tiering:upload"),
        (Method::POST, "/v3/clusters/c/acls"),
        (Method::PUT, "/v1/security/users/alice"),
    ];
    for (method, path) in forwarded {
        assert!(forwards(&method, path), "{method} {path}");
    }
    let local = [
        (Method::GET, "/topics"),
        (Method::GET, "/topics/t/partitions/0/records"),
        (Method::GET, "/v1/cluster"),
        (Method::GET, "/status/ready"),
        (Method::GET, "/metrics"),
        (Method::POST, "/v3/clusters/c/topics/t/compaction"),
        (Method::POST, "/v3/clusters/c/retention"),
    ];
    for (method, path) in local {
        assert!(!forwards(&method, path), "{method} {path}");
    }
}

fn node(node_id: u32, role: Role) -> ClusterNode {
    ClusterNode {
        node_id,
        http: format!("10.0.0.{node_id}:8080"),
        kafka: None,
        role,
        in_sync: true,
        lag_bytes: 0,
    }
}

fn status(node_id: u32, master: Option<u32>) -> ClusterStatus {
    ClusterStatus {
        epoch: 4,
        node_id,
        master,
        nodes: vec![node(1, Role::Master), node(2, Role::Replica)],
    }
}

fn refusal(route: Route) -> String {
    match route {
        Route::Refuse(e) => {
            assert_eq!(e.error_code(), 50301, "{e}");
            e.to_string()
        }
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_replica_forwards_to_its_master_once_and_refuses_what_it_cannot_forward() {
    let none = HeaderMap::new();
    let target = match decide(&status(2, Some(1)), &none) {
        Route::Forward(target) => target,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        target,
        Target {
            from_node: 2,
            master: 1,
            address: "10.0.0.1:8080".into(),
        }
    );
    // The master past its lease's margin serves the refusal itself.
    assert!(matches!(decide(&status(1, Some(1)), &none), Route::Local));
    // Forwarded once already: never again.
    let mut forwarded = HeaderMap::new();
    forwarded.insert(FORWARDED_BY, HeaderValue::from(7u32));
    let message = refusal(decide(&status(2, Some(1)), &forwarded));
    assert!(message.contains("node 7 forwarded"), "{message}");
    assert!(message.contains("not forwarded again"), "{message}");
    // No master, or one that is not live.
    let message = refusal(decide(&status(2, None), &none));
    assert!(message.contains("knows no master"), "{message}");
    let message = refusal(decide(&status(2, Some(9)), &none));
    assert!(
        message.contains("node 9, is not among the live nodes"),
        "{message}"
    );
    // HTTPS without a node certificate: named, not forwarded.
    let message = refusal(Route::Refuse(target.without_certificate()));
    assert!(message.contains("https://10.0.0.1:8080"), "{message}");
}

#[test]
fn an_error_reads_with_its_sources() {
    #[derive(Debug)]
    struct Wrap(std::io::Error);
    impl std::fmt::Display for Wrap {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("client error (Connect)")
        }
    }
    impl std::error::Error for Wrap {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let wrapped = Wrap(std::io::Error::other("tcp connect error"));
    assert_eq!(
        error_chain(&wrapped),
        "client error (Connect): tcp connect error"
    );
}
