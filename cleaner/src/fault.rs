//! Fault injection seam for the cleaner's segment swap and the compacted
//! logs' copy writes (the house style of `tidelog_storage::fault`).
//!
//! Tests start the cleaner with a `Faults` plan
//! (`LogCleaner::new_with_faults`, or the broker's `open_with_faults`) to
//! make the Nth operation at a step of the swap fail with an I/O error (or
//! panic), then check what a retry, or a restart, makes of the files left
//! behind. An operation that fails is not performed; a failing directory
//! fsync fails after the rename before it, which is what a real one leaves
//! (the rename visible, its durability unknown). A test that stops at a
//! step and reopens the directory without retrying simulates a crash there.
//!
//! The plan exists only with the `failpoints` cargo feature, which only
//! dev-dependencies enable. Without it [`FaultHandle`] is empty, `check`
//! is an inlined `Ok(())`, and neither `Faults` nor a way to install one
//! exists in the build. Check sites read the same either way:
//! `fault::check(&self.faults, FaultPoint::X)`.

#[cfg(feature = "failpoints")]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(feature = "failpoints")]
use std::sync::{Arc, Condvar, Mutex};

/// The operations of one swap, in the order a pass performs them (see
/// `cleaner/swap.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// Writing a kept record into `<base>.log.cleaned`.
    WriteCleaned,
    /// fsync of the `.cleaned` file.
    SyncCleaned,
    /// Renaming `.cleaned` to `<base>-<end>.swap`.
    RenameToSwap,
    /// fsync of the directory after that rename (the rename is done).
    SyncDirAfterSwap,
    /// Renaming one of the segment files the swap replaces aside for
    /// deletion (`<base>.log.deleted`; unlinked later, off the pass).
    DeleteOld,
    /// Renaming `.swap` to `<base>.log`.
    RenameToLog,
    /// fsync of the directory after that rename (the swap is done).
    SyncDirAfterLog,
    /// The dispatcher's copy: one batch write into a compacted log's active
    /// segment. A failure here is torn: the first half of the batch's bytes
    /// reach the file, unpublished, as a crash in the middle of the write
    /// leaves them (`CompactedLogs::open_with_faults`). Not a swap step, so
    /// not in [`FaultPoint::ALL`].
    WriteCopies,
    /// The fsync of a compacted log's active segment in its `flush` (the
    /// store's checkpoint). Not a swap step either.
    SyncCopies,
}

/// How many points there are (the swap's, [`FaultPoint::WriteCopies`] and
/// [`FaultPoint::SyncCopies`]).
#[cfg(feature = "failpoints")]
const POINTS: usize = FaultPoint::ALL.len() + 2;

impl FaultPoint {
    /// Every point, in swap order.
    pub const ALL: [FaultPoint; 7] = [
        FaultPoint::WriteCleaned,
        FaultPoint::SyncCleaned,
        FaultPoint::RenameToSwap,
        FaultPoint::SyncDirAfterSwap,
        FaultPoint::DeleteOld,
        FaultPoint::RenameToLog,
        FaultPoint::SyncDirAfterLog,
    ];

    #[cfg(feature = "failpoints")]
    fn index(self) -> usize {
        self as usize
    }
}

/// For each point, how many more operations succeed (`u64::MAX`: never
/// fails) and whether the failure is a panic rather than an error.
#[cfg(feature = "failpoints")]
#[derive(Debug)]
pub struct Faults {
    successes_left: [AtomicU64; POINTS],
    panics: [AtomicBool; POINTS],
    /// Points whose operations wait until healed (a disk that does not
    /// answer), and how many wait now, by point.
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
            successes_left: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
            panics: std::array::from_fn(|_| AtomicBool::new(false)),
            hangs: Mutex::default(),
            healed: Condvar::new(),
        }
    }
}

#[cfg(feature = "failpoints")]
impl Faults {
    /// Let `n` more operations at `point` succeed, then fail every later
    /// one with an I/O error.
    pub fn fail_after(&self, point: FaultPoint, n: u64) {
        self.panics[point.index()].store(false, Ordering::SeqCst);
        self.successes_left[point.index()].store(n, Ordering::SeqCst);
    }

    /// As [`Faults::fail_after`], but the failure is a panic (thread
    /// supervision tests).
    pub fn panic_after(&self, point: FaultPoint, n: u64) {
        self.panics[point.index()].store(true, Ordering::SeqCst);
        self.successes_left[point.index()].store(n, Ordering::SeqCst);
    }

    /// Make every later operation at `point` wait until [`Faults::heal`].
    pub fn hang(&self, point: FaultPoint) {
        self.lock_hangs().hanging[point.index()] = true;
    }

    /// How many operations at `point` are waiting in a hang now.
    pub fn blocked(&self, point: FaultPoint) -> u64 {
        self.lock_hangs().blocked[point.index()]
    }

    /// Stop failing and hanging at every point (waiting operations go on).
    pub fn heal(&self) {
        for left in &self.successes_left {
            left.store(u64::MAX, Ordering::SeqCst);
        }
        self.lock_hangs().hanging = [false; POINTS];
        self.healed.notify_all();
    }

    fn lock_hangs(&self) -> std::sync::MutexGuard<'_, Hangs> {
        self.hangs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait while `point` hangs.
    fn wait_while_hanging(&self, point: FaultPoint) {
        let i = point.index();
        let mut hangs = self.lock_hangs();
        if !hangs.hanging[i] {
            return;
        }
        hangs.blocked[i] += 1;
        while hangs.hanging[i] {
            hangs = self.healed.wait(hangs).unwrap_or_else(|e| e.into_inner());
        }
        hangs.blocked[i] -= 1;
    }

    /// `Err` (or a panic) if the operation at `point` is to fail now; waits
    /// first while it hangs.
    fn check(&self, point: FaultPoint) -> std::io::Result<()> {
        self.wait_while_hanging(point);
        let counter = &self.successes_left[point.index()];
        let left = counter.load(Ordering::SeqCst);
        if left == u64::MAX {
            return Ok(());
        }
        if left == 0 {
            if self.panics[point.index()].load(Ordering::SeqCst) {
                panic!("injected panic at {point:?} (cleaner Faults)");
            }
            return Err(std::io::Error::other(format!(
                "injected fault at {point:?}"
            )));
        }
        counter.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// What the cleaner holds: the plan it was started with, if any. Without
/// `failpoints` it is empty (zero-sized), and so is every check of it.
#[derive(Clone, Debug, Default)]
pub struct FaultHandle(#[cfg(feature = "failpoints")] Option<Arc<Faults>>);

#[cfg(feature = "failpoints")]
impl FaultHandle {
    pub(crate) fn new(faults: Arc<Faults>) -> Self {
        FaultHandle(Some(faults))
    }
}

/// Check the plan the cleaner was started with, if any.
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

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use super::*;

    #[test]
    fn fails_after_n_successes_until_healed() {
        let faults = Arc::new(Faults::default());
        let f = FaultHandle::new(Arc::clone(&faults));
        assert!(check(&f, FaultPoint::DeleteOld).is_ok());
        faults.fail_after(FaultPoint::DeleteOld, 1);
        assert!(check(&f, FaultPoint::DeleteOld).is_ok());
        assert!(check(&f, FaultPoint::DeleteOld).is_err());
        assert!(check(&f, FaultPoint::DeleteOld).is_err());
        assert!(check(&f, FaultPoint::RenameToLog).is_ok(), "other points");
        faults.heal();
        assert!(check(&f, FaultPoint::DeleteOld).is_ok());
        assert!(check(&FaultHandle::default(), FaultPoint::DeleteOld).is_ok());
    }

    #[test]
    fn a_hang_holds_the_operation_until_healed() {
        let faults = Arc::new(Faults::default());
        faults.hang(FaultPoint::SyncCopies);
        let f = FaultHandle::new(Arc::clone(&faults));
        let waiting = std::thread::spawn(move || check(&f, FaultPoint::SyncCopies));
        while faults.blocked(FaultPoint::SyncCopies) == 0 {
            assert!(!waiting.is_finished(), "the check went on while hung");
            std::thread::yield_now();
        }
        assert!(
            check(
                &FaultHandle::new(Arc::clone(&faults)),
                FaultPoint::WriteCopies
            )
            .is_ok(),
            "other points"
        );
        faults.heal();
        assert!(waiting.join().unwrap().is_ok());
        assert_eq!(faults.blocked(FaultPoint::SyncCopies), 0);
    }

    #[test]
    #[should_panic(expected = "injected panic at SyncCleaned")]
    fn panics_when_asked() {
        let f = Arc::new(Faults::default());
        f.panic_after(FaultPoint::SyncCleaned, 0);
        let _ = check(&FaultHandle::new(f), FaultPoint::SyncCleaned);
    }
}
