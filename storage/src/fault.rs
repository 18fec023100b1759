//! Fault injection seam.
//!
//! Tests hand the store a [`Faults`] through `StoreConfig::faults` to make
//! the Nth flush or segment creation fail, then check that the store reacts
//! as promised (refuses appends after a failed fsync, reports clean errors).
//! Production passes `None`, and every check is a single branch.

use std::sync::atomic::{AtomicU64, Ordering};

/// Operations a test can make fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// msync/fsync of CommitLog bytes.
    CommitLogFlush,
    /// Writing a batch's bytes into a CommitLog segment.
    CommitLogWrite,
    /// Creating and preallocating a CommitLog segment file.
    SegmentCreate,
}

/// Counters for each fault point: the operation fails once its counter of
/// remaining successes reaches zero (`u64::MAX` = never fails).
#[derive(Debug)]
pub struct Faults {
    flush_successes_left: AtomicU64,
    write_successes_left: AtomicU64,
    create_successes_left: AtomicU64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            flush_successes_left: AtomicU64::new(u64::MAX),
            write_successes_left: AtomicU64::new(u64::MAX),
            create_successes_left: AtomicU64::new(u64::MAX),
        }
    }
}

impl Faults {
    /// Let `n` more operations at `point` succeed, then fail every later one.
    pub fn fail_after(&self, point: FaultPoint, n: u64) {
        self.counter(point).store(n, Ordering::SeqCst);
    }

    /// Stop failing at `point`.
    pub fn heal(&self, point: FaultPoint) {
        self.counter(point).store(u64::MAX, Ordering::SeqCst);
    }

    fn counter(&self, point: FaultPoint) -> &AtomicU64 {
        match point {
            FaultPoint::CommitLogFlush => &self.flush_successes_left,
            FaultPoint::CommitLogWrite => &self.write_successes_left,
            FaultPoint::SegmentCreate => &self.create_successes_left,
        }
    }

    /// `Err` if the operation at `point` is to fail now.
    pub(crate) fn check(&self, point: FaultPoint) -> std::io::Result<()> {
        let counter = self.counter(point);
        let left = counter.load(Ordering::SeqCst);
        if left == u64::MAX {
            return Ok(());
        }
        if left == 0 {
            return Err(std::io::Error::other(format!(
                "injected fault at {point:?}"
            )));
        }
        counter.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Check an optional fault plan.
pub(crate) fn check(
    faults: &Option<std::sync::Arc<Faults>>,
    point: FaultPoint,
) -> std::io::Result<()> {
    match faults {
        Some(f) => f.check(point),
        None => Ok(()),
    }
}
