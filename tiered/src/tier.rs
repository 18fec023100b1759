//! `RemoteTier`: one per server, cheap to clone. This file holds the shared
//! state and the two primitives every operation is built on:
//!
//! - **Versioned JSON objects** (manifests, topic metas): the newest is the
//!   highest version a LIST finds; a new one is written at version + 1 with
//!   `PutMode::Create`, so two writers can never both "win" a version. A
//!   create answered `AlreadyExists` is resolved by reading what is there:
//!   the same bytes mean our own earlier attempt landed (a retried put
//!   whose answer was lost), other bytes a lost race, and the operation is
//!   applied again on top of the newest version. Old versions beyond the
//!   last [`KEEP_VERSIONS`] are deleted only after the new one is durable.
//! - **Retried calls**: every object-store call goes through
//!   [`crate::retry`]; what is left after the policy is `Unavailable`.
//!
//! Within one process, operations that write a partition's manifest take
//! that partition's async lock, so they never race each other (the
//! create-if-absent protocol still keeps two processes safe).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::cache::Lru;
use crate::config::{parse_location, Location, TieredConfig};
use crate::error::{Result, TieredError};
use crate::layout;
use crate::manifest::Manifest;
use crate::retry::{retry, RetryPolicy};
use crate::stats::{bump, Counters, TieredStats};

/// Manifest and topic versions kept behind the newest (so an operator can
/// see the last few states); older ones are deleted.
pub const KEEP_VERSIONS: u64 = 3;
/// Times a manifest write is re-applied after losing a race.
pub const COMMIT_ATTEMPTS: u32 = 8;

/// The tiered storage of one server.
#[derive(Clone, Debug)]
pub struct RemoteTier {
    pub(crate) inner: Arc<Inner>,
}

type PartitionKey = (String, u32);

#[derive(Debug)]
pub(crate) struct Inner {
    pub store: Arc<dyn ObjectStore>,
    /// The url's prefix: everything lives under it.
    pub root: Path,
    pub cfg: TieredConfig,
    /// Retry policies of the write side and of the read side.
    pub policy: RetryPolicy,
    pub read_policy: RetryPolicy,
    pub counters: Counters,
    /// The read-ahead cache (lock held for lookups and inserts only).
    pub cache: Mutex<Lru>,
    /// The newest manifest this process knows of each partition (written
    /// or read by it), so a read does not LIST first.
    pub manifests: Mutex<HashMap<PartitionKey, Arc<Manifest>>>,
    /// One async lock per partition for the operations writing its manifest.
    locks: Mutex<HashMap<PartitionKey, Arc<tokio::sync::Mutex<()>>>>,
    format_checked: AtomicBool,
}

/// Which side an object-store call serves: its retry policy and the
/// counter of its retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// Uploads, manifests, topic metas, snapshots, retention, deletion.
    Write,
    /// Fetches, restore's reads, `manifest`.
    Read,
}

/// What a create-if-absent put found.
pub(crate) enum Created {
    Written,
    /// Something is there already: its bytes.
    Exists(Bytes),
}

#[derive(Serialize, Deserialize)]
struct FormatMarker {
    format: u32,
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn unavailable(op: &'static str) -> impl FnOnce(object_store::Error) -> TieredError {
    move |source| TieredError::Unavailable { op, source }
}

/// Locks that are only held for map lookups stay usable after a panic
/// elsewhere: the maps are caches, never half-updated.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RemoteTier {
    /// From the config; credentials from the environment
    /// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN;
    /// anonymous when unset and an endpoint is given, for SeaweedFS). Does
    /// no I/O.
    pub fn open(cfg: &TieredConfig) -> Result<RemoteTier> {
        cfg.validate()?;
        let url = cfg
            .url
            .as_deref()
            .ok_or_else(|| TieredError::config("tiered.url is not set"))?;
        let (store, root) = match parse_location(url)? {
            Location::File { path } => {
                // fsync files and directories: the manifest protocol
                // needs a put that returned to be durable.
                let store = object_store::local::LocalFileSystem::new().with_fsync(true);
                let root = Path::parse(path.trim_matches('/'))
                    .map_err(|e| TieredError::config(format!("url {url:?}: {e}")))?;
                (Arc::new(store) as Arc<dyn ObjectStore>, root)
            }
            Location::S3 { bucket, prefix } => (s3_store(cfg, &bucket)?, {
                Path::parse(&prefix)
                    .map_err(|e| TieredError::config(format!("url {url:?}: {e}")))?
            }),
        };
        Ok(RemoteTier::with_store(store, root, cfg))
    }

    /// Tests and the bench: any object_store backend under a prefix. The
    /// config's sizes are used as given (not validated).
    pub fn with_store(store: Arc<dyn ObjectStore>, prefix: Path, cfg: &TieredConfig) -> RemoteTier {
        RemoteTier::build(
            store,
            prefix,
            cfg.clone(),
            RetryPolicy::default(),
            RetryPolicy::for_reads(),
        )
    }

    /// The same tier with another retry policy for both sides (tests use
    /// short backoffs). Counters, caches and locks start afresh.
    pub fn with_retry_policy(self, policy: RetryPolicy) -> RemoteTier {
        self.with_retry_policies(policy.clone(), policy)
    }

    /// The same tier with a retry policy for writes and one for reads.
    pub fn with_retry_policies(self, write: RetryPolicy, read: RetryPolicy) -> RemoteTier {
        let i = &self.inner;
        RemoteTier::build(i.store.clone(), i.root.clone(), i.cfg.clone(), write, read)
    }

    fn build(
        store: Arc<dyn ObjectStore>,
        root: Path,
        cfg: TieredConfig,
        policy: RetryPolicy,
        read_policy: RetryPolicy,
    ) -> Self {
        RemoteTier {
            inner: Arc::new(Inner {
                store,
                root,
                cache: Mutex::new(Lru::new(cfg.read_cache_bytes)),
                cfg,
                policy,
                read_policy,
                counters: Counters::default(),
                manifests: Mutex::new(HashMap::new()),
                locks: Mutex::new(HashMap::new()),
                format_checked: AtomicBool::new(false),
            }),
        }
    }

    /// For the bench's plain put/get of the same bytes.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.inner.store
    }

    /// The prefix everything lives under.
    pub fn prefix(&self) -> &Path {
        &self.inner.root
    }

    pub fn config(&self) -> &TieredConfig {
        &self.inner.cfg
    }

    pub fn stats(&self) -> TieredStats {
        let cache_bytes = lock(&self.inner.cache).bytes();
        self.inner.counters.snapshot(cache_bytes)
    }

    /// The newest manifest of a partition this process has read or
    /// written, without I/O (None before the first `manifest`, `upload`,
    /// `read` or retention pass of it since start). For hot paths (a
    /// partition's beginning offset on every offsets request, upload lag);
    /// `manifest` is the authoritative, LISTing answer.
    pub fn known_manifest(&self, topic: &str, partition: u32) -> Option<Arc<Manifest>> {
        self.inner.cached_manifest(topic, partition)
    }

    /// The newest manifest of a partition (a LIST and a GET), or `None`
    /// before its first upload or snapshot.
    pub async fn manifest(&self, topic: &str, partition: u32) -> Result<Option<Manifest>> {
        layout::check_topic(topic)?;
        let (m, _) = self
            .inner
            .load_manifest(topic, partition, Side::Read)
            .await?;
        Ok(m)
    }
}

#[cfg(feature = "s3")]
fn s3_store(cfg: &TieredConfig, bucket: &str) -> Result<Arc<dyn ObjectStore>> {
    use object_store::aws::AmazonS3Builder;
    use object_store::{BackoffConfig, ClientOptions, RetryConfig};
    use std::time::Duration;

    // object_store's own retries stay short: ours (crate::retry) sit on
    // top, counted in the stats.
    let retry = RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: 2,
        retry_timeout: Duration::from_secs(10),
    };
    // allow_http is one of the client options: set on the builder before
    // `with_client_options`, it would be replaced by these (reqwest then
    // refuses every http:// endpoint with BadScheme).
    let client = ClientOptions::new()
        .with_timeout(Duration::from_secs(60))
        .with_connect_timeout(Duration::from_secs(5))
        .with_allow_http(cfg.allow_http);
    let mut b = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_region(&cfg.region)
        .with_retry(retry)
        .with_client_options(client);
    if let Some(endpoint) = &cfg.endpoint {
        b = b
            .with_endpoint(endpoint)
            .with_virtual_hosted_style_request(false);
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            b = b.with_skip_signature(true);
        }
    }
    let store = b
        .build()
        .map_err(|e| TieredError::config(format!("s3 bucket {bucket:?}: {e}")))?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "s3"))]
fn s3_store(_cfg: &TieredConfig, bucket: &str) -> Result<Arc<dyn ObjectStore>> {
    Err(TieredError::config(format!(
        "s3://{bucket}: this build has no S3 backend (tidelog-tiered's `s3` feature)"
    )))
}

impl Inner {
    pub fn policy(&self, side: Side) -> &RetryPolicy {
        match side {
            Side::Write => &self.policy,
            Side::Read => &self.read_policy,
        }
    }

    pub fn retries(&self, side: Side) -> &AtomicU64 {
        match side {
            Side::Write => &self.counters.upload_retries,
            Side::Read => &self.counters.read_retries,
        }
    }

    /// The lock of one partition's manifest writers.
    pub fn partition_lock(&self, topic: &str, partition: u32) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.locks)
            .entry((topic.to_string(), partition))
            .or_default()
            .clone()
    }

    pub fn cached_manifest(&self, topic: &str, partition: u32) -> Option<Arc<Manifest>> {
        lock(&self.manifests)
            .get(&(topic.to_string(), partition))
            .cloned()
    }

    pub fn remember_manifest(&self, m: &Manifest) {
        let mut all = lock(&self.manifests);
        let key = (m.topic.clone(), m.partition);
        // Never go back to an older version (a slow read racing a write).
        if all.get(&key).is_none_or(|old| old.version <= m.version) {
            all.insert(key, Arc::new(m.clone()));
        }
    }

    pub fn forget_topic(&self, topic: &str) {
        lock(&self.manifests).retain(|(t, _), _| t != topic);
        let prefix = format!("{}/", layout::topic_dir(&self.root, topic));
        lock(&self.cache).remove_prefix(&prefix);
    }

    /// Every path under `dir` (recursive).
    pub async fn list(&self, dir: &Path, side: Side) -> Result<Vec<Path>> {
        let found: Vec<object_store::ObjectMeta> =
            retry(self.policy(side), "list", self.retries(side), || {
                self.store.list(Some(dir)).try_collect::<Vec<_>>()
            })
            .await
            .map_err(unavailable("list"))?;
        Ok(found.into_iter().map(|m| m.location).collect())
    }

    /// The versions in a versioned directory, ascending.
    pub async fn versions(&self, dir: &Path, side: Side) -> Result<Vec<u64>> {
        let mut v: Vec<u64> = self
            .list(dir, side)
            .await?
            .iter()
            .filter(|p| p.parts().count() == dir.parts().count() + 1)
            .filter_map(|p| p.filename().and_then(layout::parse_version))
            .collect();
        v.sort_unstable();
        Ok(v)
    }

    /// A whole object's bytes, `None` when it does not exist.
    pub async fn get(&self, path: &Path, op: &'static str, side: Side) -> Result<Option<Bytes>> {
        let got = retry(self.policy(side), op, self.retries(side), || async {
            self.store.get(path).await?.bytes().await
        })
        .await;
        match got {
            Ok(b) => {
                // remote_read_bytes is what reads cost, not the write
                // side's checks (the format marker, a taken version).
                if side == Side::Read {
                    bump(&self.counters.remote_read_bytes, b.len() as u64);
                }
                Ok(Some(b))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(unavailable(op)(e)),
        }
    }

    /// A JSON object, `None` when it does not exist; bytes that do not
    /// parse are `Corrupt`.
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        path: &Path,
        side: Side,
    ) -> Result<Option<(T, Bytes)>> {
        let Some(bytes) = self.get(path, "get", side).await? else {
            return Ok(None);
        };
        let v = serde_json::from_slice(&bytes)
            .map_err(|e| TieredError::corrupt(path.to_string(), e.to_string()))?;
        Ok(Some((v, bytes)))
    }

    /// A create-if-absent put (retried: a retry that finds its own earlier
    /// attempt's bytes sees `Exists` with those bytes).
    pub async fn create(&self, path: &Path, bytes: Bytes, side: Side) -> Result<Created> {
        let put = retry(self.policy(side), "create", self.retries(side), || {
            let opts = PutOptions::from(PutMode::Create);
            self.store
                .put_opts(path, PutPayload::from(bytes.clone()), opts)
        })
        .await;
        match put {
            Ok(_) => Ok(Created::Written),
            Err(object_store::Error::AlreadyExists { .. }) => {
                let there = self.get(path, "get", side).await?;
                Ok(Created::Exists(there.unwrap_or_default()))
            }
            Err(e) => Err(unavailable("create")(e)),
        }
    }

    /// Deletes a path; one that is gone already is fine.
    pub async fn delete(&self, path: &Path, side: Side) -> Result<()> {
        match retry(self.policy(side), "delete", self.retries(side), || {
            self.store.delete(path)
        })
        .await
        {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(unavailable("delete")(e)),
        }
    }

    /// Deletes the versions of `dir` more than KEEP_VERSIONS behind
    /// `newest`, after `newest` is durable. Failures only leave extra old
    /// versions behind, so they are logged, not returned.
    pub async fn prune(&self, dir: &Path, versions: &[u64], newest: u64) {
        let side = Side::Write;
        for &v in versions.iter().filter(|&&v| v + KEEP_VERSIONS <= newest) {
            let path = dir.clone().join(layout::version_name(v, ".json"));
            if let Err(e) = self.delete(&path, side).await {
                tracing::warn!(path = %path, error = %e, "could not delete an old version");
            }
        }
    }

    /// Checks the bucket's `tidelog.json` (writing it on first use).
    pub async fn ensure_format(&self, side: Side) -> Result<()> {
        if self.format_checked.load(Ordering::Acquire) {
            return Ok(());
        }
        let path = layout::format_marker(&self.root);
        let mut found = self.get_json::<FormatMarker>(&path, side).await?;
        if found.is_none() {
            let marker = serde_json::to_vec(&FormatMarker {
                format: layout::FORMAT,
            })
            .map_err(|e| TieredError::corrupt("tidelog.json", e.to_string()))?;
            if let Created::Exists(bytes) = self.create(&path, marker.into(), side).await? {
                let m = serde_json::from_slice(&bytes)
                    .map_err(|e| TieredError::corrupt(path.to_string(), e.to_string()))?;
                found = Some((m, bytes));
            }
        }
        if let Some((FormatMarker { format }, _)) = found {
            if format != layout::FORMAT {
                return Err(TieredError::config(format!(
                    "{path} says format {format}; this build reads format {}",
                    layout::FORMAT
                )));
            }
        }
        self.format_checked.store(true, Ordering::Release);
        Ok(())
    }

    /// The newest manifest of a partition, checked, and the versions the
    /// LIST found (for pruning).
    pub async fn load_manifest(
        &self,
        topic: &str,
        partition: u32,
        side: Side,
    ) -> Result<(Option<Manifest>, Vec<u64>)> {
        let dir = layout::manifest_dir(&self.root, topic, partition);
        // The newest can vanish between the LIST and the GET only when the
        // topic is being deleted; LIST again a few times, then give up.
        for _ in 0..3 {
            let versions = self.versions(&dir, side).await?;
            let Some(&newest) = versions.last() else {
                return Ok((None, versions));
            };
            let path = dir.clone().join(layout::version_name(newest, ".json"));
            let Some((m, _)) = self.get_json::<Manifest>(&path, side).await? else {
                continue;
            };
            let m: Manifest = m;
            if m.version != newest || m.topic != topic || m.partition != partition {
                return Err(TieredError::corrupt(
                    path.to_string(),
                    format!("holds {}-{} version {}", m.topic, m.partition, m.version),
                ));
            }
            m.check()?;
            self.remember_manifest(&m);
            return Ok((Some(m), versions));
        }
        Err(TieredError::Unavailable {
            op: "get manifest",
            source: object_store::Error::NotFound {
                path: dir.to_string(),
                source: "the newest manifest vanished three times between LIST and GET".into(),
            },
        })
    }

    /// Writes the next manifest: `apply` turns the newest manifest (None
    /// before the first) into the next one, or None for "nothing to do".
    /// A lost race re-reads the newest and applies again. Returns the
    /// manifest now newest (the current one when nothing was to do).
    pub async fn commit<F>(
        &self,
        topic: &str,
        partition: u32,
        mut current: Option<Manifest>,
        mut versions: Vec<u64>,
        mut apply: F,
    ) -> Result<Option<Manifest>>
    where
        F: FnMut(Option<&Manifest>) -> Result<Option<Manifest>>,
    {
        let side = Side::Write;
        let dir = layout::manifest_dir(&self.root, topic, partition);
        for _ in 0..COMMIT_ATTEMPTS {
            let Some(mut next) = apply(current.as_ref())? else {
                return Ok(current);
            };
            next.version = current.as_ref().map_or(0, |m| m.version) + 1;
            next.check()?;
            let bytes = Bytes::from(
                serde_json::to_vec_pretty(&next)
                    .map_err(|e| TieredError::corrupt("manifest", e.to_string()))?,
            );
            let path = dir
                .clone()
                .join(layout::version_name(next.version, ".json"));
            match self.create(&path, bytes.clone(), side).await? {
                Created::Exists(there) if there != bytes => {
                    tracing::info!(
                        topic,
                        partition,
                        version = next.version,
                        "manifest version taken; re-reading"
                    );
                    (current, versions) = self.load_manifest(topic, partition, side).await?;
                    continue;
                }
                Created::Written | Created::Exists(_) => {}
            }
            bump(&self.counters.manifests_written, 1);
            self.remember_manifest(&next);
            tracing::debug!(
                topic,
                partition,
                version = next.version,
                beginning = next.beginning,
                end = next.end,
                objects = next.objects.len(),
                "manifest written"
            );
            self.prune(&dir, &versions, next.version).await;
            return Ok(Some(next));
        }
        Err(TieredError::Contended {
            what: format!("manifest of {topic}-{partition}"),
            version: current.map_or(0, |m| m.version) + 1,
            attempts: COMMIT_ATTEMPTS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_refuses_what_validate_refuses_and_does_no_io() {
        let off = TieredConfig::default();
        assert!(matches!(
            RemoteTier::open(&off),
            Err(TieredError::Config { .. })
        ));
        // A directory that does not exist yet: opening touches nothing.
        let cfg = TieredConfig {
            url: Some("file:///nonexistent-tidelog-dir/p".into()),
            ..TieredConfig::default()
        };
        let tier = RemoteTier::open(&cfg).unwrap();
        assert_eq!(tier.prefix().as_ref(), "nonexistent-tidelog-dir/p");
        assert!(!std::path::Path::new("/nonexistent-tidelog-dir").exists());
    }

    #[cfg(feature = "s3")]
    #[test]
    fn open_an_s3_bucket_behind_an_endpoint() {
        let cfg = TieredConfig {
            url: Some("s3://bucket/some/prefix/".into()),
            endpoint: Some("http://127.0.0.1:9".into()),
            allow_http: true,
            ..TieredConfig::default()
        };
        let tier = RemoteTier::open(&cfg).unwrap();
        assert_eq!(tier.prefix().as_ref(), "some/prefix");
        assert!(
            tier.store().to_string().contains("bucket"),
            "{}",
            tier.store()
        );
    }
}
