#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use super::catalogue::{broker_spec, BrokerEffect, BROKER_CONFIGS};
use super::*;
use crate::broker::Broker;
use crate::test_support::{append, compact, open};
use crate::topic_config::Overrides;

type Change = (String, Option<String>);

fn set(name: &str, value: &str) -> Vec<Change> {
    vec![(name.to_owned(), Some(value.to_owned()))]
}

fn delete(name: &str) -> Vec<Change> {
    vec![(name.to_owned(), None)]
}

fn alter(broker: &Broker, scope: &Scope, changes: Vec<Change>) -> Result<(), BrokerError> {
    broker.alter_dynamic_configs(scope, &move |_| Ok(changes.clone()), false)
}

fn problem(e: BrokerError) -> DynamicConfigProblem {
    match e {
        BrokerError::DynamicConfig { problem, .. } => problem,
        other => panic!("not a dynamic config refusal: {other}"),
    }
}

fn described(broker: &Broker, scope: &Scope, name: &str) -> Described {
    broker
        .describe_dynamic_configs(scope, Vec::new())
        .into_iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("{name} is not described"))
}

#[test]
fn the_catalogue_names_each_config_once_and_every_topic_default_has_its_topic_config() {
    let mut names: Vec<&str> = BROKER_CONFIGS.iter().map(|s| s.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "a broker config is listed twice");
    for spec in BROKER_CONFIGS {
        if let BrokerEffect::TopicDefault { topic_config } = spec.effect {
            assert!(
                crate::topic_config::spec(topic_config).is_some(),
                "{} stands for unknown topic config {topic_config}",
                spec.name
            );
        }
    }
}

#[test]
fn broker_configs_are_checked_kept_across_a_restart_and_described_with_their_source() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    // Accepted without effect, as Kafka takes it (librdkafka's 0081).
    alter(
        &broker,
        &Scope::Broker,
        set("sasl.kerberos.min.time.before.relogin", "58000"),
    )
    .unwrap();
    alter(
        &broker,
        &Scope::ClusterDefault,
        set("background.threads", "9"),
    )
    .unwrap();
    alter(&broker, &Scope::Broker, set("background.threads", "4")).unwrap();

    // Refusals, each with its own problem; nothing of them is kept.
    let refused = |scope: &Scope, name: &str, value: &str| {
        problem(alter(&broker, scope, set(name, value)).unwrap_err())
    };
    assert!(matches!(
        refused(&Scope::Broker, "no.such.config", "1"),
        DynamicConfigProblem::Unknown { .. }
    ));
    assert!(matches!(
        refused(&Scope::Broker, "num.partitions", "3"),
        DynamicConfigProblem::ReadOnly { .. }
    ));
    assert!(matches!(
        refused(&Scope::Broker, "background.threads", "0"),
        DynamicConfigProblem::InvalidValue { .. }
    ));
    assert!(matches!(
        refused(&Scope::Broker, "log.retention.ms", "soon"),
        DynamicConfigProblem::InvalidValue { .. }
    ));
    assert!(matches!(
        refused(
            &Scope::ClusterDefault,
            "sasl.kerberos.ticket.renew.jitter",
            "-1"
        ),
        DynamicConfigProblem::InvalidValue { .. }
    ));
    // All or nothing: one bad change leaves the good one out too.
    let mixed = vec![
        ("num.io.threads".to_owned(), Some("16".to_owned())),
        ("num.io.threads.typo".to_owned(), Some("16".to_owned())),
    ];
    alter(&broker, &Scope::Broker, mixed).unwrap_err();
    // validate_only checks and keeps nothing.
    broker
        .alter_dynamic_configs(&Scope::Broker, &|_| Ok(set("num.io.threads", "16")), true)
        .unwrap();
    assert!(!broker
        .dynamic
        .values(&Scope::Broker)
        .contains_key("num.io.threads"));

    let threads = described(&broker, &Scope::Broker, "background.threads");
    assert_eq!(
        (threads.value.as_str(), threads.source),
        ("4", Source::DynamicBroker)
    );
    assert_eq!(
        threads.synonyms.iter().map(|s| s.2).collect::<Vec<_>>(),
        [
            Source::DynamicBroker,
            Source::DynamicDefaultBroker,
            Source::Default
        ]
    );
    assert!(threads.without_effect.is_some());
    let io = described(&broker, &Scope::Broker, "num.io.threads");
    assert_eq!((io.value.as_str(), io.source), ("8", Source::Default));
    // The cluster-wide default answers only what is set there.
    let cluster = broker.describe_dynamic_configs(&Scope::ClusterDefault, Vec::new());
    assert_eq!(
        cluster.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
        ["background.threads"]
    );

    let broker = Arc::try_unwrap(broker).ok().unwrap();
    broker.shutdown().unwrap();
    let broker = open(dir.path());
    assert_eq!(
        broker.dynamic.values(&Scope::Broker),
        Values::from([
            ("background.threads".to_owned(), "4".to_owned()),
            (
                "sasl.kerberos.min.time.before.relogin".to_owned(),
                "58000".to_owned()
            ),
        ])
    );
    alter(&broker, &Scope::Broker, delete("background.threads")).unwrap();
    let threads = described(&broker, &Scope::Broker, "background.threads");
    assert_eq!(
        (threads.value.as_str(), threads.source),
        ("9", Source::DynamicDefaultBroker)
    );
}

#[test]
fn topic_defaults_reach_every_topic_without_its_own_value_live_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let own = Overrides::from([("retention.ms".to_owned(), "120000".to_owned())]);
    broker.create_topic("plain", 1, Overrides::new()).unwrap();
    broker.create_topic("mine", 1, own).unwrap();

    alter(
        &broker,
        &Scope::ClusterDefault,
        set("log.retention.ms", "60000"),
    )
    .unwrap();
    let retention = |name: &str| broker.registry.get(name).unwrap().config.retention_ms;
    assert_eq!((retention("plain"), retention("mine")), (60_000, 120_000));
    // This broker's value wins over the cluster-wide one.
    alter(&broker, &Scope::Broker, set("log.retention.ms", "30000")).unwrap();
    assert_eq!(retention("plain"), 30_000);
    // A topic created now follows it too; its described value says whence.
    broker.create_topic("later", 1, Overrides::new()).unwrap();
    assert_eq!(retention("later"), 30_000);
    let defaults = broker.topic_defaults();
    let row = crate::topic_config::entries(&defaults, &Overrides::new())
        .into_iter()
        .find(|e| e.name == "retention.ms")
        .unwrap();
    assert_eq!(
        (row.value.as_str(), row.source),
        (
            "30000",
            crate::topic_config::ValueSource::DynamicBrokerConfig
        )
    );
    // __consumer_offsets keeps its own fixed config.
    broker.registry.ensure_internal(&|_| 0).unwrap();
    let offsets = broker
        .registry
        .get(crate::registry::CONSUMER_OFFSETS_TOPIC)
        .unwrap();
    assert_eq!(offsets.config.retention_ms, 604_800_000);

    let broker = Arc::try_unwrap(broker).ok().unwrap();
    broker.shutdown().unwrap();
    let broker = open(dir.path());
    let retention = |name: &str| broker.registry.get(name).unwrap().config.retention_ms;
    assert_eq!((retention("plain"), retention("mine")), (30_000, 120_000));
    alter(&broker, &Scope::Broker, delete("log.retention.ms")).unwrap();
    assert_eq!(retention("plain"), 60_000);
}

#[test]
fn a_default_cleanup_policy_change_is_refused_while_a_topic_it_would_change_holds_records() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("empty", 1, Overrides::new()).unwrap();
    broker.create_topic("full", 1, Overrides::new()).unwrap();
    broker.create_topic("table", 1, compact()).unwrap();
    append(&broker, "full", &[("k", "v")]);
    append(&broker, "table", &[("k", "v")]);

    let err = alter(
        &broker,
        &Scope::Broker,
        set("log.cleanup.policy", "compact"),
    )
    .unwrap_err();
    match problem(err) {
        DynamicConfigProblem::RefusedByTopic { topic, .. } => assert_eq!(topic, "full"),
        other => panic!("{other:?}"),
    }
    assert!(broker.dynamic.values(&Scope::Broker).is_empty());
    assert!(!broker
        .registry
        .get("empty")
        .unwrap()
        .config
        .cleanup_policy
        .compacts());

    // With the topic's own value set first, the default goes through and
    // the empty topic becomes compact (its compacted logs follow).
    broker
        .alter_topic("full", &[("cleanup.policy".into(), Some("delete".into()))])
        .unwrap();
    alter(
        &broker,
        &Scope::Broker,
        set("log.cleanup.policy", "compact"),
    )
    .unwrap();
    assert!(broker
        .registry
        .get("empty")
        .unwrap()
        .config
        .cleanup_policy
        .compacts());
    assert!(broker.has_compaction_state("empty"));
    assert!(!broker
        .registry
        .get("full")
        .unwrap()
        .config
        .cleanup_policy
        .compacts());
    // And back, while it is still empty.
    alter(&broker, &Scope::Broker, delete("log.cleanup.policy")).unwrap();
    assert!(!broker
        .registry
        .get("empty")
        .unwrap()
        .config
        .cleanup_policy
        .compacts());
}

#[test]
fn group_configs_are_bounded_by_the_broker_and_reach_the_group_s_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let group = Scope::Group("orders".into());
    alter(
        &broker,
        &group,
        set(catalogue::GROUP_SESSION_TIMEOUT, "50000"),
    )
    .unwrap();
    alter(
        &broker,
        &group,
        set(catalogue::GROUP_HEARTBEAT_INTERVAL, "2000"),
    )
    .unwrap();
    let refused =
        |name: &str, value: &str| problem(alter(&broker, &group, set(name, value)).unwrap_err());
    // Outside groups.min/max_session_timeout_ms, or a heartbeat not below
    // the session, or a config groups do not have.
    assert!(matches!(
        refused(catalogue::GROUP_SESSION_TIMEOUT, "10"),
        DynamicConfigProblem::InvalidValue { .. }
    ));
    assert!(matches!(
        refused(catalogue::GROUP_HEARTBEAT_INTERVAL, "50000"),
        DynamicConfigProblem::InvalidValue { .. }
    ));
    assert!(matches!(
        refused("share.session.timeout.ms", "50000"),
        DynamicConfigProblem::Unknown { .. }
    ));
    let session = described(&broker, &group, catalogue::GROUP_SESSION_TIMEOUT);
    assert_eq!(
        (session.value.as_str(), session.source),
        ("50000", Source::Group)
    );
    let other = described(
        &broker,
        &Scope::Group("other".into()),
        catalogue::GROUP_HEARTBEAT_INTERVAL,
    );
    assert_eq!(
        (other.value.as_str(), other.source),
        ("5000", Source::Default)
    );
    assert_eq!(
        broker.dynamic.group_timeouts(),
        [(
            "orders".to_owned(),
            GroupTimeouts {
                session_timeout_ms: Some(50_000),
                heartbeat_interval_ms: Some(2000),
            }
        )]
    );

    assert_eq!(
        broker
            .coordinator
            .group_timeouts("orders")
            .heartbeat_interval_ms,
        Some(2000)
    );

    let broker = Arc::try_unwrap(broker).ok().unwrap();
    broker.shutdown().unwrap();
    let broker = open(dir.path());
    assert_eq!(broker.dynamic.group_timeouts().len(), 1);
    // The coordinator has them again after a restart.
    assert_eq!(
        broker
            .coordinator
            .group_timeouts("orders")
            .session_timeout_ms,
        Some(50_000)
    );
    // Removing both forgets the group.
    alter(&broker, &group, delete(catalogue::GROUP_SESSION_TIMEOUT)).unwrap();
    alter(&broker, &group, delete(catalogue::GROUP_HEARTBEAT_INTERVAL)).unwrap();
    assert!(broker.dynamic.group_timeouts().is_empty());
    assert!(broker.dynamic.lock().groups.is_empty());
    assert!(broker.coordinator.group_timeouts("orders").is_empty());
}

#[test]
fn a_damaged_or_hand_edited_file_is_refused_at_open_by_name() {
    let groups = GroupsConfig::default();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DYNAMIC_FILE);
    for (text, expect) in [
        ("{\"version\": 1, \"broker\": {\"num.partitions\": \"3\"}}", "num.partitions"),
        ("{\"version\": 1, \"broker\": {\"log.retention.ms\": \"x\"}}", "log.retention.ms"),
        ("{\"version\": 2}", "version 2"),
        ("not json", "not a dynamic config file"),
        (
            "{\"version\": 1, \"groups\": {\"g\": {\"consumer.heartbeat.interval.ms\": \"60000\"}}}",
            "consumer.heartbeat.interval.ms",
        ),
    ] {
        std::fs::write(&path, text).unwrap();
        let err = DynamicConfigs::load(dir.path(), &groups).unwrap_err().to_string();
        assert!(err.contains(expect), "{text}: {err}");
    }
    std::fs::write(
        &path,
        "{\"version\": 1, \"cluster_default\": {\"log.retention.ms\": \"60000\"}}",
    )
    .unwrap();
    let loaded = DynamicConfigs::load(dir.path(), &groups).unwrap();
    assert_eq!(
        loaded.topic_defaults().values,
        Overrides::from([("retention.ms".to_owned(), "60000".to_owned())])
    );
    assert!(broker_spec("log.retention.ms").is_some());
}

/// A change of defaults and alters of a topic at once, from two threads:
/// neither deadlocks nor loses the other's change, and what a restart
/// reads back is what memory held.
#[test]
fn defaults_and_topic_alters_at_once_end_as_a_restart_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("t", 1, Overrides::new()).unwrap();
    broker.create_topic("u", 1, Overrides::new()).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..40u64 {
                let value = (60_000 + i).to_string();
                alter(&broker, &Scope::Broker, set("log.retention.ms", &value)).unwrap();
            }
        });
        s.spawn(|| {
            for i in 0..40u64 {
                let value = (1_048_576 + i).to_string();
                broker
                    .alter_topic("t", &[("segment.bytes".into(), Some(value))])
                    .unwrap();
            }
        });
    });
    let before: Vec<_> = ["t", "u"]
        .iter()
        .map(|n| broker.registry.get(n).unwrap().config.clone())
        .collect();
    assert_eq!(before[0].retention_ms, 60_039);
    assert_eq!(before[0].segment_bytes, 1_048_615);
    assert_eq!(before[1].retention_ms, 60_039);
    let broker = Arc::try_unwrap(broker).ok().unwrap();
    broker.shutdown().unwrap();
    let broker = open(dir.path());
    let after: Vec<_> = ["t", "u"]
        .iter()
        .map(|n| broker.registry.get(n).unwrap().config.clone())
        .collect();
    assert_eq!(before, after);
}
