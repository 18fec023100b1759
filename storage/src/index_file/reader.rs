//! The IndexFiles' readers: queries by key, newest first, and the
//! positions the checkpoint and recovery read (where the entries end).
//!
//! Invariants: a reader loads slots and the entry count with `Acquire`
//! and never reads an entry not reachable from them; a chain is walked
//! only towards older entries and at most `entry_count` steps, so a
//! damaged chain ends the walk, never loops; every candidate is a hash
//! match only, confirmed by the caller reading the record.

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

use super::file::IndexFile;
use super::format;
use super::IndexService;
use crate::error::Result;

impl IndexFile {
    /// The physical offset of the newest entry for a record below `pos`,
    /// if any: entries are in physical order, so a binary search.
    fn last_physical_below(&self, pos: u64) -> Option<u64> {
        let (mut lo, mut hi) = (1u32, self.entry_count().min(self.entry_capacity));
        // Invariant: entries [1, lo) are below `pos`, [hi, count) are not.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid).physical_offset < pos {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo > 1).then(|| self.entry(lo - 1).physical_offset)
    }

    /// Visit physical offsets of entries with `key_hash` whose time falls
    /// within `[begin_ms, end_ms]` (second granularity; callers re-check the
    /// record's exact timestamp), newest first.
    fn query(
        &self,
        key_hash: u32,
        begin_ms: i64,
        end_ms: i64,
        visit: &mut dyn FnMut(u64) -> Result<ControlFlow<()>>,
    ) -> Result<ControlFlow<()>> {
        let count = self.entry_count();
        if count <= 1 {
            return Ok(ControlFlow::Continue(()));
        }
        let base = self.begin_timestamp_ms();
        let mut i = self
            .slot(key_hash % self.slot_count)
            .load(Ordering::Acquire);
        let mut steps = 0u32;
        while i != 0 && i < count && steps < count {
            steps += 1;
            let e = self.entry(i);
            let ts = base.saturating_add(e.time_delta_s as i64 * 1000);
            // Entry time is truncated to the second: widen by one second.
            if ts > end_ms {
                // Newer than the window: keep walking to older entries.
            } else if ts + 1000 < begin_ms {
                break; // Older than the window, and so is the rest.
            } else if e.key_hash == key_hash && visit(e.physical_offset)?.is_break() {
                return Ok(ControlFlow::Break(()));
            }
            if e.prev >= i {
                break; // damaged chain: stop rather than loop
            }
            i = e.prev;
        }
        Ok(ControlFlow::Continue(()))
    }
}

impl IndexService {
    /// Physical offset of the newest indexed record, if any.
    pub fn last_indexed(&self) -> Option<u64> {
        self.files()
            .iter()
            .rev()
            .find(|f| !f.is_empty())
            .map(|f| f.end_physical())
    }

    /// Candidates for (topic, key) in `[begin_ms, end_ms]`, newest first;
    /// `visit` confirms each (by reading the record) and says when to stop.
    pub fn query(
        &self,
        topic: &str,
        key: &[u8],
        begin_ms: i64,
        end_ms: i64,
        visit: &mut dyn FnMut(u64) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let hash = format::key_hash(topic, key);
        for f in self.files().iter().rev() {
            if f.is_empty()
                || f.begin_timestamp_ms() > end_ms.saturating_add(1000)
                || f.end_timestamp_ms() < begin_ms.saturating_sub(1000)
            {
                continue;
            }
            if f.query(hash, begin_ms, end_ms, visit)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    /// One past the physical offset of the newest entry for a record
    /// below `pos` (0: none), for `index-end` ([`end`]).
    pub(crate) fn end_below(&self, pos: u64) -> u64 {
        for f in self.files().iter().rev() {
            if f.is_empty() || f.begin_physical() >= pos {
                continue;
            }
            if let Some(p) = f.last_physical_below(pos) {
                return p + 1;
            }
        }
        0
    }

    /// One past the physical offset of the newest entry held (0: none).
    pub(crate) fn end(&self) -> u64 {
        self.files()
            .iter()
            .rev()
            .find(|f| !f.is_empty())
            .map_or(0, |f| f.end_physical() + 1)
    }
}
