//! What an entry another writer wrote means for the producer state and
//! the transactions: recovery's scan of the log past the snapshot, and a
//! replica placing its master's bytes, move both exactly as the writer
//! moved them when it wrote the entry. One function for both, so a
//! replica's state after a copy is a recovered node's state.

use std::sync::Arc;

use super::format::EntryView;
use crate::producer_state::ProducerStates;

/// The step an entry takes in its partition's transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxnStep {
    /// A transactional batch whose first record is at `offset`.
    Record { producer_id: i64, offset: u64 },
    /// A marker at `offset` ending the producer's transaction; `position`
    /// is its record's physical offset (the aborted index keeps it).
    Marker {
        producer_id: i64,
        offset: u64,
        commit: bool,
        position: u64,
    },
}

/// Move `producers` past the entry `v` of `topic` (one with a producer
/// block; others change nothing), and say what it does to its
/// partition's transactions.
pub(crate) fn replay_entry(
    producers: &mut ProducerStates,
    topic: &Arc<str>,
    v: &EntryView,
) -> Option<TxnStep> {
    let p = v.producer.as_ref()?;
    if let Some(m) = v.marker {
        producers.marker(
            topic,
            v.partition,
            p.producer_id,
            p.epoch,
            v.store_timestamp_ms,
        );
        return Some(TxnStep::Marker {
            producer_id: p.producer_id,
            offset: v.base_queue_offset,
            commit: m.commit,
            position: v.physical_offset + v.first_record() as u64,
        });
    }
    producers.replay(
        topic,
        v.partition,
        p,
        v.record_count,
        v.base_queue_offset,
        v.store_timestamp_ms,
    );
    p.transactional.then_some(TxnStep::Record {
        producer_id: p.producer_id,
        offset: v.base_queue_offset,
    })
}
