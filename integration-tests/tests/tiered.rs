//! Tiered storage against a real S3-compatible server (SeaweedFS,
//! `tidelog_integration_tests::s3`) and the real binary.

mod common;

use std::sync::Arc;

use tidelog_integration_tests::s3::Seaweed;
use tidelog_tiered::object_store::path::Path as StorePath;
use tidelog_tiered::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tidelog_tiered::{RemoteTier, TieredConfig};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The remote tier the server would open for `seaweed` under `prefix`.
fn tier_config(seaweed: &Seaweed, prefix: &str) -> TieredConfig {
    TieredConfig {
        url: Some(seaweed.url(prefix)),
        endpoint: Some(seaweed.endpoint()),
        allow_http: true,
        ..TieredConfig::default()
    }
}

#[test]
fn object_stores_s3_backend_puts_and_gets_through_seaweedfs() {
    let seaweed = Seaweed::start("smoke");
    let tier = RemoteTier::open(&tier_config(&seaweed, "smoke")).expect("open the tier");
    let store: Arc<dyn ObjectStore> = Arc::clone(tier.store());
    let path = StorePath::from("smoke/some/object.bin");
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    runtime().block_on(async {
        let put = store.put(&path, PutPayload::from(bytes.clone())).await;
        put.unwrap_or_else(|e| panic!("put: {e:?}"));
        let got = store
            .get(&path)
            .await
            .expect("get")
            .bytes()
            .await
            .expect("body");
        assert_eq!(got.as_ref(), &bytes[..]);
    });
}
