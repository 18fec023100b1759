//! The door's one check (`crate::access`): every principal's calls
//! against the ACLs of the moment, users and their logins, and what
//! survives a reopen.

use std::sync::Arc;

use bytes::Bytes;
use tidelog_security::acl::{
    AclBinding, AclFilter, Host, Operation, PatternType, Permission, ResourcePattern, ResourceType,
};
use tidelog_security::config::{BootstrapUser, SecurityConfig};
use tidelog_security::scram::Mechanism;

use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::error::BrokerError;
use crate::principal::Principal;
use crate::produce::ProduceRequest;
use crate::test_support::open_with;
use crate::topic_config::Overrides;
use crate::Door;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn secured(authorization: bool, authentication: bool) -> BrokerConfig {
    BrokerConfig {
        security: SecurityConfig {
            authorization,
            authentication,
            super_users: vec!["root".into()],
            ..SecurityConfig::default()
        },
        ..BrokerConfig::default()
    }
}

fn acl(
    principal: &str,
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type,
        },
        principal: principal.into(),
        host: Host::Any,
        operation,
        permission,
    }
}

fn produce(rt: &tokio::runtime::Runtime, door: &Door, topic: &str) -> Result<(), BrokerError> {
    let mut records = door.records_for(topic, 0)?;
    records.push(
        None,
        Some(Bytes::from_static(b"k")),
        Some(Bytes::from_static(b"v")),
        Vec::new(),
        None,
    );
    rt.block_on(door.produce(ProduceRequest {
        topic: topic.into(),
        partition: Some(0),
        records,
        producer: None,
        create_missing_topic: false,
        acks_all: true,
    }))
    .map(|_| ())
}

fn denied(result: Result<(), BrokerError>, resource: ResourceType, operation: Operation) {
    match result {
        Err(BrokerError::NotAuthorized {
            resource_type,
            operation: op,
            ..
        }) => assert_eq!((resource_type, op), (resource, operation)),
        other => panic!("expected a denial of {operation:?} on {resource:?}, got {other:?}"),
    }
}

fn admin(broker: &Arc<Broker>) -> Door {
    broker.door(&Principal::AdminToken)
}

#[test]
fn without_an_acl_a_user_may_do_nothing_and_acls_take_effect_at_once() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let broker = open_with(dir.path(), &secured(true, false));
    broker
        .create_topic("orders-1", 1, Overrides::new())
        .unwrap();
    broker
        .create_topic("payments", 1, Overrides::new())
        .unwrap();
    let alice = broker.door(&Principal::user("alice"));
    denied(
        produce(&rt, &alice, "orders-1"),
        ResourceType::Topic,
        Operation::Write,
    );
    assert!(
        alice.list_topics().is_empty(),
        "topics she may not describe are left out"
    );
    denied(
        alice.describe_topic("payments").map(|_| ()),
        ResourceType::Topic,
        Operation::Describe,
    );
    denied(
        alice.stats().map(|_| ()),
        ResourceType::Cluster,
        Operation::Describe,
    );

    // A prefixed ALLOW: her next call may.
    let created = rt
        .block_on(admin(&broker).create_acls(vec![acl(
            "User:alice",
            ResourceType::Topic,
            "orders-",
            PatternType::Prefixed,
            Operation::Write,
            Permission::Allow,
        )]))
        .unwrap();
    assert!(created.iter().all(Result::is_ok));
    produce(&rt, &alice, "orders-1").unwrap();
    denied(
        produce(&rt, &alice, "payments"),
        ResourceType::Topic,
        Operation::Write,
    );
    let listed: Vec<String> = alice
        .list_topics()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(listed, ["orders-1"], "WRITE implies DESCRIBE");

    // DENY beats ALLOW, for every user.
    rt.block_on(admin(&broker).create_acls(vec![acl(
        "User:*",
        ResourceType::Topic,
        "orders-1",
        PatternType::Literal,
        Operation::All,
        Permission::Deny,
    )]))
    .unwrap();
    denied(
        produce(&rt, &alice, "orders-1"),
        ResourceType::Topic,
        Operation::Write,
    );

    // Deleting them: denied again (no ACL: allow_everyone_if_no_acl_found
    // is false).
    let deleted = rt
        .block_on(admin(&broker).delete_acls(vec![AclFilter::any()]))
        .unwrap();
    assert_eq!(deleted[0].len(), 2);
    denied(
        produce(&rt, &alice, "orders-1"),
        ResourceType::Topic,
        Operation::Write,
    );

    // Super users and the admin token pass; a plain user may not change ACLs.
    produce(&rt, &broker.door(&Principal::user("root")), "payments").unwrap();
    produce(&rt, &admin(&broker), "payments").unwrap();
    denied(
        rt.block_on(alice.create_acls(Vec::new())).map(|_| ()),
        ResourceType::Cluster,
        Operation::Alter,
    );
    denied(
        alice.describe_acls(&AclFilter::any()).map(|_| ()),
        ResourceType::Cluster,
        Operation::Describe,
    );
}

#[test]
fn groups_and_offsets_need_their_own_operations() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let broker = open_with(dir.path(), &secured(true, false));
    broker.create_topic("t", 1, Overrides::new()).unwrap();
    let bob = broker.door(&Principal::user("bob"));
    let commit = |door: &Door| {
        rt.block_on(door.commit(
            "g".into(),
            vec![crate::groups::OffsetCommit {
                topic: "t".into(),
                partition: 0,
                value: crate::groups::CommitValue {
                    offset: 1,
                    metadata: String::new(),
                    ..Default::default()
                },
            }],
            crate::groups::Committer::Stateless,
        ))
    };
    denied(commit(&bob), ResourceType::Group, Operation::Read);
    let allow = |resource_type, name: &str| {
        acl(
            "User:bob",
            resource_type,
            name,
            PatternType::Literal,
            Operation::Read,
            Permission::Allow,
        )
    };
    rt.block_on(admin(&broker).create_acls(vec![allow(ResourceType::Group, "g")]))
        .unwrap();
    denied(commit(&bob), ResourceType::Topic, Operation::Read);
    assert!(
        bob.list_groups().is_empty(),
        "no group is listed before one exists"
    );
    rt.block_on(admin(&broker).create_acls(vec![allow(ResourceType::Topic, "t")]))
        .unwrap();
    commit(&bob).unwrap();
    let committed = bob.committed_offsets("g", None).unwrap().unwrap();
    assert_eq!(committed.len(), 1);
    assert_eq!(
        bob.list_groups().len(),
        1,
        "READ on the group implies DESCRIBE"
    );
    let carol = broker.door(&Principal::user("carol"));
    assert!(
        carol.list_groups().is_empty(),
        "others' groups are left out"
    );
    denied(
        carol.committed_offsets("g", None).map(|_| ()),
        ResourceType::Group,
        Operation::Describe,
    );
    denied(
        rt.block_on(bob.delete_group("g")),
        ResourceType::Group,
        Operation::Delete,
    );
}

#[test]
fn logins_required_leave_the_anonymous_nothing() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let broker = open_with(dir.path(), &secured(false, true));
    broker.create_topic("t", 1, Overrides::new()).unwrap();
    let anonymous = broker.door(&Principal::Anonymous);
    denied(
        produce(&rt, &anonymous, "t"),
        ResourceType::Topic,
        Operation::Write,
    );
    assert!(anonymous.list_topics().is_empty());
    // Without ACLs a logged-in user may do everything.
    produce(&rt, &broker.door(&Principal::user("anyone")), "t").unwrap();
}

#[test]
fn users_log_in_with_their_password_and_a_deleted_one_no_longer() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let password_file = dir.path().join("admin.password");
    std::fs::write(&password_file, "boot-secret\n").unwrap();
    let mut config = secured(true, true);
    config.security.users = vec![BootstrapUser {
        name: "admin".into(),
        password_file,
    }];
    let data = dir.path().join("data");
    let broker = open_with(&data, &config);
    let login = |user: &str, password: &str| {
        rt.block_on(broker.login_with_password(user, password.as_bytes().to_vec()))
    };
    assert_eq!(
        login("admin", "boot-secret"),
        Some(Principal::user("admin"))
    );
    assert_eq!(
        login("admin", "boot-secret"),
        Some(Principal::user("admin")),
        "verified lately"
    );
    assert_eq!(login("admin", "wrong"), None);
    assert_eq!(login("nobody", "boot-secret"), None);

    let door = admin(&broker);
    rt.block_on(door.create_user("alice", b"pw-1".to_vec(), Mechanism::Sha512))
        .unwrap();
    assert!(matches!(
        rt.block_on(door.create_user("alice", b"pw-2".to_vec(), Mechanism::Sha256)),
        Err(BrokerError::User { .. })
    ));
    assert!(broker
        .scram_credential("alice", Mechanism::Sha512)
        .is_some());
    assert_eq!(login("alice", "pw-1"), Some(Principal::user("alice")));
    rt.block_on(door.set_user_password("alice", b"pw-2".to_vec(), Mechanism::Sha256))
        .unwrap();
    assert_eq!(
        login("alice", "pw-1"),
        None,
        "the old password is valid under no mechanism"
    );
    assert_eq!(login("alice", "pw-2"), Some(Principal::user("alice")));
    let listed: Vec<String> = door
        .list_users()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(listed, ["admin", "alice"]);
    let alice = Principal::user("alice");
    assert!(broker.account_active(&alice));
    denied(
        broker.door(&alice).list_users().map(|_| ()),
        ResourceType::Cluster,
        Operation::Describe,
    );
    rt.block_on(door.delete_user("alice")).unwrap();
    assert!(
        !broker.account_active(&alice),
        "her connections end at their next request"
    );
    assert_eq!(login("alice", "pw-2"), None);
}

#[test]
fn users_and_acls_survive_a_reopen_and_bootstrap_users_are_not_reset() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let password_file = dir.path().join("admin.password");
    std::fs::write(&password_file, "first").unwrap();
    let mut config = secured(true, false);
    config.security.users = vec![BootstrapUser {
        name: "admin".into(),
        password_file: password_file.clone(),
    }];
    let data = dir.path().join("data");
    {
        let broker = open_with(&data, &config);
        let door = admin(&broker);
        rt.block_on(door.create_user("bob", b"pw".to_vec(), Mechanism::Sha256))
            .unwrap();
        rt.block_on(door.set_user_password("admin", b"changed".to_vec(), Mechanism::Sha256))
            .unwrap();
        rt.block_on(door.create_acls(vec![acl(
            "User:bob",
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            Operation::Read,
            Permission::Allow,
        )]))
        .unwrap();
        drop(door);
        Arc::into_inner(broker).unwrap().shutdown().unwrap();
    }
    let broker = open_with(&data, &config);
    let login = |user: &str, password: &str| {
        rt.block_on(broker.login_with_password(user, password.as_bytes().to_vec()))
    };
    assert!(login("bob", "pw").is_some());
    assert!(
        login("admin", "changed").is_some(),
        "a bootstrap user is left as stored"
    );
    assert!(login("admin", "first").is_none());
    let acls = admin(&broker).describe_acls(&AclFilter::any()).unwrap();
    assert_eq!(acls.len(), 1);
}

#[test]
fn a_bad_security_section_stops_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = secured(true, true);
    config.security.users = vec![BootstrapUser {
        name: "admin".into(),
        password_file: dir.path().join("missing"),
    }];
    let opened = Broker::open(
        &config,
        crate::test_support::store_config(&dir.path().join("data")),
        crate::test_support::cleaner_config(),
    );
    match opened {
        Err(BrokerError::InvalidConfig { key, .. }) => {
            assert!(key.starts_with("security.users"), "{key}")
        }
        other => panic!(
            "expected the missing password file refused, got {:?}",
            other.err()
        ),
    }
}
