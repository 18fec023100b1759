//! Fault injection seam (failpoints).
//!
//! Tests open the store with a `Faults` plan (`Store::open_with_faults`,
//! or the broker's `open_with_faults`) to make the Nth flush or segment
//! creation fail, or an operation hang until healed, then check that the
//! store reacts as promised (refuses appends after a failed fsync, answers
//! sync-flush waiters in time while an fsync hangs, reports clean errors).
//!
//! All of it exists only with the `failpoints` cargo feature, which only
//! dev-dependencies enable. Without it [`FaultHandle`] is empty, `check`
//! is an inlined `Ok(())`, and neither `Faults` nor a way to install one
//! exists: a release build carries no fault switch. Check sites read the
//! same either way: `fault::check(&self.faults, FaultPoint::X)`.

#[cfg(feature = "failpoints")]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "failpoints")]
use std::sync::{Arc, Condvar, Mutex};

/// Operations a test can make fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// msync/fsync of CommitLog bytes.
    CommitLogFlush,
    /// Writing a batch's bytes into a CommitLog segment.
    CommitLogWrite,
    /// Creating and preallocating a CommitLog segment file.
    SegmentCreate,
    /// The dispatcher handing an entry's records to the sinks.
    Dispatch,
}

/// Every point, for the per-point hang flags.
#[cfg(feature = "failpoints")]
const POINTS: usize = 4;

/// Counters for each fault point: the operation fails once its counter of
/// remaining successes reaches zero (`u64::MAX` = never fails).
#[cfg(feature = "failpoints")]
#[derive(Debug)]
pub struct Faults {
    flush_successes_left: AtomicU64,
    write_successes_left: AtomicU64,
    create_successes_left: AtomicU64,
    dispatch_successes_left: AtomicU64,
    /// Points whose operations block until healed, and how many are blocked
    /// now (by point).
    hangs: Mutex<Hangs>,
    healed: Condvar,
}

#[cfg(feature = "failpoints")]
#[derive(Debug, Default)]
struct Hangs {
    hanging: [bool; POINTS],
    blocked: [u64; POINTS],
}

#[cfg(feature = "failpoints")]
impl Default for Faults {
    fn default() -> Self {
        Faults {
            flush_successes_left: AtomicU64::new(u64::MAX),
            write_successes_left: AtomicU64::new(u64::MAX),
            create_successes_left: AtomicU64::new(u64::MAX),
            dispatch_successes_left: AtomicU64::new(u64::MAX),
            hangs: Mutex::new(Hangs::default()),
            healed: Condvar::new(),
        }
    }
}

#[cfg(feature = "failpoints")]
impl Faults {
    /// Let `n` more operations at `point` succeed, then fail every later one.
    pub fn fail_after(&self, point: FaultPoint, n: u64) {
        self.counter(point).store(n, Ordering::SeqCst);
    }

    /// Stop failing at `point`, and let operations blocked there by
    /// [`Faults::hang`] go on (they then succeed or fail as planned).
    pub fn heal(&self, point: FaultPoint) {
        self.counter(point).store(u64::MAX, Ordering::SeqCst);
        let mut hangs = self.hangs();
        hangs.hanging[point as usize] = false;
        self.healed.notify_all();
    }

    /// Make operations at `point` block (a hung fsync) until
    /// [`Faults::heal`] lets them succeed or [`Faults::release_failing`]
    /// lets them fail.
    pub fn hang(&self, point: FaultPoint) {
        self.hangs().hanging[point as usize] = true;
    }

    /// How many operations are blocked at `point` now.
    pub fn blocked(&self, point: FaultPoint) -> u64 {
        self.hangs().blocked[point as usize]
    }

    /// End a hang at `point` and let what was blocked there fail (a hung
    /// fsync that finally returns an error).
    pub fn release_failing(&self, point: FaultPoint) {
        self.fail_after(point, 0);
        let mut hangs = self.hangs();
        hangs.hanging[point as usize] = false;
        self.healed.notify_all();
    }

    fn hangs(&self) -> std::sync::MutexGuard<'_, Hangs> {
        self.hangs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn counter(&self, point: FaultPoint) -> &AtomicU64 {
        match point {
            FaultPoint::CommitLogFlush => &self.flush_successes_left,
            FaultPoint::CommitLogWrite => &self.write_successes_left,
            FaultPoint::SegmentCreate => &self.create_successes_left,
            FaultPoint::Dispatch => &self.dispatch_successes_left,
        }
    }

    /// Block while `point` hangs; then `Err` if the operation at `point`
    /// is to fail now.
    pub(crate) fn check(&self, point: FaultPoint) -> std::io::Result<()> {
        {
            let mut hangs = self.hangs();
            if hangs.hanging[point as usize] {
                hangs.blocked[point as usize] += 1;
                while hangs.hanging[point as usize] {
                    hangs = self.healed.wait(hangs).unwrap_or_else(|e| e.into_inner());
                }
                hangs.blocked[point as usize] -= 1;
            }
        }
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

/// What the store's parts hold: the plan the store was opened with, if
/// any. Without `failpoints` it is empty (zero-sized), and so is every
/// check of it.
#[derive(Clone, Debug, Default)]
pub struct FaultHandle(#[cfg(feature = "failpoints")] Option<Arc<Faults>>);

#[cfg(feature = "failpoints")]
impl FaultHandle {
    pub(crate) fn new(faults: Arc<Faults>) -> Self {
        FaultHandle(Some(faults))
    }
}

/// Check the plan the store was opened with, if any.
#[cfg(feature = "failpoints")]
pub(crate) fn check(faults: &FaultHandle, point: FaultPoint) -> std::io::Result<()> {
    match &faults.0 {
        Some(f) => f.check(point),
        None => Ok(()),
    }
}

/// Without `failpoints`: nothing to check, nothing left after inlining.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn check(_: &FaultHandle, _: FaultPoint) -> std::io::Result<()> {
    Ok(())
}
