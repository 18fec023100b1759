//! A crash at every step of a transaction's end (issue 38): a `kill -9`
//! (the files as written, page cache and all) and a power loss (only what
//! was synced, through the store's durability image) under `flush: sync`,
//! for a commit and an abort of a transaction with records in two
//! partitions and consumer offsets:
//!
//! 1. open, its end not asked for yet;
//! 2. the Prepare record written (the decision), no marker;
//! 3. one partition's marker written;
//! 4. both markers written, not the Complete record;
//! 5. complete.
//!
//! Every start after it agrees on one outcome: an undecided transaction
//! stays open (its records hidden from read_committed readers) until its
//! producer comes back, which aborts it; a decided one is finished as
//! decided, in every partition and for its offsets. A read_committed
//! reader never sees an aborted record or a part of a transaction.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tidelog_storage::durability::image;
use tidelog_storage::FlushMode;

use super::tests::produce_value;
use super::*;
use crate::config::BrokerConfig;
use crate::registry::CONSUMER_OFFSETS_TOPIC;
use crate::test_support;
use crate::transactions::TxnOffset;
use crate::Broker;

/// Where the end stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Open,
    Prepared,
    OneMarker,
    Marked,
    Completed,
}

const STEPS: [Step; 5] = [
    Step::Open,
    Step::Prepared,
    Step::OneMarker,
    Step::Marked,
    Step::Completed,
];

#[derive(Clone, Copy, Debug)]
enum Loss {
    /// `kill -9`: every byte written is in the files.
    Kill,
    /// A power loss: only what was synced.
    Power,
}

fn open_sync(dir: &Path) -> Arc<Broker> {
    let mut store = test_support::store_config(dir);
    store.flush = FlushMode::Sync;
    Arc::new(
        Broker::open(
            &BrokerConfig::default(),
            store,
            test_support::cleaner_config(),
        )
        .unwrap(),
    )
}

/// What a read_committed reader of `topic`-0 gets from offset 0.
fn committed_values(broker: &Arc<Broker>, topic: &str) -> Vec<String> {
    assert!(broker.store.wait_dispatched(Duration::from_secs(10)));
    let part = broker.partition(topic, 0).unwrap();
    let (batch, _) = part.read_committed_blocking(0, 100, usize::MAX).unwrap();
    batch
        .records
        .iter()
        .map(|r| String::from_utf8(r.value().unwrap().to_vec()).unwrap())
        .collect()
}

fn committed_offsets(broker: &Broker) -> Vec<(String, u32, u64)> {
    broker
        .committed_offsets("g", None)
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.topic, c.partition, c.offset))
        .collect()
}

/// Runs the transaction to `step` of a commit (or abort), loses the
/// process that way, starts again and checks the one outcome.
fn crash_at(step: Step, commit: bool, loss: Loss) {
    let what = format!("{step:?}, commit {commit}, {loss:?}");
    let root = tempfile::tempdir().unwrap();
    let live = root.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let image = matches!(loss, Loss::Power).then(|| image::install(&live).unwrap());
    let broker = open_sync(&live);
    broker.create_topic("a", 1, Default::default()).unwrap();
    broker.create_topic("b", 1, Default::default()).unwrap();
    let (pid, epoch) = broker
        .init_transactional_producer("t", 60_000, None)
        .unwrap();
    let parts = [
        ("a".to_string(), 0),
        ("b".to_string(), 0),
        (CONSUMER_OFFSETS_TOPIC.to_string(), 0),
    ];
    broker
        .add_partitions_to_txn("t", pid, epoch, &parts)
        .unwrap();
    produce_value(&broker, (pid, epoch, 0), "a", 0, "a0").unwrap();
    produce_value(&broker, (pid, epoch, 1), "a", 0, "a1").unwrap();
    produce_value(&broker, (pid, epoch, 0), "b", 0, "b0").unwrap();
    let offset = TxnOffset {
        offset: 4,
        leader_epoch: None,
        metadata: String::new(),
    };
    broker
        .txn_offset_commit("t", pid, epoch, "g", None, vec![("a".into(), 0, offset)])
        .unwrap();
    if step != Step::Open {
        let prepare = broker
            .txns
            .lock()
            .end("t", pid, epoch, commit, 1)
            .unwrap()
            .unwrap();
        broker.txn_apply(&prepare).unwrap();
        match step {
            Step::OneMarker => {
                let mut one = prepare.clone();
                one.partitions = one.partitions.into_iter().take(1).collect();
                broker.txn_markers(&one).unwrap();
            }
            Step::Marked => broker.txn_markers(&prepare).unwrap(),
            Step::Completed => broker.txn_end_decided(&prepare, true).unwrap(),
            Step::Open | Step::Prepared => {}
        }
    }
    // Before the loss: no part of the transaction is read_committed
    // unless it completed.
    let before: Vec<_> = ["a", "b"]
        .iter()
        .map(|t| committed_values(&broker, t))
        .collect();
    if step != Step::Completed {
        // A partition whose marker is written is read as it ended.
        assert!(before.iter().all(|v| v.is_empty() || commit), "{what}");
    }
    let broker = Arc::try_unwrap(broker).unwrap();
    let dir = match image {
        None => {
            broker.crash();
            live
        }
        Some(image) => {
            assert!(image.syncs() > 0, "the image saw the store's syncs");
            let after = root.path().join("after");
            image.snapshot(&after, None).unwrap();
            broker.crash();
            drop(image);
            after
        }
    };

    let broker = open_sync(&dir);
    let committed = if step == Step::Open {
        // Undecided: still open after the start, hidden from
        // read_committed readers, until its producer comes back and the
        // new epoch aborts it (answered CONCURRENT_TRANSACTIONS first).
        assert_eq!(
            broker.txns.lock().get("t").unwrap().state,
            TxnState::Ongoing,
            "{what}"
        );
        assert_eq!(committed_values(&broker, "a"), Vec::<String>::new());
        assert_eq!(committed_values(&broker, "b"), Vec::<String>::new());
        assert!(matches!(
            broker.init_transactional_producer("t", 60_000, None),
            Err(TxnError::Refused(TxnRefusal::Concurrent))
        ));
        broker
            .init_transactional_producer("t", 60_000, None)
            .unwrap();
        false
    } else {
        commit
    };
    let state = broker.txns.lock().get("t").unwrap().state;
    let (want_state, a, b, offsets) = if committed {
        (
            TxnState::CompleteCommit,
            vec!["a0", "a1"],
            vec!["b0"],
            vec![("a".to_string(), 0, 4)],
        )
    } else if step == Step::Open {
        // The producer's new epoch is ready for its next transaction.
        (TxnState::Empty, vec![], vec![], vec![])
    } else {
        (TxnState::CompleteAbort, vec![], vec![], vec![])
    };
    assert_eq!(state, want_state, "{what}");
    assert_eq!(committed_values(&broker, "a"), a, "{what}");
    assert_eq!(committed_values(&broker, "b"), b, "{what}");
    assert_eq!(committed_offsets(&broker), offsets, "{what}");
    for topic in ["a", "b"] {
        let end = broker.store.offsets(topic, 0).1;
        assert_eq!(
            broker.store.last_stable_offset(topic, 0),
            end,
            "{what}: {topic} stable"
        );
        let aborted = broker.store.aborted_transactions(topic, 0, 0, end);
        let want = if committed { vec![] } else { vec![(pid, 0)] };
        assert_eq!(aborted, want, "{what}: {topic}");
    }
    // And it stays so across one more restart.
    let broker = Arc::try_unwrap(broker).unwrap();
    broker.shutdown().unwrap();
    let broker = open_sync(&dir);
    assert_eq!(committed_values(&broker, "a"), a, "{what}: restarted");
    assert_eq!(committed_offsets(&broker), offsets, "{what}: restarted");
}

#[test]
fn a_kill_at_every_step_of_a_commit_or_an_abort_recovers_to_one_outcome() {
    for step in STEPS {
        for commit in [true, false] {
            crash_at(step, commit, Loss::Kill);
        }
    }
}

#[test]
fn a_power_loss_at_every_step_of_a_commit_or_an_abort_recovers_to_one_outcome() {
    for step in STEPS {
        for commit in [true, false] {
            crash_at(step, commit, Loss::Power);
        }
    }
}
