//! What the benchmark asks of the machine: a thread's CPU time, the load
//! average, the page cache dropped (full run only, and only as root),
//! shell commands timed (`cp -r` + `sync`, `cat`), a directory's bytes,
//! `df`, and the MB and MB/s every line prints (10^6 B).
//!
//! Nothing here knows the cleaner; a step that cannot be measured as asked
//! (no permission to drop the cache) says so on stderr rather than
//! printing a warm figure as a cold one.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::plan::Plan;

/// CPU time of the calling thread: beside a wall time on a shared machine,
/// what a pass itself cost.
pub(crate) fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: one timespec the call fills; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

pub(crate) fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

pub(crate) fn mbps(bytes: u64, d: Duration) -> f64 {
    mb(bytes) / d.as_secs_f64()
}

pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// `sync; echo 3 > /proc/sys/vm/drop_caches`. False if not permitted.
pub(crate) fn drop_caches(plan: &Plan) -> bool {
    if !plan.full {
        return false;
    }
    let synced = Command::new("sync").status().is_ok_and(|s| s.success());
    synced && std::fs::write("/proc/sys/vm/drop_caches", b"3").is_ok()
}

pub(crate) fn note_cold(plan: &Plan, what: &str) {
    if plan.full && !drop_caches(plan) {
        eprintln!(
            "  WARNING: could not drop the page cache before {what} (not root?): it is not cold"
        );
    }
}

pub(crate) fn sh(script: &str) -> Duration {
    let began = Instant::now();
    let ok = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "`{script}` failed");
    began.elapsed()
}

/// `cp -r src dst` then fsync of every copied file and the directory.
pub(crate) fn cp_r(src: &Path, dst: &Path) -> Duration {
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    sh(&format!(
        "cp -r '{}' '{}' && sync '{}' '{}'/*",
        src.display(),
        dst.display(),
        dst.display(),
        dst.display()
    ))
}

pub(crate) fn dir_bytes(dir: &Path) -> (u64, usize) {
    let mut bytes = 0;
    let mut files = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let m = e.unwrap().metadata().unwrap();
        if m.is_file() {
            bytes += m.len();
            files += 1;
        }
    }
    (bytes, files)
}

pub(crate) fn same_device(a: &Path, b: &Path) -> Option<bool> {
    Some(std::fs::metadata(a).ok()?.dev() == std::fs::metadata(b).ok()?.dev())
}

pub(crate) fn df(path: &Path) -> String {
    Command::new("df")
        .arg("-P")
        .arg(path)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().nth(1).map(str::to_owned))
        .unwrap_or_default()
}
