//! ListOffsets (2): -2 the beginning, -1 the end (the offset the next
//! record gets), and a timestamp: the first offset whose record timestamp
//! is at least it, through the time index ([`Door::record_at_timestamp`]); from v7,
//! -3 the first record with the largest timestamp ([`Door::max_timestamp_record`]).
//! With `isolation_level` 1 (READ_COMMITTED, v2+) -1 is the last stable
//! offset: where a read_committed consumer's reads end.
//!
//! Invariant: an answer covers every record acknowledged before the
//! request arrived. Produce answers after the CommitLog append, and the
//! ends and time index are the dispatcher's, a moment later; so the
//! lookups first await `Broker::visible` of what was acknowledged when
//! the request arrived (read-your-writes, bounded by `VISIBILITY_WAIT`;
//! no thread is held meanwhile). Kafka's high watermark moves with the
//! append: a client asking right after its produce (confluent-kafka's
//! `offsets_for_times`) found nothing otherwise. A timestamp lookup reads
//! records: the broker's door runs it where it belongs
//! (`Door::record_at_timestamp`, `Door::max_timestamp_record`).
//!
//! In a cluster only the master answers (a replica:
//! NOT_LEADER_OR_FOLLOWER per partition), with the cluster's epoch as
//! the leader epoch, and a `current_leader_epoch` (v4+) is checked as
//! Fetch checks it (`super::cluster`); alone the epoch is 0 and a
//! client's is not checked, as before.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use tidelog_broker::read::PartitionRef;
use tidelog_broker::Door;

use super::cluster::Nodes;
use super::partition_ref;
use crate::context::Context;
use crate::error::broker_code;

const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
/// The record with the largest timestamp (KIP-734, v7).
const MAX_TIMESTAMP: i64 = -3;

pub async fn handle(
    ctx: &Context,
    version: i16,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let door = ctx.door();
    if let Some(door) = &door {
        // A stalled dispatcher is what the bound is for (it also refuses
        // appends, KAFKA.md "Produce"): then the answer is what is indexed.
        door.until_acknowledged_visible().await;
    }
    answer(door.as_ref(), version, request).await
}

async fn answer(
    door: Option<&Door>,
    version: i16,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let committed = request.isolation_level == 1;
    let nodes = Nodes::of(door);
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let part = partition_ref(door, topic.name.0.as_str(), p.partition_index)
                .and_then(|part| nodes.leader_check(p.current_leader_epoch).map(|()| part));
            let found = match (door, part) {
                (Some(door), Ok(part)) => {
                    offset(door, &part, version, p.timestamp, committed).await
                }
                (_, Err(code)) => Err(code),
                (None, Ok(_)) => Err(super::NOT_READY),
            };
            let answer =
                ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            partitions.push(match found {
                // The leader epoch is a field from v4 on.
                Ok(Found { offset, timestamp }) => answer
                    .with_offset(offset)
                    .with_timestamp(timestamp)
                    .with_leader_epoch(if version >= 4 {
                        nodes.leader_epoch()
                    } else {
                        -1
                    }),
                Err(code) => answer
                    .with_error_code(code)
                    .with_offset(-1)
                    .with_timestamp(-1),
            });
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

/// A partition's answer: the offset, and the timestamp of the record found
/// by a timestamp query (−1 for the earliest and latest queries, and when
/// no record qualifies, as Kafka answers).
struct Found {
    offset: i64,
    timestamp: i64,
}

async fn offset(
    door: &Door,
    part: &PartitionRef,
    version: i16,
    timestamp: i64,
    committed: bool,
) -> Result<Found, i16> {
    // Kafka's log start, which compaction does not move (a fetch from it
    // reads on from the first record kept).
    let (beginning, end) = part.log_start_and_end();
    let at = |offset: u64| Found {
        offset: i64::try_from(offset).unwrap_or(i64::MAX),
        timestamp: -1,
    };
    let (topic, index) = (&*part.topic().name, part.partition());
    let found = match timestamp {
        EARLIEST => return Ok(at(beginning)),
        LATEST if committed => return Ok(at(part.last_stable_offset(end))),
        LATEST => return Ok(at(end)),
        // The first record whose timestamp is at least it.
        ts if ts >= 0 => door.record_at_timestamp(topic, index, ts).await,
        // KIP-734 added -3 in v7: the first record with the largest
        // timestamp. Older versions (and other negative values) are not
        // answered rather than guessed.
        MAX_TIMESTAMP if version >= 7 => door.max_timestamp_record(topic, index).await,
        _ => return Err(ResponseError::InvalidRequest.code()),
    };
    // No record qualifies: offset and timestamp −1, as Kafka answers
    // (clients read it as "none": kafka-python's `offsets_for_times` gives
    // `None`).
    Ok(match found.map_err(|e| broker_code(&e))? {
        Some((offset, timestamp)) => Found {
            offset: i64::try_from(offset).unwrap_or(i64::MAX),
            timestamp,
        },
        None => Found {
            offset: -1,
            timestamp: -1,
        },
    })
}
