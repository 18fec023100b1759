//! Shared state of the handlers, and start-up.
//!
//! The server binds its listener first and opens the store afterwards (on a
//! blocking thread: recovery can take a while), so `/status/ready` can answer
//! 503 during recovery. Until [`AppState::set_ready`] is called, every route
//! that needs the store answers 503/50301.
//!
//! Locks: `ready` is an RwLock held only to clone or swap an `Arc`; no lock
//! of this crate is ever held across an `.await`.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tidelog_storage::{Store, StoreConfig, StoreError};
use tokio::sync::{watch, Semaphore};

use crate::error::ApiError;
use crate::groups::GroupOffsets;
use crate::metrics::{Metrics, Snapshot};
use crate::registry::{RegistryError, TopicRegistry, CONSUMER_OFFSETS_TOPIC};
use crate::settings::ApiSettings;

/// Directory under the data dir that holds the topic registry.
pub const CONFIG_DIR: &str = "config";

/// Why the server could not get ready.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("cannot open the store in {data_dir}: {source}")]
    Store {
        data_dir: PathBuf,
        #[source]
        source: StoreError,
    },
    #[error("topic registry: {0}")]
    Registry(#[from] RegistryError),
    #[error("cannot rebuild consumer offsets from {CONSUMER_OFFSETS_TOPIC}: {source}")]
    ConsumerOffsets {
        #[source]
        source: StoreError,
    },
}

/// Everything that exists once recovery is done.
pub struct Ready {
    pub store: Store,
    pub registry: TopicRegistry,
    pub groups: GroupOffsets,
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready")
            .field("data_dir", &self.store.data_dir())
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl Ready {
    /// Opens the store (recovery), loads the topic registry, creates the
    /// internal and declared topics and rebuilds consumer offsets. Blocking.
    pub fn open(settings: &ApiSettings, store_config: StoreConfig) -> Result<Ready, StartupError> {
        let data_dir = store_config.data_dir.clone();
        let store = Store::open(store_config).map_err(|source| StartupError::Store {
            data_dir: data_dir.clone(),
            source,
        })?;
        match Self::prepare(settings, &store, &data_dir) {
            Ok((registry, groups)) => Ok(Ready {
                store,
                registry,
                groups,
            }),
            Err(e) => {
                // Leave the store as a clean shutdown would: the failure was
                // ours, not the log's, and the next start should be quick.
                if let Err(close) = store.shutdown() {
                    tracing::error!(error = %close, "closing the store after a failed start");
                }
                Err(e)
            }
        }
    }

    fn prepare(
        settings: &ApiSettings,
        store: &Store,
        data_dir: &std::path::Path,
    ) -> Result<(TopicRegistry, GroupOffsets), StartupError> {
        let registry = TopicRegistry::load(&data_dir.join(CONFIG_DIR))?;
        registry.ensure_internal(&|p| next_offset(store, CONSUMER_OFFSETS_TOPIC, p))?;
        registry.apply_declared(&settings.declared_topics, &|t, p| next_offset(store, t, p))?;
        let internal = registry.get(CONSUMER_OFFSETS_TOPIC);
        let groups = GroupOffsets::rebuild(store, &|p| {
            internal.as_ref().map_or(0, |t| t.base_offset(p))
        })
        .map_err(|source| StartupError::ConsumerOffsets { source })?;
        Ok((registry, groups))
    }

    /// Flushes, checkpoints and removes `abort` (Store::shutdown).
    pub fn shutdown(self) -> Result<(), StoreError> {
        self.store.shutdown()
    }
}

/// The queue offset the next record of a partition will get: the base of a
/// topic created now (see `registry.rs`). Read from the CommitLog's writer,
/// not the ConsumeQueue, so records appended but not yet dispatched are
/// counted too.
pub fn next_offset(store: &Store, topic: &str, partition: u32) -> u64 {
    tidelog_storage::TopicPartition::new(topic, partition)
        .map(|tp| store.commit_log().next_queue_offset(&tp))
        .unwrap_or(0)
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
    ready: RwLock<Option<Arc<Ready>>>,
    pub(crate) metrics: Metrics,
    pub(crate) limiter: Arc<Semaphore>,
    /// Becomes `true` when the server starts shutting down; wakes
    /// long-polling fetches so they answer at once.
    shutdown: watch::Sender<bool>,
}

impl AppState {
    pub fn new(settings: ApiSettings, data_dir: PathBuf) -> Self {
        let limiter = Arc::new(Semaphore::new(settings.max_concurrent_requests.max(1)));
        AppState {
            inner: Arc::new(Shared {
                settings,
                data_dir,
                ready: RwLock::new(None),
                metrics: Metrics::default(),
                limiter,
                shutdown: watch::channel(false).0,
            }),
        }
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner
    }

    pub fn settings(&self) -> &ApiSettings {
        &self.inner.settings
    }

    /// The data directory the store is (being) opened in.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.inner.data_dir
    }

    /// Publishes the opened store: from now on the API serves. The store
    /// measured the disk while opening, so its disk-full flag is right from
    /// the first request.
    pub fn set_ready(&self, ready: Ready) {
        *self.inner.ready.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(ready));
        tracing::info!("ready");
    }

    /// The opened store and registry, or 503/50301 during recovery.
    pub fn ready(&self) -> Result<Arc<Ready>, ApiError> {
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
    pub async fn take_ready(&self, timeout: Duration) -> Option<Result<Ready, Arc<Ready>>> {
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
        Snapshot {
            ready: ready.is_some(),
            store: ready.as_ref().map(|r| r.store.stats()),
            topics: ready.as_ref().map_or(0, |r| r.registry.len()),
            consumer_groups: ready.as_ref().map_or(0, |r| r.groups.group_count()),
            in_flight_requests: self
                .inner
                .settings
                .max_concurrent_requests
                .max(1)
                .saturating_sub(self.inner.limiter.available_permits()),
        }
    }
}
