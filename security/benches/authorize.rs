//! What one authorization check costs, with no ACL, with 10,000 ACLs of
//! other principals on the same topics, and with 10,000 prefixed patterns
//! of many lengths: the security issue's bound is that 10,000 ACLs cost
//! under 5 % of produce throughput, and a produce request of 100 records
//! costs the server about 100 µs of CPU (docs/BENCHMARKS.md), so a check
//! a request must stay far below a microsecond, whatever the ACL count.
//!
//! - `authorize/none`: no ACL names the resource (allow-if-none).
//! - `authorize/literal_10k`: 10,000 literal ALLOWs on 100 topics by 100
//!   principals; the asker has one of them.
//! - `authorize/prefixed_10k`: 10,000 prefixed patterns of lengths 1..=60
//!   over many principals; the asker has a prefix of the topic's name.

#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use tidelog_security::acl::{
    AclBinding, Authorizer, AuthorizerConfig, Host, Operation, PatternType, Permission, Request,
    Resource, ResourcePattern, ResourceType,
};

fn acl(principal: String, name: String, pattern_type: PatternType) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name,
            pattern_type,
        },
        principal,
        host: Host::Any,
        operation: Operation::Write,
        permission: Permission::Allow,
    }
}

fn request(topic: &str) -> Request<'_> {
    Request {
        principal: "User:p42",
        host: None,
        operation: Operation::Write,
        resource: Resource::topic(topic),
    }
}

fn authorize(c: &mut Criterion) {
    let mut group = c.benchmark_group("authorize");
    let open = AuthorizerConfig {
        allow_everyone_if_no_acl_found: true,
        ..AuthorizerConfig::default()
    };
    let none = Authorizer::new(open, &[]);
    group.bench_function("none", |b| {
        b.iter(|| black_box(none.authorize(black_box(&request("orders-eu-7")))))
    });

    let literal: Vec<AclBinding> = (0..10_000)
        .map(|i| {
            acl(
                format!("User:p{}", i % 100),
                format!("orders-eu-{}", i / 100),
                PatternType::Literal,
            )
        })
        .collect();
    let literal = Authorizer::new(AuthorizerConfig::default(), &literal);
    assert!(literal.authorize(&request("orders-eu-7")).allowed());
    group.bench_function("literal_10k", |b| {
        b.iter(|| black_box(literal.authorize(black_box(&request("orders-eu-7")))))
    });

    let name = "orders-eu-west-1-payments-settled-2026-12-06-partitioned-by-k";
    let prefixed: Vec<AclBinding> = (0..10_000)
        .map(|i| {
            let len = 1 + i % 60;
            let principal = if i == 9_999 { 42 } else { 1_000 + i };
            acl(
                format!("User:p{principal}"),
                name[..len].to_owned(),
                PatternType::Prefixed,
            )
        })
        .collect();
    let prefixed = Authorizer::new(AuthorizerConfig::default(), &prefixed);
    assert!(prefixed.authorize(&request(name)).allowed());
    group.bench_function("prefixed_10k", |b| {
        b.iter(|| black_box(prefixed.authorize(black_box(&request(name)))))
    });
    group.finish();
}

criterion_group!(benches, authorize);
criterion_main!(benches);
