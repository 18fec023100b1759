//! The time index's writer: the dispatcher notes each record's
//! timestamp in the tail interval and appends an interval's entry when
//! the interval is whole; recovery truncates to the recovered end and
//! rebuilds missing entries from the queue and the log; retention
//! removes files with their queue files; the queue's flush syncs them.
//!
//! Invariants: an entry is written only for an interval wholly below
//! the queue's end; the tail's bounds and maximum are written by the
//! dispatcher alone (or recovery before it runs); entries are synced
//! after the queue's units, never before.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::file::TimeFile;
use super::format::{ENTRY_LEN, HEADER_LEN, NO_RECORDS};
use super::reader::max_timestamp;
use super::{format, Interval, RecordTimes, TimeIndex, FILE_SUFFIX};
use crate::consume_queue::format::UNIT_LEN;
use crate::error::{IoContext, Result};
use crate::fs_util;

impl TimeIndex {
    /// The dispatcher put a new unit at `offset` (the queue's end), of a
    /// record with `timestamp_ms`. One compare while the interval lasts;
    /// its last unit appends its entry.
    #[inline]
    pub(crate) fn note(&self, offset: u64, timestamp_ms: i64) -> Result<()> {
        let end = self.tail_end.load(Ordering::Relaxed);
        if offset >= end || offset < self.tail_start.load(Ordering::Relaxed) {
            // Unknown (`end == 0`: `catch_up` rebuilds it), or a gap or a
            // put outside the tail: rebuilt from the queue.
            self.forget_tail();
            return Ok(());
        }
        if timestamp_ms > self.tail_max.load(Ordering::Relaxed) {
            self.tail_max.store(timestamp_ms, Ordering::Relaxed);
        }
        if offset + 1 < end {
            return Ok(());
        }
        self.finish_tail()
    }

    /// The tail interval is complete: append its entry, and the next
    /// interval becomes the tail.
    fn finish_tail(&self) -> Result<()> {
        let done = self.interval_of(self.tail_start.load(Ordering::Relaxed));
        let max_ts = self.tail_max.load(Ordering::Relaxed);
        let next = self.interval_at(done.file_first, done.k + 1);
        self.set_tail(next.start, next.end, NO_RECORDS);
        let appended = {
            let mut files = self.lock();
            self.append(&mut files, done, max_ts)
        };
        match appended {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.forget_tail();
                Ok(())
            }
            Err(e) => {
                self.forget_tail();
                Err(e)
            }
        }
    }

    fn set_tail(&self, start: u64, end: u64, max_ts: i64) {
        self.tail_end.store(0, Ordering::Relaxed);
        self.tail_start.store(start, Ordering::Relaxed);
        self.tail_max.store(max_ts, Ordering::Relaxed);
        self.tail_end.store(end, Ordering::Relaxed);
    }

    fn forget_tail(&self) {
        self.tail_end.store(0, Ordering::Relaxed);
    }

    /// Whether the tail is unknown: [`TimeIndex::catch_up`] must run before
    /// the index follows new units again.
    pub(crate) fn needs_catch_up(&self) -> bool {
        self.tail_end.load(Ordering::Relaxed) == 0
    }

    /// Append the entry of `iv`; `false` if it is not the next entry of its
    /// file (the caller rebuilds instead).
    fn append(&self, files: &mut Vec<TimeFile>, iv: Interval, max_ts: i64) -> Result<bool> {
        let at = match files.binary_search_by_key(&iv.file_first, |f| f.first_unit) {
            Ok(at) => at,
            Err(at) => {
                let f = self.create_file(iv.file_first)?;
                files.insert(at, f);
                at
            }
        };
        let f = &mut files[at];
        if f.maxima.len() as u64 != iv.k {
            return Ok(false);
        }
        let bytes = format::encode_entry(iv.file_first, iv.k, max_ts);
        let pos = HEADER_LEN as u64 + iv.k * ENTRY_LEN as u64;
        f.handle()?.write_all_at(&bytes, pos).at(&f.path)?;
        f.push(max_ts);
        Ok(true)
    }

    /// A new time file holding only its header, made in place with no
    /// fsync (the dispatcher's path, like a new queue file's): its header
    /// is synced by the next [`TimeIndex::flush`], and its directory, noted
    /// in `names`, by the queues' flush after that, before a checkpoint
    /// counts any unit of its interval. A power loss before leaves it
    /// missing, empty or with a torn header, which [`TimeIndex::load`]
    /// removes; [`TimeIndex::catch_up`] rebuilds its entries.
    fn create_file(&self, first_unit: u64) -> Result<TimeFile> {
        let name = fs_util::offset_file_name(first_unit * UNIT_LEN as u64);
        let path = self.dir.join(format!("{name}{FILE_SUFFIX}"));
        self.names.create_dir_all(&self.dir)?;
        let header = format::encode_header(self.interval as u32);
        let build = || -> Result<TimeFile> {
            let file = fs_util::create_empty(&path)?;
            self.names.note(&self.dir);
            file.write_all_at(&header, 0).at(&path)?;
            Ok(TimeFile {
                first_unit,
                path: path.clone(),
                file: Some(Arc::new(file)),
                maxima: Vec::new(),
                running: Vec::new(),
                synced: 0,
                header_synced: false,
            })
        };
        build().inspect_err(|_| {
            let _ = std::fs::remove_file(&path);
        })
    }

    /// Bring the index up to the queue: `queue_files` are the first units
    /// of the queue's files, `end` its `max_offset`. Drops time files of
    /// queue files that are gone and entries at or past `end`, builds every
    /// missing entry of a complete interval from the records (`times`), and
    /// the tail's running maximum. Returns the entries built.
    pub(crate) fn catch_up(
        &self,
        queue_files: &[u64],
        end: u64,
        times: &mut dyn RecordTimes,
    ) -> Result<u64> {
        let mut files = self.lock();
        let mut kept = Vec::with_capacity(files.len());
        for f in files.drain(..) {
            if queue_files.contains(&f.first_unit) && f.first_unit < end {
                kept.push(f);
            } else {
                std::fs::remove_file(&f.path).at(&f.path)?;
            }
        }
        *files = kept;
        let mut built = 0;
        for &file_first in queue_files.iter().filter(|&&f| f < end) {
            let complete = self.complete_in(file_first, end);
            if let Ok(at) = files.binary_search_by_key(&file_first, |f| f.first_unit) {
                files[at].truncate(complete as usize)?;
            }
            let have = files
                .iter()
                .find(|f| f.first_unit == file_first)
                .map_or(0, |f| f.maxima.len() as u64);
            for k in have..complete {
                let iv = self.interval_at(file_first, k);
                let max_ts = max_timestamp(times, iv.start, iv.end)?;
                if !self.append(&mut files, iv, max_ts)? {
                    break; // cannot happen: entries are built in order
                }
                built += 1;
                if built % 10_000 == 0 {
                    tracing::info!(dir = %self.dir.display(), built, "rebuilding the time index");
                }
            }
        }
        drop(files);
        let tail = self.interval_of(end);
        let max_ts = max_timestamp(times, tail.start, end)?;
        self.set_tail(tail.start, tail.end, max_ts);
        Ok(built)
    }

    /// Drop every entry whose interval reaches `end` or past it, durably,
    /// and time files wholly past it; the tail becomes unknown. Recovery
    /// (the queue's end moved down) and repairs (a unit below the end was
    /// rewritten at `end`).
    pub(crate) fn truncate_to(&self, end: u64) -> Result<()> {
        self.forget_tail();
        let mut files = self.lock();
        let mut removed = false;
        while files.last().is_some_and(|f| f.first_unit >= end) {
            if let Some(f) = files.pop() {
                std::fs::remove_file(&f.path).at(&f.path)?;
                removed = true;
            }
        }
        for f in files.iter_mut() {
            let complete = self.complete_in(f.first_unit, end);
            f.truncate(complete as usize)?;
        }
        if removed {
            fs_util::fsync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Retention: delete the time files of queue files before `first_unit`
    /// (the first queue file kept).
    pub(crate) fn remove_before(&self, first_unit: u64) -> Result<usize> {
        let mut files = self.lock();
        let mut removed = 0;
        while files.first().is_some_and(|f| f.first_unit < first_unit) {
            let f = files.remove(0);
            std::fs::remove_file(&f.path).at(&f.path)?;
            removed += 1;
        }
        Ok(removed)
    }

    /// Make every entry appended so far durable. The file is synced outside
    /// the lock, so the dispatcher's appends do not wait for the disk.
    pub(crate) fn flush(&self) -> Result<()> {
        let mut pending: Vec<(u64, Arc<File>, PathBuf, usize)> = Vec::new();
        for f in self
            .lock()
            .iter_mut()
            .filter(|f| f.synced < f.maxima.len() || !f.header_synced)
        {
            pending.push((f.first_unit, f.handle()?, f.path.clone(), f.maxima.len()));
        }
        let cap = format::entries_per_file(self.units_per_file, self.interval) as usize;
        for (first_unit, file, path, n) in pending {
            crate::durability::sync_data(&file, &path).at(&path)?;
            if let Some(f) = self.lock().iter_mut().find(|f| f.first_unit == first_unit) {
                f.header_synced = true;
                f.synced = f.synced.max(n.min(f.maxima.len()));
                if f.synced == cap {
                    f.file = None; // full and durable: nothing more to write
                }
            }
        }
        Ok(())
    }
}
