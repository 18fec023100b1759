//! Waiting for the flushed position without a thread per waiter.
//!
//! Under `flush: sync` an append returns the CommitLog position it needs
//! durable, and the caller awaits [`FlushWait`], a future any executor can
//! poll (no runtime of its own; [`FlushWait::wait`] blocks a thread on it
//! for callers without one). A pending waiter is an entry in
//! [`Waiters`]: its target position, its deadline and its
//! [`std::task::Waker`]. Whoever moves the flushed position (the
//! `tidelog-sync-flush` thread's group commit, the async flusher,
//! shutdown's last flush) wakes every waiter at or below it, lowest target
//! first; a failed flush (the log is poisoned) or a closed store wakes
//! them all. The `tidelog-flush-timer` thread wakes waiters whose
//! `sync_flush_timeout_ms` passed, so a hung fsync answers every waiter in
//! time without the flusher's help.
//!
//! Invariants:
//! - No lost wake-up: a waiter checks the flushed position, the poison
//!   flag and the closed flag *under the list's lock* before it registers,
//!   and the flusher changes them *before* it takes the lock to wake; so
//!   either the waiter sees the change, or its entry is in the list when
//!   the flusher drains it.
//! - A dropped future deregisters itself: the list holds only waiters
//!   someone still polls.
//! - Wakers are called outside the lock (a waker may take its executor's
//!   locks, or poll inline).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use super::CommitLog;
use crate::error::{Result, StoreError};

/// Longest the timer thread sleeps with no deadline in sight. Registering
/// a waiter notifies the timer only when its deadline is earlier than the
/// timer's next wake (a timeout shorter than this tick), so at the default
/// timeout no append pays for a notification.
const TIMER_TICK: Duration = Duration::from_millis(100);

/// The pending waiters of a [`CommitLog`], by (target position, id).
#[derive(Default)]
pub(crate) struct Waiters {
    list: Mutex<WaitList>,
    /// Wakes the timer thread: an earlier deadline, or the store stops.
    timer: Condvar,
}

#[derive(Default)]
struct WaitList {
    next_id: u64,
    waiting: BTreeMap<(u64, u64), Entry>,
    /// No waiter registers any more (the store is gone): every poll
    /// answers now.
    closed: bool,
    /// When the timer thread wakes next, if it sleeps.
    timer_wakes_at: Option<Instant>,
}

struct Entry {
    deadline: Instant,
    waker: Waker,
}

fn lock(m: &Mutex<WaitList>) -> MutexGuard<'_, WaitList> {
    // Every update of the list is a single insert or removal: a panic
    // cannot leave it half-changed.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Waiters {
    /// Wake every waiter whose target is at most `flushed`, lowest first.
    /// The caller has published `flushed` before.
    pub(crate) fn wake_flushed(&self, flushed: u64) {
        let done = {
            let mut list = lock(&self.list);
            let rest = list.waiting.split_off(&(flushed.saturating_add(1), 0));
            std::mem::replace(&mut list.waiting, rest)
        };
        for entry in done.into_values() {
            entry.waker.wake();
        }
    }

    /// Wake every waiter (the log is poisoned, or the store closed: each
    /// answers on its next poll).
    pub(crate) fn wake_all(&self) {
        let all = std::mem::take(&mut lock(&self.list).waiting);
        for entry in all.into_values() {
            entry.waker.wake();
        }
    }

    /// Refuse new waiters and wake the pending ones.
    pub(crate) fn close(&self) {
        lock(&self.list).closed = true;
        self.wake_all();
        self.timer.notify_all();
    }

    /// Wake the timer thread so it sees the store stopping.
    pub(crate) fn stop_timer(&self) {
        let _list = lock(&self.list);
        self.timer.notify_all();
    }

    /// How many waiters are pending.
    pub(crate) fn len(&self) -> usize {
        lock(&self.list).waiting.len()
    }

    /// The `tidelog-flush-timer` thread: wake waiters whose deadline
    /// passed, until `stop`.
    pub(crate) fn run_timer(&self, stop: &std::sync::atomic::AtomicBool) {
        let mut list = lock(&self.list);
        while !stop.load(Ordering::Acquire) && !list.closed {
            let now = Instant::now();
            let mut expired = Vec::new();
            let mut next = now + TIMER_TICK;
            // A scan, not a second index: it runs once a tick, and the
            // list holds only the waiters of the flushes in progress.
            list.waiting.retain(|_, entry| {
                if entry.deadline <= now {
                    expired.push(entry.waker.clone());
                    false
                } else {
                    next = next.min(entry.deadline);
                    true
                }
            });
            if !expired.is_empty() {
                drop(list);
                expired.into_iter().for_each(Waker::wake);
                list = lock(&self.list);
                continue;
            }
            list.timer_wakes_at = Some(next);
            list = self
                .timer
                .wait_timeout(list, next.saturating_duration_since(now))
                .unwrap_or_else(|e| e.into_inner())
                .0;
            list.timer_wakes_at = None;
        }
    }
}

/// What an append under `flush: sync` waits for: everything below `target`
/// on disk, within the timeout. A future (`Output = Result<()>`) for async
/// callers; [`FlushWait::wait`] for blocking ones.
///
/// It answers `Ok` once the flushed position reaches `target`,
/// [`StoreError::Poisoned`] once a flush failed,
/// [`StoreError::FlushTimedOut`] after the timeout (the records stay
/// appended; a later flush still covers them), and [`StoreError::Closed`]
/// if the store went away before either.
#[must_use = "an append under sync flush is acknowledged only once this answers"]
pub struct FlushWait {
    log: Arc<CommitLog>,
    target: u64,
    deadline: Instant,
    timeout: Duration,
    /// The key of this waiter's entry while it is registered.
    registered: Option<(u64, u64)>,
}

impl FlushWait {
    pub(crate) fn new(log: Arc<CommitLog>, target: u64, timeout: Duration) -> FlushWait {
        FlushWait {
            log,
            target,
            deadline: Instant::now() + timeout,
            timeout,
            registered: None,
        }
    }

    /// The position that must be flushed.
    pub fn target(&self) -> u64 {
        self.target
    }

    /// Block the calling thread until the wait answers (the same answer
    /// the future gives).
    pub fn wait(mut self) -> Result<()> {
        let waker = Arc::new(ThreadWaker(std::thread::current())).into();
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(answer) = Pin::new(&mut self).poll(&mut cx) {
                return answer;
            }
            // Woken by the flusher or the timer; the timeout bounds the
            // park too, for a log whose timer thread does not run (a
            // spurious or early return only polls again).
            std::thread::park_timeout(self.deadline.saturating_duration_since(Instant::now()));
        }
    }

    /// The answer if there is one now, given the list (so the flusher
    /// cannot change what was checked before this waiter is registered).
    fn answer(&self, list: &WaitList) -> Option<Result<()>> {
        if self.log.flushed.load(Ordering::Acquire) >= self.target {
            return Some(Ok(()));
        }
        if let Err(e) = self.log.check_poisoned() {
            return Some(Err(e));
        }
        if list.closed {
            return Some(Err(StoreError::Closed));
        }
        if Instant::now() >= self.deadline {
            return Some(Err(StoreError::FlushTimedOut {
                timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            }));
        }
        None
    }
}

impl Future for FlushWait {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        // Unpin: every field is.
        let this = self.get_mut();
        // Fast path: covered already, no lock.
        if this.log.flushed.load(Ordering::Acquire) >= this.target {
            this.deregister();
            return Poll::Ready(Ok(()));
        }
        let waiters = &this.log.waiters;
        let mut list = lock(&waiters.list);
        if let Some(answer) = this.answer(&list) {
            if let Some(key) = this.registered.take() {
                list.waiting.remove(&key);
            }
            return Poll::Ready(answer);
        }
        let key = match this.registered {
            Some(key) => key,
            None => {
                list.next_id += 1;
                (this.target, list.next_id)
            }
        };
        let fresh = match list.waiting.get_mut(&key) {
            Some(entry) => {
                if !entry.waker.will_wake(cx.waker()) {
                    entry.waker = cx.waker().clone();
                }
                false
            }
            None => {
                // Not registered yet, or woken (and removed) by the flusher
                // or the timer without the answer changing for it.
                list.waiting.insert(
                    key,
                    Entry {
                        deadline: this.deadline,
                        waker: cx.waker().clone(),
                    },
                );
                true
            }
        };
        let wake_timer = fresh && list.timer_wakes_at.is_some_and(|at| this.deadline < at);
        drop(list);
        this.registered = Some(key);
        if wake_timer {
            waiters.timer.notify_one();
        }
        if fresh {
            this.log.request_flush(this.target);
        }
        Poll::Pending
    }
}

impl FlushWait {
    fn deregister(&mut self) {
        if let Some(key) = self.registered.take() {
            lock(&self.log.waiters.list).waiting.remove(&key);
        }
    }
}

impl Drop for FlushWait {
    fn drop(&mut self) {
        self.deregister();
    }
}

/// Unparks the thread blocked in [`FlushWait::wait`].
struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// An append's answer that is the caller's once the append is durable as
/// the store's flush mode promises: under `flush: sync` after its
/// [`FlushWait`], under `async` at once. Await [`Unflushed::durable`], or
/// block in [`Unflushed::wait`].
#[must_use = "an append under sync flush is acknowledged only once this answers"]
pub struct Unflushed<T> {
    value: T,
    wait: Option<FlushWait>,
    /// The CommitLog position the append ended at: what a flush must
    /// reach to cover it.
    end: u64,
}

impl<T> Unflushed<T> {
    pub(crate) fn new(value: T, wait: Option<FlushWait>, end: u64) -> Unflushed<T> {
        Unflushed { value, wait, end }
    }

    /// An answer with nothing to wait for (nothing was appended).
    pub fn ready(value: T) -> Unflushed<T> {
        Unflushed {
            value,
            wait: None,
            end: 0,
        }
    }

    /// The same wait over another answer.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Unflushed<U> {
        Unflushed {
            value: f(self.value),
            wait: self.wait,
            end: self.end,
        }
    }

    /// The CommitLog position a flush must reach to cover this append.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The answer, dropping any wait (for [`Store::flushed`](crate::Store::flushed),
    /// which replaces it).
    pub(crate) fn into_value(self) -> T {
        self.value
    }

    /// Whether the answer waits for a flush (`flush: sync`).
    pub fn waits(&self) -> bool {
        self.wait.is_some()
    }

    /// The answer once durable, awaited: no thread is held while waiting.
    pub async fn durable(self) -> Result<T> {
        if let Some(wait) = self.wait {
            wait.await?;
        }
        Ok(self.value)
    }

    /// The answer once durable, blocking the calling thread.
    pub fn wait(self) -> Result<T> {
        if let Some(wait) = self.wait {
            wait.wait()?;
        }
        Ok(self.value)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

    use std::sync::atomic::{AtomicBool, AtomicUsize};

    use super::*;
    use crate::commit_log::NextOffsets;
    use crate::config::StoreConfig;

    const LONG: Duration = Duration::from_secs(30);

    /// A log with no segments: these tests move `flushed` by hand.
    fn log(dir: &std::path::Path) -> Arc<CommitLog> {
        let mut config = StoreConfig::new(dir);
        config.preallocate_next_segment = false;
        CommitLog::new(
            &config,
            dir.to_path_buf(),
            Vec::new(),
            0,
            NextOffsets::default(),
            Default::default(),
        )
    }

    /// Records which waiter (by its name) was woken, in order.
    struct Recorder {
        name: u64,
        woken: Arc<Mutex<Vec<u64>>>,
    }

    impl Wake for Recorder {
        fn wake(self: Arc<Self>) {
            self.woken.lock().unwrap().push(self.name);
        }
    }

    fn poll(wait: &mut FlushWait, waker: &Waker) -> Poll<Result<()>> {
        Pin::new(wait).poll(&mut Context::from_waker(waker))
    }

    fn recorder(name: u64, woken: &Arc<Mutex<Vec<u64>>>) -> Waker {
        Arc::new(Recorder {
            name,
            woken: Arc::clone(woken),
        })
        .into()
    }

    fn flush_to(log: &CommitLog, pos: u64) {
        log.flushed.store(pos, Ordering::Release);
        log.waiters.wake_flushed(pos);
    }

    #[test]
    fn a_flush_wakes_the_waiters_it_covers_lowest_target_first_and_no_others() {
        let dir = tempfile::tempdir().unwrap();
        let log = log(dir.path());
        let woken = Arc::new(Mutex::new(Vec::new()));
        let mut waits: Vec<(u64, FlushWait, Waker)> = [30, 10, 20]
            .into_iter()
            .map(|t| (t, log.flush_wait(t, LONG), recorder(t, &woken)))
            .collect();
        for (_, wait, waker) in &mut waits {
            assert!(poll(wait, waker).is_pending());
        }
        assert_eq!(log.flush_waiters(), 3);
        assert_eq!(log.flush_state.lock().unwrap().requested, 30);

        flush_to(&log, 15);
        assert_eq!(*woken.lock().unwrap(), [10]);
        assert_eq!(log.flush_waiters(), 2);
        flush_to(&log, 30);
        assert_eq!(*woken.lock().unwrap(), [10, 20, 30]);
        assert_eq!(log.flush_waiters(), 0);
        for (_, wait, waker) in &mut waits {
            assert!(matches!(poll(wait, waker), Poll::Ready(Ok(()))));
        }
    }

    /// A waiter's request wakes the sync flusher only while it sleeps:
    /// while it flushes (what every request under load meets) the flusher
    /// looks at the raised request before it sleeps again, so the
    /// condvar's notify, a syscall even with nobody waiting, is skipped.
    #[test]
    fn a_request_wakes_the_flusher_only_while_it_sleeps() {
        let dir = tempfile::tempdir().unwrap();
        let log = log(dir.path());
        let woken = Arc::new(Mutex::new(Vec::new()));
        let mut waits: Vec<(FlushWait, Waker)> = (1..=3)
            .map(|t| (log.flush_wait(t * 10, LONG), recorder(t, &woken)))
            .collect();
        // No flusher sleeping (it flushes): the requests rise, unnotified.
        for (wait, waker) in &mut waits {
            assert!(poll(wait, waker).is_pending());
        }
        let state = |log: &CommitLog| {
            let st = log.flush_state.lock().unwrap();
            (st.requested, st.flusher_wakeups)
        };
        assert_eq!(state(&log), (30, 0));
        // The flusher sleeps: the next higher request wakes it, once.
        log.flush_state.lock().unwrap().flusher_waiting = true;
        let mut higher = log.flush_wait(40, LONG);
        assert!(poll(&mut higher, &recorder(4, &woken)).is_pending());
        let mut lower = log.flush_wait(20, LONG);
        assert!(poll(&mut lower, &recorder(5, &woken)).is_pending());
        assert_eq!(state(&log), (40, 1));
    }

    #[test]
    fn a_dropped_wait_leaves_the_list_and_a_repoll_keeps_one_entry() {
        let dir = tempfile::tempdir().unwrap();
        let log = log(dir.path());
        let woken = Arc::new(Mutex::new(Vec::new()));
        let mut kept = log.flush_wait(10, LONG);
        let mut dropped = log.flush_wait(10, LONG);
        let waker = recorder(1, &woken);
        assert!(poll(&mut kept, &waker).is_pending());
        assert!(poll(&mut kept, &recorder(2, &woken)).is_pending());
        assert!(poll(&mut dropped, &recorder(3, &woken)).is_pending());
        assert_eq!(log.flush_waiters(), 2);
        drop(dropped);
        assert_eq!(log.flush_waiters(), 1);
        flush_to(&log, 10);
        // Only the latest waker of the one left.
        assert_eq!(*woken.lock().unwrap(), [2]);
        assert!(matches!(poll(&mut kept, &waker), Poll::Ready(Ok(()))));
    }

    #[test]
    fn a_poison_or_a_close_wakes_every_waiter_with_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let log = log(dir.path());
        let woken = Arc::new(Mutex::new(Vec::new()));
        let mut waits: Vec<(FlushWait, Waker)> = (1..=5)
            .map(|t| (log.flush_wait(t * 10, LONG), recorder(t, &woken)))
            .collect();
        for (wait, waker) in &mut waits {
            assert!(poll(wait, waker).is_pending());
        }
        log.poison("flush failed: injected".into());
        assert_eq!(woken.lock().unwrap().len(), 5);
        for (wait, waker) in &mut waits {
            match poll(wait, waker) {
                Poll::Ready(Err(StoreError::Poisoned { reason })) => {
                    assert_eq!(reason, "flush failed: injected");
                }
                other => panic!("expected the poison, got {other:?}"),
            }
        }
        assert_eq!(log.flush_waiters(), 0);

        let log = super::tests::log(dir.path());
        let mut wait = log.flush_wait(10, LONG);
        let waker = recorder(9, &woken);
        assert!(poll(&mut wait, &waker).is_pending());
        log.close_flush_waiters();
        assert!(matches!(
            poll(&mut wait, &waker),
            Poll::Ready(Err(StoreError::Closed))
        ));
    }

    #[test]
    fn the_timer_thread_wakes_a_waiter_at_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let log = log(dir.path());
        let stop = Arc::new(AtomicBool::new(false));
        let timer = {
            let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
            std::thread::spawn(move || log.run_flush_timer(&stop))
        };
        let woken = Arc::new(Mutex::new(Vec::new()));
        let waker = recorder(1, &woken);
        // Shorter than the timer's tick: registering wakes the timer.
        let mut wait = log.flush_wait(10, Duration::from_millis(20));
        assert!(poll(&mut wait, &waker).is_pending());
        let deadline = Instant::now() + LONG;
        while woken.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "the timer never woke the waiter");
            std::thread::sleep(Duration::from_millis(5));
        }
        match poll(&mut wait, &waker) {
            Poll::Ready(Err(StoreError::FlushTimedOut { timeout_ms })) => {
                assert_eq!(timeout_ms, 20);
            }
            other => panic!("expected FlushTimedOut, got {other:?}"),
        }
        assert_eq!(log.flush_waiters(), 0);
        stop.store(true, Ordering::Release);
        log.stop_sync_flusher();
        timer.join().unwrap();
    }

    /// A flusher moving `flushed` while waiters check and register: every
    /// waiter is answered by a wake, none by its (long) timeout.
    #[test]
    fn no_wake_up_is_lost_between_the_check_and_the_registration() {
        let dir = tempfile::tempdir().unwrap();
        let log = log(dir.path());
        let stop = Arc::new(AtomicBool::new(false));
        let flusher = {
            let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    let next = log.flushed() + 1;
                    flush_to(&log, next);
                    std::thread::yield_now();
                }
            })
        };
        let answered = AtomicUsize::new(0);
        for _ in 0..2_000 {
            let target = log.flushed() + 1;
            log.flush_wait(target, LONG).wait().unwrap();
            answered.fetch_add(1, Ordering::Relaxed);
        }
        stop.store(true, Ordering::Release);
        flusher.join().unwrap();
        assert_eq!(answered.load(Ordering::Relaxed), 2_000);
        assert_eq!(log.flush_waiters(), 0);
    }
}
