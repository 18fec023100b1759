//! The node's cluster loop: its etcd session, the election's steps, and
//! the role they give, carried out on the broker the node serves.
//!
//! Each turn: one election step (read the keys; campaign when the master
//! key is absent and it is this node's turn), the role that follows from
//! it, the master's in-sync changes, the node's entry republished (where
//! its log ends, which epoch it follows); then a wait for a change under
//! the cluster's keys, the session's state, the follower's end or a third
//! of the lease, whichever comes first.
//!
//! Roles:
//! - **Master** of a term: the epoch begun in the epoch file (at the log's
//!   end; the cluster's first master claims its whole log, from 0) before
//!   any write of the term; the store takes appends; a replication
//!   [`Source`] serves the replicas that connect; [`Progress`] follows
//!   their confirmations; the gate answers writes while the session holds.
//! - **Replica** of a master: the store refuses its own appends; a
//!   [`Follower`] copies the master's log. A follower told to cut (this
//!   log went past the master's) has the broker closed, the cut requested
//!   and the broker opened again, which cuts at open, then follows again.
//!
//! A broker that copied bytes since it was opened, or whose open held
//! back a tail past the watermark it kept (`StoreConfig::cluster_member`),
//! is opened again before its node leads, without holding back: the
//! coordinators (groups, transactions, producer ids) are rebuilt from the
//! whole log it now holds, as at any start. A master that
//! steps down is opened again too, as a replica: nothing of its term's
//! in-memory state outlives it. Opening again takes the broker from the
//! ready slot (requests in flight finish), so clients see a short "not
//! ready" and retry.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tidelog_api::{AppState, Broker};
use tidelog_broker::store::{CleanerConfig, StoreConfig};
use tidelog_broker::BrokerConfig;
use tidelog_cluster::election::records::NodeInfo;
use tidelog_cluster::election::session::{Session, SessionState};
use tidelog_cluster::election::step::Step;
use tidelog_cluster::election::view::{ClusterView, MasterHeld};
use tidelog_cluster::election::{keys::Keys, Election, InsyncChange, MasterTerm, CAMPAIGN_GRACE};
use tidelog_cluster::frame::{Frame, RefusalCode};
use tidelog_cluster::replication::wire::write_frame;
use tidelog_cluster::replication::{
    FollowEnd, Follower, FollowerConfig, Link, Progress, ReplicationError, Source, SourceConfig,
};
use tidelog_cluster::{ClusterConfig, EtcdClient};
use tidelog_runtime::connections::ConnectionSlots;
use tidelog_runtime::tls::{PeerIdentity, TlsAcceptor};
use tidelog_storage::epochs::Epochs;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::gate::{NodeGate, Part};
use super::store_of;
use super::NodeTls;
use crate::node::Node;

/// Longest wait for requests in flight before the broker is opened again.
const REOPEN_RELEASE_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after a failed turn (etcd unreachable, a stream that failed).
const RETRY: Duration = Duration::from_millis(250);
/// A replication handshake's deadline.
const HANDSHAKE: Duration = Duration::from_secs(5);
/// A master's WATERMARK on an idle stream at least this often.
const HEARTBEAT: Duration = Duration::from_millis(200);

/// What opening the broker again needs.
#[derive(Clone)]
pub(crate) struct Reopen {
    pub broker: BrokerConfig,
    pub store: StoreConfig,
    pub cleaner: CleanerConfig,
}

/// The master term's source, as the replication listener hands it
/// connections, with the term's stop signal.
type SourceSlot = Arc<Mutex<Option<(Arc<Source<Broker>>, watch::Receiver<bool>)>>>;

enum Current {
    Joining,
    Master {
        term: MasterTerm,
        progress: Arc<Progress>,
        stop: watch::Sender<bool>,
        tasks: JoinSet<()>,
    },
    Replica {
        master: u32,
        epoch: u64,
        stop: watch::Sender<bool>,
        task: JoinHandle<Result<FollowEnd, ReplicationError>>,
    },
}

pub(crate) struct Runtime {
    cfg: ClusterConfig,
    me: NodeInfo,
    reopen: Reopen,
    data_dir: PathBuf,
    node: Arc<Node>,
    state: AppState,
    gate: Arc<NodeGate>,
    client: EtcdClient,
    keys: Keys,
    election: Election,
    current: Current,
    source: SourceSlot,
    /// The broker took a copy since it was opened: open it again before
    /// leading.
    copied_since_open: bool,
    /// The node's entry as last published, and when: republished when its
    /// epoch changes, else at most every third of the lease (every
    /// node's turn wakes on every change under the keys, its own entry
    /// included: publishing each turn would wake them all for ever).
    published: Option<(NodeInfo, Instant)>,
    /// A follower that failed is started again no sooner than this.
    follow_again_at: Option<Instant>,
    /// TLS with the other nodes, when the cluster runs with `tls`.
    tls: Option<NodeTls>,
}

impl Runtime {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        cfg: ClusterConfig,
        me: NodeInfo,
        reopen: Reopen,
        node: Arc<Node>,
        state: AppState,
        gate: Arc<NodeGate>,
        client: EtcdClient,
        keys: Keys,
        tls: Option<NodeTls>,
    ) -> Result<Runtime, tidelog_cluster::EtcdError> {
        let election = Election::new(client.clone(), keys.clone(), cfg.node_id, CAMPAIGN_GRACE)?;
        let data_dir = reopen.store.data_dir.clone();
        Ok(Runtime {
            cfg,
            me,
            reopen,
            data_dir,
            node,
            state,
            gate,
            client,
            keys,
            election,
            current: Current::Joining,
            source: Arc::default(),
            copied_since_open: false,
            published: None,
            follow_again_at: None,
            tls,
        })
    }

    fn broker(&self) -> Option<Arc<Broker>> {
        self.node.broker()
    }

    fn log_end(&self) -> u64 {
        self.broker()
            .map_or(0, |b| store_of(&b).commit_log().committed())
    }

    fn epoch(&self) -> u64 {
        match &self.current {
            Current::Master { term, .. } => term.epoch,
            Current::Replica { epoch, .. } => *epoch,
            Current::Joining => 0,
        }
    }

    /// Run until `shutdown` turns true; then the lease is revoked, so the
    /// others need not wait for it to expire.
    pub(crate) async fn run(
        mut self,
        replication: TcpListener,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let acceptor = tokio::spawn(accept(
            replication,
            Arc::clone(&self.source),
            self.cfg.node_id,
            self.tls.as_ref().map(|t| Arc::clone(&t.acceptor)),
            replication_slots(),
        ));
        let mut session = match self.start_session(&mut shutdown).await {
            Some(s) => s,
            None => {
                acceptor.abort();
                return;
            }
        };
        let mut session_rx = session.subscribe();
        let third = self.cfg.session_ttl() / 3;
        loop {
            if *shutdown.borrow() {
                break;
            }
            if matches!(session.state(), SessionState::Lost { .. }) {
                tracing::warn!("the etcd session is lost; stepping down and starting a new one");
                self.step_down().await;
                session = match self.start_session(&mut shutdown).await {
                    Some(s) => s,
                    None => break,
                };
                session_rx = session.subscribe();
                continue;
            }
            let (revision, wake_at) = match self.turn(&session).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "cluster turn failed; retrying");
                    (None, Some(Instant::now() + RETRY))
                }
            };
            let deadline = wake_at.unwrap_or_else(|| Instant::now() + third);
            let prefix = self.keys.root().as_bytes().to_vec();
            let wait = async {
                match revision {
                    Some(rev) => {
                        let left = deadline.saturating_duration_since(Instant::now());
                        let _ = self.client.wait_for_change(&prefix, rev, left).await;
                    }
                    None => tokio::time::sleep_until(deadline.into()).await,
                }
            };
            tokio::select! {
                _ = wait => {}
                _ = tokio::time::sleep_until(deadline.into()) => {}
                _ = session_rx.changed() => {}
                _ = shutdown.changed() => {}
            }
        }
        self.stop_current().await;
        acceptor.abort();
        if let Err(e) = session.close().await {
            tracing::warn!(error = %e, "could not revoke the etcd lease; it expires by itself");
        }
    }

    async fn start_session(&mut self, shutdown: &mut watch::Receiver<bool>) -> Option<Session> {
        loop {
            let mut me = self.me.clone();
            me.log_end = self.log_end();
            me.epoch = self.epoch();
            match Session::start(
                self.client.clone(),
                self.keys.clone(),
                &me,
                self.cfg.session_ttl(),
            )
            .await
            {
                Ok(s) => {
                    tracing::info!(node_id = self.cfg.node_id, lease = ?s.lease_id(), "joined the cluster's etcd");
                    self.gate.set_session(Some(s.subscribe()));
                    return Some(s);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start an etcd session; retrying");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(RETRY * 4) => {}
                _ = shutdown.changed() => {}
            }
            if *shutdown.borrow() {
                return None;
            }
        }
    }

    /// One turn (module doc): the revision to wait after, and when to
    /// look again at the latest.
    async fn turn(
        &mut self,
        session: &Session,
    ) -> Result<(Option<tidelog_cluster::etcd::Revision>, Option<Instant>), String> {
        self.check_follower().await?;
        // An open that failed (a cut refused, a disk error) left the node
        // without a broker: open it again each turn, as a replica, until
        // it opens (the error says why, each time).
        if self.broker().is_none() {
            self.reopen(true, None).await?;
        }
        let step = self
            .election
            .step(session, self.log_end())
            .await
            .map_err(|e| e.to_string())?;
        let view = self.election.view().await.map_err(|e| e.to_string())?;
        let insync: BTreeSet<u32> = view
            .insync
            .as_ref()
            .map(|i| i.nodes.iter().copied().collect())
            .unwrap_or_default();
        self.gate.set_view(view.nodes.clone(), insync);
        let mut wake_at = None;
        match step.step {
            Step::Won(term) | Step::Leading(term) => self.lead(term, &view).await?,
            Step::Following(held) | Step::LostRace { holder: Some(held) } => {
                self.follow(held, &view).await?
            }
            Step::Waiting { until } => wake_at = Some(until),
            other @ (Step::LostRace { holder: None } | Step::Ineligible | Step::SessionNotSafe) => {
                if matches!(self.current, Current::Master { .. }) {
                    tracing::warn!(step = ?other, "no longer the master; stepping down");
                    self.step_down().await;
                }
            }
        }
        self.master_duties().await;
        self.republish(session).await;
        if let Some(at) = self.follow_again_at {
            wake_at = Some(wake_at.map_or(at, |w| w.min(at)));
        }
        Ok((Some(step.revision), wake_at))
    }

    /// The node's entry (its log's end, its epoch), when it is due.
    async fn republish(&mut self, session: &Session) {
        let mut me = self.me.clone();
        me.log_end = self.log_end();
        me.epoch = self.epoch();
        let now = Instant::now();
        let due = self.published.as_ref().is_none_or(|(last, at)| {
            last.epoch != me.epoch
                || (last.log_end != me.log_end && now >= *at + self.cfg.session_ttl() / 3)
        });
        if !due {
            return;
        }
        match session.publish(&me).await {
            Ok(_) => self.published = Some((me, now)),
            Err(e) => tracing::debug!(error = %e, "could not republish this node's entry"),
        }
    }

    /// Lead `term`: see the module doc.
    async fn lead(&mut self, term: MasterTerm, view: &ClusterView) -> Result<(), String> {
        if let Current::Master { term: now, .. } = &self.current {
            if now.create_revision == term.create_revision {
                return Ok(());
            }
        }
        tracing::info!(epoch = term.epoch, "this node is the master");
        self.stop_current().await;
        // A tail recovery held back (past the watermark this node last
        // knew) is the new term's log: the coordinators must see it.
        let held_back = self.broker().is_some_and(|b| {
            let store = store_of(&b);
            store.dispatched_position() < store.commit_log().committed()
        });
        if self.copied_since_open || held_back {
            self.reopen(false, None).await?;
        }
        let broker = self.broker().ok_or("no broker to lead with")?;
        let store = store_of(&broker);
        let end = store.commit_log().committed();
        let dir = self.data_dir.clone();
        let epoch = term.epoch;
        let entries = tokio::task::spawn_blocking(move || {
            let mut epochs = Epochs::load(&dir)?;
            if epochs.last().is_none_or(|e| e.epoch < epoch) {
                // The cluster's first master claims its whole log.
                let start = if epochs.entries().is_empty() { 0 } else { end };
                epochs.begin(epoch, start)?;
            }
            Ok::<_, tidelog_storage::StoreError>(epochs.entries().to_vec())
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        store.set_replica(false);
        // What the broker changed while it opened reaches the replicas
        // now (before any write of the term, so each record is its
        // file's latest).
        let republishing = Arc::clone(&broker);
        match tokio::task::spawn_blocking(move || republishing.republish_metadata()).await {
            Ok(Ok(files)) => tracing::debug!(files, "metadata files appended for the new term"),
            Ok(Err(e)) => tracing::warn!(
                error = %e,
                "could not append the metadata files for the new term; replicas get each with its next change"
            ),
            Err(e) => tracing::warn!(error = %e, "appending the metadata files failed"),
        }
        // The new term's in-sync set: the last one's live members, and
        // this node (the old master is gone, or it would still lead).
        let live: BTreeSet<u32> = view.nodes.iter().map(|n| n.node_id).collect();
        let mut insync: BTreeSet<u32> = view
            .insync
            .as_ref()
            .map(|i| {
                i.nodes
                    .iter()
                    .copied()
                    .filter(|id| live.contains(id))
                    .collect()
            })
            .unwrap_or_default();
        insync.insert(self.cfg.node_id);
        let progress = Arc::new(Progress::new(
            self.cfg.node_id,
            insync.clone(),
            store.copied_durable(),
            self.cfg.replica_lag_max(),
        ));
        if store.commit_log().high_watermark() == u64::MAX {
            store
                .commit_log()
                .cap_visible_at(progress.watermark().high_watermark);
        }
        let nodes: Vec<u32> = insync.iter().copied().collect();
        match self.election.change_insync(&term, &nodes).await {
            Ok(InsyncChange::Written { .. }) => {}
            Ok(InsyncChange::Deposed) => return Err("deposed before the term began".into()),
            Err(e) => return Err(e.to_string()),
        }
        let source = Source::new(
            Arc::clone(&broker),
            SourceConfig {
                cluster: self.cfg.name.clone(),
                node_id: self.cfg.node_id,
                epoch: term.epoch,
                handshake_timeout: HANDSHAKE,
                heartbeat: HEARTBEAT,
                read_timeout: self.cfg.session_ttl().max(Duration::from_secs(2)),
            },
            entries,
            Arc::clone(&progress),
        );
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        tasks.spawn(Arc::clone(&source).follow_log());
        *self.source.lock().unwrap_or_else(|e| e.into_inner()) = Some((source, stop_rx));
        drop(broker);
        self.gate.set_part(Part::Master {
            epoch: term.epoch,
            progress: Arc::clone(&progress),
        });
        self.node.start_schedules();
        self.current = Current::Master {
            term,
            progress,
            stop,
            tasks,
        };
        Ok(())
    }

    /// Follow `held`'s node: see the module doc.
    async fn follow(&mut self, held: MasterHeld, view: &ClusterView) -> Result<(), String> {
        let master = held.record.node_id;
        let epoch = held.record.epoch;
        if master == self.cfg.node_id {
            // An earlier session's key: it goes when that lease expires.
            return Ok(());
        }
        if let Current::Replica {
            master: m,
            epoch: e,
            task,
            ..
        } = &self.current
        {
            if *m == master && *e == epoch && !task.is_finished() {
                return Ok(());
            }
        }
        let Some(info) = view.nodes.iter().find(|n| n.node_id == master) else {
            return Ok(()); // its entry is gone: it is dying; the next turn sees
        };
        if self.follow_again_at.is_some_and(|at| Instant::now() < at) {
            return Ok(());
        }
        self.follow_again_at = None;
        let was_master = matches!(self.current, Current::Master { .. });
        self.stop_current().await;
        if was_master {
            tracing::warn!(
                new_master = master,
                epoch,
                "another node leads now; this node follows it"
            );
            self.reopen(true, None).await?;
        }
        // The node's certificate as its files hold it now: a rotation
        // takes effect on the next connection.
        let tls = match &self.tls {
            None => None,
            Some(tls) => Some(
                tidelog_runtime::tls::load::node_client_config(&tls.config)
                    .map_err(|e| format!("cannot connect to the master over TLS: {e}"))?,
            ),
        };
        let broker = self.broker().ok_or("no broker to follow with")?;
        store_of(&broker).set_replica(true);
        let follower = Follower::new(
            Arc::clone(&broker),
            FollowerConfig {
                cluster: self.cfg.name.clone(),
                node_id: self.cfg.node_id,
                handshake_timeout: HANDSHAKE,
                read_timeout: self.cfg.session_ttl().max(Duration::from_secs(2)),
                tls,
            },
        );
        let follow = follower.subscribe();
        let (stop, stop_rx) = watch::channel(false);
        let address = info.replication.clone();
        drop(broker);
        let task = tokio::spawn(async move { follower.follow(&address, stop_rx).await });
        self.copied_since_open = true;
        self.gate.set_part(Part::Replica {
            epoch,
            master,
            follow,
        });
        self.current = Current::Replica {
            master,
            epoch,
            stop,
            task,
        };
        Ok(())
    }

    /// A follower that ended: told to cut (carried out here), or failed
    /// (the next turn follows again).
    async fn check_follower(&mut self) -> Result<(), String> {
        let Current::Replica { task, .. } = &mut self.current else {
            return Ok(());
        };
        if !task.is_finished() {
            return Ok(());
        }
        let ended = task.await;
        self.current = Current::Joining;
        self.gate.set_part(Part::Joining);
        match ended {
            Ok(Ok(FollowEnd::MustCut(at))) => {
                tracing::warn!(
                    at,
                    "this log went past the master's: opening the broker again to cut it"
                );
                self.reopen(true, Some(at)).await
            }
            Ok(Ok(FollowEnd::Stopped)) => Ok(()),
            Ok(Err(e)) => {
                tracing::info!(error = %e, "replication from the master ended; following again shortly");
                self.follow_again_at = Some(Instant::now() + RETRY * 2);
                Ok(())
            }
            Err(e) => Err(format!("the follower task failed: {e}")),
        }
    }

    /// The master's turn: the in-sync set as the replicas' confirmations
    /// make it, written to etcd first (only then does it count here).
    async fn master_duties(&mut self) {
        let Current::Master { term, progress, .. } = &self.current else {
            return;
        };
        let Some(want) = progress.wanted_insync() else {
            return;
        };
        let nodes: Vec<u32> = want.iter().copied().collect();
        match self.election.change_insync(term, &nodes).await {
            Ok(InsyncChange::Written { .. }) => {
                tracing::info!(insync = ?nodes, "in-sync set changed");
                progress.set_insync(want);
            }
            Ok(InsyncChange::Deposed) => {
                tracing::warn!("deposed: the master key is no longer this term's");
                self.step_down().await;
            }
            Err(e) => tracing::warn!(error = %e, "could not write the in-sync set"),
        }
    }

    /// Stop being master (or replica): no writes from now on.
    async fn step_down(&mut self) {
        if matches!(self.current, Current::Joining) {
            return;
        }
        self.gate.set_part(Part::Joining);
        let was_master = matches!(self.current, Current::Master { .. });
        self.stop_current().await;
        if was_master {
            if let Some(b) = self.broker() {
                store_of(&b).set_replica(true);
            }
            // Nothing of the term's in-memory state (coordinators) may
            // outlive it.
            if let Err(e) = self.reopen(true, None).await {
                tracing::error!(error = %e, "could not open the broker again after stepping down");
            }
        }
    }

    async fn stop_current(&mut self) {
        match std::mem::replace(&mut self.current, Current::Joining) {
            Current::Joining => {}
            Current::Master {
                stop, mut tasks, ..
            } => {
                self.gate.set_part(Part::Joining);
                *self.source.lock().unwrap_or_else(|e| e.into_inner()) = None;
                let _ = stop.send(true);
                tasks.shutdown().await;
            }
            Current::Replica { stop, task, .. } => {
                self.gate.set_part(Part::Joining);
                let _ = stop.send(true);
                let _ = task.await;
            }
        }
    }

    /// Close the broker and open it again (module doc), as a replica or
    /// not, cutting the log at `cut` first if given.
    async fn reopen(&mut self, replica: bool, cut: Option<u64>) -> Result<(), String> {
        self.gate.set_part(Part::Joining);
        let taken = self
            .node
            .take_ready(REOPEN_RELEASE_TIMEOUT, &self.state)
            .await;
        match taken {
            Some(Ok(broker)) => tokio::task::spawn_blocking(move || broker.shutdown())
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?,
            Some(Err(still)) => {
                self.node.set_ready_again(still, &self.state);
                return Err("the broker is still in use; not opened again".into());
            }
            None => {}
        }
        if let Some(at) = cut {
            tidelog_storage::cut::request(&self.data_dir, at).map_err(|e| e.to_string())?;
        }
        let mut r = self.reopen.clone();
        // A replica holds back what its kept watermark does not cover; a
        // master's coordinators see its whole log (its readers, what
        // its in-sync set confirms from then on).
        r.store.cluster_member = replica;
        let broker =
            tokio::task::spawn_blocking(move || Broker::open(&r.broker, r.store, r.cleaner))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
        broker
            .join_cluster(Arc::clone(&self.gate) as _)
            .map_err(|e| e.to_string())?;
        store_of(&broker).set_replica(replica);
        store_of(&broker).confine_producer_ids(self.cfg.node_id);
        self.node.set_ready(broker, &self.state);
        self.copied_since_open = false;
        Ok(())
    }
}

/// The replication listener, for the node's life: each connection on its
/// own task, at most [`REPLICATION_CONNECTIONS_MAX`] at once (handshakes
/// included; more are closed at once): with TLS, the handshake first
/// (the replica's certificate checked against `tls.client_ca_file`, by
/// the acceptor, within its timeout), then to the current master term's
/// source once the certificate's principal is admitted, or refused when
/// this node is not master.
async fn accept(
    listener: TcpListener,
    slot: SourceSlot,
    node_id: u32,
    tls: Option<Arc<TlsAcceptor>>,
    connections: Arc<ConnectionSlots>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "replication listener: accept failed");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let Some(held) = connections.try_open("replication") else {
            continue; // counted and warned, rate-limited, by the slots
        };
        let _ = stream.set_nodelay(true);
        let (slot, tls) = (Arc::clone(&slot), tls.clone());
        tokio::spawn(async move {
            let _held = held;
            let (link, identity): (Box<dyn Link>, _) = match tls {
                None => (Box::new(stream), None),
                Some(tls) => match tls.accept(stream, "replication", peer).await {
                    Ok((stream, identity)) => (Box::new(stream), Some(identity)),
                    // Counted and logged by the acceptor.
                    Err(_) => return,
                },
            };
            serve_replica(link, identity, peer, slot, node_id).await;
        });
    }
}

/// One replication connection, its handshake done: to the master term's
/// source, or refused (module doc of [`accept`]).
async fn serve_replica(
    mut link: Box<dyn Link>,
    identity: Option<PeerIdentity>,
    peer: SocketAddr,
    slot: SourceSlot,
    node_id: u32,
) {
    let current = slot.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let Some((source, mut stop)) = current else {
        let refused = Frame::Refused {
            epoch: 0,
            code: RefusalCode::NotMaster,
            reason: format!("node {node_id} is not the master"),
        };
        let _ = tokio::time::timeout(HANDSHAKE, write_frame(&mut link, &refused)).await;
        return;
    };
    if let Some(identity) = identity {
        if let Err(reason) = admitted(source.holder(), &identity, peer) {
            tracing::warn!(%peer, reason, "replication connection refused");
            let refused = Frame::Refused {
                epoch: source.epoch(),
                code: RefusalCode::NotAuthorized,
                reason,
            };
            let _ = tokio::time::timeout(HANDSHAKE, write_frame(&mut link, &refused)).await;
            return;
        }
    }
    tokio::select! {
        r = source.stream(link) => {
            if let Err(e) = r {
                tracing::info!(%peer, error = %e, "replication stream ended");
            }
        }
        _ = stop.wait_for(|s| *s) => {}
    }
}

/// Whether the replica whose verified certificate is `identity`, from
/// `peer`, may copy this node's log: a certificate that names one of the
/// cluster's nodes by this master's ACLs (`Broker::is_cluster_node`).
fn admitted(broker: &Arc<Broker>, identity: &PeerIdentity, peer: SocketAddr) -> Result<(), String> {
    let Some(cn) = identity.common_name.as_deref() else {
        return Err("the certificate names no subject CN, so no principal".into());
    };
    if broker.is_cluster_node(cn, Some(peer.ip())) {
        Ok(())
    } else {
        Err(format!(
            "User:{cn} may not CLUSTER_ACTION the cluster: a node's certificate names a super user (security.super_users) or a principal with that ACL"
        ))
    }
}

/// Most replication connections at once, handshakes included: a cluster
/// has a few replicas, and each holds one.
pub(crate) const REPLICATION_CONNECTIONS_MAX: u64 = 64;

/// The replication listener's own cap ([`REPLICATION_CONNECTIONS_MAX`]).
pub(crate) fn replication_slots() -> Arc<ConnectionSlots> {
    ConnectionSlots::capped(
        REPLICATION_CONNECTIONS_MAX,
        "refusing replication connections: the listener holds its most at once (a flood, or replicas reconnecting in a loop)",
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpStream;

    use super::*;

    /// The replication listener holds at most its cap of connections,
    /// handshakes included: one past it is closed at once (and counted),
    /// while those it holds wait for their TLS handshake (never sent
    /// here); a slot given back takes the next one.
    #[tokio::test]
    async fn past_its_cap_the_replication_listener_closes_a_connection_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::write(dir.path().join("node.crt"), made.cert.pem()).unwrap();
        std::fs::write(
            dir.path().join("node.key"),
            made.signing_key.serialize_pem(),
        )
        .unwrap();
        let tls = tidelog_runtime::tls::TlsConfig {
            cert_file: Some(dir.path().join("node.crt")),
            key_file: Some(dir.path().join("node.key")),
            handshake_timeout_ms: 60_000,
            ..Default::default()
        };
        let acceptor = TlsAcceptor::load(&tls).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let slots = ConnectionSlots::capped(2, "test cap");
        tokio::spawn(accept(
            listener,
            Arc::default(),
            1,
            Some(acceptor),
            Arc::clone(&slots),
        ));
        let open = |n: u64| {
            let slots = Arc::clone(&slots);
            async move {
                while slots.snapshot().open != n {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        };
        let mut held = Vec::new();
        for n in 1..=2 {
            held.push(TcpStream::connect(addr).await.unwrap());
            tokio::time::timeout(Duration::from_secs(10), open(n))
                .await
                .unwrap();
        }
        let mut byte = [0u8; 1];
        let mut past = TcpStream::connect(addr).await.unwrap();
        let read = tokio::time::timeout(Duration::from_secs(10), past.read(&mut byte))
            .await
            .expect("the connection past the cap is closed at once");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert_eq!(slots.snapshot().refused, 1);
        for stream in &mut held {
            let waiting =
                tokio::time::timeout(Duration::from_millis(100), stream.read(&mut byte)).await;
            assert!(
                waiting.is_err(),
                "a held connection waits for its handshake"
            );
        }

        // A client that goes gives its slot back; the next one is held.
        drop(held.pop());
        tokio::time::timeout(Duration::from_secs(10), open(1))
            .await
            .unwrap();
        let _next = TcpStream::connect(addr).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), open(2))
            .await
            .unwrap();
        assert_eq!(slots.snapshot().refused, 1);
    }
}
