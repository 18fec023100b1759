//! Shared state of the handlers; start-up itself is the broker's
//! ([`Broker::open`]), and the runtime it is part of is the node's
//! (`server/src/node.rs`).
//!
//! The node owns what both front-ends share: the ready slot the broker is
//! published in once recovery is done, the byte budgets, the connection
//! slots, the metrics registry and the shutdown signal. It hands them over
//! as [`NodeHandles`] ([`AppState::from_node`]); [`AppState::new`] makes a
//! set of its own, for an API served alone (tests, tools).
//!
//! The server binds its listener first and opens the store afterwards (on a
//! blocking thread: recovery can take a while), so `/status/ready` can answer
//! 503 during recovery. Until the broker is published, every route that
//! needs the store answers 503/50301.
//!
//! Locks: the ready slot and `consumers` are held only to clone or swap an
//! `Arc`; no lock of this crate is ever held across an `.await`.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use tidelog_broker::consumers::Consumers;
pub use tidelog_broker::Broker;
use tidelog_broker::{Caller, Door};
use tidelog_runtime::connections::ConnectionSlots;
use tidelog_runtime::metrics::Registry;
use tidelog_runtime::ReadySlot;
use tokio::sync::{watch, Semaphore};

use crate::budget::ByteBudget;
use crate::error::ApiError;
use crate::history::{self, History};
use crate::metrics::{ConnectionMetrics, Metrics, Snapshot};
use crate::settings::ApiSettings;

/// What the node shares with the HTTP API (module doc).
#[derive(Debug, Clone)]
pub struct NodeHandles {
    /// The broker once recovery is done.
    pub ready: Arc<ReadySlot<Broker>>,
    /// `http.max_inflight_bytes`: request bytes held in memory, HTTP
    /// bodies and Kafka frames together.
    pub request_bytes: Arc<ByteBudget>,
    /// `http.max_inflight_response_bytes`: fetch answers rendered and not
    /// yet written, of both front-ends.
    pub answer_bytes: Arc<ByteBudget>,
    /// Both listeners' connections against the open-file limit; `None`
    /// for no cap (and no `tidelog_connections_*` families).
    pub connection_slots: Option<Arc<ConnectionSlots>>,
    /// Metric families of other components (the Kafka listener's), which
    /// `/metrics` renders after the API's own.
    pub metrics: Arc<Registry>,
    /// Turns `true` when the node starts shutting down: long-polls answer
    /// at once.
    pub shutdown: Arc<watch::Sender<bool>>,
}

impl NodeHandles {
    /// A set of its own for an API served alone, its budgets as
    /// `settings` says.
    pub fn own(settings: &ApiSettings) -> NodeHandles {
        NodeHandles {
            ready: ReadySlot::new(),
            request_bytes: ByteBudget::new(settings.max_inflight_bytes),
            answer_bytes: ByteBudget::new(settings.max_inflight_response_bytes),
            connection_slots: None,
            metrics: Arc::new(Registry::default()),
            shutdown: Arc::new(watch::channel(false).0),
        }
    }
}

/// State shared by every handler; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    inner: Arc<Shared>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) settings: ApiSettings,
    data_dir: PathBuf,
    /// The node's ready slot.
    ready: Arc<ReadySlot<Broker>>,
    /// The consumer-instance manager, started with the broker (it holds
    /// the broker weakly) and stopped before the broker is taken back.
    consumers: RwLock<Option<Arc<Consumers>>>,
    pub(crate) metrics: Metrics,
    /// The last minutes of rates and gauges (`crate::history`).
    pub(crate) history: History,
    pub(crate) limiter: Arc<Semaphore>,
    /// `http.max_inflight_bytes`: request bodies held in memory.
    pub(crate) inflight_bytes: Arc<ByteBudget>,
    /// `http.max_inflight_response_bytes`: fetch answers rendered and not
    /// yet written (`crate::answers`).
    pub(crate) answer_bytes: Arc<ByteBudget>,
    /// Failed admin token checks: their delay and its bound
    /// (`crate::failed_auth`).
    pub(crate) failed_auth: crate::failed_auth::FailedAuth,
    /// The client a replica forwards writes to the master with
    /// (`crate::forward`): plain http, or, with `http.tls`, HTTPS with
    /// the node's certificate once the server installs it
    /// ([`AppState::forward_over_tls`], again after a rotation).
    forwarder: crate::forward::Forwarder,
    tls_forwarder: RwLock<Option<crate::forward::Forwarder>>,
    /// Families of other components `/metrics` renders (the node's
    /// registry).
    families: Arc<Registry>,
    /// The connections both listeners hold against the open-file limit
    /// (the node's, or one without a cap once asked for); `/metrics`
    /// renders them once set.
    connection_slots: OnceLock<Arc<ConnectionSlots>>,
    /// Becomes `true` when the server starts shutting down; wakes
    /// long-polling fetches so they answer at once.
    shutdown: Arc<watch::Sender<bool>>,
}

impl Shared {
    /// The client writes are forwarded to the master with: `None` when
    /// the master speaks HTTPS (`http.tls`) and no node certificate was
    /// installed.
    pub(crate) fn forwarder(&self) -> Option<crate::forward::Forwarder> {
        if self.settings.tls {
            self.tls_forwarder
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        } else {
            Some(self.forwarder.clone())
        }
    }

    /// The store's stats, `None` before the broker is ready. Holds the
    /// broker only while it reads them.
    pub(crate) fn store_stats(&self) -> Option<tidelog_broker::store::StoreStats> {
        self.ready.get().map(|r| r.stats().store)
    }
}

impl AppState {
    /// An API served alone, with handles of its own ([`NodeHandles::own`]).
    pub fn new(settings: ApiSettings, data_dir: PathBuf) -> Self {
        let handles = NodeHandles::own(&settings);
        AppState::from_node(settings, data_dir, handles)
    }

    /// The HTTP API of a node: its ready slot, budgets, connection slots,
    /// metrics registry and shutdown signal are the node's `handles`.
    pub fn from_node(settings: ApiSettings, data_dir: PathBuf, handles: NodeHandles) -> Self {
        let limiter = Arc::new(Semaphore::new(settings.max_concurrent_requests.max(1)));
        let failed_auth = crate::failed_auth::FailedAuth::new(settings.auth_failure_delay);
        let connection_slots = OnceLock::new();
        if let Some(slots) = handles.connection_slots {
            let _ = connection_slots.set(slots);
        }
        let state = AppState {
            inner: Arc::new(Shared {
                settings,
                data_dir,
                ready: handles.ready,
                consumers: RwLock::new(None),
                metrics: Metrics::default(),
                history: History::default(),
                limiter,
                inflight_bytes: handles.request_bytes,
                answer_bytes: handles.answer_bytes,
                failed_auth,
                forwarder: crate::forward::Forwarder::default(),
                tls_forwarder: RwLock::new(None),
                families: handles.metrics,
                connection_slots,
                shutdown: handles.shutdown,
            }),
        };
        let shared = Arc::downgrade(&state.inner);
        history::start(move || match shared.upgrade() {
            Some(shared) => take_sample(&shared),
            None => history::Tick::Gone,
        });
        state
    }

    /// Writes a replica forwards go to the master over HTTPS with
    /// `client` (the node's certificate, the cluster's CA: docs/CLUSTER.md
    /// "Security"), from the next write on. Set by the server for a
    /// cluster with `tls`, and again when the certificate is rotated;
    /// writes already forwarded finish on the connections they hold.
    pub fn forward_over_tls(&self, client: Arc<rustls::ClientConfig>) {
        *self
            .inner
            .tls_forwarder
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(crate::forward::Forwarder::over_tls(client));
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner
    }

    pub fn settings(&self) -> &ApiSettings {
        &self.inner.settings
    }

    /// The connections both listeners count against the open-file limit
    /// (`tidelog_runtime::connections`): the server's, once set, or one
    /// without a cap.
    pub fn connection_slots(&self) -> Arc<ConnectionSlots> {
        Arc::clone(
            self.inner
                .connection_slots
                .get_or_init(ConnectionSlots::unlimited),
        )
    }

    /// The counters the HTTP listener keeps of its connections.
    pub fn connection_metrics(&self) -> &ConnectionMetrics {
        &self.inner.metrics.connections
    }

    /// The data directory the store is (being) opened in.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.inner.data_dir
    }

    /// Publishes the opened store: from now on the API serves. The store
    /// measured the disk while opening, so its disk-full flag is right from
    /// the first request. For an API served alone; a node publishes its
    /// broker itself, after [`AppState::start_consumers`].
    pub fn set_ready(&self, ready: Broker) {
        let ready = Arc::new(ready);
        self.start_consumers(&ready);
        self.inner.ready.publish(ready);
        tracing::info!("ready");
    }

    /// Starts the consumer-instance manager over `broker`, before the
    /// broker is published, so the consumer-instance routes serve from the
    /// first ready request.
    pub fn start_consumers(&self, broker: &Arc<Broker>) {
        match Consumers::start(broker, self.inner.settings.consumers.clone()) {
            Ok(consumers) => {
                *self
                    .inner
                    .consumers
                    .write()
                    .unwrap_or_else(|e| e.into_inner()) = Some(consumers);
            }
            // The consumer-instance routes answer 503 then; the rest serves.
            Err(e) => tracing::error!(error = %e, "cannot start the consumer-instance manager"),
        }
    }

    /// Stops the consumer-instance manager (joining `tidelog-consumers`: at
    /// most one pass, milliseconds; the broker picks the thread), before
    /// the broker is taken back.
    pub async fn stop_consumers(&self) {
        let consumers = self
            .inner
            .consumers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(consumers) = consumers {
            consumers.stop_async().await;
        }
    }

    /// The consumer-instance manager, or 503/50301 during recovery.
    pub fn consumers(&self) -> Result<Arc<Consumers>, ApiError> {
        self.inner
            .consumers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| ApiError::NotReady {
                message: "the consumer-instance manager is not running (recovery, or shutdown)"
                    .into(),
            })
    }

    /// The opened store and registry, or 503/50301 during recovery.
    pub fn ready(&self) -> Result<Arc<Broker>, ApiError> {
        self.inner.ready.get().ok_or_else(|| ApiError::NotReady {
            message: "recovery has not finished; try again shortly".into(),
        })
    }

    /// The broker's door for the request being served, or 503/50301
    /// during recovery: the only way a handler reaches the broker. It is
    /// made for the request's caller (`crate::login`, named by the
    /// router's guard around the handler).
    pub fn door(&self) -> Result<Door, ApiError> {
        Ok(self.ready()?.door_for(&Caller::current()))
    }

    pub fn is_ready(&self) -> bool {
        self.inner.ready.is_ready()
    }

    /// Wakes long-polls. The HTTP server's own
    /// graceful shutdown stops accepting and waits for requests in flight.
    pub fn begin_shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }

    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.inner.shutdown.subscribe()
    }

    /// Takes the store back for a clean shutdown once no request holds it
    /// any more, the consumer-instance manager stopped first. Waits for
    /// blocking calls still running (an append whose client went away,
    /// say) for at most `timeout`; `Err` gives the `Arc` back if some still
    /// hold it then (`ReadySlot::take`).
    pub async fn take_ready(&self, timeout: Duration) -> Option<Result<Broker, Arc<Broker>>> {
        self.stop_consumers().await;
        self.inner.ready.take(timeout).await
    }

    /// What `/metrics` shows besides the API's own counters.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let ready = self.ready().ok();
        let compacted = ready
            .as_ref()
            .map(|r| r.compacted_log_totals())
            .unwrap_or_default();
        let stats = ready.as_ref().map(|r| r.stats());
        Snapshot {
            ready: ready.is_some(),
            store: stats.as_ref().map(|s| s.store.clone()),
            topics: stats.as_ref().map_or(0, |s| s.topics),
            consumer_groups: stats.as_ref().map_or(0, |s| s.consumer_groups),
            cleaner: stats.as_ref().map(|s| s.cleaner.clone()),
            compacted_logs: compacted.logs,
            compacted_log_segments: compacted.segments,
            compacted_log_bytes: compacted.bytes,
            coordinator: stats.map(|s| s.coordinator),
            consumer_lag: ready.as_ref().map(|r| r.consumer_lag()).unwrap_or_default(),
            consumer_instances: self.consumers().map_or(0, |c| c.instance_count()),
            families: self.inner.families.families(),
            connection_slots: self.inner.connection_slots.get().map(|c| c.snapshot()),
            open_files: open_files(),
            tiered: ready.as_ref().and_then(|r| r.tiering_stats()),
            cluster: ready.as_ref().and_then(|r| r.cluster()).map(|gate| {
                crate::metrics::ClusterSnapshot {
                    status: gate.status(),
                    in_sync: gate.in_sync(),
                }
            }),
            inflight_bytes: self.inner.inflight_bytes.used_bytes(),
            answer_bytes: self.inner.answer_bytes.used_bytes(),
            in_flight_requests: self
                .inner
                .settings
                .max_concurrent_requests
                .max(1)
                .saturating_sub(self.inner.limiter.available_permits()),
        }
    }
}

/// Takes one sample of the rates and gauges the console plots
/// (`crate::history`); [`history::Tick::NotReady`] while the broker is not
/// ready (recovery).
fn take_sample(shared: &Shared) -> history::Tick {
    let Some(store) = shared.store_stats() else {
        return history::Tick::NotReady;
    };
    let metrics = &shared.metrics;
    shared.history.push(history::Sample {
        timestamp_ms: history::now_ms(),
        produce_records: metrics.produce.records.load(Ordering::Relaxed),
        produce_bytes: metrics.produce.bytes.load(Ordering::Relaxed),
        fetch_records: metrics.fetch.records.load(Ordering::Relaxed),
        fetch_bytes: metrics.fetch.bytes.load(Ordering::Relaxed),
        dispatch_lag_bytes: store.dispatch_lag_bytes,
        disk_used_ratio: store.disk_used_ratio,
        commitlog_segments: store.commitlog_segments,
    });
    history::Tick::Sampled
}

/// The process's open file descriptors now (`/proc/self/fd`; `None` where
/// there is no procfs).
fn open_files() -> Option<u64> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    // The directory being read is one of them.
    Some((dir.count() as u64).saturating_sub(1))
}
