//! From the `tls:` files to a `rustls::ServerConfig`: bounded reads,
//! PEM decoding with `rustls-pki-types`' `PemObject`, the key checked
//! against the certificate, client certificates verified by webpki
//! against `client_ca_file`.
//!
//! Invariants: a file larger than [`PEM_FILE_BYTES_MAX`] is refused
//! before it is read whole; every error names the file and its key; TLS
//! 1.2 and 1.3 only, with the aws-lc-rs provider (the one already built
//! for the S3 client).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::config::{ClientAuth, TlsConfig};
use super::TlsError;

/// Largest PEM file read: a chain of a few certificates or a CA bundle is
/// tens of KiB; anything past this is not a certificate file.
pub const PEM_FILE_BYTES_MAX: u64 = 1 << 20;

/// The protocol versions offered.
static VERSIONS: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// The server config `config`'s files describe (their current content).
pub fn server_config(config: &TlsConfig) -> Result<Arc<ServerConfig>, TlsError> {
    let (Some(cert_file), Some(key_file)) = (&config.cert_file, &config.key_file) else {
        return Err(TlsError::NotConfigured);
    };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let certs = certificates("tls.cert_file", cert_file)?;
    let key = private_key(key_file)?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(VERSIONS)
        .map_err(|e| TlsError::Setup {
            reason: e.to_string(),
        })?;
    let builder = match (&config.client_ca_file, config.client_auth) {
        (Some(ca_file), ClientAuth::Optional | ClientAuth::Required) => {
            let roots = ca_roots(ca_file)?;
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider));
            let verifier = if config.client_auth == ClientAuth::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier.build().map_err(|e| TlsError::Certificate {
                key: "tls.client_ca_file",
                path: ca_file.clone(),
                reason: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let server = builder
        .with_single_cert(certs, key)
        .map_err(|e| key_refused(e, cert_file, key_file))?;
    Ok(Arc::new(server))
}

/// rustls' refusal of the certificate and key of `cert_file` and
/// `key_file`, as the error naming them.
fn key_refused(e: rustls::Error, cert_file: &Path, key_file: &Path) -> TlsError {
    match e {
        rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
        },
        other => TlsError::Certificate {
            key: "tls.key_file",
            path: key_file.to_path_buf(),
            reason: other.to_string(),
        },
    }
}

/// The client side of the node's own identity, for the connections a
/// cluster's nodes make to each other (replication, forwarded HTTP
/// requests; docs/CLUSTER.md "Security"): the node's certificate and key
/// (`tls.cert_file`, `tls.key_file`) presented as its client
/// certificate, and the other node's server certificate verified against
/// `tls.client_ca_file` (the CA that signs the nodes' certificates) and
/// the name or address it is reached by. The files' current content:
/// build one per connection, or again after a rotation.
pub fn node_client_config(config: &TlsConfig) -> Result<Arc<ClientConfig>, TlsError> {
    let (Some(cert_file), Some(key_file), Some(ca_file)) =
        (&config.cert_file, &config.key_file, &config.client_ca_file)
    else {
        return Err(TlsError::NotConfigured);
    };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let roots = ca_roots(ca_file)?;
    let certs = certificates("tls.cert_file", cert_file)?;
    let key = private_key(key_file)?;
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(VERSIONS)
        .map_err(|e| TlsError::Setup {
            reason: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .map_err(|e| key_refused(e, cert_file, key_file))?;
    Ok(Arc::new(client))
}

/// The CA certificates of `ca_file` (`tls.client_ca_file`) as trust roots.
fn ca_roots(ca_file: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for ca in certificates("tls.client_ca_file", ca_file)? {
        roots.add(ca).map_err(|e| TlsError::Certificate {
            key: "tls.client_ca_file",
            path: ca_file.to_path_buf(),
            reason: e.to_string(),
        })?;
    }
    Ok(roots)
}

/// Every certificate of the PEM file at `path` (at least one).
fn certificates(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_bounded(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            key,
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            key,
            path: path.to_path_buf(),
            reason: "no CERTIFICATE block".into(),
        });
    }
    Ok(certs)
}

/// The first private key of the PEM file at `path`.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let key = "tls.key_file";
    let bytes = read_bounded(key, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Pem {
        key,
        path: path.to_path_buf(),
        reason: match e {
            rustls_pki_types::pem::Error::NoItemsFound => {
                "no PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block".into()
            }
            other => other.to_string(),
        },
    })
}

/// The file's bytes, refused past [`PEM_FILE_BYTES_MAX`].
fn read_bounded(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let io = |source| TlsError::Read {
        key,
        path: PathBuf::from(path),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(PEM_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > PEM_FILE_BYTES_MAX {
        return Err(TlsError::TooLarge {
            key,
            path: path.to_path_buf(),
            limit: PEM_FILE_BYTES_MAX,
        });
    }
    Ok(bytes)
}
