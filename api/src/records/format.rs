//! The embedded formats of record bodies (json, binary), the media types
//! that name them, and the decoded produce record: the leaf every other
//! part of `records/` builds on.

use crate::error::ApiError;

/// `Content-Type` of the json embedded format.
pub const JSON_V2: &str = "application/vnd.kafka.json.v2+json";
/// `Content-Type` of the binary embedded format.
pub const BINARY_V2: &str = "application/vnd.kafka.binary.v2+json";
/// The content type of every v2 answer (API.md conventions).
pub const V2_RESPONSE: &str = "application/vnd.kafka.v2+json";

/// How keys and values are embedded in the JSON of a request or answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddedFormat {
    Json,
    Binary,
}

impl EmbeddedFormat {
    /// The format of a produce body, from its `Content-Type`. Parameters such
    /// as `; charset=utf-8` are ignored; the media type is case-insensitive.
    pub fn from_content_type(content_type: Option<&str>) -> Result<Self, ApiError> {
        let Some(raw) = content_type else {
            return Err(ApiError::UnsupportedContentType {
                message: format!(
                    "missing Content-Type: use {JSON_V2}, {BINARY_V2} or application/json"
                ),
            });
        };
        match media_type(raw).as_str() {
            JSON_V2 | "application/json" => Ok(EmbeddedFormat::Json),
            BINARY_V2 => Ok(EmbeddedFormat::Binary),
            _ => Err(ApiError::UnsupportedContentType {
                message: format!(
                    "Content-Type {raw:?} is not supported: use {JSON_V2}, {BINARY_V2} or application/json"
                ),
            }),
        }
    }

    /// The format of a fetch answer, from `Accept`: binary only when asked
    /// for; json for the json types, `*/*`, a missing header, and anything
    /// unrecognised (we only ever answer JSON, so json is the honest guess).
    pub fn from_accept(accept: Option<&str>) -> Self {
        let Some(accept) = accept else {
            return EmbeddedFormat::Json;
        };
        for range in accept.split(',') {
            match media_type(range).as_str() {
                BINARY_V2 => return EmbeddedFormat::Binary,
                JSON_V2 | "application/json" | V2_RESPONSE | "*/*" | "application/*" => {
                    return EmbeddedFormat::Json
                }
                _ => {}
            }
        }
        EmbeddedFormat::Json
    }

    /// The format named by a `format` query parameter (`json`, `binary`, or
    /// absent for json), used by the query-by-key endpoint.
    pub fn from_query(format: Option<&str>) -> Result<Self, ApiError> {
        match format {
            None | Some("json") => Ok(EmbeddedFormat::Json),
            Some("binary") => Ok(EmbeddedFormat::Binary),
            Some(other) => Err(ApiError::BadRequest {
                message: format!("format {other:?} is not supported: use json or binary"),
            }),
        }
    }
}

/// `type/subtype` of a media type or media range, lower-cased, without
/// parameters or surrounding spaces.
pub(crate) fn media_type(raw: &str) -> String {
    raw.split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// One record of a produce request, decoded and ready to append: the
/// broker's type, so decoding hands the broker its records with no copy.
pub use tidelog_broker::produce::ProduceRecord;
