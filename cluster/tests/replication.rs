//! The replication stream over TCP on loopback, between two stores in one
//! process (issue 39): a replica follows its master, copies its log byte
//! for byte, confirms it, and the master's acknowledgement and the
//! readers' cap follow the in-sync set's watermark; a replica that lost
//! its stream catches up, one whose log went past the master's is told
//! to cut, a stranger is refused, an entry larger than a frame crosses in
//! pieces.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tidelog_cluster::frame::RefusalCode;
use tidelog_cluster::replication::{
    FollowEnd, Follower, FollowerConfig, Progress, ReplicationError, Source, SourceConfig,
};
use tidelog_storage::epochs::Epochs;
use tidelog_storage::retention::FixedDiskUsage;
use tidelog_storage::{cut, AppendRecord, FlushMode, QueueOffset, Store, StoreConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

const CLUSTER: &str = "test";
const WAIT: Duration = Duration::from_secs(30);

fn config(dir: &Path, flush: FlushMode) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 64 * 1024;
    c.consume_queue_units_per_file = 256;
    c.index_slots = 64;
    c.index_entries = 1024;
    c.preallocate_next_segment = false;
    c.flush = flush;
    c.flush_interval_ms = 20;
    c.retention.disk = Arc::new(FixedDiskUsage::new(0.1));
    c
}

fn record(partition: u32, value: String) -> AppendRecord {
    AppendRecord {
        topic: Arc::from("t"),
        partition,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from(value)),
        headers: Vec::new(),
        timestamp_ms: None,
    }
}

/// A master of epoch `epoch` serving on a loopback port.
struct Master {
    store: Arc<Store>,
    progress: Arc<Progress>,
    addr: String,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

async fn master(store: Arc<Store>, epoch: u64, insync: &[u32]) -> Master {
    let dir = store.data_dir().to_path_buf();
    let mut epochs = Epochs::load(&dir).unwrap();
    if epochs.last().is_none_or(|e| e.epoch < epoch) {
        // The cluster's first master claims its whole log.
        let start = if epochs.entries().is_empty() {
            0
        } else {
            store.commit_log().committed()
        };
        epochs.begin(epoch, start).unwrap();
    }
    let progress = Arc::new(Progress::new(
        1,
        insync.iter().copied().collect::<BTreeSet<u32>>(),
        store.copied_durable(),
        Duration::from_secs(10),
    ));
    store
        .commit_log()
        .cap_visible_at(progress.watermark().high_watermark);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let source = Source::new(
        Arc::clone(&store),
        SourceConfig {
            cluster: CLUSTER.into(),
            node_id: 1,
            epoch,
            handshake_timeout: Duration::from_secs(5),
            heartbeat: Duration::from_millis(100),
            read_timeout: Duration::from_secs(5),
        },
        epochs.entries().to_vec(),
        Arc::clone(&progress),
    );
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(source.serve(listener, stop_rx));
    Master {
        store,
        progress,
        addr,
        stop,
        task,
    }
}

fn follower(store: &Arc<Store>, cluster: &str) -> Follower<Store> {
    Follower::new(
        Arc::clone(store),
        FollowerConfig {
            cluster: cluster.into(),
            node_id: 2,
            handshake_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(5),
        },
    )
}

type Following = (
    watch::Sender<bool>,
    JoinHandle<Result<FollowEnd, ReplicationError>>,
);

/// Follow `addr` on a task until stopped.
fn follow(store: &Arc<Store>, addr: &str) -> Following {
    let f = follower(store, CLUSTER);
    let addr = addr.to_string();
    let (stop, stop_rx) = watch::channel(false);
    (
        stop,
        tokio::spawn(async move { f.follow(&addr, stop_rx).await }),
    )
}

/// Append on `store` and return the log's end after it.
async fn produce(store: &Arc<Store>, batches: usize, size: usize) -> u64 {
    let store = Arc::clone(store);
    tokio::task::spawn_blocking(move || {
        for i in 0..batches {
            let batch: Vec<AppendRecord> = (0..3)
                .map(|k| record((i % 2) as u32, format!("{i}.{k}-{}", "v".repeat(size))))
                .collect();
            store.append(&batch).unwrap();
        }
        store.commit_log().committed()
    })
    .await
    .unwrap()
}

fn log_bytes(store: &Store) -> Vec<u8> {
    let log = store.commit_log();
    let mut pos = log.min_offset();
    let mut out = Vec::new();
    while let Some(chunk) = log.read_for_copy(pos, 1 << 20).unwrap() {
        out.extend_from_slice(&chunk.at.to_le_bytes());
        out.extend_from_slice(&chunk.bytes);
        pos = chunk.next;
    }
    out
}

fn served(store: &Store, partition: u32) -> Vec<(u64, Vec<u8>)> {
    store
        .read("t", partition, QueueOffset::new(0), 100_000, usize::MAX)
        .unwrap()
        .records
        .iter()
        .map(|r| (r.queue_offset().get(), r.value().unwrap().to_vec()))
        .collect()
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn replicates_and_acknowledges(flush: FlushMode) {
    let (m_dir, r_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let m = master(
        Arc::new(Store::open(config(m_dir.path(), flush)).unwrap()),
        1,
        &[1, 2],
    )
    .await;
    // Before the replica connects: written on the master, invisible to
    // its readers (the watermark is the replica's 0), not acknowledged.
    let end = produce(&m.store, 20, 100).await;
    assert!(
        !m.progress
            .wait_replicated(end, 2, Duration::from_millis(100))
            .await
    );
    assert!(
        served(&m.store, 0).is_empty(),
        "{flush:?}: no reader sees it yet"
    );

    let replica = Arc::new(Store::open(config(r_dir.path(), flush)).unwrap());
    let (stop, task) = follow(&replica, &m.addr);
    assert!(m.progress.wait_replicated(end, 2, WAIT).await, "{flush:?}");
    for round in 0..10 {
        let end = produce(&m.store, 10, 50 + round * 300).await;
        assert!(
            m.progress.wait_replicated(end, 2, WAIT).await,
            "{flush:?}: round {round}"
        );
        // Acknowledged: the replica holds it, durably as the mode says.
        assert!(replica.copied_durable() >= end);
    }
    let end = m.store.commit_log().committed();
    assert!(m.store.commit_log().segment_count() > 3, "rolled segments");
    wait_until("the replica's readers see everything", || {
        replica.commit_log().high_watermark() >= end && replica.wait_dispatched(Duration::ZERO)
    })
    .await;
    assert!(m.store.wait_dispatched(WAIT));
    assert_eq!(
        log_bytes(&m.store),
        log_bytes(&replica),
        "{flush:?}: the same bytes"
    );
    for p in 0..2 {
        assert_eq!(served(&m.store, p), served(&replica, p));
        assert!(!served(&replica, p).is_empty());
    }
    assert_eq!(
        Epochs::load(r_dir.path()).unwrap().entries(),
        Epochs::load(m_dir.path()).unwrap().entries(),
        "the replica took the master's epochs on"
    );
    let status = m.progress.replicas();
    assert_eq!(status.len(), 1);
    assert!(status[0].in_sync && status[0].connected);

    stop.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), FollowEnd::Stopped);
    let _ = m.stop.send(true);
    m.task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_copies_the_master_and_acknowledgements_wait_for_it_async_flush() {
    replicates_and_acknowledges(FlushMode::Async).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_copies_the_master_and_acknowledgements_wait_for_it_sync_flush() {
    replicates_and_acknowledges(FlushMode::Sync).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_lost_its_stream_catches_up_and_one_that_went_past_is_told_to_cut() {
    let (m_dir, r_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let m = master(
        Arc::new(Store::open(config(m_dir.path(), FlushMode::Async)).unwrap()),
        1,
        &[1, 2],
    )
    .await;
    let replica = Arc::new(Store::open(config(r_dir.path(), FlushMode::Async)).unwrap());
    let (stop, task) = follow(&replica, &m.addr);
    let end = produce(&m.store, 30, 200).await;
    assert!(m.progress.wait_replicated(end, 2, WAIT).await);
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();

    // The stream is gone: writes go on, and are not acknowledged.
    let end = produce(&m.store, 30, 200).await;
    assert!(
        !m.progress
            .wait_replicated(end, 2, Duration::from_millis(200))
            .await
    );
    let (stop, task) = follow(&replica, &m.addr);
    assert!(m.progress.wait_replicated(end, 2, WAIT).await, "caught up");
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    let common = replica.commit_log().committed();

    // The replica believes itself master of epoch 2 and writes on; the
    // real master's log has no epoch 2. Told to cut where they part.
    Epochs::load(r_dir.path())
        .unwrap()
        .begin(2, common)
        .unwrap();
    produce(&replica, 5, 100).await;
    let f = follower(&replica, CLUSTER);
    let (_keep, stop_rx) = watch::channel(false);
    assert_eq!(
        f.follow(&m.addr, stop_rx).await.unwrap(),
        FollowEnd::MustCut(common)
    );
    drop(f);
    let replica = Arc::try_unwrap(replica).ok().expect("no other holder");
    replica.close_uncleanly();
    cut::request(r_dir.path(), common).unwrap();
    let replica = Arc::new(Store::open(config(r_dir.path(), FlushMode::Async)).unwrap());
    assert_eq!(replica.commit_log().committed(), common);
    let (stop, task) = follow(&replica, &m.addr);
    let end = produce(&m.store, 10, 100).await;
    assert!(m.progress.wait_replicated(end, 2, WAIT).await);
    assert_eq!(log_bytes(&m.store), log_bytes(&replica));
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    let _ = m.stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_is_refused_and_an_entry_larger_than_a_frame_crosses_in_pieces() {
    let (m_dir, r_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let big = |dir: &Path| {
        let mut c = config(dir, FlushMode::Async);
        c.commitlog_segment_bytes = 16 << 20;
        c.max_message_bytes = 6 << 20;
        c
    };
    let m = master(
        Arc::new(Store::open(big(m_dir.path())).unwrap()),
        1,
        &[1, 2],
    )
    .await;
    let replica = Arc::new(Store::open(big(r_dir.path())).unwrap());

    let f = follower(&replica, "another");
    let (_keep, stop_rx) = watch::channel(false);
    match f.follow(&m.addr, stop_rx).await {
        Err(ReplicationError::Refused {
            code: RefusalCode::OtherCluster,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }

    let store = Arc::clone(&m.store);
    let end = tokio::task::spawn_blocking(move || {
        store.append(&[record(0, "small".into())]).unwrap();
        store.append(&[record(0, "x".repeat(5 << 20))]).unwrap();
        store.append(&[record(1, "after".into())]).unwrap();
        store.commit_log().committed()
    })
    .await
    .unwrap();
    let (stop, task) = follow(&replica, &m.addr);
    assert!(m.progress.wait_replicated(end, 2, WAIT).await);
    assert_eq!(log_bytes(&m.store), log_bytes(&replica));
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    let _ = m.stop.send(true);
}
