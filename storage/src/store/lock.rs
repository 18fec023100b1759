//! The data dir lock: an exclusive flock on `<data_dir>/lock`, taken once
//! per server before anything in the data dir is opened.
//!
//! Invariant: two processes never serve one data dir; the lock is held
//! for as long as its [`DataDirLock`] lives (the store holds it from open
//! to drop) and released by the kernel if the process dies.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::LOCK_FILE;
use crate::error::{IoContext, Result, StoreError};
use crate::fs_util;

/// An exclusive flock on `<data_dir>/lock`, so two servers never share a
/// data dir; released when dropped. Taken once per server, before anything
/// in the data dir is opened (the store's own files and its callers').
#[derive(Debug)]
pub struct DataDirLock {
    pub(super) dir: PathBuf,
    _file: File,
}

impl DataDirLock {
    /// Creates `dir` (durably) if needed and locks it; `StoreError::Locked`
    /// if another process holds the lock.
    pub fn acquire(dir: &Path) -> Result<DataDirLock> {
        fs_util::create_dir_durable(dir)?;
        Ok(DataDirLock {
            dir: dir.to_path_buf(),
            _file: acquire_lock(dir)?,
        })
    }
}

/// Take `<dir>/lock` with flock, so two servers never share a data dir.
fn acquire_lock(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .at(&path)?;
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: plain syscall on an fd we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(StoreError::Locked {
                    path: dir.to_path_buf(),
                });
            }
            return Err(StoreError::io(&path, err));
        }
    }
    Ok(file)
}
