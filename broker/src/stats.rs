//! What the node reports about itself: the counters of every part of the
//! broker in one snapshot ([`Broker::stats`]), and whether the store
//! refuses writes now ([`Broker::write_refusal`]). Cheap in-memory reads:
//! the disk figures are the store's last measurement, so `/metrics`,
//! `/status/ready` and the stats routes answer while the store's threads
//! are busy. And the operator's retention pass ([`Door::run_retention`](crate::Door::run_retention)).

use std::sync::Arc;
use tidelog_cleaner::cleaner::CleanerMetricsSnapshot;

use tidelog_storage::{PassOutcome, RetentionConfig, StoreError, StoreStats, Trigger};

use crate::broker::Broker;
use crate::coordinator::CoordinatorStats;
use crate::error::BrokerError;
use crate::principal::Principal;

/// The broker's counters at one moment.
#[derive(Debug, Clone)]
pub struct BrokerStats {
    pub store: StoreStats,
    /// The retention tiers the disk figures are drawn against.
    pub retention: RetentionConfig,
    /// Topics, internal ones included.
    pub topics: usize,
    /// Groups with committed offsets.
    pub consumer_groups: usize,
    /// Group membership: groups by state, members, rebalances.
    pub coordinator: CoordinatorStats,
    pub cleaner: CleanerMetricsSnapshot,
}

impl Broker {
    /// Every part's counters, in one snapshot.
    pub fn stats(&self) -> BrokerStats {
        BrokerStats {
            store: self.store.stats(),
            retention: self.store.config().retention.clone(),
            topics: self.registry.len(),
            consumer_groups: self.groups.group_count(),
            coordinator: self.coordinator.stats(),
            cleaner: self.cleaner.metrics(),
        }
    }

    /// A retention pass now (an operator's request, `trigger` manual or
    /// forced), on the blocking pool: it deletes files.
    pub(crate) async fn run_retention(
        self: &Arc<Self>,
        _who: &Principal,
        trigger: Trigger,
    ) -> Result<PassOutcome, BrokerError> {
        let broker = Arc::clone(self);
        crate::blocking::run(move || Ok(broker.store.run_retention(trigger)?)).await
    }

    /// Why the store refuses writes now, if it does: what a produce would
    /// be answered (disk full, no segment, dispatch stalled, a failed
    /// write or flush).
    pub fn write_refusal(&self) -> Option<StoreError> {
        self.store.write_refusal()
    }
}

/// Tests' window into the parts (the `failpoints` feature, which only
/// dev-dependencies enable): what a test asserts about the store or the
/// registry behind the door. Never for a front-end.
#[cfg(any(test, feature = "failpoints"))]
impl Broker {
    pub fn store(&self) -> &tidelog_storage::Store {
        &self.store
    }

    pub fn registry(&self) -> &crate::registry::TopicRegistry {
        &self.registry
    }

    /// The group coordinator (a test puts a member of another protocol in
    /// a group; Kafka's group calls are the door's, `door/groups.rs`).
    pub fn coordinator(&self) -> &crate::coordinator::Coordinator {
        &self.coordinator
    }
}
