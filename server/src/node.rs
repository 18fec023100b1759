//! The node: the runtime both front-ends serve in.
//!
//! It owns what HTTP and Kafka share, and hands each front-end its own
//! context built from it ([`Node::http`]: the API's `AppState`;
//! [`Node::kafka`]: the Kafka listener's handles, no closure over the
//! HTTP state):
//!
//! * the ready slot: the broker once recovery is done
//!   (`tidelog_runtime::ReadySlot`);
//! * the byte budgets: request bytes (`http.max_inflight_bytes`) and fetch
//!   answers not yet written (`http.max_inflight_response_bytes`), one of
//!   each for both front-ends;
//! * the connection slots: both listeners' connections under the
//!   open-file limit;
//! * the metrics registry: families of components the API's `/metrics`
//!   renders beside its own (the Kafka listener's);
//! * the shutdown signal: one `watch` that turns `true` once, which stops
//!   the listeners and the schedules and wakes long-polls of both
//!   front-ends;
//! * the schedules: the broker's periodic threads
//!   (`tidelog_broker::schedules`), started once the broker is ready.
//!
//! Invariants: the budgets, slots, registry and signal exist before any
//! listener is started and are never replaced; the broker is published
//! only after the HTTP consumer-instance manager is started over it, and
//! taken back only after the schedules have ended and that manager is
//! stopped. `serve.rs` composes these in order (bind, publish, shut down).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tidelog_api::{ApiSettings, AppState, Broker, NodeHandles};
use tidelog_broker::schedules::{self, Schedules};
use tidelog_kafka::metrics::KafkaMetrics;
use tidelog_runtime::metrics::Registry;
use tidelog_runtime::{ByteBudget, ConnectionSlots, ReadySlot};
use tokio::sync::watch;

/// The runtime of one server (module doc).
#[derive(Debug)]
pub struct Node {
    ready: Arc<ReadySlot<Broker>>,
    request_bytes: Arc<ByteBudget>,
    answer_bytes: Arc<ByteBudget>,
    connections: Arc<ConnectionSlots>,
    metrics: Arc<Registry>,
    shutdown: Arc<watch::Sender<bool>>,
    /// The running schedules and their stop signal.
    schedules: Mutex<Option<(Schedules, watch::Sender<bool>)>>,
}

impl Node {
    /// A node with its budgets as `settings` says and `connection_cap`
    /// connections for both listeners together.
    pub fn new(settings: &ApiSettings, connection_cap: u64) -> Node {
        Node {
            ready: ReadySlot::new(),
            request_bytes: ByteBudget::new(settings.max_inflight_bytes),
            answer_bytes: ByteBudget::new(settings.max_inflight_response_bytes),
            connections: ConnectionSlots::new(connection_cap),
            metrics: Arc::new(Registry::default()),
            shutdown: Arc::new(watch::channel(false).0),
            schedules: Mutex::new(None),
        }
    }

    /// The HTTP API's state over this node's handles.
    pub fn http(&self, settings: ApiSettings, data_dir: std::path::PathBuf) -> AppState {
        AppState::from_node(
            settings,
            data_dir,
            NodeHandles {
                ready: Arc::clone(&self.ready),
                request_bytes: Arc::clone(&self.request_bytes),
                answer_bytes: Arc::clone(&self.answer_bytes),
                connection_slots: Some(Arc::clone(&self.connections)),
                metrics: Arc::clone(&self.metrics),
                shutdown: Arc::clone(&self.shutdown),
            },
        )
    }

    /// The Kafka listeners' handles (one clone per listener: they count
    /// together); the counters are registered for `/metrics` (a server
    /// without a Kafka listener shows no Kafka families). Called once.
    pub fn kafka(&self) -> tidelog_kafka::NodeHandles {
        let metrics = Arc::new(KafkaMetrics::default());
        self.metrics.register(Arc::clone(&metrics) as _);
        let slot = Arc::clone(&self.ready);
        // Until recovery is done every partition answers
        // LEADER_NOT_AVAILABLE (KAFKA.md "Not ready").
        let ready: tidelog_kafka::Ready = Arc::new(move || slot.get());
        tidelog_kafka::NodeHandles {
            ready,
            budgets: tidelog_kafka::Budgets {
                requests: Arc::clone(&self.request_bytes),
                answers: Arc::clone(&self.answer_bytes),
            },
            metrics,
            connections: Arc::clone(&self.connections),
            stop: self.shutdown.subscribe(),
        }
    }

    /// Adds a component's families to `/metrics` (the TLS acceptor's).
    pub fn register_metrics(&self, families: Arc<dyn tidelog_runtime::MetricFamilies>) {
        self.metrics.register(families);
    }

    /// Turns `true` when shutdown begins.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Publishes the opened broker: the HTTP consumer-instance manager is
    /// started over it first, then both front-ends serve it.
    pub fn set_ready(&self, broker: Broker, http: &AppState) {
        let broker = Arc::new(broker);
        http.start_consumers(&broker);
        self.ready.publish(broker);
        tracing::info!("ready");
    }

    /// The published broker, if any (the cluster runtime's handle on it).
    pub fn broker(&self) -> Option<Arc<Broker>> {
        self.ready.get()
    }

    /// Publishes again a broker [`Node::take_ready`] could not take back
    /// (still held): it goes on serving as it was.
    pub fn set_ready_again(&self, broker: Arc<Broker>, http: &AppState) {
        http.start_consumers(&broker);
        self.ready.publish(broker);
    }

    /// Starts the broker's schedules (offset expiry, and tiering with a
    /// remote tier) on their named threads, until shutdown begins.
    pub fn start_schedules(&self) {
        let Some(broker) = self.ready.get() else {
            return;
        };
        // Their own stop signal, which shutdown turns and so does
        // `take_ready` (a cluster's node takes the broker back to open it
        // again, and the threads hold it weakly till they stop).
        let (stop, stop_rx) = watch::channel(*self.shutdown.borrow());
        let mut shutdown = self.shutdown.subscribe();
        let forward = stop.clone();
        tokio::spawn(async move {
            let _ = shutdown.wait_for(|s| *s).await;
            let _ = forward.send(true);
        });
        let started = schedules::start(&broker, tokio::runtime::Handle::current(), stop_rx);
        *self.schedules.lock().unwrap_or_else(|e| e.into_inner()) = Some((started, stop));
    }

    /// Stops the listeners and the schedules, and wakes long-polls.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Takes the broker back for a clean shutdown: waits for the schedule
    /// threads to end and stops the HTTP consumer-instance manager, then
    /// waits at most `timeout` for requests still holding the broker
    /// (`ReadySlot::take`). Call after [`Node::begin_shutdown`].
    pub async fn take_ready(
        &self,
        timeout: Duration,
        http: &AppState,
    ) -> Option<Result<Broker, Arc<Broker>>> {
        let running = self
            .schedules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((running, stop)) = running {
            let _ = stop.send(true);
            if let Err(e) = tokio::task::spawn_blocking(move || running.join()).await {
                tracing::error!(error = %e, "joining the schedule threads failed");
            }
        }
        http.stop_consumers().await;
        self.ready.take(timeout).await
    }
}
