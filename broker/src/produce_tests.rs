use tidelog_storage::commit_log::format::{HEADER_COUNT_MAX, HEADER_NAME_MAX};

use super::*;
use crate::config::BrokerConfig;
use crate::groups::{CommitValue, OffsetCommit};
use crate::registry::CONSUMER_OFFSETS_TOPIC;
use crate::test_support::{compact, open, open_with};
use crate::topic_config::Overrides;

fn record(key: Option<&str>, value: &str) -> ProduceRecord {
    ProduceRecord {
        key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        partition: None,
        headers: Vec::new(),
        timestamp_ms: None,
    }
}

/// The one timestamp rule: the epoch or later; the rest is refused
/// with the value.
#[test]
fn timestamps_are_the_epoch_or_later() {
    for ok in [0, 1, 1_700_000_000_000, i64::MAX] {
        assert_eq!(check_timestamp_ms(ok), Ok(ok));
    }
    for bad in [-1, -2, i64::MIN] {
        assert_eq!(
            check_timestamp_ms(bad),
            Err(BadTimestamp { timestamp_ms: bad })
        );
    }
}

fn end_offsets(broker: &Broker, topic: &str) -> Vec<u64> {
    let t = broker.registry.require(topic).unwrap();
    (0..t.partitions.get())
        .map(|p| crate::next_offset(&broker.store, topic, p))
        .collect()
}

/// A compact topic needs a key on every record; a keyless one refuses
/// the whole request, naming the record, and writes nothing.
#[test]
fn a_keyless_record_on_a_compact_topic_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("users", 1, compact()).unwrap();
    let refused = broker
        .produce_blocking(
            "users",
            None,
            vec![record(Some("a"), "1"), record(None, "2")],
        )
        .unwrap_err();
    match refused {
        BrokerError::KeyRequired {
            index,
            topic,
            policy,
            indexes,
        } => assert_eq!(
            (index, topic.as_str(), policy, indexes),
            (1, "users", "compact", vec![1])
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(end_offsets(&broker, "users"), [0]);
    // With keys it is written; a delete topic takes keyless records.
    let produced = broker
        .produce_blocking("users", None, vec![record(Some("a"), "1")])
        .unwrap();
    assert_eq!(produced.offsets().collect::<Vec<_>>(), [(0, 0)]);
    broker.create_topic("events", 1, Overrides::new()).unwrap();
    broker
        .produce_blocking("events", None, vec![record(None, "x")])
        .unwrap();
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// The record limits, checked for every record before anything is
/// written: the store's header bounds and the smaller of the topic's
/// `max.message.bytes` and the store's limit.
#[test]
fn the_record_limits_refuse_the_whole_request() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let small = Overrides::from([("max.message.bytes".to_string(), "100".to_string())]);
    broker.create_topic("small", 1, small).unwrap();
    let ok = record(Some("k"), "v");
    // Key 1 + value 100 bytes: one over the topic's limit.
    let mut big = record(Some("k"), &"x".repeat(100));
    let too_large = broker
        .produce_blocking("small", None, vec![ok.clone(), big.clone()])
        .unwrap_err();
    match &too_large {
        BrokerError::RecordTooLarge {
            index,
            size,
            limit,
            limit_source,
        } => {
            assert_eq!((*index, *size, *limit), (1, 101, 100));
            assert_eq!(limit_source, "topic \"small\" max.message.bytes");
        }
        other => panic!("{other:?}"),
    }
    // Key 1 + value 99: exactly the limit, which fits.
    big.value = Some(Bytes::from("x".repeat(99)));
    let mut many = ok.clone();
    many.headers = vec![("h".to_string(), Some(Bytes::new())); HEADER_COUNT_MAX + 1];
    assert!(matches!(
        broker.produce_blocking("small", None, vec![big.clone(), many]),
        Err(BrokerError::TooManyHeaders { index: 1, count, max: HEADER_COUNT_MAX })
            if count == HEADER_COUNT_MAX + 1
    ));
    let mut long_name = ok.clone();
    long_name.headers = vec![
        ("fine".to_string(), Some(Bytes::new())),
        ("n".repeat(HEADER_NAME_MAX + 1), Some(Bytes::new())),
    ];
    assert!(matches!(
        broker.produce_blocking("small", None, vec![long_name]),
        Err(BrokerError::HeaderNameTooLong {
            index: 0,
            header: 1,
            max: HEADER_NAME_MAX
        })
    ));
    assert_eq!(end_offsets(&broker, "small"), [0], "nothing was written");
    broker
        .produce_blocking("small", None, vec![ok, big])
        .unwrap();
    assert_eq!(end_offsets(&broker, "small"), [2]);
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// Without a partition, keyed records go where murmur2 puts their key
/// (Kafka's partitioner) and keyless ones round-robin; a partition
/// given for the request applies to every record, and a record naming
/// another is refused. Offsets come back in request order.
#[test]
fn records_are_partitioned_by_key_round_robin_or_the_requested_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("t", 4, Overrides::new()).unwrap();
    let partitions = std::num::NonZeroU32::new(4).unwrap();
    let keys = ["a", "b", "c", "d", "e", "f"];
    let produced = broker
        .produce_blocking(
            "t",
            None,
            keys.iter().map(|k| record(Some(k), "v")).collect(),
        )
        .unwrap();
    let got: Vec<u32> = produced.offsets().map(|(p, _)| p).collect();
    let want: Vec<u32> = keys
        .iter()
        .map(|k| partition_for_key(k.as_bytes(), partitions))
        .collect();
    assert_eq!(got, want);
    assert_eq!(produced.len(), keys.len());
    assert_eq!(produced.payload_bytes(), 12);
    let keyless = broker
        .produce_blocking("t", None, (0..8).map(|_| record(None, "v")).collect())
        .unwrap();
    let mut counts = [0; 4];
    for (p, _) in keyless.offsets() {
        counts[p as usize] += 1;
    }
    assert_eq!(counts, [2, 2, 2, 2], "round-robin spreads evenly");
    let mut own = record(Some("a"), "v");
    own.partition = Some(3);
    let to_2 = broker
        .produce_blocking(
            "t",
            Some(2),
            vec![record(Some("a"), "v"), record(None, "w")],
        )
        .unwrap();
    let offsets: Vec<(u32, u64)> = to_2.offsets().collect();
    assert_eq!(offsets[0].0, 2);
    assert_eq!(offsets[1], (2, offsets[0].1 + 1));
    assert!(matches!(
        broker.produce_blocking("t", Some(2), vec![record(None, "v"), own.clone()]),
        Err(BrokerError::PartitionMismatch {
            index: 1,
            own: 3,
            requested: 2
        })
    ));
    own.partition = Some(4);
    assert!(matches!(
        broker.produce_blocking("t", None, vec![own]),
        Err(BrokerError::UnknownPartition { partition: 4, .. })
    ));
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// An unknown topic is refused, or created with the partitions given;
/// an internal topic is never written by a produce.
#[test]
fn unknown_topics_are_auto_created_only_when_asked_and_internal_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    assert_eq!(
        broker.store.config().flush,
        tidelog_storage::FlushMode::Async
    );
    assert!(matches!(
        broker.produce_blocking("new", None, vec![record(None, "v")]),
        Err(BrokerError::UnknownTopic { .. })
    ));
    assert!(broker.registry.get("new").is_none());
    let auto = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        auto_create_topics: true,
        default_partitions: 3,
        ..BrokerConfig::default()
    };
    let auto_broker = open_with(auto.path(), &config);
    auto_broker
        .produce_blocking("new", None, vec![record(None, "v")])
        .unwrap();
    assert_eq!(
        auto_broker
            .registry
            .require("new")
            .unwrap()
            .partitions
            .get(),
        3
    );
    Arc::try_unwrap(auto_broker).unwrap().shutdown().unwrap();
    assert!(matches!(
        broker.produce_blocking(CONSUMER_OFFSETS_TOPIC, None, vec![record(Some("k"), "v")]),
        Err(BrokerError::InternalTopic { .. })
    ));
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// Records built one by one for one partition (Kafka's shape) go
/// through the door with the checks and answers of any produce to that
/// partition: an internal topic, an unknown partition and a keyless
/// record on a compact topic (named by its index) are refused with
/// nothing written; otherwise the records land in order with the same
/// payload bytes, and the answer carries the partition's log start.
#[test]
fn records_for_one_partition_are_checked_and_appended_through_the_door() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("t", 2, Overrides::new()).unwrap();
    broker.create_topic("users", 1, compact()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let batch = |topic: &str, partition: u32, records: &[(Option<&str>, &str)]| {
        let mut b = Records::new();
        b.reserve(records.len());
        for (key, value) in records {
            let headers = vec![Header {
                name: "h".into(),
                value: Some(Bytes::from_static(b"12")),
            }];
            b.push(
                None,
                key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
                Some(Bytes::copy_from_slice(value.as_bytes())),
                headers,
                Some(7),
            );
        }
        ProduceRequest {
            topic: topic.to_owned(),
            partition: Some(partition),
            records: b,
            producer: None,
            create_missing_topic: false,
            acks_all: true,
        }
    };
    let produce =
        |request: ProduceRequest| rt.block_on(broker.produce(&Principal::Anonymous, request));
    let refused = produce(batch("users", 0, &[(Some("a"), "1"), (None, "2")])).unwrap_err();
    assert!(
        matches!(&refused, BrokerError::KeyRequired { index: 1, topic, .. } if topic == "users"),
        "{refused:?}"
    );
    assert!(matches!(
        produce(batch("t", 2, &[(None, "v")])),
        Err(BrokerError::UnknownPartition { partition: 2, .. })
    ));
    assert!(matches!(
        produce(batch(CONSUMER_OFFSETS_TOPIC, 0, &[(Some("k"), "v")])),
        Err(BrokerError::InternalTopic { .. })
    ));
    assert_eq!(end_offsets(&broker, "users"), [0], "nothing was written");
    assert_eq!(end_offsets(&broker, "t"), [0, 0], "nothing was written");

    let empty = produce(batch("t", 1, &[])).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.base_offset(), None);
    assert_eq!(
        empty.log_start_offset(),
        Some(0),
        "an empty batch's answer names the log start too"
    );
    assert!(matches!(
        produce(batch("nope", 0, &[(None, "v")])),
        Err(BrokerError::UnknownTopic { .. })
    ));
    let produced = produce(batch("t", 1, &[(Some("a"), "one"), (None, "two")])).unwrap();
    assert_eq!(produced.offsets().collect::<Vec<_>>(), [(1, 0), (1, 1)]);
    // Keys 1, values 3 + 3, each a header block of 6 + 1 + 2 bytes.
    assert_eq!(produced.payload_bytes(), 1 + 3 + 3 + 2 * 9);
    assert_eq!(produced.base_offset(), Some(0));
    assert_eq!(produced.log_start_offset(), Some(0));
    let keyed = produce(batch("users", 0, &[(Some("a"), "1")])).unwrap();
    assert_eq!(keyed.offsets().collect::<Vec<_>>(), [(0, 0)]);
    assert!(broker
        .store
        .wait_dispatched(std::time::Duration::from_secs(30)));
    let read = broker
        .store
        .read("t", 1, tidelog_storage::QueueOffset::new(0), 10, 1 << 20)
        .unwrap();
    let got: Vec<(Option<Bytes>, Option<Bytes>, i64, usize)> = read
        .records
        .iter()
        .map(|r| (r.key(), r.value(), r.timestamp_ms(), r.headers().len()))
        .collect();
    assert_eq!(
        got,
        [
            (Some(Bytes::from("a")), Some(Bytes::from("one")), 7, 1),
            (None, Some(Bytes::from("two")), 7, 1),
        ]
    );
    drop(rt);
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// `Door::records_for` checks the topic and partition before a record
/// exists (Kafka's Produce decodes after it), and its records need no
/// pass at produce: they land where they were made for, the key rule of
/// compact topics still names the first keyless record, and records
/// handed to another partition than they were made for are placed by
/// the request, as any others.
#[test]
fn records_made_for_a_partition_are_checked_first_and_land_there() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("t", 2, Overrides::new()).unwrap();
    broker.create_topic("users", 1, compact()).unwrap();
    let door = broker.door(&Principal::Anonymous);
    assert!(matches!(
        door.records_for("nope", 0),
        Err(BrokerError::UnknownTopic { .. })
    ));
    assert!(matches!(
        door.records_for("t", 2),
        Err(BrokerError::UnknownPartition { partition: 2, .. })
    ));
    assert!(matches!(
        door.records_for(CONSUMER_OFFSETS_TOPIC, 0),
        Err(BrokerError::InternalTopic { .. })
    ));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let made = |topic: &str, partition: u32, keys: &[Option<&str>]| {
        let mut records = door.records_for(topic, partition).unwrap();
        for key in keys {
            let key = key.map(|k| Bytes::copy_from_slice(k.as_bytes()));
            records.push(None, key, Some(Bytes::from_static(b"v")), Vec::new(), None);
        }
        records
    };
    let produce = |topic: &str, partition: u32, records: Records| {
        rt.block_on(door.produce(ProduceRequest {
            topic: topic.to_owned(),
            partition: Some(partition),
            records,
            producer: None,
            create_missing_topic: false,
            acks_all: true,
        }))
    };
    let refused = produce(
        "users",
        0,
        made("users", 0, &[Some("a"), None, Some("b"), None]),
    )
    .unwrap_err();
    assert!(
        matches!(&refused, BrokerError::KeyRequired { index: 1, .. }),
        "{refused:?}"
    );
    assert_eq!(end_offsets(&broker, "users"), [0], "nothing was written");

    let produced = produce("t", 1, made("t", 1, &[Some("a"), None])).unwrap();
    assert_eq!(produced.offsets().collect::<Vec<_>>(), [(1, 0), (1, 1)]);
    let elsewhere = produce("t", 0, made("t", 1, &[Some("c")])).unwrap();
    assert_eq!(elsewhere.offsets().collect::<Vec<_>>(), [(0, 0)]);
    assert!(broker
        .store
        .wait_dispatched(std::time::Duration::from_secs(30)));
    assert_eq!(end_offsets(&broker, "t"), [1, 2]);
    let read = broker
        .store
        .read("t", 1, tidelog_storage::QueueOffset::new(0), 10, 1 << 20)
        .unwrap();
    let keys: Vec<Option<Bytes>> = read.records.iter().map(|r| r.key()).collect();
    assert_eq!(keys, [Some(Bytes::from("a")), None]);
    drop((rt, door));
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// A commit is appended to `__consumer_offsets` and applied in memory.
#[test]
fn committed_offsets_are_appended_and_applied() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("t", 2, Overrides::new()).unwrap();
    let commit = |partition, offset| OffsetCommit {
        topic: "t".into(),
        partition,
        value: CommitValue {
            offset,
            metadata: String::new(),
            ..Default::default()
        },
    };
    broker
        .commit_offsets(
            "g",
            vec![commit(0, 5), commit(1, 7)],
            crate::coordinator::CommitOrigin::Stateless,
        )
        .unwrap();
    let got: Vec<(u32, u64)> = broker
        .groups
        .get("g", None)
        .unwrap()
        .iter()
        .map(|c| (c.partition, c.offset))
        .collect();
    assert_eq!(got, [(0, 5), (1, 7)]);
    assert_eq!(end_offsets(&broker, CONSUMER_OFFSETS_TOPIC), [2]);

    // A commit is checked whole: one bad entry and nothing is written.
    let mut long = commit(0, 9);
    long.value.metadata = "m".repeat(crate::groups::METADATA_MAX_BYTES + 1);
    let refused = [
        broker.commit_offsets(
            "g",
            vec![commit(0, 8), commit(2, 8)],
            crate::coordinator::CommitOrigin::Stateless,
        ),
        broker.commit_offsets(
            "g",
            vec![commit(0, 8), long],
            crate::coordinator::CommitOrigin::Stateless,
        ),
        broker.commit_offsets(
            "g",
            vec![OffsetCommit {
                topic: "nope".into(),
                ..commit(0, 8)
            }],
            crate::coordinator::CommitOrigin::Stateless,
        ),
        broker.commit_offsets(
            "",
            vec![commit(0, 8)],
            crate::coordinator::CommitOrigin::Stateless,
        ),
        broker.commit_offsets("", Vec::new(), crate::coordinator::CommitOrigin::Stateless),
    ];
    assert!(matches!(
        &refused[0],
        Err(BrokerError::UnknownPartition { partition: 2, .. })
    ));
    assert!(matches!(
        &refused[1],
        Err(BrokerError::CommitMetadataTooLarge { index: 1, .. })
    ));
    assert!(matches!(&refused[2], Err(BrokerError::UnknownTopic { .. })));
    assert!(matches!(&refused[3], Err(BrokerError::InvalidName { .. })));
    assert!(matches!(&refused[4], Err(BrokerError::InvalidName { .. })));
    assert_eq!(
        end_offsets(&broker, CONSUMER_OFFSETS_TOPIC),
        [2],
        "nothing written"
    );
    assert_eq!(broker.groups.get("g", None).unwrap()[0].offset, 5);
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// The topic's timestamp rules, the same for every front-end:
/// LogAppendTime stamps every record with the broker's time and says so
/// in the answer; KIP-937's bound refuses the batch naming each record
/// outside it; min.insync.replicas above one refuses only an acks=all
/// produce. Refused batches write nothing.
#[test]
fn timestamp_type_bounds_and_min_insync_replicas_apply_to_every_produce() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let topic = |name: &str, pairs: &[(&str, &str)]| {
        let overrides: Overrides = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        broker.create_topic(name, 1, overrides).unwrap();
    };
    topic("stamped", &[("message.timestamp.type", "LogAppendTime")]);
    topic("bounded", &[("message.timestamp.after.max.ms", "60000")]);
    topic("guarded", &[("min.insync.replicas", "2")]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let produce = |name: &str, stamps: &[Option<i64>], acks_all: bool| {
        let records: Records = stamps
            .iter()
            .map(|ts| ProduceRecord {
                timestamp_ms: *ts,
                ..record(Some("k"), "v")
            })
            .collect();
        rt.block_on(broker.produce(
            &Principal::Anonymous,
            ProduceRequest {
                topic: name.to_owned(),
                partition: None,
                records,
                producer: None,
                create_missing_topic: false,
                acks_all,
            },
        ))
    };

    let before = tidelog_storage::types::now_ms();
    let ack = produce("stamped", &[Some(1000), None], true).unwrap();
    let stamped = ack.log_append_time_ms().unwrap();
    assert!(stamped >= before, "{stamped} is the broker's time");
    // Acknowledged is not yet dispatched: wait until it is visible.
    rt.block_on(broker.until_acknowledged_visible());
    let read = broker.partition("stamped", 0).unwrap();
    let got = rt.block_on(read.read_async(0, 10, 1 << 20)).unwrap();
    let times: Vec<i64> = got.records.iter().map(|r| r.timestamp_ms()).collect();
    assert_eq!(times, [stamped, stamped]);

    let now = tidelog_storage::types::now_ms();
    let ack = produce("bounded", &[Some(now - 3_600_000), None], true).unwrap();
    assert_eq!(
        ack.log_append_time_ms(),
        None,
        "only before is unbounded here"
    );
    let far = now + 3_600_000;
    match produce("bounded", &[Some(now), Some(far), None, Some(far)], true) {
        Err(BrokerError::TimestampOutOfBounds {
            index,
            side,
            indexes,
            config,
            ..
        }) => {
            assert_eq!(
                (index, side, config),
                (1, "after", "message.timestamp.after.max.ms")
            );
            assert_eq!(indexes, [1, 3]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        end_offsets(&broker, "bounded"),
        [2],
        "the refused batch wrote nothing"
    );

    assert!(matches!(
        produce("guarded", &[None], true),
        Err(BrokerError::NotEnoughReplicas { required: 2, .. })
    ));
    produce("guarded", &[None], false).unwrap();
    assert_eq!(end_offsets(&broker, "guarded"), [1]);
}

/// A topic's own flush bounds under `flush: async` (the store's interval
/// here an hour, so only they flush): `flush.messages=1` answers each
/// produce once flushed; `flush.messages=3` the one that reaches three
/// records; `flush.ms` flushes within its bound without holding the
/// answer; a topic without them leaves it to the store.
#[test]
fn a_topics_flush_bounds_flush_its_records_under_async() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = crate::test_support::store_config(dir.path());
    store.flush_interval_ms = 3_600_000;
    let broker = Arc::new(
        Broker::open(
            &BrokerConfig::default(),
            store,
            crate::test_support::cleaner_config(),
        )
        .unwrap(),
    );
    for (name, pairs) in [
        ("lazy", vec![]),
        ("every", vec![("flush.messages", "1")]),
        ("third", vec![("flush.messages", "3")]),
        ("timed", vec![("flush.ms", "50")]),
    ] {
        let overrides: Overrides = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        broker.create_topic(name, 1, overrides).unwrap();
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let log = broker.store.commit_log();
    // Whether the log is flushed through its end right after a produce.
    let flushed_after = |name: &str| {
        let request = ProduceRequest {
            topic: name.to_owned(),
            partition: None,
            records: [record(Some("k"), "v")].into_iter().collect(),
            producer: None,
            create_missing_topic: false,
            acks_all: true,
        };
        rt.block_on(broker.produce(&Principal::Anonymous, request))
            .unwrap();
        log.flushed() >= log.committed()
    };
    assert!(!flushed_after("lazy"), "the store's interval is an hour");
    assert!(flushed_after("every"));
    assert!(!flushed_after("lazy"));
    assert!(!flushed_after("third"), "1 of 3");
    assert!(!flushed_after("third"), "2 of 3");
    assert!(flushed_after("third"), "3 of 3");
    assert!(!flushed_after("lazy"));
    assert!(!flushed_after("timed"), "flush.ms does not hold the answer");
    let end = log.committed();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while log.flushed() < end && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(log.flushed() >= end, "flushed within flush.ms");
}
