//! The values the cluster keeps in etcd, as JSON, and their checks: a
//! value is another node's word, so it is bounded before it is parsed and
//! checked after.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::keys::{validate_node_id, NODE_ID_MAX};
use crate::etcd::EtcdError;

/// The longest value read under the cluster's keys (an in-sync set of
/// every node id is under 6 KiB).
pub const VALUE_BYTES_MAX: usize = 16 << 10;
/// The longest address in a [`NodeInfo`].
pub const ADDRESS_MAX: usize = 255;

/// A node's entry (`nodes/<node_id>`), under its session's lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub node_id: u32,
    /// How other nodes and clients reach its HTTP (`host:port`).
    pub http: String,
    /// Its Kafka listener as clients reach it (`host:port`); empty when
    /// it serves no Kafka listener.
    pub kafka: String,
    /// Where replicas fetch from it (`host:port`).
    pub replication: String,
    /// Where its CommitLog ends (a physical offset), as last published.
    pub log_end: u64,
    /// The epoch it follows (or leads).
    pub epoch: u64,
}

/// The master (`master`), under its session's lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterRecord {
    pub node_id: u32,
    /// The epoch it won.
    pub epoch: u64,
}

/// The in-sync set (`insync`): the nodes that hold every acknowledged
/// record; only they may become master.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InsyncSet {
    /// The epoch of the master that wrote it.
    pub epoch: u64,
    /// Node ids, ascending, no repeats.
    pub nodes: Vec<u32>,
}

impl NodeInfo {
    pub fn validate(&self) -> Result<(), String> {
        validate_node_id(self.node_id).map_err(|e| e.to_string())?;
        for (what, address) in [
            ("http", &self.http),
            ("kafka", &self.kafka),
            ("replication", &self.replication),
        ] {
            // A node without a Kafka listener publishes none.
            let may_be_empty = what == "kafka";
            if (address.is_empty() && !may_be_empty) || address.len() > ADDRESS_MAX {
                return Err(format!(
                    "{what} address of {} bytes, not 1 to {ADDRESS_MAX}",
                    address.len()
                ));
            }
        }
        Ok(())
    }
}

impl MasterRecord {
    pub fn validate(&self) -> Result<(), String> {
        validate_node_id(self.node_id).map_err(|e| e.to_string())?;
        if self.epoch == 0 {
            return Err("epoch 0 (the first master's is 1)".into());
        }
        Ok(())
    }
}

impl InsyncSet {
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes.len() > NODE_ID_MAX as usize {
            return Err(format!(
                "{} nodes, more than {NODE_ID_MAX}",
                self.nodes.len()
            ));
        }
        if self.nodes.is_empty() {
            return Err("no node: a master is always in its own set".into());
        }
        for &id in &self.nodes {
            validate_node_id(id).map_err(|e| e.to_string())?;
        }
        if !self.nodes.windows(2).all(|w| w[0] < w[1]) {
            return Err("node ids not ascending or repeated".into());
        }
        Ok(())
    }

    pub fn contains(&self, node_id: u32) -> bool {
        self.nodes.binary_search(&node_id).is_ok()
    }
}

fn bad_value(key: &[u8], reason: String) -> EtcdError {
    EtcdError::BadValue {
        key: String::from_utf8_lossy(key).into_owned(),
        reason,
    }
}

/// `value` of `key` as a `T`, bounded, parsed and checked.
pub(crate) fn decode<T: DeserializeOwned>(
    key: &[u8],
    value: &[u8],
    validate: impl FnOnce(&T) -> Result<(), String>,
) -> Result<T, EtcdError> {
    if value.len() > VALUE_BYTES_MAX {
        return Err(bad_value(
            key,
            format!("{} bytes, more than {VALUE_BYTES_MAX}", value.len()),
        ));
    }
    let record: T = serde_json::from_slice(value).map_err(|e| bad_value(key, e.to_string()))?;
    validate(&record).map_err(|reason| bad_value(key, reason))?;
    Ok(record)
}

/// `record` as JSON, checked as a reader will check it.
pub(crate) fn encode<T: Serialize>(
    key: &str,
    record: &T,
    validate: impl FnOnce(&T) -> Result<(), String>,
) -> Result<Vec<u8>, EtcdError> {
    validate(record).map_err(|reason| EtcdError::InvalidArgument {
        what: "cluster record",
        reason: format!("{key}: {reason}"),
    })?;
    serde_json::to_vec(record).map_err(|e| EtcdError::InvalidArgument {
        what: "cluster record",
        reason: format!("{key}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u32) -> NodeInfo {
        NodeInfo {
            node_id: id,
            http: "127.0.0.1:8080".into(),
            kafka: "127.0.0.1:9092".into(),
            replication: "127.0.0.1:9500".into(),
            log_end: 4096,
            epoch: 2,
        }
    }

    #[test]
    fn records_round_trip_through_json() {
        let bytes = encode("k", &node(3), NodeInfo::validate).unwrap();
        assert_eq!(
            decode::<NodeInfo>(b"k", &bytes, NodeInfo::validate).unwrap(),
            node(3)
        );
        let set = InsyncSet {
            epoch: 4,
            nodes: vec![1, 3],
        };
        let bytes = encode("k", &set, InsyncSet::validate).unwrap();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"epoch":4,"nodes":[1,3]}"#
        );
        assert_eq!(
            decode::<InsyncSet>(b"k", &bytes, InsyncSet::validate).unwrap(),
            set
        );
        assert!(set.contains(3) && !set.contains(2));
    }

    #[test]
    fn values_out_of_bounds_or_shape_are_refused() {
        let bad = |value: &[u8]| {
            matches!(
                decode::<InsyncSet>(b"k", value, InsyncSet::validate),
                Err(EtcdError::BadValue { .. })
            )
        };
        assert!(bad(br#"{"epoch":1,"nodes":[3,1]}"#));
        assert!(bad(br#"{"epoch":1,"nodes":[1,1]}"#));
        assert!(bad(br#"{"epoch":1,"nodes":[]}"#));
        assert!(bad(br#"{"epoch":1,"nodes":[0]}"#));
        assert!(bad(br#"{"epoch":-1,"nodes":[1]}"#));
        assert!(bad(b"not json"));
        assert!(bad(&vec![b' '; VALUE_BYTES_MAX + 1]));
        let master = |v: &[u8]| decode::<MasterRecord>(b"m", v, MasterRecord::validate).is_err();
        assert!(master(br#"{"node_id":1,"epoch":0}"#));
        assert!(master(br#"{"node_id":1001,"epoch":1}"#));
        let mut long = node(1);
        long.http = "h".repeat(ADDRESS_MAX + 1);
        assert!(encode("k", &long, NodeInfo::validate).is_err());
    }
}
