//! Each partition's transactions as its readers see them (issue 38): each
//! producer's open transaction and where it began, the last stable offset
//! (LSO) that follows from them, and the transactions aborted, which a
//! read_committed fetch must be told of so the client drops their records.
//!
//! Who moves what ([`TxnTable`]): the CommitLog's writer, under its lock,
//! opens a producer's transaction at its first transactional entry in a
//! partition and closes it at its marker, before the entry can be
//! dispatched; a reader takes the queue's end first and the table after,
//! so every transactional record below that end is already counted. The
//! aborted transactions are kept in memory in marker order and on disk in
//! each partition's `aborted.txnindex` ([`mod@file`]), which the dispatcher
//! appends from the marker entries themselves (their marker block names
//! the transaction's first offset and the LSO), so the file is rebuilt by
//! re-dispatch like every other index, and loaded at open.
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
//! [`mod@format`] is the on-disk entry ([`AbortedTxn`]).

pub mod file;
pub mod format;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub use format::AbortedTxn;

use crate::error::SequenceProblem;

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

    /// Whether `producer_id` has a transaction open here.
    pub fn is_open(&self, producer_id: i64) -> bool {
        self.open.contains_key(&producer_id)
    }

    /// The first offset of `producer_id`'s open transaction here.
    pub fn open_since(&self, producer_id: i64) -> Option<u64> {
        self.open.get(&producer_id).copied()
    }

    /// Whether a transactional record of `producer_id` may come: its
    /// transaction is open here, or there is room for one more.
    pub fn can_open(&self, producer_id: i64) -> Result<(), TxnIndexProblem> {
        if !self.open.contains_key(&producer_id) && self.open.len() >= OPEN_PER_PARTITION_MAX {
            return Err(TxnIndexProblem::TooManyOpen);
        }
        Ok(())
    }

    /// What a marker of `producer_id` at `offset` would end, without
    /// ending it: the first offset of its open transaction here (if any)
    /// and the LSO once it is ended (what the marker block records).
    pub fn ending(&self, producer_id: i64, offset: u64) -> (Option<u64>, u64) {
        let first = self.open.get(&producer_id).copied();
        let lso = self
            .by_first
            .iter()
            .find(|(_, p)| *p != producer_id)
            .map_or(offset + 1, |(f, _)| *f);
        (first, lso)
    }

    /// `producer_id`'s COMMIT (`commit`) or ABORT marker at `offset`, at
    /// CommitLog position `position`: closes its transaction. For an abort
    /// of a transaction that wrote here, the entry for the index (and kept
    /// here); a marker of a producer with nothing open here makes none
    /// (Kafka writes markers to every partition the transaction added,
    /// written to or not).
    pub fn marker(
        &mut self,
        producer_id: i64,
        offset: u64,
        commit: bool,
        position: u64,
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
            marker_position: position,
        };
        self.aborted.push(entry);
        Ok(Some(entry))
    }

    /// The open transactions, `(producer id, first offset)` by first
    /// offset (the producer-state snapshot's section).
    pub fn open(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        self.by_first.iter().map(|(f, p)| (*p, *f))
    }

    /// Whether nothing is open and nothing aborted is kept.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty() && self.aborted.is_empty()
    }

    /// The last stable offset of a partition whose log ends at `end`.
    pub fn last_stable_offset(&self, end: u64) -> u64 {
        self.by_first
            .first()
            .map_or(end, |(first, _)| (*first).min(end))
    }

    /// The aborted transactions from the first whose marker lies at or
    /// past `from`: markers come in offset order, so a binary search finds
    /// it, and a read at a partition's end does not walk every
    /// transaction ever aborted there.
    fn reaching(&self, from: u64) -> &[AbortedTxn] {
        let first = self.aborted.partition_point(|e| e.last_offset < from);
        &self.aborted[first..]
    }

    /// The aborted transactions a fetch of `[from, to)` must name:
    /// `(producer id, first offset)` of each reaching `from` and beginning
    /// below `to`.
    pub fn aborted_in(&self, from: u64, to: u64) -> Vec<(i64, u64)> {
        let mut out = Vec::new();
        for e in self.reaching(from) {
            if e.last_offset >= from && e.first_offset < to {
                out.push((e.producer_id, e.first_offset));
            }
            if e.last_stable_offset >= to {
                break;
            }
        }
        out
    }

    /// [`aborted_in`](Self::aborted_in) with each transaction's marker
    /// offset: `(producer id, first offset, last offset)`, for a reader
    /// that drops the aborted records itself (HTTP's read_committed).
    pub fn aborted_ranges(&self, from: u64, to: u64) -> Vec<(i64, u64, u64)> {
        let mut out = Vec::new();
        for e in self.reaching(from) {
            if e.last_offset >= from && e.first_offset < to {
                out.push((e.producer_id, e.first_offset, e.last_offset));
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

    /// Recovery: the aborted transactions are the index file's (complete
    /// once recovery re-dispatched the log to its end), replacing what a
    /// replay of markers made.
    pub fn set_aborted(&mut self, aborted: Vec<AbortedTxn>) {
        self.aborted = aborted;
    }
}

/// Aborted transactions by producer, to ask of one record at a time
/// whether it is aborted: a transactional record of producer P at offset
/// O is when one of P's aborted transactions spans O (its first offset to
/// its marker's). Built from [`TxnTable::aborted_ranges`] for a reader
/// that drops aborted records itself (HTTP and compacted reads at
/// read_committed, the cleaner). A lookup is a hash and a binary search:
/// a producer's transactions in a partition follow each other.
#[derive(Debug, Default, Clone)]
pub struct AbortedRanges {
    by_producer: HashMap<i64, Vec<(u64, u64)>>,
}

impl AbortedRanges {
    /// From `(producer id, first offset, marker offset)` entries.
    pub fn new(ranges: impl IntoIterator<Item = (i64, u64, u64)>) -> AbortedRanges {
        let mut by_producer: HashMap<i64, Vec<(u64, u64)>> = HashMap::new();
        for (producer, first, last) in ranges {
            by_producer.entry(producer).or_default().push((first, last));
        }
        for spans in by_producer.values_mut() {
            spans.sort_unstable();
        }
        AbortedRanges { by_producer }
    }

    pub fn is_empty(&self) -> bool {
        self.by_producer.is_empty()
    }

    /// Whether producer `producer_id`'s transactional record at `offset`
    /// belongs to an aborted transaction.
    pub fn contains(&self, producer_id: i64, offset: u64) -> bool {
        let Some(spans) = self.by_producer.get(&producer_id) else {
            return false;
        };
        // The last transaction beginning at or below the offset.
        let after = spans.partition_point(|&(first, _)| first <= offset);
        after > 0 && offset <= spans[after - 1].1
    }
}

/// One partition's open transaction in [`TxnTableGuard::open_all`]: topic,
/// partition, producer id, first offset.
pub type OpenTxn = (Arc<str>, u32, i64, u64);

/// Every partition's transactions (see the module doc). Empty, and one
/// atomic load per read, until the first transaction's entry.
#[derive(Debug, Default)]
pub struct TxnTable {
    parts: Mutex<HashMap<Arc<str>, HashMap<u32, PartitionTxns>>>,
    /// Set once any partition has an entry: reads of a store that never
    /// saw a transaction skip the lock.
    any: AtomicBool,
}

impl TxnTable {
    /// The table's lock (the writer takes it under its own; a reader
    /// alone).
    pub fn lock(&self) -> TxnTableGuard<'_> {
        TxnTableGuard {
            parts: self.parts.lock().unwrap_or_else(|e| e.into_inner()),
            any: &self.any,
        }
    }

    /// The LSO of `topic`-`partition` whose readable end is `end` (read
    /// before this call: see the module doc).
    pub fn last_stable_offset(&self, topic: &str, partition: u32, end: u64) -> u64 {
        if !self.any.load(Ordering::Acquire) {
            return end;
        }
        self.lock()
            .get(topic, partition)
            .map_or(end, |t| t.last_stable_offset(end))
    }

    /// Kafka's transaction rules for a producer's batch to the partition,
    /// checked by the writer under its lock before anything is written: a
    /// producer with a transaction open here writes inside it until its
    /// marker (`TransactionOpen`), and a partition holds at most
    /// [`OPEN_PER_PARTITION_MAX`] open transactions. One atomic load while
    /// no transaction was ever seen.
    pub fn check_batch(
        &self,
        topic: &str,
        partition: u32,
        producer_id: i64,
        transactional: bool,
    ) -> Result<(), SequenceProblem> {
        if !self.any.load(Ordering::Acquire) {
            return Ok(());
        }
        let parts = self.lock();
        let Some(t) = parts.get(topic, partition) else {
            return Ok(());
        };
        if !transactional && t.is_open(producer_id) {
            return Err(SequenceProblem::TransactionOpen { producer_id });
        }
        if transactional && t.can_open(producer_id).is_err() {
            return Err(SequenceProblem::TooManyTransactions {
                producer_id,
                max: OPEN_PER_PARTITION_MAX,
            });
        }
        Ok(())
    }

    /// Whether `topic`-`partition` keeps an aborted transaction whose
    /// marker lies below queue offset `below`.
    pub fn has_aborted_below(&self, topic: &str, partition: u32, below: u64) -> bool {
        self.any.load(Ordering::Acquire)
            && self
                .lock()
                .get(topic, partition)
                .and_then(|t| t.aborted.first())
                .is_some_and(|e| e.last_offset < below)
    }

    /// Forgets `topic`-`partition`'s aborted transactions whose marker lies
    /// below `below` ([`PartitionTxns::truncate_before`]).
    pub fn truncate_before(&self, topic: &str, partition: u32, below: u64) {
        let mut g = self.lock();
        if let Some(t) = g
            .parts
            .get_mut(topic)
            .and_then(|parts| parts.get_mut(&partition))
        {
            t.truncate_before(below);
        }
    }

    /// Whether any partition of `topic` has seen a transaction's entry
    /// (a record or a marker) since it was created.
    pub fn has_topic(&self, topic: &str) -> bool {
        self.any.load(Ordering::Acquire) && self.lock().parts.contains_key(topic)
    }

    /// The aborted transactions a fetch of `[from, to)` of the partition
    /// must name (see [`PartitionTxns::aborted_in`]).
    pub fn aborted_in(&self, topic: &str, partition: u32, from: u64, to: u64) -> Vec<(i64, u64)> {
        if !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.lock()
            .get(topic, partition)
            .map(|t| t.aborted_in(from, to))
            .unwrap_or_default()
    }
}

impl TxnTable {
    /// The aborted transactions of `[from, to)` with their marker offsets
    /// (see [`PartitionTxns::aborted_ranges`]).
    pub fn aborted_ranges(
        &self,
        topic: &str,
        partition: u32,
        from: u64,
        to: u64,
    ) -> Vec<(i64, u64, u64)> {
        if !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.lock()
            .get(topic, partition)
            .map(|t| t.aborted_ranges(from, to))
            .unwrap_or_default()
    }
}

/// [`TxnTable`] locked.
pub struct TxnTableGuard<'a> {
    parts: MutexGuard<'a, HashMap<Arc<str>, HashMap<u32, PartitionTxns>>>,
    any: &'a AtomicBool,
}

impl TxnTableGuard<'_> {
    pub fn get(&self, topic: &str, partition: u32) -> Option<&PartitionTxns> {
        self.parts.get(topic)?.get(&partition)
    }

    /// The partition's transactions, made empty if it has none yet.
    pub fn get_mut(&mut self, topic: &Arc<str>, partition: u32) -> &mut PartitionTxns {
        self.any.store(true, Ordering::Release);
        if !self.parts.contains_key(&**topic) {
            self.parts.insert(Arc::clone(topic), HashMap::new());
        }
        self.parts
            .get_mut(&**topic)
            .expect("inserted above")
            .entry(partition)
            .or_default()
    }

    /// Every open transaction, for the producer-state snapshot.
    pub fn open_all(&self) -> Vec<OpenTxn> {
        let mut out = Vec::new();
        for (topic, parts) in self.parts.iter() {
            for (&partition, t) in parts {
                out.extend(t.open().map(|(p, f)| (Arc::clone(topic), partition, p, f)));
            }
        }
        out.sort();
        out
    }

    /// Each partition's count of aborted transactions kept, for the
    /// producer-state snapshot (what its index file must hold).
    pub fn aborted_counts(&self) -> Vec<(Arc<str>, u32, u32)> {
        let mut out = Vec::new();
        for (topic, parts) in self.parts.iter() {
            for (&partition, t) in parts {
                let n = u32::try_from(t.aborted.len()).unwrap_or(u32::MAX);
                if n > 0 {
                    out.push((Arc::clone(topic), partition, n));
                }
            }
        }
        out.sort();
        out
    }

    /// A topic was deleted: its transactions go with it.
    pub fn remove_topic(&mut self, topic: &str) {
        self.parts.remove(topic);
    }
}
