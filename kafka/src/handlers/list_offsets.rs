//! ListOffsets (2): -2 the beginning, -1 the end (the offset the next
//! record gets), and a timestamp through one call site,
//! [`by_timestamp`].

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use tidelog_broker::read::PartitionRef;

use super::partition_ref;
use crate::dispatch::Context;

const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

pub async fn handle(
    ctx: &Context,
    version: i16,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let broker = ctx.broker();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let part =
                        partition_ref(broker.as_ref(), topic.name.0.as_str(), p.partition_index);
                    let answer = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1);
                    match part.and_then(|part| offset(&part, p.timestamp)) {
                        // The leader epoch is a field from v4 on.
                        Ok(offset) => answer
                            .with_offset(offset)
                            .with_leader_epoch(if version >= 4 { 0 } else { -1 }),
                        Err(code) => answer.with_error_code(code).with_offset(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

fn offset(part: &PartitionRef, timestamp: i64) -> Result<i64, i16> {
    let (beginning, end) = part.offsets();
    match timestamp {
        EARLIEST => Ok(beginning as i64),
        LATEST => Ok(end as i64),
        ts => by_timestamp(part, ts),
    }
}

/// The first offset whose record timestamp is ≥ `timestamp`, or the end
/// when none is. The one call site of the time-index lookup
/// (`PartitionRef::offset_for_timestamp`, which arrives with the time
/// index on another branch and is wired here at merge); until then a
/// timestamp (and -3, the max-timestamp query) is INVALID_REQUEST, so
/// a client learns the broker cannot answer it rather than get a guess.
fn by_timestamp(_part: &PartitionRef, _timestamp: i64) -> Result<i64, i16> {
    Err(ResponseError::InvalidRequest.code())
}
