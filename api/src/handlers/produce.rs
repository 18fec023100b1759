//! `POST /topics/{topic}` and `POST /topics/{topic}/partitions/{p}`.
//!
//! A request is checked whole before anything of it is written (API.md):
//! content type, body size, body shape, topic, every record's partition,
//! key (compact topics), headers and size. Only then is it appended, as one
//! `Store::append` call, which itself is all or nothing.
//!
//! The topic, the record rules and the append are the broker's, behind
//! its door (`Broker::produce`, `broker/src/produce.rs`), which also
//! decides where the append runs; this handler decodes and renders.
//!
//! Decisions where API.md is silent:
//! * On the partition route, a record may repeat the path's partition; a
//!   different one is 42206, since a record cannot go to two partitions.
//! * Auto-created topics (`auto_create_topics: true`) get
//!   `default_partitions` and no config overrides.
//! * An empty `records` array answers 200 with no offsets and writes
//!   nothing, even when the disk is full.
//! * Check order: name, partition, content type (415), body size (413),
//!   body (42206/42201/42202), record count (413), then the broker's: topic
//!   (404, or 507 if it would be auto-created on a full disk, else
//!   auto-create), every record (40402, 42201, 413), then the store's own
//!   disk-full gate in `Store::append` (507). The disk-full flag is the
//!   store's alone (its `tidelog-disk` thread measures the disk); the
//!   broker only reads it, so that a full disk never creates topics for
//!   requests it refuses.

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use tidelog_broker::produce::ProduceRequest;

use super::{timed, v2_bytes, v2_json};
use crate::error::ApiError;
use crate::extract::{content_type, ApiPath};
use crate::names;
use crate::records::{self, EmbeddedFormat, ProduceResponse};
use crate::state::AppState;

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
    let door = state.door()?;
    let request = ProduceRequest {
        topic,
        partition: path_partition,
        records: produced.into_iter().collect(),
        producer: None,
        create_missing_topic: true,
        acks_all: true,
    };
    let produced = door.produce(request).await?;
    if produced.is_empty() {
        return Ok((
            v2_json(StatusCode::OK, &ProduceResponse::new(Vec::new()))?,
            0,
            0,
        ));
    }
    let count = produced.len() as u64;
    let answer = records::produce_answer(produced.offsets());
    Ok((
        v2_bytes(StatusCode::OK, answer),
        count,
        produced.payload_bytes(),
    ))
}
