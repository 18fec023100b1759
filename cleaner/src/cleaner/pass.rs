//! One cleaning pass over a log, after [`super::select`] picked it:
//!
//! 1. Build key fingerprint → newest offset over the dirty range, in the
//!    thread's share of `dedupe_buffer_bytes`. If the map fills, the pass
//!    covers only what it mapped (a partial pass); the next pass continues.
//! 2. Group the segments below the mapped end so a cleaned segment stays
//!    under `segment.bytes`; rewrite each group keeping a record unless a
//!    newer record of its key exists, or it is a tombstone whose delete
//!    horizon has passed and that lies below the mapped end (past it, the
//!    map may not know its key, whose older value this pass may keep: see
//!    `keep`). A tombstone kept for the first time is stamped
//!    with horizon now + `delete.retention.ms`.
//! 3. Hand each group's `.cleaned` file to [`super::swap`]; the threads
//!    then store the checkpoint at the mapped end.
//!
//! At copy speed: the map uses only the part of its table the dirty range's
//! record count can fill ([`OffsetMap::clear_for`]); keys are hashed a batch
//! ([`MAP_BATCH`]) ahead of their puts and lookups, with each home slot
//! prefetched, so the batch's cache misses overlap; keys are borrowed from
//! the read buffer, not counted references; and kept records go to the
//! cleaned file in writes of about [`WRITE_BYTES`], not one write a record.
//! Each record's CRC is checked once per read (the build and the rewrite each
//! read it; the build's check is what lets a damaged key never reach the
//! map), and written bytes are the read bytes, so nothing is re-encoded
//! except the tombstones a pass stamps.
//!
//! Durable copies only. The dispatcher copies a record into its compacted
//! log as soon as the record is in the CommitLog's page cache, before the
//! CommitLog is flushed (always under `flush: async`, and under `sync` until
//! the group commit returns). After a power loss recovery drops the copies
//! whose CommitLog bytes were lost (`CompactedLog::truncate_from_physical`).
//! A pass that let such a copy supersede an older, durable record of its key
//! would lose the key: the older record cleaned away, the newer one dropped.
//! So a pass first notes the log's end, then makes the CommitLog durable
//! ([`super::CopySource::make_durable`]), and bounds `first_uncleanable` by the
//! noted end: every copy below it was dispatched from CommitLog bytes
//! written before that flush, so only durable copies are mapped, supersede
//! older records, or are rewritten.
//!
//! A failed partition's next pass first reconciles its files (see
//! [`super::swap`]) and takes its dirty range anew.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::select::{cleanable, Cleanable};
use super::{RunStats, Shared};
use crate::compacted::format::CompactedRecord;
use crate::compacted::log::{lock, CompactedLog};
use crate::compacted::segment::{Segment, SegmentReader, CLEANED_SUFFIX, LOG_SUFFIX};
use crate::compacted::CompactTopicConfig;
use crate::error::{CleanerError, CorruptionKind, Result};
use crate::fault::FaultPoint;
use crate::offset_map::{KeyHash, OffsetMap, PutOutcome};
use tidelog_storage::fs_util::offset_file_name;

/// Keys hashed and prefetched ahead of their puts and lookups: enough
/// independent cache misses in flight to hide memory latency, few enough that
/// the batch's slots are still cached when it is processed.
const MAP_BATCH: usize = 32;

/// Kept records are written to the cleaned file in writes of about this
/// many bytes.
const WRITE_BYTES: usize = 1 << 20;

/// A kept record not yet written holds on to the read buffer it was sliced
/// from (no copy). So they are also written once this many bytes were read
/// since the first of them, which bounds the read buffers held to about
/// this much (plus one), however few records a pass keeps.
const HELD_READ_BYTES: u64 = 8 << 20;

/// A record whose key is hashed and whose home slot is being fetched.
struct Hashed<T> {
    hash: KeyHash,
    item: T,
}

impl Shared {
    /// The next record of `seg` through `reader`, counted in `stats` and
    /// the throttle as read.
    pub(super) fn read_counted(
        &self,
        reader: &mut SegmentReader<'_>,
        stats: &mut RunStats,
    ) -> Result<Option<CompactedRecord>> {
        let Some(rec) = reader.next_record()? else {
            return Ok(None);
        };
        stats.bytes_read += rec.len() as u64;
        self.throttle.account(rec.len() as u64);
        Ok(Some(rec))
    }

    /// If the partition's last pass failed, reconcile its files and
    /// segment list (see [`super::swap`]) and return its dirty range anew, computed
    /// over the segments as they are now. `None`: nothing to do. A failure
    /// here fails the pass, and the next one tries again.
    fn reconcile_after_failure(
        &self,
        log: &CompactedLog,
        cfg: &CompactTopicConfig,
        now: i64,
    ) -> Result<Option<Cleanable>> {
        let tp = log.topic_partition();
        let key = (tp.topic().to_string(), tp.partition());
        if !lock(&self.states)
            .get(&key)
            .is_some_and(|s| s.reconcile_first)
        {
            return Ok(None);
        }
        log.reconcile()?;
        lock(&self.states).entry(key).or_default().reconcile_first = false;
        let checkpoint = lock(&self.checkpoint).get(tp.topic(), tp.partition());
        Ok(Some(cleanable(log, cfg, checkpoint, now)))
    }

    /// One cleaning pass over `log`.
    pub(super) fn run(
        &self,
        log: &CompactedLog,
        cfg: &CompactTopicConfig,
        info: &Cleanable,
        map: &mut OffsetMap,
    ) -> Result<RunStats> {
        let began = Instant::now();
        let now = self.logs.now_ms();
        let refreshed;
        let info = match self.reconcile_after_failure(log, cfg, now)? {
            Some(fresh) => {
                refreshed = fresh;
                &refreshed
            }
            None => info,
        };
        // Durable copies only (module doc): note the end, then flush.
        let durable_end = log.next_offset();
        self.source
            .make_durable()
            .map_err(|source| CleanerError::Store {
                path: self.data_dir.join(tidelog_storage::store::COMMITLOG_DIR),
                source,
            })?;
        let bounded = Cleanable {
            first_uncleanable: info.first_uncleanable.min(durable_end),
            ..info.clone()
        };
        let info = &bounded;
        let mut stats = RunStats {
            first_dirty: info.first_dirty,
            end_offset: info.first_dirty,
            ..RunStats::default()
        };
        // 1. Map the dirty range.
        let segments = log.segments();
        let dirty: Vec<&Arc<Segment>> = segments
            .iter()
            .filter(|s| {
                s.base_offset() < info.first_uncleanable
                    && s.stats().last_offset.is_some_and(|l| l >= info.first_dirty)
            })
            .collect();
        // Every key put is a record's, and every record's offset is in the
        // range: either count bounds the keys.
        let records: u64 = dirty.iter().map(|s| s.stats().records).sum();
        let offsets = info.first_uncleanable.saturating_sub(info.first_dirty);
        map.clear_for(records.min(offsets));
        let mut batch: Vec<Hashed<(u64, u64)>> = Vec::with_capacity(MAP_BATCH);
        'build: for seg in dirty {
            let mut reader = seg.reader(seg.position_for(info.first_dirty));
            let mut range_ended = false;
            loop {
                let at = reader.position();
                let Some(rec) = self.read_counted(&mut reader, &mut stats)? else {
                    break;
                };
                let offset = rec.offset.get();
                if offset >= info.first_uncleanable {
                    range_ended = true;
                    break;
                }
                if offset < info.first_dirty {
                    continue;
                }
                let Some(key) = rec.key_slice() else { continue };
                let hash = map.hash(key);
                map.prefetch(&hash);
                batch.push(Hashed {
                    hash,
                    item: (offset, at),
                });
                if batch.len() == MAP_BATCH {
                    let complete = put_batch(map, &batch, seg, &mut stats)?;
                    batch.clear();
                    if !complete {
                        break 'build;
                    }
                }
            }
            // The rest at each segment's end, so a record out of order is
            // reported in its own segment.
            let complete = put_batch(map, &batch, seg, &mut stats)?;
            batch.clear();
            if !complete || range_ended {
                break;
            }
        }
        stats.keys = map.len() as u64;
        stats.map_utilization = map.utilization();
        // 2. Which segments to rewrite: everything below the mapped end; on
        // a tombstone-only pass, everything cleanable.
        let upper = if info.tombstones_due {
            stats.end_offset.max(info.first_uncleanable)
        } else {
            stats.end_offset
        };
        let active_base = segments.last().map_or(u64::MAX, |s| s.base_offset());
        let to_clean: Vec<Arc<Segment>> = segments
            .iter()
            .filter(|s| s.base_offset() < upper && s.base_offset() < active_base)
            .cloned()
            .collect();
        // 3. Group adjacent segments so each cleaned one stays under
        // segment.bytes.
        let mut groups: Vec<Vec<Arc<Segment>>> = Vec::new();
        let mut size = 0;
        for s in to_clean {
            match groups.last_mut() {
                Some(g) if size + s.len() <= cfg.segment_bytes => {
                    size += s.len();
                    g.push(s);
                }
                _ => {
                    size = s.len();
                    groups.push(vec![s]);
                }
            }
        }
        for group in groups {
            self.clean_group(log, cfg, &group, &segments, map, now, &mut stats)?;
            stats.segments_cleaned += group.len() as u64;
            if self.stop.load(Ordering::Acquire) {
                break;
            }
        }
        stats.duration_ms = began.elapsed().as_millis() as u64;
        Ok(stats)
    }

    #[allow(clippy::too_many_arguments)]
    fn clean_group(
        &self,
        log: &CompactedLog,
        cfg: &CompactTopicConfig,
        group: &[Arc<Segment>],
        all: &[Arc<Segment>],
        map: &OffsetMap,
        now: i64,
        stats: &mut RunStats,
    ) -> Result<()> {
        let Some(first) = group.first() else {
            return Ok(());
        };
        let base = first.base_offset();
        let last_base = group.last().map_or(base, |s| s.base_offset());
        // The segment after the group bounds what the swap replaces. It
        // exists: the active segment is never in a group.
        let end = all
            .iter()
            .find(|s| s.base_offset() > last_base)
            .map(|s| s.base_offset())
            .ok_or_else(|| CleanerError::InvalidConfig {
                setting: "internal",
                reason: "a cleaning group reached the active segment".into(),
            })?;
        let dir = log.dir();
        let cleaned_path = dir.join(format!(
            "{}{LOG_SUFFIX}{CLEANED_SUFFIX}",
            offset_file_name(base)
        ));
        let _ = std::fs::remove_file(&cleaned_path);
        let cleaned = Arc::new(Segment::create(
            cleaned_path.clone(),
            base,
            first.created_ms(),
        )?);
        let mut pending: Vec<Hashed<CompactedRecord>> = Vec::with_capacity(MAP_BATCH);
        let mut out = Written::default();
        for seg in group {
            let mut reader = seg.reader(0);
            while let Some(rec) = self.read_counted(&mut reader, stats)? {
                let hash = match rec.key_slice() {
                    Some(key) => map.hash(key),
                    // Keyless records are kept (`keep`); compact topics
                    // refuse them anyway. Any hash: it is not looked up.
                    None => map.hash(&[]),
                };
                map.prefetch(&hash);
                pending.push(Hashed { hash, item: rec });
                if pending.len() == MAP_BATCH {
                    self.filter_batch(&mut pending, &mut out, map, cfg, now, stats);
                    if out.due(stats) {
                        self.write_kept(&cleaned, &cleaned_path, &mut out, stats)?;
                    }
                }
            }
        }
        self.filter_batch(&mut pending, &mut out, map, cfg, now, stats);
        self.write_kept(&cleaned, &cleaned_path, &mut out, stats)?;
        self.swap(log, base, end, cleaned, &cleaned_path)
    }
}

/// Kept records not yet written to the cleaned file.
#[derive(Default)]
struct Written {
    records: Vec<CompactedRecord>,
    bytes: usize,
    /// `RunStats::bytes_read` when the first of them was read.
    read_mark: u64,
}

impl Written {
    /// Whether to write now: enough for one large write, or holding on to
    /// too much of what was read ([`HELD_READ_BYTES`]).
    fn due(&self, stats: &RunStats) -> bool {
        self.bytes >= WRITE_BYTES
            || (!self.records.is_empty() && stats.bytes_read - self.read_mark >= HELD_READ_BYTES)
    }
}

impl Shared {
    /// Decide each record of `pending` by the `keep` rule, in order, moving
    /// the kept ones (tombstones stamped) to `out`.
    fn filter_batch(
        &self,
        pending: &mut Vec<Hashed<CompactedRecord>>,
        out: &mut Written,
        map: &OffsetMap,
        cfg: &CompactTopicConfig,
        now: i64,
        stats: &mut RunStats,
    ) {
        for Hashed { hash, item: rec } in pending.drain(..) {
            let latest = rec.key_slice().and_then(|_| map.get_hashed(&hash));
            if !keep(&rec, latest, stats.end_offset, now) {
                stats.records_removed += 1;
                continue;
            }
            let rec = if rec.is_tombstone() && rec.delete_horizon_ms == 0 {
                rec.with_delete_horizon(now.saturating_add(cfg.delete_retention_ms))
            } else {
                rec
            };
            if out.records.is_empty() {
                out.read_mark = stats.bytes_read;
            }
            out.bytes += rec.len();
            out.records.push(rec);
        }
    }

    /// Append `out`'s records to the cleaned segment in one write.
    fn write_kept(
        &self,
        cleaned: &Segment,
        cleaned_path: &std::path::Path,
        out: &mut Written,
        stats: &mut RunStats,
    ) -> Result<()> {
        if out.records.is_empty() {
            return Ok(());
        }
        self.fault(FaultPoint::WriteCleaned, cleaned_path)?;
        cleaned.append_batch(&out.records)?;
        stats.records_kept += out.records.len() as u64;
        stats.bytes_written += out.bytes as u64;
        self.throttle.account(out.bytes as u64);
        out.records.clear();
        out.bytes = 0;
        Ok(())
    }
}

/// Put a batch of hashed keys, `(offset, byte position)` each, in order, as
/// single puts would: `Ok(false)` where the map filled (the pass is partial
/// and covers the records before that one), an error for a record out of
/// order.
fn put_batch(
    map: &mut OffsetMap,
    batch: &[Hashed<(u64, u64)>],
    seg: &Segment,
    stats: &mut RunStats,
) -> Result<bool> {
    for Hashed {
        hash,
        item: (offset, at),
    } in batch
    {
        match map.put_hashed(hash, *offset) {
            PutOutcome::Stored => stats.end_offset = offset + 1,
            PutOutcome::Full => {
                stats.partial = true;
                return Ok(false);
            }
            PutOutcome::BelowBase => {
                return Err(seg.corrupt(*at, CorruptionKind::OffsetOrder { offset: *offset }));
            }
        }
    }
    Ok(true)
}

/// Kafka's retention rule for a record being rewritten by a pass whose map
/// covers the offsets below `mapped_end`; `latest` is the map's newest offset
/// of its key.
///
/// An expired tombstone goes only if it is below `mapped_end`. Then every
/// older record of its key goes in the same pass or went before: the map of
/// this pass or of an earlier one (the mapped ranges follow each other from
/// the checkpoint) holds the key at the tombstone's offset or later, and
/// every pass rewrites the log from its start. A tombstone past the mapped
/// end (in the segment where a full map stopped, or one a tombstone pass
/// reaches) is kept: this map may not know its key, so an older value of
/// the key can be kept by this pass, and dropping the tombstone would bring
/// the deleted key back. A later pass maps it and drops both.
fn keep(rec: &CompactedRecord, latest: Option<u64>, mapped_end: u64, now: i64) -> bool {
    if rec.key_slice().is_none() {
        return true;
    }
    if latest.is_some_and(|latest| latest > rec.offset.get()) {
        return false; // a newer record of this key exists
    }
    if rec.is_tombstone()
        && rec.delete_horizon_ms != 0
        && rec.delete_horizon_ms <= now
        && rec.offset.get() < mapped_end
    {
        return false; // tombstone kept long enough
    }
    true
}
