//! A node's session: its lease, its entry under `nodes/<node_id>`, the
//! renewals that keep both, and the fencing deadline they give.
//!
//! The fencing rule: etcd renews a lease when it receives the renewal,
//! which is after the node sent it, so a lease renewed by a request sent
//! at `t` with TTL `ttl` lives at least until `t + ttl` on etcd's clock.
//! The session counts `safe_until = t + ttl - ttl / FENCING_MARGIN_DIVISOR`
//! from the send time of its last successful renewal (or of the grant);
//! the margin covers the two clocks' rates and an acknowledgement already
//! on its way out. Before `safe_until` no other node can have taken a key
//! held under this lease; a master acknowledges nothing once it passes.
//!
//! Renewals go every `ttl / RENEWALS_PER_TTL`; after a failed one the next
//! goes `ttl / RETRIES_PER_TTL` later, each bounded by the renewal
//! interval. etcd answering that it no longer knows the lease ends the
//! session ([`SessionState::Lost`]): a new one is needed. Until then a
//! session whose renewals fail is held but unsafe once `safe_until`
//! passes, and safe again after a renewal succeeds (etcd extends its
//! leases when it restarts or elects a leader, so the lease may well have
//! survived). Should the renewal task stop for any reason, `safe_until`
//! stops moving and the session turns unsafe by itself.

use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::keys::{validate_node_id, Keys};
use super::records::{encode, NodeInfo};
use crate::etcd::{EtcdClient, EtcdError, Lease, LeaseId, Revision};

/// The fencing margin is the TTL divided by this.
pub const FENCING_MARGIN_DIVISOR: u32 = 10;
/// Renewals per TTL while they succeed.
pub const RENEWALS_PER_TTL: u32 = 3;
/// Attempts per TTL while they fail.
pub const RETRIES_PER_TTL: u32 = 10;

/// The instant before which a lease renewed by a request sent at `sent`
/// with TTL `ttl` is certainly alive (see the module doc).
pub fn fencing_deadline(sent: Instant, ttl: Duration) -> Instant {
    sent + (ttl - ttl / FENCING_MARGIN_DIVISOR)
}

/// What a session can say of its lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// The lease was alive at the last successful renewal, sent at
    /// `last_renewal_sent` with `ttl` granted; safe before `safe_until`.
    Held {
        last_renewal_sent: Instant,
        ttl: Duration,
        safe_until: Instant,
    },
    /// etcd no longer knows the lease: it expired or was revoked.
    Lost {
        last_renewal_sent: Instant,
        safe_until: Instant,
    },
}

impl SessionState {
    /// Whether the lease is certainly alive at `now`.
    pub fn is_safe_at(&self, now: Instant) -> bool {
        match self {
            SessionState::Held { safe_until, .. } => now < *safe_until,
            SessionState::Lost { .. } => false,
        }
    }

    pub fn last_renewal_sent(&self) -> Instant {
        match self {
            SessionState::Held {
                last_renewal_sent, ..
            }
            | SessionState::Lost {
                last_renewal_sent, ..
            } => *last_renewal_sent,
        }
    }
}

/// A node's membership: see the module doc. Dropping it stops the
/// renewals without revoking (as the node's death would: its keys go when
/// the TTL runs out); [`close`](Session::close) revokes.
#[derive(Debug)]
pub struct Session {
    client: EtcdClient,
    keys: Keys,
    node_id: u32,
    lease: Lease,
    state: watch::Receiver<SessionState>,
    renewal: JoinHandle<()>,
}

impl Session {
    /// Grants a lease of `ttl` (etcd's whole seconds, rounded up), puts
    /// `info` at `nodes/<node_id>` under it and starts renewing it.
    pub async fn start(
        client: EtcdClient,
        keys: Keys,
        info: &NodeInfo,
        ttl: Duration,
    ) -> Result<Session, EtcdError> {
        let node_id = validate_node_id(info.node_id)?;
        let key = keys.node(node_id);
        let value = encode(&key, info, NodeInfo::validate)?;
        let sent = Instant::now();
        let lease = client.grant(ttl).await?;
        let held = SessionState::Held {
            last_renewal_sent: sent,
            ttl: lease.ttl,
            safe_until: fencing_deadline(sent, lease.ttl),
        };
        if let Err(e) = client.put(key.as_bytes(), &value, Some(lease.id)).await {
            // Best effort: unrevoked, the lease expires by itself.
            let _ = client.revoke(lease.id).await;
            return Err(e);
        }
        let (sender, state) = watch::channel(held);
        let renewal = tokio::spawn(renew(client.clone(), node_id, lease, sender));
        Ok(Session {
            client,
            keys,
            node_id,
            lease,
            state,
            renewal,
        })
    }

    pub fn node_id(&self) -> u32 {
        self.node_id
    }

    /// The lease, with the TTL etcd granted.
    pub fn lease(&self) -> Lease {
        self.lease
    }

    pub fn lease_id(&self) -> LeaseId {
        self.lease.id
    }

    pub fn state(&self) -> SessionState {
        *self.state.borrow()
    }

    /// A receiver that sees every change of [`state`](Self::state).
    pub fn subscribe(&self) -> watch::Receiver<SessionState> {
        self.state.clone()
    }

    /// Whether the lease is certainly alive at `now` (the fencing rule).
    pub fn is_safe_at(&self, now: Instant) -> bool {
        self.state().is_safe_at(now)
    }

    /// Whether the lease is certainly alive now: a master acknowledges
    /// only while this holds.
    pub fn is_safe_now(&self) -> bool {
        self.is_safe_at(Instant::now())
    }

    /// The fencing deadline; `None` once the lease is lost.
    pub fn safe_until(&self) -> Option<Instant> {
        match self.state() {
            SessionState::Held { safe_until, .. } => Some(safe_until),
            SessionState::Lost { .. } => None,
        }
    }

    /// Replaces the node's entry (its log's end and epoch move).
    pub async fn publish(&self, info: &NodeInfo) -> Result<Revision, EtcdError> {
        if info.node_id != self.node_id {
            return Err(EtcdError::InvalidArgument {
                what: "node info",
                reason: format!(
                    "node {} published by node {}'s session",
                    info.node_id, self.node_id
                ),
            });
        }
        let key = self.keys.node(self.node_id);
        let value = encode(&key, info, NodeInfo::validate)?;
        self.client
            .put(key.as_bytes(), &value, Some(self.lease.id))
            .await
    }

    /// Stops renewing and revokes the lease: the node's entry (and the
    /// master key, if it held it) go now.
    pub async fn close(self) -> Result<(), EtcdError> {
        self.renewal.abort();
        match self.client.revoke(self.lease.id).await {
            Ok(()) | Err(EtcdError::LeaseExpired { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

/// The renewal task (see the module doc); ends when the lease is lost.
async fn renew(client: EtcdClient, node_id: u32, lease: Lease, state: watch::Sender<SessionState>) {
    let interval = lease.ttl / RENEWALS_PER_TTL;
    let retry = lease.ttl / RETRIES_PER_TTL;
    let mut next = state.borrow().last_renewal_sent() + interval;
    loop {
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        match client.keep_alive_within(lease.id, interval).await {
            Ok(ttl) => {
                state.send_replace(SessionState::Held {
                    last_renewal_sent: sent,
                    ttl,
                    safe_until: fencing_deadline(sent, ttl),
                });
                next = sent + interval;
            }
            Err(EtcdError::LeaseExpired { .. }) => {
                tracing::warn!(node_id, lease = %lease.id, "the session's lease is gone");
                let last = *state.borrow();
                state.send_replace(SessionState::Lost {
                    last_renewal_sent: last.last_renewal_sent(),
                    safe_until: match last {
                        SessionState::Held { safe_until, .. }
                        | SessionState::Lost { safe_until, .. } => safe_until,
                    },
                });
                return;
            }
            Err(e) => {
                tracing::warn!(node_id, lease = %lease.id, error = %e, "cannot renew the session's lease; retrying");
                next = Instant::now() + retry;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fencing_deadline_falls_a_margin_before_the_lease_can_expire() {
        let sent = Instant::now();
        let ttl = Duration::from_secs(2);
        let deadline = fencing_deadline(sent, ttl);
        assert!(deadline < sent + ttl);
        assert_eq!(sent + ttl - deadline, ttl / FENCING_MARGIN_DIVISOR);
        let held = SessionState::Held {
            last_renewal_sent: sent,
            ttl,
            safe_until: deadline,
        };
        assert!(held.is_safe_at(sent));
        assert!(!held.is_safe_at(deadline));
        let lost = SessionState::Lost {
            last_renewal_sent: sent,
            safe_until: deadline,
        };
        assert!(!lost.is_safe_at(sent));
    }
}
