//! One connection's state ([`Session`]): who logged in on it, a SASL
//! exchange under way, the client certificate's identity on a TLS
//! listener, and the answer bytes it holds until written.
//!
//! Invariants:
//! * A session lives as long as its connection (the listener owns it)
//!   and is seen by one request at a time, so no lock guards it.
//! * `principal` starts as who the TLS handshake's verified client
//!   certificate names (`User:<CN>`, Kafka's default SSL principal
//!   builder), else `User:ANONYMOUS` ([`Session::new`]); it changes only
//!   through `handlers::sasl`, once, to the principal a login proved (on
//!   SASL_SSL the SASL user wins over the certificate), and stays so for
//!   the connection's life (a second handshake is ILLEGAL_SASL_STATE); a
//!   logged-in user's account is re-checked before each request
//!   (`dispatch`), so a deleted user's connection ends at its next one.
//! * `logged_in` turns true with that SASL login and never back: on a
//!   SASL listener nothing but ApiVersions and the SASL APIs is served
//!   before it (`dispatch`), nor is the connection kept open past
//!   `kafka.authentication_timeout_ms` without it (`listener`).
//! * `close_after_answer` is set by a failed login: the listener writes
//!   that answer (SASL_AUTHENTICATION_FAILED), then closes.
//! * `answer_held` is set by the Fetch route and cleared by the listener
//!   once the answer is written (or the connection ends), so a fetch's
//!   bytes count in the answer budget exactly while they are in memory.

use tidelog_broker::security::scram::{Mechanism, ServerFirst};
use tidelog_broker::Principal;
use tidelog_runtime::budget::Reservation;
use tidelog_runtime::tls::PeerIdentity;

/// One connection's state (module doc).
#[derive(Debug)]
pub struct Session {
    /// A SaslHandshake chose a mechanism; its tokens come next (v0: raw
    /// frames, v1: SaslAuthenticate).
    pub handshake: Option<Handshake>,
    /// A SCRAM exchange between the client's first and final messages.
    pub scram: Option<ServerFirst>,
    /// Who the connection's requests are made as.
    pub principal: Principal,
    /// A SASL login succeeded on this connection.
    pub logged_in: bool,
    /// Close the connection once the answer being written is out.
    pub close_after_answer: bool,
    /// On a TLS listener (SSL, SASL_SSL): who the handshake's verified
    /// client certificate names (`common_name` `None` without one);
    /// `None` on a plaintext listener. Set once, before the first request.
    pub tls_peer: Option<PeerIdentity>,
    /// The answer budget's bytes the last answer holds (a fetch's
    /// records), given back once the listener has written it.
    pub answer_held: Option<Reservation>,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            handshake: None,
            scram: None,
            principal: Principal::Anonymous,
            logged_in: false,
            close_after_answer: false,
            tls_peer: None,
            answer_held: None,
        }
    }
}

impl Session {
    /// A new connection's session; `tls_peer`: its TLS handshake's
    /// client identity (a TLS listener's). A verified certificate's CN is
    /// the principal until a SASL login names another.
    pub fn new(tls_peer: Option<PeerIdentity>) -> Session {
        let principal = tls_peer
            .as_ref()
            .and_then(|peer| peer.common_name.as_deref())
            .map_or(Principal::Anonymous, |cn| {
                Principal::Certificate(std::sync::Arc::from(cn))
            });
        Session {
            principal,
            tls_peer,
            ..Session::default()
        }
    }

    /// Whether a SASL login succeeded on this connection.
    pub fn authenticated(&self) -> bool {
        self.logged_in
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verified_certificate_names_the_principal_until_a_login() {
        let peer = |cn: Option<&str>| {
            Some(PeerIdentity {
                common_name: cn.map(str::to_owned),
            })
        };
        let carol = Session::new(peer(Some("carol")));
        assert_eq!(carol.principal.kafka_name(), "User:carol");
        assert!(!carol.authenticated(), "a certificate is not a SASL login");
        assert_eq!(Session::new(peer(None)).principal, Principal::Anonymous);
        assert_eq!(Session::new(None).principal, Principal::Anonymous);
    }
}

/// The mechanism a handshake chose, and how its tokens are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    pub framing: Framing,
    pub mechanism: SaslMechanism,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// v0: a token comes as a bare frame, answered by a bare frame.
    Raw,
    /// v1: a token comes in SaslAuthenticate.
    Wrapped,
}

/// A SASL mechanism tidelog serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// RFC 4616: a user name and password in one message.
    Plain,
    /// RFC 5802/7677: two round trips, no password on the wire.
    Scram(Mechanism),
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        match name {
            "PLAIN" => Some(SaslMechanism::Plain),
            _ => Mechanism::from_name(name).map(SaslMechanism::Scram),
        }
    }
}
