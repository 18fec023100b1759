//! The replication stream over TCP on loopback, between two stores in one
//! process (issue 39): a replica follows its master, copies its log byte
//! for byte, confirms it, and the master's acknowledgement and the
//! readers' cap follow the in-sync set's watermark; a replica that lost
//! its stream catches up, one whose log went past the master's is told
//! to cut, a stranger is refused, an entry larger than a frame crosses in
//! pieces, and the stream runs over TLS with the nodes' certificates.
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
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types as rustls_pki;

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
            tls: None,
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

/// A CA, and node certificates it signs for 127.0.0.1 (server and client
/// use both, as a cluster's nodes need), as rustls takes them.
struct Pki {
    ca: rcgen::Certificate,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

type Identity = (
    Vec<rustls_pki::CertificateDer<'static>>,
    rustls_pki::PrivateKeyDer<'static>,
);

impl Pki {
    fn new() -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "cluster CA");
        let key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap();
        Pki {
            ca,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    fn node(&self, cn: &str) -> Identity {
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (
            vec![cert.der().clone()],
            rustls_pki::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
    }

    fn roots(&self) -> Arc<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        Arc::new(roots)
    }

    /// The master's side: its certificate, replicas' required.
    fn server(&self, (certs, key): Identity) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            self.roots(),
            Arc::clone(&provider),
        )
        .build()
        .unwrap();
        Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_client_cert_verifier(verifier)
                .with_single_cert(certs, key)
                .unwrap(),
        )
    }

    /// A replica's side: its certificate, the master's checked against
    /// this CA.
    fn client(&self, identity: Identity) -> Arc<rustls::ClientConfig> {
        self.client_trusting(self, identity)
    }

    /// A replica's side trusting `trusted`'s CA.
    fn client_trusting(&self, trusted: &Pki, (certs, key): Identity) -> Arc<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(trusted.roots())
                .with_client_auth_cert(certs, key)
                .unwrap(),
        )
    }
}

/// The stream over TLS (docs/CLUSTER.md "Security"): a replica with a
/// certificate of the cluster's CA copies the log; one whose certificate
/// another CA signed, or that trusts another CA, never gets a frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_a_replica_with_the_clusters_certificate_copies_and_a_stranger_gets_nothing() {
    let pki = Pki::new();
    let (m_dir, r_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Arc::new(Store::open(config(m_dir.path(), FlushMode::Async)).unwrap());
    let mut epochs = Epochs::load(m_dir.path()).unwrap();
    epochs.begin(1, 0).unwrap();
    let progress = Arc::new(Progress::new(
        1,
        BTreeSet::from([1, 2]),
        store.copied_durable(),
        Duration::from_secs(10),
    ));
    let source = Source::new(
        Arc::clone(&store),
        SourceConfig {
            cluster: CLUSTER.into(),
            node_id: 1,
            epoch: 1,
            handshake_timeout: Duration::from_secs(5),
            heartbeat: Duration::from_millis(100),
            read_timeout: Duration::from_secs(5),
        },
        epochs.entries().to_vec(),
        Arc::clone(&progress),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server(pki.node("node1")));
    let handshakes_failed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let failed = Arc::clone(&handshakes_failed);
    let serving = tokio::spawn({
        let source = Arc::clone(&source);
        async move {
            tokio::spawn(Arc::clone(&source).follow_log());
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let (source, acceptor, failed) =
                    (Arc::clone(&source), acceptor.clone(), Arc::clone(&failed));
                tokio::spawn(async move {
                    match acceptor.accept(tcp).await {
                        Ok(tls) => {
                            let _ = source.stream(tls).await;
                        }
                        Err(_) => {
                            failed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                });
            }
        }
    });
    let follower_with = |tls: Arc<rustls::ClientConfig>| {
        Follower::new(
            Arc::new(Store::open(config(r_dir.path(), FlushMode::Async)).unwrap()),
            FollowerConfig {
                cluster: CLUSTER.into(),
                node_id: 2,
                handshake_timeout: Duration::from_secs(5),
                read_timeout: Duration::from_secs(5),
                tls: Some(tls),
            },
        )
    };

    // A stranger: a certificate another CA signed, though it trusts the
    // master. The master's handshake refuses it; nothing is copied.
    let other = Pki::new();
    let end = produce(&store, 20, 100).await;
    let stranger = follower_with(other.client_trusting(&pki, other.node("node2")));
    let (_keep, stop_rx) = watch::channel(false);
    let refused = stranger.follow(&addr, stop_rx).await;
    assert!(
        matches!(
            refused,
            Err(ReplicationError::Io(_) | ReplicationError::Wire(_))
        ),
        "{refused:?}"
    );
    drop(stranger);
    wait_until("the master's handshake refused the stranger", || {
        handshakes_failed.load(std::sync::atomic::Ordering::SeqCst) >= 1
    })
    .await;
    assert!(
        progress.replicas().iter().all(|r| !r.connected),
        "never connected as a replica"
    );

    // A replica that does not trust the master's CA refuses it itself.
    let wary = follower_with(other.client(pki.node("node2")));
    let (_keep, stop_rx) = watch::channel(false);
    let refused = wary.follow(&addr, stop_rx).await;
    assert!(
        matches!(refused, Err(ReplicationError::Io(_))),
        "{refused:?}"
    );
    drop(wary);

    // The cluster's own node copies the log, byte for byte.
    let replica = follower_with(pki.client(pki.node("node2")));
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(async move { replica.follow(&addr, stop_rx).await });
    assert!(progress.wait_replicated(end, 2, WAIT).await);
    let end = produce(&store, 20, 300).await;
    assert!(progress.wait_replicated(end, 2, WAIT).await);
    stop.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), FollowEnd::Stopped);
    serving.abort();
    let copied = Store::open(config(r_dir.path(), FlushMode::Async)).unwrap();
    assert_eq!(log_bytes(&store), log_bytes(&copied));
}

/// A replica's readers see only what the whole in-sync set holds: with a
/// third member that never connects, the watermark stays where the
/// master's readers' is, and the replica copies records it does not
/// serve; once the set is the master and this replica, both serve them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_serves_nothing_past_the_in_sync_sets_watermark() {
    let (m_dir, r_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let m = master(
        Arc::new(Store::open(config(m_dir.path(), FlushMode::Async)).unwrap()),
        1,
        &[1, 2, 3],
    )
    .await;
    let replica = Arc::new(Store::open(config(r_dir.path(), FlushMode::Async)).unwrap());
    let (stop, task) = follow(&replica, &m.addr);
    let end = produce(&m.store, 10, 100).await;
    wait_until("the replica holds the records", || {
        replica.copied_durable() >= end
    })
    .await;
    // Dispatch would have run by now if the cap allowed it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        served(&replica, 0).is_empty() && served(&replica, 1).is_empty(),
        "node 3 holds none of them: the replica serves none"
    );
    assert!(served(&m.store, 0).is_empty(), "nor does the master");

    // Node 3 leaves the set: the watermark reaches the end everywhere.
    third_member_leaves(m, &replica, (stop, task)).await;
}

/// Node 3 leaves the in-sync set: the watermark reaches the end and the
/// replica serves all 30 records; then the stream and the master stop.
async fn third_member_leaves(m: Master, replica: &Store, (stop, task): Following) {
    m.progress.set_insync(BTreeSet::from([1, 2]));
    wait_until("every record", || {
        served(replica, 0).len() + served(replica, 1).len() == 30
    })
    .await;
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    let _ = m.stop.send(true);
    m.task.await.unwrap();
}

/// The same across a crash: the restarted replica's recovery indexes
/// nothing past the watermark it kept (none yet: nothing), not the whole
/// log it holds, until the master's watermark comes past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_replica_serves_nothing_past_the_watermark_either() {
    let (m_dir, r_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let member = || StoreConfig {
        cluster_member: true,
        ..config(r_dir.path(), FlushMode::Async)
    };
    let m = master(
        Arc::new(Store::open(config(m_dir.path(), FlushMode::Async)).unwrap()),
        1,
        &[1, 2, 3],
    )
    .await;
    let replica = Arc::new(Store::open(member()).unwrap());
    let (stop, task) = follow(&replica, &m.addr);
    let end = produce(&m.store, 10, 100).await;
    wait_until("the replica holds the records", || {
        replica.copied_durable() >= end
    })
    .await;
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    let replica = Arc::into_inner(replica).expect("the follower let go of the store");
    replica.checkpoint().unwrap();
    replica.close_uncleanly();

    let replica = Arc::new(Store::open(member()).unwrap());
    assert_eq!(replica.commit_log().committed(), end, "recovered whole");
    assert_eq!(replica.recovery_report().held_back_bytes, end);
    let (stop, task) = follow(&replica, &m.addr);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        served(&replica, 0).is_empty() && served(&replica, 1).is_empty(),
        "node 3 still holds none of them: the restarted replica serves none"
    );
    third_member_leaves(m, &replica, (stop, task)).await;
}
