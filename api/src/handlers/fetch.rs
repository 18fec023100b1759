//! Reads: partition fetch with long-poll, partition offsets, query by key
//! (ext) and read by physical offset (ext).
//!
//! Long-poll: a fetch that finds nothing at or after `offset` registers a
//! listener on the partition's ConsumeQueue, re-checks the end offset (a
//! record dispatched between the read and the registration is caught here),
//! then awaits the listener, the deadline or server shutdown, whichever
//! comes first. No polling loop: the dispatcher wakes the fetch.
//!
//! Compact topics (`cleanup.policy` with `compact`) are read from their
//! compacted logs, not the ConsumeQueue: fetch returns the records with
//! offset ≥ max(requested, base offset) that survived cleaning (gaps are
//! normal), rendered exactly like CommitLog records; `offsets` answers the
//! compacted log's beginning and end; query by key scans the compacted
//! logs. A compact fetch long-polls on the compacted log's own listener and
//! re-checks its end offset: the dispatcher appends the compacted copy after
//! the ConsumeQueue unit, so the queue's listener could fire before the copy
//! is readable.
//!
//! Every read respects the topic's base offsets (see `registry.rs`): records
//! of an earlier topic of the same name are never served.
//!
//! Decisions where API.md is silent:
//! * `max_records` is 1..=10000, `max_bytes` 1..=64 MiB, `timeout` 0..=30000
//!   (0: answer at once); out of range is 40002, not clamped, so a client
//!   learns its request was not what it meant.
//! * Query by key renders in the format of its `format` parameter (the one
//!   that also decodes `key`); timestamps filter on the store's append time,
//!   which is what the IndexFile records; `max_records` is 1..=1000.
//! * Query by key on a compact topic scans every partition's compacted log
//!   (no index): linear in the compacted logs' size, which cleaning keeps
//!   near one record per key. Newest first means latest appended first
//!   (highest CommitLog position). `physical_offset` is where the record
//!   was in the CommitLog; after CommitLog retention, reading it there
//!   answers 404.
//! * Read by physical offset renders by `Accept` like fetch, and answers
//!   404/40400 for an offset where no record of a live topic starts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use tidelog_broker::read::KeyRecords;
use tidelog_cleaner::{CompactedLog, CompactedRecord};
use tidelog_storage::StoredRecord;

use super::{blocking, bytes_with, timed, v2_json};
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery};
use crate::metrics::GaugeGuard;
use crate::names;
use crate::records::{
    decode_key_query, write_record, EmbeddedFormat, FetchedRecord, PartitionOffsets, RecordView,
    V2_RESPONSE,
};
use crate::registry::Topic;
use crate::state::{AppState, Broker};

pub const FETCH_MAX_RECORDS_DEFAULT: u64 = 500;
pub const FETCH_MAX_RECORDS_MAX: u64 = 10_000;
pub const FETCH_MAX_BYTES_DEFAULT: u64 = 1 << 20;
pub const FETCH_MAX_BYTES_MAX: u64 = 64 << 20;
pub const FETCH_TIMEOUT_MS_DEFAULT: u64 = 1000;
pub const FETCH_TIMEOUT_MS_MAX: u64 = 30_000;
pub const QUERY_MAX_RECORDS_DEFAULT: u64 = 32;
pub const QUERY_MAX_RECORDS_MAX: u64 = 1000;

/// `GET /topics/{topic}/partitions/{p}/records`
pub async fn fetch(
    State(state): State<AppState>,
    ApiPath((topic, partition)): ApiPath<(String, String)>,
    query: ApiQuery,
    headers: HeaderMap,
) -> Response {
    let metrics = &state.shared().metrics.fetch;
    timed(
        metrics,
        fetch_inner(&state, &topic, &partition, &query, &headers),
    )
    .await
}

/// One read, rendered: the encoded answer (`None` if there were no
/// records), where the next read starts, records and payload bytes.
struct Rendered {
    body: Option<Vec<u8>>,
    next_offset: u64,
    records: u64,
    bytes: u64,
}

async fn fetch_inner(
    state: &AppState,
    topic: &str,
    partition: &str,
    query: &ApiQuery,
    headers: &HeaderMap,
) -> Result<(Response, u64, u64), ApiError> {
    names::validate_topic_name(topic)?;
    let partition = names::parse_partition(partition)?;
    let offset = match query.get("offset") {
        Some(text) => names::parse_offset(text)?,
        None => {
            return Err(ApiError::BadRequest {
                message: "query parameter offset is required (a decimal integer >= 0)".into(),
            })
        }
    };
    let max_records = query.u64_in(
        "max_records",
        FETCH_MAX_RECORDS_DEFAULT,
        1,
        FETCH_MAX_RECORDS_MAX,
    )?;
    let max_bytes = query.u64_in("max_bytes", FETCH_MAX_BYTES_DEFAULT, 1, FETCH_MAX_BYTES_MAX)?;
    let timeout_ms = query.u64_in("timeout", FETCH_TIMEOUT_MS_DEFAULT, 0, FETCH_TIMEOUT_MS_MAX)?;
    let format = EmbeddedFormat::from_accept(accept(headers));
    let ready = state.ready()?;
    let topic = ready.registry.require(topic)?;
    topic.check_partition(partition)?;

    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let mut shutdown = state.shutdown_signal();
    let mut from = offset.max(topic.base_offset(partition));
    // Compact topics are read from their compacted log, others through the
    // ConsumeQueue; the long-poll is the same for both.
    let source = if topic.config.cleanup_policy.compacts() {
        // `log_or_create`, so there is a listener to wait on before the
        // partition's first record.
        let (ready, name) = (Arc::clone(&ready), Arc::clone(&topic.name));
        Source::Compacted(blocking(move || Ok(ready.logs.log_or_create(&name, partition)?)).await?)
    } else {
        Source::Queue
    };
    loop {
        let rendered = match &source {
            Source::Queue => {
                read_rendered(
                    &ready,
                    &topic,
                    partition,
                    from,
                    max_records,
                    max_bytes,
                    format,
                )
                .await?
            }
            Source::Compacted(log) => {
                read_compacted_rendered(
                    log,
                    &topic,
                    partition,
                    from,
                    max_records,
                    max_bytes,
                    format,
                )
                .await?
            }
        };
        if let Some(body) = rendered.body {
            let response = bytes_with(StatusCode::OK, V2_RESPONSE, body);
            return Ok((response, rendered.records, rendered.bytes));
        }
        from = from.max(rendered.next_offset);
        if Instant::now() >= deadline || *shutdown.borrow() {
            break;
        }
        // Register first, then re-check: a record added in between either
        // shows in the re-check or fires the listener. A compacted copy is
        // appended after the queue unit, so compact topics wait on their
        // compacted log's own listener.
        let (listener, end) = match &source {
            Source::Queue => (
                ready.store.listen(&topic.name, partition)?,
                ready.store.offsets(&topic.name, partition).1,
            ),
            Source::Compacted(log) => (log.listen(), log.next_offset()),
        };
        if end > from {
            continue;
        }
        let _waiting = GaugeGuard::new(&state.shared().metrics.fetches_waiting);
        tokio::select! {
            _ = listener => {}
            _ = tokio::time::sleep_until(deadline.into()) => break,
            _ = shutdown.wait_for(|stopping| *stopping) => break,
        }
    }
    Ok((v2_json(StatusCode::OK, &Vec::<FetchedRecord>::new())?, 0, 0))
}

/// Where a fetch reads a partition from.
enum Source {
    /// The ConsumeQueue and CommitLog (delete topics).
    Queue,
    /// The partition's compacted log (compact topics).
    Compacted(Arc<CompactedLog>),
}

/// Reads and renders on the calling worker: records come from the page
/// cache through the map and rendering is plain CPU work, both shorter than
/// a hand-off to the blocking pool and back (the profile in
/// docs/BENCHMARKS.md). A read of cold pages can stall this worker for a
/// disk read; the other workers keep serving meanwhile.
async fn read_rendered(
    ready: &Arc<Broker>,
    topic: &Arc<Topic>,
    partition: u32,
    from: u64,
    max_records: u64,
    max_bytes: u64,
    format: EmbeddedFormat,
) -> Result<Rendered, ApiError> {
    let read = ready.store.read(
        &topic.name,
        partition,
        tidelog_storage::QueueOffset::new(from),
        usize::try_from(max_records).unwrap_or(usize::MAX),
        usize::try_from(max_bytes).unwrap_or(usize::MAX),
    )?;
    if read.records.is_empty() {
        return Ok(Rendered {
            body: None,
            next_offset: read.next_offset.get(),
            records: 0,
            bytes: 0,
        });
    }
    let bytes = read.records.iter().map(payload_bytes).sum();
    let mut body = Vec::with_capacity(answer_capacity(format, read.records.len(), bytes));
    body.push(b'[');
    for (i, r) in read.records.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        write_stored(&mut body, format, &topic.name, r)?;
    }
    body.push(b']');
    Ok(Rendered {
        body: Some(body),
        next_offset: read.next_offset.get(),
        records: read.records.len() as u64,
        bytes,
    })
}

/// As [`read_rendered`], from a compact topic's compacted log. With
/// nothing at or after `from`, `next_offset` is the log's end as it was
/// before the read: nothing lies in `[from, end)` then, and every later
/// record gets an offset ≥ end.
async fn read_compacted_rendered(
    log: &Arc<CompactedLog>,
    topic: &Arc<Topic>,
    partition: u32,
    from: u64,
    max_records: u64,
    max_bytes: u64,
    format: EmbeddedFormat,
) -> Result<Rendered, ApiError> {
    let log = Arc::clone(log);
    let topic = Arc::clone(topic);
    blocking(move || {
        let end = log.next_offset();
        let records = log.read(
            from,
            usize::try_from(max_records).unwrap_or(usize::MAX),
            usize::try_from(max_bytes).unwrap_or(usize::MAX),
        )?;
        let Some(last) = records.last() else {
            return Ok(Rendered {
                body: None,
                next_offset: end,
                records: 0,
                bytes: 0,
            });
        };
        let next_offset = last.offset.get() + 1;
        let bytes = records.iter().map(compacted_payload_bytes).sum();
        let mut body = Vec::with_capacity(answer_capacity(format, records.len(), bytes));
        body.push(b'[');
        for (i, r) in records.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            write_record(
                &mut body,
                format,
                &Parts::compacted(&topic.name, partition, r).view(false),
            )?;
        }
        body.push(b']');
        Ok(Rendered {
            body: Some(body),
            next_offset,
            records: records.len() as u64,
            bytes,
        })
    })
    .await
}

/// Key, value and header bytes, as a produce counts them.
fn compacted_payload_bytes(r: &CompactedRecord) -> u64 {
    r.key_slice().map_or(0, |k| k.len() as u64)
        + r.value_slice().map_or(0, |v| v.len() as u64)
        + r.headers_len() as u64
}

/// A JSON array of `records` in `format`, each with its physical offset
/// (the ext routes' shape).
fn render_array<'a>(
    format: EmbeddedFormat,
    records: impl Iterator<Item = Parts<'a>>,
) -> Result<Vec<u8>, ApiError> {
    let mut out = vec![b'['];
    for (i, parts) in records.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_record(&mut out, format, &parts.view(true))?;
    }
    out.push(b']');
    Ok(out)
}

/// A first guess at a fetch answer's size: base64 takes 4/3 of the
/// payload, and each record's fields and topic about 128 bytes.
fn answer_capacity(format: EmbeddedFormat, records: usize, payload: u64) -> usize {
    let payload = usize::try_from(payload).unwrap_or(usize::MAX);
    let payload = match format {
        EmbeddedFormat::Binary => payload / 3 * 4 + records * 8,
        EmbeddedFormat::Json => payload,
    };
    payload.saturating_add(records * 128).saturating_add(2)
}

/// A stored record of a fetch answer, appended to `out` (no physical
/// offset): the bytes [`render`] would give, without the intermediate
/// record.
/// `topic` is the one asked for: `Store::read` returns only its records.
fn write_stored(
    out: &mut Vec<u8>,
    format: EmbeddedFormat,
    topic: &str,
    r: &StoredRecord,
) -> Result<(), ApiError> {
    write_record(out, format, &Parts::stored(topic, r).view(false))
}

/// Key, value and header bytes, as a produce counts them.
fn payload_bytes(r: &StoredRecord) -> u64 {
    r.key_slice().map_or(0, |k| k.len() as u64)
        + r.value_slice().map_or(0, |v| v.len() as u64)
        + r.headers_len() as u64
}

/// What an answer shows of a record, from either log: the parts a
/// [`RecordView`] borrows. Key and value are borrowed from the record:
/// taking a reference count on its bytes per field per record showed up
/// in the fetch profile.
struct Parts<'a> {
    topic: &'a str,
    partition: u32,
    offset: u64,
    timestamp_ms: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: Vec<(String, bytes::Bytes)>,
    physical_offset: u64,
}

impl<'a> Parts<'a> {
    /// `topic` is the record's (the caller may know it without decoding).
    fn stored(topic: &'a str, r: &'a StoredRecord) -> Self {
        Parts {
            topic,
            partition: r.partition(),
            offset: r.queue_offset().get(),
            timestamp_ms: r.timestamp_ms(),
            key: r.key_slice(),
            value: r.value_slice(),
            headers: r.headers().into_iter().map(|h| (h.name, h.value)).collect(),
            physical_offset: r.physical_offset().get(),
        }
    }

    fn compacted(topic: &'a str, partition: u32, r: &'a CompactedRecord) -> Self {
        Parts {
            topic,
            partition,
            offset: r.offset.get(),
            timestamp_ms: r.timestamp_ms,
            key: r.key_slice(),
            value: r.value_slice(),
            headers: r.headers().into_iter().map(|h| (h.name, h.value)).collect(),
            physical_offset: r.physical_offset.get(),
        }
    }

    fn view(&self, with_physical_offset: bool) -> RecordView<'_> {
        RecordView {
            topic: self.topic,
            partition: self.partition,
            offset: self.offset,
            timestamp_ms: self.timestamp_ms,
            key: self.key,
            value: self.value,
            headers: &self.headers,
            physical_offset: with_physical_offset.then_some(self.physical_offset),
        }
    }
}

fn accept(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())
}

/// `GET /topics/{topic}/partitions/{p}/offsets`
pub async fn offsets(
    State(state): State<AppState>,
    ApiPath((topic, partition)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    names::validate_topic_name(&topic)?;
    let partition = names::parse_partition(&partition)?;
    let ready = state.ready()?;
    let topic = ready.registry.require(&topic)?;
    topic.check_partition(partition)?;
    let (beginning, end) = ready.offsets(&topic, partition);
    v2_json(
        StatusCode::OK,
        &PartitionOffsets {
            beginning_offset: beginning,
            end_offset: end,
        },
    )
}

/// `GET /topics/{topic}/records?key=...` (ext)
pub async fn query_by_key(
    State(state): State<AppState>,
    ApiPath(topic): ApiPath<String>,
    query: ApiQuery,
) -> Result<Response, ApiError> {
    names::validate_topic_name(&topic)?;
    let format = EmbeddedFormat::from_query(query.get("format"))?;
    let Some(key_text) = query.get("key") else {
        return Err(ApiError::BadRequest {
            message: "query parameter key is required (JSON text, or base64 with format=binary)"
                .into(),
        });
    };
    let key = decode_key_query(format, key_text)?;
    let ts_max = i64::MAX as u64;
    let begin = query.u64_in("begin_timestamp", 0, 0, ts_max)?;
    let end = query.u64_in("end_timestamp", ts_max, 0, ts_max)?;
    if begin > end {
        return Err(ApiError::BadRequest {
            message: format!("begin_timestamp {begin} is after end_timestamp {end}"),
        });
    }
    let max = query.u64_in(
        "max_records",
        QUERY_MAX_RECORDS_DEFAULT,
        1,
        QUERY_MAX_RECORDS_MAX,
    )?;
    let ready = state.ready()?;
    let topic = ready.registry.require(&topic)?;
    let body = blocking(move || {
        let found = ready.query_by_key(
            &topic,
            &key,
            begin as i64,
            end as i64,
            usize::try_from(max).unwrap_or(usize::MAX),
        )?;
        match &found {
            KeyRecords::Stored(records) => {
                render_array(format, records.iter().map(|r| Parts::stored(r.topic(), r)))
            }
            KeyRecords::Compacted(records) => render_array(
                format,
                records
                    .iter()
                    .map(|(p, r)| Parts::compacted(&topic.name, *p, r)),
            ),
        }
    })
    .await?;
    Ok(bytes_with(StatusCode::OK, "application/json", body))
}

/// `GET /commitlog/{physical_offset}` (ext)
pub async fn read_physical(
    State(state): State<AppState>,
    ApiPath(position): ApiPath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let position = names::parse_offset(&position).map_err(|_| ApiError::BadRequest {
        message: format!(
            "physical offset {position:?} is not a decimal integer in [0, {}]",
            names::OFFSET_MAX
        ),
    })?;
    let format = EmbeddedFormat::from_accept(accept(&headers));
    let ready = state.ready()?;
    let found = blocking(move || Ok(ready.read_physical(position)?)).await?;
    let record = found.ok_or_else(|| ApiError::NotFound {
        message: format!("no record of a live topic starts at physical offset {position}"),
    })?;
    let mut body = Vec::new();
    write_record(
        &mut body,
        format,
        &Parts::stored(record.topic(), &record).view(true),
    )?;
    Ok(bytes_with(StatusCode::OK, "application/json", body))
}
