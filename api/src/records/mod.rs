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
mod tests {
    use super::*;
    use serde_json::{json, Map};

    const JSON: EmbeddedFormat = EmbeddedFormat::Json;
    const BINARY: EmbeddedFormat = EmbeddedFormat::Binary;

    fn decode(format: EmbeddedFormat, body: Value) -> Result<Vec<ProduceRecord>, ApiError> {
        decode_produce(format, body.to_string().as_bytes())
    }

    fn code_and_message(result: Result<Vec<ProduceRecord>, ApiError>) -> (u32, String) {
        let err = result.unwrap_err();
        (err.error_code(), err.to_string())
    }

    #[test]
    fn direct_integers_match_serde() {
        for n in [0u64, 9, 10, 99, 12_345, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            json_write::push_u64(&mut out, n);
            assert_eq!(out, serde_json::to_vec(&n).unwrap());
        }
        for n in [0i64, -1, 1_700_000_000_000, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            json_write::push_i64(&mut out, n);
            assert_eq!(out, serde_json::to_vec(&n).unwrap());
        }
    }

    #[test]
    fn direct_produce_answer_matches_serde() {
        let cases: [&[(u32, u64)]; 4] = [
            &[],
            &[(0, 0)],
            &[(3, 17), (0, 18), (7, 9_999_999)],
            &[(u32::MAX, u64::MAX), (0, 1 << 40)],
        ];
        for offsets in cases {
            let direct = json_write::produce_answer(offsets.iter().copied());
            let serde = serde_json::to_vec(&ProduceResponse::new(
                offsets
                    .iter()
                    .map(|&(p, o)| PartitionOffset::new(p, o))
                    .collect(),
            ))
            .unwrap();
            assert_eq!(
                String::from_utf8(direct).unwrap(),
                String::from_utf8(serde).unwrap()
            );
        }
    }

    #[test]
    fn content_types_pick_the_format() {
        let cases = [
            (JSON_V2, JSON),
            ("application/json", JSON),
            (BINARY_V2, BINARY),
            ("application/vnd.kafka.json.v2+json; charset=utf-8", JSON),
            ("application/json;charset=UTF-8", JSON),
            (
                "Application/Vnd.Kafka.Binary.V2+Json ; charset=utf-8",
                BINARY,
            ),
            (" application/json ", JSON),
        ];
        for (ct, format) in cases {
            assert_eq!(
                EmbeddedFormat::from_content_type(Some(ct)).unwrap(),
                format,
                "{ct}"
            );
        }
    }

    #[test]
    fn other_content_types_are_41501() {
        for ct in [
            "text/plain",
            "application/vnd.kafka.avro.v2+json",
            "application/vnd.kafka.v2+json",
            "application/x-www-form-urlencoded",
            "",
            "application/jsonx",
        ] {
            let err = EmbeddedFormat::from_content_type(Some(ct)).unwrap_err();
            assert_eq!(err.error_code(), 41501, "{ct}");
            assert!(err.to_string().contains(&format!("{ct:?}")), "{err}");
        }
        let err = EmbeddedFormat::from_content_type(None).unwrap_err();
        assert_eq!(err.error_code(), 41501);
        assert!(err.to_string().contains("missing Content-Type"));
    }

    #[test]
    fn accept_picks_the_fetch_format() {
        assert_eq!(EmbeddedFormat::from_accept(None), JSON);
        assert_eq!(EmbeddedFormat::from_accept(Some("*/*")), JSON);
        assert_eq!(EmbeddedFormat::from_accept(Some("application/json")), JSON);
        assert_eq!(EmbeddedFormat::from_accept(Some(JSON_V2)), JSON);
        assert_eq!(EmbeddedFormat::from_accept(Some(BINARY_V2)), BINARY);
        assert_eq!(
            EmbeddedFormat::from_accept(Some("application/vnd.kafka.binary.v2+json; q=0.9")),
            BINARY
        );
        assert_eq!(
            EmbeddedFormat::from_accept(Some(
                "text/html, application/vnd.kafka.binary.v2+json, */*"
            )),
            BINARY
        );
        assert_eq!(
            EmbeddedFormat::from_accept(Some("*/*, application/vnd.kafka.binary.v2+json")),
            JSON,
            "first named format wins"
        );
        assert_eq!(EmbeddedFormat::from_accept(Some("text/html")), JSON);
    }

    #[test]
    fn format_query_parameter() {
        assert_eq!(EmbeddedFormat::from_query(None).unwrap(), JSON);
        assert_eq!(EmbeddedFormat::from_query(Some("json")).unwrap(), JSON);
        assert_eq!(EmbeddedFormat::from_query(Some("binary")).unwrap(), BINARY);
        assert_eq!(
            EmbeddedFormat::from_query(Some("avro"))
                .unwrap_err()
                .error_code(),
            40002
        );
    }

    #[test]
    fn json_format_stores_compact_sorted_json() {
        let records = decode(
            JSON,
            json!({"records": [
                {"key": {"b": 1, "a": [true, null, {"z": 0, "y": "s"}]}, "value": "hello"},
                {"value": 12.5},
                {"key": "k", "value": {"nested": {"d": 1, "c": 2}}, "partition": 3, "timestamp": 1700000000000u64},
            ]}),
        )
        .unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(
            records[0].key.as_deref(),
            Some(&br#"{"a":[true,null,{"y":"s","z":0}],"b":1}"#[..])
        );
        assert_eq!(records[0].value.as_deref(), Some(&br#""hello""#[..]));
        assert_eq!(records[0].partition, None);
        assert_eq!(records[1].key, None);
        assert_eq!(records[1].value.as_deref(), Some(&b"12.5"[..]));
        assert_eq!(records[2].key.as_deref(), Some(&br#""k""#[..]));
        assert_eq!(
            records[2].value.as_deref(),
            Some(&br#"{"nested":{"c":2,"d":1}}"#[..])
        );
        assert_eq!(records[2].partition, Some(3));
        assert_eq!(records[2].timestamp_ms, Some(1_700_000_000_000));
    }

    #[test]
    fn json_numbers_keep_their_text_in_both_decoders() {
        let cases = [
            ("18446744073709551616", "18446744073709551616"),
            ("18446744073709551617", "18446744073709551617"),
            ("-0", "-0"),
            ("1e2", "1e2"),
            ("100", "100"),
            ("1.50", "1.50"),
            (
                r#"{"z": 1E+2, "a": [-0.0, 18446744073709551617]}"#,
                r#"{"a":[-0.0,18446744073709551617],"z":1E+2}"#,
            ),
        ];
        for (key, stored) in cases {
            // The fast path, and the general one (a repeated `records`
            // member sends a body there; the last one wins).
            for body in [
                format!(r#"{{"records":[{{"key":{key},"value":{key}}}]}}"#),
                format!(r#"{{"records":[],"records":[{{"key":{key},"value":{key}}}]}}"#),
                format!(r#"{{"records":[{{"k\u0065y":{key},"value":{key}}}]}}"#),
            ] {
                let records = decode_produce(JSON, body.as_bytes()).unwrap();
                assert_eq!(records[0].key.as_deref(), Some(stored.as_bytes()), "{body}");
                assert_eq!(
                    records[0].value.as_deref(),
                    Some(stored.as_bytes()),
                    "{body}"
                );
            }
            assert_eq!(decode_key_query(JSON, key).unwrap(), stored.as_bytes());
        }
        assert_ne!(
            decode_key_query(JSON, "18446744073709551616").unwrap(),
            decode_key_query(JSON, "18446744073709551617").unwrap()
        );
        assert_ne!(
            decode_key_query(JSON, "1e2").unwrap(),
            decode_key_query(JSON, "100").unwrap()
        );
        // Beyond an f64 is refused, as serde_json does.
        for key in ["1e400", "-1e309"] {
            let body = format!(r#"{{"records":[{{"key":{key},"value":1}}]}}"#);
            assert_eq!(
                decode_produce(JSON, body.as_bytes())
                    .unwrap_err()
                    .error_code(),
                42206
            );
            assert_eq!(decode_key_query(JSON, key).unwrap_err().error_code(), 40002);
        }
    }

    #[test]
    fn equal_json_keys_are_equal_bytes_whatever_the_spelling() {
        // Raw bodies, so member order and whitespace really differ on the wire.
        let a = decode_produce(JSON, br#"{"records":[{"key":{"b":1,"a":2},"value":1}]}"#).unwrap();
        let b = decode_produce(
            JSON,
            br#"{"records":[{"key": { "a" : 2 ,
            "b": 1 }, "value": 1}]}"#,
        )
        .unwrap();
        assert_eq!(a[0].key, b[0].key);
        assert_eq!(a[0].key.as_deref(), Some(&br#"{"a":2,"b":1}"#[..]));
        // Guards the assumption that serde_json's Map is sorted (no
        // `preserve_order` feature unified in by another crate).
        let map: Map<String, Value> = serde_json::from_str(r#"{"z":1,"a":2}"#).unwrap();
        assert_eq!(map.keys().collect::<Vec<_>>(), ["a", "z"]);
    }

    #[test]
    fn null_value_is_a_tombstone_and_null_key_is_keyless() {
        for format in [JSON, BINARY] {
            let records =
                decode(format, json!({"records": [{"key": null, "value": null}]})).unwrap();
            assert_eq!(records[0].key, None);
            assert_eq!(records[0].value, None);
        }
        let records = decode(BINARY, json!({"records": [{"key": "a2V5", "value": null}]})).unwrap();
        assert_eq!(records[0].key.as_deref(), Some(&b"key"[..]));
        assert_eq!(records[0].value, None);
    }

    #[test]
    fn missing_value_is_42202_not_a_silent_tombstone() {
        let (code, message) = code_and_message(decode(
            JSON,
            json!({"records": [{"value": 1}, {"key": "k"}]}),
        ));
        assert_eq!(code, 42202);
        assert!(message.contains("records[1].value is missing"), "{message}");
    }

    #[test]
    fn binary_format_decodes_base64() {
        let records = decode(
            BINARY,
            json!({"records": [{"key": "AAEC/w==", "value": "aGVsbG8=", "headers": [
                {"name": "trace", "value": "AQ=="}, {"name": "trace", "value": null},
                {"name": "trace", "value": ""}
            ]}]}),
        )
        .unwrap();
        assert_eq!(records[0].key.as_deref(), Some(&[0u8, 1, 2, 255][..]));
        assert_eq!(records[0].value.as_deref(), Some(&b"hello"[..]));
        // A null header value stays null, apart from an empty one.
        assert_eq!(
            records[0].headers,
            vec![
                ("trace".to_string(), Some(Bytes::from_static(&[1]))),
                ("trace".to_string(), None),
                ("trace".to_string(), Some(Bytes::new())),
            ]
        );
    }

    #[test]
    fn bad_base64_is_42206_naming_the_field() {
        let cases = [
            (
                json!({"key": "not base64!", "value": "aGk="}),
                "records[0].key",
            ),
            (json!({"value": "aGk"}), "records[0].value"),
            (
                json!({"value": "aGk=", "headers": [{"name": "h", "value": "%%"}]}),
                "records[0].headers[0].value",
            ),
        ];
        for (record, field) in cases {
            let (code, message) = code_and_message(decode(BINARY, json!({"records": [record]})));
            assert_eq!(code, 42206, "{message}");
            assert!(
                message.starts_with(&format!("{field} is not valid base64")),
                "{message}"
            );
        }
    }

    #[test]
    fn binary_key_or_value_of_wrong_type_is_42201_or_42202() {
        let (code, message) = code_and_message(decode(
            BINARY,
            json!({"records": [{"key": 5, "value": "aGk="}]}),
        ));
        assert_eq!(code, 42201);
        assert!(
            message.contains("records[0].key must be a base64 string"),
            "{message}"
        );
        let (code, message) =
            code_and_message(decode(BINARY, json!({"records": [{"value": {"a": 1}}]})));
        assert_eq!(code, 42202);
        assert!(
            message.contains("records[0].value must be a base64 string"),
            "{message}"
        );
    }

    #[test]
    fn headers_are_decoded_in_order_in_the_json_format_too() {
        let records = decode(
            JSON,
            json!({"records": [{"value": 1, "headers": [{"name": "b", "value": "Yg=="}, {"name": "a", "value": "YQ=="}]}]}),
        )
        .unwrap();
        let names: Vec<&str> = records[0].headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(records[0].headers[1].1, Some(Bytes::from_static(b"a")));
    }

    #[test]
    fn malformed_bodies_are_42206() {
        let cases: [(&[u8], &str); 9] = [
            (b"", "not JSON"),
            (b"{\"records\": [", "not JSON"),
            (b"\xff\xfe", "not JSON"),
            (b"[]", "must be a JSON object"),
            (b"{}", "no \"records\""),
            (b"{\"records\": {}}", "must be an array, not an object"),
            (b"{\"records\": null}", "must be an array, not null"),
            (b"{\"records\": [1]}", "records[0] must be an object"),
            (
                b"{\"records\": [{\"value\": 1, \"valeu\": 2}]}",
                "unknown field \"valeu\"",
            ),
        ];
        for (body, expected) in cases {
            for format in [JSON, BINARY] {
                let err = decode_produce(format, body).unwrap_err();
                assert_eq!(err.error_code(), 42206, "{body:?}");
                assert!(err.to_string().contains(expected), "{body:?}: {err}");
            }
        }
    }

    #[test]
    fn deeply_nested_json_is_rejected_not_a_stack_overflow() {
        let body = format!(
            "{{\"records\":[{{\"value\":{}1{}}}]}}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert_eq!(
            decode_produce(JSON, body.as_bytes())
                .unwrap_err()
                .error_code(),
            42206
        );
    }

    #[test]
    fn bad_partition_timestamp_and_headers_are_42206() {
        let cases = [
            (json!({"value": 1, "partition": -1}), "records[0].partition"),
            (
                json!({"value": 1, "partition": "0"}),
                "records[0].partition",
            ),
            (
                json!({"value": 1, "partition": 1.5}),
                "records[0].partition",
            ),
            (
                json!({"value": 1, "partition": 4294967296u64}),
                "records[0].partition",
            ),
            (json!({"value": 1, "timestamp": -1}), "records[0].timestamp"),
            (
                json!({"value": 1, "timestamp": "now"}),
                "records[0].timestamp",
            ),
            (
                json!({"value": 1, "headers": {"a": "b"}}),
                "records[0].headers must be an array",
            ),
            (
                json!({"value": 1, "headers": ["h"]}),
                "records[0].headers[0] must be an object",
            ),
            (
                json!({"value": 1, "headers": [{"value": "YQ=="}]}),
                "records[0].headers[0].name",
            ),
            (
                json!({"value": 1, "headers": [{"name": "h"}]}),
                "records[0].headers[0].value",
            ),
            (
                json!({"value": 1, "headers": [{"name": "h", "value": 1}]}),
                "records[0].headers[0].value must be a base64 string or null",
            ),
            (
                json!({"value": 1, "headers": [{"name": "h", "value": "", "x": 1}]}),
                "unknown field \"x\"",
            ),
        ];
        for (record, expected) in cases {
            let (code, message) = code_and_message(decode(JSON, json!({"records": [record]})));
            assert_eq!(code, 42206, "{message}");
            assert!(message.contains(expected), "{expected}: {message}");
        }
    }

    #[test]
    fn empty_records_and_extra_top_level_fields_are_accepted() {
        assert!(decode(JSON, json!({"records": []})).unwrap().is_empty());
        let records = decode(
            BINARY,
            json!({"key_schema_id": null, "records": [{"value": "eA=="}]}),
        )
        .unwrap();
        assert_eq!(records[0].value.as_deref(), Some(&b"x"[..]));
    }

    #[test]
    fn render_json_and_binary() {
        let stored_key = br#"{"a":1}"#;
        assert_eq!(
            render_embedded(JSON, RecordField::Key, Some(stored_key)).unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            render_embedded(BINARY, RecordField::Key, Some(stored_key)).unwrap(),
            json!(BASE64.encode(stored_key))
        );
        for format in [JSON, BINARY] {
            assert_eq!(
                render_embedded(format, RecordField::Value, None).unwrap(),
                Value::Null
            );
        }
        let err = render_embedded(JSON, RecordField::Value, Some(&[0xff, 0x00])).unwrap_err();
        assert_eq!(err.error_code(), 42203);
        assert!(
            err.to_string().contains("stored value is not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn produce_then_render_round_trips_in_both_formats() {
        let json_records = decode(
            JSON,
            json!({"records": [{"key": {"id": 7}, "value": [1, "two"], "headers": [{"name": "h", "value": "AAE="}]}]}),
        )
        .unwrap();
        let binary_records = decode(
            BINARY,
            json!({"records": [{"key": "AP8=", "value": "aGk="}]}),
        )
        .unwrap();
        for (format, record, key, value) in [
            (JSON, &json_records[0], json!({"id": 7}), json!([1, "two"])),
            (BINARY, &binary_records[0], json!("AP8="), json!("aGk=")),
        ] {
            let view = RecordView {
                topic: "t",
                partition: 2,
                offset: 41,
                timestamp_ms: 5,
                key: record.key.as_deref(),
                value: record.value.as_deref(),
                headers: &record.headers,
                physical_offset: None,
            };
            let rendered = serde_json::to_value(render_record(format, &view).unwrap()).unwrap();
            let headers: Vec<Value> = record
                .headers
                .iter()
                .map(|(n, v)| json!({"name": n, "value": v.as_ref().map(|v| BASE64.encode(v))}))
                .collect();
            assert_eq!(
                rendered,
                json!({"topic": "t", "key": key, "value": value, "partition": 2, "offset": 41, "timestamp": 5, "headers": headers})
            );
        }
    }

    #[test]
    fn render_record_names_the_offset_on_42203_and_shows_physical_offset() {
        let view = RecordView {
            topic: "t",
            partition: 1,
            offset: 9,
            timestamp_ms: 0,
            key: Some(b"raw bytes"),
            value: None,
            headers: &[],
            physical_offset: Some(4096),
        };
        let err = render_record(JSON, &view).unwrap_err();
        assert_eq!(err.error_code(), 42203);
        assert!(
            err.to_string()
                .starts_with("record at offset 9 of t/1: stored key"),
            "{err}"
        );
        let rendered = serde_json::to_value(render_record(BINARY, &view).unwrap()).unwrap();
        assert_eq!(rendered["physical_offset"], 4096);
        assert_eq!(rendered["value"], Value::Null);
    }

    #[test]
    fn key_query_matches_produced_key_bytes() {
        let produced = decode(
            JSON,
            json!({"records": [{"key": {"b": 1, "a": "x"}, "value": 1}]}),
        )
        .unwrap();
        let queried = decode_key_query(JSON, r#"{ "a": "x", "b": 1 }"#).unwrap();
        assert_eq!(produced[0].key.as_ref(), Some(&queried));
        assert_eq!(
            decode_key_query(BINARY, "AP8=").unwrap(),
            Bytes::from_static(&[0, 255])
        );
        assert_eq!(
            decode_key_query(JSON, "user-1").unwrap_err().error_code(),
            40002
        );
        assert_eq!(
            decode_key_query(JSON, "null").unwrap_err().error_code(),
            40002
        );
        assert_eq!(
            decode_key_query(BINARY, "@@").unwrap_err().error_code(),
            40002
        );
    }

    #[test]
    fn response_shapes_match_api_md() {
        let response =
            ProduceResponse::new(vec![PartitionOffset::new(0, 7), PartitionOffset::new(3, 0)]);
        assert_eq!(
            serde_json::to_value(&response).unwrap(),
            json!({
                "offsets": [
                    {"partition": 0, "offset": 7, "error_code": null, "error": null},
                    {"partition": 3, "offset": 0, "error_code": null, "error": null},
                ],
                "key_schema_id": null,
                "value_schema_id": null,
            })
        );
        assert_eq!(
            serde_json::to_value(PartitionOffsets {
                beginning_offset: 3,
                end_offset: 10,
                offset: None,
            })
            .unwrap(),
            json!({"beginning_offset": 3, "end_offset": 10})
        );
        assert_eq!(
            serde_json::to_value(PartitionOffsets {
                beginning_offset: 3,
                end_offset: 10,
                offset: Some(7),
            })
            .unwrap(),
            json!({"beginning_offset": 3, "end_offset": 10, "offset": 7})
        );
    }
    // ---- fast paths against the general ones (json_fast.rs) ----

    /// Stored key/value texts: canonical and not, valid and not.
    fn json_samples() -> Vec<Vec<u8>> {
        let mut samples: Vec<Vec<u8>> = [
            "null",
            "true",
            "false",
            "0",
            "-0",
            "7",
            "-7",
            "123456789012345678",
            "1234567890123456789",
            "12345678901234567890",
            "-9223372036854775808",
            "184467440737095516150",
            "1.5",
            "1.0",
            "1e2",
            "1E+2",
            "-0.0",
            "1e400",
            "01",
            "\"\"",
            "\"s\"",
            "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\"",
            "\"\\/\"",
            "\"\\u00e9\"",
            "\"\\u0001\"",
            "\"\\ud800\"",
            "\"é ü 日本\"",
            "\"\x7f\"",
            "[]",
            "{}",
            "[1,2,[3]]",
            "[1, 2]",
            " 1",
            "1 ",
            "{\"a\":1,\"b\":2}",
            "{\"b\":1,\"a\":2}",
            "{\"a\":1,\"a\":2}",
            "{\"a\" :1}",
            "{\"a\": 1}",
            "{\"\\u0061\":1}",
            "{\"a\\n\":1,\"a\":2}",
            "{\"a\":{\"z\":[true,null,{\"y\":\"s\"}],\"c\":1}}",
            "{\"ab\":1,\"b\":2}",
            "{\"b\":1,\"ab\":2}",
            "{\"é\":1,\"z\":2}",
            "{\"z\":1,\"é\":2}",
            "[1,]",
            "{\"a\":1,}",
            "[",
            "\"unterminated",
            "nul",
            "-",
            "1.",
            "1e",
            "tru",
            "[1 2]",
            "{1:2}",
            "\"tab\there\"",
            "",
            " ",
            "raw bytes",
            "\"\\x\"",
            "[-0,1]",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        samples.push(vec![0xff, 0x00]);
        samples.push(b"\"\xc3\x28\"".to_vec());
        samples.push(format!("{}1{}", "[".repeat(99), "]".repeat(99)).into_bytes());
        samples.push(format!("{}1{}", "[".repeat(101), "]".repeat(101)).into_bytes());
        samples.push(format!("{}1{}", "[".repeat(130), "]".repeat(130)).into_bytes());
        samples
    }

    #[test]
    fn canonical_json_is_recognised_and_agrees_with_serde_json() {
        use canonical_json::canonicalize;
        for sample in json_samples() {
            let parsed = serde_json::from_slice::<Value>(&sample);
            let canonical = canonicalize(&sample);
            // Text recognised as canonical is its own canonical form.
            if json_fast::is_canonical_json(&sample) {
                assert_eq!(canonical.as_deref().ok(), Some(&sample[..]), "{sample:?}");
            }
            // The same texts are JSON to both (below serde_json's depth).
            let shallow = !sample.starts_with(b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[");
            if shallow {
                assert_eq!(canonical.is_ok(), parsed.is_ok(), "{sample:?}");
            }
            let Ok(text) = canonical else { continue };
            // Canonical text is a fixed point, recognised as such unless it
            // has a `\u` escape or a member name with an escape (the scanner
            // is conservative there) or nests deeper than the scanner goes,
            // and the same value as serde_json reads from the sample.
            assert_eq!(canonicalize(&text).unwrap(), text, "{sample:?}");
            let deep = text.starts_with(b"[[[[[[[[[[[[[[[[[[[[[");
            let unicode_escape = text.windows(2).any(|w| w == b"\\u");
            let escaped_name = text.windows(2).any(|w| w == b"\\n");
            if !deep && !escaped_name && !unicode_escape {
                assert!(json_fast::is_canonical_json(&text), "{text:?}");
            }
            if shallow {
                assert_eq!(
                    serde_json::from_slice::<Value>(&text).unwrap(),
                    parsed.unwrap(),
                    "{sample:?}"
                );
            }
            // Without floats or integers beyond 64 bits, it is exactly
            // serde_json's rendering: what was stored before numbers were
            // kept as written keeps its bytes.
            let has_float = text.iter().any(|b| matches!(b, b'.' | b'e' | b'E'));
            let long_integer = text
                .split(|b| !b.is_ascii_digit())
                .any(|run| run.len() > 18);
            let negative_zero = text.windows(2).any(|w| w == b"-0");
            if shallow && !has_float && !long_integer && !negative_zero {
                let value: Value = serde_json::from_slice(&text).unwrap();
                assert_eq!(serde_json::to_vec(&value).unwrap(), text, "{sample:?}");
            }
        }
    }

    fn views<'a>(
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
        headers: &'a [(String, Option<Bytes>)],
    ) -> Vec<RecordView<'a>> {
        let base = RecordView {
            topic: "orders.v1-x_y",
            partition: 3,
            offset: 12_345_678_901,
            timestamp_ms: 1_700_000_000_123,
            key,
            value,
            headers,
            physical_offset: None,
        };
        vec![
            base,
            RecordView {
                timestamp_ms: -1,
                offset: 0,
                partition: u32::MAX,
                physical_offset: Some(4096),
                ..base
            },
            RecordView {
                topic: "we\"ird\\top\nic",
                timestamp_ms: i64::MIN,
                offset: u64::MAX,
                physical_offset: Some(0),
                ..base
            },
        ]
    }

    /// `write_record` against serde_json's rendering of the same record:
    /// the same JSON value (numbers compare as the f64s serde_json makes of
    /// both), and the same bytes when the key and value have no number
    /// that serde_json respells.
    #[test]
    fn write_record_matches_serde_of_render_record() {
        let header_sets: Vec<Vec<(String, Option<Bytes>)>> = vec![
            vec![],
            vec![("trace".into(), Some(Bytes::from_static(&[0, 1, 255])))],
            vec![
                ("a\"b\\c\u{1}é".into(), Some(Bytes::new())),
                ("a\"b\\c\u{1}é".into(), None),
                ("a\"b\\c\u{1}é".into(), Some(Bytes::from_static(b"xy"))),
                ("".into(), Some(Bytes::from_static(b"\xff"))),
            ],
        ];
        let mut samples: Vec<Option<Vec<u8>>> = json_samples().into_iter().map(Some).collect();
        samples.push(None);
        samples.push(Some((0..=255u8).collect()));
        let mut compared = 0;
        for headers in &header_sets {
            for key in &samples {
                for value in [&None, &Some(b"{\"v\":1}".to_vec()), key] {
                    for view in views(key.as_deref(), value.as_deref(), headers) {
                        for format in [JSON, BINARY] {
                            let old = render_record(format, &view)
                                .map(|r| serde_json::to_vec(&r).unwrap());
                            let mut new = b"prefix".to_vec();
                            let result = write_record(&mut new, format, &view);
                            match (old, result) {
                                (Ok(old), Ok(())) => {
                                    let new = &new[6..];
                                    assert_eq!(
                                        serde_json::from_slice::<Value>(new).unwrap(),
                                        serde_json::from_slice::<Value>(&old).unwrap(),
                                        "{view:?}"
                                    );
                                    let respelled = |b: Option<&[u8]>| {
                                        b.is_some_and(|b| {
                                            b.iter().any(|c| matches!(c, b'.' | b'e' | b'E'))
                                                || b.windows(2).any(|w| w == b"-0")
                                                || b.len() > 18
                                        })
                                    };
                                    if !respelled(view.key) && !respelled(view.value) {
                                        assert_eq!(
                                            String::from_utf8_lossy(new),
                                            String::from_utf8_lossy(&old),
                                            "{view:?}"
                                        );
                                    }
                                }
                                (Err(old), Err(new)) => {
                                    assert_eq!(old.error_code(), new.error_code());
                                    let prefix = |e: &ApiError| {
                                        let m = e.to_string();
                                        m[..m.find('(').unwrap_or(m.len())].to_string()
                                    };
                                    assert_eq!(prefix(&old), prefix(&new));
                                }
                                (old, new) => panic!("{view:?}: {old:?} vs {new:?}"),
                            }
                            compared += 1;
                        }
                    }
                }
            }
        }
        assert!(compared > 1000, "{compared}");
    }

    #[test]
    fn write_record_pins_the_fetch_answer_shape() {
        let headers = vec![
            ("h".to_string(), Some(Bytes::from_static(b"ab"))),
            ("h".to_string(), None),
            ("h".to_string(), Some(Bytes::new())),
        ];
        let render = |format, key: Option<&[u8]>, value: Option<&[u8]>, headers| {
            let mut out = Vec::new();
            write_record(
                &mut out,
                format,
                &RecordView {
                    topic: "t",
                    partition: 2,
                    offset: 41,
                    timestamp_ms: 5,
                    key,
                    value,
                    headers,
                    physical_offset: None,
                },
            )
            .unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            render(JSON, Some(br#"{"id":7}"#), Some(br#"[1,"two"]"#), &headers),
            r#"{"topic":"t","key":{"id":7},"value":[1,"two"],"partition":2,"offset":41,"timestamp":5,"headers":[{"name":"h","value":"YWI="},{"name":"h","value":null},{"name":"h","value":""}]}"#
        );
        // Not canonical as stored: rendered through serde_json.
        assert_eq!(
            render(JSON, None, Some(br#" {"b": 1.0, "a": "\/"} "#), &[]),
            r#"{"topic":"t","key":null,"value":{"a":"/","b":1.0},"partition":2,"offset":41,"timestamp":5,"headers":[]}"#
        );
        // Keyless tombstone.
        assert_eq!(
            render(BINARY, None, None, &[]),
            r#"{"topic":"t","key":null,"value":null,"partition":2,"offset":41,"timestamp":5,"headers":[]}"#
        );
        assert_eq!(
            render(BINARY, Some(&[0, 255]), Some(b"hi"), &headers[..1]),
            r#"{"topic":"t","key":"AP8=","value":"aGk=","partition":2,"offset":41,"timestamp":5,"headers":[{"name":"h","value":"YWI="}]}"#
        );
        let mut out = Vec::new();
        let err = write_record(
            &mut out,
            JSON,
            &RecordView {
                topic: "t",
                partition: 1,
                offset: 9,
                timestamp_ms: 0,
                key: Some(b"{\"a\":1}"),
                value: Some(b"raw bytes"),
                headers: &[],
                physical_offset: None,
            },
        )
        .unwrap_err();
        assert_eq!(err.error_code(), 42203);
        assert!(
            err.to_string()
                .starts_with("record at offset 9 of t/1: stored value is not valid JSON"),
            "{err}"
        );
    }

    /// Produce bodies covering every shape the decoders handle.
    fn produce_bodies() -> Vec<Vec<u8>> {
        let mut bodies: Vec<Vec<u8>> = [
            r#"{"records":[]}"#,
            r#"{"records":[{"value":"aGk="}]}"#,
            // Numbers as written, and `\u` escapes, in json keys and values.
            r#"{"records":[{"key":18446744073709551617,"value":{"b":-0,"a":1E+2,"c":1.50}}]}"#,
            r#"{"records":[{"key":"\u00e9\ud83d\ude00","value":["\u0041\/",{"\u0062":1,"a":2}]}]}"#,
            r#"{"records":[{"key":"\ud800","value":1}]}"#,
            r#"{"records":[{"key":"\udc00","value":1}]}"#,
            r#"{"records":[{"key":"\ud800\u0041","value":1}]}"#,
            r#"{"records":[{"key":"\u12","value":1}]}"#,
            r#"{"records":[{"key":1e400,"value":1}]}"#,
            r#"{"records":[{"key":1,"value":-1e-400}]}"#,
            r#"{"records":[{"key":1,"value":1}],"x":"\ud800"}"#,
            r#"{"records":[{"key":"AAEC/w==","value":"aGVsbG8=","headers":[{"name":"trace","value":"AQ=="},{"value":"","name":"trace"}]}]}"#,
            r#"{"records":[{"value":"eA==","headers":[{"name":"h","value":null},{"value":null,"name":"h"},{"name":"h","value":"eA=="}]}]}"#,
            r#"{"records":[{"value":"eA==","headers":[{"name":"h","value":nul}]}]}"#,
            r#"{"records":[{"value":"eA==","headers":[{"name":"h"}]}]}"#,
            r#" { "records" : [ { "key" : null , "value" : null , "partition" : 0 , "timestamp" : 0 , "headers" : null } ] } "#,
            r#"{"records":[{"value":"eA==","partition":4294967295,"timestamp":9223372036854775807}]}"#,
            r#"{"records":[{"value":"eA==","partition":4294967296}]}"#,
            r#"{"records":[{"value":"eA==","timestamp":9223372036854775808}]}"#,
            r#"{"records":[{"value":"eA==","partition":-1}]}"#,
            r#"{"records":[{"value":"eA==","partition":-0}]}"#,
            r#"{"records":[{"value":"eA==","partition":1.0}]}"#,
            r#"{"records":[{"value":"eA==","partition":1e1}]}"#,
            r#"{"records":[{"value":"eA==","partition":"0"}]}"#,
            r#"{"records":[{"value":"eA==","timestamp":-1}]}"#,
            r#"{"records":[{"value":"eA==","timestamp":"now"}]}"#,
            r#"{"records":[{"value":"eA==","partition":01}]}"#,
            r#"{"key_schema_id":null,"records":[{"value":"eA=="}],"value_schema":{"x":[1,2.5,"\u00e9"]}}"#,
            r#"{"records":[{"value":"eA=="}],"records":[{"value":"eQ=="}]}"#,
            r#"{"records":[{"value":"eA==","value":"eQ=="}]}"#,
            r#"{"records":[{"key":"eA==","key":null,"value":"eQ=="}]}"#,
            r#"{"records":[{"value":"eA==","valeu":1}]}"#,
            r#"{"records":[{"key":"eA=="}]}"#,
            r#"{"records":[{"value":"not base64!"}]}"#,
            r#"{"records":[{"value":"aGk"}]}"#,
            r#"{"records":[{"value":"aGk=\n"}]}"#,
            r#"{"records":[{"value":"aG\u0073="}]}"#,
            r#"{"records":[{"value":"aGk\/"}]}"#,
            r#"{"records":[{"key":5,"value":"aGk="}]}"#,
            r#"{"records":[{"value":{"a":1}}]}"#,
            r#"{"records":[{"value":1,"headers":{"a":"b"}}]}"#,
            r#"{"records":[{"value":1,"headers":["h"]}]}"#,
            r#"{"records":[{"value":1,"headers":[{"value":"YQ=="}]}]}"#,
            r#"{"records":[{"value":1,"headers":[{"name":"h"}]}]}"#,
            r#"{"records":[{"value":1,"headers":[{"name":"h","value":null}]}]}"#,
            r#"{"records":[{"value":1,"headers":[{"name":"h","value":"","x":1}]}]}"#,
            r#"{"records":[{"value":1,"headers":[{"name":"h","name":"i","value":""}]}]}"#,
            r#"{"records":[{"value":1,"headers":[{"name":"a\"b\\c\né","value":"YQ=="}]}]}"#,
            r#"{"records":[{"value":1,"headers":[{"name":"\u0061","value":"YQ=="}]}]}"#,
            r#"{"records":[{"value":1,"headers":[{"name":"\ud800","value":"YQ=="}]}]}"#,
            r#"{"records":[{"key":{"b":1,"a":[true,null,{"z":0,"y":"s"}]},"value":"hello"},{"value":12.5},{"key":"k","value":{"nested":{"d":1,"c":2}},"partition":3,"timestamp":1700000000000}]}"#,
            r#"{"records":[{"key":{"a":2,"b":1},"value":{"a":[1,-2,"x\ty"],"b":{}}}]}"#,
            r#"{"records":[{"key":{ "a" : 2 , "b": 1 },"value":[1 ,2]}]}"#,
            r#"{"records":[{"key":{"a":1,"a":2},"value":-0}]}"#,
            r#"{"records":[{"key":"\/","value":1e400}]}"#,
            r#"{"records":[{"key":"é日本","value":"\u00e9"}]}"#,
            r#"{"records":[{"key":"\ud800","value":1}]}"#,
            r#"{"records":[{"value":12345678901234567890}]}"#,
            r#"{"records":[{"value":123456789012345678901234}]}"#,
            r#"{"records":[{"value":[1,]}]}"#,
            r#"{"records":[1]}"#,
            r#"{"records":[null]}"#,
            r#"{"records":{}}"#,
            r#"{"records":null}"#,
            r#"{}"#,
            r#"[]"#,
            r#""#,
            r#"{"records":["#,
            r#"{"records":[]} x"#,
            r#"{"records":[]},"#,
            r#"{"records":[],}"#,
            r#"{"rec\u006frds":[]}"#,
            r#"{"rec\u006frds":[{"value":"eA=="}]}"#,
            "{\"records\":[{\"value\":\"a\tb\"}]}",
            "{\"records\":[{\"value\":\"\x7f\"}]}",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        bodies.push(b"\xff\xfe".to_vec());
        bodies.push(b"{\"records\":[{\"value\":\"\xc3\x28\"}]}".to_vec());
        bodies.push(b"{\"x\":\"\xc3\x28\",\"records\":[]}".to_vec());
        // Escapes, quotes and control characters at every position of a
        // string longer than the scanner's 8-byte steps.
        for at in 0..20 {
            for special in [
                "\\\"", "\\n", "\\\\", "\\/", "\\u0041", "\t", "\u{1}", "é", "\u{7f}",
            ] {
                let text = format!("{}{special}{}", "a".repeat(at), "b".repeat(20 - at));
                bodies.push(
                    format!("{{\"records\":[{{\"key\":\"{text}\",\"value\":{{\"{text}\":1}},\"headers\":[{{\"name\":\"{text}\",\"value\":\"\"}}]}}]}}")
                        .into_bytes(),
                );
                bodies.push(
                    format!(
                        "{{\"records\":[{{\"key\":[\"{text}\"],\"value\":{{\"k\":\"{text}\"}}}}]}}"
                    )
                    .into_bytes(),
                );
            }
        }
        // Base64 the fast path decodes with base64-simd and the general path
        // with the base64 crate: every length around the SIMD block sizes,
        // and each of those with one character spoilt (padding, trailing
        // bits, characters outside the alphabet, whitespace).
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..=100usize {
            let bytes: Vec<u8> = (0..len).map(|i| (i as u64 * 131 + seed) as u8).collect();
            let text = BASE64.encode(&bytes);
            bodies.push(format!("{{\"records\":[{{\"value\":\"{text}\"}}]}}").into_bytes());
            if text.is_empty() {
                continue;
            }
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut spoilt = text.into_bytes();
            let at = seed as usize % spoilt.len();
            spoilt[at] = b"=A/+-_ .\x7f"[(seed >> 32) as usize % 9];
            let spoilt = String::from_utf8(spoilt).unwrap();
            bodies.push(
                format!("{{\"records\":[{{\"key\":\"{spoilt}\",\"value\":\"eA==\"}}]}}")
                    .into_bytes(),
            );
        }
        for text in [
            "QR==", "QUJ=", "QUJDRB==", "Q===", "====", "QQ==QQ==", "QQ=", "=QUJ",
        ] {
            bodies.push(format!("{{\"records\":[{{\"value\":\"{text}\"}}]}}").into_bytes());
        }
        for depth in [90, 97, 98, 120, 124, 125, 126, 127, 130, 10_000] {
            let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
            bodies.push(format!("{{\"records\":[{{\"value\":{nested}}}]}}").into_bytes());
            bodies.push(format!("{{\"x\":{nested},\"records\":[]}}").into_bytes());
        }
        bodies
    }

    fn same_outcome(
        body: &[u8],
        format: EmbeddedFormat,
        new: Result<Vec<ProduceRecord>, ApiError>,
        old: Result<Vec<ProduceRecord>, ApiError>,
    ) {
        let body = String::from_utf8_lossy(body);
        match (new, old) {
            (Ok(new), Ok(old)) => assert_eq!(new, old, "{format:?} {body}"),
            (Err(new), Err(old)) => {
                assert_eq!(new.error_code(), old.error_code(), "{format:?} {body}");
                assert_eq!(new.to_string(), old.to_string(), "{format:?} {body}");
            }
            (new, old) => panic!("{format:?} {body}: {new:?} vs {old:?}"),
        }
    }

    #[test]
    fn fast_produce_decoding_matches_the_general_decoder() {
        let mut fast = 0;
        for body in produce_bodies() {
            for format in [JSON, BINARY] {
                let old = decode_produce_general(format, &body);
                if let Some(records) = json_fast::decode_produce_fast(format, &body) {
                    fast += 1;
                    same_outcome(
                        &body,
                        format,
                        Ok(records),
                        decode_produce_general(format, &body),
                    );
                }
                same_outcome(&body, format, decode_produce(format, &body), old);
            }
        }
        assert!(fast >= 100, "{fast}");
    }

    #[test]
    fn fast_base64_encoding_matches_the_base64_crate() {
        for len in 0..=200usize {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 251 + len) as u8).collect();
            let mut out = b"x".to_vec();
            json_write::push_base64_str(&mut out, &bytes);
            assert_eq!(
                out,
                format!("x\"{}\"", BASE64.encode(&bytes)).into_bytes(),
                "{len}"
            );
        }
    }

    #[test]
    fn plain_requests_take_the_fast_path() {
        let binary = br#"{"records":[{"value":"aGk="},{"key":"eA==","value":null,"headers":[{"name":"h","value":"YQ=="},{"name":"h","value":null}]}]}"#;
        let records = json_fast::decode_produce_fast(BINARY, binary).unwrap();
        assert_eq!(records[0].value.as_deref(), Some(&b"hi"[..]));
        assert_eq!(records[1].key.as_deref(), Some(&b"x"[..]));
        assert_eq!(records[1].value, None);
        assert_eq!(
            records[1].headers,
            vec![
                ("h".into(), Some(Bytes::from_static(b"a"))),
                ("h".into(), None)
            ]
        );
        let json = br#"{"records":[{"key":{"a":1},"value":{"b":2,"a":1.5}}]}"#;
        let records = json_fast::decode_produce_fast(JSON, json).unwrap();
        assert_eq!(records[0].key.as_deref(), Some(&br#"{"a":1}"#[..]));
        assert_eq!(
            records[0].value.as_deref(),
            Some(&br#"{"a":1.5,"b":2}"#[..])
        );
    }
}
