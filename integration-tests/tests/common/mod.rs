//! Harness shared by the black-box tests: finds (building if needed) the
//! real `tidelog` binary and runs it.
//!
//! The binary is built with the same cargo and into the same target
//! directory as the test itself, derived from the test executable's path
//! (`<target>/<profile>/deps/<test>-<hash>`), so a fresh clone needs nothing
//! but `cargo test`, and a `CARGO_TARGET_DIR` is honoured without being read.
//! The build runs once per test process.
//!
//! Each test file includes this module and uses a different part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `store:` section of a test config: files small enough that a server
/// starts fast and rolls segments within a test.
pub const SMALL_STORE: &str = "store:
  commitlog_segment_bytes: 1048576
  consume_queue_units_per_file: 1000
  index_slots: 1000
  index_entries: 4000
  max_message_bytes: 65536
";

/// `store:` and `retention:` sections for tests of deletion: 64 KiB
/// segments, so a few hundred KiB make several; every disk ratio at 1.0, so
/// how full this machine's disk is never triggers a pass or refuses a write;
/// an hour between scheduled passes, so every deletion is a request's.
pub const SMALL_SEGMENTS_MANUAL_RETENTION: &str = "store:
  commitlog_segment_bytes: 65536
  consume_queue_units_per_file: 1000
  index_slots: 1000
  index_entries: 4000
  flush_interval_ms: 50
  max_message_bytes: 16384
retention:
  check_interval_ms: 3600000
  disk_max_used_ratio: 1.0
  disk_force_clean_ratio: 1.0
  disk_full_ratio: 1.0
";

/// The config of a server started without one ([`TidelogProcess::start`]):
/// every disk ratio at 1.0.
pub const DISK_RATIOS_OFF: &str = "retention:
  disk_max_used_ratio: 1.0
  disk_force_clean_ratio: 1.0
  disk_full_ratio: 1.0
";

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
/// killed when dropped. Its Kafka listener is on another free port
/// (`kafka_addr`), unless the extra args pass their own `--kafka-listen`
/// (`none`, say); so parallel tests never collide on 9092.
pub struct TidelogProcess {
    child: Option<Child>,
    pub addr: std::net::SocketAddr,
    /// Where the Kafka listener is; `None` when the test chose its own.
    pub kafka_addr: Option<std::net::SocketAddr>,
    pub data_dir: tempfile::TempDir,
    /// stderr of the server, a file so a chatty server cannot block on a
    /// full pipe; printed when a wait fails.
    log_path: PathBuf,
    extra_args: Vec<String>,
    /// Soft and hard `RLIMIT_NOFILE` the server starts with (its parent's
    /// when `None`).
    nofile: Option<u64>,
    /// How readiness is asked: `None` over plain HTTP; `Some(args)` with
    /// `curl <args> https://…/status/ready` (an HTTPS listener).
    https_probe: Option<Vec<String>>,
}

impl TidelogProcess {
    /// How long `start` waits for `/status/ready` (recovery included).
    pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

    /// Starts `tidelog serve --data-dir <tmp> --listen 127.0.0.1:<free>`
    /// plus `extra_args` (e.g. `--config FILE`) and waits until ready.
    pub fn start(extra_args: &[&str]) -> TidelogProcess {
        let data_dir = tempfile::tempdir().expect("temp data dir");
        let addr = free_local_addr();
        let log_path = data_dir.path().with_extension("log");
        let mut extra_args: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
        // This machine's disk is shared and often near full: without a
        // config of its own, a test server gets every disk ratio at 1.0,
        // so how full the disk is never refuses its writes.
        if !extra_args.iter().any(|a| a == "--config") {
            let config_path = data_dir.path().with_extension("yaml");
            std::fs::write(&config_path, DISK_RATIOS_OFF).expect("write config");
            extra_args.extend(["--config".into(), config_path.display().to_string()]);
        }
        let mut process = TidelogProcess {
            child: None,
            addr,
            kafka_addr: kafka_addr_for(&extra_args, addr),
            data_dir,
            log_path,
            extra_args,
            nofile: None,
            https_probe: None,
        };
        process.first_spawn();
        process
    }

    /// Starts with `yaml` as the config file (written next to the data
    /// dir; `--data-dir` and `--listen` still override it).
    pub fn start_with_config(yaml: &str) -> TidelogProcess {
        TidelogProcess::start_with_config_and_nofile(yaml, None)
    }

    /// [`TidelogProcess::start_with_config`] with the server's soft and
    /// hard open-file limit set to `nofile` (as `ulimit -n` would).
    pub fn start_with_config_and_nofile(yaml: &str, nofile: Option<u64>) -> TidelogProcess {
        let data_dir = tempfile::tempdir().expect("temp data dir");
        TidelogProcess::start_configured(data_dir, yaml, nofile)
    }

    /// [`TidelogProcess::start_with_config`] with a data dir the test made
    /// (inside a file system it mounted, say); the config file and the
    /// log go beside it.
    pub fn start_with_config_in(data_dir: tempfile::TempDir, yaml: &str) -> TidelogProcess {
        TidelogProcess::start_configured(data_dir, yaml, None)
    }

    /// `yaml` written beside `data_dir` as the config file; the server
    /// started on it under the open-file limit `nofile` (if any).
    fn start_configured(
        data_dir: tempfile::TempDir,
        yaml: &str,
        nofile: Option<u64>,
    ) -> TidelogProcess {
        let config_path = data_dir.path().with_extension("yaml");
        // A config that says nothing of retention gets every disk ratio at
        // 1.0 (`DISK_RATIOS_OFF`): the shared disk's fill must not refuse
        // a test's writes.
        let yaml = if yaml.contains("retention:") {
            yaml.to_owned()
        } else {
            format!("{yaml}{DISK_RATIOS_OFF}")
        };
        std::fs::write(&config_path, yaml).expect("write config");
        let addr = free_local_addr();
        let log_path = data_dir.path().with_extension("log");
        let mut process = TidelogProcess {
            child: None,
            addr,
            kafka_addr: Some(free_local_addr_besides(addr)),
            data_dir,
            log_path,
            extra_args: vec!["--config".into(), config_path.display().to_string()],
            nofile,
            https_probe: None,
        };
        process.first_spawn();
        process
    }

    /// Starts with `yaml` as the config file and no `--kafka-listen`: the
    /// file's `kafka.listeners` are the Kafka listeners (`kafka_addr` is
    /// `None`). `https_probe`: the HTTP listener speaks HTTPS, readiness
    /// is asked with `curl <these args> https://…/status/ready`.
    pub fn start_with_own_listeners(
        yaml: &str,
        https_probe: Option<Vec<String>>,
    ) -> TidelogProcess {
        let data_dir = tempfile::tempdir().expect("temp data dir");
        let config_path = data_dir.path().with_extension("yaml");
        // A config that says nothing of retention gets every disk ratio at
        // 1.0 (`DISK_RATIOS_OFF`): the shared disk's fill must not refuse
        // a test's writes.
        let yaml = if yaml.contains("retention:") {
            yaml.to_owned()
        } else {
            format!("{yaml}{DISK_RATIOS_OFF}")
        };
        std::fs::write(&config_path, yaml).expect("write config");
        let addr = free_local_addr();
        let log_path = data_dir.path().with_extension("log");
        let mut process = TidelogProcess {
            child: None,
            addr,
            kafka_addr: None,
            data_dir,
            log_path,
            extra_args: vec!["--config".into(), config_path.display().to_string()],
            nofile: None,
            https_probe,
        };
        process.first_spawn();
        process
    }

    /// SIGTERM, then wait (bounded) for the exit; returns the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.signal(libc::SIGTERM);
        self.wait_exit(Duration::from_secs(60))
    }

    /// Has the server not exited (yet)?
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().expect("try_wait").is_none())
    }

    /// Sends `signal` to the running server; does not wait.
    pub fn signal(&self, signal: libc::c_int) {
        let child = self.child.as_ref().expect("server is running");
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
        // SAFETY: plain syscall on a child we own and have not reaped.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({signal}) failed");
    }

    /// Waits up to `timeout` for the server to exit (then kills it and
    /// fails, printing its log); returns the exit status.
    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("server is running");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "tidelog did not exit within {timeout:?}\n--- server log ---\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts again on the same port and data dir after `terminate` or
    /// `kill_9`.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "still running");
        self.spawn_and_wait();
    }

    /// The running server's process id (for `/proc/<pid>/…`).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server is running").id()
    }

    /// The value of one series of `/metrics` (`name` with its labels, as
    /// printed).
    pub fn metric(&self, name: &str) -> f64 {
        metric_in(&self.get("/metrics").text(), name)
    }

    /// The running server's anonymous resident memory, in KiB.
    pub fn rss_anon_kib(&self) -> u64 {
        rss_anon_kib_of(self.pid())
    }

    /// Length of the log so far, to read only what a later run writes.
    pub fn log_len(&self) -> usize {
        self.log().len()
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Response {
        http(self.addr, "GET", path, &[], None)
    }

    /// `GET path` with extra headers.
    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        http(self.addr, "GET", path, headers, None)
    }

    /// `method path` with a JSON body (`Content-Type: application/json`).
    pub fn send_json(&self, method: &str, path: &str, body: &serde_json::Value) -> Response {
        http(
            self.addr,
            method,
            path,
            &[("Content-Type", "application/json")],
            Some(body.to_string().as_bytes()),
        )
    }

    /// `POST path` with a raw body and content type.
    pub fn post_raw(&self, path: &str, content_type: &str, body: &[u8]) -> Response {
        http(
            self.addr,
            "POST",
            path,
            &[("Content-Type", content_type)],
            Some(body),
        )
    }

    /// Any request.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Response {
        http(self.addr, method, path, headers, body)
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

    /// The first start: a port `free_local_addr` found free can be taken
    /// before the server binds it (by another test's server, or as the
    /// ephemeral source port of any client's connection), so a server that
    /// says it cannot listen gets fresh ports, a bounded number of times.
    /// Restarts keep their ports (tests check that) and do not retry.
    fn first_spawn(&mut self) {
        const ATTEMPTS: usize = 3;
        for attempt in 1..=ATTEMPTS {
            match self.try_spawn_and_wait() {
                Ok(()) => return,
                Err(why) if attempt < ATTEMPTS && self.lost_its_ports() => {
                    eprintln!("tidelog could not bind ({why}); new ports, attempt {attempt}");
                    self.addr = free_local_addr();
                    if self.kafka_addr.is_some() {
                        self.kafka_addr = Some(free_local_addr_besides(self.addr));
                    }
                }
                Err(why) => panic!(
                    "tidelog did not become ready: {why}\n--- server log ---\n{}",
                    self.log()
                ),
            }
        }
    }

    /// The server stopped because its ports were not free after all:
    /// another process took one between the pick and the bind, or the
    /// kernel handed out one port twice (the config check refuses a Kafka
    /// address equal to the HTTP one).
    fn lost_its_ports(&self) -> bool {
        let log = self.log();
        log.contains("cannot listen") || log.contains("is the HTTP listen address")
    }

    fn spawn_and_wait(&mut self) {
        if let Err(why) = self.try_spawn_and_wait() {
            panic!(
                "tidelog did not become ready: {why}\n--- server log ---\n{}",
                self.log()
            );
        }
    }

    /// Spawns the server and waits until ready; on failure it is killed.
    fn try_spawn_and_wait(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("server log file");
        let mut command = Command::new(tidelog_bin());
        if let Some(n) = self.nofile {
            use std::os::unix::process::CommandExt;
            let lim = libc::rlimit {
                rlim_cur: n as libc::rlim_t,
                rlim_max: n as libc::rlim_t,
            };
            // SAFETY: only setrlimit runs between fork and exec, which is
            // async-signal-safe, on a value copied into the closure.
            unsafe {
                command.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = command
            .arg("serve")
            .arg("--data-dir")
            .arg(self.data_dir.path())
            .arg("--listen")
            .arg(self.addr.to_string())
            .args(
                self.kafka_addr
                    .map(|kafka| ["--kafka-listen".to_string(), kafka.to_string()])
                    .into_iter()
                    .flatten(),
            )
            .args(&self.extra_args)
            .current_dir(workspace_root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn tidelog serve");
        self.child = Some(child);
        let ready = self.wait_ready(Self::READY_TIMEOUT);
        if ready.is_err() {
            self.kill_9();
        }
        ready
    }

    /// Polls `GET /status/ready` until 200, the process exits, or `timeout`.
    /// A 507 counts as up too: recovery is done and the server serves, with
    /// the store refusing writes because the disk is full (readiness says
    /// what the store says), which some tests set up on purpose.
    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("process exited with {status}"));
                }
            }
            let status = match &self.https_probe {
                None => http_get_status(self.addr, "/status/ready"),
                Some(args) => curl_status(self.addr, args, "/status/ready"),
            };
            if matches!(status, Some(200 | 507)) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("no 200 from /status/ready within {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Lines of a server's log printed when a test fails with it running.
const LOG_TAIL_ON_FAILURE: usize = 40;

impl Drop for TidelogProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            // The test failed: the server's last words say why more often
            // than the assertion does (a full disk, a refused config).
            let log = std::fs::read_to_string(&self.log_path).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_ON_FAILURE)..];
            eprintln!(
                "---- the last {} lines of the server on {} ({}):\n{}",
                tail.len(),
                self.addr,
                self.log_path.display(),
                tail.join("\n")
            );
        }
        let _ = std::fs::remove_file(&self.log_path);
        let _ = std::fs::remove_file(self.data_dir.path().with_extension("yaml"));
    }
}

/// The status of `GET https://addr/path` with `curl <args>`, `None` if
/// curl got no answer (refused, a failed handshake).
pub fn curl_status(addr: std::net::SocketAddr, args: &[String], path: &str) -> Option<u16> {
    let output = Command::new("curl")
        .args([
            "--silent",
            "--output",
            "/dev/null",
            "--write-out",
            "%{http_code}",
        ])
        .args(["--max-time", "10"])
        .args(args)
        .arg(format!("https://{addr}{path}"))
        .stdin(Stdio::null())
        .output()
        .expect("run curl");
    let code: u16 = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .ok()?;
    (output.status.success() && code != 0).then_some(code)
}

/// `curl <args> -X method https://addr/path` with `body` as JSON: (status,
/// answer body); status 0 when curl got no answer.
pub fn curl_https(
    addr: std::net::SocketAddr,
    args: &[String],
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, String) {
    let mut command = Command::new("curl");
    command
        .args(["--silent", "--show-error", "--max-time", "30"])
        .args(["--write-out", "\n%{http_code}", "-X", method])
        .args(args);
    if let Some(body) = body {
        command.args([
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            body,
        ]);
    }
    let output = command
        .arg(format!("https://{addr}{path}"))
        .stdin(Stdio::null())
        .output()
        .expect("run curl");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let (text, code) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
    (code.trim().parse().unwrap_or(0), text.to_owned())
}

/// Runs a client script (`tidelog_integration_tests::clients`) against
/// `server`'s HTTP and Kafka addresses, passed as its first two
/// arguments; it must exit 0 and print its `closing` line (proof it ran
/// to the end).
pub fn run_client_script(server: &TidelogProcess, mut command: Command, closing: &str) {
    let kafka = server.kafka_addr.expect("the harness gave it a Kafka port");
    command.arg(server.url()).arg(kafka.to_string());
    let stdout = tidelog_integration_tests::clients::run_script(command);
    assert!(
        stdout.contains(closing),
        "the script exited 0 without its closing line {closing:?}:\n{stdout}"
    );
}

/// A free Kafka address, unless `extra_args` name their own
/// `--kafka-listen`.
fn kafka_addr_for(
    extra_args: &[String],
    http: std::net::SocketAddr,
) -> Option<std::net::SocketAddr> {
    (!extra_args.iter().any(|a| a == "--kafka-listen")).then(|| free_local_addr_besides(http))
}

/// A free address other than `taken`: picked while `taken` is not bound
/// yet, a second pick can get the same port back from the kernel.
pub fn free_local_addr_besides(taken: std::net::SocketAddr) -> std::net::SocketAddr {
    (0..100)
        .map(|_| free_local_addr())
        .find(|addr| *addr != taken)
        .expect("the kernel hands out a port other than the one taken")
}

/// A 127.0.0.1 address nobody listens on right now. Another process could
/// take it before the server binds; start() then fails loudly, not flakily.
pub fn free_local_addr() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr")
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics with the body if it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text()))
    }

    /// Asserts the status and returns the JSON body.
    pub fn expect(&self, status: u16) -> serde_json::Value {
        assert_eq!(self.status, status, "unexpected answer: {}", self.text());
        if self.body.is_empty() {
            serde_json::Value::Null
        } else {
            self.json()
        }
    }

    /// Asserts an API error: status, `error_code`, JSON content type and a
    /// non-empty message; returns the message.
    pub fn expect_error(&self, status: u16, code: u64) -> String {
        assert_eq!(self.status, status, "unexpected answer: {}", self.text());
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{}",
            self.text()
        );
        let body = self.json();
        assert_eq!(body["error_code"], code, "{body}");
        let message = body["message"].as_str().unwrap_or_default().to_string();
        assert!(!message.is_empty(), "{body}");
        message
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`), read
/// to the end. std only, so the harness needs no HTTP client crate. Write
/// errors are ignored so that a server answering early (413 before the
/// whole body arrived) is still read.
pub fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Response {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr)
        .unwrap_or_else(|e| panic!("connect {addr} for {method} {path}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut request = head.into_bytes();
    request.extend_from_slice(body.unwrap_or_default());
    let _ = stream.write_all(&request);
    let mut raw = Vec::new();
    if let Err(e) = stream.read_to_end(&mut raw) {
        // A reset after a complete early answer still leaves the answer.
        assert!(!raw.is_empty(), "{method} {path}: reading the answer: {e}");
    }
    parse_response(&raw).unwrap_or_else(|why| {
        panic!(
            "{method} {path}: bad HTTP answer ({why}): {:?}",
            String::from_utf8_lossy(&raw)
        )
    })
}

/// Parses one whole HTTP/1.1 answer (status line, headers, body).
pub fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|e| e.to_string())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("no status line")?;
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("bad status line")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &raw[split + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line")?;
        let size_text = std::str::from_utf8(&data[..line_end]).map_err(|e| e.to_string())?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| e.to_string())?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err("short chunk".into());
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// The status code of `GET path` over plain HTTP/1.0, `None` if the server
/// is not answering. Used while waiting for start-up, where a refused
/// connection is expected.
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

/// `RssAnon` of `/proc/<pid>/status` (the anonymous resident memory the
/// memory tests compare against a baseline), in KiB.
pub fn rss_anon_kib_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no RssAnon in {status}"))
}

/// Fails unless `now_kib` is under `max_ratio` times `baseline_kib`: the
/// memory tests' one comparison (a ratio against the server's own
/// baseline, measured in the same run, never an absolute figure).
pub fn assert_rss_within(baseline_kib: u64, now_kib: u64, max_ratio: f64, what: &str) {
    let ratio = now_kib as f64 / baseline_kib as f64;
    eprintln!("RssAnon {baseline_kib} KiB before, {now_kib} KiB {what}, ratio {ratio:.2}");
    assert!(
        ratio < max_ratio,
        "RssAnon {baseline_kib} KiB before, {now_kib} KiB {what} ({ratio:.1}x, bound {max_ratio}x)"
    );
}

/// The value of the series `name` (with its labels, as printed) in the
/// Prometheus text `metrics`.
pub fn metric_in(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{metrics}"))
}
