//! API.md's "Consumer instances" (Confluent REST Proxy v2): every route
//! parses here and calls the broker's consumer-instance manager
//! (`tidelog_broker::consumers`), which holds all the state and rules.
//!
//! * Bodies are `application/vnd.kafka.v2+json` or `application/json` (the
//!   embedded-format v2 types too, and a missing `Content-Type` is taken as
//!   JSON; anything else is 41501).
//!   Clients send `{}` even on GET and DELETE: an empty body and `{}` are
//!   both accepted wherever no body is needed. Body size limits are the
//!   router's (41301).
//! * A records call long-polls: it asks the manager for records and, when
//!   there are none (or fewer bytes than `fetch.min.bytes`), awaits the
//!   listeners it answers (the held partitions', and the group's, which
//!   fires on a rebalance), the deadline or shutdown, then asks again; the
//!   try after the deadline answers what there is. No polling loop.
//! * `base_uri` is `<http.advertised_url>/consumers/{group}/instances/{i}`
//!   (default `http://<listen address>`).
//!
//! Decisions where API.md is silent: `max_bytes` is 1..=64 MiB (default 1
//! MiB) and `timeout` 0..=30000 ms, out of range 40002 as the stateless
//! fetch; a commit answers 200 with an empty body (Confluent's); GET
//! offsets lists only the partitions that have a committed offset; an
//! unknown field of the create body is 42204 (a misspelt setting would
//! otherwise be ignored), an unknown field of the other bodies 42206.

use std::future::Future;
use std::time::{Duration, Instant};

use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tidelog_broker::consumers::{
    Consumers, InstanceConfig, InstanceFormat, Poll, PolledRecords, SeekTo, Subscription,
    FETCH_BYTES_MAX_DEFAULT,
};
use tidelog_broker::coordinator::TopicPartition;

use super::{blocking, v2_bytes, v2_json};
use crate::answers;
use crate::error::ApiError;
use crate::extract::{content_type, json_body, ApiPath, ApiQuery};
use crate::groups::{CommitValue, CommittedOffset, OffsetCommit};
use crate::metrics::GaugeGuard;
use crate::names;
use crate::records::V2_RESPONSE;
use crate::records::{media_type, write_record, EmbeddedFormat, RecordView, BINARY_V2, JSON_V2};
use crate::state::AppState;

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
/// its body (checked by [`InstanceCall::no_body`] or decoded by
/// [`InstanceCall::body`]).
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

fn consumers(state: &AppState) -> Result<std::sync::Arc<Consumers>, ApiError> {
    state.consumers()
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
    let g = group.clone();
    let instance_id = blocking(move || Ok(consumers.create(&g, config)?)).await?;
    let base_uri = format!(
        "{}/consumers/{group}/instances/{instance_id}",
        state.settings().base_url.trim_end_matches('/')
    );
    v2_json(
        StatusCode::OK,
        &Created {
            instance_id,
            base_uri,
        },
    )
}

/// Runs a manager call for `{group}/instances/{instance}` on the blocking
/// pool (commits append; reads of compacted partitions `pread`).
async fn on_instance<T: Send + 'static>(
    state: &AppState,
    (group, instance): (String, String),
    f: impl FnOnce(&Consumers, &str, &str) -> Result<T, tidelog_broker::BrokerError> + Send + 'static,
) -> Result<T, ApiError> {
    names::validate_group_name(&group)?;
    let consumers = consumers(state)?;
    blocking(move || Ok(f(&consumers, &group, &instance)?)).await
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
    on_instance(&state, call.path, |c, g, i| c.delete(g, i)).await?;
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
    on_instance(&state, call.path, move |c, g, i| {
        c.subscribe(g, i, subscription)
    })
    .await?;
    Ok(no_content())
}

/// `GET …/instances/{instance}/subscription`
pub async fn subscription(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    call.no_body()?;
    let topics = on_instance(&state, call.path, |c, g, i| c.subscription(g, i)).await?;
    v2_json(StatusCode::OK, &Topics { topics })
}

/// `DELETE …/instances/{instance}/subscription`
pub async fn unsubscribe(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    call.no_body()?;
    on_instance(&state, call.path, |c, g, i| c.unsubscribe(g, i)).await?;
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
    on_instance(&state, call.path, move |c, g, i| c.assign(g, i, partitions)).await?;
    Ok(no_content())
}

/// `GET …/instances/{instance}/assignments`
pub async fn assignments(
    State(state): State<AppState>,
    call: InstanceCall,
) -> Result<Response, ApiError> {
    call.no_body()?;
    let held = on_instance(&state, call.path, |c, g, i| c.assignments(g, i)).await?;
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
    on_instance(&state, call.path, move |c, g, i| c.commit(g, i, offsets)).await?;
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
    let offsets = on_instance(&state, call.path, move |c, g, i| {
        c.committed(g, i, partitions)
    })
    .await?;
    v2_json(StatusCode::OK, &CommittedAnswer { offsets })
}

/// `POST …/instances/{instance}/positions`
pub async fn seek(State(state): State<AppState>, call: InstanceCall) -> Result<Response, ApiError> {
    let request: OffsetsBody = call.body()?;
    let mut targets = Vec::new();
    for c in offset_commits(request.offsets.unwrap_or_default())? {
        targets.push((TopicPartition::new(&c.topic, c.partition), c.value.offset));
    }
    on_instance(&state, call.path, move |c, g, i| c.seek(g, i, targets)).await?;
    Ok(no_content())
}

async fn seek_to(state: AppState, call: InstanceCall, to: SeekTo) -> Result<Response, ApiError> {
    let request: PartitionsBody = call.body()?;
    let partitions = topic_partitions(request.partitions)?;
    on_instance(&state, call.path, move |c, g, i| {
        c.seek_to(g, i, partitions, to)
    })
    .await?;
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
    instance: String,
    query: &ApiQuery,
    headers: &HeaderMap,
) -> Result<(Response, u64, u64), ApiError> {
    names::validate_group_name(&group)?;
    let consumers = consumers(state)?;
    let max_bytes = query.u64_in(
        "max_bytes",
        FETCH_BYTES_MAX_DEFAULT,
        1,
        tidelog_broker::consumers::config::FETCH_BYTES_MAX,
    )?;
    let max_bytes = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let config = {
        let (c, g, i) = (consumers.clone(), group.clone(), instance.clone());
        blocking(move || Ok(c.instance_config(&g, &i)?)).await?
    };
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
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let mut shutdown = state.shutdown_signal();
    // What this call must see: every record acknowledged before it began
    // (read-your-writes, `tidelog_broker::visibility`), also with
    // timeout 0: until then no try is the last.
    let ready = state.ready()?;
    let acknowledged = ready.acknowledged();
    let mut acknowledged = (!ready.is_visible(acknowledged)).then_some(acknowledged);
    loop {
        let last = acknowledged.is_none() && (Instant::now() >= deadline || *shutdown.borrow());
        let (c, g, i) = (consumers.clone(), group.clone(), instance.clone());
        // Smaller while the answer budget is short; the answer's bytes
        // are taken inside the render, so an answer that does not fit
        // consumes nothing (`crate::answers`).
        let max_bytes = answers::payload_room(state, max_bytes)?;
        let held_state = state.clone();
        let polled = blocking(move || {
            c.poll(&g, &i, max_bytes, last, |batches| {
                let (body, records, bytes) = render(format, batches)?;
                let held = answers::reserve_answer(&held_state, body.len())?;
                Ok((body, held, records, bytes))
            })
        })
        .await?;
        let mut listeners = match polled {
            Poll::Records((body, held, records, bytes)) => {
                let response = answers::answer_response(V2_RESPONSE, body, held);
                return Ok((response, records, bytes));
            }
            Poll::Wait(listeners) => listeners,
        };
        if let Some(point) = acknowledged.take() {
            tokio::select! {
                _ = super::until_visible(&ready, point) => {}
                _ = shutdown.wait_for(|stopping| *stopping) => {}
            }
            continue;
        }
        let _waiting = GaugeGuard::new(&state.shared().metrics.fetches_waiting);
        // Any of the listeners (each registered every waker before
        // returning Pending, so none is missed).
        let any = std::future::poll_fn(|cx| {
            let mut ready = false;
            for l in listeners.iter_mut() {
                ready |= std::pin::Pin::new(l).poll(cx).is_ready();
            }
            if ready {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        });
        tokio::select! {
            _ = any => {}
            _ = tokio::time::sleep_until(deadline.into()) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => {}
        }
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
