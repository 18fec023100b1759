//! The epoch file (`<data_dir>/epochs`): which master wrote which part of
//! the CommitLog, as `(epoch, start)` entries: the master of `epoch` wrote
//! its first byte at physical offset `start`, and every byte up to the
//! next entry's start (RocketMQ 5's EpochFile, Kafka's
//! `leader-epoch-checkpoint`; issue 39, the cluster).
//!
//! What it is for: a node that comes back after a failover must cut what
//! it holds past the point where its log and the new master's part ways
//! (bytes a deposed master wrote that nobody acknowledged) before it
//! copies on. Within one epoch there is one master, and a replica only
//! copies that master's bytes at the same offsets, so two logs hold the
//! same bytes wherever they name the same epoch: [`common_end`] finds
//! where that stops from the two files alone, without reading a byte of
//! either log.
//!
//! ```text
//! offset  size  field
//!      0     4  magic     u32, MAGIC ("TEPO")
//!      4     2  version   u16, VERSION (1)
//!      6     2  reserved  0
//!      8     4  count     u32, at most EPOCHS_MAX
//!     12  16×n  entries   epoch u64, start u64 (physical offset)
//!      …     4  crc       u32, CRC32C of every byte before it
//! ```
//! Epochs strictly grow entry by entry; starts never go down (an epoch
//! whose master wrote nothing starts where the next one does). The file
//! is replaced whole (a temporary file synced, renamed over it, the
//! directory synced) before a change is used: a new epoch is durable
//! before its master's first byte, a cut before the log's. A missing file
//! is a log no master of a cluster wrote (a single node's); a damaged one
//! is refused at open, by name: guessing would keep bytes a failover took
//! back.

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use crate::codec::{self, push_u16, push_u32, push_u64, U16_LEN, U32_LEN};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;

pub const FILE_NAME: &str = "epochs";
/// "TEPO" read as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"TEPO");
pub const VERSION: u16 = 1;
/// Entries the file may hold: a failover a minute for a month and a half.
pub const EPOCHS_MAX: u32 = 1 << 16;
/// Magic, version, reserved, count.
const HEADER_LEN: usize = U32_LEN + U16_LEN + U16_LEN + U32_LEN;
const ENTRY_LEN: usize = 16;
const WHAT: &str = "epoch file";

/// The master of `epoch` wrote from physical offset `start` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: u64,
    pub start: u64,
}

/// Why an entry cannot follow the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EpochOrder {
    #[error("epoch {epoch} does not follow epoch {last}")]
    EpochNotAfter { epoch: u64, last: u64 },
    #[error("epoch {epoch} starts at {start}, before epoch {last}'s start {last_start}")]
    StartBefore {
        epoch: u64,
        start: u64,
        last: u64,
        last_start: u64,
    },
    #[error("more than {EPOCHS_MAX} epochs")]
    TooMany,
}

/// Whether `next` may follow `entries`.
fn check_next(entries: &[EpochEntry], next: EpochEntry) -> std::result::Result<(), EpochOrder> {
    if entries.len() >= EPOCHS_MAX as usize {
        return Err(EpochOrder::TooMany);
    }
    let Some(last) = entries.last() else {
        return Ok(());
    };
    if next.epoch <= last.epoch {
        return Err(EpochOrder::EpochNotAfter {
            epoch: next.epoch,
            last: last.epoch,
        });
    }
    if next.start < last.start {
        return Err(EpochOrder::StartBefore {
            epoch: next.epoch,
            start: next.start,
            last: last.epoch,
            last_start: last.start,
        });
    }
    Ok(())
}

pub fn encode(entries: &[EpochEntry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER_LEN + entries.len() * ENTRY_LEN + U32_LEN);
    push_u32(&mut b, MAGIC);
    push_u16(&mut b, VERSION);
    push_u16(&mut b, 0);
    push_u32(&mut b, entries.len() as u32);
    for e in entries {
        push_u64(&mut b, e.epoch);
        push_u64(&mut b, e.start);
    }
    let crc = crc32c::crc32c(&b);
    push_u32(&mut b, crc);
    b
}

/// The entries of a whole file, every rule checked: the framing, the
/// count against the bytes and [`EPOCHS_MAX`], the order.
pub fn decode(b: &[u8]) -> std::result::Result<Vec<EpochEntry>, CorruptionKind> {
    let mut r = codec::crc_framed_table(b, WHAT, HEADER_LEN, MAGIC, VERSION)?;
    let count = r.u32()?;
    if count > EPOCHS_MAX {
        return Err(CorruptionKind::TooManyEntries {
            count,
            max: EPOCHS_MAX,
        });
    }
    let want = count as usize * ENTRY_LEN;
    if r.remaining() != want {
        return Err(CorruptionKind::FileLength {
            len: b.len() as u64,
            expected: (HEADER_LEN + want + U32_LEN) as u64,
        });
    }
    let mut entries = Vec::with_capacity(count as usize);
    for i in 0..count {
        let next = EpochEntry {
            epoch: r.u64()?,
            start: r.u64()?,
        };
        check_next(&entries, next).map_err(|why| CorruptionKind::BadTopicEntry {
            entry: i,
            reason: why.to_string(),
        })?;
        entries.push(next);
    }
    Ok(entries)
}

/// A node's epoch file, loaded (see the module doc).
#[derive(Debug)]
pub struct Epochs {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl Epochs {
    /// `<dir>/epochs`; none there is no epoch yet.
    pub fn load(dir: &Path) -> Result<Epochs> {
        let path = dir.join(FILE_NAME);
        let entries = match fs_util::read_small(&path, max_file_len()).at(&path)? {
            None => Vec::new(),
            Some(b) => decode(&b).map_err(|why| StoreError::corruption(&path, 0, why))?,
        };
        Ok(Epochs { path, entries })
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest epoch.
    pub fn last(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// A new epoch whose master writes from `start` on: durable before it
    /// returns (before the master's first byte).
    pub fn begin(&mut self, epoch: u64, start: u64) -> Result<()> {
        let next = EpochEntry { epoch, start };
        check_next(&self.entries, next)
            .map_err(|why| StoreError::invalid(format!("{}: {why}", self.path.display())))?;
        let mut entries = self.entries.clone();
        entries.push(next);
        self.store(entries)
    }

    /// The log was cut at physical offset `end` (to a divergence point):
    /// the epochs that began past it are forgotten; one that began at it
    /// wrote nothing that is left, and goes too. Durable before it returns
    /// (before the log's cut).
    pub fn truncate_to(&mut self, end: u64) -> Result<()> {
        let keep = self.entries.partition_point(|e| e.start < end);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.store(self.entries[..keep].to_vec())
    }

    /// Kafka's OffsetsForLeaderEpoch, asked of this log (which ends at
    /// `log_end`): the largest epoch not above `epoch`, with where it
    /// ends here (the next epoch's start, or `log_end`). `None` when every
    /// epoch here is above it.
    pub fn end_for(&self, epoch: u64, log_end: u64) -> Option<(u64, u64)> {
        let after = self.entries.partition_point(|e| e.epoch <= epoch);
        let found = self.entries.get(after.checked_sub(1)?)?;
        let end = self.entries.get(after).map_or(log_end, |next| next.start);
        Some((found.epoch, end.min(log_end).max(found.start)))
    }

    fn store(&mut self, entries: Vec<EpochEntry>) -> Result<()> {
        fs_util::write_atomic(&self.path, &encode(&entries))?;
        self.entries = entries;
        Ok(())
    }
}

/// The largest file [`Epochs::load`] reads.
fn max_file_len() -> u64 {
    (HEADER_LEN + EPOCHS_MAX as usize * ENTRY_LEN + U32_LEN) as u64
}

/// The epoch that wrote physical offset `at` of a log with `entries`
/// (`None`: below its first epoch, written by no master of the cluster).
fn epoch_at(entries: &[EpochEntry], at: u64) -> Option<u64> {
    let after = entries.partition_point(|e| e.start <= at);
    Some(entries.get(after.checked_sub(1)?)?.epoch)
}

/// Where two logs stop holding the same bytes: the end of the longest
/// prefix in which every offset was written in the same epoch in both
/// (`a` with its epochs, ending at `a_end`; `b` likewise). Below it a
/// returning node keeps what it has; from it on it cuts and copies. An
/// offset no epoch of the cluster wrote in one of them never matches: a
/// node's history from before it joined is not the master's.
pub fn common_end(a: &[EpochEntry], a_end: u64, b: &[EpochEntry], b_end: u64) -> u64 {
    let end = a_end.min(b_end);
    // The labels change only at the entries' starts: compare them on
    // each stretch between two such boundaries.
    let mut bounds: Vec<u64> = a
        .iter()
        .chain(b)
        .map(|e| e.start)
        .filter(|&s| s < end)
        .collect();
    bounds.push(0);
    bounds.sort_unstable();
    bounds.dedup();
    for &at in &bounds {
        match (epoch_at(a, at), epoch_at(b, at)) {
            (Some(x), Some(y)) if x == y => {}
            _ => return at,
        }
    }
    end
}
