#![allow(clippy::unwrap_used)]

use super::*;
use crate::acl::model::{
    Host, Operation, PatternFilter, PatternType, Permission, Resource, ResourcePattern,
    ResourceType,
};
use crate::acl::Request;

fn acl(principal: &str, name: &str, operation: Operation) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: name.to_owned(),
            pattern_type: PatternType::Literal,
        },
        principal: principal.to_owned(),
        host: Host::Any,
        operation,
        permission: Permission::Allow,
    }
}

fn may_read(store: &AclStore, who: &str, topic: &str) -> bool {
    store
        .authorizer()
        .authorize(&Request {
            principal: who,
            host: None,
            operation: Operation::Read,
            resource: Resource::topic(topic),
        })
        .allowed()
}

/// Created ACLs are checked from the next request on, survive a reopen,
/// and creating one twice keeps one.
#[test]
fn acls_are_created_durably_and_checked_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    let store = AclStore::open(&config_dir, AuthorizerConfig::default()).unwrap();
    assert!(store.authorizer().is_empty());
    let before = store.authorizer();
    let mut bad = acl("alice", "t", Operation::Read);
    bad.principal = "alice".into();
    let answers = store.create(vec![
        acl("User:alice", "t", Operation::Read),
        bad,
        acl("User:alice", "t", Operation::Read),
    ]);
    assert!(answers[0].is_ok() && answers[2].is_ok(), "{answers:?}");
    assert!(matches!(answers[1], Err(AclError::Principal { .. })));
    assert!(may_read(&store, "User:alice", "t"));
    assert!(!may_read(&store, "User:bob", "t"));
    assert!(
        before.is_empty(),
        "a check in flight keeps the index it began with"
    );
    assert_eq!(store.describe(&AclFilter::any()).len(), 1);
    drop(store);

    let store = AclStore::open(&config_dir, AuthorizerConfig::default()).unwrap();
    assert_eq!(
        store.describe(&AclFilter::any()),
        [acl("User:alice", "t", Operation::Read)]
    );
    assert!(may_read(&store, "User:alice", "t"));
}

/// Each filter answers what it matched, overlaps included; each ACL is
/// removed once, durably; a filter matching nothing changes nothing.
#[test]
fn deletes_answer_per_filter_and_last() {
    let dir = tempfile::tempdir().unwrap();
    let store = AclStore::open(dir.path(), AuthorizerConfig::default()).unwrap();
    let acls = vec![
        acl("User:alice", "t", Operation::Read),
        acl("User:alice", "u", Operation::Read),
        acl("User:bob", "t", Operation::Write),
    ];
    assert!(store.create(acls.clone()).iter().all(Result::is_ok));
    let alice = AclFilter {
        principal: Some("User:alice".into()),
        ..AclFilter::any()
    };
    let on_t = AclFilter {
        resource_type: Some(ResourceType::Topic),
        name: Some("t".into()),
        pattern: PatternFilter::Exactly(PatternType::Literal),
        ..AclFilter::any()
    };
    let nobody = AclFilter {
        principal: Some("User:nobody".into()),
        ..AclFilter::any()
    };
    let deleted = store.delete(&[alice, on_t, nobody]).unwrap();
    assert_eq!(deleted[0], [acls[0].clone(), acls[1].clone()]);
    assert_eq!(deleted[1], [acls[0].clone(), acls[2].clone()]);
    assert!(deleted[2].is_empty());
    assert!(store.describe(&AclFilter::any()).is_empty());
    assert!(!may_read(&store, "User:alice", "t"));
    drop(store);
    let store = AclStore::open(dir.path(), AuthorizerConfig::default()).unwrap();
    assert!(store.describe(&AclFilter::any()).is_empty());
}

/// The store holds at most its bound; a create beyond it is refused for
/// the ACLs that do not fit, and creating an existing one still passes.
#[test]
fn the_store_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = AclStore::open(dir.path(), AuthorizerConfig::default()).unwrap();
    store.max_acls = 2;
    let answers = store.create(vec![
        acl("User:a", "t", Operation::Read),
        acl("User:b", "t", Operation::Read),
        acl("User:c", "t", Operation::Read),
        acl("User:a", "t", Operation::Read),
    ]);
    assert!(answers[0].is_ok() && answers[1].is_ok() && answers[3].is_ok());
    assert_eq!(answers[2], Err(AclError::TooMany { max: 2 }));
    assert_eq!(store.describe(&AclFilter::any()).len(), 2);
}

/// A file that is not an ACL file, of another version, or with an ACL
/// that would be refused today refuses the open, naming the file: a
/// store that dropped its ACLs could allow what they deny.
#[test]
fn a_damaged_file_refuses_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(ACL_FILE);
    let cases = [
        "{not json".to_owned(),
        r#"{"version":2,"acls":[]}"#.to_owned(),
        r#"{"version":1,"acls":[{"pattern":{"resource_type":"CLUSTER","name":"x","pattern_type":"LITERAL"},"principal":"User:a","host":"*","operation":"ALTER","permission":"ALLOW"}]}"#.to_owned(),
        r#"{"version":1,"acls":[{"pattern":{"resource_type":"TOPIC","name":"t","pattern_type":"LITERAL"},"principal":"User:a","host":"nowhere","operation":"READ","permission":"ALLOW"}]}"#.to_owned(),
    ];
    for text in cases {
        std::fs::write(&path, &text).unwrap();
        let refused = AclStore::open(dir.path(), AuthorizerConfig::default()).unwrap_err();
        assert!(
            matches!(&refused, AclError::File { path: p, .. } if p.ends_with(ACL_FILE)),
            "{text}: {refused:?}"
        );
    }
    std::fs::write(
        &path,
        r#"{"version":1,"acls":[{"pattern":{"resource_type":"TOPIC","name":"t","pattern_type":"PREFIXED"},"principal":"User:a","host":"::1","operation":"READ","permission":"DENY"}]}"#,
    )
    .unwrap();
    let store = AclStore::open(dir.path(), AuthorizerConfig::default()).unwrap();
    let [only] = &store.describe(&AclFilter::any())[..] else {
        panic!("one ACL")
    };
    assert_eq!(only.host, Host::parse("::1").unwrap());
    assert_eq!(only.permission, Permission::Deny);
}

/// The file as it is written, byte for byte: a change of its shape must
/// come with a version and a migration (docs/formats.md).
#[test]
fn file_is_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let store = AclStore::open(dir.path(), AuthorizerConfig::default()).unwrap();
    let mut prefixed = acl("User:alice", "orders", Operation::Read);
    prefixed.pattern.pattern_type = PatternType::Prefixed;
    prefixed.host = Host::parse("10.0.0.1").unwrap();
    prefixed.permission = Permission::Deny;
    assert!(store.create(vec![prefixed]).iter().all(Result::is_ok));
    let text = std::fs::read_to_string(dir.path().join(ACL_FILE)).unwrap();
    assert_eq!(
        text,
        r#"{
  "version": 1,
  "acls": [
    {
      "pattern": {
        "resource_type": "TOPIC",
        "name": "orders",
        "pattern_type": "PREFIXED"
      },
      "principal": "User:alice",
      "host": "10.0.0.1",
      "operation": "READ",
      "permission": "DENY"
    }
  ]
}"#
    );
}

/// A change hands its whole file to the hook before writing it, and a
/// refusal of the hook refuses the change; another store takes those
/// bytes whole (`install`), checked as at open, and checks see them.
#[test]
fn changes_are_published_and_installed_elsewhere() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = AclStore::open(a.path(), AuthorizerConfig::default()).unwrap();
    let replica = AclStore::open(b.path(), AuthorizerConfig::default()).unwrap();
    let published = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let refuse = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (p, r) = (Arc::clone(&published), Arc::clone(&refuse));
    master.set_publisher(Arc::new(move |bytes: &[u8]| {
        if r.load(std::sync::atomic::Ordering::Acquire) {
            return Err("refused".into());
        }
        p.lock().unwrap().push(bytes.to_vec());
        Ok(())
    }));
    assert!(master
        .create(vec![acl("User:alice", "orders", Operation::Read)])
        .iter()
        .all(Result::is_ok));
    let file = std::fs::read(a.path().join(ACL_FILE)).unwrap();
    assert_eq!(*published.lock().unwrap(), vec![file.clone()]);

    refuse.store(true, std::sync::atomic::Ordering::Release);
    let answers = master.create(vec![acl("User:bob", "orders", Operation::Read)]);
    assert!(
        matches!(answers[0], Err(AclError::Write { .. })),
        "{answers:?}"
    );
    assert_eq!(std::fs::read(a.path().join(ACL_FILE)).unwrap(), file);
    assert!(!may_read(&master, "User:bob", "orders"));

    replica.install(&file).unwrap();
    assert_eq!(std::fs::read(b.path().join(ACL_FILE)).unwrap(), file);
    assert!(may_read(&replica, "User:alice", "orders"));
    for bad in [&b"nope"[..], br#"{"version":2,"acls":[]}"#] {
        assert!(matches!(replica.install(bad), Err(AclError::File { .. })));
    }
    assert!(may_read(&replica, "User:alice", "orders"));
}
