//! One request on its way to its handler ([`Call`]), and the answer
//! frame ([`encode`]).
//!
//! Invariants:
//! * A `Call` is made by `dispatch` only after the request's key is
//!   served, its version inside the served range, its header decoded and
//!   its body walked (`precheck`), so [`Call::decode`] allocates at most
//!   what the frame's own size bounds.
//! * Every answer frame is built by [`encode`]: length prefix, response
//!   header (its version from the key and request version), body, sized
//!   before it is written so the buffer never grows.
//! * This file imports no handler and no route: routes and dispatch
//!   import it.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use crate::context::Context;
use crate::error::FrameError;
use crate::session::Session;

/// What a route answers: the answer frame, or `None` when the request
/// gets none (Produce with acks 0); an error closes the connection.
pub type Answered = Result<Option<BytesMut>, FrameError>;

/// A route's work on one request, boxed so that every row of the table
/// has one fn-pointer type.
pub type Served<'a> = Pin<Box<dyn Future<Output = Answered> + Send + 'a>>;

/// One served request, its header decoded, its body not yet.
pub struct Call<'a> {
    pub ctx: &'a Context,
    /// The connection's state (SASL login, the answer bytes it holds).
    pub session: &'a mut Session,
    /// The client's address (the host a group member is described with).
    pub peer: Option<SocketAddr>,
    pub header: RequestHeader,
    pub key: ApiKey,
    /// Inside the route's range.
    pub version: i16,
    /// The route's name, for errors.
    pub api: &'static str,
    /// The body's bytes (after the header).
    pub body: Bytes,
}

impl Call<'_> {
    /// The typed request the body holds.
    pub fn decode<T: Decodable>(&mut self) -> Result<T, FrameError> {
        T::decode(&mut self.body, self.version).map_err(|e| FrameError::Body {
            api: self.api,
            version: self.version,
            reason: e.to_string(),
        })
    }

    /// The answer frame of `body`, at the request's version.
    pub fn answer<R: Encodable + HeaderVersion>(&self, body: &R) -> Answered {
        encode(
            self.api,
            self.header.correlation_id,
            self.key,
            self.version,
            body,
        )
        .map(Some)
    }
}

/// Length prefix, response header, body.
pub fn encode<R: Encodable + HeaderVersion>(
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
