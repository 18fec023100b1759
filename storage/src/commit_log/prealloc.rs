//! The preallocator (`tidelog-prealloc`): creates the next two CommitLog
//! segments before the writer needs them and keeps the pages just ahead
//! of the writer warm. Warming is an optimisation only; creation is what the
//! writer would otherwise do itself on its roll.
//!
//! Under `flush: sync` warming writes zeros instead, and flushes them: the
//! window ahead of the writer becomes written (no longer unwritten)
//! extents before the writer reaches it, so the msync that acknowledges a
//! produce request writes the data pages and no extent conversion. On
//! ext4 a conversion is metadata the fsync must make durable: a journal
//! commit with a journal; without one (our VM), a synchronous write of
//! the extent block and another of the inode, each a wait on the disk
//! (measured: 2.6 block requests per msync in fallocated space, 1.3-1.5
//! in zero-written space). Async flush keeps the advice-only warm-up: it
//! must not pay a second write of every byte.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::segment::Segment;
use super::{lock, CommitLog};

impl CommitLog {
    pub(super) fn request_next_segment(&self, base: u64) {
        self.prealloc.request(base);
    }

    /// Run the preallocation loop on the calling thread until `stop` is
    /// set: create the next segment when asked, and keep the pages just
    /// ahead of the writer warm (see [`Preallocator`]).
    pub(crate) fn run_preallocator(&self, stop: &AtomicBool) {
        let create = |base: u64| {
            if self.segment_containing(base).is_some() {
                return None;
            }
            match Segment::create(&self.dir, base, self.segment_bytes, &self.faults) {
                Ok(s) => Some(Arc::new(s)),
                Err(e) => {
                    tracing::warn!(error = %e, base, "could not preallocate the next segment; the writer will create it");
                    None
                }
            }
        };
        let warm = |from: u64, ready: Option<&Arc<Segment>>| -> Option<u64> {
            let seg = self
                .segment_containing(from)
                .or_else(|| ready.filter(|s| s.contains(from)).cloned())?;
            let to = (from + WARM_CHUNK).min(seg.end());
            if self.zero_fill_ahead && self.prealloc.zeroing.pays() {
                self.zero_fill(&seg, from, to)?;
            } else {
                seg.warm(from - seg.base(), to - seg.base());
            }
            Some(to)
        };
        self.prealloc.run(
            stop,
            || self.committed.load(Ordering::Acquire),
            create,
            warm,
        );
    }

    pub(crate) fn stop_preallocator(&self) {
        self.prealloc.stop();
    }

    /// `flush: sync`'s warm-up step: write zeros over `from..to` (absolute,
    /// inside `seg`) where the writer is not, and flush them. The range is
    /// claimed under the writer's lock, from at least [`ZERO_GAP`] past
    /// the write position, so no append in progress can be there, and an
    /// append that reaches the claim waits for it
    /// ([`CommitLog::wait_for_zero_fill`]). A failed write only turns zero
    /// filling off (the pages are still preallocated); a failed flush
    /// poisons the log, as any failed flush of a segment does: the error
    /// may have been the writer's pages', reported to this call only.
    /// `None` if the log is poisoned.
    fn zero_fill(&self, seg: &Segment, from: u64, to: u64) -> Option<()> {
        let zeroing = &self.prealloc.zeroing;
        let from = {
            let w = lock(&self.writer);
            if self.poisoned.load(Ordering::Acquire) {
                return None;
            }
            // A quarter segment at most, so small segments get zeros too.
            let gap = ZERO_GAP.min(self.segment_bytes / 4);
            let from = from.max(w.write_pos.saturating_add(gap));
            if from >= to {
                return Some(());
            }
            zeroing.from.store(from, Ordering::Release);
            from
        };
        let (rel, len) = (from - seg.base(), to - from);
        let written = seg.write_zeros(rel, rel + len);
        {
            let _g = lock(&zeroing.done_lock);
            zeroing.from.store(u64::MAX, Ordering::Release);
        }
        zeroing.done.notify_all();
        if let Err(e) = written {
            tracing::warn!(segment = %seg.path().display(), error = %e, "could not zero-fill ahead of the writer; warming without writing from now on");
            zeroing.failed.store(true, Ordering::Release);
            return Some(());
        }
        if let Err(e) = seg.flush(rel as usize, len as usize) {
            self.poison(format!("flush of zero-filled pages failed: {e}"));
            return None;
        }
        Some(())
    }

    /// Called by the writer, under its lock, before it writes below `end`:
    /// wait while a zero fill claims a range below `end` (only when an
    /// append reaches the claim: the claim starts [`ZERO_GAP`] past the
    /// write position, and lasts one [`WARM_CHUNK`] of `pwrite`).
    pub(super) fn wait_for_zero_fill(&self, end: u64) {
        let zeroing = &self.prealloc.zeroing;
        if zeroing.from.load(Ordering::Acquire) >= end {
            return;
        }
        let mut g = lock(&zeroing.done_lock);
        while zeroing.from.load(Ordering::Acquire) < end {
            g = zeroing.done.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Above this many bytes in an average sync flush the zero fill no longer
/// pays, and the window ahead is only warmed. What a conversion costs an
/// msync is fixed (two more synchronous block writes, ~0.2 ms each here),
/// what the fill costs is a second write of every byte: with 64 one-record
/// requests an msync covers ~10 KiB and the fill makes it 1.28-1.54x
/// faster; with 100-record requests it covers ~1.6 MB, the conversion is
/// spread thin, and the doubled writes cost more than they save (merge of
/// `sync`, BENCHMARKS.md). 256 KiB is about what the disk writes in the
/// time of the two extra block writes (~600 MB/s here).
const ZERO_FILL_MAX_FLUSH_BYTES: u64 = 256 << 10;

/// How far past the write position a zero fill starts at the least (or a
/// quarter of a segment, if less): more than one usual append, so an
/// append rarely reaches a claimed range and waits (it would only wait
/// for one chunk's `pwrite`). Pages the writer reached before the fill
/// did stay preallocated only.
const ZERO_GAP: u64 = 1 << 20;

/// The range a zero fill is writing, from `from` to the end of its chunk;
/// `from` is `u64::MAX` when none is. Set under the writer's lock, so an
/// append either sees the claim or began before it (and the claim starts
/// past that append's end).
pub(super) struct ZeroClaim {
    from: AtomicU64,
    done_lock: Mutex<()>,
    done: Condvar,
    /// A zero fill's `pwrite` failed: warm without writing from then on.
    failed: AtomicBool,
    /// Bytes a sync flush covered, on average (the newest weighs a
    /// quarter); 0 before the first.
    flush_bytes: AtomicU64,
}

impl ZeroClaim {
    /// A flush of `bytes` completed: fold it into the average.
    pub(super) fn note_flush(&self, bytes: u64) {
        // Only the flushing thread updates it (flushes are serialized by
        // `FlushState::in_progress`): a plain load and store suffice.
        let avg = self.flush_bytes.load(Ordering::Relaxed);
        let next = if avg == 0 {
            bytes
        } else {
            (avg.saturating_mul(3)).saturating_add(bytes) / 4
        };
        self.flush_bytes.store(next.max(1), Ordering::Relaxed);
    }

    /// Whether the next warm-up step should write zeros: it has not failed,
    /// and flushes are small enough for the conversion they save to cost
    /// more than the zeros ([`ZERO_FILL_MAX_FLUSH_BYTES`]).
    fn pays(&self) -> bool {
        !self.failed.load(Ordering::Acquire)
            && self.flush_bytes.load(Ordering::Relaxed) <= ZERO_FILL_MAX_FLUSH_BYTES
    }
}

impl Default for ZeroClaim {
    fn default() -> ZeroClaim {
        ZeroClaim {
            from: AtomicU64::new(u64::MAX),
            done_lock: Mutex::new(()),
            done: Condvar::new(),
            failed: AtomicBool::new(false),
            flush_bytes: AtomicU64::new(0),
        }
    }
}

/// How far ahead of the writer the preallocator keeps pages warm. Far
/// enough that the writer does not catch up between two wake-ups of the
/// thread, near enough that warm pages are written within moments (idle
/// memory goes cold again on some VMs) and that a slow producer never
/// makes the thread warm a whole segment it will not reach for minutes.
const WARM_AHEAD: u64 = 64 << 20;
/// One step of warming: the writer nudges the thread each time it has
/// used up this much of the window.
const WARM_CHUNK: u64 = 4 << 20;

/// How many segments after the active one are kept made. Two, as
/// RocketMQ's `AllocateMappedFileService` makes the next file and the one
/// after it: a segment's creation ends in two fsyncs (the file's, then the
/// directory's), each a cache flush of the disk that waits behind all the
/// write-back in flight, and with the disk busy (a cleaner pass beside
/// heavy produce) one took longer than the writer needed to fill a
/// 256 MiB segment, so with a single spare the writer waited for it at
/// its roll, up to 1.4 s under its lock (docs/BENCHMARKS.md, the cleaner
/// lead). The second spare gives a slow creation a whole segment more.
/// It absorbs slow creations, not a disk that makes segments slower than
/// the writer fills them for long (there only larger segments help: the
/// cost is per segment). The cost is disk space: one more segment
/// preallocated ahead.
const SPARE_SEGMENTS: usize = 2;

/// The writer's helper thread. It does two things off the append path:
/// - creates the next [`SPARE_SEGMENTS`] segments (file, preallocation,
///   name) before the writer reaches the end of the active one, so
///   rolling does not wait for file creation;
/// - keeps the `WARM_AHEAD` bytes after the write position in the page
///   cache, across a segment boundary if the next segment is ready, so the
///   writer copies into existing pages instead of allocating them. Warming
///   follows the writer in `WARM_CHUNK` steps, so its cost is proportional
///   to what is written, and it runs on this thread, off the append path:
///   the writer never waits for a warm-up.
///
/// Warming is an optimisation only: a nudge lost to a race between the
/// writer's flag and the thread's read of the write position leaves the
/// window one chunk short until the next append nudges again, and a page
/// the writer reaches cold is merely slower to write.
#[derive(Default)]
pub(super) struct Preallocator {
    state: Mutex<PreState>,
    cv: Condvar,
    /// Absolute position below which pages are warm (or written).
    pub(super) warmed_to: AtomicU64,
    /// The writer asked for more warming and the thread has not yet
    /// picked that up; keeps the writer from locking `state` per append.
    nudged: AtomicBool,
    /// Under `flush: sync`, the range being zero-filled.
    pub(super) zeroing: ZeroClaim,
}

#[derive(Default)]
struct PreState {
    /// The base of the segment the writer rolls into next, once it has
    /// asked; `None` while it makes that segment itself.
    requested: Option<u64>,
    /// The segments made ahead, in order: the first at `requested`, each
    /// next one at the end of the one before (at most [`SPARE_SEGMENTS`]).
    ready: Vec<Arc<Segment>>,
    busy_with: Option<u64>,
    stopped: bool,
}

impl PreState {
    /// The segment to make next so that `ahead` segments past the active
    /// one exist, if any is missing.
    fn wanted(&self, ahead: usize) -> Option<u64> {
        let first = self.requested?;
        if self.ready.len() >= ahead {
            return None;
        }
        Some(self.ready.last().map_or(first, |s| s.end()))
    }
}

impl Preallocator {
    /// The writer's next roll is at `base`: keep the segments made ahead
    /// that follow on from it (after a roll, all of them), and remove any
    /// other, which no roll will use.
    fn request(&self, base: u64) {
        let mut st = lock(&self.state);
        st.requested = Some(base);
        let mut next = base;
        let ready = std::mem::take(&mut st.ready);
        for s in ready {
            if s.base() == next {
                next = s.end();
                st.ready.push(s);
            } else {
                let _ = std::fs::remove_file(s.path());
            }
        }
        self.cv.notify_all();
    }

    /// The writer is at `pos`: wake the thread if the warm window ahead of
    /// it has shrunk by a chunk. Lock-free unless a wake-up is due.
    pub(super) fn writer_at(&self, pos: u64) {
        let warmed = self.warmed_to.load(Ordering::Acquire);
        if warmed >= pos + WARM_AHEAD - WARM_CHUNK || self.nudged.swap(true, Ordering::AcqRel) {
            return;
        }
        let _st = lock(&self.state);
        self.cv.notify_all();
    }

    pub(super) fn take(&self, base: u64) -> Option<Arc<Segment>> {
        let mut st = lock(&self.state);
        // If the thread is making exactly this segment, wait for it rather
        // than race it for the file name. Making one is quick: the pages
        // are warmed later, as the writer approaches them.
        while st.busy_with == Some(base) {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        match st.ready.first() {
            Some(s) if s.base() == base => {
                let s = st.ready.remove(0);
                // The next roll is at its end (the writer's request says
                // so again), so a spare made meanwhile is kept.
                st.requested = Some(s.end());
                Some(s)
            }
            // Not made, or made for another position (the log was
            // truncated): the writer makes it itself, and its next
            // request removes those.
            _ => {
                if st.requested == Some(base) {
                    st.requested = None;
                }
                None
            }
        }
    }

    fn stop(&self) {
        let mut st = lock(&self.state);
        st.stopped = true;
        self.cv.notify_all();
    }

    /// The thread's loop. `writer` reads the write position; `create`
    /// makes a segment; `warm` warms one step from an absolute position
    /// (in a segment of the log, or in the ready next one) and says where
    /// it stopped, or `None` if no segment holds that position yet.
    fn run(
        &self,
        stop: &AtomicBool,
        writer: impl Fn() -> u64,
        create: impl Fn(u64) -> Option<Arc<Segment>>,
        warm: impl Fn(u64, Option<&Arc<Segment>>) -> Option<u64>,
    ) {
        let mut st = lock(&self.state);
        loop {
            if st.stopped || stop.load(Ordering::Acquire) {
                return;
            }
            self.nudged.store(false, Ordering::Release);
            // The next segment first: the writer may be about to roll.
            if let Some(base) = st.wanted(1) {
                st = self.make(st, base, &create);
                continue;
            }
            // Then one step of warming, if the window is not full. Pages
            // the writer has passed need none: if it has caught up,
            // warming goes on from where it writes (readahead skips the
            // pages it has already made).
            let at = writer();
            let from = self.warmed_to.load(Ordering::Acquire).max(at);
            if from < at + WARM_AHEAD {
                let next = st.ready.first().cloned();
                drop(st);
                let reached = warm(from, next.as_ref());
                st = lock(&self.state);
                if let Some(to) = reached {
                    self.warmed_to.store(to, Ordering::Release);
                    continue;
                }
                // Past the last segment and the next is not made yet: the
                // request (or the writer's roll) wakes us. Unless it came,
                // or a stop or a nudge did, while the lock was dropped:
                // its notification found nobody waiting.
                if st.stopped || st.wanted(1).is_some() || self.nudged.load(Ordering::Acquire) {
                    continue;
                }
            }
            // Last, the spare after the next segment: with the window
            // warm, the writer needs nothing sooner.
            if let Some(base) = st.wanted(SPARE_SEGMENTS) {
                st = self.make(st, base, &create);
                continue;
            }
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Make the segment at `base` with the lock dropped (`take` waits for
    /// it meanwhile), then keep it if it still follows on from the
    /// writer's request: the writer may have made it, or rolled past it,
    /// in the meantime.
    fn make<'a>(
        &'a self,
        mut st: MutexGuard<'a, PreState>,
        base: u64,
        create: &impl Fn(u64) -> Option<Arc<Segment>>,
    ) -> MutexGuard<'a, PreState> {
        st.busy_with = Some(base);
        drop(st);
        let seg = create(base);
        let mut st = lock(&self.state);
        st.busy_with = None;
        if let Some(s) = seg {
            if st.wanted(SPARE_SEGMENTS) == Some(s.base()) {
                st.ready.push(s);
            } else {
                let _ = std::fs::remove_file(s.path());
            }
        }
        self.cv.notify_all();
        st
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A stop (or a segment request) that arrives while the thread warms,
    /// with the lock dropped, must not be lost: the thread would then
    /// wait for a notification that already happened, and shutdown would
    /// hang joining it.
    #[test]
    fn the_preallocator_sees_a_stop_or_request_made_while_it_warmed() {
        for request_too in [false, true] {
            let pre = Arc::new(Preallocator::default());
            let stop = AtomicBool::new(false);
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            let runner = Arc::clone(&pre);
            let created = Arc::new(AtomicU64::new(0));
            let made = Arc::clone(&created);
            std::thread::spawn(move || {
                let warmer = Arc::clone(&runner);
                runner.run(
                    &stop,
                    || 0,
                    |base| {
                        made.store(base + 1, Ordering::Release);
                        // Nothing to hand over: the test only needs the
                        // thread to notice the request.
                        warmer.stop();
                        None
                    },
                    |_, _| {
                        // No segment holds the position; meanwhile the
                        // writer asks for one, or the store stops.
                        if request_too {
                            warmer.request(7);
                        } else {
                            warmer.stop();
                        }
                        None
                    },
                );
                let _ = done_tx.send(());
            });
            assert!(
                done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
                "the preallocator missed a wake-up (request_too: {request_too})"
            );
            if request_too {
                assert_eq!(created.load(Ordering::Acquire), 8, "request 7 not served");
            }
        }
    }
}
