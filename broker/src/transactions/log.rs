//! The records of the transaction log, `__transaction_state` (issue 38's
//! second step; nothing writes the topic yet): one record per
//! [`Transition`] made durable, keyed by transactional
//! id, so compaction keeps each id's latest state, and a null value
//! (tombstone) for an id that expired.
//!
//! Key: the transactional id as UTF-8. Value: JSON, as
//! `__consumer_offsets`' values are (`crate::groups`):
//!
//! ```json
//! {"v":1,"producer_id":1001,"epoch":3,"last":[1001,2],"timeout_ms":60000,
//!  "state":"Ongoing","partitions":[["orders",0]],"started_ms":1700000000000,
//!  "updated_ms":1700000000500,
//!  "offsets":[{"group":"g","topic":"in","partition":0,"offset":42}]}
//! ```
//!
//! `offsets` (TxnOffsetCommit's, committed with the transaction) is left
//! out when empty, and each one's `leader_epoch` and `metadata` when
//! unset.
//!
//! `state` is Kafka's name of the state. A value from disk is checked as a
//! client's request is ([`parse`]): its id, epoch, timeout, state and
//! partitions within the coordinator's bounds, so a damaged or hand-made
//! record is refused by name, never taken.
//!
//! [`rebuild`] reads the log in order at start: the last record of each
//! id wins. What it finds half-done is what a crash interrupted, and
//! [`Recovery`] says how to finish it: a transaction in PrepareCommit or
//! PrepareAbort had its end decided and made durable, so its markers are
//! written (again) and it completes to that end; an Ongoing one stays
//! open, and its timeout aborts it if its producer does not come back.

use std::collections::BTreeSet;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{
    check_id, Transactions, Transition, TxnMetadata, TxnPartition, TxnState,
    PARTITIONS_PER_TRANSACTION_MAX, TRANSACTIONAL_IDS_MAX, TRANSACTION_MAX_TIMEOUT_MS,
};

/// The internal topic of the transaction log (named with the other
/// internal topics, in the registry).
pub use crate::registry::TRANSACTION_STATE_TOPIC;
/// The value's version; a newer one is refused by name.
const VALUE_VERSION: u8 = 1;
/// A value read from disk, at most: an id's partitions (each a topic name
/// of at most 249 bytes and a number) with room for the rest.
pub const VALUE_MAX_BYTES: usize = PARTITIONS_PER_TRANSACTION_MAX * 272 + 4096;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TxnValue {
    v: u8,
    producer_id: i64,
    epoch: i16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last: Option<(i64, i16)>,
    timeout_ms: u32,
    state: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    partitions: Vec<TxnPartition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    started_ms: Option<u64>,
    updated_ms: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    offsets: Vec<OffsetValue>,
}

/// One consumer offset of an open transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OffsetValue {
    group: String,
    topic: String,
    partition: u32,
    offset: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    leader_epoch: Option<i32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    metadata: String,
}

/// Why a transaction log record was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transaction log record at offset {offset}: {reason}")]
pub struct BadRecord {
    pub offset: u64,
    pub reason: String,
}

/// The key of `transactional_id`'s records.
pub fn record_key(transactional_id: &str) -> Bytes {
    Bytes::copy_from_slice(transactional_id.as_bytes())
}

/// The value of a transition made durable.
pub fn record_value(t: &Transition) -> Bytes {
    let value = TxnValue {
        v: VALUE_VERSION,
        producer_id: t.producer_id,
        epoch: t.epoch,
        last: t.last,
        timeout_ms: t.timeout_ms,
        state: t.state.name().to_owned(),
        partitions: t.partitions.iter().cloned().collect(),
        started_ms: t.started_ms,
        updated_ms: t.at_ms,
        offsets: t
            .offsets
            .iter()
            .map(|((group, topic, partition), o)| OffsetValue {
                group: group.clone(),
                topic: topic.clone(),
                partition: *partition,
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata: o.metadata.clone(),
            })
            .collect(),
    };
    // A struct of numbers, strings and lists always encodes.
    Bytes::from(serde_json::to_vec(&value).unwrap_or_default())
}

/// One record read back: the id and its metadata, or `None` for a
/// tombstone. Every field is checked before anything is kept.
pub fn parse(
    offset: u64,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(String, Option<TxnMetadata>), BadRecord> {
    let bad = |reason: String| BadRecord { offset, reason };
    let id = std::str::from_utf8(key)
        .map_err(|_| bad("the key is not UTF-8".into()))?
        .to_owned();
    check_id(&id).map_err(|e| bad(e.to_string()))?;
    let Some(value) = value else {
        return Ok((id, None));
    };
    if value.len() > VALUE_MAX_BYTES {
        return Err(bad(format!(
            "a value of {} bytes is longer than the {VALUE_MAX_BYTES} allowed",
            value.len()
        )));
    }
    let v: TxnValue =
        serde_json::from_slice(value).map_err(|e| bad(format!("not a transaction value: {e}")))?;
    if v.v != VALUE_VERSION {
        return Err(bad(format!(
            "value version {} is not the supported {VALUE_VERSION}",
            v.v
        )));
    }
    let state = state_named(&v.state).ok_or_else(|| bad(format!("unknown state {:?}", v.state)))?;
    if v.producer_id < 0 || v.epoch < 0 {
        return Err(bad(format!(
            "producer id {} and epoch {} must not be negative",
            v.producer_id, v.epoch
        )));
    }
    if !(1..=TRANSACTION_MAX_TIMEOUT_MS).contains(&v.timeout_ms) {
        return Err(bad(format!("timeout {} ms is out of bounds", v.timeout_ms)));
    }
    if v.partitions.len() > PARTITIONS_PER_TRANSACTION_MAX {
        return Err(bad(format!(
            "{} partitions are more than one transaction may hold",
            v.partitions.len()
        )));
    }
    for (topic, _) in &v.partitions {
        crate::names::validate_topic_name(topic).map_err(|e| bad(e.to_string()))?;
    }
    let open = matches!(
        state,
        TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort
    );
    if v.offsets.len() > PARTITIONS_PER_TRANSACTION_MAX || (!open && !v.offsets.is_empty()) {
        return Err(bad(format!(
            "{} offsets in state {}",
            v.offsets.len(),
            v.state
        )));
    }
    let mut offsets = super::TxnOffsets::new();
    for o in v.offsets {
        crate::names::validate_group_name(&o.group).map_err(|e| bad(e.to_string()))?;
        crate::names::validate_topic_name(&o.topic).map_err(|e| bad(e.to_string()))?;
        if o.metadata.len() > crate::groups::METADATA_MAX_BYTES {
            return Err(bad(format!(
                "offset metadata of {} bytes",
                o.metadata.len()
            )));
        }
        offsets.insert(
            (o.group, o.topic, o.partition),
            super::TxnOffset {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata: o.metadata,
            },
        );
    }
    if open == v.partitions.is_empty() || open != v.started_ms.is_some() {
        return Err(bad(format!(
            "state {} with {} partitions and start {:?} do not agree",
            v.state,
            v.partitions.len(),
            v.started_ms
        )));
    }
    Ok((
        id,
        Some(TxnMetadata {
            producer_id: v.producer_id,
            epoch: v.epoch,
            last: v.last,
            timeout_ms: v.timeout_ms,
            state,
            partitions: v.partitions.into_iter().collect::<BTreeSet<_>>(),
            offsets,
            started_ms: v.started_ms,
            updated_ms: v.updated_ms,
            pending: None,
        }),
    ))
}

fn state_named(name: &str) -> Option<TxnState> {
    use TxnState::*;
    [
        Empty,
        Ongoing,
        PrepareCommit,
        PrepareAbort,
        CompleteCommit,
        CompleteAbort,
    ]
    .into_iter()
    .find(|s| s.name() == name)
}

/// What a rebuild found half-done.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Transactions whose end was decided (PrepareCommit, PrepareAbort):
    /// write their markers (again: a marker already written is harmless),
    /// then [`Transactions::finish`] each.
    pub ending: Vec<Transition>,
    /// Transactions left open; their producers may come back, else their
    /// timeouts abort them.
    pub open: usize,
}

/// The coordinator's state from the transaction log's records in log
/// order (`(offset, key, value)`), the last record of each id winning.
pub fn rebuild<'a>(
    records: impl IntoIterator<Item = (u64, &'a [u8], Option<&'a [u8]>)>,
) -> Result<(Transactions, Recovery), BadRecord> {
    let mut txns = Transactions::new();
    let mut last_offset = None;
    for (offset, key, value) in records {
        if last_offset.is_some_and(|l| offset <= l) {
            return Err(BadRecord {
                offset,
                reason: "records out of log order".into(),
            });
        }
        last_offset = Some(offset);
        let (id, metadata) = parse(offset, key, value)?;
        match metadata {
            Some(m) => {
                if !txns.ids.contains_key(&id) && txns.ids.len() >= TRANSACTIONAL_IDS_MAX {
                    return Err(BadRecord {
                        offset,
                        reason: format!("more than {TRANSACTIONAL_IDS_MAX} transactional ids"),
                    });
                }
                txns.ids.insert(id, m);
            }
            None => {
                txns.ids.remove(&id);
            }
        }
    }
    let mut recovery = Recovery::default();
    for (id, m) in &txns.ids {
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                recovery.ending.push(txns.as_transition(id, m));
            }
            TxnState::Ongoing => recovery.open += 1,
            _ => {}
        }
    }
    Ok((txns, recovery))
}

impl Transactions {
    /// Transactional ids with no transaction open that have not been used
    /// for `expiration_ms` (Kafka's `transactional.id.expiration.ms`):
    /// removed here; the caller writes their tombstones.
    pub fn expire_ids(&mut self, now_ms: u64, expiration_ms: u64) -> Vec<String> {
        let gone: Vec<String> = self
            .ids
            .iter()
            .filter(|(_, m)| {
                m.pending.is_none()
                    && m.state.is_settled()
                    && now_ms.saturating_sub(m.updated_ms) > expiration_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            self.ids.remove(id);
        }
        gone
    }
}
