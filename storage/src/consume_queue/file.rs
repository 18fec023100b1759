//! One ConsumeQueue file: a fixed-size, preallocated, mapped file of
//! [`UNIT_LEN`]-byte units (`format.rs`), named by the byte offset of its
//! first unit in the partition's queue.
//!
//! Invariants: a file is created at its full size in place, with no
//! fsync (its directory's new name is synced by the queues' next flush,
//! before a checkpoint claims a unit in it); units are written only by
//! the dispatcher (or recovery), through `pwrite` while their pages are
//! cold and the map once they are warm; opening it reads only its written
//! range, in chunks of `SCAN_CHUNK` bytes with readahead off, never
//! through the map.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use super::format::{Unit, UNIT_LEN};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;

/// Bytes read per system call when a queue file is scanned at open (about
/// 64 KiB, whole units).
const SCAN_CHUNK: u64 = UNIT_LEN as u64 * 3277;

pub(super) struct QueueFile {
    pub(super) first_unit: u64,
    pub(super) path: PathBuf,
    pub(super) map: MmapRaw,
    pub(super) file: std::fs::File,
    /// Bytes of the file below this (whole pages) were written by this
    /// process's writer ([`QueueFile::write`]), so their pages are in the
    /// page cache and a store through the map faults without reading
    /// ahead. Only the dispatcher (or recovery) moves it.
    written_pages_end: AtomicU64,
}

impl QueueFile {
    /// A new, empty queue file of `units` units: created at its full size
    /// (allocated, [`fs_util::allocate`]) under its name, with no fsync (the dispatcher makes it).
    /// Its directory is noted in `names`: the queues' flush, before any
    /// checkpoint claims a unit in it, syncs its units (which makes its
    /// size durable) and then the directory ([`fs_util::PendingDirSyncs`]).
    /// A power loss before that leaves the file missing, empty, or short
    /// (a torn first page), which [`ConsumeQueue::load`] takes as the tail
    /// it is: every unit in it is past the checkpoint, and recovery
    /// dispatches those records again.
    pub(super) fn create(
        dir: &Path,
        first_unit: u64,
        units: u64,
        names: &fs_util::PendingDirSyncs,
    ) -> Result<QueueFile> {
        let path = dir.join(fs_util::offset_file_name(first_unit * UNIT_LEN as u64));
        let build = || -> Result<QueueFile> {
            let file = fs_util::create_empty(&path)?;
            names.note(dir);
            // Backed, not sparse: the dispatcher writes units through the
            // map, and a store into a hole on a full disk is SIGBUS (issue
            // 35). A short disk fails here, as an error, and the file goes.
            fs_util::allocate(&file, units * UNIT_LEN as u64).at(&path)?;
            Self::map(file, path.clone(), first_unit, units)
        };
        build().inspect_err(|_| {
            let _ = std::fs::remove_file(&path);
        })
    }

    /// An existing queue file. One of the wrong size is corruption (or a
    /// changed `consume_queue_units_per_file`), except a shorter one at the
    /// queue's tail (`tail`: no later file of the queue holds a byte): a
    /// power loss leaves that of a file whose name reached the disk before
    /// its size did (made with no fsync, [`QueueFile::create`], or by an
    /// older tidelog), torn. Such a file holds no unit a checkpoint claims
    /// (the flush that syncs its units makes its size durable), so it is
    /// extended to its size and its tail left to recovery, which drops the
    /// invalid units and dispatches them again from the CommitLog. (A
    /// queue of one file whose setting grew is extended the same way, which
    /// keeps its units; with more files the names no longer fit the setting
    /// and `load` refuses them.) An empty file reads as one that was never
    /// written.
    pub(super) fn open(
        path: PathBuf,
        first_unit: u64,
        units: u64,
        tail: bool,
    ) -> Result<QueueFile> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .at(&path)?;
        let want = units * UNIT_LEN as u64;
        let len = file.metadata().at(&path)?.len();
        if len != want {
            if len != 0 && !(tail && len < want) {
                return Err(StoreError::corruption(
                    &path,
                    0,
                    CorruptionKind::QueueFileLength {
                        len,
                        expected: want,
                    },
                ));
            }
            if len != 0 {
                tracing::warn!(path = %path.display(), len, expected = want, "a queue file at the queue's tail is short (made just before a power loss and torn, or consume_queue_units_per_file grew); extending it and rebuilding its tail from the commit log");
            }
            // Durable with the first msync of its units (msync writes the
            // file's size with them); until then a power loss leaves it
            // short again, and this runs again.
        }
        if tail || len != want {
            // The queue's tail takes units through the map (and a file
            // extended here may too): backed, not sparse, so a full disk
            // is an error now instead of SIGBUS at a later store.
            fs_util::allocate(&file, want).at(&path)?;
        }
        Self::map(file, path, first_unit, units)
    }

    fn map(file: std::fs::File, path: PathBuf, first_unit: u64, units: u64) -> Result<QueueFile> {
        let map = MmapOptions::new()
            .len((units * UNIT_LEN as u64) as usize)
            .map_raw(&file)
            .at(&path)?;
        Ok(QueueFile {
            first_unit,
            path,
            map,
            file,
            written_pages_end: AtomicU64::new(0),
        })
    }

    /// The first unit of the file (or, with `last`, the last) whose bytes
    /// are not all zero, as a queue offset. Reads the file's data ranges
    /// only, with `pread`: holes are skipped, and the map is not touched,
    /// so nothing becomes resident in this process.
    pub(super) fn find_written_unit(&self, last: bool) -> Result<Option<u64>> {
        use std::os::unix::fs::FileExt;
        // Read exactly what is asked: readahead around a queue file's
        // first written page would fill the page cache with its holes
        // (6 MB per partition, at every open).
        let _random = ReadRandomly::new(&self.file);
        let unit = UNIT_LEN as u64;
        let len = self.map.len() as u64;
        let mut windows = Vec::new();
        for (start, end) in fs_util::data_ranges(&self.file, 0, len) {
            // Ranges are in blocks; widen them to whole units.
            let mut lo = start / unit * unit;
            let end = end.div_ceil(unit).saturating_mul(unit).min(len);
            while lo < end {
                let hi = (lo + SCAN_CHUNK).min(end);
                windows.push((lo, hi));
                lo = hi;
            }
        }
        if last {
            windows.reverse();
        }
        let mut buf = vec![0u8; SCAN_CHUNK as usize];
        let written = |(_, u): &(usize, &[u8])| u.iter().any(|&b| b != 0);
        for (lo, hi) in windows {
            let buf = &mut buf[..(hi - lo) as usize];
            self.file.read_exact_at(buf, lo).at(&self.path)?;
            let mut units = buf.chunks_exact(UNIT_LEN).enumerate();
            let found = if last {
                units.rfind(written)
            } else {
                units.find(written)
            };
            if let Some((i, _)) = found {
                return Ok(Some(self.first_unit + lo / unit + i as u64));
            }
        }
        Ok(None)
    }

    pub(super) fn units(&self) -> u64 {
        (self.map.len() / UNIT_LEN) as u64
    }

    fn raw(&self, unit: u64) -> [u8; UNIT_LEN] {
        let at = (unit - self.first_unit) as usize * UNIT_LEN;
        assert!(at + UNIT_LEN <= self.map.len());
        let mut b = [0u8; UNIT_LEN];
        // SAFETY: in bounds (asserted). Units below `max_offset` are
        // immutable; the dispatcher is the only writer of the rest.
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.as_ptr().add(at), b.as_mut_ptr(), UNIT_LEN)
        };
        b
    }

    /// Write `unit`'s bytes. The first write into a page goes through the
    /// page cache (`pwrite`), the rest through the map. A store into a
    /// mapped page that is not in the page cache faults, and the fault reads
    /// ahead: the file's next `read_ahead_kb` (8 MiB on the VM we run on),
    /// all hole, zero-filled into the page cache. For a new partition that
    /// was its whole 6 MB queue file, about 6 ms of memset on the
    /// dispatcher's thread for one record (1,000 new partitions: 9 s before
    /// the last was fetchable, and 6 GB of page cache of zeros). `pwrite`
    /// into a hole makes just that page; stores into it then fault without
    /// reading (the page is there). One system call per 204 units.
    pub(super) fn write(&self, unit: u64, bytes: &[u8; UNIT_LEN]) -> Result<()> {
        let at = (unit - self.first_unit) as usize * UNIT_LEN;
        assert!(at + UNIT_LEN <= self.map.len());
        let end = (at + UNIT_LEN) as u64;
        if end > self.written_pages_end.load(Ordering::Relaxed) {
            use std::os::unix::fs::FileExt;
            self.file.write_all_at(bytes, at as u64).at(&self.path)?;
            let page = fs_util::page_size() as u64;
            self.written_pages_end
                .store(end.div_ceil(page) * page, Ordering::Relaxed);
            return Ok(());
        }
        // SAFETY: in bounds; only the dispatcher writes, and this unit is not
        // yet published to readers (or recovery runs with no readers).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.map.as_mut_ptr().add(at), UNIT_LEN)
        };
        Ok(())
    }

    /// Make the units `[start, end)` (relative to the file) durable.
    ///
    /// The whole pages among them are unmapped from this process first
    /// (`MADV_DONTNEED`; their dirty state moves to the page cache, nothing
    /// is lost). Writeback must write-protect every page still mapped
    /// writable, and it does that page by page, each with a TLB-shootdown
    /// interrupt to the other cores: on a VM that was most of the flush
    /// thread's time, and the interrupted cores paid too. Unmapping flushes
    /// the TLB once for the whole range, and writeback then finds nothing
    /// mapped. Readers refault a page from the page cache on their next read
    /// (read-only, a minor fault). The page holding `end` stays mapped: the
    /// dispatcher is still filling it.
    pub(super) fn flush_units(&self, start: u64, end: u64) -> Result<()> {
        let from = start as usize * UNIT_LEN;
        let to = end as usize * UNIT_LEN;
        #[cfg(target_os = "linux")]
        {
            let page = fs_util::page_size();
            let (zap_from, zap_to) = (from / page * page, to / page * page);
            if zap_to > zap_from {
                // SAFETY: a page-aligned range inside our own mapping. No
                // unit in it changes while we do this: they are below the
                // published end, and the writer only appends past it.
                let rc = unsafe {
                    libc::madvise(
                        self.map.as_mut_ptr().add(zap_from).cast(),
                        zap_to - zap_from,
                        libc::MADV_DONTNEED,
                    )
                };
                if rc != 0 {
                    // Only slower: writeback write-protects page by page.
                    tracing::debug!(path = %self.path.display(), error = %std::io::Error::last_os_error(), "could not unmap flushed queue pages");
                }
            }
        }
        crate::durability::sync_map_range(&self.file, &self.path, from, to - from, || {
            self.map.flush_range(from, to - from)
        })
        .at(&self.path)
    }

    pub(super) fn decode(&self, unit: u64) -> Result<Option<Unit>> {
        Unit::decode(&self.raw(unit)).map_err(|why| {
            StoreError::corruption(&self.path, (unit - self.first_unit) * UNIT_LEN as u64, why)
        })
    }
}

/// Turns readahead off for a file while it lives (`POSIX_FADV_RANDOM`),
/// back to normal when dropped. Advice only: failures change nothing but
/// speed.
struct ReadRandomly<'a>(&'a std::fs::File);

impl<'a> ReadRandomly<'a> {
    fn new(file: &'a std::fs::File) -> ReadRandomly<'a> {
        Self::advise(file, true);
        ReadRandomly(file)
    }

    fn advise(file: &std::fs::File, random: bool) {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::io::AsRawFd;
            let advice = if random {
                libc::POSIX_FADV_RANDOM
            } else {
                libc::POSIX_FADV_NORMAL
            };
            // SAFETY: plain syscall on an fd the caller owns.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, advice) };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (file, random);
    }
}

impl Drop for ReadRandomly<'_> {
    fn drop(&mut self) {
        Self::advise(self.0, false);
    }
}
