//! What an ACL is, in Kafka's terms and with Kafka's wire codes and
//! names, so the Kafka front-end (Create/Describe/DeleteAcls), the REST
//! v3 routes and the CLI speak of the same thing.
//!
//! An ACL ([`AclBinding`]) says that a principal, from a host, is
//! allowed or denied an operation on the resources a pattern names. A
//! filter ([`AclFilter`]) selects ACLs for DescribeAcls and DeleteAcls,
//! with Kafka's ANY and MATCH.
//!
//! Decisions (Kafka's, where Kafka decides; `AclControlManager` and
//! `AclBinding` of Kafka 3.x):
//! * Resource types are the four tidelog serves: TOPIC, GROUP, CLUSTER
//!   and TRANSACTIONAL_ID. DELEGATION_TOKEN and USER ACLs guard APIs
//!   tidelog does not serve: refused as unsupported, not stored unused.
//! * A CLUSTER ACL's name is `kafka-cluster`, Kafka's one cluster
//!   resource name; clients send it as is.
//! * A principal is `User:<name>` or `User:*` (every user). Kafka's other
//!   principal types come from custom principal builders, which tidelog
//!   has not.
//! * A host is `*` or an IP address, compared in its canonical form
//!   (`::1` and `0:0:0:0:0:0:0:1` are one host), as Kafka compares the
//!   client's address.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The one name of the CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The resource name of a LITERAL pattern that names every resource of
/// its type.
pub const WILDCARD_RESOURCE: &str = "*";
/// The principal of an ACL for every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The host of an ACL for every host.
pub const WILDCARD_HOST: &str = "*";
/// The longest resource name an ACL may carry: Kafka bounds none, but a
/// topic name is at most 249 bytes and a group id has no bound, so the
/// store bounds what a client can make it keep.
pub const RESOURCE_NAME_MAX: usize = 1024;
/// The longest principal an ACL may carry (`User:` and a user name).
pub const PRINCIPAL_MAX: usize = 256;

/// Kafka's enum spelled as on the wire (`TOPIC`, `READ`, ...), with
/// Kafka's wire code.
macro_rules! kafka_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = ($code:expr, $text:expr)),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code),+
                }
            }

            /// The value of Kafka's wire code, if tidelog has it.
            pub fn from_code(code: i8) -> Option<$name> {
                match code {
                    $($code => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// Kafka's name (`TOPIC`, `READ`, ...).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The value Kafka's name names, in any case (REST and the
            /// CLI take `topic` as well as `TOPIC`).
            pub fn parse(text: &str) -> Option<$name> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name().eq_ignore_ascii_case(text))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum! {
    /// What kind of resource an ACL guards.
    pub enum ResourceType {
        Topic = (2, "TOPIC"),
        Group = (3, "GROUP"),
        Cluster = (4, "CLUSTER"),
        TransactionalId = (5, "TRANSACTIONAL_ID"),
    }
}

kafka_enum! {
    /// How an ACL's resource name matches a resource's.
    pub enum PatternType {
        /// The name exactly, or every resource when it is `*`.
        Literal = (3, "LITERAL"),
        /// Every resource whose name starts with it.
        Prefixed = (4, "PREFIXED"),
    }
}

kafka_enum! {
    /// What a request does to a resource.
    pub enum Operation {
        /// Every operation (in an ACL; a request asks for one).
        All = (2, "ALL"),
        Read = (3, "READ"),
        Write = (4, "WRITE"),
        Create = (5, "CREATE"),
        Delete = (6, "DELETE"),
        Alter = (7, "ALTER"),
        Describe = (8, "DESCRIBE"),
        ClusterAction = (9, "CLUSTER_ACTION"),
        DescribeConfigs = (10, "DESCRIBE_CONFIGS"),
        AlterConfigs = (11, "ALTER_CONFIGS"),
        IdempotentWrite = (12, "IDEMPOTENT_WRITE"),
        CreateTokens = (13, "CREATE_TOKENS"),
        DescribeTokens = (14, "DESCRIBE_TOKENS"),
    }
}

kafka_enum! {
    /// Whether a matching ACL lets the request through.
    pub enum Permission {
        Deny = (2, "DENY"),
        Allow = (3, "ALLOW"),
    }
}

impl Operation {
    /// The operations an ALLOW of `self` also allows (Kafka's implied
    /// operations): whoever may read, write, delete or alter a resource
    /// may describe it, and whoever may alter its configs may describe
    /// them. A DENY implies nothing: it denies what it names (or all).
    pub fn implies(self, asked: Operation) -> bool {
        use Operation as O;
        self == asked
            || self == O::All
            || (asked == O::Describe && matches!(self, O::Read | O::Write | O::Delete | O::Alter))
            || (asked == O::DescribeConfigs && self == O::AlterConfigs)
    }
}

/// A resource a request names: a topic, a group, the cluster, a
/// transactional id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Resource<'a> {
    pub resource_type: ResourceType,
    pub name: &'a str,
}

impl<'a> Resource<'a> {
    pub fn topic(name: &'a str) -> Resource<'a> {
        Resource {
            resource_type: ResourceType::Topic,
            name,
        }
    }

    pub fn group(name: &'a str) -> Resource<'a> {
        Resource {
            resource_type: ResourceType::Group,
            name,
        }
    }

    pub fn cluster() -> Resource<'static> {
        Resource {
            resource_type: ResourceType::Cluster,
            name: CLUSTER_NAME,
        }
    }

    pub fn transactional_id(name: &'a str) -> Resource<'a> {
        Resource {
            resource_type: ResourceType::TransactionalId,
            name,
        }
    }
}

impl fmt::Display for Resource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.resource_type, self.name)
    }
}

/// The resources an ACL names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourcePattern {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

impl ResourcePattern {
    /// Whether the pattern names `resource`.
    pub fn matches(&self, resource: &Resource<'_>) -> bool {
        self.resource_type == resource.resource_type
            && match self.pattern_type {
                PatternType::Literal => {
                    self.name == WILDCARD_RESOURCE || self.name == resource.name
                }
                PatternType::Prefixed => resource.name.starts_with(self.name.as_str()),
            }
    }
}

/// Where a request comes from, as an ACL names it: every host, or one
/// address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    Any,
    Ip(IpAddr),
}

impl Host {
    /// `*` or an IP address (v4, v6, or v4-mapped v6, which is the v4
    /// address: a dual-stack listener reports v4 clients so).
    pub fn parse(text: &str) -> Result<Host, AclError> {
        if text == WILDCARD_HOST {
            return Ok(Host::Any);
        }
        text.parse::<IpAddr>()
            .map(|ip| Host::Ip(canonical(ip)))
            .map_err(|_| AclError::Host {
                host: truncated(text),
            })
    }

    /// Whether an ACL for this host applies to a request from `from`.
    pub fn admits(self, from: Option<IpAddr>) -> bool {
        match self {
            Host::Any => true,
            Host::Ip(ip) => from.map(canonical) == Some(ip),
        }
    }
}

/// `::ffff:a.b.c.d` is `a.b.c.d`.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Any => f.write_str(WILDCARD_HOST),
            Host::Ip(ip) => ip.fmt(f),
        }
    }
}

impl Serialize for Host {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Host {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Host, D::Error> {
        let text = String::deserialize(d)?;
        Host::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// One ACL: `principal` from `host` is `permission`ed `operation` on the
/// resources `pattern` names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    /// `User:<name>`, or `User:*` for every user.
    pub principal: String,
    pub host: Host,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBinding {
    /// Kafka's checks of a new ACL: a resource name (the cluster's own
    /// for CLUSTER), a `User:` principal, bounded lengths.
    pub fn validate(&self) -> Result<(), AclError> {
        let name = &self.pattern.name;
        if name.is_empty() {
            return Err(AclError::EmptyResourceName);
        }
        if name.len() > RESOURCE_NAME_MAX {
            return Err(AclError::ResourceNameTooLong {
                len: name.len(),
                max: RESOURCE_NAME_MAX,
            });
        }
        if self.pattern.resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
            return Err(AclError::ClusterName {
                name: truncated(name),
            });
        }
        check_principal(&self.principal)
    }

    /// Whether this ACL speaks of `principal` (its own, or every user).
    pub fn names_principal(&self, principal: &str) -> bool {
        self.principal == principal || self.principal == WILDCARD_PRINCIPAL
    }
}

/// `User:<name>` with a name, or `User:*`, at most [`PRINCIPAL_MAX`]
/// bytes.
pub fn check_principal(principal: &str) -> Result<(), AclError> {
    let well_formed = principal.len() <= PRINCIPAL_MAX
        && principal
            .strip_prefix("User:")
            .is_some_and(|name| !name.is_empty() && !name.chars().any(char::is_control));
    if well_formed {
        Ok(())
    } else {
        Err(AclError::Principal {
            principal: truncated(principal),
        })
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} from {} on {} {} {:?}",
            self.permission,
            self.principal,
            self.operation,
            self.host,
            self.pattern.pattern_type,
            self.pattern.resource_type,
            self.pattern.name
        )
    }
}

/// How a filter selects patterns (Kafka's PatternType filter values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatternFilter {
    /// Any pattern type.
    Any,
    /// The patterns that would apply to a resource of the filter's name:
    /// that literal name, the literal `*`, and every prefix of it.
    Match,
    /// Exactly this pattern type.
    Exactly(PatternType),
}

impl PatternFilter {
    /// Kafka's wire code: ANY 1, MATCH 2, LITERAL 3, PREFIXED 4.
    pub fn from_code(code: i8) -> Option<PatternFilter> {
        match code {
            1 => Some(PatternFilter::Any),
            2 => Some(PatternFilter::Match),
            other => PatternType::from_code(other).map(PatternFilter::Exactly),
        }
    }

    /// `ANY`, `MATCH`, `LITERAL` or `PREFIXED`, in any case.
    pub fn parse(text: &str) -> Option<PatternFilter> {
        if text.eq_ignore_ascii_case("ANY") {
            Some(PatternFilter::Any)
        } else if text.eq_ignore_ascii_case("MATCH") {
            Some(PatternFilter::Match)
        } else {
            PatternType::parse(text).map(PatternFilter::Exactly)
        }
    }
}

/// Which ACLs DescribeAcls shows and DeleteAcls removes: each field
/// `None` (Kafka's ANY or null) matches every value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<Host>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// The filter that matches every ACL.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: None,
            name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    /// Whether `acl` is one this filter selects.
    pub fn matches(&self, acl: &AclBinding) -> bool {
        let p = &acl.pattern;
        self.resource_type.is_none_or(|t| t == p.resource_type)
            && self.matches_pattern(p)
            && self.principal.as_ref().is_none_or(|x| *x == acl.principal)
            && self.host.is_none_or(|h| h == acl.host)
            && self.operation.is_none_or(|o| o == acl.operation)
            && self.permission.is_none_or(|x| x == acl.permission)
    }

    fn matches_pattern(&self, p: &ResourcePattern) -> bool {
        match (self.pattern, &self.name) {
            (PatternFilter::Any, None) | (PatternFilter::Match, None) => true,
            (PatternFilter::Any, Some(name)) => p.name == *name,
            (PatternFilter::Exactly(t), name) => {
                p.pattern_type == t && name.as_ref().is_none_or(|n| p.name == *n)
            }
            (PatternFilter::Match, Some(name)) => {
                let resource = Resource {
                    resource_type: p.resource_type,
                    name,
                };
                p.matches(&resource)
            }
        }
    }
}

/// Why an ACL, a filter or the ACL file is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    #[error("an ACL needs a resource name")]
    EmptyResourceName,
    #[error("resource name of {len} bytes; at most {max}")]
    ResourceNameTooLong { len: usize, max: usize },
    #[error("the CLUSTER resource is named {CLUSTER_NAME:?}, not {name:?}")]
    ClusterName { name: String },
    #[error("principal {principal:?} is not User:<name> or User:*")]
    Principal { principal: String },
    #[error("host {host:?} is not * or an IP address")]
    Host { host: String },
    #[error("the store keeps at most {max} ACLs")]
    TooMany { max: usize },
    #[error("ACL file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("writing the ACL file {path}: {reason}")]
    Write { path: String, reason: String },
}

/// A client's string, cut for an error message.
fn truncated(text: &str) -> String {
    const MAX: usize = 64;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
