//! Tiered storage in the broker against object_store's local file system
//! backend (a tempdir), wrapped in tiered's `FaultyStore` to take it down.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tidelog_storage::{AppendRecord, Header, Trigger};
use tidelog_tiered::faulty::FaultyStore;
use tidelog_tiered::object_store::local::LocalFileSystem;
use tidelog_tiered::object_store::path::Path as ObjectPath;
use tidelog_tiered::{RemoteTier, RetryPolicy, TieredConfig, TieredError};

use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::error::BrokerError;
use crate::test_support::{cleaner_config, store_config};
use crate::topic_config::Overrides;

static START_MS: std::sync::LazyLock<i64> =
    std::sync::LazyLock::new(|| tidelog_storage::types::now_ms() - 60_000);

struct Fixture {
    broker: Arc<Broker>,
    faulty: Arc<FaultyStore>,
    rt: tokio::runtime::Runtime,
    _data: tempfile::TempDir,
    _bucket: tempfile::TempDir,
}

fn tiered_config() -> TieredConfig {
    TieredConfig {
        object_bytes: 64 * 1024,
        upload_interval_ms: 100,
        ..TieredConfig::default()
    }
}

fn open() -> Fixture {
    let data = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let faulty = FaultyStore::new(Arc::new(
        LocalFileSystem::new_with_prefix(bucket.path()).unwrap(),
    ));
    let cfg = tiered_config();
    let remote = RemoteTier::with_store(faulty.clone(), ObjectPath::from("t"), &cfg)
        .with_retry_policy(RetryPolicy {
            attempts: 2,
            first_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
            ..RetryPolicy::default()
        });
    let mut sc = store_config(data.path());
    // Small segments, so a few records seal one (sealed data is uploaded
    // whatever its size).
    sc.commitlog_segment_bytes = 4096;
    sc.retention.disk = Arc::new(tidelog_storage::retention::FixedDiskUsage::new(0.1));
    sc.retention.check_interval_ms = 3_600_000;
    sc.retention.pause_between_deletes_ms = 0;
    let config = BrokerConfig {
        tiered: cfg,
        ..BrokerConfig::default()
    };
    let broker =
        Arc::new(Broker::open_tiered(&config, sc, cleaner_config(), Some(remote)).unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    Fixture {
        broker,
        faulty,
        rt,
        _data: data,
        _bucket: bucket,
    }
}

fn tiered_topic(f: &Fixture, name: &str, extra: &[(&str, &str)]) {
    let mut o = Overrides::from([("remote.storage.enable".to_string(), "true".to_string())]);
    for (k, v) in extra {
        o.insert(k.to_string(), v.to_string());
    }
    f.broker.create_topic(name, 1, o).unwrap();
}

/// Record `i` as produced: keys, values and headers (a null one too) that
/// differ per record, so a wrong offset or a byte lost shows.
fn produced(topic: &str, i: usize) -> AppendRecord {
    AppendRecord {
        topic: Arc::from(topic),
        partition: 0,
        key: (i % 5 != 0).then(|| Bytes::from(format!("key-{i}"))),
        value: (i % 7 != 3).then(|| Bytes::from(format!("{i}:{}", "v".repeat(200 + i % 13)))),
        headers: vec![
            Header {
                name: format!("h{i}"),
                value: Some(Bytes::from(vec![i as u8; i % 4])),
            },
            Header {
                name: "null".into(),
                value: None,
            },
        ],
        // Recent (remote retention.ms is Kafka's 7 days), distinct.
        timestamp_ms: Some(*START_MS + i as i64),
    }
}

fn produce(f: &Fixture, topic: &str, range: std::ops::Range<usize>) {
    for i in range {
        f.broker.store.append(&[produced(topic, i)]).unwrap();
    }
    assert!(f.broker.store.wait_dispatched(Duration::from_secs(30)));
    f.broker.store.commit_log().flush_all().unwrap();
}

type Seen = (
    u64,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

fn expected(topic: &str, i: usize) -> Seen {
    let r = produced(topic, i);
    (
        i as u64,
        r.timestamp_ms.unwrap(),
        r.key.map(|b| b.to_vec()),
        r.value.map(|b| b.to_vec()),
        r.headers
            .into_iter()
            .map(|h| (h.name, h.value.map(|v| v.to_vec())))
            .collect(),
    )
}

/// Everything `read_async` answers from `from` to the end, batch by batch.
fn read_all(f: &Fixture, topic: &str, from: u64) -> Result<(Vec<Seen>, usize), BrokerError> {
    let part = f.broker.partition(topic, 0)?;
    let (_, end) = part.offsets();
    let (mut seen, mut remote_batches, mut at) = (Vec::new(), 0, from);
    while at < end {
        let batch = f.rt.block_on(part.read_async(at, 7, 1 << 20))?;
        if matches!(batch.records, crate::read::Records::Remote { .. }) {
            remote_batches += 1;
        }
        for r in batch.records.iter() {
            seen.push((
                r.offset(),
                r.timestamp_ms(),
                r.key().map(<[u8]>::to_vec),
                r.value().map(<[u8]>::to_vec),
                r.headers()
                    .into_iter()
                    .map(|h| (h.name, h.value.map(|v| v.to_vec())))
                    .collect(),
            ));
        }
        assert!(batch.next_offset > at, "read from {at} did not move");
        at = batch.next_offset;
    }
    Ok((seen, remote_batches))
}

fn round(f: &Fixture, topic: &str) -> crate::tiering::RoundReport {
    f.rt.block_on(f.broker.tiering_round(Some(topic))).unwrap()
}

#[test]
fn a_fetch_below_the_local_beginning_returns_exactly_the_bytes_produced() {
    let f = open();
    tiered_topic(&f, "t", &[("local.retention.bytes", "0")]);
    produce(&f, "t", 0..60);
    let report = round(&f, "t");
    let row = &report.partitions[0];
    assert_eq!(row.error, None);
    let uploaded = row.uploaded_end.unwrap();
    assert!(uploaded > 10, "sealed segments uploaded: {report:?}");
    // Nothing is kept locally past what was uploaded: the local beginning
    // is the manifest's end, and everything below is read remotely.
    assert_eq!(row.local_beginning, uploaded);
    let part = f.broker.partition("t", 0).unwrap();
    assert_eq!(part.offsets(), (0, 60), "the beginning is the remote one");
    assert_eq!(part.remote_from(0), Some(0));
    assert_eq!(part.remote_from(uploaded), None);
    let (seen, remote_batches) = read_all(&f, "t", 0).unwrap();
    assert!(remote_batches >= 2, "{remote_batches}");
    let want: Vec<Seen> = (0..60).map(|i| expected("t", i)).collect();
    assert_eq!(seen, want);
    // A read that starts inside the remote part ends at the local part's
    // first record, never skipping one.
    let (seen, _) = read_all(&f, "t", uploaded - 1).unwrap();
    assert_eq!(seen.first().map(|s| s.0), Some(uploaded - 1));
    assert_eq!(seen.len() as u64, 60 - (uploaded - 1));
    let stats = f.broker.tiering_stats().unwrap();
    assert!(stats.remote.uploaded_objects >= 1 && stats.remote_reads >= 2);
}

#[test]
fn retention_keeps_unuploaded_segments_and_uploads_resume_with_nothing_lost() {
    let f = open();
    tiered_topic(&f, "t", &[("local.retention.bytes", "0")]);
    f.faulty.set_down(true);
    produce(&f, "t", 0..60);
    let report = round(&f, "t");
    assert!(report.partitions[0].error.is_some(), "{report:?}");
    let segments = f.broker.store.stats().commitlog_segments;
    assert!(segments >= 4, "{segments}");
    // Even a forced pass deletes nothing of the un-uploaded records.
    let out = f.broker.store.run_retention(Trigger::ManualForce).unwrap();
    assert_eq!(out.deleted_segments, 0);
    assert_eq!(f.broker.store.commit_log().min_offset(), 0);
    assert_eq!(f.broker.partition("t", 0).unwrap().offsets(), (0, 60));
    // The store comes back: the next round uploads, retention may go on
    // up to the first record not uploaded, and every record reads back.
    f.faulty.heal();
    let report = round(&f, "t");
    assert_eq!(report.partitions[0].error, None, "{report:?}");
    let uploaded = report.partitions[0].uploaded_end.unwrap();
    let out = f.broker.store.run_retention(Trigger::ManualForce).unwrap();
    assert!(out.deleted_segments >= 1, "{out:?}");
    let min = f.broker.store.commit_log().min_offset();
    let part = f.broker.partition("t", 0).unwrap();
    let first_local = f.broker.store.offsets("t", 0).0;
    assert!(
        first_local > 0 && first_local <= uploaded,
        "{first_local} {uploaded} {min}"
    );
    assert_eq!(part.offsets(), (0, 60));
    let (seen, _) = read_all(&f, "t", 0).unwrap();
    let want: Vec<Seen> = (0..60).map(|i| expected("t", i)).collect();
    assert_eq!(seen, want);
}

#[test]
fn the_remote_tier_down_answers_unavailable_for_remote_offsets_and_local_ones_still_read() {
    let f = open();
    tiered_topic(&f, "t", &[("local.retention.bytes", "0")]);
    produce(&f, "t", 0..60);
    let uploaded = round(&f, "t").partitions[0].uploaded_end.unwrap();
    f.faulty.set_down(true);
    let part = f.broker.partition("t", 0).unwrap();
    match f.rt.block_on(part.read_async(0, 10, 1 << 20)) {
        Err(BrokerError::Tiered {
            source: TieredError::Unavailable { .. },
        }) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
    let (seen, remote) = read_all(&f, "t", uploaded).unwrap();
    assert_eq!(remote, 0);
    let want: Vec<Seen> = (uploaded as usize..60).map(|i| expected("t", i)).collect();
    assert_eq!(seen, want);
    assert!(f.broker.tiering_stats().unwrap().remote_read_errors >= 1);
}

#[test]
fn remote_storage_needs_a_remote_tier_and_stays_on() {
    let dir = tempfile::tempdir().unwrap();
    let plain = crate::test_support::open(dir.path());
    let on = Overrides::from([("remote.storage.enable".to_string(), "true".to_string())]);
    match plain.create_topic("t", 1, on.clone()) {
        Err(BrokerError::InvalidTopicConfig { name, reason }) => {
            assert_eq!(name, "remote.storage.enable");
            assert!(reason.contains("tiered.url"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    plain.create_topic("u", 1, Overrides::new()).unwrap();
    assert!(plain
        .alter_topic(
            "u",
            &[("remote.storage.enable".into(), Some("true".into()))]
        )
        .is_err());
    let f = open();
    f.broker.create_topic("t", 1, on).unwrap();
    match f.broker.alter_topic(
        "t",
        &[("remote.storage.enable".into(), Some("false".into()))],
    ) {
        Err(BrokerError::InvalidTopicConfig { reason, .. }) => {
            assert!(reason.contains("cannot be turned off"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_deleted_topics_remote_data_goes_before_its_name_is_reused() {
    let f = open();
    tiered_topic(&f, "t", &[]);
    produce(&f, "t", 0..60);
    round(&f, "t");
    let remote = f.broker.tiering.as_ref().unwrap().remote().clone();
    assert!(f.rt.block_on(remote.manifest("t", 0)).unwrap().is_some());
    f.faulty.set_down(true);
    f.broker.delete_topic("t").unwrap();
    assert!(matches!(
        f.broker.create_topic("t", 1, Overrides::new()),
        Err(BrokerError::RemoteDeletePending { .. })
    ));
    // Retried at the next round, once the store is back.
    let down = f.rt.block_on(f.broker.tiering_round(None)).unwrap();
    assert_eq!(down.metas_failed, 1);
    f.faulty.heal();
    let up = f.rt.block_on(f.broker.tiering_round(None)).unwrap();
    assert!(up.metas_written >= 1, "{up:?}");
    assert!(f.rt.block_on(remote.manifest("t", 0)).unwrap().is_none());
    assert!(f
        .rt
        .block_on(remote.topics())
        .unwrap()
        .iter()
        .all(|t| t.name != "t"));
    // The new topic's meta is written at the next round.
    f.broker.create_topic("t", 2, Overrides::new()).unwrap();
    f.rt.block_on(f.broker.tiering_round(None)).unwrap();
    let topics = f.rt.block_on(remote.topics()).unwrap();
    let meta = topics.iter().find(|t| t.name == "t").unwrap();
    assert_eq!(meta.partitions, 2);
}

/// After a clean, a compact topic's sealed compacted segments go up as its
/// snapshot (once per clean), with the records' bytes, and a later round
/// without a new clean sends nothing.
#[test]
fn a_clean_sends_the_sealed_compacted_segments_as_the_snapshot() {
    let f = open();
    let topic = f
        .broker
        .create_topic("users", 1, crate::test_support::compact())
        .unwrap();
    crate::test_support::append(&f.broker, "users", &[("a", "1"), ("b", "2"), ("a", "3")]);
    let part = f.broker.partition("users", 0).unwrap();
    crate::test_support::wait_until("the compacted copies", || part.offsets().1 == 3);
    assert!(round(&f, "users").snapshots.is_empty(), "no clean yet");
    let requested = f.broker.request_compaction(&topic, true).unwrap();
    f.broker
        .cleaner
        .wait("users", &requested, Duration::from_secs(30));
    let report = round(&f, "users");
    assert_eq!(report.snapshots, [("users".to_string(), 0)]);
    let remote = f.broker.tiering.as_ref().unwrap().remote().clone();
    let files = f.rt.block_on(remote.snapshot_files("users", 0)).unwrap();
    assert!(!files.is_empty());
    let local: Vec<(String, Vec<u8>)> = f
        .broker
        .logs
        .log("users", 0)
        .unwrap()
        .segments()
        .iter()
        .rev()
        .skip(1)
        .rev()
        .map(|s| {
            let path = s.path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    let remote: Vec<(String, Vec<u8>)> = files.into_iter().map(|(n, b)| (n, b.to_vec())).collect();
    assert_eq!(remote, local);
    assert!(round(&f, "users").snapshots.is_empty(), "once per clean");
    assert_eq!(f.broker.tiering_stats().unwrap().snapshots_uploaded, 1);
}

/// A compacted log's sealed segments go into a snapshot under their
/// `<base>.log` names, which restore reads, also while a roll's segment
/// still has its `.new` name on disk (until the next flush).
#[test]
fn a_snapshot_names_sealed_segments_by_base_while_a_roll_waits_for_the_flush() {
    use tidelog_cleaner::compacted::format::{encode_record, Fields};
    use tidelog_cleaner::compacted::RollPolicy;
    use tidelog_storage::{PhysicalOffset, QueueOffset, TopicPartition};

    let dir = tempfile::tempdir().unwrap();
    let log = tidelog_cleaner::CompactedLog::open(
        TopicPartition::new("users", 0).unwrap(),
        dir.path().to_path_buf(),
    )
    .unwrap();
    let roll = RollPolicy {
        segment_bytes: 1 << 20,
        segment_ms: i64::MAX,
    };
    for offset in 0..3u64 {
        let record = encode_record(&Fields {
            offset: QueueOffset::new(offset),
            timestamp_ms: 1,
            store_timestamp_ms: 1,
            delete_horizon_ms: 0,
            physical_offset: PhysicalOffset::new(offset * 100),
            key: Some(b"k"),
            value: Some(b"v"),
            headers_block: &[],
            header_count: 0,
            producer: None,
        });
        log.append(&record, roll, 0).unwrap();
        log.roll(0).unwrap();
    }
    let segments = log.segments();
    assert!(segments[1].is_new(), "no flush yet");
    let (files, next) = super::rounds::sealed_files(&log)
        .unwrap()
        .expect("sealed segments");
    assert_eq!(next, 3);
    let want: Vec<(String, Vec<u8>)> = segments[..3]
        .iter()
        .map(|s| {
            (
                tidelog_storage::fs_util::offset_file_name(s.base_offset()) + ".log",
                std::fs::read(s.path()).unwrap(),
            )
        })
        .collect();
    let got: Vec<(String, Vec<u8>)> = files.into_iter().map(|(n, b)| (n, b.to_vec())).collect();
    assert_eq!(got, want);
}

/// The remote tier's objects keep no transaction flags or markers yet
/// (KAFKA.md, "Transactions"): a tiered topic cannot join a transaction,
/// and a topic holding a transaction's records cannot turn remote storage
/// on, so no marker is uploaded as a record and no aborted record comes
/// back from the tier as committed.
#[test]
fn transactions_and_remote_storage_are_kept_apart() {
    use crate::transactions::service::TxnError;
    use crate::transactions::TxnRefusal;
    let f = open();
    tiered_topic(&f, "tiered", &[]);
    f.broker.create_topic("plain", 1, Overrides::new()).unwrap();
    let (pid, epoch) = f
        .broker
        .init_transactional_producer("tx", 60_000, None)
        .unwrap();
    let door = f.broker.door(&crate::Principal::Anonymous);
    let added = f.rt.block_on(door.add_partitions_to_txn(
        "tx".into(),
        pid,
        epoch,
        vec![("tiered".into(), 0)],
    ));
    assert!(
        matches!(
            added,
            Err(TxnError::Refused(TxnRefusal::InvalidState { .. }))
        ),
        "{added:?}"
    );
    // Before any transaction, "plain" may still turn tiering on: checked
    // with a topic that never held one.
    f.broker.create_topic("never", 1, Overrides::new()).unwrap();
    f.broker
        .alter_topic(
            "never",
            &[("remote.storage.enable".into(), Some("true".into()))],
        )
        .unwrap();
    f.rt.block_on(door.add_partitions_to_txn("tx".into(), pid, epoch, vec![("plain".into(), 0)]))
        .unwrap();
    let record = AppendRecord {
        topic: Arc::from("plain"),
        partition: 0,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: Vec::new(),
        timestamp_ms: None,
    };
    let batch = tidelog_storage::ProducerBatch {
        producer_id: pid,
        epoch,
        base_sequence: 0,
        transactional: true,
    };
    f.broker
        .store
        .append_as(&[record], u64::MAX, Some(&batch))
        .unwrap();
    f.broker.end_txn("tx", pid, epoch, false).unwrap();
    match f.broker.alter_topic(
        "plain",
        &[("remote.storage.enable".into(), Some("true".into()))],
    ) {
        Err(BrokerError::InvalidTopicConfig { name, reason }) => {
            assert_eq!(name, "remote.storage.enable");
            assert!(reason.contains("transactions"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
