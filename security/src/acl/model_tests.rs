use super::*;

fn acl(resource_type: ResourceType, name: &str, pattern_type: PatternType) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type,
            name: name.to_owned(),
            pattern_type,
        },
        principal: "User:alice".to_owned(),
        host: Host::Any,
        operation: Operation::Read,
        permission: Permission::Allow,
    }
}

/// Kafka's wire codes and names, both ways, for every value; names in
/// any case; codes tidelog has not are `None`.
#[test]
fn codes_and_names_are_kafkas() {
    let names: Vec<(i8, &str)> = Operation::ALL
        .iter()
        .map(|o| (o.code(), o.name()))
        .collect();
    assert_eq!(
        names,
        [
            (2, "ALL"),
            (3, "READ"),
            (4, "WRITE"),
            (5, "CREATE"),
            (6, "DELETE"),
            (7, "ALTER"),
            (8, "DESCRIBE"),
            (9, "CLUSTER_ACTION"),
            (10, "DESCRIBE_CONFIGS"),
            (11, "ALTER_CONFIGS"),
            (12, "IDEMPOTENT_WRITE"),
            (13, "CREATE_TOKENS"),
            (14, "DESCRIBE_TOKENS"),
        ]
    );
    for &o in Operation::ALL {
        assert_eq!(Operation::from_code(o.code()), Some(o));
        assert_eq!(Operation::parse(&o.name().to_lowercase()), Some(o));
    }
    for &t in ResourceType::ALL {
        assert_eq!(ResourceType::from_code(t.code()), Some(t));
        assert_eq!(ResourceType::parse(t.name()), Some(t));
    }
    assert_eq!(ResourceType::Topic.code(), 2);
    assert_eq!(ResourceType::TransactionalId.name(), "TRANSACTIONAL_ID");
    assert_eq!(Permission::Deny.code(), 2);
    assert_eq!(Permission::Allow.code(), 3);
    assert_eq!(PatternType::Literal.code(), 3);
    assert_eq!(PatternType::Prefixed.code(), 4);
    // UNKNOWN and ANY are not values of an ACL; USER (7) and
    // DELEGATION_TOKEN (6) are resource types tidelog does not guard.
    for code in [-1, 0, 1, 6, 7, 15] {
        assert_eq!(ResourceType::from_code(code), None, "{code}");
    }
    for code in [0, 1, 15] {
        assert_eq!(Operation::from_code(code), None, "{code}");
    }
    assert_eq!(PatternFilter::from_code(1), Some(PatternFilter::Any));
    assert_eq!(PatternFilter::from_code(2), Some(PatternFilter::Match));
    assert_eq!(
        PatternFilter::from_code(4),
        Some(PatternFilter::Exactly(PatternType::Prefixed))
    );
    assert_eq!(PatternFilter::from_code(0), None);
    assert_eq!(PatternFilter::parse("match"), Some(PatternFilter::Match));
    assert_eq!(Operation::parse("reed"), None);
}

/// What an ALLOW implies: DESCRIBE from READ, WRITE, DELETE, ALTER;
/// DESCRIBE_CONFIGS from ALTER_CONFIGS; everything from ALL; nothing
/// else.
#[test]
fn implied_operations_are_kafkas() {
    use Operation as O;
    for &asked in O::ALL {
        for &allowed in O::ALL {
            let expected = allowed == asked
                || allowed == O::All
                || (asked == O::Describe
                    && [O::Read, O::Write, O::Delete, O::Alter].contains(&allowed))
                || (asked == O::DescribeConfigs && allowed == O::AlterConfigs);
            assert_eq!(allowed.implies(asked), expected, "{allowed} -> {asked}");
        }
    }
    assert!(!O::Create.implies(O::Describe));
    assert!(!O::Describe.implies(O::Read));
}

#[test]
fn patterns_match_literally_by_wildcard_or_by_prefix() {
    let topic = |name| Resource::topic(name);
    let literal = acl(ResourceType::Topic, "orders", PatternType::Literal).pattern;
    assert!(literal.matches(&topic("orders")));
    assert!(!literal.matches(&topic("orders-eu")));
    assert!(!literal.matches(&Resource::group("orders")), "another type");
    let wildcard = acl(ResourceType::Topic, "*", PatternType::Literal).pattern;
    assert!(wildcard.matches(&topic("anything")));
    assert!(!wildcard.matches(&Resource::group("anything")));
    let prefixed = acl(ResourceType::Topic, "orders", PatternType::Prefixed).pattern;
    assert!(prefixed.matches(&topic("orders")));
    assert!(prefixed.matches(&topic("orders-eu")));
    assert!(!prefixed.matches(&topic("order")));
    // A prefixed `*` is the prefix `*`, not a wildcard.
    let star = acl(ResourceType::Topic, "*", PatternType::Prefixed).pattern;
    assert!(star.matches(&topic("*x")));
    assert!(!star.matches(&topic("x")));
}

#[test]
fn new_acls_are_checked_as_kafka_checks_them() {
    let ok = acl(ResourceType::Topic, "t", PatternType::Literal);
    assert_eq!(ok.validate(), Ok(()));
    let mut a = ok.clone();
    a.pattern.name.clear();
    assert_eq!(a.validate(), Err(AclError::EmptyResourceName));
    let mut a = ok.clone();
    a.pattern.name = "x".repeat(RESOURCE_NAME_MAX + 1);
    assert!(matches!(
        a.validate(),
        Err(AclError::ResourceNameTooLong { .. })
    ));
    let mut a = acl(ResourceType::Cluster, "other", PatternType::Literal);
    assert!(matches!(a.validate(), Err(AclError::ClusterName { .. })));
    a.pattern.name = CLUSTER_NAME.to_owned();
    assert_eq!(a.validate(), Ok(()));
    for bad in ["alice", "User:", "Group:alice", "User:a\u{7}b", ""] {
        let mut a = ok.clone();
        a.principal = bad.to_owned();
        assert!(
            matches!(a.validate(), Err(AclError::Principal { .. })),
            "{bad:?}"
        );
    }
    let mut a = ok.clone();
    a.principal = format!("User:{}", "x".repeat(PRINCIPAL_MAX));
    assert!(matches!(a.validate(), Err(AclError::Principal { .. })));
    a.principal = WILDCARD_PRINCIPAL.to_owned();
    assert_eq!(a.validate(), Ok(()));
}

#[test]
fn hosts_are_any_or_an_address_in_canonical_form() {
    assert_eq!(Host::parse("*").unwrap(), Host::Any);
    let v6 = Host::parse("0:0:0:0:0:0:0:1").unwrap();
    assert_eq!(v6, Host::parse("::1").unwrap());
    assert_eq!(v6.to_string(), "::1");
    let mapped = Host::parse("::ffff:10.0.0.1").unwrap();
    assert_eq!(mapped, Host::parse("10.0.0.1").unwrap());
    assert!(mapped.admits(Some("10.0.0.1".parse().unwrap())));
    assert!(mapped.admits(Some("::ffff:10.0.0.1".parse().unwrap())));
    assert!(!mapped.admits(Some("10.0.0.2".parse().unwrap())));
    assert!(!mapped.admits(None), "an in-process call has no address");
    assert!(Host::Any.admits(None));
    for bad in ["", "localhost", "10.0.0", "10.0.0.1/8"] {
        assert!(
            matches!(Host::parse(bad), Err(AclError::Host { .. })),
            "{bad:?}"
        );
    }
    let long = "x".repeat(1000);
    let Err(AclError::Host { host }) = Host::parse(&long) else {
        panic!("refused")
    };
    assert!(host.len() < 100, "a client's string is cut in errors");
}

/// The filters of DescribeAcls and DeleteAcls: ANY, MATCH and exact
/// pattern types, with or without a name; `None` fields match all.
#[test]
fn filters_select_as_kafkas_do() {
    let literal = acl(ResourceType::Topic, "orders", PatternType::Literal);
    let wildcard = acl(ResourceType::Topic, "*", PatternType::Literal);
    let prefixed = acl(ResourceType::Topic, "ord", PatternType::Prefixed);
    let other = acl(ResourceType::Topic, "payments", PatternType::Literal);
    let group = acl(ResourceType::Group, "orders", PatternType::Literal);
    let all = [&literal, &wildcard, &prefixed, &other, &group];
    let selected = |f: &AclFilter| -> Vec<&AclBinding> {
        all.iter().copied().filter(|a| f.matches(a)).collect()
    };
    assert_eq!(selected(&AclFilter::any()).len(), 5);
    let topics = AclFilter {
        resource_type: Some(ResourceType::Topic),
        ..AclFilter::any()
    };
    assert_eq!(selected(&topics).len(), 4);
    let matching = AclFilter {
        name: Some("orders".into()),
        pattern: PatternFilter::Match,
        ..topics.clone()
    };
    assert_eq!(selected(&matching), [&literal, &wildcard, &prefixed]);
    let any_named = AclFilter {
        pattern: PatternFilter::Any,
        ..matching.clone()
    };
    assert_eq!(
        selected(&any_named),
        [&literal],
        "ANY with a name: that name"
    );
    let exact = AclFilter {
        name: None,
        pattern: PatternFilter::Exactly(PatternType::Prefixed),
        ..topics.clone()
    };
    assert_eq!(selected(&exact), [&prefixed]);
    let mut denied = literal.clone();
    denied.permission = Permission::Deny;
    let deny_filter = AclFilter {
        permission: Some(Permission::Deny),
        ..AclFilter::any()
    };
    assert!(deny_filter.matches(&denied));
    assert!(!deny_filter.matches(&literal));
    let by_principal = AclFilter {
        principal: Some("User:bob".into()),
        ..AclFilter::any()
    };
    assert!(!by_principal.matches(&literal));
}
