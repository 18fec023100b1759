#![allow(clippy::unwrap_used)]

use std::net::IpAddr;

use super::*;
use crate::acl::model::{ResourcePattern, CLUSTER_NAME};

fn acl(
    permission: Permission,
    principal: &str,
    operation: Operation,
    pattern: (ResourceType, &str, PatternType),
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: pattern.0,
            name: pattern.1.to_owned(),
            pattern_type: pattern.2,
        },
        principal: principal.to_owned(),
        host: Host::Any,
        operation,
        permission,
    }
}

fn topic(name: &str) -> (ResourceType, &str, PatternType) {
    (ResourceType::Topic, name, PatternType::Literal)
}

fn prefix(name: &str) -> (ResourceType, &str, PatternType) {
    (ResourceType::Topic, name, PatternType::Prefixed)
}

fn may(index: &Authorizer, who: &str, op: Operation, resource: Resource<'_>) -> bool {
    index
        .authorize(&Request {
            principal: who,
            host: None,
            operation: op,
            resource,
        })
        .allowed()
}

const ALICE: &str = "User:alice";
const BOB: &str = "User:bob";

#[test]
fn super_users_pass_and_resources_without_acls_follow_the_setting() {
    let acls = [acl(Permission::Allow, ALICE, Operation::Read, topic("t"))];
    let strict = Authorizer::new(
        AuthorizerConfig {
            super_users: ["User:root".to_owned()].into(),
            allow_everyone_if_no_acl_found: false,
        },
        &acls,
    );
    assert!(may(
        &strict,
        "User:root",
        Operation::Delete,
        Resource::topic("t")
    ));
    assert!(may(
        &strict,
        "User:root",
        Operation::Alter,
        Resource::cluster()
    ));
    assert!(may(&strict, ALICE, Operation::Read, Resource::topic("t")));
    assert!(!may(&strict, BOB, Operation::Read, Resource::topic("t")));
    assert_eq!(
        strict.authorize(&Request {
            principal: BOB,
            host: None,
            operation: Operation::Read,
            resource: Resource::topic("u"),
        }),
        Verdict::Denied(Reason::NoAclFound)
    );
    let open = Authorizer::new(
        AuthorizerConfig {
            allow_everyone_if_no_acl_found: true,
            ..AuthorizerConfig::default()
        },
        &acls,
    );
    assert!(
        may(&open, BOB, Operation::Write, Resource::topic("u")),
        "no ACL names u"
    );
    assert!(
        !may(&open, BOB, Operation::Read, Resource::topic("t")),
        "an ACL names t, though not for bob"
    );
    assert!(
        may(&open, BOB, Operation::Read, Resource::group("t")),
        "an ACL of another type names no group"
    );
}

#[test]
fn deny_wins_and_implies_nothing_while_allow_implies_describe() {
    let acls = [
        acl(Permission::Allow, ALICE, Operation::All, topic("t")),
        acl(Permission::Deny, ALICE, Operation::Write, topic("t")),
        acl(Permission::Allow, BOB, Operation::Write, topic("t")),
        acl(Permission::Allow, BOB, Operation::AlterConfigs, topic("t")),
        acl(Permission::Deny, "User:*", Operation::Delete, topic("t")),
    ];
    let index = Authorizer::new(AuthorizerConfig::default(), &acls);
    let t = Resource::topic("t");
    assert!(may(&index, ALICE, Operation::Read, t));
    assert!(
        !may(&index, ALICE, Operation::Write, t),
        "DENY beats ALLOW ALL"
    );
    assert!(
        may(&index, ALICE, Operation::Describe, t),
        "DENY WRITE denies only WRITE"
    );
    assert!(
        !may(&index, ALICE, Operation::Delete, t),
        "User:* denies alice too"
    );
    assert!(may(&index, BOB, Operation::Write, t));
    assert!(
        may(&index, BOB, Operation::Describe, t),
        "WRITE implies DESCRIBE"
    );
    assert!(may(&index, BOB, Operation::DescribeConfigs, t));
    assert!(!may(&index, BOB, Operation::Read, t));
    let verdict = index.authorize(&Request {
        principal: ALICE,
        host: None,
        operation: Operation::Write,
        resource: t,
    });
    assert_eq!(verdict, Verdict::Denied(Reason::Acl(&acls[1])));
    let mut deny_all = acls.to_vec();
    deny_all.push(acl(Permission::Deny, BOB, Operation::All, prefix("")));
    let index = Authorizer::new(AuthorizerConfig::default(), &deny_all);
    assert!(
        !may(&index, BOB, Operation::Describe, t),
        "DENY ALL denies all"
    );
}

#[test]
fn prefixes_and_wildcards_name_resources_and_hosts_narrow_acls() {
    let mut from_one_host = acl(Permission::Allow, BOB, Operation::Read, topic("t"));
    from_one_host.host = Host::parse("10.0.0.1").unwrap();
    let acls = [
        acl(Permission::Allow, ALICE, Operation::Read, prefix("orders-")),
        acl(Permission::Allow, ALICE, Operation::Write, topic("*")),
        acl(
            Permission::Allow,
            "User:*",
            Operation::Describe,
            prefix("pub"),
        ),
        acl(Permission::Allow, ALICE, Operation::Read, prefix("é")),
        from_one_host,
    ];
    let index = Authorizer::new(AuthorizerConfig::default(), &acls);
    assert!(may(
        &index,
        ALICE,
        Operation::Read,
        Resource::topic("orders-eu")
    ));
    assert!(!may(
        &index,
        ALICE,
        Operation::Read,
        Resource::topic("orders")
    ));
    assert!(may(
        &index,
        ALICE,
        Operation::Write,
        Resource::topic("anything")
    ));
    assert!(!may(
        &index,
        ALICE,
        Operation::Write,
        Resource::group("anything")
    ));
    assert!(may(
        &index,
        "User:carol",
        Operation::Describe,
        Resource::topic("public")
    ));
    assert!(!may(
        &index,
        "User:carol",
        Operation::Describe,
        Resource::topic("pu")
    ));
    assert!(may(&index, ALICE, Operation::Read, Resource::topic("été")));
    // A name whose bytes cut at a prefix's length fall inside a
    // character: no pattern ends there, and nothing panics.
    assert!(!may(&index, BOB, Operation::Read, Resource::topic("é")));
    let from = |ip: &str| Request {
        principal: BOB,
        host: Some(ip.parse::<IpAddr>().unwrap()),
        operation: Operation::Read,
        resource: Resource::topic("t"),
    };
    assert!(index.authorize(&from("10.0.0.1")).allowed());
    assert!(index.authorize(&from("::ffff:10.0.0.1")).allowed());
    assert!(!index.authorize(&from("10.0.0.2")).allowed());
    assert!(
        !may(&index, BOB, Operation::Read, Resource::topic("t")),
        "no address"
    );
    assert_eq!(index.len(), 5);
    let cluster = [acl(
        Permission::Allow,
        ALICE,
        Operation::Alter,
        (ResourceType::Cluster, CLUSTER_NAME, PatternType::Literal),
    )];
    let index = Authorizer::new(AuthorizerConfig::default(), &cluster);
    assert!(may(&index, ALICE, Operation::Alter, Resource::cluster()));
    assert!(may(&index, ALICE, Operation::Describe, Resource::cluster()));
    assert!(!may(&index, BOB, Operation::Alter, Resource::cluster()));
}

/// Kafka's rules written as a scan of every ACL, the way the module doc
/// states them: the index must answer as this does.
fn reference(config: &AuthorizerConfig, acls: &[AclBinding], request: &Request<'_>) -> bool {
    if config.super_users.contains(request.principal) {
        return true;
    }
    let naming: Vec<&AclBinding> = acls
        .iter()
        .filter(|a| a.pattern.matches(&request.resource))
        .collect();
    if naming.is_empty() {
        return config.allow_everyone_if_no_acl_found;
    }
    let applies =
        |a: &&&AclBinding| a.names_principal(request.principal) && a.host.admits(request.host);
    let denied = naming.iter().filter(applies).any(|a| {
        a.permission == Permission::Deny
            && (a.operation == request.operation || a.operation == Operation::All)
    });
    !denied
        && naming
            .iter()
            .filter(applies)
            .any(|a| a.permission == Permission::Allow && a.operation.implies(request.operation))
}

/// A small deterministic generator (xorshift64*): the seed is printed,
/// so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<'a, T>(&mut self, of: &'a [T]) -> &'a T {
        &of[(self.next() % of.len() as u64) as usize]
    }
}

/// Random ACLs over a small alphabet of names, principals, hosts and
/// operations (so they collide often), and random requests: the index
/// answers every request as the scan does.
#[test]
fn the_index_decides_as_a_scan_of_every_acl_does() {
    let names = ["", "a", "ab", "abc", "b", "*", "é", "éa"];
    let principals = [ALICE, BOB, "User:*", "User:carol"];
    let hosts = [Host::Any, Host::parse("10.0.0.1").unwrap()];
    let addresses: [Option<IpAddr>; 3] = [
        None,
        Some("10.0.0.1".parse().unwrap()),
        Some("10.0.0.2".parse().unwrap()),
    ];
    let types = [ResourceType::Topic, ResourceType::Group];
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let config = AuthorizerConfig {
            super_users: if seed % 7 == 0 {
                ["User:carol".to_owned()].into()
            } else {
                Default::default()
            },
            allow_everyone_if_no_acl_found: seed % 2 == 0,
        };
        let count = (rng.next() % 12) as usize;
        let acls: Vec<AclBinding> = (0..count)
            .map(|_| {
                let name = *rng.pick(&names[1..]);
                AclBinding {
                    pattern: ResourcePattern {
                        resource_type: *rng.pick(&types),
                        name: name.to_owned(),
                        pattern_type: *rng.pick(PatternType::ALL),
                    },
                    principal: (*rng.pick(&principals)).to_owned(),
                    host: *rng.pick(&hosts),
                    operation: *rng.pick(Operation::ALL),
                    permission: *rng.pick(Permission::ALL),
                }
            })
            .collect();
        let index = Authorizer::new(config.clone(), &acls);
        for _ in 0..200 {
            let principal = *rng.pick(&principals[..2]);
            let principal = if rng.next() % 5 == 0 {
                "User:carol"
            } else {
                principal
            };
            let request = Request {
                principal,
                host: *rng.pick(&addresses),
                operation: *rng.pick(&Operation::ALL[1..]),
                resource: Resource {
                    resource_type: *rng.pick(&types),
                    name: rng.pick::<&str>(&names),
                },
            };
            assert_eq!(
                index.authorize(&request).allowed(),
                reference(&config, &acls, &request),
                "seed {seed}: {request:?} under {acls:#?}"
            );
        }
    }
}
