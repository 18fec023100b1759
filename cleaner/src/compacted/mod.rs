//! Compacted logs: the per-partition copies of compact topics' records,
//! fed by a dispatcher sink, read by fetch, rewritten by the LogCleaner.
//!
//! Why a copy: the CommitLog is shared by every topic and its segments are
//! deleted by age and disk pressure, while a compact topic must keep the
//! latest value of every key for as long as the topic lives. The sink's
//! `flush` runs before the store records a dispatched position in its
//! checkpoint, and the store never deletes CommitLog bytes past that
//! position, so a record leaves the CommitLog only once its copy here is
//! durable.

pub mod dir;
pub mod format;
pub mod log;
pub mod segment;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use tidelog_storage::{
    CorruptionKind, DispatchSink, PhysicalOffset, StoreError, StoredRecord, TopicPartition,
};

pub use self::format::CompactedRecord;
pub use self::log::{CompactedLog, RollPolicy};
use crate::error::{CleanerError, Result};
use crate::fault::FaultHandle;

/// Directory under the data dir that holds compacted logs.
pub const COMPACTED_DIR: &str = "compacted";

/// What the cleaner and the sink need to know about a compact topic (Kafka
/// topic configs with Kafka's defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct CompactTopicConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    pub min_compaction_lag_ms: i64,
    /// `i64::MAX`: unbounded.
    pub max_compaction_lag_ms: i64,
    pub delete_retention_ms: i64,
    /// `compact,delete`: also delete old segments by age and size.
    pub delete_too: bool,
    /// -1: unbounded.
    pub retention_ms: i64,
    /// -1: unbounded.
    pub retention_bytes: i64,
}

impl Default for CompactTopicConfig {
    fn default() -> Self {
        CompactTopicConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3_600_000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 24 * 3_600_000,
            delete_too: false,
            retention_ms: 7 * 24 * 3_600_000,
            retention_bytes: -1,
        }
    }
}

impl CompactTopicConfig {
    /// The active segment rolls at `segment.bytes`, or after `segment.ms`,
    /// and no later than `max.compaction.lag.ms`, so records of an idle
    /// topic still become cleanable in time.
    pub fn roll_policy(&self) -> RollPolicy {
        RollPolicy {
            segment_bytes: self.segment_bytes,
            segment_ms: self.segment_ms.min(self.max_compaction_lag_ms),
        }
    }
}

/// Every compacted log, and which topics are compact.
pub struct CompactedLogs {
    root: PathBuf,
    /// Looked up for every dispatched record, so hashed with ahash.
    topics: RwLock<HashMap<String, CompactTopicConfig, ahash::RandomState>>,
    /// topic → partition → log; keyed by topic first so the copy path looks
    /// a log up by `&str` without allocating.
    logs: RwLock<HashMap<String, HashMap<u32, Arc<CompactedLog>>>>,
    clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    /// Test seam, handed to every log ([`CompactedLogs::open_with_faults`]).
    faults: FaultHandle,
    /// Directories that gained names (a new partition's log directory, a
    /// new segment) with no fsync, shared by every log: synced once by the
    /// sink's flush, after every log's segment, before the store's
    /// checkpoint claims a record copied into them.
    names: Arc<tidelog_storage::fs_util::PendingDirSyncs>,
}

impl std::fmt::Debug for CompactedLogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactedLogs")
            .field("root", &self.root)
            .finish()
    }
}

impl CompactedLogs {
    /// Open every compacted log under `<data_dir>/compacted`.
    pub fn open(data_dir: &Path) -> Result<Arc<CompactedLogs>> {
        Self::open_with_clock(data_dir, Arc::new(tidelog_storage::types::now_ms))
    }

    /// As [`CompactedLogs::open`], with the clock used for roll decisions.
    pub fn open_with_clock(
        data_dir: &Path,
        clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    ) -> Result<Arc<CompactedLogs>> {
        Self::open_inner(data_dir, clock, FaultHandle::default())
    }

    /// As [`CompactedLogs::open`], with a fault plan for the copy writes
    /// ([`crate::fault::FaultPoint::WriteCopies`]).
    #[cfg(feature = "failpoints")]
    pub fn open_with_faults(
        data_dir: &Path,
        faults: Arc<crate::fault::Faults>,
    ) -> Result<Arc<CompactedLogs>> {
        Self::open_inner(
            data_dir,
            Arc::new(tidelog_storage::types::now_ms),
            FaultHandle::new(faults),
        )
    }

    fn open_inner(
        data_dir: &Path,
        clock: Arc<dyn Fn() -> i64 + Send + Sync>,
        faults: FaultHandle,
    ) -> Result<Arc<CompactedLogs>> {
        let root = data_dir.join(COMPACTED_DIR);
        tidelog_storage::fs_util::create_dir_durable(&root).map_err(|e| CleanerError::Store {
            path: root.clone(),
            source: e,
        })?;
        let names = Arc::new(tidelog_storage::fs_util::PendingDirSyncs::default());
        let mut logs: HashMap<String, HashMap<u32, Arc<CompactedLog>>> = HashMap::new();
        for topic_entry in std::fs::read_dir(&root).map_err(|e| CleanerError::io(&root, e))? {
            let topic_entry = topic_entry.map_err(|e| CleanerError::io(&root, e))?;
            let Some(topic) = topic_entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if tidelog_storage::validate_topic_name(&topic).is_err() || !topic_entry.path().is_dir()
            {
                tracing::warn!(path = %topic_entry.path().display(), "ignoring a stray entry in compacted/");
                continue;
            }
            for part in std::fs::read_dir(topic_entry.path())
                .map_err(|e| CleanerError::io(&topic_entry.path(), e))?
            {
                let part = part.map_err(|e| CleanerError::io(&topic_entry.path(), e))?;
                let name = part.file_name();
                let Some(p) = name
                    .to_str()
                    .filter(|n| {
                        !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit())
                    })
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    tracing::warn!(path = %part.path().display(), "ignoring a stray entry in a compacted topic directory");
                    continue;
                };
                let tp = TopicPartition::new(&topic, p).map_err(|e| CleanerError::Store {
                    path: part.path(),
                    source: e,
                })?;
                let log = CompactedLog::open(tp, part.path())?
                    .with_faults(faults.clone())
                    .with_names(Arc::clone(&names));
                logs.entry(topic.clone())
                    .or_default()
                    .insert(p, Arc::new(log));
            }
        }
        Ok(Arc::new(CompactedLogs {
            root,
            topics: RwLock::new(HashMap::default()),
            logs: RwLock::new(logs),
            clock,
            faults,
            names,
        }))
    }

    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    /// Declare `topic` compact with `config` (at start, on create, on config
    /// change). From now on its records are copied here.
    pub fn set_topic(&self, topic: &str, config: CompactTopicConfig) {
        self.topics
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(topic.to_string(), config);
    }

    /// `topic` is no longer compact (deleted): stop copying and delete its
    /// compacted logs.
    ///
    /// The logs' lock is held until the directory is gone, and
    /// [`CompactedLogs::log_or_create`] creates logs only for topics declared
    /// compact, which it checks under that lock. So a fetch or a dispatch
    /// that looked the topic up just before cannot bring its directory back
    /// afterwards. (Lock order: `logs`, then `topics`.)
    pub fn remove_topic(&self, topic: &str) -> Result<()> {
        let (removed, deleted): (Vec<_>, Result<()>) = {
            let mut logs = self.logs.write().unwrap_or_else(|e| e.into_inner());
            self.topics
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(topic);
            let removed = logs
                .remove(topic)
                .map(|p| p.into_values().collect())
                .unwrap_or_default();
            let dir = self.root.join(topic);
            let deleted = match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(CleanerError::io(&dir, e))
                }
                _ => Ok(()),
            };
            (removed, deleted)
        };
        // Long-polls on the removed logs wake and find them gone.
        for l in removed {
            l.wake_all();
        }
        deleted
    }

    pub fn topic_config(&self, topic: &str) -> Option<CompactTopicConfig> {
        self.topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)
            .cloned()
    }

    pub fn is_compact(&self, topic: &str) -> bool {
        self.topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(topic)
    }

    pub fn log(&self, topic: &str, partition: u32) -> Option<Arc<CompactedLog>> {
        self.logs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)?
            .get(&partition)
            .cloned()
    }

    /// The log of a compact topic's partition, created if new. A topic not
    /// declared compact (never, or no longer: deleted meanwhile) gets no new
    /// log: [`CleanerError::NotCompact`].
    pub fn log_or_create(&self, topic: &str, partition: u32) -> Result<Arc<CompactedLog>> {
        if let Some(l) = self.log(topic, partition) {
            return Ok(l);
        }
        let mut logs = self.logs.write().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = logs.get(topic).and_then(|p| p.get(&partition)) {
            return Ok(Arc::clone(l));
        }
        // Under the logs' lock, as `remove_topic` changes it (see there).
        if !self.is_compact(topic) {
            return Err(CleanerError::NotCompact {
                topic: topic.to_string(),
            });
        }
        let tp = TopicPartition::new(topic, partition).map_err(|e| CleanerError::Store {
            path: self.root.join(topic),
            source: e,
        })?;
        let dir = self.root.join(topic).join(partition.to_string());
        // A new partition (the dispatcher's path, at its first record):
        // made with no fsync, durable by the next flush. A directory left
        // on disk (a deletion that failed half-way) is opened as at start.
        let log = if dir.exists() {
            CompactedLog::open(tp, dir)?.with_names(Arc::clone(&self.names))
        } else {
            CompactedLog::create(tp, dir, Arc::clone(&self.names))?
        };
        let l = Arc::new(log.with_faults(self.faults.clone()));
        logs.entry(topic.to_string())
            .or_default()
            .insert(partition, Arc::clone(&l));
        Ok(l)
    }

    /// Every log of a compact topic (declared compact), with its config.
    pub fn compact_logs(&self) -> Vec<(Arc<CompactedLog>, CompactTopicConfig)> {
        let topics = self
            .topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let logs = self.logs.read().unwrap_or_else(|e| e.into_inner());
        logs.iter()
            .filter_map(|(t, parts)| topics.get(t).map(|c| (parts, c)))
            .flat_map(|(parts, c)| parts.values().map(move |l| (Arc::clone(l), c.clone())))
            .collect()
    }

    pub fn all_logs(&self) -> Vec<Arc<CompactedLog>> {
        self.logs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .flat_map(|p| p.values().cloned())
            .collect()
    }

    /// The dispatcher sink that copies compact topics' records here.
    pub fn sink(self: &Arc<Self>) -> Arc<dyn DispatchSink> {
        Arc::new(CompactedSink {
            logs: Arc::clone(self),
            last_topic: Mutex::default(),
            touched: Mutex::default(),
            cut_from: Mutex::default(),
        })
    }

    /// Copy the records of one CommitLog entry (one partition's, offsets
    /// ascending) into their compacted log, if their topic is compact: one
    /// config and one log lookup for the entry, each record encoded
    /// straight into the log's pending batch. Idempotent. Returns the log
    /// written to, whose batch the caller writes at the end of its round
    /// ([`CompactedLog::end_batch`]).
    pub fn copy_entry(&self, records: &[StoredRecord]) -> Result<Option<Arc<CompactedLog>>> {
        let Some(first) = records.first() else {
            return Ok(None);
        };
        let Some(config) = self.topic_config(first.topic()) else {
            return Ok(None);
        };
        let log = match self.log_or_create(first.topic(), first.partition()) {
            Ok(log) => log,
            // Deleted since `topic_config` above: nothing to copy into.
            Err(CleanerError::NotCompact { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        // One entry is one producer's batch: a transaction's records carry
        // their producer, by which an aborted one is told (docs/compaction.md,
        // "Transactions").
        let producer = first
            .is_transactional()
            .then(|| first.producer())
            .flatten()
            .map(|p| format::TxnProducer {
                id: p.producer_id,
                epoch: p.epoch,
            });
        let copies = records.iter().filter_map(|r| {
            // The API refuses keyless records on compact topics; one that
            // got here anyway (e.g. written before the topic became
            // compact) has no key to compact by, so it is not copied.
            let key = r.key_slice()?;
            let (headers_block, header_count) = r.headers_slice();
            Some(format::Fields {
                offset: r.queue_offset(),
                timestamp_ms: r.timestamp_ms(),
                store_timestamp_ms: r.store_timestamp_ms(),
                delete_horizon_ms: 0,
                physical_offset: r.physical_offset(),
                key: Some(key),
                value: r.value_slice(),
                headers_block,
                header_count,
                producer,
            })
        });
        log.append_copies(copies, config.roll_policy(), self.now_ms())?;
        Ok(Some(log))
    }
}

fn to_store_error(e: CleanerError) -> StoreError {
    match e {
        CleanerError::Io { path, source } => StoreError::Io { path, source },
        CleanerError::Store { source, .. } => source,
        // The file and position survive; the reason crosses into the
        // store's error as text (storage cannot name the cleaner's kinds).
        CleanerError::Corruption { path, at, kind } => StoreError::Corruption {
            file: path,
            position: match at {
                crate::error::Location::Byte(position) => position,
                _ => 0,
            },
            kind: CorruptionKind::CompactedLog {
                reason: kind.to_string(),
            },
        },
        other => StoreError::Corruption {
            file: PathBuf::from(COMPACTED_DIR),
            position: 0,
            kind: CorruptionKind::CompactedLog {
                reason: other.to_string(),
            },
        },
    }
}

struct CompactedSink {
    logs: Arc<CompactedLogs>,
    /// Within one dispatch batch: the previous record's topic and whether
    /// it is compact. Most records are of delete topics and come in runs
    /// of one topic, so most need no map lookup. Cleared at the end of
    /// every batch, so a topic's policy change is seen by the next one.
    last_topic: Mutex<Option<(String, bool)>>,
    /// The logs this dispatch batch copied into, whose pending records
    /// `end_batch` writes and publishes (not every log's: most are idle).
    touched: Mutex<Vec<Arc<CompactedLog>>>,
    /// Recovery: each log cut before the scan, with its end offset before
    /// the cut. After the scan, a log that ends below that lost copies
    /// the CommitLog could not give back (see `truncate_lost`).
    cut_from: Mutex<Vec<(Arc<CompactedLog>, u64)>>,
}

impl CompactedSink {
    fn is_compact(&self, record: &StoredRecord) -> bool {
        let mut last = self.last_topic.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((name, compact)) = &*last {
            if name.as_bytes() == record.topic_bytes() {
                return *compact;
            }
        }
        let topic = record.topic();
        match &mut *last {
            Some((name, compact)) => {
                // Reuse the buffer: no allocation per change of topic.
                name.clear();
                name.push_str(topic);
                *compact = self.logs.is_compact(topic);
                *compact
            }
            None => {
                let compact = self.logs.is_compact(topic);
                *last = Some((topic.to_owned(), compact));
                compact
            }
        }
    }
}

impl DispatchSink for CompactedSink {
    fn name(&self) -> &str {
        "compacted-log"
    }

    fn dispatch(&self, record: &StoredRecord) -> tidelog_storage::Result<()> {
        self.dispatch_entry(std::slice::from_ref(record))
    }

    fn answers_key_queries(&self, record: &StoredRecord) -> bool {
        // A compact topic's key queries scan its compacted logs
        // (`Broker::query_by_key`).
        self.is_compact(record)
    }

    fn dispatch_entry(&self, records: &[StoredRecord]) -> tidelog_storage::Result<()> {
        // One entry is one partition's: one policy check for all of it.
        // A transaction marker is no record of the topic's: its effect is
        // the store's (the LSO, the aborted transactions), by which the
        // cleaner and read_committed reads judge the copies of the
        // transaction's records (docs/compaction.md, "Transactions").
        if !records
            .first()
            .is_some_and(|r| !r.is_control() && self.is_compact(r))
        {
            return Ok(());
        }
        let Some(log) = self.logs.copy_entry(records).map_err(to_store_error)? else {
            return Ok(());
        };
        let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
        if !touched.iter().any(|l| Arc::ptr_eq(l, &log)) {
            touched.push(log);
        }
        Ok(())
    }

    fn end_batch(&self) -> tidelog_storage::Result<()> {
        *self.last_topic.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
        // Kept on a failure: the next round's `end_batch` writes them.
        while let Some(log) = touched.last() {
            log.end_batch().map_err(to_store_error)?;
            touched.pop();
        }
        Ok(())
    }

    /// Every log's segment, then the names the dispatcher made since the
    /// last flush, each directory once ([`CompactedLog::create`]).
    fn flush(&self) -> tidelog_storage::Result<()> {
        for l in self.logs.all_logs() {
            l.flush_segment().map_err(to_store_error)?;
        }
        log::sync_names(&self.logs.names).map_err(to_store_error)
    }

    /// Before the recovery scan, at its start: the copies past it are of
    /// records the scan hands over again, and are re-made from the
    /// CommitLog as far as it still holds them. Whether it did is known
    /// only after the scan ([`DispatchSink::truncate_lost`]).
    fn truncate(&self, physical_end: PhysicalOffset) -> tidelog_storage::Result<PhysicalOffset> {
        let mut cut = self.cut_from.lock().unwrap_or_else(|e| e.into_inner());
        for l in self.logs.all_logs() {
            let end = l.next_offset();
            let dropped = l
                .truncate_from_physical(physical_end)
                .map_err(to_store_error)?;
            if dropped > 0 {
                cut.push((l, end));
            }
        }
        Ok(physical_end)
    }

    /// After the scan: the CommitLog ends at `physical_end` for good. A
    /// copy past it, or a log the scan did not bring back to where it ended
    /// before the cut, is of records the CommitLog lost: warned. A log the
    /// scan brought back lost nothing: said at info.
    fn truncate_lost(
        &self,
        physical_end: PhysicalOffset,
    ) -> tidelog_storage::Result<PhysicalOffset> {
        for l in self.logs.all_logs() {
            let dropped = l
                .truncate_from_physical(physical_end)
                .map_err(to_store_error)?;
            if dropped > 0 {
                tracing::warn!(tp = %l.topic_partition(), dropped, "dropped compacted copies of records the commit log lost");
            }
        }
        let cut = std::mem::take(&mut *self.cut_from.lock().unwrap_or_else(|e| e.into_inner()));
        for (l, end_before) in cut {
            let end = l.next_offset();
            if end < end_before {
                tracing::warn!(tp = %l.topic_partition(), offsets = ?(end..end_before), "dropped compacted copies of records the commit log lost");
            } else {
                tracing::info!(tp = %l.topic_partition(), "re-made the compacted copies past the recovery start from the commit log");
            }
        }
        Ok(physical_end)
    }
}
