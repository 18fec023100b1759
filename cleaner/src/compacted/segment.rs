//! One segment of a compacted log: `<base offset>.log`, records in offset
//! order, appended with positioned writes and read with positioned reads.
//!
//! Invariants:
//! - `len` is published (`Release`) after the bytes below it are written;
//!   readers load it (`Acquire`) and read only below it.
//! - Only the log's appender writes to the active segment; sealed and
//!   cleaned segments are never written again.
//! - A sparse index (offset → byte position, one entry per
//!   `INDEX_INTERVAL_BYTES`) is kept in memory and rebuilt by a scan at open
//!   (so also for every segment a cleaning pass writes). Each entry also
//!   holds the running maximum of record timestamps up to the next entry:
//!   the first entry whose running maximum reaches T is where the first
//!   record with a timestamp ≥ T is (Kafka's time index, over exactly the
//!   records the segment holds).
//! - Unix semantics keep a deleted segment's data readable through its open
//!   file until the last `Arc` drops, so readers finish safely while the
//!   cleaner swaps segments.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use bytes::{Bytes, BytesMut};
use tidelog_storage::durability;

use super::format::{self, CompactedRecord, Decoded};
use crate::error::{CleanerError, CorruptionKind, Location, Result};

/// One sparse-index entry per this many bytes of log.
pub const INDEX_INTERVAL_BYTES: u64 = 4096;
/// Reads fetch at least this much at a time.
const READ_CHUNK: usize = 256 << 10;

pub const LOG_SUFFIX: &str = ".log";
pub const CLEANED_SUFFIX: &str = ".cleaned";
pub const SWAP_SUFFIX: &str = ".swap";
/// A segment a roll made while the one before it may not be durable
/// yet (`<base>.log.new`): the next flush syncs that one, then renames
/// this to `<base>.log` (`CompactedLog::flush`). On disk the name says
/// whether the segment before it is whole: at open a `.new` segment, and
/// every newer one, holds only copies made after the last checkpoint,
/// and goes (`CompactedLog::open`).
pub const NEW_SUFFIX: &str = ".new";
/// An old segment a swap replaced, renamed aside (`<base>.log.deleted`)
/// and unlinked later, off the pass (`cleaner/swap.rs`); startup deletes
/// any that are left.
pub const DELETED_SUFFIX: &str = ".deleted";

/// Summary of a segment's records, kept up to date on append.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentStats {
    pub records: u64,
    pub tombstones: u64,
    /// Offset of the first record (None when empty).
    pub first_offset: Option<u64>,
    /// Offset of the last record (None when empty).
    pub last_offset: Option<u64>,
    pub first_store_ts_ms: Option<i64>,
    pub max_store_ts_ms: i64,
    /// Earliest delete horizon among stamped tombstones (i64::MAX: none).
    pub min_tombstone_horizon_ms: i64,
    /// Tombstones not yet stamped with a horizon.
    pub unstamped_tombstones: u64,
}

/// One entry of a segment's sparse index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SparseEntry {
    offset: u64,
    pos: u64,
    /// The largest record timestamp from the segment's start up to the next
    /// entry: monotonic over the entries.
    running_max_ts_ms: i64,
}

/// What the sparse index and the stats need of a record: the copy path
/// builds it as it encodes, without decoding the record back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMeta {
    pub offset: u64,
    pub timestamp_ms: i64,
    pub store_timestamp_ms: i64,
    pub delete_horizon_ms: i64,
    pub tombstone: bool,
    /// Encoded length.
    pub len: u32,
}

impl From<&CompactedRecord> for RecordMeta {
    fn from(r: &CompactedRecord) -> RecordMeta {
        RecordMeta {
            offset: r.offset.get(),
            timestamp_ms: r.timestamp_ms,
            store_timestamp_ms: r.store_timestamp_ms,
            delete_horizon_ms: r.delete_horizon_ms,
            tombstone: r.is_tombstone(),
            len: r.len() as u32,
        }
    }
}

/// Add `r` at byte `pos` to a sparse index.
fn index_record(index: &mut Vec<SparseEntry>, r: &RecordMeta, pos: u64) {
    match index.last_mut() {
        Some(last) if pos < last.pos + INDEX_INTERVAL_BYTES => {
            last.running_max_ts_ms = last.running_max_ts_ms.max(r.timestamp_ms);
        }
        last => {
            let before = last.map_or(i64::MIN, |l| l.running_max_ts_ms);
            index.push(SparseEntry {
                offset: r.offset,
                pos,
                running_max_ts_ms: before.max(r.timestamp_ms),
            });
        }
    }
}

pub struct Segment {
    base_offset: u64,
    path: RwLock<PathBuf>,
    file: File,
    len: AtomicU64,
    /// One more than the length the last successful [`Segment::flush`]
    /// made durable; 0 until one has (a segment opened from disk may hold
    /// bytes a crash left in the page cache only, so it is synced once).
    synced_len_plus_one: AtomicU64,
    /// Creation time (ms), for `segment.ms` rolling of idle logs.
    created_ms: AtomicI64,
    index: RwLock<Vec<SparseEntry>>,
    stats: Mutex<SegmentStats>,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("base_offset", &self.base_offset)
            .field("len", &self.len())
            .field("path", &self.path())
            .finish()
    }
}

impl Segment {
    fn new(base_offset: u64, path: PathBuf, file: File, created_ms: i64) -> Segment {
        Segment {
            base_offset,
            path: RwLock::new(path),
            file,
            len: AtomicU64::new(0),
            synced_len_plus_one: AtomicU64::new(0),
            created_ms: AtomicI64::new(created_ms),
            index: RwLock::new(Vec::new()),
            stats: Mutex::new(SegmentStats {
                min_tombstone_horizon_ms: i64::MAX,
                ..SegmentStats::default()
            }),
        }
    }

    /// Create an empty segment file at `path` (which must not exist).
    pub fn create(path: PathBuf, base_offset: u64, now_ms: i64) -> Result<Segment> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| CleanerError::io(&path, e))?;
        Ok(Segment::new(base_offset, path, file, now_ms))
    }

    /// Open a segment file and scan it to rebuild the index and stats. With
    /// `repair_tail` (the newest segment), a torn or zero tail is truncated
    /// away; elsewhere an invalid record is corruption.
    pub fn open(path: PathBuf, base_offset: u64, repair_tail: bool) -> Result<Segment> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| CleanerError::io(&path, e))?;
        let meta = file.metadata().map_err(|e| CleanerError::io(&path, e))?;
        let file_len = meta.len();
        let created_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        let seg = Segment::new(base_offset, path, file, created_ms);
        seg.len.store(file_len, Ordering::Release);
        let mut pos = 0u64;
        let mut stats = SegmentStats {
            min_tombstone_horizon_ms: i64::MAX,
            ..SegmentStats::default()
        };
        let mut index = Vec::new();
        let mut reader = seg.reader(0);
        loop {
            match reader.next_record() {
                Ok(Some(r)) => {
                    if stats.last_offset.is_some_and(|l| r.offset.get() <= l)
                        || r.offset.get() < base_offset
                    {
                        return Err(seg.corrupt(
                            pos,
                            CorruptionKind::OffsetOrder {
                                offset: r.offset.get(),
                            },
                        ));
                    }
                    let meta = RecordMeta::from(&r);
                    index_record(&mut index, &meta, pos);
                    note(&mut stats, &meta);
                    pos += r.len() as u64;
                }
                Ok(None) => break,
                // Only damage is repaired: a failed read is no evidence
                // about the bytes, and truncating on one would lose records.
                Err(CleanerError::Corruption { kind, .. }) if repair_tail => {
                    tracing::warn!(segment = %seg.path().display(), position = pos, why = %kind, "torn record at the tail of a compacted log; truncating");
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if pos != file_len {
            if !repair_tail {
                return Err(seg.corrupt(pos, CorruptionKind::BytesAfterLastRecord));
            }
            seg.file
                .set_len(pos)
                .map_err(|e| CleanerError::io(&seg.path(), e))?;
            durability::sync_all(&seg.file, &seg.path())
                .map_err(|e| CleanerError::io(&seg.path(), e))?;
        }
        if let Some(first) = stats.first_store_ts_ms {
            seg.created_ms.store(first, Ordering::Release);
        }
        seg.len.store(pos, Ordering::Release);
        *seg.index.write().unwrap_or_else(|e| e.into_inner()) = index;
        *seg.stats.lock().unwrap_or_else(|e| e.into_inner()) = stats;
        Ok(seg)
    }

    /// Damage at byte `position` of this segment.
    pub fn corrupt(&self, position: u64, kind: impl Into<CorruptionKind>) -> CleanerError {
        CleanerError::Corruption {
            path: self.path(),
            at: Location::Byte(position),
            kind: kind.into(),
        }
    }

    pub fn base_offset(&self) -> u64 {
        self.base_offset
    }

    pub fn path(&self) -> PathBuf {
        self.path.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Rename the file (swap completion); the open handle is unaffected.
    pub fn rename(&self, to: PathBuf) -> Result<()> {
        let mut p = self.path.write().unwrap_or_else(|e| e.into_inner());
        std::fs::rename(&*p, &to).map_err(|e| CleanerError::io(&to, e))?;
        *p = to;
        Ok(())
    }

    /// Whether this segment still has the name a roll gave it
    /// ([`NEW_SUFFIX`]): the segment before it may not be durable yet.
    pub fn is_new(&self) -> bool {
        self.path
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_os_str()
            .as_encoded_bytes()
            .ends_with(NEW_SUFFIX.as_bytes())
    }

    /// Whether the bytes below `len` are synced (and no more were when
    /// that was: `len` is this segment's length at some moment).
    fn synced_through(&self, len: u64) -> bool {
        self.synced_len_plus_one.load(Ordering::Acquire) == len + 1
    }

    /// Whether every byte below [`Segment::len`] is synced.
    #[cfg(test)]
    pub(crate) fn is_synced(&self) -> bool {
        self.synced_through(self.len())
    }

    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn created_ms(&self) -> i64 {
        self.created_ms.load(Ordering::Acquire)
    }

    pub fn stats(&self) -> SegmentStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append one encoded record (the single appender only).
    pub fn append(&self, record: &CompactedRecord) -> Result<()> {
        self.append_encoded(record.raw(), &[RecordMeta::from(record)])
    }

    /// Append several records with one positioned write (the single
    /// appender only; the cleaner's kept records); published together.
    pub fn append_batch(&self, records: &[CompactedRecord]) -> Result<()> {
        let total: usize = records.iter().map(CompactedRecord::len).sum();
        let mut bytes = Vec::with_capacity(total);
        let metas: Vec<RecordMeta> = records
            .iter()
            .map(|r| {
                bytes.extend_from_slice(r.raw());
                RecordMeta::from(r)
            })
            .collect();
        self.append_encoded(&bytes, &metas)
    }

    /// Append encoded records, back to back in `bytes` and described in
    /// order by `records`, with one positioned write, one index and one
    /// stats update (the single appender only); published together.
    pub fn append_encoded(&self, bytes: &[u8], records: &[RecordMeta]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        debug_assert_eq!(
            records.iter().map(|r| u64::from(r.len)).sum::<u64>(),
            bytes.len() as u64
        );
        let start = self.len();
        self.file
            .write_all_at(bytes, start)
            .map_err(|e| CleanerError::io(&self.path(), e))?;
        let mut pos = start;
        {
            let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
            let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            for r in records {
                index_record(&mut index, r, pos);
                if stats.first_store_ts_ms.is_none() {
                    self.created_ms
                        .store(r.store_timestamp_ms, Ordering::Release);
                }
                note(&mut stats, r);
                pos += u64::from(r.len);
            }
        }
        self.len.store(pos, Ordering::Release);
        Ok(())
    }

    /// Test seam (a torn batch write): `bytes` written at the end of the
    /// segment, its length not moved, so no reader sees them. Only a
    /// failing [`crate::fault::FaultPoint::WriteCopies`] calls it.
    pub(crate) fn write_unpublished(&self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all_at(bytes, self.len())
            .map_err(|e| CleanerError::io(&self.path(), e))
    }

    /// Make every byte below [`Segment::len`] durable. A segment that has
    /// not grown since its last flush is not synced again: the store's
    /// checkpoint flushes every compacted log's active segment, and with
    /// a thousand idle compact partitions that was a thousand fdatasyncs
    /// (each a cache flush of the disk, beside `flush: sync`'s msyncs)
    /// every `flush_interval_ms` for nothing. Bytes reach the file only
    /// by appends, which move `len` after their write, so an unchanged
    /// `len` means nothing new to sync.
    pub fn flush(&self) -> Result<()> {
        let len = self.len();
        if self.synced_through(len) {
            return Ok(());
        }
        durability::sync_data(&self.file, &self.path())
            .map_err(|e| CleanerError::io(&self.path(), e))?;
        self.synced_len_plus_one
            .fetch_max(len + 1, Ordering::AcqRel);
        Ok(())
    }

    /// Byte position to start scanning for the first record with offset ≥
    /// `offset` (from the sparse index).
    pub fn position_for(&self, offset: u64) -> u64 {
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        let i = index.partition_point(|e| e.offset <= offset);
        if i == 0 {
            0
        } else {
            index[i - 1].pos
        }
    }

    /// Byte position to start scanning for the first record whose
    /// timestamp is ≥ `timestamp_ms`: the records before it are all below
    /// it, and one within `INDEX_INTERVAL_BYTES` (plus one record) after it
    /// is not. `None` if no record of the segment is.
    pub fn position_for_timestamp(&self, timestamp_ms: i64) -> Option<u64> {
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        let i = index.partition_point(|e| e.running_max_ts_ms < timestamp_ms);
        index.get(i).map(|e| e.pos)
    }

    /// The largest timestamp of the segment's records (its index's last
    /// running maximum), `None` if it holds none.
    pub fn max_timestamp(&self) -> Option<i64> {
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        index.last().map(|e| e.running_max_ts_ms)
    }

    /// The sealed segment's bytes, mapped read-only (empty when it is): a
    /// cleaning pass reads the keys its map points at through it, a key at
    /// a time in no order, where a positioned read per key would cost a
    /// system call each.
    pub(crate) fn map_sealed(&self) -> Result<Bytes> {
        if self.is_empty() {
            return Ok(Bytes::new());
        }
        // SAFETY: the mapping is read-only and only of a sealed segment,
        // whose bytes are never written again (module invariants), and
        // whose file is never cut while the process runs: only recovery
        // truncates, when the log opens, before any cleaner starts. A
        // segment deleted by a swap keeps its data while mapped (Unix).
        let map = unsafe { memmap2::Mmap::map(&self.file) }
            .map_err(|e| CleanerError::io(&self.path(), e))?;
        Ok(Bytes::from_owner(map))
    }

    /// A sequential reader from byte `pos`.
    pub fn reader(&self, pos: u64) -> SegmentReader<'_> {
        SegmentReader {
            seg: self,
            pos,
            end: self.len(),
            buf: Bytes::new(),
            buf_start: pos,
            checked: 0..0,
            cached_only: false,
        }
    }

    /// A sequential reader from byte `pos` that never waits for the disk:
    /// a read of bytes that are not all in the page cache fails with
    /// [`CleanerError::NotCached`] instead (`read_cached_at`).
    pub fn reader_cached(&self, pos: u64) -> SegmentReader<'_> {
        SegmentReader {
            cached_only: true,
            ..self.reader(pos)
        }
    }
}

/// `buf.len()` bytes of `file` at `pos`, only if the page cache holds all
/// of them: Linux's `preadv2` with `RWF_NOWAIT` answers `EAGAIN` (or a
/// short count) instead of waiting for a disk read. Anything but the
/// whole buffer is [`CleanerError::NotCached`], also where the file
/// system or the platform has no such read (`EOPNOTSUPP`, tmpfs), so a
/// caller falls back to a read that may block ([`nowait_answer`]).
///
/// `RWF_NOWAIT` never waits, but a miss may still start readahead, and
/// on a fast disk (or a vCPU the host descheduled while it was in
/// flight) that readahead can finish before the kernel looks at the page
/// again: the read then answers the bytes. That is a correct answer, not
/// a wait; it is why no test can count on a refusal after an eviction.
fn read_cached_at(seg: &Segment, buf: &mut [u8], pos: u64) -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        let Ok(offset) = libc::off_t::try_from(pos) else {
            return Err(CleanerError::NotCached { path: seg.path() });
        };
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: one iovec over `buf`, which outlives the call; the fd is
        // the open file's.
        let n = unsafe { libc::preadv2(seg.file.as_raw_fd(), &iov, 1, offset, libc::RWF_NOWAIT) };
        let read = usize::try_from(n).map_err(|_| std::io::Error::last_os_error());
        nowait_answer(read, buf.len(), &seg.path())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (buf, pos);
        Err(CleanerError::NotCached { path: seg.path() })
    }
}

/// What a non-blocking read of `wanted` bytes from `path` that returned
/// `read` means: `Ok` only for the whole buffer; a short count, or an
/// error that says the read would have waited or is not supported here,
/// is [`CleanerError::NotCached`]; any other error is the I/O error it is.
#[cfg(target_os = "linux")]
fn nowait_answer(read: std::io::Result<usize>, wanted: usize, path: &Path) -> Result<()> {
    let would_wait = |e: &std::io::Error| {
        matches!(
            e.raw_os_error(),
            Some(libc::EAGAIN | libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS)
        )
    };
    match read {
        Ok(n) if n == wanted => Ok(()),
        Err(e) if !would_wait(&e) => Err(CleanerError::io(path, e)),
        _ => Err(CleanerError::NotCached {
            path: path.to_path_buf(),
        }),
    }
}

fn note(stats: &mut SegmentStats, r: &RecordMeta) {
    stats.records += 1;
    stats.first_offset.get_or_insert(r.offset);
    stats.last_offset = Some(r.offset);
    stats.first_store_ts_ms.get_or_insert(r.store_timestamp_ms);
    stats.max_store_ts_ms = stats.max_store_ts_ms.max(r.store_timestamp_ms);
    if r.tombstone {
        stats.tombstones += 1;
        if r.delete_horizon_ms == 0 {
            stats.unstamped_tombstones += 1;
        } else {
            stats.min_tombstone_horizon_ms =
                stats.min_tombstone_horizon_ms.min(r.delete_horizon_ms);
        }
    }
}

/// Reads records front to back with large positioned reads.
pub struct SegmentReader<'a> {
    seg: &'a Segment,
    pos: u64,
    end: u64,
    buf: Bytes,
    buf_start: u64,
    /// Records starting in this byte range were CRC-checked before
    /// ([`SegmentReader::checked_before`]).
    checked: std::ops::Range<u64>,
    /// Read only what the page cache holds ([`Segment::reader_cached`]).
    cached_only: bool,
}

impl SegmentReader<'_> {
    /// Records that start in `range` of this sealed segment were read and
    /// CRC-checked already: their CRC is not computed again (every other
    /// check still is). A sealed segment's bytes do not change.
    pub(crate) fn checked_before(mut self, range: std::ops::Range<u64>) -> Self {
        self.checked = range;
        self
    }

    /// Byte position of the next record.
    pub fn position(&self) -> u64 {
        self.pos
    }

    fn fill(&mut self, need: usize) -> Result<()> {
        let have_from = (self.pos - self.buf_start) as usize;
        if self.buf.len() >= have_from + need {
            return Ok(());
        }
        let want = need.max(READ_CHUNK).min((self.end - self.pos) as usize);
        // Reuse the previous chunk's memory when no record read from it is
        // still held (the cleaner's passes drop or copy every record before
        // reading on): a fresh zeroed chunk per read was the largest cost
        // of a pass (page faults and zeroing of new memory). Only a grown
        // tail is zeroed; the bytes are overwritten by the read anyway.
        let mut b = match std::mem::take(&mut self.buf).try_into_mut() {
            Ok(mut b) => {
                if b.len() >= want {
                    b.truncate(want);
                } else {
                    b.resize(want, 0);
                }
                b
            }
            Err(_) => BytesMut::zeroed(want),
        };
        if self.cached_only {
            read_cached_at(self.seg, &mut b, self.pos)?;
        } else {
            self.seg
                .file
                .read_exact_at(&mut b, self.pos)
                .map_err(|e| CleanerError::io(&self.seg.path(), e))?;
        }
        self.buf = b.freeze();
        self.buf_start = self.pos;
        Ok(())
    }

    /// The next record, `None` at the end. Damage is
    /// [`CleanerError::Corruption`] at the record's position, a failed read
    /// [`CleanerError::Io`].
    pub fn next_record(&mut self) -> Result<Option<CompactedRecord>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let remaining = (self.end - self.pos) as usize;
        self.fill(format::HEADER_LEN.min(remaining))?;
        let at = (self.pos - self.buf_start) as usize;
        // Fewer than four bytes: `decode` says what they are.
        let total = tidelog_storage::codec::read_u32(&self.buf, at + format::OFF_TOTAL_LEN)
            .map_or(0, |len| len as usize);
        // Checked before `fill` allocates for it.
        if total > format::RECORD_LEN_MAX {
            return Err(self
                .seg
                .corrupt(self.pos, format::Invalid::BadLength { total }));
        }
        if total > 0 && total <= remaining {
            self.fill(total)?;
        }
        let at = (self.pos - self.buf_start) as usize;
        let avail = self.buf.slice(at..self.buf.len().min(at + remaining));
        let check_crc = !self.checked.contains(&self.pos);
        let r = decode_checked_at(self.seg, self.pos, &avail, check_crc)?;
        self.pos += r.len() as u64;
        Ok(Some(r))
    }
}

/// The record at the start of `avail`, byte `pos` of `seg`, its CRC checked
/// when `check_crc`; what is not a record is corruption there.
fn decode_checked_at(
    seg: &Segment,
    pos: u64,
    avail: &Bytes,
    check_crc: bool,
) -> Result<CompactedRecord> {
    match format::decode_checked(avail, check_crc).map_err(|why| seg.corrupt(pos, why))? {
        Decoded::End => Err(seg.corrupt(pos, CorruptionKind::Zeros)),
        Decoded::Record(r) => Ok(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compacted::format::{encode, Fields};
    use tidelog_storage::{PhysicalOffset, QueueOffset};

    pub(crate) fn rec(offset: u64, key: &str, value: Option<&str>) -> CompactedRecord {
        let b = Bytes::from(encode(&Fields {
            offset: QueueOffset::new(offset),
            timestamp_ms: 1,
            store_timestamp_ms: 1000 + offset as i64,
            delete_horizon_ms: 0,
            physical_offset: PhysicalOffset::new(offset * 100),
            key: Some(key.as_bytes()),
            value: value.map(str::as_bytes),
            headers_block: &[],
            header_count: 0,
            producer: None,
        }));
        match format::decode(&b) {
            Ok(Decoded::Record(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn append_read_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000010.log");
        let seg = Segment::create(path.clone(), 10, 0).unwrap();
        let big = "x".repeat(3000);
        for o in 10..30 {
            seg.append(&rec(o, &format!("k{o}"), Some(&big))).unwrap();
        }
        seg.append(&rec(31, "k1", None)).unwrap();
        let st = seg.stats();
        assert_eq!(
            (st.records, st.tombstones, st.last_offset),
            (21, 1, Some(31))
        );
        let mut r = seg.reader(seg.position_for(25));
        let mut first = r.next_record().unwrap().unwrap();
        while first.offset.get() < 25 {
            first = r.next_record().unwrap().unwrap();
        }
        assert_eq!(first.offset.get(), 25);
        drop(seg);
        let seg = Segment::open(path, 10, false).unwrap();
        assert_eq!(seg.stats().records, 21);
        assert!(seg.index.read().unwrap().len() > 5);
    }

    /// The kernel's answers to a non-blocking read, each mapped to what
    /// the caller does next: the bytes, the blocking fallback
    /// (`NotCached`), or the error. The real read's refusal cannot be
    /// counted on in a test (a readahead the miss started may finish
    /// first), so its meaning is checked here, on every answer it has.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_nowait_read_is_served_whole_or_left_to_the_blocking_read() {
        let path = Path::new("/data/t-0/00000000000000000000.log");
        let os = |code| Err(std::io::Error::from_raw_os_error(code));
        assert!(nowait_answer(Ok(4096), 4096, path).is_ok());
        for short in [0, 1, 4095] {
            assert!(matches!(
                nowait_answer(Ok(short), 4096, path),
                Err(CleanerError::NotCached { .. })
            ));
        }
        for would_wait in [libc::EAGAIN, libc::EOPNOTSUPP, libc::EINVAL, libc::ENOSYS] {
            assert!(matches!(
                nowait_answer(os(would_wait), 4096, path),
                Err(CleanerError::NotCached { .. })
            ));
        }
        match nowait_answer(os(libc::EIO), 4096, path) {
            Err(CleanerError::Io { path: p, source }) => {
                assert_eq!(p, path);
                assert_eq!(source.raw_os_error(), Some(libc::EIO));
            }
            other => panic!("an I/O error is not a miss: {other:?}"),
        }
    }

    #[test]
    fn torn_tail_is_repaired_only_where_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let seg = Segment::create(path.clone(), 0, 0).unwrap();
        for o in 0..5 {
            seg.append(&rec(o, "k", Some("v"))).unwrap();
        }
        let good_len = seg.len();
        drop(seg);
        // Half of another record.
        let extra = rec(5, "k", Some("vvvvvvvv"));
        let f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all_at(&extra.raw()[..20], good_len).unwrap();
        assert!(Segment::open(path.clone(), 0, false).is_err());
        assert!(matches!(
            Segment::open(path.clone(), 0, false),
            Err(CleanerError::Corruption {
                at: Location::Byte(p),
                kind: CorruptionKind::Record(format::Invalid::PastEnd { .. }),
                ..
            }) if p == good_len
        ));
        let seg = Segment::open(path.clone(), 0, true).unwrap();
        assert_eq!(seg.len(), good_len);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len);
        assert_eq!(seg.stats().last_offset, Some(4));
    }

    /// A reader reuses its chunk's memory once no record read from it is
    /// held, and never while one is (the record's bytes must not change).
    #[test]
    fn the_read_buffer_is_reused_only_when_free() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let seg = Segment::create(path, 0, 0).unwrap();
        let big = "x".repeat(100 << 10);
        for o in 0..8 {
            seg.append(&rec(o, &format!("k{o}"), Some(&big))).unwrap();
        }
        // Each record is ~100 KiB: a 256 KiB chunk holds two.
        let mut r = seg.reader(0);
        let first = r.next_record().unwrap().unwrap();
        let chunk = r.buf.as_ptr();
        let held = first.clone();
        drop(first);
        r.next_record().unwrap().unwrap();
        // The third needs a new chunk: `held` still points into the first.
        let third = r.next_record().unwrap().unwrap();
        assert_ne!(r.buf.as_ptr(), chunk, "a held record's chunk is not reused");
        assert_eq!(held.offset.get(), 0);
        assert_eq!(held.value_slice().map(<[u8]>::len), Some(big.len()));
        let second_chunk = r.buf.as_ptr();
        drop(third);
        let mut offsets = vec![];
        while let Some(rec) = r.next_record().unwrap() {
            offsets.push(rec.offset.get());
        }
        assert_eq!(offsets, (3..8).collect::<Vec<_>>());
        assert_eq!(r.buf.as_ptr(), second_chunk, "a free chunk is reused");
    }

    /// A reader told which records were CRC-checked before skips only
    /// their CRC: a damaged CRC there is not seen, everywhere else it is,
    /// and every other check is made.
    #[test]
    fn records_checked_before_skip_only_their_crc() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let seg = Segment::create(path.clone(), 0, 0).unwrap();
        for o in 0..4 {
            seg.append(&rec(o, "k", Some("value"))).unwrap();
        }
        let len = rec(0, "k", Some("value")).len() as u64;
        // Damage the value (under the CRC only) of records 1 and 3.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        for r in [1, 3] {
            f.write_all_at(b"X", r * len + len - 1).unwrap();
        }
        let mut reader = seg.reader(0).checked_before(len..2 * len);
        for o in 0..3 {
            assert_eq!(reader.next_record().unwrap().unwrap().offset.get(), o);
        }
        assert!(matches!(
            reader.next_record(),
            Err(CleanerError::Corruption { at: Location::Byte(p), .. }) if p == 3 * len
        ));
        assert!(seg.reader(len).next_record().is_err(), "checked by default");
        // The map at `map_sealed` holds the same bytes.
        assert_eq!(seg.map_sealed().unwrap().len() as u64, 4 * len);
        assert!(Segment::create(dir.path().join("e.log"), 0, 0)
            .unwrap()
            .map_sealed()
            .unwrap()
            .is_empty());
    }

    /// A read that fails is an I/O error, not damage: the reader says so,
    /// and so opening never truncates a segment over one.
    #[test]
    fn a_failed_read_is_io_not_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let seg = Segment::create(path.clone(), 0, 0).unwrap();
        for o in 0..3 {
            seg.append(&rec(o, "k", Some("v"))).unwrap();
        }
        // The file shrinks under a reader that was told a longer length.
        seg.file.set_len(10).unwrap();
        let err = seg.reader(0).next_record().unwrap_err();
        assert!(matches!(err, CleanerError::Io { .. }), "{err}");
    }
}
