//! Tests of the topic config table and its rules.

use super::*;

fn reason(err: BrokerError) -> (String, String) {
    match err {
        BrokerError::InvalidTopicConfig { name, reason } => (name, reason),
        other => panic!("expected InvalidTopicConfig, got {other:?}"),
    }
}

fn overrides(pairs: &[(&str, &str)]) -> Overrides {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn compact_config_maps_every_cleaner_setting() {
    assert_eq!(
        TopicConfig::default().compact_config(),
        tidelog_cleaner::CompactTopicConfig::default(),
        "Kafka's defaults agree on both sides"
    );
    let c = TopicConfig::from_overrides(&overrides(&[
        ("cleanup.policy", "delete,compact"),
        ("segment.bytes", "4096"),
        ("segment.ms", "9223372036854775807"),
        ("min.cleanable.dirty.ratio", "0.25"),
        ("min.compaction.lag.ms", "10"),
        ("max.compaction.lag.ms", "20"),
        ("delete.retention.ms", "30"),
        ("retention.ms", "-1"),
        ("retention.bytes", "50"),
    ]))
    .unwrap()
    .compact_config();
    assert_eq!(
        c,
        tidelog_cleaner::CompactTopicConfig {
            segment_bytes: 4096,
            segment_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.25,
            min_compaction_lag_ms: 10,
            max_compaction_lag_ms: 20,
            delete_retention_ms: 30,
            delete_too: true,
            retention_ms: -1,
            retention_bytes: 50,
        }
    );
}

#[test]
fn defaults_table_agrees_with_typed_defaults() {
    let from_table = TopicConfig::from_overrides(
        &SPECS
            .iter()
            .map(|s| (s.name.to_string(), s.default.to_string()))
            .collect(),
    )
    .unwrap();
    assert_eq!(from_table, TopicConfig::default());
    for spec in SPECS {
        assert_eq!(
            validate(spec.name, spec.default).unwrap(),
            spec.default,
            "{}",
            spec.name
        );
    }
}

#[test]
fn cleanup_policy_spellings() {
    assert_eq!(validate("cleanup.policy", "delete").unwrap(), "delete");
    assert_eq!(validate("cleanup.policy", "compact").unwrap(), "compact");
    assert_eq!(
        validate("cleanup.policy", "compact,delete").unwrap(),
        "compact,delete"
    );
    assert_eq!(
        validate("cleanup.policy", "delete, compact").unwrap(),
        "compact,delete"
    );
    for bad in ["", "Compact", "compact,compact", "compact,", "purge"] {
        let (name, why) = reason(validate("cleanup.policy", bad).unwrap_err());
        assert_eq!(name, "cleanup.policy");
        assert!(!why.is_empty());
    }
    assert!(CleanupPolicy::CompactDelete.compacts());
    assert!(!CleanupPolicy::Delete.compacts());
}

#[test]
fn tiered_configs_follow_kafkas_rules() {
    assert_eq!(validate("remote.storage.enable", "TRUE").unwrap(), "true");
    assert!(
        reason(validate("remote.storage.enable", "yes").unwrap_err())
            .1
            .contains("not a boolean")
    );
    assert!(reason(validate("local.retention.ms", "-3").unwrap_err())
        .1
        .contains("-2 the same as retention"));
    let c = TopicConfig::from_overrides(&overrides(&[
        ("remote.storage.enable", "true"),
        ("retention.ms", "1000"),
        ("local.retention.bytes", "10"),
    ]))
    .unwrap();
    assert!(c.remote_storage_enable);
    assert_eq!(c.local_retention(), (Some(1000), Some(10)));
    assert_eq!(c.remote_retention(), (Some(1000), None));
    // Compact topics stay local, as in Kafka.
    for policy in ["compact", "compact,delete"] {
        let (name, why) = reason(
            TopicConfig::from_overrides(&overrides(&[
                ("remote.storage.enable", "true"),
                ("cleanup.policy", policy),
            ]))
            .unwrap_err(),
        );
        assert_eq!(name, "remote.storage.enable");
        assert!(why.contains("cleanup.policy=delete"), "{why}");
    }
    // The local part may not outlast the whole.
    for (local, value) in [("local.retention.ms", "2000"), ("local.retention.ms", "-1")] {
        let (name, why) = reason(
            TopicConfig::from_overrides(&overrides(&[
                ("remote.storage.enable", "true"),
                ("retention.ms", "1000"),
                (local, value),
            ]))
            .unwrap_err(),
        );
        assert_eq!(name, local);
        assert!(why.contains("more than retention.ms 1000"), "{why}");
    }
    // Without remote storage the local keys are inert and not checked.
    let plain = TopicConfig::from_overrides(&overrides(&[
        ("retention.ms", "1000"),
        ("local.retention.ms", "2000"),
    ]))
    .unwrap();
    assert!(!plain.remote_storage_enable);
}

#[test]
fn integer_bounds_follow_kafka() {
    assert_eq!(validate("retention.ms", "-1").unwrap(), "-1");
    assert_eq!(validate("retention.bytes", "42").unwrap(), "42");
    assert_eq!(validate("max.message.bytes", "1").unwrap(), "1");
    assert!(reason(validate("max.message.bytes", "0").unwrap_err())
        .1
        .contains("[1, 2147483647]"));
    assert!(reason(validate("retention.ms", "-2").unwrap_err())
        .1
        .contains("-1 means unbounded"));
    assert!(reason(validate("delete.retention.ms", "-1").unwrap_err())
        .1
        .contains("out of range"));
    assert!(reason(validate("segment.bytes", "1023").unwrap_err())
        .1
        .contains("[1024, 2147483647]"));
    assert_eq!(validate("segment.bytes", "1024").unwrap(), "1024");
    assert!(reason(validate("segment.bytes", "2147483648").unwrap_err())
        .1
        .contains("out of range"));
    assert!(reason(validate("segment.ms", "0").unwrap_err())
        .1
        .contains("out of range"));
    assert!(reason(validate("max.compaction.lag.ms", "-1").unwrap_err())
        .1
        .contains("out of range"));
    assert!(reason(validate("max.message.bytes", "1.5").unwrap_err())
        .1
        .contains("not an integer"));
    assert!(
        reason(validate("retention.ms", "9223372036854775808").unwrap_err())
            .1
            .contains("not an integer")
    );
}

#[test]
fn ratio_is_zero_to_one() {
    assert_eq!(validate("min.cleanable.dirty.ratio", "0").unwrap(), "0");
    assert_eq!(validate("min.cleanable.dirty.ratio", "1").unwrap(), "1");
    assert_eq!(
        validate("min.cleanable.dirty.ratio", "0.25").unwrap(),
        "0.25"
    );
    assert_eq!(validate("min.cleanable.dirty.ratio", "0.000").unwrap(), "0");
    assert_eq!(validate("min.cleanable.dirty.ratio", "1.0").unwrap(), "1");
    for bad in [
        "-0.1", "1.01", "NaN", "inf", "half", "1e-400", "5e-1", "+0.5", ".5", "0.", "",
    ] {
        let (name, why) = reason(validate("min.cleanable.dirty.ratio", bad).unwrap_err());
        assert_eq!(name, "min.cleanable.dirty.ratio");
        assert!(why.contains(&format!("{bad:?}")), "{why}");
    }
    // An f64 rounds it to 0, but it is not 0.
    let tiny = format!("0.{}1", "0".repeat(400));
    assert!(
        reason(validate("min.cleanable.dirty.ratio", &tiny).unwrap_err())
            .1
            .contains("too small")
    );
}

#[test]
fn values_with_whitespace_around_them_are_refused() {
    for (name, value) in [
        ("retention.bytes", " 42 "),
        ("retention.ms", "1000\n"),
        ("min.cleanable.dirty.ratio", " 0.5"),
        ("cleanup.policy", "compact "),
        ("segment.ms", "\t3600000"),
    ] {
        let (at, why) = reason(validate(name, value).unwrap_err());
        assert_eq!(at, name);
        assert!(why.contains("whitespace"), "{why}");
    }
    // Kafka's list syntax: spaces around commas.
    assert_eq!(
        validate("cleanup.policy", "delete , compact").unwrap(),
        "compact,delete"
    );
}

#[test]
fn unknown_names_are_rejected_listing_the_known_ones() {
    let (name, why) = reason(validate("cleanup.polcy", "delete").unwrap_err());
    assert_eq!(name, "cleanup.polcy");
    assert!(
        why.contains("unknown config") && why.contains("cleanup.policy"),
        "{why}"
    );
}

#[test]
fn apply_is_all_or_nothing() {
    let mut current = overrides(&[("cleanup.policy", "compact")]);
    apply(
        &mut current,
        [("retention.ms", Some("1000")), ("cleanup.policy", None)],
    )
    .unwrap();
    assert_eq!(current, overrides(&[("retention.ms", "1000")]));

    let before = current.clone();
    let err = apply(
        &mut current,
        [("segment.ms", Some("5")), ("bogus", Some("1"))],
    )
    .unwrap_err();
    assert_eq!(reason(err).0, "bogus");
    assert_eq!(current, before, "a failed batch changes nothing");
    let err = apply(&mut current, [("bogus", None)]).unwrap_err();
    assert_eq!(reason(err).0, "bogus");
}

#[test]
fn min_compaction_lag_may_not_exceed_max() {
    let mut current = Overrides::new();
    let err = apply(
        &mut current,
        [
            ("min.compaction.lag.ms", Some("10")),
            ("max.compaction.lag.ms", Some("5")),
        ],
    )
    .unwrap_err();
    assert!(reason(err).1.contains("greater than max.compaction.lag.ms"));
    assert!(current.is_empty());
}

#[test]
fn effective_config_and_entries_reflect_overrides() {
    let current = overrides(&[
        ("cleanup.policy", "compact"),
        ("delete.retention.ms", "86400000"),
    ]);
    let config = TopicConfig::from_overrides(&current).unwrap();
    assert_eq!(config.cleanup_policy, CleanupPolicy::Compact);
    assert_eq!(config.delete_retention_ms, 86_400_000);
    assert_eq!(config.segment_bytes, 1 << 30);

    let rows = entries(&Defaults::new(), &current);
    assert_eq!(rows.len(), SPECS.len());
    let policy = rows.iter().find(|r| r.name == "cleanup.policy").unwrap();
    assert_eq!(
        (
            policy.value.as_str(),
            policy.is_default,
            policy.default.as_str()
        ),
        ("compact", false, "delete")
    );
    assert_eq!(policy.source, ValueSource::DynamicTopicConfig);
    // Overridden with the default value is still an override, as in Kafka.
    let delete_retention = rows
        .iter()
        .find(|r| r.name == "delete.retention.ms")
        .unwrap();
    assert!(!delete_retention.is_default);
    let ratio = rows
        .iter()
        .find(|r| r.name == "min.cleanable.dirty.ratio")
        .unwrap();
    assert_eq!(
        (
            ratio.value.as_str(),
            ratio.is_default,
            ratio.default.as_str()
        ),
        ("0.5", true, "0.5")
    );
}

/// Every topic config Kafka 3.x and 4.x define is known, validated as
/// Kafka validates it, and canonical as written; the ones without effect
/// here say why.
#[test]
fn every_kafka_topic_config_is_accepted_and_validated_as_kafka_does() {
    let kafka = [
        "cleanup.policy",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
    ];
    for name in kafka {
        let spec = spec(name).unwrap_or_else(|| panic!("{name} is not known"));
        assert_eq!(
            validate(name, spec.default).unwrap(),
            spec.default,
            "{name}"
        );
        if let Effect::Accepted { why } = spec.effect {
            assert!(why.len() > 10, "{name} says why it has no effect");
        }
    }
    assert_eq!(SPECS.len(), kafka.len(), "no config beyond Kafka's");

    let ok = |name: &str, value: &str, canonical: &str| {
        assert_eq!(validate(name, value).unwrap(), canonical, "{name}={value}");
    };
    let bad = |name: &str, value: &str| {
        let (n, why) = reason(validate(name, value).unwrap_err());
        assert_eq!(n, name);
        assert!(!why.is_empty());
    };
    ok("message.timestamp.type", "LogAppendTime", "LogAppendTime");
    bad("message.timestamp.type", "logappendtime");
    ok("compression.type", "zstd", "zstd");
    bad("compression.type", "brotli");
    ok("compression.gzip.level", "-1", "-1");
    ok("compression.gzip.level", "9", "9");
    bad("compression.gzip.level", "0");
    bad("compression.zstd.level", "23");
    ok("message.format.version", "0.10.2", "0.10.2");
    ok("message.format.version", "3.0-IV1", "3.0-IV1");
    ok("message.format.version", "2.8", "2.8");
    ok("message.format.version", "0.10.0.0", "0.10.0.0");
    bad("message.format.version", "three");
    bad("message.format.version", "3");
    bad("message.format.version", "3.0-IV");
    ok("leader.replication.throttled.replicas", "*", "*");
    ok("leader.replication.throttled.replicas", "", "");
    ok(
        "follower.replication.throttled.replicas",
        "0:0, 1:0",
        "0:0,1:0",
    );
    bad("follower.replication.throttled.replicas", "0:a");
    bad("min.insync.replicas", "0");
    bad("flush.messages", "0");
    ok("preallocate", "TRUE", "true");
}

/// KIP-937's two bounds, each falling back to the deprecated
/// difference bound when left unbounded; the timestamp type and
/// min.insync.replicas are typed.
#[test]
fn timestamp_bounds_and_types_are_read_as_kafka_reads_them() {
    let c = |pairs: &[(&str, &str)]| TopicConfig::from_overrides(&overrides(pairs)).unwrap();
    assert_eq!(c(&[]).timestamp_bounds(), (None, None));
    assert_eq!(
        c(&[("message.timestamp.before.max.ms", "10")]).timestamp_bounds(),
        (Some(10), None)
    );
    assert_eq!(
        c(&[
            ("message.timestamp.difference.max.ms", "7"),
            ("message.timestamp.after.max.ms", "3"),
        ])
        .timestamp_bounds(),
        (Some(7), Some(3))
    );
    let stamped = c(&[
        ("message.timestamp.type", "LogAppendTime"),
        ("min.insync.replicas", "2"),
    ]);
    assert_eq!(stamped.timestamp_type, TimestampType::LogAppendTime);
    assert_eq!(stamped.min_insync_replicas, 2);
    assert_eq!(c(&[]).timestamp_type, TimestampType::CreateTime);
}

#[test]
fn cluster_wide_defaults_yield_to_a_topic_s_own_value() {
    let defaults = Defaults {
        values: overrides(&[("retention.ms", "60000"), ("segment.bytes", "1048576")]),
        this_broker: ["segment.bytes".to_owned()].into(),
    };
    let own = overrides(&[("retention.ms", "120000")]);
    let config = TopicConfig::resolve(&defaults, &own).unwrap();
    assert_eq!(config.retention_ms, 120_000);
    assert_eq!(config.segment_bytes, 1 << 20);
    assert_eq!(
        TopicConfig::resolve(&Defaults::new(), &own).unwrap(),
        TopicConfig::from_overrides(&own).unwrap()
    );

    let rows = entries(&defaults, &own);
    let row = |name: &str| rows.iter().find(|r| r.name == name).unwrap().clone();
    let retention = row("retention.ms");
    assert_eq!(
        (
            retention.value.as_str(),
            retention.default.as_str(),
            retention.source
        ),
        ("120000", "60000", ValueSource::DynamicTopicConfig)
    );
    let segment = row("segment.bytes");
    assert_eq!(
        (segment.value.as_str(), segment.is_default, segment.source),
        ("1048576", true, ValueSource::DynamicBrokerConfig)
    );
    assert_eq!(row("flush.ms").source, ValueSource::DefaultConfig);

    // A combination that only the two together make is refused.
    let lag = Defaults {
        values: overrides(&[("max.compaction.lag.ms", "1000")]),
        ..Defaults::new()
    };
    let own_min = overrides(&[("min.compaction.lag.ms", "5000")]);
    assert!(TopicConfig::resolve(&lag, &own_min).is_err());
}
