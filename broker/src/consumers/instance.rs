//! What the manager keeps per instance: its settings, how it reads (idle,
//! subscribed to topics or a pattern, or assigned by hand), its
//! membership of the coordinator's group, the partitions it holds, and per
//! partition its position, what it returned and what it has not committed
//! yet; and how a join's or a poll's answer changes what it holds.
//!
//! Invariant kept here: a position (and the returned and uncommitted
//! offsets) survives a rebalance only for a partition the instance held in
//! the generation just before; nothing is held while a rebalance is open.

use std::collections::{BTreeMap, BTreeSet};

use event_listener::Event;
use regex::Regex;

use super::config::InstanceConfig;
use crate::coordinator::{JoinOutcome, MemberAssignment, TopicPartition};
use crate::principal::Caller;

pub(super) enum Mode {
    Idle,
    Topics(Vec<String>),
    /// The topics matching the pattern that its subscriber may READ (a
    /// Kafka consumer's pattern matches only the topics its Metadata
    /// shows it), resolved again at every rebalance.
    Pattern(Regex, Caller),
    Assigned,
}

impl Mode {
    pub(super) fn subscribed(&self) -> bool {
        matches!(self, Mode::Topics(_) | Mode::Pattern(..))
    }
}

pub(super) struct Membership {
    pub(super) member_id: String,
    /// The generation whose assignment `held` is; 0 before the first.
    pub(super) generation: u32,
}

pub(super) struct Instance {
    pub(super) config: InstanceConfig,
    pub(super) mode: Mode,
    pub(super) member: Option<Membership>,
    /// The topics the member joined with and their partition counts then
    /// (a new match or a new partition rebalances).
    pub(super) joined: Vec<(String, Option<u32>)>,
    /// A rebalance is open (the initial delay of an empty group): nothing
    /// is held until it completes.
    pub(super) rebalancing: bool,
    pub(super) held: Vec<TopicPartition>,
    /// Next offset to read; absent: resolve (committed, else reset).
    pub(super) positions: BTreeMap<TopicPartition, u64>,
    /// Offset after the last record returned, per partition.
    pub(super) returned: BTreeMap<TopicPartition, u64>,
    /// Returned and not yet committed (auto commit).
    pub(super) uncommitted: BTreeMap<TopicPartition, u64>,
    pub(super) auto_commit_due_ms: Option<u64>,
    pub(super) last_used_ms: u64,
    /// Where the next records call starts among `held` (rotates).
    pub(super) next_start: usize,
    /// Notified when the instance is deleted or expires, so a records
    /// call waiting on it answers 404 at once, not after its timeout.
    pub(super) gone: Event,
}

#[derive(Default)]
pub(super) struct GroupInstances {
    pub(super) instances: BTreeMap<String, Instance>,
}

/// Takes a join's or a poll's answer: a completed rebalance's assignment
/// (positions kept only for partitions held in the generation just
/// before), or an open one (nothing held meanwhile).
pub(super) fn apply_outcome(inst: &mut Instance, outcome: JoinOutcome) {
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

pub(super) fn retain_held(inst: &mut Instance, keep: &BTreeSet<TopicPartition>) {
    inst.positions.retain(|tp, _| keep.contains(tp));
    inst.returned.retain(|tp, _| keep.contains(tp));
    inst.uncommitted.retain(|tp, _| keep.contains(tp));
    if inst.uncommitted.is_empty() {
        inst.auto_commit_due_ms = None;
    }
}

pub(super) fn reset_holdings(inst: &mut Instance, mode: Mode) {
    inst.mode = mode;
    inst.member = None;
    inst.joined.clear();
    inst.rebalancing = false;
    inst.held.clear();
    retain_held(inst, &BTreeSet::new());
}
