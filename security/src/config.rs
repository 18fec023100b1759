//! The `security:` section of the broker's config: who must log in, who
//! is checked against ACLs, the super users, the bootstrap users and the
//! protected-mode switch. Its defaults are the loopback tour's: nothing
//! asked of anyone.
//!
//! Invariants:
//! * [`SecurityConfig::validate`] is the one check, run by the server's
//!   config loader and again by the broker when it opens, so
//!   `check-config` and `serve` accept and refuse the same files.
//! * A bootstrap user's password is read from its file when the broker
//!   opens ([`BootstrapUser::password`]), never kept in the config value,
//!   so the effective config printed by `check-config` holds no secret.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::acl::AuthorizerConfig;
use crate::scram::{ITERATIONS_MAX, ITERATIONS_MIN};
use crate::users::check_name;

/// The largest password file read (a password is a line).
const PASSWORD_FILE_MAX_BYTES: u64 = 4096;
/// The longest failed-login delay accepted: longer holds a connection
/// slot for nothing.
pub const FAILED_AUTH_DELAY_MAX_MS: u64 = 10_000;

/// `security:` (module doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityConfig {
    /// Every HTTP request needs a user (Basic, or a verified client
    /// certificate), `/status/ready` and `/metrics` aside; Kafka
    /// PLAINTEXT listeners then refuse every API but ApiVersions.
    pub authentication: bool,
    /// Every operation is checked against the ACLs.
    pub authorization: bool,
    /// User names that pass every ACL check.
    pub super_users: Vec<String>,
    /// The answer for a resource no ACL names.
    pub allow_everyone_if_no_acl_found: bool,
    /// PBKDF2 iterations of a credential made from a password.
    pub scram_iterations: u32,
    /// Created at start when absent; an existing user is left as stored.
    pub users: Vec<BootstrapUser>,
    /// A failed login is answered after this delay.
    pub failed_auth_delay_ms: u64,
    /// Protected mode's way out: a non-loopback listener may serve with
    /// nothing on it authenticating.
    pub allow_unauthenticated_remote: bool,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            authentication: false,
            authorization: false,
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: false,
            scram_iterations: ITERATIONS_MIN,
            users: Vec::new(),
            failed_auth_delay_ms: 100,
            allow_unauthenticated_remote: false,
        }
    }
}

/// A user the config creates at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BootstrapUser {
    pub name: String,
    /// The file whose whole content (a trailing newline dropped) is the
    /// password; relative paths are the config file's folder's (the
    /// server's loader makes them absolute).
    pub password_file: PathBuf,
}

/// A refused `security:` value: the key below `security.` and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct InvalidSecurity {
    pub key: String,
    pub reason: String,
}

impl SecurityConfig {
    /// The section's one check (module doc).
    pub fn validate(&self) -> Result<(), InvalidSecurity> {
        let invalid = |key: String, reason: String| Err(InvalidSecurity { key, reason });
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&self.scram_iterations) {
            return invalid(
                "scram_iterations".into(),
                format!(
                    "{} is not in {ITERATIONS_MIN}..={ITERATIONS_MAX}",
                    self.scram_iterations
                ),
            );
        }
        if self.failed_auth_delay_ms > FAILED_AUTH_DELAY_MAX_MS {
            return invalid(
                "failed_auth_delay_ms".into(),
                format!(
                    "{} is more than {FAILED_AUTH_DELAY_MAX_MS}",
                    self.failed_auth_delay_ms
                ),
            );
        }
        for (i, name) in self.super_users.iter().enumerate() {
            if let Err(e) = check_name(name) {
                return invalid(format!("super_users[{i}]"), e.to_string());
            }
        }
        let mut seen = HashSet::new();
        for (i, user) in self.users.iter().enumerate() {
            if let Err(e) = check_name(&user.name) {
                return invalid(format!("users[{i}].name"), e.to_string());
            }
            if !seen.insert(user.name.as_str()) {
                return invalid(
                    format!("users[{i}].name"),
                    format!("user {:?} is listed twice", user.name),
                );
            }
            if user.password_file.as_os_str().is_empty() {
                return invalid(
                    format!("users[{i}].password_file"),
                    "must name a file".into(),
                );
            }
        }
        Ok(())
    }

    /// The ACL decision's part of the section: super users as principals.
    pub fn authorizer_config(&self) -> AuthorizerConfig {
        AuthorizerConfig {
            super_users: self
                .super_users
                .iter()
                .map(|name| format!("User:{name}"))
                .collect(),
            allow_everyone_if_no_acl_found: self.allow_everyone_if_no_acl_found,
        }
    }

    /// Makes every bootstrap user's relative `password_file` relative to
    /// `base` (the config file's folder).
    pub fn resolve_paths(&mut self, base: &Path) {
        for user in &mut self.users {
            if user.password_file.is_relative() {
                user.password_file = base.join(&user.password_file);
            }
        }
    }
}

impl BootstrapUser {
    /// The password: the file's whole content, one trailing newline (`\n`
    /// or `\r\n`) dropped. An empty password is refused.
    pub fn password(&self) -> Result<Vec<u8>, InvalidSecurity> {
        let refused = |reason: String| InvalidSecurity {
            key: format!("users[{}].password_file", self.name),
            reason,
        };
        let bytes =
            tidelog_storage::fs_util::read_small(&self.password_file, PASSWORD_FILE_MAX_BYTES)
                .map_err(|e| refused(format!("{}: {e}", self.password_file.display())))?
                .ok_or_else(|| {
                    refused(format!("{}: no such file", self.password_file.display()))
                })?;
        let mut password = bytes;
        if password.last() == Some(&b'\n') {
            password.pop();
            if password.last() == Some(&b'\r') {
                password.pop();
            }
        }
        if password.is_empty() {
            return Err(refused(format!(
                "{} is empty",
                self.password_file.display()
            )));
        }
        Ok(password)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_ask_nothing_and_pass() {
        let config = SecurityConfig::default();
        assert!(!config.authentication && !config.authorization);
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn bad_values_name_their_key() {
        let config = SecurityConfig {
            scram_iterations: 100,
            ..SecurityConfig::default()
        };
        assert_eq!(config.validate().unwrap_err().key, "scram_iterations");
        let user = |name: &str| BootstrapUser {
            name: name.into(),
            password_file: "p".into(),
        };
        let config = SecurityConfig {
            users: vec![user("a"), user("a")],
            ..SecurityConfig::default()
        };
        assert_eq!(config.validate().unwrap_err().key, "users[1].name");
        let config = SecurityConfig {
            super_users: vec!["*".into()],
            ..SecurityConfig::default()
        };
        assert_eq!(config.validate().unwrap_err().key, "super_users[0]");
    }

    #[test]
    fn a_password_file_loses_one_trailing_newline_only() {
        let dir = tempfile::tempdir().unwrap();
        let user = BootstrapUser {
            name: "admin".into(),
            password_file: "admin.password".into(),
        };
        let mut config = SecurityConfig {
            users: vec![user],
            ..SecurityConfig::default()
        };
        config.resolve_paths(dir.path());
        let user = &config.users[0];
        assert!(user.password().is_err(), "a missing file is refused");
        std::fs::write(&user.password_file, "s3cret\r\n").unwrap();
        assert_eq!(user.password().unwrap(), b"s3cret");
        std::fs::write(&user.password_file, "s3cret \n\n").unwrap();
        assert_eq!(user.password().unwrap(), b"s3cret \n");
        std::fs::write(&user.password_file, "\n").unwrap();
        assert!(user.password().is_err(), "an empty password is refused");
    }
}
