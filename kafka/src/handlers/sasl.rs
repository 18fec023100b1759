//! SaslHandshake (17) and SaslAuthenticate (36): SASL/PLAIN with the
//! admin token as password (KAFKA.md "Security").
//!
//! Invariants:
//! * Only PLAIN is offered, and only when `admin_token` is set (without it
//!   there is nothing to log in to: UNSUPPORTED_SASL_MECHANISM, no
//!   mechanisms listed).
//! * A PLAIN message (`authzid NUL authcid NUL password`, RFC 4616) over
//!   [`PLAIN_MAX_BYTES`] or of any other shape fails; the user name is
//!   not checked, the password is compared with the token in constant time
//!   (for a given length) and never logged.
//! * A login is per connection ([`Session`]); a failed one leaves the
//!   connection unauthenticated and needs a new handshake. After a v0
//!   handshake the token comes as a bare frame: a good one is answered by
//!   an empty frame, a bad one closes the connection, as Kafka does.

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::auth::admin_token_matches;

use crate::context::Context;
use crate::error::FrameError;
use crate::session::{Handshake, Session};

pub const MECHANISM: &str = "PLAIN";
/// Longest PLAIN message read: two names and a token.
pub const PLAIN_MAX_BYTES: usize = 4096;

pub fn handshake(
    ctx: &Context,
    session: &mut Session,
    version: i16,
    request: SaslHandshakeRequest,
) -> SaslHandshakeResponse {
    if ctx.admin_token.is_none() {
        return SaslHandshakeResponse::default()
            .with_error_code(ResponseError::UnsupportedSaslMechanism.code());
    }
    let offered = vec![StrBytes::from_static_str(MECHANISM)];
    let answer = SaslHandshakeResponse::default().with_mechanisms(offered);
    if session.authenticated {
        return answer.with_error_code(ResponseError::IllegalSaslState.code());
    }
    if request.mechanism.as_str() != MECHANISM {
        return answer.with_error_code(ResponseError::UnsupportedSaslMechanism.code());
    }
    session.handshake = Some(if version == 0 {
        Handshake::Raw
    } else {
        Handshake::Wrapped
    });
    answer
}

pub fn authenticate(
    ctx: &Context,
    session: &mut Session,
    request: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    if session.handshake.take() != Some(Handshake::Wrapped) {
        return SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::IllegalSaslState.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "SaslAuthenticate needs a SaslHandshake (v1) choosing PLAIN first",
            )));
    }
    if login(ctx, session, &request.auth_bytes) {
        return SaslAuthenticateResponse::default();
    }
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "authentication failed: the password must be the admin token",
        )))
}

/// The bare token frame after a v0 handshake: an empty answer frame, or
/// the connection closed.
pub fn raw(ctx: &Context, session: &mut Session, frame: &[u8]) -> Result<BytesMut, FrameError> {
    session.handshake = None;
    if login(ctx, session, frame) {
        return Ok(BytesMut::from(&0i32.to_be_bytes()[..]));
    }
    Err(FrameError::Authentication)
}

/// Checks a PLAIN message against the token; marks `session` on success.
fn login(ctx: &Context, session: &mut Session, message: &[u8]) -> bool {
    let Some(token) = &ctx.admin_token else {
        return false;
    };
    let ok = message.len() <= PLAIN_MAX_BYTES
        && match plain_password(message) {
            Some(password) => admin_token_matches(password, token.0.as_bytes()),
            None => false,
        };
    if ok {
        session.authenticated = true;
        tracing::info!("SASL/PLAIN admin login");
    } else {
        tracing::warn!("SASL/PLAIN login failed");
    }
    ok
}

/// The password of `authzid NUL authcid NUL password`, when the message
/// has that shape and a user name.
fn plain_password(message: &[u8]) -> Option<&[u8]> {
    let mut parts = message.splitn(3, |b| *b == 0);
    let _authzid = parts.next()?;
    let authcid = parts.next()?;
    let password = parts.next()?;
    (!authcid.is_empty() && !password.contains(&0)).then_some(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_are_parsed_strictly() {
        assert_eq!(plain_password(b"\0admin\0s3cret"), Some(&b"s3cret"[..]));
        assert_eq!(plain_password(b"who\0admin\0s3cret"), Some(&b"s3cret"[..]));
        assert_eq!(plain_password(b"\0\0s3cret"), None);
        assert_eq!(plain_password(b"admin\0s3cret"), None);
        assert_eq!(plain_password(b"\0a\0b\0c"), None);
    }
}
