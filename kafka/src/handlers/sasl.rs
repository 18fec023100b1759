//! SaslHandshake (17) and SaslAuthenticate (36): SCRAM-SHA-256,
//! SCRAM-SHA-512 and PLAIN logins (the security contract, Kafka's
//! KIP-84 and KIP-152).
//!
//! Invariants:
//! * The mechanisms offered are `kafka.sasl_mechanisms`, in its order. A
//!   login names a user of the broker's store (`User:<name>`), checked
//!   against its SCRAM credential: SCRAM proves the password without
//!   sending it (two round trips: client-first → server-first,
//!   client-final → server-final); PLAIN sends it and the broker derives
//!   the credential's key again (PBKDF2, on the blocking pool). PLAIN
//!   with the `admin_token` as password is the token's bearer
//!   ([`Principal::AdminToken`]), whatever user name it gives.
//! * Every message is bounded before it is read ([`MESSAGE_MAX_BYTES`];
//!   SCRAM's parts by `tidelog_security::scram`): a truncated, oversized or
//!   malformed one fails like a wrong password.
//! * A failed login is answered after `security.failed_auth_delay_ms`
//!   with SASL_AUTHENTICATION_FAILED and a message that says nothing of
//!   why (no "unknown user"), then the connection closes (v0: closed
//!   without an answer, as Kafka does). One warn line per second at most
//!   says how many failed, with the peer of the last; the closes are
//!   counted in `/metrics` (`reason="authentication"`), once each: v1's
//!   here, v0's by the listener (its frame error). No password, proof or
//!   key is ever logged.
//! * A login is per connection ([`Session`]) and happens once: a second
//!   handshake on a logged-in connection is ILLEGAL_SASL_STATE.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::auth::admin_token_matches;
use tidelog_broker::{Broker, Principal};

use crate::context::Context;
use crate::error::FrameError;
use crate::metrics::ClosedFor;
use crate::session::{Framing, Handshake, SaslMechanism, Session};

/// Longest SASL message read (a PLAIN message: two names and a
/// password; a SCRAM message: a name, nonces and a proof).
pub const MESSAGE_MAX_BYTES: usize = 4096;
/// What a failed login is told, whatever failed.
const FAILED: &str = "Authentication failed: invalid credentials";

pub fn handshake(
    ctx: &Context,
    session: &mut Session,
    version: i16,
    request: SaslHandshakeRequest,
) -> SaslHandshakeResponse {
    let offered = ctx
        .sasl_mechanisms
        .iter()
        .map(|m| StrBytes::from_static_str(m.name()))
        .collect();
    let answer = SaslHandshakeResponse::default().with_mechanisms(offered);
    if session.authenticated() || session.handshake.is_some() {
        return answer.with_error_code(ResponseError::IllegalSaslState.code());
    }
    let chosen = SaslMechanism::from_name(request.mechanism.as_str())
        .filter(|m| ctx.sasl_mechanisms.contains(m));
    let Some(mechanism) = chosen else {
        return answer.with_error_code(ResponseError::UnsupportedSaslMechanism.code());
    };
    let framing = if version == 0 {
        Framing::Raw
    } else {
        Framing::Wrapped
    };
    session.handshake = Some(Handshake { framing, mechanism });
    answer
}

pub async fn authenticate(
    ctx: &Context,
    session: &mut Session,
    request: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    if !matches!(session.handshake, Some(h) if h.framing == Framing::Wrapped) {
        return SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::IllegalSaslState.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "SaslAuthenticate needs a SaslHandshake (v1) first",
            )));
    }
    match step(ctx, session, &request.auth_bytes).await {
        Ok(token) => SaslAuthenticateResponse::default().with_auth_bytes(token.into()),
        Err(()) => {
            // The listener closes after this answer without an error to
            // count, so it is counted here.
            ctx.metrics.connection_closed_for(ClosedFor::Authentication);
            session.close_after_answer = true;
            SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str(FAILED)))
        }
    }
}

/// A bare token frame after a v0 handshake: the bare answer frame, or the
/// connection closed.
pub async fn raw(
    ctx: &Context,
    session: &mut Session,
    frame: &[u8],
) -> Result<BytesMut, FrameError> {
    let token = step(ctx, session, frame)
        .await
        .map_err(|()| FrameError::Authentication)?;
    let mut answer = BytesMut::with_capacity(4 + token.len());
    answer.put_i32(i32::try_from(token.len()).unwrap_or(i32::MAX));
    answer.put_slice(&token);
    Ok(answer)
}

/// One token of the chosen mechanism: the token to answer, with the
/// session's principal set once the login is done; `Err` once it failed
/// (after the failed-login delay, warned; the caller counts the close).
async fn step(ctx: &Context, session: &mut Session, token: &[u8]) -> Result<Vec<u8>, ()> {
    let Some(handshake) = session.handshake else {
        return Err(());
    };
    let outcome = match ctx.logins() {
        None => Err("the broker is recovering"),
        Some(broker) => match handshake.mechanism {
            SaslMechanism::Plain => plain(ctx, &broker, token)
                .await
                .map(|who| (who, Vec::new())),
            SaslMechanism::Scram(m) => match session.scram.take() {
                // The client's first message: the server's first answers
                // it, and the handshake stays for the final one.
                None => match broker.scram_start(m, token) {
                    Ok((first, answer)) => {
                        session.scram = Some(first);
                        return Ok(answer);
                    }
                    Err(_) => Err("malformed"),
                },
                Some(first) => first
                    .finish(token)
                    .map(|done| (Principal::user(&done.username), done.server_final))
                    .map_err(|_| "wrong proof"),
            },
        },
    };
    session.handshake = None;
    match outcome {
        Ok((who, answer)) => {
            tracing::info!(principal = %who, mechanism = handshake.mechanism.name(), "SASL login");
            session.principal = who;
            session.logged_in = true;
            Ok(answer)
        }
        Err(why) => {
            let delay = ctx
                .logins()
                .map_or(0, |b| b.security().failed_auth_delay_ms);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            warn_failed(handshake.mechanism, why);
            Err(())
        }
    }
}

/// A PLAIN message (`authzid NUL authcid NUL password`, RFC 4616): the
/// admin token's bearer, or the user whose password it is.
async fn plain(
    ctx: &Context,
    broker: &std::sync::Arc<Broker>,
    message: &[u8],
) -> Result<Principal, &'static str> {
    if message.len() > MESSAGE_MAX_BYTES {
        return Err("oversized");
    }
    let (user, password) = plain_parts(message).ok_or("malformed")?;
    if let Some(token) = &ctx.admin_token {
        if admin_token_matches(password, token.0.as_bytes()) {
            return Ok(Principal::AdminToken);
        }
    }
    let user = std::str::from_utf8(user).map_err(|_| "malformed")?;
    broker
        .login_with_password(user, password.to_vec())
        .await
        .ok_or("wrong password")
}

/// The user name and password of `authzid NUL authcid NUL password`,
/// when the message has that shape, a user name, and no authzid other
/// than that user (Kafka's rule: no acting as another user).
fn plain_parts(message: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut parts = message.splitn(3, |b| *b == 0);
    let authzid = parts.next()?;
    let authcid = parts.next()?;
    let password = parts.next()?;
    let ok = !authcid.is_empty()
        && !password.is_empty()
        && !password.contains(&0)
        && (authzid.is_empty() || authzid == authcid);
    ok.then_some((authcid, password))
}

/// Failed logins since the last warn line, and when that was.
static FAILED_SINCE_WARN: AtomicU64 = AtomicU64::new(0);
static LAST_WARN: Mutex<Option<Instant>> = Mutex::new(None);

/// One warn line per second at most (module doc); never the credential.
fn warn_failed(mechanism: SaslMechanism, why: &'static str) {
    let failed = FAILED_SINCE_WARN.fetch_add(1, Ordering::Relaxed) + 1;
    let mut last = LAST_WARN.lock().unwrap_or_else(|e| e.into_inner());
    if last.is_some_and(|at| at.elapsed() < Duration::from_secs(1)) {
        return;
    }
    *last = Some(Instant::now());
    FAILED_SINCE_WARN.store(0, Ordering::Relaxed);
    tracing::warn!(
        mechanism = mechanism.name(),
        reason = why,
        failed,
        "SASL login failed ({failed} since the last such line)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_are_parsed_strictly() {
        let parts = |m: &'static [u8]| plain_parts(m);
        assert_eq!(
            parts(b"\0admin\0s3cret"),
            Some((&b"admin"[..], &b"s3cret"[..]))
        );
        assert_eq!(
            parts(b"admin\0admin\0s3cret"),
            Some((&b"admin"[..], &b"s3cret"[..]))
        );
        assert_eq!(parts(b"other\0admin\0s3cret"), None, "acting as another");
        assert_eq!(parts(b"\0\0s3cret"), None);
        assert_eq!(parts(b"\0admin\0"), None);
        assert_eq!(parts(b"admin\0s3cret"), None);
        assert_eq!(parts(b"\0a\0b\0c"), None);
    }
}
