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
//!   door awaits them (`Door::poll_records`, `door/consumers.rs`).
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
//!
//! Files, one concern each (the manager's calls are `impl Consumers`
//! blocks over the private state of `instance`):
//! * this file: the manager, its thread, creating and deleting instances,
//!   and running a call under its group's lock;
//! * `instance`: what the manager keeps per instance, and how a join's
//!   answer changes what it holds;
//! * `membership`: subscribe (topics or a pattern), unsubscribe, manual
//!   assignment, and the instance's membership of the coordinator's group;
//! * `offsets`: seeks, positions, commits (manual and auto);
//! * `records`: the records call;
//! * `expiry`: what `tidelog-consumers` runs ([`Consumers::tick`]).

pub mod config;
mod expiry;
mod instance;
mod membership;
mod offsets;
mod records;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use event_listener::{Event, EventListener, Listener};

pub use config::{
    ConsumersConfig, InstanceConfig, InstanceFormat, OffsetReset, FETCH_BYTES_MAX_DEFAULT,
};

use crate::coordinator::{Coordinator, MemberIdSource, ProtocolKind, RandomIds};
use crate::error::BrokerError;
use crate::read::Records;
use crate::Broker;
use instance::{GroupInstances, Instance, Mode};

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

    /// [`Consumers::stop`] for async callers (the HTTP API's shutdown): on
    /// the blocking pool, since it joins a thread and appends commits.
    pub async fn stop_async(self: Arc<Self>) {
        let stopped = crate::blocking::run(move || {
            self.stop();
            Ok(())
        })
        .await;
        if let Err(e) = stopped {
            tracing::error!(error = %e, "stopping the consumer instances failed");
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
}
