#![allow(clippy::unwrap_used)]

use super::*;

/// The client's final message for `server_first` from the client's side
/// ([`client::ClientLogin`], started as `user` with `nonce`), and the
/// server final it expects.
fn client_final(
    m: Mechanism,
    password: &[u8],
    user: &str,
    nonce: &str,
    server_first: &str,
) -> (String, client::ExpectedServerFinal) {
    let (login, _) = client::ClientLogin::start_with_nonce(m, user, password, nonce).unwrap();
    let (last, expected) = login.finish(server_first.as_bytes()).unwrap();
    (String::from_utf8(last).unwrap(), expected)
}

fn credential(m: Mechanism, password: &str) -> ScramCredential {
    ScramCredential::from_password(m, password.as_bytes(), 4096).unwrap()
}

/// RFC 7677's example exchange, byte for byte.
#[test]
fn rfc_7677_example() {
    let m = Mechanism::Sha256;
    let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let salted = m.salted_password(b"pencil", &salt, 4096);
    let cred = ScramCredential::from_salted_password(m, salt, &salted, 4096).unwrap();
    let (server, first) = ServerFirst::start_with_nonce(
        m,
        b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        4096,
        |user| (user == "user").then(|| cred.clone()),
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(first).unwrap(),
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let done = server
        .finish(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
              p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        )
        .unwrap();
    assert_eq!(done.username, "user");
    assert_eq!(
        String::from_utf8(done.server_final).unwrap(),
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    );
}

/// Both mechanisms: the right password logs in and the client can check
/// the server; a wrong one and an unknown user fail alike, at the proof.
#[test]
fn logins_succeed_with_the_password_and_fail_alike_without() {
    for m in Mechanism::ALL {
        let cred = credential(m, "s3cret");
        let lookup = |user: &str| (user == "alice").then(|| cred.clone());
        let exchange = |user: &str, password: &str| {
            let bare = format!("n={user},r=clientnonce");
            let (server, first) =
                ServerFirst::start(m, format!("n,,{bare}").as_bytes(), 4096, lookup).unwrap();
            let first = String::from_utf8(first).unwrap();
            assert!(first.starts_with("r=clientnonce"), "{first}");
            let (last, expected) =
                client_final(m, password.as_bytes(), user, "clientnonce", &first);
            (
                first,
                server.finish(last.as_bytes()).map(|ok| (ok, expected)),
            )
        };
        let (_, ok) = exchange("alice", "s3cret");
        let (done, expected) = ok.unwrap();
        assert_eq!(done.username, "alice");
        expected.verify(&done.server_final).unwrap();
        assert_eq!(
            exchange("alice", "wrong").1.unwrap_err(),
            ScramError::InvalidCredentials
        );
        let (first_a, unknown) = exchange("mallory", "s3cret");
        assert_eq!(unknown.unwrap_err(), ScramError::InvalidCredentials);
        let (first_b, _) = exchange("mallory", "s3cret");
        let salt_of = |first: &str| first.split(',').nth(1).unwrap().to_owned();
        assert_eq!(
            salt_of(&first_a),
            salt_of(&first_b),
            "an unknown user's salt is stable"
        );
        assert_eq!(first_a.split(',').nth(2), Some("i=4096"));
    }
}

#[test]
fn passwords_verify_against_the_stored_credential() {
    for m in Mechanism::ALL {
        let cred = credential(m, "pässword");
        assert!(cred.verify_password("pässword".as_bytes()));
        assert!(!cred.verify_password(b"password"));
        assert!(!cred.verify_password(b""));
        assert!(cred.is_well_formed());
        let debug = format!("{cred:?}");
        assert!(
            !debug.contains("stored_key") && !debug.contains("server_key"),
            "{debug}"
        );
        let json = serde_json::to_string(&cred).unwrap();
        let back: ScramCredential = serde_json::from_str(&json).unwrap();
        assert_eq!(back, cred);
    }
    for iterations in [0, 4095, 16385] {
        assert_eq!(
            ScramCredential::from_password(Mechanism::Sha256, b"p", iterations).unwrap_err(),
            ScramError::Iterations { iterations }
        );
    }
    let short = ScramCredential::from_salted_password(Mechanism::Sha512, vec![1], &[0; 32], 4096);
    assert_eq!(
        short.unwrap_err(),
        ScramError::Malformed {
            what: "salted password"
        }
    );
}

/// Every malformed or refused first message is a typed error, never a
/// panic, whatever its bytes.
#[test]
fn hostile_first_messages_are_refused() {
    let m = Mechanism::Sha256;
    let cases: &[(&[u8], ScramError)] = &[
        (b"p=tls-unique,,n=a,r=x", ScramError::ChannelBinding),
        (b"n,a=bob,n=alice,r=x", ScramError::Authzid),
        (b"n,,n=alice,r=x,tokenauth=true", ScramError::TokenAuth),
        (
            b"n,,n=al=2Xice,r=x",
            ScramError::Malformed { what: "saslname" },
        ),
        (b"n,,n=alice,r=", ScramError::Malformed { what: "nonce" }),
        (b"n,,n=alice", ScramError::Malformed { what: "nonce" }),
        (b"n,,n=,r=x", ScramError::Malformed { what: "user name" }),
        (b"n,,r=x", ScramError::Malformed { what: "user name" }),
        (b"x,,n=a,r=x", ScramError::Malformed { what: "gs2 flag" }),
        (b"n", ScramError::Malformed { what: "gs2 header" }),
        (b"", ScramError::Malformed { what: "gs2 header" }),
        (
            b"n,,n=a,r=x,=v",
            ScramError::Malformed { what: "extension" },
        ),
        (b"n,,n=\xff,r=x", ScramError::Malformed { what: "UTF-8" }),
    ];
    for (message, expected) in cases {
        let refused = ServerFirst::start(m, message, 4096, |_| None).unwrap_err();
        assert_eq!(&refused, expected, "{:?}", String::from_utf8_lossy(message));
    }
    let long_nonce = format!("n,,n=a,r={}", "x".repeat(NONCE_MAX + 1));
    assert!(ServerFirst::start(m, long_nonce.as_bytes(), 4096, |_| None).is_err());
    let long_name = format!("n,,n={},r=x", "a".repeat(USERNAME_MAX + 1));
    assert!(ServerFirst::start(m, long_name.as_bytes(), 4096, |_| None).is_err());
    let huge = vec![b'n'; MESSAGE_MAX + 1];
    assert_eq!(
        ServerFirst::start(m, &huge, 4096, |_| None).unwrap_err(),
        ScramError::TooLong {
            len: MESSAGE_MAX + 1
        }
    );
    // Escaped names and an authorization id that is the user are fine.
    let (server, _) = ServerFirst::start(m, b"y,a=a=2Cb,n=a=2Cb,r=x", 4096, |_| None).unwrap();
    assert_eq!(server.username(), "a,b");
}

/// The final message must carry the first message's header and the
/// exchange's nonce, and a proof of the hash's length.
#[test]
fn hostile_final_messages_are_refused() {
    let m = Mechanism::Sha512;
    let cred = credential(m, "pw");
    let start = || {
        let (server, first) =
            ServerFirst::start(m, b"n,,n=u,r=abc", 4096, |_| Some(cred.clone())).unwrap();
        (server, String::from_utf8(first).unwrap())
    };
    type Mutation = fn(&str, &str) -> String;
    let cases: [(Mutation, ScramError); 5] = [
        (
            |good, _| good.replacen("c=biws", "c=eSws", 1),
            ScramError::ChannelBindingMismatch,
        ),
        (
            |good, nonce| good.replacen(nonce, "r=abcX", 1),
            ScramError::Nonce,
        ),
        (
            |good, _| format!("{},p=AAAA", good.rsplit_once(",p=").unwrap().0),
            ScramError::Malformed { what: "proof" },
        ),
        (
            |good, _| good.replacen("c=", "x=", 1),
            ScramError::Malformed {
                what: "channel binding",
            },
        ),
        (
            |_, _| "c=biws".to_owned(),
            ScramError::Malformed { what: "proof" },
        ),
    ];
    for (mutate, expected) in cases {
        let (server, first) = start();
        let (good, _) = client_final(m, b"pw", "u", "abc", &first);
        let message = mutate(&good, first.split(',').next().unwrap());
        assert_eq!(
            server.finish(message.as_bytes()).unwrap_err(),
            expected,
            "{message}"
        );
    }
    let (server, first) = start();
    let (good, _) = client_final(m, b"pw", "u", "abc", &first);
    assert!(server.finish(good.as_bytes()).is_ok());
}

#[test]
fn mechanisms_have_kafkas_names_and_codes() {
    assert_eq!(
        Mechanism::from_name("SCRAM-SHA-256"),
        Some(Mechanism::Sha256)
    );
    assert_eq!(
        Mechanism::from_name("SCRAM-SHA-512"),
        Some(Mechanism::Sha512)
    );
    assert_eq!(Mechanism::from_name("scram-sha-256"), None);
    assert_eq!(Mechanism::from_code(1), Some(Mechanism::Sha256));
    assert_eq!(Mechanism::from_code(2), Some(Mechanism::Sha512));
    assert_eq!(Mechanism::from_code(0), None);
}
