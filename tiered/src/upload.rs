//! The write side: uploads of record objects, remote retention, compacted
//! snapshots.
//!
//! Crash safety, step by step (each step is one object-store call, any of
//! which may be the last):
//! 1. put each record object (same records, same bytes, same name), then
//!    HEAD it to check it is there whole;
//! 2. create the next manifest version naming them;
//! 3. delete manifest versions beyond the last KEEP_VERSIONS.
//!
//! A crash before 2 leaves objects no manifest lists: garbage, overwritten
//! by the retry with the same bytes or swept by `enforce_retention`. A
//! crash after 2 leaves the new manifest, and the retry finds its records
//! below the manifest's end and skips them. So the newest manifest only
//! ever lists objects that were durable before it was written.
//! Retention and snapshots are ordered the same way: the manifest that no
//! longer lists an object is written before the object is deleted.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};

use crate::error::{Result, TieredError};
use crate::format::{self, framed_len};
use crate::layout;
use crate::manifest::{Manifest, ObjectEntry, Snapshot, SnapshotFile};
use crate::record::RemoteRecord;
use crate::retry::retry;
use crate::stats::bump;
use crate::tier::{lock, now_ms, unavailable, Inner, RemoteTier};

/// Objects above this size go up as multipart uploads.
pub const MULTIPART_THRESHOLD_BYTES: usize = 16 * 1024 * 1024;
/// The part size of multipart uploads (S3's minimum is 5 MiB).
pub const MULTIPART_PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts of one multipart upload in flight at once.
const MULTIPART_CONCURRENCY: usize = 4;

/// Splits records into runs of about `object_bytes` encoded bytes (at least
/// one record each). Deterministic: the same records split the same way.
pub fn split(records: &[RemoteRecord], object_bytes: u64) -> Vec<&[RemoteRecord]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut size = 0u64;
    for (i, r) in records.iter().enumerate() {
        let len = framed_len(r) as u64;
        if i > start && size + len > object_bytes {
            out.push(&records[start..i]);
            start = i;
            size = 0;
        }
        size += len;
    }
    if start < records.len() {
        out.push(&records[start..]);
    }
    out
}

/// The manifest after `base` with the uploaded `entries` appended, or
/// None when nothing is to append. Entries ending below the end are
/// skipped (a retry, or another writer was first); only a run that starts
/// at or after the end may follow it, since appending past an overlap
/// would leave a hole in the remote log that the end claims is uploaded.
pub fn append_run(base: &Manifest, entries: &[ObjectEntry]) -> Option<Manifest> {
    let skip = entries
        .iter()
        .take_while(|e| e.last_offset < base.end)
        .count();
    let rest = &entries[skip..];
    let first = rest.first()?;
    if first.base_offset < base.end {
        tracing::warn!(topic = %base.topic, partition = base.partition, end = base.end, base_offset = first.base_offset, "another writer advanced the manifest across this upload; not appending");
        return None;
    }
    let mut m = base.clone();
    m.objects.extend(rest.iter().cloned());
    m.end = rest[rest.len() - 1].last_offset + 1;
    Some(m)
}

/// The manifest a commit that always has something to write returned.
fn written(m: Option<Manifest>, topic: &str, partition: u32) -> Result<Manifest> {
    m.ok_or_else(|| {
        TieredError::corrupt(
            format!("manifest of {topic}-{partition}"),
            "none after a commit that had an update",
        )
    })
}

impl Inner {
    /// Puts an object (multipart when large), retried, then checks its
    /// size with a HEAD.
    pub async fn put_object(&self, path: &Path, bytes: Bytes, retries: &AtomicU64) -> Result<()> {
        retry(&self.policy, "put object", retries, || async {
            if bytes.len() > MULTIPART_THRESHOLD_BYTES {
                let upload = self.store.put_multipart(path).await?;
                let mut w = WriteMultipart::new_with_chunk_size(upload, MULTIPART_PART_BYTES);
                for part in bytes.chunks(MULTIPART_PART_BYTES) {
                    w.wait_for_capacity(MULTIPART_CONCURRENCY).await?;
                    w.put(bytes.slice_ref(part));
                }
                w.finish().await.map(drop)
            } else {
                let opts = PutOptions::from(PutMode::Overwrite);
                self.store
                    .put_opts(path, PutPayload::from(bytes.clone()), opts)
                    .await
                    .map(drop)
            }
        })
        .await
        .map_err(unavailable("put object"))?;
        let meta = retry(&self.policy, "head", retries, || self.store.head(path))
            .await
            .map_err(unavailable("head"))?;
        if meta.size != bytes.len() as u64 {
            return Err(TieredError::corrupt(
                path.to_string(),
                format!("{} bytes after a put of {}", meta.size, bytes.len()),
            ));
        }
        Ok(())
    }
}

impl RemoteTier {
    /// Uploads `records` (ascending offsets, gaps allowed) as one or more
    /// objects of about `object_bytes`, then advances the manifest, and
    /// returns it. Records below the manifest's end are skipped (a retry
    /// after a crash that wrote the manifest uploads nothing again).
    /// Idempotent: a retry after a crash at any step converges.
    pub async fn upload(
        &self,
        topic: &str,
        partition: u32,
        records: &[RemoteRecord],
    ) -> Result<Manifest> {
        let out = self.upload_inner(topic, partition, records).await;
        if let Err(e) = &out {
            bump(&self.inner.counters.upload_failures, 1);
            tracing::warn!(topic, partition, error = %e, "upload failed");
        }
        out
    }

    async fn upload_inner(
        &self,
        topic: &str,
        partition: u32,
        records: &[RemoteRecord],
    ) -> Result<Manifest> {
        layout::check_topic(topic)?;
        if let Some(w) = records.windows(2).find(|w| w[1].offset <= w[0].offset) {
            return Err(TieredError::invalid(format!(
                "offsets not ascending: {} after {}",
                w[1].offset, w[0].offset
            )));
        }
        let i = &self.inner;
        let retries = &i.counters.upload_retries;
        let lock = i.partition_lock(topic, partition);
        let _guard = lock.lock().await;
        i.ensure_format(retries).await?;
        let (current, versions) = i.load_manifest(topic, partition, retries).await?;
        let fresh = match &current {
            Some(m) => &records[records.partition_point(|r| r.offset < m.end)..],
            None => records,
        };
        if fresh.is_empty() {
            return current.ok_or_else(|| {
                TieredError::invalid(format!("{topic}-{partition}: no records to upload"))
            });
        }
        let data = layout::data_dir(&i.root, topic, partition);
        let mut entries = Vec::new();
        for run in split(fresh, i.cfg.object_bytes) {
            let enc = format::encode(run).map_err(|e| {
                TieredError::invalid(format!(
                    "records {}..={}: {e}",
                    run[0].offset,
                    run[run.len() - 1].offset
                ))
            })?;
            let name = layout::object_name(enc.base_offset, enc.last_offset);
            i.put_object(
                &data.clone().join(name.as_str()),
                enc.bytes.clone(),
                retries,
            )
            .await?;
            bump(&i.counters.uploaded_bytes, enc.bytes.len() as u64);
            bump(&i.counters.uploaded_objects, 1);
            tracing::info!(
                topic,
                partition,
                base_offset = enc.base_offset,
                last_offset = enc.last_offset,
                records = enc.records,
                bytes = enc.bytes.len(),
                "uploaded a record object"
            );
            entries.push(ObjectEntry {
                name,
                base_offset: enc.base_offset,
                last_offset: enc.last_offset,
                records: enc.records,
                bytes: enc.bytes.len() as u64,
                max_timestamp_ms: enc.max_timestamp_ms,
                uploaded_ms: now_ms(),
                crc32c: enc.crc32c,
            });
        }
        let committed = i
            .commit(topic, partition, current, versions, |cur| {
                let base = cur
                    .cloned()
                    .unwrap_or_else(|| Manifest::empty(topic, partition, entries[0].base_offset));
                Ok(append_run(&base, &entries))
            })
            .await?;
        let m = written(committed, topic, partition)?;
        tracing::info!(
            topic,
            partition,
            version = m.version,
            beginning = m.beginning,
            end = m.end,
            objects = m.objects.len(),
            "remote tier advanced"
        );
        Ok(m)
    }

    /// The remote tier of a delete topic bounded by retention.ms /
    /// retention.bytes (None or negative = unbounded): drops whole objects
    /// from the front, by the age of their newest record or while the rest
    /// still holds `retention_bytes` (Kafka's rule). The manifest goes
    /// first, the objects after; objects no manifest lists below its end
    /// (left by a crash) are swept too. Returns the new manifest.
    pub async fn enforce_retention(
        &self,
        topic: &str,
        partition: u32,
        now_ms: i64,
        retention_ms: Option<i64>,
        retention_bytes: Option<u64>,
    ) -> Result<Option<Manifest>> {
        layout::check_topic(topic)?;
        let retention_ms = retention_ms.filter(|&r| r >= 0);
        let i = &self.inner;
        let retries = &i.counters.upload_retries;
        let lock = i.partition_lock(topic, partition);
        let _guard = lock.lock().await;
        let (current, versions) = i.load_manifest(topic, partition, retries).await?;
        if current.is_none() {
            return Ok(None);
        }
        let new = i
            .commit(topic, partition, current, versions, |cur| {
                let Some(m) = cur else { return Ok(None) };
                let mut rest = m.object_bytes();
                let mut drop = 0;
                for o in &m.objects {
                    let by_time =
                        retention_ms.is_some_and(|r| now_ms.saturating_sub(o.max_timestamp_ms) > r);
                    let by_size = retention_bytes.is_some_and(|r| rest - o.bytes >= r);
                    if !by_time && !by_size {
                        break;
                    }
                    rest -= o.bytes;
                    drop += 1;
                }
                if drop == 0 {
                    return Ok(None);
                }
                let mut next = m.clone();
                let dropped: Vec<ObjectEntry> = next.objects.drain(..drop).collect();
                next.beginning = next.beginning.max(dropped[drop - 1].last_offset + 1);
                tracing::info!(
                    topic,
                    partition,
                    objects = drop,
                    beginning = next.beginning,
                    "remote retention drops objects"
                );
                Ok(Some(next))
            })
            .await?;
        if let Some(m) = &new {
            self.sweep_data(m).await?;
        }
        Ok(new)
    }

    /// Deletes the partition's objects that `m` (the newest manifest) does
    /// not list and that start below its end: dropped by retention, or put
    /// by an upload that crashed before its manifest. None of them can ever
    /// be listed again (a manifest only appends objects starting at or
    /// above its end); an object starting at or above the end may be an
    /// upload in flight, and is left alone.
    async fn sweep_data(&self, m: &Manifest) -> Result<()> {
        let i = &self.inner;
        let retries = &i.counters.upload_retries;
        let data = layout::data_dir(&i.root, &m.topic, m.partition);
        let listed: BTreeSet<&str> = m.objects.iter().map(|o| o.name.as_str()).collect();
        for path in i.list(&data, retries).await? {
            let Some(name) = path.filename() else {
                continue;
            };
            let below_end = layout::parse_object_name(name).is_some_and(|(base, _)| base < m.end);
            if below_end && !listed.contains(name) {
                i.delete(&path, retries).await?;
                lock(&i.cache).remove_prefix(path.as_ref());
                bump(&i.counters.objects_deleted, 1);
                tracing::info!(path = %path, "deleted an object no manifest lists");
            }
        }
        Ok(())
    }

    /// Compact topics: replaces the partition's snapshot with these files
    /// (the cleaned, sealed compacted segments) and returns the new
    /// manifest; the previous snapshot's files are deleted after it.
    pub async fn put_snapshot(
        &self,
        topic: &str,
        partition: u32,
        files: Vec<(String, Bytes)>,
        next_offset: u64,
    ) -> Result<Manifest> {
        layout::check_topic(topic)?;
        let mut names = BTreeSet::new();
        for (name, _) in &files {
            layout::check_file_name(name)?;
            if !names.insert(name.as_str()) {
                return Err(TieredError::invalid(format!(
                    "snapshot file {name:?} twice"
                )));
            }
        }
        let i = &self.inner;
        let retries = &i.counters.upload_retries;
        let lock = i.partition_lock(topic, partition);
        let _guard = lock.lock().await;
        i.ensure_format(retries).await?;
        let (current, versions) = i.load_manifest(topic, partition, retries).await?;
        // The directory is named after the version this snapshot is meant
        // for; a crash before the manifest leaves it for the retry to
        // overwrite, and the lock keeps two snapshots of one process apart.
        let dir_version = current.as_ref().map_or(0, |m| m.version) + 1;
        let dir = layout::snapshot_dir(&i.root, topic, partition, dir_version);
        let mut entries = Vec::with_capacity(files.len());
        for (name, bytes) in &files {
            i.put_object(&dir.clone().join(name.as_str()), bytes.clone(), retries)
                .await?;
            bump(&i.counters.uploaded_bytes, bytes.len() as u64);
            entries.push(SnapshotFile {
                name: name.clone(),
                bytes: bytes.len() as u64,
                crc32c: crc32c::crc32c(bytes),
            });
        }
        let snapshot = Snapshot {
            version: dir_version,
            next_offset,
            files: entries,
            uploaded_ms: now_ms(),
        };
        let m = i
            .commit(topic, partition, current, versions, |cur| {
                let mut m = cur
                    .cloned()
                    .unwrap_or_else(|| Manifest::empty(topic, partition, next_offset));
                m.snapshot = Some(snapshot.clone());
                m.end = m.end.max(next_offset);
                if m.objects.is_empty() {
                    m.beginning = m.end;
                }
                Ok(Some(m))
            })
            .await?;
        let m = written(m, topic, partition)?;
        tracing::info!(
            topic,
            partition,
            version = m.version,
            files = files.len(),
            next_offset,
            "snapshot uploaded"
        );
        // Every other snapshot directory is the previous snapshot or a
        // crashed attempt's: delete it now the new manifest is durable.
        let all = layout::partition_dir(&i.root, topic, partition).join("snapshot");
        let keep = format!("{dir}/");
        for path in i.list(&all, retries).await? {
            if !path.as_ref().starts_with(&keep) {
                i.delete(&path, retries).await?;
            }
        }
        Ok(m)
    }

    /// The newest snapshot's files (for a restore), each checked against
    /// the manifest's size and CRC.
    pub async fn snapshot_files(
        &self,
        topic: &str,
        partition: u32,
    ) -> Result<Vec<(String, Bytes)>> {
        layout::check_topic(topic)?;
        let i = &self.inner;
        let retries = &i.counters.read_retries;
        let (m, _) = i.load_manifest(topic, partition, retries).await?;
        let Some(snapshot) = m.and_then(|m| m.snapshot) else {
            return Ok(Vec::new());
        };
        let dir = layout::snapshot_dir(&i.root, topic, partition, snapshot.version);
        let mut out = Vec::with_capacity(snapshot.files.len());
        for f in &snapshot.files {
            let path = dir.clone().join(f.name.as_str());
            let bytes = i
                .get(&path, "get snapshot", retries)
                .await?
                .ok_or_else(|| {
                    TieredError::corrupt(path.to_string(), "listed in the manifest, missing")
                })?;
            let crc = crc32c::crc32c(&bytes);
            if bytes.len() as u64 != f.bytes || crc != f.crc32c {
                return Err(TieredError::corrupt(
                    path.to_string(),
                    format!(
                        "{} bytes with CRC {crc:#010x}, the manifest says {} with {:#010x}",
                        bytes.len(),
                        f.bytes,
                        f.crc32c
                    ),
                ));
            }
            out.push((f.name.clone(), bytes));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: u64, n: usize) -> RemoteRecord {
        RemoteRecord {
            offset,
            timestamp_ms: 0,
            key: None,
            value: Some(Bytes::from(vec![1u8; n])),
            headers: vec![],
        }
    }

    fn entry(base: u64, last: u64) -> ObjectEntry {
        ObjectEntry {
            name: layout::object_name(base, last),
            base_offset: base,
            last_offset: last,
            records: last - base + 1,
            bytes: 100,
            max_timestamp_ms: 0,
            uploaded_ms: 0,
            crc32c: 0,
        }
    }

    #[test]
    fn append_run_never_leaves_a_hole() {
        let mut m = Manifest::empty("t", 0, 0);
        m.objects.push(entry(0, 49));
        m.end = 50;
        // Another writer got to 50 first with a different split: the
        // overlapping [40, 89] cannot go on, and neither can [90, 120]
        // after it (50..90 would be missing remotely).
        assert_eq!(append_run(&m, &[entry(40, 89), entry(90, 120)]), None);
        // All below the end: nothing to do.
        assert_eq!(append_run(&m, &[entry(10, 20), entry(21, 49)]), None);
        // A retry whose first object is already listed appends the rest.
        let next = append_run(&m, &[entry(0, 49), entry(50, 60), entry(63, 70)]).unwrap();
        assert_eq!(next.end, 71);
        assert_eq!(next.objects.len(), 3);
        // A gap after the end is the partition's own gap: fine.
        let next = append_run(&m, &[entry(55, 60)]).unwrap();
        assert_eq!((next.end, next.objects[1].base_offset), (61, 55));
        next.check().unwrap();
    }

    #[test]
    fn split_is_by_size_and_keeps_every_record() {
        let records: Vec<_> = (0..10).map(|o| rec(o, 1000)).collect();
        let runs = split(&records, 3000);
        assert!(runs.iter().all(|r| !r.is_empty()));
        assert_eq!(runs.iter().map(|r| r.len()).sum::<usize>(), 10);
        assert!(runs.len() >= 4, "{}", runs.len());
        // A record larger than the target is an object of its own.
        let big = vec![rec(0, 10), rec(1, 10_000), rec(2, 10)];
        let runs = split(&big, 1000);
        assert_eq!(runs.len(), 3);
        assert!(split(&[], 1000).is_empty());
    }
}
