//! Tiered storage inside the broker (docs/TIERED.md, "Behaviour"): the
//! uploader, the retention hold, each tiered partition's local beginning,
//! topic metas in the bucket, and the remote half of reads.
//!
//! The uploader is a round (`Broker::tiering_round`) the server runs
//! every `tiered.upload_interval_ms` and the admin route
//! `POST .../tiering:upload` runs at once; rounds never overlap (one async
//! mutex). A round first retries the topic metas waiting to be written or
//! deleted, then, per partition of a `remote.storage.enable` topic, reads
//! the partition from its manifest end in ConsumeQueue order (dispatched
//! and flushed records only) and uploads when the pending bytes reach
//! `tiered.object_bytes` or the oldest pending record's CommitLog segment
//! is sealed; then it moves the partition's local beginning by
//! `local.retention.*` (over uploaded records only) and applies
//! `retention.*` to the remote tier. A failing partition waits out a
//! backoff (doubling from the interval, at most [`BACKOFF_MAX_MS`]) and the
//! next ones go on.
//!
//! Invariants:
//! * the retention hold ([`TieringHold`]) is, over every partition of every
//!   tiered topic, the CommitLog position of its first record not yet in a
//!   manifest; a partition no round has seen yet holds everything (`0`), so
//!   nothing of a topic just made tiered is deleted before it is uploaded;
//! * a local beginning is never above the manifest's end: what is no longer
//!   served locally is in the remote tier;
//! * remote reads never go below a topic's base offset (`registry.rs`),
//!   so no earlier incarnation's remote records are served (a restore
//!   writes base offsets 0: a fresh data dir has no earlier incarnation);
//! * state is in memory: after a restart every partition starts from its
//!   manifest again (read at the first round) and serves locally what is
//!   local until then.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tidelog_tiered::{RemoteRecord, RemoteTier, RemoteTopic};

use crate::error::BrokerError;
use crate::registry::{Topic, TopicRegistry};

mod rounds;

/// Longest wait of a failing partition (or topic meta) before its next try.
pub const BACKOFF_MAX_MS: u64 = 300_000;
/// Records one local read of the uploader takes at most.
const READ_RECORDS_MAX: usize = 100_000;

/// What the uploader knows of one partition.
#[derive(Debug, Clone, Default)]
struct PartState {
    /// The manifest's end, once read this run.
    uploaded_end: Option<u64>,
    /// The manifest's beginning (after remote retention).
    remote_beginning: Option<u64>,
    /// Below this, reads go to the remote tier (0: never moved).
    local_beginning: u64,
    /// CommitLog position of the first record not yet uploaded (or the
    /// dispatched position when everything readable was uploaded).
    hold: Option<u64>,
    /// Records and bytes read locally but not yet uploaded.
    lag_records: u64,
    lag_bytes: u64,
    failures: u32,
    retry_at_ms: i64,
    /// The remote data is not this partition's (module doc on restores):
    /// nothing is uploaded or served remotely.
    conflict: bool,
}

/// Every tiered partition's state, by (topic, partition).
type PartStates = HashMap<(Arc<str>, u32), PartState>;

/// A topic meta write waiting for the object store.
#[derive(Debug, Clone)]
enum MetaJob {
    Put(RemoteTopic),
    Delete,
}

/// The broker's tiered storage: the remote tier and what the uploader knows.
pub struct Tiering {
    remote: RemoteTier,
    /// Serialises rounds (the periodic one and the admin route's).
    round: tokio::sync::Mutex<()>,
    parts: Arc<Mutex<PartStates>>,
    /// Topic metas to write (latest per topic) or delete, in order.
    metas: Mutex<BTreeMap<String, MetaJob>>,
    /// Per compact partition: the cleaner's run count its last snapshot
    /// went up at (a snapshot goes up after each clean).
    snapshots: Mutex<HashMap<(Arc<str>, u32), u64>>,
    counters: Counters,
}

#[derive(Debug, Default)]
struct Counters {
    rounds: AtomicU64,
    uploaded_records: AtomicU64,
    upload_errors: AtomicU64,
    meta_errors: AtomicU64,
    snapshots_uploaded: AtomicU64,
    snapshot_errors: AtomicU64,
    remote_reads: AtomicU64,
    remote_read_errors: AtomicU64,
}

impl std::fmt::Debug for Tiering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiering").finish_non_exhaustive()
    }
}

/// One partition's upload state, for stats and metrics.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartitionTiering {
    pub topic: String,
    pub partition: u32,
    /// The manifest's end (`None`: not read yet this run).
    pub uploaded_end: Option<u64>,
    pub remote_beginning: Option<u64>,
    pub local_beginning: u64,
    /// Records (offsets) and bytes waiting to be uploaded.
    pub lag_records: u64,
    pub lag_bytes: u64,
    /// Consecutive failed tries (0: the last one worked).
    pub failures: u32,
}

/// The `tiered` block of stats.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TieringStats {
    pub rounds: u64,
    pub uploaded_records: u64,
    pub upload_errors: u64,
    pub meta_errors: u64,
    /// Compact partitions' snapshots uploaded, and those that failed.
    pub snapshots_uploaded: u64,
    pub snapshot_errors: u64,
    pub remote_reads: u64,
    pub remote_read_errors: u64,
    /// Topic metas waiting to be written or deleted.
    pub pending_metas: usize,
    /// The remote tier's own counters (bytes and objects uploaded, reads,
    /// cache hits and misses, ...).
    #[serde(flatten)]
    pub remote: RemoteStats,
    pub partitions: Vec<PartitionTiering>,
}

/// [`tidelog_tiered::TieredStats`], serializable.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemoteStats {
    pub uploaded_bytes: u64,
    pub uploaded_objects: u64,
    pub upload_failures: u64,
    pub upload_retries: u64,
    pub remote_read_calls: u64,
    pub remote_read_bytes: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub cache_bytes: u64,
}

/// What one round did to one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PartitionRound {
    pub topic: String,
    pub partition: u32,
    pub uploaded_records: u64,
    pub uploaded_end: Option<u64>,
    pub local_beginning: u64,
    pub remote_beginning: Option<u64>,
    /// Why the partition failed this round (it retries after a backoff).
    pub error: Option<String>,
}

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RoundReport {
    pub partitions: Vec<PartitionRound>,
    /// Compact partitions whose snapshot went up this round.
    pub snapshots: Vec<(String, u32)>,
    pub metas_written: usize,
    pub metas_failed: usize,
}

/// The retention hold the broker installs in the store (module doc).
pub struct TieringHold {
    registry: Arc<TopicRegistry>,
    parts: Arc<Mutex<PartStates>>,
}

impl tidelog_storage::RetentionHold for TieringHold {
    fn min_position(&self) -> Option<u64> {
        let parts = self.parts.lock().unwrap_or_else(|e| e.into_inner());
        let mut min: Option<u64> = None;
        for topic in self.registry.all() {
            if !topic.config.remote_storage_enable {
                continue;
            }
            for p in 0..topic.partitions.get() {
                // Not seen by a round yet: hold everything.
                let hold = parts
                    .get(&(Arc::clone(&topic.name), p))
                    .and_then(|s| s.hold)
                    .unwrap_or(0);
                min = Some(min.map_or(hold, |m| m.min(hold)));
            }
        }
        min
    }
}

fn now_ms() -> i64 {
    tidelog_storage::types::now_ms()
}

impl Tiering {
    pub fn new(remote: RemoteTier) -> Tiering {
        Tiering {
            remote,
            round: tokio::sync::Mutex::new(()),
            parts: Arc::default(),
            metas: Mutex::default(),
            snapshots: Mutex::default(),
            counters: Counters::default(),
        }
    }

    pub fn remote(&self) -> &RemoteTier {
        &self.remote
    }

    /// The hold to install in the store.
    pub fn hold(&self, registry: &Arc<TopicRegistry>) -> Arc<TieringHold> {
        Arc::new(TieringHold {
            registry: Arc::clone(registry),
            parts: Arc::clone(&self.parts),
        })
    }

    fn parts(&self) -> std::sync::MutexGuard<'_, PartStates> {
        self.parts.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn part(&self, topic: &Arc<str>, partition: u32) -> Option<PartState> {
        self.parts().get(&(Arc::clone(topic), partition)).cloned()
    }

    fn update(&self, topic: &Arc<str>, partition: u32, f: impl FnOnce(&mut PartState)) {
        f(self
            .parts()
            .entry((Arc::clone(topic), partition))
            .or_default());
    }

    /// Queue the topic's meta for writing (create, alter); a later round
    /// writes it, retrying until it lands. Never blocks on the store.
    pub fn topic_changed(&self, topic: &Topic) {
        let meta = RemoteTopic {
            name: topic.name.to_string(),
            partitions: topic.partitions.get(),
            configs: topic.overrides.clone(),
            updated_ms: now_ms(),
        };
        self.metas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(meta.name.clone(), MetaJob::Put(meta));
    }

    /// Queue the deletion of a deleted topic's remote data, and forget its
    /// partitions. Until it lands, a topic of the same name cannot be
    /// created ([`Tiering::check_create`]).
    pub fn topic_deleted(&self, name: &str) {
        self.parts().retain(|(t, _), _| &**t != name);
        self.metas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), MetaJob::Delete);
    }

    /// Refuses to create `name` while its earlier incarnation's remote data
    /// is still being deleted.
    pub fn check_create(&self, name: &str) -> Result<(), BrokerError> {
        let pending = matches!(
            self.metas
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(name),
            Some(MetaJob::Delete)
        );
        if pending {
            return Err(BrokerError::RemoteDeletePending {
                topic: name.to_string(),
            });
        }
        Ok(())
    }

    /// Stats and metrics.
    pub fn stats(&self) -> TieringStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let r = self.remote.stats();
        let mut partitions: Vec<PartitionTiering> = self
            .parts()
            .iter()
            .map(|((topic, partition), s)| PartitionTiering {
                topic: topic.to_string(),
                partition: *partition,
                uploaded_end: s.uploaded_end,
                remote_beginning: s.remote_beginning,
                local_beginning: s.local_beginning,
                lag_records: s.lag_records,
                lag_bytes: s.lag_bytes,
                failures: s.failures,
            })
            .collect();
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        TieringStats {
            rounds: get(&c.rounds),
            uploaded_records: get(&c.uploaded_records),
            upload_errors: get(&c.upload_errors),
            meta_errors: get(&c.meta_errors),
            snapshots_uploaded: get(&c.snapshots_uploaded),
            snapshot_errors: get(&c.snapshot_errors),
            remote_reads: get(&c.remote_reads),
            remote_read_errors: get(&c.remote_read_errors),
            pending_metas: self.metas.lock().unwrap_or_else(|e| e.into_inner()).len(),
            remote: RemoteStats {
                uploaded_bytes: r.uploaded_bytes,
                uploaded_objects: r.uploaded_objects,
                upload_failures: r.upload_failures,
                upload_retries: r.upload_retries,
                remote_read_calls: r.remote_reads,
                remote_read_bytes: r.remote_read_bytes,
                cache_hits: r.cache_hits,
                cache_misses: r.cache_misses,
                cache_bytes: r.cache_bytes,
            },
            partitions,
        }
    }

    /// Writes or deletes the queued topic metas; a failure stays queued.
    async fn run_metas(&self, report: &mut RoundReport) {
        let jobs: Vec<(String, MetaJob)> = self
            .metas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, job) in jobs {
            let done = match &job {
                MetaJob::Put(meta) => self.remote.put_topic(meta).await,
                MetaJob::Delete => self.remote.delete_topic(&name).await,
            };
            match done {
                Ok(()) => {
                    report.metas_written += 1;
                    let mut metas = self.metas.lock().unwrap_or_else(|e| e.into_inner());
                    // Only if no newer job for the topic came in meanwhile.
                    let same = match (metas.get(&name), &job) {
                        (Some(MetaJob::Put(now)), MetaJob::Put(sent)) => now == sent,
                        (Some(MetaJob::Delete), MetaJob::Delete) => true,
                        _ => false,
                    };
                    if same {
                        metas.remove(&name);
                    }
                    if matches!(job, MetaJob::Delete) {
                        tracing::info!(topic = %name, "deleted the topic's remote data");
                    }
                }
                Err(e) => {
                    report.metas_failed += 1;
                    self.counters.meta_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(topic = %name, error = %e, "topic meta not written to the remote tier; retrying at the next round");
                }
            }
        }
    }
}

/// The remote record's bytes, as a front-end renders them.
pub(crate) fn headers_of(r: &RemoteRecord) -> Vec<tidelog_storage::Header> {
    r.headers
        .iter()
        .map(|(name, value)| tidelog_storage::Header {
            name: name.clone(),
            value: value.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
