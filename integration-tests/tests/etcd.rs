//! The cluster tests' etcd (issue 39): installed when missing, started on
//! loopback, its v3 API answering, and what it was told surviving a
//! crash of the member (`integration-tests/src/etcd.rs`).
#![allow(clippy::unwrap_used)]

use tidelog_integration_tests::etcd::Etcd;

#[test]
fn etcd_starts_serves_the_v3_api_and_keeps_keys_across_a_crash() {
    let mut etcd = Etcd::start();
    assert!(etcd.endpoint().starts_with("http://127.0.0.1:"));
    assert_eq!(etcd.get("/tidelog/test/epoch").unwrap(), None);
    etcd.put("/tidelog/test/epoch", "7").unwrap();
    assert_eq!(
        etcd.get("/tidelog/test/epoch").unwrap().as_deref(),
        Some("7")
    );
    etcd.stop();
    assert!(etcd.get("/tidelog/test/epoch").is_err(), "stopped");
    etcd.start_again();
    assert_eq!(
        etcd.get("/tidelog/test/epoch").unwrap().as_deref(),
        Some("7"),
        "a write acknowledged before the crash"
    );
}
