//! Dispatch by API key: the request header, the served-version check,
//! the structural check before decoding, then the API's route.
//!
//! What is served is [`routes::ROUTES`], one row per API: a key without
//! a row closes the connection (KAFKA.md "Bad input"), as does a version
//! outside its row's range, except ApiVersions, which answers an unknown
//! version with UNSUPPORTED_VERSION and its own range in a v0 body
//! (KIP-511). On a SASL listener (SASL_PLAINTEXT, SASL_SSL) a connection
//! that has not logged in is served only what [`routes::BEFORE_LOGIN`]
//! names; any other request closes it (Kafka's illegal SASL state),
//! before its header is decoded, so no handler runs for it. This file
//! names no API but ApiVersions (for KIP-511) and SASL's bare token
//! frame; it imports the handlers, never the reverse.

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;

use crate::call::{self, Call};
use crate::context::Context;
use crate::error::FrameError;
use crate::handlers;
use crate::precheck;
use crate::routes;
use crate::session::{Framing, Session};
use tidelog_broker::Caller;

/// The answer frame (length-prefixed) to one request frame; `None` when
/// the request gets none (Produce with acks 0).
pub async fn handle(ctx: &Context, frame: Bytes) -> Result<Option<BytesMut>, FrameError> {
    handle_from(ctx, frame, None).await
}

/// [`handle`] for a request from `peer` (the client host a group member
/// is described with).
pub async fn handle_from(
    ctx: &Context,
    frame: Bytes,
    peer: Option<std::net::SocketAddr>,
) -> Result<Option<BytesMut>, FrameError> {
    handle_in(ctx, frame, peer, &mut Session::default()).await
}

/// [`handle_from`] on a connection whose state is `session`.
pub async fn handle_in(
    ctx: &Context,
    frame: Bytes,
    peer: Option<std::net::SocketAddr>,
    session: &mut Session,
) -> Result<Option<BytesMut>, FrameError> {
    if raw_token_expected(session) {
        // After a v0 handshake the next frames are bare SASL tokens.
        return handlers::sasl::raw(ctx, session, &frame).await.map(Some);
    }
    // A logged-in user's account is looked up again before each request:
    // a deleted user's connection ends here (Kafka re-checks so too).
    if session.principal.user_name().is_some()
        && ctx
            .logins()
            .is_some_and(|b| !b.account_active(&session.principal))
    {
        tracing::info!(principal = %session.principal, "closing the connection of a deleted user");
        return Err(FrameError::Authentication);
    }
    let Some(prefix) = frame.get(..4) else {
        return Err(FrameError::Header {
            reason: format!("{} bytes, fewer than a key and a version", frame.len()),
        });
    };
    let raw_key = i16::from_be_bytes([prefix[0], prefix[1]]);
    let version = i16::from_be_bytes([prefix[2], prefix[3]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| FrameError::UnknownKey { key: raw_key })?;
    let route = routes::route(key).ok_or(FrameError::UnknownKey { key: raw_key })?;
    let (min, max, api) = (route.min, route.max, route.name);
    if ctx.security_protocol.uses_sasl() && !session.logged_in && !routes::served_before_login(key)
    {
        return Err(FrameError::NotLoggedIn {
            api,
            protocol: ctx.security_protocol.as_str(),
        });
    }
    let mut buf = frame;
    let header_version = key.request_header_version(version.clamp(min, max));
    precheck::header(&buf, header_version).map_err(|reason| FrameError::Header { reason })?;
    let header =
        RequestHeader::decode(&mut buf, header_version).map_err(|e| FrameError::Header {
            reason: e.to_string(),
        })?;
    if !(min..=max).contains(&version) {
        if key == ApiKey::ApiVersions {
            let code = ResponseError::UnsupportedVersion.code();
            let answer = handlers::api_versions::answer(code, routes::served());
            return call::encode(api, header.correlation_id, key, 0, &answer).map(Some);
        }
        return Err(FrameError::Version {
            api,
            version,
            min,
            max,
        });
    }
    precheck::body(key, route.walk, version, &buf).map_err(|reason| FrameError::Body {
        api,
        version,
        reason,
    })?;
    let caller = Caller {
        principal: session.principal.clone(),
        host: peer.map(|p| p.ip()),
    };
    let call = Call {
        ctx,
        session,
        peer,
        header,
        key,
        version,
        api,
        body: buf,
    };
    // The request's handlers reach the broker as this caller
    // (`Context::door`).
    caller.scope((route.serve)(call)).await
}

/// Whether the next frame is a bare SASL token (a v0 handshake chose a
/// mechanism and its exchange is not done).
fn raw_token_expected(session: &Session) -> bool {
    matches!(session.handshake, Some(h) if h.framing == Framing::Raw)
}

/// The key and name `/metrics` counts a request frame under: its
/// route's, read off its first two bytes (an unserved or unknown key
/// never gets here: its frame closes the connection); after a v0 SASL
/// handshake on `session`, SaslAuthenticate's (the frame is a bare token).
pub fn api_label(session: &Session, frame: &[u8]) -> (i16, &'static str) {
    let raw_key = if raw_token_expected(session) {
        ApiKey::SaslAuthenticate as i16
    } else {
        let Some(prefix) = frame.get(..2) else {
            return (-1, "unserved");
        };
        i16::from_be_bytes([prefix[0], prefix[1]])
    };
    let name = ApiKey::try_from(raw_key)
        .ok()
        .and_then(routes::route)
        .map_or("unserved", |r| r.name);
    (raw_key, name)
}
