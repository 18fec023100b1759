//! Kafka frames over a socket for the protocol tests: a request's frame,
//! its answer read back (or the server's close), and a typed call.
//! Shared by `protocol.rs` and `protocol_sasl.rs` (each test binary
//! declares it with `mod wire;`).

#![allow(dead_code)] // each test binary uses what it needs

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends a request frame (its length first). A write error is left to
/// the read that follows (the server may already have closed the
/// connection: a refused one).
pub async fn send_frame(stream: &mut TcpStream, frame: &[u8]) {
    let mut out = (frame.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(frame);
    let _ = stream.write_all(&out).await;
}

/// The next answer frame, `None` if the server closed instead.
pub async fn read_frame(stream: &mut TcpStream) -> Option<Bytes> {
    let mut len = [0u8; 4];
    let read = tokio::time::timeout(Duration::from_secs(60), stream.read_exact(&mut len))
        .await
        .expect("an answer or a close within a minute");
    read.ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).await.ok()?;
    Some(Bytes::from(body))
}

/// A request's frame: header (client id `test`) and body.
pub fn request_frame<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation: i32,
    body: &R,
) -> BytesMut {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("test")));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, key.request_header_version(version))
        .unwrap();
    body.encode(&mut out, version).unwrap();
    out
}

/// The answer to one request, `None` if the server closed instead.
pub async fn try_call<Q: Encodable, A: Decodable + HeaderVersion>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    body: &Q,
) -> Option<A> {
    send_frame(stream, &request_frame(key, version, 42, body)).await;
    let mut answer = read_frame(stream).await?;
    let header = ResponseHeader::decode(&mut answer, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 42);
    Some(A::decode(&mut answer, version).unwrap())
}

/// The answer to one request.
pub async fn call<Q: Encodable, A: Decodable + HeaderVersion>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    body: &Q,
) -> A {
    try_call(stream, key, version, body)
        .await
        .expect("an answer, not a close")
}

/// Whether the server closed `stream` (rather than answering).
pub async fn closed(stream: &mut TcpStream) -> bool {
    read_frame(stream).await.is_none()
}
