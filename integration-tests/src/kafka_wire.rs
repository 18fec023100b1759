//! Hand-built Kafka requests for tests that need one exact request on the
//! wire (a version, a field no client library sets): the frame, header v1
//! and the answer's body, with no client in between.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The correlation id every [`call`] sends and checks.
const CORRELATION_ID: i32 = 7;

/// A nullable Kafka STRING (INT16 length, -1 for null).
pub fn put_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            out.extend_from_slice(&(s.len() as i16).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}

/// A zigzag varint, as record fields are encoded.
pub fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// One request of API `key` at `version` (request header v1, client id
/// `client`) on a new connection, and its answer's body (the v0 response
/// header, the correlation id, checked and stripped). Waits at most
/// `timeout` for the answer.
pub fn call(
    addr: SocketAddr,
    client: &str,
    key: i16,
    version: i16,
    body: &[u8],
    timeout: Duration,
) -> Vec<u8> {
    let mut frame = Vec::new();
    frame.extend_from_slice(&key.to_be_bytes());
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    put_str(&mut frame, Some(client));
    frame.extend_from_slice(body);
    let mut stream = TcpStream::connect(addr).expect("connect to the Kafka listener");
    stream
        .set_read_timeout(Some(timeout))
        .expect("set the read timeout");
    stream
        .write_all(&(frame.len() as i32).to_be_bytes())
        .expect("send the frame's length");
    stream.write_all(&frame).expect("send the frame");
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .expect("read the answer's length");
    let len = usize::try_from(i32::from_be_bytes(len)).expect("a negative answer length");
    assert!(len >= 4, "an answer of {len} bytes has no correlation id");
    let mut answer = vec![0u8; len];
    stream.read_exact(&mut answer).expect("read the answer");
    assert_eq!(answer[..4], CORRELATION_ID.to_be_bytes(), "correlation id");
    answer.split_off(4)
}
