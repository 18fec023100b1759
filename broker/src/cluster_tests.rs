//! The broker's side of the cluster, with a gate whose answers the test
//! sets: a replica (or a master past its lease's margin) takes no write
//! through any door call; acks=all is refused before writing with too
//! few in sync, and waits for the in-sync set after; acks=1 does not.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

use super::*;
use crate::produce::{ProduceRequest, Records};
use crate::test_support::open;
use crate::topic_config::Overrides;
use crate::Principal;

#[derive(Default)]
struct FakeGate {
    replica: AtomicBool,
    in_sync: AtomicUsize,
    confirm: AtomicBool,
    asked: Mutex<Vec<(u64, usize)>>,
}

impl ClusterGate for FakeGate {
    fn may_write(&self) -> Result<(), BrokerError> {
        match self.replica.load(Ordering::Acquire) {
            true => Err(BrokerError::NotMaster { master: Some(3) }),
            false => Ok(()),
        }
    }
    fn in_sync(&self) -> usize {
        self.in_sync.load(Ordering::Acquire)
    }
    fn min_insync(&self) -> usize {
        2
    }
    fn replicated(&self, end: u64, min_insync: usize) -> GateFuture<'_> {
        self.asked.lock().unwrap().push((end, min_insync));
        let confirmed = self.confirm.load(Ordering::Acquire);
        let in_sync = self.in_sync();
        Box::pin(async move {
            match confirmed {
                true => Ok(()),
                false => Err(BrokerError::NotReplicated {
                    required: min_insync,
                    in_sync,
                    timeout_ms: 5,
                }),
            }
        })
    }
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }
    fn status(&self) -> ClusterStatus {
        ClusterStatus {
            epoch: 1,
            node_id: 1,
            master: Some(1),
            nodes: Vec::new(),
        }
    }
}

fn request(acks_all: bool) -> ProduceRequest {
    let mut records = Records::new();
    records.push(None, None, Some(Bytes::from_static(b"v")), Vec::new(), None);
    ProduceRequest {
        topic: "t".into(),
        partition: Some(0),
        records,
        producer: None,
        create_missing_topic: false,
        acks_all,
    }
}

#[test]
fn writes_follow_the_gate_and_acks_all_waits_for_the_in_sync_set() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("t", 1, Overrides::new()).unwrap();
    let gate = Arc::new(FakeGate::default());
    broker.join_cluster(Arc::clone(&gate) as _).unwrap();
    assert!(broker.join_cluster(Arc::clone(&gate) as _).is_err(), "once");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let door = broker.door(&Principal::Anonymous);
    let end = || broker.store.commit_log().committed();

    // A replica: every write of the door refused, nothing written.
    gate.replica.store(true, Ordering::Release);
    let before = end();
    for acks_all in [false, true] {
        assert!(matches!(
            rt.block_on(door.produce(request(acks_all))),
            Err(BrokerError::NotMaster { master: Some(3) })
        ));
    }
    let create = crate::topics::CreateTopic {
        name: "u".into(),
        partitions: None,
        replication_factor: None,
        assignment: Vec::new(),
        configs: Vec::new(),
    };
    assert!(matches!(
        rt.block_on(door.create_topic(create, false)),
        Err(BrokerError::NotMaster { .. })
    ));
    assert!(matches!(
        rt.block_on(door.delete_topic("t")),
        Err(BrokerError::NotMaster { .. })
    ));
    assert_eq!(end(), before, "nothing written");

    // The master, one node in sync where two are needed: acks=all is
    // refused before writing; acks=1 is written and answered.
    gate.replica.store(false, Ordering::Release);
    gate.in_sync.store(1, Ordering::Release);
    assert!(matches!(
        rt.block_on(door.produce(request(true))),
        Err(BrokerError::TooFewInSync {
            required: 2,
            in_sync: 1,
            ..
        })
    ));
    assert_eq!(end(), before, "nothing written");
    rt.block_on(door.produce(request(false))).unwrap();
    assert!(
        gate.asked.lock().unwrap().is_empty(),
        "acks=1 waits for nobody"
    );

    // Two in sync: acks=all waits for the set through the write's end; a
    // set that does not confirm in time is NotReplicated, the write kept.
    gate.in_sync.store(2, Ordering::Release);
    let written = rt.block_on(door.produce(request(true)));
    assert!(matches!(written, Err(BrokerError::NotReplicated { .. })));
    let asked = gate.asked.lock().unwrap().clone();
    assert_eq!(asked, vec![(end(), 2)], "waited for the write's end");
    gate.confirm.store(true, Ordering::Release);
    rt.block_on(door.produce(request(true))).unwrap();
}
