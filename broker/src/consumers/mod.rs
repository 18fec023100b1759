//! The HTTP consumer instances of API.md's "Consumer instances"
//! (Confluent REST Proxy v2): stateful consumers the server runs on behalf
//! of HTTP clients. The front-end parses and renders; everything an
//! instance is and does lives here.
//!
//! An instance is created in a group, then either subscribes (topics or a
//! regex; it becomes a *server-side member* of the group coordinator,
//! which assigns partitions with the range assignor) or is assigned
//! partitions by hand (no group membership, no rebalancing; mixing the two
//! is refused, 40903). Per instance the manager keeps a position per held
//! partition (the next offset to read), the offsets returned so far (what a
//! commit without a body commits), the returned offsets not yet committed
//! (auto commit) and when it was last used.
//!
//! Invariants:
//! * Membership changes of an HTTP group happen only here, under the
//!   group's lock, and every one that rebalances (subscribe, unsubscribe,
//!   delete, expiry, a pattern matching a new topic, a subscribed topic
//!   gaining partitions) first commits what the group's auto-commit
//!   instances returned, with their current generation: partitions are
//!   never taken from an auto-commit instance with returned records
//!   uncommitted, so a clean handover duplicates nothing. The coordinator
//!   rejoins server-side members itself, so the rebalance completes within
//!   the call.
//! * A position is kept across a rebalance only when the instance held the
//!   partition in the generation just before (nobody else can have read it
//!   in between); otherwise the partition resumes at the group's committed
//!   offset, else by `auto.offset.reset`. A position outside the
//!   partition's `[beginning, end]` (retention, a truncating recovery) is
//!   reset by `auto.offset.reset` and logged; a position inside it is never
//!   moved, so a records call never skips records that exist.
//! * A commit carries the generation the instance last saw (a member), or
//!   none (manual assignment): the coordinator refuses a stale one
//!   (40903), and a member may only commit partitions it holds.
//! * Records calls never poll: they return the partitions' and the group's
//!   listeners ([`Poll::Wait`]), registered before the re-check, and the
//!   front-end awaits them.
//!
//! Expiry and auto commit run on `tidelog-consumers` ([`Consumers::start`])
//! by the coordinator's clock, or from tests through [`Consumers::tick`].
//! An instance idle for `http.consumer_instance_timeout_ms` is removed (its
//! uncommitted offsets are not committed: it is a client that went away);
//! its coordinator session is that timeout plus [`SESSION_GRACE_MS`], a
//! backstop the manager normally beats.
//!
//! Locks: `groups` (the map, held only to find or insert a group) → a
//! group's mutex (held for a call's whole state change, including its store
//! reads and commit appends) → the coordinator's mutex → the registry's. A
//! group's lock is never held while waiting for records.
//!
//! Instances are not durable: after a restart clients create them again
//! and resume at the committed offsets in `__consumer_offsets`.

pub mod config;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use event_listener::{Event, EventListener, Listener};
use regex::Regex;

pub use config::{
    ConsumersConfig, InstanceConfig, InstanceFormat, OffsetReset, FETCH_BYTES_MAX_DEFAULT,
};

use crate::coordinator::{
    Assignor, CommitOrigin, Coordinator, JoinOutcome, JoinRequest, MemberAssignment,
    MemberIdSource, MemberProtocol, ProtocolKind, RandomIds, TopicPartition,
};
use crate::error::BrokerError;
use crate::groups::{CommitValue, CommittedOffset, OffsetCommit};
use crate::read::Records;
use crate::Broker;

/// Auto commit: returned offsets are committed at the next records call or
/// within this long, whichever comes first (API.md).
pub const AUTO_COMMIT_INTERVAL_MS: u64 = 5000;

/// An instance's coordinator session is its idle timeout plus this: the
/// manager expires it first (committing the others' auto-commit offsets
/// before the rebalance), the coordinator's session is the backstop.
pub const SESSION_GRACE_MS: u64 = 5000;

/// Records one records call returns at most (the stateless fetch's
/// `max_records` bound).
pub const RECORDS_PER_CALL_MAX: usize = 10_000;

/// Partitions one instance may be assigned by hand (the coordinator's
/// subscription bound is the same order).
pub const ASSIGNMENTS_MAX: usize = 10_000;

/// Longest sleep of `tidelog-consumers` (expiry and auto commit are
/// checked at least this often).
pub const CONSUMERS_TICK_MAX_MS: u64 = 1000;

/// The host a server-side member shows in describe.
const MEMBER_HOST: &str = "http";

/// What an instance reads.
#[derive(Debug, Clone)]
pub enum Subscription {
    Topics(Vec<String>),
    /// A regex a whole topic name must match (Kafka's `Pattern.matches`).
    Pattern(String),
}

/// Where a seek goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekTo {
    Beginning,
    End,
}

enum Mode {
    Idle,
    Topics(Vec<String>),
    Pattern(Regex),
    Assigned,
}

impl Mode {
    fn subscribed(&self) -> bool {
        matches!(self, Mode::Topics(_) | Mode::Pattern(_))
    }
}

struct Membership {
    member_id: String,
    /// The generation whose assignment `held` is; 0 before the first.
    generation: u32,
}

struct Instance {
    config: InstanceConfig,
    mode: Mode,
    member: Option<Membership>,
    /// The topics the member joined with and their partition counts then
    /// (a new match or a new partition rebalances).
    joined: Vec<(String, Option<u32>)>,
    /// A rebalance is open (the initial delay of an empty group): nothing
    /// is held until it completes.
    rebalancing: bool,
    held: Vec<TopicPartition>,
    /// Next offset to read; absent: resolve (committed, else reset).
    positions: BTreeMap<TopicPartition, u64>,
    /// Offset after the last record returned, per partition.
    returned: BTreeMap<TopicPartition, u64>,
    /// Returned and not yet committed (auto commit).
    uncommitted: BTreeMap<TopicPartition, u64>,
    auto_commit_due_ms: Option<u64>,
    last_used_ms: u64,
    /// Where the next records call starts among `held` (rotates).
    next_start: usize,
    /// Notified when the instance is deleted or expires, so a records
    /// call waiting on it answers 404 at once, not after its timeout.
    gone: Event,
}

#[derive(Default)]
struct GroupInstances {
    instances: BTreeMap<String, Instance>,
}

/// One partition's records of a records call.
#[derive(Debug)]
pub struct PolledRecords {
    pub topic: Arc<str>,
    pub records: Records,
}

/// What a records call came to.
#[derive(Debug)]
pub enum Poll<R> {
    /// The records rendered (possibly none, on the last try).
    Records(R),
    /// Nothing (or less than `fetch.min.bytes`): wait on any of these (the
    /// held partitions, the group), then poll again.
    Wait(Vec<EventListener>),
}

/// Every HTTP consumer instance of this server.
pub struct Consumers {
    config: ConsumersConfig,
    broker: Weak<Broker>,
    coordinator: Arc<Coordinator>,
    groups: Mutex<BTreeMap<String, Arc<Mutex<GroupInstances>>>>,
    instances: AtomicUsize,
    names: Mutex<RandomIds>,
    stop: AtomicBool,
    wake: Event,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Consumers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumers")
            .field("config", &self.config)
            .field("instances", &self.instances.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // No panicking paths on client input; after a bug's panic the state
    // is still the last consistent one of each call's steps.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unknown(group: &str, name: &str) -> BrokerError {
    BrokerError::UnknownConsumerInstance {
        group: group.to_string(),
        instance: name.to_string(),
    }
}

fn state_error(group: &str, name: &str, reason: String) -> BrokerError {
    BrokerError::ConsumerState {
        group: group.to_string(),
        instance: name.to_string(),
        reason,
    }
}

fn shutting_down() -> BrokerError {
    BrokerError::Store {
        source: tidelog_storage::StoreError::Closed,
    }
}

impl Consumers {
    /// A manager without its thread: expiry and auto commit run when
    /// [`Consumers::tick`] is called (tests).
    pub fn new(broker: &Arc<Broker>, config: ConsumersConfig) -> Arc<Self> {
        Arc::new(Consumers {
            config,
            broker: Arc::downgrade(broker),
            coordinator: Arc::clone(&broker.coordinator),
            groups: Mutex::new(BTreeMap::new()),
            instances: AtomicUsize::new(0),
            names: Mutex::new(RandomIds::default()),
            stop: AtomicBool::new(false),
            wake: Event::new(),
            thread: Mutex::new(None),
        })
    }

    /// A manager with `tidelog-consumers`, which ticks it at least every
    /// [`CONSUMERS_TICK_MAX_MS`] until [`Consumers::stop`]. It holds the
    /// broker weakly, so it never keeps it from shutting down.
    pub fn start(broker: &Arc<Broker>, config: ConsumersConfig) -> Result<Arc<Self>, BrokerError> {
        let consumers = Self::new(broker, config);
        let weak = Arc::downgrade(&consumers);
        let handle = std::thread::Builder::new()
            .name("tidelog-consumers".into())
            .spawn(move || loop {
                let Some(c) = weak.upgrade() else { return };
                if c.stop.load(Ordering::Acquire) {
                    return;
                }
                let listener = c.wake.listen();
                // Supervised like the other threads: a panic (a bug) is
                // logged and the next pass runs.
                let pass = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.tick()));
                if pass.is_err() {
                    tracing::error!(
                        thread = "tidelog-consumers",
                        "background pass panicked; continuing"
                    );
                }
                drop(c);
                let _ = listener.wait_timeout(Duration::from_millis(CONSUMERS_TICK_MAX_MS));
            })
            .map_err(|source| BrokerError::ThreadStart {
                thread: "tidelog-consumers",
                source,
            })?;
        *lock(&consumers.thread) = Some(handle);
        Ok(consumers)
    }

    /// Stops and joins `tidelog-consumers`, then commits what every
    /// auto-commit instance returned (a clean shutdown closes its
    /// consumers, as a Kafka consumer commits on close). Blocking.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake.notify(usize::MAX);
        if let Some(handle) = lock(&self.thread).take() {
            if handle.join().is_err() {
                tracing::error!("the tidelog-consumers thread panicked while stopping");
            }
        }
        let Ok(broker) = self.broker() else { return };
        let slots: Vec<(String, Arc<Mutex<GroupInstances>>)> = lock(&self.groups)
            .iter()
            .map(|(g, s)| (g.clone(), Arc::clone(s)))
            .collect();
        for (group, slot) in slots {
            self.commit_group_auto(&broker, &group, &mut lock(&slot), None);
        }
    }

    pub fn config(&self) -> &ConsumersConfig {
        &self.config
    }

    /// Instances of every group.
    pub fn instance_count(&self) -> usize {
        self.instances.load(Ordering::Relaxed)
    }

    fn broker(&self) -> Result<Arc<Broker>, BrokerError> {
        self.broker.upgrade().ok_or_else(shutting_down)
    }

    fn group(&self, group: &str) -> Option<Arc<Mutex<GroupInstances>>> {
        lock(&self.groups).get(group).cloned()
    }

    /// Runs `f` on instance `name` of `group` under the group's lock,
    /// after marking it used (and keeping its coordinator session).
    fn with_instance<T>(
        &self,
        group: &str,
        name: &str,
        f: impl FnOnce(&Arc<Broker>, &mut GroupInstances) -> Result<T, BrokerError>,
    ) -> Result<T, BrokerError> {
        let broker = self.broker()?;
        let slot = self.group(group).ok_or_else(|| unknown(group, name))?;
        let mut gi = lock(&slot);
        let now_ms = self.coordinator.now_ms();
        let inst = gi
            .instances
            .get_mut(name)
            .ok_or_else(|| unknown(group, name))?;
        inst.last_used_ms = now_ms;
        if let Some(m) = &inst.member {
            let beat = self
                .coordinator
                .heartbeat(group, &m.member_id, None, m.generation);
            // The backstop session ran out (or the group was deleted): the
            // next refresh joins again. A rebalance or a stale generation is
            // the refresh's to handle.
            if let Err(BrokerError::UnknownMember { .. }) = beat {
                inst.member = None;
            }
        }
        f(&broker, &mut gi)
    }

    /// [`Consumers::with_instance`] on the instance alone, its assignment
    /// refreshed first when `refresh` (a completed rebalance taken).
    fn with_one<T>(
        &self,
        group: &str,
        name: &str,
        refresh: bool,
        f: impl FnOnce(&Arc<Broker>, &mut Instance) -> Result<T, BrokerError>,
    ) -> Result<T, BrokerError> {
        self.with_instance(group, name, |broker, gi| {
            let inst = gi
                .instances
                .get_mut(name)
                .ok_or_else(|| unknown(group, name))?;
            if refresh {
                self.refresh(broker, group, name, inst)?;
            }
            f(broker, inst)
        })
    }

    /// Creates an instance; its name (generated when `config.name` is
    /// `None`).
    pub fn create(&self, group: &str, config: InstanceConfig) -> Result<String, BrokerError> {
        crate::names::validate_group_name(group)?;
        if let Some(name) = &config.name {
            config::validate_instance_name(name)?;
        }
        if self
            .coordinator
            .describe(group)
            .is_some_and(|g| g.kind == Some(ProtocolKind::Kafka))
        {
            return Err(BrokerError::InconsistentGroupProtocol {
                group: group.to_string(),
                reason: "the group's members are Kafka consumers; an HTTP consumer instance cannot join it".into(),
            });
        }
        let slot = {
            let mut groups = lock(&self.groups);
            Arc::clone(groups.entry(group.to_string()).or_default())
        };
        let mut gi = lock(&slot);
        let name = match &config.name {
            Some(name) if gi.instances.contains_key(name) => {
                return Err(BrokerError::ConsumerInstanceExists {
                    group: group.to_string(),
                    instance: name.clone(),
                })
            }
            Some(name) => name.clone(),
            None => loop {
                let name = format!("consumer-{}", lock(&self.names).next_suffix());
                if !gi.instances.contains_key(&name) {
                    break name;
                }
            },
        };
        let max = self.config.max_instances;
        let reserved = self
            .instances
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        if let Err(len) = reserved {
            return Err(BrokerError::GroupLimit {
                what: "consumer instances of this server (http.max_consumer_instances)",
                len: len + 1,
                max,
            });
        }
        gi.instances.insert(
            name.clone(),
            Instance {
                config,
                mode: Mode::Idle,
                member: None,
                joined: Vec::new(),
                rebalancing: false,
                held: Vec::new(),
                positions: BTreeMap::new(),
                returned: BTreeMap::new(),
                uncommitted: BTreeMap::new(),
                auto_commit_due_ms: None,
                last_used_ms: self.coordinator.now_ms(),
                next_start: 0,
                gone: Event::new(),
            },
        );
        tracing::info!(group, instance = %name, "consumer instance created");
        Ok(name)
    }

    /// The instance's settings (its format, its default records timeout).
    pub fn instance_config(&self, group: &str, name: &str) -> Result<InstanceConfig, BrokerError> {
        self.with_one(group, name, false, |_, inst| Ok(inst.config.clone()))
    }

    /// Deletes an instance; its partitions go to the group's others. An
    /// auto-commit instance commits what it returned first (as a Kafka
    /// consumer does on close).
    pub fn delete(&self, group: &str, name: &str) -> Result<(), BrokerError> {
        self.with_instance(group, name, |broker, gi| {
            self.commit_group_auto(broker, group, gi, None);
            if let Some(inst) = gi.instances.remove(name) {
                self.instances.fetch_sub(1, Ordering::AcqRel);
                self.leave(broker, group, &inst);
                inst.gone.notify(usize::MAX);
            }
            tracing::info!(group, instance = name, "consumer instance deleted");
            Ok(())
        })?;
        self.forget_if_empty(group);
        Ok(())
    }

    fn forget_if_empty(&self, group: &str) {
        let mut groups = lock(&self.groups);
        // Only the map holds it (clones are made under the map's lock, so
        // none can appear meanwhile): no call is about to use it.
        let empty = groups.get(group).is_some_and(|slot| {
            Arc::strong_count(slot) == 1 && slot.try_lock().is_ok_and(|gi| gi.instances.is_empty())
        });
        if empty {
            groups.remove(group);
        }
    }

    /// Subscribes to topics or a pattern (replacing an earlier
    /// subscription); 40903 if the instance has manual assignments.
    pub fn subscribe(
        &self,
        group: &str,
        name: &str,
        subscription: Subscription,
    ) -> Result<(), BrokerError> {
        let mode = match subscription {
            Subscription::Topics(topics) => {
                if topics.is_empty() {
                    return Err(BrokerError::ConsumerConfig {
                        field: "topics".into(),
                        reason: "must name at least one topic".into(),
                    });
                }
                for t in &topics {
                    crate::names::validate_topic_name(t)?;
                }
                let mut topics = topics;
                topics.sort_unstable();
                topics.dedup();
                Mode::Topics(topics)
            }
            Subscription::Pattern(text) => Mode::Pattern(compile_pattern(&text)?),
        };
        self.with_instance(group, name, |broker, gi| {
            if matches!(gi.instances[name].mode, Mode::Assigned) {
                return Err(state_error(
                    group,
                    name,
                    "it has manual assignments; subscribing and assigning cannot be mixed".into(),
                ));
            }
            self.commit_group_auto(broker, group, gi, None);
            let Some(inst) = gi.instances.get_mut(name) else {
                return Err(unknown(group, name));
            };
            let previous = std::mem::replace(&mut inst.mode, mode);
            if let Err(e) = self.join(broker, group, name, inst) {
                inst.mode = previous;
                return Err(e);
            }
            Ok(())
        })
    }

    /// The topics subscribed (a pattern's current matches).
    pub fn subscription(&self, group: &str, name: &str) -> Result<Vec<String>, BrokerError> {
        self.with_instance(group, name, |broker, gi| {
            Ok(resolve_topics(broker, &gi.instances[name].mode))
        })
    }

    /// Ends the subscription (leaves the group; its partitions go to the
    /// others).
    pub fn unsubscribe(&self, group: &str, name: &str) -> Result<(), BrokerError> {
        self.with_instance(group, name, |broker, gi| {
            if !gi.instances[name].mode.subscribed() {
                return Ok(());
            }
            self.commit_group_auto(broker, group, gi, None);
            let Some(inst) = gi.instances.get_mut(name) else {
                return Err(unknown(group, name));
            };
            self.leave(broker, group, inst);
            reset_holdings(inst, Mode::Idle);
            Ok(())
        })
    }

    /// Assigns partitions by hand (no group membership); 40903 if
    /// subscribed.
    pub fn assign(
        &self,
        group: &str,
        name: &str,
        partitions: Vec<TopicPartition>,
    ) -> Result<(), BrokerError> {
        if partitions.len() > ASSIGNMENTS_MAX {
            return Err(BrokerError::GroupLimit {
                what: "partitions assigned to one consumer instance",
                len: partitions.len(),
                max: ASSIGNMENTS_MAX,
            });
        }
        self.with_instance(group, name, |broker, gi| {
            for tp in &partitions {
                crate::names::validate_topic_name(&tp.topic)?;
                broker
                    .registry
                    .require(&tp.topic)?
                    .check_partition(tp.partition)?;
            }
            if gi.instances[name].mode.subscribed() {
                return Err(state_error(
                    group,
                    name,
                    "it is subscribed; subscribing and assigning cannot be mixed".into(),
                ));
            }
            let Some(inst) = gi.instances.get_mut(name) else {
                return Err(unknown(group, name));
            };
            if inst.config.auto_commit {
                commit_uncommitted(broker, group, name, inst);
            }
            let mut held = partitions;
            held.sort_unstable();
            held.dedup();
            let keep: BTreeSet<TopicPartition> = held.iter().cloned().collect();
            retain_held(inst, &keep);
            inst.held = held;
            inst.mode = Mode::Assigned;
            Ok(())
        })
    }

    /// The partitions the instance holds now (manual, or from its group).
    pub fn assignments(&self, group: &str, name: &str) -> Result<Vec<TopicPartition>, BrokerError> {
        self.with_one(group, name, true, |_, inst| {
            Ok(if inst.rebalancing {
                Vec::new()
            } else {
                inst.held.clone()
            })
        })
    }

    /// Sets the next records call's start on held partitions.
    pub fn seek(
        &self,
        group: &str,
        name: &str,
        offsets: Vec<(TopicPartition, u64)>,
    ) -> Result<(), BrokerError> {
        self.with_one(group, name, true, |_, inst| {
            for (tp, _) in &offsets {
                check_held(group, name, inst, tp)?;
            }
            for (tp, offset) in offsets {
                inst.positions.insert(tp, offset);
            }
            Ok(())
        })
    }

    /// Seeks held partitions to their beginning or end.
    pub fn seek_to(
        &self,
        group: &str,
        name: &str,
        partitions: Vec<TopicPartition>,
        to: SeekTo,
    ) -> Result<(), BrokerError> {
        self.with_one(group, name, true, |broker, inst| {
            let mut targets = Vec::with_capacity(partitions.len());
            for tp in partitions {
                check_held(group, name, inst, &tp)?;
                let (beginning, end) = broker.partition(&tp.topic, tp.partition)?.offsets();
                targets.push((
                    tp,
                    match to {
                        SeekTo::Beginning => beginning,
                        SeekTo::End => end,
                    },
                ));
            }
            inst.positions.extend(targets);
            Ok(())
        })
    }

    /// Commits. `offsets` are the last offsets consumed (Confluent's rule:
    /// the group's committed offset becomes `offset + 1`); `None`:
    /// everything this instance returned. 40903 for a stale generation, or
    /// a partition a member does not hold. Blocking.
    pub fn commit(
        &self,
        group: &str,
        name: &str,
        offsets: Option<Vec<OffsetCommit>>,
    ) -> Result<(), BrokerError> {
        self.with_one(group, name, false, |broker, inst| {
            let commits: Vec<OffsetCommit> = match offsets {
                None => next_offsets(&inst.returned),
                Some(list) => {
                    let mut out = Vec::with_capacity(list.len());
                    for mut c in list {
                        let tp = TopicPartition::new(&c.topic, c.partition);
                        if inst.mode.subscribed() {
                            check_held(group, name, inst, &tp)?;
                        }
                        c.value.offset = c.value.offset.saturating_add(1);
                        out.push(c);
                    }
                    out
                }
            };
            commit_as(broker, group, inst, commits)
        })
    }

    /// The group's committed offsets of `partitions` (those it has).
    pub fn committed(
        &self,
        group: &str,
        name: &str,
        partitions: Vec<TopicPartition>,
    ) -> Result<Vec<CommittedOffset>, BrokerError> {
        self.with_instance(group, name, |broker, _| {
            let wanted: BTreeSet<(&str, u32)> = partitions
                .iter()
                .map(|tp| (tp.topic.as_str(), tp.partition))
                .collect();
            Ok(broker
                .groups
                .get(group, None)
                .unwrap_or_default()
                .into_iter()
                .filter(|c| wanted.contains(&(c.topic.as_str(), c.partition)))
                .collect())
        })
    }

    /// One try of a records call: up to `max_bytes` of payload (at least
    /// one record if there is one) and [`RECORDS_PER_CALL_MAX`] records
    /// from the held partitions, starting one partition further each call.
    /// With nothing (or less than `fetch.min.bytes`) and `last` false: the
    /// listeners to wait on. Blocking (auto commit appends; compacted
    /// partitions are read with `pread`).
    ///
    /// `render` turns the records into the answer before the positions
    /// move: if it fails (a value the format cannot show), nothing is
    /// consumed, so no record is skipped.
    pub fn poll<R, E: From<BrokerError>>(
        &self,
        group: &str,
        name: &str,
        max_bytes: usize,
        last: bool,
        render: impl FnOnce(&[PolledRecords]) -> Result<R, E>,
    ) -> Result<Poll<R>, E> {
        let mut render = Some(render);
        let mut rendered = None;
        let polled = self.with_one(group, name, false, |broker, inst| {
            if inst.config.auto_commit {
                commit_uncommitted(broker, group, name, inst);
            }
            self.refresh(broker, group, name, inst)?;
            // A record added between a read and its listener shows in the
            // listener's re-check; then read again (a few times at most,
            // then answer what there is).
            let mut take = |inst: &mut Instance, read: HeldRead| {
                let Some(render) = render.take() else {
                    return;
                };
                let result = render(&read.polled);
                if result.is_ok() {
                    self.apply_read(inst, &read);
                }
                rendered = Some(result);
            };
            for _ in 0..3 {
                let read = read_held(broker, group, inst, max_bytes)?;
                let enough = read.bytes >= inst.config.fetch_min_bytes.max(1);
                if (enough && !read.batches.is_empty()) || last {
                    take(inst, read);
                    return Ok(None);
                }
                match self.listeners(broker, group, inst, &read)? {
                    Some(listeners) => return Ok(Some(listeners)),
                    None => continue,
                }
            }
            let read = read_held(broker, group, inst, max_bytes)?;
            take(inst, read);
            Ok(None)
        })?;
        match (polled, rendered) {
            (Some(listeners), _) => Ok(Poll::Wait(listeners)),
            (None, Some(result)) => result.map(Poll::Records),
            (None, None) => Err(BrokerError::RecordsCallUnanswered.into()),
        }
    }

    /// Applies a read that was answered: positions move, returned and
    /// uncommitted offsets are noted, the start rotates.
    fn apply_read(&self, inst: &mut Instance, read: &HeldRead) {
        for (tp, next) in &read.batches {
            let (tp, next) = (tp.clone(), *next);
            inst.positions.insert(tp.clone(), next);
            inst.returned.insert(tp.clone(), next);
            if inst.config.auto_commit {
                inst.uncommitted.insert(tp, next);
                inst.auto_commit_due_ms.get_or_insert(
                    self.coordinator
                        .now_ms()
                        .saturating_add(AUTO_COMMIT_INTERVAL_MS),
                );
            }
        }
        if !inst.held.is_empty() {
            inst.next_start = (read.start + 1) % inst.held.len();
        }
    }

    /// Listeners of the instance itself (its deletion), of every held
    /// partition (past what the read found) and of the group; `None` if a partition has records already.
    fn listeners(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        inst: &Instance,
        read: &HeldRead,
    ) -> Result<Option<Vec<EventListener>>, BrokerError> {
        let mut listeners = Vec::with_capacity(read.next.len() + 2);
        // Deleted or expired meanwhile: the call wakes and answers 404.
        listeners.push(inst.gone.listen());
        if let Some(l) = self.coordinator.listen(group) {
            listeners.push(l);
        }
        if inst.rebalancing {
            return Ok(Some(listeners));
        }
        for (tp, from) in &read.next {
            let Ok(part) = broker.partition(&tp.topic, tp.partition) else {
                continue;
            };
            match part.listen(*from)? {
                Some(l) => listeners.push(l),
                None => return Ok(None),
            }
        }
        Ok(Some(listeners))
    }

    /// Keeps a subscribed instance's assignment current: joins when it is
    /// not a member (first subscribe, or its session was lost), else takes
    /// a completed rebalance's assignment.
    fn refresh(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        name: &str,
        inst: &mut Instance,
    ) -> Result<(), BrokerError> {
        if !inst.mode.subscribed() {
            return Ok(());
        }
        let Some(m) = &inst.member else {
            return self.join(broker, group, name, inst);
        };
        match self.coordinator.poll_join(group, &m.member_id) {
            Ok(outcome) => {
                apply_outcome(inst, outcome);
                Ok(())
            }
            Err(BrokerError::UnknownMember { .. }) => {
                inst.member = None;
                self.join(broker, group, name, inst)
            }
            Err(e) => Err(e),
        }
    }

    /// Joins (or rejoins with new topics) as a server-side member.
    fn join(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        name: &str,
        inst: &mut Instance,
    ) -> Result<(), BrokerError> {
        let topics = resolve_topics(broker, &inst.mode);
        let partitions = |t: &str| partition_count(broker, t);
        let session_ms = self
            .config
            .instance_timeout_ms
            .saturating_add(SESSION_GRACE_MS);
        let request = |member_id: Option<String>| JoinRequest {
            member_id,
            instance_id: None,
            client_id: name.to_string(),
            host: MEMBER_HOST.to_string(),
            session_timeout_ms: session_ms,
            rebalance_timeout_ms: session_ms,
            protocol: MemberProtocol::Http {
                topics: topics.clone(),
                assignor: Assignor::Range,
            },
            require_known_member_id: false,
            server_side: true,
        };
        let known = inst.member.as_ref().map(|m| m.member_id.clone());
        let outcome = match self
            .coordinator
            .join(group, request(known.clone()), &partitions)
        {
            Err(BrokerError::UnknownMember { .. }) if known.is_some() => {
                inst.member = None;
                self.coordinator.join(group, request(None), &partitions)
            }
            other => other,
        }?;
        inst.joined = topics.iter().map(|t| (t.clone(), partitions(t))).collect();
        apply_outcome(inst, outcome);
        Ok(())
    }

    fn leave(&self, broker: &Arc<Broker>, group: &str, inst: &Instance) {
        if let Some(m) = &inst.member {
            let partitions = |t: &str| partition_count(broker, t);
            // Already gone (the backstop session) is what leaving wants.
            let _ = self
                .coordinator
                .leave(group, Some(&m.member_id), None, &partitions);
        }
    }

    /// Commits the returned offsets of every auto-commit instance of the
    /// group (but `except`), before a change that rebalances it.
    fn commit_group_auto(
        &self,
        broker: &Arc<Broker>,
        group: &str,
        gi: &mut GroupInstances,
        except: Option<&str>,
    ) {
        for (name, inst) in gi.instances.iter_mut() {
            if inst.config.auto_commit && Some(name.as_str()) != except {
                commit_uncommitted(broker, group, name, inst);
            }
        }
    }

    /// Expiry, auto commits that are due, and subscriptions whose topics
    /// changed (a pattern matching a new topic, a topic created or gaining
    /// partitions): what `tidelog-consumers` runs. Blocking.
    pub fn tick(&self) {
        let Ok(broker) = self.broker() else { return };
        let slots: Vec<(String, Arc<Mutex<GroupInstances>>)> = lock(&self.groups)
            .iter()
            .map(|(g, s)| (g.clone(), Arc::clone(s)))
            .collect();
        let mut emptied = Vec::new();
        for (group, slot) in &slots {
            let group = group.as_str();
            let mut gi = lock(slot);
            let now_ms = self.coordinator.now_ms();
            let timeout_ms = self.config.instance_timeout_ms;
            let expired: Vec<String> = gi
                .instances
                .iter()
                .filter(|(_, i)| now_ms >= i.last_used_ms.saturating_add(timeout_ms))
                .map(|(n, _)| n.clone())
                .collect();
            if !expired.is_empty() {
                for name in &expired {
                    // A client that went away: what it was handed is not
                    // committed for it; the others commit theirs before
                    // the rebalance.
                    if let Some(inst) = gi.instances.remove(name) {
                        self.instances.fetch_sub(1, Ordering::AcqRel);
                        self.commit_group_auto(&broker, group, &mut gi, None);
                        self.leave(&broker, group, &inst);
                        inst.gone.notify(usize::MAX);
                        tracing::info!(
                            group,
                            instance = name,
                            idle_ms = now_ms.saturating_sub(inst.last_used_ms),
                            "consumer instance expired (http.consumer_instance_timeout_ms)"
                        );
                    }
                }
            }
            for (name, inst) in gi.instances.iter_mut() {
                if inst.auto_commit_due_ms.is_some_and(|due| due <= now_ms) {
                    commit_uncommitted(&broker, group, name, inst);
                }
            }
            let changed: Vec<String> = gi
                .instances
                .iter()
                .filter(|(_, i)| i.member.is_some() && topics_changed(&broker, i))
                .map(|(n, _)| n.clone())
                .collect();
            for name in changed {
                self.commit_group_auto(&broker, group, &mut gi, None);
                if let Some(inst) = gi.instances.get_mut(&name) {
                    let before: Vec<String> = inst.joined.iter().map(|(t, _)| t.clone()).collect();
                    let after = resolve_topics(&broker, &inst.mode);
                    let result = if before == after {
                        // Same topics, more partitions: the subscription is
                        // unchanged, so ask for the rebalance.
                        let partitions = |t: &str| partition_count(&broker, t);
                        self.coordinator.request_rebalance(group, &partitions);
                        inst.joined = after.iter().map(|t| (t.clone(), partitions(t))).collect();
                        Ok(())
                    } else {
                        self.join(&broker, group, &name, inst)
                    };
                    match result {
                        Ok(()) => tracing::info!(
                            group,
                            instance = name,
                            topics = ?after,
                            "subscribed topics changed: rebalancing"
                        ),
                        Err(e) => tracing::warn!(
                            group,
                            instance = name,
                            error = %e,
                            "cannot rejoin after the subscribed topics changed"
                        ),
                    }
                }
            }
            if gi.instances.is_empty() {
                emptied.push(group.to_string());
            }
        }
        drop(slots);
        for group in emptied {
            self.forget_if_empty(&group);
        }
    }
}

/// A pattern, anchored (the whole name must match, as Kafka's), bounded
/// in length, nesting and compiled size.
///
/// The text is parsed on its own first and the *parsed* expression is
/// anchored: wrapping the text as `^(?:text)$` would let a pattern close
/// the group itself (`events)|(.*` matches every name) or comment the
/// anchor out in verbose mode. The anchored expression is printed back
/// (regex-syntax's printer gives an equivalent pattern with no comments
/// or flags left to interpret) and compiled with the size limit.
fn compile_pattern(text: &str) -> Result<Regex, BrokerError> {
    use regex_syntax::hir::{Hir, Look};

    let bad = |reason: String| BrokerError::ConsumerConfig {
        field: "topic_pattern".into(),
        reason,
    };
    if text.is_empty() || text.len() > config::TOPIC_PATTERN_MAX_BYTES {
        return Err(bad(format!(
            "must be 1 to {} bytes long",
            config::TOPIC_PATTERN_MAX_BYTES
        )));
    }
    let parsed = regex_syntax::ParserBuilder::new()
        .nest_limit(config::TOPIC_PATTERN_NEST_MAX)
        .build()
        .parse(text)
        .map_err(|e| bad(format!("is not a valid regex: {e}")))?;
    let anchored = Hir::concat(vec![Hir::look(Look::Start), parsed, Hir::look(Look::End)]);
    regex::RegexBuilder::new(&anchored.to_string())
        .size_limit(config::TOPIC_PATTERN_COMPILED_MAX_BYTES)
        .build()
        .map_err(|e| bad(format!("is not a valid regex: {e}")))
}

/// The topics a subscription names now: a pattern's matches among the
/// user topics, sorted.
fn resolve_topics(broker: &Broker, mode: &Mode) -> Vec<String> {
    match mode {
        Mode::Topics(topics) => topics.clone(),
        Mode::Pattern(regex) => {
            let mut topics: Vec<String> = broker
                .registry
                .all()
                .iter()
                .filter(|t| !t.is_internal() && regex.is_match(&t.name))
                .map(|t| t.name.to_string())
                .collect();
            topics.sort_unstable();
            topics
        }
        Mode::Idle | Mode::Assigned => Vec::new(),
    }
}

/// A topic's partition count, `None` if it does not exist (what the
/// coordinator's assignor asks).
fn partition_count(broker: &Broker, topic: &str) -> Option<u32> {
    broker.registry.get(topic).map(|t| t.partitions.get())
}

/// Whether a member's topics or their partition counts moved since it
/// joined.
fn topics_changed(broker: &Broker, inst: &Instance) -> bool {
    let now = resolve_topics(broker, &inst.mode);
    now.len() != inst.joined.len()
        || now
            .iter()
            .zip(&inst.joined)
            .any(|(t, (joined, count))| t != joined || partition_count(broker, t) != *count)
}

/// Takes a join's or a poll's answer: a completed rebalance's assignment
/// (positions kept only for partitions held in the generation just
/// before), or an open one (nothing held meanwhile).
fn apply_outcome(inst: &mut Instance, outcome: JoinOutcome) {
    match outcome {
        JoinOutcome::Pending { member_id } => {
            inst.member.get_or_insert(Membership {
                member_id,
                generation: 0,
            });
            inst.rebalancing = true;
        }
        JoinOutcome::Joined(response) => {
            let member = inst.member.get_or_insert(Membership {
                member_id: response.member_id.clone(),
                generation: 0,
            });
            if member.generation == response.generation && !inst.rebalancing {
                return;
            }
            let continuous = member.generation != 0 && response.generation == member.generation + 1;
            member.generation = response.generation;
            let new = match response.assignment {
                Some(MemberAssignment::Partitions(list)) => list,
                _ => Vec::new(),
            };
            let keep: BTreeSet<TopicPartition> = if continuous {
                new.iter()
                    .filter(|tp| inst.held.contains(tp))
                    .cloned()
                    .collect()
            } else {
                BTreeSet::new()
            };
            retain_held(inst, &keep);
            inst.held = new;
            inst.rebalancing = false;
            inst.next_start = 0;
        }
    }
}

fn retain_held(inst: &mut Instance, keep: &BTreeSet<TopicPartition>) {
    inst.positions.retain(|tp, _| keep.contains(tp));
    inst.returned.retain(|tp, _| keep.contains(tp));
    inst.uncommitted.retain(|tp, _| keep.contains(tp));
    if inst.uncommitted.is_empty() {
        inst.auto_commit_due_ms = None;
    }
}

fn reset_holdings(inst: &mut Instance, mode: Mode) {
    inst.mode = mode;
    inst.member = None;
    inst.joined.clear();
    inst.rebalancing = false;
    inst.held.clear();
    retain_held(inst, &BTreeSet::new());
}

fn check_held(
    group: &str,
    name: &str,
    inst: &Instance,
    tp: &TopicPartition,
) -> Result<(), BrokerError> {
    if !inst.rebalancing && inst.held.contains(tp) {
        return Ok(());
    }
    Err(state_error(
        group,
        name,
        format!(
            "it does not hold partition {} of topic {:?} (a rebalance gave it to another instance, or it never had it)",
            tp.partition, tp.topic
        ),
    ))
}

/// Commits `commits` as the instance: its membership's generation, or
/// without membership (manual assignment); the offsets it covers are no
/// longer uncommitted.
fn commit_as(
    broker: &Broker,
    group: &str,
    inst: &mut Instance,
    commits: Vec<OffsetCommit>,
) -> Result<(), BrokerError> {
    if commits.is_empty() {
        return Ok(());
    }
    let covered: Vec<(TopicPartition, u64)> = commits
        .iter()
        .map(|c| (TopicPartition::new(&c.topic, c.partition), c.value.offset))
        .collect();
    let origin = match (&inst.member, inst.mode.subscribed()) {
        (Some(m), true) => CommitOrigin::Member {
            member_id: &m.member_id,
            instance_id: None,
            generation: m.generation,
        },
        _ => CommitOrigin::Stateless,
    };
    broker.commit_offsets(group, commits, origin)?;
    for (tp, offset) in covered {
        if inst.uncommitted.get(&tp).is_some_and(|o| *o <= offset) {
            inst.uncommitted.remove(&tp);
        }
    }
    if inst.uncommitted.is_empty() {
        inst.auto_commit_due_ms = None;
    }
    Ok(())
}

/// Commits of the next offsets to read, without metadata.
fn next_offsets(offsets: &BTreeMap<TopicPartition, u64>) -> Vec<OffsetCommit> {
    offsets
        .iter()
        .map(|(tp, next)| OffsetCommit {
            topic: tp.topic.clone(),
            partition: tp.partition,
            value: CommitValue {
                offset: *next,
                metadata: String::new(),
            },
        })
        .collect()
}

/// Auto commit of what the instance returned; a refusal (a stale
/// generation: the partitions moved on) drops them, logged.
fn commit_uncommitted(broker: &Broker, group: &str, name: &str, inst: &mut Instance) {
    if inst.uncommitted.is_empty() {
        inst.auto_commit_due_ms = None;
        return;
    }
    let commits = next_offsets(&inst.uncommitted);
    if let Err(e) = commit_as(broker, group, inst, commits) {
        tracing::warn!(
            group,
            instance = name,
            error = %e,
            "auto commit refused; those records will be read again"
        );
        inst.uncommitted.clear();
        inst.auto_commit_due_ms = None;
    }
}

/// One read over the held partitions, not yet applied.
struct HeldRead {
    /// (partition, next offset) of the partitions with records, and their
    /// records, in the same order.
    batches: Vec<(TopicPartition, u64)>,
    polled: Vec<PolledRecords>,
    /// Every held partition and where a wait for it starts.
    next: Vec<(TopicPartition, u64)>,
    bytes: u64,
    start: usize,
}

/// Reads the held partitions from their positions (resolved first),
/// starting at `next_start`, within `max_bytes` (one record over it only
/// if it is the first) and [`RECORDS_PER_CALL_MAX`].
fn read_held(
    broker: &Arc<Broker>,
    group: &str,
    inst: &mut Instance,
    max_bytes: usize,
) -> Result<HeldRead, BrokerError> {
    let held = if inst.rebalancing {
        Vec::new()
    } else {
        inst.held.clone()
    };
    let start = if held.is_empty() {
        0
    } else {
        inst.next_start % held.len()
    };
    let mut read = HeldRead {
        batches: Vec::new(),
        polled: Vec::new(),
        next: Vec::with_capacity(held.len()),
        bytes: 0,
        start,
    };
    let max_bytes = max_bytes as u64;
    let mut records_left = RECORDS_PER_CALL_MAX;
    for i in 0..held.len() {
        let tp = &held[(start + i) % held.len()];
        let part = match broker.partition(&tp.topic, tp.partition) {
            Ok(part) => part,
            // Deleted since it was assigned: the next rebalance drops it.
            Err(BrokerError::UnknownTopic { .. } | BrokerError::UnknownPartition { .. }) => {
                continue
            }
            Err(e) => return Err(e),
        };
        let position = resolve_position(broker, group, inst, tp, &part)?;
        if records_left == 0 || read.bytes >= max_bytes {
            read.next.push((tp.clone(), position));
            continue;
        }
        let left_bytes = usize::try_from(max_bytes - read.bytes).unwrap_or(usize::MAX);
        let batch = part.read_tiered_blocking(position, records_left, left_bytes)?;
        let mut records = batch.records;
        let mut kept = 0;
        let mut bytes = 0u64;
        for r in records.iter() {
            let size = r.payload_bytes();
            let first = read.batches.is_empty() && kept == 0;
            if !first && read.bytes + bytes + size > max_bytes {
                break;
            }
            bytes += size;
            kept += 1;
        }
        let next = if kept == records.len() {
            batch.next_offset
        } else if kept == 0 {
            position
        } else {
            records
                .iter()
                .nth(kept - 1)
                .map_or(position, |r| r.offset() + 1)
        };
        truncate(&mut records, kept);
        read.next.push((tp.clone(), next.max(position)));
        if kept > 0 {
            records_left -= kept;
            read.bytes += bytes;
            read.batches.push((tp.clone(), next));
            read.polled.push(PolledRecords {
                topic: Arc::clone(&part.topic().name),
                records,
            });
        }
    }
    Ok(read)
}

fn truncate(records: &mut Records, len: usize) {
    match records {
        Records::Stored(r) => r.truncate(len),
        Records::Compacted { records, .. } => records.truncate(len),
        Records::Remote { records, .. } => records.truncate(len),
    }
}

/// The position of a held partition: the instance's own, else the group's
/// committed offset, else `auto.offset.reset`; one outside the partition's
/// range is reset by `auto.offset.reset` (logged).
fn resolve_position(
    broker: &Broker,
    group: &str,
    inst: &mut Instance,
    tp: &TopicPartition,
    part: &crate::read::PartitionRef,
) -> Result<u64, BrokerError> {
    let (beginning, end) = part.offsets();
    let reset = |reason: String| match inst.config.auto_offset_reset {
        OffsetReset::Earliest => Ok(beginning),
        OffsetReset::Latest => Ok(end),
        OffsetReset::None => Err(BrokerError::NoResetPosition {
            topic: tp.topic.clone(),
            partition: tp.partition,
            reason,
        }),
    };
    let position = match inst.positions.get(tp) {
        Some(p) => *p,
        None => match committed_offset(broker, group, tp) {
            Some(c) => c,
            None => reset("the group has no committed offset for it".into())?,
        },
    };
    let position = if position < beginning || position > end {
        let reset_to = reset(format!(
            "offset {position} is out of range [{beginning}, {end}]"
        ))?;
        tracing::warn!(
            group,
            topic = %tp.topic,
            partition = tp.partition,
            position,
            beginning,
            end,
            reset_to,
            "consumer position out of range: reset by auto.offset.reset"
        );
        reset_to
    } else {
        position
    };
    inst.positions.insert(tp.clone(), position);
    Ok(position)
}

fn committed_offset(broker: &Broker, group: &str, tp: &TopicPartition) -> Option<u64> {
    broker
        .groups
        .get(group, Some(&tp.topic))?
        .into_iter()
        .find(|c| c.partition == tp.partition)
        .map(|c| c.offset)
}
