//! IndexFile: lookup of records by key, RocketMQ style.
//!
//! A hash of (topic, key) picks a slot; the slot holds the newest entry for
//! that hash, and each entry points to the previous one. Queries walk a
//! chain newest first and confirm every candidate by reading the record and
//! comparing topic and key exactly, because hashes collide.
//!
//! Concurrency: the dispatcher is the only writer. An entry's bytes are
//! written before the slot that publishes it is stored (atomic, `Release`);
//! readers load slots and the entry count with `Acquire` and never read an
//! entry that is not reachable from them. Header fields that change are
//! accessed atomically.
//!
//! Files, one role each: `file.rs` (one mapped IndexFile: opening it,
//! its header fields, slots and entries), `writer.rs` (the dispatcher's
//! side: creating files, adding entries, flushing, recovery's truncation,
//! retention's deletion), `reader.rs` (queries by key and the positions
//! the checkpoint records), `format.rs` (the layout), `end.rs` (the
//! `index-end` file). This file holds [`IndexService`], its loading and
//! its file list.

pub mod end;
mod file;
pub mod format;
mod reader;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use self::file::IndexFile;
use crate::error::{IoContext, Result, StoreError};
use crate::fs_util;

/// Suffix of an index file still being created; `load` removes these.
const TMP_SUFFIX: &str = ".creating";

/// All IndexFiles, oldest first; the last one takes new entries.
///
/// Durability is the checkpoint's business, not the dispatcher's: a file
/// that fills is sealed and left as it is, and the new one is made with
/// only its own header synced (so a name that reaches the disk always
/// opens). [`IndexService::flush`], which the checkpoint calls before it
/// records a dispatched position, syncs every file holding entries no
/// flush covered and the directory holding names no flush covered. A
/// power loss before that flush loses only entries past the checkpoint,
/// which recovery truncates and replays.
pub struct IndexService {
    dir: PathBuf,
    slot_count: u32,
    entry_capacity: u32,
    files: RwLock<Vec<Arc<IndexFile>>>,
    /// A file was made since the last directory sync. Set after its
    /// rename and before it takes entries, so a flush that follows any of
    /// its entries sees it.
    dir_sync_pending: AtomicBool,
}

impl IndexService {
    pub fn load(dir: &Path, slot_count: u32, entry_capacity: u32) -> Result<IndexService> {
        if slot_count == 0 || slot_count > format::SLOT_COUNT_MAX {
            return Err(StoreError::invalid(format!(
                "index_slots must be in [1, {}]",
                format::SLOT_COUNT_MAX
            )));
        }
        if !(2..=format::ENTRY_CAPACITY_MAX).contains(&entry_capacity) {
            return Err(StoreError::invalid(format!(
                "index_entries must be in [2, {}]",
                format::ENTRY_CAPACITY_MAX
            )));
        }
        fs_util::create_dir_durable(dir)?;
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).at(dir)? {
            let entry = entry.at(dir)?;
            let name = entry.file_name();
            let name = name.to_str().unwrap_or_default();
            if fs_util::parse_offset_file_name(name, TMP_SUFFIX).is_some() {
                tracing::info!(path = %entry.path().display(), "removing a half-created index file");
                std::fs::remove_file(entry.path()).at(&entry.path())?;
                continue;
            }
            match fs_util::parse_offset_file_name(name, "") {
                Some(n) => names.push(n),
                None => {
                    tracing::warn!(path = %entry.path().display(), "ignoring a stray file in index/")
                }
            }
        }
        names.sort_unstable();
        let mut files = Vec::with_capacity(names.len());
        for n in names {
            files.push(Arc::new(IndexFile::open(
                dir.join(fs_util::offset_file_name(n)),
            )?));
        }
        Ok(IndexService {
            dir: dir.to_path_buf(),
            slot_count,
            entry_capacity,
            files: RwLock::new(files),
            dir_sync_pending: AtomicBool::new(false),
        })
    }

    pub fn file_count(&self) -> usize {
        self.files.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn files(&self) -> Vec<Arc<IndexFile>> {
        self.files.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The newest file, for messages.
    pub(crate) fn newest_path(&self) -> Option<PathBuf> {
        self.files().last().map(|f| f.path().to_path_buf())
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests;
