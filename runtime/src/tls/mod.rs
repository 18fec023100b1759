//! TLS for the listeners (HTTP and Kafka), with rustls: the `tls:`
//! section ([`config`]), the files made into a server config ([`load`]),
//! and the acceptor every TLS listener shares ([`acceptor`]), reloaded
//! when the files change or on SIGHUP.
//!
//! Invariants:
//! * One server identity (certificate chain and key) for every TLS
//!   listener, as the contract's `tls:` section has it.
//! * A handshake runs on the connection's own task, bounded by
//!   `tls.handshake_timeout_ms`; the accept loops only accept.
//! * A connection's [`PeerIdentity`] comes from a certificate rustls has
//!   verified against `client_ca_file` (webpki); an unverified
//!   certificate never finishes the handshake, so it never names anyone.
//! * No cryptography or certificate parsing is written here: rustls
//!   (aws-lc-rs) does the protocol, `rustls-pki-types` reads PEM and
//!   x509-parser reads the subject's CN.

pub mod acceptor;
pub mod config;
pub mod load;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use acceptor::{HandshakeFailed, TlsAcceptor};
pub use config::{ClientAuth, TlsConfig};
use rustls_pki_types::CertificateDer;
pub use tokio_rustls::server::TlsStream;

/// Who the other end of a TLS connection is: the subject CN of the
/// client certificate it presented (verified against `client_ca_file`),
/// `None` without a certificate (or one with no CN). The HTTP listener
/// puts it in each request's extensions, the Kafka listener in the
/// connection's session; authentication maps it to `User:<CN>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerIdentity {
    pub common_name: Option<String>,
}

impl PeerIdentity {
    /// The identity of the verified chain `certificates` (the client's
    /// own first), as rustls hands it over after a handshake.
    pub fn of(certificates: Option<&[CertificateDer<'_>]>) -> PeerIdentity {
        let common_name = certificates
            .and_then(|chain| chain.first())
            .and_then(|der| common_name(der.as_ref()));
        PeerIdentity { common_name }
    }
}

/// The first CN of the subject of the DER certificate `der`.
fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_owned)
}

/// Why a server config could not be made from the `tls:` files.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("no tls.cert_file and tls.key_file configured")]
    NotConfigured,
    #[error("{key}: cannot read {path}: {source}")]
    Read {
        key: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{key}: {path} is larger than {limit} bytes: not a PEM certificate or key file")]
    TooLarge {
        key: &'static str,
        path: PathBuf,
        limit: u64,
    },
    #[error("{key}: {path} is not usable PEM: {reason}")]
    Pem {
        key: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("{key}: {path}: {reason}")]
    Certificate {
        key: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error(
        "tls.key_file: the key in {key_file} is not the key of the certificate in {cert_file}"
    )]
    KeyMismatch {
        cert_file: PathBuf,
        key_file: PathBuf,
    },
    #[error("tls: cannot set up TLS: {reason}")]
    Setup { reason: String },
}

impl TlsError {
    /// The config key the error is about, for the config's error context.
    pub fn key(&self) -> &'static str {
        match self {
            TlsError::NotConfigured => "tls.cert_file",
            TlsError::Read { key, .. }
            | TlsError::TooLarge { key, .. }
            | TlsError::Pem { key, .. }
            | TlsError::Certificate { key, .. } => key,
            TlsError::KeyMismatch { .. } => "tls.key_file",
            TlsError::Setup { .. } => "tls",
        }
    }
}
