#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use super::*;

fn cred(m: Mechanism, password: &str) -> ScramCredential {
    ScramCredential::from_password(m, password.as_bytes(), ITERATIONS_MIN).unwrap()
}

/// Created, changed and deleted users are what logins see from the next
/// one on, and what a reopened store holds; the file is the owner's only.
#[test]
fn users_are_kept_durably_and_logins_see_changes_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = UserStore::open(dir.path()).unwrap();
    store
        .create("alice", cred(Mechanism::Sha256, "one"))
        .unwrap();
    assert_eq!(
        store.create("alice", cred(Mechanism::Sha512, "two-pass!")),
        Err(UserError::Exists {
            name: "alice".into()
        })
    );
    assert!(store.verify_password("alice", b"one"));
    assert!(!store.verify_password("alice", b"two-pass!"));
    assert!(!store.verify_password("bob", b"one"));
    assert!(store.credential("alice", Mechanism::Sha256).is_some());
    assert!(store.credential("alice", Mechanism::Sha512).is_none());
    let mode = std::fs::metadata(dir.path().join(USERS_FILE))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    store
        .set_password("alice", cred(Mechanism::Sha512, "two-pass!"))
        .unwrap();
    assert!(store.verify_password("alice", b"two-pass!"));
    assert!(
        store.credential("alice", Mechanism::Sha256).is_none(),
        "a new password replaces every credential"
    );
    assert_eq!(
        store.set_password("bob", cred(Mechanism::Sha512, "x")),
        Err(UserError::NotFound { name: "bob".into() })
    );
    store.create("bob", cred(Mechanism::Sha256, "b")).unwrap();
    drop(store);

    let store = UserStore::open(dir.path()).unwrap();
    assert_eq!(
        store.describe(),
        [
            (
                "alice".to_owned(),
                vec![(Mechanism::Sha512, ITERATIONS_MIN)]
            ),
            ("bob".to_owned(), vec![(Mechanism::Sha256, ITERATIONS_MIN)]),
        ]
    );
    assert!(store.verify_password("alice", b"two-pass!"));
    store.delete("bob").unwrap();
    assert!(!store.verify_password("bob", b"b"));
    assert_eq!(
        store.delete("bob"),
        Err(UserError::NotFound { name: "bob".into() })
    );
    drop(store);
    let store = UserStore::open(dir.path()).unwrap();
    assert!(!store.exists("bob"));
    let text = std::fs::read_to_string(dir.path().join(USERS_FILE)).unwrap();
    // `!` is in no base64 or hex alphabet a salted key is written in, so
    // only the password itself could match (a bare "two" was found by
    // chance in a random salt's base64).
    assert!(!text.contains("two-pass!"), "no password in the file");
}

/// Bootstrap users are made once with both mechanisms; a stored user is
/// left as it is, whatever the config says.
#[test]
fn bootstrap_users_are_created_only_when_absent() {
    let dir = tempfile::tempdir().unwrap();
    let store = UserStore::open(dir.path()).unwrap();
    store
        .create("admin", cred(Mechanism::Sha256, "stored"))
        .unwrap();
    let made = store
        .ensure(
            &[
                ("admin".into(), b"from-config".to_vec()),
                ("ops".into(), b"ops-pw".to_vec()),
            ],
            ITERATIONS_MIN,
        )
        .unwrap();
    assert_eq!(made, ["ops"]);
    assert!(store.verify_password("admin", b"stored"));
    assert!(store.credential("ops", Mechanism::Sha256).is_some());
    assert!(store.credential("ops", Mechanism::Sha512).is_some());
    assert!(store.verify_password("ops", b"ops-pw"));
    assert!(store
        .ensure(&[("".into(), b"x".to_vec())], ITERATIONS_MIN)
        .is_err());
}

/// Kafka's AlterUserScramCredentials: per user, all or nothing, answered
/// per user in order; duplicates and missing credentials refused.
#[test]
fn alterations_answer_per_user() {
    let dir = tempfile::tempdir().unwrap();
    let store = UserStore::open(dir.path()).unwrap();
    store.create("carol", cred(Mechanism::Sha256, "c")).unwrap();
    let upsert = |user: &str, m, pw| Alteration::Upsert {
        user: user.into(),
        credential: cred(m, pw),
    };
    let delete = |user: &str, mechanism| Alteration::Delete {
        user: user.into(),
        mechanism,
    };
    let answers = store.alter(vec![
        upsert("dave", Mechanism::Sha512, "d"),
        upsert("erin", Mechanism::Sha256, "e1"),
        delete("carol", Mechanism::Sha512),
        upsert("erin", Mechanism::Sha256, "e2"),
        delete("carol", Mechanism::Sha256),
        upsert("", Mechanism::Sha256, "x"),
    ]);
    assert_eq!(
        answers,
        [
            ("dave".to_owned(), Ok(())),
            (
                "erin".to_owned(),
                Err(AlterRefusal::Duplicate {
                    mechanism: Mechanism::Sha256
                })
            ),
            (
                "carol".to_owned(),
                Err(AlterRefusal::NoCredential {
                    mechanism: Mechanism::Sha512
                })
            ),
            ("".to_owned(), Err(AlterRefusal::InvalidName)),
        ]
    );
    assert!(store.verify_password("dave", b"d"));
    assert!(!store.exists("erin"));
    assert!(
        store.verify_password("carol", b"c"),
        "carol's changes: none applied"
    );
    let answers = store.alter(vec![delete("carol", Mechanism::Sha256)]);
    assert_eq!(answers, [("carol".to_owned(), Ok(()))]);
    assert!(!store.exists("carol"), "a user without credentials is gone");
}

#[test]
fn the_store_is_bounded_and_names_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = UserStore::open(dir.path()).unwrap();
    store.max_users = 1;
    store.create("a", cred(Mechanism::Sha256, "a")).unwrap();
    assert_eq!(
        store.create("b", cred(Mechanism::Sha256, "b")),
        Err(UserError::TooMany { max: 1 })
    );
    store
        .set_password("a", cred(Mechanism::Sha512, "a2"))
        .unwrap();
    for bad in ["", "*", "a\nb", &"x".repeat(USERNAME_MAX + 1)] {
        assert!(
            matches!(check_name(bad), Err(UserError::InvalidName { .. })),
            "{bad:?}"
        );
    }
    assert!(check_name("User:with:colons and spaces").is_ok());
}

#[test]
fn a_damaged_file_refuses_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(USERS_FILE);
    let good = cred(Mechanism::Sha256, "p");
    let good = serde_json::to_string(&good).unwrap();
    let cases = [
        "[]".to_owned(),
        r#"{"version":9,"users":{}}"#.to_owned(),
        r#"{"version":1,"users":{"a":[]}}"#.to_owned(),
        format!(r#"{{"version":1,"users":{{"a":[{good},{good}]}}}}"#),
        format!(r#"{{"version":1,"users":{{"":[{good}]}}}}"#),
        format!(
            r#"{{"version":1,"users":{{"a":[{}]}}}}"#,
            good.replacen("\"iterations\":4096", "\"iterations\":1", 1)
        ),
    ];
    for text in cases {
        std::fs::write(&path, &text).unwrap();
        assert!(
            matches!(UserStore::open(dir.path()), Err(UserError::File { .. })),
            "{text}"
        );
    }
    std::fs::write(
        &path,
        format!(r#"{{"version":1,"users":{{"a":[{good}]}}}}"#),
    )
    .unwrap();
    let store = UserStore::open(dir.path()).unwrap();
    assert!(store.verify_password("a", b"p"));
}

/// A change hands its whole file to the hook before writing it, and a
/// refusal of the hook refuses the change; another store takes those
/// bytes whole (`install`), checked as at open, readable by its owner
/// only, and logins see them.
#[test]
fn changes_are_published_and_installed_elsewhere() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = UserStore::open(a.path()).unwrap();
    let replica = UserStore::open(b.path()).unwrap();
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
    master
        .create("alice", cred(Mechanism::Sha256, "secret"))
        .unwrap();
    let file = std::fs::read(a.path().join(USERS_FILE)).unwrap();
    assert_eq!(*published.lock().unwrap(), vec![file.clone()]);

    refuse.store(true, std::sync::atomic::Ordering::Release);
    let e = master
        .create("bob", cred(Mechanism::Sha256, "pw"))
        .unwrap_err();
    assert!(matches!(e, UserError::Write { .. }), "{e:?}");
    assert!(!master.exists("bob"));
    assert_eq!(std::fs::read(a.path().join(USERS_FILE)).unwrap(), file);

    replica.install(&file).unwrap();
    let path = b.path().join(USERS_FILE);
    assert_eq!(std::fs::read(&path).unwrap(), file);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(replica.verify_password("alice", b"secret"));
    for bad in [&b"nope"[..], br#"{"version":1,"users":{"*":[]}}"#] {
        assert!(matches!(replica.install(bad), Err(UserError::File { .. })));
    }
    assert!(replica.exists("alice"));
}
