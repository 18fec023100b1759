//! ListOffsets (2): -2 the beginning, -1 the end (the offset the next
//! record gets), and a timestamp: the first offset whose record timestamp
//! is at least it, through the time index ([`by_timestamp`]); from v7,
//! -3 the first record with the largest timestamp ([`max_timestamp`]).
//!
//! Invariant: an answer covers every record acknowledged before the
//! request arrived. Produce answers after the CommitLog append, and the
//! ends and time index are the dispatcher's, a moment later; so the
//! lookups first await `Broker::visible` of what was acknowledged when
//! the request arrived (read-your-writes, bounded by `VISIBILITY_WAIT`;
//! no thread is held meanwhile). Kafka's high watermark moves with the
//! append: a client asking right after its produce (confluent-kafka's
//! `offsets_for_times`) found nothing otherwise. Only a timestamp lookup
//! (it reads records) runs on a blocking thread.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};
use tidelog_broker::read::PartitionRef;
use tidelog_broker::visibility::VISIBILITY_WAIT;
use tidelog_broker::Broker;

use super::{maybe_blocking, partition_ref};
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
    let broker = ctx.broker();
    let asked: Vec<(TopicName, Vec<i32>)> = request
        .topics
        .iter()
        .map(|t| {
            let ids = t.partitions.iter().map(|p| p.partition_index).collect();
            (t.name.clone(), ids)
        })
        .collect();
    if let Some(broker) = &broker {
        // A stalled dispatcher is what the bound is for (it also refuses
        // appends, KAFKA.md "Produce"): then the answer is what is indexed.
        let _ = tokio::time::timeout(VISIBILITY_WAIT, broker.visible(broker.acknowledged())).await;
    }
    // A timestamp lookup reads records: off the runtime's threads.
    let reads = request.topics.iter().any(|t| {
        t.partitions
            .iter()
            .any(|p| p.timestamp >= 0 || p.timestamp == MAX_TIMESTAMP)
    });
    let answer = move || Ok(answer(broker.as_ref(), version, request));
    match maybe_blocking(reads, answer).await {
        Ok(response) => response,
        Err(e) => {
            let code = broker_code(&e);
            let topics = asked
                .into_iter()
                .map(|(name, ids)| {
                    let partitions = ids
                        .into_iter()
                        .map(|id| {
                            ListOffsetsPartitionResponse::default()
                                .with_partition_index(id)
                                .with_error_code(code)
                                .with_timestamp(-1)
                                .with_offset(-1)
                        })
                        .collect();
                    ListOffsetsTopicResponse::default()
                        .with_name(name)
                        .with_partitions(partitions)
                })
                .collect();
            ListOffsetsResponse::default().with_topics(topics)
        }
    }
}

fn answer(
    broker: Option<&Arc<Broker>>,
    version: i16,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let part = partition_ref(broker, topic.name.0.as_str(), p.partition_index);
                    let answer = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    match part.and_then(|part| offset(&part, version, p.timestamp)) {
                        // The leader epoch is a field from v4 on.
                        Ok(Found { offset, timestamp }) => answer
                            .with_offset(offset)
                            .with_timestamp(timestamp)
                            .with_leader_epoch(if version >= 4 { 0 } else { -1 }),
                        Err(code) => answer
                            .with_error_code(code)
                            .with_offset(-1)
                            .with_timestamp(-1),
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

/// A partition's answer: the offset, and the timestamp of the record found
/// by a timestamp query (−1 for the earliest and latest queries, and when
/// no record qualifies, as Kafka answers).
struct Found {
    offset: i64,
    timestamp: i64,
}

fn offset(part: &PartitionRef, version: i16, timestamp: i64) -> Result<Found, i16> {
    // Kafka's log start, which compaction does not move (a fetch from it
    // reads on from the first record kept).
    let (beginning, end) = part.log_start_and_end();
    let at = |offset: u64| Found {
        offset: i64::try_from(offset).unwrap_or(i64::MAX),
        timestamp: -1,
    };
    match timestamp {
        EARLIEST => Ok(at(beginning)),
        LATEST => Ok(at(end)),
        ts if ts >= 0 => by_timestamp(part, ts, end),
        // KIP-734 added -3 in v7; older versions (and other negative
        // values) are not answered rather than guessed.
        MAX_TIMESTAMP if version >= 7 => max_timestamp(part),
        _ => Err(ResponseError::InvalidRequest.code()),
    }
}

/// -3: the first record with the largest timestamp and that timestamp
/// (`PartitionRef::max_timestamp_record`: the time index's maxima, not a
/// scan); offset and timestamp −1 for a partition without records, as
/// Kafka answers.
fn max_timestamp(part: &PartitionRef) -> Result<Found, i16> {
    let found = part.max_timestamp_record().map_err(|e| broker_code(&e))?;
    Ok(found.map_or(
        Found {
            offset: -1,
            timestamp: -1,
        },
        |(offset, timestamp)| Found {
            offset: i64::try_from(offset).unwrap_or(i64::MAX),
            timestamp,
        },
    ))
}

/// The first offset whose record timestamp is ≥ `timestamp`
/// (`PartitionRef::offset_for_timestamp`: the time index's running
/// maximum, exact for timestamps out of order) with that record's
/// timestamp; when no record qualifies, offset and timestamp −1, as Kafka
/// answers (clients read it as "none": kafka-python's `offsets_for_times`
/// gives `None`).
fn by_timestamp(part: &PartitionRef, timestamp: i64, end: u64) -> Result<Found, i16> {
    // The record the lookup finds can be removed (retention, a cleaning
    // pass) before it is read; the read then shows the next one, which
    // need not qualify: look up again, a few times at most.
    for _ in 0..3 {
        let offset = part
            .offset_for_timestamp(timestamp)
            .map_err(|e| broker_code(&e))?;
        if offset >= end {
            break;
        }
        let batch = part.read(offset, 1, 1).map_err(|e| broker_code(&e))?;
        let Some(r) = batch.records.iter().next() else {
            break;
        };
        if r.offset() == offset || r.timestamp_ms() >= timestamp {
            return Ok(Found {
                offset: i64::try_from(r.offset()).unwrap_or(i64::MAX),
                timestamp: r.timestamp_ms(),
            });
        }
    }
    Ok(Found {
        offset: -1,
        timestamp: -1,
    })
}
