//! Where an instance reads and what it commits: seeks, the position of a
//! held partition (its own, else the group's committed offset, else
//! `auto.offset.reset`; one outside the partition's range is reset and
//! logged), and commits: manual ones (Confluent's rule, the last offset
//! consumed) and auto commits of what it returned, as its membership's
//! generation or without membership.
//!
//! Invariants kept here: a member commits only partitions it holds; an
//! auto commit the coordinator refuses (a stale generation) drops those
//! offsets, logged, and the records are read again; a position inside the
//! partition's range is never moved.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::config::OffsetReset;
use super::instance::{GroupInstances, Instance};
use super::{state_error, Consumers, SeekTo};
use crate::coordinator::{CommitOrigin, TopicPartition};
use crate::error::BrokerError;
use crate::groups::{CommitValue, CommittedOffset, OffsetCommit};
use crate::Broker;

impl Consumers {
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

    /// Commits the returned offsets of every auto-commit instance of the
    /// group (but `except`), before a change that rebalances it.
    pub(super) fn commit_group_auto(
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
                ..Default::default()
            },
        })
        .collect()
}

/// Auto commit of what the instance returned; a refusal (a stale
/// generation: the partitions moved on) drops them, logged.
pub(super) fn commit_uncommitted(broker: &Broker, group: &str, name: &str, inst: &mut Instance) {
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

/// The position of a held partition: the instance's own, else the group's
/// committed offset, else `auto.offset.reset`; one outside the partition's
/// range is reset by `auto.offset.reset` (logged).
pub(super) fn resolve_position(
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
