//! Compaction on request (a front-end's "compact this topic now"), and
//! the compacted logs' totals for metrics.

use std::sync::Arc;

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::registry::Topic;

/// Totals over every compacted log (`/metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactedLogTotals {
    pub logs: usize,
    pub segments: usize,
    pub bytes: u64,
}

impl Broker {
    /// The topic `name`, if it exists and its policy compacts: what a
    /// compaction request or status is about. `TopicNotCompacted` (40002)
    /// otherwise, naming the policy.
    pub fn compact_topic(&self, name: &str) -> Result<Arc<Topic>, BrokerError> {
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
    pub fn request_compaction(
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
