//! Certificates for the TLS tests, made on the fly with rcgen: a CA, the
//! server's certificate (for `localhost` and `127.0.0.1`) and client
//! certificates, written as PEM files into a temporary folder, as an
//! operator would deploy them beside broker.yaml.
//!
//! Every certificate carries the extensions strict verifiers want
//! (OpenSSL's X509_STRICT in Python 3.13, webpki): key usages, extended
//! key usage, authority key identifier.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A CA and the files of what it signed.
pub struct TestPki {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
}

impl TestPki {
    /// A new CA (`ca.crt`) and a server certificate signed by it
    /// (`server.crt`, `server.key`).
    pub fn new() -> TestPki {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "tidelog test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        let pki = TestPki {
            dir: tempfile::tempdir().expect("temp dir"),
            issuer: Issuer::new(params, key),
        };
        std::fs::write(pki.path("ca.crt"), cert.pem()).expect("write ca.crt");
        pki.rotate_server("tidelog server");
        pki
    }

    /// `<folder>/<name>`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The folder the files are in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A new server certificate (subject CN `cn`) and key written over
    /// `server.crt` and `server.key` (key first, each through a rename, as
    /// a rotation tool would); returns the certificate's PEM.
    pub fn rotate_server(&self, cn: &str) -> String {
        let (cert, key) = self.leaf(
            cn,
            vec!["localhost".into(), "127.0.0.1".into()],
            &[ExtendedKeyUsagePurpose::ServerAuth],
        );
        self.replace("server.key", &key);
        self.replace("server.crt", &cert);
        cert
    }

    /// A new server certificate (subject CN `cn`) and key written as
    /// `next.crt` and `next.key`, for a client script to rename over
    /// the served ones.
    pub fn next_server(&self, cn: &str) {
        let (cert, key) = self.leaf(
            cn,
            vec!["localhost".into(), "127.0.0.1".into()],
            &[ExtendedKeyUsagePurpose::ServerAuth],
        );
        std::fs::write(self.path("next.key"), key).expect("write next.key");
        std::fs::write(self.path("next.crt"), cert).expect("write next.crt");
    }

    /// A client certificate for `cn`, written as `<cn>.crt` and `<cn>.key`.
    pub fn client(&self, cn: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = self.leaf(cn, Vec::new(), &[ExtendedKeyUsagePurpose::ClientAuth]);
        let (cert_path, key_path) = (
            self.path(&format!("{cn}.crt")),
            self.path(&format!("{cn}.key")),
        );
        std::fs::write(&cert_path, cert).expect("write client certificate");
        std::fs::write(&key_path, key).expect("write client key");
        (cert_path, key_path)
    }

    /// A cluster node's certificate for `cn` (`localhost`, `127.0.0.1`),
    /// good as a server's and as a client's (a node is both to the
    /// others), written as `<cn>.crt` and `<cn>.key`.
    pub fn node(&self, cn: &str) -> (PathBuf, PathBuf) {
        self.node_in(cn, cn)
    }

    /// [`TestPki::node`] for `cn`, written over `<file>.crt` and
    /// `<file>.key` (key first, each through a rename, as a rotation
    /// tool would).
    pub fn node_in(&self, file: &str, cn: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = self.leaf(
            cn,
            vec!["localhost".into(), "127.0.0.1".into()],
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        );
        let (cert_name, key_name) = (format!("{file}.crt"), format!("{file}.key"));
        self.replace(&key_name, &key);
        self.replace(&cert_name, &cert);
        (self.path(&cert_name), self.path(&key_name))
    }

    /// The `tls:` section naming these files.
    pub fn tls_section(&self, client_auth: Option<&str>) -> String {
        let mut section = format!(
            "tls:\n  cert_file: {}\n  key_file: {}\n  handshake_timeout_ms: 2000\n",
            self.path("server.crt").display(),
            self.path("server.key").display()
        );
        if let Some(mode) = client_auth {
            section.push_str(&format!(
                "  client_ca_file: {}\n  client_auth: {mode}\n",
                self.path("ca.crt").display()
            ));
        }
        section
    }

    fn leaf(
        &self,
        cn: &str,
        names: Vec<String>,
        purpose: &[ExtendedKeyUsagePurpose],
    ) -> (String, String) {
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = purpose.to_vec();
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().expect("leaf key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("leaf certificate");
        (cert.pem(), key.serialize_pem())
    }

    fn replace(&self, name: &str, text: &str) {
        let partial = self.path(&format!("{name}.new"));
        std::fs::write(&partial, text).expect("write the new file");
        std::fs::rename(&partial, self.path(name)).expect("rename over the old file");
    }
}

impl Default for TestPki {
    fn default() -> Self {
        TestPki::new()
    }
}
