//! Reading: records of a partition by queue offset, one record by
//! physical offset, records by key, and what a reader needs around them
//! (offsets, timestamps, listeners, the committed and dispatched
//! positions).
//!
//! Invariants: a read returns records in queue-offset order from the
//! partition's beginning on, at least one if there is one (so a large
//! record cannot block a consumer); every record it hands out is checked
//! to be the one its queue unit names (topic, partition, offset), and a
//! disagreement is `Corruption`, never a wrong record served; a record
//! retention deleted under a read is skipped, not an error.

use std::time::Duration;

use event_listener::EventListener;

use super::Store;
use crate::commit_log::{ReadSink, StoredRecord};
use crate::dispatch::keep_going;
use crate::error::{CorruptionKind, QueuePosition, Result, StoreError};
use crate::types::{validate_topic_name, PhysicalOffset, QueueOffset, TopicPartition};

/// A read reserves room for at most this many records up front (~100 KiB;
/// more grow the vector as usual): a fetch at the API's default
/// `max_records` (500) never reallocates, and one whose `max_bytes` stops
/// it after a few records wastes little.
const READ_RESERVE_MAX: usize = 1000;

/// Records read from one partition.
#[derive(Debug, Default)]
pub struct ReadResult {
    pub records: Vec<StoredRecord>,
    /// Where the next read should start (last offset + 1, or the request's
    /// offset moved up to the partition's beginning).
    pub next_offset: QueueOffset,
}

impl Store {
    /// `[beginning, end)` queue offsets of a partition; `(0, 0)` if nothing
    /// was ever written to it, `(next, next)` if its topic was deleted.
    pub fn offsets(&self, topic: &str, partition: u32) -> (u64, u64) {
        match self.inner.queues.get(topic, partition) {
            Some(q) => (q.min_offset(), q.max_offset()),
            None => match self.inner.queues.deleted_next_offset(topic, partition) {
                Some(next) => (next, next),
                None => (0, 0),
            },
        }
    }

    /// The partition's last stable offset: where read_committed reads end
    /// (the first offset of its earliest open transaction, else its end).
    /// The end is read before the transactions, so every transactional
    /// record below it is already counted (`crate::txn_index`).
    pub fn last_stable_offset(&self, topic: &str, partition: u32) -> u64 {
        let end = self.offsets(topic, partition).1;
        self.inner
            .log
            .txns()
            .last_stable_offset(topic, partition, end)
    }

    /// The producers with state in `topic`-`partition`, by producer id
    /// (DescribeProducers, KIP-664).
    pub fn producers(&self, topic: &str, partition: u32) -> Vec<crate::ActiveProducer> {
        self.inner.log.producers_of(topic, partition)
    }

    /// The aborted transactions a read_committed fetch of `[from, to)` of
    /// the partition must name, as `(producer id, first offset)`, in the
    /// order their markers were written.
    pub fn aborted_transactions(
        &self,
        topic: &str,
        partition: u32,
        from: u64,
        to: u64,
    ) -> Vec<(i64, u64)> {
        self.inner.log.txns().aborted_in(topic, partition, from, to)
    }

    /// [`aborted_transactions`](Self::aborted_transactions) with each
    /// one's marker offset, `(producer id, first offset, last offset)`:
    /// a transactional record of that producer within the range is
    /// aborted.
    pub fn aborted_ranges(
        &self,
        topic: &str,
        partition: u32,
        from: u64,
        to: u64,
    ) -> Vec<(i64, u64, u64)> {
        self.inner
            .log
            .txns()
            .aborted_ranges(topic, partition, from, to)
    }

    /// The first queue offset of a partition whose record timestamp is at
    /// least `timestamp_ms` (Kafka's ListOffsets rule: the producer's
    /// timestamps, which need not grow with offsets), or the partition's end
    /// offset if no record is. Found through the partition's time index
    /// (reads at most about two intervals of records), not a scan.
    pub fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: u32,
        timestamp_ms: i64,
    ) -> Result<u64> {
        match self.inner.queues.get(topic, partition) {
            Some(q) => q.offset_for_timestamp(timestamp_ms, &self.inner.log),
            None => Ok(self.offsets(topic, partition).1),
        }
    }

    /// The log start offset a client moved the partition's beginning to
    /// ([`Store::delete_records`]), 0 if none: a compact topic's reads of
    /// its compacted log begin there too.
    pub fn log_start(&self, topic: &str, partition: u32) -> u64 {
        self.inner.queues.log_start(topic, partition)
    }

    /// The first record of a partition with the largest timestamp, as
    /// (queue offset, timestamp), or `None` for a partition without
    /// records (Kafka's ListOffsets -3): through the time index, not a
    /// scan (`ConsumeQueue::max_timestamp_record`).
    pub fn max_timestamp_record(&self, topic: &str, partition: u32) -> Result<Option<(u64, i64)>> {
        match self.inner.queues.get(topic, partition) {
            Some(q) => q.max_timestamp_record(&self.inner.log),
            None => Ok(None),
        }
    }

    /// Up to `max_records` records of a partition from queue offset `from`
    /// on (or from the beginning, if `from` was deleted), stopping before
    /// `max_bytes` is exceeded but always returning at least one record if
    /// there is one (so a large record cannot block a consumer).
    pub fn read(
        &self,
        topic: &str,
        partition: u32,
        from: QueueOffset,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<ReadResult> {
        let mut records = Vec::new();
        let next_offset =
            self.read_into(topic, partition, from, max_records, max_bytes, &mut records)?;
        Ok(ReadResult {
            records,
            next_offset,
        })
    }

    /// [`Store::read`], each record handed to `sink` as it is read rather
    /// than collected (a Kafka fetch encodes it into its batch at once);
    /// returns where the next read starts.
    pub fn read_into(
        &self,
        topic: &str,
        partition: u32,
        from: QueueOffset,
        max_records: usize,
        max_bytes: usize,
        sink: &mut impl ReadSink,
    ) -> Result<QueueOffset> {
        let Some(q) = self.inner.queues.get(topic, partition) else {
            return Ok(from);
        };
        let start = from.get().max(q.min_offset());
        let end = q.max_offset();
        let wanted = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX);
        sink.reserve(wanted.min(max_records).min(READ_RESERVE_MAX));
        let mut count = 0usize;
        let mut bytes = 0usize;
        let mut offset = start;
        let mut queue_cursor = crate::consume_queue::QueueCursor::default();
        let mut segment = crate::commit_log::ReadCache::default();
        while offset < end && count < max_records {
            // The record after the one just read is usually the next of its
            // entry, found without the queue. Only an entry this read
            // found is looked in (`segment` is its own), so a sink that
            // comes holding another partition's record is never followed.
            let after_last = sink
                .last()
                .filter(|last| last.queue_offset().get() + 1 == offset);
            let rec = match after_last {
                Some(last) => self.inner.log.next_in_entry(last, &segment)?,
                None => None,
            };
            // A record of the entry of the one before has its topic and
            // partition (the entry's), checked with that one.
            let entry_checked = rec.is_some();
            let rec = match rec {
                Some(rec) => Some(rec),
                None => match q.get_cached(offset, &mut queue_cursor)? {
                    Some(unit) => match self.inner.log.read_unit_cached(
                        unit.physical_offset,
                        unit.size,
                        &mut segment,
                    )? {
                        None if unit.physical_offset < self.inner.log.min_offset() => {
                            // Retention deleted it since we read the
                            // beginning (the queue's beginning follows a
                            // moment later): go on from the new beginning
                            // rather than unit by unit.
                            let log_min = self.inner.log.min_offset();
                            offset = q.first_offset_at_or_past(log_min).max(offset + 1);
                            continue;
                        }
                        rec => rec,
                    },
                    None => None,
                },
            };
            let Some(rec) = rec else {
                // A hole in the queue, or deleted by retention since we
                // looked at the beginning.
                offset += 1;
                continue;
            };
            if rec.queue_offset().get() != offset
                || !entry_checked
                    && (rec.topic_bytes() != topic.as_bytes() || rec.partition() != partition)
            {
                // Bytes the reads do not CRC-check disagree with the
                // queue: damage in the log (or the queue), reported as such.
                return Err(StoreError::corruption(
                    self.inner.log.dir(),
                    rec.physical_offset().get(),
                    CorruptionKind::QueueMismatch {
                        queue: Box::new(QueuePosition {
                            topic: topic.to_string(),
                            partition,
                            offset,
                        }),
                        found: Box::new(QueuePosition {
                            topic: rec.topic().to_string(),
                            partition: rec.partition(),
                            offset: rec.queue_offset().get(),
                        }),
                    },
                ));
            }
            let size = rec.size() as usize;
            if count > 0 && bytes + size > max_bytes {
                break;
            }
            bytes += size;
            count += 1;
            sink.push(rec);
            offset += 1;
        }
        Ok(QueueOffset::new(offset))
    }

    /// A listener that fires when a record is added to the partition's
    /// queue. Register, re-check with [`Store::offsets`], then await (async)
    /// or `wait_timeout` (blocking): no wake-up is missed in between.
    pub fn listen(&self, topic: &str, partition: u32) -> Result<EventListener> {
        Ok(self.inner.queues.get_or_create(topic, partition)?.listen())
    }

    /// The record starting exactly at physical offset `pos`, fully verified;
    /// `None` if no record starts there (safe for client-supplied offsets).
    pub fn read_at(&self, pos: PhysicalOffset) -> Result<Option<StoredRecord>> {
        self.inner.log.read_at(pos)
    }

    /// Records of `topic` whose key is exactly `key` and whose store time is
    /// within `[begin_ms, end_ms]`, newest first, at most `max`.
    pub fn query_by_key(
        &self,
        topic: &str,
        key: &[u8],
        begin_ms: i64,
        end_ms: i64,
        max: usize,
    ) -> Result<Vec<StoredRecord>> {
        validate_topic_name(topic)?;
        let mut out = Vec::new();
        if max == 0 {
            return Ok(out);
        }
        let log = &self.inner.log;
        self.inner
            .index
            .query(topic, key, begin_ms, end_ms, &mut |pos| {
                if let Some(rec) = log.read_at(PhysicalOffset::new(pos))? {
                    let ts = rec.store_timestamp_ms();
                    if rec.topic() == topic
                        && rec.key().as_deref() == Some(key)
                        && ts >= begin_ms
                        && ts <= end_ms
                    {
                        out.push(rec);
                    }
                }
                Ok(keep_going(out.len() < max))
            })?;
        Ok(out)
    }

    /// Every partition the store has records (or a queue) for.
    pub fn partitions(&self) -> Vec<TopicPartition> {
        let mut v: Vec<_> = self
            .inner
            .queues
            .all()
            .iter()
            .map(|q| q.topic_partition().clone())
            .collect();
        v.sort();
        v
    }

    /// The CommitLog position after the last acknowledged append: a read
    /// that waits until [`Store::dispatched_or_listen`] of it is `None`
    /// sees every record acknowledged before this call. Under `flush:
    /// sync` the flushed position (a record is acknowledged only once
    /// flushed), so a read waits for no unacknowledged record's flush.
    pub fn committed_position(&self) -> u64 {
        self.inner.log.visible_end()
    }

    /// `None` once every record below `position` (a
    /// [`Store::committed_position`]) is dispatched, so fetchable; else a
    /// listener, registered before the check, that fires at the
    /// dispatcher's next progress (check again then).
    pub fn dispatched_or_listen(&self, position: u64) -> Option<EventListener> {
        self.inner.dispatcher.dispatched_or_listen(position)
    }

    /// Notified after the next append (or copy) to the CommitLog: a
    /// master's replication stream awaits it for bytes to send. Take it
    /// before looking, so an append in between is not missed.
    pub fn listen_appended(&self) -> EventListener {
        self.inner.log.appended_event().listen()
    }

    /// Notified after the next flush that moves the flushed position: a
    /// master's watermark follows its own durable end.
    pub fn listen_flushed(&self) -> EventListener {
        self.inner.log.flushed_event().listen()
    }

    /// Block until the dispatcher has indexed everything appended so far
    /// (tests and tools; the produce path does not wait for it).
    pub fn wait_dispatched(&self, timeout: Duration) -> bool {
        self.inner
            .dispatcher
            .wait_dispatched(self.inner.log.committed(), timeout)
    }

    /// The CommitLog position the dispatcher has reached: every record
    /// below it is in the ConsumeQueues (readable), every record at or above
    /// it is not yet. Tiered storage's retention hold starts from it when a
    /// partition has nothing readable left to upload.
    pub fn dispatched_position(&self) -> u64 {
        self.inner.dispatcher.dispatched()
    }
}
