//! One module per served API, each a thin mapping onto the broker.
//!
//! Broker calls that block (a sync-flush append, an auto-create, a
//! compacted log's read) run on `spawn_blocking`, as the HTTP API runs
//! them; the rest (page-cache copies) run inline.

pub mod admin;
pub mod alter_configs;
pub mod api_versions;
mod configs;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod fetch;
pub mod find_coordinator;
mod group;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod produce;
pub mod sasl;
pub mod sync_group;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::read::PartitionRef;
use tidelog_broker::{Broker, BrokerError};

use crate::error::broker_code;

/// Runs `f` on a blocking thread when `blocks`, else inline.
async fn maybe_blocking<T: Send + 'static>(
    blocks: bool,
    f: impl FnOnce() -> Result<T, BrokerError> + Send + 'static,
) -> Result<T, BrokerError> {
    if !blocks {
        return f();
    }
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|source| {
            Err(BrokerError::BlockingTaskFailed {
                task: "a blocking broker call",
                source,
            })
        })
}

/// LEADER_NOT_AVAILABLE: what a partition answers while recovery runs
/// (KAFKA.md "Not ready"; retriable).
const NOT_READY: i16 = ResponseError::LeaderNotAvailable.code();

/// The partition a request names, or the error code its answer carries
/// (NOT_READY before the broker is).
fn partition_ref(
    broker: Option<&std::sync::Arc<Broker>>,
    topic: &str,
    index: i32,
) -> Result<PartitionRef, i16> {
    let broker = broker.ok_or(NOT_READY)?;
    let index = u32::try_from(index).map_err(|_| ResponseError::UnknownTopicOrPartition.code())?;
    broker.partition(topic, index).map_err(|e| broker_code(&e))
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}
