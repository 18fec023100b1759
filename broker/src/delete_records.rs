//! DeleteRecords (Kafka's; HTTP has no route for it, API.md): move a
//! partition's log start offset. The store keeps it durably
//! (`log-start-offsets`, [`Store::delete_records`](tidelog_storage::Store::delete_records))
//! and its ConsumeQueue begins there; a compact topic's reads of its
//! compacted log begin there too (`read.rs`), and `compact,delete`
//! retention deletes the compacted segments wholly below it.
//!
//! Kafka's rules (`ReplicaManager.deleteRecordsOnLocalLog`,
//! `Partition.deleteRecordsOnLeader`, `UnifiedLog.maybeIncrementLogStartOffset`):
//! an internal topic is refused; a topic whose `cleanup.policy` lacks
//! `delete` is a policy violation; -1 means the high watermark; another
//! negative offset, or one past the high watermark, is out of range; one
//! at or below the beginning changes nothing. Every answer is the
//! partition's low watermark (its beginning).

use tidelog_storage::DeletedRecords;

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::log_start::move_log_start;
use crate::topic_config::CleanupPolicy;

/// DeleteRecords' offset meaning "the high watermark".
pub const HIGH_WATERMARK: i64 = -1;

impl Broker {
    /// Delete the records of `topic`-`partition` below `offset`
    /// ([`HIGH_WATERMARK`]: all of them) by moving its log start offset;
    /// the low watermark after it. Durable before it returns. Blocking
    /// (fsyncs).
    pub(crate) fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        offset: i64,
    ) -> Result<u64, BrokerError> {
        let t = self.registry.require(topic)?;
        t.check_partition(partition)?;
        if t.is_internal() {
            return Err(BrokerError::InternalTopic {
                topic: topic.to_string(),
            });
        }
        if t.config.cleanup_policy == CleanupPolicy::Compact {
            return Err(BrokerError::RecordsNotDeletable {
                topic: topic.to_string(),
                policy: t.config.cleanup_policy.as_str(),
            });
        }
        let out_of_range = |high_watermark| BrokerError::OffsetOutOfRange {
            topic: topic.to_string(),
            partition,
            offset,
            high_watermark,
        };
        let before = match offset {
            HIGH_WATERMARK => None,
            o => Some(
                u64::try_from(o).map_err(|_| out_of_range(self.partition_end(topic, partition)))?,
            ),
        };
        let base = t.base_offset(partition);
        let mut before = before;
        if self.metadata.is_enabled() {
            // A cluster's master: the move goes into the log first, as a
            // concrete offset, so every node makes the same one (and a
            // failover keeps it: `crate::cluster_metadata`). Checked
            // first, so no record names a move this node refuses.
            let (start, end) = self.store.offsets(topic, partition);
            let offset = before.unwrap_or(end);
            if offset > end {
                return Err(out_of_range(end.max(base)));
            }
            if offset <= start {
                return Ok(start.max(base));
            }
            self.metadata
                .publish_log_start(&crate::cluster_metadata::format::LogStart {
                    topic,
                    partition,
                    offset,
                })?;
            before = Some(offset);
        }
        let low = match move_log_start(&self.store, &self.logs, topic, partition, before)? {
            DeletedRecords::LowWatermark(low) => low,
            DeletedRecords::AboveHighWatermark { high_watermark, .. } => {
                return Err(out_of_range(high_watermark.max(base)))
            }
        };
        tracing::info!(topic, partition, low_watermark = low, "DeleteRecords");
        Ok(low.max(base))
    }

    fn partition_end(&self, topic: &str, partition: u32) -> u64 {
        self.store.offsets(topic, partition).1
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::group_admin::{ResetScope, ResetTarget};
    use crate::test_support::{append, compact, open, wait_until};
    use crate::topic_config::Overrides;

    fn compact_delete() -> Overrides {
        Overrides::from([("cleanup.policy".to_string(), "compact,delete".to_string())])
    }

    fn first_offset(broker: &Arc<Broker>, topic: &str) -> Option<u64> {
        let part = broker.partition(topic, 0).unwrap();
        part.read(0, 10, 1 << 20)
            .unwrap()
            .records
            .iter()
            .next()
            .map(|r| r.offset())
    }

    /// Both kinds of topic (a queue topic and a `compact,delete` one, read
    /// from its compacted log): offsets, reads, listens, the timestamp
    /// lookup and a group's offset reset begin at the new start (HTTP's
    /// fetch, offsets, consumer instances' positions and Kafka's Fetch and
    /// ListOffsets all read them), which only moves forward, is
    /// bounded by the high watermark, and survives a restart.
    #[test]
    fn the_beginning_moves_for_queue_and_compacted_topics_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        for (t, overrides) in [("events", Overrides::new()), ("users", compact_delete())] {
            broker.create_topic(t, 1, overrides).unwrap();
            append(
                &broker,
                t,
                &[("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")],
            );
            let part = broker.partition(t, 0).unwrap();
            wait_until("dispatch", || part.offsets().1 == 4);
            assert!(matches!(
                broker.delete_records(t, 0, 5),
                Err(BrokerError::OffsetOutOfRange {
                    offset: 5,
                    high_watermark: 4,
                    ..
                })
            ));
            assert!(matches!(
                broker.delete_records(t, 0, -2),
                Err(BrokerError::OffsetOutOfRange { offset: -2, .. })
            ));
            assert_eq!(broker.delete_records(t, 0, 2).unwrap(), 2, "{t}");
            assert_eq!(broker.delete_records(t, 0, 1).unwrap(), 2, "{t}: backwards");
            assert_eq!(part.offsets(), (2, 4), "{t}");
            assert_eq!(first_offset(&broker, t), Some(2), "{t}");
            assert_eq!(part.offset_for_timestamp(i64::MIN).unwrap(), 2, "{t}");
            assert!(part.listen(0).unwrap().is_none(), "{t}: records from 2");
            // A group's reset to the beginning, and to an offset below it.
            for to in [ResetTarget::Beginning, ResetTarget::Offset(0)] {
                let reset = broker
                    .reset_offsets("g", ResetScope::Topic(t.to_string()), to)
                    .unwrap();
                assert_eq!(reset[0].offset, 2, "{t}: {to:?}");
            }
        }
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
        let broker = open(dir.path());
        for t in ["events", "users"] {
            let part = broker.partition(t, 0).unwrap();
            assert_eq!(part.offsets(), (2, 4), "{t} after a restart");
            assert_eq!(first_offset(&broker, t), Some(2), "{t} after a restart");
            // -1: the high watermark; then nothing to read, and a listen
            // from 0 waits rather than answering "read again".
            assert_eq!(broker.delete_records(t, 0, HIGH_WATERMARK).unwrap(), 4);
            assert_eq!(part.offsets(), (4, 4), "{t}");
            assert_eq!(first_offset(&broker, t), None, "{t}");
            assert!(part.listen(0).unwrap().is_some(), "{t}");
            assert_eq!(part.offset_for_timestamp(0).unwrap(), 4, "{t}");
        }
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }

    /// A lookup by key and a read by CommitLog position never answer a
    /// record below the log start, though its bytes are still there.
    #[test]
    fn lookups_by_key_and_by_position_never_answer_below_the_log_start() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        for (t, overrides) in [("events", Overrides::new()), ("users", compact_delete())] {
            broker.create_topic(t, 1, overrides).unwrap();
            append(&broker, t, &[("a", "1"), ("b", "2"), ("a", "3")]);
            let part = broker.partition(t, 0).unwrap();
            // Every sink, the IndexFile too: a queue's end offset moves
            // before the index has the entry's keys.
            assert!(broker
                .store
                .wait_dispatched(std::time::Duration::from_secs(30)));
            wait_until("dispatch", || part.offsets().1 == 3);
            // The queue's end moves before the IndexFile takes the same
            // records (a later sink of the same round): wait for all sinks.
            assert!(broker
                .store
                .wait_dispatched(std::time::Duration::from_secs(30)));
            let first = part.read(0, 1, 1 << 20).unwrap();
            let position = first.records.iter().next().unwrap().physical_offset();
            assert!(broker.read_physical(position).unwrap().is_some(), "{t}");
            let topic = broker.registry.require(t).unwrap();
            let by_key = |broker: &Broker| -> Vec<u64> {
                broker
                    .query_by_key(&topic, b"a", i64::MIN, i64::MAX, 10)
                    .unwrap()
                    .iter()
                    .map(|r| r.offset())
                    .collect()
            };
            assert_eq!(by_key(&broker), [2, 0], "{t}");
            broker.delete_records(t, 0, 1).unwrap();
            assert_eq!(by_key(&broker), [2], "{t}");
            assert!(broker.read_physical(position).unwrap().is_none(), "{t}");
        }
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }

    /// The compacted log's timestamp lookup starts at the log start: a
    /// record below it that matches is not the answer, nor is the log
    /// start itself when its record is older.
    #[test]
    fn a_compacted_timestamp_lookup_never_answers_below_the_log_start() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("users", 1, compact_delete()).unwrap();
        crate::test_support::append_timed(&broker, "users", &[10, 50, 30, 70, 20]);
        let part = broker.partition("users", 0).unwrap();
        wait_until("dispatch", || part.offsets().1 == 5);
        broker.delete_records("users", 0, 2).unwrap();
        // 50 is at offset 1 (deleted); the first at or after 2 with a
        // timestamp ≥ 45 is 70, at 3.
        assert_eq!(part.offset_for_timestamp(45).unwrap(), 3);
        assert_eq!(part.offset_for_timestamp(25).unwrap(), 2);
        drop(part);
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }

    /// Kafka's refusals: unknown topic or partition, an internal topic, a
    /// compact-only topic (POLICY_VIOLATION).
    #[test]
    fn unknown_internal_and_compact_only_topics_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("t", 1, Overrides::new()).unwrap();
        broker.create_topic("c", 1, compact()).unwrap();
        assert!(matches!(
            broker.delete_records("nope", 0, 0),
            Err(BrokerError::UnknownTopic { .. })
        ));
        assert!(matches!(
            broker.delete_records("t", 1, 0),
            Err(BrokerError::UnknownPartition { .. })
        ));
        assert!(matches!(
            broker.delete_records("__consumer_offsets", 0, 0),
            Err(BrokerError::InternalTopic { .. })
        ));
        assert!(matches!(
            broker.delete_records("c", 0, 0),
            Err(BrokerError::RecordsNotDeletable {
                policy: "compact",
                ..
            })
        ));
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }

    /// A topic deleted and created again begins at its own first offset
    /// (its base), not at the old incarnation's log start.
    #[test]
    fn a_topic_created_again_begins_at_its_base() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("t", 1, Overrides::new()).unwrap();
        append(&broker, "t", &[("a", "1"), ("b", "2"), ("c", "3")]);
        let part = broker.partition("t", 0).unwrap();
        wait_until("dispatch", || part.offsets().1 == 3);
        assert_eq!(broker.delete_records("t", 0, 2).unwrap(), 2);
        drop(part);
        broker.delete_topic("t").unwrap();
        broker.create_topic("t", 1, Overrides::new()).unwrap();
        let part = broker.partition("t", 0).unwrap();
        assert_eq!(part.offsets(), (3, 3));
        append(&broker, "t", &[("d", "4")]);
        wait_until("dispatch", || part.offsets() == (3, 4));
        assert_eq!(broker.delete_records("t", 0, 0).unwrap(), 3, "the base");
        assert_eq!(first_offset(&broker, "t"), Some(3));
        drop(part);
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }

    /// `compact,delete` retention deletes the compacted segments wholly
    /// below the log start (the cleaner's housekeeping).
    #[test]
    fn compacted_segments_below_the_log_start_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        let overrides = Overrides::from([
            ("cleanup.policy".to_string(), "compact,delete".to_string()),
            ("segment.bytes".to_string(), "1024".to_string()),
        ]);
        broker.create_topic("users", 1, overrides).unwrap();
        let value = "v".repeat(200);
        for i in 0..20 {
            append(&broker, "users", &[(&format!("k{i}"), &value)]);
        }
        let part = broker.partition("users", 0).unwrap();
        wait_until("dispatch", || part.offsets().1 == 20);
        let log = broker.logs.log("users", 0).unwrap();
        let before = log.segments().len();
        assert!(before > 2, "{before} segments");
        broker.delete_records("users", 0, 15).unwrap();
        assert_eq!(log.log_start(), 15);
        // A compaction request wakes a cleaner thread, which runs its
        // housekeeping (retention) first.
        broker.cleaner.request("users", false).unwrap();
        wait_until("housekeeping", || {
            log.segments()
                .first()
                .and_then(|s| s.stats().first_offset)
                .is_some_and(|first| first > 0)
        });
        let first = log.segments()[0].stats();
        assert!(first.last_offset.is_none_or(|last| last >= 15), "{first:?}");
        assert_eq!(part.offsets().0, 15);
        drop((part, log));
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }
}
