//! Who an HTTP request comes from ([`caller`]): the principal its
//! handlers' door is made for (`AppState::door`, through the request's
//! `tidelog_broker::Caller` scope that `router::guard` opens).
//!
//! * `Authorization: Basic <user:password>`: a user of the broker's
//!   store, checked against its SCRAM credential
//!   (`Broker::login_with_password`; a password verified lately is not
//!   derived again, so Basic costs no PBKDF2 per request).
//! * `Authorization: Bearer <admin_token>`: the token's bearer, a super
//!   user (a wrong token is refused by the admin-token check of the
//!   routes that need it, and by this one when logins are required).
//! * Neither, over TLS with a verified client certificate (the
//!   listener's `PeerIdentity` in the request's extensions): `User:<CN>`
//!   (Kafka's SSL principal), a login as good as Basic for
//!   `security.authentication`; the ACLs decide what it may do.
//! * A write a replica forwarded (`crate::forward`), over a connection
//!   whose certificate names a node: the caller the node names, as if it
//!   had come here (its `Authorization`, else its certificate's CN, else
//!   nobody), from its address (`forwarded_by_node`).
//! * Nothing: `User:ANONYMOUS`. With `security.authentication: true` that
//!   is 401/40101 with `WWW-Authenticate: Basic realm="tidelog"`, except
//!   on the routes that stay open: `/status/ready`, `/metrics` and the
//!   console's own files (its page asks for the login).
//!
//! A wrong password is answered 401 after the failed-login delay, one at
//! a time with the other failures (`crate::failed_auth`), counted and
//! warned rate-limited; the password is never logged.

use std::sync::Arc;

use axum::http::{header, HeaderMap, Method};
use base64::Engine;
use tidelog_broker::auth::admin_token_matches;
use tidelog_broker::{Caller, Principal};

use crate::error::ApiError;
use crate::forward::{FORWARDED_BY, FORWARDED_FOR, FORWARDED_PRINCIPAL};
use crate::state::AppState;

/// Longest `Authorization` value read (a user name and a password).
const AUTHORIZATION_MAX_BYTES: usize = 4096;

/// The caller of a request with `headers` to `path` from `peer`, whose
/// TLS client certificate (if any) names `certificate_cn` (module doc).
pub async fn caller(
    state: &AppState,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    (peer, certificate_cn): (Option<std::net::IpAddr>, Option<&str>),
) -> Result<Caller, ApiError> {
    // A write a node forwarded: the caller it names stands where the
    // node's own certificate and address would.
    let forwarded = forwarded_by_node(state, headers, peer, certificate_cn)?;
    let (peer, certificate_cn) = match &forwarded {
        Some(f) => (f.host.or(peer), f.principal.as_deref()),
        None => (peer, certificate_cn),
    };
    let security = &state.settings().broker.security;
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '));
    let principal = match given {
        Some((scheme, credentials)) if scheme.eq_ignore_ascii_case("basic") => {
            match basic(state, credentials.trim()).await? {
                Some(principal) => principal,
                None => {
                    penalize(state, method, path).await;
                    return Err(ApiError::Unauthorized {
                        message: "wrong user name or password".into(),
                    });
                }
            }
        }
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            let matches = state
                .settings()
                .admin_token
                .as_deref()
                .is_some_and(|t| admin_token_matches(token.trim().as_bytes(), t.as_bytes()));
            if matches {
                Principal::AdminToken
            } else if security.authentication && !open_route(path) {
                // A guess where logins are required: delayed like a wrong
                // password (else it would be refused below at once, and
                // guessing the token would run at full speed).
                penalize(state, method, path).await;
                return Err(ApiError::Unauthorized {
                    message: "wrong bearer token".into(),
                });
            } else {
                // The admin routes' own check answers this (with its
                // delay); elsewhere a wrong token counts for nothing.
                Principal::Anonymous
            }
        }
        _ if headers.contains_key(header::AUTHORIZATION) => Principal::Anonymous,
        _ => certificate_cn.map_or(Principal::Anonymous, |cn| {
            Principal::Certificate(Arc::from(cn))
        }),
    };
    if security.authentication && principal == Principal::Anonymous && !open_route(path) {
        return Err(ApiError::Unauthorized {
            message: "this server needs a login: Authorization: Basic <user:password> (or the admin token as Bearer, or a client certificate over TLS)".into(),
        });
    }
    Ok(Caller {
        principal,
        host: peer,
    })
}

/// Who a node says it forwards a request for.
struct Forwarded {
    /// The CN of the caller's client certificate (`None`: the caller had
    /// none, or logged in with `Authorization`, which came along).
    principal: Option<String>,
    host: Option<std::net::IpAddr>,
}

/// The caller a node forwarded this request for (`crate::forward`), when
/// it carries [`FORWARDED_BY`] over a connection whose verified client
/// certificate names a node (`Broker::is_cluster_node`). Otherwise `None`, and
/// the forwarding headers count for nothing: a client cannot name
/// someone else by sending them. Asked while the broker recovers:
/// 503/50301 (it cannot tell a node from a user then, and must not
/// take the node's own certificate for the caller).
fn forwarded_by_node(
    state: &AppState,
    headers: &HeaderMap,
    peer: Option<std::net::IpAddr>,
    certificate_cn: Option<&str>,
) -> Result<Option<Forwarded>, ApiError> {
    let (true, Some(cn)) = (headers.contains_key(FORWARDED_BY), certificate_cn) else {
        return Ok(None);
    };
    if !state.ready()?.is_cluster_node(cn, peer) {
        return Ok(None);
    }
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    Ok(Some(Forwarded {
        principal: text(FORWARDED_PRINCIPAL)
            .filter(|cn| !cn.is_empty())
            .map(str::to_owned),
        host: text(FORWARDED_FOR).and_then(|host| host.parse().ok()),
    }))
}

/// Routes that answer without a login: the node's probes and the
/// console's files.
fn open_route(path: &str) -> bool {
    path == "/status/ready" || path == "/metrics" || path == "/ui" || path.starts_with("/ui/")
}

/// The user of `credentials` (base64 of `user:password`), if the
/// password is theirs.
/// 503/50301 while the broker recovers (the users are its).
async fn basic(state: &AppState, credentials: &str) -> Result<Option<Principal>, ApiError> {
    let broker = state.ready()?;
    let parts = (credentials.len() <= AUTHORIZATION_MAX_BYTES)
        .then(|| base64::engine::general_purpose::STANDARD.decode(credentials))
        .and_then(Result::ok)
        .and_then(|decoded| {
            let colon = decoded.iter().position(|b| *b == b':')?;
            let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
            let password = decoded[colon + 1..].to_vec();
            (!user.is_empty() && !password.is_empty()).then_some((user, password))
        });
    let Some((user, password)) = parts else {
        return Ok(None);
    };
    Ok(broker.login_with_password(&user, password).await)
}

/// The failed-login delay, counted and warned (`crate::failed_auth`).
async fn penalize(state: &AppState, method: &Method, path: &str) {
    let shared = state.shared();
    shared
        .failed_auth
        .penalize(&shared.metrics.auth_failures, method, path)
        .await;
}
