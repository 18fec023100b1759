//! tidelog's access control, the way Kafka models it (`../shared`
//! SECURITY.md's contract; docs/SECURITY.md).
//!
//! * [`acl`]: ACLs: (principal, host, resource pattern, operation,
//!   ALLOW | DENY), Kafka's rules for which ACL matches a request
//!   ([`acl::Authorizer`]: DENY over ALLOW, implied DESCRIBE, prefixed
//!   and wildcard patterns, super users, what to do when no ACL names a
//!   resource), answered from an index rather than a scan, and kept
//!   durably ([`acl::AclStore`], `<data_dir>/config/acls.json`).
//!
//! The broker's door makes the one check per operation; the front-ends
//! only name the principal and turn a denial into their code.

pub mod acl;
