//! The decision: may this principal, from this host, do this operation
//! on this resource? Kafka's rules (`StandardAuthorizerData` of Kafka
//! 3.x), answered from an index built once per change of the ACLs, so a
//! check costs a few hash lookups however many ACLs there are (the
//! security issue's bound: 10,000 ACLs cost under 5 % of produce).
//!
//! The rules, in order:
//! 1. A super user may do everything.
//! 2. When no ACL's pattern names the resource at all (for any principal
//!    or operation), the answer is `allow_everyone_if_no_acl_found`.
//! 3. A DENY that names the principal (or `User:*`), the host (or `*`)
//!    and the operation (or ALL) denies: DENY wins over ALLOW.
//! 4. An ALLOW that names them allows, also through an implied operation
//!    (READ, WRITE, DELETE or ALTER allow DESCRIBE; ALTER_CONFIGS allows
//!    DESCRIBE_CONFIGS: [`Operation::implies`]).
//! 5. Otherwise denied.
//!
//! The patterns that name a resource are its literal name, the literal
//! `*` of its type, and every prefixed pattern that is a prefix of its
//! name. The index keeps each pattern's ACLs by principal, and per type
//! the lengths prefixed patterns have: a check looks up the resource's
//! name cut at each of those lengths, not every prefix.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use super::model::{
    AclBinding, Host, Operation, PatternType, Permission, Resource, ResourceType,
    WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
};

/// Who passes every check, and the answer for resources no ACL names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// Principals (`User:<name>`) that pass every check.
    pub super_users: HashSet<String>,
    /// The answer for a resource no ACL names.
    pub allow_everyone_if_no_acl_found: bool,
}

/// A request to check.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `User:<name>` (`User:ANONYMOUS` without a login).
    pub principal: &'a str,
    /// The client's address; `None` (an in-process caller) matches only
    /// ACLs for every host.
    pub host: Option<IpAddr>,
    pub operation: Operation,
    pub resource: Resource<'a>,
}

/// Why a check answered as it did: for the log line and the audit, never
/// for the client (which learns only that it was refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed(Reason),
    Denied(Reason),
}

impl Verdict {
    pub fn allowed(&self) -> bool {
        matches!(self, Verdict::Allowed(_))
    }
}

/// The rule that decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    SuperUser,
    /// No ACL names the resource: `allow_everyone_if_no_acl_found`.
    NoAclFound,
    /// This ACL (a DENY, or the ALLOW that allowed).
    Acl(AclBinding),
    /// ACLs name the resource, none allows this.
    NoMatchingAllow,
}

/// One ACL as the index keeps it under its pattern and principal.
#[derive(Debug, Clone)]
struct Entry {
    host: Host,
    operation: Operation,
    permission: Permission,
    acl: AclBinding,
}

/// A pattern's ACLs, by principal (`User:*` under its own key).
type ByPrincipal = HashMap<String, Vec<Entry>>;

/// The ACLs, indexed for [`Authorizer::authorize`]. Immutable: a change
/// builds a new one ([`super::AclStore`] swaps it in), so checks never
/// wait for a writer.
#[derive(Debug, Default)]
pub struct Authorizer {
    config: AuthorizerConfig,
    /// LITERAL patterns (`*` included), by type and name.
    literal: HashMap<ResourceType, HashMap<String, ByPrincipal>>,
    /// PREFIXED patterns, by type and prefix.
    prefixed: HashMap<ResourceType, HashMap<String, ByPrincipal>>,
    /// Per type, the lengths of its prefixed patterns.
    prefix_lengths: HashMap<ResourceType, BTreeSet<usize>>,
    acls: usize,
}

impl Authorizer {
    /// The index of `acls` under `config`.
    pub fn new<'a>(
        config: AuthorizerConfig,
        acls: impl IntoIterator<Item = &'a AclBinding>,
    ) -> Authorizer {
        let mut index = Authorizer {
            config,
            ..Authorizer::default()
        };
        for acl in acls {
            let p = &acl.pattern;
            let patterns = match p.pattern_type {
                PatternType::Literal => &mut index.literal,
                PatternType::Prefixed => {
                    index
                        .prefix_lengths
                        .entry(p.resource_type)
                        .or_default()
                        .insert(p.name.len());
                    &mut index.prefixed
                }
            };
            patterns
                .entry(p.resource_type)
                .or_default()
                .entry(p.name.clone())
                .or_default()
                .entry(acl.principal.clone())
                .or_default()
                .push(Entry {
                    host: acl.host,
                    operation: acl.operation,
                    permission: acl.permission,
                    acl: acl.clone(),
                });
            index.acls += 1;
        }
        index
    }

    /// How many ACLs it holds.
    pub fn len(&self) -> usize {
        self.acls
    }

    pub fn is_empty(&self) -> bool {
        self.acls == 0
    }

    pub fn config(&self) -> &AuthorizerConfig {
        &self.config
    }

    /// Kafka's decision for `request` (module doc).
    pub fn authorize(&self, request: &Request<'_>) -> Verdict {
        if self.config.super_users.contains(request.principal) {
            return Verdict::Allowed(Reason::SuperUser);
        }
        let mut patterns = self.patterns_naming(request.resource).peekable();
        if patterns.peek().is_none() {
            return if self.config.allow_everyone_if_no_acl_found {
                Verdict::Allowed(Reason::NoAclFound)
            } else {
                Verdict::Denied(Reason::NoAclFound)
            };
        }
        let mut allow = None;
        for entries in patterns
            .flat_map(|by| [by.get(request.principal), by.get(WILDCARD_PRINCIPAL)])
            .flatten()
        {
            for e in entries.iter().filter(|e| e.host.admits(request.host)) {
                match e.permission {
                    Permission::Deny
                        if e.operation == request.operation || e.operation == Operation::All =>
                    {
                        return Verdict::Denied(Reason::Acl(e.acl.clone()));
                    }
                    Permission::Allow
                        if allow.is_none() && e.operation.implies(request.operation) =>
                    {
                        allow = Some(e);
                    }
                    _ => {}
                }
            }
        }
        match allow {
            Some(e) => Verdict::Allowed(Reason::Acl(e.acl.clone())),
            None => Verdict::Denied(Reason::NoMatchingAllow),
        }
    }

    /// The ACLs of every pattern that names `resource`, by principal:
    /// its literal name, the literal `*`, the prefixes of its name that
    /// are patterns. No allocation: maps keyed by `String` are looked up
    /// by `&str`.
    fn patterns_naming<'s>(
        &'s self,
        resource: Resource<'s>,
    ) -> impl Iterator<Item = &'s ByPrincipal> + 's {
        let t = resource.resource_type;
        let name = resource.name;
        let literal = self.literal.get(&t);
        let exact = literal.and_then(|m| m.get(name));
        let wildcard = literal
            .filter(|_| name != WILDCARD_RESOURCE)
            .and_then(|m| m.get(WILDCARD_RESOURCE));
        let prefixed = self.prefixed.get(&t);
        let prefixes = self
            .prefix_lengths
            .get(&t)
            .into_iter()
            .flat_map(move |lengths| lengths.range(..=name.len()))
            // Not at a character boundary: no pattern ends there.
            .filter_map(move |&len| name.get(..len))
            .filter_map(move |prefix| prefixed.and_then(|m| m.get(prefix)));
        exact.into_iter().chain(wildcard).chain(prefixes)
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
