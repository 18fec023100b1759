//! The read side: records from the remote tier through ranged GETs and the
//! read-ahead cache.
//!
//! A read finds the first object holding offsets at or after `from` in the
//! manifest, its footer and index (one suffix GET, which also tells the
//! object's real size, so a truncated object is `Corrupt`, not a short
//! read), the index entry at or below `from`, then walks the frames from
//! there. Record bytes come in cached blocks of BLOCK_BYTES; a miss fetches
//! the missing blocks the read needs plus up to READ_AHEAD_BLOCKS more in
//! one GET. An offset in a gap answers from the next record, as local reads
//! do; one below the remote beginning is `OutOfRange`.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStoreExt};

use crate::cache::{Key, ObjectMeta, Value, BLOCK_BYTES, READ_AHEAD_BLOCKS};
use crate::error::{Result, TieredError};
use crate::format::{self, FOOTER_LEN, FRAME_HEAD_LEN, INDEX_ENTRY_LEN};
use crate::layout;
use crate::manifest::ObjectEntry;
use crate::record::RemoteRecord;
use crate::retry::retry;
use crate::stats::bump;
use crate::tier::{lock, unavailable, Inner, RemoteTier, Side};

/// The first GET of an object takes this much of its tail: the footer and,
/// for objects up to ~256 MiB at one index entry per 64 KiB, the index.
pub const TAIL_READ_BYTES: u64 = 64 * 1024;

/// One object being read: its path, its cache name and its checked meta.
struct Open {
    path: Path,
    name: Arc<str>,
    meta: Arc<ObjectMeta>,
}

fn corrupt(path: &Path, e: impl std::fmt::Display) -> TieredError {
    TieredError::corrupt(path.to_string(), e.to_string())
}

fn is_not_found(e: &TieredError) -> bool {
    matches!(
        e,
        TieredError::Unavailable {
            source: object_store::Error::NotFound { .. },
            ..
        }
    )
}

impl RemoteTier {
    /// Up to `max_records` records from `from` on, stopping before
    /// `max_bytes` (of framed record bytes) but returning at least one.
    /// Empty when `from` is at or past the manifest's end (the caller reads
    /// it locally) or the partition has nothing remote.
    pub async fn read(
        &self,
        topic: &str,
        partition: u32,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<RemoteRecord>> {
        let out = self
            .read_inner(topic, partition, from, max_records, max_bytes)
            .await;
        if let Err(e) = &out {
            if !matches!(e, TieredError::OutOfRange { .. }) {
                bump(&self.inner.counters.read_failures, 1);
                tracing::warn!(topic, partition, from, error = %e, "remote read failed");
            }
        }
        out
    }

    async fn read_inner(
        &self,
        topic: &str,
        partition: u32,
        from: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<RemoteRecord>> {
        layout::check_topic(topic)?;
        if max_records == 0 {
            return Ok(Vec::new());
        }
        let i = &self.inner;
        let side = Side::Read;
        let mut m = match i.cached_manifest(topic, partition) {
            Some(m) if from < m.end => Some(m),
            _ => i
                .load_manifest(topic, partition, side)
                .await?
                .0
                .map(Arc::new),
        };
        // An object the cached manifest lists can be gone when retention
        // (here or, wrongly configured, elsewhere) dropped it since: one
        // more try on the newest manifest, then it is damage.
        for attempt in 0..2 {
            let Some(manifest) = m.clone() else {
                return Ok(Vec::new());
            };
            if from < manifest.beginning {
                return Err(TieredError::OutOfRange {
                    topic: topic.to_string(),
                    partition,
                    offset: from,
                    beginning: manifest.beginning,
                });
            }
            if from >= manifest.end {
                return Ok(Vec::new());
            }
            bump(&i.counters.remote_reads, 1);
            let mut out = Vec::new();
            let mut bytes = 0usize;
            let mut at = from;
            let mut result = Ok(());
            for o in &manifest.objects[manifest.first_object_from(from)..] {
                match i
                    .read_object(
                        topic,
                        partition,
                        o,
                        at,
                        max_records,
                        max_bytes,
                        &mut out,
                        &mut bytes,
                    )
                    .await
                {
                    Ok(true) => break,
                    Ok(false) => at = o.last_offset + 1,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            match result {
                Ok(()) => return Ok(out),
                Err(e) if attempt == 0 && is_not_found(&e) => {
                    m = i
                        .load_manifest(topic, partition, side)
                        .await?
                        .0
                        .map(Arc::new);
                }
                Err(e) if is_not_found(&e) => {
                    return Err(TieredError::corrupt(
                        format!("remote tier of {topic}-{partition}"),
                        format!("an object the newest manifest lists is missing: {e}"),
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Vec::new())
    }
}

impl Inner {
    /// Reads records from one object into `out`; true when the read is
    /// complete (a bound reached).
    #[allow(clippy::too_many_arguments)]
    async fn read_object(
        &self,
        topic: &str,
        partition: u32,
        entry: &ObjectEntry,
        from: u64,
        max_records: usize,
        max_bytes: usize,
        out: &mut Vec<RemoteRecord>,
        bytes: &mut usize,
    ) -> Result<bool> {
        let path = layout::data_dir(&self.root, topic, partition).join(entry.name.as_str());
        let obj = self.open_object(path, entry).await?;
        let footer = obj.meta.footer;
        let records_end = footer.index_position;
        let start = format::seek(&obj.meta.index, from)
            .ok_or_else(|| corrupt(&obj.path, "an empty index"))?;
        let mut pos = start.position;
        let mut previous = None;
        while pos < records_end {
            let room = records_end - pos;
            if room < FRAME_HEAD_LEN as u64 {
                return Err(corrupt(
                    &obj.path,
                    format!("{room} bytes of a frame head at {pos}"),
                ));
            }
            let head = self
                .span(&obj, records_end, pos, FRAME_HEAD_LEN as u64)
                .await?;
            let (len, crc) = format::decode_frame_head(&head, room - FRAME_HEAD_LEN as u64)
                .map_err(|e| corrupt(&obj.path, format!("at {pos}: {e}")))?;
            let body = self
                .span(&obj, records_end, pos + FRAME_HEAD_LEN as u64, len as u64)
                .await?;
            let r = format::decode_body(body, crc)
                .map_err(|e| corrupt(&obj.path, format!("at {pos}: {e}")))?;
            format::check_next(previous, &r, &footer)
                .map_err(|e| corrupt(&obj.path, format!("at {pos}: {e}")))?;
            previous = Some(r.offset);
            pos += (FRAME_HEAD_LEN + len) as u64;
            if r.offset < from {
                continue;
            }
            let size = FRAME_HEAD_LEN + len;
            if !out.is_empty() && bytes.saturating_add(size) > max_bytes {
                return Ok(true);
            }
            *bytes += size;
            out.push(r);
            if out.len() >= max_records {
                return Ok(true);
            }
        }
        if previous != Some(footer.last_offset) {
            return Err(corrupt(
                &obj.path,
                format!(
                    "records end at {previous:?}, the footer says {}",
                    footer.last_offset
                ),
            ));
        }
        Ok(false)
    }

    /// The object's footer and index, from the cache or one suffix GET
    /// (two when the index is longer than the tail read), checked against
    /// the manifest's entry.
    async fn open_object(&self, path: Path, entry: &ObjectEntry) -> Result<Open> {
        let name: Arc<str> = Arc::from(path.as_ref());
        let key = Key::Meta(name.clone());
        let cached = lock(&self.cache).get(&key);
        if let Some(Value::Meta(meta)) = cached {
            bump(&self.counters.cache_hits, 1);
            return Ok(Open { path, name, meta });
        }
        bump(&self.counters.cache_misses, 1);
        let side = Side::Read;
        let tail_len = entry.bytes.min(TAIL_READ_BYTES);
        let got = retry(
            self.policy(side),
            "get footer",
            self.retries(side),
            || async {
                let opts = GetOptions::new().with_range(Some(GetRange::Suffix(tail_len)));
                let got = self.store.get_opts(&path, opts).await?;
                let size = got.meta.size;
                Ok((size, got.bytes().await?))
            },
        )
        .await
        .map_err(unavailable("get footer"))?;
        let (size, tail) = got;
        bump(&self.counters.remote_read_bytes, tail.len() as u64);
        if size != entry.bytes || tail.len() as u64 != tail_len {
            return Err(corrupt(
                &path,
                format!("{size} bytes, the manifest says {}", entry.bytes),
            ));
        }
        let footer = format::decode_footer(&tail[tail.len() - FOOTER_LEN..], size)
            .map_err(|e| corrupt(&path, e))?;
        if footer.base_offset != entry.base_offset
            || footer.last_offset != entry.last_offset
            || u64::from(footer.record_count) != entry.records
        {
            return Err(corrupt(&path, "the footer disagrees with the manifest"));
        }
        let index_len = u64::from(footer.index_count) * INDEX_ENTRY_LEN as u64;
        let index_bytes = if index_len + FOOTER_LEN as u64 <= tail_len {
            let at = (tail_len - FOOTER_LEN as u64 - index_len) as usize;
            tail.slice(at..at + index_len as usize)
        } else {
            let range = footer.index_position..footer.index_position + index_len;
            let b = retry(self.policy(side), "get index", self.retries(side), || {
                self.store.get_range(&path, range.clone())
            })
            .await
            .map_err(unavailable("get index"))?;
            bump(&self.counters.remote_read_bytes, b.len() as u64);
            b
        };
        let index = format::decode_index(&index_bytes, &footer).map_err(|e| corrupt(&path, e))?;
        let meta = Arc::new(ObjectMeta { footer, index });
        let evicted = lock(&self.cache).insert(key, Value::Meta(meta.clone()));
        bump(&self.counters.cache_evictions, evicted);
        Ok(Open { path, name, meta })
    }

    /// `len` bytes of the object's records section from `start`, from
    /// cached blocks; missing blocks (plus read-ahead) in one GET each run.
    async fn span(&self, obj: &Open, records_end: u64, start: u64, len: u64) -> Result<Bytes> {
        let end = start + len;
        if len == 0 || end > records_end {
            return Err(corrupt(
                &obj.path,
                format!("bytes {start}..{end} past the records"),
            ));
        }
        let first = start / BLOCK_BYTES;
        let last = (end - 1) / BLOCK_BYTES;
        let last_block = (records_end - 1) / BLOCK_BYTES;
        // Read ahead only as far as the cache can keep.
        let limit = self.cfg.read_cache_bytes / BLOCK_BYTES;
        let ahead = READ_AHEAD_BLOCKS.min(limit.saturating_sub(1));
        let mut parts: Vec<Bytes> = Vec::with_capacity((last - first + 1) as usize);
        let mut b = first;
        while b <= last {
            let key = Key::Block(obj.name.clone(), b);
            let cached = lock(&self.cache).get(&key);
            if let Some(Value::Block(block)) = cached {
                bump(&self.counters.cache_hits, 1);
                parts.push(block);
                b += 1;
                continue;
            }
            bump(&self.counters.cache_misses, 1);
            let fetch_last = last.max(b + ahead).min(last_block);
            let range = b * BLOCK_BYTES..((fetch_last + 1) * BLOCK_BYTES).min(records_end);
            let data = retry(
                self.policy(Side::Read),
                "get records",
                self.retries(Side::Read),
                || self.store.get_range(&obj.path, range.clone()),
            )
            .await
            .map_err(unavailable("get records"))?;
            bump(&self.counters.remote_read_bytes, data.len() as u64);
            if data.len() as u64 != range.end - range.start {
                return Err(corrupt(
                    &obj.path,
                    format!("{} bytes for the range {range:?}", data.len()),
                ));
            }
            let mut cache = lock(&self.cache);
            for n in b..=fetch_last {
                let at = ((n - b) * BLOCK_BYTES) as usize;
                let block = data.slice(at..(at + BLOCK_BYTES as usize).min(data.len()));
                if n <= last {
                    parts.push(block.clone());
                }
                let evicted = cache.insert(Key::Block(obj.name.clone(), n), Value::Block(block));
                bump(&self.counters.cache_evictions, evicted);
            }
            b = fetch_last + 1;
        }
        let skip = (start - first * BLOCK_BYTES) as usize;
        if let [one] = parts.as_slice() {
            return Ok(one.slice(skip..skip + len as usize));
        }
        let mut joined = BytesMut::with_capacity(len as usize);
        let mut need = len as usize;
        let mut skip = skip;
        for p in &parts {
            let take = (p.len() - skip).min(need);
            joined.extend_from_slice(&p[skip..skip + take]);
            need -= take;
            skip = 0;
        }
        Ok(joined.freeze())
    }
}
