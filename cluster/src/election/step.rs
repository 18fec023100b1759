//! One step of a node's election loop: read the keys, and campaign if the
//! master key is absent and it is this node's turn. A node runs it, then
//! waits for a change under the cluster's keys after the step's revision
//! ([`EtcdClient::wait_for_change`](crate::etcd::EtcdClient::wait_for_change))
//! or until a [`Step::Waiting`] deadline, and steps again.

use std::time::Instant;

use super::campaign::{CampaignOutcome, Election, MasterTerm};
use super::eligibility::{campaign_turn, CampaignTurn};
use super::session::Session;
use super::view::MasterHeld;
use crate::etcd::{EtcdError, Revision};

/// What a step found or did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The master key is this session's: it leads `term`.
    Leading(MasterTerm),
    /// Another node (or an earlier session of this one) holds the key.
    Following(MasterHeld),
    /// This step's campaign won.
    Won(MasterTerm),
    /// This step's campaign lost: another node won, or the epoch moved.
    LostRace { holder: Option<MasterHeld> },
    /// The key is absent but another node goes first: campaign at `until`
    /// if it is still absent.
    Waiting { until: Instant },
    /// Not in the last in-sync set: this node does not campaign.
    Ineligible,
    /// The session cannot vouch for its lease now: no campaign.
    SessionNotSafe,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepResult {
    pub step: Step,
    /// The revision the step read or wrote at: wait for changes after it.
    pub revision: Revision,
}

impl Election {
    /// One step (see the module doc); `my_end` is where this node's
    /// CommitLog ends now.
    pub async fn step(&mut self, session: &Session, my_end: u64) -> Result<StepResult, EtcdError> {
        let view = self.view().await?;
        let at = |step| StepResult {
            step,
            revision: view.revision,
        };
        if let Some(master) = view.master {
            self.master_absent_since = None;
            if master.record.node_id == self.node_id && master.lease == Some(session.lease_id()) {
                return Ok(at(Step::Leading(MasterTerm {
                    node_id: self.node_id,
                    epoch: master.record.epoch,
                    create_revision: master.create_revision,
                    lease: session.lease_id(),
                })));
            }
            return Ok(at(Step::Following(master)));
        }
        let now = Instant::now();
        let absent_since = *self.master_absent_since.get_or_insert(now);
        match campaign_turn(self.node_id, my_end, &view.nodes, view.insync.as_ref()) {
            CampaignTurn::Never => return Ok(at(Step::Ineligible)),
            CampaignTurn::AfterGrace if now < absent_since + self.grace => {
                return Ok(at(Step::Waiting {
                    until: absent_since + self.grace,
                }));
            }
            CampaignTurn::AfterGrace | CampaignTurn::Now => {}
        }
        if !session.is_safe_now() {
            return Ok(at(Step::SessionNotSafe));
        }
        Ok(match self.campaign(session, view.epoch).await? {
            CampaignOutcome::Won(term) => StepResult {
                step: Step::Won(term),
                revision: term.create_revision,
            },
            CampaignOutcome::Lost {
                holder, revision, ..
            } => StepResult {
                step: Step::LostRace { holder },
                revision,
            },
        })
    }
}
