//! One time file as the index holds it: its entries' interval maxima
//! and their running maximum in memory, its handle (closed once full and
//! synced), and how many entries are durable.
//!
//! Invariants: `running` is the running maximum of `maxima` (monotonic,
//! what a lookup binary-searches); a truncation is durable before the
//! entries are forgotten, so a dropped entry never comes back stale.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use super::format::{ENTRY_LEN, HEADER_LEN, NO_RECORDS};
use crate::error::{IoContext, Result};
use crate::fs_util;

pub(super) struct TimeFile {
    pub(super) first_unit: u64,
    pub(super) path: PathBuf,
    /// Open while entries may still be appended or synced: a full, synced
    /// file is closed (one descriptor per partition, not per queue file,
    /// beside the queue's own) and opened again only to be truncated.
    pub(super) file: Option<Arc<File>>,
    /// Entry k's interval maximum.
    pub(super) maxima: Vec<i64>,
    /// `running[k]` = max of `maxima[..=k]`: monotonic, for binary search.
    pub(super) running: Vec<i64>,
    /// Entries durable on disk.
    pub(super) synced: usize,
    /// The header (and so the file's size) is durable: false for a file
    /// made since the last flush, with no fsync ([`TimeIndex::create_file`]).
    pub(super) header_synced: bool,
}

impl TimeFile {
    pub(super) fn push(&mut self, max_ts: i64) {
        let prev = self.running.last().copied().unwrap_or(NO_RECORDS);
        self.maxima.push(max_ts);
        self.running.push(prev.max(max_ts));
    }

    /// The open file, opened again if it was closed.
    pub(super) fn handle(&mut self) -> Result<Arc<File>> {
        if let Some(file) = &self.file {
            return Ok(Arc::clone(file));
        }
        let (file, _) = fs_util::open_read_write(&self.path)?;
        let file = Arc::new(file);
        self.file = Some(Arc::clone(&file));
        Ok(file)
    }

    /// Keep the first `n` entries, durably (a dropped entry that came back
    /// after a power loss could be stale).
    pub(super) fn truncate(&mut self, n: usize) -> Result<()> {
        if self.maxima.len() <= n {
            return Ok(());
        }
        self.maxima.truncate(n);
        self.running.truncate(n);
        let file = self.handle()?;
        file.set_len((HEADER_LEN + n * ENTRY_LEN) as u64)
            .at(&self.path)?;
        crate::durability::sync_data(&file, &self.path).at(&self.path)?;
        self.synced = self.synced.min(n);
        Ok(())
    }
}
