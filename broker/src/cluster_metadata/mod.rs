//! Cluster-wide metadata through the CommitLog (issue 39): the topic
//! registry, the dynamic configs, the users and the ACLs are files of the
//! data dir, which the replication stream (a copy of the CommitLog) does
//! not carry, and neither is a partition's log start offset as
//! DeleteRecords moves it (the store's `log-start-offsets`). So on a
//! cluster's master every change of one of them also appends a record to
//! `__cluster_metadata` (one partition; key: which file, value: the
//! file's whole new bytes, [`mod@format`]; or a partition's new log
//! start), durably, before the file is written and the change published
//! in memory; a replica copies the record with the log and its dispatch
//! ([`sink`]) installs the file as the owner would write it, checked as
//! the owner checks the file at load. A failover then finds every file
//! as the old master had it, in the log the new master already holds.
//!
//! Invariants:
//! * Records are appended only by a broker in a cluster
//!   ([`crate::Broker::join_cluster`]): a single node's log has none, and
//!   nothing a broker changes while it opens (its internal topics, the
//!   config file's topics and users, a registry upgrade) is appended by
//!   a node that may turn out to be a replica (its log must stay a copy);
//!   a node that becomes master appends every file once as its term
//!   begins ([`crate::Broker::republish_metadata`]).
//! * A change's record is in the log before the change is published in
//!   memory, so before any record of a topic it creates (one dispatcher
//!   applies both, in log order); the change is answered once the record
//!   is durable, and in a cluster once the in-sync set holds it
//!   (`crate::Broker::metadata_replicated`).
//! * The broker that appended a record does not apply it (it wrote the
//!   file itself, under the owner's lock, after the append): each record
//!   names its writer, a random id per opened broker. Every other record
//!   is applied, by a replica as it copies, and by any node when
//!   recovery replays it (the same bytes again, or a change the node's
//!   file missed: a crash between the append and the file's write).
//! * After a cut (or a lost log tail) no file keeps content the log no
//!   longer holds: [`positions`] asks recovery to replay from the last
//!   record below the cut, or names the file diverged.
//!
//! `__cluster_metadata` is no topic of the registry: clients neither see
//! nor read it (a read by physical offset asks the registry), and the
//! start-up sweep of unknown topics' queues spares it.
//!
//! Lock order: an owner's lock, then the store's append; the sink (the
//! dispatcher thread) takes an owner's lock only to apply another
//! writer's record, which the master never has to.

pub mod format;
pub mod hook;
pub mod positions;
pub mod sink;

pub use hook::{Hook, Publish};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use bytes::Bytes;
use tidelog_storage::{AppendRecord, Store, StoreError};

use crate::error::BrokerError;
use positions::Positions;

/// The internal topic of the metadata records.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// The files carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MetadataFile {
    /// `config/topics.json` (`crate::registry`).
    Topics,
    /// `config/dynamic.json` (`crate::dynamic_configs`).
    Dynamic,
    /// `config/users.json` (`tidelog_security::users`).
    Users,
    /// `config/acls.json` (`tidelog_security::acl::store`).
    Acls,
}

impl MetadataFile {
    pub const ALL: [MetadataFile; 4] = [
        MetadataFile::Topics,
        MetadataFile::Dynamic,
        MetadataFile::Users,
        MetadataFile::Acls,
    ];

    /// The file's name in the config directory: the record's key.
    pub fn name(self) -> &'static str {
        match self {
            MetadataFile::Topics => crate::registry::REGISTRY_FILE,
            MetadataFile::Dynamic => crate::dynamic_configs::DYNAMIC_FILE,
            MetadataFile::Users => tidelog_security::users::USERS_FILE,
            MetadataFile::Acls => tidelog_security::acl::store::ACL_FILE,
        }
    }
}

/// The master's side: appends a change's record (module doc).
#[derive(Debug)]
pub struct ClusterMetadata {
    /// This opened broker's id, in every record it appends.
    writer: u64,
    /// Set by `join_cluster`: records are appended from then on.
    enabled: AtomicBool,
    /// Weak: the broker owns the store and takes it back at shutdown.
    store: OnceLock<Weak<Store>>,
    positions: Arc<Positions>,
    /// The end of the last record appended: what a change's answer waits
    /// to be replicated.
    last_end: AtomicU64,
}

impl ClusterMetadata {
    pub(crate) fn new(writer: u64, positions: Arc<Positions>) -> ClusterMetadata {
        ClusterMetadata {
            writer,
            enabled: AtomicBool::new(false),
            store: OnceLock::new(),
            positions,
            last_end: AtomicU64::new(0),
        }
    }

    pub(crate) fn set_store(&self, store: &Arc<Store>) {
        let _ = self.store.set(Arc::downgrade(store));
    }

    /// From now on every change appends its record.
    pub(crate) fn enable(&self) {
        self.enabled.store(true, Ordering::Release);
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// The end of the last record appended (0: none).
    pub(crate) fn last_end(&self) -> u64 {
        self.last_end.load(Ordering::Acquire)
    }

    /// Appends `bytes` as `file`'s next content, durable (fsynced,
    /// whatever the flush mode) when it returns; nothing outside a
    /// cluster. A store that refuses (a replica, a full disk), or a file
    /// larger than one record may be, refuses the change. Blocking.
    pub(crate) fn publish(&self, file: MetadataFile, bytes: &[u8]) -> Result<(), BrokerError> {
        if !self.is_enabled() {
            return Ok(());
        }
        let value = format::encode_value(self.writer, bytes);
        if let Some(position) = self.append(file.name(), value)? {
            self.positions.record(file, position)?;
        }
        Ok(())
    }

    /// Appends DeleteRecords' move of `start`'s log start, durable when
    /// it returns; nothing outside a cluster. No position is kept: a cut
    /// cannot lower a log start (docs/CLUSTER.md, "Limits"). Blocking.
    pub(crate) fn publish_log_start(
        &self,
        start: &format::LogStart<'_>,
    ) -> Result<(), BrokerError> {
        if !self.is_enabled() {
            return Ok(());
        }
        let value = format::encode_log_start(self.writer, start);
        self.append(format::LOG_START_KEY, value).map(|_| ())
    }

    /// Appends a record of `key` and `value`, durable (fsynced, whatever
    /// the flush mode) when it returns: where it begins in the log.
    fn append(&self, key: &'static str, value: Vec<u8>) -> Result<Option<u64>, BrokerError> {
        let store = self
            .store
            .get()
            .and_then(Weak::upgrade)
            .ok_or(BrokerError::Store {
                source: StoreError::Closed,
            })?;
        let limit = store.config().max_message_bytes;
        let size = (key.len() + value.len()) as u64;
        if size > limit {
            return Err(BrokerError::Store {
                source: StoreError::InvalidInput {
                    reason: format!(
                        "{key} would be {size} bytes in its cluster metadata record, more than store.max_message_bytes ({limit}): raise it to change this file in a cluster"
                    ),
                },
            });
        }
        let record = AppendRecord {
            topic: Arc::from(METADATA_TOPIC),
            partition: 0,
            key: Some(Bytes::from_static(key.as_bytes())),
            value: Some(Bytes::from(value)),
            headers: Vec::new(),
            timestamp_ms: None,
        };
        let unflushed = store.append_unflushed(&[record], u64::MAX, None)?;
        let end = unflushed.end();
        let appended = match store.flushed(unflushed).wait()? {
            tidelog_storage::ProducerAppend::Written(appended) => appended,
            tidelog_storage::ProducerAppend::Duplicate(_) => {
                return Err(BrokerError::Store {
                    source: StoreError::InvalidInput {
                        reason: "a metadata record was taken for a producer's duplicate".into(),
                    },
                })
            }
        };
        self.last_end.fetch_max(end, Ordering::AcqRel);
        Ok(appended.first().map(|a| a.physical_offset.get()))
    }

    /// The hook a security store calls (`tidelog_security::Publish`).
    pub(crate) fn security_hook(
        self: &Arc<Self>,
        file: MetadataFile,
    ) -> Arc<tidelog_security::Publish> {
        let me = Arc::clone(self);
        Arc::new(move |bytes: &[u8]| me.publish(file, bytes).map_err(|e| e.to_string()))
    }

    /// The hook a broker-owned file calls ([`Publish`]).
    pub(crate) fn hook(self: &Arc<Self>, file: MetadataFile) -> Arc<Publish> {
        let me = Arc::clone(self);
        Arc::new(move |bytes: &[u8]| me.publish(file, bytes))
    }
}

impl crate::Broker {
    /// A master's term begins: every metadata file as this node holds it
    /// is appended once. What the broker changed while it opened (its
    /// internal topics, the config file's declared topics, bootstrap
    /// users, a registry upgrade) could not be appended then, when the
    /// node did not know whether it would be a replica; now it reaches
    /// the replicas at once instead of with the file's next change. Call
    /// before the node takes writes (no change of a file may run
    /// beside it: the record must be the file's latest). Returns the
    /// files appended. Blocking (fsyncs).
    pub fn republish_metadata(&self) -> Result<usize, BrokerError> {
        let dir = self.metadata.positions.config_dir().to_path_buf();
        let mut appended = 0;
        for file in MetadataFile::ALL {
            let path = dir.join(file.name());
            let bytes = match std::fs::read(&path) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(BrokerError::Store {
                        source: StoreError::Io { path, source },
                    })
                }
            };
            self.metadata.publish(file, &bytes)?;
            appended += usize::from(self.metadata.is_enabled());
        }
        Ok(appended)
    }

    /// Resolves once the in-sync set holds every metadata record
    /// appended so far (at once outside a cluster, or with none): what a
    /// change of topics, configs, users or ACLs awaits before it is
    /// answered, as an acks=all produce awaits its records.
    pub(crate) async fn metadata_replicated(&self) -> Result<(), BrokerError> {
        let end = self.metadata.last_end();
        match self.cluster() {
            Some(cluster) if end > 0 => cluster.replicated(end, 0).await,
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
