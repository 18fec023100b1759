//! A partition's log start moved on one node: DeleteRecords' own step,
//! taken by the master ([`crate::Broker::delete_records`]) and by a
//! replica applying the master's (`crate::cluster_metadata::sink`). Apart
//! from both, on the store and the compacted logs alone, so neither the
//! broker nor the metadata sink reaches the other through it.

use tidelog_cleaner::CompactedLogs;
use tidelog_storage::{DeletedRecords, Store};

use crate::error::BrokerError;

/// Moves `topic`-`partition`'s log start in `store` to `before` (`None`:
/// its end) and, with it, its compacted log's in `logs`: DeleteRecords'
/// own step, on the master and where a replica applies the master's
/// (`crate::cluster_metadata::sink`). Blocking (fsyncs).
pub(crate) fn move_log_start(
    store: &Store,
    logs: &CompactedLogs,
    topic: &str,
    partition: u32,
    before: Option<u64>,
) -> Result<DeletedRecords, BrokerError> {
    let moved = store.delete_records(topic, partition, before)?;
    if let DeletedRecords::LowWatermark(low) = moved {
        if let Some(log) = logs.log(topic, partition) {
            log.set_log_start(low);
        }
    }
    Ok(moved)
}
