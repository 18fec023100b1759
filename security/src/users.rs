//! The users: each a name with at most one SCRAM credential per
//! mechanism (Kafka's model: a user exists while it has a credential),
//! kept in `<data_dir>/config/users.json`, readable by its owner only
//! (mode 0600: the stored and server keys would let someone pose as the
//! server to a client, though not log in), replaced whole and durably
//! before a change is answered, as the ACL file is.
//!
//! Logins read an immutable snapshot swapped in after each change, so a
//! login never waits for a change, and a deleted user's next login (and,
//! through the front-ends' re-check, its next request) fails.
//!
//! Decisions:
//! * HTTP's `POST` creates a user that does not exist (409 otherwise)
//!   with one credential; `PUT` sets a user's password, replacing every
//!   credential it had (an old password must not stay valid under the
//!   other mechanism). Kafka's AlterUserScramCredentials changes one
//!   mechanism at a time, as Kafka does.
//! * A password check (PLAIN, HTTP Basic) for an unknown user runs
//!   PBKDF2 against a stand-in credential of the default 4096 iterations,
//!   so the time of a refusal does not say whether the user exists (it
//!   can only tell a user made with more iterations apart).
//! * User names: 1 to [`USERNAME_MAX`] bytes, no control characters,
//!   not `*` (its principal would be `User:*`, every user's).
//!   Kafka bounds nothing; SCRAM carries the name in its messages and the
//!   ACLs in `User:<name>`, both bounded.
//! * At most [`USERS_MAX`] users: the file is rewritten on every change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use crate::{Publish, PublishHook};

use serde::{Deserialize, Serialize};

use crate::scram::{Mechanism, ScramCredential, ScramError, ITERATIONS_MIN, USERNAME_MAX};

/// The file's name in the config directory.
pub const USERS_FILE: &str = "users.json";
const USERS_FILE_VERSION: u32 = 1;
/// The most users the store keeps (module doc).
pub const USERS_MAX: usize = 100_000;
/// The largest file read.
const USERS_FILE_MAX_BYTES: u64 = 256 << 20;

/// A user's credentials, one per mechanism at most.
pub type Credentials = BTreeMap<Mechanism, ScramCredential>;

#[derive(Serialize, Deserialize)]
struct UsersFile {
    version: u32,
    users: BTreeMap<String, Vec<ScramCredential>>,
}

/// Why a change to the users is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserError {
    #[error("user name {name:?}: 1 to {USERNAME_MAX} bytes, no control characters, not \"*\"")]
    InvalidName { name: String },
    #[error("user {name:?} exists")]
    Exists { name: String },
    #[error("no user {name:?}")]
    NotFound { name: String },
    #[error("user {name:?} has no {mechanism} credential")]
    NoCredential { name: String, mechanism: Mechanism },
    #[error("the store keeps at most {max} users")]
    TooMany { max: usize },
    #[error("credential refused: {0}")]
    Credential(#[from] ScramError),
    #[error("users file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("writing the users file {path}: {reason}")]
    Write { path: String, reason: String },
}

/// One change of Kafka's AlterUserScramCredentials.
#[derive(Debug, Clone)]
pub enum Alteration {
    Upsert {
        user: String,
        credential: ScramCredential,
    },
    Delete {
        user: String,
        mechanism: Mechanism,
    },
}

impl Alteration {
    pub fn user(&self) -> &str {
        match self {
            Alteration::Upsert { user, .. } | Alteration::Delete { user, .. } => user,
        }
    }
}

/// The users, durable, with the snapshot logins read.
#[derive(Debug)]
pub struct UserStore {
    path: PathBuf,
    /// Held while a change is made: changes are serialised.
    users: Mutex<BTreeMap<String, Credentials>>,
    current: RwLock<Arc<BTreeMap<String, Credentials>>>,
    max_users: usize,
    /// Hands the file's next bytes to the cluster's metadata log before
    /// they are written ([`UserStore::set_publisher`]).
    publish: PublishHook,
}

impl UserStore {
    /// The store of `config_dir` (made if missing), checked whole.
    pub fn open(config_dir: &Path) -> Result<UserStore, UserError> {
        let path = config_dir.join(USERS_FILE);
        let file_err = |reason: String| UserError::File {
            path: path.display().to_string(),
            reason,
        };
        tidelog_storage::fs_util::create_dir_durable(config_dir)
            .map_err(|e| file_err(e.to_string()))?;
        let bytes = tidelog_storage::fs_util::read_small(&path, USERS_FILE_MAX_BYTES)
            .map_err(|e| file_err(e.to_string()))?;
        let users = match bytes {
            None => BTreeMap::new(),
            Some(bytes) => read_users(&bytes).map_err(file_err)?,
        };
        tracing::info!(users = users.len(), path = %path.display(), "users loaded");
        Ok(UserStore {
            path,
            current: RwLock::new(Arc::new(users.clone())),
            users: Mutex::new(users),
            max_users: USERS_MAX,
            publish: PublishHook::default(),
        })
    }

    /// From now on every change hands the file's whole next bytes to
    /// `publish` before writing them, and is refused if it fails (a
    /// cluster's master: the change goes through the CommitLog to the
    /// replicas). Set once; a second call is ignored.
    pub fn set_publisher(&self, publish: Arc<Publish>) {
        self.publish.set(publish);
    }

    /// Replaces the users with a users file's `bytes` from the cluster's
    /// master, checked as [`UserStore::open`] checks the file, written
    /// the way a change writes it (not published: it is the master's
    /// change). Logins see it at once.
    pub fn install(&self, bytes: &[u8]) -> Result<(), UserError> {
        let file_err = |reason: String| UserError::File {
            path: self.path.display().to_string(),
            reason,
        };
        if bytes.len() as u64 > USERS_FILE_MAX_BYTES {
            return Err(file_err(format!(
                "{} bytes, more than the {USERS_FILE_MAX_BYTES} read",
                bytes.len()
            )));
        }
        let next = read_users(bytes).map_err(file_err)?;
        let mut held = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        tidelog_storage::fs_util::write_atomic_private(&self.path, bytes).map_err(|e| {
            UserError::Write {
                path: self.path.display().to_string(),
                reason: e.to_string(),
            }
        })?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next.clone());
        *held = next;
        Ok(())
    }

    fn snapshot(&self) -> Arc<BTreeMap<String, Credentials>> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The user's credential for `mechanism` (a SCRAM login's lookup).
    pub fn credential(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
        self.snapshot().get(user)?.get(&mechanism).cloned()
    }

    /// The credential a password is checked against (the user's first,
    /// by mechanism); `None` for an unknown user.
    pub fn password_credential(&self, user: &str) -> Option<ScramCredential> {
        self.snapshot().get(user)?.values().next().cloned()
    }

    /// Whether `password` is the user's (PLAIN, HTTP Basic); as slow for
    /// an unknown user as for a known one (module doc).
    pub fn verify_password(&self, user: &str, password: &[u8]) -> bool {
        let snapshot = self.snapshot();
        match snapshot.get(user).and_then(|c| c.values().next()) {
            Some(credential) => credential.verify_password(password),
            None => {
                let _ = stand_in().verify_password(password);
                false
            }
        }
    }

    /// Every user with its mechanisms and their iterations, by name.
    pub fn describe(&self) -> Vec<(String, Vec<(Mechanism, u32)>)> {
        self.snapshot()
            .iter()
            .map(|(name, c)| {
                let mechanisms = c.values().map(|c| (c.mechanism, c.iterations)).collect();
                (name.clone(), mechanisms)
            })
            .collect()
    }

    pub fn exists(&self, user: &str) -> bool {
        self.snapshot().contains_key(user)
    }

    /// Creates `user` with one credential (HTTP's `POST`); refused if the
    /// user exists.
    pub fn create(&self, user: &str, credential: ScramCredential) -> Result<(), UserError> {
        check_name(user)?;
        self.change(|users| {
            if users.contains_key(user) {
                return Err(UserError::Exists { name: user.into() });
            }
            users.insert(
                user.to_owned(),
                Credentials::from([(credential.mechanism, credential)]),
            );
            Ok(())
        })
    }

    /// Replaces every credential of `user` with `credential` (HTTP's
    /// `PUT`, a password change).
    pub fn set_password(&self, user: &str, credential: ScramCredential) -> Result<(), UserError> {
        self.change(|users| {
            let credentials = users
                .get_mut(user)
                .ok_or_else(|| UserError::NotFound { name: user.into() })?;
            *credentials = Credentials::from([(credential.mechanism, credential)]);
            Ok(())
        })
    }

    /// Deletes `user` and every credential it had.
    pub fn delete(&self, user: &str) -> Result<(), UserError> {
        self.change(|users| {
            users
                .remove(user)
                .map(|_| ())
                .ok_or_else(|| UserError::NotFound { name: user.into() })
        })
    }

    /// Creates each of `users` that does not exist, with a credential of
    /// each mechanism made from its password (the config's bootstrap
    /// users); an existing user is left as stored. The names created.
    pub fn ensure(
        &self,
        users: &[(String, Vec<u8>)],
        iterations: u32,
    ) -> Result<Vec<String>, UserError> {
        let mut made = Vec::new();
        for (name, password) in users {
            check_name(name)?;
            if self.exists(name) {
                continue;
            }
            let mut credentials = Credentials::new();
            for m in Mechanism::ALL {
                credentials.insert(m, ScramCredential::from_password(m, password, iterations)?);
            }
            self.change(|all| {
                all.entry(name.clone()).or_insert(credentials);
                Ok(())
            })?;
            made.push(name.clone());
        }
        Ok(made)
    }

    /// Kafka's AlterUserScramCredentials: the changes of each user apply
    /// together or not at all, and each user is answered on its own
    /// (in the order users first appear). A user named by two changes of
    /// one mechanism is refused whole, as Kafka refuses it
    /// (DUPLICATE_RESOURCE: [`AlterRefusal::Duplicate`]).
    pub fn alter(&self, changes: Vec<Alteration>) -> Vec<(String, Result<(), AlterRefusal>)> {
        let mut order: Vec<String> = Vec::new();
        let mut by_user: BTreeMap<String, Vec<Alteration>> = BTreeMap::new();
        for change in changes {
            let user = change.user().to_owned();
            if !by_user.contains_key(&user) {
                order.push(user.clone());
            }
            by_user.entry(user).or_default().push(change);
        }
        let mut answers: BTreeMap<String, Result<(), AlterRefusal>> = BTreeMap::new();
        let result = self.change(|users| {
            for (user, changes) in &by_user {
                let answer = apply(users, user, changes, self.max_users);
                answers.insert(user.clone(), answer);
            }
            Ok(())
        });
        if let Err(e) = result {
            for answer in answers.values_mut().filter(|a| a.is_ok()) {
                *answer = Err(AlterRefusal::Store(e.clone()));
            }
        }
        order
            .into_iter()
            .map(|user| {
                let answer = answers.remove(&user).unwrap_or(Err(AlterRefusal::Store(
                    UserError::NotFound { name: user.clone() },
                )));
                (user, answer)
            })
            .collect()
    }

    /// Makes a change on a copy, writes it durably, then makes it what
    /// the store holds and logins read. A change that writes nothing new
    /// writes no file.
    fn change(
        &self,
        f: impl FnOnce(&mut BTreeMap<String, Credentials>) -> Result<(), UserError>,
    ) -> Result<(), UserError> {
        let mut held = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = held.clone();
        f(&mut next)?;
        if next.len() > self.max_users && next.len() > held.len() {
            return Err(UserError::TooMany {
                max: self.max_users,
            });
        }
        if next == *held {
            return Ok(());
        }
        let file = UsersFile {
            version: USERS_FILE_VERSION,
            users: next
                .iter()
                .map(|(name, c)| (name.clone(), c.values().cloned().collect()))
                .collect(),
        };
        let write_err = |reason: String| UserError::Write {
            path: self.path.display().to_string(),
            reason,
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| write_err(e.to_string()))?;
        self.publish.publish(&bytes).map_err(write_err)?;
        tidelog_storage::fs_util::write_atomic_private(&self.path, &bytes)
            .map_err(|e| write_err(e.to_string()))?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next.clone());
        *held = next;
        Ok(())
    }
}

/// The users of a users file's bytes, checked whole; why not.
fn read_users(bytes: &[u8]) -> Result<BTreeMap<String, Credentials>, String> {
    let file: UsersFile =
        serde_json::from_slice(bytes).map_err(|e| format!("not a users file: {e}"))?;
    if file.version != USERS_FILE_VERSION {
        return Err(format!(
            "version {} is not the supported {USERS_FILE_VERSION}",
            file.version
        ));
    }
    if file.users.len() > USERS_MAX {
        return Err(format!(
            "{} users, more than the {USERS_MAX} the store keeps",
            file.users.len()
        ));
    }
    let mut users = BTreeMap::new();
    for (name, list) in file.users {
        check_name(&name).map_err(|e| e.to_string())?;
        let mut credentials = Credentials::new();
        for c in list {
            if !c.is_well_formed() || credentials.contains_key(&c.mechanism) {
                return Err(format!(
                    "user {name:?}: a damaged or repeated {} credential",
                    c.mechanism
                ));
            }
            credentials.insert(c.mechanism, c);
        }
        if credentials.is_empty() {
            return Err(format!("user {name:?} has no credential"));
        }
        users.insert(name, credentials);
    }
    Ok(users)
}

/// Why one user's alterations were refused (Kafka's per-user codes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterRefusal {
    /// Two changes of one mechanism for the user: DUPLICATE_RESOURCE.
    Duplicate { mechanism: Mechanism },
    /// A name that is not one: UNACCEPTABLE_CREDENTIAL.
    InvalidName,
    /// Deleting a credential the user has not: RESOURCE_NOT_FOUND.
    NoCredential { mechanism: Mechanism },
    /// The store could not take it (full, or its write failed).
    Store(UserError),
}

/// One user's changes, all or none.
fn apply(
    users: &mut BTreeMap<String, Credentials>,
    user: &str,
    changes: &[Alteration],
    max_users: usize,
) -> Result<(), AlterRefusal> {
    check_name(user).map_err(|_| AlterRefusal::InvalidName)?;
    let mut seen = Vec::new();
    for change in changes {
        let mechanism = match change {
            Alteration::Upsert { credential, .. } => credential.mechanism,
            Alteration::Delete { mechanism, .. } => *mechanism,
        };
        if seen.contains(&mechanism) {
            return Err(AlterRefusal::Duplicate { mechanism });
        }
        seen.push(mechanism);
    }
    let mut credentials = users.get(user).cloned().unwrap_or_default();
    for change in changes {
        match change {
            Alteration::Upsert { credential, .. } => {
                credentials.insert(credential.mechanism, credential.clone());
            }
            Alteration::Delete { mechanism, .. } => {
                credentials
                    .remove(mechanism)
                    .ok_or(AlterRefusal::NoCredential {
                        mechanism: *mechanism,
                    })?;
            }
        }
    }
    if credentials.is_empty() {
        users.remove(user);
    } else {
        if !users.contains_key(user) && users.len() >= max_users {
            return Err(AlterRefusal::Store(UserError::TooMany { max: max_users }));
        }
        users.insert(user.to_owned(), credentials);
    }
    Ok(())
}

/// 1 to [`USERNAME_MAX`] bytes, no control characters, and not `*`: a
/// user so named would be `User:*`, the principal of ACLs for every user.
pub fn check_name(name: &str) -> Result<(), UserError> {
    if name.is_empty()
        || name == "*"
        || name.len() > USERNAME_MAX
        || name.chars().any(char::is_control)
    {
        let mut shown: String = name.chars().take(64).collect();
        if shown.len() < name.len() {
            shown.push_str("...");
        }
        return Err(UserError::InvalidName { name: shown });
    }
    Ok(())
}

/// The credential an unknown user's password is checked against, so the
/// check takes as long as a known user's (module doc).
fn stand_in() -> &'static ScramCredential {
    static STAND_IN: OnceLock<ScramCredential> = OnceLock::new();
    STAND_IN.get_or_init(|| {
        let m = Mechanism::Sha512;
        ScramCredential::from_salted_password(
            m,
            vec![0; 24],
            &vec![0; m.hash_len()],
            ITERATIONS_MIN,
        )
        .unwrap_or_else(|_| unreachable!("a well-formed stand-in"))
    })
}

#[cfg(test)]
#[path = "users_tests.rs"]
mod tests;
