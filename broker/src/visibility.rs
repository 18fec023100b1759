//! Read-your-writes: a read that begins after a produce was acknowledged
//! sees its records.
//!
//! Produce answers once its records are in the CommitLog; they become
//! fetchable a moment later, when the dispatcher has put them in the
//! ConsumeQueue, the IndexFile and (compact topics) the compacted log. A
//! client that fetches, or asks for the end offset, right after its
//! produce could otherwise find nothing (Kafka's high watermark moves
//! with the append, so Kafka clients and their users expect to see it).
//!
//! So a read takes an [`Acknowledged`] point when it begins (the
//! CommitLog's committed position, one atomic load) and, when what it
//! found may be short of it, awaits [`Broker::visible`] before reading
//! again. Dispatch is usually microseconds behind; a stalled dispatcher is
//! what [`VISIBILITY_WAIT`] bounds (it also refuses produce once stalled
//! for `store.dispatch_stall_ms`).

use std::time::Duration;

use crate::broker::Broker;

/// How long a read waits for the dispatcher to make visible what was
/// acknowledged before the read began, before answering from what is
/// fetchable.
pub const VISIBILITY_WAIT: Duration = Duration::from_secs(5);

/// Every record acknowledged before it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acknowledged(u64);

impl Broker {
    /// The point a read beginning now must see.
    pub fn acknowledged(&self) -> Acknowledged {
        Acknowledged(self.store.committed_position())
    }

    /// Whether everything acknowledged before `point` is fetchable now.
    pub fn is_visible(&self, point: Acknowledged) -> bool {
        self.store.dispatched_or_listen(point.0).is_none()
    }

    /// Resolves once every record acknowledged before `point` is
    /// fetchable. Runtime-agnostic (it awaits the dispatcher's progress
    /// event); bound it with the caller's timer and [`VISIBILITY_WAIT`].
    pub async fn visible(&self, point: Acknowledged) {
        while let Some(progress) = self.store.dispatched_or_listen(point.0) {
            progress.await;
        }
    }

    /// Read-your-writes for a call beginning now: waits until every record
    /// acknowledged before it is fetchable, at most [`VISIBILITY_WAIT`]
    /// (a stalled dispatcher is what the bound is for: then the call
    /// answers from what is indexed). On tokio's timer.
    pub(crate) async fn until_acknowledged_visible(&self) {
        let _ = tokio::time::timeout(VISIBILITY_WAIT, self.visible(self.acknowledged())).await;
    }
}
