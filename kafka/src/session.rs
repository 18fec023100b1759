//! One connection's state ([`Session`]): its SASL login, the client
//! certificate's identity on a TLS listener, and the answer bytes it
//! holds until written.
//!
//! Invariants:
//! * A session lives as long as its connection (the listener owns it)
//!   and is seen by one request at a time, so no lock guards it.
//! * `authenticated` turns true only through `handlers::sasl` with the
//!   admin token, and stays so for the connection's life; the admin gate
//!   (`handlers::admin::Gate`) reads it.
//! * `answer_held` is set by the Fetch route and cleared by the listener
//!   once the answer is written (or the connection ends), so a fetch's
//!   bytes count in the answer budget exactly while they are in memory.

use tidelog_runtime::budget::Reservation;
use tidelog_runtime::tls::PeerIdentity;

/// One connection's state: its SASL login (`handlers::sasl`).
#[derive(Debug, Default)]
pub struct Session {
    /// A SaslHandshake chose PLAIN; the next step is its token (v0: a raw
    /// frame, v1: SaslAuthenticate).
    pub handshake: Option<Handshake>,
    /// Logged in with the admin token.
    pub authenticated: bool,
    /// On a TLS listener (SSL, SASL_SSL): who the handshake's verified
    /// client certificate names (`common_name` `None` without one);
    /// `None` on a plaintext listener. Set once, before the first request.
    pub tls_peer: Option<PeerIdentity>,
    /// The answer budget's bytes the last answer holds (a fetch's
    /// records), given back once the listener has written it.
    pub answer_held: Option<Reservation>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// v0: the token comes as a bare frame, answered by a bare frame.
    Raw,
    /// v1: the token comes in SaslAuthenticate.
    Wrapped,
}
