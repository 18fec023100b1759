//! One consistent read of the cluster's election keys: the live nodes, the
//! epoch, the master and the in-sync set, at one revision (a txn of gets).

use super::keys::{validate_node_id, Keys};
use super::records::{decode, InsyncSet, MasterRecord, NodeInfo};
use crate::etcd::{EtcdClient, EtcdError, KeyValue, LeaseId, Op, OpResponse, Revision, Txn};

/// The epoch key as read: its value (0 when absent) and its mod revision
/// (0 when absent), which a campaign compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochSeen {
    pub epoch: u64,
    pub mod_revision: Revision,
}

/// The master key as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MasterHeld {
    pub record: MasterRecord,
    /// Identifies this holding of the key: a later master's key is a new
    /// key with a new create revision.
    pub create_revision: Revision,
    pub lease: Option<LeaseId>,
}

/// The election keys at one revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterView {
    pub revision: Revision,
    /// Live nodes (their sessions hold their entries), by key order.
    pub nodes: Vec<NodeInfo>,
    pub epoch: EpochSeen,
    pub master: Option<MasterHeld>,
    pub insync: Option<InsyncSet>,
}

pub(crate) fn epoch_seen(kv: Option<&KeyValue>) -> Result<EpochSeen, EtcdError> {
    Ok(match kv {
        None => EpochSeen {
            epoch: 0,
            mod_revision: Revision(0),
        },
        Some(kv) => EpochSeen {
            epoch: decode::<u64>(&kv.key, &kv.value, |_| Ok(()))?,
            mod_revision: kv.mod_revision,
        },
    })
}

pub(crate) fn master_held(kv: Option<&KeyValue>) -> Result<Option<MasterHeld>, EtcdError> {
    kv.map(|kv| {
        Ok(MasterHeld {
            record: decode(&kv.key, &kv.value, MasterRecord::validate)?,
            create_revision: kv.create_revision,
            lease: kv.lease,
        })
    })
    .transpose()
}

pub(crate) fn insync_set(kv: Option<&KeyValue>) -> Result<Option<InsyncSet>, EtcdError> {
    kv.map(|kv| decode(&kv.key, &kv.value, InsyncSet::validate))
        .transpose()
}

fn node_info(keys: &Keys, kv: &KeyValue) -> Result<NodeInfo, EtcdError> {
    let info: NodeInfo = decode(&kv.key, &kv.value, NodeInfo::validate)?;
    let expected = keys.node(validate_node_id(info.node_id)?);
    if kv.key != expected.as_bytes() {
        return Err(EtcdError::BadValue {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            reason: format!(
                "the entry of node {} under another node's key",
                info.node_id
            ),
        });
    }
    Ok(info)
}

/// Reads the election keys in one txn.
pub async fn read_view(client: &EtcdClient, keys: &Keys) -> Result<ClusterView, EtcdError> {
    let txn = Txn::new()
        .and_then(Op::get_prefix(keys.nodes().as_bytes()))
        .and_then(Op::get(keys.epoch().as_bytes()))
        .and_then(Op::get(keys.master().as_bytes()))
        .and_then(Op::get(keys.insync().as_bytes()));
    let answer = client.txn(&txn).await?;
    let mut gets = answer.responses.into_iter().map(|r| match r {
        OpResponse::Get { kvs } => kvs,
        // txn() matched every answer to its operation's kind.
        OpResponse::Put | OpResponse::Delete { .. } => Vec::new(),
    });
    let mut next = || gets.next().unwrap_or_default();
    let (nodes, epoch, master, insync) = (next(), next(), next(), next());
    Ok(ClusterView {
        revision: answer.revision,
        nodes: nodes
            .iter()
            .map(|kv| node_info(keys, kv))
            .collect::<Result<_, _>>()?,
        epoch: epoch_seen(epoch.first())?,
        master: master_held(master.first())?,
        insync: insync_set(insync.first())?,
    })
}
