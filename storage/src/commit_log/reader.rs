//! Reading the CommitLog: sequential reads for the dispatcher and fetches
//! (through a [`ReadCache`]), reads by ConsumeQueue unit, and verified
//! reads by a client's physical offset.
//!
//! Invariant: readers only read below `committed`, loaded with `Acquire`;
//! entries are committed whole, so an entry that starts in a reader's
//! view ends in it.

use std::sync::Arc;

use bytes::Bytes;

use super::format::{self, Decoded, Invalid};
use super::record::{Entry, StoredRecord};
use super::segment::Segment;
use super::CommitLog;
use crate::error::{CorruptionKind, Result, StoreError};
use crate::types::PhysicalOffset;

/// What starts at a physical offset, for sequential readers.
pub enum Next {
    Entry(Entry),
    /// No record here; continue at this offset (after an end marker).
    Skip(u64),
    /// Nothing committed at or after this offset yet.
    End,
}

impl CommitLog {
    /// What starts at `pos`: an entry, a marker to skip, or the end.
    /// `verify` is for bytes whose origin is not trusted (see
    /// [`format::decode`]).
    pub fn read_next(&self, pos: u64, verify: bool) -> Result<Next> {
        self.read_next_cached(pos, verify, &mut ReadCache::default())
    }

    /// [`CommitLog::read_next`] for sequential readers (the dispatcher, a
    /// fetch): see [`ReadCache`].
    pub fn read_next_cached(&self, pos: u64, verify: bool, cache: &mut ReadCache) -> Result<Next> {
        let committed = self.committed();
        if pos >= committed {
            return Ok(Next::End);
        }
        let at = self.cache_at(pos, committed, cache)?;
        let seg = (cache.segment.as_ref()).expect("a cache that holds bytes holds their segment");
        let rel = (pos - seg.base()) as usize;
        // Entries are committed whole, so one that starts in the chunk
        // (committed bytes when it was taken) ends in it.
        match format::decode(&cache.chunk[at..], pos, verify) {
            Ok(Decoded::Entry(view)) => {
                let bytes = cache.chunk.slice(at..at + view.total_len);
                Ok(Next::Entry(Entry::new(bytes, view)))
            }
            Ok(Decoded::EndOfSegment { .. }) => Ok(Next::Skip(seg.end())),
            Ok(Decoded::Empty) => Err(StoreError::corruption(
                seg.path(),
                rel as u64,
                CorruptionKind::ZerosBelowCommitted,
            )),
            Err(why) => Err(StoreError::corruption(seg.path(), rel as u64, why)),
        }
    }

    /// Make `cache` hold the committed bytes at `pos` (below `committed`);
    /// returns where `pos` is in its chunk.
    fn cache_at(&self, pos: u64, committed: u64, cache: &mut ReadCache) -> Result<usize> {
        if !cache.holds(pos) {
            if !cache.segment.as_ref().is_some_and(|s| s.contains(pos)) {
                #[cfg(test)]
                run_before_segment_lookup();
                cache.segment = self.segment_containing(pos);
                cache.entry = None;
            }
            let Some(seg) = cache.segment.as_ref() else {
                cache.chunk = Bytes::new();
                return Err(StoreError::inconsistent(
                    &self.dir,
                    pos,
                    format!(
                        "physical offset {pos} is not in the log (minimum {})",
                        self.min_offset()
                    ),
                ));
            };
            let rel = (pos - seg.base()) as usize;
            let avail = (committed.min(seg.end()) - pos) as usize;
            // SAFETY: `[pos, pos + avail)` is below `committed`.
            cache.chunk = unsafe { seg.bytes(rel, avail) };
            cache.chunk_at = pos;
        }
        Ok((pos - cache.chunk_at) as usize)
    }

    /// The record that starts at `pos`: its distance leads to its entry,
    /// which must start there. With `verify` (positions from clients) the
    /// entry is checked whole and `pos` must be one of the record starts
    /// found by walking it; without (positions from the ConsumeQueue or the
    /// IndexFile) only the entry header and the record are decoded.
    fn record_at(&self, pos: u64, verify: bool, cache: &mut ReadCache) -> Result<StoredRecord> {
        if !verify {
            // A run of reads (a fetch) finds most records in the entry of
            // the one before. Entries never overlap, so the entry that
            // holds `pos` is the only one a record there can belong to.
            if let Some(entry) = cache.entry.as_ref().filter(|e| e.holds(pos)) {
                let at = (pos - entry.physical_offset()) as usize;
                return entry
                    .record_at(at)
                    .map_err(|why| cache.entry_corruption(pos, why));
            }
        }
        let committed = self.committed();
        let at = self.cache_at(pos, committed, cache)?;
        let seg = Arc::clone(cache.segment.as_ref().expect("cached above"));
        let corrupt =
            |why: CorruptionKind| StoreError::corruption(seg.path(), pos - seg.base(), why);
        let distance = format::distance_at(&cache.chunk[at..])
            .filter(|&d| d <= pos - seg.base())
            .ok_or_else(|| corrupt(CorruptionKind::NoRecordHere))?;
        let entry_pos = pos - distance;
        let entry_at = if entry_pos >= cache.chunk_at {
            (entry_pos - cache.chunk_at) as usize
        } else {
            self.cache_at(entry_pos, committed, cache)?
        };
        let Decoded::Entry(view) = format::decode(&cache.chunk[entry_at..], entry_pos, verify)
            .map_err(|why| {
                corrupt(CorruptionKind::RecordEntry {
                    entry_pos,
                    found: Box::new(why),
                })
            })?
        else {
            return Err(corrupt(CorruptionKind::NoEntryAt { entry_pos }));
        };
        let bytes = cache.chunk.slice(entry_at..entry_at + view.total_len);
        let entry = Entry::new(bytes, view);
        let record = if verify {
            // A value can hold bytes that look like a record; only the
            // walk from the entry's first record finds the real starts.
            entry
                .records()
                .map(|r| r.map_err(|why| corrupt(why.into())))
                .find(|r| {
                    r.as_ref()
                        .map_or(true, |r| r.physical_offset().get() >= pos)
                })
                .unwrap_or_else(|| Err(corrupt(CorruptionKind::PastLastRecord)))?
        } else {
            let record = entry
                .record_at(distance as usize)
                .map_err(|why| corrupt(why.into()))?;
            cache.entry = Some(entry);
            record
        };
        if record.physical_offset().get() != pos {
            return Err(corrupt(CorruptionKind::InsideRecord));
        }
        Ok(record)
    }

    /// The record that starts exactly at `pos`, verified (CRC, stored
    /// offsets, the entry's record starts): safe for offsets that come from
    /// clients. `None` if no record starts there.
    pub fn read_at(&self, pos: PhysicalOffset) -> Result<Option<StoredRecord>> {
        let pos = pos.get();
        if pos < self.min_offset() || pos >= self.committed() {
            return Ok(None);
        }
        match self.record_at(pos, true, &mut ReadCache::default()) {
            Ok(r) => Ok(Some(r)),
            Err(StoreError::Corruption { .. }) => Ok(None),
            // Deleted by retention since the check above.
            Err(StoreError::Inconsistent { .. }) if pos < self.min_offset() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read the record at `pos` of `size` bytes, as a ConsumeQueue unit
    /// points at it. The CRC was checked when the record was written or
    /// recovered; lengths and the stored offsets are still checked.
    pub fn read_unit(&self, pos: u64, size: u32) -> Result<Option<StoredRecord>> {
        self.read_unit_cached(pos, size, &mut ReadCache::default())
    }

    /// [`CommitLog::read_unit`] for a run of reads (see [`ReadCache`]).
    pub fn read_unit_cached(
        &self,
        pos: u64,
        size: u32,
        cache: &mut ReadCache,
    ) -> Result<Option<StoredRecord>> {
        // A cached segment is still in the log or its Arc keeps its bytes
        // readable; otherwise check the log's start (retention).
        if !cache.segment.as_ref().is_some_and(|s| s.contains(pos)) && pos < self.min_offset() {
            return Ok(None);
        }
        if pos >= self.committed() {
            return Ok(None);
        }
        let r = match self.record_at(pos, false, cache) {
            Ok(r) => r,
            // Retention deleted the segment between the check above and
            // the lookup: the record is gone, as if the check had seen it.
            Err(StoreError::Inconsistent { .. }) if pos < self.min_offset() => return Ok(None),
            Err(e) => return Err(e),
        };
        if r.size() != size {
            return Err(StoreError::inconsistent(
                &self.dir,
                pos,
                format!("queue unit says {size} bytes, record has {}", r.size()),
            ));
        }
        Ok(Some(r))
    }

    /// The record right after `prev` in the entry `cache` holds, if `prev`
    /// was the last record read through `cache` and is not its entry's
    /// last: a fetch reads the rest of an entry this way, without a
    /// ConsumeQueue lookup per record. The record is decoded with every
    /// length checked, as [`CommitLog::read_unit`] does.
    pub fn next_in_entry(
        &self,
        prev: &StoredRecord,
        cache: &ReadCache,
    ) -> Result<Option<StoredRecord>> {
        let Some(entry) = cache.entry.as_ref() else {
            return Ok(None);
        };
        entry.record_after(prev).map_err(|why| {
            cache.entry_corruption(prev.physical_offset().get() + u64::from(prev.size()), why)
        })
    }
}

/// What a sequential reader of the log keeps between reads: the segment of
/// the previous read, so a walk takes the segment-list lock once per
/// segment, and one zero-copy view of that segment's committed bytes, so
/// each record handed out is a slice of it (a reference count) rather than
/// a view of its own (an allocation and a free per record: a fifth of the
/// dispatcher's time in the produce benchmark).
#[derive(Default)]
pub struct ReadCache {
    segment: Option<Arc<Segment>>,
    /// Committed bytes of `segment` from physical offset `chunk_at` on, as
    /// they were when taken; empty when there are none.
    chunk: Bytes,
    chunk_at: u64,
    /// The entry of the last record read by position (in `segment`).
    entry: Option<Entry>,
}

impl ReadCache {
    fn holds(&self, pos: u64) -> bool {
        pos >= self.chunk_at && pos - self.chunk_at < self.chunk.len() as u64
    }

    /// The error for bad bytes at `pos` inside the cached entry.
    fn entry_corruption(&self, pos: u64, why: Invalid) -> StoreError {
        let seg = (self.segment.as_ref()).expect("an entry's segment is cached with it");
        StoreError::corruption(seg.path(), pos - seg.base(), why)
    }
}

#[cfg(test)]
thread_local! {
    /// Runs once, right before this thread's next segment lookup of a
    /// read: lets a test delete a segment exactly between a reader's
    /// check of the log's start and its lookup.
    pub(crate) static BEFORE_SEGMENT_LOOKUP: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        std::cell::RefCell::new(None);
}

#[cfg(test)]
fn run_before_segment_lookup() {
    if let Some(hook) = BEFORE_SEGMENT_LOOKUP.with(|h| h.borrow_mut().take()) {
        hook();
    }
}

/// Decode at `pos` of `seg` during recovery (single-threaded, full checks).
pub(crate) fn decode_for_recovery(
    seg: &Segment,
    pos: u64,
) -> std::result::Result<Decoded, Invalid> {
    let rel = (pos - seg.base()) as usize;
    // SAFETY: recovery runs before any reader or writer exists.
    let buf = unsafe { seg.slice(rel, (seg.end() - pos) as usize) };
    format::decode(buf, pos, true)
}
