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

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::assignor::{self, Subscriber, TopicPartitions};
use super::config::{
    check_len, GroupsConfig, ASSIGNMENT_MAX_BYTES, CLIENT_TEXT_MAX_BYTES, GROUP_MEMBERS_MAX,
    INSTANCE_ID_MAX_BYTES, MEMBER_ID_MAX_BYTES, MEMBER_METADATA_MAX_BYTES,
    PROTOCOLS_PER_MEMBER_MAX, PROTOCOL_METADATA_MAX_BYTES, SUBSCRIPTION_TOPICS_MAX,
};
use super::member::{Member, MemberAssignment, MemberIdSource, MemberProtocol, ProtocolKind};
use crate::error::BrokerError;
use crate::names;

/// Kafka's group states (DescribeGroups spells them this way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// A JoinGroup, from an HTTP instance or a Kafka member.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// `None` for a new member (the coordinator makes one up).
    pub member_id: Option<String>,
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    pub session_timeout_ms: u64,
    /// How long a rebalance waits for this member to rejoin; 0 means the
    /// session timeout (JoinGroup v0 has none).
    pub rebalance_timeout_ms: u64,
    pub protocol: MemberProtocol,
    /// JoinGroup v4+: a new dynamic member is answered MEMBER_ID_REQUIRED
    /// with its id and must join again with it.
    pub require_known_member_id: bool,
    /// A member the server runs itself (an HTTP consumer instance,
    /// `crate::consumers`; HTTP protocol only): it rejoins on its own
    /// behalf whenever a rebalance starts, and its session timeout is the
    /// server's, not bounded by `groups.min/max_session_timeout_ms`.
    pub server_side: bool,
}

/// A member and its metadata for the selected protocol, as the leader sees
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

/// What a completed join answers one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    pub generation: u32,
    /// The selected protocol: the assignor's name in an HTTP group.
    pub protocol_name: String,
    pub leader_id: String,
    pub member_id: String,
    /// Every member, for the leader of a Kafka group; empty otherwise.
    pub members: Vec<JoinedMember>,
    /// HTTP groups are assigned when the window closes: this member's part.
    pub assignment: Option<MemberAssignment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinOutcome {
    Joined(JoinResponse),
    /// The join window is open: wait for a change of the group, then poll.
    Pending {
        member_id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncOutcome {
    Synced(MemberAssignment),
    /// A follower of a Kafka group waiting for the leader's assignment.
    Pending,
}

/// Who commits offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOrigin<'a> {
    /// A member of the group (HTTP instance, Kafka OffsetCommit with a
    /// generation).
    Member {
        member_id: &'a str,
        instance_id: Option<&'a str>,
        generation: u32,
    },
    /// The ext offsets route, or a Kafka commit with generation −1: only
    /// while the group has no members.
    Stateless,
}

/// Why a member left the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    Left,
    SessionExpired,
    /// Did not rejoin before the join window closed.
    MissedRebalance,
    /// Did not sync before the rebalance timeout (Kafka groups).
    MissedSync,
    /// A static member replaced by a new member with the same instance id.
    Fenced,
}

/// What changed in a group, for metrics, logs and waking waiters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    MemberRemoved {
        member_id: String,
        reason: Removal,
    },
    RebalanceStarted,
    /// The join window closed; HTTP groups are Stable at once.
    JoinCompleted {
        generation: u32,
    },
    Stable {
        generation: u32,
    },
    Empty {
        generation: u32,
    },
}

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

    /// Every bound of a join request, before anything is stored.
    fn validate_join(&self, req: &JoinRequest, config: &GroupsConfig) -> Result<(), BrokerError> {
        check_len(
            "client id length",
            req.client_id.len(),
            CLIENT_TEXT_MAX_BYTES,
        )?;
        check_len("host length", req.host.len(), CLIENT_TEXT_MAX_BYTES)?;
        if let Some(id) = &req.member_id {
            check_len("member id length", id.len(), MEMBER_ID_MAX_BYTES)?;
        }
        if let Some(id) = &req.instance_id {
            check_len("group instance id length", id.len(), INSTANCE_ID_MAX_BYTES)?;
            if id.is_empty() {
                return Err(BrokerError::GroupInstanceIdEmpty);
            }
        }
        // The bounds are on what clients ask for; a server-side member's
        // session is the server's `http.consumer_instance_timeout_ms`
        // (plus a grace, `crate::consumers`), which its own check bounds.
        if req.server_side && req.protocol.kind() != ProtocolKind::Http {
            return Err(BrokerError::ServerSideMemberNotHttp);
        }
        let bounds = if req.server_side {
            1..=u64::MAX
        } else {
            config.min_session_timeout_ms..=config.max_session_timeout_ms
        };
        if !bounds.contains(&req.session_timeout_ms) {
            return Err(BrokerError::InvalidSessionTimeout {
                timeout_ms: req.session_timeout_ms,
                min_ms: config.min_session_timeout_ms,
                max_ms: config.max_session_timeout_ms,
            });
        }
        match &req.protocol {
            MemberProtocol::Http { topics, .. } => {
                check_len("subscription size", topics.len(), SUBSCRIPTION_TOPICS_MAX)?;
                for topic in topics {
                    names::validate_topic_name(topic)?;
                }
            }
            MemberProtocol::Kafka {
                protocol_type,
                protocols,
            } => {
                check_len(
                    "protocol type length",
                    protocol_type.len(),
                    CLIENT_TEXT_MAX_BYTES,
                )?;
                check_len(
                    "protocols of a member",
                    protocols.len(),
                    PROTOCOLS_PER_MEMBER_MAX,
                )?;
                if protocol_type.is_empty() || protocols.is_empty() {
                    return Err(self.inconsistent(
                        "a Kafka member must name a protocol type and at least one protocol".into(),
                    ));
                }
                for (name, metadata) in protocols {
                    check_len("protocol name length", name.len(), CLIENT_TEXT_MAX_BYTES)?;
                    check_len(
                        "protocol metadata bytes",
                        metadata.len(),
                        PROTOCOL_METADATA_MAX_BYTES,
                    )?;
                }
                check_len(
                    "protocol bytes of a member",
                    req.protocol.held_bytes(),
                    MEMBER_METADATA_MAX_BYTES,
                )?;
            }
        }
        self.check_consistent(req)
    }

    /// A joiner must be of the group's kind, and agree with the other
    /// members on the assignor (HTTP) or share a protocol with all of them
    /// (Kafka).
    fn check_consistent(&self, req: &JoinRequest) -> Result<(), BrokerError> {
        let others: Vec<&Member> = self
            .members
            .values()
            .filter(|m| Some(&m.id) != req.member_id.as_ref())
            .collect();
        let Some(first) = others.first() else {
            return Ok(());
        };
        match (&first.protocol, &req.protocol) {
            (
                MemberProtocol::Http { assignor, .. },
                MemberProtocol::Http {
                    assignor: wanted, ..
                },
            ) => {
                if assignor != wanted {
                    return Err(self.inconsistent(format!(
                        "the group's members use the {} assignor, not {}",
                        assignor.name(),
                        wanted.name()
                    )));
                }
            }
            (
                MemberProtocol::Kafka { protocol_type, .. },
                MemberProtocol::Kafka {
                    protocol_type: wanted,
                    protocols,
                },
            ) => {
                if protocol_type != wanted {
                    return Err(self.inconsistent(format!(
                        "the group's protocol type is {protocol_type:?}, not {wanted:?}"
                    )));
                }
                let offered: BTreeSet<&str> = protocols.iter().map(|(n, _)| n.as_str()).collect();
                let shared = others.iter().all(|m| match &m.protocol {
                    MemberProtocol::Kafka { protocols, .. } => {
                        protocols.iter().any(|(n, _)| offered.contains(n.as_str()))
                    }
                    MemberProtocol::Http { .. } => false,
                });
                if !shared || self.candidates(Some(req)).is_empty() {
                    return Err(self.inconsistent(
                        "none of the offered protocols is supported by every member".into(),
                    ));
                }
            }
            (existing, _) => {
                return Err(self.inconsistent(format!(
                    "the group's members are {} consumers; a {} consumer cannot join it",
                    existing.kind().name(),
                    req.protocol.kind().name()
                )));
            }
        }
        Ok(())
    }

    /// Protocol names every Kafka member supports (with `joiner` counted
    /// in place of its old self), in the first member's order.
    fn candidates(&self, joiner: Option<&JoinRequest>) -> Vec<String> {
        let mut sets: Vec<&[(String, Bytes)]> = Vec::new();
        for m in self.members.values() {
            if joiner.is_some_and(|j| j.member_id.as_ref() == Some(&m.id)) {
                continue;
            }
            if let MemberProtocol::Kafka { protocols, .. } = &m.protocol {
                sets.push(protocols);
            }
        }
        if let Some(JoinRequest {
            protocol: MemberProtocol::Kafka { protocols, .. },
            ..
        }) = joiner
        {
            sets.push(protocols);
        }
        let Some(first) = sets.first() else {
            return Vec::new();
        };
        first
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| sets.iter().all(|s| s.iter().any(|(m, _)| m == n)))
            .collect()
    }

    /// Kafka's `selectProtocol`: each member votes for the first of its
    /// protocols that all support; most votes wins, ties to the earlier
    /// candidate.
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        match &first.protocol {
            MemberProtocol::Http { assignor, .. } => Some(assignor.name().to_string()),
            MemberProtocol::Kafka { .. } => {
                let candidates = self.candidates(None);
                let mut votes = vec![0usize; candidates.len()];
                for m in self.members.values() {
                    if let MemberProtocol::Kafka { protocols, .. } = &m.protocol {
                        if let Some(i) = protocols
                            .iter()
                            .find_map(|(n, _)| candidates.iter().position(|c| c == n))
                        {
                            votes[i] += 1;
                        }
                    }
                }
                let best = votes
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))?
                    .0;
                candidates.into_iter().nth(best)
            }
        }
    }

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
    fn prepare_rebalance(&mut self, now_ms: u64, initial_delay_ms: u64) {
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
    fn try_complete_join(&mut self, now_ms: u64, topics: &dyn TopicPartitions) {
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

    fn join_response(&self, id: &str) -> JoinResponse {
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

    /// Removes a member from the maps only.
    fn drop_member(&mut self, id: &str, reason: Removal) {
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
    fn remove_member(
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
            GroupState::Empty | GroupState::Dead => {}
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
            GroupState::Empty | GroupState::Dead => Err(self.unknown_member(member_id)),
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

/// A group as describe and list answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSnapshot {
    pub group: String,
    pub state: GroupState,
    /// `None` without members.
    pub kind: Option<ProtocolKind>,
    /// The selected protocol of the current generation.
    pub protocol: Option<String>,
    pub generation: u32,
    pub leader: Option<String>,
    pub members: Vec<MemberSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSnapshot {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    /// An HTTP member's topics (a Kafka member's are inside its metadata).
    pub subscription: Vec<String>,
    /// `None` while the group rebalances.
    pub assignment: Option<MemberAssignment>,
    /// What it joined with (a Kafka member's protocol type and each
    /// protocol's metadata, which DescribeGroups answers).
    pub protocol: MemberProtocol,
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
