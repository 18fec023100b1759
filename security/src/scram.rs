//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's
//! KIP-84 serves them: the stored credential, the server's side of the
//! three-message exchange, the password check PLAIN and HTTP Basic make
//! against the same credential, and ([`client`]) the client's side.
//!
//! The primitives are RustCrypto's (`sha2`, `hmac`, `pbkdf2`, and
//! `subtle` for the comparisons); this module only puts them together as
//! the RFC says.
//!
//! Decisions (Kafka's `ScramSaslServer` and `ScramMessages`, where they
//! decide):
//! * No SASLprep of passwords: Kafka's clients and server use a
//!   password's UTF-8 bytes as they are, and so must tidelog, or a
//!   password with such characters would fail from every client.
//! * No channel binding: a client-first message with `p=` is refused; `n`
//!   and `y` are accepted, and the final message's `c=` must be the
//!   base64 of the same GS2 header.
//! * An authorization id, when given, must be the user name (Kafka
//!   refuses a login that asks to act as someone else).
//! * Extensions in the first message are accepted and ignored, but
//!   `tokenauth=true` (a delegation token login) is refused: tidelog has
//!   no delegation tokens.
//! * An unknown user is not told apart from a wrong password: the
//!   exchange goes on with a salt derived from the user name and a secret
//!   of this process, and fails at the proof, as RFC 5802 section 9
//!   advises, so that the server's answers do not list its users.
//! * Every field is bounded before it is decoded: a message of at most
//!   [`MESSAGE_MAX`] bytes, a nonce of at most [`NONCE_MAX`], a user name
//!   of at most [`USERNAME_MAX`], a proof of exactly the hash's length.
//! * Iterations are Kafka's bounds, 4096 ..= 16384.

use std::fmt;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

pub mod client;

/// The fewest iterations a credential may have (Kafka's).
pub const ITERATIONS_MIN: u32 = 4096;
/// The most iterations a credential may have (Kafka's).
pub const ITERATIONS_MAX: u32 = 16384;
/// The longest SCRAM message read.
pub const MESSAGE_MAX: usize = 4096;
/// The longest client nonce accepted.
pub const NONCE_MAX: usize = 256;
/// The longest user name.
pub const USERNAME_MAX: usize = 256;
/// The random bytes of the server's part of the nonce and of a salt.
const RANDOM_BYTES: usize = 24;

/// A SCRAM mechanism, with Kafka's names and its codes in
/// Describe/AlterUserScramCredentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Mechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism of a SASL mechanism name (exactly as clients send it).
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's ScramMechanism code: 1 and 2.
    pub fn code(self) -> i8 {
        match self {
            Mechanism::Sha256 => 1,
            Mechanism::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.code() == code)
    }

    /// The hash's output length: the length of every key and proof.
    pub fn hash_len(self) -> usize {
        match self {
            Mechanism::Sha256 => 32,
            Mechanism::Sha512 => 64,
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
            Mechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn mac<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            let Ok(mut mac) = <M as KeyInit>::new_from_slice(key) else {
                unreachable!("HMAC takes keys of any length")
            };
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Mechanism::Sha256 => mac::<Hmac<Sha256>>(key, data),
            Mechanism::Sha512 => mac::<Hmac<Sha512>>(key, data),
        }
    }

    /// RFC 5802's `Hi(password, salt, i)`: PBKDF2 with this HMAC.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0; self.hash_len()];
        match self {
            Mechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
            }
            Mechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
            }
        }
        out
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the server keeps of a password: never the password, nor the
/// salted password, only the keys derived from it (RFC 5802 section 3).
/// Its `Debug` shows no key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub mechanism: Mechanism,
    #[serde(with = "base64_bytes")]
    pub salt: Vec<u8>,
    pub iterations: u32,
    #[serde(with = "base64_bytes")]
    stored_key: Vec<u8>,
    #[serde(with = "base64_bytes")]
    server_key: Vec<u8>,
}

impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The credential of `password` with a new random salt.
    pub fn from_password(
        mechanism: Mechanism,
        password: &[u8],
        iterations: u32,
    ) -> Result<ScramCredential, ScramError> {
        let salt = random_bytes(RANDOM_BYTES)?;
        let salted = mechanism.salted_password(password, &salt, iterations);
        ScramCredential::from_salted_password(mechanism, salt, &salted, iterations)
    }

    /// The credential a client made itself (Kafka's
    /// AlterUserScramCredentials sends the salt and the salted password,
    /// never the password).
    pub fn from_salted_password(
        mechanism: Mechanism,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: u32,
    ) -> Result<ScramCredential, ScramError> {
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            return Err(ScramError::Iterations { iterations });
        }
        if salt.is_empty() || salt.len() > MESSAGE_MAX {
            return Err(ScramError::Malformed { what: "salt" });
        }
        if salted_password.len() != mechanism.hash_len() {
            return Err(ScramError::Malformed {
                what: "salted password",
            });
        }
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        Ok(ScramCredential {
            mechanism,
            salt,
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
        })
    }

    /// Whether `password` is the one this credential was made from (PLAIN,
    /// HTTP Basic): its keys derived again and compared in constant time.
    /// Costs the credential's iterations of HMAC.
    pub fn verify_password(&self, password: &[u8]) -> bool {
        let salted = self
            .mechanism
            .salted_password(password, &self.salt, self.iterations);
        let client_key = self.mechanism.hmac(&salted, b"Client Key");
        bool::from(self.mechanism.hash(&client_key).ct_eq(&self.stored_key))
    }

    /// Whether the stored keys are whole (a file read from disk).
    pub fn is_well_formed(&self) -> bool {
        let n = self.mechanism.hash_len();
        self.stored_key.len() == n
            && self.server_key.len() == n
            && !self.salt.is_empty()
            && (ITERATIONS_MIN..=ITERATIONS_MAX).contains(&self.iterations)
    }
}

/// Why a SCRAM exchange or a credential is refused. A client is told
/// only that authentication failed (`Display` of these names no secret,
/// but a front-end answers the generic message anyway).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("malformed SCRAM message: {what}")]
    Malformed { what: &'static str },
    #[error("SCRAM message of {len} bytes; at most {MESSAGE_MAX}")]
    TooLong { len: usize },
    #[error("channel binding is not supported")]
    ChannelBinding,
    #[error("the authorization id is not the user name")]
    Authzid,
    #[error("delegation token logins are not supported")]
    TokenAuth,
    #[error("the final message's nonce is not the exchange's")]
    Nonce,
    #[error("the final message's channel binding is not the first message's header")]
    ChannelBindingMismatch,
    #[error("invalid credentials")]
    InvalidCredentials,
    #[error(
        "the server's signature is not this password's: the server does not hold its credential"
    )]
    ServerSignature,
    #[error("{iterations} iterations; between {ITERATIONS_MIN} and {ITERATIONS_MAX}")]
    Iterations { iterations: u32 },
    #[error("no random bytes from the operating system: {reason}")]
    Random { reason: String },
}

/// The server's side of an exchange after the client's first message:
/// holds what the final message is checked against.
pub struct ServerFirst {
    mechanism: Mechanism,
    username: String,
    gs2_header: String,
    nonce: String,
    /// client-first-message-bare "," server-first-message
    auth_prefix: String,
    /// `None` for an unknown user: the proof fails.
    credential: Option<ScramCredential>,
}

impl fmt::Debug for ServerFirst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerFirst")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// A login that succeeded: who, and the server's final message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    pub username: String,
    pub server_final: Vec<u8>,
}

/// Secret of this process for the salts of unknown users (module doc):
/// random once, so the same unknown name gets the same salt every time.
fn unknown_user_secret() -> &'static [u8] {
    static SECRET: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    SECRET.get_or_init(|| random_bytes(32).unwrap_or_else(|_| b"tidelog".to_vec()))
}

impl ServerFirst {
    /// Reads the client's first message and answers the server's first:
    /// `lookup` gives the user's credential for this mechanism, if any.
    pub fn start(
        mechanism: Mechanism,
        client_first: &[u8],
        iterations_for_unknown: u32,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<(ServerFirst, Vec<u8>), ScramError> {
        let server_nonce = B64.encode(random_bytes(RANDOM_BYTES)?);
        Self::start_with_nonce(
            mechanism,
            client_first,
            iterations_for_unknown,
            lookup,
            &server_nonce,
        )
    }

    pub(crate) fn start_with_nonce(
        mechanism: Mechanism,
        client_first: &[u8],
        iterations_for_unknown: u32,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<(ServerFirst, Vec<u8>), ScramError> {
        let text = message_text(client_first)?;
        let first = ClientFirst::parse(text)?;
        let credential = lookup(&first.username).filter(|c| c.mechanism == mechanism);
        let (salt, iterations) = match &credential {
            Some(c) => (c.salt.clone(), c.iterations),
            None => {
                let mut seed = mechanism.name().as_bytes().to_vec();
                seed.extend_from_slice(first.username.as_bytes());
                let salt = mechanism.hmac(unknown_user_secret(), &seed);
                (salt[..RANDOM_BYTES].to_vec(), iterations_for_unknown)
            }
        };
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!("r={nonce},s={},i={iterations}", B64.encode(&salt));
        let auth_prefix = format!("{},{server_first}", first.bare);
        Ok((
            ServerFirst {
                mechanism,
                username: first.username,
                gs2_header: first.gs2_header,
                nonce,
                auth_prefix,
                credential,
            },
            server_first.into_bytes(),
        ))
    }

    /// The user name the client gave (known or not).
    pub fn username(&self) -> &str {
        &self.username
    }

    /// Checks the client's final message: its channel binding, its nonce
    /// and its proof. On success, the server's final message.
    pub fn finish(self, client_final: &[u8]) -> Result<Authenticated, ScramError> {
        let text = message_text(client_final)?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed { what: "proof" })?;
        let mut fields = without_proof.split(',');
        let binding =
            fields
                .next()
                .and_then(|f| f.strip_prefix("c="))
                .ok_or(ScramError::Malformed {
                    what: "channel binding",
                })?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(ScramError::Malformed { what: "nonce" })?;
        let binding = B64.decode(binding).map_err(|_| ScramError::Malformed {
            what: "channel binding",
        })?;
        if binding != self.gs2_header.as_bytes() {
            return Err(ScramError::ChannelBindingMismatch);
        }
        if nonce != self.nonce {
            return Err(ScramError::Nonce);
        }
        let n = self.mechanism.hash_len();
        // A base64 proof of the hash's length is exactly this long.
        if proof.len() != n.div_ceil(3) * 4 {
            return Err(ScramError::Malformed { what: "proof" });
        }
        let proof = B64
            .decode(proof)
            .ok()
            .filter(|p| p.len() == n)
            .ok_or(ScramError::Malformed { what: "proof" })?;
        let Some(credential) = self.credential else {
            return Err(ScramError::InvalidCredentials);
        };
        let auth_message = format!("{},{without_proof}", self.auth_prefix);
        let m = self.mechanism;
        let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        if !bool::from(m.hash(&client_key).ct_eq(&credential.stored_key)) {
            return Err(ScramError::InvalidCredentials);
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        Ok(Authenticated {
            username: self.username,
            server_final: format!("v={}", B64.encode(server_signature)).into_bytes(),
        })
    }
}

/// The client's first message, parsed.
struct ClientFirst<'a> {
    /// `n,,` or `y,,` (with `a=<authzid>` between the commas when given).
    gs2_header: String,
    /// client-first-message-bare: what the auth message is built from.
    bare: &'a str,
    username: String,
    nonce: &'a str,
}

impl<'a> ClientFirst<'a> {
    fn parse(text: &'a str) -> Result<ClientFirst<'a>, ScramError> {
        let (flag, rest) = text
            .split_once(',')
            .ok_or(ScramError::Malformed { what: "gs2 header" })?;
        match flag {
            "n" | "y" => {}
            f if f.starts_with("p=") => return Err(ScramError::ChannelBinding),
            _ => return Err(ScramError::Malformed { what: "gs2 flag" }),
        }
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or(ScramError::Malformed { what: "gs2 header" })?;
        let authzid = match authzid {
            "" => None,
            a => Some(saslname(a.strip_prefix("a=").ok_or(
                ScramError::Malformed {
                    what: "authorization id",
                },
            )?)?),
        };
        let mut fields = bare.split(',');
        let username = fields
            .next()
            .and_then(|f| f.strip_prefix("n="))
            .ok_or(ScramError::Malformed { what: "user name" })
            .and_then(saslname)?;
        if username.is_empty() || username.len() > USERNAME_MAX {
            return Err(ScramError::Malformed { what: "user name" });
        }
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .filter(|n| valid_nonce(n))
            .ok_or(ScramError::Malformed { what: "nonce" })?;
        for extension in fields {
            let (name, value) = extension
                .split_once('=')
                .filter(|(name, _)| !name.is_empty())
                .ok_or(ScramError::Malformed { what: "extension" })?;
            if name == "tokenauth" && value.eq_ignore_ascii_case("true") {
                return Err(ScramError::TokenAuth);
            }
        }
        if authzid.as_ref().is_some_and(|a| *a != username) {
            return Err(ScramError::Authzid);
        }
        Ok(ClientFirst {
            gs2_header: text[..text.len() - bare.len()].to_owned(),
            bare,
            username,
            nonce,
        })
    }
}

/// A nonce: printable ASCII but `,`, at most [`NONCE_MAX`] bytes.
fn valid_nonce(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce.len() <= NONCE_MAX
        && nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// A saslname decoded: `=2C` is `,` and `=3D` is `=`; any other `=` is
/// malformed.
fn saslname(text: &str) -> Result<String, ScramError> {
    let malformed = ScramError::Malformed { what: "saslname" };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(malformed),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    if out.chars().any(char::is_control) {
        return Err(malformed);
    }
    Ok(out)
}

/// A message's text: bounded, UTF-8.
fn message_text(message: &[u8]) -> Result<&str, ScramError> {
    if message.len() > MESSAGE_MAX {
        return Err(ScramError::TooLong { len: message.len() });
    }
    std::str::from_utf8(message).map_err(|_| ScramError::Malformed { what: "UTF-8" })
}

fn random_bytes(n: usize) -> Result<Vec<u8>, ScramError> {
    let mut out = vec![0; n];
    getrandom::fill(&mut out).map_err(|e| ScramError::Random {
        reason: e.to_string(),
    })?;
    Ok(out)
}

/// Keys and salts as base64 in the users file.
mod base64_bytes {
    use base64::engine::general_purpose::STANDARD as B64;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        B64.decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;
