use std::time::Duration;

use tidelog_storage::Listener;

use super::*;
use crate::test_support::{append, append_timed, compact, open, wait_until};
use crate::topic_config::Overrides;

fn offsets_of(records: &Records) -> Vec<u64> {
    records.iter().map(|r| r.offset()).collect()
}

/// A compact topic is read from its compacted log: after a pass,
/// superseded records are gone and the offsets have gaps (a read
/// through the ConsumeQueue would still give all three).
#[test]
fn a_compact_topic_reads_its_compacted_log_with_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("users", 1, compact()).unwrap();
    append(&broker, "users", &[("a", "1"), ("b", "2"), ("a", "3")]);
    let part = broker.partition("users", 0).unwrap();
    assert!(part.read_blocks(), "a compacted log is read with pread");
    wait_until("the compacted copies", || part.offsets().1 == 3);
    let requested = broker.cleaner.request("users", true).unwrap();
    broker
        .cleaner
        .wait("users", &requested, Duration::from_secs(30));
    wait_until("a cleaning pass", || {
        part.read(0, 100, 1 << 20).unwrap().records.len() == 2
    });
    let read = part.read(0, 100, 1 << 20).unwrap();
    assert!(matches!(read.records, Records::Compacted { .. }));
    assert_eq!(offsets_of(&read.records), [1, 2]);
    assert_eq!(read.next_offset, 3);
    let values: Vec<&[u8]> = read.records.iter().filter_map(|r| r.value()).collect();
    assert_eq!(values, [&b"2"[..], b"3"]);
    // The queue topic beside it reads every record, in order.
    broker.create_topic("events", 1, Overrides::new()).unwrap();
    append(&broker, "events", &[("a", "1"), ("a", "2")]);
    let events = broker.partition("events", 0).unwrap();
    assert!(!events.read_blocks());
    wait_until("dispatch", || events.offsets().1 == 2);
    let read = events.read(0, 100, 1 << 20).unwrap();
    assert!(matches!(read.records, Records::Stored(_)));
    assert_eq!(offsets_of(&read.records), [0, 1]);
    drop((part, events));
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// What a long-poll's worker reads without the blocking pool: the
/// same records and next offset `read` gives, for both kinds of topic (the compacted log's bytes are in the page
/// cache, just written; on a file system without non-blocking reads
/// it answers `None` for a compact partition, and fetch falls back).
#[cfg(target_os = "linux")]
#[test]
fn read_cached_answers_as_read_does() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("users", 1, compact()).unwrap();
    broker.create_topic("events", 1, Overrides::new()).unwrap();
    for t in ["users", "events"] {
        append(&broker, t, &[("a", "1"), ("b", "2"), ("c", "3")]);
    }
    for t in ["users", "events"] {
        let part = broker.partition(t, 0).unwrap();
        wait_until("dispatch", || part.offsets().1 == 3);
        for (from, max) in [(0, 100), (1, 1), (3, 100)] {
            let read = part.read(from, max, 1 << 20).unwrap();
            let cached = part
                .read_cached(from, max, 1 << 20)
                .unwrap()
                .unwrap_or_else(|| panic!("{t}: {from}: not in the page cache"));
            assert_eq!(
                (offsets_of(&cached.records), cached.next_offset),
                (offsets_of(&read.records), read.next_offset),
                "{t} from {from}"
            );
        }
    }
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// The timestamp lookup of both kinds of topic: the first offset whose
/// record's timestamp is at least T, with timestamps out of order; the
/// beginning before everything, the end after; and never below the
/// base offset of a topic created again under a deleted one's name.
#[test]
fn offset_for_timestamp_follows_kafkas_rule_for_queue_and_compact_topics() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    for (t, overrides) in [("events", Overrides::new()), ("users", compact())] {
        broker.create_topic(t, 1, overrides.clone()).unwrap();
        let part = broker.partition(t, 0).unwrap();
        assert_eq!(part.offset_for_timestamp(0).unwrap(), 0, "{t}: empty");
        assert_eq!(part.max_timestamp_record().unwrap(), None, "{t}: empty");
        append_timed(&broker, t, &[10, 50, 30, 70, 20, 70]);
        wait_until("dispatch", || part.offsets().1 == 6);
        // The first of the two records at the largest timestamp.
        assert_eq!(part.max_timestamp_record().unwrap(), Some((3, 70)), "{t}");
        for (ts, want) in [
            (i64::MIN, 0),
            (5, 0),
            (10, 0),
            (11, 1),
            (30, 1),
            (51, 3),
            (70, 3),
            (71, 6),
            (i64::MAX, 6),
        ] {
            assert_eq!(part.offset_for_timestamp(ts).unwrap(), want, "{t}: {ts}");
        }
        drop(part);
        broker.delete_topic(t).unwrap();
        broker.create_topic(t, 1, overrides).unwrap();
        let part = broker.partition(t, 0).unwrap();
        assert_eq!(part.offsets(), (6, 6), "{t}");
        assert_eq!(part.offset_for_timestamp(0).unwrap(), 6, "{t}: the base");
        assert_eq!(part.max_timestamp_record().unwrap(), None, "{t}: recreated");
        append_timed(&broker, t, &[40]);
        wait_until("dispatch", || part.offsets().1 == 7);
        assert_eq!(part.offset_for_timestamp(0).unwrap(), 6, "{t}");
        assert_eq!(part.offset_for_timestamp(41).unwrap(), 7, "{t}");
        assert_eq!(part.max_timestamp_record().unwrap(), Some((6, 40)), "{t}");
    }
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// `listen` after an empty read gives a listener that an append wakes,
/// for both kinds of topic, and after the wake-up the record is
/// readable; with a record already there it answers `None`.
#[test]
fn listen_wakes_on_append_for_queue_and_compact_topics() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("events", 1, Overrides::new()).unwrap();
    broker.create_topic("users", 1, compact()).unwrap();
    for topic in ["events", "users"] {
        let part = broker.partition(topic, 0).unwrap();
        let read = part.read(0, 100, 1 << 20).unwrap();
        assert!(read.records.is_empty());
        let listener = part
            .listen(read.next_offset)
            .unwrap()
            .expect("nothing to read yet: a listener");
        append(&broker, topic, &[("k", "v")]);
        assert!(
            listener.wait_timeout(Duration::from_secs(30)).is_some(),
            "{topic}: the append did not wake the listener"
        );
        let read = part.read(0, 100, 1 << 20).unwrap();
        assert_eq!(offsets_of(&read.records), [0], "{topic}");
        assert!(
            part.listen(0).unwrap().is_none(),
            "{topic}: a record at 0 is there to read"
        );
        assert!(part.listen(1).unwrap().is_some(), "{topic}");
    }
    // A `PartitionRef` holds the broker: all are gone by now.
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

/// A topic created again under a deleted one's name starts at the old
/// end: its offsets, reads and listens never go below that base (a
/// listen from 0 that saw the old end would answer "read again"
/// forever).
#[test]
fn offsets_reads_and_listens_never_go_below_the_base_offset() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    for (t, overrides) in [("queue", Overrides::new()), ("compact", compact())] {
        broker.create_topic(t, 1, overrides.clone()).unwrap();
        append(&broker, t, &[("a", "1"), ("b", "2"), ("c", "3")]);
        let part = broker.partition(t, 0).unwrap();
        wait_until("dispatch", || part.offsets().1 == 3);
        broker.delete_topic(t).unwrap();
        broker.create_topic(t, 1, overrides).unwrap();
        let part = broker.partition(t, 0).unwrap();
        let base = part.topic().base_offset(0);
        assert_eq!(base, 3, "{t}");
        assert_eq!(part.offsets(), (3, 3), "{t}");
        let read = part.read(0, 100, 1 << 20).unwrap();
        assert!(read.records.is_empty(), "{t}");
        assert!(read.next_offset >= base, "{t}: {}", read.next_offset);
        assert!(part.listen(0).unwrap().is_some(), "{t}");
        append(&broker, t, &[("d", "4")]);
        wait_until("the new record", || part.offsets() == (3, 4));
        let read = part.read(0, 100, 1 << 20).unwrap();
        assert_eq!(offsets_of(&read.records), [3], "{t}");
    }
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}

#[test]
fn unknown_topics_and_partitions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("t", 2, Overrides::new()).unwrap();
    assert!(matches!(
        broker.partition("nope", 0),
        Err(BrokerError::UnknownTopic { .. })
    ));
    assert!(matches!(
        broker.partition("t", 2),
        Err(BrokerError::UnknownPartition { partitions: 2, .. })
    ));
    Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
}
