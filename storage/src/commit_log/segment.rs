//! One CommitLog segment: a file preallocated to its full size and mapped
//! into memory.
//!
//! Invariants (upheld by `CommitLog`, which owns all segments):
//! - Exactly one thread writes, and only into bytes at or beyond the
//!   log's committed position; readers only read bytes below it. The
//!   committed position is published with `Release` after the bytes are
//!   written and loaded with `Acquire` before reading, so a reader never
//!   observes a byte while it is being written.
//! - A segment is never unmapped while an `Arc<Segment>` exists: deleting a
//!   segment unlinks its file, and the mapping goes away with the last
//!   reader (`Bytes` returned by reads hold an `Arc`).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use memmap2::{MmapOptions, MmapRaw};

use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fault::{self, FaultHandle, FaultPoint};
use crate::fs_util;

/// Suffix of a segment file still being created; recovery removes these.
pub const TMP_SUFFIX: &str = ".creating";

pub struct Segment {
    base: u64,
    size: u64,
    path: PathBuf,
    /// Store time of the newest record written here (ms; 0 = unknown).
    /// Retention reads it to decide whether a sealed segment has expired.
    last_store_ts_ms: AtomicI64,
    map: MmapRaw,
    // Kept open so the mapping's file stays valid for msync on every platform.
    _file: File,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("base", &self.base)
            .field("size", &self.size)
            .field("path", &self.path)
            .finish()
    }
}

impl Segment {
    /// Create `dir/<base>` preallocated to `size` bytes and map it.
    /// Preallocation means a full disk is reported here, as an error,
    /// instead of as SIGBUS on a later write through the map. Pages are not
    /// touched: [`Segment::warm`] does that just ahead of the writer.
    pub fn create(dir: &Path, base: u64, size: u64, faults: &FaultHandle) -> Result<Segment> {
        let path = dir.join(fs_util::offset_file_name(base));
        fault::check(faults, FaultPoint::SegmentCreate).at(&path)?;
        if path.exists() {
            return Err(StoreError::io(
                &path,
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "segment file already exists",
                ),
            ));
        }
        // Built under a temporary name and renamed into place only when
        // whole, so a crash mid-creation never leaves a short segment file.
        let tmp = dir.join(format!("{}{TMP_SUFFIX}", fs_util::offset_file_name(base)));
        fs_util::create_via_temp(
            &tmp,
            |file| preallocate(file, size),
            |file| {
                let seg = Self::map(file, path.clone(), base, size)?;
                std::fs::rename(&tmp, &path).at(&path)?;
                fs_util::fsync_dir(dir)?;
                Ok(seg)
            },
        )
    }

    /// Map an existing segment file; its size is the file's length.
    pub fn open(path: &Path, base: u64) -> Result<Segment> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .at(path)?;
        let size = file.metadata().at(path)?.len();
        Self::map(file, path.to_path_buf(), base, size)
    }

    fn map(file: File, path: PathBuf, base: u64, size: u64) -> Result<Segment> {
        if size == 0 || size > isize::MAX as u64 {
            return Err(StoreError::corruption(
                &path,
                0,
                CorruptionKind::SegmentSize { size },
            ));
        }
        let map = MmapOptions::new()
            .len(size as usize)
            .map_raw(&file)
            .at(&path)?;
        // Until a scan or an append says better, the file's mtime stands for
        // its newest record: sealing sets it to exactly that.
        let mtime_ms = file
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        Ok(Segment {
            base,
            size,
            path,
            last_store_ts_ms: AtomicI64::new(mtime_ms),
            map,
            _file: file,
        })
    }

    /// Bring the pages of the relative range `from..to` (widened to whole
    /// pages) into the page cache, so the writer's first write to each is
    /// a copy into a page that exists instead of a page allocation on the
    /// append path. Safe while the writer writes the same range: it only
    /// brings pages into the cache.
    ///
    /// It asks for readahead of the range (`POSIX_FADV_WILLNEED`), which
    /// fills the preallocated, never-written extents with zero pages
    /// without reading the disk or dirtying anything, so the disk is not
    /// written twice (zeros now, data later), and maps nothing. The pages
    /// are single-page folios. The way this did it before,
    /// `MADV_POPULATE_READ` through the segment's map, let fault readahead
    /// build large folios, and ext4's buffered write walks every block of
    /// each folio it touches: measured on our VM, an 18 KiB `pwrite` (one
    /// produce request) took 6.2-6.4 us into single pages against ~10 us into
    /// large folios (docs/BENCHMARKS.md, fourth session).
    pub fn warm(&self, from: u64, to: u64) {
        let page = crate::fs_util::page_size() as u64;
        let at = (from / page * page).min(self.size);
        let end = to.div_ceil(page).saturating_mul(page).min(self.size);
        if at >= end {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: plain syscall on our own open file; no memory passed.
            let rc = unsafe {
                libc::posix_fadvise(
                    self._file.as_raw_fd(),
                    at as libc::off_t,
                    (end - at) as libc::off_t,
                    libc::POSIX_FADV_WILLNEED,
                )
            };
            if rc == 0 {
                return;
            }
        }
        // Elsewhere, or if the advice was refused: touch one byte per page.
        for p in (at as usize..end as usize).step_by(page as usize) {
            // SAFETY: inside the mapping; reading never changes the bytes.
            unsafe { std::ptr::read_volatile(self.map.as_ptr().add(p)) };
        }
    }

    /// Write zeros over the relative range `from..to` (clamped to the
    /// segment) with pwrite(2), turning preallocated (unwritten) extents
    /// into written ones once the range is flushed. Zeros are what an
    /// unwritten extent reads as, so readers and recovery see no change;
    /// the caller makes sure the writer does not write the range
    /// meanwhile (see `Preallocator`'s zero claim).
    ///
    /// It writes one page per call: the page cache sizes the folios of a
    /// buffered write by the write, and the writer's small appends are
    /// cheaper into single pages (see [`Segment::warm`]); 1,024 calls per
    /// 4 MiB step of the preallocator cost about as much as the copy.
    pub fn write_zeros(&self, from: u64, to: u64) -> std::io::Result<()> {
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let page = (crate::fs_util::page_size() as u64).min(ZEROS.len() as u64);
        let end = to.min(self.size);
        let mut at = from;
        while at < end {
            // Up to the next page boundary, so later calls stay aligned.
            let len = (end - at).min(page - at % page) as usize;
            std::os::unix::fs::FileExt::write_all_at(&self._file, &ZEROS[..len], at)?;
            at += len as u64;
        }
        Ok(())
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// One past the last physical offset of this segment.
    pub fn end(&self) -> u64 {
        self.base + self.size
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Store time of the newest record in this segment (ms since epoch).
    pub fn last_store_ts_ms(&self) -> i64 {
        self.last_store_ts_ms.load(Ordering::Acquire)
    }

    /// Note a record's store time (the writer and recovery call this).
    pub fn note_store_ts(&self, ts_ms: i64) {
        self.last_store_ts_ms.fetch_max(ts_ms, Ordering::AcqRel);
    }

    /// The segment is full: stamp its mtime with its newest record's store
    /// time, so after a restart retention knows its age without a scan.
    pub fn seal(&self) {
        let ts = self.last_store_ts_ms().max(0) as u64;
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ts);
        if let Err(e) = self._file.set_modified(when) {
            tracing::warn!(segment = %self.path.display(), error = %e, "could not stamp the sealed segment's mtime");
        }
    }

    pub fn contains(&self, physical: u64) -> bool {
        physical >= self.base && physical < self.end()
    }

    /// Bytes `[at, at + len)` of the segment (offsets relative to its start).
    ///
    /// # Safety
    /// The caller guarantees no thread writes these bytes while the returned
    /// slice lives: they are below the committed position, or the caller is
    /// the only thread touching the segment (recovery, before any reader).
    pub unsafe fn slice(&self, at: usize, len: usize) -> &[u8] {
        assert!(at
            .checked_add(len)
            .is_some_and(|end| end <= self.size as usize));
        // SAFETY: in bounds (asserted); no concurrent writer (caller's promise).
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(at), len) }
    }

    /// Mutable bytes `[at, at + len)` for the single writer.
    ///
    /// # Safety
    /// The caller is the only writer and the bytes are not visible to readers
    /// (at or beyond the committed position), and no other slice of them is
    /// alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, at: usize, len: usize) -> &mut [u8] {
        assert!(at
            .checked_add(len)
            .is_some_and(|end| end <= self.size as usize));
        // SAFETY: in bounds (asserted); exclusive (caller's promise).
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(at), len) }
    }

    /// Zero-copy `Bytes` over `[at, at + len)` that keeps the segment mapped
    /// for as long as the bytes live.
    ///
    /// # Safety
    /// As for [`Segment::slice`]: the bytes are committed and never written
    /// again while mapped.
    pub unsafe fn bytes(self: &Arc<Self>, at: usize, len: usize) -> Bytes {
        assert!(at
            .checked_add(len)
            .is_some_and(|end| end <= self.size as usize));
        Bytes::from_owner(SegmentSlice {
            segment: Arc::clone(self),
            at,
            len,
        })
    }

    /// Ranges at or after `from` (relative offsets) that may hold non-zero
    /// bytes ([`fs_util::data_ranges`]): recovery skips the untouched part
    /// of a preallocated 1 GiB segment without faulting it in.
    pub fn data_ranges(&self, from: u64) -> Vec<(u64, u64)> {
        fs_util::data_ranges(&self._file, from, self.size)
    }

    /// Write `bytes` at `at` (relative) with pwrite(2). The single writer
    /// calls this only past the committed position; readers see the bytes
    /// through the map (one page cache) once the position is published.
    pub fn write_at(&self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        if at
            .checked_add(bytes.len() as u64)
            .is_none_or(|end| end > self.size)
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "write of {} bytes at {at} runs past the segment end {}",
                    bytes.len(),
                    self.size
                ),
            ));
        }
        std::os::unix::fs::FileExt::write_all_at(&self._file, bytes, at)
    }

    /// msync `[at, at + len)` to disk.
    pub fn flush(&self, at: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        crate::durability::sync_map_range(&self._file, &self.path, at, len, || {
            self.map.flush_range(at, len)
        })
        .at(&self.path)
    }
}

/// Owner of a zero-copy read: committed bytes of a live segment.
struct SegmentSlice {
    segment: Arc<Segment>,
    at: usize,
    len: usize,
}

impl AsRef<[u8]> for SegmentSlice {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: constructed only by `Segment::bytes`, whose caller promised
        // these bytes are committed and immutable; the Arc keeps them mapped.
        unsafe { self.segment.slice(self.at, self.len) }
    }
}

/// Reserve `size` bytes of disk for `file` ([`fs_util::allocate`]), so a
/// write through the map can never meet a full disk (SIGBUS).
fn preallocate(file: &File, size: u64) -> std::io::Result<()> {
    fs_util::allocate(file, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_write_read_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let seg =
            Arc::new(Segment::create(dir.path(), 4096, 8192, &FaultHandle::default()).unwrap());
        assert_eq!(seg.end(), 4096 + 8192);
        assert_eq!(std::fs::metadata(seg.path()).unwrap().len(), 8192);
        // SAFETY: test owns the only handle.
        unsafe { seg.slice_mut(100, 5).copy_from_slice(b"hello") };
        seg.flush(100, 5).unwrap();
        let b = unsafe { seg.bytes(100, 5) };
        drop(seg);
        // The Bytes keeps the mapping alive after the segment handle is gone.
        assert_eq!(&b[..], b"hello");
        let path = dir.path().join(fs_util::offset_file_name(4096));
        let seg = Segment::open(&path, 4096).unwrap();
        assert_eq!(unsafe { seg.slice(100, 5) }, b"hello");
    }

    #[test]
    fn create_refuses_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let no_faults = FaultHandle::default();
        Segment::create(dir.path(), 0, 4096, &no_faults).unwrap();
        assert!(Segment::create(dir.path(), 0, 4096, &no_faults).is_err());
    }

    #[cfg(feature = "failpoints")]
    #[test]
    fn injected_create_failure_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let faults = Arc::new(crate::fault::Faults::default());
        faults.fail_after(FaultPoint::SegmentCreate, 0);
        assert!(Segment::create(dir.path(), 0, 4096, &FaultHandle::new(faults)).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
