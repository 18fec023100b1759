//! A real etcd for the cluster tests (issue 39; the cluster contract's
//! coordination store): Debian's `etcd-server` (v3 API), installed with
//! `apt-get` on first use as the console test installs its browser, and
//! one single-member etcd per test on loopback.
//!
//! Invariants:
//! - Idempotent install, one installer at a time: `apt-get` runs only when
//!   `/usr/bin/etcd` is missing, under the pinned clients' `flock` scheme
//!   (`<target>/test-clients/etcd.lock`); every run checks that the binary
//!   is a v3 etcd (`etcd --version`, 3.4 or later), and installing needs
//!   root (without it the error says what to install by hand).
//! - Everything listens on 127.0.0.1 only, on ports picked free for this
//!   instance; its data lives in a temporary directory removed on drop.
//! - [`Etcd::start`] returns once a key can be written and read back
//!   through the v3 API (its JSON gateway), not merely once a port
//!   answers. [`Etcd::stop`] is a crash (SIGKILL); [`Etcd::start_again`]
//!   brings the same member back on the same ports and data.
//! - The process is killed and reaped on drop. Every wait has a deadline;
//!   past it the panic quotes etcd's log.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine;

use crate::clients::{clients_root, lock_install, run_bounded, ClientError, INSTALL_TIMEOUT};

pub const ETCD: &str = "/usr/bin/etcd";
/// The Debian package that provides [`ETCD`].
const PACKAGE: &str = "etcd-server";
/// How long a start may take until a key can be written and read.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Makes sure a v3 etcd is installed; panics with the reason otherwise
/// (a cluster test cannot go on without it).
pub fn ensure_etcd() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        if let Err(why) = install() {
            panic!("cannot install {PACKAGE} for the cluster tests: {why}");
        }
    });
}

fn install() -> Result<(), ClientError> {
    let _lock = lock_install(&clients_root()?, "etcd")?;
    if !Path::new(ETCD).exists() {
        eprintln!("cluster test: apt-get install {PACKAGE} (once; later runs find it)");
        let mut update = Command::new("apt-get");
        update.args(["update", "-q"]);
        run_bounded(update, INSTALL_TIMEOUT)?;
        let mut apt = Command::new("apt-get");
        apt.env("DEBIAN_FRONTEND", "noninteractive").args([
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            PACKAGE,
        ]);
        run_bounded(apt, INSTALL_TIMEOUT)?;
    }
    let mut version = Command::new(ETCD);
    version.arg("--version");
    let out = run_bounded(version, INSTALL_TIMEOUT)?;
    let v3 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version: "))
        .and_then(|v| {
            let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .is_some_and(|(major, minor)| major == 3 && minor >= 4);
    if !v3 {
        return Err(ClientError::Unusable {
            what: ETCD.into(),
            reason: format!("not an etcd 3.4 or later: {}", out.stdout.trim()),
        });
    }
    Ok(())
}

/// One single-member etcd on loopback (see the module doc).
pub struct Etcd {
    child: Option<Child>,
    client_port: u16,
    peer_port: u16,
    dir: tempfile::TempDir,
}

impl Etcd {
    /// Installs etcd if needed, starts a member and waits until it serves.
    pub fn start() -> Etcd {
        ensure_etcd();
        let listeners: Vec<TcpListener> = (0..2)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
            .collect();
        let port = |i: usize| listeners[i].local_addr().expect("local_addr").port();
        let (client_port, peer_port) = (port(0), port(1));
        drop(listeners);
        let mut etcd = Etcd {
            child: None,
            client_port,
            peer_port,
            dir: tempfile::tempdir().expect("a temporary directory for etcd"),
        };
        etcd.start_again();
        etcd
    }

    /// The endpoint clients use, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// Starts the member (again, on the same ports and data after
    /// [`stop`](Self::stop)) and waits until a key round-trips.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "etcd is running");
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::File::create(self.log_path()).expect("etcd's log file");
        let child = Command::new(ETCD)
            .arg("--name")
            .arg("tidelog-test")
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .arg("--listen-client-urls")
            .arg(self.endpoint())
            .arg("--advertise-client-urls")
            .arg(self.endpoint())
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(format!("tidelog-test={peer}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("etcd's log file"))
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.child = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let probe = self
                .put("tidelog-test-ready", "1")
                .and_then(|()| self.get("tidelog-test-ready"));
            if matches!(&probe, Ok(Some(v)) if v == "1") {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "etcd not ready within {READY_TIMEOUT:?} ({probe:?}); its log:\n{}",
                    std::fs::read_to_string(self.log_path()).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL, then reap: the member's crash.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Puts `key` = `value` through the v3 API's JSON gateway.
    pub fn put(&self, key: &str, value: &str) -> Result<(), String> {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let body = format!(r#"{{"key":"{}","value":"{}"}}"#, b64(key), b64(value));
        self.post("/v3/kv/put", &body).map(|_| ())
    }

    /// The value of `key` through the v3 API's JSON gateway (`None`: no
    /// such key).
    pub fn get(&self, key: &str) -> Result<Option<String>, String> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let body = format!(r#"{{"key":"{}"}}"#, b64.encode(key));
        let answer = self.post("/v3/kv/range", &body)?;
        let json: serde_json::Value =
            serde_json::from_str(&answer).map_err(|e| format!("{e}: {answer}"))?;
        let Some(kv) = json["kvs"].as_array().and_then(|kvs| kvs.first()) else {
            return Ok(None);
        };
        let value = b64
            .decode(kv["value"].as_str().unwrap_or_default())
            .map_err(|e| format!("{e}: {answer}"))?;
        String::from_utf8(value)
            .map(Some)
            .map_err(|e| format!("{e}: {answer}"))
    }

    /// One HTTP/1.1 POST of a JSON body; the answer's body, or why not.
    fn post(&self, path: &str, body: &str) -> Result<String, String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.client_port))
            .map_err(|e| format!("connect: {e}"))?;
        stream
            .set_read_timeout(Some(REQUEST_TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(REQUEST_TIMEOUT)))
            .map_err(|e| format!("timeouts: {e}"))?;
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream
            .write_all(request.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .map_err(|e| format!("read: {e}"))?;
        let (head, rest) = answer
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("no HTTP answer: {answer:?}"))?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("{head}: {rest}"));
        }
        // A chunked body (the gateway's): its chunks joined.
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            let mut out = String::new();
            let mut rest = rest;
            while let Some((size, after)) = rest.split_once("\r\n") {
                let size = usize::from_str_radix(size.trim(), 16)
                    .map_err(|e| format!("chunk size {size:?}: {e}"))?;
                if size == 0 {
                    break;
                }
                let chunk = after.get(..size).ok_or("a short chunk")?;
                out.push_str(chunk);
                rest = after.get(size + 2..).unwrap_or_default();
            }
            return Ok(out);
        }
        Ok(rest.to_string())
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}
