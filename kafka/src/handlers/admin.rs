//! Who may use the mutating admin APIs (KAFKA.md "Security").
//!
//! Without `admin_token` they are open, as the HTTP admin routes are.
//! With it, only a connection that authenticated with the token over
//! SASL/PLAIN may; this listener does not serve SASL yet, so with a token
//! set every mutating admin request is refused (TOPIC_ / CLUSTER_
//! AUTHORIZATION_FAILED), never silently allowed.

use kafka_protocol::error::ResponseError;

use crate::dispatch::Context;

/// Which authorization error a refusal carries.
#[derive(Debug, Clone, Copy)]
pub struct Resource(i16);

pub const TOPIC: Resource = Resource(ResponseError::TopicAuthorizationFailed.code());
pub const CLUSTER: Resource = Resource(ResponseError::ClusterAuthorizationFailed.code());

/// The code and message a mutating admin request on `resource` is refused
/// with, or `None` when it may go on.
pub fn refusal(ctx: &Context, resource: Resource) -> Option<(i16, String)> {
    ctx.admin_locked.then(|| {
        (
            resource.0,
            "admin_token is set: mutating admin APIs need SASL/PLAIN, which this listener does not serve yet"
                .to_owned(),
        )
    })
}
