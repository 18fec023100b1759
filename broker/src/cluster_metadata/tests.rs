//! The metadata log between two brokers in one process: a "master" in a
//! cluster (a gate that takes every write) and a "replica" whose store
//! refuses its own appends and takes the master's bytes through
//! `append_copy`, as the replication stream hands them. What the master
//! changes (topics, configs, dynamic configs, users, ACLs) reaches the
//! replica's files byte for byte and its running broker; opened again as
//! a master, the replica has all of it; a cut past a change takes it
//! back; a single node appends nothing.
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;
use std::time::Duration;

use tidelog_security::acl::{
    AclBinding, AclFilter, Host, Operation, PatternType, Permission, ResourcePattern, ResourceType,
};
use tidelog_security::scram::{Mechanism, ScramCredential};

use super::*;
use crate::cluster::{ClusterGate, ClusterStatus, GateFuture};
use crate::config::BrokerConfig;
use crate::dynamic_configs::Scope;
use crate::test_support::{cleaner_config, store_config};
use crate::topic_config::Overrides;
use crate::Broker;

/// A master's gate: every write taken, every end replicated at once
/// (the ends asked are kept).
#[derive(Default)]
struct MasterGate {
    asked: Mutex<Vec<u64>>,
}

impl ClusterGate for MasterGate {
    fn may_write(&self) -> Result<(), BrokerError> {
        Ok(())
    }
    fn in_sync(&self) -> usize {
        2
    }
    fn min_insync(&self) -> usize {
        1
    }
    fn replicated(&self, end: u64, _min_insync: usize) -> GateFuture<'_> {
        self.asked.lock().unwrap().push(end);
        Box::pin(async { Ok(()) })
    }
    fn status(&self) -> ClusterStatus {
        ClusterStatus {
            epoch: 1,
            node_id: 1,
            master: Some(1),
            nodes: Vec::new(),
        }
    }
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }
}

fn open(dir: &std::path::Path) -> Arc<Broker> {
    Arc::new(
        Broker::open(
            &BrokerConfig::default(),
            store_config(dir),
            cleaner_config(),
        )
        .unwrap(),
    )
}

fn master(dir: &std::path::Path) -> (Arc<Broker>, Arc<MasterGate>) {
    let broker = open(dir);
    let gate = Arc::new(MasterGate::default());
    broker.join_cluster(Arc::clone(&gate) as _).unwrap();
    (broker, gate)
}

fn replica(dir: &std::path::Path) -> Arc<Broker> {
    let broker = open(dir);
    broker.store.set_replica(true);
    broker
}

/// Everything the master's log holds past the replica's end, copied in
/// runs as the replication stream sends them, then dispatched.
fn copy_all(master: &Broker, replica: &Broker) {
    loop {
        let at = replica.store.commit_log().committed();
        let Some(chunk) = master.store.commit_log().read_for_copy(at, 4096).unwrap() else {
            break;
        };
        replica.store.append_copy(chunk.at, &chunk.bytes).unwrap();
    }
    assert_eq!(
        replica.store.commit_log().committed(),
        master.store.commit_log().committed()
    );
    assert!(replica.store.wait_dispatched(Duration::from_secs(10)));
}

fn file(dir: &std::path::Path, f: MetadataFile) -> Vec<u8> {
    std::fs::read(dir.join(crate::broker::CONFIG_DIR).join(f.name())).unwrap()
}

fn acl(name: &str) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: name.into(),
            pattern_type: PatternType::Literal,
        },
        principal: "User:alice".into(),
        host: Host::Any,
        operation: Operation::Read,
        permission: Permission::Allow,
    }
}

fn set(name: &str, value: &str) -> Vec<(String, Option<String>)> {
    vec![(name.to_owned(), Some(value.to_owned()))]
}

/// Every kind of change on the master, in a cluster.
fn change_everything(master: &Broker) {
    master.create_topic("orders", 3, Overrides::new()).unwrap();
    let compact = Overrides::from([("cleanup.policy".to_string(), "compact".to_string())]);
    master.create_topic("accounts", 1, compact).unwrap();
    master.create_topic("gone", 1, Overrides::new()).unwrap();
    master
        .alter_topic("orders", &set("retention.ms", "60000"))
        .unwrap();
    master.add_partitions("orders", 4).unwrap();
    master.delete_topic("gone").unwrap();
    let changes = set("log.retention.ms", "120000");
    master
        .alter_dynamic_configs(&Scope::ClusterDefault, &move |_| Ok(changes.clone()), false)
        .unwrap();
    let credential = ScramCredential::from_password(Mechanism::Sha256, b"secret", 4096).unwrap();
    master.access.users.create("alice", credential).unwrap();
    for answer in master
        .access
        .acls
        .create(vec![acl("orders"), acl("accounts")])
    {
        answer.unwrap();
    }
}

/// What a node serves of the metadata, compared between two nodes.
fn assert_same_metadata(a: &Broker, b: &Broker, when: &str) {
    let names = |x: &Broker| -> Vec<(String, uuid::Uuid, u32, Vec<u64>, Overrides, i64)> {
        x.registry
            .all()
            .iter()
            .map(|t| {
                (
                    t.name.to_string(),
                    t.id,
                    t.partitions.get(),
                    t.base_offsets.clone(),
                    t.overrides.clone(),
                    t.config.retention_ms,
                )
            })
            .collect()
    };
    assert_eq!(names(a), names(b), "{when}: the topics");
    assert_eq!(
        a.dynamic.values(&Scope::ClusterDefault),
        b.dynamic.values(&Scope::ClusterDefault),
        "{when}: the dynamic configs"
    );
    assert_eq!(
        a.access.users.describe(),
        b.access.users.describe(),
        "{when}: the users"
    );
    assert_eq!(
        a.access.acls.describe(&AclFilter::any()),
        b.access.acls.describe(&AclFilter::any()),
        "{when}: the ACLs"
    );
}

#[test]
fn a_replica_takes_every_metadata_change_and_keeps_it_as_master() {
    let (dm, dr) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, _gate) = master(dm.path());
    let replica = replica(dr.path());
    change_everything(&master);
    // A record of the compact topic, after its creation's record.
    crate::test_support::append(&master, "accounts", &[("k", "v")]);
    copy_all(&master, &replica);

    for f in MetadataFile::ALL {
        assert_eq!(
            file(dm.path(), f),
            file(dr.path(), f),
            "{}: the replica's file is the master's, byte for byte",
            f.name()
        );
    }
    assert_same_metadata(&master, &replica, "after the copy");
    let orders = replica.registry.require("orders").unwrap();
    assert_eq!(orders.partitions.get(), 4);
    assert_eq!(orders.config.retention_ms, 60_000);
    assert!(replica.registry.get("gone").is_none());
    // The cluster-wide default reached a topic without its own value.
    assert_eq!(
        replica
            .registry
            .require("accounts")
            .unwrap()
            .config
            .retention_ms,
        120_000
    );
    assert!(replica.access.users.verify_password("alice", b"secret"));
    // The compact topic's record was copied to its compacted log: the
    // topic was declared before its record was dispatched.
    assert!(replica.logs.is_compact("accounts"));
    assert_eq!(
        replica
            .logs
            .all_logs()
            .iter()
            .filter(|l| l.topic_partition().topic() == "accounts")
            .count(),
        1
    );
    // Clients see no metadata topic.
    assert!(replica.registry.get(METADATA_TOPIC).is_none());

    // A failover: the replica is opened again, as a master.
    let replica = Arc::try_unwrap(replica).unwrap();
    replica.shutdown().unwrap();
    let promoted = open(dr.path());
    assert_same_metadata(&master, &promoted, "opened again as master");
    assert!(
        promoted
            .store
            .partitions()
            .iter()
            .any(|tp| tp.topic() == METADATA_TOPIC),
        "the open's sweep spares the metadata topic's queue"
    );
}

#[test]
fn a_change_is_answered_once_replicated_and_a_replica_refuses_changes() {
    let (dm, dr) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, gate) = master(dm.path());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    master.create_topic("t", 1, Overrides::new()).unwrap();
    let door = master.door(&crate::Principal::AdminToken);
    rt.block_on(door.delete_topic("t")).unwrap();
    let asked = gate.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        vec![master.metadata.last_end()],
        "the delete waited for its record"
    );
    assert_eq!(
        master.metadata.last_end(),
        master.store.commit_log().committed()
    );

    // A replica (in a cluster too) refuses a change before it is made.
    let replica = replica(dr.path());
    replica
        .join_cluster(Arc::new(MasterGate::default()))
        .unwrap();
    let before = file(dr.path(), MetadataFile::Topics);
    let e = replica
        .create_topic("nope", 1, Overrides::new())
        .unwrap_err();
    assert!(
        matches!(
            e,
            BrokerError::Store {
                source: StoreError::Replica
            }
        ),
        "{e:?}"
    );
    assert!(replica.registry.get("nope").is_none());
    assert_eq!(file(dr.path(), MetadataFile::Topics), before);
}

#[test]
fn a_single_node_appends_no_metadata_record() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    change_everything(&broker);
    assert_eq!(broker.metadata.last_end(), 0);
    assert!(!broker
        .store
        .partitions()
        .iter()
        .any(|tp| tp.topic() == METADATA_TOPIC));
}

/// A replica took a change its master then lost (the master's log is
/// cut at the change, as the new master's would part from it): cut at
/// the same point, the replica's file is back as the record below had
/// it, on disk and in memory.
#[test]
fn a_cut_past_a_change_takes_it_back() {
    let (dm, dr) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, _gate) = master(dm.path());
    let replica = replica(dr.path());
    master.create_topic("kept", 1, Overrides::new()).unwrap();
    copy_all(&master, &replica);
    let kept_registry = file(dr.path(), MetadataFile::Topics);
    let cut_at = master.store.commit_log().committed();
    master.create_topic("cut", 2, Overrides::new()).unwrap();
    for answer in master.access.acls.create(vec![acl("cut")]) {
        answer.unwrap();
    }
    copy_all(&master, &replica);
    assert!(replica.registry.get("cut").is_some());

    let replica = Arc::try_unwrap(replica).unwrap();
    replica.shutdown().unwrap();
    tidelog_storage::cut::request(dr.path(), cut_at).unwrap();
    let replica = open(dr.path());
    assert_eq!(replica.store.commit_log().committed(), cut_at);
    assert!(
        replica.registry.get("cut").is_none(),
        "the cut topic is gone"
    );
    assert!(replica.registry.get("kept").is_some());
    assert_eq!(file(dr.path(), MetadataFile::Topics), kept_registry);
    // The ACL file had no record below the cut: diverged, and named.
    assert_eq!(
        replica.metadata.positions.diverged(),
        vec![MetadataFile::Acls.name().to_string()]
    );
}

/// A record whose file its owner refuses (damage, or a bug of the
/// master's) is not applied: the replica's dispatch stops at it rather
/// than serve on without the master's metadata, and its file is as it was.
#[test]
fn a_record_the_owner_refuses_stops_dispatch_and_changes_nothing() {
    let (dm, dr) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(dm.path());
    let replica = replica(dr.path());
    let before = file(dr.path(), MetadataFile::Topics);
    master
        .store
        .append(&[AppendRecord {
            topic: Arc::from(METADATA_TOPIC),
            partition: 0,
            key: Some(Bytes::from_static(b"topics.json")),
            value: Some(Bytes::from(format::encode_value(
                7,
                b"{\"version\":2,\"topics\":{\"../x\":{}}}",
            ))),
            headers: Vec::new(),
            timestamp_ms: None,
        }])
        .unwrap();
    loop {
        let at = replica.store.commit_log().committed();
        let Some(chunk) = master.store.commit_log().read_for_copy(at, 4096).unwrap() else {
            break;
        };
        replica.store.append_copy(chunk.at, &chunk.bytes).unwrap();
    }
    assert!(!replica.store.wait_dispatched(Duration::from_millis(300)));
    assert_eq!(file(dr.path(), MetadataFile::Topics), before);
    assert!(replica.registry.get("../x").is_none());
}

/// DeleteRecords on the master (Kafka's, through the door) moves the
/// replica's log starts, a queue topic's and a `compact,delete` topic's
/// compacted log's, is answered once its record is replicated, is
/// replayed by a recovery that runs before the store is open, and stays
/// after a failover.
#[test]
fn delete_records_moves_the_replicas_log_start_and_a_failover_keeps_it() {
    let (dm, dr) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, gate) = master(dm.path());
    let replica = replica(dr.path());
    let compact_delete =
        Overrides::from([("cleanup.policy".to_string(), "compact,delete".to_string())]);
    master.create_topic("events", 1, Overrides::new()).unwrap();
    master.create_topic("kv", 1, compact_delete).unwrap();
    for t in ["events", "kv"] {
        let records = [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")];
        crate::test_support::append(&master, t, &records);
        let part = master.partition(t, 0).unwrap();
        crate::test_support::wait_until("dispatch", || part.offsets().1 == 4);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let door = master.door(&crate::Principal::AdminToken);
    assert_eq!(rt.block_on(door.delete_records("events", 0, 2)).unwrap(), 2);
    assert_eq!(
        gate.asked.lock().unwrap().last().copied(),
        Some(master.metadata.last_end()),
        "answered once the move's record is replicated"
    );
    // The high watermark, resolved on the master to an offset.
    assert_eq!(rt.block_on(door.delete_records("kv", 0, -1)).unwrap(), 4);
    // Nothing to move: no record.
    let end = master.metadata.last_end();
    assert_eq!(rt.block_on(door.delete_records("events", 0, 1)).unwrap(), 2);
    assert_eq!(master.metadata.last_end(), end);
    copy_all(&master, &replica);

    let starts = |b: &Arc<Broker>| ["events", "kv"].map(|t| b.partition(t, 0).unwrap().offsets());
    assert_eq!(starts(&master), [(2, 4), (4, 4)]);
    assert_eq!(starts(&replica), starts(&master), "the replica moved them");

    // A recovery that replays the log from its start (no checkpoint, the
    // store's file of log starts lost) finds the moves in the log and
    // makes them once the store is open.
    let replica = Arc::try_unwrap(replica).unwrap();
    replica.shutdown().unwrap();
    std::fs::remove_file(dr.path().join("checkpoint")).unwrap();
    std::fs::remove_file(dr.path().join("log-start-offsets")).unwrap();
    let promoted = open(dr.path());
    assert_eq!(
        starts(&promoted),
        [(2, 4), (4, 4)],
        "replayed, then opened as master"
    );
}

/// What a broker changes while it opens (here: a topic of the config
/// file, declared at open, before it joins a cluster) is not appended
/// then; a new term's `republish_metadata` carries every file to the
/// replica at once, byte for byte, and a single node appends nothing.
#[test]
fn a_new_term_republishes_what_the_broker_changed_while_it_opened() {
    let (dm, dr) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    {
        let first = open(dm.path());
        first.create_topic("declared", 2, Overrides::new()).unwrap();
        let credential =
            ScramCredential::from_password(Mechanism::Sha256, b"secret", 4096).unwrap();
        first.access.users.create("boot", credential).unwrap();
        assert_eq!(first.metadata.last_end(), 0, "a single node: no record");
        assert_eq!(first.republish_metadata().unwrap(), 0);
        assert_eq!(first.metadata.last_end(), 0);
        Arc::try_unwrap(first).unwrap().shutdown().unwrap();
    }
    let (master, _gate) = master(dm.path());
    let replica = replica(dr.path());
    copy_all(&master, &replica);
    assert!(
        replica.registry.get("declared").is_none(),
        "nothing appended while it opened"
    );
    let files = master.republish_metadata().unwrap();
    assert_eq!(
        files, 2,
        "the registry and the users: no dynamic or ACL file yet"
    );
    copy_all(&master, &replica);
    assert!(replica.registry.get("declared").is_some());
    assert!(replica.access.users.verify_password("boot", b"secret"));
    for f in [MetadataFile::Topics, MetadataFile::Users] {
        assert_eq!(file(dm.path(), f), file(dr.path(), f), "{}", f.name());
    }
}
