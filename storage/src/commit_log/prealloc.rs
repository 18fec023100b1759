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
//!
//! A creation that fails (a full disk, "too many open files") is retried
//! with an exponential back-off ([`CREATE_BACKOFF_MIN`] doubling to
//! [`CREATE_BACKOFF_MAX`]), logged at most once per [`FAILURE_LOG_EVERY`]
//! with the count of failures since, and its temporary file is removed
//! (`fs_util::create_via_temp`), so a short disk gets back what the
//! attempt took. While the disk is short ([`CommitLog::set_disk_short`])
//! it gives up the spare segment beyond the next one, and makes it again
//! once the disk is not. While creation fails, the writer does not wait for it:
//! [`Preallocator::take`] answers at once, and an append that needs the
//! segment is refused with the failure ([`StoreError::DiskFull`] when the
//! disk is short, else [`StoreError::SegmentUnavailable`]). Nothing here
//! is ever waited for under the writer's lock: an append that finds the
//! segment being made releases the lock and waits, at most
//! [`SEGMENT_WAIT_MAX`], in [`CommitLog::wait_for_segment`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::segment::Segment;
use super::{lock, CommitLog};
use crate::error::{Result, StoreError};

impl CommitLog {
    pub(super) fn request_next_segment(&self, base: u64) {
        self.prealloc.request(base);
    }

    /// Run the preallocation loop on the calling thread until `stop` is
    /// set: create the next segment when asked, and keep the pages just
    /// ahead of the writer warm (see [`Preallocator`]).
    pub(crate) fn run_preallocator(&self, stop: &AtomicBool) {
        let create = |base: u64| -> Made {
            if self.segment_containing(base).is_some() {
                return Made::InLog;
            }
            match Segment::create(&self.dir, base, self.segment_bytes, &self.faults) {
                Ok(s) => Made::New(Arc::new(s)),
                Err(e) => Made::Failed(e),
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

    /// Creation of the segment the writer needs next is failing now, and
    /// none is made ahead: the error an append rolling is refused with
    /// (`None` while that is not so).
    pub fn segment_creation_failure(&self) -> Option<StoreError> {
        if !self.preallocate {
            return None;
        }
        let st = lock(&self.prealloc.state);
        // With a segment made ahead, the next roll is served: not refused.
        if !st.ready.is_empty() {
            return None;
        }
        st.failing.as_ref().map(|f| f.refusal(st.requested))
    }

    /// The disk is short (a file the dispatcher needed could not be
    /// allocated), or no longer. While it is, the
    /// preallocator gives up its reservation: segments made ahead past the
    /// next one are removed (their space goes to the indexes' next files,
    /// so the records already committed become readable) and not made
    /// again until it is not.
    pub(crate) fn set_disk_short(&self, short: bool) {
        if !self.preallocate {
            return;
        }
        let mut st = lock(&self.prealloc.state);
        if st.short == short {
            return;
        }
        st.short = short;
        if short {
            while st.ready.len() > 1 {
                if let Some(s) = st.ready.pop() {
                    tracing::info!(segment = %s.path().display(), "the disk is short: giving up a commit log segment made ahead");
                    let _ = std::fs::remove_file(s.path());
                }
            }
        }
        self.prealloc.cv.notify_all();
    }

    /// How many segment creations have failed since the store opened.
    pub fn segment_create_failures(&self) -> u64 {
        self.prealloc.failures_total.load(Ordering::Relaxed)
    }

    /// An append found the segment at `base` not made yet, and released the
    /// writer's lock: wait, at most until `deadline`, until the
    /// preallocator has it ready (`Ok`: the append plans again), or answer
    /// why it will not be (creation failing, the store stopping, the
    /// deadline passed).
    pub(super) fn wait_for_segment(&self, base: u64, deadline: Instant) -> Result<()> {
        let pre = &self.prealloc;
        let mut st = lock(&pre.state);
        loop {
            if st.stopped {
                return Err(StoreError::Closed);
            }
            if st.ready.first().is_some_and(|s| s.base() == base)
                || st.requested != Some(base)
                || self.segment_containing(base).is_some()
            {
                // Ready, or the writer's position moved (another append
                // rolled, or the request was superseded): plan again.
                return Ok(());
            }
            if st.busy_with != Some(base) {
                if let Some(f) = &st.failing {
                    return Err(f.refusal(Some(base)));
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(StoreError::SegmentUnavailable {
                    base,
                    reason: format!(
                        "its creation has not finished within {} ms",
                        SEGMENT_WAIT_MAX.as_millis()
                    ),
                });
            }
            st = pre
                .cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
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

/// First pause after a failed segment creation; each further failure
/// doubles it up to [`CREATE_BACKOFF_MAX`]. A failure is usually a full
/// disk, which retrying at once only makes fuller (and spins a core: the
/// issue-35 livelock logged ~790 WARN lines a second).
const CREATE_BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest pause between two creation attempts: also how long produce may
/// stay refused after space is back before the next attempt succeeds.
const CREATE_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// A failing creation is logged (WARN, with the count since the last
/// line) at most this often.
const FAILURE_LOG_EVERY: Duration = Duration::from_secs(10);
/// Longest an append waits (with the writer's lock released) for a
/// segment the preallocator is making; past it the append is refused with
/// [`StoreError::SegmentUnavailable`]. Two segments are kept made ahead,
/// so a writer reaching one still being made means creation is slower
/// than the disk should ever be.
pub(super) const SEGMENT_WAIT_MAX: Duration = Duration::from_secs(2);

/// What one creation attempt gave.
enum Made {
    New(Arc<Segment>),
    /// The log holds a segment at that base already (the writer made it).
    InLog,
    Failed(StoreError),
}

/// What [`Preallocator::take`] answers the writer.
pub(super) enum Take {
    Ready(Arc<Segment>),
    /// Being made, or about to be: release the writer's lock and wait
    /// ([`CommitLog::wait_for_segment`]).
    Wait,
    /// Its creation is failing: refuse the append with this.
    Failing(StoreError),
    /// Not this thread's to make (preallocation asked for another
    /// position): the writer makes it itself.
    NotMine,
    /// The store is stopping.
    Stopped,
}

/// Creation keeps failing: why, and when to try again.
struct Failing {
    error: String,
    /// The disk is short (ENOSPC, EDQUOT): the refusal is
    /// [`StoreError::DiskFull`].
    out_of_space: bool,
    retry_at: Instant,
    backoff: Duration,
    /// Failures in a row.
    count: u64,
    /// Failures not yet in a log line, and when the last line was.
    unlogged: u64,
    logged_at: Instant,
}

impl Failing {
    fn refusal(&self, base: Option<u64>) -> StoreError {
        let base = base.unwrap_or(0);
        if self.out_of_space {
            StoreError::DiskFull {
                reason: format!(
                    "no space to create the next commit log segment (at {base}): {}; writes resume by themselves once space is freed",
                    self.error
                ),
            }
        } else {
            StoreError::SegmentUnavailable {
                base,
                reason: format!("its creation keeps failing: {}", self.error),
            }
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
    /// Failed creations since open (stats).
    failures_total: AtomicU64,
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
    /// Set while creation fails, cleared by the next success.
    failing: Option<Failing>,
    /// The disk is short ([`CommitLog::set_disk_short`]): only the next
    /// segment is kept made ahead, not the spare after it.
    short: bool,
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

    /// [`PreState::wanted`], unless creation is failing and its back-off
    /// has not passed.
    fn due(&self, ahead: usize, now: Instant) -> Option<u64> {
        if self.failing.as_ref().is_some_and(|f| now < f.retry_at) {
            return None;
        }
        self.wanted(ahead)
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

    /// The writer rolls to `base` (under its lock): the segment if it is
    /// ready, else what to do. Never waits: a segment being made is
    /// [`Take::Wait`], which the writer does with its lock released.
    pub(super) fn take(&self, base: u64) -> Take {
        let mut st = lock(&self.state);
        if st.stopped {
            return Take::Stopped;
        }
        match st.ready.first() {
            Some(s) if s.base() == base => {
                let s = st.ready.remove(0);
                // The next roll is at its end (the writer's request says
                // so again), so a spare made meanwhile is kept.
                st.requested = Some(s.end());
                return Take::Ready(s);
            }
            _ => {}
        }
        if st.requested != Some(base) {
            // Not asked for (or made for another position: the log was
            // truncated): the writer makes it itself, and its next
            // request removes those.
            return Take::NotMine;
        }
        if st.busy_with != Some(base) {
            if let Some(f) = &st.failing {
                return Take::Failing(f.refusal(Some(base)));
            }
        }
        Take::Wait
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
        create: impl Fn(u64) -> Made,
        warm: impl Fn(u64, Option<&Arc<Segment>>) -> Option<u64>,
    ) {
        let mut st = lock(&self.state);
        loop {
            if st.stopped || stop.load(Ordering::Acquire) {
                return;
            }
            self.nudged.store(false, Ordering::Release);
            // The next segment first: the writer may be about to roll.
            if let Some(base) = st.due(1, Instant::now()) {
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
                if st.stopped
                    || st.due(1, Instant::now()).is_some()
                    || self.nudged.load(Ordering::Acquire)
                {
                    continue;
                }
            }
            // Last, the spare after the next segment: with the window
            // warm, the writer needs nothing sooner.
            let ahead = if st.short { 1 } else { SPARE_SEGMENTS };
            if let Some(base) = st.due(ahead, Instant::now()) {
                st = self.make(st, base, &create);
                continue;
            }
            // Nothing to do until a request, a nudge or a stop; while
            // creation fails, until its back-off has passed too.
            st = match st.failing.as_ref().map(|f| f.retry_at) {
                Some(at) => {
                    let pause = at.saturating_duration_since(Instant::now());
                    self.cv
                        .wait_timeout(st, pause.max(Duration::from_millis(1)))
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }

    /// Make the segment at `base` with the lock dropped (the writer, if it
    /// needs it, waits meanwhile with its own lock released), then keep it
    /// if it still follows on from the writer's request: the writer may
    /// have made it, or rolled past it, in the meantime. A failure starts
    /// or lengthens the back-off; a success ends it.
    fn make<'a>(
        &'a self,
        mut st: MutexGuard<'a, PreState>,
        base: u64,
        create: &impl Fn(u64) -> Made,
    ) -> MutexGuard<'a, PreState> {
        st.busy_with = Some(base);
        drop(st);
        let made = create(base);
        let mut st = lock(&self.state);
        st.busy_with = None;
        match made {
            Made::New(s) => {
                if let Some(f) = st.failing.take() {
                    tracing::info!(
                        base,
                        failures = f.count,
                        "commit log segment creation works again"
                    );
                }
                let ahead = if st.short { 1 } else { SPARE_SEGMENTS };
                if st.wanted(ahead) == Some(s.base()) {
                    st.ready.push(s);
                } else {
                    let _ = std::fs::remove_file(s.path());
                }
            }
            Made::InLog => {
                // The writer made it itself: nothing to make until its
                // next request says where the next roll is.
                if st.requested == Some(base) && st.ready.is_empty() {
                    st.requested = None;
                }
            }
            Made::Failed(e) => self.note_failure(&mut st, base, &e),
        }
        self.cv.notify_all();
        st
    }

    /// A creation failed: back off (doubling, capped) and log, at most once
    /// per [`FAILURE_LOG_EVERY`], with the count since the last line.
    fn note_failure(&self, st: &mut PreState, base: u64, e: &StoreError) {
        self.failures_total.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let out_of_space = e.is_out_of_space();
        let f = st.failing.get_or_insert_with(|| Failing {
            error: String::new(),
            out_of_space,
            retry_at: now,
            backoff: CREATE_BACKOFF_MIN / 2,
            count: 0,
            unlogged: 0,
            logged_at: now.checked_sub(FAILURE_LOG_EVERY).unwrap_or(now),
        });
        f.error = e.to_string();
        f.out_of_space = out_of_space;
        f.count += 1;
        f.unlogged += 1;
        f.backoff = (f.backoff * 2).min(CREATE_BACKOFF_MAX);
        f.retry_at = now + f.backoff;
        if f.count == 1 || now.duration_since(f.logged_at) >= FAILURE_LOG_EVERY {
            tracing::warn!(
                error = %e,
                base,
                failures = f.unlogged,
                failures_in_a_row = f.count,
                retry_in_ms = f.backoff.as_millis() as u64,
                "could not make the next commit log segment; retrying with back-off (appends that need it are refused meanwhile)"
            );
            f.unlogged = 0;
            f.logged_at = now;
        }
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
                        Made::InLog
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
