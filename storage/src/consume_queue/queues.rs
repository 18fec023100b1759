//! Every ConsumeQueue of the store ([`ConsumeQueues`]), by topic and
//! partition: loading them, creating one on a partition's first record,
//! deleting a topic's or a partition's records (DeleteRecords), the
//! deleted partitions and log start offsets they keep durably, flushing,
//! and what recovery compares them with (`queue-ends`).
//!
//! Invariants: lock order `deleted` before `log_starts` before `queues`
//! (see [`ConsumeQueues`]); a deleted topic's queues are gone from the map
//! and from disk, its partitions' next offsets durable in
//! `deleted-partitions` before the files go, so no record of the deleted
//! incarnation is indexed again, also not by a recovery replay.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use super::deleted::DeletedPartitions;
use super::ends::QueueEnds;
use super::log_start::LogStarts;
use super::queue::ConsumeQueue;
use crate::commit_log::StoredRecord;
use crate::error::{IoContext, Result};
use crate::fs_util;
use crate::time_index;
use crate::types::{validate_topic_name, TopicPartition};

/// A queue that ends below its end in `queue-ends`
/// ([`ConsumeQueues::find_lost`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LostQueue {
    pub tp: TopicPartition,
    /// The file that should hold the queue's next units.
    pub path: PathBuf,
    /// Where the queue ended when loaded.
    pub had: u64,
    /// Where the last checkpoint's `queue-ends` says it ended.
    pub recorded: u64,
    /// The CommitLog position from which a re-dispatch rebuilds it.
    pub replay_from: u64,
}

/// Queues of one topic, by partition.
type TopicQueues = HashMap<u32, Arc<ConsumeQueue>>;

/// The deleted partitions and the file that keeps them.
pub(crate) struct Deleted {
    path: PathBuf,
    partitions: DeletedPartitions,
}

impl Deleted {
    /// Is `record` one of a deleted incarnation (never to be indexed
    /// again)? Costs one branch while nothing was ever deleted.
    pub(crate) fn covers(&self, record: &StoredRecord) -> bool {
        !self.partitions.is_empty()
            && self.partitions.covers(
                record.topic(),
                record.partition(),
                record.queue_offset().get(),
            )
    }
}

/// The log start offsets and the file that keeps them.
struct LogStartTable {
    path: PathBuf,
    starts: LogStarts,
}

/// What [`ConsumeQueues::delete_records`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletedRecords {
    /// The partition's beginning now: the offset asked for, or the
    /// beginning it already had if that was later (the low watermark).
    LowWatermark(u64),
    /// The offset asked for is past the high watermark (the queue's end,
    /// what fetches can see): nothing changed.
    AboveHighWatermark { offset: u64, high_watermark: u64 },
}

/// Every ConsumeQueue of the store, by topic and partition.
///
/// Lock order: `deleted` before `log_starts` before `queues`. The
/// dispatcher holds `deleted` (read) while it indexes an entry, and a topic
/// deletion holds it (write) throughout, so no unit of a deleted
/// incarnation is written after the deletion began. `log_starts` is held
/// while a log start is made durable and applied, so two DeleteRecords of
/// one partition land in order.
pub struct ConsumeQueues {
    root: PathBuf,
    units_per_file: u64,
    /// Queue offsets per time index entry (`time_index::format`).
    time_interval: u32,
    deleted: RwLock<Deleted>,
    log_starts: Mutex<LogStartTable>,
    queues: RwLock<HashMap<Box<str>, TopicQueues>>,
    /// Directories that gained queue or time files, or partition or topic
    /// directories, since the last flush: made by the dispatcher with no
    /// fsync, durable by the end of the next [`ConsumeQueues::flush`].
    names: Arc<fs_util::PendingDirSyncs>,
}

impl ConsumeQueues {
    /// Load every queue under `root` (`<root>/<topic>/<partition>/`), the
    /// deleted partitions from `deleted_path` and the log start offsets
    /// from `log_start_path`. A deletion that a crash interrupted (its
    /// partitions recorded, some files left) is finished.
    pub fn load(
        root: &Path,
        deleted_path: &Path,
        log_start_path: &Path,
        units_per_file: u64,
    ) -> Result<ConsumeQueues> {
        fs_util::create_dir_durable(root)?;
        let deleted = DeletedPartitions::load(deleted_path)?;
        let log_starts = LogStarts::load(log_start_path)?;
        let time_interval = time_index::interval_records();
        let names = Arc::new(fs_util::PendingDirSyncs::default());
        let mut queues: HashMap<Box<str>, TopicQueues> = HashMap::new();
        for topic_entry in std::fs::read_dir(root).at(root)? {
            let topic_entry = topic_entry.at(root)?;
            let Some(topic) = topic_entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if validate_topic_name(&topic).is_err() || !topic_entry.path().is_dir() {
                tracing::warn!(path = %topic_entry.path().display(), "ignoring a stray entry in consumequeue/");
                continue;
            }
            let mut finished_deletion = false;
            for part_entry in std::fs::read_dir(topic_entry.path()).at(&topic_entry.path())? {
                let part_entry = part_entry.at(&topic_entry.path())?;
                let name = part_entry.file_name();
                let Some(partition) = name
                    .to_str()
                    .filter(|n| {
                        !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit())
                    })
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    tracing::warn!(path = %part_entry.path().display(), "ignoring a stray entry in a topic's queue directory");
                    continue;
                };
                let tp = TopicPartition::new(&topic, partition)?;
                let q = ConsumeQueue::load(
                    tp,
                    part_entry.path(),
                    units_per_file,
                    time_interval,
                    Arc::clone(&names),
                )?;
                if let Some(next) = deleted.next_offset(&topic, partition) {
                    if q.max_offset() <= next {
                        // Deleted, and nothing written since: finish it.
                        tracing::info!(path = %part_entry.path().display(), "removing the queue of a deleted topic");
                        drop(q);
                        remove_queue_dir(&part_entry.path())?;
                        finished_deletion = true;
                        continue;
                    }
                    // Written again after the deletion: only the new units
                    // count.
                    q.hide_below(next)?;
                }
                if let Some(start) = log_starts.get(&topic, partition) {
                    q.raise_log_start(start);
                }
                queues
                    .entry(topic.as_str().into())
                    .or_default()
                    .insert(partition, Arc::new(q));
            }
            if finished_deletion && !queues.contains_key(topic.as_str()) {
                remove_queue_dir(&topic_entry.path())?;
            }
        }
        Ok(ConsumeQueues {
            root: root.to_path_buf(),
            units_per_file,
            time_interval,
            deleted: RwLock::new(Deleted {
                path: deleted_path.to_path_buf(),
                partitions: deleted,
            }),
            log_starts: Mutex::new(LogStartTable {
                path: log_start_path.to_path_buf(),
                starts: log_starts,
            }),
            queues: RwLock::new(queues),
            names,
        })
    }

    pub fn get(&self, topic: &str, partition: u32) -> Option<Arc<ConsumeQueue>> {
        let q = self.queues.read().unwrap_or_else(|e| e.into_inner());
        q.get(topic)?.get(&partition).cloned()
    }

    /// The queue for `tp`, created (empty, no files yet) if new. A deleted
    /// partition's queue starts at its next offset.
    pub fn get_or_create(&self, topic: &str, partition: u32) -> Result<Arc<ConsumeQueue>> {
        if let Some(q) = self.get(topic, partition) {
            return Ok(q);
        }
        self.create(&self.deleted(), topic, partition)
    }

    /// [`ConsumeQueues::get_or_create`] for a caller that holds `deleted`.
    pub(crate) fn create(
        &self,
        deleted: &Deleted,
        topic: &str,
        partition: u32,
    ) -> Result<Arc<ConsumeQueue>> {
        if let Some(q) = self.get(topic, partition) {
            // The dispatcher asks once per partition and round: no wait on
            // the log-start mutex (a DeleteRecords' fsync) for that.
            return Ok(q);
        }
        let tp = TopicPartition::new(topic, partition)?;
        let next = deleted
            .partitions
            .next_offset(topic, partition)
            .unwrap_or(0);
        // A partition whose queue files are all gone (a crash lost them,
        // or they were never made durable) still starts at its log start.
        let log_start = self.log_starts().starts.get(topic, partition);
        let mut all = self.queues.write().unwrap_or_else(|e| e.into_inner());
        let parts = all.entry(topic.into()).or_default();
        let q = parts.entry(partition).or_insert_with(|| {
            let dir = self.root.join(topic).join(partition.to_string());
            let q = ConsumeQueue::empty(
                tp,
                dir,
                self.units_per_file,
                self.time_interval,
                next,
                Arc::clone(&self.names),
            );
            if let Some(start) = log_start {
                q.raise_log_start(start);
            }
            Arc::new(q)
        });
        Ok(Arc::clone(q))
    }

    fn log_starts(&self) -> std::sync::MutexGuard<'_, LogStartTable> {
        self.log_starts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The log start offset of `topic`-`partition` (0: never moved): its
    /// queue's, or the table's for a partition without a queue yet.
    pub fn log_start(&self, topic: &str, partition: u32) -> u64 {
        match self.get(topic, partition) {
            Some(q) => q.log_start(),
            None => self.log_starts().starts.get(topic, partition).unwrap_or(0),
        }
    }

    /// Every partition's log start offset that a client moved.
    pub fn log_start_offsets(&self) -> Vec<(TopicPartition, u64)> {
        self.log_starts()
            .starts
            .iter()
            .filter_map(|(t, p, n)| Some((TopicPartition::new(t, p).ok()?, n)))
            .collect()
    }

    /// Kafka's DeleteRecords on one partition: move its log start offset up
    /// to `before` (`None`: the high watermark, the queue's end), which
    /// must not be past the high watermark. Durable (`log-start-offsets`
    /// replaced atomically) before the queue's beginning moves and before
    /// this returns; an offset at or below the beginning changes nothing.
    /// The queue files wholly below go with the next retention pass.
    pub fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        before: Option<u64>,
    ) -> Result<DeletedRecords> {
        validate_topic_name(topic)?;
        let deleted = self.deleted();
        let mut table = self.log_starts();
        let q = match self.get(topic, partition) {
            Some(q) => q,
            None => {
                drop(table);
                let q = self.create(&deleted, topic, partition)?;
                table = self.log_starts();
                q
            }
        };
        let high_watermark = q.max_offset();
        let offset = before.unwrap_or(high_watermark);
        if offset > high_watermark {
            return Ok(DeletedRecords::AboveHighWatermark {
                offset,
                high_watermark,
            });
        }
        if offset <= q.min_offset() {
            return Ok(DeletedRecords::LowWatermark(q.min_offset()));
        }
        let mut next = table.starts.clone();
        next.raise(topic, partition, offset);
        next.store(&table.path)?;
        table.starts = next;
        q.raise_log_start(offset);
        tracing::info!(tp = %q.tp, log_start = offset, "moved the log start offset (records below are deleted)");
        Ok(DeletedRecords::LowWatermark(q.min_offset()))
    }

    /// The deleted partitions, held for reading (see the lock order).
    pub(crate) fn deleted(&self) -> RwLockReadGuard<'_, Deleted> {
        self.deleted.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Where a deleted partition's offsets continue; `None` if it was
    /// never deleted.
    pub fn deleted_next_offset(&self, topic: &str, partition: u32) -> Option<u64> {
        self.deleted().partitions.next_offset(topic, partition)
    }

    /// Every deleted partition with its next offset.
    pub fn deleted_partitions(&self) -> Vec<(TopicPartition, u64)> {
        self.deleted()
            .partitions
            .iter()
            .filter_map(|(t, p, n)| Some((TopicPartition::new(t, p).ok()?, n)))
            .collect()
    }

    /// Delete every queue of `topic`: record each partition's next offset
    /// (the larger of its queue's end and `writer_next`, the writer's next
    /// offsets of the topic, which count records not yet indexed) durably
    /// first, then drop the queues and remove their files. A crash in
    /// between is finished at the next open. Returns the partitions whose
    /// queues were deleted.
    pub fn delete_topic(&self, topic: &str, writer_next: &[(u32, u64)]) -> Result<usize> {
        validate_topic_name(topic)?;
        let mut deleted = self.deleted.write().unwrap_or_else(|e| e.into_inner());
        let queues: Vec<Arc<ConsumeQueue>> = {
            let all = self.queues.read().unwrap_or_else(|e| e.into_inner());
            all.get(topic)
                .map(|parts| parts.values().cloned().collect())
                .unwrap_or_default()
        };
        let mut next = deleted.partitions.clone();
        for &(partition, n) in writer_next {
            next.raise(topic, partition, n);
        }
        for q in &queues {
            next.raise(topic, q.tp.partition(), q.max_offset());
        }
        if next != deleted.partitions {
            next.store(&deleted.path)?;
            deleted.partitions = next;
        }
        // The next incarnation begins at its own first offset: the log
        // starts of this one go (after the offsets above are durable, so a
        // crash in between leaves starts at or below them: harmless).
        {
            let mut table = self.log_starts();
            let mut starts = table.starts.clone();
            if starts.remove_topic(topic) {
                starts.store(&table.path)?;
                table.starts = starts;
            }
        }
        self.queues
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(topic);
        for q in &queues {
            q.close_deleted();
        }
        let dir = self.root.join(topic);
        if dir.exists() {
            remove_queue_dir(&dir)?;
        }
        Ok(queues.len())
    }

    /// Every queue's end as of CommitLog position `physical` (one past
    /// its last unit pointing below it), for the `queue-ends` file
    /// ([`ends`]); queues that end at 0 there are left out. Units past
    /// `physical` may point at bytes a power loss can still take, whose
    /// queue offsets recovery hands out again: they are not claimed. A
    /// queue whose records retention deleted keeps its end (the file
    /// holding it stays), and is listed with it.
    pub(crate) fn ends_at(&self, physical: u64) -> QueueEnds {
        let mut out = QueueEnds::default();
        for q in self.all() {
            let end = q.first_offset_at_or_past(physical);
            if end > 0 {
                out.raise(q.tp.topic(), q.tp.partition(), end);
            }
        }
        out
    }

    /// Recovery, right after load and before anything is truncated: the
    /// queues that end below the end `recorded` (the `queue-ends` file)
    /// says they had, because a queue file (or the whole partition
    /// directory) is missing or short. A partition deleted since (its
    /// `deleted-partitions` offset reaches the recorded end) or whose log
    /// start reaches it lost nothing.
    pub(crate) fn find_lost(&self, recorded: &QueueEnds) -> Vec<LostQueue> {
        let mut lost = Vec::new();
        for (topic, partition, end) in recorded.iter() {
            if self
                .deleted_next_offset(topic, partition)
                .is_some_and(|n| n >= end)
                || self.log_start(topic, partition) >= end
            {
                continue;
            }
            let Ok(tp) = TopicPartition::new(topic, partition) else {
                continue; // the table's decoder validated the name
            };
            let (had, replay_from, path) = match self.get(topic, partition) {
                Some(q) => (
                    q.max_offset(),
                    q.replay_from_after_end(),
                    q.file_path_for(q.max_offset()),
                ),
                None => {
                    let dir = self.root.join(topic).join(partition.to_string());
                    (0, 0, dir.join(fs_util::offset_file_name(0)))
                }
            };
            if had < end {
                lost.push(LostQueue {
                    tp,
                    path,
                    had,
                    recorded: end,
                    replay_from,
                });
            }
        }
        lost
    }

    /// Recovery: a queue whose records from its end up to `next` are
    /// neither in its files nor in the CommitLog (retention had deleted
    /// them before its file was lost) continues at `next`, durably: the
    /// partition's log start moves there (`log-start-offsets`), so no
    /// offset an acknowledged record had is handed out again.
    pub(crate) fn continue_lost_queue(&self, topic: &str, partition: u32, next: u64) -> Result<()> {
        let deleted = self.deleted();
        let q = self.create(&deleted, topic, partition)?;
        drop(deleted);
        if q.max_offset() >= next {
            return Ok(());
        }
        let mut table = self.log_starts();
        let mut starts = table.starts.clone();
        starts.raise(topic, partition, next);
        starts.store(&table.path)?;
        table.starts = starts;
        q.raise_log_start(next);
        Ok(())
    }

    pub fn all(&self) -> Vec<Arc<ConsumeQueue>> {
        let q = self.queues.read().unwrap_or_else(|e| e.into_inner());
        q.values().flat_map(|p| p.values().cloned()).collect()
    }

    /// Make every unit and time index entry written so far durable, and
    /// the names of the files and directories made for them: each queue's
    /// units (which makes a new file's size durable) and entries first,
    /// then each directory that gained a name, once
    /// ([`fs_util::PendingDirSyncs`]). The checkpoint runs this before it
    /// claims a dispatched position, so a file the dispatcher made with no
    /// fsync is whole on disk before the checkpoint counts a unit in it.
    pub fn flush(&self) -> Result<()> {
        for q in self.all() {
            q.flush()?;
        }
        self.names.sync()?;
        Ok(())
    }

    /// Directories whose new names wait for the next flush (tests, stats).
    pub fn pending_dir_syncs(&self) -> usize {
        self.names.pending()
    }
}

/// Remove a queue's (or a topic's) directory with everything in it, durably.
fn remove_queue_dir(dir: &Path) -> Result<()> {
    std::fs::remove_dir_all(dir).at(dir)?;
    match dir.parent() {
        Some(parent) => fs_util::fsync_dir(parent),
        None => Ok(()),
    }
}
