//! A global budget of request bytes held in memory (`http.max_inflight_bytes`).
//!
//! Every request body is buffered whole before its handler runs, so the
//! concurrency limit alone does not bound memory: thousands of slow
//! connections can each hold part of a large body while they wait for the
//! rest. A body takes its bytes from this budget before they are buffered
//! (all of a declared `Content-Length` at once, a chunked body frame by
//! frame) and gives them back when its request is answered.
//!
//! Invariant: the sum of all live [`Reservation`]s never exceeds the limit;
//! a reservation that would exceed it is refused, nothing waits. The type
//! knows nothing of HTTP, so any front-end (the Kafka listener's frames)
//! can share one budget with the HTTP API.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes that may be held at once, and how many are.
#[derive(Debug)]
pub struct ByteBudget {
    limit_bytes: u64,
    used_bytes: AtomicU64,
}

/// Bytes taken from a [`ByteBudget`]; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<ByteBudget>,
    bytes: u64,
}

impl ByteBudget {
    pub fn new(limit_bytes: u64) -> Arc<ByteBudget> {
        Arc::new(ByteBudget {
            limit_bytes,
            used_bytes: AtomicU64::new(0),
        })
    }

    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Bytes reserved now, by every holder together.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes.load(Ordering::Relaxed)
    }

    /// `bytes` more, or `None` (nothing taken) if that would pass the limit.
    pub fn try_reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        self.take(bytes).then(|| Reservation {
            budget: Arc::clone(self),
            bytes,
        })
    }

    fn take(&self, bytes: u64) -> bool {
        self.used_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes)
                    .filter(|total| *total <= self.limit_bytes)
            })
            .is_ok()
    }
}

impl Reservation {
    /// Bytes this reservation holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Takes `bytes` more for the same holder; `false` (nothing taken) if
    /// that would pass the budget's limit.
    pub fn try_grow(&mut self, bytes: u64) -> bool {
        let taken = self.budget.take(bytes);
        if taken {
            self.bytes += bytes;
        }
        taken
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget
            .used_bytes
            .fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_never_pass_the_limit_and_come_back_when_dropped() {
        let budget = ByteBudget::new(100);
        let a = budget.try_reserve(60).unwrap();
        assert!(budget.try_reserve(41).is_none());
        let mut b = budget.try_reserve(40).unwrap();
        assert_eq!(budget.used_bytes(), 100);
        assert!(!b.try_grow(1));
        assert_eq!(b.bytes(), 40);
        drop(a);
        assert!(b.try_grow(60));
        assert_eq!((b.bytes(), budget.used_bytes()), (100, 100));
        drop(b);
        assert_eq!(budget.used_bytes(), 0);
        assert!(budget.try_reserve(u64::MAX).is_none());
        assert_eq!(budget.used_bytes(), 0);
    }
}
