//! Fixtures of the broker's unit tests: small stores and a bounded wait.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tidelog_cleaner::CleanerConfig;
use tidelog_storage::{AppendRecord, StoreConfig};

use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::coordinator::{Clock, GroupsConfig, JoinRequest, ManualClock, MemberProtocol};
use crate::fault::Faults;
use crate::topic_config::Overrides;

pub(crate) fn store_config(dir: &std::path::Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 1 << 20;
    c.consume_queue_units_per_file = 1000;
    c.index_slots = 1000;
    c.index_entries = 4000;
    c.preallocate_next_segment = false;
    // How full this shared machine's disk is must not refuse writes.
    c.retention.disk = Arc::new(tidelog_storage::retention::FixedDiskUsage::new(0.1));
    c
}

pub(crate) fn cleaner_config() -> CleanerConfig {
    CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    }
}

pub(crate) fn open(dir: &std::path::Path) -> Arc<Broker> {
    open_with(dir, &BrokerConfig::default())
}

pub(crate) fn open_with(dir: &std::path::Path, config: &BrokerConfig) -> Arc<Broker> {
    Arc::new(Broker::open(config, store_config(dir), cleaner_config()).unwrap())
}

/// A broker with `groups` as its `groups:` section, on `clock`.
pub(crate) fn open_at(
    dir: &std::path::Path,
    groups: &GroupsConfig,
    clock: &Arc<ManualClock>,
) -> Broker {
    let config = BrokerConfig {
        groups: groups.clone(),
        ..BrokerConfig::default()
    };
    Broker::open_inner(
        &config,
        store_config(dir),
        cleaner_config(),
        Faults::default(),
        Arc::clone(clock) as Arc<dyn Clock>,
    )
    .unwrap()
}

/// A new dynamic member's join with `protocol`, 10 s session and
/// rebalance timeouts.
pub(crate) fn join_request(protocol: MemberProtocol) -> JoinRequest {
    JoinRequest {
        member_id: None,
        instance_id: None,
        client_id: "c".into(),
        host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol,
        require_known_member_id: false,
        server_side: false,
    }
}

pub(crate) fn compact() -> Overrides {
    Overrides::from([("cleanup.policy".to_string(), "compact".to_string())])
}

/// Appends `(key, value)`s to partition 0 of `topic` straight into the
/// store (what a produce would append).
pub(crate) fn append(broker: &Broker, topic: &str, records: &[(&str, &str)]) {
    let batch: Vec<AppendRecord> = records
        .iter()
        .map(|(k, v)| AppendRecord {
            topic: Arc::from(topic),
            partition: 0,
            key: Some(Bytes::copy_from_slice(k.as_bytes())),
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Vec::new(),
            timestamp_ms: None,
        })
        .collect();
    broker.store.append(&batch).unwrap();
}

/// Appends records with these producer timestamps to partition 0 of
/// `topic` (keys `k0`, `k1`, …), straight into the store.
pub(crate) fn append_timed(broker: &Broker, topic: &str, timestamps: &[i64]) {
    let batch: Vec<AppendRecord> = timestamps
        .iter()
        .enumerate()
        .map(|(i, &ts)| AppendRecord {
            topic: Arc::from(topic),
            partition: 0,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from_static(b"v")),
            headers: Vec::new(),
            timestamp_ms: Some(ts),
        })
        .collect();
    broker.store.append(&batch).unwrap();
}

/// Waits (bounded, generously: the machine is shared) until `done`.
pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
