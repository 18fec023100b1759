//! Tests of `config.rs`: loading the YAML file over the defaults and the
//! flags, every key's bounds and error path, the redacted effective config.
use super::*;
use tidelog_storage::FlushMode;

const FILE: &str = "test.yaml";

/// A config as the file it stands for: every key, section types
/// included (some hold fields, such as retention's clock, that have no
/// equality).
fn as_yaml(config: &Config) -> String {
    serde_yaml::to_string(config).unwrap()
}

fn load_str(text: &str) -> Result<Config, ConfigError> {
    let mut config = Config::parse_yaml(FILE, text)?;
    config.validate(FILE)?;
    Ok(config)
}

/// Asserts `text` fails naming `key` and a reason containing `why`.
fn assert_rejects(text: &str, key: &str, why: &str) {
    let err = load_str(text).unwrap_err();
    let message = err.to_string();
    let ConfigError::Invalid { key: got, .. } = &err else {
        panic!("expected an invalid key, got {message}");
    };
    assert_eq!(got, key, "{message}");
    assert!(
        message.starts_with(&format!("{FILE}: {key}: ")),
        "{message}"
    );
    assert!(message.contains(why), "expected {why:?} in {message}");
}

#[test]
fn shipped_broker_yaml_loads_and_matches_config_md() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/broker.yaml");
    let config = Config::load(Some(&path), &CliOverrides::default()).unwrap();
    let expected_topics = Config::parse_yaml(
        FILE,
        "topics:\n  - {name: events, partitions: 4, configs: {cleanup.policy: delete}}\n  - {name: users, partitions: 4, configs: {cleanup.policy: compact, delete.retention.ms: 86400000}}\n",
    )
    .unwrap()
    .topics;
    // The shipped file is OPERATIONS.md's: defaults plus the two example topics.
    assert_eq!(
        as_yaml(&config),
        as_yaml(&Config {
            topics: expected_topics,
            ..Config::default()
        })
    );
    assert_eq!(
        config.topics[1].configs["delete.retention.ms"].0,
        "86400000"
    );
}

#[test]
fn descriptors_store_reserve_is_read_and_validated() {
    let config = load_str("descriptors:\n  store_reserve: 256\n").unwrap();
    assert_eq!(config.descriptors.store_reserve, 256);
    assert_eq!(Config::default().descriptors.store_reserve, 1024);
    assert_rejects(
        "descriptors:\n  store_reserve: 1\n",
        "descriptors.store_reserve",
        "is not in [64,",
    );
    assert_rejects(
        "descriptors:\n  reserve: 100\n",
        "descriptors.reserve",
        "unknown field",
    );
}

#[test]
fn kafka_section_null_turns_it_off_and_bad_values_name_their_key() {
    let config = load_str("kafka:\n  listen: null\n").unwrap();
    assert_eq!(config.kafka.listen, None);
    let config = load_str("kafka:\n  advertised_host: broker.example\n").unwrap();
    assert_eq!(
        config.kafka.advertised_host.as_deref(),
        Some("broker.example")
    );
    assert_rejects(
        "kafka:\n  max_request_bytes: 10\n",
        "kafka.max_request_bytes",
        "1024",
    );
    assert_rejects(
        "kafka:\n  max_connections: 0\n",
        "kafka.max_connections",
        "must be",
    );
    assert_rejects(
        "kafka:\n  advertised_host: \"a b\"\n",
        "kafka.advertised_host",
        "host",
    );
    assert_rejects("kafka:\n  listen: 127.0.0.1:8080\n", "kafka.listen", "HTTP");
    assert_rejects(
        "kafka:\n  lisen: 127.0.0.1:1\n",
        "kafka.lisen",
        "unknown field",
    );
    // The flag wins over the file, `none` included.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("k.yaml");
    std::fs::write(&file, "kafka:\n  listen: 127.0.0.1:19092\n").unwrap();
    let off = CliOverrides {
        kafka_listen: Some(None),
        ..CliOverrides::default()
    };
    assert_eq!(Config::load(Some(&file), &off).unwrap().kafka.listen, None);
}

#[test]
fn defaults_are_config_md() {
    let config = load_str("").unwrap();
    assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.data_dir, PathBuf::from("./data"));
    assert_eq!(config.cluster_id, "tidelog");
    assert_eq!(config.admin_token, None);
    assert!(!config.auto_create_topics);
    assert_eq!(config.default_partitions, 4);
    assert_eq!(config.kafka.listen, Some("127.0.0.1:9092".parse().unwrap()));
    assert_eq!(config.kafka.advertised_host, None);
    assert_eq!(config.kafka.max_request_bytes, 104_857_600);
    assert_eq!(config.kafka.max_connections, 4096);
    assert_eq!(config.store.commitlog_segment_bytes, 1_073_741_824);
    assert_eq!(config.store.consume_queue_units_per_file, 300_000);
    assert_eq!(config.store.index_slots, 500_000);
    assert_eq!(config.store.index_entries, 2_000_000);
    assert_eq!(config.store.flush, FlushMode::Async);
    assert_eq!(config.store.flush_interval_ms, 500);
    assert_eq!(config.store.sync_checkpoint_interval_ms, 5_000);
    assert_eq!(config.store.max_message_bytes, 1_048_576);
    assert_eq!(config.store.sync_flush_timeout_ms, 5_000);
    assert_eq!(config.store.dispatch_stall_ms, 30_000);
    assert_eq!(config.retention.file_reserved_hours, 72);
    assert_eq!(config.retention.delete_when.hours(), [4]);
    assert_eq!(config.retention.check_interval_ms, 10_000);
    assert_eq!(config.retention.disk_max_used_ratio, 0.75);
    assert_eq!(config.retention.disk_force_clean_ratio, 0.85);
    assert_eq!(config.retention.disk_full_ratio, 0.90);
    assert_eq!(config.cleaner.threads, 1);
    assert_eq!(config.cleaner.dedupe_buffer_bytes, 134_217_728);
    assert_eq!(config.cleaner.backoff_ms, 15_000);
    assert_eq!(config.cleaner.io_max_bytes_per_second, None);
    assert_eq!(config.groups.offsets_retention_minutes, 10_080);
    assert_eq!(config.groups.initial_rebalance_delay_ms, 3_000);
    assert_eq!(config.groups.min_session_timeout_ms, 6_000);
    assert_eq!(config.groups.max_session_timeout_ms, 1_800_000);
    assert!(config.topics.is_empty());
    assert_eq!(
        as_yaml(&Config::load(None, &CliOverrides::default()).unwrap()),
        as_yaml(&config)
    );
}

#[test]
fn partial_sections_keep_other_defaults() {
    let config =
        load_str("store:\n  flush: sync\nretention:\n  delete_when: \"04;16;4\"\n").unwrap();
    assert_eq!(config.store.flush, FlushMode::Sync);
    assert_eq!(config.store.flush_interval_ms, 500);
    assert_eq!(config.retention.delete_when.hours(), [4, 16]);
    assert_eq!(config.retention.delete_when.to_string(), "04;16");
    assert_eq!(config.retention.file_reserved_hours, 72);
    assert_eq!(
        load_str("retention: {delete_when: 4}")
            .unwrap()
            .retention
            .delete_when
            .hours(),
        [4]
    );
}

#[test]
fn flags_override_the_file_which_overrides_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.yaml");
    std::fs::write(
        &path,
        "listen: 127.0.0.1:9000\ndata_dir: /from/file\ncluster_id: c1\nsecurity:\n  allow_unauthenticated_remote: true\n",
    )
    .unwrap();

    let from_file = Config::load(Some(&path), &CliOverrides::default()).unwrap();
    assert_eq!(from_file.listen.to_string(), "127.0.0.1:9000");
    assert_eq!(from_file.data_dir, PathBuf::from("/from/file"));

    let cli = CliOverrides {
        data_dir: Some("/from/flag".into()),
        listen: Some("0.0.0.0:1234".parse().unwrap()),
        kafka_listen: None,
        log_format: None,
    };
    let both = Config::load(Some(&path), &cli).unwrap();
    assert_eq!(both.listen.to_string(), "0.0.0.0:1234");
    assert_eq!(both.data_dir, PathBuf::from("/from/flag"));
    assert_eq!(
        both.cluster_id, "c1",
        "keys without a flag still come from the file"
    );
}

#[test]
fn missing_file_names_the_file() {
    let err = Config::load(
        Some(Path::new("/nonexistent/tidelog.yaml")),
        &CliOverrides::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/tidelog.yaml: cannot read"),
        "{err}"
    );
}

#[test]
fn unknown_keys_are_named_with_their_path() {
    assert_rejects("lisen: 127.0.0.1:1\n", "lisen", "unknown field");
    assert_rejects(
        "store:\n  flush_intervall_ms: 5\n",
        "store.flush_intervall_ms",
        "unknown field",
    );
    assert_rejects(
        "retention:\n  dlete_when: \"04\"\n",
        "retention.dlete_when",
        "unknown field",
    );
    assert_rejects(
        "topics:\n  - name: a\n    partition: 3\n",
        "topics[0].partition",
        "unknown field",
    );
}

#[test]
fn bad_types_and_enums_name_the_key() {
    assert_rejects(
        "store:\n  flush: sometimes\n",
        "store.flush",
        "unknown variant `sometimes`",
    );
    assert_rejects(
        "default_partitions: -1\n",
        "default_partitions",
        "expected u32",
    );
    assert_rejects(
        "cleaner:\n  threads: many\n",
        "cleaner.threads",
        "invalid type",
    );
}

#[test]
fn bad_listen_is_rejected() {
    assert_rejects("listen: localhost\n", "listen", "invalid socket address");
    assert_rejects(
        "listen: 127.0.0.1:99999\n",
        "listen",
        "invalid socket address",
    );
}

#[test]
fn bad_delete_when_is_rejected() {
    assert_rejects(
        "retention:\n  delete_when: \"24\"\n",
        "retention.delete_when",
        "not an hour 0..=23",
    );
    assert_rejects(
        "retention:\n  delete_when: \"04,16\"\n",
        "retention.delete_when",
        "\"04,16\"",
    );
    assert_rejects(
        "retention:\n  delete_when: \"04;\"\n",
        "retention.delete_when",
        "not an hour",
    );
    assert_rejects(
        "retention:\n  delete_when: \"\"\n",
        "retention.delete_when",
        "not an hour",
    );
}

#[test]
fn ratios_must_be_in_range_and_ordered() {
    assert_rejects(
        "retention:\n  disk_full_ratio: 1.5\n",
        "retention.disk_full_ratio",
        "not a ratio in (0, 1]",
    );
    assert_rejects(
        "retention:\n  disk_max_used_ratio: 0\n",
        "retention.disk_max_used_ratio",
        "not a ratio",
    );
    assert_rejects(
        "retention:\n  disk_max_used_ratio: .nan\n",
        "retention.disk_max_used_ratio",
        "not a ratio",
    );
    assert_rejects(
        "retention:\n  disk_force_clean_ratio: 0.95\n",
        "retention.disk_full_ratio",
        "must be disk_max_used_ratio <= disk_force_clean_ratio <= disk_full_ratio",
    );
    assert_rejects(
        "retention:\n  disk_max_used_ratio: 0.9\n",
        "retention.disk_force_clean_ratio",
        "is below retention.disk_max_used_ratio",
    );
    // Equal ratios are allowed.
    load_str(
        "retention: {disk_max_used_ratio: 0.9, disk_force_clean_ratio: 0.9, disk_full_ratio: 0.9}",
    )
    .unwrap();
}

#[test]
fn store_and_cleaner_bounds() {
    assert_rejects(
        "store: {commitlog_segment_bytes: 100}\n",
        "store.commitlog_segment_bytes",
        "not in [4096, ",
    );
    assert_rejects(
        "store: {flush_interval_ms: 0}\n",
        "store.flush_interval_ms",
        "not in [1, ",
    );
    assert_rejects(
        "store: {sync_checkpoint_interval_ms: 0}\n",
        "store.sync_checkpoint_interval_ms",
        "not in [1, ",
    );
    assert_rejects(
        "store: {sync_flush_timeout_ms: 0}\n",
        "store.sync_flush_timeout_ms",
        "not in [1, ",
    );
    assert_rejects(
        "store: {dispatch_stall_ms: 0}\n",
        "store.dispatch_stall_ms",
        "not in [1, ",
    );
    // The store's own bounds, which `serve` would hit at open.
    assert_rejects(
        "store: {index_slots: 100000000}\n",
        "store.index_slots",
        "not in [1, 67108864]",
    );
    assert_rejects(
        "store: {index_entries: 1}\n",
        "store.index_entries",
        "not in [2, ",
    );
    assert_rejects(
        "store: {consume_queue_units_per_file: 100000000}\n",
        "store.consume_queue_units_per_file",
        "not in [1, 67108864]",
    );
    // A record limit larger than a segment is clamped, not refused.
    load_str("store: {commitlog_segment_bytes: 65536, max_message_bytes: 65536}\n").unwrap();
    load_str("store: {commitlog_segment_bytes: 65536}\n").unwrap();
    assert_rejects(
        "cleaner: {threads: 0}\n",
        "cleaner.threads",
        "not in [1, 64]",
    );
    assert_rejects(
        "cleaner: {threads: 1000}\n",
        "cleaner.threads",
        "not in [1, 64]",
    );
    assert_rejects(
        "cleaner: {dedupe_buffer_bytes: 1000000000000}\n",
        "cleaner.dedupe_buffer_bytes",
        "at most 2 GiB per cleaner thread",
    );
    assert_rejects(
        "cleaner: {dedupe_buffer_bytes: 100}\n",
        "cleaner.dedupe_buffer_bytes",
        "not in [1024, ",
    );
    // Each thread may hold 2 GiB: four threads may hold 8.
    load_str("cleaner: {threads: 4, dedupe_buffer_bytes: 8589934592}\n").unwrap();
    assert_rejects(
        "cleaner: {io_max_bytes_per_second: 0}\n",
        "cleaner.io_max_bytes_per_second",
        "minimum is 1",
    );
    assert_rejects("admin_token: \"\"\n", "admin_token", "must not be empty");
    assert_rejects("cluster_id: \"a b\"\n", "cluster_id", "without spaces");
    assert_rejects("default_partitions: 0\n", "default_partitions", "1..=10000");
    load_str("store: {commitlog_segment_bytes: 65536, max_message_bytes: 4096}\n").unwrap();
}

/// The loader adds the file and the key and nothing else: for each
/// section, what the component's own `validate()` refuses (with the
/// same key and reason) is what `check-config` and `serve` refuse.
#[test]
fn each_section_is_checked_by_its_components_validate() {
    let reason_of = |text: &str| match load_str(text).unwrap_err() {
        ConfigError::Invalid { key, reason, .. } => (key, reason),
        other => panic!("{other}"),
    };
    let parsed = |text: &str| Config::parse_yaml(FILE, text).unwrap();

    let text = "store: {index_entries: 1}\n";
    let Err(StoreError::InvalidConfig { key, reason }) = parsed(text).store_config().validate()
    else {
        panic!("the store accepted {text:?}");
    };
    assert_eq!(reason_of(text), (key.to_string(), reason));

    let text = "retention: {disk_max_used_ratio: 0.95}\n";
    let Err(StoreError::InvalidConfig { key, reason }) = parsed(text).store_config().validate()
    else {
        panic!("the store accepted {text:?}");
    };
    assert_eq!(reason_of(text), (key.to_string(), reason));

    let text = "cleaner: {threads: 33, dedupe_buffer_bytes: 1024}\n";
    let Err(CleanerError::InvalidConfig { setting, reason }) = parsed(text).cleaner.validate()
    else {
        panic!("the cleaner accepted {text:?}");
    };
    assert_eq!(reason_of(text), (setting.to_string(), reason));

    let text = "topics:\n  - {name: a, configs: {segment.bytes: 10}}\n";
    let Err(BrokerError::InvalidConfig { key, reason }) = parsed(text).broker_config().validate()
    else {
        panic!("the broker accepted {text:?}");
    };
    assert_eq!(reason_of(text), (key, reason));

    let text = "http: {max_connections: 0}\n";
    let e = parsed(text).http.validate().unwrap_err();
    assert_eq!(reason_of(text), (e.key.to_string(), e.reason));
}

#[test]
fn bad_topic_names_are_rejected() {
    assert_rejects("topics:\n  - name: ../x\n", "topics[0].name", "'/'");
    assert_rejects(
        "topics:\n  - name: ok\n  - name: \"\"\n",
        "topics[1].name",
        "empty",
    );
    assert_rejects(
        "topics:\n  - name: a\n  - name: a\n",
        "topics[1].name",
        "already declared at topics[0]",
    );
    assert_rejects(
        "topics:\n  - name: a\n    partitions: 0\n",
        "topics[0].partitions",
        "1..=10000",
    );
    assert_rejects(
        "topics:\n  - partitions: 1\n",
        "topics[0]",
        "missing field `name`",
    );
}

#[test]
fn bad_topic_configs_name_the_config_key() {
    assert_rejects(
        "topics:\n  - name: a\n  - name: b\n    configs: {cleanup.policy: purge}\n",
        "topics[1].configs.cleanup.policy",
        "\"purge\" is not a cleanup policy",
    );
    assert_rejects(
        "topics:\n  - name: a\n    configs: {retention.mss: 5}\n",
        "topics[0].configs.retention.mss",
        "unknown config",
    );
    assert_rejects(
        "topics:\n  - name: a\n    configs: {segment.bytes: 10}\n",
        "topics[0].configs.segment.bytes",
        "out of range [1024",
    );
    assert_rejects(
        "topics:\n  - name: a\n    configs: {min.cleanable.dirty.ratio: 2}\n",
        "topics[0].configs.min.cleanable.dirty.ratio",
        "not a ratio",
    );
    assert_rejects(
        "topics:\n  - name: a\n    configs: {min.compaction.lag.ms: 10, max.compaction.lag.ms: 5}\n",
        "topics[0].configs.min.compaction.lag.ms",
        "greater than max.compaction.lag.ms",
    );
    assert_rejects(
        "topics:\n  - name: a\n    configs: {retention.ms: [1]}\n",
        "topics[0].configs.retention.ms",
        "expected a string or a number",
    );
}

#[test]
fn topic_configs_are_canonicalized_and_partitions_defaulted() {
    let config = load_str(
        "default_partitions: 3\ntopics:\n  - name: t\n    configs: {cleanup.policy: 'delete, compact', min.cleanable.dirty.ratio: 0.25}\n",
    )
    .unwrap();
    assert_eq!(config.topics[0].partitions, Some(3));
    assert_eq!(
        config.topics[0].configs["cleanup.policy"].0,
        "compact,delete"
    );
    assert_eq!(
        config.topics[0].configs["min.cleanable.dirty.ratio"].0,
        "0.25"
    );
}

#[test]
fn yaml_syntax_errors_name_a_position() {
    let err = load_str("store: {flush: sync\n").unwrap_err();
    assert!(err.to_string().starts_with(&format!("{FILE}: ")), "{err}");
    assert!(err.to_string().contains("line"), "{err}");
}

#[test]
fn effective_yaml_round_trips_and_redacts_the_token() {
    let config = load_str("admin_token: s3cret\nretention: {delete_when: '16;04'}\ntopics:\n  - {name: u, configs: {cleanup.policy: compact}}\n").unwrap();
    let yaml = config.to_redacted_yaml().unwrap();
    assert!(!yaml.contains("s3cret"), "{yaml}");
    assert!(yaml.contains("<redacted>"), "{yaml}");
    let mut again = load_str(&yaml).unwrap();
    again.admin_token = config.admin_token.clone();
    assert_eq!(as_yaml(&again), as_yaml(&config));
}

#[test]
fn http_limits_and_index_bounds_are_checked() {
    let config = load_str("http:\n  max_concurrent_requests: 8\n").unwrap();
    assert_eq!(config.http.max_concurrent_requests, 8);
    assert_eq!(config.http.max_request_bytes, 16 << 20);
    assert_rejects(
        "http:\n  max_request_bytes: 10\n",
        "http.max_request_bytes",
        "not in",
    );
    assert_rejects(
        "http:\n  max_concurrent_requests: 0\n",
        "http.max_concurrent_requests",
        "not in",
    );
    assert_rejects(
        "http:\n  max_records_per_request: 0\n",
        "http.max_records_per_request",
        "not in",
    );
    assert_rejects("http:\n  max_reqs: 1\n", "http.max_reqs", "unknown field");
    // The store's field is a u32: serde refuses more, naming the key.
    assert_rejects(
        "store:\n  index_slots: 4294967296\n",
        "store.index_slots",
        "expected u32",
    );
}

#[test]
fn http_connection_limits_are_checked_and_carried() {
    let config = load_str(
        "http:\n  max_connections: 7\n  max_inflight_bytes: 4096\n  max_request_bytes: 2048\n  \
         header_read_timeout_ms: 11\n  body_read_timeout_ms: 13\n  idle_timeout_ms: 17\n  \
         write_timeout_ms: 19\n",
    )
    .unwrap();
    let limits = config.listener_limits();
    assert_eq!(limits.max_connections, 7);
    assert_eq!(
        limits.header_read_timeout,
        std::time::Duration::from_millis(11)
    );
    assert_eq!(limits.idle_timeout, std::time::Duration::from_millis(17));
    assert_eq!(limits.write_timeout, std::time::Duration::from_millis(19));
    let api = config.api_settings();
    assert_eq!(api.max_inflight_bytes, 4096);
    assert_eq!(api.body_read_timeout, std::time::Duration::from_millis(13));
    let defaults = Config::default();
    assert_eq!(defaults.http.max_connections, 10_000);
    assert_eq!(defaults.http.write_timeout_ms, 30_000);
    assert_eq!(defaults.http.max_inflight_bytes, 256 << 20);
    assert_eq!(
        (
            defaults.http.header_read_timeout_ms,
            defaults.http.body_read_timeout_ms,
            defaults.http.idle_timeout_ms
        ),
        (10_000, 30_000, 60_000)
    );
    assert_rejects(
        "http:\n  max_connections: 0\n",
        "http.max_connections",
        "not in",
    );
    assert_rejects(
        "http:\n  max_inflight_bytes: 2047\n  max_request_bytes: 2048\n",
        "http.max_inflight_bytes",
        "less than http.max_request_bytes",
    );
    for key in [
        "header_read_timeout_ms",
        "body_read_timeout_ms",
        "idle_timeout_ms",
        "write_timeout_ms",
    ] {
        assert_rejects(
            &format!("http:\n  {key}: 0\n"),
            &format!("http.{key}"),
            "not in",
        );
    }
}

/// The consumer-instance keys of `http:` reach the API's settings
/// (check-config and serve load the same way) and are checked.
#[test]
fn consumer_instance_keys_are_checked_and_carried() {
    let config = load_str(
        "http:\n  advertised_url: https://proxy.example:8443\n  consumer_instance_timeout_ms: 60000\n  \
         max_consumer_instances: 7\n",
    )
    .unwrap();
    let api = config.api_settings();
    assert_eq!(api.base_url, "https://proxy.example:8443");
    assert_eq!(api.consumers.instance_timeout_ms, 60_000);
    assert_eq!(api.consumers.max_instances, 7);
    let defaults = Config::default().api_settings();
    assert_eq!(
        (
            defaults.advertised_url.as_deref(),
            defaults.consumers.instance_timeout_ms,
            defaults.consumers.max_instances
        ),
        (None, 300_000, 1000)
    );
    assert_rejects(
        "http:\n  advertised_url: proxy:8443\n",
        "http.advertised_url",
        "not an http",
    );
    assert_rejects(
        "http:\n  max_consumer_instances: 0\n",
        "http.max_consumer_instances",
        "not in",
    );
}

#[test]
fn store_and_api_settings_carry_every_key() {
    let mut config = load_str(
        "cluster_id: c1\nadmin_token: t\nauto_create_topics: true\ndefault_partitions: 2\n\
         store:\n  commitlog_segment_bytes: 65536\n  consume_queue_units_per_file: 7\n  index_slots: 11\n  \
         index_entries: 13\n  flush: sync\n  flush_interval_ms: 17\n  max_message_bytes: 19\n  \
         sync_flush_timeout_ms: 23\n  dispatch_stall_ms: 29\n  recovery_mode: truncate\n  \
         sync_checkpoint_interval_ms: 31\n\
         retention:\n  file_reserved_hours: 5\n  delete_when: \"16;04\"\n  check_interval_ms: 300\n  \
         disk_max_used_ratio: 0.5\n  disk_force_clean_ratio: 0.6\n  disk_full_ratio: 0.95\n\
         http:\n  max_request_bytes: 2048\n  max_records_per_request: 3\n  max_concurrent_requests: 5\n\
         topics:\n  - name: a\n    configs: {cleanup.policy: compact}\n",
    )
    .unwrap();
    config.data_dir = PathBuf::from("/d");
    let store = config.store_config();
    assert_eq!(store.data_dir, PathBuf::from("/d"));
    assert_eq!(store.commitlog_segment_bytes, 65536);
    assert_eq!(store.consume_queue_units_per_file, 7);
    assert_eq!(store.index_slots, 11);
    assert_eq!(store.index_entries, 13);
    assert_eq!(store.flush, tidelog_storage::FlushMode::Sync);
    assert_eq!(store.flush_interval_ms, 17);
    assert_eq!(store.max_message_bytes, 19);
    assert_eq!(store.sync_flush_timeout_ms, 23);
    assert_eq!(store.dispatch_stall_ms, 29);
    assert_eq!(store.sync_checkpoint_interval_ms, 31);
    assert_eq!(
        store.recovery_mode,
        tidelog_storage::RecoveryMode::TruncateAtCorruption
    );
    assert_eq!(
        Config::default().store_config().recovery_mode,
        tidelog_storage::RecoveryMode::Strict
    );
    let r = &store.retention;
    assert_eq!(r.file_reserved_hours, 5);
    assert_eq!(r.delete_when.hours(), [4, 16]);
    assert_eq!(r.check_interval_ms, 300);
    assert_eq!(
        (
            r.disk_max_used_ratio,
            r.disk_force_clean_ratio,
            r.disk_full_ratio
        ),
        (0.5, 0.6, 0.95)
    );
    assert_eq!(r.disk_check_every_ms(), 300, "at most check_interval_ms");
    let defaults = Config::default().store_config().retention;
    assert_eq!(defaults.disk_check_every_ms(), 1000, "at most a second");
    assert_eq!(defaults.delete_when.hours(), [4]);
    let api = config.api_settings();
    assert_eq!(api.broker.cluster_id, "c1");
    assert_eq!(api.admin_token.as_deref(), Some("t"));
    assert!(api.broker.auto_create_topics);
    assert_eq!(api.broker.default_partitions, 2);
    assert_eq!(
        (
            api.max_request_bytes,
            api.max_records_per_request,
            api.max_concurrent_requests
        ),
        (2048, 3, 5)
    );
    let declared = api.broker.declared_topics();
    assert_eq!(declared.len(), 1);
    assert_eq!(declared[0].partitions, 2, "default_partitions filled in");
    assert_eq!(
        declared[0]
            .overrides
            .get("cleanup.policy")
            .map(String::as_str),
        Some("compact")
    );
}

/// `tiered:` reaches the broker's config as written; its own check and
/// the topic rule that needs it refuse what they should, naming the key.
#[test]
fn tiered_section_is_carried_and_checked() {
    let config = load_str(
        "tiered:\n  url: file:///tmp/tidelog-bucket\n  upload_interval_ms: 500\n  object_bytes: 1048576\n",
    )
    .unwrap();
    let tiered = config.broker_config().tiered;
    assert_eq!(tiered.url.as_deref(), Some("file:///tmp/tidelog-bucket"));
    assert_eq!(
        (tiered.upload_interval_ms, tiered.object_bytes),
        (500, 1 << 20)
    );
    assert!(!load_str("").unwrap().broker_config().tiered.enabled());
    assert_rejects("tiered:\n  url: ftp://x/y\n", "tiered", "url");
    assert_rejects("tiered:\n  bucket: x\n", "tiered.bucket", "unknown field");
    assert_rejects(
        "topics:\n  - name: t\n    configs:\n      remote.storage.enable: true\n",
        "topics[0].configs.remote.storage.enable",
        "tiered.url",
    );
    load_str("tiered:\n  url: file:///tmp/b\ntopics:\n  - name: t\n    configs:\n      remote.storage.enable: true\n").unwrap();
}

/// `groups:` reaches the broker's config as written, and the
/// coordinator's own check refuses bad values naming `groups.<key>`.
#[test]
fn groups_section_is_carried_and_checked() {
    let config = load_str(
        "groups:\n  offsets_retention_minutes: 60\n  initial_rebalance_delay_ms: 0\n  min_session_timeout_ms: 100\n  max_session_timeout_ms: 200\n",
    )
    .unwrap();
    let groups = config.broker_config().groups;
    assert_eq!(groups.offsets_retention_minutes, 60);
    assert_eq!(groups.initial_rebalance_delay_ms, 0);
    assert_eq!(groups.min_session_timeout_ms, 100);
    assert_eq!(groups.max_session_timeout_ms, 200);
    assert_eq!(config.api_settings().broker.groups, groups);
    assert_rejects(
        "groups: {offsets_retention_minutes: 0}\n",
        "groups.offsets_retention_minutes",
        "at least 1",
    );
    assert_rejects(
        "groups: {min_session_timeout_ms: 7000, max_session_timeout_ms: 6500}\n",
        "groups.max_session_timeout_ms",
        "below min_session_timeout_ms",
    );
    assert_rejects(
        "groups: {min_session_timeout_ms: 0}\n",
        "groups.min_session_timeout_ms",
        "at least 1",
    );
    assert_rejects(
        "groups: {session_timeout_ms: 1}\n",
        "groups.session_timeout_ms",
        "unknown field",
    );
    assert_rejects(
        "groups: {initial_rebalance_delay_ms: soon}\n",
        "groups.initial_rebalance_delay_ms",
        "invalid type",
    );
}

#[test]
fn cleaner_section_maps_to_the_cleaner_config() {
    let config = load_str(
        "cleaner:\n  threads: 3\n  dedupe_buffer_bytes: 65536\n  backoff_ms: 250\n  io_max_bytes_per_second: 1000000\n",
    )
    .unwrap();
    let c = config.cleaner_config();
    assert_eq!(
        (c.threads, c.dedupe_buffer_bytes, c.backoff_ms),
        (3, 65536, 250)
    );
    assert_eq!(c.io_max_bytes_per_second, Some(1_000_000));
    let d = Config::default().cleaner_config();
    let want = tidelog_cleaner::CleanerConfig::default();
    assert_eq!(
        (
            d.threads,
            d.dedupe_buffer_bytes,
            d.backoff_ms,
            d.io_max_bytes_per_second
        ),
        (
            want.threads,
            want.dedupe_buffer_bytes,
            want.backoff_ms,
            want.io_max_bytes_per_second
        ),
        "OPERATIONS.md's defaults are the cleaner's"
    );
}

#[test]
fn log_format_is_text_unless_set() {
    assert_eq!(load_str("").unwrap().log_format, LogFormat::Text);
    assert_eq!(
        load_str("log_format: json\n").unwrap().log_format,
        LogFormat::Json
    );
    assert_rejects("log_format: xml\n", "log_format", "unknown variant");
    let flag = CliOverrides {
        log_format: Some(LogFormat::Json),
        ..CliOverrides::default()
    };
    let config = Config::load(None, &flag).unwrap();
    assert_eq!(config.log_format, LogFormat::Json, "the flag wins");
}
