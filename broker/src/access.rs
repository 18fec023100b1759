//! Access control below the door: the `security:` section, the ACLs and
//! the users, and the one check every door method makes.
//!
//! Invariants:
//! * Every operation a front-end asks through the [`crate::Door`] is
//!   checked here, for the door's principal and host, before anything is
//!   read or changed ([`Access::check`]); a denial is
//!   [`BrokerError::NotAuthorized`], which each front-end maps to its
//!   code (HTTP 403/40301, Kafka's `*_AUTHORIZATION_FAILED` of the
//!   resource's type). Front-ends that answer per item (a topic of
//!   Metadata, a partition of OffsetCommit) ask [`crate::Door::may`],
//!   the same check.
//! * With `security.authentication: true`, `User:ANONYMOUS` may do
//!   nothing. With `security.authorization: false` every other principal
//!   may do everything (the front-ends' `admin_token` gate aside); the
//!   `admin_token`'s bearer ([`Principal::AdminToken`]) and
//!   `security.super_users` always may.
//! * A check reads the ACL index of the moment ([`AclStore::authorizer`]):
//!   a created or deleted ACL takes effect on the next request, of any
//!   connection, without a lock shared with writers.
//! * A logged-in user's account is looked up again on each request
//!   (`Broker::account_active`, `crate::logins`): a deleted user's open
//!   connections fail their next request.
//! * Logins never learn more than "failed": an unknown user's password
//!   check and SCRAM exchange take as long as a known one's
//!   (`tidelog_security::users`), and no secret is logged.

use std::net::IpAddr;
use std::path::Path;

use tidelog_security::acl::{AclStore, Operation, Request, Resource, ResourceType};
use tidelog_security::config::SecurityConfig;
use tidelog_security::users::UserStore;
use tidelog_security::verified::VerifiedPasswords;

use crate::error::BrokerError;
use crate::principal::Principal;

/// The broker's access control (module doc).
#[derive(Debug)]
pub(crate) struct Access {
    config: SecurityConfig,
    pub(crate) acls: AclStore,
    pub(crate) users: UserStore,
    verified: VerifiedPasswords,
}

impl Access {
    /// Opens the ACLs and the users of `config_dir` and creates the
    /// config's bootstrap users that do not exist.
    pub(crate) fn open(config_dir: &Path, config: &SecurityConfig) -> Result<Access, BrokerError> {
        let invalid = |key: String, reason: String| BrokerError::InvalidConfig {
            key: format!("security.{key}"),
            reason,
        };
        config.validate().map_err(|e| invalid(e.key, e.reason))?;
        let acls = AclStore::open(config_dir, config.authorizer_config())?;
        let users = UserStore::open(config_dir)?;
        let mut bootstrap = Vec::with_capacity(config.users.len());
        for user in &config.users {
            let password = user.password().map_err(|e| invalid(e.key, e.reason))?;
            bootstrap.push((user.name.clone(), password));
        }
        let made = users.ensure(&bootstrap, config.scram_iterations)?;
        if !made.is_empty() {
            tracing::info!(users = ?made, "bootstrap users created");
        }
        Ok(Access {
            config: config.clone(),
            acls,
            users,
            verified: VerifiedPasswords::default(),
        })
    }

    pub(crate) fn config(&self) -> &SecurityConfig {
        &self.config
    }

    /// Whether `password` was verified for `user`'s credential as it is
    /// now (no PBKDF2).
    pub(crate) fn recently_verified(&self, user: &str, password: &[u8]) -> bool {
        self.users
            .password_credential(user)
            .is_some_and(|c| self.verified.contains(user, password, &c))
    }

    /// The full check of `password` (PBKDF2: call on the blocking pool),
    /// noted when it succeeds.
    pub(crate) fn verify_password(&self, user: &str, password: &[u8]) -> bool {
        match self.users.password_credential(user) {
            Some(credential) => {
                let ok = credential.verify_password(password);
                if ok {
                    self.verified.insert(user, password, &credential);
                }
                ok
            }
            // As slow as a known user's check.
            None => self.users.verify_password(user, password),
        }
    }

    /// Whether `who` from `host` may do `operation` on `resource`.
    pub(crate) fn allows(
        &self,
        who: &Principal,
        host: Option<IpAddr>,
        operation: Operation,
        resource: Resource<'_>,
    ) -> bool {
        if *who == Principal::AdminToken {
            return true;
        }
        // With logins required, nobody unnamed may do anything (Kafka's
        // answer to User:ANONYMOUS with no ACLs), whatever the ACLs say.
        if self.config.authentication && *who == Principal::Anonymous {
            return false;
        }
        if !self.config.authorization {
            return true;
        }
        let principal = who.kafka_name();
        let authorizer = self.acls.authorizer();
        let verdict = authorizer.authorize(&Request {
            principal: &principal,
            host,
            operation,
            resource,
        });
        let allowed = verdict.allowed();
        if !allowed {
            tracing::debug!(
                %principal,
                host = ?host,
                operation = operation.name(),
                resource_type = resource.resource_type.name(),
                resource = resource.name,
                reason = ?verdict,
                "denied"
            );
        }
        allowed
    }

    /// Whether `who` may WRITE some topic (InitProducerId's alternative
    /// to IDEMPOTENT_WRITE on the cluster).
    pub(crate) fn allows_any_topic_write(&self, who: &Principal, host: Option<IpAddr>) -> bool {
        if *who == Principal::AdminToken {
            return true;
        }
        if self.config.authentication && *who == Principal::Anonymous {
            return false;
        }
        if !self.config.authorization {
            return true;
        }
        self.acls.authorizer().allows_any(
            &who.kafka_name(),
            host,
            ResourceType::Topic,
            Operation::Write,
        )
    }

    /// [`Access::allows`], or the refusal naming the operation and the
    /// resource.
    pub(crate) fn check(
        &self,
        who: &Principal,
        host: Option<IpAddr>,
        operation: Operation,
        resource: Resource<'_>,
    ) -> Result<(), BrokerError> {
        if self.allows(who, host, operation, resource) {
            return Ok(());
        }
        Err(BrokerError::NotAuthorized {
            operation,
            resource_type: resource.resource_type,
            name: resource.name.to_owned(),
        })
    }
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
