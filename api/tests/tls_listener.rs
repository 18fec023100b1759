//! The HTTP listener over TLS (`http.tls`): a request carries its
//! client certificate's identity (`PeerIdentity`) in its extensions, for
//! the authentication layer; one without a certificate carries an
//! identity without a CN; a plain listener carries none.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::{Extension, Router};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tidelog_api::listener::{serve, ListenerLimits};
use tidelog_api::{ApiSettings, AppState};
use tidelog_runtime::tls::{ClientAuth, PeerIdentity, TlsAcceptor, TlsConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const LIMITS: ListenerLimits = ListenerLimits {
    max_connections: 16,
    header_read_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(10),
    write_timeout: Duration::from_secs(10),
};

/// Answers who the listener says the client is.
async fn whoami(identity: Option<Extension<PeerIdentity>>) -> String {
    match identity {
        None => "plain".into(),
        Some(Extension(PeerIdentity { common_name: None })) => "no certificate".into(),
        Some(Extension(PeerIdentity {
            common_name: Some(cn),
        })) => format!("CN={cn}"),
    }
}

struct Pki {
    dir: tempfile::TempDir,
    ca: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "CA");
        let key = KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap().pem();
        Pki {
            dir: tempfile::tempdir().unwrap(),
            ca,
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(&self, cn: &str) -> (String, String) {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn acceptor(&self) -> Arc<TlsAcceptor> {
        let (cert, key) = self.leaf("server");
        let path = |name: &str| self.dir.path().join(name);
        std::fs::write(path("server.crt"), cert).unwrap();
        std::fs::write(path("server.key"), key).unwrap();
        std::fs::write(path("ca.crt"), &self.ca).unwrap();
        TlsAcceptor::load(&TlsConfig {
            cert_file: Some(path("server.crt")),
            key_file: Some(path("server.key")),
            client_ca_file: Some(path("ca.crt")),
            client_auth: ClientAuth::Optional,
            ..TlsConfig::default()
        })
        .unwrap()
    }

    fn client(&self, certificate: Option<&(String, String)>) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca.as_bytes()).unwrap())
            .unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match certificate {
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

/// A listener serving `/whoami`, with `tls` or plain.
async fn start(tls: Option<Arc<TlsAcceptor>>) -> (SocketAddr, tokio::sync::watch::Sender<bool>) {
    let dir = tempfile::tempdir().unwrap();
    let state = AppState::new(ApiSettings::default(), dir.path().to_path_buf());
    let app = Router::new().route("/whoami", get(whoami));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(serve(listener, app, state, LIMITS, tls, stop_rx));
    (addr, stop)
}

/// `GET /whoami` on `stream`; the answer's body.
async fn ask<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) -> String {
    stream
        .write_all(b"GET /whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap_or_default();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn requests_carry_the_tls_peer_identity() {
    let pki = Pki::new();
    let (addr, _stop) = start(Some(pki.acceptor())).await;
    let name = ServerName::try_from("localhost").unwrap();
    let alice = pki.leaf("alice");
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = pki
        .client(Some(&alice))
        .connect(name.clone(), tcp)
        .await
        .unwrap();
    assert_eq!(ask(tls).await, "CN=alice");
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = pki.client(None).connect(name, tcp).await.unwrap();
    assert_eq!(ask(tls).await, "no certificate");

    let (plain, _stop_plain) = start(None).await;
    let tcp = tokio::net::TcpStream::connect(plain).await.unwrap();
    assert_eq!(ask(tcp).await, "plain");
}
