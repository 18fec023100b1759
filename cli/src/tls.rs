//! The client's TLS, for an `https://` `--url`: the server's certificate
//! checked against `--ca-file` (the CA that signed it; the server's
//! `tls.cert_file` itself for a self-signed one), and with `--cert-file`
//! and `--key-file` the client's own certificate for a server that asks
//! for one (mTLS; the server then knows the client as `User:<CN>`).
//!
//! rustls over aws-lc-rs, as the server: no system trust store is read,
//! so an `https://` URL without `--ca-file` is a usage error, not a
//! connection to whoever answers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsConnector;

use crate::error::CliError;

/// The largest PEM file read.
const PEM_FILE_BYTES_MAX: u64 = 1 << 20;

/// `--ca-file`, `--cert-file`, `--key-file`.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

impl TlsFiles {
    /// The connector for an `https://` URL.
    pub fn connector(&self) -> Result<TlsConnector, CliError> {
        let Some(ca_file) = &self.ca_file else {
            return Err(CliError::usage(
                "an https:// --url needs --ca-file (the CA that signed the server's certificate)",
            ));
        };
        let mut roots = RootCertStore::empty();
        for ca in certificates("--ca-file", ca_file)? {
            roots
                .add(ca)
                .map_err(|e| CliError::usage(format!("--ca-file {}: {e}", ca_file.display())))?;
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| CliError::usage(format!("TLS: {e}")))?
            .with_root_certificates(roots);
        let config = match (&self.cert_file, &self.key_file) {
            (Some(cert_file), Some(key_file)) => {
                let certs = certificates("--cert-file", cert_file)?;
                let key = private_key(key_file)?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| CliError::usage(format!("--cert-file/--key-file: {e}")))?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(CliError::usage(
                    "--cert-file and --key-file go together (a client certificate and its key)",
                ))
            }
        };
        Ok(TlsConnector::from(Arc::new(config)))
    }
}

fn read(flag: &str, path: &Path) -> Result<Vec<u8>, CliError> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| CliError::usage(format!("{flag} {}: {e}", path.display())))?;
    let mut bytes = Vec::new();
    file.take(PEM_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::usage(format!("{flag} {}: {e}", path.display())))?;
    if bytes.len() as u64 > PEM_FILE_BYTES_MAX {
        return Err(CliError::usage(format!(
            "{flag} {}: larger than {PEM_FILE_BYTES_MAX} bytes, not a PEM file",
            path.display()
        )));
    }
    Ok(bytes)
}

fn certificates(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, CliError> {
    let bytes = read(flag, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::usage(format!("{flag} {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(CliError::usage(format!(
            "{flag} {}: no CERTIFICATE block",
            path.display()
        )));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, CliError> {
    let bytes = read("--key-file", path)?;
    PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|e| CliError::usage(format!("--key-file {}: {e}", path.display())))
}
