//! One cleaning pass over a log, after [`super::select`] picked it:
//!
//! 1. Build key fingerprint → place of the newest record over the dirty
//!    range, in the thread's share of `dedupe_buffer_bytes`. If the map
//!    fills, the pass covers only what it mapped (a partial pass); the next
//!    pass continues.
//! 2. Group the segments below the mapped end so a cleaned segment stays
//!    under `segment.bytes`; rewrite each group keeping a record unless a
//!    newer record of its key exists (the key bytes compared, see
//!    "Collisions"), or it is a tombstone whose delete horizon has passed
//!    and that lies below the mapped end (past it, the map may not know its
//!    key, whose older value this pass may keep: see `keep`). A tombstone
//!    kept for the first time is stamped with horizon now +
//!    `delete.retention.ms`.
//! 3. Hand each group's `.cleaned` file to [`super::swap`]; the threads
//!    then store the checkpoint at the mapped end.
//!
//! At copy speed: the map uses only the part of its table the dirty range's
//! record count can fill ([`OffsetMap::clear_for`]); keys are hashed a batch
//! ([`MAP_BATCH`]) ahead of their puts and lookups, with each home slot
//! prefetched, so the batch's cache misses overlap, and the rewrite reads
//! a batch's slots a batch ahead of its verdicts, prefetching the records
//! they point at, whose keys the verdicts compare; keys are borrowed from
//! the read buffer, which the reader reuses chunk after chunk (kept records
//! are copied out of it at once, into the output buffer); and kept records
//! go to the cleaned file in writes of about [`WRITE_BYTES`], not one write
//! a record. Both reads of the dirty range are `pread`s into that buffer,
//! not reads of the segments' mappings: mapped reads made a warm pass
//! 1.6-1.8x faster alone, but a producer beside a busy cleaner ran at
//! 0.80-0.88x of idle instead of 1.03-1.05x (alternated runs of the
//! compaction bench, docs/compaction.md). The map build checks each record's CRC (what lets a damaged
//! key never reach the map); the rewrite reads the dirty records again and
//! checks everything but their CRC again (a sealed segment's bytes do not
//! change), and the clean range's records in full. Written bytes are the read bytes,
//! so nothing is re-encoded except the tombstones a pass stamps.
//!
//! # Places
//!
//! The map holds, per key, the *place* of its newest mapped record:
//! `(1 + the segment's index among the dirty segments) << 40 | the record's
//! byte position in it`. Places grow in log order, as offsets do, and say
//! where the record is, so the rewrite can read its key (below). A record
//! of a segment that is not dirty has place 0, before every mapped one; a
//! place that does not fit (a segment past 2^40 bytes, or 2^24 dirty
//! segments) ends the map build there, as a full map does.
//!
//! # Collisions
//!
//! The map stores 64-bit fingerprints, and two keys with one fingerprint
//! share a slot, which holds the later of their newest records. So the map
//! only nominates: the rewrite drops a record only when the slot points at
//! a later place *and* the record there (read through a read-only mapping of
//! the dirty segments, [`Segment::map_sealed`]) has the same key bytes. A
//! record whose fingerprint collides with another key's is kept, whatever
//! the map says: a collision keeps extra records, and never drops the
//! newest record of a key. Why nothing else breaks:
//! - A record kept by a collision is kept whole: an expired tombstone among
//!   them is not dropped either, since the older values of its key may be
//!   among the records the same collision kept.
//! - Such a record in the mapped range lowers the checkpoint the pass stores
//!   to its offset. The next pass maps from there with a new fingerprint key
//!   (drawn per pass), so the key's extra records are then deduplicated.
//! - So a record below the checkpoint was, in the pass that moved the
//!   checkpoint past it, the newest of its key, and that pass compared every
//!   older record of the key with it and dropped them (in the same group or
//!   an earlier one: groups are swapped in log order). That is what lets an
//!   expired tombstone below the checkpoint go although this pass's map does
//!   not know its key (`keep`): no older value is left to come back.
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
//! # Transactions
//!
//! Kafka's cleaner rules for transactions (KIP-98), on copies that carry
//! their producer (a transaction's records are copied with it; markers
//! never are, their effect is the store's):
//! - Nothing from the segment holding the partition's last stable offset
//!   on is cleanable ([`super::select`]): an open transaction's records may
//!   yet be aborted, so they neither supersede older records nor go.
//! - Below it every transaction is decided. A record of an aborted one
//!   (its producer has an aborted transaction spanning its offset,
//!   [`CopySource::aborted_ranges`]) is never mapped, so it supersedes
//!   nothing, and every pass drops it wherever it rewrites it. A committed
//!   transaction's records are records like any other.
//! - The aborted transactions are read once a pass, after the bound was
//!   taken and before the CommitLog is made durable: every marker they
//!   count was written before that flush, so an outcome a pass acts on
//!   survives a power loss (a lost marker is written again by the
//!   coordinator, whose decision was durable before the first marker).
//!
//! A read_committed reader of the compacted log drops the aborted records
//! the cleaner has not reached yet, by the same ranges
//! (`PartitionRef::read_committed_async`).
//!
//! A failed partition's next pass first reconciles its files (see
//! [`super::swap`]) and takes its dirty range anew.
//!
//! [`CopySource::aborted_ranges`]: super::CopySource::aborted_ranges

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::select::{cleanable, Cleanable};
use super::{RunStats, Shared};
use crate::compacted::format::{self, CompactedRecord};
use crate::compacted::log::{lock, CompactedLog};
use crate::compacted::segment::{RecordMeta, Segment, SegmentReader, CLEANED_SUFFIX, LOG_SUFFIX};
use crate::compacted::CompactTopicConfig;
use crate::error::{CleanerError, CorruptionKind, Result};
use crate::fault::FaultPoint;
use crate::offset_map::{prefetch_line, KeyHash, OffsetMap, PutOutcome};
use tidelog_storage::fs_util::offset_file_name;
use tidelog_storage::txn_index::AbortedRanges;

/// Keys hashed and prefetched ahead of their puts and lookups: enough
/// independent cache misses in flight to hide memory latency, few enough that
/// the batch's slots are still cached when it is processed.
const MAP_BATCH: usize = 32;

/// Kept records are written to the cleaned file in writes of about this
/// many bytes.
const WRITE_BYTES: usize = 1 << 20;

/// Bits of a place (module doc, "Places") that hold the byte position.
const PLACE_POSITION_BITS: u32 = 40;

/// The place of the record at byte `position` of the dirty segment number
/// `ordinal`; `None` when it does not fit.
fn place(ordinal: usize, position: u64) -> Option<u64> {
    let segment = u64::try_from(ordinal).ok()?.checked_add(1)?;
    if position >> PLACE_POSITION_BITS != 0 || segment >> (64 - PLACE_POSITION_BITS) != 0 {
        return None;
    }
    Some(segment << PLACE_POSITION_BITS | position)
}

/// The dirty segments of a pass, mapped ([`Segment::map_sealed`]) to read
/// the key of the record at a place (module doc, "Collisions"), and what
/// the map build read of each.
struct Places {
    segments: Vec<Arc<Segment>>,
    maps: Vec<Bytes>,
    /// Per dirty segment, the bytes whose records the map build read (and
    /// CRC-checked): the rewrite does not compute their CRCs again.
    built: Vec<std::ops::Range<u64>>,
}

impl Places {
    fn map(segments: Vec<Arc<Segment>>) -> Result<Places> {
        let maps = segments
            .iter()
            .map(|s| s.map_sealed())
            .collect::<Result<_>>()?;
        let built = vec![0..0; segments.len()];
        Ok(Places {
            segments,
            maps,
            built,
        })
    }

    /// A reader of `seg` for the rewrite, which does not check again the
    /// CRCs the map build checked.
    fn rewrite_reader<'s>(&self, seg: &'s Arc<Segment>) -> Result<SegmentReader<'s>> {
        Ok(match self.ordinal(seg) {
            Some(o) => seg.reader(0).checked_before(self.built[o].clone()),
            None => seg.reader(0),
        })
    }

    /// The index of `seg` among the dirty segments.
    fn ordinal(&self, seg: &Arc<Segment>) -> Option<usize> {
        self.segments.iter().position(|s| Arc::ptr_eq(s, seg))
    }

    /// The mapped bytes from the record at `place` to its segment's end.
    fn bytes_at(&self, place: u64) -> Option<&[u8]> {
        let ordinal = usize::try_from((place >> PLACE_POSITION_BITS).checked_sub(1)?).ok()?;
        let position = usize::try_from(place & ((1 << PLACE_POSITION_BITS) - 1)).ok()?;
        self.maps.get(ordinal)?.get(position..)
    }

    /// The key of the record at `place`: `None` for a place no record of
    /// the pass has (never the case) or a record without a key.
    fn key_at(&self, place: u64) -> Option<&[u8]> {
        format::key_in(self.bytes_at(place)?)
    }

    /// Start loading the header and the start of the key of the record at
    /// `place` into the cache (as `OffsetMap::prefetch` does for slots).
    fn prefetch(&self, place: u64) {
        if let Some(bytes) = self.bytes_at(place) {
            let header = bytes.as_ptr();
            prefetch_line(header);
            prefetch_line(header.wrapping_add(format::HEADER_LEN));
        }
    }
}

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
        Ok(Some(cleanable(
            log,
            cfg,
            checkpoint,
            self.stable_end(log),
            now,
        )))
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
        // Durable copies only (module doc): note the end, then flush. The
        // aborted transactions are read before the flush (module doc,
        // "Transactions"); `first_uncleanable` came from a last stable
        // offset read before them.
        let durable_end = log.next_offset();
        let tp = log.topic_partition();
        let aborted = AbortedRanges::new(self.source.aborted_ranges(
            tp.topic(),
            tp.partition(),
            info.first_uncleanable.min(durable_end),
        ));
        self.source
            .make_durable()
            .map_err(|source| CleanerError::Store {
                path: self.data_dir.join(tidelog_storage::store::COMMITLOG_DIR),
                source,
            })?;
        // A swap replaces `<base>.log` files only: sync the segments rolls
        // sealed and rename the `.new` ones after them now (what the next
        // checkpoint would do: `CompactedLog::open` says why), on this
        // thread rather than the dispatcher's. A segment rolled since
        // lies past the range; the bound is the check that it does.
        log.flush()?;
        let first_new = log.first_new_base().unwrap_or(u64::MAX);
        let bounded = Cleanable {
            first_uncleanable: info.first_uncleanable.min(durable_end).min(first_new),
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
        let mut batch: Vec<Hashed<(u64, Option<u64>)>> = Vec::with_capacity(MAP_BATCH);
        // Any hash, for the aborted records the batch carries unmapped.
        let unmapped = map.hash(&[]);
        let mut order = OffsetOrder::default();
        let mut places = Places::map(dirty.iter().map(|s| Arc::clone(s)).collect())?;
        'build: for (ordinal, seg) in dirty.iter().enumerate() {
            let from = seg.position_for(info.first_dirty);
            let mut reader = seg.reader(from);
            let mut range_ended = false;
            loop {
                let at = reader.position();
                let Some(rec) = self.read_counted(&mut reader, &mut stats)? else {
                    break;
                };
                places.built[ordinal] = from..reader.position();
                let offset = rec.offset.get();
                if offset >= info.first_uncleanable {
                    range_ended = true;
                    break;
                }
                if offset < info.first_dirty {
                    continue;
                }
                order.check(offset, seg, at)?;
                // An aborted record supersedes nothing (module doc): it
                // is not mapped, but the mapped range goes past it in
                // order, so a pass that maps up to the end rewrites (and
                // drops) it.
                let item = if is_aborted(&rec, &aborted) {
                    Hashed {
                        hash: unmapped,
                        item: (offset, None),
                    }
                } else {
                    let Some(key) = rec.key_slice() else { continue };
                    let Some(place) = place(ordinal, at) else {
                        // Ends the build here, as a full map would.
                        put_batch(map, &batch, &mut stats);
                        stats.partial = true;
                        break 'build;
                    };
                    let hash = map.hash(key);
                    map.prefetch(&hash);
                    Hashed {
                        hash,
                        item: (offset, Some(place)),
                    }
                };
                batch.push(item);
                if batch.len() == MAP_BATCH {
                    let complete = put_batch(map, &batch, &mut stats);
                    batch.clear();
                    if !complete {
                        break 'build;
                    }
                }
            }
            let complete = put_batch(map, &batch, &mut stats);
            batch.clear();
            if !complete || range_ended {
                break;
            }
        }
        stats.keys = map.len() as u64;
        stats.map_utilization = map.utilization();
        let mut lookup = Lookup {
            map,
            places,
            collision_floor: None,
            aborted,
        };
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
            self.clean_group(log, cfg, &group, &segments, &mut lookup, now, &mut stats)?;
            stats.segments_cleaned += group.len() as u64;
            if self.stop.load(Ordering::Acquire) {
                break;
            }
        }
        // Records a collision kept uncompacted get mapped again by the next
        // pass (module doc, "Collisions").
        if let Some(floor) = lookup.collision_floor {
            stats.end_offset = stats.end_offset.min(floor);
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
        lookup: &mut Lookup<'_>,
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
        let mut pending: Vec<Hashed<(CompactedRecord, u64)>> = Vec::with_capacity(MAP_BATCH);
        // A pipeline of three batches: `pending`'s slots are being fetched,
        // `next`'s slots were read and the records they point at are being
        // fetched while `looked`, a batch ahead of it, is decided.
        let mut looked: Vec<Looked> = Vec::with_capacity(MAP_BATCH);
        let mut next: Vec<Looked> = Vec::with_capacity(MAP_BATCH);
        let mut out = Written::default();
        for seg in group {
            let ordinal = lookup.places.ordinal(seg);
            let mut reader = lookup.places.rewrite_reader(seg)?;
            loop {
                let at = reader.position();
                let Some(rec) = self.read_counted(&mut reader, stats)? else {
                    break;
                };
                // Past what places can say (the build stopped there): after
                // every mapped record.
                let own = ordinal.map_or(0, |o| place(o, at).unwrap_or(u64::MAX));
                let hash = match rec.key_slice() {
                    Some(key) => lookup.map.hash(key),
                    // Keyless records are kept (`keep`); compact topics
                    // refuse them anyway. Any hash: it is not looked up.
                    None => lookup.map.hash(&[]),
                };
                lookup.map.prefetch(&hash);
                pending.push(Hashed {
                    hash,
                    item: (rec, own),
                });
                if pending.len() == MAP_BATCH {
                    look_up(&mut pending, lookup, &mut next);
                    self.decide(&mut looked, &mut out, lookup, cfg, now, stats);
                    std::mem::swap(&mut looked, &mut next);
                    if out.bytes.len() >= WRITE_BYTES {
                        self.write_kept(&cleaned, &cleaned_path, &mut out, stats)?;
                    }
                }
            }
        }
        look_up(&mut pending, lookup, &mut next);
        self.decide(&mut looked, &mut out, lookup, cfg, now, stats);
        self.decide(&mut next, &mut out, lookup, cfg, now, stats);
        self.write_kept(&cleaned, &cleaned_path, &mut out, stats)?;
        self.swap(log, base, end, cleaned, &cleaned_path)
    }
}

/// Kept records not yet written to the cleaned file: their bytes, copied out
/// of the read buffer (which the reader then reuses), and what the cleaned
/// segment's index needs of each.
#[derive(Default)]
struct Written {
    bytes: Vec<u8>,
    records: Vec<RecordMeta>,
}

/// The map of a pass and what its verdicts are checked against.
struct Lookup<'a> {
    map: &'a OffsetMap,
    places: Places,
    /// The lowest offset in the mapped range of a record kept only because
    /// its fingerprint collided with another key's.
    collision_floor: Option<u64>,
    /// The aborted transactions below the pass's bound: their records go.
    aborted: AbortedRanges,
}

/// Whether `rec` is a record of one of the `aborted` transactions.
fn is_aborted(rec: &CompactedRecord, aborted: &AbortedRanges) -> bool {
    rec.producer()
        .is_some_and(|p| aborted.contains(p.id, rec.offset.get()))
}

/// What the map says of a record being rewritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// A later record of the same key (key bytes compared) exists.
    Superseded,
    /// The map's slot for its key points at this very record: every older
    /// record of its key is dropped by this pass.
    Newest,
    /// Neither: a key the map does not hold, a record past the mapped
    /// range, or a keyless record.
    Unknown,
    /// The slot points at a later record of another key with the same
    /// fingerprint: kept whole (module doc, "Collisions").
    Collided,
}

impl Lookup<'_> {
    /// The verdict on `rec`, at place `own` (0: not in a dirty segment),
    /// whose key's slot holds `newest`.
    fn verdict(
        &mut self,
        rec: &CompactedRecord,
        own: u64,
        newest: Option<u64>,
        stats: &mut RunStats,
    ) -> Verdict {
        let Some(key) = rec.key_slice() else {
            return Verdict::Unknown;
        };
        match newest {
            None => Verdict::Unknown,
            Some(newest) if newest == own => Verdict::Newest,
            Some(newest) if newest < own => Verdict::Unknown,
            Some(newest) => {
                if self.places.key_at(newest) == Some(key) {
                    return Verdict::Superseded;
                }
                // Another key with this fingerprint (module doc).
                stats.collisions += 1;
                let offset = rec.offset.get();
                if offset >= stats.first_dirty && offset < stats.end_offset {
                    self.collision_floor =
                        Some(self.collision_floor.map_or(offset, |f| f.min(offset)));
                }
                Verdict::Collided
            }
        }
    }
}

/// A record being rewritten, at place `own`, whose key's slot holds
/// `found`; the record `found` points at has been prefetched.
struct Looked {
    rec: CompactedRecord,
    own: u64,
    found: Option<u64>,
}

/// Read the slots of `pending`'s keys (prefetched when the records were
/// read) and prefetch the records they point at, whose keys the verdicts
/// compare (`Lookup::verdict`), moving the records to `into`. The
/// verdicts come a batch later, so those misses, a random line of a
/// segment mapping each (and mostly a page walk), overlap a whole batch's
/// work rather than a few lookups.
fn look_up(
    pending: &mut Vec<Hashed<(CompactedRecord, u64)>>,
    lookup: &Lookup<'_>,
    into: &mut Vec<Looked>,
) {
    for Hashed {
        hash,
        item: (rec, own),
    } in pending.drain(..)
    {
        let found = lookup.map.get_hashed(&hash);
        if let Some(place) = found.filter(|&place| place > own) {
            lookup.places.prefetch(place);
        }
        into.push(Looked { rec, own, found });
    }
}

impl Shared {
    /// Decide each record of `looked` by the `keep` rule, in order, moving
    /// the kept ones (tombstones stamped) to `out`.
    fn decide(
        &self,
        looked: &mut Vec<Looked>,
        out: &mut Written,
        lookup: &mut Lookup<'_>,
        cfg: &CompactTopicConfig,
        now: i64,
        stats: &mut RunStats,
    ) {
        for Looked { rec, own, found } in looked.drain(..) {
            if is_aborted(&rec, &lookup.aborted) {
                stats.records_removed += 1;
                continue;
            }
            let verdict = lookup.verdict(&rec, own, found, stats);
            if !keep(&rec, verdict, stats.end_offset, now) {
                stats.records_removed += 1;
                continue;
            }
            let rec = if rec.is_tombstone() && rec.delete_horizon_ms == 0 {
                rec.with_delete_horizon(now.saturating_add(cfg.delete_retention_ms))
            } else {
                rec
            };
            out.bytes.extend_from_slice(rec.raw());
            out.records.push(RecordMeta::from(&rec));
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
        cleaned.append_encoded(&out.bytes, &out.records)?;
        stats.records_kept += out.records.len() as u64;
        stats.bytes_written += out.bytes.len() as u64;
        self.throttle.account(out.bytes.len() as u64);
        out.records.clear();
        out.bytes.clear();
        Ok(())
    }
}

/// Put a batch of hashed keys, `(offset, place)` each, in order, as single
/// puts would: `false` where the map filled (the pass is partial and covers
/// the records before that one). A record without a place (an aborted
/// one) is not put; the mapped range goes past it.
fn put_batch(
    map: &mut OffsetMap,
    batch: &[Hashed<(u64, Option<u64>)>],
    stats: &mut RunStats,
) -> bool {
    for Hashed {
        hash,
        item: (offset, place),
    } in batch
    {
        let Some(place) = place else {
            stats.end_offset = offset + 1;
            continue;
        };
        match map.put_hashed(hash, *place) {
            PutOutcome::Stored => stats.end_offset = offset + 1,
            PutOutcome::Full => {
                stats.partial = true;
                return false;
            }
        }
    }
    true
}

/// The map build's check that offsets grow along the dirty range: places
/// must grow as offsets do, or "later place" would not mean "newer".
#[derive(Default)]
struct OffsetOrder {
    last: Option<u64>,
}

impl OffsetOrder {
    fn check(&mut self, offset: u64, seg: &Segment, at: u64) -> Result<()> {
        if self.last.is_some_and(|last| offset <= last) {
            return Err(seg.corrupt(at, CorruptionKind::OffsetOrder { offset }));
        }
        self.last = Some(offset);
        Ok(())
    }
}

/// Kafka's retention rule for a record being rewritten by a pass whose map
/// covers the offsets below `mapped_end`; `verdict` is what the map says of
/// it (see [`Lookup::verdict`]).
///
/// An expired tombstone goes only if it is below `mapped_end`. Then every
/// older record of its key goes in the same pass or went before: the map of
/// this pass or of an earlier one (the mapped ranges follow each other from
/// the checkpoint) holds the key at the tombstone's offset or later, and
/// every pass rewrites the log from its start (with collisions: module doc,
/// "Collisions"). A tombstone past the mapped
/// end (in the segment where a full map stopped, or one a tombstone pass
/// reaches) is kept: this map may not know its key, so an older value of
/// the key can be kept by this pass, and dropping the tombstone would bring
/// the deleted key back. A later pass maps it and drops both.
fn keep(rec: &CompactedRecord, verdict: Verdict, mapped_end: u64, now: i64) -> bool {
    if rec.key_slice().is_none() {
        return true;
    }
    match verdict {
        Verdict::Superseded => return false, // a newer record of this key exists
        Verdict::Collided => return true,    // kept whole (module doc)
        Verdict::Newest | Verdict::Unknown => {}
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
