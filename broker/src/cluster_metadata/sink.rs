//! The dispatch sink of `__cluster_metadata`: every node's, installed at
//! [`crate::Broker::open`]. It applies another writer's record (module
//! doc of [`super`]): the owner checks the file as at load, writes it
//! through its own write path and publishes it in memory, so a replica's
//! Kafka Metadata, HTTP topic listing, config descriptions, logins and
//! ACL checks see the master's change as soon as it is dispatched.
//!
//! What follows at once, and what waits for the next open:
//! * topics: the registry, and a compact topic's compacted logs (declared
//!   before the topic's first record, which the same dispatcher hands on
//!   after this one). A deleted topic's queues and compacted logs, and
//!   the compacted logs of a topic that stopped compacting, are removed
//!   by the next open's sweep; until then nothing serves them (reads ask
//!   the registry).
//! * dynamic configs: the configs and the topic defaults every topic is
//!   resolved over. A group's session and heartbeat timeouts reach the
//!   coordinator at the next open (a replica's coordinator serves no
//!   group; a node is opened again before it leads).
//! * users and ACLs: logins and checks, at once.
//! * a partition's log start (DeleteRecords on the master): moved in the
//!   store, and in the partition's compacted log, at once; during
//!   recovery's replay, once the store is open (`MetadataSink::open`).
//!   One of a topic the registry does not hold (deleted since) changes
//!   nothing.
//!
//! A record that does not decode, or a file its owner refuses, fails the
//! dispatch of that entry (retried, and stalling dispatch if it lasts):
//! the master checked the file before writing it, so this is damage or a
//! bug, and a replica must not serve on without the master's metadata.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tidelog_cleaner::CompactedLogs;
use tidelog_storage::{
    DeletedRecords, DispatchSink, PhysicalOffset, Store, StoreError, StoredRecord,
};

use super::format::Record;
use super::positions::Positions;
use super::{format, MetadataFile, METADATA_TOPIC};
use crate::access::Access;
use crate::coordinator::config::GroupsConfig;
use crate::dynamic_configs::DynamicConfigs;
use crate::error::BrokerError;
use crate::registry::{Topic, TopicRegistry};

/// The owners of the files, as the sink installs into them.
pub(crate) struct Owners {
    pub registry: Arc<TopicRegistry>,
    pub dynamic: Arc<DynamicConfigs>,
    pub access: Arc<Access>,
    pub logs: Arc<CompactedLogs>,
    /// What a dynamic config file is checked against, as at load.
    pub groups: GroupsConfig,
}

impl Owners {
    /// Makes `bytes` `file`'s content, on disk and in memory.
    fn install(&self, file: MetadataFile, bytes: &[u8]) -> Result<(), BrokerError> {
        match file {
            MetadataFile::Topics => {
                let topics = self.registry.install(bytes)?;
                self.follow_compaction(&topics);
            }
            MetadataFile::Dynamic => {
                let defaults = self.dynamic.install(bytes, &self.groups)?;
                let changed = self.registry.install_defaults(defaults)?;
                self.follow_compaction(&changed);
            }
            MetadataFile::Users => self.access.users.install(bytes)?,
            MetadataFile::Acls => self.access.acls.install(bytes)?,
        }
        Ok(())
    }

    /// Compact topics are declared to the compacted logs, before any of
    /// their records is dispatched.
    fn follow_compaction(&self, topics: &[Arc<Topic>]) {
        for topic in topics {
            if topic.config.cleanup_policy.compacts() {
                self.logs
                    .set_topic(&topic.name, topic.config.compact_config());
            }
        }
    }
}

/// See the module doc.
pub(crate) struct MetadataSink {
    /// This opened broker's writer id: its own records are skipped.
    writer: u64,
    owners: Owners,
    positions: Arc<Positions>,
    /// For errors: the config directory.
    dir: PathBuf,
    /// Records applied since open.
    applied: AtomicU64,
    /// The store, once open: a log start is moved through it.
    store: OnceLock<Weak<Store>>,
    /// Log starts replayed by recovery before the store was open.
    deferred: Mutex<Vec<(String, u32, u64)>>,
}

impl MetadataSink {
    pub(crate) fn new(
        writer: u64,
        owners: Owners,
        positions: Arc<Positions>,
        dir: PathBuf,
    ) -> MetadataSink {
        MetadataSink {
            writer,
            owners,
            positions,
            dir,
            applied: AtomicU64::new(0),
            store: OnceLock::new(),
            deferred: Mutex::new(Vec::new()),
        }
    }

    /// The store is open: log starts move through it from now on, those
    /// recovery replayed first. Blocking (fsyncs).
    pub(crate) fn open(&self, store: &Arc<Store>) -> Result<(), BrokerError> {
        let _ = self.store.set(Arc::downgrade(store));
        let deferred =
            std::mem::take(&mut *self.deferred.lock().unwrap_or_else(|e| e.into_inner()));
        for (topic, partition, offset) in deferred {
            self.move_log_start(store, &topic, partition, offset)?;
        }
        Ok(())
    }

    /// Moves `topic`-`partition`'s log start to `offset` as the master
    /// did (module doc).
    fn move_log_start(
        &self,
        store: &Store,
        topic: &str,
        partition: u32,
        offset: u64,
    ) -> Result<(), BrokerError> {
        let held = self
            .owners
            .registry
            .get(topic)
            .is_some_and(|t| t.check_partition(partition).is_ok());
        if !held {
            tracing::debug!(
                topic,
                partition,
                "a log start of a partition no longer held; skipped"
            );
            return Ok(());
        }
        let moved = crate::log_start::move_log_start(
            store,
            &self.owners.logs,
            topic,
            partition,
            Some(offset),
        )?;
        if let DeletedRecords::AboveHighWatermark { high_watermark, .. } = moved {
            // The master's records below it come before it in the log, so
            // this node holds them: not expected. Skipped loudly rather
            // than stall dispatch.
            tracing::warn!(
                topic,
                partition,
                offset,
                high_watermark,
                "the master's DeleteRecords is past this node's end of the partition; not applied"
            );
        }
        Ok(())
    }

    /// Records applied since open.
    pub(crate) fn applied(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }

    fn failed(&self, position: u64, reason: impl std::fmt::Display) -> StoreError {
        StoreError::Inconsistent {
            file: self.dir.clone(),
            position,
            reason: format!("a record of {METADATA_TOPIC}: {reason}"),
        }
    }
}

impl DispatchSink for MetadataSink {
    fn name(&self) -> &str {
        "cluster-metadata"
    }

    fn dispatch(&self, record: &StoredRecord) -> tidelog_storage::Result<()> {
        if record.topic_bytes() != METADATA_TOPIC.as_bytes() {
            return Ok(());
        }
        let position = record.physical_offset().get();
        let decoded = match format::decode_record(record.key_slice(), record.value_slice())
            .map_err(|e| self.failed(position, e))?
        {
            Record::File(decoded) => decoded,
            Record::LogStart { writer, start } => {
                if writer == self.writer {
                    return Ok(()); // this broker's own: it moved it itself
                }
                match self.store.get().and_then(Weak::upgrade) {
                    Some(store) => self
                        .move_log_start(&store, start.topic, start.partition, start.offset)
                        .map_err(|e| self.failed(position, e))?,
                    None => self
                        .deferred
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((start.topic.to_owned(), start.partition, start.offset)),
                }
                self.applied.fetch_add(1, Ordering::AcqRel);
                return Ok(());
            }
        };
        if decoded.writer == self.writer {
            return Ok(()); // this broker's own: it wrote the file itself
        }
        self.owners
            .install(decoded.file, decoded.bytes)
            .map_err(|e| self.failed(position, e))?;
        self.positions
            .record(decoded.file, position)
            .map_err(|e| self.failed(position, e))?;
        self.applied.fetch_add(1, Ordering::AcqRel);
        tracing::debug!(
            file = decoded.file.name(),
            position,
            "applied the master's metadata file"
        );
        Ok(())
    }

    fn dispatch_entry(&self, records: &[StoredRecord]) -> tidelog_storage::Result<()> {
        match records.first() {
            Some(r) if r.topic_bytes() == METADATA_TOPIC.as_bytes() => {
                records.iter().try_for_each(|r| self.dispatch(r))
            }
            _ => Ok(()),
        }
    }

    fn flush(&self) -> tidelog_storage::Result<()> {
        Ok(()) // each file and position is durable once applied
    }

    /// Nothing to replay: what the log still holds past `physical_end`
    /// the scan hands on again, and what it lost is taken back by
    /// [`MetadataSink::rederive`] (`super::positions`).
    fn truncate(&self, physical_end: PhysicalOffset) -> tidelog_storage::Result<PhysicalOffset> {
        self.positions
            .truncate(physical_end.get())
            .map_err(|e| self.failed(physical_end.get(), e))?;
        Ok(physical_end)
    }
}

impl MetadataSink {
    /// After recovery: every file still pending (its records past a cut
    /// or a lost tail are gone) takes its last record below again, read
    /// from the log by position, whoever wrote it. One the log no longer
    /// holds (retention) is diverged. Returns the diverged files, to be
    /// warned about. Blocking.
    pub(crate) fn rederive(
        &self,
        store: &tidelog_storage::Store,
    ) -> Result<Vec<String>, BrokerError> {
        for (file, position) in self.positions.pending() {
            let record = store.read_at(PhysicalOffset::new(position))?;
            let found = record.as_ref().and_then(|r| {
                (r.topic_bytes() == METADATA_TOPIC.as_bytes())
                    .then(|| format::decode(r.key_slice(), r.value_slice()).ok())
                    .flatten()
                    .filter(|d| d.file == file)
                    .map(|d| d.bytes.to_vec())
            });
            match found {
                Some(bytes) => {
                    self.owners.install(file, &bytes)?;
                    self.positions.record(file, position)?;
                    tracing::warn!(
                        file = file.name(),
                        position,
                        "the log was cut past changes of this metadata file; it is back as its last record below the cut had it"
                    );
                }
                None => self.positions.mark_diverged(file)?,
            }
        }
        Ok(self.positions.diverged())
    }
}
