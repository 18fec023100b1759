use super::*;
use crate::coordinator::{Assignor, GroupsConfig, ManualClock, MemberProtocol};
use crate::groups::{CommitValue, OffsetCommit};
use crate::test_support::{cleaner_config, join_request, open_at, store_config, wait_until};
use tidelog_cleaner::CleanerError;

const T0_MS: u64 = 1_700_000_000_000;

fn commit(broker: &Broker, group: &str, offset: u64) {
    let value = CommitValue {
        offset,
        metadata: String::new(),
        ..Default::default()
    };
    let commit = OffsetCommit {
        topic: "t".into(),
        partition: 0,
        value,
    };
    broker
        .commit_offsets(
            group,
            vec![commit],
            crate::coordinator::CommitOrigin::Stateless,
        )
        .unwrap();
}

/// `tidelog-groups` applies the coordinator's deadlines without any
/// request coming: a member that stops heartbeating is removed once
/// its session timeout passed by the coordinator's clock.
#[test]
fn the_groups_thread_expires_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0_MS));
    let config = GroupsConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupsConfig::default()
    };
    let broker = open_at(dir.path(), &config, &clock);
    broker.create_topic("t", 2, Overrides::new()).unwrap();
    let partitions = |t: &str| broker.registry.get(t).map(|t| t.partitions.get());
    let join = join_request(MemberProtocol::Http {
        topics: vec!["t".into()],
        assignor: Assignor::Range,
    });
    broker.coordinator.join("g", join, &partitions).unwrap();
    let members = || {
        broker
            .coordinator
            .describe("g")
            .map_or(0, |g| g.members.len())
    };
    assert_eq!(members(), 1);
    clock.advance(10_001);
    wait_until("the session to expire", || members() == 0);
    broker.shutdown().unwrap();
}

/// Offsets of a group without members expire
/// `groups.offsets_retention_minutes` after its last commit: tombstones
/// go to `__consumer_offsets`, so the group stays gone after a restart,
/// while a group committed since keeps its offsets.
#[test]
fn committed_offsets_expire_after_the_retention_and_stay_gone() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0_MS));
    let config = GroupsConfig {
        offsets_retention_minutes: 1,
        ..GroupsConfig::default()
    };
    let broker = open_at(dir.path(), &config, &clock);
    broker.create_topic("t", 1, Overrides::new()).unwrap();
    commit(&broker, "old", 5);
    commit(&broker, "recent", 7);
    assert!(broker.expire_offsets().unwrap().is_empty());
    clock.advance(30_000);
    commit(&broker, "recent", 8);
    clock.advance(30_000);
    assert_eq!(broker.expire_offsets().unwrap(), ["old"]);
    assert!(broker.groups.get("old", None).is_none());
    assert_eq!(broker.groups.get("recent", None).unwrap()[0].offset, 8);
    assert!(broker.expire_offsets().unwrap().is_empty(), "once only");
    broker.shutdown().unwrap();

    let broker = open_at(dir.path(), &config, &clock);
    assert!(
        broker.groups.get("old", None).is_none(),
        "the tombstone is in the log"
    );
    assert_eq!(
        broker.groups.last_commits(),
        [crate::groups::GroupCommits {
            group: "recent".into(),
            last_commit_ms: T0_MS + 30_000,
            keys: vec![("t".into(), 0)],
            protocol: None,
        }],
        "the commit time is the record's"
    );
    broker.shutdown().unwrap();
}

/// The components' own checks run before anything is created: a
/// refused setting of either leaves no data dir behind.
#[test]
fn refused_settings_leave_the_data_dir_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("d");
    let mut store = store_config(&data_dir);
    store.index_entries = 1;
    let opened = Broker::open(&BrokerConfig::default(), store, cleaner_config());
    assert!(
        matches!(
            opened,
            Err(BrokerError::StoreOpen {
                source: StoreError::InvalidConfig {
                    key: "store.index_entries",
                    ..
                },
                ..
            })
        ),
        "{:?}",
        opened.map(|_| ())
    );
    assert!(!data_dir.exists());
    let cleaner = CleanerConfig {
        threads: 0,
        ..cleaner_config()
    };
    let opened = Broker::open(&BrokerConfig::default(), store_config(&data_dir), cleaner);
    assert!(
        matches!(
            opened,
            Err(BrokerError::Compaction {
                source: CleanerError::InvalidConfig {
                    setting: "cleaner.threads",
                    ..
                },
                ..
            })
        ),
        "{:?}",
        opened.map(|_| ())
    );
    assert!(!data_dir.exists());
    let broker = BrokerConfig {
        default_partitions: 0,
        ..BrokerConfig::default()
    };
    let opened = Broker::open(&broker, store_config(&data_dir), cleaner_config());
    assert!(
        matches!(
            &opened,
            Err(BrokerError::InvalidConfig { key, .. }) if key == "default_partitions"
        ),
        "{:?}",
        opened.map(|_| ())
    );
    assert!(!data_dir.exists());
}

/// A lost registry file with topics' data still on disk stops the
/// start instead of sweeping their queues away; with the file back,
/// every record is there.
#[test]
fn a_lost_registry_file_stops_the_start_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        Broker::open(
            &BrokerConfig::default(),
            store_config(dir.path()),
            cleaner_config(),
        )
    };
    let broker = open().unwrap();
    broker.create_topic("events", 1, Overrides::new()).unwrap();
    broker
        .store
        .append(&[tidelog_storage::AppendRecord {
            topic: Arc::from("events"),
            partition: 0,
            key: None,
            value: Some(bytes::Bytes::from_static(b"v")),
            headers: Vec::new(),
            timestamp_ms: None,
        }])
        .unwrap();
    assert!(broker
        .store
        .wait_dispatched(std::time::Duration::from_secs(30)));
    broker.shutdown().unwrap();
    let registry = dir
        .path()
        .join(CONFIG_DIR)
        .join(crate::registry::REGISTRY_FILE);
    let saved = std::fs::read(&registry).unwrap();
    std::fs::remove_file(&registry).unwrap();
    match open() {
        Err(BrokerError::RegistryFile { reason, .. }) => {
            assert!(reason.contains("\"events\""), "{reason}")
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert!(
        dir.path().join("consumequeue/events").is_dir(),
        "nothing deleted"
    );
    std::fs::write(&registry, saved).unwrap();
    let broker = open().unwrap();
    assert_eq!(broker.store.offsets("events", 0), (0, 1));
    broker.shutdown().unwrap();
}

/// One lock per data dir, the store's, taken before the compacted logs
/// open: a second broker on the same dir stops at it, and no second
/// lock file is left in the data dir.
#[test]
fn a_second_broker_on_the_same_data_dir_stops_at_the_one_lock() {
    let dir = tempfile::tempdir().unwrap();
    let first = Broker::open(
        &BrokerConfig::default(),
        store_config(dir.path()),
        cleaner_config(),
    )
    .unwrap();
    let second = Broker::open(
        &BrokerConfig::default(),
        store_config(dir.path()),
        cleaner_config(),
    );
    assert!(
        matches!(
            second,
            Err(BrokerError::StoreOpen {
                source: StoreError::Locked { .. },
                ..
            })
        ),
        "{:?}",
        second.map(|_| ())
    );
    assert!(dir.path().join(tidelog_storage::store::LOCK_FILE).exists());
    assert!(!dir.path().join("compacted.lock").exists());
    first.shutdown().unwrap();
    // Released with the store: the data dir opens again.
    Broker::open(
        &BrokerConfig::default(),
        store_config(dir.path()),
        cleaner_config(),
    )
    .unwrap()
    .shutdown()
    .unwrap();
}

/// Start-up failures are `BrokerError` variants that name what failed:
/// a registry file that is not one stops the start with its path.
#[test]
fn a_damaged_registry_file_stops_the_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join(CONFIG_DIR);
    std::fs::create_dir_all(&config_dir).unwrap();
    let registry = config_dir.join(crate::registry::REGISTRY_FILE);
    std::fs::write(&registry, b"{not json").unwrap();
    let opened = Broker::open(
        &BrokerConfig::default(),
        store_config(dir.path()),
        cleaner_config(),
    );
    match opened {
        Err(e @ BrokerError::RegistryFile { .. }) => {
            let BrokerError::RegistryFile { path, .. } = &e else {
                unreachable!()
            };
            assert_eq!(path, &registry);
            assert!(e.to_string().starts_with("topic registry: "), "{e}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}
