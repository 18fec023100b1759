//! Reads that hide where a topic's records live: a compact topic
//! (`cleanup.policy` with `compact`) is read from its compacted logs, any
//! other through the ConsumeQueue and CommitLog. Every read respects the
//! topic's base offsets (`registry.rs`): records of an earlier topic of the
//! same name are never served, and no offset answered is below the base.
//!
//! A front-end reads a partition through a [`PartitionRef`]
//! ([`Broker::partition`]): `read`, `listen` and `offsets` answer the same
//! for both kinds, and the records come back as [`Records`], whose
//! [`RecordRef`]s borrow from the log's own bytes (no copy per record).
//! Long-poll: `listen(from)` registers a listener first and re-checks the
//! end after, so a record added in between either shows in the re-check
//! (`None`: read again) or fires the listener. A compact partition listens
//! on its compacted log's own listener and re-checks that log's end: the
//! dispatcher appends the compacted copy after the ConsumeQueue unit, so
//! the queue's listener could fire before the copy is readable.
//!
//! Tiered partitions (`tiering.rs`): below the partition's local beginning
//! records come from the remote tier, through the async
//! [`PartitionRef::read_async`] (HTTP fetch, consumer instances, Kafka
//! Fetch) as [`Records::Remote`]; the beginning offset is then the remote
//! one. The synchronous [`PartitionRef::read`] stays local: it serves what
//! the CommitLog still holds.
//!
//! Query by key on a compact topic scans every partition's compacted log
//! (no index): linear in the compacted logs' size, which cleaning keeps
//! near one record per key. Newest first means latest appended first
//! (highest CommitLog position).

use std::sync::{Arc, OnceLock};

use tidelog_cleaner::{CompactedLog, CompactedRecord};
use tidelog_storage::txn_index::AbortedRanges;
use tidelog_storage::{EventListener, Header, PhysicalOffset, QueueOffset, ReadSink, StoredRecord};
use tidelog_tiered::RemoteRecord;

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

impl KeyRecords {
    pub fn len(&self) -> usize {
        match self {
            KeyRecords::Stored(r) => r.len(),
            KeyRecords::Compacted(r) => r.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records, newest first.
    pub fn iter(&self) -> impl Iterator<Item = RecordRef<'_>> {
        let (stored, compacted) = match self {
            KeyRecords::Stored(r) => (&r[..], &[][..]),
            KeyRecords::Compacted(r) => (&[][..], &r[..]),
        };
        stored
            .iter()
            .map(RecordRef::Stored)
            .chain(
                compacted
                    .iter()
                    .map(|(partition, record)| RecordRef::Compacted {
                        partition: *partition,
                        record,
                    }),
            )
    }
}

/// The records of one read of one partition, in offset order, as the log
/// that holds them returned them.
#[derive(Debug)]
pub enum Records {
    /// Through the ConsumeQueue and CommitLog.
    Stored(Vec<StoredRecord>),
    /// From a compact topic's compacted log (gaps where cleaning removed
    /// records are normal).
    Compacted {
        partition: u32,
        records: Vec<CompactedRecord>,
    },
    /// From the remote tier (offsets below the local beginning of a tiered
    /// partition).
    Remote {
        partition: u32,
        records: Vec<RemoteRecord>,
    },
}

impl Records {
    pub fn len(&self) -> usize {
        match self {
            Records::Stored(r) => r.len(),
            Records::Compacted { records, .. } => records.len(),
            Records::Remote { records, .. } => records.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> RecordsIter<'_> {
        match self {
            Records::Stored(r) => RecordsIter::Stored(r.iter()),
            Records::Compacted { partition, records } => {
                RecordsIter::Compacted(*partition, records.iter())
            }
            Records::Remote { partition, records } => {
                RecordsIter::Remote(*partition, records.iter())
            }
        }
    }
}

/// The iterator of [`Records::iter`].
pub enum RecordsIter<'a> {
    Stored(std::slice::Iter<'a, StoredRecord>),
    Compacted(u32, std::slice::Iter<'a, CompactedRecord>),
    Remote(u32, std::slice::Iter<'a, RemoteRecord>),
}

impl<'a> Iterator for RecordsIter<'a> {
    type Item = RecordRef<'a>;

    fn next(&mut self) -> Option<RecordRef<'a>> {
        match self {
            RecordsIter::Stored(it) => it.next().map(RecordRef::Stored),
            RecordsIter::Compacted(partition, it) => it.next().map(|record| RecordRef::Compacted {
                partition: *partition,
                record,
            }),
            RecordsIter::Remote(partition, it) => it.next().map(|record| RecordRef::Remote {
                partition: *partition,
                record,
            }),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            RecordsIter::Stored(it) => it.size_hint(),
            RecordsIter::Compacted(_, it) => it.size_hint(),
            RecordsIter::Remote(_, it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for RecordsIter<'_> {}

/// One record, borrowed from either log: what a front-end renders. Key,
/// value and headers are slices of the log's bytes.
#[derive(Debug, Clone, Copy)]
pub enum RecordRef<'a> {
    Stored(&'a StoredRecord),
    Compacted {
        partition: u32,
        record: &'a CompactedRecord,
    },
    Remote {
        partition: u32,
        record: &'a RemoteRecord,
    },
}

impl<'a> RecordRef<'a> {
    pub fn partition(&self) -> u32 {
        match self {
            RecordRef::Stored(r) => r.partition(),
            RecordRef::Compacted { partition, .. } | RecordRef::Remote { partition, .. } => {
                *partition
            }
        }
    }

    /// The record's offset in its partition.
    pub fn offset(&self) -> u64 {
        match self {
            RecordRef::Stored(r) => r.queue_offset().get(),
            RecordRef::Compacted { record, .. } => record.offset.get(),
            RecordRef::Remote { record, .. } => record.offset,
        }
    }

    /// The producer's timestamp (the append time if it sent none).
    pub fn timestamp_ms(&self) -> i64 {
        match self {
            RecordRef::Stored(r) => r.timestamp_ms(),
            RecordRef::Compacted { record, .. } => record.timestamp_ms,
            RecordRef::Remote { record, .. } => record.timestamp_ms,
        }
    }

    pub fn key(&self) -> Option<&'a [u8]> {
        match self {
            RecordRef::Stored(r) => r.key_slice(),
            RecordRef::Compacted { record, .. } => record.key_slice(),
            RecordRef::Remote { record, .. } => record.key.as_deref(),
        }
    }

    /// `None` for a tombstone.
    pub fn value(&self) -> Option<&'a [u8]> {
        match self {
            RecordRef::Stored(r) => r.value_slice(),
            RecordRef::Compacted { record, .. } => record.value_slice(),
            RecordRef::Remote { record, .. } => record.value.as_deref(),
        }
    }

    /// The headers, decoded, in the order they were produced.
    pub fn headers(&self) -> Vec<Header> {
        match self {
            RecordRef::Stored(r) => r.headers(),
            RecordRef::Compacted { record, .. } => record.headers(),
            RecordRef::Remote { record, .. } => crate::tiering::headers_of(record),
        }
    }

    /// Where the record is (or was, for a compacted copy) in the CommitLog;
    /// 0 for a record read from the remote tier, which has no position in
    /// this server's CommitLog.
    pub fn physical_offset(&self) -> u64 {
        match self {
            RecordRef::Stored(r) => r.physical_offset().get(),
            RecordRef::Compacted { record, .. } => record.physical_offset.get(),
            RecordRef::Remote { .. } => 0,
        }
    }

    /// Key, value and header bytes, as a produce counts them against the
    /// record limit.
    pub fn payload_bytes(&self) -> u64 {
        let (key, value, headers) = match self {
            RecordRef::Stored(r) => (r.key_slice(), r.value_slice(), r.headers_len()),
            RecordRef::Compacted { record, .. } => (
                record.key_slice(),
                record.value_slice(),
                record.headers_len(),
            ),
            RecordRef::Remote { record, .. } => (
                record.key.as_deref(),
                record.value.as_deref(),
                record
                    .headers
                    .iter()
                    .map(|(n, v)| n.len() + v.as_ref().map_or(0, |v| v.len()))
                    .sum(),
            ),
        };
        key.map_or(0, |k| k.len() as u64) + value.map_or(0, |v| v.len() as u64) + headers as u64
    }
}

/// One read of a partition: its records, and where the next read starts.
#[derive(Debug)]
pub struct ReadBatch {
    pub records: Records,
    /// The offset to read from next. With no records, nothing lies in
    /// `[from, next_offset)` and every later record gets an offset at or
    /// after it.
    pub next_offset: u64,
}

/// A read_committed read's range: from, the LSO and the end it was
/// computed from, and the records it may take.
#[derive(Clone, Copy)]
struct CommittedBounds {
    from: u64,
    lso: u64,
    end: u64,
    max_records: usize,
}

/// The record found at a CommitLog position (`Broker::read_physical`).
#[derive(Debug)]
pub struct PhysicalRecord(StoredRecord);

impl PhysicalRecord {
    /// The topic the record was produced to.
    pub fn topic(&self) -> &str {
        self.0.topic()
    }

    pub fn record(&self) -> RecordRef<'_> {
        RecordRef::Stored(&self.0)
    }
}

/// A partition of a topic, checked to exist, as a front-end reads it
/// ([`Broker::partition`]). It holds the topic snapshot of its creation
/// (base offsets, policy) and the broker. Cheap to clone (reference
/// counts; clones share the compacted log once found).
#[derive(Debug, Clone)]
pub struct PartitionRef {
    broker: Arc<Broker>,
    topic: Arc<Topic>,
    partition: u32,
    /// `Some` for a compact topic: its compacted log, once known (created
    /// by the first `read` if the partition has none yet, so there is a
    /// listener to wait on before its first record).
    compacted: Option<Arc<OnceLock<Arc<CompactedLog>>>>,
}

impl Broker {
    /// The partition `partition` of `topic`, for reads; 40401/40402 as
    /// [`BrokerError::UnknownTopic`]/[`BrokerError::UnknownPartition`].
    /// Not blocking.
    pub fn partition(
        self: &Arc<Self>,
        topic: &str,
        partition: u32,
    ) -> Result<PartitionRef, BrokerError> {
        let topic = self.registry.require(topic)?;
        topic.check_partition(partition)?;
        let compacted = topic.config.cleanup_policy.compacts().then(|| {
            let log = OnceLock::new();
            if let Some(existing) = self.logs.log(&topic.name, partition) {
                let _ = log.set(existing);
            }
            Arc::new(log)
        });
        Ok(PartitionRef {
            broker: Arc::clone(self),
            topic,
            partition,
            compacted,
        })
    }
}

impl PartitionRef {
    pub fn topic(&self) -> &Arc<Topic> {
        &self.topic
    }

    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// Whether [`read`](Self::read) does file I/O that can block (a
    /// compacted log is read with `pread`): then run it on a blocking
    /// thread. Otherwise it reads the mapped page cache and is cheaper
    /// than a hand-off to a blocking thread and back (docs/BENCHMARKS.md).
    pub fn read_blocks(&self) -> bool {
        self.compacted.is_some()
    }

    /// Up to `max_records` records from offset `from` on (never below the
    /// topic's base offset), stopping before `max_bytes` but always
    /// returning at least one record if there is one.
    pub fn read(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<ReadBatch, BrokerError> {
        let from = from.max(self.topic.base_offset(self.partition));
        if self.compacted.is_none() {
            let mut read = self.broker.store.read(
                &self.topic.name,
                self.partition,
                QueueOffset::new(from),
                max_records,
                max_bytes,
            )?;
            // Transaction markers hold an offset each but are no records
            // (the Kafka front-end answers them as control batches through
            // `read_into`); the next offset still moves past them.
            read.records.retain(|r| !r.is_control());
            return Ok(ReadBatch {
                records: Records::Stored(read.records),
                next_offset: read.next_offset.get(),
            });
        }
        let (log, from, end) = self.compacted_from(from)?;
        let records = log.read(from, max_records, max_bytes)?;
        Ok(self.compacted_batch(records, end))
    }

    /// Where a compacted-log read of [`read`](Self::read) or
    /// [`read_cached`](Self::read_cached) starts (`from` is at or above the
    /// topic's base offset already): the log, the offset, and its end
    /// before the read.
    fn compacted_from(&self, from: u64) -> Result<(&Arc<CompactedLog>, u64, u64), BrokerError> {
        // The compacted log keeps records below a log start DeleteRecords
        // moved until retention takes their segments: never served.
        let from = from.max(self.log_start());
        let log = self.compacted_log()?;
        // The end before the read: with nothing at or after `from`, nothing
        // lies in `[from, end)` (and a new log of a topic created again
        // under an old name ends below its base).
        let end = log.next_offset().max(from);
        Ok((log, from, end))
    }

    /// The answer of a compacted-log read that ended at `end` (see
    /// [`compacted_from`](Self::compacted_from)).
    fn compacted_batch(&self, records: Vec<CompactedRecord>, end: u64) -> ReadBatch {
        let next_offset = records.last().map_or(end, |last| last.offset.get() + 1);
        ReadBatch {
            records: Records::Compacted {
                partition: self.partition,
                records,
            },
            next_offset,
        }
    }

    /// [`read`](Self::read) without waiting for the disk, for an async
    /// worker: `None` when the read would block (a compacted log's bytes
    /// not all in the page cache), and then the caller runs `read` where
    /// blocking is allowed. A partition that is not compact reads the
    /// mapped page cache and always answers. Long-polls at the end of a
    /// compact partition read what was written a moment before, so they
    /// answer here without the blocking pool's two extra wake-ups.
    pub fn read_cached(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Option<ReadBatch>, BrokerError> {
        if self.compacted.is_none() {
            return self.read(from, max_records, max_bytes).map(Some);
        }
        let (log, from, end) =
            self.compacted_from(from.max(self.topic.base_offset(self.partition)))?;
        Ok(log
            .read_cached(from, max_records, max_bytes)?
            .map(|records| self.compacted_batch(records, end)))
    }

    /// [`read`](Self::read) of a partition that is not compact, each
    /// record handed to `sink` as it is read (see `Store::read_into`):
    /// where the next read starts, or `None` for a compact partition,
    /// whose records come from its compacted log, and for a read below a
    /// tiered partition's local beginning, which the remote tier answers
    /// (use [`read_async`](Self::read_async) for both).
    pub fn read_into(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
        sink: &mut impl ReadSink,
    ) -> Result<Option<u64>, BrokerError> {
        if self.compacted.is_some() || self.remote_from(from).is_some() {
            return Ok(None);
        }
        let from = from.max(self.topic.base_offset(self.partition));
        let next = self.broker.store.read_into(
            &self.topic.name,
            self.partition,
            QueueOffset::new(from),
            max_records,
            max_bytes,
            sink,
        )?;
        Ok(Some(next.get()))
    }

    /// For a long-poll after a read found nothing at or after `from`: a
    /// listener that fires when a record is added, or `None` if one was
    /// added since (read again). Registered before the re-check, so no
    /// record is missed in between. Not blocking after a
    /// [`read`](Self::read) (which found the compacted log of a compact
    /// partition).
    pub fn listen(&self, from: u64) -> Result<Option<EventListener>, BrokerError> {
        // From below the log start, the read answers from the log start
        // (or nothing, when everything is deleted): listen from there too,
        // else "read again" would answer for records that are not served.
        let from = from
            .max(self.topic.base_offset(self.partition))
            .max(self.log_start());
        let (listener, end) = match &self.compacted {
            None => (
                self.broker.store.listen(&self.topic.name, self.partition)?,
                self.broker
                    .store
                    .offsets(&self.topic.name, self.partition)
                    .1,
            ),
            Some(_) => {
                let log = self.compacted_log()?;
                (log.listen(), log.next_offset())
            }
        };
        Ok((end <= from).then_some(listener))
    }

    /// The beginning and end offsets (the end is the offset the next
    /// record gets), never below the topic's base offset nor the log start
    /// offset DeleteRecords moved (`Broker::delete_records`).
    pub fn offsets(&self) -> (u64, u64) {
        let (beginning, end) = self.local_offsets();
        match self.remote_beginning(beginning) {
            Some(remote) => (remote.min(beginning), end),
            None => (beginning, end),
        }
    }

    /// [`offsets`](Self::offsets) without the remote tier.
    pub(crate) fn local_offsets(&self) -> (u64, u64) {
        let base = self.topic.base_offset(self.partition).max(self.log_start());
        let (beginning, end) = match &self.compacted {
            None => self.broker.store.offsets(&self.topic.name, self.partition),
            Some(known) => known
                .get()
                .cloned()
                .or_else(|| self.broker.logs.log(&self.topic.name, self.partition))
                .map_or((base, base), |log| {
                    (log.beginning_offset(), log.next_offset())
                }),
        };
        (beginning.max(base), end.max(base))
    }

    /// Kafka's log start offset and the end: where a fetch may begin
    /// (below it is OFFSET_OUT_OF_RANGE) and the high watermark. The start
    /// is a queue's beginning; for a compact partition the topic's base
    /// offset or the log start DeleteRecords moved, whichever is later,
    /// not the first record compaction kept: as Kafka's cleaner,
    /// compaction leaves gaps above the log start and never moves it, so a
    /// fetch from an offset it removed reads on from the next record kept
    /// ([`read`](Self::read) does).
    /// The partition's last stable offset, given its `end` as
    /// [`log_start_and_end`](Self::log_start_and_end) read it (before this
    /// call): where a read_committed read ends.
    pub fn last_stable_offset(&self, end: u64) -> u64 {
        self.broker.store.commit_log().txns().last_stable_offset(
            &self.topic.name,
            self.partition,
            end,
        )
    }

    /// The aborted transactions a read_committed read of `[from, to)`
    /// must name: `(producer id, first offset)`, in marker order.
    pub fn aborted_transactions(&self, from: u64, to: u64) -> Vec<(i64, u64)> {
        self.broker
            .store
            .aborted_transactions(&self.topic.name, self.partition, from, to)
    }

    pub fn log_start_and_end(&self) -> (u64, u64) {
        let (beginning, end) = self.offsets();
        let start = match &self.compacted {
            None => beginning,
            Some(_) => self
                .topic
                .base_offset(self.partition)
                .max(self.log_start())
                .min(end),
        };
        (start, end)
    }

    /// The first record whose timestamp is at least `timestamp_ms`, with
    /// its offset and timestamp, `None` when none qualifies (Kafka's
    /// ListOffsets answers offset and timestamp −1 then). The record
    /// [`offset_for_timestamp`](Self::offset_for_timestamp) finds can be
    /// removed (retention, a cleaning pass) before it is read; the read
    /// then shows the next one, which need not qualify: look up again, a
    /// few times at most. Blocking (reads records).
    pub fn record_at_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(u64, i64)>, BrokerError> {
        let (_, end) = self.log_start_and_end();
        for _ in 0..3 {
            let offset = self.offset_for_timestamp(timestamp_ms)?;
            if offset >= end {
                break;
            }
            let batch = self.read(offset, 1, 1)?;
            let Some(r) = batch.records.iter().next() else {
                break;
            };
            if r.offset() == offset || r.timestamp_ms() >= timestamp_ms {
                return Ok(Some((r.offset(), r.timestamp_ms())));
            }
        }
        Ok(None)
    }

    /// The first offset whose record's timestamp is at least `timestamp_ms`
    /// (Kafka's ListOffsets rule; record timestamps are the producers', so
    /// not monotonic), or the end offset if no record is: the beginning
    /// offset when T is earlier than every record. Found through the
    /// partition's time index (a queue's, or a compacted log's sparse index
    /// over the records compaction kept), never a scan of the partition.
    /// Blocking: it reads records (a compacted log with `pread`).
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<u64, BrokerError> {
        let (beginning, base_end) = self.offsets();
        let found = match &self.compacted {
            None => self.broker.store.offset_for_timestamp(
                &self.topic.name,
                self.partition,
                timestamp_ms,
            )?,
            Some(known) => match known
                .get()
                .cloned()
                .or_else(|| self.broker.logs.log(&self.topic.name, self.partition))
            {
                Some(log) => log.offset_for_timestamp_from(beginning, timestamp_ms)?,
                None => base_end,
            },
        };
        // Never below what `offsets` answers (a topic's base offset).
        Ok(found.max(beginning))
    }

    /// For a tiered partition: where local reads begin (the store's
    /// beginning, or later once `local.retention.*` moved it), and the
    /// lowest offset the remote tier serves below it (`None`: nothing
    /// remote, or not known yet). `local` is the local offsets' beginning.
    fn tiered_split(&self, local: u64) -> Option<(u64, Option<u64>)> {
        let bounds = self.broker.tiered_bounds(&self.topic, self.partition)?;
        let local_beginning = local.max(bounds.local_beginning);
        // Never below the base offset: an earlier incarnation's records
        // (a restore writes base offsets 0 and continues each partition at
        // its manifest end, so its remote records are all served).
        let floor = self.topic.base_offset(self.partition).max(self.log_start());
        let remote = bounds
            .remote_beginning
            .map(|r| r.max(floor))
            .filter(|r| *r < local_beginning);
        Some((local_beginning, remote))
    }

    fn remote_beginning(&self, local: u64) -> Option<u64> {
        self.tiered_split(local).and_then(|(_, remote)| remote)
    }

    /// `Some(from)` (moved up to the remote beginning) when a read from
    /// `from` goes to the remote tier: a tiered partition, `from` below its
    /// local beginning. Cheap: no I/O.
    pub fn remote_from(&self, from: u64) -> Option<u64> {
        let (local, _) = self.local_offsets();
        let (local_beginning, remote) = self.tiered_split(local)?;
        let remote = remote?;
        let from = from.max(remote);
        (from < local_beginning).then_some(from)
    }

    /// [`read`](Self::read), with offsets below a tiered partition's local
    /// beginning read from the remote tier (`TieredError::Unavailable` →
    /// [`BrokerError::Tiered`] when it cannot be reached). A queue read
    /// runs inline, as does a compacted log's that the page cache holds
    /// ([`read_cached`](Self::read_cached)); any other on the blocking pool.
    pub async fn read_async(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<ReadBatch, BrokerError> {
        if let Some(from) = self.remote_from(from) {
            return self.read_remote(from, max_records, max_bytes).await;
        }
        if self.read_blocks() {
            if let Some(read) = self.read_cached(from, max_records, max_bytes)? {
                return Ok(read);
            }
            let part = self.clone();
            return tokio::task::spawn_blocking(move || part.read(from, max_records, max_bytes))
                .await
                .map_err(|source| BrokerError::BlockingTaskFailed {
                    task: "read task",
                    source,
                })?;
        }
        self.read(from, max_records, max_bytes)
    }

    /// [`read_async`](Self::read_async) at read_committed: only records
    /// below the last stable offset, and none of an aborted transaction
    /// (markers are never records). Also answers the end read before the
    /// read: a wait for more listens from there, where the marker that
    /// moves the LSO lands (listening from `from` would wake at once), or
    /// the read's next offset while committed records remain below the
    /// LSO (every record it read was aborted: a wait wakes at once).
    pub async fn read_committed_async(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<(ReadBatch, u64), BrokerError> {
        let bounds = match self.committed_bounds(from, max_records) {
            Ok(bounds) => bounds,
            Err(nothing) => return Ok(nothing),
        };
        let batch = self
            .read_async(bounds.from, bounds.max_records, max_bytes)
            .await?;
        Ok(self.committed_only(bounds, batch))
    }

    /// [`read_committed_async`](Self::read_committed_async) for a blocking
    /// caller, over [`read_tiered_blocking`](Self::read_tiered_blocking)
    /// (the consumer instances' records call).
    pub fn read_committed_blocking(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<(ReadBatch, u64), BrokerError> {
        let bounds = match self.committed_bounds(from, max_records) {
            Ok(bounds) => bounds,
            Err(nothing) => return Ok(nothing),
        };
        let batch = self.read_tiered_blocking(bounds.from, bounds.max_records, max_bytes)?;
        Ok(self.committed_only(bounds, batch))
    }

    /// Where a read_committed read from `from` goes: `Err` with the empty
    /// answer (and where to listen) when `from` is at the LSO already.
    fn committed_bounds(
        &self,
        from: u64,
        max_records: usize,
    ) -> Result<CommittedBounds, (ReadBatch, u64)> {
        let (_, end) = self.log_start_and_end();
        let lso = self.last_stable_offset(end);
        let from = from.max(self.topic.base_offset(self.partition));
        if from >= lso {
            let nothing = ReadBatch {
                records: Records::Stored(Vec::new()),
                next_offset: from,
            };
            return Err((nothing, end.max(from)));
        }
        Ok(CommittedBounds {
            from,
            lso,
            end,
            max_records: max_records.min(usize::try_from(lso - from).unwrap_or(usize::MAX)),
        })
    }

    /// `batch` (read within `bounds`) without the records of aborted
    /// transactions, and where a wait for more listens.
    fn committed_only(&self, bounds: CommittedBounds, mut batch: ReadBatch) -> (ReadBatch, u64) {
        let CommittedBounds { from, lso, end, .. } = bounds;
        // A record count bounds a queue's read at the LSO (its offsets have
        // no gaps), not a compacted log's: cut there.
        if batch.next_offset > lso {
            batch.next_offset = lso;
            match &mut batch.records {
                Records::Stored(records) => records.retain(|r| r.queue_offset().get() < lso),
                Records::Compacted { records, .. } => records.retain(|r| r.offset.get() < lso),
                Records::Remote { records, .. } => records.retain(|r| r.offset < lso),
            }
        }
        // A queue's or a compacted log's transactional records carry their
        // producer; a remote tier's are served as they were uploaded.
        let aborted = AbortedRanges::new(self.broker.store.aborted_ranges(
            &self.topic.name,
            self.partition,
            from,
            batch.next_offset,
        ));
        if !aborted.is_empty() {
            match &mut batch.records {
                Records::Stored(records) => records.retain(|r| {
                    !(r.is_transactional()
                        && r.producer().is_some_and(|p| {
                            aborted.contains(p.producer_id, r.queue_offset().get())
                        }))
                }),
                Records::Compacted { records, .. } => records.retain(|r| {
                    !r.producer()
                        .is_some_and(|p| aborted.contains(p.id, r.offset.get()))
                }),
                Records::Remote { .. } => {}
            }
        }
        // Committed records left below the LSO (a read whose every record
        // was aborted): read on at once.
        let listen_from = if batch.next_offset < lso {
            batch.next_offset
        } else {
            end.max(from)
        };
        (batch, listen_from)
    }

    /// [`read`](Self::read) with the remote tier, for a blocking caller
    /// (the consumer instances' records call, on tokio's blocking pool):
    /// a remote read is driven to its end on this thread through the
    /// runtime it runs under (`Handle::block_on`); a local one is `read`.
    /// Never call it from an async task: the remote read needs a blocking
    /// thread (without a runtime it fails as an internal error).
    pub fn read_tiered_blocking(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<ReadBatch, BrokerError> {
        let Some(from_remote) = self.remote_from(from) else {
            return self.read(from, max_records, max_bytes);
        };
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|source| BrokerError::NoRuntime { source })?;
        handle.block_on(self.read_remote(from_remote, max_records, max_bytes))
    }

    /// The remote half of [`read_async`](Self::read_async): records from
    /// `from` (as [`remote_from`](Self::remote_from) answered) on. An empty
    /// answer (a gap between what was uploaded and what is local) moves
    /// `next_offset` to the local beginning.
    pub async fn read_remote(
        &self,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<ReadBatch, BrokerError> {
        let records = self
            .broker
            .read_remote_records(&self.topic, self.partition, from, max_records, max_bytes)
            .await?;
        let next_offset = match records.last() {
            Some(last) => last.offset + 1,
            None => {
                let (local, _) = self.local_offsets();
                self.tiered_split(local).map_or(from, |(l, _)| l.max(from))
            }
        };
        Ok(ReadBatch {
            records: Records::Remote {
                partition: self.partition,
                records,
            },
            next_offset,
        })
    }

    /// The log start offset of the partition (the store's, which
    /// DeleteRecords moves; 0 if never moved). Queue reads apply it in the
    /// store; a compacted log's reads here.
    fn log_start(&self) -> u64 {
        self.broker
            .store
            .log_start(&self.topic.name, self.partition)
    }

    /// The first record with the largest timestamp, as (offset,
    /// timestamp), or `None` without records (Kafka's ListOffsets -3,
    /// KIP-734): through the time index (a compact topic's compacted
    /// log's), not a scan.
    pub fn max_timestamp_record(&self) -> Result<Option<(u64, i64)>, BrokerError> {
        let found = match &self.compacted {
            None => self
                .broker
                .store
                .max_timestamp_record(&self.topic.name, self.partition)?,
            Some(known) => match known
                .get()
                .cloned()
                .or_else(|| self.broker.logs.log(&self.topic.name, self.partition))
            {
                Some(log) => log.max_timestamp_record()?,
                None => None,
            },
        };
        let beginning = self.offsets().0;
        Ok(found.filter(|(offset, _)| *offset >= beginning))
    }

    /// The compact partition's log, created if it has none yet (blocking
    /// then: it creates the log's directory).
    fn compacted_log(&self) -> Result<&Arc<CompactedLog>, BrokerError> {
        let Some(cell) = &self.compacted else {
            return Err(BrokerError::NotCompactedPartition {
                topic: self.topic.name.to_string(),
            });
        };
        if let Some(log) = cell.get() {
            return Ok(log);
        }
        let log = self
            .broker
            .logs
            .log_or_create(&self.topic.name, self.partition)?;
        Ok(cell.get_or_init(|| log))
    }
}

/// Records read per batch while a key query scans a compacted log.
const QUERY_SCAN_BATCH_RECORDS: usize = 4096;
const QUERY_SCAN_BATCH_BYTES: usize = 4 << 20;

impl Broker {
    /// Records of `topic` with exactly `key` and a store time within
    /// `[begin_ms, end_ms]`, newest first, at most `max`. Blocking.
    pub(crate) fn query_by_key(
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
        found.retain(|r| self.is_live(topic, r));
        Ok(KeyRecords::Stored(found))
    }

    /// The record that starts at CommitLog position `position`, if there is
    /// one and it belongs to a live topic (the current incarnation of a
    /// topic the registry has). Blocking.
    pub(crate) fn read_physical(
        &self,
        position: u64,
    ) -> Result<Option<PhysicalRecord>, BrokerError> {
        let Some(record) = self.store.read_at(PhysicalOffset::new(position))? else {
            return Ok(None);
        };
        // A transaction marker is no record (`PartitionRef::read`).
        if record.is_control() {
            return Ok(None);
        }
        let live = self
            .registry
            .get(record.topic())
            .is_some_and(|topic| self.is_live(&topic, &record));
        Ok(live.then_some(PhysicalRecord(record)))
    }

    /// A scan of every partition's compacted log from its base offset (or
    /// its log start, if later),
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
            let mut from = topic
                .base_offset(partition)
                .max(self.store.log_start(&topic.name, partition));
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

impl Broker {
    /// Whether `r` belongs to the current incarnation of `topic` and is
    /// not below its partition's log start (DeleteRecords).
    fn is_live(&self, topic: &Topic, r: &StoredRecord) -> bool {
        r.partition() < topic.partitions.get()
            && r.queue_offset().get() >= topic.base_offset(r.partition())
            && r.queue_offset().get() >= self.store.log_start(&topic.name, r.partition())
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
