//! Each partition's `aborted.txnindex` file and the dispatcher's sink that
//! appends to it.
//!
//! The file sits in the partition's ConsumeQueue directory, so a topic's
//! deletion takes it with the queue. It holds [`AbortedTxn`] entries back
//! to back in marker order. The sink makes an entry from an ABORT marker
//! entry alone (the producer block and the marker block name everything),
//! so the file is derived data like the ConsumeQueue: recovery drops the
//! entries whose marker lies at or past the recovered log end and
//! re-dispatch writes again what is missing. An append is skipped when the
//! file already ends at or past its marker (a replay), so re-dispatch
//! never doubles an entry.
//!
//! Invariant: an entry is durable before the checkpoint names a dispatched
//! position past its marker (`flush` syncs every file written since the
//! last one), so a file never lacks an entry below the recovery start.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::format::{self, AbortedTxn, ENTRY_LEN};
use crate::commit_log::StoredRecord;
use crate::dispatch::DispatchSink;
use crate::durability;
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::types::PhysicalOffset;

/// The file's name in a partition's queue directory. The queue's loader
/// skips names with this suffix.
pub const FILE_NAME: &str = "aborted.txnindex";
pub const FILE_SUFFIX: &str = ".txnindex";
/// A rewrite's temporary file ([`TxnIndexSink::trim`]); one a crash left is
/// ignored, and the next rewrite replaces it.
pub const TMP_SUFFIX: &str = ".txnindex.tmp";

/// Largest file read at open: 2^20 aborted transactions in one partition
/// kept (48 MiB). Past it, the partition's file is refused as damaged
/// rather than read into memory whole.
pub const FILE_LEN_MAX: u64 = (ENTRY_LEN as u64) << 20;

/// Each partition's aborted transactions, in marker order.
pub type AbortedByPartition = HashMap<(Arc<str>, u32), Vec<AbortedTxn>>;

/// The path of `topic`-`partition`'s file under the ConsumeQueue root.
pub fn path(queue_root: &Path, topic: &str, partition: u32) -> PathBuf {
    queue_root
        .join(topic)
        .join(partition.to_string())
        .join(FILE_NAME)
}

/// Read a file: its entries, a torn tail (shorter than an entry: a crash
/// cut it) cut off the file. A whole entry that does not decode is
/// corruption, refused with its position: naming a wrong range as
/// aborted would hide committed records.
pub fn load(path: &Path) -> Result<Vec<AbortedTxn>> {
    let mut f = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    let len = f.metadata().at(path)?.len();
    if len > FILE_LEN_MAX {
        return Err(StoreError::corruption(
            path,
            0,
            CorruptionKind::FileTooLarge {
                len,
                max: FILE_LEN_MAX,
            },
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.read_to_end(&mut bytes).at(path)?;
    let (entries, whole) = format::decode_all(&bytes).map_err(|(at, why)| {
        StoreError::corruption(
            path,
            at as u64,
            CorruptionKind::TxnIndexEntry {
                reason: why.to_string(),
            },
        )
    })?;
    if whole < bytes.len() {
        tracing::warn!(path = %path.display(), torn = bytes.len() - whole, "dropping a torn aborted-transaction index entry");
        f.set_len(whole as u64).at(path)?;
        durability::sync_all(&f, path).at(path)?;
    }
    Ok(entries)
}

/// Keep the entries whose marker lies below `physical_end`; true if any
/// went. The file is rewritten only then.
fn truncate_file(path: &Path, physical_end: u64) -> Result<bool> {
    let entries = load(path)?;
    let keep = entries
        .iter()
        .take_while(|e| e.marker_position < physical_end)
        .count();
    if keep == entries.len() {
        return Ok(false);
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .at(path)?;
    f.set_len((keep * ENTRY_LEN) as u64).at(path)?;
    durability::sync_all(&f, path).at(path)?;
    tracing::info!(path = %path.display(), dropped = entries.len() - keep, "dropped aborted-transaction index entries past the recovered log end");
    Ok(true)
}

/// The dispatcher's sink: appends an entry per ABORT marker that ended a
/// transaction in its partition.
pub struct TxnIndexSink {
    queue_root: PathBuf,
    /// Held by an append and by a rewrite ([`TxnIndexSink::trim`]), so an
    /// entry the dispatcher appends is never lost to a rename.
    write: Mutex<()>,
    /// Files written since the last flush, and whether each was created
    /// (its directory then needs a sync too, for its name to last).
    dirty: Mutex<HashMap<PathBuf, bool>>,
}

impl TxnIndexSink {
    pub fn new(queue_root: PathBuf) -> TxnIndexSink {
        TxnIndexSink {
            queue_root,
            write: Mutex::new(()),
            dirty: Mutex::new(HashMap::new()),
        }
    }

    /// The ConsumeQueue root the files live under.
    pub fn queue_root(&self) -> &Path {
        &self.queue_root
    }

    /// Every partition's file under the root: `(topic, partition, path)`.
    fn files(&self) -> Result<Vec<(Arc<str>, u32, PathBuf)>> {
        let mut out = Vec::new();
        let root = &self.queue_root;
        let topics = match std::fs::read_dir(root) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(StoreError::io(root, e)),
        };
        for topic in topics {
            let topic = topic.at(root)?;
            let Some(name) = topic.file_name().to_str().map(Arc::<str>::from) else {
                continue;
            };
            if !topic.file_type().at(&topic.path())?.is_dir() {
                continue;
            }
            for part in std::fs::read_dir(topic.path()).at(&topic.path())? {
                let part = part.at(&topic.path())?;
                let Some(partition) = part.file_name().to_str().and_then(|p| p.parse().ok()) else {
                    continue;
                };
                let file = part.path().join(FILE_NAME);
                if file.exists() {
                    out.push((Arc::clone(&name), partition, file));
                }
            }
        }
        Ok(out)
    }

    /// Every partition's aborted transactions on disk (after recovery's
    /// re-dispatch: complete to the log's end).
    pub fn load_all(&self) -> Result<AbortedByPartition> {
        let mut out = HashMap::new();
        for (topic, partition, path) in self.files()? {
            let entries = load(&path)?;
            if !entries.is_empty() {
                out.insert((topic, partition), entries);
            }
        }
        Ok(out)
    }

    /// Drops `topic`-`partition`'s entries whose marker lies below queue
    /// offset `below`: their transactions' records went with the log's
    /// segments (retention), so no read can reach them. The file is
    /// replaced whole (a temporary file synced, renamed over it, the
    /// directory synced), or removed when nothing is left. Returns how
    /// many entries went.
    pub fn trim(&self, topic: &str, partition: u32, below: u64) -> Result<usize> {
        let _write = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let path = path(&self.queue_root, topic, partition);
        let entries = load(&path)?;
        // Markers, and so entries, come in offset order.
        let gone = entries.partition_point(|e| e.last_offset < below);
        if gone == 0 {
            return Ok(0);
        }
        let rest = &entries[gone..];
        if rest.is_empty() {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
                Err(e) => return Err(StoreError::io(&path, e)),
            }
            if let Some(dir) = path.parent() {
                crate::fs_util::fsync_dir(dir)?;
            }
        } else {
            let bytes: Vec<u8> = rest.iter().flat_map(format::encode).collect();
            crate::fs_util::write_atomic(&path, &bytes)?;
        }
        Ok(gone)
    }

    fn append(&self, r: &StoredRecord, entry: &AbortedTxn) -> Result<()> {
        let _write = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let path = path(&self.queue_root, r.topic(), r.partition());
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .at(&path)?;
        let len = f.metadata().at(&path)?.len();
        let created = len == 0;
        let whole = len - len % ENTRY_LEN as u64;
        if whole >= ENTRY_LEN as u64 {
            let mut last = [0u8; ENTRY_LEN];
            f.seek(SeekFrom::Start(whole - ENTRY_LEN as u64))
                .at(&path)?;
            f.read_exact(&mut last).at(&path)?;
            if let Ok(last) = format::decode(&last) {
                if last.last_offset >= entry.last_offset {
                    return Ok(()); // a replay: the file has it
                }
            }
        }
        // A torn tail (a crash mid-append) is overwritten.
        f.seek(SeekFrom::Start(whole)).at(&path)?;
        f.write_all(&format::encode(entry)).at(&path)?;
        f.set_len(whole + ENTRY_LEN as u64).at(&path)?;
        *self
            .dirty
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(path)
            .or_default() |= created;
        Ok(())
    }
}

/// The aborted transaction `r` ends, if it is an abort marker: the entry
/// its partition's index file gets when the marker is dispatched.
pub(crate) fn aborted_by(r: &StoredRecord) -> Option<AbortedTxn> {
    let m = r.marker()?;
    let (Some(first), false, Some(p)) = (m.txn_first_offset, m.commit, r.producer()) else {
        return None;
    };
    Some(AbortedTxn {
        producer_id: p.producer_id,
        first_offset: first,
        last_offset: r.queue_offset().get(),
        last_stable_offset: m.last_stable_offset,
        marker_position: r.physical_offset().get(),
    })
}

impl DispatchSink for TxnIndexSink {
    fn name(&self) -> &str {
        "txn-index"
    }

    fn dispatch(&self, r: &StoredRecord) -> Result<()> {
        match aborted_by(r) {
            Some(entry) => self.append(r, &entry),
            None => Ok(()),
        }
    }

    fn dispatch_entry(&self, records: &[StoredRecord]) -> Result<()> {
        // A marker is an entry of its own: one look at the first record's
        // entry flags answers for every other entry.
        match records.first() {
            Some(r) if r.is_control() => self.dispatch(r),
            _ => Ok(()),
        }
    }

    fn flush(&self) -> Result<()> {
        let dirty: Vec<(PathBuf, bool)> = self
            .dirty
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for (k, (path, created)) in dirty.iter().enumerate() {
            let synced = std::fs::File::open(path)
                .and_then(|f| durability::sync_all(&f, path))
                .and_then(|()| match path.parent() {
                    Some(dir) if *created => durability::sync_dir(dir),
                    _ => Ok(()),
                });
            match synced {
                Ok(()) => {}
                // Its topic was deleted since: nothing to keep.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    // Owed again at the next flush, with the rest.
                    self.dirty
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(dirty[k..].iter().cloned());
                    return Err(StoreError::io(path, e));
                }
            }
        }
        Ok(())
    }

    fn truncate(&self, physical_end: PhysicalOffset) -> Result<PhysicalOffset> {
        for (_, _, path) in self.files()? {
            truncate_file(&path, physical_end.get())?;
        }
        Ok(physical_end)
    }
}
