//! Compaction on request (a front-end's "compact this topic now"), its
//! status, and the compacted logs' totals for metrics.
//!
//! The door's calls: [`Door::compact`](crate::Door::compact) asks the LogCleaner for a pass of
//! every partition (after what was acknowledged before the request is in
//! the compacted logs) and answers a [`CompactionTicket`];
//! [`CompactionTicket::wait`] waits for the passes holding the cleaner
//! only, never the store, so shutdown can take the store back and stop
//! the cleaner, which ends the wait. Whether a partition is done is
//! decided here, once, from the cleaner's typed state.

use std::sync::Arc;
use std::time::Duration;

use tidelog_cleaner::{LogCleaner, PartitionStatus};

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::principal::Principal;
use crate::registry::Topic;

/// A compaction requested of every partition of a compact topic
/// ([`Door::compact`](crate::Door::compact)).
pub struct CompactionTicket {
    cleaner: Arc<LogCleaner>,
    topic: Arc<Topic>,
    /// Each partition with the passes started before the request.
    requested: Vec<(u32, u64)>,
}

/// Where one partition of a requested compaction stands after a wait.
#[derive(Debug, Clone)]
pub struct PartitionCompaction {
    pub partition: u32,
    /// A pass started after the request finished, or the partition is
    /// uncleanable (see the status's state): nothing more to wait for.
    pub completed: bool,
    /// `None`: the partition has no compacted log's status (idle).
    pub status: Option<PartitionStatus>,
}

impl std::fmt::Debug for CompactionTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionTicket")
            .field("topic", &self.topic.name)
            .field("requested", &self.requested)
            .finish_non_exhaustive()
    }
}

impl CompactionTicket {
    pub fn topic(&self) -> &Arc<Topic> {
        &self.topic
    }

    /// The partitions requested, in order.
    pub fn partitions(&self) -> Vec<u32> {
        self.requested.iter().map(|(p, _)| *p).collect()
    }

    /// Waits until every requested partition has finished a pass started
    /// after the request (or is uncleanable), or `timeout` passes, or the
    /// cleaner stops; then answers each partition. Holds the cleaner only.
    pub async fn wait(self, timeout: Duration) -> Result<Vec<PartitionCompaction>, BrokerError> {
        let CompactionTicket {
            cleaner,
            topic,
            requested,
        } = self;
        crate::blocking::run(move || {
            cleaner.wait(&topic.name, &requested, timeout);
            let statuses = cleaner.status(&topic.name);
            Ok(requested
                .iter()
                .map(|&(partition, started_before)| {
                    let status = statuses.iter().find(|s| s.partition == partition).cloned();
                    PartitionCompaction {
                        partition,
                        completed: status
                            .as_ref()
                            .is_some_and(|s| s.runs > started_before || s.state.ends_a_wait()),
                        status,
                    }
                })
                .collect())
        })
        .await
    }
}

/// Totals over every compacted log (`/metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactedLogTotals {
    pub logs: usize,
    pub segments: usize,
    pub bytes: u64,
}

impl Broker {
    /// Asks for a pass of every partition of compact topic `topic`
    /// (`roll_active`: roll the active segments first, so all of it is
    /// cleanable), once what was acknowledged before this call is in the
    /// compacted logs (the dispatcher copies it a moment after the produce
    /// answer; `crate::visibility`), so the pass covers it.
    pub(crate) async fn compact(
        self: &Arc<Self>,
        _who: &Principal,
        topic: &str,
        roll_active: bool,
    ) -> Result<CompactionTicket, BrokerError> {
        let topic = self.compact_topic(topic)?;
        self.until_acknowledged_visible().await;
        let requested = {
            let (broker, topic) = (Arc::clone(self), Arc::clone(&topic));
            crate::blocking::run(move || broker.request_compaction(&topic, roll_active)).await?
        };
        Ok(CompactionTicket {
            cleaner: Arc::clone(&self.cleaner),
            topic,
            requested,
        })
    }

    /// Every partition's compaction status of compact topic `topic`, in
    /// partition order (`None`: no compacted log yet, idle).
    pub(crate) async fn compaction_status(
        self: &Arc<Self>,
        _who: &Principal,
        topic: &str,
    ) -> Result<(Arc<Topic>, Vec<Option<PartitionStatus>>), BrokerError> {
        let topic = self.compact_topic(topic)?;
        let (broker, name) = (Arc::clone(self), Arc::clone(&topic.name));
        // Computes dirty ratios from segment stats under the cleaner's locks.
        let statuses = crate::blocking::run(move || Ok(broker.cleaner.status(&name))).await?;
        let partitions = (0..topic.partitions.get())
            .map(|p| statuses.iter().find(|s| s.partition == p).cloned())
            .collect();
        Ok((topic, partitions))
    }

    /// The topic `name`, if it exists and its policy compacts: what a
    /// compaction request or status is about. `TopicNotCompacted` (40002)
    /// otherwise, naming the policy.
    pub(crate) fn compact_topic(&self, name: &str) -> Result<Arc<Topic>, BrokerError> {
        let topic = self.registry.require(name)?;
        if !topic.config.cleanup_policy.compacts() {
            return Err(BrokerError::TopicNotCompacted {
                topic: name.to_string(),
                policy: topic.config.cleanup_policy.as_str(),
            });
        }
        Ok(topic)
    }

    /// Totals over every compacted log, in one walk. Not blocking (sizes
    /// are kept in memory).
    pub fn compacted_log_totals(&self) -> CompactedLogTotals {
        let logs = self.logs.all_logs();
        CompactedLogTotals {
            logs: logs.len(),
            segments: logs.iter().map(|l| l.segments().len()).sum(),
            bytes: logs.iter().map(|l| l.size_bytes()).sum(),
        }
    }

    /// Requests a cleaning pass of every partition of compact `topic`
    /// (`roll_active`: roll the active segments first, so all of it is
    /// cleanable). Every partition gets a compacted log first, so every
    /// one is requested and can be waited for, written to or not. Returns
    /// each partition with the number of passes started before the request
    /// (`LogCleaner::wait` takes them). Blocking.
    pub(crate) fn request_compaction(
        &self,
        topic: &Topic,
        roll_active: bool,
    ) -> Result<Vec<(u32, u64)>, BrokerError> {
        for p in 0..topic.partitions.get() {
            self.logs.log_or_create(&topic.name, p)?;
        }
        Ok(self.cleaner.request(&topic.name, roll_active)?)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::test_support::{append, compact, open, wait_until};

    /// Every partition is requested, also one never written to (it gets
    /// its compacted log first), so a front-end can wait for all of them;
    /// the totals count every log.
    #[test]
    fn only_compact_topics_are_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("users", 1, compact()).unwrap();
        broker
            .create_topic("events", 1, crate::topic_config::Overrides::new())
            .unwrap();
        assert_eq!(&*broker.compact_topic("users").unwrap().name, "users");
        match broker.compact_topic("events") {
            Err(e @ crate::error::BrokerError::TopicNotCompacted { .. }) => {
                let message = e.to_string();
                assert!(message.contains("cleanup.policy=delete"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            broker.compact_topic("nope"),
            Err(crate::error::BrokerError::UnknownTopic { .. })
        ));
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }

    #[test]
    fn a_request_covers_every_partition_and_the_totals_count_every_log() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        let topic = broker.create_topic("users", 2, compact()).unwrap();
        assert_eq!(broker.compacted_log_totals().logs, 0);
        append(&broker, "users", &[("a", "1")]);
        let part = broker.partition("users", 0).unwrap();
        wait_until("the compacted copy", || part.offsets().1 == 1);
        drop(part);
        let totals = broker.compacted_log_totals();
        assert_eq!(totals.logs, 1);
        assert!(totals.segments >= 1 && totals.bytes > 0, "{totals:?}");
        let requested = broker.request_compaction(&topic, false).unwrap();
        let partitions: Vec<u32> = requested.iter().map(|(p, _)| *p).collect();
        assert_eq!(partitions, [0, 1]);
        assert_eq!(broker.compacted_log_totals().logs, 2);
        drop(topic);
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }
}
