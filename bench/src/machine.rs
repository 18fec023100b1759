//! Limits and costs measured on this machine around a run: the memory
//! copy rate (the ceiling of any byte rate through the page cache), and
//! what the started server holds afterwards (anonymous memory, open
//! files, mappings, threads), read from `/proc` (Linux; elsewhere
//! nothing is reported).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Issue 17: the server's anonymous memory after a run stays below this.
pub(crate) const RSS_ANON_GOAL_KIB: u64 = 256 * 1024;
/// Each buffer of the memory copy: far above the CPU caches, so the rate
/// is memory's, and small enough to allocate on any machine.
const MEMCPY_BUFFER_BYTES: usize = 64 << 20;
/// Copies of the buffer per timed slice (256 MiB), after one untimed copy
/// that faults both buffers in.
const MEMCPY_COPIES: usize = 4;
/// Slices timed; the fastest counts, as the one least disturbed by other
/// processes on a shared machine (a limit is the best the machine does).
const MEMCPY_SLICES: usize = 4;

/// MB/s (10^6 B/s) of `copy_from_slice` between two 64 MiB buffers, both
/// touched first: what a byte can cost at best once it is in memory.
pub(crate) fn memcpy_mb_per_s() -> f64 {
    let source = vec![0x5au8; MEMCPY_BUFFER_BYTES];
    let mut target = vec![0u8; MEMCPY_BUFFER_BYTES];
    target.copy_from_slice(&source);
    let mut fastest = Duration::MAX;
    for _ in 0..MEMCPY_SLICES {
        let began = Instant::now();
        for i in 0..MEMCPY_COPIES {
            target.copy_from_slice(std::hint::black_box(&source));
            // Something the optimiser cannot see through, per copy.
            std::hint::black_box(target[i]);
        }
        fastest = fastest.min(began.elapsed());
    }
    mb_per_s(MEMCPY_BUFFER_BYTES * MEMCPY_COPIES, fastest)
}

pub(crate) fn mb_per_s(bytes: usize, took: Duration) -> f64 {
    let secs = took.as_secs_f64();
    if secs > 0.0 {
        bytes as f64 / secs / 1e6
    } else {
        0.0
    }
}

/// What a server process holds, from `/proc/<pid>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerFigures {
    /// `RssAnon` of `/proc/<pid>/status`: heap and stacks, not the page
    /// cache of mapped files.
    pub rss_anon_kib: Option<u64>,
    /// `VmRSS`: RssAnon plus the resident mapped file pages.
    pub vm_rss_kib: Option<u64>,
    pub threads: Option<u64>,
    /// Entries of `/proc/<pid>/fd`.
    pub open_files: Option<u64>,
    /// Lines of `/proc/<pid>/maps`.
    pub mappings: Option<u64>,
}

impl ServerFigures {
    pub(crate) fn read(pid: u32) -> ServerFigures {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let open_files = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .ok()
            .map(|dir| dir.count() as u64);
        let mappings = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .ok()
            .map(|maps| maps.lines().count() as u64);
        ServerFigures {
            rss_anon_kib: status_kib(&status, "RssAnon"),
            vm_rss_kib: status_kib(&status, "VmRSS"),
            threads: status_kib(&status, "Threads"),
            open_files,
            mappings,
        }
    }

    /// The report's line for it.
    pub(crate) fn describe(&self) -> String {
        let show = |v: Option<u64>| v.map_or_else(|| "n/a".to_string(), |v| v.to_string());
        let mib = |v: Option<u64>| {
            v.map_or_else(
                || "n/a".to_string(),
                |k| format!("{:.1} MiB", k as f64 / 1024.0),
            )
        };
        let verdict = match self.rss_anon_kib {
            Some(k) => crate::render::verdict(k < RSS_ANON_GOAL_KIB),
            None => "not measured",
        };
        format!(
            "RssAnon {} (goal < {} MiB: {verdict}), VmRSS {}, {} threads, {} open files, {} mappings",
            mib(self.rss_anon_kib),
            RSS_ANON_GOAL_KIB / 1024,
            mib(self.vm_rss_kib),
            show(self.threads),
            show(self.open_files),
            show(self.mappings),
        )
    }
}

/// The number of a `/proc/<pid>/status` line `key:  123 kB` (or a bare
/// count, as `Threads:`).
fn status_kib(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read_by_key() {
        let status = "Name:\ttidelog\nVmRSS:\t  204800 kB\nRssAnon:\t   51200 kB\nRssFile:\t  153600 kB\nThreads:\t17\n";
        assert_eq!(status_kib(status, "RssAnon"), Some(51_200));
        assert_eq!(status_kib(status, "VmRSS"), Some(204_800));
        assert_eq!(status_kib(status, "Threads"), Some(17));
        // A key is a whole key, not a prefix of another.
        assert_eq!(status_kib(status, "Rss"), None);
        assert_eq!(status_kib("", "RssAnon"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_figures() {
        let me = ServerFigures::read(std::process::id());
        assert!(me.rss_anon_kib.is_some_and(|k| k > 0), "{me:?}");
        assert!(me.threads.is_some_and(|n| n >= 1), "{me:?}");
        assert!(me.open_files.is_some_and(|n| n >= 1), "{me:?}");
        assert!(me.mappings.is_some_and(|n| n >= 1), "{me:?}");
        assert!(me.describe().starts_with("RssAnon "), "{}", me.describe());
    }

    #[test]
    fn memcpy_copies_something() {
        assert!(memcpy_mb_per_s() > 0.0);
        assert_eq!(mb_per_s(1, Duration::ZERO), 0.0);
        assert_eq!(mb_per_s(2_000_000, Duration::from_secs(2)), 1.0);
    }
}
