//! Real client libraries for the black-box tests: a Python venv with the
//! packages pinned in `integration-tests/clients/python/requirements.txt`
//! and a Node `node_modules` from `integration-tests/clients/node/`'s
//! `package-lock.json`, installed by the tests themselves so that the
//! README's one test command is all a fresh clone (and CI) needs.
//!
//! Both live under `<target>/test-clients/` (`venv/`, `node/`), beside the
//! test executables, so `cargo clean` removes them and a `CARGO_TARGET_DIR`
//! is honoured.
//!
//! Invariants:
//! - An install directory is complete or absent: it is built in
//!   `<name>.partial/`, its stamp is written into it last, and only then is
//!   it renamed into place. A killed install leaves a `.partial` directory,
//!   which the next install deletes before it starts. (The venv is used
//!   only as `venv/bin/python`, which finds its packages from its own
//!   location; the console scripts pip puts in `venv/bin/` name the
//!   `.partial` path in their `#!` line and are not used.)
//! - The stamp holds the exact text of the pin files the directory was
//!   installed from and the base interpreter's version; any other text
//!   (a changed pin, another Python) rebuilds it. No stamp, no reuse.
//! - Check-and-install of one directory runs under an exclusive `flock` on
//!   `<target>/test-clients/<name>.lock`: nextest runs tests in parallel
//!   processes, and the first one installs while the others wait, then
//!   reuse. The lock is released when its file is closed, including when
//!   the process dies.
//! - Every command run here (pip, npm, a client script) has a deadline;
//!   past it the command is killed and the error names it with its output.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one `pip install` or `npm ci` may take: generous, since the
/// first run downloads every package on a machine shared by several builds.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// How long one client script may run (its own requests have shorter
/// timeouts; this only bounds a script that hangs).
pub const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// The interpreter the venv is made from; `requirements.txt` has wheel
/// hashes for CPython 3.11.
const BASE_PYTHON: &str = "python3";

/// The file inside an install directory that records what it holds.
const STAMP: &str = ".tidelog-stamp";

/// How much of a failed command's output an error quotes (its tail).
const OUTPUT_TAIL_BYTES: usize = 8000;

/// Why a client could not be installed or run.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("cannot find the target directory from the test executable {exe}")]
    NoTargetDir { exe: PathBuf },
    #[error("cannot start `{command}` (is it installed and on PATH?): {source}")]
    Spawn { command: String, source: io::Error },
    #[error("`{command}` failed ({status})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}")]
    Failed {
        command: String,
        status: ExitStatus,
        stdout: String,
        stderr: String,
    },
    #[error("{what} cannot be used: {reason}")]
    Unusable { what: String, reason: String },
    #[error(
        "`{command}` did not finish within {timeout:?} and was killed\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    )]
    TimedOut {
        command: String,
        timeout: Duration,
        stdout: String,
        stderr: String,
    },
}

pub(crate) fn io_error(path: &Path) -> impl FnOnce(io::Error) -> ClientError + '_ {
    move |source| ClientError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The source directory of the pinned clients (`integration-tests/clients`).
pub fn sources_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients")
}

/// `integration-tests/clients/python/<name>`.
pub fn python_script(name: &str) -> PathBuf {
    sources_dir().join("python").join(name)
}

/// `integration-tests/clients/node/<name>`.
pub fn node_script(name: &str) -> PathBuf {
    sources_dir().join("node").join(name)
}

/// The venv's `python`, installing the venv on first use; panics with the
/// reason (a test cannot go on without it).
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| match install_python() {
        Ok(path) => path,
        Err(why) => panic!("cannot install the Python test clients: {why}"),
    })
}

/// The `node_modules` directory, installing it on first use; panics with
/// the reason. Scripts find it through `NODE_PATH` ([`node_command`]).
pub fn node_modules() -> &'static Path {
    static NODE_MODULES: OnceLock<PathBuf> = OnceLock::new();
    NODE_MODULES.get_or_init(|| match install_node() {
        Ok(path) => path,
        Err(why) => panic!("cannot install the Node test clients: {why}"),
    })
}

/// `python <script>` with the venv's interpreter, isolated from the
/// user's own Python setup (no user site-packages, no `PYTHONPATH`) and
/// writing no `__pycache__` into the source tree.
pub fn python_command(script: &str) -> Command {
    let mut command = Command::new(python());
    command
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONHOME")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg("-s")
        .arg(python_script(script));
    command
}

/// `node <script>` with the installed packages on `NODE_PATH`.
pub fn node_command(script: &str) -> Command {
    let mut command = Command::new("node");
    command
        .env("NODE_PATH", node_modules())
        .arg(node_script(script));
    command
}

/// Runs a client script to completion (bounded by [`SCRIPT_TIMEOUT`]) and
/// returns its stdout; panics with its exit status, stdout and stderr if it
/// fails or hangs.
pub fn run_script(command: Command) -> String {
    match run_bounded(command, SCRIPT_TIMEOUT) {
        Ok(output) => output.stdout,
        Err(why) => panic!("client script failed: {why}"),
    }
}

/// Installs (or reuses) the venv and returns its `python`.
pub fn install_python() -> Result<PathBuf, ClientError> {
    let requirements = sources_dir().join("python").join("requirements.txt");
    let mut version = Command::new(BASE_PYTHON);
    version.arg("--version");
    let version = run_bounded(version, SCRIPT_TIMEOUT)?;
    let stamp = format!(
        "{}{}\n{}",
        version.stdout,
        version.stderr,
        read(&requirements)?
    );
    let venv = install_once(&clients_root()?, "venv", &stamp, |partial| {
        let mut venv = Command::new(BASE_PYTHON);
        venv.args(["-m", "venv"]).arg(partial);
        run_bounded(venv, INSTALL_TIMEOUT)?;
        eprintln!(
            "test clients: pip install -r {} (pinned, hash-checked)",
            requirements.display()
        );
        let mut pip = Command::new(venv_python(partial));
        pip.args([
            "-m",
            "pip",
            "install",
            "--no-input",
            "--disable-pip-version-check",
            "--require-hashes",
            "--only-binary",
            ":all:",
            "-r",
        ])
        .arg(&requirements);
        run_bounded(pip, INSTALL_TIMEOUT)?;
        Ok(())
    })?;
    Ok(venv_python(&venv))
}

/// Installs (or reuses) the Node packages and returns `node_modules`.
pub fn install_node() -> Result<PathBuf, ClientError> {
    let source = sources_dir().join("node");
    let files = ["package.json", "package-lock.json"];
    let mut stamp = String::new();
    for file in files {
        stamp.push_str(&read(&source.join(file))?);
    }
    let dir = install_once(&clients_root()?, "node", &stamp, |partial| {
        fs::create_dir_all(partial).map_err(io_error(partial))?;
        for file in files {
            let to = partial.join(file);
            fs::copy(source.join(file), &to).map_err(io_error(&to))?;
        }
        eprintln!(
            "test clients: npm ci for {} (pinned by its package-lock.json)",
            source.display()
        );
        // No install scripts: none of the pinned packages needs one, and a
        // test install should not run code beyond the packages themselves.
        let mut npm = Command::new("npm");
        npm.current_dir(partial)
            .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"]);
        run_bounded(npm, INSTALL_TIMEOUT)?;
        Ok(())
    })?;
    Ok(dir.join("node_modules"))
}

fn venv_python(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

fn read(path: &Path) -> Result<String, ClientError> {
    fs::read_to_string(path).map_err(io_error(path))
}

/// `<target>/test-clients`.
pub(crate) fn clients_root() -> Result<PathBuf, ClientError> {
    Ok(target_dir()?.join("test-clients"))
}

/// The target directory, from the test executable's path
/// (`<target>/<profile>/deps/<test>-<hash>`), as `tests/common` finds the
/// binary.
pub fn target_dir() -> Result<PathBuf, ClientError> {
    let exe = std::env::current_exe().map_err(|source| ClientError::Io {
        path: PathBuf::from("/proc/self/exe"),
        source,
    })?;
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .ok_or_else(|| ClientError::NoTargetDir { exe: exe.clone() })?;
    Ok(target.to_path_buf())
}

/// Returns `<root>/<name>`, building it with `build(partial dir)` unless it
/// holds `stamp` already. See the module doc for the lock and the rename.
fn install_once(
    root: &Path,
    name: &str,
    stamp: &str,
    build: impl FnOnce(&Path) -> Result<(), ClientError>,
) -> Result<PathBuf, ClientError> {
    let lock = lock_install(root, name)?;
    let dir = root.join(name);
    let stamp_path = dir.join(STAMP);
    if fs::read_to_string(&stamp_path).is_ok_and(|found| found == stamp) {
        return Ok(dir);
    }

    let started = Instant::now();
    eprintln!(
        "test clients: installing {} (once; later runs reuse it)",
        dir.display()
    );
    let partial = root.join(format!("{name}.partial"));
    remove_dir_if_present(&partial)?;
    build(&partial)?;
    let partial_stamp = partial.join(STAMP);
    fs::write(&partial_stamp, stamp).map_err(io_error(&partial_stamp))?;
    remove_dir_if_present(&dir)?;
    fs::rename(&partial, &dir).map_err(io_error(&dir))?;
    eprintln!(
        "test clients: installed {} in {:.1} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    // The lock is held until here: `lock` drops at the end of scope.
    drop(lock);
    Ok(dir)
}

/// The exclusive lock on `<root>/<name>.lock` (module doc), held until
/// the returned file is closed.
pub(crate) fn lock_install(root: &Path, name: &str) -> Result<File, ClientError> {
    fs::create_dir_all(root).map_err(io_error(root))?;
    let lock_path = root.join(format!("{name}.lock"));
    let lock = File::create(&lock_path).map_err(io_error(&lock_path))?;
    match fs4::FileExt::try_lock(&lock) {
        Ok(()) => {}
        Err(fs4::TryLockError::WouldBlock) => {
            eprintln!("test clients: waiting for another test process to install {name}");
            fs4::FileExt::lock(&lock).map_err(io_error(&lock_path))?;
        }
        Err(fs4::TryLockError::Error(source)) => {
            return Err(ClientError::Io {
                path: lock_path,
                source,
            })
        }
    }
    Ok(lock)
}

fn remove_dir_if_present(dir: &Path) -> Result<(), ClientError> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ClientError::Io {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// What a finished command printed.
#[derive(Debug)]
pub struct Captured {
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` with its output in temporary files (a chatty command
/// cannot block on a full pipe), killing it after `timeout`; a non-zero
/// exit is an error quoting the output.
pub fn run_bounded(mut command: Command, timeout: Duration) -> Result<Captured, ClientError> {
    let shown = format!("{command:?}");
    let temp = std::env::temp_dir();
    let stdout_file = tempfile::tempfile().map_err(io_error(&temp))?;
    let stderr_file = tempfile::tempfile().map_err(io_error(&temp))?;
    let stdout_for_child = stdout_file.try_clone().map_err(io_error(&temp))?;
    let stderr_for_child = stderr_file.try_clone().map_err(io_error(&temp))?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(stdout_for_child)
        .stderr(stderr_for_child)
        .spawn()
        .map_err(|source| ClientError::Spawn {
            command: shown.clone(),
            source,
        })?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(source) => {
                return Err(ClientError::Spawn {
                    command: shown,
                    source,
                })
            }
        }
    };
    let stdout = read_all(stdout_file)?;
    let stderr = read_all(stderr_file)?;
    match status {
        Some(status) if status.success() => Ok(Captured { stdout, stderr }),
        Some(status) => Err(ClientError::Failed {
            command: shown,
            status,
            stdout: tail(&stdout),
            stderr: tail(&stderr),
        }),
        None => Err(ClientError::TimedOut {
            command: shown,
            timeout,
            stdout: tail(&stdout),
            stderr: tail(&stderr),
        }),
    }
}

fn read_all(mut file: File) -> Result<String, ClientError> {
    use std::io::{Read, Seek};
    let temp = std::env::temp_dir();
    file.rewind().map_err(io_error(&temp))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_error(&temp))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The last [`OUTPUT_TAIL_BYTES`] of `text` (pip's useful line is its last).
fn tail(text: &str) -> String {
    if text.len() <= OUTPUT_TAIL_BYTES {
        return text.to_string();
    }
    let mut start = text.len() - OUTPUT_TAIL_BYTES;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[… {start} bytes before]\n{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    fn build_marker(partial: &Path) -> Result<(), ClientError> {
        fs::create_dir_all(partial).map_err(io_error(partial))?;
        fs::write(partial.join("marker"), "built").map_err(io_error(partial))
    }

    #[test]
    fn a_stamped_directory_is_reused_and_a_new_stamp_rebuilds_it() {
        let root = tempfile::tempdir().expect("temp dir");
        let builds = AtomicUsize::new(0);
        let build = |partial: &Path| {
            builds.fetch_add(1, Ordering::SeqCst);
            build_marker(partial)
        };
        let dir = install_once(root.path(), "venv", "pins v1", build).expect("first install");
        assert_eq!(dir, root.path().join("venv"));
        assert_eq!(
            fs::read_to_string(dir.join("marker")).ok().as_deref(),
            Some("built")
        );
        install_once(root.path(), "venv", "pins v1", build).expect("reuse");
        assert_eq!(builds.load(Ordering::SeqCst), 1, "same stamp: no rebuild");
        install_once(root.path(), "venv", "pins v2", build).expect("rebuild");
        assert_eq!(builds.load(Ordering::SeqCst), 2, "changed pins rebuild");
        assert_eq!(
            fs::read_to_string(dir.join(STAMP)).ok().as_deref(),
            Some("pins v2")
        );
    }

    #[test]
    fn a_failed_install_leaves_nothing_that_looks_done() {
        let root = tempfile::tempdir().expect("temp dir");
        // A build that dies half way, as a killed pip would: files written,
        // then an error before the stamp.
        let failed = install_once(root.path(), "venv", "pins", |partial| {
            build_marker(partial)?;
            Err(ClientError::NoTargetDir {
                exe: partial.to_path_buf(),
            })
        });
        assert!(matches!(failed, Err(ClientError::NoTargetDir { .. })));
        assert!(!root.path().join("venv").exists(), "no half venv in place");
        // The next install starts from a clean partial directory.
        let dir = install_once(root.path(), "venv", "pins", |partial| {
            assert!(
                !partial.exists(),
                "leftover partial directory was not removed"
            );
            build_marker(partial)
        })
        .expect("install after a failure");
        assert_eq!(
            fs::read_to_string(dir.join(STAMP)).ok().as_deref(),
            Some("pins")
        );
    }

    #[test]
    fn concurrent_installers_build_once() {
        // flock locks belong to an open file description, so threads that
        // each open the lock file exclude each other as processes do.
        let root = tempfile::tempdir().expect("temp dir");
        let builds = AtomicUsize::new(0);
        let start = Barrier::new(4);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    start.wait();
                    install_once(root.path(), "node", "lock v1", |partial| {
                        builds.fetch_add(1, Ordering::SeqCst);
                        // Give the other threads time to find the lock held.
                        std::thread::sleep(Duration::from_millis(200));
                        build_marker(partial)
                    })
                    .expect("install");
                });
            }
        });
        assert_eq!(builds.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failing_or_hanging_command_is_reported_with_its_output() {
        let mut failing = Command::new("sh");
        failing.args(["-c", "echo out; echo err >&2; exit 3"]);
        match run_bounded(failing, Duration::from_secs(60)) {
            Err(ClientError::Failed {
                stdout,
                stderr,
                status,
                ..
            }) => {
                assert_eq!(status.code(), Some(3));
                assert_eq!((stdout.as_str(), stderr.as_str()), ("out\n", "err\n"));
            }
            other => panic!("expected Failed, got {other:?}"),
        }
        let mut hanging = Command::new("sh");
        hanging.args(["-c", "echo started; exec sleep 600"]);
        match run_bounded(hanging, Duration::from_secs(5)) {
            Err(ClientError::TimedOut { stdout, .. }) => assert_eq!(stdout, "started\n"),
            other => panic!("expected TimedOut, got {other:?}"),
        }
    }
}
