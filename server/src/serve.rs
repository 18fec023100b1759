//! `tidelog serve`: bind, recover, serve, shut down.
//!
//! Order of events:
//! 1. Load the TLS certificate when a listener speaks TLS (`http.tls`, an
//!    SSL or SASL_SSL Kafka listener): bad files stop start-up; from then
//!    on the files are watched and reloaded on SIGHUP
//!    (`tidelog_runtime::tls::TlsAcceptor`: a bad reload keeps the
//!    certificate in use, open connections are never dropped). Bind the
//!    HTTP listener and every Kafka listener (`kafka.listeners`, or
//!    `kafka.listen` unless null; a bind failure names the listener) and
//!    start serving at once, so `/status/ready` answers 503 (and
//!    `/metrics` answers, and Kafka partitions LEADER_NOT_AVAILABLE) while
//!    the store recovers.
//! 2. On a blocking thread (recovery can take a while): load the topic
//!    registry, open the compacted logs and declare compact topics to them,
//!    open the store with their dispatcher sink (recovery copies replayed
//!    records too), create declared topics, rebuild consumer offsets from
//!    `__consumer_offsets`' compacted log, start the LogCleaner threads
//!    (`Broker::open`, which also starts the group coordinator's
//!    `tidelog-groups` thread); then the node publishes it (`node.rs`:
//!    the HTTP consumer-instance manager first) and both front-ends serve,
//!    and the node starts the broker's schedules on their threads
//!    (`tidelog-offset-expiry`, and `tidelog-tiering` with a remote tier:
//!    `tidelog_broker::schedules`). A failure here stops the server with
//!    exit 1.
//! 3. On SIGINT or SIGTERM: the node's shutdown signal stops accepting
//!    (HTTP and Kafka), wakes long-polls (Kafka fetches answer what they
//!    have) and stops the schedules; requests in flight finish (a body
//!    still arriving has `http.body_read_timeout_ms`; connections without
//!    a request in flight close at once, see `tidelog_api::listener`),
//!    the schedule threads are joined, then the LogCleaner (joining its threads, so no pass
//!    is half-way), then `Store::shutdown` (flush, checkpoint, remove
//!    `abort`) and exit 0. A second signal exits at once with 1, leaving
//!    `abort` behind so the next start runs full recovery.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tidelog_api::Broker;
use tidelog_runtime::tls::{TlsAcceptor, TlsConfig};
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::config::Config;
use crate::node::Node;
use crate::EXIT_RUNTIME;

/// How long shutdown waits for the cluster loop to let go of the broker
/// and revoke its lease.
const CLUSTER_STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long shutdown waits for blocking store calls of abandoned requests.
const STORE_RELEASE_TIMEOUT: Duration = Duration::from_secs(30);

/// SIGTERM and SIGINT, whichever comes first.
struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

pub async fn run(config: Config) -> ExitCode {
    let failed = ExitCode::from(EXIT_RUNTIME);
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot install signal handlers");
            return failed;
        }
    };
    let connection_cap = open_file_limit(&config);
    let tls = if config.serves_tls() {
        let Some(acceptor) = acceptor(&config.tls, tidelog_runtime::tls::acceptor::METRICS_PREFIX)
        else {
            return failed;
        };
        Some(acceptor)
    } else {
        None
    };
    // A cluster with `tls`: the nodes' own TLS (replication, forwarded
    // writes), which always asks for the other node's certificate,
    // whatever `tls.client_auth` says for clients.
    let node_tls = match (&config.cluster, config.tls.enabled()) {
        (Some(_), true) => {
            let mut nodes = config.tls.clone();
            nodes.client_auth = tidelog_runtime::tls::ClientAuth::Required;
            match acceptor(&nodes, "tidelog_replication_tls") {
                Some(acceptor) => Some(crate::cluster::NodeTls {
                    acceptor,
                    config: nodes,
                }),
                None => return failed,
            }
        }
        _ => None,
    };
    let listener = match tokio::net::TcpListener::bind(config.listen).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(listen = %config.listen, error = %e, "cannot listen");
            eprintln!("tidelog: cannot listen on {}: {e}", config.listen);
            return failed;
        }
    };
    let mut kafka = Vec::new();
    for listener in config.kafka.effective_listeners() {
        let addr = listener.listen;
        let name = listener.name.clone();
        match tokio::net::TcpListener::bind(addr).await {
            Ok(socket) => kafka.push(tidelog_kafka::Listener {
                socket,
                name: listener.name,
                security_protocol: listener.security_protocol,
                advertised_host: listener.advertised_host,
                tls: tls
                    .clone()
                    .filter(|_| listener.security_protocol.uses_tls()),
            }),
            Err(e) => {
                tracing::error!(listener = %name, listen = %addr, error = %e, "cannot listen for Kafka");
                eprintln!("tidelog: cannot listen for Kafka listener {name} on {addr}: {e}");
                return failed;
            }
        }
    }
    // The bound address (the default base of consumer instances'
    // base_uri), which differs from `listen` only for port 0.
    let bound = listener.local_addr().unwrap_or(config.listen);
    // How the cluster's other nodes and clients reach this one.
    let addresses = crate::cluster::Addresses {
        http: config
            .cluster
            .as_ref()
            .and_then(|c| c.advertised_http.clone())
            .unwrap_or_else(|| bound.to_string()),
        kafka: kafka
            .first()
            .and_then(|l| {
                let at = l.socket.local_addr().ok()?;
                let host = l
                    .advertised_host
                    .clone()
                    .unwrap_or_else(|| at.ip().to_string());
                Some(format!("{host}:{}", at.port()))
            })
            .unwrap_or_default(),
    };
    let settings = config.api_settings().with_listen(bound);
    let node = Arc::new(Node::new(&settings, connection_cap));
    if let Some(tls) = &tls {
        node.register_metrics(Arc::clone(tls) as _);
        tls.spawn_watcher(node.shutdown_signal());
    }
    if let Some(node_tls) = &node_tls {
        node.register_metrics(Arc::clone(&node_tls.acceptor) as _);
        node_tls.acceptor.spawn_watcher(node.shutdown_signal());
    }
    let state = node.http(settings.clone(), config.data_dir.clone());
    if let Some(node_tls) = &node_tls {
        // Writes a replica forwards reach an HTTPS master with the node's
        // certificate, followed through rotations (replication reads it
        // per connection).
        if let Err(e) = node_tls.forward_with(state.clone(), node.shutdown_signal()) {
            tracing::error!(error = %e, "cannot load the node's TLS certificate");
            eprintln!("tidelog: {e}");
            return failed;
        }
    }
    let app = tidelog_api::router(state.clone());
    let mut server = tokio::spawn(tidelog_api::listener::serve(
        listener,
        app,
        state.clone(),
        config.listener_limits(),
        tls.clone().filter(|_| config.http.tls),
        node.shutdown_signal(),
    ));
    if !kafka.is_empty() {
        let mut kafka_config = config.kafka.clone();
        kafka_config.admin_token = config
            .admin_token
            .clone()
            .map(tidelog_kafka::config::AdminToken);
        kafka_config.cluster_id = Some(settings.broker.cluster_id.clone());
        // The node's ready slot, byte budgets (one of request bytes held
        // in memory for both front-ends, `http.max_inflight_bytes`,
        // KAFKA.md "Bad input", and one of fetch answers not yet written,
        // `http.max_inflight_response_bytes`), connection slots and
        // shutdown signal; its counters go into the HTTP API's `/metrics`.
        let handles = node.kafka();
        for listener in kafka {
            tracing::info!(
                listener = %listener.name,
                security_protocol = listener.security_protocol.as_str(),
                listen = ?listener.socket.local_addr().ok(),
                "Kafka listener"
            );
            let (config, handles) = (kafka_config.clone(), handles.clone());
            tokio::spawn(async move {
                tidelog_kafka::serve_in_node(listener, &config, handles).await;
            });
        }
    }
    tracing::info!(listen = %config.listen, https = config.http.tls, data_dir = %config.data_dir.display(), "listening; opening the store");

    let store_config = config.store_config();
    let cleaner_config = config.cleaner_config();
    let broker_config = settings.broker.clone();
    let (broker_config_for_reopen, store_config_for_reopen, cleaner_config_for_reopen) = (
        broker_config.clone(),
        store_config.clone(),
        cleaner_config.clone(),
    );
    let mut cluster_task: Option<tokio::task::JoinHandle<()>> = None;
    let mut opening = tokio::spawn(open_broker(broker_config, store_config, cleaner_config));
    let mut exit = ExitCode::SUCCESS;
    let mut server_done = false;
    // Phase 1: recovery, unless a signal comes first.
    let mut still_opening = true;
    let first_signal = tokio::select! {
        opened = &mut opening => {
            still_opening = false;
            match opened {
                Ok(Ok(ready)) => match &config.cluster {
                    None => {
                        node.set_ready(ready, &state);
                        node.start_schedules();
                        None
                    }
                    // In a cluster the node's role decides: the cluster
                    // loop publishes the broker and starts the schedules
                    // on a master.
                    Some(cluster) => match crate::cluster::start(
                        cluster.clone(),
                        addresses,
                        crate::cluster::runtime::Reopen {
                            broker: broker_config_for_reopen.clone(),
                            store: store_config_for_reopen.clone(),
                            cleaner: cleaner_config_for_reopen.clone(),
                        },
                        Arc::clone(&node),
                        state.clone(),
                        ready,
                        node_tls.clone(),
                        node.shutdown_signal(),
                    )
                    .await
                    {
                        Ok(task) => {
                            cluster_task = Some(task);
                            None
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "cannot join the cluster");
                            eprintln!("tidelog: {e}");
                            exit = failed;
                            Some("start-up failure")
                        }
                    },
                },
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "start-up failed");
                    eprintln!("tidelog: {e}");
                    exit = failed;
                    Some("start-up failure")
                }
                Err(e) => {
                    tracing::error!(error = %e, "start-up task failed");
                    exit = ExitCode::from(EXIT_RUNTIME);
                    Some("start-up failure")
                }
            }
        }
        name = signals.recv() => Some(name),
    };
    // Phase 2: serve until a signal (or the server fails on its own).
    let reason = match first_signal {
        Some(reason) => reason,
        None => tokio::select! {
            name = signals.recv() => name,
            result = &mut server => {
                server_done = true;
                tracing::error!(?result, "the HTTP server stopped on its own");
                exit = ExitCode::from(EXIT_RUNTIME);
                "server failure"
            }
        },
    };
    tracing::info!(
        reason,
        "shutting down: no new connections, finishing requests in flight"
    );
    tokio::spawn(async move {
        let name = signals.recv().await;
        tracing::warn!(signal = name, "second signal: exiting at once");
        eprintln!("tidelog: second signal ({name}): exiting without a clean shutdown");
        std::process::exit(i32::from(EXIT_RUNTIME));
    });
    node.begin_shutdown();
    if !server_done {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "HTTP server task failed");
        }
    }
    // The cluster loop ends on the same signal: its streams let go of the
    // broker and its lease is revoked, so another node leads at once.
    if let Some(task) = cluster_task {
        if tokio::time::timeout(CLUSTER_STOP_TIMEOUT, task)
            .await
            .is_err()
        {
            tracing::warn!("the cluster loop did not stop in time");
        }
    }

    // A signal during recovery: let it finish, then close what it opened
    // cleanly (recovery's work is then not repeated at the next start).
    if still_opening {
        match opening.await {
            Ok(Ok(ready)) => node.set_ready(ready, &state),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "start-up failed");
                exit = ExitCode::from(EXIT_RUNTIME);
            }
            Err(e) => {
                tracing::error!(error = %e, "start-up task failed");
                exit = ExitCode::from(EXIT_RUNTIME);
            }
        }
    }
    match node.take_ready(STORE_RELEASE_TIMEOUT, &state).await {
        None => {}
        Some(Ok(ready)) => match tokio::task::spawn_blocking(move || ready.shutdown()).await {
            Ok(Ok(())) => tracing::info!("clean shutdown"),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "store shutdown failed");
                exit = ExitCode::from(EXIT_RUNTIME);
            }
            Err(e) => {
                tracing::error!(error = %e, "store shutdown task failed");
                exit = ExitCode::from(EXIT_RUNTIME);
            }
        },
        Some(Err(still_shared)) => {
            // Something still holds the store: flush what we can; `abort`
            // stays, so the next start checks everything.
            tracing::error!("store still in use after {STORE_RELEASE_TIMEOUT:?}; flushing without a clean shutdown");
            match tokio::task::spawn_blocking(move || still_shared.checkpoint()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "final checkpoint failed"),
                Err(e) => tracing::error!(error = %e, "final checkpoint task failed"),
            }
            exit = ExitCode::from(EXIT_RUNTIME);
        }
    }
    exit
}

/// The acceptor of `config`'s files (its metric families under
/// `metrics_prefix`), reloaded on SIGHUP; `None` once the reason it
/// cannot be is logged and printed (start-up stops).
fn acceptor(config: &TlsConfig, metrics_prefix: &'static str) -> Option<Arc<TlsAcceptor>> {
    let acceptor = match TlsAcceptor::load_as(config, metrics_prefix) {
        Ok(acceptor) => acceptor,
        Err(e) => {
            tracing::error!(error = %e, "cannot load the TLS certificate");
            eprintln!("tidelog: {e}");
            return None;
        }
    };
    if let Err(e) = reload_on_sighup(&acceptor) {
        tracing::error!(error = %e, "cannot install the SIGHUP handler");
        return None;
    }
    Some(acceptor)
}

/// Reloads `acceptor`'s certificate on every SIGHUP (the file watcher
/// catches changes too; SIGHUP makes a rotation take effect at once).
/// Installed only when a listener speaks TLS: otherwise SIGHUP keeps its
/// default action.
fn reload_on_sighup(acceptor: &Arc<TlsAcceptor>) -> std::io::Result<()> {
    let mut hangup = signal(SignalKind::hangup())?;
    let acceptor = Arc::clone(acceptor);
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            let acceptor = Arc::clone(&acceptor);
            // The outcome is logged (and counted) by `reload`.
            let _ = tokio::task::spawn_blocking(move || acceptor.reload("SIGHUP")).await;
        }
    });
    Ok(())
}

/// Restores an empty data dir from the remote tier first when `tiered.url`
/// is set (docs/TIERED.md "Restore": topics, configs, compact snapshots;
/// partitions continue after their highest uploaded offset), then opens
/// the broker (recovery) on the blocking pool. A remote tier out of reach
/// on an empty data dir stops start-up: the server cannot tell an empty
/// bucket from one it cannot read.
async fn open_broker(
    broker_config: tidelog_broker::BrokerConfig,
    store_config: tidelog_broker::store::StoreConfig,
    cleaner_config: tidelog_broker::store::CleanerConfig,
) -> Result<Broker, tidelog_broker::BrokerError> {
    use tidelog_broker::restore;
    let data_dir = store_config.data_dir.clone();
    if broker_config.tiered.enabled() && restore::needs_restore(&data_dir)? {
        let tier = tidelog_broker::store::RemoteTier::open(&broker_config.tiered).map_err(|e| {
            tidelog_broker::BrokerError::InvalidConfig {
                key: "tiered".into(),
                reason: e.to_string(),
            }
        })?;
        tracing::info!(data_dir = %data_dir.display(), "empty data dir and tiered.url set: restoring from the remote tier");
        let report = restore::restore(&data_dir, &tier).await?;
        tracing::info!(?report, "restored from the remote tier");
    }
    tokio::task::spawn_blocking(move || Broker::open(&broker_config, store_config, cleaner_config))
        .await
        .map_err(|source| tidelog_broker::BrokerError::BlockingTaskFailed {
            task: "start-up task",
            source,
        })?
}

/// Raise the soft open-file limit to the hard one and return how many
/// connections both listeners may hold together: the limit minus the
/// descriptors kept for the store (`descriptors.store_reserve`, cut to
/// half the limit when the limit is too small for it). Logged at start.
fn open_file_limit(config: &Config) -> u64 {
    let limit = match crate::descriptors::raise_open_file_limit() {
        Ok(l) => {
            tracing::info!(
                soft_limit_at_start = l.soft_before,
                soft_limit = l.soft,
                hard_limit = l.hard,
                "open-file limit"
            );
            l.soft
        }
        Err(e) => match crate::descriptors::soft_limit() {
            // Not raised (a sandbox that refuses setrlimit): the reserve
            // is kept below the limit the process has.
            Ok(soft) => {
                tracing::warn!(error = %e, soft_limit = soft, "cannot raise the open-file limit; keeping the one the process started with");
                soft
            }
            // Without the limit nothing can be reserved: connections keep
            // only the listeners' own caps.
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the open-file limit; connections are not capped by it");
                return u64::MAX;
            }
        },
    };
    let wanted = config.descriptors.store_reserve;
    let (reserve, cap) = config.descriptors.connection_cap(limit);
    if reserve < wanted {
        tracing::warn!(
            open_file_limit = limit,
            store_reserve = wanted,
            kept = reserve,
            "the open-file limit is too small for descriptors.store_reserve; keeping half of it for the store (raise the hard limit: LimitNOFILE= in systemd, ulimit -Hn)"
        );
    }
    tracing::info!(
        open_file_limit = limit,
        store_reserve = reserve,
        max_connections = cap,
        "connections of both listeners together are capped below the open-file limit"
    );
    cap
}
