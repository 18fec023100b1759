//! The rebalance: a join window opens (`prepare_rebalance`), closes when
//! every member rejoined or at its deadline (`complete_join`: the
//! generation moves on, members that missed it are removed, a leader and a
//! protocol are chosen, an HTTP group is assigned by the server and Stable
//! at once), and a Kafka group waits in CompletingRebalance for its
//! leader's SyncGroup. [`Group::tick`] applies the deadlines that passed:
//! lapsed member ids, expired sessions, the join window, the sync.
//!
//! Invariants kept here: the generation only grows, by one per closed
//! window; assignments are cleared when a window opens, so within a
//! generation each partition has at most one owner; server-side members
//! rejoin on their own behalf when a window opens.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::messages::{Change, GroupState, JoinResponse, JoinedMember, Removal, SyncOutcome};
use super::{ids_where, Group, InitialDelay};
use crate::coordinator::assignor::{self, Subscriber, TopicPartitions};
use crate::coordinator::config::{
    check_len, GroupsConfig, ASSIGNMENT_MAX_BYTES, GROUP_MEMBERS_MAX, MEMBER_ID_MAX_BYTES,
};
use crate::coordinator::member::{MemberAssignment, MemberProtocol, ProtocolKind};
use crate::error::BrokerError;

impl Group {
    /// How long a rebalance step waits: the longest of the members'
    /// rebalance timeouts, as in Kafka.
    fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Starts a join window. `initial_delay_ms` is used only for the first
    /// window of an empty group.
    pub(super) fn prepare_rebalance(&mut self, now_ms: u64, initial_delay_ms: u64) {
        let limit_ms = now_ms.saturating_add(self.rebalance_timeout_ms());
        if self.state == GroupState::Empty && initial_delay_ms > 0 {
            self.initial_delay = Some(InitialDelay {
                limit_ms,
                joined_since: false,
            });
            self.join_deadline_ms = Some(now_ms.saturating_add(initial_delay_ms).min(limit_ms));
        } else {
            self.initial_delay = None;
            self.join_deadline_ms = Some(limit_ms);
        }
        self.state = GroupState::PreparingRebalance;
        self.sync_deadline_ms = None;
        for m in self.members.values_mut() {
            m.awaiting_sync = false;
            m.synced = false;
            m.assignment = None;
            // Server-side members (HTTP consumer instances) rejoin at once,
            // on their own behalf, so an instance that is not in a records
            // call neither holds the window open nor misses it.
            if m.server_side {
                m.awaiting_join = true;
            }
        }
        self.rebalances += 1;
        self.changes.push(Change::RebalanceStarted);
    }

    /// Closes the join window early when nobody is missing (never during
    /// the initial delay, which waits for more members on purpose).
    pub(super) fn try_complete_join(&mut self, now_ms: u64, topics: &dyn TopicPartitions) {
        if self.state == GroupState::PreparingRebalance
            && self.initial_delay.is_none()
            && self.pending_ids.is_empty()
            && self.members.values().all(|m| m.awaiting_join)
        {
            self.complete_join(now_ms, topics);
        }
    }

    /// Closes the join window: members that did not rejoin are removed,
    /// the generation moves on, a leader and a protocol are chosen, and an
    /// HTTP group is assigned.
    fn complete_join(&mut self, now_ms: u64, topics: &dyn TopicPartitions) {
        for id in ids_where(&self.members, |m| !m.awaiting_join) {
            self.drop_member(&id, Removal::MissedRebalance);
        }
        self.join_deadline_ms = None;
        self.initial_delay = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.become_empty(now_ms);
            return;
        }
        self.protocol_name = self.select_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        let http = self.kind() == Some(ProtocolKind::Http);
        if http {
            self.assign_http(topics);
        }
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in &ids {
            let response = self.join_response(id);
            if let Some(m) = self.members.get_mut(id) {
                m.awaiting_join = false;
                m.last_seen_ms = now_ms;
                m.synced = http;
                m.join_result = Some(response);
            }
        }
        self.changes.push(Change::JoinCompleted {
            generation: self.generation,
        });
        if http {
            self.state = GroupState::Stable;
            self.changes.push(Change::Stable {
                generation: self.generation,
            });
        } else {
            self.state = GroupState::CompletingRebalance;
            self.sync_deadline_ms = Some(now_ms.saturating_add(self.rebalance_timeout_ms()));
        }
    }

    fn assign_http(&mut self, topics: &dyn TopicPartitions) {
        let Some(MemberProtocol::Http { assignor, .. }) =
            self.members.values().next().map(|m| &m.protocol)
        else {
            return;
        };
        let subscribers: Vec<Subscriber<'_>> = self
            .members
            .values()
            .filter_map(|m| match &m.protocol {
                MemberProtocol::Http { topics, .. } => Some(Subscriber {
                    member_id: &m.id,
                    instance_id: m.instance_id.as_deref(),
                    topics,
                }),
                MemberProtocol::Kafka { .. } => None,
            })
            .collect();
        let mut assignment = assignor::assign(*assignor, &subscribers, topics);
        for m in self.members.values_mut() {
            let owned = assignment.remove(&m.id).unwrap_or_default();
            m.assignment = Some(MemberAssignment::Partitions(owned));
        }
    }

    pub(super) fn join_response(&self, id: &str) -> JoinResponse {
        let leader_id = self.leader.clone().unwrap_or_default();
        let protocol_name = self.protocol_name.clone().unwrap_or_default();
        let kafka = self.kind() == Some(ProtocolKind::Kafka);
        let members = if kafka && leader_id == id {
            self.members
                .values()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: match &m.protocol {
                        MemberProtocol::Kafka { protocols, .. } => protocols
                            .iter()
                            .find(|(n, _)| *n == protocol_name)
                            .map(|(_, meta)| meta.clone())
                            .unwrap_or_default(),
                        MemberProtocol::Http { .. } => Bytes::new(),
                    },
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinResponse {
            generation: self.generation,
            protocol_name,
            leader_id,
            member_id: id.to_string(),
            members,
            assignment: if kafka {
                None
            } else {
                self.members.get(id).and_then(|m| m.assignment.clone())
            },
        }
    }

    fn become_empty(&mut self, now_ms: u64) {
        self.state = GroupState::Empty;
        self.protocol_name = None;
        self.leader = None;
        self.join_deadline_ms = None;
        self.sync_deadline_ms = None;
        self.initial_delay = None;
        self.empty_since_ms = Some(now_ms);
        self.changes.push(Change::Empty {
            generation: self.generation,
        });
    }

    /// Forces a rebalance (a subscribed topic gained partitions, a pattern
    /// matched a new topic); an HTTP group completes it at once.
    pub fn request_rebalance(&mut self, now_ms: u64, topics: &dyn TopicPartitions) {
        if matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance
        ) {
            self.prepare_rebalance(now_ms, 0);
            self.try_complete_join(now_ms, topics);
        }
    }

    /// Applies every deadline up to `now_ms`: lapsed member ids, expired
    /// sessions, the join window's and the sync's deadlines.
    pub fn tick(&mut self, now_ms: u64, config: &GroupsConfig, topics: &dyn TopicPartitions) {
        self.pending_ids.retain(|_, lapse_ms| *lapse_ms > now_ms);
        for id in ids_where(&self.members, |m| m.session_expired(now_ms)) {
            self.remove_member(&id, Removal::SessionExpired, now_ms, topics);
        }
        if self.state == GroupState::PreparingRebalance
            && self.join_deadline_ms.is_some_and(|d| d <= now_ms)
        {
            match &mut self.initial_delay {
                Some(delay) if delay.joined_since && now_ms < delay.limit_ms => {
                    delay.joined_since = false;
                    self.join_deadline_ms = Some(
                        now_ms
                            .saturating_add(config.initial_rebalance_delay_ms)
                            .min(delay.limit_ms),
                    );
                }
                _ => self.complete_join(now_ms, topics),
            }
        }
        // A lapsed member id may have been all the window waited for.
        self.try_complete_join(now_ms, topics);
        if self.state == GroupState::CompletingRebalance
            && self.sync_deadline_ms.is_some_and(|d| d <= now_ms)
        {
            for id in ids_where(&self.members, |m| !m.synced) {
                self.remove_member(&id, Removal::MissedSync, now_ms, topics);
            }
        }
    }

    /// A SyncGroup. The leader of a Kafka group sends every member's
    /// assignment (`assignments`; members it leaves out get empty bytes,
    /// ids not in the group are ignored, as Kafka does); followers wait for
    /// it. In an HTTP group it answers the member's assignment at once.
    pub fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: u32,
        assignments: Option<Vec<(String, Bytes)>>,
        now_ms: u64,
    ) -> Result<SyncOutcome, BrokerError> {
        if let Some(list) = &assignments {
            check_len("assignments in a sync", list.len(), GROUP_MEMBERS_MAX)?;
            for (id, bytes) in list {
                check_len("member id length", id.len(), MEMBER_ID_MAX_BYTES)?;
                check_len("assignment bytes", bytes.len(), ASSIGNMENT_MAX_BYTES)?;
            }
        }
        self.member_checked(member_id, instance_id)?.last_seen_ms = now_ms;
        self.check_generation(generation)?;
        match self.state {
            GroupState::PreparingRebalance => Err(BrokerError::RebalanceInProgress {
                group: self.name.clone(),
            }),
            GroupState::Stable => self.poll_sync(member_id, generation),
            GroupState::CompletingRebalance => {
                if self.leader.as_deref() != Some(member_id) {
                    if let Some(m) = self.members.get_mut(member_id) {
                        m.synced = true;
                        m.awaiting_sync = true;
                    }
                    return Ok(SyncOutcome::Pending);
                }
                let mut given: BTreeMap<String, Bytes> =
                    assignments.unwrap_or_default().into_iter().collect();
                for m in self.members.values_mut() {
                    let bytes = given.remove(&m.id).unwrap_or_default();
                    m.assignment = Some(MemberAssignment::Opaque(bytes));
                    m.awaiting_sync = false;
                }
                if let Some(m) = self.members.get_mut(member_id) {
                    m.synced = true;
                }
                self.sync_deadline_ms = None;
                self.state = GroupState::Stable;
                self.changes.push(Change::Stable {
                    generation: self.generation,
                });
                self.poll_sync(member_id, generation)
            }
            // The last two are KIP-848 groups' states, never a classic
            // group's.
            GroupState::Empty
            | GroupState::Dead
            | GroupState::Assigning
            | GroupState::Reconciling => Err(self.unknown_member(member_id)),
        }
    }

    /// What a sync that returned `Pending` came to.
    pub fn poll_sync(&self, member_id: &str, generation: u32) -> Result<SyncOutcome, BrokerError> {
        let member = self
            .members
            .get(member_id)
            .ok_or_else(|| self.unknown_member(member_id))?;
        if member.awaiting_sync {
            return Ok(SyncOutcome::Pending);
        }
        self.check_generation(generation)?;
        match (&self.state, &member.assignment) {
            (GroupState::Stable, Some(a)) => Ok(SyncOutcome::Synced(a.clone())),
            _ => Err(BrokerError::RebalanceInProgress {
                group: self.name.clone(),
            }),
        }
    }
}
