//! The `cluster:` section (docs/CLUSTER.md, docs/OPERATIONS.md): absent or
//! null, the server is a single node as before; present, it is node
//! `node_id` of the cluster `name`, whose master etcd elects.
//!
//! Defaults are written once, in [`ClusterConfig::default`]; the one
//! [`ClusterConfig::validate`] runs at `check-config` and at start, and
//! names the key of every refusal.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::election::keys::{validate_node_id, Keys};
use crate::election::records::ADDRESS_MAX;

/// Most etcd endpoints a node is given.
pub const ENDPOINTS_MAX: usize = 16;

/// The `cluster:` section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// Unique in the cluster, 1..=1000.
    pub node_id: u32,
    /// The etcd key prefix `/tidelog/<name>/`; nodes of one cluster share
    /// it, and a replica of another name is refused.
    pub name: String,
    /// etcd's client URLs (`http://host:port`), tried in turn.
    pub etcd_endpoints: Vec<String>,
    /// Where replicas fetch this node's CommitLog while it is master.
    pub replication_listen: SocketAddr,
    /// How other nodes and clients reach this node's HTTP (`host:port`);
    /// null: the HTTP listen address.
    pub advertised_http: Option<String>,
    /// How replicas reach `replication_listen` (`host:port`); null: the
    /// listen address itself.
    pub advertised_replication: Option<String>,
    /// The node's etcd lease. A master that cannot renew it stops taking
    /// writes before it can expire; a dead master's key goes with it.
    pub session_ttl_ms: u64,
    /// acks=all and HTTP produce need the record on this many nodes, the
    /// master included.
    pub min_insync_replicas: u32,
    /// A replica further behind than this leaves the in-sync set.
    pub replica_lag_max_ms: u64,
    /// acks=all waits this long for the in-sync set, then answers
    /// NOT_ENOUGH_REPLICAS (HTTP 503 50306).
    pub replication_timeout_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            node_id: 1,
            name: "tidelog".into(),
            etcd_endpoints: vec!["http://127.0.0.1:2379".into()],
            replication_listen: SocketAddr::from(([127, 0, 0, 1], 9500)),
            advertised_http: None,
            advertised_replication: None,
            session_ttl_ms: 3000,
            min_insync_replicas: 2,
            replica_lag_max_ms: 10_000,
            replication_timeout_ms: 5000,
        }
    }
}

/// A refused setting: its key under `cluster.` and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cluster.{key}: {reason}")]
pub struct InvalidClusterSetting {
    pub key: &'static str,
    pub reason: String,
}

fn bad(key: &'static str, reason: impl Into<String>) -> InvalidClusterSetting {
    InvalidClusterSetting {
        key,
        reason: reason.into(),
    }
}

fn check_address(key: &'static str, value: &Option<String>) -> Result<(), InvalidClusterSetting> {
    let Some(v) = value else { return Ok(()) };
    let (host, port) = v
        .rsplit_once(':')
        .ok_or_else(|| bad(key, format!("{v:?} is not host:port")))?;
    if host.is_empty() || v.len() > ADDRESS_MAX || port.parse::<u16>().is_err() {
        return Err(bad(key, format!("{v:?} is not host:port")));
    }
    Ok(())
}

impl ClusterConfig {
    pub fn validate(&self) -> Result<(), InvalidClusterSetting> {
        validate_node_id(self.node_id).map_err(|e| bad("node_id", e.to_string()))?;
        Keys::new(&self.name).map_err(|e| bad("name", e.to_string()))?;
        if self.etcd_endpoints.is_empty() || self.etcd_endpoints.len() > ENDPOINTS_MAX {
            return Err(bad(
                "etcd_endpoints",
                format!(
                    "1..={ENDPOINTS_MAX} endpoints, not {}",
                    self.etcd_endpoints.len()
                ),
            ));
        }
        if let Some(e) = self
            .etcd_endpoints
            .iter()
            .find(|e| !e.starts_with("http://") || e.len() > ADDRESS_MAX + 7)
        {
            return Err(bad(
                "etcd_endpoints",
                format!("{e:?}: an http:// URL (TLS to etcd is not served yet)"),
            ));
        }
        check_address("advertised_http", &self.advertised_http)?;
        check_address("advertised_replication", &self.advertised_replication)?;
        // etcd grants whole seconds; below one the renewal cadence
        // (a third of it) leaves no room for a slow request.
        if !(1000..=600_000).contains(&self.session_ttl_ms) {
            return Err(bad("session_ttl_ms", "1000..=600000"));
        }
        if !(1..=1000).contains(&self.min_insync_replicas) {
            return Err(bad("min_insync_replicas", "1..=1000"));
        }
        if !(100..=3_600_000).contains(&self.replica_lag_max_ms) {
            return Err(bad("replica_lag_max_ms", "100..=3600000"));
        }
        if !(100..=3_600_000).contains(&self.replication_timeout_ms) {
            return Err(bad("replication_timeout_ms", "100..=3600000"));
        }
        Ok(())
    }

    pub fn session_ttl(&self) -> Duration {
        Duration::from_millis(self.session_ttl_ms)
    }

    pub fn replica_lag_max(&self) -> Duration {
        Duration::from_millis(self.replica_lag_max_ms)
    }

    pub fn replication_timeout(&self) -> Duration {
        Duration::from_millis(self.replication_timeout_ms)
    }

    /// How replicas reach this node's replication listener.
    pub fn replication_address(&self) -> String {
        self.advertised_replication
            .clone()
            .unwrap_or_else(|| self.replication_listen.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass_and_each_bound_is_named() {
        ClusterConfig::default()
            .validate()
            .unwrap_or_else(|e| panic!("{e}"));
        let refused = |change: &dyn Fn(&mut ClusterConfig)| {
            let mut c = ClusterConfig::default();
            change(&mut c);
            c.validate().map_err(|e| e.key).err()
        };
        assert_eq!(refused(&|c| c.node_id = 0), Some("node_id"));
        assert_eq!(refused(&|c| c.node_id = 1001), Some("node_id"));
        assert_eq!(refused(&|c| c.name = "a/b".into()), Some("name"));
        assert_eq!(
            refused(&|c| c.etcd_endpoints.clear()),
            Some("etcd_endpoints")
        );
        assert_eq!(
            refused(&|c| c.etcd_endpoints = vec!["https://e:2379".into()]),
            Some("etcd_endpoints")
        );
        assert_eq!(
            refused(&|c| c.advertised_http = Some("nohost".into())),
            Some("advertised_http")
        );
        assert_eq!(
            refused(&|c| c.advertised_replication = Some("h:99999".into())),
            Some("advertised_replication")
        );
        assert_eq!(refused(&|c| c.session_ttl_ms = 999), Some("session_ttl_ms"));
        assert_eq!(
            refused(&|c| c.min_insync_replicas = 0),
            Some("min_insync_replicas")
        );
        assert_eq!(
            refused(&|c| c.replica_lag_max_ms = 0),
            Some("replica_lag_max_ms")
        );
        assert_eq!(
            refused(&|c| c.replication_timeout_ms = 0),
            Some("replication_timeout_ms")
        );
        assert_eq!(
            refused(&|c| c.advertised_http = Some("h:8080".into())),
            None
        );
    }

    #[test]
    fn unknown_keys_are_refused_and_absent_ones_take_the_defaults() {
        let c: ClusterConfig = serde_json::from_str(r#"{"node_id": 2}"#).unwrap();
        assert_eq!(
            c,
            ClusterConfig {
                node_id: 2,
                ..ClusterConfig::default()
            }
        );
        assert!(serde_json::from_str::<ClusterConfig>(r#"{"nodeid": 2}"#).is_err());
    }
}
