#![allow(clippy::unwrap_used)]

use super::super::{ScramCredential, ServerFirst};
use super::*;

/// RFC 7677's example from the client's side: the same final message,
/// and the RFC's server final proves the server.
#[test]
fn rfc_7677_example_from_the_client() {
    let (login, first) =
        ClientLogin::start_with_nonce(Mechanism::Sha256, "user", b"pencil", "rOprNGfwEbeRWgbNEkqO")
            .unwrap();
    assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let (last, expected) = login
        .finish(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
        .unwrap();
    assert_eq!(
        String::from_utf8(last).unwrap(),
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    );
    expected
        .verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
        .unwrap();
}

/// `password` logging in as `user` against a server that holds alice's
/// credential of "s3cret": the server's verdict, and the client's check
/// of the server's final message when the server said yes.
fn login(m: Mechanism, user: &str, password: &str) -> Result<(), ScramError> {
    let credential = ScramCredential::from_password(m, b"s3cret", 4096).unwrap();
    let (client, first) = ClientLogin::start(m, user, password.as_bytes()).unwrap();
    let (server, server_first) = ServerFirst::start(m, &first, 4096, |name| {
        (name == "alice,=x").then(|| credential.clone())
    })
    .unwrap();
    let (last, expected) = client.finish(&server_first).unwrap();
    let done = server.finish(&last)?;
    assert_eq!(done.username, user);
    expected.verify(&done.server_final)
}

/// Both mechanisms against the server's side, with a name that needs
/// escaping: the password logs in and the server proves itself; a wrong
/// password or user does not.
#[test]
fn logs_in_against_the_server_with_both_mechanisms() {
    for m in Mechanism::ALL {
        login(m, "alice,=x", "s3cret").unwrap();
        assert_eq!(
            login(m, "alice,=x", "wrong"),
            Err(ScramError::InvalidCredentials)
        );
        assert_eq!(
            login(m, "bob", "s3cret"),
            Err(ScramError::InvalidCredentials)
        );
    }
}

/// A server's first message is checked before the client spends any
/// PBKDF2 on it, and its final message must carry the right signature.
#[test]
fn hostile_server_messages_are_refused() {
    let start = || {
        ClientLogin::start_with_nonce(Mechanism::Sha512, "alice", b"s3cret", "abc")
            .unwrap()
            .0
    };
    let refused = |server_first: &str| start().finish(server_first.as_bytes()).unwrap_err();
    // Iterations that would stall the client, or too few.
    assert_eq!(
        refused("r=abcdef,s=c2FsdA==,i=1000000000"),
        ScramError::Iterations {
            iterations: 1_000_000_000
        }
    );
    assert_eq!(
        refused("r=abcdef,s=c2FsdA==,i=1"),
        ScramError::Iterations { iterations: 1 }
    );
    // A nonce that does not extend the client's, or only repeats it.
    assert_eq!(refused("r=xyzdef,s=c2FsdA==,i=4096"), ScramError::Nonce);
    assert_eq!(refused("r=abc,s=c2FsdA==,i=4096"), ScramError::Nonce);
    // No salt, a salt that is not base64, no iterations, too long.
    assert!(matches!(
        refused("r=abcdef,s=,i=4096"),
        ScramError::Malformed { what: "salt" }
    ));
    assert!(matches!(
        refused("r=abcdef,s=!!,i=4096"),
        ScramError::Malformed { what: "salt" }
    ));
    assert!(matches!(
        refused("r=abcdef,s=c2FsdA=="),
        ScramError::Malformed { .. }
    ));
    let long = format!("r=abcdef,s=c2FsdA==,i=4096,x={}", "y".repeat(MESSAGE_MAX));
    assert!(matches!(refused(&long), ScramError::TooLong { .. }));

    let (_, expected) = start().finish(b"r=abcdef,s=c2FsdA==,i=4096").unwrap();
    assert_eq!(expected.verify(b"v=AAAA"), Err(ScramError::ServerSignature));
    let (_, expected) = start().finish(b"r=abcdef,s=c2FsdA==,i=4096").unwrap();
    assert_eq!(
        expected.verify(b"e=invalid-proof"),
        Err(ScramError::InvalidCredentials)
    );
    let (_, expected) = start().finish(b"r=abcdef,s=c2FsdA==,i=4096").unwrap();
    assert!(matches!(
        expected.verify(b"x=1"),
        Err(ScramError::Malformed { .. })
    ));
}
