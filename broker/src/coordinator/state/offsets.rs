//! A group's part in offsets: whether a commit may land now (a member of
//! the current generation, not while the group waits for its leader's
//! assignment; a commit without membership only while the group has no
//! members), and the expiry rule of committed offsets. The offsets
//! themselves live in `crate::groups`.

use super::messages::{CommitOrigin, GroupState};
use super::Group;
use crate::error::BrokerError;

impl Group {
    /// Whether a commit may land (API.md: otherwise 409/40903). As in
    /// Kafka, a member of the current generation may commit while the next
    /// join window is open (it commits what it read before rejoining), not
    /// while the group waits for the leader's assignment.
    pub fn validate_commit(
        &mut self,
        origin: CommitOrigin<'_>,
        now_ms: u64,
    ) -> Result<(), BrokerError> {
        match origin {
            CommitOrigin::Stateless => {
                if self.members.is_empty() {
                    Ok(())
                } else {
                    Err(BrokerError::GroupHasMembers {
                        group: self.name.clone(),
                        members: self.members.len(),
                    })
                }
            }
            CommitOrigin::Member {
                member_id,
                instance_id,
                generation,
            } => {
                self.member_checked(member_id, instance_id)?;
                self.check_generation(generation)?;
                if self.state == GroupState::CompletingRebalance {
                    return Err(BrokerError::RebalanceInProgress {
                        group: self.name.clone(),
                    });
                }
                if let Some(m) = self.members.get_mut(member_id) {
                    m.last_seen_ms = now_ms;
                }
                Ok(())
            }
        }
    }
}

/// Offsets expiry (Kafka's KIP-211 rule): a group without members loses
/// its committed offsets `retention_ms` after its last commit or after it
/// became empty, whichever is later, so a group whose members were reading
/// an idle topic does not lose its offsets the moment they leave. A pure
/// function, so the store of offsets decides when to ask.
pub fn offsets_expired(
    members: usize,
    last_commit_ms: u64,
    empty_since_ms: u64,
    now_ms: u64,
    retention_ms: u64,
) -> bool {
    members == 0
        && now_ms
            >= last_commit_ms
                .max(empty_since_ms)
                .saturating_add(retention_ms)
}
