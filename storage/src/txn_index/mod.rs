//! A partition's transactions as its readers see them (issue 38's read
//! side; nothing feeds it yet): each producer's open transaction and where
//! it began, the last stable offset (LSO) that follows from them, and the
//! transactions aborted, which a read_committed fetch must be told of so
//! the client drops their records.
//!
//! Kafka's rules:
//! * a producer's transaction in a partition opens at its first
//!   transactional record and closes at its COMMIT or ABORT marker;
//! * the LSO is the first offset of the earliest transaction still open,
//!   or the log's end when none is: read_committed reads stop there;
//! * a fetch of `[from, to)` names every aborted transaction whose range
//!   reaches `from` and begins below `to`. Entries are kept in the order
//!   their markers were written, each with the LSO the partition had once
//!   it ended; the search stops at the first whose LSO reaches `to`, since
//!   every transaction aborted after it began at or past that LSO.
//!
//! [`format`] is the on-disk entry ([`AbortedTxn`]).

pub mod format;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

pub use format::AbortedTxn;

/// Producers with a transaction open in one partition at once: Kafka
/// bounds them by its producer state's expiry; one partition holding more
/// is a client making the server hold memory.
pub const OPEN_PER_PARTITION_MAX: usize = 100_000;

/// Why a record or marker was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TxnIndexProblem {
    #[error("offset {offset} is below the last one seen, {last}: records arrive in offset order")]
    OutOfOrder { offset: u64, last: u64 },
    #[error("more than {OPEN_PER_PARTITION_MAX} transactions open in one partition")]
    TooManyOpen,
}

/// One partition's transactions.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PartitionTxns {
    /// Producer id → the first offset of its open transaction.
    open: BTreeMap<i64, u64>,
    /// The same, ordered by first offset: the LSO is the first.
    by_first: BTreeSet<(u64, i64)>,
    /// Aborted transactions, in the order of their markers.
    aborted: Vec<AbortedTxn>,
    /// The last offset taken, so everything arrives in order.
    last_offset: Option<u64>,
}

impl PartitionTxns {
    /// A partition whose aborted transactions so far are `aborted` (read
    /// back from its index, in order).
    pub fn with_aborted(aborted: Vec<AbortedTxn>) -> Self {
        PartitionTxns {
            aborted,
            ..PartitionTxns::default()
        }
    }

    fn take(&mut self, offset: u64) -> Result<(), TxnIndexProblem> {
        if let Some(last) = self.last_offset.filter(|l| offset <= *l) {
            return Err(TxnIndexProblem::OutOfOrder { offset, last });
        }
        self.last_offset = Some(offset);
        Ok(())
    }

    /// A transactional record of `producer_id` at `offset`: opens its
    /// transaction here unless one is open.
    pub fn record(&mut self, producer_id: i64, offset: u64) -> Result<(), TxnIndexProblem> {
        if !self.open.contains_key(&producer_id) && self.open.len() >= OPEN_PER_PARTITION_MAX {
            return Err(TxnIndexProblem::TooManyOpen);
        }
        self.take(offset)?;
        if let std::collections::btree_map::Entry::Vacant(v) = self.open.entry(producer_id) {
            v.insert(offset);
            self.by_first.insert((offset, producer_id));
        }
        Ok(())
    }

    /// `producer_id`'s COMMIT (`commit`) or ABORT marker at `offset`:
    /// closes its transaction. For an abort of a transaction that wrote
    /// here, the entry to append to the index (and kept here); a marker
    /// of a producer with nothing open here writes none (Kafka writes
    /// markers to every partition the transaction added, written to or
    /// not).
    pub fn marker(
        &mut self,
        producer_id: i64,
        offset: u64,
        commit: bool,
    ) -> Result<Option<AbortedTxn>, TxnIndexProblem> {
        self.take(offset)?;
        let Some(first) = self.open.remove(&producer_id) else {
            return Ok(None);
        };
        self.by_first.remove(&(first, producer_id));
        if commit {
            return Ok(None);
        }
        let entry = AbortedTxn {
            producer_id,
            first_offset: first,
            last_offset: offset,
            last_stable_offset: self.last_stable_offset(offset + 1),
        };
        self.aborted.push(entry);
        Ok(Some(entry))
    }

    /// The last stable offset of a partition whose log ends at `end`.
    pub fn last_stable_offset(&self, end: u64) -> u64 {
        self.by_first
            .first()
            .map_or(end, |(first, _)| (*first).min(end))
    }

    /// The aborted transactions a fetch of `[from, to)` must name:
    /// `(producer id, first offset)` of each reaching `from` and beginning
    /// below `to`.
    pub fn aborted_in(&self, from: u64, to: u64) -> Vec<(i64, u64)> {
        let mut out = Vec::new();
        for e in &self.aborted {
            if e.last_offset >= from && e.first_offset < to {
                out.push((e.producer_id, e.first_offset));
            }
            if e.last_stable_offset >= to {
                break;
            }
        }
        out
    }

    /// Forgets aborted transactions wholly below `log_start` (retention
    /// or DeleteRecords took their records): the entries still needed.
    pub fn truncate_before(&mut self, log_start: u64) {
        self.aborted.retain(|e| e.last_offset >= log_start);
    }

    /// The aborted transactions kept, in marker order.
    pub fn aborted(&self) -> &[AbortedTxn] {
        &self.aborted
    }
}
