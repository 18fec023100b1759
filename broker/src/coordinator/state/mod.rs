//! One consumer group's state machine: Kafka's classic group protocol.
//!
//! ```text
//!            join                 join window closes        leader's sync (Kafka groups)
//!   Empty ─────────▶ PreparingRebalance ─────────▶ CompletingRebalance ─────────▶ Stable
//!     ▲                  ▲    │  (HTTP groups: assigned here, straight to Stable) │
//!     │ last member gone │    └──────────────────────────────────────────────────▶│
//!     └──────────────────┴── member joins, leaves, expires, changes subscription ─┘
//! ```
//! (`Dead` is a deleted group: it is removed from the coordinator.)
//!
//! Invariants, checked by the model test in `super::tests`:
//! * The generation only grows: each closed join window adds one, also when
//!   it leaves the group empty.
//! * Every member holds an assignment of the current generation or none
//!   (assignments are cleared when a rebalance starts), so within a
//!   generation each partition has at most one owner; once the group is
//!   Stable every subscribed partition of a known topic has exactly one.
//! * A join window closes when every member rejoined (and no member id
//!   handed out with MEMBER_ID_REQUIRED is outstanding), or at its
//!   deadline; members that did not rejoin are removed then. The first
//!   window of an empty group only closes at the initial delay, extended
//!   while new members keep coming, up to the rebalance timeout.
//! * Server-side members (HTTP consumer instances, which the server runs
//!   itself) rejoin on their own behalf when a rebalance starts: a group of
//!   them closes its window as soon as it opens (after the initial delay
//!   of an empty group), and none is ever removed for missing it.
//! * Sessions: a member not waiting on a join or a sync is removed
//!   `session_timeout_ms` after it was last seen; one waiting is kept until
//!   the window's deadline decides (Kafka's `shouldKeepAlive`).
//! * Static members: one member per instance id. A join with a known
//!   instance id and no member id replaces the old member (new member id,
//!   the old one fenced); when the group is Stable and the subscription is
//!   unchanged it takes over the old member's assignment without a
//!   rebalance.
//!
//! Nothing here reads a clock or sleeps: every call gets `now_ms`, and
//! [`Group::tick`] applies the deadlines that passed. What changed is
//! pushed to [`Group::take_changes`], which the coordinator hands on.
//!
//! The group's parts, one concern a file, each an `impl Group` over the
//! fields declared here (private to this module and the files below it):
//! * [`messages`]: what a group is asked and answers: join and sync
//!   requests and outcomes, commit origins, changes, snapshots.
//! * `join_checks`: the bounds of a join, that a joiner agrees with the
//!   group's protocols, and the protocol a generation selects.
//! * `membership`: members coming and going: join, rejoin, a static
//!   member's replacement, leave, heartbeat, removal.
//! * `rebalance`: the join window, the generation, HTTP groups'
//!   assignment, SyncGroup, and the deadlines [`Group::tick`] applies.
//! * [`offsets`]: who may commit now, and when a group's offsets expire.
//!
//! This file holds the group itself, its accessors and the checks every
//! part shares.

mod join_checks;
mod membership;
pub mod messages;
pub mod offsets;
mod rebalance;

use std::collections::BTreeMap;

use self::messages::{Change, GroupSnapshot, GroupState, GroupType, MemberSnapshot};
use super::member::{Member, MemberProtocol, ProtocolKind};
use crate::error::BrokerError;

/// The first join window of an empty group (Kafka's InitialDelayedJoin).
#[derive(Debug, Clone)]
struct InitialDelay {
    /// The window never stays open past this.
    limit_ms: u64,
    /// A member joined since the delay was last (re)started.
    joined_since: bool,
}

/// One group.
#[derive(Debug)]
pub struct Group {
    name: String,
    state: GroupState,
    generation: u32,
    /// The selected protocol of the current generation.
    protocol_name: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Instance id → member id.
    static_members: BTreeMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED → when they lapse.
    pending_ids: BTreeMap<String, u64>,
    join_deadline_ms: Option<u64>,
    initial_delay: Option<InitialDelay>,
    sync_deadline_ms: Option<u64>,
    /// When the group last became empty; `None` while it has members.
    empty_since_ms: Option<u64>,
    rebalances: u64,
    changes: Vec<Change>,
}

/// The ids of the members `f` picks.
fn ids_where(members: &BTreeMap<String, Member>, f: impl Fn(&Member) -> bool) -> Vec<String> {
    members
        .values()
        .filter(|m| f(m))
        .map(|m| m.id.clone())
        .collect()
}

impl Group {
    pub fn new(name: &str, now_ms: u64) -> Self {
        Group {
            name: name.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_ids: BTreeMap::new(),
            join_deadline_ms: None,
            initial_delay: None,
            sync_deadline_ms: None,
            empty_since_ms: Some(now_ms),
            rebalances: 0,
            changes: Vec::new(),
        }
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn generation(&self) -> u32 {
        self.generation
    }

    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// The bytes the group's members hold that clients chose the size of
    /// (`Member::held_bytes`): what `groups.max_member_metadata_bytes`
    /// bounds over all groups.
    pub fn member_bytes(&self) -> usize {
        self.members.values().map(Member::held_bytes).sum()
    }

    /// [`Group::member_bytes`] of one member, `0` if it is not one.
    pub fn member_bytes_of(&self, member_id: &str) -> usize {
        self.members.get(member_id).map_or(0, Member::held_bytes)
    }

    /// Rebalances started since the group was created.
    pub fn rebalances(&self) -> u64 {
        self.rebalances
    }

    pub fn empty_since_ms(&self) -> Option<u64> {
        self.empty_since_ms
    }

    /// The kind of the group's members, `None` without members.
    pub fn kind(&self) -> Option<ProtocolKind> {
        self.members.values().next().map(|m| m.protocol.kind())
    }

    pub fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changes)
    }

    fn unknown_member(&self, member_id: &str) -> BrokerError {
        BrokerError::UnknownMember {
            group: self.name.clone(),
            member_id: member_id.to_string(),
        }
    }

    /// The member `member_id`, checking that a static member's instance id
    /// still maps to it.
    fn member_checked(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<&mut Member, BrokerError> {
        if let Some(instance) = instance_id {
            if self.static_members.get(instance).map(String::as_str) != Some(member_id) {
                return Err(match self.static_members.get(instance) {
                    Some(_) => BrokerError::FencedInstanceId {
                        group: self.name.clone(),
                        instance_id: instance.to_string(),
                    },
                    None => self.unknown_member(member_id),
                });
            }
        }
        let err = self.unknown_member(member_id);
        self.members.get_mut(member_id).ok_or(err)
    }

    fn check_generation(&self, generation: u32) -> Result<(), BrokerError> {
        if generation != self.generation {
            return Err(BrokerError::IllegalGeneration {
                group: self.name.clone(),
                generation,
                current: self.generation,
            });
        }
        Ok(())
    }

    fn inconsistent(&self, reason: String) -> BrokerError {
        BrokerError::InconsistentGroupProtocol {
            group: self.name.clone(),
            reason,
        }
    }

    /// The earliest time [`Group::tick`] has something to do.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        let sessions = self
            .members
            .values()
            .filter(|m| !m.awaiting_join && !m.awaiting_sync)
            .map(|m| m.last_seen_ms.saturating_add(m.session_timeout_ms));
        sessions
            .chain(self.pending_ids.values().copied())
            .chain(self.join_deadline_ms)
            .chain(self.sync_deadline_ms)
            .min()
    }

    pub fn snapshot(&self) -> GroupSnapshot {
        GroupSnapshot {
            group: self.name.clone(),
            group_type: GroupType::Classic,
            state: self.state,
            kind: self.kind(),
            protocol: self.protocol_name.clone(),
            generation: self.generation,
            leader: self.leader.clone(),
            members: self
                .members
                .values()
                .map(|m| MemberSnapshot {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    host: m.host.clone(),
                    subscription: match &m.protocol {
                        MemberProtocol::Http { topics, .. } => topics.clone(),
                        MemberProtocol::Kafka { .. } => Vec::new(),
                    },
                    assignment: m.assignment.clone(),
                    protocol: m.protocol.clone(),
                })
                .collect(),
        }
    }

    pub(crate) fn mark_dead(&mut self) {
        self.state = GroupState::Dead;
    }
}
