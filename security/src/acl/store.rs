//! Where the ACLs are kept: `<data_dir>/config/acls.json`, replaced
//! whole and durably (written to a temporary file, fsynced, renamed, the
//! directory fsynced) before a change is answered, so a change that was
//! answered survives `kill -9` and power loss, and a crash mid-change
//! leaves the old file or the new one, never a mix.
//!
//! Checks never wait for a change: they read the current
//! [`Authorizer`] (an `Arc` swapped under a short lock once the new file
//! is durable); changes are serialised among themselves.
//!
//! Decisions:
//! * Creating an ACL that exists is a success that changes nothing
//!   (Kafka's CreateAcls is idempotent).
//! * DeleteAcls answers, per filter, every ACL it matched, also one that
//!   an earlier filter of the same request matched (Kafka does the same);
//!   each is removed once.
//! * At most [`ACLS_MAX`] ACLs: the file is rewritten on every change,
//!   and a client allowed to create ACLs should not be able to make that
//!   unbounded. Kafka has no such bound; no deployment needs this many
//!   (prefixed patterns and `User:*` exist for that).
//! * A damaged or unreadable file refuses the start, naming the file: a
//!   server that silently dropped its ACLs could allow what they deny.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::{Publish, PublishHook};

use serde::{Deserialize, Serialize};

use super::index::{Authorizer, AuthorizerConfig};
use super::model::{AclBinding, AclError, AclFilter};

/// The file's name in the config directory.
pub const ACL_FILE: &str = "acls.json";
/// The file's format version.
const ACL_FILE_VERSION: u32 = 1;
/// The most ACLs the store keeps (module doc).
pub const ACLS_MAX: usize = 100_000;
/// The largest file the store reads: [`ACLS_MAX`] ACLs of the longest
/// names fit well within it.
const ACL_FILE_MAX_BYTES: u64 = 256 << 20;

#[derive(Serialize, Deserialize)]
struct AclFile {
    version: u32,
    acls: Vec<AclBinding>,
}

/// The ACLs, durable, with the index checks read.
#[derive(Debug)]
pub struct AclStore {
    path: PathBuf,
    /// The ACLs as the file holds them; held while a change is made, so
    /// changes are serialised.
    acls: Mutex<BTreeSet<AclBinding>>,
    current: RwLock<Arc<Authorizer>>,
    /// [`ACLS_MAX`]; smaller in tests.
    max_acls: usize,
    /// Hands the file's next bytes to the cluster's metadata log before
    /// they are written ([`AclStore::set_publisher`]).
    publish: PublishHook,
}

/// One creation's answer.
pub type Created = Result<(), AclError>;

impl AclStore {
    /// The store of `config_dir` (made if missing), checked whole.
    pub fn open(config_dir: &Path, config: AuthorizerConfig) -> Result<AclStore, AclError> {
        let path = config_dir.join(ACL_FILE);
        let file_err = |reason: String| AclError::File {
            path: path.display().to_string(),
            reason,
        };
        tidelog_storage::fs_util::create_dir_durable(config_dir)
            .map_err(|e| file_err(e.to_string()))?;
        let bytes = tidelog_storage::fs_util::read_small(&path, ACL_FILE_MAX_BYTES)
            .map_err(|e| file_err(e.to_string()))?;
        let acls = match bytes {
            None => BTreeSet::new(),
            Some(bytes) => read_acls(&bytes).map_err(file_err)?,
        };
        let current = Arc::new(Authorizer::new(config, &acls));
        tracing::info!(acls = acls.len(), path = %path.display(), "ACLs loaded");
        Ok(AclStore {
            path,
            acls: Mutex::new(acls),
            current: RwLock::new(current),
            max_acls: ACLS_MAX,
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

    /// Replaces the ACLs with an ACL file's `bytes` from the cluster's
    /// master, checked as [`AclStore::open`] checks the file, written the
    /// way a change writes it (not published: it is the master's change).
    /// Checks read the new ACLs at once.
    pub fn install(&self, bytes: &[u8]) -> Result<(), AclError> {
        let file_err = |reason: String| AclError::File {
            path: self.path.display().to_string(),
            reason,
        };
        if bytes.len() as u64 > ACL_FILE_MAX_BYTES {
            return Err(file_err(format!(
                "{} bytes, more than the {ACL_FILE_MAX_BYTES} read",
                bytes.len()
            )));
        }
        let next = read_acls(bytes).map_err(file_err)?;
        let mut held = self.acls.lock().unwrap_or_else(PoisonError::into_inner);
        tidelog_storage::fs_util::write_atomic(&self.path, bytes).map_err(|e| AclError::Write {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        })?;
        let config = self.authorizer().config().clone();
        let index = Arc::new(Authorizer::new(config, &next));
        *held = next;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = index;
        Ok(())
    }

    /// The index every check reads; a later change does not alter it.
    pub fn authorizer(&self) -> Arc<Authorizer> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Creates `acls`, each answered on its own: an invalid one is
    /// refused and the rest created. Durable before it answers; a failed
    /// write refuses every valid one of them and changes nothing.
    pub fn create(&self, acls: Vec<AclBinding>) -> Vec<Created> {
        let mut held = self.acls.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = held.clone();
        let mut answers: Vec<Created> = Vec::with_capacity(acls.len());
        for acl in acls {
            let answer = acl.validate().and_then(|()| {
                if next.len() >= self.max_acls && !next.contains(&acl) {
                    return Err(AclError::TooMany { max: self.max_acls });
                }
                next.insert(acl);
                Ok(())
            });
            answers.push(answer);
        }
        if next.len() != held.len() {
            if let Err(e) = self.replace(&mut held, next) {
                for answer in answers.iter_mut().filter(|a| a.is_ok()) {
                    *answer = Err(e.clone());
                }
            }
        }
        answers
    }

    /// Deletes every ACL a filter matches: per filter, the ACLs it
    /// matched. Durable before it answers.
    pub fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclError> {
        let mut held = self.acls.lock().unwrap_or_else(PoisonError::into_inner);
        let matched: Vec<Vec<AclBinding>> = filters
            .iter()
            .map(|f| held.iter().filter(|a| f.matches(a)).cloned().collect())
            .collect();
        let next: BTreeSet<AclBinding> = held
            .iter()
            .filter(|a| !filters.iter().any(|f| f.matches(a)))
            .cloned()
            .collect();
        if next.len() != held.len() {
            self.replace(&mut held, next)?;
        }
        Ok(matched)
    }

    /// The ACLs `filter` matches, in a stable order.
    pub fn describe(&self, filter: &AclFilter) -> Vec<AclBinding> {
        let held = self.acls.lock().unwrap_or_else(PoisonError::into_inner);
        held.iter().filter(|a| filter.matches(a)).cloned().collect()
    }

    /// Writes `next` durably, then makes it what the store holds and
    /// checks read.
    fn replace(
        &self,
        held: &mut BTreeSet<AclBinding>,
        next: BTreeSet<AclBinding>,
    ) -> Result<(), AclError> {
        let file = AclFile {
            version: ACL_FILE_VERSION,
            acls: next.iter().cloned().collect(),
        };
        let write_err = |reason: String| AclError::Write {
            path: self.path.display().to_string(),
            reason,
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| write_err(e.to_string()))?;
        self.publish.publish(&bytes).map_err(write_err)?;
        tidelog_storage::fs_util::write_atomic(&self.path, &bytes)
            .map_err(|e| write_err(e.to_string()))?;
        let config = self.authorizer().config().clone();
        let index = Arc::new(Authorizer::new(config, &next));
        *held = next;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = index;
        Ok(())
    }
}

/// The ACLs of an ACL file's bytes, checked whole (version, bound, each
/// ACL valid); why not.
fn read_acls(bytes: &[u8]) -> Result<BTreeSet<AclBinding>, String> {
    let file: AclFile =
        serde_json::from_slice(bytes).map_err(|e| format!("not an ACL file: {e}"))?;
    if file.version != ACL_FILE_VERSION {
        return Err(format!(
            "version {} is not the supported {ACL_FILE_VERSION}",
            file.version
        ));
    }
    if file.acls.len() > ACLS_MAX {
        return Err(format!(
            "{} ACLs, more than the {ACLS_MAX} the store keeps",
            file.acls.len()
        ));
    }
    for acl in &file.acls {
        acl.validate().map_err(|e| format!("ACL {acl}: {e}"))?;
    }
    Ok(file.acls.into_iter().collect())
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
