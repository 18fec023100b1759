//! `POST /topics/{topic}` and `POST /topics/{topic}/partitions/{p}`.
//!
//! A request is checked whole before anything of it is written (API.md):
//! content type, body size, body shape, topic, every record's partition,
//! key (compact topics), headers and size. Only then is it appended, as one
//! `Store::append` call, which itself is all or nothing.
//!
//! Decisions where API.md is silent:
//! * On the partition route, a record may repeat the path's partition; a
//!   different one is 42206, since a record cannot go to two partitions.
//! * Auto-created topics (`auto_create_topics: true`) get
//!   `default_partitions` and no config overrides.
//! * An empty `records` array answers 200 with no offsets and writes
//!   nothing, even when the disk is full.
//! * Check order: name, partition, content type (415), body size (413),
//!   body (42206/42201/42202), record count (413), topic (404, or 507 if
//!   it would be auto-created on a full disk, else auto-create), every
//!   record (40402, 42201, 413), then the store's own disk-full gate in
//!   `Store::append` (507). The disk-full flag is the store's alone (its
//!   `tidelog-disk` thread measures the disk); this handler only reads it,
//!   so that a full disk never creates topics for requests it refuses.

use std::sync::Arc;

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use tidelog_storage::commit_log::format::{headers_block_len, HEADER_COUNT_MAX, HEADER_NAME_MAX};
use tidelog_storage::{AppendRecord, Header};

use super::{blocking, timed, v2_bytes, v2_json};
use crate::error::ApiError;
use crate::extract::{content_type, ApiPath};
use crate::names;
use crate::partitioner::partition_for_key;
use crate::records::{self, EmbeddedFormat, ProduceRecord, ProduceResponse};
use crate::registry::Topic;
use crate::state::{AppState, Broker};

pub async fn produce(
    State(state): State<AppState>,
    ApiPath(topic): ApiPath<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let metrics = &state.shared().metrics.produce;
    timed(metrics, produce_inner(&state, topic, None, &headers, body)).await
}

pub async fn produce_to_partition(
    State(state): State<AppState>,
    ApiPath((topic, partition)): ApiPath<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let metrics = &state.shared().metrics.produce;
    timed(
        metrics,
        produce_inner(&state, topic, Some(partition), &headers, body),
    )
    .await
}

/// Answers with the response, the number of records and their payload bytes.
async fn produce_inner(
    state: &AppState,
    topic: String,
    path_partition: Option<String>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(Response, u64, u64), ApiError> {
    names::validate_topic_name(&topic)?;
    let path_partition = path_partition
        .as_deref()
        .map(names::parse_partition)
        .transpose()?;
    let format = EmbeddedFormat::from_content_type(content_type(headers))?;
    let body = body?;
    let settings = state.settings();
    let produced = records::decode_produce(format, &body)?;
    if produced.len() > settings.max_records_per_request {
        return Err(ApiError::TooLarge {
            message: format!(
                "{} records in one request; the limit is {}",
                produced.len(),
                settings.max_records_per_request
            ),
        });
    }
    let ready = state.ready()?;
    let topic = resolve_topic(state, &ready, &topic, !produced.is_empty()).await?;
    if topic.is_internal() {
        // Its records must stay decodable: only this server writes them.
        return Err(ApiError::BadRequest {
            message: format!(
                "topic {:?} is internal; commit offsets with POST /consumer-groups/{{group}}/offsets",
                topic.name
            ),
        });
    }
    if let Some(p) = path_partition {
        topic.check_partition(p)?;
    }
    let (batch, payload_bytes) = plan(ready.store.config(), &topic, path_partition, produced)?;
    if batch.is_empty() {
        return Ok((
            v2_json(StatusCode::OK, &ProduceResponse::new(Vec::new()))?,
            0,
            0,
        ));
    }
    let partitions: Vec<u32> = batch.iter().map(|r| r.partition).collect();
    let count = batch.len() as u64;
    // Under async flush an append is a copy into the page cache: it takes
    // microseconds, less than handing it to the blocking pool and waking
    // this task again (the profile in docs/BENCHMARKS.md), so it runs here.
    // Under sync flush it waits for an fsync, which must not hold a worker.
    let appended = if ready.store.config().flush == tidelog_storage::FlushMode::Sync {
        let store = Arc::clone(&ready);
        blocking(move || Ok(store.store.append(&batch)?)).await?
    } else {
        ready.store.append(&batch)?
    };
    let answer = records::produce_answer(
        partitions
            .into_iter()
            .zip(appended)
            .map(|(p, a)| (p, a.queue_offset.0)),
    );
    Ok((v2_bytes(StatusCode::OK, answer), count, payload_bytes))
}

/// The topic, created first if it is unknown and `auto_create_topics` is on
/// (not when the disk is full and the request would write something).
async fn resolve_topic(
    state: &AppState,
    ready: &Arc<Broker>,
    name: &str,
    writes: bool,
) -> Result<Arc<Topic>, ApiError> {
    if let Some(topic) = ready.registry.get(name) {
        return Ok(topic);
    }
    let settings = state.settings();
    if !settings.auto_create_topics {
        return Err(ApiError::unknown_topic(name));
    }
    if writes {
        // The store's flag, not a new measurement: the append would be
        // refused anyway, and the topic should not outlive the refusal.
        let stats = ready.store.stats();
        if stats.disk_full {
            return Err(ApiError::disk_full(
                stats.disk_used_ratio,
                &ready.store.config().retention,
            ));
        }
    }
    let partitions = settings.default_partitions;
    let ready = Arc::clone(ready);
    let name = name.to_string();
    blocking(move || Ok(ready.get_or_create_topic(&name, partitions)?)).await
}

/// Checks every record and turns it into an append; returns the batch and
/// its payload bytes (key + value + headers). The record limit is the
/// topic's `max.message.bytes` or the store's effective limit, whichever is
/// smaller.
fn plan(
    store: &tidelog_storage::StoreConfig,
    topic: &Topic,
    path_partition: Option<u32>,
    produced: Vec<ProduceRecord>,
) -> Result<(Vec<AppendRecord>, u64), ApiError> {
    let store_limit = store.record_payload_max();
    let topic_limit = u64::from(topic.config.max_message_bytes);
    let limit = store_limit.min(topic_limit);
    let compacts = topic.config.cleanup_policy.compacts();
    let mut total = 0u64;
    let mut batch = Vec::with_capacity(produced.len());
    for (i, r) in produced.into_iter().enumerate() {
        let partition = match (path_partition, r.partition) {
            (Some(path), Some(own)) if own != path => {
                return Err(ApiError::PayloadMalformed {
                    message: format!(
                        "records[{i}].partition is {own}, but the request is for partition {path}"
                    ),
                })
            }
            (Some(path), _) => path,
            (None, Some(own)) => own,
            (None, None) => match &r.key {
                Some(key) => partition_for_key(key, topic.partitions),
                None => topic.round_robin.next(topic.partitions),
            },
        };
        topic.check_partition(partition)?;
        if compacts && r.key.is_none() {
            return Err(ApiError::KeyInvalid {
                message: format!(
                    "records[{i}] has no key, but topic {:?} is compacted (cleanup.policy={}): every record needs a key; nothing of the request was written",
                    topic.name,
                    topic.config.cleanup_policy.as_str()
                ),
            });
        }
        if r.headers.len() > HEADER_COUNT_MAX {
            return Err(ApiError::PayloadMalformed {
                message: format!(
                    "records[{i}] has {} headers; at most {HEADER_COUNT_MAX} are allowed",
                    r.headers.len()
                ),
            });
        }
        let headers: Vec<Header> = r
            .headers
            .into_iter()
            .map(|(name, value)| Header { name, value })
            .collect();
        if let Some((h, _)) = headers
            .iter()
            .enumerate()
            .find(|(_, h)| h.name.len() > HEADER_NAME_MAX)
        {
            return Err(ApiError::PayloadMalformed {
                message: format!(
                    "records[{i}].headers[{h}].name is longer than {HEADER_NAME_MAX} bytes"
                ),
            });
        }
        let size = r.key.as_ref().map_or(0, |k| k.len() as u64)
            + r.value.as_ref().map_or(0, |v| v.len() as u64)
            + headers_block_len(&headers) as u64;
        if size > limit {
            let which = if topic_limit <= store_limit {
                format!("topic {:?} max.message.bytes", topic.name)
            } else if store_limit < store.max_message_bytes {
                format!(
                    "the store's record limit (store.max_message_bytes {}, clamped to what fits in a store.commitlog_segment_bytes segment of {})",
                    store.max_message_bytes, store.commitlog_segment_bytes
                )
            } else {
                "store.max_message_bytes".to_string()
            };
            return Err(ApiError::TooLarge {
                message: format!(
                    "records[{i}] is {size} bytes (key + value + headers), over the {limit} of {which}; nothing of the request was written"
                ),
            });
        }
        total += size;
        batch.push(AppendRecord {
            topic: Arc::clone(&topic.name),
            partition,
            key: r.key,
            value: r.value,
            headers,
            timestamp_ms: r.timestamp_ms,
        });
    }
    Ok((batch, total))
}
