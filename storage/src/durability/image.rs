//! A test-only shadow of what a power loss would leave of a data directory
//! (feature `durable-image`; see the parent module).
//!
//! The model is what POSIX file systems promise, no more:
//! - a file's bytes are durable once a sync covering them has returned:
//!   fsync and fdatasync cover the whole file, msync its range (and the
//!   file's size, which Linux's msync writes with the range);
//! - a name (create, rename, unlink) is durable once its directory has been
//!   fsynced: the image then takes that directory's whole live listing;
//! - a file is identified by (device, inode, birth time), so a rename keeps
//!   its bytes and a reused inode number is a new file;
//! - everything present when the image is installed counts as durable.
//!
//! The bytes are read from the live file *before* the real sync call, which
//! is made under the image's lock, and are committed to the image only if
//! the call succeeded. So the image never holds bytes a sync did not cover
//! (bytes written while the sync ran may or may not have reached the disk,
//! and the image assumes not), and two syncs of one file cannot commit out
//! of order. A snapshot takes the same lock, so it sees every sync either
//! wholly or not at all.
//!
//! Images are keyed by their root directory: a path belongs to the image
//! whose root is a prefix of it, so tests running as threads of one process
//! (`cargo test`) do not see each other's syncs. The registry is
//! process-global, and paths are compared as given (not canonicalised): a
//! store must be opened with the root path the image was installed with.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// Page size of the tear: write-back loses or keeps whole pages, and a page
/// being written when the power goes may land as any prefix of itself.
const TEAR_PAGE_BYTES: usize = 4096;

static INSTALLED: AtomicUsize = AtomicUsize::new(0);
static IMAGES: Mutex<Vec<Arc<DurableImage>>> = Mutex::new(Vec::new());

/// The image `path` belongs to, if any. One relaxed load when none is
/// installed.
pub(super) fn covering(path: &Path) -> Option<Arc<DurableImage>> {
    if INSTALLED.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let images = IMAGES.lock().unwrap_or_else(|e| e.into_inner());
    images.iter().find(|i| path.starts_with(&i.root)).cloned()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FileId {
    dev: u64,
    ino: u64,
    born: Option<SystemTime>,
}

impl FileId {
    fn of(meta: &fs::Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            born: meta.created().ok(),
        }
    }
}

/// One durable directory entry.
#[derive(Clone, Debug)]
struct Entry {
    name: OsString,
    id: FileId,
    is_dir: bool,
}

#[derive(Default)]
struct State {
    /// Durable bytes of every file ever synced (or present at install).
    files: HashMap<FileId, Vec<u8>>,
    /// Durable listing of every directory ever synced (or present at
    /// install); a directory missing here is empty.
    dirs: HashMap<FileId, Vec<Entry>>,
}

/// The durable image of one data directory.
pub struct DurableImage {
    root: PathBuf,
    root_id: FileId,
    state: Mutex<State>,
    syncs: AtomicU64,
    /// A snapshot waits for `state`: syncs hold back until it has it.
    /// `std`'s mutex lets a running thread take it again before a woken
    /// waiter runs, and a store under load syncs back to back (the sync
    /// flusher, the checkpoint's queue files), so without this a snapshot
    /// could wait for minutes on a busy machine while the writers went on
    /// (seen once in a full test run: 6 minutes, 138 MB of log).
    snapshot_waiting: AtomicBool,
}

/// Keeps an image installed; uninstalls it when dropped.
pub struct Installed(Arc<DurableImage>);

impl std::ops::Deref for Installed {
    type Target = DurableImage;
    fn deref(&self) -> &DurableImage {
        &self.0
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let mut images = IMAGES.lock().unwrap_or_else(|e| e.into_inner());
        images.retain(|i| !Arc::ptr_eq(i, &self.0));
        INSTALLED.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Start keeping the durable image of `root`; what is there now counts as
/// durable. Fails if `root` is inside or around an installed image's root.
pub fn install(root: &Path) -> io::Result<Installed> {
    let root_id = FileId::of(&fs::metadata(root)?);
    let mut state = State::default();
    record_tree(root, root_id, &mut state)?;
    let image = Arc::new(DurableImage {
        root: root.to_path_buf(),
        root_id,
        state: Mutex::new(state),
        syncs: AtomicU64::new(0),
        snapshot_waiting: AtomicBool::new(false),
    });
    let mut images = IMAGES.lock().unwrap_or_else(|e| e.into_inner());
    if images
        .iter()
        .any(|i| i.root.starts_with(root) || root.starts_with(&i.root))
    {
        return Err(io::Error::other(format!(
            "a durable image is already installed around {}",
            root.display()
        )));
    }
    images.push(Arc::clone(&image));
    INSTALLED.fetch_add(1, Ordering::Relaxed);
    Ok(Installed(image))
}

fn record_tree(dir: &Path, id: FileId, state: &mut State) -> io::Result<()> {
    let entries = list(dir)?;
    for e in &entries {
        let path = dir.join(&e.name);
        if e.is_dir {
            record_tree(&path, e.id, state)?;
        } else {
            state.files.insert(e.id, fs::read(&path)?);
        }
    }
    state.dirs.insert(id, entries);
    Ok(())
}

/// The live listing of `dir`. An entry unlinked while it is listed is left
/// out: it was never in a listing the caller's fsync could cover.
fn list(dir: &Path) -> io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let meta = match entry.metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        entries.push(Entry {
            name: entry.file_name(),
            id: FileId::of(&meta),
            is_dir: meta.is_dir(),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// What [`DurableImage::snapshot`] may tear: of the image's files whose live
/// bytes differ from their durable ones, file number `file_pick % n` gets a
/// `1 + prefix_pick % page` byte prefix of its first differing page from the
/// live file, as if write-back of that page was cut by the power loss.
///
/// Unless `out_of_order`, only the first file (by name) of each directory
/// with unsynced bytes is a candidate: write-back is taken to follow the
/// order a log writes its files in (a segment's tail before the next
/// segment's start). With `out_of_order`, any file may be torn, as a real
/// kernel's write-back may do. Files under the root's subdirectories named
/// in `spare` are never torn.
#[derive(Clone, Copy, Debug)]
pub struct Tear {
    pub file_pick: u64,
    pub prefix_pick: u64,
    pub out_of_order: bool,
    pub spare: &'static [&'static str],
}

impl DurableImage {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lock, for a sync: after any snapshot waiting for it.
    fn lock_for_sync(&self) -> MutexGuard<'_, State> {
        while self.snapshot_waiting.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        self.lock()
    }

    /// How many syncs the image has recorded (a test can check it saw work).
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    pub(super) fn sync_file(
        &self,
        file: &File,
        path: &Path,
        range: Option<(u64, u64)>,
        sync: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let mut state = self.lock_for_sync();
        let meta = file.metadata()?;
        let len = meta.len();
        let (from, to) = match range {
            None => (0, len),
            Some((offset, n)) => (offset.min(len), offset.saturating_add(n).min(len)),
        };
        let mut bytes = vec![0; usize::try_from(to - from).map_err(io::Error::other)?];
        if file.read_exact_at(&mut bytes, from).is_err() {
            // A handle opened write-only: read the same file by its name.
            File::open(path)?.read_exact_at(&mut bytes, from)?;
        }
        sync()?;
        let durable = state.files.entry(FileId::of(&meta)).or_default();
        durable.resize(len as usize, 0);
        durable[from as usize..to as usize].copy_from_slice(&bytes);
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub(super) fn sync_dir(
        &self,
        dir: &Path,
        sync: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let mut state = self.lock_for_sync();
        let id = FileId::of(&fs::metadata(dir)?);
        let entries = list(dir)?;
        sync()?;
        state.dirs.insert(id, entries);
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Write what a power loss at this instant would leave into `dest` (an
    /// empty or missing directory), optionally tearing one unsynced page.
    /// Returns a description of the tear, if one was made.
    pub fn snapshot(&self, dest: &Path, tear: Option<Tear>) -> io::Result<Option<String>> {
        self.snapshot_waiting.store(true, Ordering::Release);
        let state = self.lock();
        self.snapshot_waiting.store(false, Ordering::Release);
        fs::create_dir_all(dest)?;
        let mut files = Vec::new();
        write_dir(&state, self.root_id, Path::new(""), dest, &mut files)?;
        match tear {
            Some(tear) => self.tear(&state, dest, &files, tear),
            None => Ok(None),
        }
    }

    fn tear(
        &self,
        state: &State,
        dest: &Path,
        files: &[(PathBuf, FileId)],
        tear: Tear,
    ) -> io::Result<Option<String>> {
        // Files still live under the same name whose bytes differ.
        let mut candidates = Vec::new();
        for (rel, id) in files {
            if tear.spare.iter().any(|d| rel.starts_with(d)) {
                continue;
            }
            let live_path = self.root.join(rel);
            let Ok(meta) = fs::symlink_metadata(&live_path) else {
                continue;
            };
            if FileId::of(&meta) != *id {
                continue;
            }
            let live = match fs::read(&live_path) {
                Ok(live) => live,
                // Deleted since its metadata was read (retention, the
                // cleaner's swap): nothing of it is left to tear.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let durable = state.files.get(id).map_or(&[][..], |d| &d[..]);
            let differs_at = (0..live.len().max(durable.len()))
                .step_by(TEAR_PAGE_BYTES)
                .find(|&at| {
                    let end = at + TEAR_PAGE_BYTES;
                    live.get(at..end.min(live.len())) != durable.get(at..end.min(durable.len()))
                });
            if let Some(at) = differs_at {
                let first_of_dir = !candidates
                    .iter()
                    .any(|(r, _, _): &(&PathBuf, Vec<u8>, usize)| r.parent() == rel.parent());
                if at < live.len() && (tear.out_of_order || first_of_dir) {
                    candidates.push((rel, live, at));
                }
            }
        }
        if candidates.is_empty() {
            return Ok(None);
        }
        let (rel, live, at) = &candidates[(tear.file_pick % candidates.len() as u64) as usize];
        let page = (live.len() - at).min(TEAR_PAGE_BYTES);
        let keep = 1 + (tear.prefix_pick % page as u64) as usize;
        let f = fs::OpenOptions::new().write(true).open(dest.join(rel))?;
        f.write_all_at(&live[*at..at + keep], *at as u64)?;
        Ok(Some(format!(
            "tore {}: live bytes [{at}, {}) over the durable ones",
            rel.display(),
            at + keep
        )))
    }
}

fn write_dir(
    state: &State,
    id: FileId,
    rel: &Path,
    dest: &Path,
    files: &mut Vec<(PathBuf, FileId)>,
) -> io::Result<()> {
    for e in state.dirs.get(&id).into_iter().flatten() {
        let rel = rel.join(&e.name);
        if e.is_dir {
            fs::create_dir(dest.join(&rel))?;
            write_dir(state, e.id, &rel, dest, files)?;
        } else {
            let bytes = state.files.get(&e.id).map_or(&[][..], |b| &b[..]);
            fs::write(dest.join(&rel), bytes)?;
            files.push((rel, e.id));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

    use super::super::{sync_all, sync_dir, sync_map_range};
    use super::*;
    use std::os::unix::fs::FileExt;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn names_are_durable_at_dir_fsync_and_bytes_at_file_sync() {
        let root = tempfile::tempdir().unwrap();
        let image = install(root.path()).unwrap();
        let a = root.path().join("a");
        let f = File::create(&a).unwrap();
        f.write_all_at(b"hello", 0).unwrap();
        let snaps = tempfile::tempdir().unwrap();
        let snap = |n: &str| {
            let d = snaps.path().join(n);
            image.snapshot(&d, None).unwrap();
            d
        };
        let s1 = snap("s1");
        assert!(
            names(&s1).is_empty(),
            "a name is not durable before its directory is synced"
        );
        sync_dir(root.path()).unwrap();
        let s2 = snap("s2");
        assert_eq!(
            fs::read(s2.join("a")).unwrap(),
            b"",
            "bytes are not durable before a sync"
        );
        sync_all(&f, &a).unwrap();
        f.write_all_at(b"HELLO!", 0).unwrap();
        let s3 = snap("s3");
        assert_eq!(fs::read(s3.join("a")).unwrap(), b"hello");
        // A rename is durable at the directory's sync and keeps the bytes.
        fs::rename(&a, root.path().join("b")).unwrap();
        assert_eq!(names(&snap("s4")), ["a"]);
        sync_dir(root.path()).unwrap();
        let s5 = snap("s5");
        assert_eq!(names(&s5), ["b"]);
        assert_eq!(fs::read(s5.join("b")).unwrap(), b"hello");
        // msync of a range copies that range only, and the file's size.
        let b = root.path().join("b");
        f.write_all_at(b"..........", 0).unwrap();
        sync_map_range(&f, &b, 2, 3, || Ok(())).unwrap();
        assert_eq!(fs::read(snap("s6").join("b")).unwrap(), b"he...\0\0\0\0\0");
        // A failed sync commits nothing.
        let failed = sync_map_range(&f, &b, 0, 10, || Err(io::Error::other("injected")));
        assert!(failed.is_err());
        assert_eq!(fs::read(snap("s7").join("b")).unwrap(), b"he...\0\0\0\0\0");
        // An unlink is durable at the directory's sync.
        fs::remove_file(&b).unwrap();
        assert_eq!(names(&snap("s8")), ["b"]);
        sync_dir(root.path()).unwrap();
        assert!(names(&snap("s9")).is_empty());
    }

    #[test]
    fn a_tear_copies_a_prefix_of_the_first_unsynced_page() {
        let root = tempfile::tempdir().unwrap();
        let image = install(root.path()).unwrap();
        let p = root.path().join("log");
        let f = File::create(&p).unwrap();
        f.write_all_at(&[1; 5000], 0).unwrap();
        sync_all(&f, &p).unwrap();
        sync_dir(root.path()).unwrap();
        f.write_all_at(&[2; 3000], 5000).unwrap();
        let dest = tempfile::tempdir().unwrap();
        let torn = image
            .snapshot(
                &dest.path().join("s"),
                Some(Tear {
                    file_pick: 7,
                    prefix_pick: 1499,
                    out_of_order: false,
                    spare: &[],
                }),
            )
            .unwrap();
        assert!(torn.is_some());
        let got = fs::read(dest.path().join("s/log")).unwrap();
        // The first differing page is [4096, 8192): 1500 live bytes of it.
        assert_eq!(got.len(), 5596);
        assert!(got[..5000].iter().all(|&b| b == 1));
        assert!(got[5000..].iter().all(|&b| b == 2));
        // A later file of the same directory with unsynced bytes is torn
        // only out of order.
        let q = root.path().join("log2");
        let g = File::create(&q).unwrap();
        sync_dir(root.path()).unwrap();
        g.write_all_at(&[3; 100], 0).unwrap();
        for (out_of_order, want_log2) in [(false, false), (true, true)] {
            let torn_log2 = (0..8).any(|pick| {
                let d = dest.path().join(format!("o{out_of_order}{pick}"));
                let tear = Tear {
                    file_pick: pick,
                    prefix_pick: 0,
                    out_of_order,
                    spare: &[],
                };
                image.snapshot(&d, Some(tear)).unwrap();
                fs::read(d.join("log2")).unwrap() != b""
            });
            assert_eq!(torn_log2, want_log2, "out_of_order {out_of_order}");
        }
    }

    #[test]
    fn images_of_different_roots_do_not_mix() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let ia = install(a.path()).unwrap();
        assert!(install(&a.path().join("inner")).is_err());
        let _ib = install(b.path()).unwrap();
        let p = b.path().join("f");
        let f = File::create(&p).unwrap();
        sync_all(&f, &p).unwrap();
        assert_eq!(ia.syncs(), 0);
    }
}
