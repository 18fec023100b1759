//! The group coordinator: Kafka's classic group protocol for HTTP consumer
//! instances and (later) Kafka members, in memory.
//!
//! * [`state`]: one group's state machine ([`Group`]), its invariants and
//!   the offsets-expiry rule.
//! * [`assignor`]: range and round-robin, the server-side assignment of
//!   HTTP groups.
//! * [`member`]: a member, its protocol, member id sources.
//! * [`config`]: `groups:` of broker.yaml and the bounds on what clients
//!   control.
//! * [`consumer`]: KIP-848 groups (ConsumerGroupHeartbeat), assigned by
//!   the coordinator and reconciled member by member.
//!
//! A group id is a classic group or a KIP-848 group, never both: a
//! classic JoinGroup into a KIP-848 group with members is
//! INCONSISTENT_GROUP_PROTOCOL, a ConsumerGroupHeartbeat into a classic
//! group with members GROUP_ID_NOT_FOUND (Kafka's answers when online
//! migration is off), and an empty group of one kind becomes the other at
//! its first member. Committed offsets belong to the group id, whichever
//! protocol its members speak.
//!
//! [`Coordinator`] holds every group behind one mutex and never blocks or
//! sleeps in it: time comes from an injected [`Clock`], and
//! [`Coordinator::tick`] applies the deadlines that passed (`tidelog-groups`
//! calls it when [`Coordinator::next_deadline_ms`] says). A join or sync
//! that has to wait answers `Pending`; the door (`door/groups.rs`) takes
//! [`Coordinator::listen`] *before* it polls again
//! ([`Coordinator::poll_join`], [`Coordinator::poll_sync`]), so a change
//! between the two cannot be missed, and awaits the listener (an
//! `event_listener` future, no runtime needed).
//!
//! Lock order: the coordinator's one mutex is held while a rebalance calls
//! the [`TopicPartitions`] it was given, so that must not call back into
//! the coordinator (the registry's own locks are fine: they come after).
//!
//! Memory: what members hold that clients choose the size of (Kafka
//! members' protocol metadata, HTTP instances' subscriptions, relayed
//! assignments; `Group::member_bytes`) is counted over all groups after
//! every change of a group (`publish`), and a join or sync that would pass
//! `groups.max_member_metadata_bytes` is refused with
//! [`BrokerError::GroupLimit`] (Kafka: GROUP_MAX_SIZE_REACHED). A member
//! rejoining is counted without its own old bytes, so a full server still
//! rebalances its groups.
//!
//! Members are not durable: after a restart every group is empty, and
//! clients join again (committed offsets live in `__consumer_offsets`,
//! [`crate::groups`]).

pub mod assignor;
pub mod config;
pub mod consumer;
pub mod member;
pub mod state;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use event_listener::{Event, EventListener};

pub use assignor::{Assignor, TopicPartition, TopicPartitions};
pub use config::GroupsConfig;
pub use consumer::{ConsumerGroupSnapshot, Heartbeat, HeartbeatAnswer, TopicCatalog};
pub use member::{
    MemberAssignment, MemberIdSource, MemberProtocol, ProtocolKind, RandomIds, SequentialIds,
    KAFKA_CONSUMER_PROTOCOL_TYPE,
};
pub use state::messages::{
    Change, CommitOrigin, GroupSnapshot, GroupState, GroupType, JoinOutcome, JoinRequest,
    JoinResponse, JoinedMember, MemberSnapshot, Removal, SyncOutcome, SyncRequest,
};
pub use state::offsets::offsets_expired;
pub use state::Group;

use crate::error::{BrokerError, MemberRefusal};
use crate::names;
use consumer::{ConsumerGroup, ConsumerGroupState};

/// Where the coordinator's time comes from, in milliseconds since the Unix
/// epoch (commit timestamps are compared with it for offsets expiry).
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // Before 1970 only on a broken clock; 0 then.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock tests set by hand.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(now_ms: u64) -> Self {
        ManualClock(AtomicU64::new(now_ms))
    }

    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A change of one group, as [`Coordinator::tick`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupChange {
    pub group: String,
    pub change: Change,
}

struct Slot {
    group: Group,
    /// `group.member_bytes()` when last counted into
    /// `Coordinator::member_bytes`.
    bytes: usize,
    /// Notified after every change of the group; waiters poll again.
    changed: Arc<Event>,
}

/// A KIP-848 group and its counted bytes (as [`Slot`]).
struct ConsumerSlot {
    group: ConsumerGroup,
    bytes: usize,
}

struct Inner {
    groups: BTreeMap<String, Slot>,
    /// KIP-848 groups; no name is in both maps.
    consumer: BTreeMap<String, ConsumerSlot>,
    ids: Box<dyn MemberIdSource>,
    /// KIP-848 groups' own timeouts (group configs), whether or not the
    /// group exists now.
    timeouts: BTreeMap<String, config::GroupTimeouts>,
}

impl Inner {
    fn len(&self) -> usize {
        self.groups.len() + self.consumer.len()
    }
}

/// Every consumer group's membership.
pub struct Coordinator {
    config: GroupsConfig,
    clock: Arc<dyn Clock>,
    /// Groups the coordinator has not seen since it started count as empty
    /// from here (offsets expiry after a restart).
    started_ms: u64,
    inner: Mutex<Inner>,
    /// Notified after every call that may have moved a deadline earlier
    /// (joins, syncs, leaves...), so the thread that calls
    /// [`Coordinator::tick`] sleeps until the next deadline, not a period.
    deadlines: Event,
    /// Join windows closed, in every group since start (each is one
    /// generation, one rebalance); kept here, so a deleted group's do not
    /// make it go back.
    rebalances: AtomicU64,
    /// The sum of every slot's `bytes` (changed under the mutex only).
    member_bytes: AtomicU64,
}

/// The coordinator's numbers for metrics and stats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoordinatorStats {
    /// Groups held, by [`GroupState::name`].
    pub groups_by_state: BTreeMap<&'static str, usize>,
    /// Members of every group.
    pub members: usize,
    /// Bytes of member metadata every group holds
    /// (`groups.max_member_metadata_bytes` bounds it).
    pub member_metadata_bytes: u64,
    /// Join windows closed since start ([`Change::JoinCompleted`]).
    pub rebalances_total: u64,
    /// Each group's current generation, by name.
    pub generations: BTreeMap<String, u32>,
}

impl Coordinator {
    pub fn new(
        config: GroupsConfig,
        clock: Arc<dyn Clock>,
        ids: Box<dyn MemberIdSource>,
    ) -> Result<Self, BrokerError> {
        config.validate()?;
        Ok(Coordinator {
            config,
            started_ms: clock.now_ms(),
            clock,
            inner: Mutex::new(Inner {
                groups: BTreeMap::new(),
                consumer: BTreeMap::new(),
                ids,
                timeouts: BTreeMap::new(),
            }),
            deadlines: Event::new(),
            rebalances: AtomicU64::new(0),
            member_bytes: AtomicU64::new(0),
        })
    }

    pub fn config(&self) -> &GroupsConfig {
        &self.config
    }

    /// Now, by the coordinator's clock (what [`Coordinator::next_deadline_ms`]
    /// is compared with).
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// A listener notified at the next call that may have moved a
    /// deadline; take it before reading [`Coordinator::next_deadline_ms`].
    pub fn listen_deadlines(&self) -> EventListener {
        self.deadlines.listen()
    }

    /// Wakes whoever waits on [`Coordinator::listen_deadlines`] (a change,
    /// or the broker stopping).
    pub fn notify_deadlines(&self) {
        self.deadlines.notify(usize::MAX);
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The state machine has no panicking paths on client input; a
        // panic would be a bug, and the groups stay usable after it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on an existing group, then wakes its waiters if it changed.
    fn with_group<T>(
        &self,
        group: &str,
        missing: impl FnOnce() -> Result<T, BrokerError>,
        f: impl FnOnce(&mut Group, u64) -> Result<T, BrokerError>,
    ) -> Result<T, BrokerError> {
        let now_ms = self.clock.now_ms();
        let mut inner = self.lock();
        let Some(slot) = inner.groups.get_mut(group) else {
            return missing();
        };
        let result = f(&mut slot.group, now_ms);
        self.publish(group, slot);
        drop(inner);
        self.notify_deadlines();
        result
    }

    /// Wakes the group's waiters if it changed, and logs membership
    /// changes.
    fn publish(&self, name: &str, slot: &mut Slot) -> Vec<Change> {
        let bytes = slot.group.member_bytes();
        if bytes != slot.bytes {
            self.member_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
            self.member_bytes
                .fetch_sub(slot.bytes as u64, Ordering::Relaxed);
            slot.bytes = bytes;
        }
        let changes = slot.group.take_changes();
        if !changes.is_empty() {
            slot.changed.notify(usize::MAX);
        }
        for change in &changes {
            match change {
                Change::MemberRemoved { member_id, reason } => {
                    tracing::info!(group = name, member_id, ?reason, "member left the group");
                }
                Change::JoinCompleted { generation } => {
                    self.rebalances.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(
                        group = name,
                        generation,
                        members = slot.group.member_count(),
                        "rebalance: join window closed"
                    );
                }
                Change::RebalanceStarted | Change::Stable { .. } | Change::Empty { .. } => {
                    tracing::debug!(group = name, ?change, "group changed");
                }
            }
        }
        changes
    }

    /// A JoinGroup; creates the group if it does not exist. At
    /// [`config::GROUPS_MAX`] groups the longest-empty one is forgotten to
    /// make room, or the join is refused if none is empty.
    pub fn join(
        &self,
        group: &str,
        req: JoinRequest,
        topics: &dyn TopicPartitions,
    ) -> Result<JoinOutcome, BrokerError> {
        names::validate_group_name(group)?;
        let now_ms = self.clock.now_ms();
        let mut inner = self.lock();
        let inner = &mut *inner;
        self.take_over(inner, group, GroupType::Classic)
            .map_err(|_| BrokerError::InconsistentGroupProtocol {
                group: group.to_string(),
                reason: "the group's members use the consumer group protocol (KIP-848)".into(),
            })?;
        let created = !inner.groups.contains_key(group);
        if created {
            self.make_room(inner)?;
            inner.groups.insert(
                group.to_string(),
                Slot {
                    group: Group::new(group, now_ms),
                    bytes: 0,
                    changed: Arc::new(Event::new()),
                },
            );
        }
        let Some(slot) = inner.groups.get_mut(group) else {
            return Err(BrokerError::GroupVanished {
                group: group.to_string(),
            });
        };
        // The joiner's bytes replace its own (a rejoin), if it has any.
        let own = req
            .member_id
            .as_deref()
            .map_or(0, |id| slot.group.member_bytes_of(id));
        let result = self
            .check_member_bytes(req.protocol.held_bytes(), own)
            .and_then(|()| {
                slot.group
                    .join(req, now_ms, &self.config, inner.ids.as_mut(), topics)
            });
        self.publish(group, slot);
        if created && result.is_err() && slot.group.member_count() == 0 {
            // A refused first join leaves nothing behind (a MEMBER_ID_REQUIRED
            // answer keeps the group: it holds the handed-out id).
            if !matches!(result, Err(BrokerError::MemberIdRequired { .. })) {
                if let Some(gone) = inner.groups.remove(group) {
                    self.forget(&gone);
                }
            }
        }
        self.notify_deadlines();
        result
    }

    /// Refuses `adding` bytes of member metadata (of which `replacing`
    /// are already held by the same member) when all groups' would pass
    /// `groups.max_member_metadata_bytes`.
    fn check_member_bytes(&self, adding: usize, replacing: usize) -> Result<(), BrokerError> {
        let held = self.member_bytes.load(Ordering::Relaxed);
        let after = held
            .saturating_sub(replacing as u64)
            .saturating_add(adding as u64);
        if adding > replacing && after > self.config.max_member_metadata_bytes {
            tracing::warn!(
                held,
                adding,
                limit = self.config.max_member_metadata_bytes,
                "group join refused: groups.max_member_metadata_bytes reached"
            );
            return Err(BrokerError::GroupLimit {
                what: "bytes of member metadata in all groups (groups.max_member_metadata_bytes)",
                len: usize::try_from(after).unwrap_or(usize::MAX),
                max: usize::try_from(self.config.max_member_metadata_bytes).unwrap_or(usize::MAX),
            });
        }
        Ok(())
    }

    /// Bytes of member metadata held in all groups now.
    pub fn member_bytes(&self) -> u64 {
        self.member_bytes.load(Ordering::Relaxed)
    }

    /// Takes a removed slot's bytes out of the count.
    fn forget(&self, slot: &Slot) {
        self.forget_bytes(slot.bytes);
    }

    fn forget_bytes(&self, bytes: usize) {
        self.member_bytes.fetch_sub(bytes as u64, Ordering::Relaxed);
    }

    /// Frees `group` for a group of `kind`: a group of the other kind
    /// without members is forgotten (its committed offsets stay, they are
    /// the group id's); one with members is `Err` with their count.
    fn take_over(&self, inner: &mut Inner, group: &str, kind: GroupType) -> Result<(), usize> {
        let (members, bytes) = match kind {
            GroupType::Classic => match inner.consumer.get(group) {
                Some(s) => (s.group.member_count(), s.bytes),
                None => return Ok(()),
            },
            GroupType::Consumer => match inner.groups.get(group) {
                Some(s) => (s.group.member_count(), s.bytes),
                None => return Ok(()),
            },
        };
        if members > 0 {
            return Err(members);
        }
        match kind {
            GroupType::Classic => drop(inner.consumer.remove(group)),
            GroupType::Consumer => drop(inner.groups.remove(group)),
        }
        self.forget_bytes(bytes);
        Ok(())
    }

    /// At [`config::GROUPS_MAX`] groups of both kinds, forgets the one
    /// empty longest, or refuses a new group if none is empty.
    fn make_room(&self, inner: &mut Inner) -> Result<(), BrokerError> {
        if inner.len() < config::GROUPS_MAX {
            return Ok(());
        }
        let classic = inner
            .groups
            .iter()
            .filter(|(_, s)| s.group.member_count() == 0)
            .map(|(name, s)| (s.group.empty_since_ms(), name, false));
        let modern = inner
            .consumer
            .iter()
            .filter(|(_, s)| s.group.member_count() == 0)
            .map(|(name, s)| (s.group.empty_since_ms(), name, true));
        let oldest = classic
            .chain(modern)
            .min()
            .map(|(_, name, modern)| (name.clone(), modern));
        match oldest {
            Some((name, false)) => {
                if let Some(gone) = inner.groups.remove(&name) {
                    self.forget(&gone);
                }
            }
            Some((name, true)) => {
                if let Some(gone) = inner.consumer.remove(&name) {
                    self.forget_bytes(gone.bytes);
                }
            }
            None => {
                return Err(BrokerError::GroupLimit {
                    what: "consumer groups with members",
                    len: inner.len() + 1,
                    max: config::GROUPS_MAX,
                })
            }
        }
        Ok(())
    }

    /// A KIP-848 group's own timeouts (its group configs), used from its
    /// members' next heartbeats on (each member's session is renewed
    /// with the group's timeout then); empty: the broker's again.
    pub fn set_group_timeouts(&self, group: &str, timeouts: config::GroupTimeouts) {
        let mut inner = self.lock();
        if timeouts.is_empty() {
            inner.timeouts.remove(group);
        } else {
            inner.timeouts.insert(group.to_string(), timeouts);
        }
    }

    /// The group's own timeouts (empty: the broker's).
    pub fn group_timeouts(&self, group: &str) -> config::GroupTimeouts {
        self.lock().timeouts.get(group).copied().unwrap_or_default()
    }

    /// A ConsumerGroupHeartbeat (KIP-848, [`consumer`]): creates the group
    /// at its first member's join. `catalog` is looked up under the
    /// coordinator's mutex (see the lock order above).
    pub fn consumer_heartbeat(
        &self,
        group: &str,
        heartbeat: Heartbeat,
        catalog: &dyn TopicCatalog,
    ) -> Result<HeartbeatAnswer, BrokerError> {
        names::validate_group_name(group)?;
        let now_ms = self.clock.now_ms();
        let mut guard = self.lock();
        let inner = &mut *guard;
        self.take_over(inner, group, GroupType::Consumer)
            .map_err(|_| BrokerError::MemberRefused {
                group: group.to_string(),
                refusal: MemberRefusal::NotConsumerGroup,
            })?;
        let created = !inner.consumer.contains_key(group);
        if created {
            if heartbeat.member_epoch != 0 {
                return Err(unknown_member(group, &heartbeat.member_id));
            }
            self.make_room(inner)?;
            inner.consumer.insert(
                group.to_string(),
                ConsumerSlot {
                    group: ConsumerGroup::new(group, now_ms),
                    bytes: 0,
                },
            );
        }
        let Some(slot) = inner.consumer.get_mut(group) else {
            return Err(BrokerError::GroupVanished {
                group: group.to_string(),
            });
        };
        let adding = heartbeat_bytes(&heartbeat);
        let own = slot.group.member_bytes_of(&heartbeat.member_id);
        let ids = &mut inner.ids;
        let own_config = inner.timeouts.get(group).map(|t| t.over(&self.config));
        let config = own_config.as_ref().unwrap_or(&self.config);
        let result = self.check_member_bytes(adding, own).and_then(|()| {
            slot.group
                .heartbeat(heartbeat, now_ms, config, catalog, || ids.next_suffix())
        });
        self.publish_consumer(group, slot);
        if created && slot.group.member_count() == 0 {
            if let Some(gone) = inner.consumer.remove(group) {
                self.forget_bytes(gone.bytes);
            }
        }
        drop(guard);
        self.notify_deadlines();
        result
    }

    /// Counts a KIP-848 group's bytes again and logs who left.
    fn publish_consumer(&self, name: &str, slot: &mut ConsumerSlot) {
        let bytes = slot.group.member_bytes();
        if bytes != slot.bytes {
            self.member_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
            self.member_bytes
                .fetch_sub(slot.bytes as u64, Ordering::Relaxed);
            slot.bytes = bytes;
        }
        let (departures, epochs) = slot.group.take_departures();
        self.rebalances.fetch_add(epochs, Ordering::Relaxed);
        for (member_id, reason) in departures {
            tracing::info!(
                group = name,
                member_id,
                ?reason,
                "member left the consumer group"
            );
        }
        if epochs > 0 {
            tracing::debug!(
                group = name,
                epoch = slot.group.epoch(),
                members = slot.group.member_count(),
                "consumer group epoch moved"
            );
        }
    }

    /// A KIP-848 group as ConsumerGroupDescribe answers it; `None` if
    /// `group` is not one.
    pub fn describe_consumer(&self, group: &str) -> Option<ConsumerGroupSnapshot> {
        self.lock().consumer.get(group).map(|s| s.group.snapshot())
    }

    pub fn poll_join(&self, group: &str, member_id: &str) -> Result<JoinOutcome, BrokerError> {
        self.with_group(
            group,
            || Err(unknown_member(group, member_id)),
            |g, _| g.poll_join(member_id),
        )
    }

    pub fn sync(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: u32,
        assignments: Option<Vec<(String, Bytes)>>,
    ) -> Result<SyncOutcome, BrokerError> {
        // The leader's assignments are held until the next generation:
        // counted like the members' metadata.
        let adding = assignments
            .as_ref()
            .map_or(0, |a| a.iter().map(|(_, bytes)| bytes.len()).sum());
        self.with_group(
            group,
            || Err(unknown_member(group, member_id)),
            |g, now| {
                self.check_member_bytes(adding, 0)?;
                g.sync(member_id, instance_id, generation, assignments, now)
            },
        )
    }

    pub fn poll_sync(
        &self,
        group: &str,
        member_id: &str,
        generation: u32,
    ) -> Result<SyncOutcome, BrokerError> {
        self.with_group(
            group,
            || Err(unknown_member(group, member_id)),
            |g, _| g.poll_sync(member_id, generation),
        )
    }

    pub fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: u32,
    ) -> Result<(), BrokerError> {
        self.with_group(
            group,
            || Err(unknown_member(group, member_id)),
            |g, now| g.heartbeat(member_id, instance_id, generation, now),
        )
    }

    pub fn leave(
        &self,
        group: &str,
        member_id: Option<&str>,
        instance_id: Option<&str>,
        topics: &dyn TopicPartitions,
    ) -> Result<(), BrokerError> {
        let missing = || Err(unknown_member(group, member_id.unwrap_or_default()));
        self.with_group(group, missing, |g, now| {
            g.leave(member_id, instance_id, now, topics)
        })
    }

    /// OffsetFetch v9's check of a KIP-848 member: in `group` at `epoch`.
    /// Groups of the classic protocol are not checked.
    pub fn check_member_epoch(
        &self,
        group: &str,
        member_id: &str,
        epoch: i32,
    ) -> Result<(), BrokerError> {
        match self.lock().consumer.get(group) {
            Some(slot) => slot.group.validate_commit(member_id, epoch),
            None => Ok(()),
        }
    }

    /// Whether a commit to `group` may land; a group the coordinator does
    /// not hold has no members, so only a stateless commit may.
    pub fn validate_commit(
        &self,
        group: &str,
        origin: CommitOrigin<'_>,
    ) -> Result<(), BrokerError> {
        if let Some(slot) = self.lock().consumer.get(group) {
            return match origin {
                CommitOrigin::Stateless => slot.group.validate_commit("", -1),
                CommitOrigin::Member {
                    member_id,
                    generation,
                    ..
                } => slot
                    .group
                    .validate_commit(member_id, i32::try_from(generation).unwrap_or(i32::MAX)),
            };
        }
        let missing = || match origin {
            CommitOrigin::Stateless => Ok(()),
            CommitOrigin::Member { member_id, .. } => Err(unknown_member(group, member_id)),
        };
        self.with_group(group, missing, |g, now| g.validate_commit(origin, now))
    }

    /// The kind of `group`'s members, `None` without members or group.
    pub fn kind_of(&self, group: &str) -> Option<ProtocolKind> {
        if let Some(slot) = self.lock().consumer.get(group) {
            return (slot.group.member_count() > 0).then_some(ProtocolKind::Kafka);
        }
        self.with_group(group, || Ok(None), |g, _| Ok(g.kind()))
            .ok()
            .flatten()
    }

    /// Rebalances `group` (its subscription's partitions changed).
    pub fn request_rebalance(&self, group: &str, topics: &dyn TopicPartitions) {
        let _ = self.with_group(
            group,
            || Ok(()),
            |g, now| {
                g.request_rebalance(now, topics);
                Ok(())
            },
        );
    }

    /// Applies every deadline that passed, in every group; says what
    /// changed.
    pub fn tick(&self, topics: &dyn TopicPartitions) -> Vec<GroupChange> {
        let now_ms = self.clock.now_ms();
        let mut inner = self.lock();
        let mut out = Vec::new();
        for (name, slot) in inner.groups.iter_mut() {
            if slot.group.next_deadline_ms().is_some_and(|d| d <= now_ms) {
                slot.group.tick(now_ms, &self.config, topics);
            }
            for change in self.publish(name, slot) {
                out.push(GroupChange {
                    group: name.clone(),
                    change,
                });
            }
        }
        for (name, slot) in inner.consumer.iter_mut() {
            if slot.group.next_deadline_ms().is_some_and(|d| d <= now_ms) {
                slot.group.tick(now_ms);
                let left = slot.group.member_count() == 0;
                self.publish_consumer(name, slot);
                if left {
                    out.push(GroupChange {
                        group: name.clone(),
                        change: Change::Empty {
                            generation: slot.group.epoch(),
                        },
                    });
                }
            }
        }
        out
    }

    /// When [`Coordinator::tick`] next has something to do.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        let inner = self.lock();
        let classic = inner
            .groups
            .values()
            .filter_map(|s| s.group.next_deadline_ms());
        let modern = inner
            .consumer
            .values()
            .filter_map(|s| s.group.next_deadline_ms());
        classic.chain(modern).min()
    }

    /// A listener notified at the group's next change; take it before
    /// polling. `None` if the group does not exist.
    pub fn listen(&self, group: &str) -> Option<EventListener> {
        self.lock().groups.get(group).map(|s| s.changed.listen())
    }

    /// A group of either kind as describe and list read it
    /// (`classic_view` of a KIP-848 group).
    pub fn describe(&self, group: &str) -> Option<GroupSnapshot> {
        let inner = self.lock();
        if let Some(slot) = inner.consumer.get(group) {
            return Some(classic_view(&slot.group.snapshot()));
        }
        inner.groups.get(group).map(|s| s.group.snapshot())
    }

    /// Every group the coordinator holds, by name.
    pub fn list(&self) -> Vec<GroupSnapshot> {
        let inner = self.lock();
        let mut all: Vec<GroupSnapshot> = inner
            .groups
            .values()
            .map(|s| s.group.snapshot())
            .chain(
                inner
                    .consumer
                    .values()
                    .map(|s| classic_view(&s.group.snapshot())),
            )
            .collect();
        all.sort_by(|a, b| a.group.cmp(&b.group));
        all
    }

    /// Group counts by state, members, rebalances and generations.
    pub fn stats(&self) -> CoordinatorStats {
        let inner = self.lock();
        let mut stats = CoordinatorStats {
            rebalances_total: self.rebalances.load(Ordering::Relaxed),
            member_metadata_bytes: self.member_bytes(),
            ..CoordinatorStats::default()
        };
        for (name, slot) in &inner.groups {
            *stats
                .groups_by_state
                .entry(slot.group.state().name())
                .or_default() += 1;
            stats.members += slot.group.member_count();
            stats
                .generations
                .insert(name.clone(), slot.group.generation());
        }
        for (name, slot) in &inner.consumer {
            *stats
                .groups_by_state
                .entry(group_state(slot.group.state()).name())
                .or_default() += 1;
            stats.members += slot.group.member_count();
            stats.generations.insert(name.clone(), slot.group.epoch());
        }
        stats
    }

    /// Forgets an empty group (its offsets are the offsets store's to
    /// delete); refused while it has members.
    pub fn delete_group(&self, group: &str) -> Result<(), BrokerError> {
        let mut inner = self.lock();
        if let Some(slot) = inner.consumer.get(group) {
            let members = slot.group.member_count();
            if members > 0 {
                return Err(BrokerError::GroupHasMembers {
                    group: group.to_string(),
                    members,
                });
            }
            if let Some(gone) = inner.consumer.remove(group) {
                self.forget_bytes(gone.bytes);
            }
            return Ok(());
        }
        let Some(slot) = inner.groups.get_mut(group) else {
            return Ok(());
        };
        let members = slot.group.member_count();
        if members > 0 {
            return Err(BrokerError::GroupHasMembers {
                group: group.to_string(),
                members,
            });
        }
        slot.group.mark_dead();
        slot.changed.notify(usize::MAX);
        if let Some(gone) = inner.groups.remove(group) {
            self.forget(&gone);
        }
        Ok(())
    }

    /// Whether `group`'s offsets, last committed at `last_commit_ms`, have
    /// expired ([`offsets_expired`]).
    pub fn offsets_expired(&self, group: &str, last_commit_ms: u64) -> bool {
        let now_ms = self.clock.now_ms();
        let inner = self.lock();
        let (members, empty_since_ms) = match (inner.groups.get(group), inner.consumer.get(group)) {
            (Some(s), _) => (
                s.group.member_count(),
                s.group.empty_since_ms().unwrap_or(now_ms),
            ),
            (None, Some(s)) => (
                s.group.member_count(),
                s.group.empty_since_ms().unwrap_or(now_ms),
            ),
            (None, None) => (0, self.started_ms),
        };
        drop(inner);
        offsets_expired(
            members,
            last_commit_ms,
            empty_since_ms,
            now_ms,
            self.config.offsets_retention_ms(),
        )
    }
}

/// What a heartbeat brings that its member will hold, before it is
/// applied (bounded field by field in `consumer`).
fn heartbeat_bytes(h: &Heartbeat) -> usize {
    h.member_id.len()
        + h.instance_id.as_ref().map_or(0, String::len)
        + h.rack_id.as_ref().map_or(0, String::len)
        + h.client_id.len()
        + h.client_host.len()
        + h.topic_names
            .as_ref()
            .map_or(0, |n| n.iter().map(String::len).sum())
        + h.topic_regex.as_ref().map_or(0, String::len)
}

fn group_state(state: ConsumerGroupState) -> GroupState {
    match state {
        ConsumerGroupState::Empty => GroupState::Empty,
        ConsumerGroupState::Assigning => GroupState::Assigning,
        ConsumerGroupState::Reconciling => GroupState::Reconciling,
        ConsumerGroupState::Stable => GroupState::Stable,
    }
}

/// A KIP-848 group in the shape describe and list share with classic
/// groups: members with their topics and owned partitions by name.
fn classic_view(s: &ConsumerGroupSnapshot) -> GroupSnapshot {
    let by_name = |partitions: &consumer::Partitions| {
        let mut named: Vec<TopicPartition> = partitions
            .iter()
            .filter_map(|(id, ps)| s.topic_names.get(id).map(|name| (name, ps)))
            .flat_map(|(name, ps)| ps.iter().map(|p| TopicPartition::new(name, *p)))
            .collect();
        named.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        named
    };
    GroupSnapshot {
        group: s.group.clone(),
        group_type: GroupType::Consumer,
        state: group_state(s.state),
        kind: (!s.members.is_empty()).then_some(ProtocolKind::Kafka),
        protocol: Some(s.assignor.to_string()),
        generation: s.epoch,
        leader: None,
        members: s
            .members
            .iter()
            .map(|m| MemberSnapshot {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                host: m.client_host.clone(),
                subscription: m.subscribed.clone(),
                assignment: Some(MemberAssignment::Partitions(by_name(&m.assignment))),
                // No metadata: the coordinator assigned, and the topics
                // are `subscription` (read so for a `GroupType::Consumer`).
                protocol: MemberProtocol::Kafka {
                    protocol_type: KAFKA_CONSUMER_PROTOCOL_TYPE.to_string(),
                    protocols: Vec::new(),
                },
            })
            .collect(),
    }
}

fn unknown_member(group: &str, member_id: &str) -> BrokerError {
    BrokerError::UnknownMember {
        group: group.to_string(),
        member_id: member_id.to_string(),
    }
}
