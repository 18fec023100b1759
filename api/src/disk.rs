//! Disk usage of the data directory's filesystem, and the disk-full gate.
//!
//! RocketMQ's rule (DESIGN.md §4): above `disk_full_ratio` the broker
//! refuses writes with a clear error until usage falls. The store does not
//! measure the disk itself, so the API does: a monitor task refreshes the
//! ratio with `statvfs` every `disk_check_interval_ms`, and produce reads one
//! atomic flag. The first measurement is taken before the server reports
//! ready, so the gate is never open by accident at start.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Used fraction of the filesystem holding `path`, as `df` computes it:
/// used / (used + available to unprivileged users). Blocks on a syscall.
pub fn used_ratio(path: &Path) -> std::io::Result<f64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `statvfs` is plain old data; all-zero is a valid value.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is NUL-terminated and outlives the call; `stat` is a
    // valid, writable statvfs.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // `as u64`: the field widths differ between platforms.
    #[allow(clippy::unnecessary_cast)]
    let (blocks, free, avail) = (
        stat.f_blocks as u64,
        stat.f_bfree as u64,
        stat.f_bavail as u64,
    );
    let used = blocks.saturating_sub(free);
    let usable = used + avail;
    if usable == 0 {
        return Ok(0.0);
    }
    Ok(used as f64 / usable as f64)
}

/// The last measurement and the write gate derived from it.
#[derive(Debug)]
pub struct DiskState {
    full_ratio: f64,
    ratio_bits: AtomicU64,
    full: AtomicBool,
    /// Failed measurements so far (the gate keeps its last state then).
    errors: AtomicU64,
}

impl DiskState {
    pub fn new(full_ratio: f64) -> Self {
        DiskState {
            full_ratio,
            ratio_bits: AtomicU64::new(0f64.to_bits()),
            full: AtomicBool::new(false),
            errors: AtomicU64::new(0),
        }
    }

    /// Measures `dir` and updates the gate. Blocking.
    pub fn refresh(&self, dir: &Path) {
        match used_ratio(dir) {
            Ok(ratio) => self.record(ratio),
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(dir = %dir.display(), error = %e, "cannot measure disk usage");
            }
        }
    }

    /// Takes a measurement (tests feed their own).
    pub fn record(&self, ratio: f64) {
        self.ratio_bits.store(ratio.to_bits(), Ordering::Relaxed);
        let full = ratio > self.full_ratio;
        let was = self.full.swap(full, Ordering::Relaxed);
        if full != was {
            if full {
                tracing::error!(
                    ratio,
                    limit = self.full_ratio,
                    "disk full: refusing writes until usage falls"
                );
            } else {
                tracing::info!(ratio, "disk usage back below the limit: accepting writes");
            }
        }
    }

    pub fn used_ratio(&self) -> f64 {
        f64::from_bits(self.ratio_bits.load(Ordering::Relaxed))
    }

    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    pub fn full_ratio(&self) -> f64 {
        self.full_ratio
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ratio_of_a_real_directory_is_a_fraction() {
        let dir = tempfile::tempdir().unwrap();
        let r = used_ratio(dir.path()).unwrap();
        assert!((0.0..=1.0).contains(&r), "{r}");
        assert!(used_ratio(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn gate_opens_and_closes_with_the_ratio() {
        let d = DiskState::new(0.9);
        assert!(!d.is_full());
        d.record(0.95);
        assert!(d.is_full());
        assert_eq!(d.used_ratio(), 0.95);
        d.record(0.5);
        assert!(!d.is_full());
    }
}
