//! The one long-poll every fetch waits in, for every front-end
//! ([`Door::long_poll`]).
//!
//! A fetch reads, and when what it read is short (HTTP: no record; Kafka:
//! fewer than `min_bytes`) it waits for more, in this order, the same for
//! both front-ends:
//! 1. read-your-writes: if records acknowledged before the fetch began are
//!    still on their way to the index (the dispatcher copies them a moment
//!    after the produce answer), await them (bounded by
//!    [`VISIBILITY_WAIT`]) and read again, also with a wait of 0
//!    (`crate::visibility`);
//! 2. at the deadline, or once shutdown begins, answer what was read;
//! 3. otherwise register a listener on every partition the read reached
//!    the end of, each from where its read ended (`PartitionRef::listen`
//!    registers, then re-checks the end, so a record added between the
//!    read and the registration is caught: read again at once), and await
//!    any of them, the deadline or shutdown; then read again.
//!
//! No polling loop: the dispatcher wakes the fetch. What a read is and
//! what an answer looks like stay the front-end's ([`FetchRound`]): Kafka
//! encodes batches straight from the page cache and counts them against
//! the answer budget, HTTP renders JSON. The rule of the wait is the
//! broker's, written once here.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tidelog_storage::EventListener;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::door::Door;
use crate::read::PartitionRef;
use crate::visibility::VISIBILITY_WAIT;

/// One read of every partition a fetch asks for, as a front-end makes it.
pub trait FetchRound {
    /// What the fetch answers (with whatever it holds, e.g. budget bytes).
    type Answer;

    /// Reads every asked partition once.
    fn read(&mut self) -> impl Future<Output = Round<Self::Answer>> + Send;

    /// The fetch starts (`true`) or stops (`false`) waiting for records:
    /// for a gauge of waiting fetches. Nothing by default.
    fn waiting(&mut self, _waiting: bool) {}
}

/// What one read came to.
#[derive(Debug)]
pub enum Round<A> {
    /// Answer this: enough was read, or something failed.
    Done(A),
    /// Short: the answer if the wait ends now, and where a record would
    /// add to it (each partition whose read reached its end, from there).
    Short {
        answer: A,
        listen: Vec<(PartitionRef, u64)>,
    },
}

impl Door {
    /// Reads `round` until it is done, `max_wait` passes or `stop` turns
    /// true (shutdown), waiting between reads as the module doc says.
    pub async fn long_poll<R: FetchRound + Send>(
        &self,
        round: &mut R,
        max_wait: Duration,
        mut stop: watch::Receiver<bool>,
    ) -> R::Answer {
        let deadline = Instant::now() + max_wait;
        let broker = self.broker();
        // What this fetch must see: every record acknowledged before it
        // began.
        let point = broker.acknowledged();
        let mut unseen = (!broker.is_visible(point)).then_some(point);
        loop {
            let (answer, listen) = match round.read().await {
                Round::Done(answer) => return answer,
                Round::Short { answer, listen } => (answer, listen),
            };
            if let Some(point) = unseen.take() {
                tokio::select! {
                    _ = tokio::time::timeout(VISIBILITY_WAIT, broker.visible(point)) => {}
                    _ = shutdown(&mut stop) => {}
                }
                continue;
            }
            if Instant::now() >= deadline || *stop.borrow() {
                return answer;
            }
            // What a short answer holds (budget bytes) is given back
            // while it waits.
            drop(answer);
            let Some(listeners) = listeners(&listen) else {
                continue; // a record arrived since the read: read again
            };
            round.waiting(true);
            tokio::select! {
                _ = any_of(listeners) => {}
                _ = tokio::time::sleep_until(deadline) => {}
                _ = shutdown(&mut stop) => {}
            }
            round.waiting(false);
        }
    }
}

/// Listeners of every partition from where its read ended, or `None` if
/// one of them got a record since (or cannot be listened to: the next
/// read answers its error).
fn listeners(listen: &[(PartitionRef, u64)]) -> Option<Vec<EventListener>> {
    let mut listeners = Vec::with_capacity(listen.len());
    for (part, from) in listen {
        match part.listen(*from) {
            Ok(Some(listener)) => listeners.push(listener),
            Ok(None) | Err(_) => return None,
        }
    }
    Some(listeners)
}

/// Resolves when any of `listeners` fires (never, for none: the deadline
/// or shutdown ends the wait then).
pub(crate) fn any_of(mut listeners: Vec<EventListener>) -> impl Future<Output = ()> {
    std::future::poll_fn(move |cx| {
        for listener in &mut listeners {
            if Pin::new(listener).poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    })
}

/// Resolves when shutdown begins; never if the sender is gone (then no
/// shutdown can be signalled, and the deadline ends the wait). Every wait
/// of the door ends at shutdown this way (the group calls', the consumer
/// instances' records call).
pub(crate) async fn shutdown(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|stopping| *stopping).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::{Context, Waker};

    use super::*;

    fn polled_once(f: impl Future<Output = ()>) -> Poll<()> {
        let mut f = pin!(f);
        f.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    /// A fetch's wait ends at shutdown, but not because the shutdown
    /// channel's sender is gone (a listener served without one, or after
    /// it was dropped): `changed()` then fails at once, and every
    /// long-poll answered or spun at once instead of waiting for records.
    #[test]
    fn the_shutdown_wait_ends_at_shutdown_and_not_when_the_sender_is_gone() {
        let (tx, mut rx) = watch::channel(false);
        assert!(
            polled_once(shutdown(&mut rx)).is_pending(),
            "no shutdown yet"
        );
        tx.send(true).unwrap();
        assert!(polled_once(shutdown(&mut rx)).is_ready(), "shutdown");
        let (tx, mut rx) = watch::channel(false);
        drop(tx);
        assert!(
            polled_once(shutdown(&mut rx)).is_pending(),
            "a gone sender is no shutdown"
        );
    }
}
