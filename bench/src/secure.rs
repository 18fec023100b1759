//! The load generator's side of TLS and logins (`--security`): how a load
//! connection to a secured listener is made, and the certificates the
//! started servers serve.
//!
//! A [`Secure`] target's connections do a TCP connect and a TLS handshake
//! here (rustls, verifying the server against the bench's own CA); on a
//! Kafka SASL_SSL listener the Kafka client then logs in with SCRAM as
//! librdkafka does (`kafka_client`'s `sasl_login`: SaslHandshake v1, two
//! SaslAuthenticate v2 rounds, the server's signature checked with
//! `tidelog_security::scram::client`). Connections are made once per
//! slice, as the plain ones are, so the phases measure the encrypted
//! traffic; the logins' own cost is the login phase's.
//!
//! [`BenchPki`] makes a CA and a server certificate for 127.0.0.1 with
//! rcgen (ECDSA P-256, as rcgen makes by default and as most deployments
//! now serve) into the started server's temporary dir, so the bench needs
//! no openssl and no files of its own.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use anyhow::{anyhow, Context as _};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, ServerName};
use tidelog_security::scram::Mechanism;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// The SASL mechanism of the bench's logins: the stronger of Kafka's two,
/// what a deployment that takes the trouble would pick.
pub(crate) const MECHANISM: Mechanism = Mechanism::Sha512;
/// The bench's load user and its super user (ACLs, topics).
pub(crate) const LOAD_USER: &str = "bench";
pub(crate) const ADMIN_USER: &str = "bench-admin";

/// How a load connection to a secured listener is made.
pub(crate) struct Secure {
    /// TLS over the TCP connection (not for a plain listener that only
    /// wants a bearer token).
    tls: Option<TlsConnector>,
    /// A SCRAM login after the handshake (a Kafka SASL_SSL listener).
    login: Option<Login>,
    /// `Authorization: Bearer` on every HTTP request (an HTTPS server with
    /// authorization on: the admin token).
    bearer: Option<String>,
}

/// A SCRAM login's user and password.
#[derive(Clone)]
pub(crate) struct Login {
    pub(crate) user: String,
    pub(crate) password: String,
}

impl Secure {
    /// TLS trusting `pki`'s CA, then `login` if given.
    pub(crate) fn new(pki: &BenchPki, login: Option<Login>) -> anyhow::Result<Secure> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(pki.ca_der.clone())
            .context("trusting the bench CA")?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS client versions")?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Secure {
            tls: Some(TlsConnector::from(Arc::new(config))),
            login,
            bearer: None,
        })
    }

    /// Plain HTTP with `Authorization: Bearer token` on every request (the
    /// admin calls to a server with authorization on).
    pub(crate) fn bearer_only(token: &str) -> Secure {
        Secure {
            tls: None,
            login: None,
            bearer: Some(token.to_owned()),
        }
    }

    pub(crate) fn bearer(&self) -> Option<&str> {
        self.bearer.as_deref()
    }

    pub(crate) fn login(&self) -> Option<&Login> {
        self.login.as_ref()
    }
}

/// A load connection's byte stream: plain TCP or TLS over it.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// A TCP connection to `addr` (TCP_NODELAY, bounded), with `secure`'s TLS
/// handshake over it when given. The login, if any, is the protocol's
/// (the Kafka client's SCRAM login).
pub(crate) async fn connect(addr: SocketAddr, secure: Option<&Secure>) -> anyhow::Result<Stream> {
    let tcp = connect_tcp(addr).await?;
    let Some(tls) = secure.and_then(|s| s.tls.as_ref()) else {
        return Ok(Stream::Plain(tcp));
    };
    let name = ServerName::IpAddress(addr.ip().into());
    let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.connect(name, tcp))
        .await
        .map_err(|_| anyhow!("TLS handshake with {addr}: no answer within {HANDSHAKE_TIMEOUT:?}"))?
        .with_context(|| format!("TLS handshake with {addr}"))?;
    Ok(Stream::Tls(Box::new(tls)))
}

const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A TCP connection to `addr` with TCP_NODELAY (a load connection of
/// either protocol), within [`CONNECT_TIMEOUT`].
async fn connect_tcp(addr: SocketAddr) -> anyhow::Result<TcpStream> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| anyhow!("connecting to {addr}: no answer within {CONNECT_TIMEOUT:?}"))?
        .with_context(|| format!("connecting to {addr}"))?;
    stream
        .set_nodelay(true)
        .with_context(|| format!("TCP_NODELAY on the connection to {addr}"))?;
    Ok(stream)
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// A CA and a server certificate for 127.0.0.1 it signed, as PEM files in
/// a folder, with the CA's certificate kept for the clients.
pub(crate) struct BenchPki {
    ca_der: CertificateDer<'static>,
    pub(crate) cert_file: PathBuf,
    pub(crate) key_file: PathBuf,
}

impl BenchPki {
    /// Makes the CA and the server certificate; writes `server.crt` and
    /// `server.key` (owner-only) into `dir`.
    pub(crate) fn create(dir: &Path) -> anyhow::Result<BenchPki> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "tidelog bench CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().context("the bench CA's key")?;
        let ca_cert = ca.self_signed(&ca_key).context("the bench CA")?;
        let issuer = Issuer::new(ca, ca_key);

        let mut server = CertificateParams::new(vec!["127.0.0.1".to_owned()])?;
        server
            .distinguished_name
            .push(DnType::CommonName, "tidelog bench server");
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().context("the bench server's key")?;
        let cert = server
            .signed_by(&key, &issuer)
            .context("the bench server's certificate")?;

        let cert_file = dir.join("server.crt");
        let key_file = dir.join("server.key");
        std::fs::write(&cert_file, cert.pem())
            .with_context(|| format!("writing {}", cert_file.display()))?;
        write_private(&key_file, key.serialize_pem().as_bytes())?;
        Ok(BenchPki {
            ca_der: ca_cert.der().clone(),
            cert_file,
            key_file,
        })
    }
}

/// `bytes` into `path`, readable by the owner only (a key, a password).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}
