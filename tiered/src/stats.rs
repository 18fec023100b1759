//! Counters of the remote tier, read by the broker's metrics and stats.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of the counters (all since the process started, except
/// `cache_bytes`, which is what the read cache holds now).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TieredStats {
    /// Record-object bytes and objects put (a retried put counts once).
    pub uploaded_bytes: u64,
    pub uploaded_objects: u64,
    /// `upload` calls that returned an error.
    pub upload_failures: u64,
    /// Retried object-store calls of the write side (uploads, manifests,
    /// topic metas, snapshots, retention and deletion).
    pub upload_retries: u64,
    /// Manifest versions written.
    pub manifests_written: u64,
    /// `read` calls that went to the remote tier, and the bytes they GET
    /// (footers, indexes and record blocks; cache hits are not counted).
    pub remote_reads: u64,
    pub remote_read_bytes: u64,
    /// `read` calls that returned an error, and retried GETs of the read side.
    pub read_failures: u64,
    pub read_retries: u64,
    /// Read-cache lookups (footer and index, record blocks) answered from
    /// the cache or not, and the bytes it holds now.
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub cache_bytes: u64,
    pub cache_evictions: u64,
    /// Objects deleted by retention, topic deletion and garbage sweeps.
    pub objects_deleted: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub uploaded_bytes: AtomicU64,
    pub uploaded_objects: AtomicU64,
    pub upload_failures: AtomicU64,
    pub upload_retries: AtomicU64,
    pub manifests_written: AtomicU64,
    pub remote_reads: AtomicU64,
    pub remote_read_bytes: AtomicU64,
    pub read_failures: AtomicU64,
    pub read_retries: AtomicU64,
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    pub cache_evictions: AtomicU64,
    pub objects_deleted: AtomicU64,
}

pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl Counters {
    pub fn snapshot(&self, cache_bytes: u64) -> TieredStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TieredStats {
            uploaded_bytes: get(&self.uploaded_bytes),
            uploaded_objects: get(&self.uploaded_objects),
            upload_failures: get(&self.upload_failures),
            upload_retries: get(&self.upload_retries),
            manifests_written: get(&self.manifests_written),
            remote_reads: get(&self.remote_reads),
            remote_read_bytes: get(&self.remote_read_bytes),
            read_failures: get(&self.read_failures),
            read_retries: get(&self.read_retries),
            cache_hits: get(&self.cache_hits),
            cache_misses: get(&self.cache_misses),
            cache_bytes,
            cache_evictions: get(&self.cache_evictions),
            objects_deleted: get(&self.objects_deleted),
        }
    }
}
