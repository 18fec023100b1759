//! Harness shared by the black-box tests: finds (building if needed) the
//! real `tidelog` binary and runs it.
//!
//! The binary is built with the same cargo and into the same target
//! directory as the test itself, derived from the test executable's path
//! (`<target>/<profile>/deps/<test>-<hash>`), so a fresh clone needs nothing
//! but `cargo test`, and a `CARGO_TARGET_DIR` is honoured without being read.
//! The build runs once per test process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The workspace root (the integration-tests crate's parent).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("integration-tests lives inside the workspace")
        .to_path_buf()
}

/// Path of the `tidelog` binary, built on first use.
pub fn tidelog_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match build_tidelog() {
        Ok(path) => path,
        Err(why) => panic!("cannot build the tidelog binary: {why}"),
    })
}

fn build_tidelog() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    // <target>/<profile>/deps/<test exe>
    let deps = exe.parent().ok_or("test exe has no parent")?;
    let profile_dir = deps.parent().ok_or("deps dir has no parent")?;
    let target_dir = profile_dir.parent().ok_or("profile dir has no parent")?;
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("profile dir has no name")?;

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(&cargo);
    build
        .current_dir(workspace_root())
        .args([
            "build",
            "--quiet",
            "-p",
            "tidelog-server",
            "--bin",
            "tidelog",
        ])
        .arg("--target-dir")
        .arg(target_dir);
    // `debug` is cargo's dev profile; any other directory name is the
    // profile of the same name (release, bench, custom ones).
    if profile != "debug" {
        build.args(["--profile", profile]);
    }
    let status = build
        .status()
        .map_err(|e| format!("running {cargo:?}: {e}"))?;
    if !status.success() {
        return Err(format!(
            "{cargo:?} build -p tidelog-server failed: {status}"
        ));
    }
    let bin = profile_dir.join(format!("tidelog{}", std::env::consts::EXE_SUFFIX));
    if !bin.is_file() {
        return Err(format!("build succeeded but {} is missing", bin.display()));
    }
    Ok(bin)
}

/// Runs `tidelog <args>` to completion and returns its output.
pub fn run_tidelog(args: &[&str]) -> Output {
    Command::new(tidelog_bin())
        .args(args)
        .current_dir(workspace_root())
        .output()
        .expect("spawn tidelog")
}

/// A `tidelog serve` on a free 127.0.0.1 port with a temporary data dir,
/// killed when dropped.
///
/// Not used yet: `serve` exits until the storage wiring lands. Kept compiled
/// so the server work can start with it (and so it cannot rot).
#[allow(dead_code)]
pub struct TidelogProcess {
    child: Option<Child>,
    pub addr: std::net::SocketAddr,
    pub data_dir: tempfile::TempDir,
    /// stderr of the server, a file so a chatty server cannot block on a
    /// full pipe; printed when a wait fails.
    log_path: PathBuf,
    extra_args: Vec<String>,
}

#[allow(dead_code)]
impl TidelogProcess {
    /// How long `start` waits for `/status/ready` (recovery included).
    pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

    /// Starts `tidelog serve --data-dir <tmp> --listen 127.0.0.1:<free>`
    /// plus `extra_args` (e.g. `--config FILE`) and waits until ready.
    pub fn start(extra_args: &[&str]) -> TidelogProcess {
        let data_dir = tempfile::tempdir().expect("temp data dir");
        let addr = free_local_addr();
        let log_path = data_dir.path().with_extension("log");
        let mut process = TidelogProcess {
            child: None,
            addr,
            data_dir,
            log_path,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
        };
        process.spawn_and_wait();
        process
    }

    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGKILL (no shutdown hooks, no flush), then wait for the exit: the
    /// crash in crash tests.
    pub fn kill_9(&mut self) {
        if let Some(mut child) = self.child.take() {
            // `Child::kill` is SIGKILL on Unix.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills and starts again on the same port and data dir.
    pub fn restart(&mut self) {
        self.kill_9();
        self.spawn_and_wait();
    }

    /// The server's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    fn spawn_and_wait(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("server log file");
        let child = Command::new(tidelog_bin())
            .arg("serve")
            .arg("--data-dir")
            .arg(self.data_dir.path())
            .arg("--listen")
            .arg(self.addr.to_string())
            .args(&self.extra_args)
            .current_dir(workspace_root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn tidelog serve");
        self.child = Some(child);
        if let Err(why) = self.wait_ready(Self::READY_TIMEOUT) {
            self.kill_9();
            panic!(
                "tidelog did not become ready: {why}\n--- server log ---\n{}",
                self.log()
            );
        }
    }

    /// Polls `GET /status/ready` until 200, the process exits, or `timeout`.
    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("process exited with {status}"));
                }
            }
            if http_get_status(self.addr, "/status/ready") == Some(200) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("no 200 from /status/ready within {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for TidelogProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.log_path);
    }
}

/// A 127.0.0.1 address nobody listens on right now. Another process could
/// take it before the server binds; start() then fails loudly, not flakily.
#[allow(dead_code)]
pub fn free_local_addr() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr")
}

/// The status code of `GET path` over plain HTTP/1.0, `None` if the server
/// is not answering. std only, so the harness needs no HTTP client.
#[allow(dead_code)]
pub fn http_get_status(addr: std::net::SocketAddr, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream =
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    // "HTTP/1.x NNN"
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}
