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
//! name. The index keeps the ACLs by principal, then by pattern, with per
//! type the lengths prefixed patterns have: a check looks up the
//! resource's name cut at each of the asker's lengths, not every prefix,
//! and never reads other principals' ACLs (`benches/authorize.rs`:
//! tens to hundreds of nanoseconds with 10,000 ACLs).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use super::model::{
    AclBinding, Host, Operation, PatternType, Permission, Resource, ResourcePattern, ResourceType,
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
/// for the client (which learns only that it was refused). Borrows the
/// deciding ACL from the index: a check allocates nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<'a> {
    Allowed(Reason<'a>),
    Denied(Reason<'a>),
}

impl Verdict<'_> {
    pub fn allowed(&self) -> bool {
        matches!(self, Verdict::Allowed(_))
    }
}

/// The rule that decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason<'a> {
    SuperUser,
    /// No ACL names the resource: `allow_everyone_if_no_acl_found`.
    NoAclFound,
    /// This ACL (a DENY, or the ALLOW that allowed).
    Acl(&'a AclBinding),
    /// ACLs name the resource, none allows this.
    NoMatchingAllow,
}

/// One ACL as the index keeps it under its principal and pattern.
#[derive(Debug, Clone)]
struct Entry {
    host: Host,
    operation: Operation,
    permission: Permission,
    acl: AclBinding,
}

/// Resource patterns with a value each: LITERAL ones (`*` included) and
/// PREFIXED ones by type and name, and per type the lengths its prefixed
/// patterns have, so the patterns naming a resource are found with one
/// lookup per distinct length, not one per prefix of its name.
#[derive(Debug)]
struct Patterns<V> {
    literal: HashMap<ResourceType, HashMap<String, V>>,
    prefixed: HashMap<ResourceType, HashMap<String, V>>,
    prefix_lengths: HashMap<ResourceType, BTreeSet<usize>>,
}

impl<V> Default for Patterns<V> {
    fn default() -> Self {
        Patterns {
            literal: HashMap::new(),
            prefixed: HashMap::new(),
            prefix_lengths: HashMap::new(),
        }
    }
}

impl<V: Default> Patterns<V> {
    /// The value of `pattern`, made if new.
    fn entry(&mut self, pattern: &ResourcePattern) -> &mut V {
        let patterns = match pattern.pattern_type {
            PatternType::Literal => &mut self.literal,
            PatternType::Prefixed => {
                self.prefix_lengths
                    .entry(pattern.resource_type)
                    .or_default()
                    .insert(pattern.name.len());
                &mut self.prefixed
            }
        };
        patterns
            .entry(pattern.resource_type)
            .or_default()
            .entry(pattern.name.clone())
            .or_default()
    }
}

impl<V> Patterns<V> {
    /// The values of every pattern that names `resource`: its literal
    /// name, the literal `*`, the prefixes of its name that are patterns.
    /// No allocation: maps keyed by `String` are looked up by `&str`.
    fn naming<'s, 'r>(
        &'s self,
        resource: Resource<'r>,
    ) -> impl Iterator<Item = &'s V> + use<'s, 'r, V> {
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

/// The ACLs, indexed for [`Authorizer::authorize`]: first by principal
/// (`User:*` under its own key), then by pattern, so a check looks only
/// at the patterns of the asker and of every user, however many other
/// principals have ACLs. Immutable: a change builds a new one
/// ([`super::AclStore`] swaps it in), so checks never wait for a writer.
#[derive(Debug, Default)]
pub struct Authorizer {
    config: AuthorizerConfig,
    by_principal: HashMap<String, Patterns<Vec<Entry>>>,
    /// Every pattern of every principal: whether any ACL names a resource
    /// (rule 2), asked only when the asker's ACLs decided nothing.
    named: Patterns<()>,
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
            index.named.entry(&acl.pattern);
            index
                .by_principal
                .entry(acl.principal.clone())
                .or_default()
                .entry(&acl.pattern)
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

    /// Kafka's decision for `request` (module doc). Rules 3 and 4 are
    /// asked first, of the asker's and every user's ACLs only: one that
    /// decides also names the resource, so rule 2 is asked only when none
    /// did, with the answer unchanged.
    pub fn authorize<'s>(&'s self, request: &Request<'_>) -> Verdict<'s> {
        if self.config.super_users.contains(request.principal) {
            return Verdict::Allowed(Reason::SuperUser);
        }
        let mut allow = None;
        let whose = [request.principal, WILDCARD_PRINCIPAL];
        let entries = whose
            .into_iter()
            .filter_map(|who| self.by_principal.get(who))
            .flat_map(|patterns| patterns.naming(request.resource))
            .flatten();
        for e in entries.filter(|e| e.host.admits(request.host)) {
            match e.permission {
                Permission::Deny
                    if e.operation == request.operation || e.operation == Operation::All =>
                {
                    return Verdict::Denied(Reason::Acl(&e.acl));
                }
                Permission::Allow if allow.is_none() && e.operation.implies(request.operation) => {
                    allow = Some(&e.acl);
                }
                _ => {}
            }
        }
        if let Some(acl) = allow {
            return Verdict::Allowed(Reason::Acl(acl));
        }
        if self.named.naming(request.resource).next().is_some() {
            Verdict::Denied(Reason::NoMatchingAllow)
        } else if self.config.allow_everyone_if_no_acl_found {
            Verdict::Allowed(Reason::NoAclFound)
        } else {
            Verdict::Denied(Reason::NoAclFound)
        }
    }
}

impl Authorizer {
    /// Kafka's `authorizeByResourceType`: whether some resource of
    /// `resource_type` may get `operation` from the principal (an
    /// InitProducerId without IDEMPOTENT_WRITE on the cluster is allowed
    /// when the producer may WRITE some topic, KIP-679). An ALLOW of the
    /// principal or `User:*` for the host counts unless a DENY of the
    /// operation covers every resource of the type (the literal `*`);
    /// with no ACL of the type at all, `allow_everyone_if_no_acl_found`.
    pub fn allows_any(
        &self,
        principal: &str,
        host: Option<IpAddr>,
        resource_type: ResourceType,
        operation: Operation,
    ) -> bool {
        if self.config.super_users.contains(principal) {
            return true;
        }
        let whose = [principal, WILDCARD_PRINCIPAL];
        let entries = || {
            whose
                .into_iter()
                .filter_map(|who| self.by_principal.get(who))
                .flat_map(move |p| {
                    let literal = p.literal.get(&resource_type).into_iter();
                    let prefixed = p.prefixed.get(&resource_type).into_iter();
                    literal.chain(prefixed).flat_map(|by_name| by_name.iter())
                })
        };
        let denied_everywhere = entries()
            .filter(|(name, _)| name.as_str() == WILDCARD_RESOURCE)
            .flat_map(|(_, es)| es.iter())
            .any(|e| {
                e.permission == Permission::Deny
                    && e.acl.pattern.pattern_type == PatternType::Literal
                    && e.host.admits(host)
                    && (e.operation == operation || e.operation == Operation::All)
            });
        if denied_everywhere {
            return false;
        }
        let allowed = entries().flat_map(|(_, es)| es.iter()).any(|e| {
            e.permission == Permission::Allow
                && e.host.admits(host)
                && e.operation.implies(operation)
        });
        allowed
            || (self.config.allow_everyone_if_no_acl_found
                && !self.named.literal.contains_key(&resource_type)
                && !self.named.prefixed.contains_key(&resource_type))
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
