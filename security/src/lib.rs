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

pub mod acl;
pub mod config;
pub mod scram;
pub mod users;
pub mod verified;
