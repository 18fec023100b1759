//! The time index's readers: which interval a lookup for a timestamp
//! reads next, the largest timestamp of a range, and the scans of an
//! interval's records that finish both.
//!
//! Invariants: a lookup's answer is exact for any order of timestamps:
//! every interval it skips has a maximum below T (by the running maximum,
//! which is monotonic), and an interval without an entry (missing, or the
//! tail) is read record by record, so a missing index is slower, never
//! wrong.

use super::format::NO_RECORDS;
use super::{RecordTimes, Step, TimeIndex};
use crate::error::Result;

impl TimeIndex {
    /// A lookup's next step for timestamp `timestamp_ms` from queue offset
    /// `from` (everything before it is below T), with the queue's end at
    /// `end`.
    pub(crate) fn next_step(&self, from: u64, timestamp_ms: i64, end: u64) -> Step {
        let first = self.interval_of(from);
        if from != first.start {
            // Part of an interval (the beginning moved into it): its entry
            // also covers records before `from`.
            return Step::Scan {
                from,
                to: first.end,
            };
        }
        let files = self.lock();
        let mut iv = first;
        loop {
            if iv.start >= end {
                return Step::Done;
            }
            let Ok(at) = files.binary_search_by_key(&iv.file_first, |f| f.first_unit) else {
                return Step::Scan {
                    from: iv.start,
                    to: iv.end,
                };
            };
            let f = &files[at];
            let n = f.maxima.len() as u64;
            if iv.k >= n {
                return Step::Scan {
                    from: iv.start,
                    to: iv.end,
                };
            }
            let found = if iv.k == 0 {
                f.running.partition_point(|&m| m < timestamp_ms) as u64
            } else {
                let k = iv.k as usize;
                f.maxima[k..]
                    .iter()
                    .position(|&m| m >= timestamp_ms)
                    .map_or(n, |j| (k + j) as u64)
            };
            if found < n {
                let hit = self.interval_at(iv.file_first, found);
                return Step::Scan {
                    from: hit.start,
                    to: hit.end,
                };
            }
            iv = self.interval_at(iv.file_first, n);
        }
    }

    /// The largest record timestamp at queue offsets `[from, end)`, or
    /// `None` when no record there has one (ListOffsets -3, KIP-734). An
    /// indexed interval wholly inside the range counts by its entry (a
    /// file whose entries are all there by its last running maximum); the
    /// rest is read from the records: a first interval the beginning
    /// moved into (its entry covers records that are gone), intervals
    /// without an entry yet, and the tail. So at most about two intervals
    /// of records are read while the index is complete.
    pub(crate) fn max_timestamp(
        &self,
        from: u64,
        end: u64,
        times: &mut dyn RecordTimes,
    ) -> Result<Option<i64>> {
        let mut best = NO_RECORDS;
        // The ranges to read, planned under the lock and read after it,
        // so the dispatcher's appends do not wait for the reads.
        let mut unindexed: Vec<(u64, u64)> = Vec::new();
        {
            let files = self.lock();
            let mut at = from;
            while at < end {
                let iv = self.interval_of(at);
                let to = iv.end.min(end);
                let entry = (at == iv.start && iv.end <= end)
                    .then(|| files.binary_search_by_key(&iv.file_first, |f| f.first_unit))
                    .and_then(Result::ok)
                    .map(|i| &files[i]);
                match entry {
                    Some(f)
                        if iv.k == 0
                            && f.first_unit + self.units_per_file <= end
                            && f.maxima.len() as u64 == self.complete_in(f.first_unit, end) =>
                    {
                        // The whole file, indexed: its running maximum.
                        best = best.max(f.running.last().copied().unwrap_or(NO_RECORDS));
                        at = f.first_unit + self.units_per_file;
                        continue;
                    }
                    Some(f) if (iv.k as usize) < f.maxima.len() => {
                        best = best.max(f.maxima[iv.k as usize]);
                    }
                    _ => unindexed.push((at, to)),
                }
                at = to;
            }
        }
        for (lo, hi) in unindexed {
            best = best.max(max_timestamp(times, lo, hi)?);
        }
        Ok((best != NO_RECORDS).then_some(best))
    }
}

/// The largest timestamp among the records of `[from, to)`.
pub(super) fn max_timestamp(times: &mut dyn RecordTimes, from: u64, to: u64) -> Result<i64> {
    let mut max_ts = NO_RECORDS;
    for offset in from..to {
        if let Some(ts) = times.timestamp_at(offset)? {
            max_ts = max_ts.max(ts);
        }
    }
    Ok(max_ts)
}

/// The first offset of `[from, to)` whose record's timestamp is at least
/// `timestamp_ms`.
pub(crate) fn first_at_or_after(
    times: &mut dyn RecordTimes,
    from: u64,
    to: u64,
    timestamp_ms: i64,
) -> Result<Option<u64>> {
    for offset in from..to {
        if times
            .timestamp_at(offset)?
            .is_some_and(|ts| ts >= timestamp_ms)
        {
            return Ok(Some(offset));
        }
    }
    Ok(None)
}
