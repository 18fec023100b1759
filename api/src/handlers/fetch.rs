//! Reads: partition fetch with long-poll, partition offsets, query by key
//! (ext) and read by physical offset (ext).
//!
//! Where records live is the broker's business (`broker/src/read.rs`):
//! this file parses the request, runs the long-poll loop and renders.
//!
//! Long-poll: a fetch that finds nothing at or after `offset` waits in
//! the broker's one long-poll (`Door::long_poll`, the one Kafka's Fetch
//! waits in): read-your-writes first, then the partition's listener, the
//! deadline or server shutdown, whichever comes first. No polling loop:
//! the dispatcher wakes the fetch. This file makes one read
//! (`HttpRound`) and renders it.
//!
//! Compact topics (`cleanup.policy` with `compact`) answer the records with
//! offset ≥ max(requested, base offset) that survived cleaning (gaps are
//! normal), rendered exactly like CommitLog records; `offsets` answers the
//! compacted log's beginning and end; query by key scans the compacted
//! logs. Every read respects the topic's base offsets: records of an
//! earlier topic of the same name are never served.
//!
//! Decisions where API.md is silent:
//! * `max_records` is 1..=10000, `max_bytes` 1..=64 MiB, `timeout` 0..=30000
//!   (0: answer at once); out of range is 40002, not clamped, so a client
//!   learns its request was not what it meant.
//! * `offsets?timestamp=` takes a decimal i64 (negative allowed: producers
//!   may send any timestamp) and answers `offset` beside the usual two
//!   fields; an absent `timestamp` leaves the answer as it was.
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

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use tidelog_broker::long_poll::{FetchRound, Round};
use tidelog_broker::read::{PartitionRef, RecordRef};

use super::{bytes_with, timed, v2_json};
use crate::answers;
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery};
use crate::metrics::GaugeGuard;
use crate::names;
use crate::records::{
    decode_key_query, write_record, EmbeddedFormat, FetchedRecord, PartitionOffsets, RecordView,
    V2_RESPONSE,
};
use crate::state::AppState;

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
    let committed = match query.get("isolation_level") {
        None | Some("read_uncommitted") => false,
        Some("read_committed") => true,
        Some(other) => {
            return Err(ApiError::BadRequest {
                message: format!(
                    "isolation_level must be read_uncommitted (the default) or read_committed, got {other:?}"
                ),
            })
        }
    };
    let format = EmbeddedFormat::from_accept(accept(headers));
    let door = state.door()?;
    let part = door.partition(topic, partition)?;
    let limits = ReadLimits {
        max_records: usize::try_from(max_records).unwrap_or(usize::MAX),
        max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
        format,
        committed,
    };

    let mut round = HttpRound {
        state,
        part,
        from: offset,
        limits,
        waiting: None,
    };
    let answer = door
        .long_poll(
            &mut round,
            Duration::from_millis(timeout_ms),
            state.shutdown_signal(),
        )
        .await?;
    match answer {
        Some(found) => Ok(found),
        None => Ok((v2_json(StatusCode::OK, &Vec::<FetchedRecord>::new())?, 0, 0)),
    }
}

/// One read of a fetch, rendered: the answer when it found records, else
/// where to listen from.
struct HttpRound<'a> {
    state: &'a AppState,
    part: PartitionRef,
    /// Where the next read starts.
    from: u64,
    limits: ReadLimits,
    /// Counts this fetch in `fetches_waiting` while it waits.
    waiting: Option<GaugeGuard<'a>>,
}

/// A fetch's answer with its records and payload bytes; `None`: nothing.
type FetchAnswer = Result<Option<(Response, u64, u64)>, ApiError>;

impl FetchRound for HttpRound<'_> {
    type Answer = FetchAnswer;

    async fn read(&mut self) -> Round<FetchAnswer> {
        let found = async {
            // Smaller while the answer budget is short (`crate::answers`).
            let limits = ReadLimits {
                max_bytes: answers::payload_room(self.state, self.limits.max_bytes)?,
                ..self.limits
            };
            read_rendered(&self.part, self.from, limits).await
        };
        let (rendered, listen_from) = match found.await {
            Ok(rendered) => rendered,
            Err(e) => return Round::Done(Err(e)),
        };
        if let Some(body) = rendered.body {
            return Round::Done(
                answers::held_answer(self.state, V2_RESPONSE, body)
                    .map(|response| Some((response, rendered.records, rendered.bytes))),
            );
        }
        self.from = self.from.max(rendered.next_offset);
        Round::Short {
            answer: Ok(None),
            listen: vec![(self.part.clone(), listen_from.max(self.from))],
        }
    }

    fn waiting(&mut self, waiting: bool) {
        self.waiting =
            waiting.then(|| GaugeGuard::new(&self.state.shared().metrics.fetches_waiting));
    }
}

/// What one read of a fetch may return, and how it is rendered.
#[derive(Clone, Copy)]
struct ReadLimits {
    max_records: usize,
    max_bytes: usize,
    format: EmbeddedFormat,
    /// `isolation_level=read_committed`: up to the last stable offset,
    /// without the records of aborted transactions.
    committed: bool,
}

/// Reads (where the read runs is the broker's: `PartitionRef::read_async`
/// reads the mapped page cache on this worker, a compacted log's cold
/// `pread`s on the blocking pool, the remote tier over the network) and
/// renders here: plain CPU work, shorter than a hand-off to the blocking
/// pool and back (the profile in docs/BENCHMARKS.md).
/// Also answers where a wait for more listens from: the read's own start,
/// or at read_committed the end before the read (where a marker that
/// moves the last stable offset lands).
async fn read_rendered(
    part: &PartitionRef,
    from: u64,
    limits: ReadLimits,
) -> Result<(Rendered, u64), ApiError> {
    let (read, listen_from) = if limits.committed {
        part.read_committed_async(from, limits.max_records, limits.max_bytes)
            .await?
    } else {
        let read = part
            .read_async(from, limits.max_records, limits.max_bytes)
            .await?;
        (read, from)
    };
    Ok((render(part, read, limits)?, listen_from))
}

fn render(
    part: &PartitionRef,
    read: tidelog_broker::read::ReadBatch,
    limits: ReadLimits,
) -> Result<Rendered, ApiError> {
    if read.records.is_empty() {
        return Ok(Rendered {
            body: None,
            next_offset: read.next_offset,
            records: 0,
            bytes: 0,
        });
    }
    let format = limits.format;
    let bytes = read.records.iter().map(|r| r.payload_bytes()).sum();
    let mut body = Vec::with_capacity(answer_capacity(format, read.records.len(), bytes));
    body.push(b'[');
    // Every record read is the asked topic's (`Store::read` checks each
    // one's topic), so its name is the one the fetch asked for.
    let topic = &*part.topic().name;
    for (i, r) in read.records.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        write_record(&mut body, format, &Parts::new(topic, r).view(false))?;
    }
    body.push(b']');
    Ok(Rendered {
        body: Some(body),
        next_offset: read.next_offset,
        records: read.records.len() as u64,
        bytes,
    })
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
    headers: Vec<(String, Option<bytes::Bytes>)>,
    physical_offset: u64,
}

impl<'a> Parts<'a> {
    /// `topic` is the record's (the caller knows it without decoding).
    fn new(topic: &'a str, r: RecordRef<'a>) -> Self {
        Parts {
            topic,
            partition: r.partition(),
            offset: r.offset(),
            timestamp_ms: r.timestamp_ms(),
            key: r.key(),
            value: r.value(),
            headers: r.headers().into_iter().map(|h| (h.name, h.value)).collect(),
            physical_offset: r.physical_offset(),
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

/// `GET /topics/{topic}/partitions/{p}/offsets[?timestamp=ms]`: with
/// `timestamp`, also the first offset whose record timestamp is at least it
/// (the broker's time lookup, which reads records: on a blocking thread).
pub async fn offsets(
    State(state): State<AppState>,
    ApiPath((topic, partition)): ApiPath<(String, String)>,
    query: ApiQuery,
) -> Result<Response, ApiError> {
    names::validate_topic_name(&topic)?;
    let partition = names::parse_partition(&partition)?;
    let timestamp_ms = query.i64_opt("timestamp")?;
    // The end answered includes every record acknowledged before this
    // request (read-your-writes, `tidelog_broker::visibility`): the door
    // waits for them.
    let door = state.door()?;
    let offsets = door.offsets(&topic, partition, timestamp_ms).await?;
    v2_json(
        StatusCode::OK,
        &PartitionOffsets {
            beginning_offset: offsets.beginning,
            end_offset: offsets.end,
            offset: offsets.at_timestamp,
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
    // Every record acknowledged before this request is found: the door
    // waits until the IndexFile (or the compacted log) has it
    // (read-your-writes, `tidelog_broker::visibility`), as for every other
    // read.
    let door = state.door()?;
    let (topic, found) = door
        .query_by_key(
            &topic,
            key.to_vec(),
            begin as i64,
            end as i64,
            usize::try_from(max).unwrap_or(usize::MAX),
        )
        .await?;
    // The store confirms the exact topic of every record it finds.
    let body = render_array(format, found.iter().map(|r| Parts::new(&topic.name, r)))?;
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
    let found = state.door()?.read_physical(position).await?;
    let record = found.ok_or_else(|| ApiError::NotFound {
        message: format!("no record of a live topic starts at physical offset {position}"),
    })?;
    let mut body = Vec::new();
    write_record(
        &mut body,
        format,
        &Parts::new(record.topic(), record.record()).view(true),
    )?;
    Ok(bytes_with(StatusCode::OK, "application/json", body))
}
