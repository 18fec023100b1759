//! The real browser of the console test (`tests/console.rs`): Debian's
//! `chromium` and `chromium-driver`, installed with `apt-get` on first use
//! so that the README's one test command is all a fresh machine needs.
//!
//! Invariants:
//! - Idempotent: the install runs only when `/usr/bin/chromium` or
//!   `/usr/bin/chromedriver` is missing, and `apt-get install` of packages
//!   already installed changes nothing; a second run (or a machine that has
//!   them) only checks that both binaries start (`--version`).
//! - One installer at a time: the check-and-install runs under the same
//!   exclusive `flock` scheme as the pinned clients
//!   (`<target>/test-clients/chromium.lock`), so parallel test processes
//!   do not run two `apt-get`s at once (dpkg's own lock would fail one).
//! - Every command has a deadline ([`crate::clients::INSTALL_TIMEOUT`]).
//! - Installing needs root (apt-get); without it the error says what to
//!   install by hand.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use crate::clients::{clients_root, lock_install, run_bounded, ClientError, INSTALL_TIMEOUT};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The Debian packages that provide [`CHROMIUM`] and [`CHROMEDRIVER`].
const PACKAGES: [&str; 2] = ["chromium", "chromium-driver"];

/// Makes sure both binaries are installed and start; panics with the
/// reason otherwise (the browser test cannot go on without them).
pub fn ensure_chromium() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        if let Err(why) = install() {
            panic!(
                "cannot install {} for the console test: {why}",
                PACKAGES.join(" and ")
            );
        }
    });
}

fn install() -> Result<(), ClientError> {
    let _lock = lock_install(&clients_root()?, "chromium")?;
    if !(Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists()) {
        eprintln!(
            "console test: apt-get install {} (once; later runs find them)",
            PACKAGES.join(" ")
        );
        let mut update = Command::new("apt-get");
        update.args(["update", "-q"]);
        run_bounded(update, INSTALL_TIMEOUT)?;
        let mut apt = Command::new("apt-get");
        apt.env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(PACKAGES);
        run_bounded(apt, INSTALL_TIMEOUT)?;
    }
    for binary in [CHROMIUM, CHROMEDRIVER] {
        let mut version = Command::new(binary);
        version.arg("--version");
        run_bounded(version, INSTALL_TIMEOUT)?;
    }
    Ok(())
}
