//! Passwords recently verified, so HTTP Basic does not pay PBKDF2 on
//! every request.
//!
//! A password check derives the credential's key again: 4096 or more
//! HMAC rounds, milliseconds of CPU. A PLAIN login pays that once per
//! connection, but HTTP Basic sends the password with every request, so
//! without this each produce would cost more than the produce itself.
//!
//! Invariants:
//! * What is kept is not the password: an HMAC of it under a key made at
//!   random when the process starts (never written anywhere), with the
//!   credential it was verified against. An entry answers only for the
//!   same password against the same credential: a password change (a new
//!   salt and keys) or a deleted user misses, and the full check runs.
//! * Bounded: at most [`VERIFIED_MAX`] entries; when full it is cleared
//!   (a few checks pay PBKDF2 again).
//! * Only successes are kept: a wrong password always pays the full
//!   check (and the front-end's failed-login delay).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use hmac::{KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::scram::ScramCredential;

/// Entries kept at most (module doc).
pub const VERIFIED_MAX: usize = 10_000;

/// The cache (module doc).
#[derive(Debug, Default)]
pub struct VerifiedPasswords {
    entries: Mutex<HashMap<String, Entry>>,
}

#[derive(Debug)]
struct Entry {
    tag: [u8; 32],
    credential: ScramCredential,
}

/// The process's key for the tags (module doc).
fn key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        // Without randomness the cache stays unused: `tag` answers None.
        if getrandom::fill(&mut key).is_err() {
            key = [0; 32];
        }
        key
    })
}

/// The tag of `password` for `user`; `None` if the process has no key.
fn tag(user: &str, password: &[u8]) -> Option<[u8; 32]> {
    let key = key();
    if key == &[0; 32] {
        return None;
    }
    let mut mac = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(key).ok()?;
    mac.update(user.as_bytes());
    mac.update(&[0]);
    mac.update(password);
    Some(mac.finalize().into_bytes().into())
}

impl VerifiedPasswords {
    /// Whether `password` was verified for `user` against `credential`,
    /// the user's credential now.
    pub fn contains(&self, user: &str, password: &[u8], credential: &ScramCredential) -> bool {
        let Some(tag) = tag(user, password) else {
            return false;
        };
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(user)
            .is_some_and(|e| bool::from(e.tag.ct_eq(&tag)) && e.credential == *credential)
    }

    /// Notes that `password` is `user`'s under `credential`.
    pub fn insert(&self, user: &str, password: &[u8], credential: &ScramCredential) {
        let Some(tag) = tag(user, password) else {
            return;
        };
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= VERIFIED_MAX && !entries.contains_key(user) {
            entries.clear();
        }
        entries.insert(
            user.to_owned(),
            Entry {
                tag,
                credential: credential.clone(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scram::Mechanism;

    #[test]
    fn only_the_same_password_against_the_same_credential_hits() {
        let cache = VerifiedPasswords::default();
        let c1 = ScramCredential::from_password(Mechanism::Sha256, b"pw", 4096).unwrap();
        let c2 = ScramCredential::from_password(Mechanism::Sha256, b"pw", 4096).unwrap();
        assert!(!cache.contains("u", b"pw", &c1));
        cache.insert("u", b"pw", &c1);
        assert!(cache.contains("u", b"pw", &c1));
        assert!(!cache.contains("u", b"other", &c1), "another password");
        assert!(!cache.contains("v", b"pw", &c1), "another user");
        assert!(
            !cache.contains("u", b"pw", &c2),
            "the password was set again"
        );
    }
}
