//! The schedule threads: named, holding the broker only weakly between
//! passes, and ended by `stop`.
#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn schedules_are_named_threads_that_hold_the_broker_weakly_and_end_on_stop() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::test_support::open(dir.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let schedules = start(&broker, rt.handle().clone(), stop);
    let names: Vec<&str> = schedules
        .threads
        .iter()
        .map(|t| t.thread().name().unwrap())
        .collect();
    // No remote tier: no tiering thread.
    assert_eq!(names, ["tidelog-offset-expiry", "tidelog-transactions"]);
    // Between passes nothing but this test holds the broker, so a
    // shutdown could take it back.
    assert_eq!(Arc::strong_count(&broker), 1);
    stop_tx.send(true).unwrap();
    // Returns only once every thread has ended (a sleep of a minute cut
    // short by the signal).
    schedules.join();
    let broker = Arc::try_unwrap(broker).unwrap();
    broker.shutdown().unwrap();
}
