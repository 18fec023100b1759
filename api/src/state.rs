//! Shared state of the handlers; start-up itself is the broker's
//! ([`Broker::open`]).
//!
//! The server binds its listener first and opens the store afterwards (on a
//! blocking thread: recovery can take a while), so `/status/ready` can answer
//! 503 during recovery. Until [`AppState::set_ready`] is called, every route
//! that needs the store answers 503/50301.
//!
//! Locks: `ready` is an RwLock held only to clone or swap an `Arc`; no lock
//! of this crate is ever held across an `.await`.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use tidelog_broker::connections::ConnectionSlots;
use tidelog_broker::consumers::Consumers;
use tidelog_broker::kafka_metrics::KafkaMetrics;
pub use tidelog_broker::Broker;
use tokio::sync::{watch, Semaphore};

use crate::budget::ByteBudget;
use crate::error::ApiError;
use crate::history::{self, History};
use crate::metrics::{ConnectionMetrics, Metrics, Snapshot};
use crate::settings::ApiSettings;

/// State shared by every handler; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    inner: Arc<Shared>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) settings: ApiSettings,
    data_dir: PathBuf,
    ready: RwLock<Option<Arc<Broker>>>,
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
    /// The Kafka listener's counters, once the server started one
    /// ([`AppState::kafka_metrics`]); `/metrics` renders them.
    kafka_metrics: OnceLock<Arc<KafkaMetrics>>,
    /// The connections both listeners hold against the open-file limit
    /// ([`AppState::set_connection_slots`]); `/metrics` renders them.
    connection_slots: OnceLock<Arc<ConnectionSlots>>,
    /// Becomes `true` when the server starts shutting down; wakes
    /// long-polling fetches so they answer at once.
    shutdown: watch::Sender<bool>,
}

impl Shared {
    /// The store's stats, `None` before the broker is ready. Holds the
    /// broker only while it reads them.
    pub(crate) fn store_stats(&self) -> Option<tidelog_broker::store::StoreStats> {
        let ready = self.ready.read().unwrap_or_else(|e| e.into_inner()).clone();
        ready.map(|r| r.store.stats())
    }
}

impl AppState {
    pub fn new(settings: ApiSettings, data_dir: PathBuf) -> Self {
        let limiter = Arc::new(Semaphore::new(settings.max_concurrent_requests.max(1)));
        let inflight_bytes = ByteBudget::new(settings.max_inflight_bytes);
        let answer_bytes = ByteBudget::new(settings.max_inflight_response_bytes);
        let failed_auth = crate::failed_auth::FailedAuth::new(settings.auth_failure_delay);
        let state = AppState {
            inner: Arc::new(Shared {
                settings,
                data_dir,
                ready: RwLock::new(None),
                consumers: RwLock::new(None),
                metrics: Metrics::default(),
                history: History::default(),
                limiter,
                inflight_bytes,
                answer_bytes,
                failed_auth,
                kafka_metrics: OnceLock::new(),
                connection_slots: OnceLock::new(),
                shutdown: watch::channel(false).0,
            }),
        };
        let shared = Arc::downgrade(&state.inner);
        history::start(move || match shared.upgrade() {
            Some(shared) => take_sample(&shared),
            None => history::Tick::Gone,
        });
        state
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner
    }

    pub fn settings(&self) -> &ApiSettings {
        &self.inner.settings
    }

    /// The budget of request bytes held in memory, for other listeners to
    /// share with the HTTP API.
    pub fn inflight_bytes_budget(&self) -> Arc<ByteBudget> {
        Arc::clone(&self.inner.inflight_bytes)
    }

    /// The budget of fetch answers held until written
    /// (`http.max_inflight_response_bytes`), for other listeners to share
    /// with the HTTP API: readers that do not read hold these bytes, never
    /// the request bytes producers need.
    pub fn answer_bytes_budget(&self) -> Arc<ByteBudget> {
        Arc::clone(&self.inner.answer_bytes)
    }

    /// The counters for a Kafka listener to keep, which `/metrics` then
    /// shows beside the API's own (absent until this is called: a server
    /// without a Kafka listener shows no Kafka families).
    pub fn kafka_metrics(&self) -> Arc<KafkaMetrics> {
        Arc::clone(self.inner.kafka_metrics.get_or_init(Default::default))
    }

    /// The connections both listeners count against the open-file limit
    /// (`tidelog_broker::connections`): the server's, once set, or one
    /// without a cap.
    pub fn connection_slots(&self) -> Arc<ConnectionSlots> {
        Arc::clone(
            self.inner
                .connection_slots
                .get_or_init(ConnectionSlots::unlimited),
        )
    }

    /// Set the connections' cap the server derived from its open-file
    /// limit, before any listener asks for [`AppState::connection_slots`];
    /// `false` if one was set or handed out already.
    pub fn set_connection_slots(&self, slots: Arc<ConnectionSlots>) -> bool {
        self.inner.connection_slots.set(slots).is_ok()
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
    /// the first request.
    pub fn set_ready(&self, ready: Broker) {
        let ready = Arc::new(ready);
        match Consumers::start(&ready, self.inner.settings.consumers.clone()) {
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
        *self.inner.ready.write().unwrap_or_else(|e| e.into_inner()) = Some(ready);
        tracing::info!("ready");
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
        self.inner
            .ready
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| ApiError::NotReady {
                message: "recovery has not finished; try again shortly".into(),
            })
    }

    pub fn is_ready(&self) -> bool {
        self.inner
            .ready
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
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
    /// any more. Waits for blocking calls still running (an append whose
    /// client went away, say) for at most `timeout`; `Err` gives the
    /// `Arc` back if some still hold it then.
    pub async fn take_ready(&self, timeout: Duration) -> Option<Result<Broker, Arc<Broker>>> {
        let consumers = self
            .inner
            .consumers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(consumers) = consumers {
            // Joins `tidelog-consumers` (at most one pass, milliseconds).
            let _ = tokio::task::spawn_blocking(move || consumers.stop()).await;
        }
        let taken = self
            .inner
            .ready
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut ready = taken;
        loop {
            match Arc::try_unwrap(ready) {
                Ok(r) => return Some(Ok(r)),
                Err(still_shared) => {
                    if tokio::time::Instant::now() >= deadline {
                        return Some(Err(still_shared));
                    }
                    ready = still_shared;
                    // Shutdown only: blocking store calls finish in
                    // milliseconds and signal nothing when they do.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }

    /// What `/metrics` shows besides the API's own counters.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let ready = self.ready().ok();
        let compacted = ready
            .as_ref()
            .map(|r| r.compacted_log_totals())
            .unwrap_or_default();
        Snapshot {
            ready: ready.is_some(),
            store: ready.as_ref().map(|r| r.store.stats()),
            topics: ready.as_ref().map_or(0, |r| r.registry.len()),
            consumer_groups: ready.as_ref().map_or(0, |r| r.groups.group_count()),
            cleaner: ready.as_ref().map(|r| r.cleaner.metrics()),
            compacted_logs: compacted.logs,
            compacted_log_segments: compacted.segments,
            compacted_log_bytes: compacted.bytes,
            coordinator: ready.as_ref().map(|r| r.coordinator.stats()),
            consumer_lag: ready.as_ref().map(|r| r.consumer_lag()).unwrap_or_default(),
            consumer_instances: self.consumers().map_or(0, |c| c.instance_count()),
            kafka: self.inner.kafka_metrics.get().map(|k| k.snapshot()),
            connection_slots: self.inner.connection_slots.get().map(|c| c.snapshot()),
            open_files: open_files(),
            tiered: ready.as_ref().and_then(|r| r.tiering_stats()),
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
