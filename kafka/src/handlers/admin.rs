//! Who may use the mutating admin APIs (KAFKA.md "Security").
//!
//! Without `admin_token` they are open, as the HTTP admin routes are.
//! With it, only a connection that logged in over SASL/PLAIN with the
//! token as password may (`handlers::sasl`); every other gets
//! TOPIC_AUTHORIZATION_FAILED (CLUSTER_AUTHORIZATION_FAILED for the
//! broker resource; GROUP_AUTHORIZATION_FAILED for OffsetDelete, an
//! operator's call on a group as HTTP's group delete is). Reads, produce,
//! fetch and the consumers' group APIs stay open.

use crate::context::Context;
use crate::error::{AdminResource, Refusal};
use crate::session::Session;
use tidelog_broker::Principal;

/// Which authorization error a refusal carries.
pub type Resource = AdminResource;

pub const TOPIC: Resource = AdminResource::Topic;
pub const CLUSTER: Resource = AdminResource::Cluster;
/// A group's committed offsets (OffsetDelete: an operator's call, as
/// HTTP's group routes under `admin_token`).
pub const GROUP: Resource = AdminResource::Group;

/// Whether this request's connection may use the mutating admin APIs.
#[derive(Debug, Clone, Copy)]
pub struct Gate {
    open: bool,
}

impl Gate {
    pub fn new(ctx: &Context, session: &Session) -> Gate {
        Gate {
            open: ctx.admin_token.is_none()
                || session.principal == Principal::AdminToken
                // With ACLs on, they decide (a super user, or a user with
                // the operation, needs no token).
                || ctx.logins().is_some_and(|b| b.security().authorization),
        }
    }

    /// The refusal of a mutating admin request on `resource`, or `None`
    /// when it may go on.
    pub fn refusal(self, resource: Resource) -> Option<Refusal> {
        (!self.open).then_some(Refusal::NotAuthorized { resource })
    }
}
