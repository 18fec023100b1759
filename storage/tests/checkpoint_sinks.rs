//! A checkpoint claims only what every dispatch sink has written, not
//! what the dispatcher has handed over. The compacted logs take an
//! entry's copies during a round and write them at its end (`end_batch`);
//! a checkpoint between the two used to claim copies its flush of the
//! sinks never saw, and after a power loss recovery, starting at the
//! claim, did not hand them over again (`cleaner/tests/power_loss.rs`
//! found a compacted log one record short).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tidelog_storage::checkpoint::Checkpoint;
use tidelog_storage::{DispatchSink, Result, Store, StoredRecord};

/// A sink that holds the dispatcher inside its second entry of the run
/// until released, as a round stands between two entries.
struct Gate {
    entries: AtomicU64,
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl DispatchSink for Gate {
    fn name(&self) -> &str {
        "gate"
    }

    fn dispatch(&self, _: &StoredRecord) -> Result<()> {
        Ok(())
    }

    fn dispatch_entry(&self, _: &[StoredRecord]) -> Result<()> {
        if self.entries.fetch_add(1, Ordering::SeqCst) == 1 {
            self.entered.lock().unwrap().send(()).unwrap();
            self.release.lock().unwrap().recv().unwrap();
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_checkpoint_claims_only_what_every_sink_has_written() {
    let dir = tempfile::tempdir().unwrap();
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let gate = Arc::new(Gate {
        entries: AtomicU64::new(0),
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
    });
    let store = Store::open_with_sinks(common::small_config(dir.path()), vec![gate]).unwrap();
    // One append of two partitions: two entries, visible to the
    // dispatcher at once, so one round hands over both.
    store
        .append(&[
            common::record("t", 0, Some("a"), Some("1")),
            common::record("t", 1, Some("b"), Some("2")),
        ])
        .unwrap();
    // The dispatcher is inside the second entry: the first is handed
    // over, and the round's end_batch has not run.
    entered
        .recv_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    store.checkpoint().unwrap();
    let claimed = Checkpoint::load(dir.path()).unwrap().unwrap().dispatched;
    assert_eq!(
        claimed, 0,
        "the checkpoint claimed {claimed} bytes the sinks had not written"
    );

    // Released, the round ends and the next checkpoint claims it all.
    release.send(()).unwrap();
    let end = store.commit_log().committed();
    common::wait_for("a checkpoint claiming both entries", || {
        store.checkpoint().unwrap();
        Checkpoint::load(dir.path()).unwrap().unwrap().dispatched == end
    });
}
