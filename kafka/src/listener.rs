//! The Kafka listener: accept loop, connection limit, TLS, framing.
//!
//! Invariants:
//! * On a TLS listener (SSL, SASL_SSL) the handshake runs first, on the
//!   connection's own task and bounded by `tls.handshake_timeout_ms`
//!   (`tidelog_runtime::tls`); the accept loop never waits for one. A
//!   failed handshake closes the connection before any frame is read.
//!   The connection loop is generic over the stream, so TLS and plain
//!   connections are served by the same code.
//! * One task per connection; its requests are read, answered and
//!   written one after another, so answers go out in request order
//!   (clients may pipeline: later requests wait in the socket).
//! * A frame's length is checked against `kafka.max_request_bytes`
//!   before its buffer is allocated; a larger (or negative) one closes
//!   the connection. Reads go through one [`READ_BUFFER_BYTES`] buffer per
//!   connection (beside the frame's own).
//! * A slow or stalled client holds only its own task: a started frame
//!   must arrive within [`FRAME_READ_TIMEOUT`], an answer be taken within
//!   [`WRITE_TIMEOUT`], and a connection idle for [`IDLE_TIMEOUT`]
//!   (Kafka's `connections.max.idle.ms`) is closed. Broker calls that
//!   block run on `spawn_blocking` (handlers).
//! * A frame's bytes are reserved in the global byte budget (shared with
//!   HTTP bodies, `http.max_inflight_bytes`) as they arrive: its buffer
//!   grows [`FRAME_CHUNK_BYTES`] at a time (doubling after that, never
//!   past the frame's length), each growth reserved before it is
//!   allocated, and the whole is given back after its answer is written,
//!   so the live reservations of both front-ends never pass the budget
//!   and a client that sends a length and nothing more holds nothing (a
//!   growth waits for a byte to arrive first).
//!   While a growth does not fit the connection is not read
//!   (backpressure, not an error), at most [`BUDGET_WAIT`]; a frame
//!   larger than the whole budget, or one that waited that long, closes
//!   its connection.
//! * An answer's bytes that its handler counted in the answer budget (a
//!   fetch's records, `http.max_inflight_response_bytes`, shared with
//!   HTTP's fetch answers) stay counted until the answer is written
//!   (`Session::answer_held`), so answers held for clients that do not
//!   read are bounded in total, apart from the request bytes producers
//!   need.
//! * On a SASL listener (SASL_PLAINTEXT, SASL_SSL) a connection must log
//!   in within `kafka.authentication_timeout_ms` of its start (after the
//!   TLS handshake): until then every read of a frame is bounded by that
//!   deadline, and a connection past it is closed, counted under
//!   `reason="authentication"` and logged at debug, as is one closed for
//!   a request before its login (`dispatch`). Once logged in, only the
//!   ordinary timeouts apply.
//! * Beyond `kafka.max_connections`, new connections are closed at once.
//! * A bad frame (KAFKA.md "Bad input") closes its connection after one
//!   warn with the peer; every other connection goes on. A client that
//!   hangs up with an answer on its way (a consumer closing during a
//!   fetch long-poll, as librdkafka and kafkajs do) is ordinary: logged at
//!   debug, as Kafka logs a disconnect.
//! * Shutdown (`stop`): no new connections; a connection between requests
//!   closes, one with a request in flight finishes it first.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tidelog_runtime::budget::{ByteBudget, Reservation};
use tidelog_runtime::connections::ConnectionSlots;
use tidelog_runtime::tls::{PeerIdentity, TlsAcceptor};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::context::Context;
use crate::dispatch;
use crate::error::FrameError;
use crate::metrics::ClosedFor;
use crate::session::Session;

pub const FRAME_READ_TIMEOUT: Duration = Duration::from_secs(30);
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a frame waits for the global byte budget before its
/// connection is closed.
pub const BUDGET_WAIT: Duration = Duration::from_secs(30);
/// A frame's buffer (and its reservation in the byte budget) starts this
/// large, or at the frame's length if smaller, and doubles from there as
/// its bytes arrive.
pub const FRAME_CHUNK_BYTES: usize = 64 * 1024;
/// Bytes read from the socket at a time: a frame that fits (a produce of
/// 100 records of 100 B is 11 KB) comes in with its length in one `recv`
/// instead of three (first byte, rest of the length, frame). Larger
/// frames are read straight into their own buffer.
pub const READ_BUFFER_BYTES: usize = 16 * 1024;
/// How long the accept loop pauses after a failed accept (out of file
/// descriptors, say), so it does not spin.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);
/// Failed accepts are warned at most this often.
pub const ACCEPT_ERROR_WARN_INTERVAL: Duration = Duration::from_secs(10);

/// Serves `listener` until `stop` turns true; with `tls`, every
/// connection is a TLS one (module doc).
pub async fn serve(
    listener: TcpListener,
    ctx: Arc<Context>,
    connections: Arc<ConnectionSlots>,
    tls: Option<Arc<TlsAcceptor>>,
    mut stop: watch::Receiver<bool>,
) {
    let limit = usize::try_from(ctx.max_connections).unwrap_or(usize::MAX);
    let slots = Arc::new(Semaphore::new(limit));
    // Accept errors (out of descriptors) warned at most once per this.
    let mut accept_warned: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.changed() => return,
        };
        if *stop.borrow() {
            return;
        }
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors and the like: back off, keep serving.
                if accept_warned.is_none_or(|at| at.elapsed() >= ACCEPT_ERROR_WARN_INTERVAL) {
                    tracing::warn!(error = %e, "kafka accept failed");
                    accept_warned = Some(Instant::now());
                }
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        // Descriptors are kept for the store: past the shared cap the
        // connection is closed at once (counted and warned there).
        let Some(fd_slot) = connections.try_open("kafka") else {
            drop(stream);
            continue;
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            ctx.metrics.connection_rejected();
            tracing::warn!(%peer, max_connections = limit, "kafka connection refused: kafka.max_connections reached");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let ctx = Arc::clone(&ctx);
        let stop = stop.clone();
        let tls = tls.clone();
        ctx.metrics.connection_opened();
        tokio::spawn(async move {
            let served = match tls {
                None => connection(stream, peer, &ctx, None, stop).await,
                // A failed handshake is counted and logged by the
                // acceptor; the connection just ends.
                Some(tls) => match tls.accept(stream, "kafka", peer).await {
                    Ok((stream, identity)) => {
                        connection(stream, peer, &ctx, Some(identity), stop).await
                    }
                    Err(_) => Ok(()),
                },
            };
            match served {
                Ok(()) => {}
                Err(e) if peer_hung_up(&e) => {
                    tracing::debug!(%peer, error = %e, "kafka client hung up");
                }
                Err(e) => {
                    let why = e.closed_for();
                    if let Some(why) = why {
                        ctx.metrics.connection_closed_for(why);
                    }
                    if why == Some(ClosedFor::Authentication) {
                        // A client without a login, or a failed one
                        // (warned, rate-limited, by the SASL handler).
                        tracing::debug!(%peer, listener = %ctx.listener, error = %e, "kafka connection closed");
                    } else {
                        tracing::warn!(%peer, error = %e, "kafka connection closed");
                    }
                }
            }
            ctx.metrics.connection_closed();
            drop(slot);
            drop(fd_slot);
        });
    }
}

/// Reads, answers and writes requests in order until the client closes
/// (`Ok`), a frame is bad or the socket fails (`Err`), or shutdown.
/// `tls_peer`: the client certificate's identity on a TLS listener.
async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    peer: SocketAddr,
    ctx: &Context,
    tls_peer: Option<PeerIdentity>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), FrameError> {
    // Writes pass through the reader's buffer to the socket unbuffered.
    let mut stream = BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    let mut session = Session::new(tls_peer);
    // On a SASL listener: when the login must be done by (module doc).
    let login_deadline = ctx
        .security_protocol
        .uses_sasl()
        .then(|| tokio::time::Instant::now() + ctx.authentication_timeout);
    loop {
        let next = match login_deadline {
            Some(deadline) if !session.logged_in => {
                match tokio::time::timeout_at(deadline, next_frame(&mut stream, ctx, &mut stop))
                    .await
                {
                    Ok(next) => next?,
                    Err(_) => {
                        return Err(FrameError::LoginTimeout {
                            timeout_ms: ctx.authentication_timeout.as_millis(),
                        })
                    }
                }
            }
            _ => next_frame(&mut stream, ctx, &mut stop).await?,
        };
        let Some((frame, held)) = next else {
            return Ok(());
        };
        ctx.metrics.request_read(frame.len());
        let (key, api) = dispatch::api_label(&session, &frame);
        let started = Instant::now();
        let answer = dispatch::handle_in(ctx, frame, Some(peer), &mut session).await?;
        ctx.metrics.request_served(key, api, started.elapsed());
        if let Some(answer) = answer {
            // A TLS stream holds the last record until flushed (a plain
            // socket's flush does nothing).
            timed(WRITE_TIMEOUT, "writing an answer", async {
                stream.write_all(&answer).await?;
                stream.flush().await
            })
            .await?;
            ctx.metrics.response_written(answer.len());
        }
        // A failed login's answer is out: the connection ends (counted
        // by the SASL handler, so not as a bad frame).
        if session.close_after_answer {
            return Ok(());
        }
        // The answer's own bytes (a fetch's records, counted in the
        // budget by its handler) are given back once it is written.
        session.answer_held = None;
        drop(held);
    }
}

/// The next request frame of `stream` with its reservation in the byte
/// budget; `None` when the connection ends without one (the client
/// closed, idle past [`IDLE_TIMEOUT`], or shutdown).
async fn next_frame<S: AsyncBufRead + Unpin>(
    stream: &mut S,
    ctx: &Context,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<(Bytes, Reservation)>, FrameError> {
    let mut len = [0u8; 4];
    let first = tokio::select! {
        read = tokio::time::timeout(IDLE_TIMEOUT, stream.read(&mut len[..1])) => read,
        _ = stop.changed() => return Ok(None),
    };
    match first {
        Err(_) => return Ok(None), // idle: closed as Kafka does, not a warning
        Ok(Ok(0)) => return Ok(None),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e.into()),
    }
    timed(
        FRAME_READ_TIMEOUT,
        "reading a frame",
        stream.read_exact(&mut len[1..]),
    )
    .await?;
    let length = i32::from_be_bytes(len);
    let size = usize::try_from(length)
        .ok()
        .filter(|l| *l <= ctx.max_request_bytes)
        .ok_or(FrameError::TooLarge {
            length: i64::from(length),
            limit: ctx.max_request_bytes,
        })?;
    // The frame's bytes come from the global budget as they arrive,
    // and go back once its answer is written.
    tokio::select! {
        read = read_frame_reserved(stream, size, &ctx.budget) => read.map(Some),
        // Shutdown; not a gone sender (then none can be signalled).
        _ = async {
            if stop.wait_for(|stopping| *stopping).await.is_err() {
                std::future::pending::<()>().await;
            }
        } => Ok(None),
    }
}

/// Exactly `size` bytes of `stream` (a frame's, its length already read
/// and checked), with their reservation in `budget`, taken as they arrive
/// (module doc). The frame's bytes must all arrive within
/// [`FRAME_READ_TIMEOUT`] of reading (time spent waiting for the budget,
/// with the connection not read, is not the client's and does not
/// count); a growth that does not fit waits for bytes to
/// be given back (the connection is not read meanwhile) at most
/// [`BUDGET_WAIT`]; a frame larger than the whole budget is refused at
/// once.
async fn read_frame_reserved<R: AsyncBufRead + Unpin>(
    stream: &mut R,
    size: usize,
    budget: &Arc<ByteBudget>,
) -> Result<(Bytes, Reservation), FrameError> {
    let bytes = u64::try_from(size).unwrap_or(u64::MAX);
    if bytes > budget.limit_bytes() {
        return Err(FrameError::OverBudget {
            length: bytes,
            limit: budget.limit_bytes(),
        });
    }
    let mut held = budget.empty();
    let mut read_deadline = tokio::time::Instant::now() + FRAME_READ_TIMEOUT;
    let mut frame: Vec<u8> = Vec::new();
    while frame.len() < size {
        // Nothing is reserved for bytes that have not come: wait for one
        // (in the connection's read buffer) first.
        let arrived = timed_until(read_deadline, "reading a frame", stream.fill_buf())
            .await?
            .len();
        if arrived == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
        if frame.len() == frame.capacity() {
            let capacity = frame
                .capacity()
                .saturating_mul(2)
                .max(FRAME_CHUNK_BYTES)
                .min(size);
            let began = tokio::time::Instant::now();
            grow(budget, &mut held, capacity as u64).await?;
            read_deadline += began.elapsed();
            frame.reserve_exact(capacity - frame.len());
        }
        let room = (frame.capacity() - frame.len()) as u64;
        let mut body = (&mut *stream).take(room);
        let read = timed_until(read_deadline, "reading a frame", body.read_buf(&mut frame)).await?;
        if read == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
    }
    Ok((Bytes::from(frame), held))
}

/// Grows `held` to `bytes` of `budget`. While that does not fit, the
/// connection is not read (backpressure: the client's bytes wait in the
/// socket, then in the client) until other requests give bytes back, at
/// most [`BUDGET_WAIT`]; then the connection is closed (a client
/// reconnects and retries).
async fn grow(
    budget: &Arc<ByteBudget>,
    held: &mut Reservation,
    bytes: u64,
) -> Result<(), FrameError> {
    let deadline = tokio::time::Instant::now() + BUDGET_WAIT;
    loop {
        let more = bytes.saturating_sub(held.bytes());
        if more == 0 || held.try_grow(more) {
            return Ok(());
        }
        // Listen first, then try again: a release in between is not lost.
        let released = budget.listen();
        if held.try_grow(more) {
            return Ok(());
        }
        tracing::debug!(
            bytes,
            used = budget.used_bytes(),
            "kafka frame waits for the in-flight byte budget"
        );
        if tokio::time::timeout_at(deadline, released).await.is_err() {
            return Err(FrameError::Timeout {
                what: "waiting for the in-flight byte budget (http.max_inflight_bytes)",
            });
        }
    }
}

/// The socket failed because the client went away (its reset or closed
/// end), not because of anything it sent. A frame cut short stays a bad
/// frame (`UnexpectedEof`).
fn peer_hung_up(e: &FrameError) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e,
        FrameError::Io { source }
            if matches!(source.kind(), K::BrokenPipe | K::ConnectionReset | K::ConnectionAborted)
    )
}

/// Exactly `size` bytes of `stream` (a frame's, its length already read
/// and checked) in a buffer of their own, not read past: the next frame's
/// bytes stay in the stream. The buffer is not zeroed first, as
/// `read_exact` into a zeroed one would: zeroing cost as much as the
/// frame's whole copy out of the socket buffer. A stream that ends first
/// is `UnexpectedEof`, as `read_exact`'s.
pub async fn read_frame_body<R: AsyncRead + Unpin>(
    stream: &mut R,
    size: usize,
) -> std::io::Result<BytesMut> {
    let mut frame = BytesMut::with_capacity(size);
    let mut body = (&mut *stream).take(size as u64);
    while frame.len() < size {
        if body.read_buf(&mut frame).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(frame)
}

async fn timed<T>(
    limit: Duration,
    what: &'static str,
    io: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, FrameError> {
    timed_until(tokio::time::Instant::now() + limit, what, io).await
}

async fn timed_until<T>(
    deadline: tokio::time::Instant,
    what: &'static str,
    io: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, FrameError> {
    match tokio::time::timeout_at(deadline, io).await {
        Ok(done) => Ok(done?),
        Err(_) => Err(FrameError::Timeout { what }),
    }
}

/// The bound address's port and the advertised host (`advertised_host`,
/// else the listen host) Metadata names.
pub fn advertised(bound: SocketAddr, advertised_host: Option<&str>) -> (String, i32) {
    let host = advertised_host.map_or_else(|| bound.ip().to_string(), str::to_owned);
    (host, i32::from(bound.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame read in small pieces comes out whole, and the bytes after
    /// it (the next frame) stay unread; a stream that ends inside the
    /// frame is UnexpectedEof.
    #[tokio::test]
    async fn a_frame_body_is_read_whole_and_not_past_its_end() {
        let (mut client, server) = tokio::io::duplex(3);
        let writer = tokio::spawn(async move {
            client.write_all(b"0123456789next").await.unwrap();
        });
        let mut server = BufReader::with_capacity(4, server);
        let frame = read_frame_body(&mut server, 10).await.unwrap();
        assert_eq!(&frame[..], b"0123456789");
        let mut rest = Vec::new();
        writer.await.unwrap();
        server.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"next");

        let mut short: &[u8] = b"01234";
        let err = read_frame_body(&mut short, 10).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        let empty = read_frame_body(&mut short, 0).await.unwrap();
        assert!(empty.is_empty());
    }

    /// A frame reserves only what has arrived (a length and nothing more
    /// holds nothing), and time spent waiting for the budget, with the
    /// connection not read, is not counted against the frame's read
    /// timeout: a frame held back 20 s by a full budget, whose last bytes
    /// come 15 s after that, is read whole.
    #[tokio::test(start_paused = true)]
    async fn a_frame_reserves_what_arrived_and_budget_waits_are_not_reading_time() {
        let limit = 2 * FRAME_CHUNK_BYTES as u64;
        let budget = ByteBudget::new(limit);
        let other = budget.try_reserve(limit).unwrap();
        let size = FRAME_CHUNK_BYTES + 10;
        let (mut client, server) = tokio::io::duplex(2 * FRAME_CHUNK_BYTES);
        let reader = {
            let budget = Arc::clone(&budget);
            tokio::spawn(async move {
                let mut server = BufReader::new(server);
                read_frame_reserved(&mut server, size, &budget)
                    .await
                    .map(|(frame, held)| (frame.len(), held.bytes()))
            })
        };
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            budget.used_bytes(),
            limit,
            "nothing arrived, nothing more held"
        );
        client
            .write_all(&vec![7u8; FRAME_CHUNK_BYTES])
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(20)).await;
        drop(other);
        tokio::time::sleep(Duration::from_secs(15)).await;
        client.write_all(&[7u8; 10]).await.unwrap();
        let (len, held) = reader.await.unwrap().unwrap();
        assert_eq!((len, held), (size, size as u64));
    }
}
