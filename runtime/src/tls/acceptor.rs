//! The TLS acceptor every TLS listener shares: the current server config
//! behind a swap, reloaded from the files on demand (SIGHUP) or when the
//! watcher sees them change, and the handshake each connection runs on
//! its own task.
//!
//! Invariants:
//! * A handshake takes the config current when it starts and keeps it:
//!   a reload changes what the next handshake presents, never an open
//!   connection (its session keys are its own).
//! * A reload that cannot build a config from the files (half-written,
//!   mismatched, gone) keeps the current one and warns: a rotation gone
//!   wrong does not take the listeners down.
//! * A handshake is bounded by `tls.handshake_timeout_ms` and runs on the
//!   connection's task, never the accept loop's; one that fails or times
//!   out closes its connection, is counted, logged at debug, and warned
//!   at most once per [`HANDSHAKE_WARN_INTERVAL`].
//! * The lock around the current config is held only to clone or swap an
//!   `Arc`, never across I/O.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio_rustls::server::TlsStream;

use super::config::TlsConfig;
use super::{load, PeerIdentity, TlsError};
use crate::metrics::{counter, MetricFamilies};

/// How often the watcher looks at the files' modification times.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(3);
/// Failed handshakes are warned at most this often (each is counted and
/// logged at debug).
pub const HANDSHAKE_WARN_INTERVAL: Duration = Duration::from_secs(10);

/// What a file looked like when it was last loaded: its modification
/// time, length and inode (a rename over it changes the inode even when
/// the time is the same), `None` when it could not be read.
type Stamp = Option<(SystemTime, u64, u64)>;

/// Why a handshake did not finish (already counted and logged).
#[derive(Debug, thiserror::Error)]
pub enum HandshakeFailed {
    #[error("no TLS handshake within {0:?}")]
    TimedOut(Duration),
    #[error("TLS handshake failed: {0}")]
    Failed(std::io::Error),
}

/// The families of the client listeners' shared acceptor.
pub const METRICS_PREFIX: &str = "tidelog_tls";

/// The shared acceptor (module doc).
#[derive(Debug)]
pub struct TlsAcceptor {
    config: TlsConfig,
    /// Its metric families' common prefix ([`METRICS_PREFIX`] for the
    /// client listeners'; another acceptor of the node names its own).
    metrics_prefix: &'static str,
    current: RwLock<Arc<ServerConfig>>,
    /// The files' stamps when they were last loaded (or last found bad).
    stamps: Mutex<Vec<(PathBuf, Stamp)>>,
    handshakes_failed: AtomicU64,
    handshakes_timed_out: AtomicU64,
    /// Reloads that took effect: a count, and what follows the
    /// certificate elsewhere waits on ([`TlsAcceptor::reloaded`]).
    reloads: watch::Sender<u64>,
    reloads_failed: AtomicU64,
    /// When a failed handshake was last warned, and how many since.
    warned: Mutex<(Option<Instant>, u64)>,
}

impl TlsAcceptor {
    /// The acceptor for `config`'s files, which must build a config now
    /// (start-up stops on bad files; later reloads keep the old one).
    pub fn load(config: &TlsConfig) -> Result<Arc<TlsAcceptor>, TlsError> {
        TlsAcceptor::load_as(config, METRICS_PREFIX)
    }

    /// [`TlsAcceptor::load`] for an acceptor whose metric families begin
    /// with `metrics_prefix` (a cluster's replication listener's:
    /// `tidelog_replication_tls`), so two acceptors of one node never
    /// render one family twice.
    pub fn load_as(
        config: &TlsConfig,
        metrics_prefix: &'static str,
    ) -> Result<Arc<TlsAcceptor>, TlsError> {
        let stamps = stamps(config);
        let server = load::server_config(config)?;
        Ok(Arc::new(TlsAcceptor {
            config: config.clone(),
            metrics_prefix,
            current: RwLock::new(server),
            stamps: Mutex::new(stamps),
            handshakes_failed: AtomicU64::new(0),
            handshakes_timed_out: AtomicU64::new(0),
            reloads: watch::Sender::new(0),
            reloads_failed: AtomicU64::new(0),
            warned: Mutex::new((None, 0)),
        }))
    }

    /// The config the next handshake uses.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Reads the files again and, if they make a config, uses it for the
    /// next handshakes; otherwise keeps the current one and warns
    /// (`why` says what asked: "SIGHUP", "files changed").
    pub fn reload(&self, why: &'static str) -> Result<(), TlsError> {
        let stamps = stamps(&self.config);
        *self.stamps.lock().unwrap_or_else(|e| e.into_inner()) = stamps;
        match load::server_config(&self.config) {
            Ok(server) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = server;
                self.reloads.send_modify(|n| *n += 1);
                tracing::info!(why, "TLS certificate reloaded; new handshakes use it");
                Ok(())
            }
            Err(e) => {
                self.reloads_failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(why, error = %e, "TLS reload failed; keeping the certificate in use");
                Err(e)
            }
        }
    }

    /// Changes after each reload that takes effect (SIGHUP, changed
    /// files): what follows the certificate elsewhere (a client made from
    /// the same files) waits on it.
    pub fn reloaded(&self) -> watch::Receiver<u64> {
        self.reloads.subscribe()
    }

    /// Whether a file changed since it was last loaded.
    pub fn files_changed(&self) -> bool {
        let now = stamps(&self.config);
        *self.stamps.lock().unwrap_or_else(|e| e.into_inner()) != now
    }

    /// Polls the files every [`WATCH_INTERVAL`] and reloads when one
    /// changed, until `stop` turns true.
    pub fn spawn_watcher(self: &Arc<Self>, mut stop: watch::Receiver<bool>) {
        let acceptor = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(WATCH_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.wait_for(|stopping| *stopping) => return,
                }
                let changed = {
                    let acceptor = Arc::clone(&acceptor);
                    tokio::task::spawn_blocking(move || acceptor.files_changed()).await
                };
                if matches!(changed, Ok(true)) {
                    let acceptor = Arc::clone(&acceptor);
                    let _ =
                        tokio::task::spawn_blocking(move || acceptor.reload("files changed")).await;
                }
            }
        });
    }

    /// The server side of a handshake on `stream` (accepted from `peer`
    /// by the `front_end` listener), bounded by the handshake timeout.
    /// Call it on the connection's own task.
    pub async fn accept<S>(
        &self,
        stream: S,
        front_end: &'static str,
        peer: SocketAddr,
    ) -> Result<(TlsStream<S>, PeerIdentity), HandshakeFailed>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.server_config());
        let timeout = self.config.handshake_timeout();
        let failed = match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => {
                let identity = PeerIdentity::of(tls.get_ref().1.peer_certificates());
                return Ok((tls, identity));
            }
            Ok(Err(e)) => {
                self.handshakes_failed.fetch_add(1, Ordering::Relaxed);
                HandshakeFailed::Failed(e)
            }
            Err(_) => {
                self.handshakes_timed_out.fetch_add(1, Ordering::Relaxed);
                HandshakeFailed::TimedOut(timeout)
            }
        };
        tracing::debug!(front_end, %peer, error = %failed, "TLS handshake failed; connection closed");
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        warned.1 += 1;
        if warned
            .0
            .is_none_or(|at| at.elapsed() >= HANDSHAKE_WARN_INTERVAL)
        {
            tracing::warn!(
                front_end,
                %peer,
                error = %failed,
                failed_since_last_warning = warned.1,
                "TLS handshakes failing (a plaintext client on a TLS port, an untrusted certificate, a stalled client); connections closed"
            );
            *warned = (Some(Instant::now()), 0);
        }
        Err(failed)
    }
}

impl MetricFamilies for TlsAcceptor {
    fn render(&self, out: &mut String) {
        let prefix = self.metrics_prefix;
        for (name, help, value) in [
            (
                "handshakes_failed_total",
                "TLS handshakes that failed (bad or plaintext bytes, refused certificates, clients that hung up).",
                self.handshakes_failed.load(Ordering::Relaxed),
            ),
            (
                "handshakes_timed_out_total",
                "TLS handshakes not finished within tls.handshake_timeout_ms.",
                self.handshakes_timed_out.load(Ordering::Relaxed),
            ),
            (
                "reloads_total",
                "TLS certificate reloads that took effect (SIGHUP or changed files).",
                *self.reloads.borrow(),
            ),
            (
                "reloads_failed_total",
                "TLS certificate reloads refused (bad files); the previous certificate stayed in use.",
                self.reloads_failed.load(Ordering::Relaxed),
            ),
        ] {
            counter(out, &format!("{prefix}_{name}"), help, value);
        }
    }
}

/// The stamps of `config`'s files, in a fixed order.
fn stamps(config: &TlsConfig) -> Vec<(PathBuf, Stamp)> {
    use std::os::unix::fs::MetadataExt;
    [&config.cert_file, &config.key_file, &config.client_ca_file]
        .into_iter()
        .flatten()
        .map(|path| {
            let stamp = std::fs::metadata(path)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len(), m.ino())));
            (path.clone(), stamp)
        })
        .collect()
}
