//! Members coming and going: a JoinGroup (a new member, a member id
//! handed out with MEMBER_ID_REQUIRED, a known member rejoining, a static
//! member restarting under a new id, which fences the old one), LeaveGroup,
//! Heartbeat, and removal (which rebalances the others).
//!
//! Invariants kept here: one member per instance id
//! (`static_members` maps each to its current member); at most
//! `GROUP_MEMBERS_MAX` members and outstanding member ids; a join is
//! checked whole (`join_checks`) before anything is stored; a removed
//! member is reported as a [`Change::MemberRemoved`] with its reason.

use super::messages::{Change, GroupState, JoinOutcome, JoinRequest, Removal};
use super::Group;
use crate::coordinator::assignor::TopicPartitions;
use crate::coordinator::config::{GroupsConfig, GROUP_MEMBERS_MAX};
use crate::coordinator::member::{Member, MemberIdSource, ProtocolKind};
use crate::error::BrokerError;

impl Group {
    /// A JoinGroup.
    pub fn join(
        &mut self,
        req: JoinRequest,
        now_ms: u64,
        config: &GroupsConfig,
        ids: &mut dyn MemberIdSource,
        topics: &dyn TopicPartitions,
    ) -> Result<JoinOutcome, BrokerError> {
        self.validate_join(&req, config)?;
        if let Some(instance) = req.instance_id.clone() {
            if let Some(existing) = self.static_members.get(&instance).cloned() {
                return match &req.member_id {
                    Some(id) if *id == existing => self.rejoin(&existing, req, now_ms, topics),
                    Some(_) => Err(BrokerError::FencedInstanceId {
                        group: self.name.clone(),
                        instance_id: instance,
                    }),
                    None => self.replace_static(&existing, req, now_ms, ids, topics),
                };
            }
            if let Some(id) = &req.member_id {
                return Err(self.unknown_member(id));
            }
            let id = self.new_member_id(&req, ids);
            return self.add_member(id, req, now_ms, config, topics);
        }
        match req.member_id.clone() {
            Some(id) if self.members.contains_key(&id) => self.rejoin(&id, req, now_ms, topics),
            Some(id) if self.pending_ids.remove(&id).is_some() => {
                self.add_member(id, req, now_ms, config, topics)
            }
            Some(id) => Err(self.unknown_member(&id)),
            None if req.require_known_member_id => {
                self.check_room()?;
                let id = self.new_member_id(&req, ids);
                self.pending_ids
                    .insert(id.clone(), now_ms.saturating_add(req.session_timeout_ms));
                Err(BrokerError::MemberIdRequired {
                    group: self.name.clone(),
                    member_id: id,
                })
            }
            None => {
                let id = self.new_member_id(&req, ids);
                self.add_member(id, req, now_ms, config, topics)
            }
        }
    }

    fn new_member_id(&self, req: &JoinRequest, ids: &mut dyn MemberIdSource) -> String {
        format!("{}-{}", req.client_id, ids.next_suffix())
    }

    fn check_room(&self) -> Result<(), BrokerError> {
        let len = self.members.len() + self.pending_ids.len();
        if len >= GROUP_MEMBERS_MAX {
            return Err(BrokerError::GroupLimit {
                what: "members of a group",
                len: len + 1,
                max: GROUP_MEMBERS_MAX,
            });
        }
        Ok(())
    }

    fn new_member(id: String, req: JoinRequest, now_ms: u64) -> Member {
        Member {
            id,
            instance_id: req.instance_id,
            client_id: req.client_id,
            host: req.host,
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: if req.rebalance_timeout_ms == 0 {
                req.session_timeout_ms
            } else {
                req.rebalance_timeout_ms
            },
            protocol: req.protocol,
            server_side: req.server_side,
            last_seen_ms: now_ms,
            awaiting_join: true,
            awaiting_sync: false,
            synced: false,
            join_result: None,
            assignment: None,
        }
    }

    fn add_member(
        &mut self,
        id: String,
        req: JoinRequest,
        now_ms: u64,
        config: &GroupsConfig,
        topics: &dyn TopicPartitions,
    ) -> Result<JoinOutcome, BrokerError> {
        self.check_room()?;
        let member = Self::new_member(id.clone(), req, now_ms);
        if let Some(instance) = &member.instance_id {
            self.static_members.insert(instance.clone(), id.clone());
        }
        self.members.insert(id.clone(), member);
        self.empty_since_ms = None;
        match self.state {
            GroupState::PreparingRebalance => {
                if let Some(delay) = &mut self.initial_delay {
                    delay.joined_since = true;
                }
            }
            _ => self.prepare_rebalance(now_ms, config.initial_rebalance_delay_ms),
        }
        self.try_complete_join(now_ms, topics);
        self.outcome(&id)
    }

    /// A known member joins again (to a rebalance, or with a new
    /// subscription).
    fn rejoin(
        &mut self,
        id: &str,
        req: JoinRequest,
        now_ms: u64,
        topics: &dyn TopicPartitions,
    ) -> Result<JoinOutcome, BrokerError> {
        let is_leader = self.leader.as_deref() == Some(id);
        let http = self.kind() == Some(ProtocolKind::Http);
        let state = self.state;
        let err = self.unknown_member(id);
        let member = self.members.get_mut(id).ok_or(err)?;
        let unchanged = member.protocol == req.protocol;
        member.last_seen_ms = now_ms;
        member.session_timeout_ms = req.session_timeout_ms;
        member.client_id = req.client_id;
        member.host = req.host;
        member.protocol = req.protocol;
        match state {
            // Kafka answers a follower's repeated join with the current
            // generation; the leader's means it wants to reassign. An HTTP
            // group has no assigning leader: the same subscription again
            // changes nothing.
            GroupState::Stable | GroupState::CompletingRebalance
                if unchanged
                    && (!is_leader || http || state == GroupState::CompletingRebalance) =>
            {
                return self.outcome(id);
            }
            GroupState::PreparingRebalance => {}
            _ => self.prepare_rebalance(now_ms, 0),
        }
        if let Some(member) = self.members.get_mut(id) {
            member.awaiting_join = true;
        }
        self.try_complete_join(now_ms, topics);
        self.outcome(id)
    }

    /// A static member restarted: a new member id takes the old one's
    /// place, and the old id is fenced.
    fn replace_static(
        &mut self,
        old_id: &str,
        req: JoinRequest,
        now_ms: u64,
        ids: &mut dyn MemberIdSource,
        topics: &dyn TopicPartitions,
    ) -> Result<JoinOutcome, BrokerError> {
        let new_id = self.new_member_id(&req, ids);
        let err = self.unknown_member(old_id);
        let old = self.members.remove(old_id).ok_or(err)?;
        let unchanged = old.protocol == req.protocol;
        let mut member = Self::new_member(new_id.clone(), req, now_ms);
        if let Some(instance) = &member.instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        self.changes.push(Change::MemberRemoved {
            member_id: old_id.to_string(),
            reason: Removal::Fenced,
        });
        if self.state == GroupState::Stable && unchanged {
            // No rebalance: the new member is the old one under a new id.
            member.awaiting_join = false;
            member.synced = old.synced;
            member.assignment = old.assignment;
            self.members.insert(new_id.clone(), member);
            let response = self.join_response(&new_id);
            if let Some(m) = self.members.get_mut(&new_id) {
                m.join_result = Some(response);
            }
            return self.outcome(&new_id);
        }
        // Otherwise it joins as any member (`new_member` is awaiting its
        // join), and a subscription change or a pending rebalance runs.
        self.members.insert(new_id.clone(), member);
        if self.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(now_ms, 0);
        }
        self.try_complete_join(now_ms, topics);
        self.outcome(&new_id)
    }

    fn outcome(&self, id: &str) -> Result<JoinOutcome, BrokerError> {
        match self.members.get(id) {
            Some(m) if m.awaiting_join => Ok(JoinOutcome::Pending {
                member_id: id.to_string(),
            }),
            Some(Member {
                join_result: Some(r),
                ..
            }) => Ok(JoinOutcome::Joined(r.clone())),
            // Removed (the window closed without it) or never answered.
            _ => Err(self.unknown_member(id)),
        }
    }

    /// What a join that returned `Pending` came to: still `Pending`, the
    /// response, or an error if the member was removed meanwhile.
    pub fn poll_join(&self, member_id: &str) -> Result<JoinOutcome, BrokerError> {
        self.outcome(member_id)
    }

    /// Removes a member from the maps only.
    pub(super) fn drop_member(&mut self, id: &str, reason: Removal) {
        if let Some(m) = self.members.remove(id) {
            if let Some(instance) = &m.instance_id {
                if self.static_members.get(instance).map(String::as_str) == Some(id) {
                    self.static_members.remove(instance);
                }
            }
            if self.leader.as_deref() == Some(id) {
                self.leader = None;
            }
            self.changes.push(Change::MemberRemoved {
                member_id: id.to_string(),
                reason,
            });
        }
    }

    /// Removes a member and rebalances the others.
    pub(super) fn remove_member(
        &mut self,
        id: &str,
        reason: Removal,
        now_ms: u64,
        topics: &dyn TopicPartitions,
    ) {
        self.drop_member(id, reason);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now_ms, 0);
                self.try_complete_join(now_ms, topics);
            }
            GroupState::PreparingRebalance => self.try_complete_join(now_ms, topics),
            // The last two are KIP-848 groups' states, never a classic
            // group's.
            GroupState::Empty
            | GroupState::Dead
            | GroupState::Assigning
            | GroupState::Reconciling => {}
        }
    }

    /// A LeaveGroup, by member id, by instance id, or both (which must
    /// agree).
    pub fn leave(
        &mut self,
        member_id: Option<&str>,
        instance_id: Option<&str>,
        now_ms: u64,
        topics: &dyn TopicPartitions,
    ) -> Result<(), BrokerError> {
        let id = match (member_id, instance_id) {
            (Some(id), instance) => self.member_checked(id, instance)?.id.clone(),
            (None, Some(instance)) => self
                .static_members
                .get(instance)
                .cloned()
                .ok_or_else(|| self.unknown_member(""))?,
            (None, None) => return Err(self.unknown_member("")),
        };
        self.remove_member(&id, Removal::Left, now_ms, topics);
        Ok(())
    }

    /// A Heartbeat: keeps the session; REBALANCE_IN_PROGRESS tells the
    /// member to rejoin.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: u32,
        now_ms: u64,
    ) -> Result<(), BrokerError> {
        let name = self.name.clone();
        let current = self.generation;
        let state = self.state;
        let member = self.member_checked(member_id, instance_id)?;
        member.last_seen_ms = now_ms;
        if generation != current {
            return Err(BrokerError::IllegalGeneration {
                group: name,
                generation,
                current,
            });
        }
        if state == GroupState::PreparingRebalance {
            return Err(BrokerError::RebalanceInProgress { group: name });
        }
        Ok(())
    }
}
