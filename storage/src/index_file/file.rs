//! One IndexFile: a mapped file of a header, `slot_count` slots and
//! `entry_capacity` entries (`format.rs`), opened at load, and the
//! accessors reader and writer share (header fields, slots, entries).
//!
//! Invariants: header fields that change are read and written only
//! atomically, through the map; a published entry (reachable from a slot
//! or below the entry count) never changes, except by recovery's
//! truncation before readers exist.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use super::format::{self, Entry, IndexHeader, ENTRY_LEN, HEADER_LEN, SLOT_LEN};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;

pub struct IndexFile {
    pub(super) path: PathBuf,
    pub(super) slot_count: u32,
    pub(super) entry_capacity: u32,
    pub(super) map: MmapRaw,
    pub(super) _file: std::fs::File,
    /// The entry count the last flush covered: a file whose count is still
    /// that (every sealed file after its first flush) is not synced again.
    pub(super) synced_entries: AtomicU32,
}

impl IndexFile {
    pub(super) fn open(path: PathBuf) -> Result<IndexFile> {
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

    pub(super) fn atomic_u64(&self, at: usize) -> &AtomicU64 {
        assert!(at % 8 == 0 && at + 8 <= HEADER_LEN);
        // SAFETY: aligned (the map is page-aligned, `at` is a multiple of 8),
        // in bounds, and only ever accessed atomically.
        unsafe { &*(self.map.as_mut_ptr().add(at) as *const AtomicU64) }
    }

    pub(super) fn atomic_u32(&self, at: usize) -> &AtomicU32 {
        assert!(at % 4 == 0 && at + 4 <= self.map.len());
        // SAFETY: aligned, in bounds, only ever accessed atomically.
        unsafe { &*(self.map.as_mut_ptr().add(at) as *const AtomicU32) }
    }

    pub(super) fn slot(&self, i: u32) -> &AtomicU32 {
        self.atomic_u32(HEADER_LEN + i as usize * SLOT_LEN)
    }

    pub(super) fn entries_at(&self) -> usize {
        HEADER_LEN + self.slot_count as usize * SLOT_LEN
    }

    pub(super) fn entry(&self, i: u32) -> Entry {
        let at = self.entries_at() + i as usize * ENTRY_LEN;
        assert!(i < self.entry_capacity);
        let mut b = [0u8; ENTRY_LEN];
        // SAFETY: in bounds; published entries are immutable (see module doc).
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.as_ptr().add(at), b.as_mut_ptr(), ENTRY_LEN)
        };
        Entry::decode(&b)
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
}
