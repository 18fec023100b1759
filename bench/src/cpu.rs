//! CPU time spent by each side of the bench, read from `/proc` (Linux).
//!
//! On a shared two-core machine the records/s of one run swing by a fifth
//! from minute to minute, and both the servers and the load generator
//! compete for the same cores. The CPU time each spends per record moves far
//! less from run to run, so the bench reports it next to the rates: it shows
//! how much work a change took away, which the ratio alone hides in noise.
//!
//! Sources: the tidelog server the bench started (a child process: the
//! whole process), the bare endpoint (this process's threads named
//! [`crate::ceiling::THREAD_NAME`]) and the load generator (this process's
//! threads named [`CLIENT_THREAD_NAME`]), and a cluster's nodes (their
//! processes' times summed). A server given with `--url`
//! is another process the bench cannot attribute, so its CPU is not
//! reported. Elsewhere than Linux nothing is reported.

use std::time::Duration;

/// Threads of the load generator's runtime (their CPU time is reported).
pub(crate) const CLIENT_THREAD_NAME: &str = "tidelog-bench";

/// Whose CPU time to read.
#[derive(Clone, Copy, Debug)]
pub enum CpuSource {
    /// A whole process (the tidelog server the bench started).
    Process(u32),
    /// The threads of this process with this name.
    Threads(&'static str),
    /// Not measurable (a server given with `--url`).
    Unknown,
    /// Whole processes, their times summed: a cluster's nodes (`--cluster`).
    Processes([u32; PROCESSES_MAX]),
}

/// The processes a [`CpuSource::Processes`] sums: a cluster's three nodes.
pub(crate) const PROCESSES_MAX: usize = 3;

impl CpuSource {
    /// User plus system time so far, or `None` if it cannot be read.
    pub fn cpu_time(self) -> Option<Duration> {
        match self {
            CpuSource::Process(pid) => {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                ticks_to_duration(stat_cpu_ticks(&stat)?)
            }
            CpuSource::Threads(name) => {
                let comm = comm_of(name);
                let mut ticks = 0u64;
                for task in std::fs::read_dir("/proc/self/task").ok()? {
                    let Ok(task) = task else { continue };
                    // A thread that exits between listing and reading is
                    // skipped: its time is gone from /proc either way.
                    let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
                        continue;
                    };
                    if stat_comm(&stat) == Some(comm) {
                        ticks += stat_cpu_ticks(&stat)?;
                    }
                }
                ticks_to_duration(ticks)
            }
            CpuSource::Unknown => None,
            CpuSource::Processes(pids) => {
                let mut sum = Duration::ZERO;
                for pid in pids {
                    sum += CpuSource::Process(pid).cpu_time()?;
                }
                Some(sum)
            }
        }
    }
}

/// What the kernel keeps of a thread name: its first 15 bytes.
fn comm_of(name: &str) -> &str {
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// The `comm` field of a `/proc/.../stat` line: between the first `(` and
/// the last `)` (a name may itself contain parentheses and spaces).
fn stat_comm(stat: &str) -> Option<&str> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    stat.get(open + 1..close)
}

/// `utime + stime` (fields 14 and 15) of a `/proc/.../stat` line, in clock
/// ticks.
fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let after_comm = stat.get(stat.rfind(')')? + 1..)?;
    // Fields from 3 (state) on; utime and stime are the 12th and 13th here.
    let mut fields = after_comm.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

fn ticks_to_duration(ticks: u64) -> Option<Duration> {
    // SAFETY: sysconf only reads a constant of the running system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let per_second = u64::try_from(per_second).ok().filter(|&n| n > 0)?;
    Some(Duration::from_nanos(
        ticks.saturating_mul(1_000_000_000) / per_second,
    ))
}

/// CPU time spent over a measured window, per record, in µs.
pub fn micros_per_record(cpu: Option<Duration>, records: u64) -> Option<f64> {
    let cpu = cpu?;
    (records > 0).then(|| cpu.as_secs_f64() * 1e6 / records as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_parsed_past_odd_names() {
        let line = "4242 (tidelog (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 9 0 100 1000 10 18446744073709551615";
        assert_eq!(stat_comm(line), Some("tidelog (x) y"));
        assert_eq!(stat_cpu_ticks(line), Some(1234 + 567));
        assert_eq!(stat_cpu_ticks("4242 (x) S 1 2"), None);
        assert_eq!(stat_comm("garbage"), None);
    }

    #[test]
    fn thread_names_are_cut_like_the_kernel_does() {
        assert_eq!(comm_of("tidelog-bench-ceiling"), "tidelog-bench-c");
        assert_eq!(comm_of("tidelog-bench"), "tidelog-bench");
        assert_eq!(comm_of("ééééééééé"), "ééééééé");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_and_a_named_thread_have_cpu_time() {
        let me = CpuSource::Process(std::process::id());
        let spin = std::thread::Builder::new()
            .name("cpu-rs-test".into())
            .spawn(|| {
                // Burn CPU until the kernel has counted a tick of it (or
                // give up after 5 s: then the assertion below fails).
                let began = std::time::Instant::now();
                let mut x = 0u64;
                loop {
                    for _ in 0..100_000 {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                    let cpu = CpuSource::Threads("cpu-rs-test").cpu_time();
                    if cpu.is_some_and(|c| c > Duration::ZERO)
                        || began.elapsed() > Duration::from_secs(5)
                    {
                        return cpu;
                    }
                }
            })
            .unwrap();
        let thread_cpu = spin.join().unwrap().unwrap();
        assert!(thread_cpu > Duration::ZERO, "{thread_cpu:?}");
        // The kernel splits each one's run time into utime and stime by its
        // own sampled ratio and truncates both to ticks, so the process's
        // sum can read below a thread's by up to two ticks (a thread's
        // 1.0 + 0.0 is 1 tick; the process's 0.6 + 0.6 is 0). More than
        // that would be a wrong source.
        let tick = ticks_to_duration(1).unwrap();
        let process_cpu = me.cpu_time().unwrap();
        assert!(
            process_cpu + 2 * tick >= thread_cpu,
            "process {process_cpu:?}, thread {thread_cpu:?}"
        );
        assert_eq!(
            CpuSource::Threads("no-such-thread").cpu_time(),
            Some(Duration::ZERO)
        );
        assert_eq!(CpuSource::Unknown.cpu_time(), None);
        assert_eq!(
            micros_per_record(Some(Duration::from_millis(2)), 1000),
            Some(2.0)
        );
        assert_eq!(micros_per_record(Some(Duration::from_millis(2)), 0), None);
    }
}
