//! The durability seam: every operation that makes bytes or names durable.
//!
//! Every fsync, fdatasync and msync the storage and cleaner crates do, and
//! every directory fsync (which is what makes a create, rename or unlink
//! durable), goes through this module. In production each function is the
//! system call and nothing else.
//!
//! With the `durable-image` feature (tests only: the crates whose tests need
//! it enable it from their dev-dependencies), a test can install a
//! `image::DurableImage` on a data directory. It keeps a shadow copy of
//! what a power loss would leave of that directory: file bytes as of the
//! ranges last synced, names as of the last fsync of their directory. A
//! test snapshots it at a random moment and opens a store on the snapshot
//! alone. With no image installed a call costs one relaxed atomic load.
//!
//! Invariant: nothing in this crate or the cleaner makes data durable
//! except through these functions. An operation that bypasses them is
//! invisible to the image, so the power-loss test would lose its bytes and
//! fail: the seam cannot silently over-state durability.

use std::fs::File;
use std::io;
use std::path::Path;

#[cfg(feature = "durable-image")]
pub mod image;

/// fsync `file` (data and metadata).
pub fn sync_all(file: &File, path: &Path) -> io::Result<()> {
    sync_whole_file(file, path, || file.sync_all())
}

/// fdatasync `file`. The image treats it as [`sync_all`]: fdatasync also
/// makes the file's size durable, which is all a reader needs.
pub fn sync_data(file: &File, path: &Path) -> io::Result<()> {
    sync_whole_file(file, path, || file.sync_data())
}

fn sync_whole_file(
    file: &File,
    path: &Path,
    sync: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    #[cfg(feature = "durable-image")]
    if let Some(image) = image::covering(path) {
        return image.sync_file(file, path, None, sync);
    }
    let _ = (file, path);
    sync()
}

/// msync `[offset, offset + len)` of a mapping of `file`; `msync` is the
/// call itself (the map types differ between callers).
pub fn sync_map_range(
    file: &File,
    path: &Path,
    offset: usize,
    len: usize,
    msync: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    #[cfg(feature = "durable-image")]
    if let Some(image) = image::covering(path) {
        return image.sync_file(file, path, Some((offset as u64, len as u64)), msync);
    }
    let _ = (file, path, offset, len);
    msync()
}

/// fsync the directory `dir`, making the creations, renames and unlinks
/// inside it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(feature = "durable-image")]
    if let Some(image) = image::covering(dir) {
        return image.sync_dir(dir, || File::open(dir).and_then(|d| d.sync_all()));
    }
    File::open(dir).and_then(|d| d.sync_all())
}
