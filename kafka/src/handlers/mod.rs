//! One module per served API, each a thin mapping onto the broker.
//!
//! Each calls the broker through its door (`Broker::door`), which decides
//! where the work runs (a sync-flush append awaited, an auto-create or a
//! compacted log's read on the blocking pool, page-cache copies inline);
//! no handler picks a thread for broker work. Produce decodes compressed
//! batches on the blocking pool itself: that is wire work, not the
//! broker's.

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod admin;
pub mod alter_configs;
pub mod api_versions;
pub mod authorized;
pub mod cluster;
mod configs;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_producers;
pub mod describe_transactions;
pub mod end_txn;
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
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod produce;
pub mod sasl;
pub mod scram_users;
pub mod sync_group;
pub mod txn_offset_commit;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::read::PartitionRef;
use tidelog_broker::Door;

use crate::error::broker_code;

/// LEADER_NOT_AVAILABLE: what a partition answers while recovery runs
/// (KAFKA.md "Not ready"; retriable).
const NOT_READY: i16 = ResponseError::LeaderNotAvailable.code();

/// The partition a request names, or the error code its answer carries
/// (NOT_READY before the broker is).
fn partition_ref(door: Option<&Door>, topic: &str, index: i32) -> Result<PartitionRef, i16> {
    let door = door.ok_or(NOT_READY)?;
    let index = u32::try_from(index).map_err(|_| ResponseError::UnknownTopicOrPartition.code())?;
    door.partition(topic, index).map_err(|e| broker_code(&e))
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}
