//! The IndexFiles' writer: the dispatcher adds an entry per keyed record
//! (a new file when the newest is full), the checkpoint flushes,
//! recovery truncates, retention deletes old files.
//!
//! Invariants: one writer (the dispatcher, or recovery before it runs);
//! an entry's bytes are written before the slot that publishes it is
//! stored (`Release`), then the entry count; records arrive in physical
//! order, and one at or below the newest indexed offset (a replay) is
//! skipped; a file is created whole under a temporary name and renamed,
//! with only its header synced, and every entry put is durable after the
//! next `IndexService::flush`, which the checkpoint calls first.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use memmap2::MmapOptions;

use super::file::IndexFile;
use super::format::{self, Entry, IndexHeader, ENTRY_LEN};
use super::{IndexService, TMP_SUFFIX};
use crate::error::{IoContext, Result};
use crate::fs_util;

/// [`IndexFile::synced_entries`] after a change no entry count shows (a
/// recovery truncation): the next flush syncs the file whatever its count.
const SYNC_NEEDED: u32 = u32::MAX;

impl IndexFile {
    /// Create a file with its header written, under a temporary name that
    /// is renamed into place only when whole: a crash mid-creation never
    /// leaves a short index file behind.
    fn create(path: PathBuf, slot_count: u32, entry_capacity: u32) -> Result<IndexFile> {
        let header = IndexHeader::new(slot_count, entry_capacity);
        let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(TMP_SUFFIX);
        let tmp = path.with_file_name(tmp_name);
        fs_util::create_via_temp(
            &tmp,
            |file| {
                // Backed, not sparse: the dispatcher writes entries through
                // the map, and a store into a hole on a full disk is SIGBUS
                // (issue 35). A short disk fails here, as an error.
                fs_util::allocate(file, header.file_len() as u64)?;
                std::os::unix::fs::FileExt::write_all_at(file, &header.encode(), 0)
            },
            |file| {
                let map = MmapOptions::new()
                    .len(header.file_len())
                    .map_raw(&file)
                    .at(&tmp)?;
                std::fs::rename(&tmp, &path).at(&path)?;
                Ok(IndexFile {
                    path: path.clone(),
                    slot_count,
                    entry_capacity,
                    map,
                    _file: file,
                    // The header, with entry 0 reserved, was synced above.
                    synced_entries: AtomicU32::new(1),
                })
            },
        )
    }

    pub(super) fn write_entry(&self, i: u32, e: &Entry) {
        let at = self.entries_at() + i as usize * ENTRY_LEN;
        assert!(i < self.entry_capacity);
        // SAFETY: in bounds; entry `i` is not reachable by readers yet.
        unsafe {
            std::ptr::copy_nonoverlapping(
                e.encode().as_ptr(),
                self.map.as_mut_ptr().add(at),
                ENTRY_LEN,
            )
        };
    }

    /// Add an entry; `false` if the file is full.
    fn put(&self, key_hash: u32, physical: u64, store_ts_ms: i64) -> bool {
        let idx = self.entry_count();
        if idx >= self.entry_capacity {
            return false;
        }
        if idx == 1 {
            self.atomic_u64(format::OFF_BEGIN_TS)
                .store(store_ts_ms as u64, Ordering::Release);
            self.atomic_u64(format::OFF_BEGIN_PHYS)
                .store(physical, Ordering::Release);
        }
        let begin = self.begin_timestamp_ms();
        let delta_s = (store_ts_ms.saturating_sub(begin).max(0) / 1000).min(u32::MAX as i64) as u32;
        let slot = self.slot(key_hash % self.slot_count);
        let prev = slot.load(Ordering::Acquire);
        let prev = if prev < idx { prev } else { 0 };
        self.write_entry(
            idx,
            &Entry {
                key_hash,
                physical_offset: physical,
                time_delta_s: delta_s,
                prev,
            },
        );
        self.atomic_u64(format::OFF_END_TS)
            .store(store_ts_ms as u64, Ordering::Release);
        self.atomic_u64(format::OFF_END_PHYS)
            .store(physical, Ordering::Release);
        self.atomic_u32(format::OFF_ENTRY_COUNT)
            .store(idx + 1, Ordering::Release);
        slot.store(idx, Ordering::Release);
        true
    }

    /// Sync the whole map, unless the last flush already covered every
    /// entry (a sealed file is synced once, by the first flush after it
    /// filled). Entries are published before the count, so the count read
    /// first is covered by the sync that follows.
    fn flush(&self) -> Result<()> {
        let count = self.entry_count();
        if self.synced_entries.load(Ordering::Acquire) == count {
            return Ok(());
        }
        crate::durability::sync_map_range(&self._file, &self.path, 0, self.map.len(), || {
            self.map.flush()
        })
        .at(&self.path)?;
        self.synced_entries.store(count, Ordering::Release);
        Ok(())
    }

    /// Recovery: remove entries for records at or past `physical_end`.
    /// Entries are in physical order, so they are a suffix. Returns `false`
    /// if the file's chains are damaged (then the caller rebuilds it).
    fn truncate_from_physical(&self, physical_end: u64) -> bool {
        let count = self.entry_count();
        // First entry to drop.
        let mut keep = count;
        while keep > 1 && self.entry(keep - 1).physical_offset >= physical_end {
            keep -= 1;
        }
        if keep == count {
            return true; // nothing to drop (every clean start comes here)
        }
        self.synced_entries.store(SYNC_NEEDED, Ordering::Release);
        // Every entry we keep must chain only to older entries.
        for i in 1..count {
            if self.entry(i).prev >= i {
                return false;
            }
        }
        for s in 0..self.slot_count {
            let slot = self.slot(s);
            let mut head = slot.load(Ordering::Acquire);
            if head >= count {
                return false;
            }
            while head >= keep {
                head = self.entry(head).prev;
            }
            slot.store(head, Ordering::Release);
        }
        for i in keep..count {
            self.write_entry(
                i,
                &Entry {
                    key_hash: 0,
                    physical_offset: 0,
                    time_delta_s: 0,
                    prev: 0,
                },
            );
        }
        self.atomic_u32(format::OFF_ENTRY_COUNT)
            .store(keep, Ordering::Release);
        if keep > 1 {
            let last = self.entry(keep - 1);
            let ts = self.begin_timestamp_ms() + last.time_delta_s as i64 * 1000;
            self.atomic_u64(format::OFF_END_PHYS)
                .store(last.physical_offset, Ordering::Release);
            self.atomic_u64(format::OFF_END_TS)
                .store(ts as u64, Ordering::Release);
        } else {
            for off in [
                format::OFF_BEGIN_TS,
                format::OFF_END_TS,
                format::OFF_BEGIN_PHYS,
                format::OFF_END_PHYS,
            ] {
                self.atomic_u64(off).store(0, Ordering::Release);
            }
        }
        true
    }
}

impl IndexService {
    /// Index a keyed record. Records arrive in physical order; one at or
    /// below the newest indexed offset is a replay and is skipped.
    pub fn put(&self, topic: &str, key: &[u8], physical: u64, store_ts_ms: i64) -> Result<()> {
        // Under the read lock, without copying the file list: this runs
        // for every keyed record.
        let writable = {
            let files = self.files.read().unwrap_or_else(|e| e.into_inner());
            if let Some(last) = files.iter().rev().find(|f| !f.is_empty()) {
                if physical <= last.end_physical() {
                    return Ok(());
                }
            }
            files.last().filter(|f| !f.is_full()).cloned()
        };
        let hash = format::key_hash(topic, key);
        // A full file is not flushed here: at the defaults that is an
        // msync of up to 42 MB, and the dispatcher would stall on it (the
        // checkpoint's flush syncs it, see the type's doc).
        let file = match writable {
            Some(f) => f,
            None => self.new_file()?,
        };
        if !file.put(hash, physical, store_ts_ms) {
            debug_assert!(false, "a fresh index file is never full");
        }
        Ok(())
    }

    fn new_file(&self) -> Result<Arc<IndexFile>> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        // Named by creation time in ms; bumped past the newest so names stay
        // unique and ordered even if the clock steps back.
        let newest = files
            .last()
            .and_then(|f| {
                f.path()
                    .file_name()?
                    .to_str()
                    .and_then(|n| fs_util::parse_offset_file_name(n, ""))
            })
            .unwrap_or(0);
        let name = (crate::types::now_ms().max(0) as u64).max(newest + 1);
        let path = self.dir.join(fs_util::offset_file_name(name));
        let f = Arc::new(IndexFile::create(
            path,
            self.slot_count,
            self.entry_capacity,
        )?);
        self.dir_sync_pending.store(true, Ordering::Release);
        files.push(Arc::clone(&f));
        Ok(f)
    }

    /// Make every entry put so far durable: the directory if a file was
    /// made since the last flush, then each file with entries no flush
    /// covered (the newest, and any sealed since the last flush).
    pub fn flush(&self) -> Result<()> {
        if self.dir_sync_pending.swap(false, Ordering::AcqRel) {
            if let Err(e) = fs_util::fsync_dir(&self.dir) {
                self.dir_sync_pending.store(true, Ordering::Release);
                return Err(e);
            }
        }
        for f in self.files() {
            f.flush()?;
        }
        Ok(())
    }

    /// Whether a file was made since the last flush (tests).
    #[cfg(test)]
    pub(super) fn dir_sync_pending(&self) -> bool {
        self.dir_sync_pending.load(Ordering::Acquire)
    }

    /// Retention: delete index files whose entries all point below
    /// `commitlog_min`. The newest file is kept (it takes new entries).
    /// Returns files deleted.
    pub fn delete_files_below(&self, commitlog_min: u64) -> Result<usize> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        let mut deleted = 0;
        while files.len() > 1 && files[0].end_physical() < commitlog_min {
            let f = files.remove(0);
            std::fs::remove_file(f.path()).at(f.path())?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Recovery: forget entries for records at or past `physical_end`.
    /// Returns the physical offset from which records must be re-indexed:
    /// `physical_end` normally, or the start of a file whose chains were
    /// damaged and which was therefore dropped to be rebuilt.
    pub(crate) fn truncate_from_physical(&self, physical_end: u64) -> Result<u64> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        let mut replay_from = physical_end;
        while let Some(f) = files.last() {
            let drop_whole = !f.is_empty() && f.begin_physical() >= physical_end;
            if drop_whole || !f.truncate_from_physical(physical_end) {
                if !drop_whole {
                    tracing::warn!(path = %f.path().display(), "index file chains are damaged; rebuilding it");
                    replay_from = replay_from.min(f.begin_physical());
                }
                std::fs::remove_file(f.path()).at(f.path())?;
                files.pop();
                continue;
            }
            break;
        }
        Ok(replay_from)
    }
}
