//! Dispatch by API key: the served APIs and versions, the request header,
//! the structural check before decoding, the handler, the answer frame.
//!
//! Only the APIs of [`SERVED`] are advertised by ApiVersions and
//! answered; any other key closes the connection (KAFKA.md "Bad input"),
//! as does a version outside the served range, except ApiVersions, which
//! answers an unknown version with UNSUPPORTED_VERSION and its own range
//! in a v0 body (KIP-511).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, ApiVersionsRequest, CreateTopicsRequest, DeleteRecordsRequest,
    DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    FetchRequest, FindCoordinatorRequest, HeartbeatRequest, IncrementalAlterConfigsRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, ProduceRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use tidelog_broker::Broker;
use tokio::sync::watch;

use crate::error::FrameError;
use crate::handlers;
use crate::precheck;

/// The served APIs and their version ranges (KAFKA.md's table, this
/// slice's part of it).
pub const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 3),
    // The group APIs (KAFKA.md "Groups").
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 8),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::OffsetDelete, 0, 0),
    // The admin APIs (KAFKA.md "Admin").
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    // Idempotent producers (KAFKA.md "Idempotent producers").
    (ApiKey::InitProducerId, 0, 4),
    // SASL/PLAIN for the admin token (KAFKA.md "Security").
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// Where the broker is, once recovery is done.
pub type Ready = Arc<dyn Fn() -> Option<Arc<Broker>> + Send + Sync>;

/// What every connection shares.
pub struct Context {
    pub ready: Ready,
    pub max_request_bytes: usize,
    pub max_connections: u64,
    /// `kafka.max_batch_inflated_bytes`, `kafka.max_records_per_request`,
    /// `kafka.fetch_max_bytes`.
    pub max_batch_inflated_bytes: usize,
    pub max_records_per_request: usize,
    pub fetch_max_bytes: usize,
    /// The host and port Metadata names.
    pub host: String,
    pub port: i32,
    /// Turns true at shutdown: long-polls answer at once.
    pub stop: watch::Receiver<bool>,
    /// When set, the mutating admin APIs need a SASL/PLAIN login with it
    /// (`handlers::sasl`, `handlers::admin`).
    pub admin_token: Option<crate::config::AdminToken>,
    /// The cluster id Metadata answers (the broker's, known before it is).
    pub cluster_id: Option<String>,
    /// The global budget of request bytes held in memory, shared with
    /// HTTP bodies (`listener`), and a Produce's decoded records.
    pub budget: Arc<tidelog_runtime::budget::ByteBudget>,
    /// The global budget of fetch answers held until written, shared with
    /// HTTP's fetch answers (`handlers::fetch`): a client that does not
    /// read its answers holds these bytes, never the ones producers need.
    pub answer_budget: Arc<tidelog_runtime::budget::ByteBudget>,
    /// The listener's counters, which the HTTP API's `/metrics` renders.
    pub metrics: Arc<crate::metrics::KafkaMetrics>,
}

/// One connection's state: its SASL login (`handlers::sasl`).
#[derive(Debug, Default)]
pub struct Session {
    /// A SaslHandshake chose PLAIN; the next step is its token (v0: a raw
    /// frame, v1: SaslAuthenticate).
    pub handshake: Option<Handshake>,
    /// Logged in with the admin token.
    pub authenticated: bool,
    /// The answer budget's bytes the last answer holds (a fetch's
    /// records), given back once the listener has written it.
    pub answer_held: Option<tidelog_runtime::budget::Reservation>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// v0: the token comes as a bare frame, answered by a bare frame.
    Raw,
    /// v1: the token comes in SaslAuthenticate.
    Wrapped,
}

impl Context {
    pub fn broker(&self) -> Option<Arc<Broker>> {
        (self.ready)()
    }
}

fn served(key: ApiKey) -> Option<(i16, i16)> {
    SERVED
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, min, max)| (*min, *max))
}

/// The answer frame (length-prefixed) to one request frame; `None` when
/// the request gets none (Produce with acks 0).
pub async fn handle(ctx: &Context, frame: Bytes) -> Result<Option<BytesMut>, FrameError> {
    handle_from(ctx, frame, None).await
}

/// [`handle`] for a request from `peer` (the client host a group member
/// is described with).
pub async fn handle_from(
    ctx: &Context,
    frame: Bytes,
    peer: Option<std::net::SocketAddr>,
) -> Result<Option<BytesMut>, FrameError> {
    handle_in(ctx, frame, peer, &mut Session::default()).await
}

/// [`handle_from`] on a connection whose state is `session`.
pub async fn handle_in(
    ctx: &Context,
    frame: Bytes,
    peer: Option<std::net::SocketAddr>,
    session: &mut Session,
) -> Result<Option<BytesMut>, FrameError> {
    if session.handshake == Some(Handshake::Raw) {
        // After a v0 handshake the next frame is the bare PLAIN token.
        return handlers::sasl::raw(ctx, session, &frame).map(Some);
    }
    let gate = handlers::admin::Gate::new(ctx, session);
    let Some(prefix) = frame.get(..4) else {
        return Err(FrameError::Header {
            reason: format!("{} bytes, fewer than a key and a version", frame.len()),
        });
    };
    let raw_key = i16::from_be_bytes([prefix[0], prefix[1]]);
    let version = i16::from_be_bytes([prefix[2], prefix[3]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| FrameError::UnknownKey { key: raw_key })?;
    let (min, max) = served(key).ok_or(FrameError::UnknownKey { key: raw_key })?;
    let api = api_name(key);
    let mut buf = frame;
    let header_version = key.request_header_version(version.clamp(min, max));
    precheck::header(&buf, header_version).map_err(|reason| FrameError::Header { reason })?;
    let header =
        RequestHeader::decode(&mut buf, header_version).map_err(|e| FrameError::Header {
            reason: e.to_string(),
        })?;
    let id = header.correlation_id;
    if !(min..=max).contains(&version) {
        if key == ApiKey::ApiVersions {
            let answer = handlers::api_versions::answer(ResponseError::UnsupportedVersion.code());
            return encode(api, id, key, 0, &answer).map(Some);
        }
        return Err(FrameError::Version {
            api,
            version,
            min,
            max,
        });
    }
    precheck::body(key, version, &buf).map_err(|reason| FrameError::Body {
        api,
        version,
        reason,
    })?;
    macro_rules! decode {
        ($t:ty) => {
            <$t>::decode(&mut buf, version).map_err(|e| FrameError::Body {
                api,
                version,
                reason: e.to_string(),
            })?
        };
    }
    match key {
        ApiKey::ApiVersions => {
            let _request = decode!(ApiVersionsRequest);
            let answer = handlers::api_versions::answer(0);
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::Metadata => {
            let request = decode!(MetadataRequest);
            let answer = handlers::metadata::handle(ctx, version, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::Produce => {
            let request = decode!(ProduceRequest);
            match handlers::produce::handle(ctx, request).await {
                Some(answer) => encode(api, id, key, version, &answer).map(Some),
                None => Ok(None),
            }
        }
        ApiKey::Fetch => {
            let request = decode!(FetchRequest);
            let (answer, held) = handlers::fetch::handle(ctx, request).await;
            let frame = encode(api, id, key, version, &answer).map(Some);
            // Held until the listener has written the answer.
            session.answer_held = Some(held);
            frame
        }
        ApiKey::ListOffsets => {
            let request = decode!(ListOffsetsRequest);
            let answer = handlers::list_offsets::handle(ctx, version, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::FindCoordinator => {
            let request = decode!(FindCoordinatorRequest);
            let answer = handlers::find_coordinator::handle(ctx, version, request);
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::JoinGroup => {
            let request = decode!(JoinGroupRequest);
            // Kafka names a member's host `/<ip>`.
            let host = peer.map_or_else(String::new, |p| format!("/{}", p.ip()));
            let caller = handlers::join_group::Caller {
                client_id: header.client_id.as_ref().map_or("", |c| c.as_str()),
                host: &host,
            };
            let answer = handlers::join_group::handle(ctx, version, caller, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::SyncGroup => {
            let request = decode!(SyncGroupRequest);
            let answer = handlers::sync_group::handle(ctx, version, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::Heartbeat => {
            let request = decode!(HeartbeatRequest);
            let answer = handlers::heartbeat::handle(ctx, request);
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::LeaveGroup => {
            let request = decode!(LeaveGroupRequest);
            let answer = handlers::leave_group::handle(ctx, version, request);
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::OffsetCommit => {
            let request = decode!(OffsetCommitRequest);
            let answer = handlers::offset_commit::handle(ctx, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::OffsetFetch => {
            let request = decode!(OffsetFetchRequest);
            let answer = handlers::offset_fetch::handle(ctx, version, request);
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::ListGroups => {
            let request = decode!(ListGroupsRequest);
            let answer = handlers::list_groups::handle(ctx, version, request);
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::DescribeGroups => {
            let request = decode!(DescribeGroupsRequest);
            let answer = handlers::describe_groups::handle(ctx, version, request);
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::OffsetDelete => {
            let request = decode!(OffsetDeleteRequest);
            let answer = handlers::offset_delete::handle(ctx, gate, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::CreateTopics => {
            let request = decode!(CreateTopicsRequest);
            let answer = handlers::create_topics::handle(ctx, gate, version, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::DeleteTopics => {
            let request = decode!(DeleteTopicsRequest);
            let answer = handlers::delete_topics::handle(ctx, gate, version, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::DeleteRecords => {
            let request = decode!(DeleteRecordsRequest);
            let answer = handlers::delete_records::handle(ctx, gate, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::DescribeConfigs => {
            let request = decode!(DescribeConfigsRequest);
            let answer = handlers::describe_configs::handle(ctx, version, request);
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::AlterConfigs => {
            let request = decode!(AlterConfigsRequest);
            let answer = handlers::alter_configs::handle(ctx, gate, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::IncrementalAlterConfigs => {
            let request = decode!(IncrementalAlterConfigsRequest);
            let answer = handlers::incremental_alter_configs::handle(ctx, gate, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::DescribeCluster => {
            let request = decode!(DescribeClusterRequest);
            let answer = handlers::describe_cluster::handle(ctx, version, request);
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::InitProducerId => {
            let request = decode!(InitProducerIdRequest);
            let answer = handlers::init_producer_id::handle(ctx, version, request).await;
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::SaslHandshake => {
            let request = decode!(SaslHandshakeRequest);
            let answer = handlers::sasl::handshake(ctx, session, version, request);
            encode(api, id, key, version, &answer).map(Some)
        }
        ApiKey::SaslAuthenticate => {
            let request = decode!(SaslAuthenticateRequest);
            let answer = handlers::sasl::authenticate(ctx, session, request);
            encode(api, id, key, version, &answer).map(Some)
        }
        _ => Err(FrameError::UnknownKey { key: raw_key }),
    }
}

/// The name `/metrics` counts a request frame under: its API's, read off
/// its first two bytes (an unserved or unknown key never gets here: its
/// frame closes the connection).
pub fn api_label(frame: &[u8]) -> (i16, &'static str) {
    let Some(prefix) = frame.get(..2) else {
        return (-1, "unserved");
    };
    let raw_key = i16::from_be_bytes([prefix[0], prefix[1]]);
    let name = ApiKey::try_from(raw_key).map_or("unserved", api_name);
    (raw_key, name)
}

fn api_name(key: ApiKey) -> &'static str {
    match key {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::JoinGroup => "JoinGroup",
        ApiKey::Heartbeat => "Heartbeat",
        ApiKey::LeaveGroup => "LeaveGroup",
        ApiKey::SyncGroup => "SyncGroup",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::OffsetDelete => "OffsetDelete",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        ApiKey::DeleteRecords => "DeleteRecords",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::AlterConfigs => "AlterConfigs",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        ApiKey::DescribeCluster => "DescribeCluster",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        _ => "unserved",
    }
}

/// Length prefix, response header, body.
fn encode<R: Encodable + HeaderVersion>(
    api: &'static str,
    correlation_id: i32,
    key: ApiKey,
    version: i16,
    body: &R,
) -> Result<BytesMut, FrameError> {
    let failed = |e: anyhow::Error| FrameError::Encode {
        api,
        reason: e.to_string(),
    };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = key.response_header_version(version);
    // Sized first (a walk of the answer, no copy), so a fetch's records
    // are copied once, into a buffer that never grows.
    let size = header.compute_size(header_version).map_err(failed)?
        + body.compute_size(version).map_err(failed)?;
    let mut out = BytesMut::with_capacity(4 + size);
    out.put_i32(0);
    header.encode(&mut out, header_version).map_err(failed)?;
    body.encode(&mut out, version).map_err(failed)?;
    let length = i32::try_from(out.len() - 4).map_err(|_| FrameError::Encode {
        api,
        reason: format!("{} bytes do not fit a frame", out.len()),
    })?;
    out[..4].copy_from_slice(&length.to_be_bytes());
    Ok(out)
}
