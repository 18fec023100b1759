//! The `tidelog` binary's own dependency graph carries no test seam: the
//! fault plans (`failpoints`) and the durable image (`durable-image`) of
//! storage, cleaner and broker are enabled from dev-dependencies only, so a
//! release build has no fault type, field or check. Asked of cargo itself
//! (`cargo tree`, normal edges only: what `cargo build --release -p
//! tidelog-server` compiles).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::process::Command;

#[test]
fn the_release_binary_enables_no_test_feature() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-e", "normal,features", "-p"])
        .arg("tidelog-server")
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        tree.contains("tidelog-storage feature"),
        "not the tree expected:\n{tree}"
    );
    for seam in ["\"failpoints\"", "\"durable-image\""] {
        assert!(!tree.contains(seam), "{seam} in the release build:\n{tree}");
    }
}
