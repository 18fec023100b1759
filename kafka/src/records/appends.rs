//! A Produce partition's batches decoded straight into the broker's
//! [`Records`]: each record becomes the store's append record as it is
//! decoded, with the topic and partition
//! [`Door::records_for`](tidelog_broker::Door::records_for) checked before
//! (no list of decoded records in between, no pass after, no call out of
//! the decoder per record). What decoding comes to hold is counted against
//! the node's in-flight byte budget as it is held: each inflated buffer,
//! and the records in memory bytes ([`Records::memory_bytes`], not wire
//! bytes: a 7-byte record is a 128-byte append record). A shortfall ends
//! the decode with [`RecordError::OverBudget`] and gives back what it held.

use std::sync::Arc;

use bytes::Bytes;
use tidelog_broker::produce::Records;
use tidelog_broker::store::Header;
use tidelog_runtime::budget::{ByteBudget, Reservation};

use super::{decode_partition_into, BatchProducer, BatchRecord, DecodeLimits, RecordSink};
use crate::error::RecordError;

/// A partition's records, decoded.
#[derive(Debug)]
pub struct Decoded {
    pub records: Records,
    /// An idempotent producer's batch, when the partition's one batch is.
    pub producer: Option<BatchProducer>,
    /// The budget's bytes for `records` and the inflated buffers they
    /// point into: held until the append is answered.
    pub held: Reservation,
}

/// Decodes every batch of a partition's `data` into `records` (made by
/// [`Door::records_for`](tidelog_broker::Door::records_for)), within
/// `limits` and counting against `budget`. On an error, what was decoded
/// is dropped and its bytes given back.
pub fn decode_appends(
    data: &Bytes,
    limits: &mut DecodeLimits,
    records: Records,
    budget: &Arc<ByteBudget>,
) -> Result<Decoded, RecordError> {
    let mut appends = Appends::new(records, budget);
    let producer = decode_partition_into(data, limits, &mut appends)?;
    Ok(Decoded {
        records: appends.batch,
        producer,
        held: appends.held,
    })
}

/// The decoder's sink: the broker's records, their memory counted in
/// the in-flight byte budget as it grows.
struct Appends {
    batch: Records,
    /// The budget's bytes for the batch's memory and the inflated
    /// buffers its records point into.
    held: Reservation,
    budget: Arc<ByteBudget>,
    /// Of `held`, what the batch's own memory was when last counted.
    counted: u64,
}

impl Appends {
    fn new(batch: Records, budget: &Arc<ByteBudget>) -> Appends {
        let held = budget.empty();
        Appends {
            batch,
            held,
            budget: Arc::clone(budget),
            counted: 0,
        }
    }

    /// Counts `bytes` more, or refuses them.
    fn hold(&mut self, bytes: u64) -> Result<(), RecordError> {
        if bytes == 0 || self.held.try_grow(bytes) {
            return Ok(());
        }
        Err(RecordError::OverBudget {
            used: self.budget.used_bytes(),
            limit: self.budget.limit_bytes(),
        })
    }

    /// Counts what the batch's memory grew by since last counted.
    fn recount(&mut self) -> Result<(), RecordError> {
        let now = self.batch.memory_bytes();
        let grown = now.saturating_sub(self.counted);
        self.hold(grown)?;
        self.counted = self.counted.max(now);
        Ok(())
    }
}

impl RecordSink for Appends {
    fn inflated(&mut self, bytes: usize) -> Result<(), RecordError> {
        self.hold(bytes as u64)
    }

    fn reserve(&mut self, records: usize) -> Result<(), RecordError> {
        // Counted before the room is made: the room is the memory.
        let room = records.saturating_mul(Records::RECORD_MEMORY_BYTES) as u64;
        self.hold(room)?;
        self.counted += room;
        self.batch.reserve(records);
        self.recount()
    }

    fn push(&mut self, r: BatchRecord) -> Result<(), RecordError> {
        // Most records have none: no iterator to build and drop.
        let headers = if r.headers.is_empty() {
            Vec::new()
        } else {
            r.headers
                .into_iter()
                .map(|(name, value)| Header { name, value })
                .collect()
        };
        self.batch
            .push(None, r.key, r.value, headers, r.timestamp_ms);
        self.recount()
    }
}
