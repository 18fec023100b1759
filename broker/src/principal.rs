//! Who is asking: the identity every operation of the broker's door
//! ([`crate::Door`]) is made as, Kafka's `User:<name>` model.
//!
//! A front-end names the principal once per connection or request (a
//! SASL login, HTTP Basic, a verified client certificate, the admin
//! token, or nobody) and the door checks what it may do
//! (`crate::access`). The front-ends never decide an ACL themselves.

use std::borrow::Cow;
use std::sync::Arc;

/// Kafka's name for a caller that did not log in.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// The identity a request is made as.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Principal {
    /// No login: Kafka's `User:ANONYMOUS`.
    Anonymous,
    /// A user of the store who logged in (SASL, HTTP Basic):
    /// `User:<name>`.
    User(Arc<str>),
    /// A client whose certificate the TLS listener verified (mTLS), by
    /// its subject's CN: `User:<CN>`, as Kafka's default SSL principal
    /// builder names it (no user of the store needed).
    Certificate(Arc<str>),
    /// The bearer of `admin_token` (HTTP's `Authorization: Bearer`,
    /// Kafka's SASL/PLAIN with the token as password): a super user, not
    /// a user of the store, so it works before any user exists.
    AdminToken,
}

impl Principal {
    /// The principal of user `name`.
    pub fn user(name: &str) -> Principal {
        Principal::User(Arc::from(name))
    }

    /// Kafka's spelling, `User:<name>`, as ACLs name principals.
    pub fn kafka_name(&self) -> Cow<'static, str> {
        match self {
            Principal::Anonymous => Cow::Borrowed(ANONYMOUS),
            Principal::User(name) | Principal::Certificate(name) => {
                Cow::Owned(format!("User:{name}"))
            }
            Principal::AdminToken => Cow::Borrowed("User:admin-token"),
        }
    }

    /// The user name of a logged-in user, whose account the broker
    /// re-checks on each request (a deleted user's connections fail).
    pub fn user_name(&self) -> Option<&str> {
        match self {
            Principal::User(name) => Some(name),
            Principal::Anonymous | Principal::Certificate(_) | Principal::AdminToken => None,
        }
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.kafka_name())
    }
}

/// Who the request being served comes from: its principal and the
/// client's address. A front-end names it once per request, around the
/// request's handling ([`Caller::scope`]), and its handlers reach the
/// broker through [`Broker::door_for`](crate::Broker::door_for) with
/// [`Caller::current`], so no handler passes the principal along or can
/// make a call as someone else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub principal: Principal,
    pub host: Option<std::net::IpAddr>,
}

tokio::task_local! {
    static CALLER: Caller;
}

impl Caller {
    /// Nobody logged in, from no particular host: the caller outside any
    /// [`Caller::scope`] (a test calling a handler, an in-process tool).
    pub fn anonymous() -> Caller {
        Caller {
            principal: Principal::Anonymous,
            host: None,
        }
    }

    /// Runs `f` (one request's handling) as this caller.
    pub async fn scope<F: std::future::Future>(self, f: F) -> F::Output {
        CALLER.scope(self, f).await
    }

    /// The caller of the request this task is serving.
    pub fn current() -> Caller {
        CALLER
            .try_with(Caller::clone)
            .unwrap_or_else(|_| Caller::anonymous())
    }
}
