//! RemoteTier end to end on object_store's local file system (a tempdir)
//! and in-memory backends: uploads, reads, topics, retention, snapshots,
//! corruption, the cache bound, and a crash at every write step.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tidelog_tiered::faulty::{Fault, FaultyStore};
use tidelog_tiered::{
    layout, Manifest, RemoteRecord, RemoteTier, RemoteTopic, RetryPolicy, TieredConfig, TieredError,
};

fn cfg(object_bytes: u64, read_cache_bytes: u64) -> TieredConfig {
    TieredConfig {
        url: None,
        object_bytes,
        read_cache_bytes,
        ..TieredConfig::default()
    }
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        first_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(2),
        deadline: Duration::from_secs(30),
        attempt_timeout: Duration::from_secs(30),
    }
}

fn tier_on(store: Arc<dyn ObjectStore>, c: &TieredConfig) -> RemoteTier {
    RemoteTier::with_store(store, Path::from("pre/fix"), c).with_retry_policy(fast_retries())
}

fn memory() -> Arc<dyn ObjectStore> {
    Arc::new(InMemory::new())
}

/// A record whose shape depends on the offset: null keys and values,
/// empty values, headers with null values, some large values.
fn shaped(offset: u64) -> RemoteRecord {
    let key = match offset % 4 {
        0 => None,
        1 => Some(Bytes::new()),
        _ => Some(Bytes::from(format!("key-{offset}"))),
    };
    let value = match offset % 5 {
        0 => None,
        1 => Some(Bytes::new()),
        2 => Some(Bytes::from(vec![
            (offset % 251) as u8;
            3000 + offset as usize % 700
        ])),
        _ => Some(Bytes::from(format!("value-{offset}"))),
    };
    let headers = match offset % 3 {
        0 => vec![],
        1 => vec![("h".to_string(), None)],
        _ => vec![
            ("trace".to_string(), Some(Bytes::from(offset.to_string()))),
            ("empty".to_string(), Some(Bytes::new())),
            ("null".to_string(), None),
        ],
    };
    RemoteRecord {
        offset,
        timestamp_ms: 1_700_000_000_000 + offset as i64 * 1000,
        key,
        value,
        headers,
    }
}

fn records(offsets: impl IntoIterator<Item = u64>) -> Vec<RemoteRecord> {
    offsets.into_iter().map(shaped).collect()
}

/// Records of ~5 KB each (a 64 KiB object holds about a dozen).
fn padded(offsets: impl IntoIterator<Item = u64>) -> Vec<RemoteRecord> {
    offsets
        .into_iter()
        .map(|o| {
            let mut r = shaped(o);
            r.value = Some(Bytes::from(vec![(o % 256) as u8; 5000]));
            r
        })
        .collect()
}

/// Every record from `from` on, in reads of `batch` records.
async fn read_all(tier: &RemoteTier, topic: &str, from: u64, batch: usize) -> Vec<RemoteRecord> {
    let mut out: Vec<RemoteRecord> = Vec::new();
    let mut at = from;
    for _ in 0..100_000 {
        let got = tier.read(topic, 0, at, batch, usize::MAX).await.unwrap();
        let Some(last) = got.last() else { break };
        at = last.offset + 1;
        out.extend(got);
    }
    out
}

/// The invariants a crash must never break: the newest manifest checks,
/// and every object it lists exists, decodes and matches its entry.
async fn assert_consistent(store: &Arc<dyn ObjectStore>, topic: &str) -> Option<Manifest> {
    let tier = tier_on(store.clone(), &cfg(64 * 1024, 1 << 20));
    let m = tier.manifest(topic, 0).await.unwrap()?;
    m.check().unwrap();
    let data = layout::data_dir(&Path::from("pre/fix"), topic, 0);
    for o in &m.objects {
        let bytes = store
            .get(&data.clone().join(o.name.as_str()))
            .await
            .unwrap_or_else(|e| panic!("manifest v{} lists {}: {e}", m.version, o.name))
            .bytes()
            .await
            .unwrap();
        assert_eq!(bytes.len() as u64, o.bytes);
        assert_eq!(crc32c::crc32c(&bytes), o.crc32c);
        let (footer, recs) = tidelog_tiered::format::decode(bytes).unwrap();
        assert_eq!(
            (footer.base_offset, footer.last_offset),
            (o.base_offset, o.last_offset)
        );
        assert_eq!(recs.len() as u64, o.records);
    }
    Some(m)
}

async fn round_trip(store: Arc<dyn ObjectStore>) {
    let tier = tier_on(store, &cfg(64 * 1024, 8 << 20));
    // Gaps: offsets 0..100 without multiples of 7, then 150..300, then one
    // 1 MiB value and records after it.
    let mut all = records((0..100).filter(|o| o % 7 != 3));
    all.extend(records(150..300));
    let mut big = shaped(300);
    big.value = Some(Bytes::from(vec![0xa5u8; 1 << 20]));
    all.push(big);
    all.extend(records(301..320));

    let (first, rest) = all.split_at(120);
    let m1 = tier.upload("orders", 0, first).await.unwrap();
    assert_eq!(m1.version, 1);
    assert_eq!(m1.beginning, 0);
    assert_eq!(m1.end, first[first.len() - 1].offset + 1);
    assert!(m1.objects.len() > 1, "objects of ~64 KiB");
    let m2 = tier.upload("orders", 0, rest).await.unwrap();
    assert_eq!(m2.version, 2);
    assert_eq!(m2.end, 320);
    assert_eq!(
        tier.manifest("orders", 0).await.unwrap().as_ref(),
        Some(&m2)
    );
    let big_object = m2
        .objects
        .iter()
        .find(|o| o.base_offset <= 300 && o.last_offset >= 300)
        .unwrap();
    assert!(big_object.bytes > 1 << 20);

    // Everything back, exactly, through batches of several sizes.
    for batch in [1, 7, 1000] {
        assert_eq!(
            read_all(&tier, "orders", 0, batch).await,
            all,
            "batch {batch}"
        );
    }
    // A fresh tier (cold cache) reads the same.
    let cold = tier_on(tier.store().clone(), &cfg(64 * 1024, 8 << 20));
    assert_eq!(read_all(&cold, "orders", 0, 50).await, all);

    // An offset in a gap answers from the next record.
    let got = tier.read("orders", 0, 3, 1, usize::MAX).await.unwrap();
    assert_eq!(got[0].offset, 4);
    let got = tier.read("orders", 0, 100, 2, usize::MAX).await.unwrap();
    assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), [150, 151]);
    // Bounds: max_bytes stops before the bound but returns one at least.
    let got = tier.read("orders", 0, 300, 10, 1).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].value.as_ref().unwrap().len(), 1 << 20);
    let got = tier.read("orders", 0, 150, 1000, 10_000).await.unwrap();
    assert!(!got.is_empty() && got.len() < 150);
    let framed: usize = got.iter().map(tidelog_tiered::format::framed_len).sum();
    assert!(framed <= 10_000);
    assert!(tier.read("orders", 0, 5, 0, 100).await.unwrap().is_empty());
    // At or past the end: nothing remote.
    assert!(tier
        .read("orders", 0, 320, 10, 100)
        .await
        .unwrap()
        .is_empty());
    assert!(tier.read("none", 0, 0, 10, 100).await.unwrap().is_empty());
    // Records below the end are skipped by a repeated upload.
    let again = tier.upload("orders", 0, rest).await.unwrap();
    assert_eq!(again, m2);
    // Unordered records are refused and nothing is written.
    let bad = vec![shaped(400), shaped(399)];
    assert!(matches!(
        tier.upload("orders", 0, &bad).await,
        Err(TieredError::InvalidInput { .. })
    ));
    let s = tier.stats();
    assert!(s.uploaded_objects >= m2.objects.len() as u64);
    assert!(s.remote_reads > 0 && s.remote_read_bytes > 0);
    assert!(s.cache_hits > 0 && s.cache_misses > 0);
    assert_eq!(s.upload_failures, 1);
}

#[tokio::test]
async fn round_trip_on_the_local_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    round_trip(Arc::new(store)).await;
}

#[tokio::test]
async fn round_trip_in_memory() {
    round_trip(memory()).await;
}

#[tokio::test]
async fn open_from_a_file_url() {
    let dir = tempfile::tempdir().unwrap();
    let c = TieredConfig {
        url: Some(format!("file://{}/bucket/prefix", dir.path().display())),
        ..TieredConfig::default()
    };
    let tier = RemoteTier::open(&c).unwrap();
    tier.upload("t", 0, &records(10..20)).await.unwrap();
    assert_eq!(read_all(&tier, "t", 10, 3).await, records(10..20));
    let on_disk = dir.path().join("bucket/prefix/topics/t/0/data");
    let names: Vec<_> = std::fs::read_dir(on_disk)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, [layout::object_name(10, 19)]);
    assert!(dir.path().join("bucket/prefix/tidelog.json").exists());
    assert!(RemoteTier::open(&TieredConfig::default()).is_err());
}

#[tokio::test]
async fn a_large_object_goes_up_in_parts() {
    let tier = tier_on(memory(), &cfg(64 << 20, 1 << 20));
    let mut recs = records(0..3);
    for r in &mut recs {
        r.value = Some(Bytes::from(vec![r.offset as u8; 9 << 20]));
    }
    let m = tier.upload("big", 0, &recs).await.unwrap();
    assert_eq!(m.objects.len(), 1);
    assert!(m.objects[0].bytes > 27 << 20);
    assert_eq!(read_all(&tier, "big", 0, 1).await, recs);
}

#[tokio::test]
async fn topics_versions_and_tombstones() {
    let tier = tier_on(memory(), &cfg(64 * 1024, 1 << 20));
    let mut configs = BTreeMap::new();
    configs.insert("retention.ms".to_string(), "1000".to_string());
    let a = RemoteTopic {
        name: "a".into(),
        partitions: 3,
        configs: configs.clone(),
        updated_ms: 1,
    };
    let b = RemoteTopic {
        name: "b".into(),
        partitions: 1,
        configs: BTreeMap::new(),
        updated_ms: 2,
    };
    tier.put_topic(&a).await.unwrap();
    tier.put_topic(&b).await.unwrap();
    let mut a2 = a.clone();
    a2.partitions = 4;
    for n in 0..5 {
        a2.updated_ms = 10 + n;
        tier.put_topic(&a2).await.unwrap();
    }
    assert_eq!(tier.topics().await.unwrap(), vec![a2.clone(), b.clone()]);
    // Old versions are pruned, the last few kept.
    let meta_dir = layout::topic_meta_dir(tier.prefix(), "a");
    let left = tier.store().list(Some(&meta_dir)).collect_count().await;
    assert_eq!(left, tidelog_tiered::tier::KEEP_VERSIONS as usize);

    tier.upload("b", 0, &records(0..50)).await.unwrap();
    tier.delete_topic("b").await.unwrap();
    assert_eq!(tier.topics().await.unwrap(), vec![a2.clone()]);
    assert!(tier.manifest("b", 0).await.unwrap().is_none());
    assert!(tier.read("b", 0, 0, 10, 1000).await.unwrap().is_empty());
    let data = layout::data_dir(tier.prefix(), "b", 0);
    assert_eq!(tier.store().list(Some(&data)).collect_count().await, 0);
    // Deleting again is fine; recreating starts a new life.
    tier.delete_topic("b").await.unwrap();
    tier.put_topic(&b).await.unwrap();
    assert_eq!(tier.topics().await.unwrap(), vec![a2, b]);
    let m = tier.upload("b", 0, &records(0..5)).await.unwrap();
    assert_eq!((m.version, m.end), (1, 5));
    // Bad names never reach the store.
    for bad in ["", "..", "a/b"] {
        assert!(matches!(
            tier.delete_topic(bad).await,
            Err(TieredError::InvalidInput { .. })
        ));
    }
}

trait CollectCount {
    async fn collect_count(self) -> usize;
}

impl<S: futures::Stream + Unpin> CollectCount for S {
    async fn collect_count(self) -> usize {
        use futures::StreamExt;
        self.count().await
    }
}

/// Runs `step` on a tier whose store crashes at write k, before and after
/// the write lands, for every k until a run makes fewer than k writes.
/// After each crash, `check` sees what the store holds (the restarted
/// process). Returns the largest k that crashed.
async fn crash_matrix<S, C>(mut prepare: impl FnMut(&RemoteTier) -> S, step: C) -> u64
where
    S: std::future::Future<Output = ()>,
    C: AsyncCheck,
{
    let mut most = 0;
    for crash_after in [false, true] {
        for k in 1..200 {
            // Both backends: odd k on the local file system, even in memory.
            let dir = tempfile::tempdir().unwrap();
            let base: Arc<dyn ObjectStore> = if k % 2 == 0 {
                memory()
            } else {
                Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap())
            };
            let faulty = FaultyStore::new(base);
            let c = cfg(64 * 1024, 1 << 20);
            let tier = tier_on(faulty.clone(), &c);
            prepare(&tier).await;
            faulty.plan(Some(if crash_after {
                Fault::CrashAfter(k)
            } else {
                Fault::CrashBefore(k)
            }));
            let outcome = step.run(&tier).await;
            if !faulty.crashed() {
                outcome.unwrap();
                break;
            }
            assert!(
                matches!(outcome, Err(TieredError::Unavailable { .. })),
                "k={k}: {outcome:?}"
            );
            most = most.max(k);
            let restarted = tier_on(faulty.inner(), &c);
            step.check_after_crash(&faulty.inner(), &restarted, k).await;
        }
    }
    most
}

trait AsyncCheck {
    async fn run(&self, tier: &RemoteTier) -> Result<(), TieredError>;
    async fn check_after_crash(&self, store: &Arc<dyn ObjectStore>, restarted: &RemoteTier, k: u64);
}

struct UploadStep {
    first: Vec<RemoteRecord>,
    second: Vec<RemoteRecord>,
}

impl AsyncCheck for UploadStep {
    async fn run(&self, tier: &RemoteTier) -> Result<(), TieredError> {
        tier.upload("t", 0, &self.second).await.map(drop)
    }

    async fn check_after_crash(
        &self,
        store: &Arc<dyn ObjectStore>,
        restarted: &RemoteTier,
        k: u64,
    ) {
        let after_crash = assert_consistent(store, "t").await.unwrap();
        assert!(
            after_crash.end == 40 || after_crash.end == 130,
            "k={k}: neither the old nor the new manifest: {after_crash:?}"
        );
        let m = restarted.upload("t", 0, &self.second).await.unwrap();
        assert_eq!(m.end, 130, "k={k}");
        assert_consistent(store, "t").await.unwrap();
        let mut expected = self.first.clone();
        expected.extend(self.second.clone());
        assert_eq!(read_all(restarted, "t", 0, 33).await, expected, "k={k}");
    }
}

/// Crashes at every write of an upload of several objects (on both
/// backends), before and after the write lands; then the restarted process
/// retries the same upload. After the crash and after the retry: the newest
/// manifest is the old or the new one and lists only whole objects; in the
/// end every record reads back exactly.
#[tokio::test]
async fn a_crash_at_any_upload_step_leaves_the_old_or_the_new_manifest() {
    let step = UploadStep {
        first: padded(0..40),
        second: padded(40..130),
    };
    let first = step.first.clone();
    let most = crash_matrix(
        |tier| {
            let (tier, first) = (tier.clone(), first.clone());
            async move {
                tier.upload("t", 0, &first).await.unwrap();
            }
        },
        step,
    )
    .await;
    assert!(
        most > 7,
        "the upload made {most} writes: several objects and a manifest"
    );
}

struct RetentionStep;

impl AsyncCheck for RetentionStep {
    async fn run(&self, tier: &RemoteTier) -> Result<(), TieredError> {
        let keep = 3 * 64 * 1024;
        tier.enforce_retention("t", 0, 0, None, Some(keep))
            .await
            .map(drop)
    }

    async fn check_after_crash(
        &self,
        store: &Arc<dyn ObjectStore>,
        restarted: &RemoteTier,
        k: u64,
    ) {
        let m = assert_consistent(store, "t").await.unwrap();
        let all = padded(0..130);
        assert_eq!(
            read_all(restarted, "t", m.beginning, 20).await,
            all[m.beginning as usize..],
            "k={k}"
        );
        self.run(restarted).await.unwrap();
        let m = assert_consistent(store, "t").await.unwrap();
        assert!(m.beginning > 0, "k={k}");
        // The retry swept whatever the crash left behind.
        let data = layout::data_dir(restarted.prefix(), "t", 0);
        assert_eq!(
            store.list(Some(&data)).collect_count().await,
            m.objects.len(),
            "k={k}"
        );
    }
}

/// The same for remote retention: the manifest first, then the deletes.
#[tokio::test]
async fn a_crash_at_any_retention_step_leaves_listed_objects_whole() {
    let most = crash_matrix(
        |tier| {
            let tier = tier.clone();
            async move {
                tier.upload("t", 0, &padded(0..130)).await.unwrap();
            }
        },
        RetentionStep,
    )
    .await;
    assert!(most > 3, "retention made {most} writes");
}

struct DeleteStep;

impl AsyncCheck for DeleteStep {
    async fn run(&self, tier: &RemoteTier) -> Result<(), TieredError> {
        tier.delete_topic("t").await
    }

    async fn check_after_crash(
        &self,
        store: &Arc<dyn ObjectStore>,
        restarted: &RemoteTier,
        k: u64,
    ) {
        // Whatever manifest is left lists only objects that exist.
        let left = assert_consistent(store, "t").await;
        let tombstoned = restarted.topics().await.unwrap().is_empty();
        if left.is_none() {
            assert!(tombstoned, "k={k}: data went before the tombstone");
        }
        // Before the tombstone the deletion never began: only a delete
        // retry (the broker's) finishes it.
        if !tombstoned || k % 3 == 0 {
            self.run(restarted).await.unwrap();
        } else {
            // Recreating the topic finishes the deletion first.
            let topic = RemoteTopic {
                name: "t".into(),
                partitions: 1,
                configs: BTreeMap::new(),
                updated_ms: 5,
            };
            restarted.put_topic(&topic).await.unwrap();
            if tombstoned {
                let m = restarted.upload("t", 0, &padded(0..3)).await.unwrap();
                assert_eq!(
                    (m.version, m.end),
                    (1, 3),
                    "k={k}: the old incarnation is gone"
                );
                assert_eq!(read_all(restarted, "t", 0, 10).await, padded(0..3));
                return;
            }
        }
        assert!(assert_consistent(store, "t").await.is_none(), "k={k}");
        let topic_dir = layout::topic_dir(restarted.prefix(), "t");
        let meta_dir = layout::topic_meta_dir(restarted.prefix(), "t");
        let all = store.list(Some(&topic_dir)).collect_count().await;
        let metas = store.list(Some(&meta_dir)).collect_count().await;
        assert_eq!(all, metas, "k={k}: only topic metas are left");
    }
}

/// The same for a topic deletion: tombstone, manifests (oldest first),
/// then objects; retried by a delete or finished by a recreation.
#[tokio::test]
async fn a_crash_at_any_delete_step_leaves_no_manifest_naming_a_missing_object() {
    let most = crash_matrix(
        |tier| {
            let tier = tier.clone();
            async move {
                let topic = RemoteTopic {
                    name: "t".into(),
                    partitions: 1,
                    configs: BTreeMap::new(),
                    updated_ms: 1,
                };
                tier.put_topic(&topic).await.unwrap();
                tier.upload("t", 0, &padded(0..60)).await.unwrap();
                tier.upload("t", 0, &padded(60..130)).await.unwrap();
                // Retention drops objects an older manifest version lists.
                tier.enforce_retention("t", 0, 0, None, Some(4 * 64 * 1024))
                    .await
                    .unwrap();
            }
        },
        DeleteStep,
    )
    .await;
    assert!(most > 8, "the deletion made {most} writes");
}

fn snapshot_a() -> Vec<(String, Bytes)> {
    vec![
        (
            "00000000000000000000.log".to_string(),
            Bytes::from(vec![1u8; 3000]),
        ),
        (
            "00000000000000000000.index".to_string(),
            Bytes::from_static(b"a"),
        ),
    ]
}

fn snapshot_b() -> Vec<(String, Bytes)> {
    vec![
        (
            "00000000000000000000.log".to_string(),
            Bytes::from(vec![2u8; 2000]),
        ),
        (
            "00000000000000000009.log".to_string(),
            Bytes::from(vec![3u8; 10]),
        ),
        (
            "00000000000000000009.index".to_string(),
            Bytes::from_static(b"b"),
        ),
    ]
}

struct SnapshotStep;

impl AsyncCheck for SnapshotStep {
    async fn run(&self, tier: &RemoteTier) -> Result<(), TieredError> {
        tier.put_snapshot("c", 0, snapshot_b(), 20).await.map(drop)
    }

    async fn check_after_crash(
        &self,
        store: &Arc<dyn ObjectStore>,
        restarted: &RemoteTier,
        k: u64,
    ) {
        // The old snapshot or the new one, whole, never a mix.
        let files = restarted.snapshot_files("c", 0).await.unwrap();
        assert!(
            files == snapshot_a() || files == snapshot_b(),
            "k={k}: {files:?}"
        );
        self.run(restarted).await.unwrap();
        assert_eq!(
            restarted.snapshot_files("c", 0).await.unwrap(),
            snapshot_b()
        );
        let m = restarted.manifest("c", 0).await.unwrap().unwrap();
        assert_eq!(m.end, 20);
        // Only the new snapshot's directory is left.
        let dir = layout::partition_dir(restarted.prefix(), "c", 0).join("snapshot");
        assert_eq!(store.list(Some(&dir)).collect_count().await, 3, "k={k}");
    }
}

/// The same for a compacted snapshot: files first, manifest, then the old
/// snapshot's deletion.
#[tokio::test]
async fn a_crash_at_any_snapshot_step_leaves_the_old_or_the_new_snapshot() {
    let most = crash_matrix(
        |tier| {
            let tier = tier.clone();
            async move {
                tier.put_snapshot("c", 0, snapshot_a(), 10).await.unwrap();
            }
        },
        SnapshotStep,
    )
    .await;
    assert!(most > 5, "the snapshot made {most} writes");
}

/// A reader whose cached manifest lists an object another process's
/// retention deleted re-reads the manifest: the offset is now below the
/// beginning, and later offsets still read.
#[tokio::test]
async fn a_read_of_an_object_dropped_since_re_reads_the_manifest() {
    let store = memory();
    let reader = tier_on(store.clone(), &cfg(64 * 1024, 0));
    let other = tier_on(store.clone(), &cfg(64 * 1024, 0));
    let m = reader.upload("t", 0, &padded(0..100)).await.unwrap();
    assert_eq!(
        reader.read("t", 0, 0, 1, 1 << 20).await.unwrap()[0].offset,
        0
    );
    let keep = m.objects.last().unwrap().bytes;
    let after = other
        .enforce_retention("t", 0, 0, None, Some(keep))
        .await
        .unwrap()
        .unwrap();
    assert!(after.beginning > 0);
    let err = reader.read("t", 0, 0, 1, 1 << 20).await.unwrap_err();
    assert!(matches!(err, TieredError::OutOfRange { .. }), "{err}");
    let got = reader
        .read("t", 0, after.beginning, 1, 1 << 20)
        .await
        .unwrap();
    assert_eq!(got[0].offset, after.beginning);
}

#[tokio::test]
async fn a_failed_write_is_retried_and_counted() {
    for k in 1..6 {
        let faulty = FaultyStore::new(memory());
        let tier = tier_on(faulty.clone(), &cfg(64 * 1024, 1 << 20));
        faulty.plan(Some(Fault::FailOnce(k)));
        let m = tier.upload("t", 0, &padded(0..100)).await.unwrap();
        assert_eq!(m.end, 100);
        assert_eq!(tier.stats().upload_retries, 1, "k={k}");
        assert_eq!(read_all(&tier, "t", 0, 100).await, padded(0..100));
    }
}

#[tokio::test]
async fn a_store_that_is_down_is_unavailable_and_loses_nothing() {
    let faulty = FaultyStore::new(memory());
    let tier = tier_on(faulty.clone(), &cfg(64 * 1024, 0));
    tier.upload("t", 0, &records(0..30)).await.unwrap();
    faulty.set_down(true);
    let err = tier.upload("t", 0, &records(30..60)).await.unwrap_err();
    assert!(matches!(err, TieredError::Unavailable { .. }), "{err}");
    let err = tier.read("t", 0, 0, 10, 1 << 20).await.unwrap_err();
    assert!(matches!(err, TieredError::Unavailable { .. }), "{err}");
    let s = tier.stats();
    assert_eq!((s.upload_failures, s.read_failures), (1, 1));
    assert!(s.upload_retries >= 2 && s.read_retries >= 2);
    faulty.set_down(false);
    let m = tier.upload("t", 0, &records(30..60)).await.unwrap();
    assert_eq!(m.end, 60);
    assert_eq!(read_all(&tier, "t", 0, 7).await, records(0..60));
}

/// Flips a byte of an object's records, of its index, or cuts it short:
/// the read refuses it as Corrupt.
#[tokio::test]
async fn corrupt_and_truncated_objects_are_refused() {
    for damage in ["record", "index", "truncate"] {
        let store = memory();
        let tier = tier_on(store.clone(), &cfg(1 << 20, 1 << 20));
        let m = tier.upload("t", 0, &records(0..20)).await.unwrap();
        let o = &m.objects[0];
        let path = layout::data_dir(tier.prefix(), "t", 0).join(o.name.as_str());
        let mut bytes = store
            .get(&path)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .to_vec();
        match damage {
            "record" => bytes[tidelog_tiered::format::HEADER_LEN + 20] ^= 1,
            "index" => {
                let at = bytes.len() - tidelog_tiered::format::FOOTER_LEN - 3;
                bytes[at] ^= 1;
            }
            _ => bytes.truncate(bytes.len() - 10),
        }
        store.put(&path, PutPayload::from(bytes)).await.unwrap();
        let fresh = tier_on(store.clone(), &cfg(1 << 20, 1 << 20));
        let err = fresh.read("t", 0, 0, 100, 1 << 20).await.unwrap_err();
        assert!(
            matches!(err, TieredError::Corrupt { .. }),
            "{damage}: {err}"
        );
    }
}

#[tokio::test]
async fn a_corrupt_manifest_is_refused() {
    let store = memory();
    let tier = tier_on(store.clone(), &cfg(64 * 1024, 1 << 20));
    let m = tier.upload("t", 0, &records(0..20)).await.unwrap();
    let mut broken = m.clone();
    broken.version = 2;
    broken.end = 5; // below the last object's last offset
    let path = layout::manifest_dir(tier.prefix(), "t", 0).join(layout::version_name(2, ".json"));
    let json = serde_json::to_vec(&broken).unwrap();
    store.put(&path, PutPayload::from(json)).await.unwrap();
    assert!(matches!(
        tier.manifest("t", 0).await,
        Err(TieredError::Corrupt { .. })
    ));
    store
        .put(&path, PutPayload::from(&b"{not json"[..]))
        .await
        .unwrap();
    assert!(matches!(
        tier.upload("t", 0, &records(20..30)).await,
        Err(TieredError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn the_cache_stays_within_its_bound() {
    let limit = 3 << 20;
    let tier = tier_on(memory(), &cfg(1 << 20, limit));
    let mut recs = records(0..400);
    for r in &mut recs {
        r.value = Some(Bytes::from(vec![r.offset as u8; 20_000]));
    }
    let m = tier.upload("t", 0, &recs).await.unwrap();
    assert!(m.objects.len() >= 6, "{}", m.objects.len());
    let mut at = 0;
    let mut max_seen = 0;
    for _ in 0..1000 {
        let got = tier.read("t", 0, at, 10, usize::MAX).await.unwrap();
        let s = tier.stats();
        max_seen = max_seen.max(s.cache_bytes);
        assert!(s.cache_bytes <= limit, "{} > {limit}", s.cache_bytes);
        let Some(last) = got.last() else { break };
        at = last.offset + 1;
    }
    assert_eq!(at, 400);
    let s = tier.stats();
    assert!(s.cache_evictions > 0);
    assert!(max_seen > limit / 2, "the cache was used: {max_seen}");
    // Sequential reads are mostly hits: one GET serves many records.
    assert!(s.cache_hits > 4 * s.cache_misses, "{s:?}");
    // Objects retention deletes leave the cache with them.
    let keep = m.objects.last().unwrap().bytes;
    tier.enforce_retention("t", 0, 0, None, Some(keep))
        .await
        .unwrap();
    assert!(
        tier.stats().cache_bytes < s.cache_bytes,
        "{:?}",
        tier.stats()
    );
}

#[tokio::test]
async fn retention_drops_whole_objects_from_the_front() {
    let store = memory();
    let tier = tier_on(store.clone(), &cfg(64 * 1024, 1 << 20));
    let recs = padded(0..200);
    let m = tier.upload("t", 0, &recs).await.unwrap();
    let n = m.objects.len();
    assert!(n >= 4, "{n}");
    // Nothing bounded: nothing dropped, no new version.
    let same = tier
        .enforce_retention("t", 0, i64::MAX, None, None)
        .await
        .unwrap();
    assert_eq!(same.as_ref(), Some(&m));
    let same = tier
        .enforce_retention("t", 0, 0, Some(-1), None)
        .await
        .unwrap();
    assert_eq!(same.as_ref(), Some(&m));

    // By time: objects whose newest record is older than now - retention.
    let cut = m.objects[1].max_timestamp_ms;
    let now = cut + 1000;
    let after = tier
        .enforce_retention("t", 0, now, Some(999), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.objects, m.objects[2..].to_vec());
    assert_eq!(after.beginning, m.objects[1].last_offset + 1);
    assert_eq!(after.end, m.end);
    assert_eq!(tier.known_manifest("t", 0).as_deref(), Some(&after));
    let dropped = layout::data_dir(tier.prefix(), "t", 0).join(m.objects[0].name.as_str());
    assert!(
        store.head(&dropped).await.is_err(),
        "dropped objects are deleted"
    );
    assert!(matches!(
        tier.read("t", 0, 0, 1, 100).await,
        Err(TieredError::OutOfRange { beginning, .. }) if beginning == after.beginning
    ));
    assert_eq!(
        read_all(&tier, "t", after.beginning, 9).await,
        recs[after.beginning as usize..]
    );

    // By bytes: keep at least retention_bytes.
    let keep = after.objects.last().unwrap().bytes;
    let small = tier
        .enforce_retention("t", 0, now, None, Some(keep))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(small.objects.len(), 1);
    assert!(small.object_bytes() >= keep);
    assert_eq!(tier.stats().objects_deleted, n as u64 - 1);
    assert!(tier
        .enforce_retention("none", 0, now, Some(1), None)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn retention_sweeps_objects_a_crash_left_unlisted() {
    let faulty = FaultyStore::new(memory());
    let tier = tier_on(faulty.clone(), &cfg(64 * 1024, 1 << 20));
    tier.upload("t", 0, &padded(0..10)).await.unwrap();
    // Crash after the first object of the next upload: it is garbage.
    faulty.plan(Some(Fault::CrashAfter(1)));
    assert!(tier.upload("t", 0, &padded(10..150)).await.is_err());
    let inner = faulty.inner();
    let restarted = tier_on(inner.clone(), &cfg(64 * 1024, 1 << 20));
    // A retry of a shorter run: the garbage object's name differs.
    restarted.upload("t", 0, &padded(10..12)).await.unwrap();
    let data = layout::data_dir(restarted.prefix(), "t", 0);
    let before = inner.list(Some(&data)).collect_count().await;
    let m = restarted
        .enforce_retention("t", 0, 0, None, None)
        .await
        .unwrap()
        .unwrap();
    let after = inner.list(Some(&data)).collect_count().await;
    assert_eq!(after, m.objects.len());
    assert_eq!(
        before,
        after + 1,
        "the one unlisted object below the end was swept"
    );
}

#[tokio::test]
async fn snapshots_are_replaced_and_read_back() {
    let store = memory();
    let tier = tier_on(store.clone(), &cfg(64 * 1024, 1 << 20));
    let files = vec![
        (
            "00000000000000000000.log".to_string(),
            Bytes::from(vec![1u8; 5000]),
        ),
        (
            "00000000000000000000.index".to_string(),
            Bytes::from_static(b"idx"),
        ),
    ];
    let m1 = tier
        .put_snapshot("__consumer_offsets", 0, files.clone(), 42)
        .await
        .unwrap();
    assert_eq!((m1.end, m1.beginning), (42, 42));
    assert_eq!(
        tier.snapshot_files("__consumer_offsets", 0).await.unwrap(),
        files
    );
    let files2 = vec![(
        "00000000000000000040.log".to_string(),
        Bytes::from_static(b"new"),
    )];
    let m2 = tier
        .put_snapshot("__consumer_offsets", 0, files2.clone(), 50)
        .await
        .unwrap();
    assert_eq!(m2.end, 50);
    assert_eq!(
        tier.snapshot_files("__consumer_offsets", 0).await.unwrap(),
        files2
    );
    // The previous snapshot's files are gone.
    let dir = layout::partition_dir(tier.prefix(), "__consumer_offsets", 0).join("snapshot");
    assert_eq!(store.list(Some(&dir)).collect_count().await, 1);
    assert!(tier.snapshot_files("none", 0).await.unwrap().is_empty());
    for bad in ["", "../x", "a/b"] {
        let err = tier
            .put_snapshot("t", 0, vec![(bad.to_string(), Bytes::new())], 1)
            .await
            .unwrap_err();
        assert!(matches!(err, TieredError::InvalidInput { .. }), "{bad:?}");
    }
    // A damaged snapshot file is refused.
    let path = layout::snapshot_dir(
        tier.prefix(),
        "__consumer_offsets",
        0,
        m2.snapshot.unwrap().version,
    )
    .join("00000000000000000040.log");
    store
        .put(&path, PutPayload::from(&b"neW"[..]))
        .await
        .unwrap();
    assert!(matches!(
        tier.snapshot_files("__consumer_offsets", 0).await,
        Err(TieredError::Corrupt { .. })
    ));
}

/// Two tiers (two processes on one prefix) uploading the same records:
/// the create-if-absent manifest leaves one consistent history.
#[tokio::test]
async fn a_lost_manifest_race_is_resolved_by_re_reading() {
    let store = memory();
    let a = tier_on(store.clone(), &cfg(64 * 1024, 1 << 20));
    let b = tier_on(store.clone(), &cfg(64 * 1024, 1 << 20));
    a.upload("t", 0, &records(0..10)).await.unwrap();
    let more = records(10..80);
    let (ra, rb) = tokio::join!(a.upload("t", 0, &more), b.upload("t", 0, &more));
    let (ma, mb) = (ra.unwrap(), rb.unwrap());
    assert_eq!((ma.end, mb.end), (80, 80));
    let m = assert_consistent(&store, "t").await.unwrap();
    assert_eq!(m.end, 80);
    assert_eq!(read_all(&a, "t", 0, 16).await, records(0..80));
}

/// The broker spawns these on a multi-threaded runtime: every future must
/// be Send (no lock guard held across an await), and the tier Send + Sync.
#[test]
fn futures_are_send() {
    fn send<T: Send>(_: T) {}
    fn shared<T: Send + Sync + Clone>(_: &T) {}
    let tier = tier_on(memory(), &cfg(64 * 1024, 0));
    shared(&tier);
    let topic = RemoteTopic {
        name: "t".into(),
        partitions: 1,
        configs: BTreeMap::new(),
        updated_ms: 0,
    };
    send(tier.upload("t", 0, &[]));
    send(tier.read("t", 0, 0, 1, 1));
    send(tier.manifest("t", 0));
    send(tier.put_topic(&topic));
    send(tier.topics());
    send(tier.delete_topic("t"));
    send(tier.enforce_retention("t", 0, 0, None, None));
    send(tier.put_snapshot("t", 0, vec![], 0));
    send(tier.snapshot_files("t", 0));
}
