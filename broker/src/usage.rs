//! How much of the disk a partition takes: the figure the console's topics
//! page shows beside the offsets (`GET /v3/clusters/{c}/topics/{t}`).
//!
//! Invariants:
//! - A compact partition's records live in its compacted log, whose size is
//!   kept in memory: its figure is exact.
//! - A queue partition's records share the CommitLog with every other
//!   partition, and nothing counts one partition's bytes there. The figure
//!   is the record count times the mean size of at most [`SAMPLED_UNITS`]
//!   ConsumeQueue units spread evenly over the partition (`estimated` is
//!   then true, unless every unit was read): a bounded number of reads of
//!   mapped queue files, whatever the partition holds, never a scan.
//! - Either adds the partition's ConsumeQueue files (their full size: they
//!   are preallocated).

use std::sync::Arc;

use tidelog_storage::consume_queue::format::UNIT_LEN;

use crate::broker::Broker;
use crate::error::BrokerError;

/// Most ConsumeQueue units one usage figure reads.
pub const SAMPLED_UNITS: u64 = 64;

/// Bytes in a ConsumeQueue unit (formats.md: unit `n` at byte `n × 20`),
/// as the queue's format writes it.
const UNIT_BYTES: u64 = UNIT_LEN as u64;

/// One partition's offsets and its share of the disk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartitionUsage {
    pub partition: u32,
    pub beginning_offset: u64,
    pub end_offset: u64,
    /// `end_offset − beginning_offset`: the record count of a queue
    /// partition, an upper bound for a compact one (cleaning leaves gaps).
    pub records: u64,
    /// The records' bytes (exact or estimated, module doc) plus the
    /// partition's ConsumeQueue files.
    pub bytes_on_disk: u64,
    /// Whether the records' bytes were extrapolated from a sample.
    pub estimated: bool,
}

impl Broker {
    /// The usage of `partition` of `topic` (module doc); 40401/40402 like
    /// [`Broker::partition`]. Not blocking: in-memory sizes and at most
    /// [`SAMPLED_UNITS`] reads of mapped queue files.
    pub(crate) fn partition_usage(
        self: &Arc<Self>,
        topic: &str,
        partition: u32,
    ) -> Result<PartitionUsage, BrokerError> {
        let part = self.partition(topic, partition)?;
        let (beginning, end) = part.offsets();
        let records = end.saturating_sub(beginning);
        let queue = self.store.consume_queues().get(topic, partition);
        let queue_file_bytes = queue.as_ref().map_or(0, |q| {
            q.file_count() as u64 * self.store.config().consume_queue_units_per_file * UNIT_BYTES
        });
        if part.topic().config.cleanup_policy.compacts() {
            let log_bytes = self
                .logs
                .log(topic, partition)
                .map_or(0, |log| log.size_bytes());
            return Ok(PartitionUsage {
                partition,
                beginning_offset: beginning,
                end_offset: end,
                records,
                bytes_on_disk: log_bytes + queue_file_bytes,
                estimated: false,
            });
        }
        // Local records only: a tiered partition's offsets below its local
        // beginning are in the remote tier, not on this disk.
        let local_beginning = part.local_offsets().0.max(beginning);
        let local = end.saturating_sub(local_beginning);
        let (sampled, sampled_bytes) = queue
            .filter(|_| local > 0)
            .map_or((0, 0), |queue| sample_units(&queue, local_beginning, end));
        let record_bytes = match sampled {
            0 => 0,
            n => sampled_bytes / n * local + sampled_bytes % n * local / n,
        };
        Ok(PartitionUsage {
            partition,
            beginning_offset: beginning,
            end_offset: end,
            records,
            bytes_on_disk: record_bytes + queue_file_bytes,
            estimated: sampled < local,
        })
    }
}

/// The count and summed sizes of at most [`SAMPLED_UNITS`] ConsumeQueue
/// units spread evenly over `[from, end)`. A unit the store cannot decode
/// (or a hole) is left out of the sample; the figure is an estimate either
/// way.
pub(crate) fn sample_units(
    queue: &tidelog_storage::consume_queue::ConsumeQueue,
    from: u64,
    end: u64,
) -> (u64, u64) {
    let records = end.saturating_sub(from);
    let step = records.div_ceil(SAMPLED_UNITS).max(1);
    let (mut sampled, mut sampled_bytes) = (0u64, 0u64);
    let mut offset = from;
    while offset < end {
        if let Ok(Some(unit)) = queue.get(offset) {
            sampled += 1;
            sampled_bytes += u64::from(unit.size);
        }
        offset += step;
    }
    (sampled, sampled_bytes)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::test_support::{append, compact, open, wait_until};
    use crate::topic_config::Overrides;

    use super::*;

    #[test]
    fn a_queue_partition_counts_its_records_bytes_and_its_queue_files() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("events", 2, Overrides::new()).unwrap();
        let empty = broker.partition_usage("events", 1).unwrap();
        assert_eq!((empty.records, empty.bytes_on_disk), (0, 0), "{empty:?}");
        // Fewer records than the sample: every unit is read, exactly.
        append(&broker, "events", &[("k", "0123456789"); 10]);
        wait_until("dispatch", || {
            broker.partition("events", 0).unwrap().offsets().1 == 10
        });
        let queue = broker.store.consume_queues().get("events", 0).unwrap();
        let exact = |end: u64| -> u64 {
            (0..end)
                .map(|o| u64::from(queue.get(o).unwrap().unwrap().size))
                .sum()
        };
        let queue_files = 1000 * UNIT_BYTES; // test_support: 1000 units a file
        let few = broker.partition_usage("events", 0).unwrap();
        assert_eq!(few.records, 10);
        assert!(!few.estimated);
        assert_eq!(few.bytes_on_disk, exact(10) + queue_files);
        // More than the sample: an estimate, close to the exact sum (the
        // records differ by a byte or two, the entries' first ones more).
        for _ in 0..20 {
            append(&broker, "events", &[("k", "0123456789"); 10]);
        }
        wait_until("dispatch", || {
            broker.partition("events", 0).unwrap().offsets().1 == 210
        });
        let many = broker.partition_usage("events", 0).unwrap();
        assert!(many.estimated);
        let estimate = (many.bytes_on_disk - queue_files) as f64;
        let ratio = estimate / exact(210) as f64;
        assert!((0.9..1.1).contains(&ratio), "{many:?}: {ratio}");
        assert!(broker.partition_usage("events", 2).is_err());
        assert!(broker.partition_usage("nope", 0).is_err());
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }

    #[test]
    fn a_compact_partition_counts_its_compacted_log() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        broker.create_topic("users", 1, compact()).unwrap();
        append(&broker, "users", &[("a", "1"), ("b", "2")]);
        let part = broker.partition("users", 0).unwrap();
        wait_until("the compacted copy", || part.offsets().1 == 2);
        let usage = broker.partition_usage("users", 0).unwrap();
        let log_bytes = broker.logs.log("users", 0).unwrap().size_bytes();
        assert!(log_bytes > 0);
        assert!(!usage.estimated);
        assert_eq!(usage.records, 2);
        assert!(usage.bytes_on_disk >= log_bytes, "{usage:?}");
        drop(part);
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }
}
