//! Small filesystem helpers shared by every file type.
//!
//! Metadata files (checkpoints, configs) are replaced atomically: write a
//! temporary file, fsync it, rename it over the target, fsync the directory.
//! A crash at any point leaves either the old or the new file, never a mix.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::durability;
use crate::error::{IoContext, Result, StoreError};

/// Width of the zero-padded decimal numbers that name segment files.
pub const FILE_NAME_DIGITS: usize = 20;

/// `00000000000000001024` for 1024: names sort in numeric order.
pub fn offset_file_name(offset: u64) -> String {
    format!("{offset:0width$}", width = FILE_NAME_DIGITS)
}

/// Parse a name made by [`offset_file_name`] (optionally followed by
/// `suffix`). Anything else is `None`, so stray files are never mistaken for
/// segments.
pub fn parse_offset_file_name(name: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_suffix(suffix)?;
    if digits.len() != FILE_NAME_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// fsync a directory so that renames and creations inside it are durable.
/// The system's page size: what `madvise` ranges must be aligned to
/// (4 KiB where it cannot be read).
pub fn page_size() -> usize {
    #[cfg(unix)]
    {
        // SAFETY: sysconf only reads a constant of the running system.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if let Ok(size @ 1..) = usize::try_from(size) {
            return size;
        }
    }
    4096
}

pub fn fsync_dir(dir: &Path) -> Result<()> {
    durability::sync_dir(dir).at(dir)
}

/// Create a file of the store under the temporary name `tmp`: `prepare`
/// sizes it (and writes what it must hold), it is made durable, then
/// `finish` takes it (maps it, renames it into place). If any step fails,
/// `tmp` is removed, so a failed or crashed creation leaves at most a
/// temporary file, which the file's loader removes at open.
pub fn create_via_temp<T>(
    tmp: &Path,
    prepare: impl FnOnce(&File) -> std::io::Result<()>,
    finish: impl FnOnce(File) -> Result<T>,
) -> Result<T> {
    let build = || -> Result<T> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(tmp)
            .at(tmp)?;
        prepare(&file).at(tmp)?;
        durability::sync_all(&file, tmp).at(tmp)?;
        finish(file)
    };
    build().inspect_err(|_| {
        let _ = fs::remove_file(tmp);
    })
}

/// An existing file of the store opened for reading and writing, with its
/// length (which its loader checks before it reads).
pub fn open_read_write(path: &Path) -> Result<(File, u64)> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .at(path)?;
    let len = file.metadata().at(path)?.len();
    Ok((file, len))
}

/// Replace `path` with `contents` atomically and durably.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| StoreError::invalid(format!("{} has no parent", path.display())))?;
    let mut tmp_name = path
        .file_name()
        .ok_or_else(|| StoreError::invalid(format!("{} has no file name", path.display())))?
        .to_os_string();
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .at(&tmp)?;
        f.write_all(contents).at(&tmp)?;
        durability::sync_all(&f, &tmp).at(&tmp)?;
    }
    fs::rename(&tmp, path).at(path)?;
    fsync_dir(dir)
}

/// Ranges of `file` in `[from, size)` that may hold non-zero bytes, found
/// with `SEEK_DATA`/`SEEK_HOLE`: space never written reads as a hole, so a
/// reader can skip the untouched part of a preallocated or sparse file
/// without reading (or faulting in) a page of it. Pages written but not yet
/// written back count as data. Where the filesystem cannot tell, the whole
/// rest of the file is one range, which is always correct.
pub fn data_ranges(file: &File, from: u64, size: u64) -> Vec<(u64, u64)> {
    if from >= size {
        return Vec::new();
    }
    let whole = vec![(from, size)];
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        let fd = file.as_raw_fd();
        let mut out = Vec::new();
        let mut pos = from;
        while pos < size {
            // SAFETY: plain syscalls on an fd the caller owns.
            let data = unsafe { libc::lseek(fd, pos as libc::off_t, libc::SEEK_DATA) };
            if data < 0 {
                let err = std::io::Error::last_os_error();
                if err.raw_os_error() == Some(libc::ENXIO) {
                    break; // no data past `pos`
                }
                return whole;
            }
            // SAFETY: as above.
            let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
            let end = if hole < 0 {
                size
            } else {
                (hole as u64).min(size)
            };
            if (data as u64) >= end {
                break;
            }
            out.push((data as u64, end));
            pos = end;
        }
        out
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        whole
    }
}

/// Create `dir` and its missing parents, fsyncing the parent of each one
/// created so that every new entry survives a power loss (not only the
/// last: `consumequeue/<topic>/<partition>` makes two).
pub fn create_dir_durable(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_durable(parent)?;
    }
    match fs::create_dir(dir) {
        // Another thread made it meanwhile; its creator syncs the parent.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        other => other.at(dir),
    }?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fsync_dir(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_names_round_trip_and_sort() {
        assert_eq!(offset_file_name(1024), "00000000000000001024");
        assert_eq!(
            parse_offset_file_name("00000000000000001024", ""),
            Some(1024)
        );
        assert_eq!(
            parse_offset_file_name("00000000000000001024.log", ".log"),
            Some(1024)
        );
        assert!(offset_file_name(9) < offset_file_name(10));
        assert_eq!(offset_file_name(u64::MAX).len(), FILE_NAME_DIGITS);
    }

    #[test]
    fn stray_names_are_not_offsets() {
        for bad in [
            "",
            "1024",
            "0000000000000000102x",
            "00000000000000001024.tmp",
            "../00000000000000001024",
        ] {
            assert_eq!(parse_offset_file_name(bad, ""), None, "{bad}");
        }
        // 20 digits that overflow u64.
        assert_eq!(parse_offset_file_name("99999999999999999999", ""), None);
    }

    #[test]
    fn write_atomic_replaces_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("meta");
        write_atomic(&p, b"first version, long").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"second");
        assert!(!dir.path().join("meta.tmp").exists());
    }

    /// Every directory `create_dir_durable` makes survives a power loss, not
    /// only the last one (`consumequeue/<topic>/<partition>` makes two).
    #[cfg(feature = "durable-image")]
    #[test]
    fn every_created_directory_is_durable() {
        let root = tempfile::tempdir().unwrap();
        let image = crate::durability::image::install(root.path()).unwrap();
        create_dir_durable(&root.path().join("queues/topic/0")).unwrap();
        let snap = tempfile::tempdir().unwrap();
        let after = snap.path().join("after");
        image.snapshot(&after, None).unwrap();
        assert!(after.join("queues/topic/0").is_dir());
    }
}
