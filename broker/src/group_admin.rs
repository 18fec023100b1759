//! The operator's view of consumer groups (API.md "Groups and time
//! lookups"): list, describe, reset a group's committed offsets, delete a
//! group, and delete some of its committed offsets (Kafka's
//! OffsetDelete, `Broker::delete_committed_offsets`).
//!
//! A group exists for these calls while it has members in the coordinator
//! ([`crate::coordinator`]) or committed offsets in `__consumer_offsets`
//! ([`crate::groups`]); a group with offsets only is `Empty` and has no
//! protocol. Anything else is [`BrokerError::UnknownGroup`].
//!
//! Reset and delete refuse while the group has members
//! ([`BrokerError::GroupHasMembers`]): members keep positions of their own
//! and would commit over a reset, and a delete would pull their offsets
//! from under them. Both write through `__consumer_offsets` like any
//! commit (one batch of commits, or of tombstones), so memory and the log
//! agree and a restart rebuilds the same state. The membership check and
//! the append are not one atomic step (the coordinator never blocks under
//! its lock, and an append can): a member that joins in between finds the
//! offsets as written, as if it had joined a moment later.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::consumer_protocol::{decode_assignment, decode_subscription};
use crate::coordinator::{
    CommitOrigin, GroupSnapshot, GroupState, GroupType, MemberAssignment, MemberProtocol,
    MemberSnapshot, ProtocolKind, TopicPartition, KAFKA_CONSUMER_PROTOCOL_TYPE,
};
use crate::error::BrokerError;
use crate::groups::{CommitValue, CommittedOffset, OffsetCommit};
use crate::names;
use crate::read::PartitionRef;
use crate::Broker;

/// One group as the list answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    pub group: String,
    pub state: GroupState,
    /// `None` without members.
    pub kind: Option<ProtocolKind>,
    /// A group with offsets only is classic, as Kafka lists it.
    pub group_type: GroupType,
    pub members: usize,
}

/// One group as describe answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group: String,
    pub state: GroupState,
    pub generation: u32,
    /// `None` without members.
    pub kind: Option<ProtocolKind>,
    /// The current generation's protocol: an HTTP group's assignor, the
    /// protocol a Kafka group's members agreed on.
    pub selected_protocol: Option<String>,
    pub members: Vec<MemberDescription>,
    /// Sorted by topic and partition.
    pub offsets: Vec<OffsetLag>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    /// Empty while the group rebalances, and for a Kafka assignment that
    /// does not decode ([`decode_assignment`]; logged at debug).
    pub assignments: Vec<TopicPartition>,
}

/// A committed offset against its partition's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetLag {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub metadata: String,
    /// `None` when the topic or partition no longer exists (its offsets
    /// stay until the group is deleted or they expire).
    pub end_offset: Option<u64>,
    /// `end_offset − offset`, never negative; `None` with `end_offset`.
    pub lag: Option<u64>,
}

/// Which offsets a reset writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetScope {
    /// Every topic the group has committed offsets for, each with all its
    /// partitions (a deleted topic's offsets are left as they are: there
    /// is no beginning or end to reset them to).
    Group,
    /// Every partition of the topic, also those without offsets yet.
    Topic(String),
    /// These partitions of the topic.
    Partitions { topic: String, partitions: Vec<u32> },
}

/// Where a reset moves each offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTarget {
    Beginning,
    End,
    /// Clamped into `[beginning, end]`, as Kafka's reset tool does: outside
    /// it a consumer would only be reset again by its `auto.offset.reset`.
    Offset(u64),
    /// The first offset whose record timestamp is at least this (ms).
    Timestamp(i64),
}

/// The offset `to` names in `partition`: the one place a reset target
/// becomes an offset.
pub fn reset_offset(partition: &PartitionRef, to: ResetTarget) -> Result<u64, BrokerError> {
    let (beginning, end) = partition.offsets();
    match to {
        ResetTarget::Beginning => Ok(beginning),
        ResetTarget::End => Ok(end),
        ResetTarget::Offset(offset) => Ok(offset.max(beginning).min(end)),
        ResetTarget::Timestamp(ms) => partition.offset_for_timestamp(ms),
    }
}

impl Broker {
    /// Every group with members or committed offsets, by name. Not
    /// blocking (in-memory reads).
    pub(crate) fn list_groups(&self) -> Vec<GroupSummary> {
        let mut out: BTreeMap<String, GroupSummary> = self
            .groups
            .last_commits()
            .into_iter()
            .map(|c| (c.group.clone(), offsets_only(c.group, c.protocol)))
            .collect();
        for snapshot in self.coordinator.list() {
            let committed = match out.get(&snapshot.group) {
                Some(summary) => summary.kind,
                None if snapshot.members.is_empty() => continue,
                None => None,
            };
            out.insert(
                snapshot.group.clone(),
                GroupSummary {
                    members: snapshot.members.len(),
                    group: snapshot.group,
                    state: snapshot.state,
                    kind: snapshot.kind.or(committed),
                    group_type: snapshot.group_type,
                },
            );
        }
        out.into_values().collect()
    }

    /// `group`'s state, members with their assignments, and committed
    /// offsets with their partitions' ends and lag. Not blocking.
    pub(crate) fn describe_group(
        self: &Arc<Self>,
        group: &str,
    ) -> Result<GroupDescription, BrokerError> {
        let (snapshot, offsets) = self.group_parts(group)?;
        let offsets = offsets
            .into_iter()
            .map(|c| {
                let end_offset = self
                    .partition(&c.topic, c.partition)
                    .ok()
                    .map(|p| p.offsets().1);
                OffsetLag {
                    lag: end_offset.map(|end| end.saturating_sub(c.offset)),
                    end_offset,
                    topic: c.topic,
                    partition: c.partition,
                    offset: c.offset,
                    metadata: c.metadata,
                }
            })
            .collect();
        let Some(snapshot) = snapshot else {
            return Ok(GroupDescription {
                group: group.to_string(),
                state: GroupState::Empty,
                generation: 0,
                kind: self.groups.protocol_of(group),
                selected_protocol: None,
                members: Vec::new(),
                offsets,
            });
        };
        let members = snapshot
            .members
            .iter()
            .map(|m| MemberDescription {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                host: m.host.clone(),
                assignments: assignments(group, m),
            })
            .collect();
        Ok(GroupDescription {
            group: snapshot.group,
            state: snapshot.state,
            generation: snapshot.generation,
            kind: snapshot.kind.or_else(|| self.groups.protocol_of(group)),
            selected_protocol: snapshot.protocol,
            members,
            offsets,
        })
    }

    /// Moves `group`'s committed offsets in `scope` to `to`, as one commit
    /// (empty metadata, as Kafka's reset tool writes), and answers the new
    /// offsets, sorted. Refused while the group has members. With a topic
    /// it may create a group's first offsets (seeding a group before its
    /// consumers start). Blocking.
    pub(crate) fn reset_offsets(
        self: &Arc<Self>,
        group: &str,
        scope: ResetScope,
        to: ResetTarget,
    ) -> Result<Vec<CommittedOffset>, BrokerError> {
        names::validate_group_name(group)?;
        self.coordinator
            .validate_commit(group, CommitOrigin::Stateless)?;
        let mut commits = Vec::new();
        for partition in self.reset_partitions(group, scope)? {
            let offset = reset_offset(&partition, to)?;
            commits.push(OffsetCommit {
                topic: partition.topic().name.to_string(),
                partition: partition.partition(),
                value: CommitValue {
                    offset,
                    metadata: String::new(),
                    ..Default::default()
                },
            });
        }
        let answer = commits
            .iter()
            .map(|c| CommittedOffset {
                topic: c.topic.clone(),
                partition: c.partition,
                offset: c.value.offset,
                metadata: c.value.metadata.clone(),
                leader_epoch: None,
            })
            .collect();
        self.commit_offsets(group, commits, CommitOrigin::Stateless)?;
        Ok(answer)
    }

    /// The partitions `scope` names, sorted by topic and partition.
    fn reset_partitions(
        self: &Arc<Self>,
        group: &str,
        scope: ResetScope,
    ) -> Result<Vec<PartitionRef>, BrokerError> {
        let (topic, only) = match scope {
            ResetScope::Group => {
                let (_, offsets) = self.group_parts(group)?;
                let topics: BTreeSet<String> = offsets.into_iter().map(|c| c.topic).collect();
                let mut out = Vec::new();
                for topic in topics {
                    let Some(known) = self.registry.get(&topic) else {
                        continue;
                    };
                    for p in 0..known.partitions.get() {
                        out.push(self.partition(&topic, p)?);
                    }
                }
                return Ok(out);
            }
            ResetScope::Topic(topic) => (topic, None),
            ResetScope::Partitions { topic, partitions } => (topic, Some(partitions)),
        };
        names::validate_topic_name(&topic)?;
        let known = self.registry.require(&topic)?;
        let partitions: BTreeSet<u32> = match only {
            None => (0..known.partitions.get()).collect(),
            Some(list) if list.is_empty() => return Err(BrokerError::ResetPartitionsEmpty),
            Some(list) => list.into_iter().collect(),
        };
        partitions
            .into_iter()
            .map(|p| self.partition(&topic, p))
            .collect()
    }

    /// Deletes `group`: the coordinator forgets it and every committed
    /// offset gets a tombstone, so it stays gone after a restart. Refused
    /// while the group has members. Blocking.
    pub(crate) fn delete_group(&self, group: &str) -> Result<(), BrokerError> {
        self.group_parts(group)?;
        self.coordinator.delete_group(group)?;
        // Read again after the coordinator let go: a commit that landed
        // since the check is deleted with the rest.
        let keys = self
            .groups
            .get(group, None)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.topic, c.partition))
            .collect();
        self.delete_offsets(group, keys)?;
        tracing::info!(group, "consumer group deleted");
        Ok(())
    }

    /// Kafka's OffsetDelete (`GroupCoordinator.handleDeleteOffsets`):
    /// deletes the committed offsets of `group` at `partitions`, each
    /// answered on its own ([`OffsetDeletion`]), with one tombstone per
    /// committed offset, appended as one batch as [`Broker::delete_group`]
    /// does. An unknown group (no members, no offsets) is
    /// [`BrokerError::UnknownGroup`]. A group without members may lose any
    /// of its offsets; one with members only those of topics no live
    /// member subscribes to ([`subscribed_topics`]), and only if its
    /// members are `consumer` protocol (Kafka) or HTTP instances: another
    /// protocol type is [`BrokerError::GroupHasMembers`] (Kafka's
    /// NON_EMPTY_GROUP). Decided on a snapshot of the group, as
    /// [`Broker::reset_offsets`] is (module docs). Blocking.
    pub(crate) fn delete_committed_offsets(
        &self,
        group: &str,
        partitions: &[(String, u32)],
    ) -> Result<Vec<OffsetDeletion>, BrokerError> {
        let (snapshot, offsets) = self.group_parts(group)?;
        let live = snapshot.filter(|s| !s.members.is_empty());
        if live.as_ref().is_some_and(|s| s.state == GroupState::Dead) {
            return Err(BrokerError::UnknownGroup {
                group: group.to_string(),
            });
        }
        let subscribed = match &live {
            None => Subscribed::Nothing,
            Some(s) => subscribed_topics(s)?,
        };
        let committed: BTreeSet<(&str, u32)> = offsets
            .iter()
            .map(|c| (c.topic.as_str(), c.partition))
            .collect();
        let mut tombstones = Vec::new();
        let answers = partitions
            .iter()
            .map(|(topic, partition)| {
                let known = self
                    .registry
                    .require(topic)
                    .and_then(|t| t.check_partition(*partition));
                if known.is_err() {
                    OffsetDeletion::UnknownPartition
                } else if subscribed.includes(topic) {
                    OffsetDeletion::Subscribed
                } else {
                    if committed.contains(&(topic.as_str(), *partition)) {
                        tombstones.push((topic.clone(), *partition));
                    }
                    OffsetDeletion::Deleted
                }
            })
            .collect();
        let deleted = tombstones.len();
        self.delete_offsets(group, tombstones)?;
        if deleted > 0 {
            tracing::info!(group, offsets = deleted, "committed offsets deleted");
        }
        Ok(answers)
    }

    /// The group's membership (if the coordinator holds it) and committed
    /// offsets; [`BrokerError::UnknownGroup`] without members and offsets.
    fn group_parts(
        &self,
        group: &str,
    ) -> Result<(Option<GroupSnapshot>, Vec<CommittedOffset>), BrokerError> {
        names::validate_group_name(group)?;
        let snapshot = self.coordinator.describe(group);
        let offsets = self.groups.get(group, None);
        let members = snapshot.as_ref().map_or(0, |s| s.members.len());
        match offsets {
            None if members == 0 => Err(BrokerError::UnknownGroup {
                group: group.to_string(),
            }),
            offsets => Ok((snapshot, offsets.unwrap_or_default())),
        }
    }
}

/// What `Broker::delete_committed_offsets` did with one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetDeletion {
    /// Its committed offset, if it had one, is deleted.
    Deleted,
    /// A live member subscribes to its topic: kept (Kafka's
    /// GROUP_SUBSCRIBED_TO_TOPIC).
    Subscribed,
    /// No such topic or partition: nothing done.
    UnknownPartition,
}

/// The topics a group's live members subscribe to.
#[derive(Debug, PartialEq, Eq)]
enum Subscribed {
    Nothing,
    Topics(BTreeSet<String>),
    /// Not known (no protocol chosen yet, or a member's Subscription does
    /// not decode): every topic counts as subscribed, Kafka's rule.
    Everything,
}

impl Subscribed {
    fn includes(&self, topic: &str) -> bool {
        match self {
            Subscribed::Nothing => false,
            Subscribed::Topics(topics) => topics.contains(topic),
            Subscribed::Everything => true,
        }
    }
}

/// Kafka's `GroupMetadata.computeSubscribedTopics` over a group with
/// members: an HTTP instance's topics; a Kafka member's from the
/// ConsumerProtocol Subscription in its metadata for the group's selected
/// protocol; a KIP-848 member's from its snapshot's subscription (the
/// coordinator keeps it). A Kafka group of another protocol type than
/// `consumer` has no subscriptions to read:
/// [`BrokerError::GroupHasMembers`].
fn subscribed_topics(s: &GroupSnapshot) -> Result<Subscribed, BrokerError> {
    let mut topics = BTreeSet::new();
    if s.group_type == GroupType::Consumer {
        topics.extend(
            s.members
                .iter()
                .flat_map(|m| m.subscription.iter().cloned()),
        );
        return Ok(if topics.is_empty() {
            Subscribed::Nothing
        } else {
            Subscribed::Topics(topics)
        });
    }
    for member in &s.members {
        match &member.protocol {
            MemberProtocol::Http { topics: mine, .. } => topics.extend(mine.iter().cloned()),
            MemberProtocol::Kafka {
                protocol_type,
                protocols,
            } => {
                if protocol_type != KAFKA_CONSUMER_PROTOCOL_TYPE {
                    return Err(BrokerError::GroupHasMembers {
                        group: s.group.clone(),
                        members: s.members.len(),
                    });
                }
                let metadata = s
                    .protocol
                    .as_ref()
                    .and_then(|chosen| protocols.iter().find(|(name, _)| name == chosen));
                let Some((_, metadata)) = metadata else {
                    return Ok(Subscribed::Everything);
                };
                match decode_subscription(metadata) {
                    Ok(mine) => topics.extend(mine),
                    Err(e) => {
                        tracing::warn!(group = s.group.as_str(), member = %member.member_id, error = %e, "a member's subscription does not decode: every topic counts as subscribed");
                        return Ok(Subscribed::Everything);
                    }
                }
            }
        }
    }
    Ok(Subscribed::Topics(topics))
}

/// A group known by its committed offsets alone: Empty, of the protocol
/// its members committed with (none if only commits without membership
/// made it; Kafka's "simple" group).
fn offsets_only(group: String, kind: Option<ProtocolKind>) -> GroupSummary {
    GroupSummary {
        group,
        state: GroupState::Empty,
        kind,
        group_type: GroupType::Classic,
        members: 0,
    }
}

/// A member's partitions: an HTTP member's as the coordinator assigned
/// them, a Kafka member's decoded from its leader's assignment.
fn assignments(group: &str, member: &MemberSnapshot) -> Vec<TopicPartition> {
    match &member.assignment {
        None => Vec::new(),
        Some(MemberAssignment::Partitions(partitions)) => partitions.clone(),
        Some(MemberAssignment::Opaque(bytes)) => decode_assignment(bytes).unwrap_or_else(|e| {
            tracing::debug!(
                group,
                member_id = %member.member_id,
                error = %e,
                "a Kafka member's assignment does not decode; described without partitions"
            );
            Vec::new()
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    use std::time::Duration;

    use bytes::Bytes;

    use crate::coordinator::{
        Assignor, GroupsConfig, JoinOutcome, ManualClock, MemberProtocol, SyncOutcome,
    };
    use crate::test_support::{append, append_timed, join_request, open_at};
    use crate::topic_config::Overrides;

    /// A broker whose groups rebalance at once and whose members never
    /// expire by themselves (a manual clock).
    fn open(dir: &std::path::Path) -> Arc<Broker> {
        let groups = GroupsConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupsConfig::default()
        };
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        Arc::new(open_at(dir, &groups, &clock))
    }

    fn shutdown(broker: Arc<Broker>) {
        Arc::into_inner(broker).unwrap().shutdown().unwrap();
    }

    /// `n` records in partition 0 of `topic`, dispatched (so they count in
    /// the partition's end).
    fn fill(broker: &Broker, topic: &str, n: usize) {
        let records: Vec<(&str, &str)> = vec![("k", "v"); n];
        append(broker, topic, &records);
        assert!(broker.store.wait_dispatched(Duration::from_secs(30)));
    }

    fn commit(broker: &Broker, group: &str, offsets: &[(&str, u32, u64)]) {
        let commits = offsets
            .iter()
            .map(|(topic, partition, offset)| OffsetCommit {
                topic: topic.to_string(),
                partition: *partition,
                value: CommitValue {
                    offset: *offset,
                    metadata: format!("m{offset}"),
                    ..Default::default()
                },
            })
            .collect();
        broker
            .commit_offsets(group, commits, CommitOrigin::Stateless)
            .unwrap();
    }

    /// An HTTP member of `group` subscribed to `topic`; its member id.
    fn join_http(broker: &Broker, group: &str, topic: &str) -> String {
        let protocol = MemberProtocol::Http {
            topics: vec![topic.into()],
            assignor: Assignor::Range,
        };
        join_with(broker, group, protocol)
    }

    /// A member of `group` joining with `protocol`, joined at once; its
    /// member id.
    fn join_with(broker: &Broker, group: &str, protocol: MemberProtocol) -> String {
        let partitions = |t: &str| broker.registry.get(t).map(|t| t.partitions.get());
        match broker
            .coordinator
            .join(group, join_request(protocol), &partitions)
            .unwrap()
        {
            JoinOutcome::Joined(r) => r.member_id,
            other => panic!("{other:?}"),
        }
    }

    /// A lone Kafka member of `group`, the leader, synced with
    /// `assignment` as its own.
    fn join_kafka(broker: &Broker, group: &str, assignment: Vec<u8>) -> String {
        let partitions = |t: &str| broker.registry.get(t).map(|t| t.partitions.get());
        let protocol = MemberProtocol::Kafka {
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::new())],
        };
        let JoinOutcome::Joined(joined) = broker
            .coordinator
            .join(group, join_request(protocol), &partitions)
            .unwrap()
        else {
            panic!("a lone member joins at once")
        };
        let plan = vec![(joined.member_id.clone(), Bytes::from(assignment))];
        let synced = broker
            .coordinator
            .sync(
                group,
                &joined.member_id,
                None,
                joined.generation,
                Some(plan),
            )
            .unwrap();
        assert!(matches!(synced, SyncOutcome::Synced(_)));
        joined.member_id
    }

    /// A lone Kafka member of `group` of `protocol_type`, joined (not
    /// synced) with `metadata` for its one protocol, `range`.
    fn join_kafka_subscribed(
        broker: &Broker,
        group: &str,
        protocol_type: &str,
        metadata: Vec<u8>,
    ) -> String {
        let protocol = MemberProtocol::Kafka {
            protocol_type: protocol_type.into(),
            protocols: vec![("range".into(), Bytes::from(metadata))],
        };
        join_with(broker, group, protocol)
    }

    /// Kafka's Subscription v1 of `topics` (no owned partitions).
    fn kafka_subscription(topics: &[&str]) -> Vec<u8> {
        let mut b = vec![0, 1];
        b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for t in topics {
            b.extend_from_slice(&(t.len() as i16).to_be_bytes());
            b.extend_from_slice(t.as_bytes());
        }
        b.extend_from_slice(&(-1i32).to_be_bytes()); // null user data
        b.extend_from_slice(&0i32.to_be_bytes()); // no owned partitions
        b
    }

    /// Kafka's OffsetDelete rules (`handleDeleteOffsets`): an unknown
    /// group is refused; a group without members loses any of its
    /// offsets; one with members keeps those of the topics its members
    /// subscribe to (a Kafka member's Subscription, an HTTP instance's
    /// topics; everything when a Subscription does not decode) and one of
    /// another protocol type than `consumer` is refused; unknown
    /// partitions are answered on their own. The tombstones stay after a
    /// restart.
    #[test]
    fn offset_delete_follows_kafkas_rules_and_its_tombstones_persist() {
        use OffsetDeletion::{Deleted, Subscribed, UnknownPartition};
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("t", 2, Overrides::new()).unwrap();
        broker.create_topic("u", 1, Overrides::new()).unwrap();
        let asked = |list: &[(&str, u32)]| -> Vec<(String, u32)> {
            list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
        };
        assert!(matches!(
            broker.delete_committed_offsets("nope", &asked(&[("t", 0)])),
            Err(BrokerError::UnknownGroup { .. })
        ));
        commit(&broker, "g", &[("t", 0, 1), ("t", 1, 2), ("u", 0, 3)]);
        // No members: any offset goes; unknown partitions are answered.
        let answers = broker
            .delete_committed_offsets("g", &asked(&[("t", 0), ("t", 9), ("zz", 0)]))
            .unwrap();
        assert_eq!(answers, [Deleted, UnknownPartition, UnknownPartition]);
        assert_eq!(offsets_of(&broker, "g"), owned(&[("t", 1, 2), ("u", 0, 3)]));
        // A Kafka member subscribed to `u`: `t` goes, `u` stays.
        join_kafka_subscribed(&broker, "g", "consumer", kafka_subscription(&["u"]));
        let answers = broker
            .delete_committed_offsets("g", &asked(&[("u", 0), ("t", 1)]))
            .unwrap();
        assert_eq!(answers, [Subscribed, Deleted]);
        assert_eq!(offsets_of(&broker, "g"), owned(&[("u", 0, 3)]));
        // An HTTP instance subscribed to `t` keeps `t`.
        commit(&broker, "h", &[("t", 0, 5), ("u", 0, 6)]);
        join_http(&broker, "h", "t");
        let answers = broker
            .delete_committed_offsets("h", &asked(&[("t", 0), ("u", 0)]))
            .unwrap();
        assert_eq!(answers, [Subscribed, Deleted]);
        assert_eq!(offsets_of(&broker, "h"), owned(&[("t", 0, 5)]));
        // A Subscription that does not decode: every topic is subscribed.
        commit(&broker, "bad", &[("t", 0, 7)]);
        join_kafka_subscribed(&broker, "bad", "consumer", vec![0, 0, 0x7f, 0, 0, 0]);
        let answers = broker
            .delete_committed_offsets("bad", &asked(&[("t", 0)]))
            .unwrap();
        assert_eq!(answers, [Subscribed]);
        // Another protocol type with members: refused whole.
        commit(&broker, "connect", &[("t", 0, 8)]);
        join_kafka_subscribed(&broker, "connect", "connect", Vec::new());
        assert!(matches!(
            broker.delete_committed_offsets("connect", &asked(&[("t", 0)])),
            Err(BrokerError::GroupHasMembers { .. })
        ));
        assert_eq!(offsets_of(&broker, "connect"), owned(&[("t", 0, 8)]));
        shutdown(broker);

        let broker = open(dir.path());
        assert_eq!(offsets_of(&broker, "g"), owned(&[("u", 0, 3)]));
        assert_eq!(offsets_of(&broker, "h"), owned(&[("t", 0, 5)]));
        shutdown(broker);
    }

    /// Kafka's Assignment v1 of `t` partitions 0 and 1, with user data.
    fn kafka_assignment() -> Vec<u8> {
        let mut b = vec![0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2];
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        b.extend_from_slice(&[0, 0, 0, 2, 7, 7]);
        b
    }

    fn offsets_of(broker: &Broker, group: &str) -> Vec<(String, u32, u64)> {
        broker
            .groups
            .get(group, None)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.topic, c.partition, c.offset))
            .collect()
    }

    fn owned(list: &[(&str, u32, u64)]) -> Vec<(String, u32, u64)> {
        list.iter()
            .map(|(t, p, o)| (t.to_string(), *p, *o))
            .collect()
    }

    #[test]
    fn the_list_has_groups_with_members_or_offsets_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("t", 2, Overrides::new()).unwrap();
        commit(&broker, "only-offsets", &[("t", 0, 1)]);
        join_http(&broker, "b-members", "t");
        let left = join_http(&broker, "a-left", "t");
        let partitions = |t: &str| broker.registry.get(t).map(|t| t.partitions.get());
        broker
            .coordinator
            .leave("a-left", Some(&left), None, &partitions)
            .unwrap();
        assert!(broker.coordinator.describe("a-left").is_some());

        let list = broker.list_groups();
        assert_eq!(
            list,
            [
                GroupSummary {
                    group: "b-members".into(),
                    state: GroupState::Stable,
                    kind: Some(ProtocolKind::Http),
                    group_type: GroupType::Classic,
                    members: 1,
                },
                offsets_only("only-offsets".into(), None),
            ],
            "an empty group without offsets is not listed"
        );
        assert!(matches!(
            broker.describe_group("a-left"),
            Err(BrokerError::UnknownGroup { .. })
        ));
        shutdown(broker);
    }

    #[test]
    fn describe_gives_assignments_and_lag_against_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("t", 2, Overrides::new()).unwrap();
        broker.create_topic("gone", 1, Overrides::new()).unwrap();
        fill(&broker, "t", 3);
        commit(&broker, "g", &[("t", 0, 1), ("t", 1, 5), ("gone", 0, 2)]);
        broker.delete_topic("gone").unwrap();
        let member = join_http(&broker, "g", "t");

        let d = broker.describe_group("g").unwrap();
        assert_eq!((d.state, d.generation), (GroupState::Stable, 1));
        assert_eq!(d.kind, Some(ProtocolKind::Http));
        assert_eq!(d.selected_protocol.as_deref(), Some("range"));
        assert_eq!(d.members.len(), 1);
        assert_eq!(d.members[0].member_id, member);
        assert_eq!(
            d.members[0].assignments,
            [TopicPartition::new("t", 0), TopicPartition::new("t", 1)]
        );
        let lag = |o: &OffsetLag| (o.topic.clone(), o.partition, o.end_offset, o.lag);
        assert_eq!(
            d.offsets.iter().map(lag).collect::<Vec<_>>(),
            [
                ("gone".to_string(), 0, None, None),
                ("t".to_string(), 0, Some(3), Some(2)),
                ("t".to_string(), 1, Some(0), Some(0)),
            ],
            "a commit past the end has no negative lag; a deleted topic has no end"
        );
        assert_eq!(d.offsets[1].metadata, "m1");

        assert!(matches!(
            broker.describe_group("nobody"),
            Err(BrokerError::UnknownGroup { .. })
        ));
        assert!(matches!(
            broker.describe_group(""),
            Err(BrokerError::InvalidName { .. })
        ));
        shutdown(broker);
    }

    #[test]
    fn a_kafka_members_assignment_is_decoded_and_a_bad_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("t", 2, Overrides::new()).unwrap();
        join_kafka(&broker, "k", kafka_assignment());
        let d = broker.describe_group("k").unwrap();
        assert_eq!(d.kind, Some(ProtocolKind::Kafka));
        assert_eq!(
            d.members[0].assignments,
            [TopicPartition::new("t", 0), TopicPartition::new("t", 1)]
        );

        let mut truncated = kafka_assignment();
        truncated.truncate(10);
        join_kafka(&broker, "bad", truncated);
        let d = broker.describe_group("bad").unwrap();
        assert_eq!(d.members.len(), 1);
        assert!(d.members[0].assignments.is_empty());
        shutdown(broker);
    }

    /// A reset to a timestamp moves each partition to the first offset
    /// whose record timestamp is at least it (timestamps out of order, as
    /// producers may set them), or to the end when none is.
    #[test]
    fn a_timestamp_reset_moves_to_the_first_record_at_or_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("t", 1, Overrides::new()).unwrap();
        append_timed(&broker, "t", &[10, 50, 30, 70, 20]);
        assert!(broker.store.wait_dispatched(Duration::from_secs(30)));
        commit(&broker, "g", &[("t", 0, 0)]);
        for (ts, want) in [(0, 0), (11, 1), (30, 1), (51, 3), (71, 5)] {
            let answer = broker
                .reset_offsets("g", ResetScope::Group, ResetTarget::Timestamp(ts))
                .unwrap();
            let got: Vec<u64> = answer.iter().map(|c| c.offset).collect();
            assert_eq!(got, vec![want], "timestamp {ts}");
            assert_eq!(offsets_of(&broker, "g"), owned(&[("t", 0, want)]), "{ts}");
        }
    }

    #[test]
    fn reset_each_target_and_scope() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("t", 2, Overrides::new()).unwrap();
        broker.create_topic("u", 1, Overrides::new()).unwrap();
        broker
            .create_topic("untouched", 1, Overrides::new())
            .unwrap();
        fill(&broker, "t", 4);
        fill(&broker, "u", 2);
        commit(&broker, "g", &[("t", 0, 1), ("u", 0, 1)]);

        // The whole group: every partition of every topic it has offsets
        // for, also t/1, which had none.
        let answer = broker
            .reset_offsets("g", ResetScope::Group, ResetTarget::End)
            .unwrap();
        let want = owned(&[("t", 0, 4), ("t", 1, 0), ("u", 0, 2)]);
        let got: Vec<_> = answer
            .iter()
            .map(|c| (c.topic.clone(), c.partition, c.offset))
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            offsets_of(&broker, "g"),
            want,
            "the answer is what is stored"
        );
        assert!(answer.iter().all(|c| c.metadata.is_empty()));

        broker
            .reset_offsets("g", ResetScope::Topic("t".into()), ResetTarget::Beginning)
            .unwrap();
        assert_eq!(
            offsets_of(&broker, "g"),
            owned(&[("t", 0, 0), ("t", 1, 0), ("u", 0, 2)])
        );
        let one = |partitions: Vec<u32>, to| {
            let scope = ResetScope::Partitions {
                topic: "t".into(),
                partitions,
            };
            broker.reset_offsets("g", scope, to)
        };
        one(vec![0, 0], ResetTarget::Offset(2)).unwrap();
        assert_eq!(offsets_of(&broker, "g")[0], ("t".into(), 0, 2));
        one(vec![0], ResetTarget::Offset(99)).unwrap();
        assert_eq!(offsets_of(&broker, "g")[0], ("t".into(), 0, 4), "clamped");

        // Refusals change nothing.
        let before = offsets_of(&broker, "g");
        let cases = [
            (one(vec![], ResetTarget::End), "empty partitions"),
            (one(vec![0, 2], ResetTarget::End), "unknown partition"),
            (
                broker.reset_offsets("g", ResetScope::Topic("nope".into()), ResetTarget::End),
                "unknown topic",
            ),
            (
                broker.reset_offsets("nobody", ResetScope::Group, ResetTarget::End),
                "unknown group",
            ),
            (
                broker.reset_offsets("", ResetScope::Group, ResetTarget::End),
                "bad group name",
            ),
        ];
        for (result, what) in cases {
            let err = result.unwrap_err();
            let expected = match what {
                "unknown partition" => matches!(err, BrokerError::UnknownPartition { .. }),
                "unknown topic" => matches!(err, BrokerError::UnknownTopic { .. }),
                "unknown group" => matches!(err, BrokerError::UnknownGroup { .. }),
                "bad group name" => matches!(err, BrokerError::InvalidName { .. }),
                _ => matches!(err, BrokerError::ResetPartitionsEmpty),
            };
            assert!(expected, "{what}: {err:?}");
        }
        assert_eq!(offsets_of(&broker, "g"), before);

        // A topic scope seeds a group that has no offsets yet.
        broker
            .reset_offsets("new", ResetScope::Topic("u".into()), ResetTarget::End)
            .unwrap();
        assert_eq!(offsets_of(&broker, "new"), owned(&[("u", 0, 2)]));
        shutdown(broker);

        let broker = open(dir.path());
        assert_eq!(offsets_of(&broker, "g"), before, "written to the log");
        shutdown(broker);
    }

    #[test]
    fn reset_and_delete_are_refused_while_the_group_has_members() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("t", 1, Overrides::new()).unwrap();
        fill(&broker, "t", 2);
        commit(&broker, "g", &[("t", 0, 1)]);
        let member = join_http(&broker, "g", "t");
        let refused = |e: Option<BrokerError>| {
            matches!(e, Some(BrokerError::GroupHasMembers { members: 1, .. }))
        };
        let reset = broker.reset_offsets("g", ResetScope::Group, ResetTarget::End);
        assert!(refused(reset.err()));
        assert!(refused(broker.delete_group("g").err()));
        assert_eq!(offsets_of(&broker, "g"), owned(&[("t", 0, 1)]));
        assert_eq!(broker.describe_group("g").unwrap().members.len(), 1);

        let partitions = |t: &str| broker.registry.get(t).map(|t| t.partitions.get());
        broker
            .coordinator
            .leave("g", Some(&member), None, &partitions)
            .unwrap();
        broker
            .reset_offsets("g", ResetScope::Group, ResetTarget::End)
            .unwrap();
        assert_eq!(offsets_of(&broker, "g"), owned(&[("t", 0, 2)]));
        shutdown(broker);
    }

    #[test]
    fn a_deleted_group_is_gone_also_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("t", 2, Overrides::new()).unwrap();
        commit(&broker, "g", &[("t", 0, 1), ("t", 1, 2)]);
        commit(&broker, "kept", &[("t", 0, 3)]);
        let member = join_http(&broker, "g", "t");
        let partitions = |t: &str| broker.registry.get(t).map(|t| t.partitions.get());
        broker
            .coordinator
            .leave("g", Some(&member), None, &partitions)
            .unwrap();

        broker.delete_group("g").unwrap();
        assert!(broker.coordinator.describe("g").is_none(), "forgotten");
        assert!(broker.groups.get("g", None).is_none());
        let names: Vec<_> = broker.list_groups().into_iter().map(|g| g.group).collect();
        assert_eq!(names, ["kept"]);
        assert!(matches!(
            broker.delete_group("g"),
            Err(BrokerError::UnknownGroup { .. })
        ));
        shutdown(broker);

        let broker = open(dir.path());
        assert!(
            broker.groups.get("g", None).is_none(),
            "tombstones in the log"
        );
        assert_eq!(offsets_of(&broker, "kept"), owned(&[("t", 0, 3)]));
        shutdown(broker);
    }
}
