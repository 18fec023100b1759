//! The disk-full gate: the data directory's disk usage and available
//! bytes measured, the flag that refuses appends set and cleared (with
//! hysteresis), the refusal's words, and the reserve of free space the
//! gate keeps for the files the store must still create.
//!
//! Invariants: the flag is up above `disk_full_ratio` until usage is back
//! at `disk_force_clean_ratio` or below, and up while less than the
//! reserve is available until twice the reserve is; so produce does not
//! flap around either mark, and the last bytes of the disk go to no file
//! the store maps. A failed measurement keeps the last state.

use std::sync::atomic::Ordering;

use super::{Inner, Store};
use crate::config::StoreConfig;
use crate::error::StoreError;

impl Store {
    /// Re-evaluate the disk-full flag now (it is also kept by a thread).
    pub fn check_disk(&self) {
        self.inner.check_disk();
    }
}

impl Inner {
    /// The refusal while the disk-full flag is up.
    pub(super) fn disk_full_error(&self) -> StoreError {
        let ratio = f64::from_bits(self.retention.disk_used_ratio_bits.load(Ordering::Acquire));
        if self.retention.full_by_reserve.load(Ordering::Acquire) {
            let available = self.retention.disk_available_bytes.load(Ordering::Acquire);
            return StoreError::DiskFull {
                reason: format!(
                    "the data directory's disk has {available} bytes available ({:.1}% used), less than the store's reserve of {} bytes for the files it must still create (the next commit log segment, index and queue files); writes resume when {} bytes are free (delete old segments or free space)",
                    ratio * 100.0,
                    self.disk_reserve_bytes,
                    self.disk_reserve_bytes.saturating_mul(2)
                ),
            };
        }
        StoreError::disk_full(ratio, &self.config.retention)
    }

    /// Update the disk-used ratio and the disk-full flag.
    pub(super) fn check_disk(&self) {
        let cfg = &self.config.retention;
        let ratio = match cfg.disk.used_ratio(&self.config.data_dir) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read disk usage of the data directory");
                return;
            }
        };
        self.retention
            .disk_used_ratio_bits
            .store(ratio.to_bits(), Ordering::Release);
        // Hysteresis (RocketMQ's): full above disk_full_ratio, and full
        // until usage is back at disk_force_clean_ratio or below, so
        // produce does not flap while usage hovers around the mark.
        let available = match cfg.disk.available_bytes(&self.config.data_dir) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the available bytes of the data directory's disk");
                None
            }
        };
        self.retention
            .disk_available_bytes
            .store(available.unwrap_or(u64::MAX), Ordering::Release);
        let was = self.retention.disk_full.load(Ordering::Acquire);
        let was_by_reserve = self.retention.full_by_reserve.load(Ordering::Acquire);
        // The reserve: free space for the files the store must still
        // create (issue 35: without it the last bytes went to a segment
        // being preallocated, and the indexes' next file found none). The
        // same hysteresis: short below the reserve, and short until twice
        // the reserve is free.
        let short = available.is_some_and(|a| {
            if was_by_reserve {
                a < self.disk_reserve_bytes.saturating_mul(2)
            } else {
                a < self.disk_reserve_bytes
            }
        });
        let full_by_ratio = if was && !was_by_reserve {
            ratio > cfg.disk_force_clean_ratio
        } else {
            ratio > cfg.disk_full_ratio
        };
        let full = full_by_ratio || short;
        self.retention
            .full_by_reserve
            .store(short && !full_by_ratio, Ordering::Release);
        self.retention.disk_full.store(full, Ordering::Release);
        // The spare segment goes only while the indexes lack space (the
        // dispatcher's ENOSPC), and comes back once they have it. Not for
        // the ratio or the reserve: a segment given up there would lift
        // the gate and be made again at once, over and over.
        self.log.set_disk_short(self.dispatcher.out_of_space());
        if short && !was_by_reserve {
            tracing::error!(
                disk_available_bytes = available.unwrap_or(0),
                disk_reserve_bytes = self.disk_reserve_bytes,
                "disk nearly full: less free space than the store's reserve; refusing produce until twice the reserve is free"
            );
        }
        let was_by_ratio = was && !was_by_reserve;
        if full_by_ratio && !was_by_ratio {
            tracing::error!(
                disk_used_ratio = ratio,
                disk_full_ratio = cfg.disk_full_ratio,
                disk_force_clean_ratio = cfg.disk_force_clean_ratio,
                "disk nearly full: refusing produce until usage falls to disk_force_clean_ratio"
            );
        } else if was && !full && was_by_reserve {
            tracing::warn!(
                disk_available_bytes = available.unwrap_or(0),
                disk_reserve_bytes = self.disk_reserve_bytes,
                "free space back at twice the store's reserve: accepting produce again"
            );
        } else if was && !full {
            tracing::warn!(
                disk_used_ratio = ratio,
                disk_force_clean_ratio = cfg.disk_force_clean_ratio,
                "disk usage back at disk_force_clean_ratio or below: accepting produce again"
            );
        }
    }
}

/// How many ConsumeQueue files the disk reserve holds room for: partitions
/// roll into their next queue file one at a time, rarely together.
const QUEUE_FILES_IN_RESERVE: u64 = 4;

/// The free space the disk-full gate keeps for the files the store must
/// still create after it refuses writes: the next CommitLog segment (the
/// preallocator's, or the writer's), the next IndexFile, and
/// `QUEUE_FILES_IN_RESERVE` ConsumeQueue files. Segments already made
/// ahead are allocated, so counted as used. Writes stop when less than
/// this is available, whatever the ratio: so the last bytes go to no
/// file at all, and every file the store maps is backed.
pub fn disk_reserve_bytes(config: &StoreConfig) -> u64 {
    use crate::index_file::format::{ENTRY_LEN, HEADER_LEN, SLOT_LEN};
    let index = HEADER_LEN as u64
        + u64::from(config.index_slots) * SLOT_LEN as u64
        + u64::from(config.index_entries) * ENTRY_LEN as u64;
    let queue = config
        .consume_queue_units_per_file
        .saturating_mul(crate::consume_queue::format::UNIT_LEN as u64);
    config
        .commitlog_segment_bytes
        .saturating_add(index)
        .saturating_add(queue.saturating_mul(QUEUE_FILES_IN_RESERVE))
}
