//! A store whose work stops making progress answers in bounded time: a sink
//! that keeps failing makes dispatch *stalled* (appends refused, recovered
//! by itself), and a hung fsync makes sync-flush waiters time out instead
//! of hanging (the log stays sane when the fsync returns), awaited or
//! blocking alike; a hung fsync that fails wakes every awaiting appender
//! with the poison. Under `flush: sync` nothing is served before its fsync
//! returns, hung or not.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::future::Future as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use common::*;
use tidelog_storage::fault::{FaultPoint, Faults};
use tidelog_storage::{Appended, FlushMode, QueueOffset, Store, StoreError};

#[test]
fn a_failing_sink_stalls_dispatch_refuses_appends_and_recovers_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(dir.path());
    cfg.dispatch_stall_ms = 200;
    let sink = StuckSink::new(0, true);
    let store = Store::open_with_sinks(cfg, vec![sink.clone()]).unwrap();

    // Failing, but not for long yet: the append is taken.
    store.append(&[record("t", 0, None, Some("0"))]).unwrap();
    wait_for("the stall", || store.stats().dispatch_stalled);
    let err = store
        .append(&[record("t", 0, None, Some("refused"))])
        .unwrap_err();
    match &err {
        StoreError::DispatchStalled { sink, error, .. } => {
            assert_eq!(sink, "stuck");
            assert!(error.contains("stuck on purpose"), "{err}");
        }
        other => panic!("expected DispatchStalled, got {other}"),
    }
    assert!(err
        .to_string()
        .starts_with("dispatch stalled: records would not become visible"));
    assert!(store.dispatch_stall().is_some());
    let stats = store.stats();
    assert_eq!(stats.dispatch_stalls, 1, "one stall, counted once");
    assert!(stats.dispatch_errors >= 1);
    assert_eq!(stats.commitlog_max_offset, {
        // Nothing of the refused append was written.
        store.commit_log().committed()
    });

    // The sink heals: the retry dispatches, appends are taken again.
    sink.set_stuck(false);
    wait_for("the recovery", || !store.stats().dispatch_stalled);
    assert!(store.dispatch_stall().is_none());
    store.append(&[record("t", 0, None, Some("1"))]).unwrap();
    assert!(store.wait_dispatched(DEADLINE));
    let values: Vec<_> = store
        .read("t", 0, QueueOffset::new(0), 10, usize::MAX)
        .unwrap()
        .records
        .iter()
        .map(|r| r.value().unwrap())
        .collect();
    assert_eq!(
        values,
        ["0", "1"],
        "visible, and the refused one is not there"
    );
    assert_eq!(store.stats().dispatch_stalls, 1);
}

#[test]
fn a_short_failure_is_no_stall() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config(dir.path());
    assert_eq!(cfg.dispatch_stall_ms, 30_000, "OPERATIONS.md's default");
    let sink = StuckSink::new(0, true);
    let store = Store::open_with_sinks(cfg, vec![sink.clone()]).unwrap();
    store.append(&[record("t", 0, None, Some("0"))]).unwrap();
    wait_for("a failed round", || store.stats().dispatch_errors >= 2);
    assert!(!store.stats().dispatch_stalled);
    store.append(&[record("t", 0, None, Some("1"))]).unwrap();
    sink.set_stuck(false);
    assert!(store.wait_dispatched(DEADLINE));
    assert_eq!(store.stats().dispatch_stalls, 0);
}

fn sync_store(dir: &std::path::Path, faults: &Arc<Faults>) -> Store {
    let mut cfg = small_config(dir);
    cfg.flush = FlushMode::Sync;
    cfg.sync_flush_timeout_ms = 100;
    Store::open_with_faults(cfg, Arc::clone(faults)).unwrap()
}

/// Appends `value` on another thread; the answer arrives on the receiver.
fn append_async(
    store: &Arc<Store>,
    value: &str,
) -> mpsc::Receiver<tidelog_storage::Result<Vec<Appended>>> {
    let (tx, rx) = mpsc::channel();
    let store = Arc::clone(store);
    let value = value.to_string();
    std::thread::spawn(move || {
        let _ = tx.send(store.append(&[record("t", 0, None, Some(&value))]));
    });
    rx
}

fn timed_out(answer: tidelog_storage::Result<Vec<Appended>>) -> bool {
    match answer {
        Err(StoreError::FlushTimedOut { timeout_ms }) => {
            assert_eq!(timeout_ms, 100);
            true
        }
        other => panic!("expected FlushTimedOut, got {other:?}"),
    }
}

#[test]
fn a_hung_fsync_times_sync_waiters_out_and_the_log_goes_on_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let store = Arc::new(sync_store(dir.path(), &faults));
    store.append(&[record("t", 0, None, Some("0"))]).unwrap();

    faults.hang(FaultPoint::CommitLogFlush);
    // Every waiter gets its answer in bounded time, the one whose flush
    // hangs and those behind it alike.
    let first = append_async(&store, "1");
    let second = append_async(&store, "2");
    assert!(timed_out(
        first.recv_timeout(DEADLINE).expect("a waiter hung")
    ));
    assert!(timed_out(
        second.recv_timeout(DEADLINE).expect("a waiter hung")
    ));
    assert_eq!(
        faults.blocked(FaultPoint::CommitLogFlush),
        1,
        "one fsync hangs"
    );
    let err = StoreError::FlushTimedOut { timeout_ms: 100 };
    assert!(err
        .to_string()
        .starts_with("flush timed out: the record is appended but its durability is unknown"));

    // The fsync returns: what was appended is flushed, appends go on.
    faults.heal(FaultPoint::CommitLogFlush);
    // The append is refused only for a slow disk: its own 100 ms wait may
    // run out on a loaded machine, which still leaves it appended (the
    // contract of FlushTimedOut), so what is checked is that the log is
    // flushed through it soon after, not how fast.
    match store.append(&[record("t", 0, None, Some("3"))]) {
        Ok(_) | Err(StoreError::FlushTimedOut { .. }) => {}
        Err(e) => panic!("an append after the heal failed: {e}"),
    }
    let deadline = std::time::Instant::now() + DEADLINE;
    while store.commit_log().flushed() < store.commit_log().committed() {
        assert!(
            std::time::Instant::now() < deadline,
            "the log was not flushed after the heal"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(store.wait_dispatched(DEADLINE));
    assert_eq!(
        store
            .read("t", 0, QueueOffset::new(0), 10, usize::MAX)
            .unwrap()
            .records
            .len(),
        4,
        "timed-out appends are appended"
    );
}

/// `(offset, value)` pairs, as [`served`] answers them.
fn pairs(values: &[&str]) -> Vec<(u64, String)> {
    (0..).zip(values.iter().map(|v| v.to_string())).collect()
}

/// Under `flush: sync` a record is fetchable only once its fsync returned:
/// one served before would be lost by a power loss then, and its offset
/// handed out again to another record. While the fsync hangs the record is
/// appended (the log's end moved) and not served, nor is anything behind
/// it; once it returns, all of them are.
#[test]
fn under_sync_flush_nothing_is_served_before_its_fsync_returns() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let store = Arc::new(sync_store(dir.path(), &faults));
    store.append(&[record("t", 0, None, Some("0"))]).unwrap();
    assert!(store.wait_dispatched(DEADLINE));
    let flushed = store.commit_log().flushed();

    faults.hang(FaultPoint::CommitLogFlush);
    let first = append_async(&store, "1");
    // "2" after "1" is appended, so the order below is the test's, not
    // the two threads' race for the writer.
    wait_for("the first append", || {
        store.commit_log().committed() > flushed
    });
    let second = append_async(&store, "2");
    assert!(timed_out(
        first.recv_timeout(DEADLINE).expect("a waiter hung")
    ));
    assert!(timed_out(
        second.recv_timeout(DEADLINE).expect("a waiter hung")
    ));
    assert_eq!(faults.blocked(FaultPoint::CommitLogFlush), 1);
    assert!(store.commit_log().committed() > flushed, "appended");
    // The dispatcher has had the waiters' whole timeout to look.
    let stats = store.stats();
    assert_eq!(
        stats.dispatched_offset, flushed,
        "dispatched past the fsync"
    );
    assert_eq!(stats.dispatch_lag_bytes, 0, "unflushed bytes are no lag");
    assert_eq!(
        served(&store, "t", 0),
        pairs(&["0"]),
        "served before the fsync"
    );

    faults.heal(FaultPoint::CommitLogFlush);
    assert!(store.wait_dispatched(DEADLINE));
    assert_eq!(served(&store, "t", 0), pairs(&["0", "1", "2"]));
    assert!(store.stats().dispatched_offset <= store.commit_log().flushed());
}

/// A record nobody awaits (Kafka's acks=0) under `flush: sync` is flushed
/// and served without waiting for the periodic flush: the dispatcher asks
/// for the flush itself.
#[test]
fn under_sync_flush_an_unawaited_append_is_flushed_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(dir.path());
    cfg.flush = FlushMode::Sync;
    cfg.flush_interval_ms = 3_600_000;
    cfg.sync_checkpoint_interval_ms = 3_600_000;
    let store = Store::open(cfg).unwrap();
    let unflushed = store
        .append_unflushed(&[record("t", 0, None, Some("a"))], u64::MAX, None)
        .unwrap();
    drop(unflushed);
    assert!(store.wait_dispatched(DEADLINE), "never served");
    assert_eq!(served(&store, "t", 0), pairs(&["a"]));
    assert_eq!(store.commit_log().flushed(), store.commit_log().committed());
}

#[test]
fn a_hung_fsync_that_fails_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let store = Arc::new(sync_store(dir.path(), &faults));
    faults.hang(FaultPoint::CommitLogFlush);
    let waiter = append_async(&store, "1");
    assert!(timed_out(
        waiter.recv_timeout(DEADLINE).expect("a waiter hung")
    ));
    // The fsync returns an error: the log is poisoned, as after any failed
    // flush, and the next append is refused (at once or in its wait).
    faults.release_failing(FaultPoint::CommitLogFlush);
    let answer = append_async(&store, "2")
        .recv_timeout(DEADLINE)
        .expect("an append hung");
    assert!(
        matches!(answer, Err(StoreError::Poisoned { .. })),
        "{answer:?}"
    );
}

/// Counts wake-ups of the waits polled by hand below (no executor, no
/// thread per wait).
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_failed_fsync_wakes_every_awaiting_appender_with_the_poison() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let mut cfg = small_config(dir.path());
    cfg.flush = FlushMode::Sync;
    // Far past the test: an answer below is the flush's, not the timer's.
    cfg.sync_flush_timeout_ms = 600_000;
    let store = Store::open_with_faults(cfg, Arc::clone(&faults)).unwrap();
    faults.hang(FaultPoint::CommitLogFlush);
    let wakes = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&wakes));
    let mut cx = Context::from_waker(&waker);
    const WAITERS: usize = 200;
    let mut waits: Vec<_> = (0..WAITERS)
        .map(|i| {
            let value = i.to_string();
            let unflushed = store
                .append_unflushed(&[record("t", 0, None, Some(&value))], u64::MAX, None)
                .unwrap();
            assert!(unflushed.waits(), "sync flush");
            Box::pin(unflushed.durable())
        })
        .collect();
    for wait in &mut waits {
        assert!(wait.as_mut().poll(&mut cx).is_pending());
    }
    wait_for("the hung fsync", || {
        faults.blocked(FaultPoint::CommitLogFlush) == 1
    });
    assert_eq!(store.commit_log().flush_waiters(), WAITERS);
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0);

    faults.release_failing(FaultPoint::CommitLogFlush);
    wait_for("every waiter woken", || {
        wakes.0.load(Ordering::SeqCst) >= WAITERS
    });
    for wait in &mut waits {
        match wait.as_mut().poll(&mut cx) {
            Poll::Ready(Err(StoreError::Poisoned { reason })) => {
                assert!(reason.contains("injected fault"), "{reason}");
            }
            other => panic!("expected the poison, got {other:?}"),
        }
    }
    assert_eq!(store.commit_log().flush_waiters(), 0);
}

#[test]
fn an_awaited_append_times_out_while_the_fsync_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let store = sync_store(dir.path(), &faults);
    faults.hang(FaultPoint::CommitLogFlush);
    let wakes = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&wakes));
    let mut cx = Context::from_waker(&waker);
    let mut wait = Box::pin(
        store
            .append_unflushed(&[record("t", 0, None, Some("1"))], u64::MAX, None)
            .unwrap()
            .durable(),
    );
    assert!(wait.as_mut().poll(&mut cx).is_pending());
    // The store's timer thread wakes it: nobody polls it before.
    wait_for("the timeout's wake-up", || {
        wakes.0.load(Ordering::SeqCst) > 0
    });
    match wait.as_mut().poll(&mut cx) {
        Poll::Ready(answer) => assert!(timed_out(answer.map(|_| Vec::new()))),
        Poll::Pending => panic!("woken, yet still pending"),
    }
    faults.heal(FaultPoint::CommitLogFlush);
}

/// A sink that is slow, not failing: it holds the dispatcher in `dispatch`
/// while its gate is closed.
struct GatedSink {
    closed: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl GatedSink {
    fn open_gate(&self) {
        *self.closed.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.opened.notify_all();
    }
}

/// Opens the gate when the test ends, also by a failed assertion, so the
/// store's shutdown does not wait for the dispatcher forever.
struct OpenOnDrop(Arc<GatedSink>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open_gate();
    }
}

impl tidelog_storage::DispatchSink for GatedSink {
    fn name(&self) -> &str {
        "gated"
    }
    fn dispatch(&self, _: &tidelog_storage::StoredRecord) -> tidelog_storage::Result<()> {
        let mut closed = self.closed.lock().unwrap();
        while *closed {
            closed = self.opened.wait(closed).unwrap();
        }
        Ok(())
    }
    fn flush(&self) -> tidelog_storage::Result<()> {
        Ok(())
    }
}

/// A sink slower than produce holds producers back: once the dispatcher is
/// `DISPATCH_LAG_MAX_BYTES` behind, appends wait for it (counted), so the
/// lag stays within the bound plus the one batch that passed the check,
/// instead of growing with everything produced. Counted, not timed: the
/// producer offers more than the bound while the sink is held, and must be
/// found waiting with the lag within it.}

#[test]
fn a_slow_sink_holds_appends_back_within_the_lag_bound() {
    use tidelog_storage::DISPATCH_LAG_MAX_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(GatedSink {
        closed: std::sync::Mutex::new(true),
        opened: std::sync::Condvar::new(),
    });
    let store = Arc::new(
        Store::open_with_sinks(
            config_with_segments(dir.path(), 16 << 20),
            vec![sink.clone() as Arc<dyn tidelog_storage::DispatchSink>],
        )
        .unwrap(),
    );
    // Declared after the store, so dropped (the gate opened) before it.
    let _gate = OpenOnDrop(Arc::clone(&sink));
    let value = "v".repeat(1000);
    let batch: Vec<_> = (0..100)
        .map(|_| record("t", 0, None, Some(&value)))
        .collect();
    let batch_bytes = {
        let a = store.append(&batch).unwrap();
        a.iter().map(|r| u64::from(r.size)).sum::<u64>() + 1024
    };
    // Offer more than the bound while the sink is held.
    let batches = DISPATCH_LAG_MAX_BYTES / batch_bytes + 8;
    let (done_tx, done_rx) = mpsc::channel();
    let producer = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            for _ in 0..batches {
                store.append(&batch).unwrap();
            }
            let _ = done_tx.send(());
        })
    };
    wait_for("a held-back append", || {
        assert!(
            done_rx.try_recv().is_err(),
            "every append was taken while the sink was held: the lag is {} bytes",
            store.stats().dispatch_lag_bytes
        );
        store.stats().dispatch_lag_waits > 0
    });
    let stats = store.stats();
    assert!(
        stats.dispatch_lag_bytes <= DISPATCH_LAG_MAX_BYTES + batch_bytes,
        "lag {} over the bound {DISPATCH_LAG_MAX_BYTES} + one batch",
        stats.dispatch_lag_bytes
    );
    // Let the sink go: the producer finishes, and everything is dispatched.
    sink.open_gate();
    producer.join().unwrap();
    assert!(store.wait_dispatched(DEADLINE));
    let (_, end) = store.offsets("t", 0);
    assert_eq!(end, 100 * (batches + 1));
    assert_eq!(store.stats().dispatch_lag_bytes, 0);
}
