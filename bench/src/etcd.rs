//! `--cluster`: the etcd a cluster's nodes elect their master in, as a
//! child process of the bench (docs/CLUSTER.md; the cluster tests'
//! `integration-tests/src/etcd.rs` starts it the same way).
//!
//! Invariants:
//! - The bench never installs etcd: [`ETCD`] missing is an error that
//!   says so, and the suite skips the step (`scripts/bench.sh`).
//! - One single-member etcd on 127.0.0.1 only, on free ports, its data in
//!   a temporary directory that goes with it.
//! - [`EtcdChild::start`] returns once etcd answers `GET /health` with
//!   `"health":"true"`, within [`READY_TIMEOUT`]; past it the error
//!   quotes etcd's log.
//! - The process is killed (SIGKILL) and reaped on drop.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::client::{count_occurrences, Conn};
use crate::target::free_local_addr;

/// Debian's etcd (package `etcd-server`), as the cluster tests use it.
pub(crate) const ETCD: &str = "/usr/bin/etcd";
/// How long etcd may take to answer healthy.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// What a healthy etcd's `GET /health` answer holds.
const HEALTHY: &[u8] = b"\"health\":\"true\"";
/// Between health polls.
const POLL: Duration = Duration::from_millis(50);

/// A single-member etcd on loopback (module doc).
pub(crate) struct EtcdChild {
    child: Child,
    client: SocketAddr,
    dir: tempfile::TempDir,
}

impl EtcdChild {
    /// Starts etcd with its data in a temporary directory under `parent`
    /// (the system's temp dir when `None`) and waits until it is healthy.
    pub(crate) async fn start(parent: Option<&Path>) -> anyhow::Result<EtcdChild> {
        if !Path::new(ETCD).exists() {
            bail!("no etcd at {ETCD} (Debian: apt-get install etcd-server); the bench does not install it, so the cluster step cannot run");
        }
        let dir = match parent {
            Some(parent) => tempfile::Builder::new()
                .prefix("tidelog-bench-etcd-")
                .tempdir_in(parent),
            None => tempfile::Builder::new()
                .prefix("tidelog-bench-etcd-")
                .tempdir(),
        }
        .context("creating etcd's temporary directory")?;
        let client = free_local_addr()?;
        let peer = free_local_addr()?;
        let (client_url, peer_url) = (format!("http://{client}"), format!("http://{peer}"));
        let log_path = dir.path().join("etcd.log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("creating {}", log_path.display()))?;
        let child = Command::new(ETCD)
            .arg("--name")
            .arg("tidelog-bench")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .arg("--initial-cluster")
            .arg(format!("tidelog-bench={peer_url}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("etcd's log file")?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {ETCD}"))?;
        let mut etcd = EtcdChild { child, client, dir };
        etcd.wait_healthy().await?;
        Ok(etcd)
    }

    /// The endpoint the nodes' `cluster.etcd_endpoints` name.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}", self.client)
    }

    async fn wait_healthy(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::from("no attempt yet");
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("etcd exited with {status}; its log:\n{}", self.log());
            }
            match Conn::connect(self.client).await {
                Ok(mut conn) => match conn.get("/health", "application/json").await {
                    Ok(answer) if count_occurrences(&answer.body, HEALTHY) > 0 => return Ok(()),
                    Ok(answer) => {
                        last = format!(
                            "status {}: {}",
                            answer.status,
                            String::from_utf8_lossy(&answer.body[..answer.body.len().min(200)])
                        )
                    }
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(POLL).await;
        }
        bail!(
            "etcd at {} not healthy within {READY_TIMEOUT:?} (last: {last}); its log:\n{}",
            self.client,
            self.log()
        )
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }
}

impl Drop for EtcdChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
