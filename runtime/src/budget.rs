//! The global budget of request bytes held in memory
//! (`http.max_inflight_bytes`), shared by every front-end: HTTP request
//! bodies and the Kafka listener's frames take their bytes from one
//! [`ByteBudget`] the server hands to both.
//!
//! Every request is buffered whole before its handler runs, so a
//! concurrency limit alone does not bound memory: thousands of slow
//! connections can each hold part of a large request while they wait for
//! the rest. A request takes its bytes from this budget before they are
//! buffered and gives them back when it is answered.
//!
//! Invariant: the sum of all live [`Reservation`]s never exceeds the
//! limit. A reservation that would exceed it is refused at once
//! ([`ByteBudget::try_reserve`]: HTTP answers 503) or, for a front-end
//! that applies backpressure instead (the Kafka listener stops reading
//! the connection), waited for with [`ByteBudget::listen`]: every
//! reservation dropped wakes the waiters, which try again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use event_listener::{Event, EventListener};

/// Bytes that may be held at once, and how many are.
#[derive(Debug)]
pub struct ByteBudget {
    limit_bytes: u64,
    used_bytes: AtomicU64,
    /// Notified (all listeners) whenever bytes are given back.
    released: Event,
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
            released: Event::new(),
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

    /// A reservation of nothing yet, to grow as bytes come to be held
    /// ([`Reservation::try_grow`]).
    pub fn empty(self: &Arc<Self>) -> Reservation {
        Reservation {
            budget: Arc::clone(self),
            bytes: 0,
        }
    }

    /// A listener woken the next time bytes are given back. Take it
    /// before the [`ByteBudget::try_reserve`] it guards, so a release
    /// between the two is not missed; it is a future (await it) and can
    /// also be waited on by a thread.
    pub fn listen(&self) -> EventListener {
        self.released.listen()
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

    /// Gives back what this reservation holds beyond `bytes` (a read
    /// reserved by its limit, then holding what it read).
    pub fn shrink_to(&mut self, bytes: u64) {
        let excess = self.bytes.saturating_sub(bytes);
        if excess > 0 {
            self.bytes -= excess;
            self.budget.used_bytes.fetch_sub(excess, Ordering::AcqRel);
            self.budget.released.notify(usize::MAX);
        }
    }

    /// Takes over `other`'s bytes (of the same budget): nothing is given
    /// back meanwhile, so nobody else can take them in between.
    pub fn absorb(&mut self, mut other: Reservation) {
        debug_assert!(Arc::ptr_eq(&self.budget, &other.budget));
        self.bytes += std::mem::take(&mut other.bytes);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget
            .used_bytes
            .fetch_sub(self.bytes, Ordering::AcqRel);
        if self.bytes > 0 {
            self.budget.released.notify(usize::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use event_listener::Listener;

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

    /// A read reserved by its limit keeps only what it read, handed to the
    /// answer's reservation without ever being free for another holder.
    #[test]
    fn a_reservation_shrinks_and_is_absorbed_without_giving_its_bytes_away() {
        let budget = ByteBudget::new(100);
        let mut held = budget.empty();
        let mut read = budget.try_reserve(80).unwrap();
        read.shrink_to(30);
        assert_eq!((read.bytes(), budget.used_bytes()), (30, 30));
        read.shrink_to(50);
        assert_eq!(read.bytes(), 30, "shrink_to never grows");
        held.absorb(read);
        assert_eq!((held.bytes(), budget.used_bytes()), (30, 30));
        drop(held);
        assert_eq!(budget.used_bytes(), 0);
    }

    /// A waiter's listener, taken while the budget is full, is woken by a
    /// release, after which its reservation fits.
    #[test]
    fn a_release_wakes_a_waiter_whose_reservation_then_fits() {
        let budget = ByteBudget::new(100);
        let held = budget.try_reserve(80).unwrap();
        let waiter = {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || loop {
                let listener = budget.listen();
                if let Some(r) = budget.try_reserve(50) {
                    return r.bytes();
                }
                listener.wait();
            })
        };
        // Whether the waiter already listens or not, it gets the bytes
        // once these are back.
        drop(held);
        assert_eq!(waiter.join().unwrap(), 50);
        assert_eq!(budget.used_bytes(), 0);
    }
}
