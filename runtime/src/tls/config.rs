//! The `tls:` section of broker.yaml: one server identity (certificate
//! chain and key) for every TLS listener, and the CA client certificates
//! are checked against (mTLS).
//!
//! Invariants: `cert_file` and `key_file` are set together or not at all
//! (none: no listener may speak TLS); `client_ca_file` needs them;
//! `client_auth` matters only with `client_ca_file`. Relative paths are
//! the config file's business: the binary resolves them against the
//! file's folder ([`TlsConfig::resolve_against`]) before anything reads
//! them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Least `tls.handshake_timeout_ms`.
pub const HANDSHAKE_TIMEOUT_MS_MIN: u64 = 100;
/// Largest `tls.handshake_timeout_ms` (five minutes).
pub const HANDSHAKE_TIMEOUT_MS_MAX: u64 = 300_000;

/// Whether TLS listeners ask for a client certificate (with
/// `client_ca_file`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// Not asked for, even with a CA configured.
    None,
    /// Asked for; a client without one is served (and has no CN), a
    /// client with one not signed by the CA is refused.
    Optional,
    /// A certificate signed by the CA is needed to finish the handshake.
    #[default]
    Required,
}

/// The `tls:` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM certificate chain, the server's certificate first.
    pub cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 RSA or SEC1 EC) of that certificate.
    pub key_file: Option<PathBuf>,
    /// PEM CA certificate(s): set, TLS listeners ask for client
    /// certificates signed by one of them (`client_auth`).
    pub client_ca_file: Option<PathBuf>,
    pub client_auth: ClientAuth,
    /// A client has this long from its connection to a finished
    /// handshake; then the connection is closed (a stalled or silent
    /// client holds only its own task, and not for long).
    pub handshake_timeout_ms: u64,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            cert_file: None,
            key_file: None,
            client_ca_file: None,
            client_auth: ClientAuth::Required,
            handshake_timeout_ms: 10_000,
        }
    }
}

impl TlsConfig {
    /// Whether a server identity is configured (TLS listeners may exist).
    pub fn enabled(&self) -> bool {
        self.cert_file.is_some() && self.key_file.is_some()
    }

    /// Whether client certificates are asked for.
    pub fn asks_client_certificates(&self) -> bool {
        self.client_ca_file.is_some() && self.client_auth != ClientAuth::None
    }

    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    /// Relative paths made relative to `folder` (the config file's).
    pub fn resolve_against(&mut self, folder: &Path) {
        for path in [
            &mut self.cert_file,
            &mut self.key_file,
            &mut self.client_ca_file,
        ]
        .into_iter()
        .flatten()
        {
            if path.is_relative() {
                *path = folder.join(&*path);
            }
        }
    }

    /// `Err((key, reason))` for the first refused key (the files are not
    /// read here: [`crate::tls::TlsAcceptor::load`] reads them).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => {
                return Err(("tls.key_file", "must be set with tls.cert_file".into()))
            }
            (None, Some(_)) => {
                return Err(("tls.cert_file", "must be set with tls.key_file".into()))
            }
            _ => {}
        }
        if self.client_ca_file.is_some() && !self.enabled() {
            return Err((
                "tls.client_ca_file",
                "needs tls.cert_file and tls.key_file (client certificates are asked for by a TLS listener)".into(),
            ));
        }
        for (key, path) in [
            ("tls.cert_file", &self.cert_file),
            ("tls.key_file", &self.key_file),
            ("tls.client_ca_file", &self.client_ca_file),
        ] {
            if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                return Err((key, "must not be empty".into()));
            }
        }
        if !(HANDSHAKE_TIMEOUT_MS_MIN..=HANDSHAKE_TIMEOUT_MS_MAX)
            .contains(&self.handshake_timeout_ms)
        {
            return Err((
                "tls.handshake_timeout_ms",
                format!("must be {HANDSHAKE_TIMEOUT_MS_MIN}..={HANDSHAKE_TIMEOUT_MS_MAX}"),
            ));
        }
        Ok(())
    }
}
