//! The election's writes: the campaign (master key and next epoch in one
//! txn) and the master's changes of the in-sync set.

use std::time::{Duration, Instant};

use super::keys::{validate_node_id, Keys};
use super::records::{encode, InsyncSet, MasterRecord};
use super::session::Session;
use super::view::{
    epoch_seen, insync_set, master_held, read_view, ClusterView, EpochSeen, MasterHeld,
};
use crate::etcd::{
    Compare, CompareOp, EtcdClient, EtcdError, LeaseId, Op, OpResponse, Revision, Txn,
};

/// How long a node that is not first in line waits, by default, before it
/// campaigns for a master key still absent.
pub const CAMPAIGN_GRACE: Duration = Duration::from_secs(2);

/// A won election: who, which epoch, and the master key it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MasterTerm {
    pub node_id: u32,
    pub epoch: u64,
    /// The master key's create revision (the winning txn's revision): what
    /// the master's later writes compare to prove the key is still its own.
    pub create_revision: Revision,
    pub lease: LeaseId,
}

/// A campaign's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CampaignOutcome {
    Won(MasterTerm),
    /// The master key was taken or the epoch moved since it was read: who
    /// holds the key now (if anyone) and the epoch, at `revision`.
    Lost {
        holder: Option<MasterHeld>,
        epoch: EpochSeen,
        revision: Revision,
    },
}

/// A master's change of the in-sync set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsyncChange {
    Written {
        revision: Revision,
    },
    /// The master key is no longer the term's: nothing was written.
    Deposed,
}

/// One node's side of the election (see the module doc of
/// [`crate::election`]).
#[derive(Debug)]
pub struct Election {
    pub(super) client: EtcdClient,
    pub(super) keys: Keys,
    pub(super) node_id: u32,
    pub(super) grace: Duration,
    /// When this node first saw the master key absent, since it last saw
    /// it held: the grace period runs from there.
    pub(super) master_absent_since: Option<Instant>,
}

impl Election {
    pub fn new(
        client: EtcdClient,
        keys: Keys,
        node_id: u32,
        grace: Duration,
    ) -> Result<Election, EtcdError> {
        Ok(Election {
            client,
            keys,
            node_id: validate_node_id(node_id)?,
            grace,
            master_absent_since: None,
        })
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The election keys at one revision.
    pub async fn view(&self) -> Result<ClusterView, EtcdError> {
        read_view(&self.client, &self.keys).await
    }

    /// The in-sync set, if a master wrote one.
    pub async fn insync(&self) -> Result<Option<InsyncSet>, EtcdError> {
        let key = self.keys.insync();
        insync_set(self.client.get(key.as_bytes()).await?.kv.as_ref())
    }

    /// Campaigns once: one txn that, only if the master key is absent and
    /// the epoch key unchanged since `seen` was read, puts the master key
    /// (`{node_id, epoch}` under the session's lease) and the epoch
    /// `seen.epoch + 1`. Refused unless the session is safely held now.
    pub async fn campaign(
        &self,
        session: &Session,
        seen: EpochSeen,
    ) -> Result<CampaignOutcome, EtcdError> {
        if session.node_id() != self.node_id {
            return Err(EtcdError::InvalidArgument {
                what: "session",
                reason: format!(
                    "node {}'s session in node {}'s election",
                    session.node_id(),
                    self.node_id
                ),
            });
        }
        if !session.is_safe_now() {
            return Err(EtcdError::SessionNotHeld {
                node_id: self.node_id,
                lease: session.lease_id(),
            });
        }
        let epoch = seen
            .epoch
            .checked_add(1)
            .ok_or_else(|| EtcdError::BadValue {
                key: self.keys.epoch(),
                reason: "the epoch cannot grow past u64::MAX".into(),
            })?;
        let (master_key, epoch_key) = (self.keys.master(), self.keys.epoch());
        let record = MasterRecord {
            node_id: self.node_id,
            epoch,
        };
        let master_value = encode(&master_key, &record, MasterRecord::validate)?;
        let lease = session.lease_id();
        let txn = Txn::new()
            .when(Compare::create_revision(
                master_key.as_bytes(),
                CompareOp::Equal,
                Revision(0),
            ))
            .when(Compare::mod_revision(
                epoch_key.as_bytes(),
                CompareOp::Equal,
                seen.mod_revision,
            ))
            .and_then(Op::put(master_key.as_bytes(), &master_value, Some(lease)))
            .and_then(Op::put(
                epoch_key.as_bytes(),
                epoch.to_string().as_bytes(),
                None,
            ))
            .or_else(Op::get(master_key.as_bytes()))
            .or_else(Op::get(epoch_key.as_bytes()));
        let answer = self.client.txn(&txn).await?;
        if answer.succeeded {
            return Ok(CampaignOutcome::Won(MasterTerm {
                node_id: self.node_id,
                epoch,
                create_revision: answer.revision,
                lease,
            }));
        }
        let mut gets = answer.responses.iter().map(|r| match r {
            OpResponse::Get { kvs } => kvs.first(),
            OpResponse::Put | OpResponse::Delete { .. } => None,
        });
        let (master, epoch) = (gets.next().flatten(), gets.next().flatten());
        Ok(CampaignOutcome::Lost {
            holder: master_held(master)?,
            epoch: epoch_seen(epoch)?,
            revision: answer.revision,
        })
    }

    /// The master of `term` replaces the in-sync set with `nodes` (which
    /// must hold the master itself). One txn, written only if the master
    /// key is still the term's: same create revision (a later master's
    /// key is a new key) and same value (nobody rewrote it in place).
    pub async fn change_insync(
        &self,
        term: &MasterTerm,
        nodes: &[u32],
    ) -> Result<InsyncChange, EtcdError> {
        let mut nodes = nodes.to_vec();
        nodes.sort_unstable();
        nodes.dedup();
        if !nodes.contains(&term.node_id) {
            return Err(EtcdError::InvalidArgument {
                what: "in-sync set",
                reason: format!("{nodes:?} without its master, node {}", term.node_id),
            });
        }
        let (master_key, insync_key) = (self.keys.master(), self.keys.insync());
        let set = InsyncSet {
            epoch: term.epoch,
            nodes,
        };
        let value = encode(&insync_key, &set, InsyncSet::validate)?;
        let record = MasterRecord {
            node_id: term.node_id,
            epoch: term.epoch,
        };
        let master_value = encode(&master_key, &record, MasterRecord::validate)?;
        let txn = Txn::new()
            .when(Compare::create_revision(
                master_key.as_bytes(),
                CompareOp::Equal,
                term.create_revision,
            ))
            .when(Compare::value(
                master_key.as_bytes(),
                CompareOp::Equal,
                &master_value,
            ))
            .and_then(Op::put(insync_key.as_bytes(), &value, None));
        let answer = self.client.txn(&txn).await?;
        Ok(if answer.succeeded {
            InsyncChange::Written {
                revision: answer.revision,
            }
        } else {
            InsyncChange::Deposed
        })
    }
}
