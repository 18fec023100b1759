//! tidelog's logins and access control, the way Kafka models them (the
//! security issue's contract: its config keys, routes and codes).
//!
//! * [`acl`]: ACLs: (principal, host, resource pattern, operation,
//!   ALLOW | DENY), Kafka's rules for which ACL matches a request
//!   ([`acl::Authorizer`]: DENY over ALLOW, implied DESCRIBE, prefixed
//!   and wildcard patterns, super users, what to do when no ACL names a
//!   resource), answered from an index rather than a scan, and kept
//!   durably ([`acl::AclStore`], `<data_dir>/config/acls.json`).
//! * [`config`]: the `security:` section of the broker's config.
//! * [`scram`]: SCRAM-SHA-256/512 logins (RFC 5802/7677, as Kafka's
//!   KIP-84 serves them): the stored credential (never the password),
//!   the server's side of the exchange, the password check PLAIN and
//!   HTTP Basic make against the same credential, and the client's side
//!   (`tidelog bench` logs in with it).
//! * [`users`]: the users and their credentials, durable and readable
//!   by the owner only (`<data_dir>/config/users.json`), with Kafka's
//!   AlterUserScramCredentials semantics and the config's bootstrap
//!   users.
//! * [`verified`]: passwords recently verified, so HTTP Basic does not
//!   pay PBKDF2 per request.
//!
//! The broker's door makes the one check per operation; the front-ends
//! only name the principal and turn a denial into their code.
//!
//! In a cluster the ACL and users files reach the replicas through the
//! master's CommitLog: each store hands a change's whole file to a
//! [`Publish`] hook before writing it (`set_publisher`), and a replica
//! takes the master's file whole (`install`), checked as at open.

pub mod acl;
pub mod config;
pub mod scram;
pub mod users;
pub mod verified;

/// What a store hands a change's whole next file to before writing it
/// (the broker's cluster metadata log); an `Err` refuses the change,
/// its text the reason.
pub type Publish = dyn Fn(&[u8]) -> Result<(), String> + Send + Sync;

/// A store's [`Publish`] hook: unset (a single node, or a store not yet
/// in a cluster) until `set`, then set for good.
#[derive(Default)]
pub struct PublishHook(std::sync::OnceLock<std::sync::Arc<Publish>>);

impl PublishHook {
    /// Set once; a second call is ignored.
    pub fn set(&self, publish: std::sync::Arc<Publish>) {
        let _ = self.0.set(publish);
    }

    /// Hands `bytes` to the hook, if one is set.
    pub fn publish(&self, bytes: &[u8]) -> Result<(), String> {
        self.0.get().map_or(Ok(()), |p| p(bytes))
    }
}

impl std::fmt::Debug for PublishHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "PublishHook(set)"
        } else {
            "PublishHook(unset)"
        })
    }
}
