//! Leases: granted with a TTL, renewed one request at a time, revoked.
//! A key put under a lease is deleted by etcd when the lease expires or is
//! revoked.
//!
//! etcd's TTLs are whole seconds, and etcd raises a TTL below its minimum
//! (1.5 × its election timeout, 2 s with etcd's defaults): the TTL granted
//! is the one to count with, not the one asked for.

use std::time::Duration;

use super::client::{first_message, Ctx, EtcdClient};
use super::error::EtcdError;
pub use super::ids::LeaseId;
use super::wire::{self, StreamMessage};

/// A granted lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub id: LeaseId,
    /// The TTL etcd granted (whole seconds).
    pub ttl: Duration,
}

/// The longest TTL asked for (etcd's own maximum is about 285 years).
pub const LEASE_TTL_MAX: Duration = Duration::from_secs(24 * 3600);

const GRANT: &str = "/v3/lease/grant";
const KEEPALIVE: &str = "/v3/lease/keepalive";
const REVOKE: &str = "/v3/lease/revoke";

/// `ttl` in etcd's whole seconds, rounded up.
fn ttl_seconds(ttl: Duration) -> Result<i64, EtcdError> {
    if ttl.is_zero() || ttl > LEASE_TTL_MAX {
        return Err(EtcdError::InvalidArgument {
            what: "lease TTL",
            reason: format!("{ttl:?}, outside (0, {LEASE_TTL_MAX:?}]"),
        });
    }
    Ok(ttl.as_millis().div_ceil(1000) as i64)
}

fn lease_subject(lease: LeaseId) -> String {
    format!("lease {lease}")
}

impl EtcdClient {
    /// Grants a lease of at least `ttl` (rounded up to whole seconds).
    pub async fn grant(&self, ttl: Duration) -> Result<Lease, EtcdError> {
        let request = wire::LeaseGrantRequest {
            ttl: ttl_seconds(ttl)?.to_string(),
            id: "0".into(),
        };
        let (answer, endpoint) = self
            .call::<_, wire::LeaseGrantResponse>(GRANT, "lease", &request)
            .await?;
        let ctx = Ctx {
            endpoint: &endpoint,
            path: GRANT,
            subject: "lease",
        };
        if !answer.error.is_empty() {
            return Err(ctx.refused(200, 0, answer.error));
        }
        if answer.id == 0 || answer.ttl <= 0 {
            return Err(ctx.bad_answer(format!("lease {} with TTL {}", answer.id, answer.ttl)));
        }
        Ok(Lease {
            id: LeaseId(answer.id),
            ttl: Duration::from_secs(answer.ttl as u64),
        })
    }

    /// Renews `lease` once; its TTL from now. A lease etcd no longer knows
    /// (expired or revoked) is [`EtcdError::LeaseExpired`].
    pub async fn keep_alive_once(&self, lease: LeaseId) -> Result<Duration, EtcdError> {
        self.keep_alive_within(lease, self.request_timeout()).await
    }

    /// As [`keep_alive_once`](Self::keep_alive_once), under `timeout`.
    pub(crate) async fn keep_alive_within(
        &self,
        lease: LeaseId,
        timeout: Duration,
    ) -> Result<Duration, EtcdError> {
        let subject = lease_subject(lease);
        let request = wire::LeaseIdRequest {
            id: lease.0.to_string(),
        };
        // A stream of one message: the gateway closes etcd's side once
        // the request body (one request) is read.
        let (body, endpoint) = self
            .call_raw_within(KEEPALIVE, &subject, &request, timeout)
            .await?;
        let ctx = Ctx {
            endpoint: &endpoint,
            path: KEEPALIVE,
            subject: &subject,
        };
        let message: StreamMessage<wire::LeaseKeepAliveResponse> =
            serde_json::from_slice(first_message(&body)).map_err(|e| ctx.bad_answer(e))?;
        match (message.result, message.error) {
            (_, Some(e)) => Err(ctx
                .refused(
                    u16::try_from(e.http_code).unwrap_or(0),
                    e.grpc_code,
                    e.message,
                )
                .lease_not_found_as_expired(Some(lease))),
            (Some(answer), None) if answer.ttl > 0 => Ok(Duration::from_secs(answer.ttl as u64)),
            (Some(_), None) => Err(EtcdError::LeaseExpired { lease }),
            (None, None) => {
                Err(ctx.bad_answer("a keep-alive answer with neither result nor error"))
            }
        }
    }

    /// Revokes `lease`: its keys are deleted now. A lease already gone is
    /// [`EtcdError::LeaseExpired`].
    pub async fn revoke(&self, lease: LeaseId) -> Result<(), EtcdError> {
        let request = wire::LeaseIdRequest {
            id: lease.0.to_string(),
        };
        self.call::<_, wire::LeaseRevokeResponse>(REVOKE, &lease_subject(lease), &request)
            .await
            .map_err(|e| e.lease_not_found_as_expired(Some(lease)))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_rounds_up_to_whole_seconds_within_bounds() {
        assert_eq!(ttl_seconds(Duration::from_millis(3000)).unwrap(), 3);
        assert_eq!(ttl_seconds(Duration::from_millis(2001)).unwrap(), 3);
        assert_eq!(ttl_seconds(Duration::from_millis(1)).unwrap(), 1);
        assert!(matches!(
            ttl_seconds(Duration::ZERO),
            Err(EtcdError::InvalidArgument { .. })
        ));
        assert!(ttl_seconds(LEASE_TTL_MAX + Duration::from_secs(1)).is_err());
    }
}
