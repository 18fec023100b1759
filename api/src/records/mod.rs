//! Record bodies: decoding produce requests and rendering fetched records.
//!
//! Two embedded formats, as in Confluent REST Proxy v2:
//!
//! * **json** (`application/vnd.kafka.json.v2+json` or `application/json`):
//!   key and value are any JSON value. They are stored as canonical text
//!   (`canonical_json.rs`): compact, object members sorted, numbers exactly
//!   as written. So `{"b":1,"a":2}` and `{ "a": 2, "b": 1 }` are the same
//!   key to the partitioner and to compaction, while `1e2` and `100`, or
//!   2^64 and 2^64 + 1, are not (a number's spelling is part of the key),
//!   and a fetch gives back the number text that was produced.
//! * **binary** (`application/vnd.kafka.binary.v2+json`): key and value are
//!   base64 strings (standard alphabet, padded) and stored as the decoded
//!   bytes.
//!
//! Header values are base64 in both formats (API.md). The format of a
//! produce request comes from `Content-Type`; the format of a fetch answer
//! from `Accept`.
//!
//! Decisions where API.md is silent, chosen so mistakes fail loudly:
//! * A missing `value` is 42202: API.md marks it required, and a tombstone is
//!   spelled `"value": null`.
//! * A record with a field other than `key`, `value`, `partition`, `headers`,
//!   `timestamp` is 42206, so a typo (`"valeu"`) is not a silent tombstone.
//!   Unknown fields at the top level (`key_schema_id` and friends that
//!   Confluent clients send) are ignored.
//! * In the binary format, a key or value that is not a string or null is
//!   42201/42202 (the key or value is wrong); a string that is not base64 is
//!   42206, as API.md lists bad base64 under payload malformed. The message
//!   names the field either way: `records[3].key: ...`.
//! * `partition` must be an integer in the `u32` range and `timestamp` an
//!   integer ≥ 0 (milliseconds since the epoch); anything else is 42206.
//!   Kafka reserves negative timestamps (−1 is "none"), so none are accepted.
//!   The timestamp rule is the broker's (`produce::check_timestamp_ms`),
//!   which Kafka's Produce applies too.
//! * A header needs a string `name` and a `value` that is a base64 string
//!   or null (a null header value, as Kafka's, stays null); a missing
//!   `value` is 42206.
//! * An empty `records` array is valid and produces nothing.
//! * A missing `Content-Type` is 41501 like any other unsupported type.
//! * `Accept` is read left to right and the first record format named wins
//!   (quality values are ignored); with none named, json.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ApiError;

mod canonical_json;
mod format;
mod json_fast;
mod json_write;

pub(crate) use format::media_type;
pub use format::{EmbeddedFormat, ProduceRecord, BINARY_V2, JSON_V2, V2_RESPONSE};
pub(crate) use json_write::produce_answer;

const RECORD_FIELDS: [&str; 5] = ["key", "value", "partition", "headers", "timestamp"];

/// Decodes a produce body in `format` (see the module doc for the rules).
/// The caller has already bounded the body's size.
pub fn decode_produce(format: EmbeddedFormat, body: &[u8]) -> Result<Vec<ProduceRecord>, ApiError> {
    // Plain, valid requests take the scanner of `json_fast`; it hands every
    // other body (errors included) to the general decoder below.
    match json_fast::decode_produce_fast(format, body) {
        Some(records) => Ok(records),
        None => decode_produce_general(format, body),
    }
}

/// The general decoder, through `serde_json::Value` trees: the reference for
/// every answer and message of [`decode_produce`].
pub(crate) fn decode_produce_general(
    format: EmbeddedFormat,
    body: &[u8],
) -> Result<Vec<ProduceRecord>, ApiError> {
    let root: Value =
        serde_json::from_slice(body).map_err(|e| malformed(format!("body is not JSON: {e}")))?;
    // json-format keys and values are stored from their text, which the
    // `Value` tree has lost (numbers became f64s): the same body as a tree
    // of canonical parts, navigated alongside. It picks the same members
    // as serde_json (names decoded, the last of a repeated name wins).
    let raw = match format {
        EmbeddedFormat::Json => Some(
            canonical_json::Node::parse(body)
                .map_err(|e| malformed(format!("body is not JSON: {e}")))?,
        ),
        EmbeddedFormat::Binary => None,
    };
    let raw_records = raw
        .as_ref()
        .and_then(|r| r.member("records"))
        .and_then(|r| r.items());
    let Value::Object(mut root) = root else {
        return Err(malformed(format!(
            "body must be a JSON object with a \"records\" array, not {}",
            kind(&root)
        )));
    };
    let records = match root.remove("records") {
        Some(Value::Array(records)) => records,
        Some(other) => {
            return Err(malformed(format!(
                "\"records\" must be an array, not {}",
                kind(&other)
            )))
        }
        None => return Err(malformed("body has no \"records\" array".into())),
    };
    records
        .into_iter()
        .enumerate()
        .map(|(index, record)| {
            let raw = raw_records.and_then(|r| r.get(index));
            decode_record(format, index, record, raw)
        })
        .collect()
}

/// `raw` is the record's canonical parts (json format only).
fn decode_record(
    format: EmbeddedFormat,
    index: usize,
    record: Value,
    raw: Option<&canonical_json::Node<'_>>,
) -> Result<ProduceRecord, ApiError> {
    let at = format!("records[{index}]");
    let Value::Object(mut fields) = record else {
        return Err(malformed(format!(
            "{at} must be an object, not {}",
            kind(&record)
        )));
    };
    if let Some(unknown) = fields.keys().find(|k| !RECORD_FIELDS.contains(&k.as_str())) {
        return Err(malformed(format!(
            "{at}: unknown field {unknown:?} (expected key, value, partition, headers, timestamp)"
        )));
    }

    let key = match fields.remove("key") {
        None | Some(Value::Null) => None,
        Some(key) => Some(embedded_bytes(
            format,
            &format!("{at}.key"),
            key,
            raw.and_then(|r| r.member("key")),
            |message| ApiError::KeyInvalid { message },
        )?),
    };
    let value = match fields.remove("value") {
        None => {
            return Err(ApiError::ValueInvalid {
                message: format!("{at}.value is missing (send \"value\": null for a tombstone)"),
            })
        }
        Some(Value::Null) => None,
        Some(value) => Some(embedded_bytes(
            format,
            &format!("{at}.value"),
            value,
            raw.and_then(|r| r.member("value")),
            |message| ApiError::ValueInvalid { message },
        )?),
    };
    let partition = match fields.remove("partition") {
        None | Some(Value::Null) => None,
        Some(p) => Some(
            p.as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| {
                    malformed(format!(
                        "{at}.partition must be an integer from 0 to {}, not {p}",
                        u32::MAX
                    ))
                })?,
        ),
    };
    let timestamp_ms = match fields.remove("timestamp") {
        None | Some(Value::Null) => None,
        // The broker's one timestamp rule (Kafka's Produce applies it too).
        Some(t) => Some(
            t.as_i64()
                .and_then(|t| tidelog_broker::produce::check_timestamp_ms(t).ok())
                .ok_or_else(|| {
                    malformed(format!(
                        "{at}.timestamp must be milliseconds since the epoch (an integer >= {}), not {t}",
                        tidelog_broker::produce::TIMESTAMP_MIN_MS
                    ))
                })?,
        ),
    };
    let headers = match fields.remove("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(headers)) => headers
            .into_iter()
            .enumerate()
            .map(|(h, header)| decode_header(&format!("{at}.headers[{h}]"), header))
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(malformed(format!(
                "{at}.headers must be an array, not {}",
                kind(&other)
            )))
        }
    };
    Ok(ProduceRecord {
        key,
        value,
        partition,
        headers,
        timestamp_ms,
    })
}

/// A non-null key or value as stored bytes: in the json format the
/// canonical text of `raw`, its parts. `invalid` builds the 42201 or 42202
/// error for a value of the wrong JSON type.
fn embedded_bytes(
    format: EmbeddedFormat,
    at: &str,
    value: Value,
    raw: Option<&canonical_json::Node<'_>>,
    invalid: impl FnOnce(String) -> ApiError,
) -> Result<Bytes, ApiError> {
    match format {
        EmbeddedFormat::Json => {
            let raw = raw.ok_or_else(|| ApiError::Internal {
                message: format!("{at}: the canonical parts of the body do not hold it"),
            })?;
            let mut text = Vec::new();
            raw.write(&mut text);
            Ok(Bytes::from(text))
        }
        EmbeddedFormat::Binary => match value {
            Value::String(text) => decode_base64(at, &text),
            other => Err(invalid(format!(
                "{at} must be a base64 string or null in the binary format, not {}",
                kind(&other)
            ))),
        },
    }
}

fn decode_header(at: &str, header: Value) -> Result<(String, Option<Bytes>), ApiError> {
    let Value::Object(mut fields) = header else {
        return Err(malformed(format!(
            "{at} must be an object {{\"name\",\"value\"}}, not {}",
            kind(&header)
        )));
    };
    if let Some(unknown) = fields.keys().find(|k| *k != "name" && *k != "value") {
        return Err(malformed(format!(
            "{at}: unknown field {unknown:?} (expected name, value)"
        )));
    }
    let name = match fields.remove("name") {
        Some(Value::String(name)) => name,
        other => {
            return Err(malformed(format!(
                "{at}.name must be a string, not {}",
                other.as_ref().map_or("missing", kind)
            )))
        }
    };
    let value = match fields.remove("value") {
        Some(Value::String(value)) => Some(decode_base64(&format!("{at}.value"), &value)?),
        Some(Value::Null) => None,
        other => {
            return Err(malformed(format!(
                "{at}.value must be a base64 string or null, not {}",
                other.as_ref().map_or("missing", kind)
            )))
        }
    };
    Ok((name, value))
}

fn decode_base64(at: &str, text: &str) -> Result<Bytes, ApiError> {
    BASE64.decode(text).map(Bytes::from).map_err(|e| {
        malformed(format!(
            "{at} is not valid base64 (standard alphabet, padded): {e}"
        ))
    })
}

fn malformed(message: String) -> ApiError {
    ApiError::PayloadMalformed { message }
}

/// The JSON type of `value`, for messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The `key` query parameter of the query-by-key endpoint as stored key
/// bytes: JSON text in the json format (canonical like a produced key, so
/// `{"b":1, "a":2}` finds `{"a":2,"b":1}` and `1e2` does not find `100`),
/// base64 in the binary format.
pub fn decode_key_query(format: EmbeddedFormat, text: &str) -> Result<Bytes, ApiError> {
    let bad = |why: String| ApiError::BadRequest {
        message: format!("query parameter key: {why}"),
    };
    match format {
        EmbeddedFormat::Json => match canonical_json::canonicalize(text.as_bytes()) {
            Ok(key) if key == b"null" => Err(bad(
                "null is not a key (keyless records cannot be looked up)".into(),
            )),
            Ok(key) => Ok(Bytes::from(key)),
            Err(e) => Err(bad(format!(
                "{text:?} is not JSON text (a string key needs its quotes, e.g. \"user-1\"): {e}"
            ))),
        },
        EmbeddedFormat::Binary => BASE64
            .decode(text)
            .map(Bytes::from)
            .map_err(|e| bad(format!("{text:?} is not valid base64: {e}"))),
    }
}

/// Which half of a record is being rendered, for 42203 messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordField {
    Key,
    Value,
}

/// Stored key or value bytes as the JSON value of a fetch answer: parsed
/// JSON in the json format (42203 if the bytes are not JSON, e.g. produced
/// in binary), a base64 string in the binary format, `null` for none.
/// Through `serde_json::Value`, so numbers become f64s: the reference
/// shape for the tests of [`write_record`], which answers use.
#[cfg(test)]
pub(crate) fn render_embedded(
    format: EmbeddedFormat,
    field: RecordField,
    bytes: Option<&[u8]>,
) -> Result<Value, ApiError> {
    let Some(bytes) = bytes else {
        return Ok(Value::Null);
    };
    match format {
        EmbeddedFormat::Binary => Ok(Value::String(BASE64.encode(bytes))),
        EmbeddedFormat::Json => serde_json::from_slice(bytes).map_err(|e| not_json(field, &e)),
    }
}

/// One entry of a produce answer's `offsets`, in record order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionOffset {
    pub partition: u32,
    pub offset: u64,
    /// Always null: a request is validated whole, so per-record errors do not
    /// occur. Present because Confluent clients read it.
    pub error_code: Option<u32>,
    pub error: Option<String>,
}

impl PartitionOffset {
    pub fn new(partition: u32, offset: u64) -> Self {
        PartitionOffset {
            partition,
            offset,
            error_code: None,
            error: None,
        }
    }
}

/// The answer to a produce request (API.md), schema ids always null.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceResponse {
    pub offsets: Vec<PartitionOffset>,
    pub key_schema_id: Option<u32>,
    pub value_schema_id: Option<u32>,
}

impl ProduceResponse {
    pub fn new(offsets: Vec<PartitionOffset>) -> Self {
        ProduceResponse {
            offsets,
            key_schema_id: None,
            value_schema_id: None,
        }
    }
}

/// The answer of `GET /topics/{topic}/partitions/{p}/offsets`.
/// `end_offset` is the offset the next record will get; `offset`, only
/// with `?timestamp=`, the first whose record timestamp is at least it
/// (`end_offset` if none is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionOffsets {
    pub beginning_offset: u64,
    pub end_offset: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

/// A header as it travels in JSON: `{"name","value":b64}`, or
/// `"value": null` for a null value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderJson {
    pub name: String,
    pub value: Option<String>,
}

/// One record of a fetch or query answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FetchedRecord {
    pub topic: String,
    pub key: Value,
    pub value: Value,
    pub partition: u32,
    pub offset: u64,
    pub timestamp: i64,
    pub headers: Vec<HeaderJson>,
    /// Only on the ext endpoints (query by key, read by physical offset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub physical_offset: Option<u64>,
}

/// A stored record, borrowed, as the renderer needs it. Storage's own types
/// convert into this, which keeps this crate's encoding independent of them.
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    pub topic: &'a str,
    pub partition: u32,
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// `None` values are null header values.
    pub headers: &'a [(String, Option<Bytes>)],
    pub physical_offset: Option<u64>,
}

/// Renders a stored record in `format`. A 42203 names the record's offset,
/// so a client can skip it or refetch in binary. Numbers become f64s (see
/// [`render_embedded`]): test reference only.
#[cfg(test)]
pub(crate) fn render_record(
    format: EmbeddedFormat,
    record: &RecordView<'_>,
) -> Result<FetchedRecord, ApiError> {
    let with_position = |e: ApiError| match e {
        ApiError::JsonConversion { message } => ApiError::JsonConversion {
            message: format!(
                "record at offset {} of {}/{}: {message}",
                record.offset, record.topic, record.partition
            ),
        },
        other => other,
    };
    Ok(FetchedRecord {
        topic: record.topic.to_string(),
        key: render_embedded(format, RecordField::Key, record.key).map_err(with_position)?,
        value: render_embedded(format, RecordField::Value, record.value).map_err(with_position)?,
        partition: record.partition,
        offset: record.offset,
        timestamp: record.timestamp_ms,
        headers: record
            .headers
            .iter()
            .map(|(name, value)| HeaderJson {
                name: name.clone(),
                value: value.as_ref().map(|v| BASE64.encode(v)),
            })
            .collect(),
        physical_offset: record.physical_offset,
    })
}

/// Appends `record` in `format` to `out` as JSON, in the shape of
/// [`FetchedRecord`]. Key and value bytes that are already canonical JSON
/// (json format) and base64 (binary format, headers) are copied without an
/// escaping pass; other JSON is canonicalised, so numbers keep their text.
/// On a 42203, `out` holds a partial record: discard it.
pub fn write_record(
    out: &mut Vec<u8>,
    format: EmbeddedFormat,
    record: &RecordView<'_>,
) -> Result<(), ApiError> {
    use json_write::{push_base64_str, push_i64, push_json_str, push_u64};
    out.extend_from_slice(b"{\"topic\":");
    push_json_str(out, record.topic);
    out.extend_from_slice(b",\"key\":");
    write_embedded(out, format, RecordField::Key, record)?;
    out.extend_from_slice(b",\"value\":");
    write_embedded(out, format, RecordField::Value, record)?;
    out.extend_from_slice(b",\"partition\":");
    push_u64(out, u64::from(record.partition));
    out.extend_from_slice(b",\"offset\":");
    push_u64(out, record.offset);
    out.extend_from_slice(b",\"timestamp\":");
    push_i64(out, record.timestamp_ms);
    out.extend_from_slice(b",\"headers\":[");
    for (i, (name, value)) in record.headers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"name\":");
        push_json_str(out, name);
        out.extend_from_slice(b",\"value\":");
        match value {
            Some(value) => push_base64_str(out, value),
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
    }
    out.push(b']');
    if let Some(physical) = record.physical_offset {
        out.extend_from_slice(b",\"physical_offset\":");
        push_u64(out, physical);
    }
    out.push(b'}');
    Ok(())
}

fn write_embedded(
    out: &mut Vec<u8>,
    format: EmbeddedFormat,
    field: RecordField,
    record: &RecordView<'_>,
) -> Result<(), ApiError> {
    let bytes = match field {
        RecordField::Key => record.key,
        RecordField::Value => record.value,
    };
    match (format, bytes) {
        (_, None) => out.extend_from_slice(b"null"),
        (EmbeddedFormat::Binary, Some(bytes)) => json_write::push_base64_str(out, bytes),
        (EmbeddedFormat::Json, Some(bytes)) if json_fast::is_canonical_json(bytes) => {
            out.extend_from_slice(bytes)
        }
        (EmbeddedFormat::Json, Some(bytes)) => {
            let text = canonical_json::canonicalize(bytes)
                .map_err(|e| with_position(record, not_json(field, &e)))?;
            out.extend_from_slice(&text);
        }
    }
    Ok(())
}

/// The 42203 of stored bytes that are not JSON.
fn not_json(field: RecordField, e: &dyn std::fmt::Display) -> ApiError {
    let field = match field {
        RecordField::Key => "key",
        RecordField::Value => "value",
    };
    ApiError::JsonConversion {
        message: format!("stored {field} is not valid JSON ({e}); fetch with Accept: {BINARY_V2}"),
    }
}

/// Names the record in a 42203, so a client can skip it or refetch in
/// binary.
fn with_position(record: &RecordView<'_>, e: ApiError) -> ApiError {
    match e {
        ApiError::JsonConversion { message } => ApiError::JsonConversion {
            message: format!(
                "record at offset {} of {}/{}: {message}",
                record.offset, record.topic, record.partition
            ),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests;
