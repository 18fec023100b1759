//! An instance's subscription and its membership of the coordinator's
//! group: subscribe (topics, or a pattern anchored to whole names),
//! unsubscribe, manual assignment (no membership; the two cannot be
//! mixed), and keeping a subscribed instance's assignment current (join as
//! a server-side member, take a completed rebalance's assignment, rejoin
//! when the session was lost).
//!
//! Every change that rebalances the group first commits what its
//! auto-commit instances returned (module doc of `super`).

use std::collections::BTreeSet;
use std::sync::Arc;

use regex::Regex;

use super::instance::{apply_outcome, reset_holdings, retain_held, Instance, Mode};
use super::offsets::commit_uncommitted;
use super::{
    config, state_error, unknown, Consumers, Subscription, ASSIGNMENTS_MAX, SESSION_GRACE_MS,
};
use crate::coordinator::{Assignor, JoinRequest, MemberProtocol, TopicPartition};
use crate::error::BrokerError;
use crate::principal::Caller;
use crate::Broker;
use tidelog_security::acl::{Operation, Resource};

/// The host a server-side member shows in describe.
const MEMBER_HOST: &str = "http";

impl Consumers {
    /// Subscribes to topics or a pattern (replacing an earlier
    /// subscription); 40903 if the instance has manual assignments. A
    /// pattern matches only the topics `reader` may READ (the door
    /// checked named topics before).
    pub fn subscribe(
        &self,
        group: &str,
        name: &str,
        subscription: Subscription,
        reader: &Caller,
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
            Subscription::Pattern(text) => Mode::Pattern(compile_pattern(&text)?, reader.clone()),
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

    /// Keeps a subscribed instance's assignment current: joins when it is
    /// not a member (first subscribe, or its session was lost), else takes
    /// a completed rebalance's assignment.
    pub(super) fn refresh(
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
    pub(super) fn join(
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

    pub(super) fn leave(&self, broker: &Arc<Broker>, group: &str, inst: &Instance) {
        if let Some(m) = &inst.member {
            let partitions = |t: &str| partition_count(broker, t);
            // Already gone (the backstop session) is what leaving wants.
            let _ = self
                .coordinator
                .leave(group, Some(&m.member_id), None, &partitions);
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
pub(super) fn resolve_topics(broker: &Broker, mode: &Mode) -> Vec<String> {
    match mode {
        Mode::Topics(topics) => topics.clone(),
        Mode::Pattern(regex, reader) => {
            let mut topics: Vec<String> = broker
                .registry
                .all()
                .iter()
                .filter(|t| !t.is_internal() && regex.is_match(&t.name))
                .filter(|t| {
                    broker.access.allows(
                        &reader.principal,
                        reader.host,
                        Operation::Read,
                        Resource::topic(&t.name),
                    )
                })
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
pub(super) fn partition_count(broker: &Broker, topic: &str) -> Option<u32> {
    broker.registry.get(topic).map(|t| t.partitions.get())
}

/// Whether a member's topics or their partition counts moved since it
/// joined.
pub(super) fn topics_changed(broker: &Broker, inst: &Instance) -> bool {
    let now = resolve_topics(broker, &inst.mode);
    now.len() != inst.joined.len()
        || now
            .iter()
            .zip(&inst.joined)
            .any(|(t, (joined, count))| t != joined || partition_count(broker, t) != *count)
}
