//! The client's side of a SCRAM exchange (RFC 5802 section 3), as
//! librdkafka and the Java client run it against Kafka: what `tidelog
//! bench` logs in with over SASL_SSL, and what the server's own tests
//! check it against.
//!
//! The server's messages are checked as the server checks the client's:
//! bounded, the nonce an extension of this client's, the iterations
//! within Kafka's bounds (a server asking for a billion would otherwise
//! stall the client in PBKDF2), and the server's signature proved before
//! the login counts, so a server that does not hold the credential is
//! caught even when it says yes.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use subtle::ConstantTimeEq;

use super::{
    message_text, random_bytes, Mechanism, ScramError, ITERATIONS_MAX, ITERATIONS_MIN, MESSAGE_MAX,
    RANDOM_BYTES,
};

/// GS2 header of a client without channel binding and authorization id.
const GS2_HEADER: &str = "n,,";

/// A login started: the client-first message was sent; holds what the
/// server's first message is answered with.
pub struct ClientLogin {
    mechanism: Mechanism,
    password: Vec<u8>,
    /// client-first-message-bare: `n=<user>,r=<nonce>`.
    bare: String,
    nonce: String,
}

impl std::fmt::Debug for ClientLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientLogin")
            .field("mechanism", &self.mechanism)
            .finish_non_exhaustive()
    }
}

/// The server signature a login expects in the server's final message.
#[derive(Debug)]
pub struct ExpectedServerFinal {
    server_signature: Vec<u8>,
}

impl ClientLogin {
    /// Starts a login of `username` with `password`: the login and the
    /// client-first message to send.
    pub fn start(
        mechanism: Mechanism,
        username: &str,
        password: &[u8],
    ) -> Result<(ClientLogin, Vec<u8>), ScramError> {
        let nonce = B64.encode(random_bytes(RANDOM_BYTES)?);
        ClientLogin::start_with_nonce(mechanism, username, password, &nonce)
    }

    pub(crate) fn start_with_nonce(
        mechanism: Mechanism,
        username: &str,
        password: &[u8],
        nonce: &str,
    ) -> Result<(ClientLogin, Vec<u8>), ScramError> {
        if username.is_empty() || username.len() > super::USERNAME_MAX {
            return Err(ScramError::Malformed { what: "user name" });
        }
        let bare = format!("n={},r={nonce}", saslname(username));
        let first = format!("{GS2_HEADER}{bare}").into_bytes();
        let login = ClientLogin {
            mechanism,
            password: password.to_vec(),
            bare,
            nonce: nonce.to_owned(),
        };
        Ok((login, first))
    }

    /// Reads the server's first message and answers the client-final
    /// message, with the server signature the server must then prove.
    /// Costs the server's iterations of HMAC.
    pub fn finish(self, server_first: &[u8]) -> Result<(Vec<u8>, ExpectedServerFinal), ScramError> {
        let text = message_text(server_first)?;
        let mut fields = text.split(',');
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .filter(|n| n.len() > self.nonce.len() && n.starts_with(&self.nonce))
            .filter(|n| n.bytes().all(|b| (0x21..=0x7e).contains(&b)))
            .ok_or(ScramError::Nonce)?;
        let salt = fields
            .next()
            .and_then(|f| f.strip_prefix("s="))
            .and_then(|s| B64.decode(s).ok())
            .filter(|s| !s.is_empty() && s.len() <= MESSAGE_MAX)
            .ok_or(ScramError::Malformed { what: "salt" })?;
        let iterations: u32 = fields
            .next()
            .and_then(|f| f.strip_prefix("i="))
            .and_then(|i| i.parse().ok())
            .ok_or(ScramError::Malformed { what: "iterations" })?;
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            return Err(ScramError::Iterations { iterations });
        }
        let m = self.mechanism;
        let salted = m.salted_password(&self.password, &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c={},r={nonce}", B64.encode(GS2_HEADER));
        let auth_message = format!("{},{text},{without_proof}", self.bare);
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = m.hmac(&salted, b"Server Key");
        let expected = ExpectedServerFinal {
            server_signature: m.hmac(&server_key, auth_message.as_bytes()),
        };
        let client_final = format!("{without_proof},p={}", B64.encode(proof));
        Ok((client_final.into_bytes(), expected))
    }
}

impl ExpectedServerFinal {
    /// Checks the server's final message: `v=` with the signature only a
    /// server holding this password's credential can make. An `e=` (the
    /// server's refusal) or another signature is an error.
    pub fn verify(self, server_final: &[u8]) -> Result<(), ScramError> {
        let text = message_text(server_final)?;
        if text.starts_with("e=") {
            return Err(ScramError::InvalidCredentials);
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v).ok())
            .ok_or(ScramError::Malformed {
                what: "server signature",
            })?;
        if bool::from(signature.ct_eq(&self.server_signature)) {
            Ok(())
        } else {
            Err(ScramError::ServerSignature)
        }
    }
}

/// A user name as a saslname: `,` is `=2C` and `=` is `=3D`.
fn saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
