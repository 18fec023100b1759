//! What can go wrong talking to etcd, and reading what the cluster keeps
//! there.

use std::time::Duration;

use super::ids::LeaseId;

/// etcd's gRPC code for "not found" (a lease it does not know).
pub const GRPC_NOT_FOUND: i32 = 5;

/// Errors of the etcd client and of the election built on it. `subject`
/// names what the request was about: a key, `lease <id>`, `watch <prefix>`.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error("no etcd endpoint given")]
    NoEndpoints,
    #[error("etcd endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        endpoint: String,
        reason: &'static str,
    },
    #[error("invalid {what}: {reason}")]
    InvalidArgument { what: &'static str, reason: String },
    #[error("cannot build the HTTP client: {source}")]
    Client { source: reqwest::Error },
    #[error("no etcd endpoint reachable ({endpoints}) for {path} {subject}: {source}")]
    Unreachable {
        endpoints: String,
        path: &'static str,
        subject: String,
        source: reqwest::Error,
    },
    #[error("etcd {endpoint}{path} {subject}: no answer within {timeout:?}")]
    Timeout {
        endpoint: String,
        path: &'static str,
        subject: String,
        timeout: Duration,
    },
    #[error("etcd {endpoint}{path} {subject}: {source}")]
    Transport {
        endpoint: String,
        path: &'static str,
        subject: String,
        source: reqwest::Error,
    },
    #[error("etcd {endpoint}{path} {subject}: the stream ended")]
    StreamEnded {
        endpoint: String,
        path: &'static str,
        subject: String,
    },
    #[error("etcd {endpoint}{path} {subject}: an answer longer than {max} bytes")]
    AnswerTooLarge {
        endpoint: String,
        path: &'static str,
        subject: String,
        max: usize,
    },
    #[error(
        "etcd {endpoint}{path} {subject}: refused (HTTP {status}, gRPC code {code}): {message}"
    )]
    Refused {
        endpoint: String,
        path: &'static str,
        subject: String,
        status: u16,
        code: i32,
        message: String,
    },
    #[error("etcd {endpoint}{path} {subject}: an answer that does not decode: {reason}")]
    BadAnswer {
        endpoint: String,
        path: &'static str,
        subject: String,
        reason: String,
    },
    #[error("lease {lease} expired or was revoked")]
    LeaseExpired { lease: LeaseId },
    #[error("key {key:?} holds a value tidelog cannot use: {reason}")]
    BadValue { key: String, reason: String },
    #[error("session of node {node_id} (lease {lease}) is not safely held")]
    SessionNotHeld { node_id: u32, lease: LeaseId },
}

/// What kind of failure an [`EtcdError`] is, for callers that branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtcdErrorKind {
    /// The caller's configuration or argument: fix it, do not retry.
    Config,
    /// etcd could not be reached or did not answer in time: retry later.
    Unavailable,
    /// etcd answered with a refusal.
    Refused,
    /// etcd's answer was not what its API promises.
    Protocol,
    /// The lease is gone: a new session is needed.
    LeaseExpired,
    /// A value under the cluster's keys is not what tidelog writes.
    BadValue,
    /// The session cannot vouch for its lease now (fencing).
    SessionNotHeld,
}

impl EtcdError {
    /// etcd's "requested lease not found" for a request made with `lease`
    /// as [`EtcdError::LeaseExpired`]; any other error as it is.
    pub(crate) fn lease_not_found_as_expired(self, lease: Option<LeaseId>) -> EtcdError {
        match (self, lease) {
            (
                EtcdError::Refused {
                    code: GRPC_NOT_FOUND,
                    ..
                },
                Some(lease),
            ) => EtcdError::LeaseExpired { lease },
            (other, _) => other,
        }
    }

    pub fn kind(&self) -> EtcdErrorKind {
        match self {
            EtcdError::NoEndpoints
            | EtcdError::InvalidEndpoint { .. }
            | EtcdError::InvalidArgument { .. }
            | EtcdError::Client { .. } => EtcdErrorKind::Config,
            EtcdError::Unreachable { .. }
            | EtcdError::Timeout { .. }
            | EtcdError::Transport { .. }
            | EtcdError::StreamEnded { .. } => EtcdErrorKind::Unavailable,
            EtcdError::Refused { .. } => EtcdErrorKind::Refused,
            EtcdError::AnswerTooLarge { .. } | EtcdError::BadAnswer { .. } => {
                EtcdErrorKind::Protocol
            }
            EtcdError::LeaseExpired { .. } => EtcdErrorKind::LeaseExpired,
            EtcdError::BadValue { .. } => EtcdErrorKind::BadValue,
            EtcdError::SessionNotHeld { .. } => EtcdErrorKind::SessionNotHeld,
        }
    }
}
