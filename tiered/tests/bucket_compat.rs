//! A checked-in bucket of format 1 (`tiered/testdata/bucket-v1/`, written
//! once by this file's ignored `write_bucket_v1` with
//! TIDELOG_WRITE_BUCKET_V1=1):
//! the current code must read everything in it back exactly. Round trips
//! pass when an encoder and its decoder change together; this does not,
//! for the record objects and for the JSON of manifests and topic metas.
//! The files are never edited, only copied to a tempdir and opened.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use tidelog_tiered::{RemoteRecord, RemoteTier, RemoteTopic, TieredConfig};

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/bucket-v1")
}

/// The records of topic "orders" partition 0: every record shape, a gap.
fn orders() -> Vec<RemoteRecord> {
    (0u64..30)
        .filter(|o| *o != 7)
        .map(|o| RemoteRecord {
            offset: o,
            timestamp_ms: 1_700_000_000_000 + o as i64,
            key: (o % 3 != 0).then(|| Bytes::from(format!("k{o}"))),
            value: match o % 4 {
                0 => None,
                1 => Some(Bytes::new()),
                _ => Some(Bytes::from(vec![o as u8; 100 * o as usize])),
            },
            headers: if o % 2 == 0 {
                vec![
                    ("h".into(), None),
                    ("n".into(), Some(Bytes::from_static(b"v"))),
                ]
            } else {
                vec![]
            },
        })
        .collect()
}

fn topic() -> RemoteTopic {
    let mut configs = BTreeMap::new();
    configs.insert("remote.storage.enable".to_string(), "true".to_string());
    configs.insert("retention.ms".to_string(), "604800000".to_string());
    RemoteTopic {
        name: "orders".into(),
        partitions: 1,
        configs,
        updated_ms: 1_700_000_000_000,
    }
}

fn cfg() -> TieredConfig {
    TieredConfig {
        object_bytes: 2048,
        ..TieredConfig::default()
    }
}

fn copy_dir(from: &FsPath, to: &FsPath) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Not a test: writes the checked-in bucket (once, for a new format).
#[tokio::test]
#[ignore = "writes tiered/testdata/bucket-v1: TIDELOG_WRITE_BUCKET_V1=1 with --run-ignored only"]
async fn write_bucket_v1() {
    if std::env::var_os("TIDELOG_WRITE_BUCKET_V1").is_none() {
        return;
    }
    let dir = testdata();
    assert!(!dir.exists(), "the checked-in bucket is never rewritten");
    std::fs::create_dir_all(&dir).unwrap();
    let store = Arc::new(LocalFileSystem::new_with_prefix(&dir).unwrap());
    let tier = RemoteTier::with_store(store, Path::from(""), &cfg());
    tier.put_topic(&topic()).await.unwrap();
    let records = orders();
    tier.upload("orders", 0, &records[..10]).await.unwrap();
    tier.upload("orders", 0, &records[10..]).await.unwrap();
    let files = vec![(
        "00000000000000000000.log".to_string(),
        Bytes::from_static(b"compacted"),
    )];
    tier.put_snapshot("__consumer_offsets", 0, files, 12)
        .await
        .unwrap();
}

#[tokio::test]
async fn bucket_v1_reads_back_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&testdata(), tmp.path());
    let store = Arc::new(LocalFileSystem::new_with_prefix(tmp.path()).unwrap());
    let tier = RemoteTier::with_store(store, Path::from(""), &cfg());
    assert_eq!(tier.topics().await.unwrap(), vec![topic()]);
    let m = tier.manifest("orders", 0).await.unwrap().unwrap();
    assert_eq!((m.version, m.beginning, m.end), (2, 0, 30));
    assert!(m.objects.len() > 2, "{}", m.objects.len());
    let mut got = Vec::new();
    let mut at = 0;
    while let Some(last) = {
        let batch = tier.read("orders", 0, at, 4, usize::MAX).await.unwrap();
        let last = batch.last().map(|r| r.offset);
        got.extend(batch);
        last
    } {
        at = last + 1;
    }
    assert_eq!(got, orders());
    let snap = tier.snapshot_files("__consumer_offsets", 0).await.unwrap();
    assert_eq!(
        snap,
        vec![(
            "00000000000000000000.log".to_string(),
            Bytes::from_static(b"compacted")
        )]
    );
    // And the bucket takes new writes in the current format.
    let more = RemoteRecord {
        offset: 30,
        timestamp_ms: 0,
        key: None,
        value: None,
        headers: vec![],
    };
    let m = tier.upload("orders", 0, &[more]).await.unwrap();
    assert_eq!((m.version, m.end), (3, 31));
}
