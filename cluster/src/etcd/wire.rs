//! The JSON of etcd's v3 gateway, as etcd 3.4 writes and reads it: field
//! names as in etcd's `.proto` files, keys and values base64 (standard
//! alphabet, padded), int64 fields as JSON strings (read from a number
//! too), and every field at its zero value left out of an answer, so every
//! answer field has a default. Only the fields tidelog reads are declared;
//! the rest are ignored.

use base64::Engine;
use serde::{Deserialize, Deserializer, Serialize};

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub(crate) fn unb64(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    base64::engine::general_purpose::STANDARD.decode(text)
}

/// An int64 as the gateway writes it: a string, or a number.
fn int64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int64 {
        Text(String),
        Number(i64),
    }
    match Int64::deserialize(d)? {
        Int64::Number(n) => Ok(n),
        Int64::Text(t) => t.parse().map_err(serde::de::Error::custom),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Header {
    #[serde(default, deserialize_with = "int64")]
    pub revision: i64,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Kv {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: String,
    #[serde(default, deserialize_with = "int64")]
    pub create_revision: i64,
    #[serde(default, deserialize_with = "int64")]
    pub mod_revision: i64,
    #[serde(default, deserialize_with = "int64")]
    pub version: i64,
    #[serde(default, deserialize_with = "int64")]
    pub lease: i64,
}

#[derive(Debug, Serialize)]
pub(crate) struct RangeRequest {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_end: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RangeResponse {
    #[serde(default)]
    pub header: Header,
    #[serde(default)]
    pub kvs: Vec<Kv>,
    #[serde(default)]
    pub more: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct PutRequest {
    pub key: String,
    pub value: String,
    /// The lease id, as text; absent: no lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct PutResponse {
    #[serde(default)]
    pub header: Header,
}

#[derive(Debug, Serialize)]
pub(crate) struct DeleteRangeRequest {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_end: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DeleteRangeResponse {
    #[serde(default)]
    pub header: Header,
    #[serde(default, deserialize_with = "int64")]
    pub deleted: i64,
}

/// One compare of a txn. `target` and `result` are the enum names of
/// etcd's `Compare.CompareTarget` and `Compare.CompareResult`; exactly one
/// of the four operands is set, the one `target` names.
#[derive(Debug, Serialize)]
pub(crate) struct Compare {
    pub key: String,
    pub target: &'static str,
    pub result: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub create_revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mod_revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// One operation of a txn: `{"request_put": {...}}` and its siblings.
#[derive(Debug, Serialize)]
pub(crate) enum RequestOp {
    #[serde(rename = "request_put")]
    Put(PutRequest),
    #[serde(rename = "request_range")]
    Range(RangeRequest),
    #[serde(rename = "request_delete_range")]
    DeleteRange(DeleteRangeRequest),
}

#[derive(Debug, Serialize)]
pub(crate) struct TxnRequest {
    pub compare: Vec<Compare>,
    pub success: Vec<RequestOp>,
    pub failure: Vec<RequestOp>,
}

/// One operation's answer: exactly one field is set.
#[derive(Debug, Deserialize)]
pub(crate) struct ResponseOp {
    pub response_put: Option<PutResponse>,
    pub response_range: Option<RangeResponse>,
    pub response_delete_range: Option<DeleteRangeResponse>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct TxnResponse {
    #[serde(default)]
    pub header: Header,
    #[serde(default)]
    pub succeeded: bool,
    #[serde(default)]
    pub responses: Vec<ResponseOp>,
}

#[derive(Debug, Serialize)]
pub(crate) struct LeaseGrantRequest {
    #[serde(rename = "TTL")]
    pub ttl: String,
    /// "0": etcd picks the id.
    #[serde(rename = "ID")]
    pub id: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct LeaseGrantResponse {
    #[serde(rename = "ID", default, deserialize_with = "int64")]
    pub id: i64,
    #[serde(rename = "TTL", default, deserialize_with = "int64")]
    pub ttl: i64,
    #[serde(default)]
    pub error: String,
}

/// The request of keep-alive and revoke alike.
#[derive(Debug, Serialize)]
pub(crate) struct LeaseIdRequest {
    #[serde(rename = "ID")]
    pub id: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct LeaseKeepAliveResponse {
    /// 0: etcd does not know the lease (expired or revoked).
    #[serde(rename = "TTL", default, deserialize_with = "int64")]
    pub ttl: i64,
}

#[derive(Debug, Deserialize)]
pub(crate) struct LeaseRevokeResponse {}

#[derive(Debug, Serialize)]
pub(crate) struct WatchRequest {
    pub create_request: WatchCreateRequest,
}

#[derive(Debug, Serialize)]
pub(crate) struct WatchCreateRequest {
    pub key: String,
    pub range_end: String,
    pub start_revision: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WatchResponse {
    #[serde(default)]
    pub canceled: bool,
    #[serde(default, deserialize_with = "int64")]
    pub compact_revision: i64,
    #[serde(default)]
    pub cancel_reason: String,
    #[serde(default)]
    pub events: Vec<Event>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Event {
    pub kv: Kv,
}

/// One message of a streamed answer (keep-alive, watch): one JSON object
/// per line, a result or an error.
#[derive(Debug, Deserialize)]
pub(crate) struct StreamMessage<T> {
    pub result: Option<T>,
    pub error: Option<StreamError>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StreamError {
    #[serde(default)]
    pub grpc_code: i32,
    #[serde(default)]
    pub http_code: i32,
    #[serde(default)]
    pub message: String,
}

/// The body of a non-200 answer.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct GatewayError {
    #[serde(default)]
    pub code: i32,
    #[serde(default)]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int64_fields_read_from_text_or_number_and_default_to_zero() {
        let kv: Kv = serde_json::from_str(
            r#"{"key":"YQ==","create_revision":"2","mod_revision":3,"version":"1"}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (kv.create_revision, kv.mod_revision, kv.version, kv.lease),
            (2, 3, 1, 0)
        );
        assert!(serde_json::from_str::<Kv>(r#"{"version":"x"}"#).is_err());
    }

    #[test]
    fn a_txn_request_is_the_gateway_s_json() {
        let txn = TxnRequest {
            compare: vec![Compare {
                key: b64(b"k"),
                target: "CREATE",
                result: "EQUAL",
                version: None,
                create_revision: Some("0".into()),
                mod_revision: None,
                value: None,
            }],
            success: vec![RequestOp::Put(PutRequest {
                key: b64(b"k"),
                value: b64(b"v"),
                lease: Some("7".into()),
            })],
            failure: vec![RequestOp::Range(RangeRequest {
                key: b64(b"k"),
                range_end: None,
            })],
        };
        assert_eq!(
            serde_json::to_string(&txn).unwrap_or_default(),
            r#"{"compare":[{"key":"aw==","target":"CREATE","result":"EQUAL","create_revision":"0"}],"success":[{"request_put":{"key":"aw==","value":"dg==","lease":"7"}}],"failure":[{"request_range":{"key":"aw=="}}]}"#
        );
    }

    #[test]
    fn a_failed_txn_s_answer_leaves_succeeded_out() {
        let answer: TxnResponse =
            serde_json::from_str(r#"{"header":{"revision":"9"},"responses":[{"response_range":{"header":{"revision":"9"}}}]}"#)
                .unwrap_or_else(|e| panic!("{e}"));
        assert!(!answer.succeeded);
        assert_eq!(answer.header.revision, 9);
        assert!(answer.responses[0].response_range.is_some());
    }
}
