//! The `tls` module with real handshakes (rustls on both ends over an
//! in-memory pipe) and certificates made here with rcgen.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls_pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::metrics::MetricFamilies;

/// A CA and what it signs, written as PEM files into a temp dir.
struct Pki {
    dir: tempfile::TempDir,
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "test CA");
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Pki {
            dir: tempfile::tempdir().unwrap(),
            ca_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A certificate for `cn` (and the name `localhost`): (cert PEM, key PEM).
    fn leaf(&self, cn: &str) -> (String, String) {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Server files `server.crt`/`server.key` for a new leaf, `ca.crt`.
    fn server_config(&self, client_auth: Option<ClientAuth>) -> TlsConfig {
        let (cert, key) = self.leaf("server");
        write(&self.path("server.crt"), &cert);
        write(&self.path("server.key"), &key);
        write(&self.path("ca.crt"), &self.ca_pem);
        TlsConfig {
            cert_file: Some(self.path("server.crt")),
            key_file: Some(self.path("server.key")),
            client_ca_file: client_auth.map(|_| self.path("ca.crt")),
            client_auth: client_auth.unwrap_or_default(),
            handshake_timeout_ms: 5_000,
        }
    }

    /// A client trusting this CA, presenting `client` (cert, key) if given.
    fn client(&self, client: Option<&(String, String)>) -> tokio_rustls::TlsConnector {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => builder
                .with_client_auth_cert(
                    vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                    PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
                )
                .unwrap(),
        };
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn peer() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 1))
}

/// One handshake between `acceptor` and `client`, then an echo of a byte
/// both ways: the server's identity of the client, and the certificate
/// the client was shown, or the server's error.
async fn handshake(
    acceptor: &TlsAcceptor,
    client: tokio_rustls::TlsConnector,
) -> Result<(PeerIdentity, CertificateDer<'static>), HandshakeFailed> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let client_side = tokio::spawn(async move {
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = client.connect(name, client_io).await.ok()?;
        let shown = tls.get_ref().1.peer_certificates()?.first()?.clone();
        tls.write_all(b"x").await.ok()?;
        let mut back = [0u8; 1];
        tls.read_exact(&mut back).await.ok()?;
        Some(shown)
    });
    let (mut tls, identity) = acceptor.accept(server_io, "test", peer()).await?;
    let mut byte = [0u8; 1];
    tls.read_exact(&mut byte)
        .await
        .map_err(HandshakeFailed::Failed)?;
    tls.write_all(&byte)
        .await
        .map_err(HandshakeFailed::Failed)?;
    tls.flush().await.map_err(HandshakeFailed::Failed)?;
    let shown = client_side
        .await
        .unwrap()
        .expect("the client side finished");
    Ok((identity, shown))
}

fn der_of(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

#[tokio::test]
async fn a_good_certificate_serves_tls_without_client_certificates() {
    let pki = Pki::new();
    let config = pki.server_config(None);
    assert_eq!(config.validate(), Ok(()));
    let acceptor = TlsAcceptor::load(&config).unwrap();
    let (identity, shown) = handshake(&acceptor, pki.client(None)).await.unwrap();
    assert_eq!(identity, PeerIdentity::default());
    let served = std::fs::read_to_string(pki.path("server.crt")).unwrap();
    assert_eq!(shown, der_of(&served));
}

#[test]
fn bad_files_are_refused_naming_the_file_and_key() {
    let pki = Pki::new();
    let good = pki.server_config(None);

    let mut missing = good.clone();
    missing.cert_file = Some(pki.path("absent.crt"));
    let e = TlsAcceptor::load(&missing).unwrap_err();
    assert!(
        matches!(
            e,
            TlsError::Read {
                key: "tls.cert_file",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("absent.crt"), "{e}");

    write(
        &pki.path("garbage.crt"),
        "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
    );
    let mut garbage = good.clone();
    garbage.cert_file = Some(pki.path("garbage.crt"));
    let e = TlsAcceptor::load(&garbage).unwrap_err();
    assert!(
        matches!(
            e,
            TlsError::Pem {
                key: "tls.cert_file",
                ..
            }
        ),
        "{e}"
    );

    write(&pki.path("empty.pem"), "no PEM here\n");
    let mut no_cert = good.clone();
    no_cert.cert_file = Some(pki.path("empty.pem"));
    assert!(matches!(
        TlsAcceptor::load(&no_cert).unwrap_err(),
        TlsError::Pem {
            key: "tls.cert_file",
            ..
        }
    ));
    let mut no_key = good.clone();
    no_key.key_file = Some(pki.path("empty.pem"));
    let e = TlsAcceptor::load(&no_key).unwrap_err();
    assert!(
        matches!(
            e,
            TlsError::Pem {
                key: "tls.key_file",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.key(), "tls.key_file");

    let big = pki.path("big.pem");
    std::fs::write(&big, vec![b'A'; (load::PEM_FILE_BYTES_MAX + 1) as usize]).unwrap();
    let mut too_large = good.clone();
    too_large.client_ca_file = Some(big);
    assert!(matches!(
        TlsAcceptor::load(&too_large).unwrap_err(),
        TlsError::TooLarge {
            key: "tls.client_ca_file",
            ..
        }
    ));
}

#[test]
fn a_key_of_another_certificate_is_refused() {
    let pki = Pki::new();
    let mut config = pki.server_config(None);
    let (_, other_key) = pki.leaf("other");
    write(&pki.path("other.key"), &other_key);
    config.key_file = Some(pki.path("other.key"));
    let e = TlsAcceptor::load(&config).unwrap_err();
    assert!(matches!(e, TlsError::KeyMismatch { .. }), "{e}");
}

#[test]
fn the_section_is_validated() {
    let pki = Pki::new();
    let good = pki.server_config(Some(ClientAuth::Required));
    assert_eq!(good.validate(), Ok(()));
    assert_eq!(TlsConfig::default().validate(), Ok(()));
    assert!(!TlsConfig::default().enabled());
    let mut no_key = good.clone();
    no_key.key_file = None;
    assert_eq!(no_key.validate().unwrap_err().0, "tls.key_file");
    let ca_only = TlsConfig {
        client_ca_file: good.client_ca_file.clone(),
        ..TlsConfig::default()
    };
    assert_eq!(ca_only.validate().unwrap_err().0, "tls.client_ca_file");
    let mut fast = good.clone();
    fast.handshake_timeout_ms = 1;
    assert_eq!(fast.validate().unwrap_err().0, "tls.handshake_timeout_ms");

    let mut relative = TlsConfig {
        cert_file: Some("certs/server.crt".into()),
        key_file: Some("/abs/server.key".into()),
        ..TlsConfig::default()
    };
    relative.resolve_against(Path::new("/etc/tidelog"));
    assert_eq!(
        relative.cert_file,
        Some("/etc/tidelog/certs/server.crt".into())
    );
    assert_eq!(relative.key_file, Some("/abs/server.key".into()));
}

#[tokio::test]
async fn required_client_auth_refuses_a_client_without_a_certificate_and_names_one_with() {
    let pki = Pki::new();
    let acceptor = TlsAcceptor::load(&pki.server_config(Some(ClientAuth::Required))).unwrap();
    assert!(handshake(&acceptor, pki.client(None)).await.is_err());
    let alice = pki.leaf("alice");
    let (identity, _) = handshake(&acceptor, pki.client(Some(&alice)))
        .await
        .unwrap();
    assert_eq!(identity.common_name.as_deref(), Some("alice"));

    // A certificate from another CA is refused.
    let stranger = Pki::new().leaf("mallory");
    assert!(handshake(&acceptor, pki.client(Some(&stranger)))
        .await
        .is_err());
}

#[tokio::test]
async fn optional_client_auth_serves_both_and_none_asks_for_nothing() {
    let pki = Pki::new();
    let optional = TlsAcceptor::load(&pki.server_config(Some(ClientAuth::Optional))).unwrap();
    let (anonymous, _) = handshake(&optional, pki.client(None)).await.unwrap();
    assert_eq!(anonymous.common_name, None);
    let bob = pki.leaf("bob");
    let (named, _) = handshake(&optional, pki.client(Some(&bob))).await.unwrap();
    assert_eq!(named.common_name.as_deref(), Some("bob"));

    let none = TlsAcceptor::load(&pki.server_config(Some(ClientAuth::None))).unwrap();
    let (unasked, _) = handshake(&none, pki.client(Some(&bob))).await.unwrap();
    assert_eq!(unasked.common_name, None, "no certificate was asked for");
}

#[tokio::test]
async fn a_reload_keeps_the_old_config_on_bad_files_and_takes_a_new_certificate() {
    let pki = Pki::new();
    let config = pki.server_config(None);
    let acceptor = TlsAcceptor::load(&config).unwrap();
    let first = std::fs::read_to_string(pki.path("server.crt")).unwrap();
    let before = acceptor.server_config();

    // A half-written certificate: refused, the old one stays.
    write(&pki.path("server.crt"), "-----BEGIN CERTIFICATE-----\n");
    assert!(acceptor.files_changed());
    assert!(acceptor.reload("test").is_err());
    assert!(Arc::ptr_eq(&before, &acceptor.server_config()));
    assert!(
        !acceptor.files_changed(),
        "a bad file is not retried until it changes"
    );
    let (_, shown) = handshake(&acceptor, pki.client(None)).await.unwrap();
    assert_eq!(shown, der_of(&first));

    // A new pair: the next handshake shows it.
    let (cert, key) = pki.leaf("server-2");
    write(&pki.path("server.key"), &key);
    write(&pki.path("server.crt"), &cert);
    acceptor.reload("test").unwrap();
    let (_, shown) = handshake(&acceptor, pki.client(None)).await.unwrap();
    assert_eq!(shown, der_of(&cert));
    let mut rendered = String::new();
    acceptor.render(&mut rendered);
    assert!(
        rendered.contains("tidelog_tls_reloads_total 1"),
        "{rendered}"
    );
    assert!(
        rendered.contains("tidelog_tls_reloads_failed_total 1"),
        "{rendered}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stalled_or_garbage_handshake_is_closed_and_counted() {
    let pki = Pki::new();
    let acceptor = TlsAcceptor::load(&pki.server_config(None)).unwrap();
    // Nothing sent: the handshake timeout ends it.
    let (_silent, server_io) = tokio::io::duplex(1024);
    let e = acceptor
        .accept(server_io, "test", peer())
        .await
        .unwrap_err();
    assert!(matches!(e, HandshakeFailed::TimedOut(_)), "{e}");
    // Plain HTTP where a ClientHello belongs.
    let (mut client, server_io) = tokio::io::duplex(1024);
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let e = acceptor
        .accept(server_io, "test", peer())
        .await
        .unwrap_err();
    assert!(matches!(e, HandshakeFailed::Failed(_)), "{e}");
    let mut rendered = String::new();
    acceptor.render(&mut rendered);
    assert!(
        rendered.contains("tidelog_tls_handshakes_timed_out_total 1"),
        "{rendered}"
    );
    assert!(
        rendered.contains("tidelog_tls_handshakes_failed_total 1"),
        "{rendered}"
    );
}

/// A node's config: its own certificate (`<cn>.crt`, `<cn>.key`) and the
/// CA both as `client_ca_file`, client certificates required.
fn node_config(pki: &Pki, cn: &str) -> TlsConfig {
    let (cert, key) = pki.leaf(cn);
    write(&pki.path(&format!("{cn}.crt")), &cert);
    write(&pki.path(&format!("{cn}.key")), &key);
    write(&pki.path("ca.crt"), &pki.ca_pem);
    TlsConfig {
        cert_file: Some(pki.path(&format!("{cn}.crt"))),
        key_file: Some(pki.path(&format!("{cn}.key"))),
        client_ca_file: Some(pki.path("ca.crt")),
        client_auth: ClientAuth::Required,
        handshake_timeout_ms: 5_000,
    }
}

#[tokio::test]
async fn a_node_connects_to_another_with_its_own_certificate_and_checks_theirs() {
    let pki = Pki::new();
    let (one, two) = (node_config(&pki, "node1"), node_config(&pki, "node2"));
    let acceptor = TlsAcceptor::load(&one).unwrap();
    let client = tokio_rustls::TlsConnector::from(load::node_client_config(&two).unwrap());
    let (identity, shown) = handshake(&acceptor, client).await.unwrap();
    assert_eq!(identity.common_name.as_deref(), Some("node2"));
    let served = std::fs::read_to_string(pki.path("node1.crt")).unwrap();
    assert_eq!(shown, der_of(&served));

    // A node of another CA is refused by the acceptor, and refuses a
    // server of this one.
    let other = Pki::new();
    let stranger = node_config(&other, "node2");
    let client = tokio_rustls::TlsConnector::from(load::node_client_config(&stranger).unwrap());
    assert!(handshake(&acceptor, client).await.is_err());
}

#[test]
fn a_node_client_needs_the_ca_and_its_own_key() {
    let pki = Pki::new();
    let mut config = node_config(&pki, "node1");
    config.client_ca_file = None;
    assert!(matches!(
        load::node_client_config(&config),
        Err(TlsError::NotConfigured)
    ));
    let mut mismatched = node_config(&pki, "node1");
    node_config(&pki, "node2");
    mismatched.key_file = Some(pki.path("node2.key"));
    assert!(matches!(
        load::node_client_config(&mismatched),
        Err(TlsError::KeyMismatch { .. })
    ));
}
