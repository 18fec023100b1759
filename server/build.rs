//! Stamps the binary with the commit it was built from, for
//! `tidelog --version`: `TIDELOG_COMMIT` is `git rev-parse --short HEAD`,
//! with `-dirty` when tracked files differ from that commit, or `unknown`
//! outside a git checkout (a source archive) or without git.
//!
//! Cargo reruns this when HEAD moves: `HEAD` itself (a checkout), the
//! branch's ref (a commit), `packed-refs`, and the index (a commit, an
//! add: so the dirty mark follows what `git status` sees when the index
//! changes, not every edit of a file).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// Asks cargo to rerun when `path` changes; only for files that exist (a
/// missing one would rerun this on every build).
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    let commit = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(hash) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
            if dirty {
                format!("{hash}-dirty")
            } else {
                hash
            }
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=TIDELOG_COMMIT={commit}");
    // Without a rerun-if-changed line cargo would rerun on any file of the
    // package; this one is always there.
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let git_dir = Path::new(&git_dir);
        watch(&git_dir.join("HEAD"));
        watch(&git_dir.join("index"));
    }
    // A worktree's refs live in the common dir of the repository.
    if let Some(common) = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
        let common = Path::new(&common);
        watch(&common.join("packed-refs"));
        if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch(&common.join(reference));
        }
    }
}
