//! The uploader's rounds and the remote half of reads, as the broker's
//! calls ([`Broker::tiering_round`], [`Broker::tiered_bounds`]): what
//! reads the store and the compacted logs and writes the bucket. The
//! state they keep is `Tiering`'s (`mod.rs`), whose invariants hold here.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tidelog_storage::{QueueOffset, StoredRecord};
use tidelog_tiered::{RemoteRecord, TieredError};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::registry::Topic;

use super::{
    now_ms, PartitionRound, RoundReport, Tiering, TieringStats, BACKOFF_MAX_MS, READ_RECORDS_MAX,
};

/// A stored record as the remote tier holds it.
fn to_remote(r: &StoredRecord) -> RemoteRecord {
    RemoteRecord {
        offset: r.queue_offset().get(),
        timestamp_ms: r.timestamp_ms(),
        key: r.key(),
        value: r.value(),
        headers: r.headers().into_iter().map(|h| (h.name, h.value)).collect(),
    }
}

fn payload(r: &StoredRecord) -> u64 {
    r.key_slice().map_or(0, |k| k.len() as u64)
        + r.value_slice().map_or(0, |v| v.len() as u64)
        + r.headers_len() as u64
}

impl Broker {
    /// One uploader round (module doc), over every tiered topic or only
    /// `only`. Waits for a round in progress. `None` when the server has
    /// no remote tier.
    pub(crate) async fn tiering_round(
        self: &Arc<Self>,
        only: Option<&str>,
    ) -> Result<RoundReport, BrokerError> {
        let Some(tiering) = &self.tiering else {
            return Err(BrokerError::TieringOff);
        };
        let _round = tiering.round.lock().await;
        tiering.counters.rounds.fetch_add(1, Ordering::Relaxed);
        let mut report = RoundReport::default();
        tiering.run_metas(&mut report).await;
        let forced = only.is_some();
        let topics: Vec<Arc<Topic>> = match only {
            Some(name) => vec![self.registry.require(name)?],
            None => self.registry.all(),
        };
        for topic in &topics {
            if topic.config.cleanup_policy.compacts() {
                self.snapshot_compact(tiering, topic, &mut report).await;
            }
        }
        for topic in topics {
            if !topic.config.remote_storage_enable {
                continue;
            }
            for p in 0..topic.partitions.get() {
                let state = tiering.part(&topic.name, p).unwrap_or_default();
                if !forced && state.failures > 0 && now_ms() < state.retry_at_ms {
                    continue;
                }
                let outcome = self.tier_partition(tiering, &topic, p).await;
                let mut row = PartitionRound {
                    topic: topic.name.to_string(),
                    partition: p,
                    ..PartitionRound::default()
                };
                match outcome {
                    Ok(uploaded) => {
                        row.uploaded_records = uploaded;
                        tiering.update(&topic.name, p, |s| s.failures = 0);
                    }
                    Err(e) => {
                        tiering
                            .counters
                            .upload_errors
                            .fetch_add(1, Ordering::Relaxed);
                        let interval = self.config.tiered.upload_interval_ms.max(1);
                        tiering.update(&topic.name, p, |s| {
                            s.failures = s.failures.saturating_add(1);
                            let backoff = interval
                                .saturating_mul(1u64 << s.failures.min(16))
                                .min(BACKOFF_MAX_MS);
                            s.retry_at_ms = now_ms().saturating_add(backoff as i64);
                        });
                        tracing::warn!(topic = %topic.name, partition = p, error = %e, "tiering failed; the partition retries after a backoff, its records stay held locally");
                        row.error = Some(e.to_string());
                    }
                }
                let s = tiering.part(&topic.name, p).unwrap_or_default();
                row.uploaded_end = s.uploaded_end;
                row.local_beginning = s.local_beginning;
                row.remote_beginning = s.remote_beginning;
                report.partitions.push(row);
            }
        }
        Ok(report)
    }

    /// Upload what is due of one partition, then move its local beginning
    /// and apply remote retention. Returns the records uploaded.
    async fn tier_partition(
        &self,
        tiering: &Tiering,
        topic: &Arc<Topic>,
        partition: u32,
    ) -> Result<u64, BrokerError> {
        let name = &topic.name;
        let remote = &tiering.remote;
        let (store_beginning, store_end) = self.store.offsets(name, partition);
        let known = tiering.part(name, partition).unwrap_or_default();
        let mut end = match known.uploaded_end {
            Some(end) => end,
            None => {
                // Until the manifest is known, hold from the first local record.
                let first = self.first_position(name, partition, store_beginning);
                tiering.update(name, partition, |s| s.hold = Some(first));
                let manifest = remote.manifest(name, partition).await?;
                let end = manifest.as_ref().map_or(0, |m| m.end);
                let conflict = end > store_end;
                if conflict {
                    tracing::error!(topic = %name, partition, remote_end = end, local_end = store_end, "the remote tier holds offsets past this partition's end: not this topic's data; nothing is uploaded or read remotely for it");
                }
                tiering.update(name, partition, |s| {
                    s.uploaded_end = Some(end);
                    s.remote_beginning = manifest.as_ref().map(|m| m.beginning);
                    s.conflict = conflict;
                });
                end
            }
        };
        if tiering.part(name, partition).is_some_and(|s| s.conflict) {
            return Ok(0);
        }
        let object_bytes = self.config.tiered.object_bytes.max(1);
        let mut uploaded = 0u64;
        let (lag_records, lag_bytes, hold) = loop {
            // Taken before reading: a record the read cannot see yet lies
            // at or above it.
            let dispatched = self.store.dispatched_position();
            let flushed = self.store.commit_log().flushed();
            let active_base = self
                .store
                .commit_log()
                .segments()
                .last()
                .map_or(0, |s| s.base());
            let from = end.max(topic.base_offset(partition));
            let read = self.store.read(
                name,
                partition,
                QueueOffset::new(from),
                READ_RECORDS_MAX,
                usize::try_from(object_bytes).unwrap_or(usize::MAX),
            )?;
            // Flushed records only: an upload never holds a record that a
            // crash could take back.
            let ready: Vec<&StoredRecord> = read
                .records
                .iter()
                .take_while(|r| r.physical_offset().get() + u64::from(r.size()) <= flushed)
                .collect();
            let Some(first) = ready.first() else {
                let hold = read
                    .records
                    .first()
                    .map_or(dispatched, |r| r.physical_offset().get());
                break (0, 0, hold);
            };
            let pending: u64 = ready.iter().map(|r| payload(r)).sum();
            let sealed = first.physical_offset().get() < active_base;
            if pending < object_bytes && !sealed {
                let lag = store_end.saturating_sub(from);
                break (lag, pending, first.physical_offset().get());
            }
            let records: Vec<RemoteRecord> = ready.iter().map(|r| to_remote(r)).collect();
            let manifest = remote.upload(name, partition, &records).await?;
            let count = records.len() as u64;
            uploaded += count;
            tiering
                .counters
                .uploaded_records
                .fetch_add(count, Ordering::Relaxed);
            tracing::info!(topic = %name, partition, from = records[0].offset, to = manifest.end, records = count, bytes = pending, "uploaded to the remote tier");
            if manifest.end <= end {
                // Nothing advanced (cannot happen with ascending records):
                // stop rather than loop.
                return Err(BrokerError::ManifestStalled {
                    topic: name.to_string(),
                    partition,
                    end,
                });
            }
            end = manifest.end;
            tiering.update(name, partition, |s| {
                s.uploaded_end = Some(manifest.end);
                s.remote_beginning = Some(manifest.beginning);
            });
        };
        tiering.update(name, partition, |s| {
            s.hold = Some(hold);
            s.lag_records = lag_records;
            s.lag_bytes = lag_bytes;
        });
        self.move_local_beginning(tiering, topic, partition, end)?;
        let (retention_ms, retention_bytes) = topic.config.remote_retention();
        if let Some(manifest) = remote
            .enforce_retention(name, partition, now_ms(), retention_ms, retention_bytes)
            .await?
        {
            tiering.update(name, partition, |s| {
                s.remote_beginning = Some(manifest.beginning);
            });
        }
        Ok(uploaded)
    }

    /// Compact topics (`__consumer_offsets` too): after each clean of a
    /// partition, its sealed compacted segments replace its snapshot in the
    /// remote tier (`put_snapshot`), so a restore brings the table and the
    /// committed offsets back. Files are read on the blocking pool; a set
    /// that changed while it was read (a clean swapping segments) is not
    /// sent, and the next round tries again. Failures are logged, counted
    /// and retried at the next round.
    async fn snapshot_compact(
        &self,
        tiering: &Tiering,
        topic: &Arc<Topic>,
        report: &mut RoundReport,
    ) {
        for status in self.cleaner.status(&topic.name) {
            let p = status.partition;
            let key = (Arc::clone(&topic.name), p);
            let done = tiering
                .snapshots
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                .copied();
            if status.runs == 0 || done == Some(status.runs) {
                continue;
            }
            let Some(log) = self.logs.log(&topic.name, p) else {
                continue;
            };
            let read = tokio::task::spawn_blocking(move || sealed_files(&log)).await;
            let files = match read {
                Ok(Ok(Some(files))) => files,
                Ok(Ok(None)) => continue,
                Ok(Err(e)) => {
                    tracing::warn!(topic = %topic.name, partition = p, error = %e, "cannot read the compacted segments for a snapshot; retrying at the next round");
                    continue;
                }
                Err(e) => {
                    tracing::error!(error = %e, "snapshot read task failed");
                    continue;
                }
            };
            let (files, next_offset) = files;
            let count = files.len();
            let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
            match tiering
                .remote
                .put_snapshot(&topic.name, p, files, next_offset)
                .await
            {
                Ok(_) => {
                    tiering
                        .snapshots
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(key, status.runs);
                    tiering
                        .counters
                        .snapshots_uploaded
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::info!(topic = %topic.name, partition = p, files = count, bytes, next_offset, "compacted segments uploaded as the partition's snapshot");
                    report.snapshots.push((topic.name.to_string(), p));
                }
                Err(e) => {
                    tiering
                        .counters
                        .snapshot_errors
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(topic = %topic.name, partition = p, error = %e, "snapshot not uploaded; retrying at the next round");
                }
            }
        }
    }

    /// The CommitLog position of the partition's first local record, or the
    /// dispatched position if it has none.
    fn first_position(&self, topic: &str, partition: u32, from: u64) -> u64 {
        let dispatched = self.store.dispatched_position();
        self.store
            .read(topic, partition, QueueOffset::new(from), 1, 1)
            .ok()
            .and_then(|r| r.records.first().map(|r| r.physical_offset().get()))
            .unwrap_or(dispatched)
    }

    /// `local.retention.*` over uploaded records only (`uploaded_end`).
    fn move_local_beginning(
        &self,
        tiering: &Tiering,
        topic: &Topic,
        partition: u32,
        uploaded_end: u64,
    ) -> Result<(), BrokerError> {
        let name = &topic.name;
        let (beginning, end) = self.store.offsets(name, partition);
        let current = tiering
            .part(name, partition)
            .map_or(0, |s| s.local_beginning)
            .max(beginning);
        let (ms, bytes) = topic.config.local_retention();
        let mut wanted = current;
        if let Some(ms) = ms {
            let cutoff = now_ms().saturating_sub(ms);
            wanted = wanted.max(self.store.offset_for_timestamp(name, partition, cutoff)?);
        }
        if let Some(bytes) = bytes {
            let keep = self.records_within(name, partition, current, end, bytes);
            wanted = wanted.max(end.saturating_sub(keep));
        }
        let next = wanted.min(uploaded_end).max(current);
        if next > current {
            tracing::info!(topic = %name, partition, from = current, to = next, "local beginning moved (local.retention.*): older offsets are read from the remote tier");
        }
        tiering.update(name, partition, |s| s.local_beginning = next);
        Ok(())
    }

    /// About how many of the newest records of `[from, end)` fit in `bytes`:
    /// from the sizes of a sample of ConsumeQueue units spread over the
    /// range (`usage::sample_units`; an estimate, as a partition's share of
    /// the shared CommitLog is).
    fn records_within(&self, topic: &str, partition: u32, from: u64, end: u64, bytes: u64) -> u64 {
        let Some(queue) = self.store.consume_queues().get(topic, partition) else {
            return end - from.min(end);
        };
        let records = end.saturating_sub(from);
        if records == 0 {
            return 0;
        }
        let (sampled, sampled_bytes) = crate::usage::sample_units(&queue, from, end);
        if sampled == 0 || sampled_bytes == 0 {
            return records;
        }
        let average = sampled_bytes.div_ceil(sampled).max(1);
        (bytes / average).min(records)
    }

    /// What the remote tier adds to a partition's reads: `None` unless it
    /// is a tiered delete topic on a server with a remote tier.
    pub(crate) fn tiered_bounds(&self, topic: &Topic, partition: u32) -> Option<TieredBounds> {
        let tiering = self.tiering.as_ref()?;
        if topic.config.cleanup_policy.compacts() || !topic.config.remote_storage_enable {
            return None;
        }
        let state = tiering.part(&topic.name, partition).unwrap_or_default();
        if state.conflict {
            return None;
        }
        Some(TieredBounds {
            local_beginning: state.local_beginning,
            remote_beginning: state.remote_beginning,
        })
    }

    /// Up to `max_records` remote records of a partition from `from` on.
    pub(crate) async fn read_remote_records(
        &self,
        topic: &Topic,
        partition: u32,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<RemoteRecord>, BrokerError> {
        let Some(tiering) = &self.tiering else {
            return Err(BrokerError::TieringOff);
        };
        tiering
            .counters
            .remote_reads
            .fetch_add(1, Ordering::Relaxed);
        let read = tiering
            .remote
            .read(&topic.name, partition, from, max_records, max_bytes)
            .await;
        let read = match read {
            // Remote retention moved the beginning since it was last read:
            // read on from there.
            Err(TieredError::OutOfRange { beginning, .. }) if beginning > from => {
                tiering.update(&topic.name, partition, |s| {
                    s.remote_beginning = Some(beginning);
                });
                tiering
                    .remote
                    .read(&topic.name, partition, beginning, max_records, max_bytes)
                    .await
            }
            other => other,
        };
        read.map_err(|source| {
            tiering
                .counters
                .remote_read_errors
                .fetch_add(1, Ordering::Relaxed);
            BrokerError::Tiered { source }
        })
    }

    /// A topic of this name may be created (its remote data is not being
    /// deleted); always true without a remote tier.
    pub(crate) fn check_tiered_create(&self, name: &str) -> Result<(), BrokerError> {
        match &self.tiering {
            Some(t) => t.check_create(name),
            None => Ok(()),
        }
    }

    /// Tiering stats (`None` without a remote tier).
    pub fn tiering_stats(&self) -> Option<TieringStats> {
        self.tiering.as_ref().map(Tiering::stats)
    }
}

/// [`Broker::tiered_bounds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TieredBounds {
    /// The local beginning `local.retention.*` moved (0: never moved).
    pub local_beginning: u64,
    /// The manifest's beginning, once a round read it.
    pub remote_beginning: Option<u64>,
}

/// A snapshot's files: (name, bytes).
type SnapshotFiles = Vec<(String, bytes::Bytes)>;

/// The sealed segments of a compacted log (all but the active, last one)
/// as (file name, bytes), and the log's next offset; `None` when it has
/// none or the set changed while it was read (a clean swapped segments,
/// or a flush renamed one).
pub(super) fn sealed_files(
    log: &tidelog_cleaner::CompactedLog,
) -> std::io::Result<Option<(SnapshotFiles, u64)>> {
    let shape = |log: &tidelog_cleaner::CompactedLog| -> Vec<(u64, u64)> {
        let segments = log.segments();
        let sealed = segments.len().saturating_sub(1);
        segments[..sealed]
            .iter()
            .map(|s| (s.base_offset(), s.len()))
            .collect()
    };
    let before = shape(log);
    if before.is_empty() {
        return Ok(None);
    }
    let next_offset = log.next_offset();
    let segments = log.segments();
    let mut files = Vec::with_capacity(before.len());
    for segment in &segments[..before.len()] {
        // Named by its base, as restore reads it: a segment a roll made
        // keeps a `.new` suffix on disk until the next flush.
        let name = tidelog_storage::fs_util::offset_file_name(segment.base_offset())
            + tidelog_cleaner::compacted::segment::LOG_SUFFIX;
        match std::fs::read(segment.path()) {
            Ok(bytes) => files.push((name, bytes::Bytes::from(bytes))),
            // Renamed since (that flush, or a clean's swap): the set moved.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    let same = shape(log) == before
        && files
            .iter()
            .zip(&before)
            .all(|((_, bytes), (_, len))| bytes.len() as u64 == *len);
    Ok(same.then_some((files, next_offset)))
}
