//! Deleting: a topic (its queues, for good), a partition's records below
//! a client's offset (DeleteRecords), and retention passes: installing
//! the hold they obey and running one on demand. The pass itself is
//! `retention::pass`'s.
//!
//! Invariants: a deletion is durable before it returns; a deleted
//! topic's records are never indexed or served again, also not after a
//! crash; no offset is handed out twice (each deleted partition's next
//! offset is kept); retention never deletes the segment being written or
//! one the indexes do not hold durably.

use std::sync::Arc;
use std::time::Duration;

use super::{Inner, Store};
use crate::consume_queue::DeletedRecords;
use crate::error::Result;
use crate::types::validate_topic_name;

impl Store {
    /// Kafka's DeleteRecords on one partition: move its log start offset to
    /// `before` (`None`: the high watermark, the partition's end as fetches
    /// see it). Records below are never served again (reads, offsets and
    /// timestamp lookups begin there, also after a restart or a crash) and
    /// their queue files go with the next retention pass; their bytes stay
    /// in the CommitLog, which every partition shares, until its segments
    /// age out. Durable before it returns. An offset past the high
    /// watermark changes nothing ([`DeletedRecords::AboveHighWatermark`]),
    /// one at or below the beginning neither. Blocking (fsyncs).
    pub fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        before: Option<u64>,
    ) -> Result<DeletedRecords> {
        self.inner.queues.delete_records(topic, partition, before)
    }

    /// Delete `topic` from the store: its ConsumeQueue files are removed and
    /// closed now, and its records are never indexed or served by queue
    /// offset again, also not after a crash and a recovery replay (they stay
    /// in the CommitLog until retention deletes their segments). Each
    /// partition's next offset is kept durably, so a topic created again
    /// under the name continues its offsets. Returns the partitions whose
    /// queues were deleted. Blocking (fsyncs).
    pub fn delete_topic(&self, topic: &str) -> Result<usize> {
        validate_topic_name(topic)?;
        // Appends of the topic are refused from the snapshot on, so the
        // offsets kept cover every record of it that can be dispatched.
        let writer_next = self.inner.log.close_topic(topic);
        #[cfg(test)]
        super::run_before_queues_delete();
        let deleted = self.inner.queues.delete_topic(topic, &writer_next)?;
        tracing::info!(topic, partitions = deleted, "deleted the topic's queues");
        Ok(deleted)
    }

    /// Install the hold retention obeys from its next pass on (replacing
    /// any earlier one): no segment ending above
    /// [`RetentionHold::min_position`](crate::retention::RetentionHold::min_position)
    /// is deleted, whatever the trigger.
    pub fn set_retention_hold(&self, hold: Arc<dyn crate::retention::RetentionHold>) {
        *self
            .inner
            .retention
            .hold
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(hold);
    }

    /// Install which topics keep their aborted transactions below their
    /// partitions' beginnings (a compact topic: its compacted log still
    /// holds records of them). From then on a retention pass that deletes
    /// segments forgets every other partition's aborted transactions
    /// wholly below its beginning; until then none is forgotten.
    pub fn set_aborted_keep(&self, keep: crate::retention::AbortedKeep) {
        *self
            .inner
            .retention
            .aborted_keep
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(keep);
    }

    /// Run a retention pass now. `Trigger::Manual` deletes expired segments
    /// whatever the hour; `Trigger::ManualForce` deletes every sealed
    /// segment the indexes hold durably (RocketMQ's manual delete). The
    /// segment being written is never deleted.
    pub fn run_retention(
        &self,
        trigger: crate::retention::Trigger,
    ) -> Result<crate::retention::PassOutcome> {
        if trigger != crate::retention::Trigger::Scheduled {
            // Make everything dispatched so far durable, so the pass may
            // delete every segment the dispatcher has passed. Flushed
            // first: under `flush: sync` dispatch follows the flush.
            self.inner.log.flush_all()?;
            self.inner
                .dispatcher
                .wait_dispatched(self.inner.log.committed(), Duration::from_secs(5));
            self.inner.log.flush_all()?;
            self.inner.checkpoint()?;
        }
        self.inner.retention_pass(trigger)
    }
}

impl Inner {
    /// One retention pass (see `retention.rs` for the rules, and
    /// `retention/pass.rs` for the pass).
    pub(super) fn retention_pass(
        &self,
        trigger: crate::retention::Trigger,
    ) -> Result<crate::retention::PassOutcome> {
        self.retention.pass(
            &self.config.retention,
            &self.config.data_dir,
            crate::retention::pass::Retained {
                log: &self.log,
                queues: &self.queues,
                index: &self.index,
                txn_sink: &self.txn_sink,
            },
            trigger,
        )
    }
}
