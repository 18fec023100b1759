//! KIP-848 consumer groups (Kafka 4's consumer group protocol,
//! `group.protocol=consumer`): the coordinator assigns, and each member
//! moves to its new assignment on its own heartbeats; no member ever
//! stops for the others (no join window, no SyncGroup).
//!
//! The state, Kafka's:
//! * the **group epoch** moves whenever what the assignment depends on
//!   changes: a member joins or leaves, a subscription or the preferred
//!   assignor changes, a subscribed topic appears, goes or grows;
//! * the **target assignment** is the assignor's answer for a group epoch
//!   (its **assignment epoch**), computed at the first heartbeat after the
//!   group epoch moved;
//! * each member has a **member epoch**, the assignment epoch it has
//!   reached, and the partitions it owns now. A member that owns
//!   partitions its target gives to others is told to revoke them first
//!   (it stays at its old epoch, the rest of its partitions kept); once
//!   its heartbeat no longer lists them it moves to the target epoch. A
//!   partition is handed to a member only when no other member owns it,
//!   or still revokes it, so no partition is ever consumed by two members
//!   at once: until then the member waits with the part of its target
//!   that is free.
//!
//! Each answer sets the member's next heartbeat: the configured interval
//! once it holds its target, a tenth of it (at least
//! [`RECONCILING_INTERVAL_MIN_MS`]) while it waits for partitions or
//! revokes, so a handover completes soon after the last revocation.
//!
//! Fencing: a heartbeat with an epoch above the member's, or below it but
//! not its previous epoch with the partitions it was given, is
//! FENCED_MEMBER_EPOCH (the member rejoins with epoch 0, abandoning its
//! partitions); an unknown member is UNKNOWN_MEMBER_ID. A member whose
//! session (`groups.consumer_session_timeout_ms`) passes without a
//! heartbeat is removed; so is one that does not revoke within its
//! rebalance timeout. Commits of a member must carry its current epoch
//! (STALE_MEMBER_EPOCH otherwise).
//!
//! Static members (`group.instance.id`) leave with epoch −2 and keep their
//! partitions until their session ends; the same instance id joining
//! again takes them over with its epoch, so a restart moves nothing.
//!
//! Memory: everything a member holds that a client sizes (ids, rack,
//! subscription, regex, partitions) is bounded per field before it is
//! kept (`super::config`), and members per group by `GROUP_MEMBERS_MAX`.

pub mod assignors;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use uuid::Uuid;

use super::config::{
    check_len, GroupsConfig, CLIENT_TEXT_MAX_BYTES, GROUP_MEMBERS_MAX, INSTANCE_ID_MAX_BYTES,
    MEMBER_ID_MAX_BYTES, SUBSCRIPTION_TOPICS_MAX,
};
use crate::error::{BrokerError, MemberRefusal};
use assignors::{Subscriber, TopicShape, ASSIGNORS};

/// Partitions by topic id, sorted.
pub type Partitions = BTreeMap<Uuid, BTreeSet<u32>>;

/// The longest `subscribed_topic_regex` kept (Kafka bounds none; a
/// pattern is compiled once per group and principal, and bounded like a
/// name).
pub const REGEX_MAX_BYTES: usize = 1024;
/// The compiled size a member's pattern may take (the `regex` crate's own
/// bound on untrusted patterns).
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// The shortest interval a member short of its target is asked to
/// heartbeat at (a tenth of the configured one, not below this).
pub const RECONCILING_INTERVAL_MIN_MS: u64 = 50;
/// How often a group's pattern is matched against every topic name
/// again, at most (at a heartbeat of a member with that principal).
pub const REGEX_REFRESH_MS: u64 = 1000;

/// The topics a group may subscribe to, as they are now.
pub trait TopicCatalog {
    /// The id and partition count of `name`, if it exists.
    fn topic(&self, name: &str) -> Option<TopicShape>;
    /// Every topic name a pattern of this member may match (those its
    /// principal may describe).
    fn names(&self) -> Vec<String>;
    /// Whose view `names` is: patterns are resolved once per principal.
    fn principal(&self) -> String;
}

/// A ConsumerGroupHeartbeat, as the front-end decoded it.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    /// Empty only for a v0 join, which is given one.
    pub member_id: String,
    /// 0 joins, −1 leaves, −2 leaves for now (static members).
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// −1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// `None`: unchanged.
    pub topic_names: Option<Vec<String>>,
    /// `None`: unchanged; empty: no pattern.
    pub topic_regex: Option<String>,
    /// `None`: unchanged.
    pub server_assignor: Option<String>,
    /// The partitions the member owns; `None`: unchanged.
    pub owned: Option<Partitions>,
    pub client_id: String,
    pub client_host: String,
}

impl Heartbeat {
    /// Every field a join must carry is there (Kafka answers a full
    /// request with the assignment).
    fn is_full(&self) -> bool {
        self.rebalance_timeout_ms != -1
            && (self.topic_names.is_some() || self.topic_regex.is_some())
            && self.owned.is_some()
    }
}

/// What a heartbeat answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    /// −1 or −2 after a leave.
    pub member_epoch: i32,
    pub heartbeat_interval_ms: u64,
    /// The partitions the member owns now, when they changed or it asked
    /// in full; `None`: keep what you have.
    pub assignment: Option<Partitions>,
}

/// Kafka's consumer group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    /// The target is behind the group epoch.
    Assigning,
    /// Some member has not reached the target.
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// One member as ConsumerGroupDescribe answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMemberSnapshot {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: u32,
    pub client_id: String,
    pub client_host: String,
    pub topic_names: Vec<String>,
    pub topic_regex: Option<String>,
    /// `topic_names` and what the pattern matched.
    pub subscribed: Vec<String>,
    /// Owned now (revocations pending excluded).
    pub assignment: Partitions,
    pub target: Partitions,
}

/// A KIP-848 group as ConsumerGroupDescribe answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupSnapshot {
    pub group: String,
    pub state: ConsumerGroupState,
    pub epoch: u32,
    pub assignment_epoch: u32,
    pub assignor: &'static str,
    pub members: Vec<ConsumerMemberSnapshot>,
    /// Topic id → name of every subscribed topic, for the answers.
    pub topic_names: BTreeMap<Uuid, String>,
}

/// A pattern members subscribe with, as their principal sees the
/// topics: `(source, principal)`.
type PatternKey = (String, String);

/// A pattern of the group and what it matched last. Kept by the group, not
/// by each member: members with one pattern (and one principal) see one
/// resolution, so a new matching topic moves the group epoch once and is
/// assigned to all of them at once, as Kafka resolves a group's regexes.
#[derive(Debug, Clone)]
struct Pattern {
    regex: Regex,
    matched: BTreeSet<String>,
    /// `None` until its first resolution, which is at a heartbeat after
    /// the one that brought it (Kafka resolves new regexes after
    /// answering: the literal topics are assigned first).
    matched_at_ms: Option<u64>,
    /// How many topics it matched when that was more than a member may
    /// subscribe to: it then matches none, and its members' heartbeats
    /// are refused (GROUP_MAX_SIZE_REACHED) until it matches fewer.
    too_many: Option<usize>,
}

#[derive(Debug, Clone)]
struct Member {
    id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    epoch: u32,
    previous_epoch: u32,
    /// Owned, and told so.
    assigned: Partitions,
    /// Owned, and told to give up: the member still consumes them.
    revoking: Partitions,
    topic_names: BTreeSet<String>,
    /// The key of its pattern in the group's `patterns`.
    pattern: Option<PatternKey>,
    assignor: Option<String>,
    rebalance_timeout_ms: u64,
    session_deadline_ms: u64,
    revoke_deadline_ms: Option<u64>,
    /// A static member that left with epoch −2: kept for its session.
    away: bool,
}

impl Member {
    fn owns(&self, id: &Uuid, partition: u32) -> bool {
        [&self.assigned, &self.revoking]
            .iter()
            .any(|p| p.get(id).is_some_and(|ps| ps.contains(&partition)))
    }

    fn deadline_ms(&self) -> u64 {
        self.revoke_deadline_ms
            .map_or(self.session_deadline_ms, |r| {
                r.min(self.session_deadline_ms)
            })
    }

    fn held_bytes(&self) -> usize {
        let partitions = |p: &Partitions| p.values().map(|s| 16 + 4 * s.len()).sum::<usize>();
        self.id.len()
            + self.instance_id.as_ref().map_or(0, String::len)
            + self.rack_id.as_ref().map_or(0, String::len)
            + self.client_id.len()
            + self.client_host.len()
            + self.topic_names.iter().map(String::len).sum::<usize>()
            + self.pattern.as_ref().map_or(0, |(source, _)| source.len())
            + partitions(&self.assigned)
            + partitions(&self.revoking)
    }
}

/// Why a member left a KIP-848 group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    Left,
    SessionExpired,
    /// Did not revoke within its rebalance timeout.
    RevocationExpired,
}

/// One KIP-848 group.
#[derive(Debug)]
pub struct ConsumerGroup {
    name: String,
    epoch: u32,
    assignment_epoch: u32,
    members: BTreeMap<String, Member>,
    /// Member id → its partitions at `assignment_epoch`.
    target: BTreeMap<String, Partitions>,
    /// Every subscribed topic as last looked up.
    topics: BTreeMap<String, TopicShape>,
    /// The members' patterns; one goes when no member has it.
    patterns: BTreeMap<PatternKey, Pattern>,
    assignor: &'static str,
    empty_since_ms: Option<u64>,
    /// Members removed since [`ConsumerGroup::take_departures`].
    departures: Vec<(String, Departure)>,
    /// Times the group epoch moved since the last take.
    rebalances: u64,
}

impl ConsumerGroup {
    pub fn new(name: &str, now_ms: u64) -> Self {
        ConsumerGroup {
            name: name.to_string(),
            epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            topics: BTreeMap::new(),
            patterns: BTreeMap::new(),
            assignor: ASSIGNORS[0],
            empty_since_ms: Some(now_ms),
            departures: Vec::new(),
            rebalances: 0,
        }
    }

    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    pub fn empty_since_ms(&self) -> Option<u64> {
        self.empty_since_ms
    }

    /// Bytes `member_id` holds now (0 if it is not a member).
    pub fn member_bytes_of(&self, member_id: &str) -> usize {
        self.members.get(member_id).map_or(0, Member::held_bytes)
    }

    /// Bytes of client-sized state the members hold, their patterns'
    /// matches included.
    pub fn member_bytes(&self) -> usize {
        let patterns: usize = self
            .patterns
            .values()
            .map(|p| p.matched.iter().map(String::len).sum::<usize>())
            .sum();
        self.members.values().map(Member::held_bytes).sum::<usize>() + patterns
    }

    /// The topics `m` subscribes to: its names and what its pattern
    /// matched.
    fn topics_of<'a>(&'a self, m: &'a Member) -> impl Iterator<Item = &'a str> {
        let matched = m
            .pattern
            .as_ref()
            .and_then(|key| self.patterns.get(key))
            .into_iter()
            .flat_map(|p| p.matched.iter());
        m.topic_names.iter().chain(matched).map(String::as_str)
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.assignment_epoch < self.epoch {
            ConsumerGroupState::Assigning
        } else if self.members.values().any(|m| {
            m.epoch != self.assignment_epoch
                || !m.revoking.is_empty()
                || self.target.get(&m.id).is_some_and(|t| *t != m.assigned)
        }) {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    /// The members removed since the last call, and how many times the
    /// group epoch moved.
    pub fn take_departures(&mut self) -> (Vec<(String, Departure)>, u64) {
        (
            std::mem::take(&mut self.departures),
            std::mem::take(&mut self.rebalances),
        )
    }

    fn bump(&mut self) {
        self.epoch += 1;
        self.rebalances += 1;
    }

    /// One ConsumerGroupHeartbeat (module doc). `id_made` is a member id
    /// for a v0 join that brought none.
    pub fn heartbeat(
        &mut self,
        mut hb: Heartbeat,
        now_ms: u64,
        config: &GroupsConfig,
        catalog: &dyn TopicCatalog,
        id_made: impl FnOnce() -> String,
    ) -> Result<HeartbeatAnswer, BrokerError> {
        check_heartbeat(&self.name, &hb)?;
        match hb.member_epoch {
            -1 | -2 => return self.leave(&hb, now_ms),
            0 if hb.member_id.is_empty() => hb.member_id = id_made(),
            _ => {}
        }
        let before_assigned = self.members.get(&hb.member_id).map(|m| m.assigned.clone());
        let principal = catalog.principal();
        let pattern = match hb.topic_regex.as_deref() {
            Some(source) if !source.is_empty() => {
                let key = (source.to_string(), principal.clone());
                let compiled =
                    match self.patterns.contains_key(&key) {
                        true => None,
                        false => Some(compile(source).map_err(|reason| {
                            self.refused(MemberRefusal::InvalidRegex { reason })
                        })?),
                    };
                Some((key, compiled))
            }
            _ => None,
        };
        // A pattern new to the group is resolved at a later heartbeat.
        let brought = pattern
            .as_ref()
            .filter(|(_, compiled)| compiled.is_some())
            .map(|(key, _)| key.clone());
        let joined = if hb.member_epoch == 0 {
            self.join(&hb, now_ms, config)?
        } else {
            self.check_epoch(&hb)?;
            false
        };
        let updated = self
            .update_member(&hb, pattern, now_ms, config)
            .and_then(|changed| {
                let matched = self.resolve_patterns(&principal, brought.as_ref(), now_ms, catalog);
                self.check_pattern(&hb.member_id)?;
                Ok((changed, matched))
            });
        let (changed, matched) = match updated {
            Ok(both) => both,
            Err(e) => {
                if joined {
                    // A refused join leaves no member, and no pattern of
                    // its, behind.
                    self.members.remove(&hb.member_id);
                    self.forget_unused_patterns();
                }
                return Err(e);
            }
        };
        // One heartbeat moves the group epoch once, whatever it changed.
        if joined | changed | matched | self.refresh_topics(catalog) {
            self.bump();
        }
        if self.assignment_epoch < self.epoch {
            self.compute_target();
        }
        let member_id = hb.member_id.clone();
        self.reconcile(&member_id, hb.owned.as_ref(), now_ms);
        let member = self.member(&member_id)?;
        // A member short of its target (waiting for partitions others
        // still revoke, or revoking) is asked back sooner: the answer's
        // interval is the coordinator's to set on every heartbeat, and
        // clients use it, so a handed-over partition waits a tenth of an
        // interval for its new owner, not a whole one.
        let unresolved = member
            .pattern
            .as_ref()
            .and_then(|key| self.patterns.get(key))
            .is_some_and(|p| p.matched_at_ms.is_none());
        let settled = member.revoking.is_empty()
            && !unresolved
            && member.epoch == self.assignment_epoch
            && self
                .target
                .get(&member_id)
                .is_none_or(|t| *t == member.assigned);
        let interval = if settled {
            config.consumer_heartbeat_interval_ms
        } else {
            (config.consumer_heartbeat_interval_ms / 10)
                .max(RECONCILING_INTERVAL_MIN_MS.min(config.consumer_heartbeat_interval_ms))
        };
        let send = hb.member_epoch == 0
            || hb.is_full()
            || before_assigned.as_ref() != Some(&member.assigned);
        Ok(HeartbeatAnswer {
            member_id,
            member_epoch: i32::try_from(member.epoch).unwrap_or(i32::MAX),
            heartbeat_interval_ms: interval,
            assignment: send.then(|| member.assigned.clone()),
        })
    }

    fn member(&self, id: &str) -> Result<&Member, BrokerError> {
        self.members
            .get(id)
            .ok_or_else(|| BrokerError::UnknownMember {
                group: self.name.clone(),
                member_id: id.to_string(),
            })
    }

    fn refused(&self, refusal: MemberRefusal) -> BrokerError {
        BrokerError::MemberRefused {
            group: self.name.clone(),
            refusal,
        }
    }

    /// Epoch 0: a new member (true), a member starting over, or a static
    /// member coming back.
    fn join(
        &mut self,
        hb: &Heartbeat,
        now_ms: u64,
        config: &GroupsConfig,
    ) -> Result<bool, BrokerError> {
        if let Some(instance) = &hb.instance_id {
            let holder = self
                .members
                .values()
                .find(|m| m.instance_id.as_ref() == Some(instance))
                .map(|m| (m.id.clone(), m.away));
            match holder {
                Some((id, away)) if id == hb.member_id => {
                    if let Some(m) = self.members.get_mut(&id).filter(|_| away) {
                        m.away = false;
                    }
                }
                Some((id, true)) => {
                    // The instance comes back under a new member id: it
                    // takes over the partitions and epoch it left with.
                    if let Some(mut m) = self.members.remove(&id) {
                        m.id.clone_from(&hb.member_id);
                        m.away = false;
                        if let Some(target) = self.target.remove(&id) {
                            self.target.insert(hb.member_id.clone(), target);
                        }
                        self.members.insert(hb.member_id.clone(), m);
                    }
                    return Ok(false);
                }
                Some((_, false)) => {
                    return Err(self.refused(MemberRefusal::UnreleasedInstanceId {
                        instance_id: instance.clone(),
                    }))
                }
                None => {}
            }
        }
        if let Some(m) = self.members.get_mut(&hb.member_id) {
            // Starting over (after a fence, or a lost answer): what it
            // owned is given up, its target stays.
            m.assigned.clear();
            m.revoking.clear();
            m.revoke_deadline_ms = None;
            m.epoch = 0;
            m.previous_epoch = 0;
            return Ok(false);
        }
        check_len(
            "members in one consumer group",
            self.members.len() + 1,
            GROUP_MEMBERS_MAX,
        )?;
        self.members.insert(
            hb.member_id.clone(),
            Member {
                id: hb.member_id.clone(),
                instance_id: hb.instance_id.clone(),
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                epoch: 0,
                previous_epoch: 0,
                assigned: Partitions::new(),
                revoking: Partitions::new(),
                topic_names: BTreeSet::new(),
                pattern: None,
                assignor: None,
                rebalance_timeout_ms: config.max_session_timeout_ms,
                session_deadline_ms: now_ms + config.consumer_session_timeout_ms,
                revoke_deadline_ms: None,
                away: false,
            },
        );
        self.empty_since_ms = None;
        Ok(true)
    }

    /// A heartbeat of a known member must carry its epoch, or its previous
    /// one with no more than it was given then (its last answer was lost).
    fn check_epoch(&self, hb: &Heartbeat) -> Result<(), BrokerError> {
        let member = self.member(&hb.member_id)?;
        let received = u32::try_from(hb.member_epoch).unwrap_or(u32::MAX);
        let fenced = || {
            self.refused(MemberRefusal::FencedMemberEpoch {
                received: hb.member_epoch,
                current: member.epoch,
            })
        };
        if received > member.epoch {
            return Err(fenced());
        }
        if received < member.epoch {
            let within = hb.owned.as_ref().is_none_or(|owned| {
                owned
                    .iter()
                    .all(|(id, ps)| ps.iter().all(|p| member.owns(id, *p)))
            });
            if received != member.previous_epoch || !within {
                return Err(fenced());
            }
        }
        Ok(())
    }

    /// Applies what the heartbeat changed of its member; true if the
    /// group epoch must move.
    fn update_member(
        &mut self,
        hb: &Heartbeat,
        pattern: Option<(PatternKey, Option<Pattern>)>,
        now_ms: u64,
        config: &GroupsConfig,
    ) -> Result<bool, BrokerError> {
        let name = self.name.clone();
        let Some(m) = self.members.get_mut(&hb.member_id) else {
            return Err(BrokerError::UnknownMember {
                group: name,
                member_id: hb.member_id.clone(),
            });
        };
        m.session_deadline_ms = now_ms + config.consumer_session_timeout_ms;
        m.client_id.clone_from(&hb.client_id);
        m.client_host.clone_from(&hb.client_host);
        if hb.rack_id.is_some() {
            m.rack_id.clone_from(&hb.rack_id);
        }
        if let Ok(ms) = u64::try_from(hb.rebalance_timeout_ms) {
            m.rebalance_timeout_ms = ms;
        }
        let mut changed = false;
        if let Some(names) = &hb.topic_names {
            let names: BTreeSet<String> = names.iter().cloned().collect();
            changed |= names != m.topic_names;
            m.topic_names = names;
        }
        let old_pattern = m.pattern.clone();
        match (&hb.topic_regex, pattern) {
            (Some(_), Some((key, compiled))) => {
                if let Some(compiled) = compiled {
                    self.patterns.entry(key.clone()).or_insert(compiled);
                }
                m.pattern = Some(key);
            }
            (Some(_), None) => m.pattern = None,
            (None, _) => {}
        }
        if m.pattern != old_pattern {
            // What the old pattern matched leaves the subscription; the
            // new one adds nothing until it is resolved.
            let had = old_pattern
                .as_ref()
                .and_then(|key| self.patterns.get(key))
                .is_some_and(|p| !p.matched.is_empty());
            let has = m
                .pattern
                .as_ref()
                .and_then(|key| self.patterns.get(key))
                .is_some_and(|p| !p.matched.is_empty());
            changed |= had || has;
            self.forget_unused_patterns();
        }
        let Some(m) = self.members.get_mut(&hb.member_id) else {
            return Ok(changed);
        };
        if let Some(assignor) = &hb.server_assignor {
            let assignor = (!assignor.is_empty()).then(|| assignor.clone());
            changed |= assignor != m.assignor;
            m.assignor = assignor;
        }
        if changed {
            // The preferred assignor may have moved with it.
            self.assignor = self.preferred_assignor();
        }
        Ok(changed)
    }

    /// Matches the patterns of `principal` against the topics it may
    /// see: each at most every [`REGEX_REFRESH_MS`], a new one at the first
    /// heartbeat after the one that brought it. True if a match changed
    /// (every member with the pattern moves at once: one epoch). A
    /// pattern that matches more topics than a member may subscribe to
    /// matches none; only its own members are refused
    /// ([`ConsumerGroup::check_pattern`]).
    fn resolve_patterns(
        &mut self,
        principal: &str,
        brought: Option<&PatternKey>,
        now_ms: u64,
        catalog: &dyn TopicCatalog,
    ) -> bool {
        let due: Vec<PatternKey> = self
            .patterns
            .iter()
            .filter(|(key, p)| {
                key.1 == principal
                    && Some(*key) != brought
                    && p.matched_at_ms
                        .is_none_or(|at| now_ms.saturating_sub(at) >= REGEX_REFRESH_MS)
            })
            .map(|(key, _)| key.clone())
            .collect();
        if due.is_empty() {
            return false;
        }
        let names = catalog.names();
        let mut changed = false;
        for key in due {
            let Some(p) = self.patterns.get_mut(&key) else {
                continue;
            };
            let mut matched: BTreeSet<String> = names
                .iter()
                .filter(|n| p.regex.is_match(n))
                .cloned()
                .collect();
            p.too_many = (matched.len() > SUBSCRIPTION_TOPICS_MAX).then_some(matched.len());
            if p.too_many.is_some() {
                matched.clear();
            }
            p.matched_at_ms = Some(now_ms);
            if matched != p.matched {
                p.matched = matched;
                changed = true;
            }
        }
        changed
    }

    /// GROUP_MAX_SIZE_REACHED if `member_id`'s pattern matched more
    /// topics than a member may subscribe to.
    fn check_pattern(&self, member_id: &str) -> Result<(), BrokerError> {
        let too_many = self
            .members
            .get(member_id)
            .and_then(|m| m.pattern.as_ref())
            .and_then(|key| self.patterns.get(key))
            .and_then(|p| p.too_many);
        match too_many {
            Some(len) => check_len("topics a pattern matches", len, SUBSCRIPTION_TOPICS_MAX),
            None => Ok(()),
        }
    }

    /// Drops the patterns no member has any more.
    fn forget_unused_patterns(&mut self) {
        let used: BTreeSet<&PatternKey> = self
            .members
            .values()
            .filter_map(|m| m.pattern.as_ref())
            .collect();
        let unused: Vec<PatternKey> = self
            .patterns
            .keys()
            .filter(|k| !used.contains(k))
            .cloned()
            .collect();
        for key in unused {
            self.patterns.remove(&key);
        }
    }

    /// The assignor most members ask for (Kafka's rule), ties to the one
    /// listed first; the default when none asks.
    fn preferred_assignor(&self) -> &'static str {
        ASSIGNORS
            .iter()
            .copied()
            .max_by_key(|name| {
                let votes = self
                    .members
                    .values()
                    .filter(|m| m.assignor.as_deref() == Some(*name))
                    .count();
                let rank = ASSIGNORS.len() - ASSIGNORS.iter().position(|a| a == name).unwrap_or(0);
                (votes, rank)
            })
            .unwrap_or(ASSIGNORS[0])
    }

    /// Looks the subscribed topics up again; true if one was created,
    /// deleted, recreated or grown (the group epoch moves).
    fn refresh_topics(&mut self, catalog: &dyn TopicCatalog) -> bool {
        let names: BTreeSet<&str> = self
            .members
            .values()
            .flat_map(|m| self.topics_of(m))
            .collect();
        let topics: BTreeMap<String, TopicShape> = names
            .into_iter()
            .filter_map(|n| catalog.topic(n).map(|shape| (n.to_string(), shape)))
            .collect();
        if topics == self.topics {
            return false;
        }
        self.topics = topics;
        true
    }

    fn compute_target(&mut self) {
        let subscribers: Vec<Subscriber<'_>> = self
            .members
            .values()
            .map(|m| Subscriber {
                member_id: &m.id,
                topics: self.topics_of(m).collect(),
            })
            .collect();
        let target = assignors::assign(self.assignor, &subscribers, &self.topics, &self.target);
        self.target = target;
        self.assignment_epoch = self.epoch;
        tracing::debug!(
            group = self.name,
            epoch = self.epoch,
            assignor = self.assignor,
            members = self.members.len(),
            "consumer group: new target assignment"
        );
    }

    /// Moves `member_id` toward its target as far as the others allow
    /// (module doc).
    fn reconcile(&mut self, member_id: &str, owned: Option<&Partitions>, now_ms: u64) {
        let Some(mut m) = self.members.remove(member_id) else {
            return;
        };
        if !m.revoking.is_empty() {
            let released = owned.is_some_and(|owned| {
                !owned.iter().any(|(id, ps)| {
                    ps.iter()
                        .any(|p| m.revoking.get(id).is_some_and(|r| r.contains(p)))
                })
            });
            if released {
                m.revoking.clear();
                m.revoke_deadline_ms = None;
            }
        }
        if m.revoking.is_empty() {
            let target = self.target.get(member_id).cloned().unwrap_or_default();
            let (keep, drop) = split(&m.assigned, &target);
            if drop.is_empty() {
                for (id, partitions) in &target {
                    for p in partitions {
                        if !self.members.values().any(|other| other.owns(id, *p)) {
                            m.assigned.entry(*id).or_default().insert(*p);
                        }
                    }
                }
                if m.epoch != self.assignment_epoch {
                    m.previous_epoch = m.epoch;
                    m.epoch = self.assignment_epoch;
                }
            } else {
                m.assigned = keep;
                m.revoking = drop;
                m.revoke_deadline_ms = Some(now_ms + m.rebalance_timeout_ms);
            }
        }
        self.members.insert(member_id.to_string(), m);
    }

    /// A leave (−1), or a static member's leave for now (−2).
    fn leave(&mut self, hb: &Heartbeat, now_ms: u64) -> Result<HeartbeatAnswer, BrokerError> {
        let id = match (&hb.instance_id, hb.member_id.is_empty()) {
            (Some(instance), _) => self
                .members
                .values()
                .find(|m| m.instance_id.as_ref() == Some(instance))
                .map(|m| m.id.clone()),
            (None, false) => Some(hb.member_id.clone()),
            (None, true) => None,
        };
        let Some(id) = id.filter(|id| self.members.contains_key(id)) else {
            return Err(BrokerError::UnknownMember {
                group: self.name.clone(),
                member_id: hb.member_id.clone(),
            });
        };
        if hb.member_epoch == -2 {
            if let Some(m) = self.members.get_mut(&id) {
                m.away = true;
            }
        } else {
            self.remove(&id, Departure::Left, now_ms);
        }
        Ok(HeartbeatAnswer {
            member_id: id,
            member_epoch: hb.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    fn remove(&mut self, id: &str, why: Departure, now_ms: u64) {
        if self.members.remove(id).is_some() {
            self.target.remove(id);
            self.forget_unused_patterns();
            self.departures.push((id.to_string(), why));
            self.bump();
            if self.members.is_empty() {
                self.empty_since_ms = Some(now_ms);
            }
        }
    }

    /// Removes the members whose session or revocation time passed.
    pub fn tick(&mut self, now_ms: u64) {
        let expired: Vec<(String, Departure)> = self
            .members
            .values()
            .filter_map(|m| {
                if m.session_deadline_ms <= now_ms {
                    Some((m.id.clone(), Departure::SessionExpired))
                } else if m.revoke_deadline_ms.is_some_and(|d| d <= now_ms) {
                    Some((m.id.clone(), Departure::RevocationExpired))
                } else {
                    None
                }
            })
            .collect();
        for (id, why) in expired {
            self.remove(&id, why, now_ms);
        }
    }

    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.members.values().map(Member::deadline_ms).min()
    }

    /// A commit (or a fetch of committed offsets) by `member_id` at
    /// `epoch`: the member must be here at that epoch. An epoch below 0
    /// with no member id is an admin's commit, only into an empty group.
    pub fn validate_commit(&self, member_id: &str, epoch: i32) -> Result<(), BrokerError> {
        if epoch < 0 && member_id.is_empty() {
            if self.members.is_empty() {
                return Ok(());
            }
            return Err(BrokerError::GroupHasMembers {
                group: self.name.clone(),
                members: self.members.len(),
            });
        }
        let member = self.member(member_id)?;
        let received = i64::from(epoch);
        let current = i64::from(member.epoch);
        if received > current {
            return Err(self.refused(MemberRefusal::FencedMemberEpoch {
                received: epoch,
                current: member.epoch,
            }));
        }
        if received < current {
            return Err(self.refused(MemberRefusal::StaleMemberEpoch {
                received: epoch,
                current: member.epoch,
            }));
        }
        Ok(())
    }

    pub fn snapshot(&self) -> ConsumerGroupSnapshot {
        ConsumerGroupSnapshot {
            group: self.name.clone(),
            state: self.state(),
            epoch: self.epoch,
            assignment_epoch: self.assignment_epoch,
            assignor: self.assignor,
            members: self
                .members
                .values()
                .map(|m| ConsumerMemberSnapshot {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    topic_names: m.topic_names.iter().cloned().collect(),
                    topic_regex: m.pattern.as_ref().map(|(source, _)| source.clone()),
                    subscribed: self
                        .topics_of(m)
                        .map(str::to_string)
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect(),
                    assignment: m.assigned.clone(),
                    target: self.target.get(&m.id).cloned().unwrap_or_default(),
                })
                .collect(),
            topic_names: self
                .topics
                .iter()
                .map(|(name, shape)| (shape.id, name.clone()))
                .collect(),
        }
    }
}

/// `assigned` ∩ `target`, and `assigned` − `target`.
fn split(assigned: &Partitions, target: &Partitions) -> (Partitions, Partitions) {
    let (mut keep, mut drop) = (Partitions::new(), Partitions::new());
    for (id, partitions) in assigned {
        for p in partitions {
            let side = if target.get(id).is_some_and(|t| t.contains(p)) {
                &mut keep
            } else {
                &mut drop
            };
            side.entry(*id).or_default().insert(*p);
        }
    }
    (keep, drop)
}

fn compile(source: &str) -> Result<Pattern, String> {
    if source.len() > REGEX_MAX_BYTES {
        return Err(format!(
            "{} bytes, above the {REGEX_MAX_BYTES} allowed",
            source.len()
        ));
    }
    // Kafka matches the whole name (RE2J `matches`).
    let regex = regex::RegexBuilder::new(&format!("^(?:{source})$"))
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| e.to_string())?;
    Ok(Pattern {
        regex,
        matched: BTreeSet::new(),
        matched_at_ms: None,
        too_many: None,
    })
}

/// Kafka's checks of a heartbeat's fields, before any state is touched:
/// INVALID_REQUEST or UNSUPPORTED_ASSIGNOR, and the bounds on what a
/// member may hold.
fn check_heartbeat(group: &str, hb: &Heartbeat) -> Result<(), BrokerError> {
    let invalid = |reason: &str| BrokerError::MemberRefused {
        group: group.to_string(),
        refusal: MemberRefusal::InvalidRequest {
            reason: reason.to_string(),
        },
    };
    check_len(
        "bytes of member id",
        hb.member_id.len(),
        MEMBER_ID_MAX_BYTES,
    )?;
    if let Some(instance) = &hb.instance_id {
        if instance.is_empty() {
            return Err(invalid("InstanceId can't be empty."));
        }
        check_len(
            "bytes of group instance id",
            instance.len(),
            INSTANCE_ID_MAX_BYTES,
        )?;
    }
    if let Some(rack) = &hb.rack_id {
        if rack.is_empty() {
            return Err(invalid("RackId can't be empty."));
        }
        check_len("bytes of rack id", rack.len(), CLIENT_TEXT_MAX_BYTES)?;
    }
    check_len(
        "bytes of client id",
        hb.client_id.len(),
        CLIENT_TEXT_MAX_BYTES,
    )?;
    if let Some(names) = &hb.topic_names {
        check_len("subscribed topics", names.len(), SUBSCRIPTION_TOPICS_MAX)?;
        for name in names {
            crate::names::validate_topic_name(name)?;
        }
    }
    if let Some(owned) = &hb.owned {
        let partitions: usize = owned.values().map(BTreeSet::len).sum();
        check_len(
            "owned partitions",
            partitions,
            super::config::OWNED_PARTITIONS_MAX,
        )?;
    }
    match hb.member_epoch {
        0 => {
            // Kafka's order of these checks, so its messages match.
            if hb.rebalance_timeout_ms == -1 {
                return Err(invalid("RebalanceTimeoutMs must be provided when joining."));
            }
            if hb.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return Err(invalid("TopicPartitions must be empty when (re-)joining."));
            }
            if hb.topic_names.is_none() && hb.topic_regex.is_none() {
                return Err(invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set when joining.",
                ));
            }
        }
        -1 => {}
        -2 => {
            if hb.instance_id.is_none() {
                return Err(invalid(
                    "InstanceId can't be null when leaving with epoch -2.",
                ));
            }
        }
        e if e < 0 => return Err(invalid("MemberEpoch is invalid.")),
        _ => {
            if hb.member_id.is_empty() {
                return Err(invalid("MemberId can't be empty."));
            }
        }
    }
    if let Some(assignor) = &hb.server_assignor {
        if !assignor.is_empty() && !ASSIGNORS.contains(&assignor.as_str()) {
            return Err(BrokerError::MemberRefused {
                group: group.to_string(),
                refusal: MemberRefusal::UnsupportedAssignor {
                    assignor: assignor.clone(),
                },
            });
        }
    }
    Ok(())
}
