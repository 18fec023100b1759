//! Consumer group offsets, stored in the compacted internal topic
//! `__consumer_offsets` and mirrored in memory.
//!
//! A commit of N offsets is one append of N records. Record key:
//! `<group>/<topic>/<partition>` as UTF-8, unambiguous when split from the
//! right: a topic name has no `/` and a partition is a number, so the
//! group is everything before them, `/` and all (see [`crate::names`]);
//! and stable,
//! so compaction keeps exactly the latest commit of each group, topic and
//! partition. Record value: `{"offset":<u64>,"metadata":"<text>"}`; a null
//! value (tombstone) forgets the entry.
//!
//! The in-memory state is rebuilt at start by reading the topic's
//! compacted log from its beginning (not its ConsumeQueue: CommitLog
//! retention deletes old records, while the compacted log keeps at least
//! the latest commit of every key), and updated after each append. Each entry remembers the queue
//! offset of the record it came from and an update only wins if it is newer,
//! so two concurrent commits to the same key end in memory exactly as they
//! are ordered in the log, which is what a rebuild after a restart sees.
//! (The topic has one partition, so queue offsets order every commit.)
//!
//! Each entry also remembers when it was committed (the record's timestamp,
//! set from the coordinator's clock), so offsets of a group without members
//! expire ([`crate::Broker::expire_offsets`], the coordinator's
//! `offsets_expired` rule): tombstones for every key of the group are
//! appended, and compaction then drops the keys from the log as well.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tidelog_cleaner::{CleanerError, CompactedLogs};

use crate::coordinator::ProtocolKind;
use crate::registry::{CONSUMER_OFFSETS_PARTITIONS, CONSUMER_OFFSETS_TOPIC};

/// How often a front-end runs [`crate::Broker::expire_offsets`] (Kafka's
/// `offsets.retention.check.interval.ms` is 10 minutes; a minute keeps
/// expiry close to `groups.offsets_retention_minutes`, and a pass over the
/// groups in memory is cheap).
pub const OFFSETS_EXPIRY_CHECK_MS: u64 = 60_000;

/// Kafka's `offset.metadata.max.bytes`.
pub const METADATA_MAX_BYTES: usize = 4096;

/// Records read per batch while rebuilding at start.
const REBUILD_BATCH_RECORDS: usize = 10_000;
const REBUILD_BATCH_BYTES: usize = 16 << 20;

/// The stored value of one commit. Fields beyond `offset` and `metadata`
/// are left out when unset, so values stay as short as before; an older
/// build reads the value as it did and ignores them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitValue {
    pub offset: u64,
    #[serde(default)]
    pub metadata: String,
    /// The leader epoch of the record the consumer read last (Kafka's
    /// OffsetCommit v6+ `committed_leader_epoch`), answered by OffsetFetch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_epoch: Option<i32>,
    /// The protocol of the group member that committed (`kafka` or
    /// `http`, `ProtocolKind::name`); none for a commit without membership.
    /// A group without members answers the protocol of its latest
    /// member's commit, as Kafka keeps an emptied group's protocol type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// One committed offset as the API answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub metadata: String,
    /// Kafka's committed leader epoch, if the commit gave one (not part
    /// of HTTP's answers).
    #[serde(skip)]
    pub leader_epoch: Option<i32>,
}

#[derive(Debug, Clone)]
struct Entry {
    value: CommitValue,
    /// Queue offset in `__consumer_offsets` of the record this came from.
    log_offset: u64,
    /// When it was committed (the record's timestamp, ms since the epoch).
    committed_ms: u64,
}

type GroupState = BTreeMap<(String, u32), Entry>;

/// One record of [`crate::Broker::append_offsets`]: topic, partition, and
/// the commit with its encoded value (`None`: a tombstone).
pub(crate) type OffsetRecord = (String, u32, Option<(CommitValue, Bytes)>);

/// A group's last commit and the keys it has offsets for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCommits {
    pub group: String,
    pub last_commit_ms: u64,
    /// (topic, partition), sorted.
    pub keys: Vec<(String, u32)>,
    /// The protocol of the latest commit a member made, if any
    /// ([`CommitValue::protocol`]).
    pub protocol: Option<ProtocolKind>,
}

#[derive(Debug, Default)]
pub struct GroupOffsets {
    groups: RwLock<HashMap<String, GroupState>>,
}

/// The record key of a commit.
pub fn record_key(group: &str, topic: &str, partition: u32) -> Bytes {
    Bytes::from(format!("{group}/{topic}/{partition}"))
}

/// Splits a record key back into group, topic and partition, from the
/// right: the group may hold `/` itself.
fn parse_key(key: &[u8]) -> Option<(String, String, u32)> {
    let text = std::str::from_utf8(key).ok()?;
    let mut parts = text.rsplitn(3, '/');
    let (partition, topic, group) = (parts.next()?, parts.next()?, parts.next()?);
    if group.is_empty() || tidelog_storage::topic_name_problem(topic).is_some() {
        return None;
    }
    Some((
        group.to_string(),
        topic.to_string(),
        partition.parse().ok()?,
    ))
}

/// The record value of a commit.
pub fn record_value(value: &CommitValue) -> Result<Bytes, serde_json::Error> {
    serde_json::to_vec(value).map(Bytes::from)
}

/// The commit metadata rule: at most [`METADATA_MAX_BYTES`] (`index` is
/// the entry's place in its commit, for the message). A front-end that
/// answers per entry (Kafka's OffsetCommit) asks it before committing the
/// others.
pub fn validate_commit_metadata(index: usize, metadata: &str) -> Result<(), crate::BrokerError> {
    if metadata.len() > METADATA_MAX_BYTES {
        return Err(crate::BrokerError::CommitMetadataTooLarge {
            index,
            len: metadata.len(),
            max: METADATA_MAX_BYTES,
        });
    }
    Ok(())
}

/// One offset of a commit, as a front-end decoded it (the offset already
/// in `[0, 2^63 - 1]`); [`Broker::commit_offsets`](crate::Broker::commit_offsets)
/// checks the rest.
#[derive(Debug, Clone)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: u32,
    pub value: CommitValue,
}

/// Who commits, owned, for the door's [`commit`](crate::Door::commit):
/// a member of the group's current generation, or nobody in particular
/// (only while the group has no members).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committer {
    Member {
        member_id: String,
        instance_id: Option<String>,
        generation: u32,
    },
    Stateless,
}

impl crate::Broker {
    /// The door's offset commit: [`commit_offsets`](Self::commit_offsets)
    /// on the thread it needs (inline while the append is a copy into the
    /// page cache, on the blocking pool while it may wait for an fsync or
    /// the dispatcher).
    pub(crate) async fn commit(
        self: &std::sync::Arc<Self>,
        _who: &crate::Principal,
        group: String,
        offsets: Vec<OffsetCommit>,
        committer: Committer,
    ) -> Result<(), crate::BrokerError> {
        let broker = std::sync::Arc::clone(self);
        let call = move || {
            let origin = match &committer {
                Committer::Member {
                    member_id,
                    instance_id,
                    generation,
                } => crate::coordinator::CommitOrigin::Member {
                    member_id,
                    instance_id: instance_id.as_deref(),
                    generation: *generation,
                },
                Committer::Stateless => crate::coordinator::CommitOrigin::Stateless,
            };
            broker.commit_offsets(&group, offsets, origin)
        };
        if offsets_append_blocks(self) {
            crate::blocking::run(call).await
        } else {
            call()
        }
    }

    /// `group`'s committed offsets (of `topic` only, if given); `None` if
    /// the group has none.
    pub fn committed_offsets(
        &self,
        group: &str,
        topic: Option<&str>,
    ) -> Option<Vec<CommittedOffset>> {
        self.groups.get(group, topic)
    }

    /// Commits `offsets` for `group`: checked whole (the group name, that
    /// the coordinator lets `origin` commit now: a member of the current
    /// generation, or a commit without membership only while the group has
    /// no members; each topic and partition exists, metadata at most
    /// [`METADATA_MAX_BYTES`]), appended to `__consumer_offsets` as one
    /// batch, then applied in memory (see the module doc for why
    /// concurrent commits cannot disagree with the log). Nothing is
    /// written if any entry is refused. Blocking.
    pub fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<OffsetCommit>,
        origin: crate::coordinator::CommitOrigin<'_>,
    ) -> Result<(), crate::BrokerError> {
        crate::names::validate_group_name(group)?;
        self.coordinator.validate_commit(group, origin)?;
        let protocol = match origin {
            crate::coordinator::CommitOrigin::Member { .. } => self
                .coordinator
                .kind_of(group)
                .map(|k| k.name().to_string()),
            crate::coordinator::CommitOrigin::Stateless => None,
        };
        for (index, c) in offsets.iter().enumerate() {
            crate::names::validate_topic_name(&c.topic)?;
            self.registry
                .require(&c.topic)?
                .check_partition(c.partition)?;
            validate_commit_metadata(index, &c.value.metadata)?;
        }
        if offsets.is_empty() {
            return Ok(());
        }
        let mut records = Vec::with_capacity(offsets.len());
        for mut c in offsets {
            c.value.protocol.clone_from(&protocol);
            let value = record_value(&c.value)
                .map_err(|source| crate::BrokerError::OffsetCommitEncode { source })?;
            records.push((c.topic, c.partition, Some((c.value, value))));
        }
        self.append_offsets(group, records)
    }

    /// Appends commits (or tombstones, `None`) of `group` to
    /// `__consumer_offsets` as one batch, stamped with the coordinator's
    /// clock, then applies them in memory.
    pub(crate) fn append_offsets(
        &self,
        group: &str,
        records: Vec<OffsetRecord>,
    ) -> Result<(), crate::BrokerError> {
        let internal = self.registry.require(CONSUMER_OFFSETS_TOPIC)?;
        let now_ms = self.coordinator.now_ms();
        let batch: Vec<_> = records
            .iter()
            .map(|(topic, partition, value)| tidelog_storage::AppendRecord {
                topic: std::sync::Arc::clone(&internal.name),
                partition: 0,
                key: Some(record_key(group, topic, *partition)),
                value: value.as_ref().map(|(_, bytes)| bytes.clone()),
                headers: Vec::new(),
                timestamp_ms: Some(i64::try_from(now_ms).unwrap_or(i64::MAX)),
            })
            .collect();
        let appended = self.store.append(&batch)?;
        for ((topic, partition, value), a) in records.into_iter().zip(appended) {
            self.groups.apply(
                group,
                &topic,
                partition,
                value.map(|(v, _)| v),
                a.queue_offset.get(),
                now_ms,
            );
        }
        Ok(())
    }

    /// Deletes the committed offsets of every group whose offsets expired
    /// (the coordinator's `offsets_expired`: no members, and
    /// `groups.offsets_retention_minutes` since its last commit or since it
    /// became empty), by appending a tombstone for each of its keys.
    /// Returns the groups expired. Blocking.
    ///
    /// A stateless commit landing between the check and the tombstones is
    /// deleted with the rest: it came to a group that had just expired,
    /// exactly as if it had come a moment earlier.
    pub fn expire_offsets(&self) -> Result<Vec<String>, crate::BrokerError> {
        let mut expired = Vec::new();
        for GroupCommits {
            group,
            last_commit_ms,
            keys,
            ..
        } in self.groups.last_commits()
        {
            if !self.coordinator.offsets_expired(&group, last_commit_ms) {
                continue;
            }
            tracing::info!(
                group,
                offsets = keys.len(),
                last_commit_ms,
                "committed offsets expired (groups.offsets_retention_minutes)"
            );
            self.delete_offsets(&group, keys)?;
            expired.push(group);
        }
        Ok(expired)
    }

    /// Deletes the committed offsets of `group` at `keys` (topic,
    /// partition): one tombstone each, appended as one batch.
    pub(crate) fn delete_offsets(
        &self,
        group: &str,
        keys: Vec<(String, u32)>,
    ) -> Result<(), crate::BrokerError> {
        if keys.is_empty() {
            return Ok(());
        }
        let tombstones = keys.into_iter().map(|(t, p)| (t, p, None)).collect();
        self.append_offsets(group, tombstones)
    }
}

/// One committed offset against its partition's end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsumerLag {
    pub group: String,
    pub topic: String,
    pub partition: u32,
    pub committed_offset: u64,
    /// The offset the partition's next record gets.
    pub end_offset: u64,
    /// `end_offset − committed_offset`, 0 if the commit is at or past the
    /// end.
    pub lag: u64,
}

impl crate::Broker {
    /// The lag of every committed offset of every group whose topic and
    /// partition still exist, sorted by group, topic and partition. Not
    /// blocking (in-memory reads).
    pub fn consumer_lag(self: &std::sync::Arc<Self>) -> Vec<ConsumerLag> {
        self.groups
            .all_offsets()
            .into_iter()
            .filter_map(|(group, topic, partition, committed_offset)| {
                // Offsets of deleted topics stay visible in the offsets
                // route, but have no end to compare with.
                let end_offset = self.partition(&topic, partition).ok()?.offsets().1;
                Some(ConsumerLag {
                    lag: end_offset.saturating_sub(committed_offset),
                    group,
                    topic,
                    partition,
                    committed_offset,
                    end_offset,
                })
            })
            .collect()
    }
}

impl GroupOffsets {
    /// Reads the compacted log of `__consumer_offsets` from its beginning
    /// (or the partition's base offset, whichever is later). Blocking.
    /// Records that do not decode are logged and skipped: they cannot come
    /// from this server, and one bad record must not keep every group from
    /// starting.
    pub fn rebuild(
        logs: &CompactedLogs,
        base_offset: &dyn Fn(u32) -> u64,
    ) -> Result<Self, CleanerError> {
        let state = GroupOffsets::default();
        let mut applied = 0u64;
        for partition in 0..CONSUMER_OFFSETS_PARTITIONS {
            let Some(log) = logs.log(CONSUMER_OFFSETS_TOPIC, partition) else {
                continue;
            };
            let end = log.next_offset();
            let mut from = base_offset(partition);
            while from < end {
                let batch = log.read(from, REBUILD_BATCH_RECORDS, REBUILD_BATCH_BYTES)?;
                let Some(last) = batch.last() else {
                    break;
                };
                from = last.offset.get() + 1;
                for record in &batch {
                    state.apply_record(
                        record.key().as_deref(),
                        record.value().as_deref(),
                        record.offset.get(),
                        u64::try_from(record.timestamp_ms).unwrap_or(0),
                    );
                    applied += 1;
                }
            }
        }
        tracing::info!(
            records = applied,
            groups = state.group_count(),
            "consumer offsets rebuilt"
        );
        Ok(state)
    }

    fn apply_record(
        &self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        log_offset: u64,
        committed_ms: u64,
    ) {
        let Some((group, topic, partition)) = key.and_then(parse_key) else {
            tracing::warn!(
                log_offset,
                "skipping a {CONSUMER_OFFSETS_TOPIC} record with a bad key"
            );
            return;
        };
        let value = match value {
            None => None,
            Some(bytes) => match serde_json::from_slice::<CommitValue>(bytes) {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!(log_offset, error = %e, "skipping a {CONSUMER_OFFSETS_TOPIC} record with a bad value");
                    return;
                }
            },
        };
        self.apply(&group, &topic, partition, value, log_offset, committed_ms);
    }

    /// Records one commit (or a tombstone, `None`) that the log holds at
    /// `log_offset`, committed at `committed_ms`, unless a newer one is
    /// already known.
    pub fn apply(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        value: Option<CommitValue>,
        log_offset: u64,
        committed_ms: u64,
    ) {
        let mut groups = self.groups.write().unwrap_or_else(|e| e.into_inner());
        let key = (topic.to_string(), partition);
        match value {
            Some(value) => {
                let state = groups.entry(group.to_string()).or_default();
                match state.get(&key) {
                    Some(existing) if existing.log_offset > log_offset => {}
                    _ => {
                        state.insert(
                            key,
                            Entry {
                                value,
                                log_offset,
                                committed_ms,
                            },
                        );
                    }
                }
            }
            None => {
                if let Some(state) = groups.get_mut(group) {
                    if state.get(&key).is_some_and(|e| e.log_offset < log_offset) {
                        state.remove(&key);
                    }
                    if state.is_empty() {
                        groups.remove(group);
                    }
                }
            }
        }
    }

    /// The group's offsets (of `topic` only, if given), sorted by topic and
    /// partition; `None` if the group has none at all.
    pub fn get(&self, group: &str, topic: Option<&str>) -> Option<Vec<CommittedOffset>> {
        let groups = self.groups.read().unwrap_or_else(|e| e.into_inner());
        let state = groups.get(group)?;
        Some(
            state
                .iter()
                .filter(|((t, _), _)| topic.is_none_or(|want| want == t))
                .map(|((t, p), e)| CommittedOffset {
                    topic: t.clone(),
                    partition: *p,
                    offset: e.value.offset,
                    metadata: e.value.metadata.clone(),
                    leader_epoch: e.value.leader_epoch,
                })
                .collect(),
        )
    }

    /// Every group with its last commit time and its keys (topic,
    /// partition).
    pub fn last_commits(&self) -> Vec<GroupCommits> {
        let groups = self.groups.read().unwrap_or_else(|e| e.into_inner());
        groups
            .iter()
            .map(|(group, state)| GroupCommits {
                group: group.clone(),
                last_commit_ms: state.values().map(|e| e.committed_ms).max().unwrap_or(0),
                keys: state.keys().cloned().collect(),
                protocol: latest_protocol(state),
            })
            .collect()
    }

    /// Every committed offset of every group: (group, topic, partition,
    /// offset), sorted.
    pub fn all_offsets(&self) -> Vec<(String, String, u32, u64)> {
        let groups = self.groups.read().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<_> = groups
            .iter()
            .flat_map(|(group, state)| {
                state
                    .iter()
                    .map(|((t, p), e)| (group.clone(), t.clone(), *p, e.value.offset))
            })
            .collect();
        out.sort();
        out
    }

    /// The protocol of `group`'s latest commit by a member, if any.
    pub fn protocol_of(&self, group: &str) -> Option<ProtocolKind> {
        let groups = self.groups.read().unwrap_or_else(|e| e.into_inner());
        groups.get(group).and_then(latest_protocol)
    }

    pub fn group_count(&self) -> usize {
        self.groups.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Whether appending a commit may block: under `flush: sync` it waits for
/// an fsync, and while the dispatcher is over its lag bound for it.
fn offsets_append_blocks(broker: &crate::Broker) -> bool {
    broker.store.config().flush == tidelog_storage::FlushMode::Sync
        || broker.store.dispatch_lagging()
}

/// The protocol of a group's latest commit made by a member (by its
/// position in the log), if any.
fn latest_protocol(state: &GroupState) -> Option<ProtocolKind> {
    state
        .values()
        .filter_map(|e| Some((e.log_offset, e.value.protocol.as_deref()?)))
        .max()
        .and_then(|(_, name)| ProtocolKind::from_name(name))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn v(offset: u64) -> Option<CommitValue> {
        Some(CommitValue {
            offset,
            metadata: String::new(),
            ..Default::default()
        })
    }

    #[test]
    fn keys_round_trip() {
        let key = record_key("my group:1", "orders.v2", 7);
        assert_eq!(
            parse_key(&key),
            Some(("my group:1".into(), "orders.v2".into(), 7))
        );
        // A group may hold `/` (Kafka takes any group id): split from
        // the right, the topic and partition are the last two fields.
        for group in ["a/b", "/", "a//b/", "roundrobin,range", "x/t/1"] {
            let key = record_key(group, "t", 1);
            assert_eq!(parse_key(&key), Some((group.into(), "t".into(), 1)));
        }
        for bad in [
            &b"a/b"[..],
            b"/t/1",
            b"g/t/x",
            b"\xff/t/1",
            b"g/t b/1",
            b"g//1",
        ] {
            assert_eq!(parse_key(bad), None, "{bad:?}");
        }
    }

    /// A value without the optional fields is written as before (an
    /// older build reads it), one with them round-trips, and an older
    /// value reads with none; a group answers the protocol of its latest
    /// member commit.
    #[test]
    fn values_keep_their_old_shape_and_carry_epoch_and_protocol() {
        let plain = CommitValue {
            offset: 5,
            metadata: "m".into(),
            ..Default::default()
        };
        assert_eq!(
            &record_value(&plain).unwrap()[..],
            br#"{"offset":5,"metadata":"m"}"#
        );
        let full = CommitValue {
            leader_epoch: Some(3),
            protocol: Some("kafka".into()),
            ..plain.clone()
        };
        let bytes = record_value(&full).unwrap();
        assert_eq!(serde_json::from_slice::<CommitValue>(&bytes).unwrap(), full);
        assert_eq!(
            serde_json::from_slice::<CommitValue>(br#"{"offset":5,"metadata":"m"}"#).unwrap(),
            plain
        );

        let g = GroupOffsets::default();
        g.apply("g", "t", 0, Some(full.clone()), 1, 0);
        g.apply("g", "t", 1, Some(plain.clone()), 2, 0);
        assert_eq!(g.protocol_of("g"), Some(ProtocolKind::Kafka));
        assert_eq!(g.get("g", None).unwrap()[0].leader_epoch, Some(3));
        let http = CommitValue {
            protocol: Some("http".into()),
            ..plain
        };
        g.apply("g", "t", 1, Some(http), 3, 0);
        assert_eq!(g.protocol_of("g"), Some(ProtocolKind::Http));
        assert_eq!(g.protocol_of("nobody"), None);
    }

    #[test]
    fn newer_log_position_wins_whatever_the_arrival_order() {
        let g = GroupOffsets::default();
        g.apply("g", "t", 0, v(20), 5, 0);
        g.apply("g", "t", 0, v(10), 4, 0); // older commit applied late
        assert_eq!(g.get("g", None).unwrap()[0].offset, 20);
        g.apply("g", "t", 0, None, 3, 0); // older tombstone
        assert_eq!(g.get("g", None).unwrap().len(), 1);
        g.apply("g", "t", 0, None, 6, 0);
        assert!(g.get("g", None).is_none(), "empty group is unknown again");
    }

    #[test]
    fn topic_filter() {
        let g = GroupOffsets::default();
        g.apply("g", "a", 1, v(1), 0, 0);
        g.apply("g", "b", 0, v(2), 1, 0);
        g.apply("g", "a", 0, v(3), 2, 0);
        let all = g.get("g", None).unwrap();
        let order: Vec<(&str, u32)> = all
            .iter()
            .map(|o| (o.topic.as_str(), o.partition))
            .collect();
        assert_eq!(order, [("a", 0), ("a", 1), ("b", 0)]);
        assert_eq!(g.get("g", Some("b")).unwrap().len(), 1);
        assert!(g.get("g", Some("c")).unwrap().is_empty());
        assert!(g.get("h", None).is_none());
    }
}
