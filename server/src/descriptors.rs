//! The process's open-file limit: raised at start, and split between the
//! store and client connections (`tidelog_runtime::connections`).
//!
//! Linux starts a process with the soft `RLIMIT_NOFILE` its parent had,
//! often 1024, though the hard limit allows far more; a server that holds
//! a file per partition and a descriptor per connection needs the hard
//! one. Raising the soft limit up to the hard one needs no privilege.

use std::io;

/// What [`raise_open_file_limit`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileLimit {
    /// The soft limit the process started with.
    pub soft_before: u64,
    /// The soft limit now.
    pub soft: u64,
    /// The hard limit (the soft one cannot pass it).
    pub hard: u64,
}

/// Largest count a descriptor limit can usefully be set to: Linux refuses
/// a soft limit past `fs.nr_open` (1,048,576 by default) even when the
/// hard limit is unlimited.
fn nr_open() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

fn get() -> io::Result<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lim)
}

/// The soft `RLIMIT_NOFILE` now (`fs.nr_open` when unlimited).
pub fn soft_limit() -> io::Result<u64> {
    let lim = get()?;
    Ok(if lim.rlim_cur == libc::RLIM_INFINITY {
        nr_open()
    } else {
        lim.rlim_cur as u64
    })
}

/// Raise the soft `RLIMIT_NOFILE` to the hard limit (to `fs.nr_open` when
/// the hard one is unlimited). A limit that cannot be raised is an error
/// the caller logs; the server then runs with the limit it has.
pub fn raise_open_file_limit() -> io::Result<OpenFileLimit> {
    let lim = get()?;
    let hard = if lim.rlim_max == libc::RLIM_INFINITY {
        nr_open()
    } else {
        lim.rlim_max as u64
    };
    let soft_before = if lim.rlim_cur == libc::RLIM_INFINITY {
        hard
    } else {
        lim.rlim_cur as u64
    };
    if soft_before < hard {
        let want = libc::rlimit {
            rlim_cur: hard as libc::rlim_t,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `want` is a valid rlimit; the call only reads it.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let now = get()?;
    let soft = if now.rlim_cur == libc::RLIM_INFINITY {
        hard
    } else {
        now.rlim_cur as u64
    };
    Ok(OpenFileLimit {
        soft_before,
        soft,
        hard,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lowers this test process's soft limit, then raises it: the soft
    /// limit ends at the hard one. (Only the soft limit is lowered, so
    /// the other tests of this process lose nothing.)
    #[test]
    fn the_soft_limit_is_raised_to_the_hard_limit() {
        let lim = get().unwrap();
        let hard = if lim.rlim_max == libc::RLIM_INFINITY {
            nr_open()
        } else {
            lim.rlim_max as u64
        };
        if hard <= 256 {
            eprintln!("skipped: the hard open-file limit ({hard}) is too low to lower below it");
            return;
        }
        let low = libc::rlimit {
            rlim_cur: 256,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: a valid rlimit, only read.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
        let got = raise_open_file_limit().unwrap();
        assert_eq!(
            got,
            OpenFileLimit {
                soft_before: 256,
                soft: hard,
                hard
            }
        );
        assert_eq!(get().unwrap().rlim_cur as u64, hard);
        assert_eq!(soft_limit().unwrap(), hard);
        // Already at the hard limit: nothing to do.
        let again = raise_open_file_limit().unwrap();
        assert_eq!(again.soft_before, hard);
        assert_eq!(again.soft, hard);
    }
}
