//! API.md's "Consumer instances" (Confluent REST Proxy v2): every route
//! parses here and calls the broker's door on the consumer-instance
//! manager (`tidelog_broker::consumers`, which holds all the state and
//! rules; `Door::create_consumer`, `Door::subscribe`, ...). The manager
//! is this API's (started with the broker, with its settings); where its
//! calls run is the door's choice.
//!
//! * Bodies are `application/vnd.kafka.v2+json` or `application/json` (the
//!   embedded-format v2 types too, and a missing `Content-Type` is taken as
//!   JSON; anything else is 41501).
//!   Clients send `{}` even on GET and DELETE: an empty body and `{}` are
//!   both accepted wherever no body is needed. Body size limits are the
//!   router's (41301).
//! * A records call long-polls in the broker (`Door::poll_records`): when
//!   there are no records (or fewer bytes than `fetch.min.bytes`) it
//!   awaits the held partitions, the group (a rebalance), the deadline or
//!   shutdown, then tries again; the try after the deadline answers what
//!   there is. What an answer is (JSON within the answer budget) is ours
//!   (`RecordsCall`).
//! * `base_uri` is `<http.advertised_url>/consumers/{group}/instances/{i}`
//!   (default `http://<listen address>`).
//!
//! Decisions where API.md is silent: `max_bytes` is 1..=64 MiB (default 1
//! MiB) and `timeout` 0..=30000 ms, out of range 40002 as the stateless
//! fetch; a commit answers 200 with an empty body (Confluent's); GET
//! offsets lists only the partitions that have a committed offset; an
//! unknown field of the create body is 42204 (a misspelt setting would
//! otherwise be ignored), an unknown field of the other bodies 42206.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tidelog_broker::consumers::{
    Consumers, InstanceConfig, InstanceFormat, PolledRecords, SeekTo, Subscription,
    FETCH_BYTES_MAX_DEFAULT,
};
use tidelog_broker::coordinator::TopicPartition;
use tidelog_broker::door::consumers::{ConsumerInstance, RecordsAnswer};
use tidelog_broker::Door;

use super::{v2_bytes, v2_json};
use crate::answers;
use crate::budget::Reservation;
use crate::error::ApiError;
use crate::extract::{content_type, json_body, ApiPath, ApiQuery};
use crate::groups::{CommitValue, CommittedOffset, OffsetCommit};
use crate::metrics::GaugeGuard;
use crate::names;
use crate::records::V2_RESPONSE;
use crate::records::{media_type, write_record, EmbeddedFormat, RecordView, BINARY_V2, JSON_V2};
use crate::state::AppState;

/// What a path segment keeps as it is: RFC 3986's unreserved characters;
/// every other byte (`/`, `%`, space, non-ASCII) is percent-encoded.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The body, checked: its content type, and `None` when empty or `{}`.
fn body_of<'a>(headers: &HeaderMap, body: &'a Bytes) -> Result<Option<&'a [u8]>, ApiError> {
    if let Some(raw) = content_type(headers) {
        let media = media_type(raw);
        // The embedded-format types are JSON bodies too; some clients
        // send them on every call.
        if ![V2_RESPONSE, "application/json", JSON_V2, BINARY_V2].contains(&media.as_str()) {
            return Err(ApiError::UnsupportedContentType {
                message: format!(
                    "Content-Type {raw:?} is not supported here: use {V2_RESPONSE} or application/json"
                ),
            });
        }
    }
    let text = body.trim_ascii();
    if text.is_empty() {
        return Ok(None);
    }
    Ok(Some(text))
}

/// The body as `T`, `T::default()` when there is none.
fn decode<T: serde::de::DeserializeOwned + Default>(
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<T, ApiError> {
    match body_of(headers, body)? {
        None => Ok(T::default()),
        Some(bytes) => json_body(bytes),
    }
}

/// A call on `/consumers/{group}/instances/{instance}/...`: its path and
/// its body (checked by `InstanceCall::no_body` or decoded by
/// `InstanceCall::body`).
pub struct InstanceCall {
    path: (String, String),
    headers: HeaderMap,
    body: Bytes,
}

impl FromRequest<AppState> for InstanceCall {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        let (mut parts, body) = request.into_parts();
        let ApiPath(path) =
            ApiPath::<(String, String)>::from_request_parts(&mut parts, state).await?;
        let headers = parts.headers.clone();
        let body = Bytes::from_request(Request::from_parts(parts, body), state).await?;
        Ok(InstanceCall {
            path,
            headers,
            body,
        })
    }
}

impl InstanceCall {
    /// A route without a body: an empty one or `{}` (what clients send).
    fn no_body(&self) -> Result<(), ApiError> {
        body_of(&self.headers, &self.body).map(|_| ())
    }

    fn body<T: serde::de::DeserializeOwned + Default>(&self) -> Result<T, ApiError> {
        decode(&self.headers, &self.body)
    }
}

fn consumers(state: &AppState) -> Result<Arc<Consumers>, ApiError> {
    state.consumers()
}

/// The instance a `{group}/instances/{instance}` call is for, and the
/// door to call it through.
fn instance(
    state: &AppState,
    (group, instance): (String, String),
) -> Result<(Door, ConsumerInstance), ApiError> {
    names::validate_group_name(&group)?;
    let consumers = consumers(state)?;
    let door = state.door()?;
    Ok((
        door,
        ConsumerInstance {
            consumers,
            group,
            instance,
        },
    ))
}

#[derive(Debug, Serialize)]
struct Created {
    instance_id: String,
    base_uri: String,
}

/// `POST /consumers/{group}`
pub async fn create(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    names::validate_group_name(&group)?;
    let fields = match body_of(&headers, &body)? {
        None => serde_json::Map::new(),
        Some(bytes) => match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Object(map)) => map,
            Ok(_) => {
                return Err(ApiError::PayloadMalformed {
                    message: "request body: expected a JSON object".into(),
                })
            }
            Err(e) => {
                return Err(ApiError::PayloadMalformed {
                    message: format!("request body: {e}"),
                })
            }
        },
    };
    // Values as text (Confluent takes strings, Strimzi booleans and
    // numbers): the broker parses and checks them.
    let mut texts = Vec::with_capacity(fields.len());
    for (field, value) in &fields {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Bool(_) | Value::Number(_) => value.to_string(),
            _ => {
                return Err(ApiError::BadConsumerConfig {
                    message: format!(
                        "consumer config {field:?}: expected a string, number or boolean"
                    ),
                })
            }
        };
        texts.push((field.clone(), text));
    }
    let config = InstanceConfig::parse(texts.iter().map(|(f, v)| (f.as_str(), v.as_str())))?;
    let consumers = consumers(&state)?;
    let instance_id = state
        .door()?
        .create_consumer(&consumers, &group, config)
        .await?;
    // The group is any string Kafka takes: percent-encoded as a path
    // segment (the instance name is URL-safe as it is).
    let base_uri = format!(
        "{}/consumers/{}/instances/{instance_id}",
        state.settings().base_url.trim_end_matches('/'),
        utf8_percent_encode(&group, PATH_SEGMENT)
    );
    v2_json(
        StatusCode::OK,
        &Created {
            instance_id,
            base_uri,
        },
    )
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// `DELETE /consumers/{group}/instances/{instance}`
pub async fn delete(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    call.no_body()?;
    let (door, at) = instance(&state, call.path)?;
    door.delete_consumer(&at).await?;
    Ok(no_content())
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscribeBody {
    #[serde(default)]
    topics: Option<Vec<String>>,
    #[serde(default)]
    topic_pattern: Option<String>,
}

#[derive(Debug, Serialize)]
struct Topics {
    topics: Vec<String>,
}

/// `POST …/instances/{instance}/subscription`
pub async fn subscribe(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    let request: SubscribeBody = call.body()?;
    let subscription = match (request.topics, request.topic_pattern) {
        (Some(topics), None) => Subscription::Topics(topics),
        (None, Some(pattern)) => Subscription::Pattern(pattern),
        _ => {
            return Err(ApiError::BadConsumerConfig {
                message: "a subscription names either topics or a topic_pattern".into(),
            })
        }
    };
    let (door, at) = instance(&state, call.path)?;
    door.subscribe(&at, subscription).await?;
    Ok(no_content())
}

/// `GET …/instances/{instance}/subscription`
pub async fn subscription(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    call.no_body()?;
    let (door, at) = instance(&state, call.path)?;
    let topics = door.subscription(&at).await?;
    v2_json(StatusCode::OK, &Topics { topics })
}

/// `DELETE …/instances/{instance}/subscription`
pub async fn unsubscribe(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    call.no_body()?;
    let (door, at) = instance(&state, call.path)?;
    door.unsubscribe(&at).await?;
    Ok(no_content())
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PartitionJson {
    topic: String,
    partition: serde_json::Number,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionsBody {
    #[serde(default)]
    partitions: Vec<PartitionJson>,
}

#[derive(Debug, Serialize)]
struct PartitionsAnswer {
    partitions: Vec<PartitionOut>,
}

#[derive(Debug, Serialize)]
struct PartitionOut {
    topic: String,
    partition: u32,
}

fn partition_number(field: &str, n: &serde_json::Number) -> Result<u32, ApiError> {
    n.as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .ok_or_else(|| ApiError::BadRequest {
            message: format!("{field} {n} is not a partition number"),
        })
}

fn offset_number(field: &str, n: &serde_json::Number) -> Result<u64, ApiError> {
    n.as_u64()
        .filter(|o| *o <= names::OFFSET_MAX)
        .ok_or_else(|| ApiError::BadRequest {
            message: format!(
                "{field} {n} is not an integer in [0, {}]",
                names::OFFSET_MAX
            ),
        })
}

fn topic_partitions(list: Vec<PartitionJson>) -> Result<Vec<TopicPartition>, ApiError> {
    list.into_iter()
        .enumerate()
        .map(|(i, p)| {
            names::validate_topic_name(&p.topic)?;
            let partition = partition_number(&format!("partitions[{i}].partition"), &p.partition)?;
            Ok(TopicPartition {
                topic: p.topic,
                partition,
            })
        })
        .collect()
}

/// `POST …/instances/{instance}/assignments`
pub async fn assign(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    let request: PartitionsBody = call.body()?;
    let partitions = topic_partitions(request.partitions)?;
    let (door, at) = instance(&state, call.path)?;
    door.assign(&at, partitions).await?;
    Ok(no_content())
}

/// `GET …/instances/{instance}/assignments`
pub async fn assignments(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    call.no_body()?;
    let (door, at) = instance(&state, call.path)?;
    let held = door.assignments(&at).await?;
    let partitions = held
        .into_iter()
        .map(|tp| PartitionOut {
            topic: tp.topic,
            partition: tp.partition,
        })
        .collect();
    v2_json(StatusCode::OK, &PartitionsAnswer { partitions })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OffsetJson {
    topic: String,
    partition: serde_json::Number,
    offset: serde_json::Number,
    #[serde(default)]
    metadata: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OffsetsBody {
    #[serde(default)]
    offsets: Option<Vec<OffsetJson>>,
}

fn offset_commits(list: Vec<OffsetJson>) -> Result<Vec<OffsetCommit>, ApiError> {
    list.into_iter()
        .enumerate()
        .map(|(i, e)| {
            names::validate_topic_name(&e.topic)?;
            Ok(OffsetCommit {
                partition: partition_number(&format!("offsets[{i}].partition"), &e.partition)?,
                value: CommitValue {
                    offset: offset_number(&format!("offsets[{i}].offset"), &e.offset)?,
                    metadata: e.metadata.unwrap_or_default(),
                    ..Default::default()
                },
                topic: e.topic,
            })
        })
        .collect()
}

/// `POST …/instances/{instance}/offsets`: 200 (Confluent's answer).
pub async fn commit(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    let request: OffsetsBody = call.body()?;
    let max_entries = state.settings().max_records_per_request;
    let offsets = match request.offsets {
        Some(list) if list.len() > max_entries => {
            return Err(ApiError::BadRequest {
                message: format!(
                    "offsets has {} entries; at most {max_entries} are allowed in one commit (http.max_records_per_request)",
                    list.len()
                ),
            })
        }
        Some(list) => Some(offset_commits(list)?),
        None => None,
    };
    let (door, at) = instance(&state, call.path)?;
    door.commit_consumer(&at, offsets).await?;
    state
        .shared()
        .metrics
        .offset_commits
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(v2_bytes(StatusCode::OK, Vec::new()))
}

#[derive(Debug, Serialize)]
struct CommittedAnswer {
    offsets: Vec<CommittedOffset>,
}

/// `GET …/instances/{instance}/offsets` with `{"partitions":[...]}`
pub async fn committed(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    let request: PartitionsBody = call.body()?;
    let partitions = topic_partitions(request.partitions)?;
    let (door, at) = instance(&state, call.path)?;
    let offsets = door.consumer_committed(&at, partitions).await?;
    v2_json(StatusCode::OK, &CommittedAnswer { offsets })
}

/// `POST …/instances/{instance}/positions`
pub async fn seek(State(state): State<AppState>, call: InstanceCall) -> Result<Response, ApiError> {
    let request: OffsetsBody = call.body()?;
    let mut targets = Vec::new();
    for c in offset_commits(request.offsets.unwrap_or_default())? {
        targets.push((TopicPartition::new(&c.topic, c.partition), c.value.offset));
    }
    let (door, at) = instance(&state, call.path)?;
    door.seek(&at, targets).await?;
    Ok(no_content())
}

async fn seek_to(state: AppState, call: InstanceCall, to: SeekTo) -> Result<Response, ApiError> {
    let request: PartitionsBody = call.body()?;
    let partitions = topic_partitions(request.partitions)?;
    let (door, at) = instance(&state, call.path)?;
    door.seek_to(&at, partitions, to).await?;
    Ok(no_content())
}

/// `POST …/instances/{instance}/positions/beginning`
pub async fn seek_beginning(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    seek_to(state, call, SeekTo::Beginning).await
}

/// `POST …/instances/{instance}/positions/end`
pub async fn seek_end(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    seek_to(state, call, SeekTo::End).await
}

/// 406/40601 unless `Accept` allows the instance's format (its own media
/// type, the generic v2 one, `*/*`, or none at all).
fn check_accept(headers: &HeaderMap, format: InstanceFormat) -> Result<(), ApiError> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let own = match format {
        InstanceFormat::Binary => BINARY_V2,
        InstanceFormat::Json => JSON_V2,
    };
    let allowed = accept.split(',').map(media_type).any(|m| {
        m == own
            || m == V2_RESPONSE
            || m == "*/*"
            || m == "application/*"
            || (format == InstanceFormat::Json && m == "application/json")
    });
    if allowed {
        Ok(())
    } else {
        Err(ApiError::NotAcceptable {
            message: format!(
                "the consumer instance's format is {}, so Accept must allow {own} (got {accept:?})",
                format.name()
            ),
        })
    }
}

/// `GET …/instances/{instance}/records`
pub async fn records(
    State(state): State<AppState>,
    ApiPath((group, instance)): ApiPath<(String, String)>,
    query: ApiQuery,
    headers: HeaderMap,
) -> Response {
    let metrics = &state.shared().metrics.fetch;
    super::timed(
        metrics,
        records_inner(&state, group, instance, &query, &headers),
    )
    .await
}

async fn records_inner(
    state: &AppState,
    group: String,
    instance_name: String,
    query: &ApiQuery,
    headers: &HeaderMap,
) -> Result<(Response, u64, u64), ApiError> {
    let (door, at) = instance(state, (group, instance_name))?;
    let max_bytes = query.u64_in(
        "max_bytes",
        FETCH_BYTES_MAX_DEFAULT,
        1,
        tidelog_broker::consumers::config::FETCH_BYTES_MAX,
    )?;
    let max_bytes = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let config = door.consumer_config(&at).await?;
    check_accept(headers, config.format)?;
    let timeout_ms = query.u64_in(
        "timeout",
        config.request_timeout_ms,
        0,
        tidelog_broker::consumers::config::REQUEST_TIMEOUT_MS_MAX,
    )?;
    let format = match config.format {
        InstanceFormat::Binary => EmbeddedFormat::Binary,
        InstanceFormat::Json => EmbeddedFormat::Json,
    };
    let mut call = RecordsCall {
        state,
        format,
        max_bytes,
        waiting: None,
    };
    let timeout = Duration::from_millis(timeout_ms);
    let (body, held, records, bytes) = door
        .poll_records(&at, &mut call, timeout, state.shutdown_signal())
        .await?;
    let response = answers::answer_response(V2_RESPONSE, body, held);
    Ok((response, records, bytes))
}

/// A records call's answer: its JSON body, the answer budget's bytes it
/// holds, its record and payload byte counts.
type RecordsBody = (Vec<u8>, Reservation, u64, u64);

/// What a records call's answer is, for the broker's wait
/// (`Door::poll_records`).
struct RecordsCall<'a> {
    state: &'a AppState,
    format: EmbeddedFormat,
    /// The `max_bytes` asked.
    max_bytes: usize,
    /// Counts this call in `fetches_waiting` while it waits.
    waiting: Option<GaugeGuard<'a>>,
}

impl RecordsAnswer for RecordsCall<'_> {
    type Answer = RecordsBody;
    type Error = ApiError;

    fn max_bytes(&mut self) -> Result<usize, ApiError> {
        // Smaller while the answer budget is short (`crate::answers`).
        answers::payload_room(self.state, self.max_bytes)
    }

    fn render(
        &self,
    ) -> impl FnOnce(&[PolledRecords]) -> Result<RecordsBody, ApiError> + Send + 'static {
        let (state, format) = (self.state.clone(), self.format);
        // The answer's bytes are taken inside the render, so an answer
        // that does not fit consumes nothing.
        move |batches| {
            let (body, records, bytes) = render(format, batches)?;
            let held = answers::reserve_answer(&state, body.len())?;
            Ok((body, held, records, bytes))
        }
    }

    fn waiting(&mut self, waiting: bool) {
        self.waiting =
            waiting.then(|| GaugeGuard::new(&self.state.shared().metrics.fetches_waiting));
    }
}

/// The records of a records call as one JSON array; its record and
/// payload byte counts.
fn render(
    format: EmbeddedFormat,
    batches: &[PolledRecords],
) -> Result<(Vec<u8>, u64, u64), ApiError> {
    let mut body = vec![b'['];
    let (mut records, mut bytes) = (0u64, 0u64);
    for batch in batches {
        for r in batch.records.iter() {
            if records > 0 {
                body.push(b',');
            }
            let headers: Vec<(String, Option<Bytes>)> =
                r.headers().into_iter().map(|h| (h.name, h.value)).collect();
            let view = RecordView {
                topic: &batch.topic,
                partition: r.partition(),
                offset: r.offset(),
                timestamp_ms: r.timestamp_ms(),
                key: r.key(),
                value: r.value(),
                headers: &headers,
                physical_offset: None,
            };
            write_record(&mut body, format, &view)?;
            records += 1;
            bytes += r.payload_bytes();
        }
    }
    body.push(b']');
    Ok((body, records, bytes))
}
