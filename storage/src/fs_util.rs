//! Small filesystem helpers shared by every file type.
//!
//! Metadata files (checkpoints, configs) are replaced atomically: write a
//! temporary file, fsync it, rename it over the target, fsync the directory.
//! A crash at any point leaves either the old or the new file, never a mix.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

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

/// fsync a directory so that renames and creations inside it are durable.
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
        let file = create_empty(tmp)?;
        prepare(&file).at(tmp)?;
        durability::sync_all(&file, tmp).at(tmp)?;
        finish(file)
    };
    build().inspect_err(|_| {
        let _ = fs::remove_file(tmp);
    })
}

/// Back the first `len` bytes of `file` with disk blocks, extending it to
/// `len` if shorter: `posix_fallocate`, or, where the file system has no
/// fallocate, zeros written over what lies past the file's old end. A file
/// the store writes through a memory map must be backed before it is
/// mapped for writing: a store into a page with no block behind it on a
/// full disk is SIGBUS, which kills the process, where this reports ENOSPC
/// to the caller. Bytes already in the file are kept.
pub fn allocate(file: &File, len: u64) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        let Ok(size) = libc::off_t::try_from(len) else {
            return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
        };
        if size == 0 {
            return Ok(());
        }
        // SAFETY: plain syscall on an fd the caller owns.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size) };
        match rc {
            0 => return Ok(()),
            // No fallocate here (glibc emulates it by writing, so this is
            // rare): write the zeros ourselves below.
            libc::EOPNOTSUPP | libc::EINVAL => {}
            err => return Err(std::io::Error::from_raw_os_error(err)),
        }
    }
    write_zeros_past_end(file, len)
}

/// Extend `file` to `len` by writing zeros (never a hole).
fn write_zeros_past_end(file: &File, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    const CHUNK: usize = 1 << 16;
    let zeros = [0u8; CHUNK];
    let mut at = file.metadata()?.len();
    while at < len {
        let n = (len - at).min(CHUNK as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// `path` created empty (or emptied) and opened for reading and writing;
/// nothing is synced: the caller makes it durable as its format needs.
pub fn create_empty(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .at(path)
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

/// The whole of a small file the server writes itself and reads at start
/// (the topic registry, the ACL and users files), `None` when it does not
/// exist. One larger than `max` bytes is refused
/// (`ErrorKind::FileTooLarge`) before it is read, and the read itself is
/// bounded (the file may grow meanwhile): no file tidelog writes grows
/// past its bound, so such a file is damage, and reading it whole could
/// take the memory.
pub fn read_small(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let too_large = |len: u64| {
        std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("{len} bytes, more than the {max} the file can be"),
        )
    };
    let file = match File::open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        other => other?,
    };
    let len = file.metadata()?.len();
    if len > max {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

/// Replace `path` with `contents` atomically and durably.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    write_atomic_mode(path, contents, None)
}

/// [`write_atomic`] for a file only its owner may read (mode 0600 from
/// its first byte: the temporary file is created so, never widened then
/// narrowed), for secrets such as the users file's credentials.
pub fn write_atomic_private(path: &Path, contents: &[u8]) -> Result<()> {
    write_atomic_mode(path, contents, Some(0o600))
}

/// `mode` `None`: what the process's umask gives a new file.
fn write_atomic_mode(path: &Path, contents: &[u8], mode: Option<u32>) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
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
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        if let Some(mode) = mode {
            options.mode(mode);
        }
        let mut f = options.open(&tmp).at(&tmp)?;
        if let Some(mode) = mode {
            // A temporary file left by a crash keeps its old mode: set it.
            f.set_permissions(fs::Permissions::from_mode(mode))
                .at(&tmp)?;
        }
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

/// Make everything under `root` durable: every file's bytes, then every
/// directory's entries, deepest first (a directory's own entries before its
/// name in its parent). Returns the files and directories synced.
///
/// A store opened after a crash runs this before its first checkpoint.
/// The crashed process's unsynced writes outlive it in the page cache, so
/// recovery reads them as if they were on the disk and the checkpoint it
/// writes claims them; but the flush that precedes that checkpoint syncs
/// only what *this* process wrote (the files it made and the directories it
/// noted). A power loss after such a checkpoint would lose records it
/// claims (a new partition's queue file, say), and no replay would bring
/// them back. Syncing the tree once closes that gap; a file with nothing
/// dirty costs one system call.
pub fn sync_tree(root: &Path) -> Result<(usize, usize)> {
    let mut dirs = Vec::new();
    let mut files = 0;
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).at(&dir)? {
            let entry = entry.at(&dir)?;
            let path = entry.path();
            let kind = entry.file_type().at(&path)?;
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let file = match File::open(&path) {
                    Ok(f) => f,
                    // Removed meanwhile (a temporary file): nothing to keep.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    other => other.at(&path)?,
                };
                durability::sync_all(&file, &path).at(&path)?;
                files += 1;
            }
        }
        dirs.push(dir);
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for dir in &dirs {
        fsync_dir(dir)?;
    }
    Ok((files, dirs.len()))
}

/// Directories that gained entries (files or directories made in them)
/// whose names are not durable yet: the names of the files the dispatcher
/// makes (a new partition's queue directory, queue and time files, a
/// compacted log's directory and first segment).
///
/// Those files hold derived data: recovery rebuilds whatever the
/// checkpoint does not claim from the CommitLog. So a new name needs to be
/// durable only by the time a checkpoint claims records in its file, not
/// when the file is made. The dispatcher creates such files with no fsync
/// and notes their directories here; the owner's `flush`, which runs
/// before every checkpoint is written, first syncs the files' bytes (which
/// makes their sizes durable too) and then [`PendingDirSyncs::sync`]s every
/// noted directory once, however many names it gained. A file whose name
/// is durable but whose size is not (made after its owner's flush synced
/// the files, before the directory sync) holds only records the checkpoint
/// does not claim, and its loader treats it as the torn tail it is.
///
/// Before this, each new partition cost the dispatcher 3 fsyncs (6 for a
/// compact topic's, with its compacted log), each an ext4 journal commit,
/// in its path, so a burst of new partitions held every other partition's
/// records back (docs/OPERATIONS.md). Now a checkpoint after 1,000 new
/// partitions does about 1,000 directory fsyncs on the flush thread; on
/// ext4 (a loop device, strace -T) the median took 4 µs and 10 of 1,011
/// over 2 ms: one journal commit covers the names of many directories.
#[derive(Debug, Default)]
pub struct PendingDirSyncs {
    dirs: Mutex<BTreeSet<PathBuf>>,
}

impl PendingDirSyncs {
    fn lock(&self) -> MutexGuard<'_, BTreeSet<PathBuf>> {
        self.dirs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `dir` gained an entry whose name must be durable by the next sync.
    pub fn note(&self, dir: &Path) {
        let mut dirs = self.lock();
        if !dirs.contains(dir) {
            dirs.insert(dir.to_path_buf());
        }
    }

    /// Create `dir` and its missing parents, with no fsync: each directory
    /// created is noted in its parent (every level, as
    /// [`create_dir_durable`] syncs them).
    pub fn create_dir_all(&self, dir: &Path) -> Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(parent)?;
        }
        match fs::create_dir(dir) {
            // Another thread made it meanwhile and noted it.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
            other => other.at(dir),
        }?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.note(parent);
        }
        Ok(())
    }

    /// Directories noted and not yet synced.
    pub fn pending(&self) -> usize {
        self.lock().len()
    }

    /// fsync every noted directory, deepest first (a directory's own
    /// entries before its name in its parent), each once. A directory gone
    /// meanwhile (its topic was deleted) is skipped: nothing in it is left
    /// to keep. The fsyncs run without the lock, so a note meanwhile (the
    /// dispatcher making the next file) does not wait for the disk; it is
    /// synced by the next call. On a failure the directories not synced
    /// stay noted, and the error is returned (the caller's checkpoint
    /// fails, and the next one tries again). Returns the directories
    /// synced.
    pub fn sync(&self) -> Result<usize> {
        let mut dirs: Vec<PathBuf> = std::mem::take(&mut *self.lock()).into_iter().collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        let mut synced = 0;
        for i in 0..dirs.len() {
            match durability::sync_dir(&dirs[i]) {
                Ok(()) => synced += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    let failed = dirs[i].clone();
                    self.lock().extend(dirs.drain(i..));
                    return Err(e).at(&failed);
                }
            }
        }
        Ok(synced)
    }
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

    #[test]
    fn small_files_are_read_whole_or_refused_past_their_bound() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("small");
        assert!(
            read_small(&p, 4).unwrap().is_none(),
            "a missing file is None"
        );
        fs::write(&p, b"1234").unwrap();
        assert_eq!(read_small(&p, 4).unwrap().unwrap(), b"1234");
        let refused = read_small(&p, 3).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::FileTooLarge);
        assert!(refused.to_string().contains("4 bytes"), "{refused}");
        assert!(read_small(dir.path(), 4).is_err(), "a directory is no file");
    }

    #[test]
    fn write_atomic_private_is_for_the_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("secret");
        // A temporary file a crash left, readable by all.
        fs::write(dir.path().join("secret.tmp"), b"old").unwrap();
        fs::set_permissions(
            dir.path().join("secret.tmp"),
            fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        write_atomic_private(&p, b"keys").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"keys");
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
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
