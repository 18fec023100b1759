//! The cluster's keys in etcd, all under `/tidelog/<name>/`, named here
//! and nowhere else:
//!
//! | key | value | lease |
//! |---|---|---|
//! | `nodes/<node_id>` | [`NodeInfo`](super::NodeInfo) (JSON) | the node's session |
//! | `epoch` | the current epoch (a JSON number; absent: 0) | none: it only grows |
//! | `master` | [`MasterRecord`](super::MasterRecord) (JSON) | the master's session |
//! | `insync` | [`InsyncSet`](super::InsyncSet) (JSON) | none: it outlives masters |

use crate::etcd::EtcdError;
use crate::frame::NAME_MAX;

/// The lowest and highest node id.
pub const NODE_ID_MIN: u32 = 1;
pub const NODE_ID_MAX: u32 = 1000;

/// The keys of one cluster (`cluster.name`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    /// `/tidelog/<name>/`
    root: String,
}

impl Keys {
    /// The keys of the cluster called `name`: 1 to [`NAME_MAX`] bytes of
    /// ASCII letters, digits, `.`, `_` and `-` (no `/`, which would nest
    /// one cluster's keys in another's).
    pub fn new(name: &str) -> Result<Keys, EtcdError> {
        let invalid = |reason: &str| EtcdError::InvalidArgument {
            what: "cluster name",
            reason: format!("{name:?}: {reason}"),
        };
        if name.is_empty() || name.len() > NAME_MAX {
            return Err(invalid(&format!("not 1 to {NAME_MAX} bytes")));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(invalid("only ASCII letters, digits, '.', '_' and '-'"));
        }
        Ok(Keys {
            root: format!("/tidelog/{name}/"),
        })
    }

    /// `/tidelog/<name>/`: every key of the cluster is under it.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// `/tidelog/<name>/nodes/`
    pub fn nodes(&self) -> String {
        format!("{}nodes/", self.root)
    }

    /// `/tidelog/<name>/nodes/<node_id>`
    pub fn node(&self, node_id: u32) -> String {
        format!("{}nodes/{node_id}", self.root)
    }

    /// `/tidelog/<name>/epoch`
    pub fn epoch(&self) -> String {
        format!("{}epoch", self.root)
    }

    /// `/tidelog/<name>/master`
    pub fn master(&self) -> String {
        format!("{}master", self.root)
    }

    /// `/tidelog/<name>/insync`
    pub fn insync(&self) -> String {
        format!("{}insync", self.root)
    }
}

/// `node_id` if it is in [`NODE_ID_MIN`]..=[`NODE_ID_MAX`].
pub fn validate_node_id(node_id: u32) -> Result<u32, EtcdError> {
    if !(NODE_ID_MIN..=NODE_ID_MAX).contains(&node_id) {
        return Err(EtcdError::InvalidArgument {
            what: "node id",
            reason: format!("{node_id}, outside {NODE_ID_MIN}..={NODE_ID_MAX}"),
        });
    }
    Ok(node_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_live_under_the_cluster_s_name() {
        let keys = Keys::new("tidelog").unwrap();
        assert_eq!(keys.root(), "/tidelog/tidelog/");
        assert_eq!(keys.node(7), "/tidelog/tidelog/nodes/7");
        assert!(keys.node(7).starts_with(&keys.nodes()));
        assert_eq!(keys.epoch(), "/tidelog/tidelog/epoch");
        assert_eq!(keys.master(), "/tidelog/tidelog/master");
        assert_eq!(keys.insync(), "/tidelog/tidelog/insync");
    }

    #[test]
    fn a_name_that_could_reach_another_cluster_s_keys_is_refused() {
        for bad in ["", "a/b", "a b", "é", &"x".repeat(NAME_MAX + 1)] {
            assert!(
                matches!(Keys::new(bad), Err(EtcdError::InvalidArgument { .. })),
                "{bad:?}"
            );
        }
        assert!(validate_node_id(0).is_err() && validate_node_id(1001).is_err());
        assert_eq!(validate_node_id(1000).unwrap(), 1000);
    }
}
