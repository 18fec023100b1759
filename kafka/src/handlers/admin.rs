//! Who may use the mutating admin APIs (KAFKA.md "Security").
//!
//! Without `admin_token` they are open, as the HTTP admin routes are.
//! With it, only a connection that logged in over SASL/PLAIN with the
//! token as password may (`handlers::sasl`); every other gets
//! TOPIC_AUTHORIZATION_FAILED (CLUSTER_AUTHORIZATION_FAILED for the
//! broker resource; GROUP_AUTHORIZATION_FAILED for OffsetDelete, an
//! operator's call on a group as HTTP's group delete is). Reads, produce,
//! fetch and the consumers' group APIs stay open.

use kafka_protocol::error::ResponseError;

use crate::context::Context;
use crate::session::Session;

/// Which authorization error a refusal carries.
#[derive(Debug, Clone, Copy)]
pub struct Resource(i16);

pub const TOPIC: Resource = Resource(ResponseError::TopicAuthorizationFailed.code());
pub const CLUSTER: Resource = Resource(ResponseError::ClusterAuthorizationFailed.code());
/// A group's committed offsets (OffsetDelete: an operator's call, as
/// HTTP's group routes under `admin_token`).
pub const GROUP: Resource = Resource(ResponseError::GroupAuthorizationFailed.code());

/// Whether this request's connection may use the mutating admin APIs.
#[derive(Debug, Clone, Copy)]
pub struct Gate {
    open: bool,
}

impl Gate {
    pub fn new(ctx: &Context, session: &Session) -> Gate {
        Gate {
            open: ctx.admin_token.is_none() || session.authenticated,
        }
    }

    /// The code and message a mutating admin request on `resource` is
    /// refused with, or `None` when it may go on.
    pub fn refusal(self, resource: Resource) -> Option<(i16, String)> {
        (!self.open).then(|| {
            (
                resource.0,
                "admin_token is set: log in with SASL/PLAIN, the token as password".to_owned(),
            )
        })
    }
}
