//! Reads that hide where a topic's records live: a compact topic
//! (`cleanup.policy` with `compact`) is read from its compacted logs, any
//! other through the ConsumeQueue and CommitLog. Every read respects the
//! topic's base offsets (`registry.rs`): records of an earlier topic of the
//! same name are never served.
//!
//! Query by key on a compact topic scans every partition's compacted log
//! (no index): linear in the compacted logs' size, which cleaning keeps
//! near one record per key. Newest first means latest appended first
//! (highest CommitLog position).

use tidelog_cleaner::CompactedRecord;
use tidelog_storage::StoredRecord;

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::registry::Topic;

/// Records read by key: the CommitLog's, or a compact topic's compacted
/// copies with their partition. Newest first.
#[derive(Debug)]
pub enum KeyRecords {
    Stored(Vec<StoredRecord>),
    Compacted(Vec<(u32, CompactedRecord)>),
}

/// Records read per batch while a key query scans a compacted log.
const QUERY_SCAN_BATCH_RECORDS: usize = 4096;
const QUERY_SCAN_BATCH_BYTES: usize = 4 << 20;

impl Broker {
    /// The beginning and end offsets of a partition (`partition` checked by
    /// the caller), never below the topic's base offset.
    pub fn offsets(&self, topic: &Topic, partition: u32) -> (u64, u64) {
        let base = topic.base_offset(partition);
        let (beginning, end) = if topic.config.cleanup_policy.compacts() {
            self.logs
                .log(&topic.name, partition)
                .map_or((base, base), |log| {
                    (log.beginning_offset(), log.next_offset())
                })
        } else {
            self.store.offsets(&topic.name, partition)
        };
        (beginning.max(base), end.max(base))
    }

    /// Records of `topic` with exactly `key` and a store time within
    /// `[begin_ms, end_ms]`, newest first, at most `max`. Blocking.
    pub fn query_by_key(
        &self,
        topic: &Topic,
        key: &[u8],
        begin_ms: i64,
        end_ms: i64,
        max: usize,
    ) -> Result<KeyRecords, BrokerError> {
        if topic.config.cleanup_policy.compacts() {
            return Ok(KeyRecords::Compacted(
                self.query_compacted(topic, key, begin_ms, end_ms, max)?,
            ));
        }
        let mut found = self
            .store
            .query_by_key(&topic.name, key, begin_ms, end_ms, max)?;
        found.retain(|r| is_live(topic, r));
        Ok(KeyRecords::Stored(found))
    }

    /// The record that starts at CommitLog position `position`, if there is
    /// one and it belongs to a live topic (the current incarnation of a
    /// topic the registry has). Blocking.
    pub fn read_physical(&self, position: u64) -> Result<Option<StoredRecord>, BrokerError> {
        let Some(record) = self
            .store
            .read_at(tidelog_storage::PhysicalOffset::new(position))?
        else {
            return Ok(None);
        };
        let live = self
            .registry
            .get(record.topic())
            .is_some_and(|topic| is_live(&topic, &record));
        Ok(live.then_some(record))
    }

    /// A scan of every partition's compacted log from its base offset,
    /// keeping the `max` newest in a bounded heap. Blocking.
    fn query_compacted(
        &self,
        topic: &Topic,
        key: &[u8],
        begin_ms: i64,
        end_ms: i64,
        max: usize,
    ) -> Result<Vec<(u32, CompactedRecord)>, BrokerError> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;

        struct Found(u32, CompactedRecord);
        impl PartialEq for Found {
            fn eq(&self, other: &Self) -> bool {
                self.1.physical_offset == other.1.physical_offset
            }
        }
        impl Eq for Found {}
        impl PartialOrd for Found {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for Found {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.1.physical_offset.cmp(&other.1.physical_offset)
            }
        }

        // A min-heap of the `max` newest so far.
        let mut newest: BinaryHeap<Reverse<Found>> = BinaryHeap::new();
        for partition in 0..topic.partitions.get() {
            let Some(log) = self.logs.log(&topic.name, partition) else {
                continue;
            };
            let end = log.next_offset();
            let mut from = topic.base_offset(partition);
            while from < end {
                let batch = log.read(from, QUERY_SCAN_BATCH_RECORDS, QUERY_SCAN_BATCH_BYTES)?;
                let Some(last) = batch.last() else {
                    break;
                };
                from = last.offset.get() + 1;
                for r in batch {
                    let ts = r.store_timestamp_ms;
                    if ts < begin_ms || ts > end_ms || r.key().as_deref() != Some(key) {
                        continue;
                    }
                    newest.push(Reverse(Found(partition, r)));
                    if newest.len() > max {
                        newest.pop();
                    }
                }
            }
        }
        // Ascending in `Reverse` order: the newest first.
        Ok(newest
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(Found(p, r))| (p, r))
            .collect())
    }
}

/// Whether `r` belongs to the current incarnation of `topic`.
fn is_live(topic: &Topic, r: &StoredRecord) -> bool {
    r.partition() < topic.partitions.get()
        && r.queue_offset().get() >= topic.base_offset(r.partition())
}
