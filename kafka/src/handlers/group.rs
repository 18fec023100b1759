//! What the group handlers share: the answer before the broker is ready,
//! the coordinator's view of partition counts, a string from the wire as
//! an optional id, and the bounded wait for a group's change.
//!
//! A JoinGroup or SyncGroup that has to wait takes the group's listener
//! (`Coordinator::listen`) *before* it polls again, then awaits it, the
//! deadline or shutdown, whichever is first: a change between the poll and
//! the wait wakes it at once, and no task polls on a timer.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::Broker;
use tokio::sync::watch;
use tokio::time::Instant;

/// COORDINATOR_LOAD_IN_PROGRESS: what a group call answers while recovery
/// runs (KAFKA.md "Not ready"; retriable).
pub const NOT_READY: i16 = ResponseError::CoordinatorLoadInProgress.code();

/// Answered to a wait cut short by shutdown: the client looks for the
/// coordinator again (retriable).
pub const STOPPING: i16 = ResponseError::CoordinatorNotAvailable.code();

/// How long a join or sync waits beyond the member's rebalance timeout
/// before it answers REBALANCE_IN_PROGRESS: the coordinator's own
/// deadlines (applied by `tidelog-groups`) normally end the wait first.
const WAIT_MARGIN: Duration = Duration::from_secs(5);
/// The longest wait, whatever rebalance timeout a client asks for.
const WAIT_MAX: Duration = Duration::from_secs(300);

/// The partition counts the coordinator's rebalances look up.
pub fn partitions(broker: &Broker) -> impl Fn(&str) -> Option<u32> + '_ {
    |topic: &str| broker.partition_count(topic)
}

/// An id from the wire: empty or null is none.
pub fn id(s: Option<&StrBytes>) -> Option<&str> {
    s.map(|s| s.as_str()).filter(|s| !s.is_empty())
}

/// When a wait for a rebalance of `rebalance_timeout_ms` gives up.
pub fn deadline(rebalance_timeout_ms: u64) -> Instant {
    Instant::now() + (Duration::from_millis(rebalance_timeout_ms) + WAIT_MARGIN).min(WAIT_MAX)
}

/// Why a wait ended without a change.
pub enum Waited {
    Changed,
    Deadline,
    Stopping,
}

/// Awaits `listener` (the group's next change), `deadline` or shutdown.
pub async fn wait(
    listener: Option<tidelog_broker::store::EventListener>,
    deadline: Instant,
    stop: &mut watch::Receiver<bool>,
) -> Waited {
    if *stop.borrow() {
        return Waited::Stopping;
    }
    let Some(listener) = listener else {
        // The group is gone: the next poll answers why.
        return Waited::Changed;
    };
    tokio::select! {
        _ = listener => Waited::Changed,
        _ = tokio::time::sleep_until(deadline) => Waited::Deadline,
        // Never, once no shutdown can be signalled: the others end it.
        _ = async {
            if stop.wait_for(|stopping| *stopping).await.is_err() {
                std::future::pending::<()>().await;
            }
        } => Waited::Stopping,
    }
}
