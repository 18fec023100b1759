//! Black-box tests live in `tests/`; this library holds what they share
//! beyond the server harness of `tests/common`: the real client libraries
//! ([`clients`]), the TLS tests' certificates ([`certs`]), the console
//! test's browser ([`browser`]), the tiered
//! storage tests' S3 server ([`s3`]), the cluster tests' etcd ([`etcd`])
//! and hand-built Kafka requests ([`kafka_wire`]).

pub mod browser;
pub mod certs;
pub mod clients;
pub mod etcd;
pub mod kafka_wire;
pub mod s3;
