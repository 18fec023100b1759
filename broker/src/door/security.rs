//! The door's calls that change who may do what: the ACLs (Kafka's
//! Create/Describe/DeleteAcls, the v3 HTTP ACL routes) and the users
//! (Kafka's Describe/AlterUserScramCredentials, the HTTP users routes).
//!
//! Each is checked like every other call: describing needs DESCRIBE on
//! the cluster, changing needs ALTER on it (Kafka's table). A change is
//! durable before it answers (the stores replace their files whole and
//! sync them) and is seen by the next check of any connection. Writes
//! and PBKDF2 run on the blocking pool.

use tidelog_security::acl::{AclBinding, AclError, AclFilter, Operation, Resource};
use tidelog_security::scram::{Mechanism, ScramCredential};
use tidelog_security::users::{AlterRefusal, Alteration, UserError};

use super::Door;
use crate::error::BrokerError;

/// A user as listed: its name and its credentials' mechanisms with their
/// iterations (never a key).
pub type UserListing = (String, Vec<(Mechanism, u32)>);

impl Door {
    /// The ACLs `filter` matches.
    pub fn describe_acls(&self, filter: &AclFilter) -> Result<Vec<AclBinding>, BrokerError> {
        self.allow(Operation::Describe, Resource::cluster())?;
        Ok(self.broker().access.acls.describe(filter))
    }

    /// Creates `acls`, each answered on its own (an invalid one is
    /// refused, the others created).
    pub async fn create_acls(
        &self,
        acls: Vec<AclBinding>,
    ) -> Result<Vec<Result<(), AclError>>, BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Alter, Resource::cluster())?;
        let broker = std::sync::Arc::clone(self.broker());
        let created = crate::blocking::run(move || Ok(broker.access.acls.create(acls))).await?;
        self.broker.metadata_replicated().await?;
        Ok(created)
    }

    /// Deletes every ACL a filter matches; per filter, what it deleted.
    pub async fn delete_acls(
        &self,
        filters: Vec<AclFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Alter, Resource::cluster())?;
        let broker = std::sync::Arc::clone(self.broker());
        let deleted =
            crate::blocking::run(move || Ok(broker.access.acls.delete(&filters)?)).await?;
        self.broker.metadata_replicated().await?;
        Ok(deleted)
    }

    /// Every user, by name.
    pub fn list_users(&self) -> Result<Vec<UserListing>, BrokerError> {
        self.allow(Operation::Describe, Resource::cluster())?;
        Ok(self.broker().access.users.describe())
    }

    /// Creates `user` with a `mechanism` credential of `password`
    /// (`security.scram_iterations`); refused if the user exists.
    pub async fn create_user(
        &self,
        user: &str,
        password: Vec<u8>,
        mechanism: Mechanism,
    ) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        self.change_user(user, password, mechanism, true).await
    }

    /// Sets `user`'s password: its credentials are replaced by one of
    /// `mechanism`, so the old password is valid under none.
    pub async fn set_user_password(
        &self,
        user: &str,
        password: Vec<u8>,
        mechanism: Mechanism,
    ) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        self.change_user(user, password, mechanism, false).await
    }

    async fn change_user(
        &self,
        user: &str,
        password: Vec<u8>,
        mechanism: Mechanism,
        create: bool,
    ) -> Result<(), BrokerError> {
        self.allow(Operation::Alter, Resource::cluster())?;
        tidelog_security::users::check_name(user)?;
        if password.is_empty() {
            return Err(
                UserError::Credential(tidelog_security::scram::ScramError::Malformed {
                    what: "password",
                })
                .into(),
            );
        }
        let broker = std::sync::Arc::clone(self.broker());
        let user = user.to_owned();
        crate::blocking::run(move || {
            let iterations = broker.access.config().scram_iterations;
            let credential = ScramCredential::from_password(mechanism, &password, iterations)
                .map_err(UserError::from)?;
            let users = &broker.access.users;
            match create {
                true => users.create(&user, credential)?,
                false => users.set_password(&user, credential)?,
            }
            tracing::info!(%user, mechanism = mechanism.name(), created = create, "user credential set");
            Ok(())
        })
        .await?;
        self.broker.metadata_replicated().await
    }

    /// Deletes `user`: its open connections fail their next request.
    pub async fn delete_user(&self, user: &str) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Alter, Resource::cluster())?;
        let broker = std::sync::Arc::clone(self.broker());
        let user = user.to_owned();
        crate::blocking::run(move || {
            broker.access.users.delete(&user)?;
            tracing::info!(%user, "user deleted");
            Ok(())
        })
        .await?;
        self.broker.metadata_replicated().await
    }

    /// Kafka's AlterUserScramCredentials: each user's changes all or
    /// none, each user answered on its own.
    pub async fn alter_user_credentials(
        &self,
        changes: Vec<Alteration>,
    ) -> Result<Vec<(String, Result<(), AlterRefusal>)>, BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Alter, Resource::cluster())?;
        let broker = std::sync::Arc::clone(self.broker());
        let answers = crate::blocking::run(move || Ok(broker.access.users.alter(changes))).await?;
        self.broker.metadata_replicated().await?;
        Ok(answers)
    }
}
