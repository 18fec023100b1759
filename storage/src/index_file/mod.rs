//! IndexFile: lookup of records by key, RocketMQ style.
//!
//! A hash of (topic, key) picks a slot; the slot holds the newest entry for
//! that hash, and each entry points to the previous one. Queries walk a
//! chain newest first and confirm every candidate by reading the record and
//! comparing topic and key exactly, because hashes collide.
//!
//! Concurrency: the dispatcher is the only writer. An entry's bytes are
//! written before the slot that publishes it is stored (atomic, `Release`);
//! readers load slots and the entry count with `Acquire` and never read an
//! entry that is not reachable from them. Header fields that change are
//! accessed atomically.

pub mod end;
pub mod format;

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use memmap2::{MmapOptions, MmapRaw};

use self::format::{Entry, IndexHeader, ENTRY_LEN, HEADER_LEN, SLOT_LEN};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;

/// Suffix of an index file still being created; `load` removes these.
const TMP_SUFFIX: &str = ".creating";

/// [`IndexFile::synced_entries`] after a change no entry count shows (a
/// recovery truncation): the next flush syncs the file whatever its count.
const SYNC_NEEDED: u32 = u32::MAX;

pub struct IndexFile {
    path: PathBuf,
    slot_count: u32,
    entry_capacity: u32,
    map: MmapRaw,
    _file: std::fs::File,
    /// The entry count the last flush covered: a file whose count is still
    /// that (every sealed file after its first flush) is not synced again.
    synced_entries: AtomicU32,
}

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

    fn open(path: PathBuf) -> Result<IndexFile> {
        let (file, len) = fs_util::open_read_write(&path)?;
        let mut head = [0u8; HEADER_LEN];
        if len < HEADER_LEN as u64 {
            return Err(StoreError::corruption(
                &path,
                0,
                CorruptionKind::NoHeader {
                    what: "index file",
                    len,
                },
            ));
        }
        std::io::Read::read_exact(&mut &file, &mut head).at(&path)?;
        let header =
            IndexHeader::decode(&head, len).map_err(|why| StoreError::corruption(&path, 0, why))?;
        if header.entry_count < header.entry_capacity {
            // Entries are still to come, through the map: back the file
            // (one an older tidelog made sparse, or a crash left so).
            fs_util::allocate(&file, len).at(&path)?;
        }
        let map = MmapOptions::new()
            .len(len as usize)
            .map_raw(&file)
            .at(&path)?;
        Ok(IndexFile {
            path,
            slot_count: header.slot_count,
            entry_capacity: header.entry_capacity,
            map,
            _file: file,
            // What is on the disk now is what it holds; recovery's
            // truncation marks it if it changes that.
            synced_entries: AtomicU32::new(header.entry_count),
        })
    }

    fn atomic_u64(&self, at: usize) -> &AtomicU64 {
        assert!(at % 8 == 0 && at + 8 <= HEADER_LEN);
        // SAFETY: aligned (the map is page-aligned, `at` is a multiple of 8),
        // in bounds, and only ever accessed atomically.
        unsafe { &*(self.map.as_mut_ptr().add(at) as *const AtomicU64) }
    }

    fn atomic_u32(&self, at: usize) -> &AtomicU32 {
        assert!(at % 4 == 0 && at + 4 <= self.map.len());
        // SAFETY: aligned, in bounds, only ever accessed atomically.
        unsafe { &*(self.map.as_mut_ptr().add(at) as *const AtomicU32) }
    }

    fn slot(&self, i: u32) -> &AtomicU32 {
        self.atomic_u32(HEADER_LEN + i as usize * SLOT_LEN)
    }

    fn entries_at(&self) -> usize {
        HEADER_LEN + self.slot_count as usize * SLOT_LEN
    }

    fn entry(&self, i: u32) -> Entry {
        let at = self.entries_at() + i as usize * ENTRY_LEN;
        assert!(i < self.entry_capacity);
        let mut b = [0u8; ENTRY_LEN];
        // SAFETY: in bounds; published entries are immutable (see module doc).
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.as_ptr().add(at), b.as_mut_ptr(), ENTRY_LEN)
        };
        Entry::decode(&b)
    }

    fn write_entry(&self, i: u32, e: &Entry) {
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

    /// Entries used, counting the reserved entry 0.
    pub fn entry_count(&self) -> u32 {
        self.atomic_u32(format::OFF_ENTRY_COUNT)
            .load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.entry_count() <= 1
    }

    pub fn is_full(&self) -> bool {
        self.entry_count() >= self.entry_capacity
    }

    pub fn begin_timestamp_ms(&self) -> i64 {
        self.atomic_u64(format::OFF_BEGIN_TS)
            .load(Ordering::Acquire) as i64
    }

    pub fn end_timestamp_ms(&self) -> i64 {
        self.atomic_u64(format::OFF_END_TS).load(Ordering::Acquire) as i64
    }

    pub fn begin_physical(&self) -> u64 {
        self.atomic_u64(format::OFF_BEGIN_PHYS)
            .load(Ordering::Acquire)
    }

    pub fn end_physical(&self) -> u64 {
        self.atomic_u64(format::OFF_END_PHYS)
            .load(Ordering::Acquire)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

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

/// All IndexFiles, oldest first; the last one takes new entries.
///
/// Durability is the checkpoint's business, not the dispatcher's: a file
/// that fills is sealed and left as it is, and the new one is made with
/// only its own header synced (so a name that reaches the disk always
/// opens). [`IndexService::flush`], which the checkpoint calls before it
/// records a dispatched position, syncs every file holding entries no
/// flush covered and the directory holding names no flush covered. A
/// power loss before that flush loses only entries past the checkpoint,
/// which recovery truncates and replays.
pub struct IndexService {
    dir: PathBuf,
    slot_count: u32,
    entry_capacity: u32,
    files: RwLock<Vec<Arc<IndexFile>>>,
    /// A file was made since the last directory sync. Set after its
    /// rename and before it takes entries, so a flush that follows any of
    /// its entries sees it.
    dir_sync_pending: AtomicBool,
}

impl IndexService {
    pub fn load(dir: &Path, slot_count: u32, entry_capacity: u32) -> Result<IndexService> {
        if slot_count == 0 || slot_count > format::SLOT_COUNT_MAX {
            return Err(StoreError::invalid(format!(
                "index_slots must be in [1, {}]",
                format::SLOT_COUNT_MAX
            )));
        }
        if !(2..=format::ENTRY_CAPACITY_MAX).contains(&entry_capacity) {
            return Err(StoreError::invalid(format!(
                "index_entries must be in [2, {}]",
                format::ENTRY_CAPACITY_MAX
            )));
        }
        fs_util::create_dir_durable(dir)?;
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).at(dir)? {
            let entry = entry.at(dir)?;
            let name = entry.file_name();
            let name = name.to_str().unwrap_or_default();
            if fs_util::parse_offset_file_name(name, TMP_SUFFIX).is_some() {
                tracing::info!(path = %entry.path().display(), "removing a half-created index file");
                std::fs::remove_file(entry.path()).at(&entry.path())?;
                continue;
            }
            match fs_util::parse_offset_file_name(name, "") {
                Some(n) => names.push(n),
                None => {
                    tracing::warn!(path = %entry.path().display(), "ignoring a stray file in index/")
                }
            }
        }
        names.sort_unstable();
        let mut files = Vec::with_capacity(names.len());
        for n in names {
            files.push(Arc::new(IndexFile::open(
                dir.join(fs_util::offset_file_name(n)),
            )?));
        }
        Ok(IndexService {
            dir: dir.to_path_buf(),
            slot_count,
            entry_capacity,
            files: RwLock::new(files),
            dir_sync_pending: AtomicBool::new(false),
        })
    }

    pub fn file_count(&self) -> usize {
        self.files.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn files(&self) -> Vec<Arc<IndexFile>> {
        self.files.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Physical offset of the newest indexed record, if any.
    pub fn last_indexed(&self) -> Option<u64> {
        self.files()
            .iter()
            .rev()
            .find(|f| !f.is_empty())
            .map(|f| f.end_physical())
    }

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
    fn dir_sync_pending(&self) -> bool {
        self.dir_sync_pending.load(Ordering::Acquire)
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

    /// The newest file, for messages.
    pub(crate) fn newest_path(&self) -> Option<PathBuf> {
        self.files().last().map(|f| f.path().to_path_buf())
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
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

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(svc: &IndexService, topic: &str, key: &[u8]) -> Vec<u64> {
        let mut out = Vec::new();
        svc.query(topic, key, i64::MIN / 2, i64::MAX / 2, &mut |p| {
            out.push(p);
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        out
    }

    #[test]
    fn chains_newest_first_across_files() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::load(dir.path(), 4, 5).unwrap();
        // 4 usable entries per file; 10 puts → 3 files.
        for i in 0..10u64 {
            let key = if i % 2 == 0 {
                b"even".as_slice()
            } else {
                b"odd".as_slice()
            };
            svc.put("t", key, i * 10, 1_000_000 + i as i64 * 1000)
                .unwrap();
        }
        assert_eq!(svc.file_count(), 3);
        assert_eq!(collect(&svc, "t", b"even"), vec![80, 60, 40, 20, 0]);
        assert_eq!(collect(&svc, "t", b"odd"), vec![90, 70, 50, 30, 10]);
        // Same key, other topic: hash differs, so (almost surely) nothing.
        assert!(collect(&svc, "u", b"even").is_empty());
        // Replays are skipped.
        svc.put("t", b"even", 80, 1_008_000).unwrap();
        assert_eq!(collect(&svc, "t", b"even").len(), 5);
        svc.flush().unwrap();
        drop(svc);
        let svc = IndexService::load(dir.path(), 4, 5).unwrap();
        assert_eq!(collect(&svc, "t", b"odd"), vec![90, 70, 50, 30, 10]);
        assert_eq!(svc.last_indexed(), Some(90));
    }

    #[test]
    fn files_wholly_below_the_log_start_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::load(dir.path(), 4, 5).unwrap();
        for i in 0..10u64 {
            svc.put("t", b"k", i * 10, 1_000_000).unwrap();
        }
        // Files hold offsets 0..=30, 40..=70, 80..=90.
        assert_eq!(svc.delete_files_below(35).unwrap(), 1);
        assert_eq!(svc.delete_files_below(75).unwrap(), 1);
        assert_eq!(
            svc.delete_files_below(u64::MAX).unwrap(),
            0,
            "the newest file stays"
        );
        assert_eq!(collect(&svc, "t", b"k"), vec![90, 80]);
    }

    #[test]
    fn time_window_filters() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::load(dir.path(), 8, 100).unwrap();
        for i in 0..10u64 {
            svc.put("t", b"k", i, 1_000_000 + i as i64 * 10_000)
                .unwrap();
        }
        let mut got = Vec::new();
        svc.query("t", b"k", 1_030_000, 1_050_000, &mut |p| {
            got.push(p);
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        assert_eq!(got, vec![5, 4, 3]);
    }

    #[test]
    fn truncate_repairs_chains() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::load(dir.path(), 2, 100).unwrap();
        for i in 0..20u64 {
            svc.put("t", format!("k{}", i % 3).as_bytes(), i * 100, 1_000_000)
                .unwrap();
        }
        assert_eq!(svc.truncate_from_physical(1050).unwrap(), 1050);
        assert_eq!(svc.last_indexed(), Some(1000));
        assert_eq!(collect(&svc, "t", b"k0"), vec![900, 600, 300, 0]);
        assert_eq!(collect(&svc, "t", b"k1"), vec![1000, 700, 400, 100]);
        // New entries chain onto the repaired slots.
        svc.put("t", b"k0", 1100, 1_000_000).unwrap();
        assert_eq!(collect(&svc, "t", b"k0"), vec![1100, 900, 600, 300, 0]);
        assert_eq!(svc.truncate_from_physical(0).unwrap(), 0);
        assert_eq!(svc.last_indexed(), None);
    }

    #[test]
    fn damaged_chain_is_rebuilt_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::load(dir.path(), 2, 100).unwrap();
        for i in 0..5u64 {
            svc.put("t", b"k", 500 + i, 1_000_000).unwrap();
        }
        // Corrupt entry 3's prev pointer to point forward.
        let f = svc.files()[0].clone();
        let mut e = f.entry(3);
        e.prev = 4;
        f.write_entry(3, &e);
        // Queries stop at the bad link instead of looping.
        assert_eq!(collect(&svc, "t", b"k"), vec![504, 503, 502]);
        drop(f);
        assert_eq!(svc.truncate_from_physical(504).unwrap(), 500);
        assert_eq!(svc.file_count(), 0);
    }

    /// A put that fills a file and starts the next syncs only the new
    /// file's header: the full file and the directory are the next
    /// flush's (the checkpoint's) work, and a power loss before it loses
    /// only the entries it would have covered.
    #[cfg(feature = "durable-image")]
    #[test]
    fn a_full_file_is_synced_by_the_next_flush_not_by_the_put_that_fills_it() {
        let root = tempfile::tempdir().unwrap();
        let image = crate::durability::image::install(root.path()).unwrap();
        let dir = root.path().join("index");
        let svc = IndexService::load(&dir, 4, 5).unwrap();
        // 4 usable entries per file; three keys.
        let put = |i: u64| {
            let key = format!("k{}", i % 3);
            svc.put("t", key.as_bytes(), i * 10, 1_000_000 + i as i64 * 1000)
                .unwrap()
        };
        (0..4).for_each(put);
        svc.flush().unwrap();
        assert!(!svc.dir_sync_pending());
        let before = image.syncs();
        (4..10).for_each(put);
        assert_eq!(svc.file_count(), 3);
        assert_eq!(image.syncs() - before, 2, "one header sync per new file");
        assert!(svc.dir_sync_pending());
        let lost = tempfile::tempdir().unwrap();
        image.snapshot(lost.path(), None).unwrap();

        let before = image.syncs();
        svc.flush().unwrap();
        // The directory, the file that filled since the last flush and
        // the newest; not the first file again.
        assert_eq!(image.syncs() - before, 3);
        let before = image.syncs();
        svc.flush().unwrap();
        assert_eq!(image.syncs() - before, 0, "nothing new to sync");
        let kept = tempfile::tempdir().unwrap();
        image.snapshot(kept.path(), None).unwrap();
        drop(image);

        let svc = IndexService::load(&lost.path().join("index"), 4, 5).unwrap();
        assert_eq!(svc.file_count(), 1, "names no flush covered are gone");
        assert_eq!(svc.last_indexed(), Some(30));
        assert_eq!(collect(&svc, "t", b"k0"), vec![30, 0]);
        let svc = IndexService::load(&kept.path().join("index"), 4, 5).unwrap();
        assert_eq!(collect(&svc, "t", b"k0"), vec![90, 60, 30, 0]);
        assert_eq!(collect(&svc, "t", b"k1"), vec![70, 40, 10]);
        assert_eq!(collect(&svc, "t", b"k2"), vec![80, 50, 20]);
    }

    /// Recovery's truncation changes a file behind its entry count: the
    /// next flush syncs it even when re-indexing brings the count back to
    /// what the last flush covered.
    #[cfg(feature = "durable-image")]
    #[test]
    fn a_truncated_file_is_synced_again_whatever_its_count() {
        let root = tempfile::tempdir().unwrap();
        let image = crate::durability::image::install(root.path()).unwrap();
        let dir = root.path().join("index");
        let svc = IndexService::load(&dir, 2, 100).unwrap();
        for i in 0..20u64 {
            svc.put("t", b"old", i * 100, 1_000_000).unwrap();
        }
        svc.flush().unwrap();
        assert_eq!(svc.truncate_from_physical(1050).unwrap(), 1050);
        // Nine entries dropped, nine others in their place.
        for i in 11..20u64 {
            svc.put("t", b"new", i * 100, 1_000_000).unwrap();
        }
        let before = image.syncs();
        svc.flush().unwrap();
        assert_eq!(image.syncs() - before, 1);
        let snap = tempfile::tempdir().unwrap();
        image.snapshot(snap.path(), None).unwrap();
        drop(image);
        let svc = IndexService::load(&snap.path().join("index"), 2, 100).unwrap();
        assert_eq!(collect(&svc, "t", b"old").len(), 11);
        assert_eq!(
            collect(&svc, "t", b"new"),
            (11..20u64).rev().map(|i| i * 100).collect::<Vec<_>>()
        );
    }

    #[test]
    fn half_created_file_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir
            .path()
            .join(format!("{}{TMP_SUFFIX}", fs_util::offset_file_name(5)));
        std::fs::write(&tmp, b"").unwrap();
        let svc = IndexService::load(dir.path(), 2, 100).unwrap();
        assert_eq!(svc.file_count(), 0);
        assert!(!tmp.exists());
    }

    #[test]
    fn garbage_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(fs_util::offset_file_name(1)),
            b"not an index",
        )
        .unwrap();
        assert!(IndexService::load(dir.path(), 2, 100).is_err());
    }
}
