//! The HTTP listener: tidelog's own accept loop over hyper's HTTP/1.1
//! connections, serving the axum router. The HTTP front-end owns it, as
//! the Kafka front-end owns `tidelog_kafka::listener`; the server only
//! binds the socket and starts it ([`serve`]). `axum::serve` has no place for
//! the limits below, and hyper's own header timeout also runs while a
//! keep-alive connection waits for its next request, so a short header
//! timeout would close idle connections long before `idle_timeout_ms`.
//!
//! Limits (OPERATIONS.md `http:`):
//! * `max_connections`: one more connection is closed at once, before a
//!   byte is read, and counted (`tidelog_http_connections_rejected_total`).
//! * A connection's clock (`Phase`) decides which read timeout applies:
//!   from accept, and again from the end of each response, it is idle and
//!   closed after `idle_timeout_ms` without a byte; from the first byte of
//!   a request to the end of its headers, it is closed after
//!   `header_read_timeout_ms` (a deadline, so a trickle of bytes does not
//!   extend it). Once hyper hands the request to the router, the connection
//!   has no read deadline here: the router reads the body within
//!   `body_read_timeout_ms` (answering 408 otherwise), and the handler may
//!   take as long as it needs (long-polls).
//! * Writes, in every phase: a write the socket cannot take (the client
//!   does not read, its receive window is full) that stays blocked for
//!   `write_timeout_ms` fails with `TimedOut`, closing the connection and
//!   freeing the answer it held (`tidelog_http_timeouts_total{phase=
//!   "write"}`). The clock runs from the first blocked write and restarts
//!   with every byte the socket takes, so a slow reader that keeps reading
//!   is never cut off.
//!
//! * Request heads: read and checked here before hyper sees them
//!   ([`crate::head`]), so that a head hyper would refuse (a control
//!   character in a header, an over-long URI, too many headers) is
//!   answered with API.md's JSON error body, not hyper's empty one.
//!
//! The timeouts are enforced inside the connection's reads (`TimedIo`):
//! hyper is waiting on a read exactly when the connection is idle or its
//! headers are incomplete, so a read that finds no bytes after the
//! deadline fails with `TimedOut` and hyper closes the connection.
//!
//! TLS (`http.tls`): every connection's handshake runs first, on its own
//! task, bounded by `tls.handshake_timeout_ms`
//! (`tidelog_runtime::tls::TlsAcceptor`, which counts and logs the ones
//! that fail: plain HTTP sent to the HTTPS port is one, closed without an
//! answer); the accept loop never waits for one. Then the connection is
//! served exactly as a plain one (the limits above apply to the
//! decrypted stream, the clock starting after the handshake), and every
//! request carries the client certificate's
//! [`tidelog_runtime::tls::PeerIdentity`] in its extensions, for the
//! authentication layer.
//!
//! Shutdown: [`serve`] stops accepting when `stop` turns `true`, starts a
//! graceful shutdown of every connection (hyper closes idle ones and lets a
//! request in progress finish, answered with `Connection: close`), closes
//! connections that have not handed a request to the router yet (fresh ones
//! and half-sent headers: nothing of theirs is in flight), and returns when
//! every connection has ended.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tidelog_runtime::tls::{PeerIdentity, TlsAcceptor};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};

use crate::head;
use crate::state::AppState;

/// How long the accept loop pauses after an error that is not one
/// connection's (out of file descriptors, say), so it does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);
/// Failed accepts are warned at most this often.
const ACCEPT_ERROR_WARN_INTERVAL: Duration = Duration::from_secs(10);

/// The listener's limits (OPERATIONS.md `http:`); the body timeout is the
/// router's (`ApiSettings::body_read_timeout`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ListenerLimits {
    pub max_connections: u64,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub write_timeout: Duration,
}

/// Serves `app` on `listener` until `stop` turns `true` and every
/// connection has ended (module doc); with `tls`, HTTPS only. Connection
/// counters go to `state`'s metrics, and connections count against
/// `state`'s connection slots (the node's).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    state: AppState,
    limits: ListenerLimits,
    tls: Option<Arc<TlsAcceptor>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    // Logged once each time the cap is reached, not once per connection.
    let mut at_cap = false;
    // Both listeners' cap under the open-file limit (descriptors kept for
    // the store: `tidelog_runtime::connections`).
    let fd_slots = state.connection_slots();
    // Accept errors (out of descriptors) warned at most once per this.
    let mut accept_warned: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            () = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let metrics = state.connection_metrics();
                    // Only this loop adds to `open`, so the check holds
                    // until the increment below.
                    if metrics.open.load(Ordering::Relaxed) >= limits.max_connections {
                        metrics.rejected_over_limit.fetch_add(1, Ordering::Relaxed);
                        if !at_cap {
                            at_cap = true;
                            tracing::warn!(
                                max_connections = limits.max_connections,
                                "http.max_connections reached: closing new connections at once"
                            );
                        }
                        drop(stream);
                        continue;
                    }
                    at_cap = false;
                    // Closed at once past the shared cap (counted and
                    // warned there), so the store keeps its descriptors.
                    let Some(fd_slot) = fd_slots.try_open("http") else {
                        drop(stream);
                        continue;
                    };
                    let open = OpenConnection::count(state.clone());
                    let (app, stop, tls) = (app.clone(), stop.clone(), tls.clone());
                    connections.spawn(async move {
                        let served = match tls {
                            None => serve_connection(stream, peer, app, open, limits, None, stop).await,
                            // A failed handshake is counted and logged by
                            // the acceptor; the connection just ends.
                            Some(tls) => match tls.accept(stream, "http", peer).await {
                                Ok((stream, identity)) => {
                                    serve_connection(stream, peer, app, open, limits, Some(identity), stop).await
                                }
                                Err(_) => Ok(()),
                            },
                        };
                        if let Err(e) = served {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                        }
                        drop(fd_slot);
                    });
                }
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    if accept_warned.is_none_or(|at| at.elapsed() >= ACCEPT_ERROR_WARN_INTERVAL) {
                        tracing::warn!(error = %e, "accepting a connection failed");
                        accept_warned = Some(std::time::Instant::now());
                    }
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    tracing::info!(
        open = connections.len(),
        "no longer accepting; waiting for open connections"
    );
    while connections.join_next().await.is_some() {}
}

/// Returns once `stop` is `true` (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// An error of one connection that went away before it was accepted.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The client's address, in every request's extensions (ACLs that name
/// hosts; `crate::login`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// One HTTP/1.1 connection, until it closes, times out or shuts down;
/// `peer_identity`: its TLS client's, put in every request's extensions
/// beside its address.
async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    peer: std::net::SocketAddr,
    app: Router,
    open: OpenConnection,
    limits: ListenerLimits,
    peer_identity: Option<PeerIdentity>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), hyper::Error> {
    let clock = Arc::new(Clock::new(Instant::now()));
    let io = TokioIo::new(TimedIo {
        stream,
        gate: Gate::Head(Vec::new()),
        released: Vec::new(),
        released_at: 0,
        clock: Arc::clone(&clock),
        limits,
        state: open.state.clone(),
        stop: stop.clone(),
        timer: Box::pin(tokio::time::sleep(limits.idle_timeout)),
        write_blocked_since: None,
        write_timer: Box::pin(tokio::time::sleep(limits.write_timeout)),
    });
    let app = TowerToHyperService::new(app);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        // hyper calls the service once the headers are in.
        clock.busy();
        let mut request = request.map(|body| TrackedIncoming::new(body, Arc::clone(&clock)));
        request.extensions_mut().insert(PeerAddr(peer));
        if let Some(identity) = &peer_identity {
            request.extensions_mut().insert(identity.clone());
        }
        let response_done = ResponseDone(Arc::clone(&clock));
        let answer = hyper::service::Service::call(&app, request);
        async move {
            let response = answer.await?;
            Ok::<_, std::convert::Infallible>(response.map(|body| TrackedBody {
                body,
                _done: response_done,
            }))
        }
    });
    let mut builder = http1::Builder::new();
    // The header and idle timeouts are `TimedIo`'s (module doc).
    builder.header_read_timeout(None);
    // hyper's limits stay above the head check's (`crate::head`).
    builder.max_headers(head::MAX_HEADERS);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            conn.as_mut().await
        }
    };
    drop(open);
    result
}

/// Counts a connection in `tidelog_http_connections` while it lives.
struct OpenConnection {
    state: AppState,
}

impl OpenConnection {
    fn count(state: AppState) -> OpenConnection {
        state
            .connection_metrics()
            .open
            .fetch_add(1, Ordering::Relaxed);
        OpenConnection { state }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.state
            .connection_metrics()
            .open
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Where a connection is between its requests (module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Accepted, no byte yet (since then).
    Fresh(Instant),
    /// A response was written and no byte of the next request came yet.
    Idle(Instant),
    /// Part of a request's headers came (its first byte then).
    Headers(Instant),
    /// The router has the request: reading its body, handling it or
    /// writing its response.
    Busy,
}

/// A connection's [`Phase`], shared by its reads, its service and its
/// response bodies (all polled by the connection's one task).
#[derive(Debug)]
struct Clock {
    state: Mutex<ClockState>,
}

#[derive(Debug)]
struct ClockState {
    phase: Phase,
    /// The current request's body has been read to its end (or it has
    /// none): the next bytes after its response are a new head.
    body_done: bool,
    /// The waker of the last read that found no bytes. hyper may have
    /// polled its read (and got `Pending` without a deadline) before the
    /// response ended; becoming idle wakes it, so the read runs again and
    /// arms the idle deadline.
    reader: Option<Waker>,
}

impl Clock {
    fn new(accepted: Instant) -> Clock {
        Clock {
            state: Mutex::new(ClockState {
                phase: Phase::Fresh(accepted),
                body_done: true,
                reader: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn phase(&self) -> Phase {
        self.lock().phase
    }

    /// The router has the request.
    fn busy(&self) {
        let mut state = self.lock();
        state.phase = Phase::Busy;
        state.body_done = false;
    }

    /// The request's body was read to its end.
    fn body_done(&self) {
        self.lock().body_done = true;
    }

    /// Whether the next bytes read start a new request head: no request
    /// is being served, and the last one's body was read whole (else
    /// hyper reads what is left of it, or closes the connection).
    fn expects_head(&self) -> bool {
        let state = self.lock();
        match state.phase {
            Phase::Fresh(_) => true,
            Phase::Idle(_) | Phase::Headers(_) => state.body_done,
            Phase::Busy => false,
        }
    }

    /// The response was written.
    fn idle(&self, now: Instant) {
        let mut state = self.lock();
        state.phase = Phase::Idle(now);
        if let Some(reader) = &state.reader {
            reader.wake_by_ref();
        }
    }

    /// Bytes came: the first byte of a request starts its header clock.
    fn bytes_read(&self, now: Instant) {
        let mut state = self.lock();
        if let Phase::Fresh(_) | Phase::Idle(_) = state.phase {
            state.phase = Phase::Headers(now);
        }
    }

    fn read_pending(&self, waker: &Waker) {
        let mut state = self.lock();
        if !state.reader.as_ref().is_some_and(|w| w.will_wake(waker)) {
            state.reader = Some(waker.clone());
        }
    }
}

/// Moves the clock to idle when the response body is dropped: hyper drops
/// it once the last frame is written.
struct ResponseDone(Arc<Clock>);

impl Drop for ResponseDone {
    fn drop(&mut self) {
        self.0.idle(Instant::now());
    }
}

/// The request body, unchanged, telling the clock when it has been read
/// to its end ([`Clock::expects_head`]).
struct TrackedIncoming {
    body: Incoming,
    clock: Arc<Clock>,
}

impl TrackedIncoming {
    fn new(body: Incoming, clock: Arc<Clock>) -> TrackedIncoming {
        if hyper::body::Body::is_end_stream(&body) {
            clock.body_done();
        }
        TrackedIncoming { body, clock }
    }
}

impl hyper::body::Body for TrackedIncoming {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => hyper::body::Body::is_end_stream(&self.body),
            _ => false,
        };
        if ended {
            self.clock.body_done();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> SizeHint {
        hyper::body::Body::size_hint(&self.body)
    }
}

/// The router's response body, unchanged, with a [`ResponseDone`].
struct TrackedBody {
    body: Body,
    _done: ResponseDone,
}

impl hyper::body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The connection's socket (or its TLS stream), whose reads fail with
/// `TimedOut` once the phase's deadline has passed with no byte to read
/// (module doc).
struct TimedIo<S> {
    stream: S,
    /// Where the request head check is (module doc, [`crate::head`]).
    gate: Gate,
    /// Bytes read and checked (a head and what came after it in the same
    /// reads), not yet handed to hyper; from `released_at`.
    released: Vec<u8>,
    released_at: usize,
    clock: Arc<Clock>,
    limits: ListenerLimits,
    state: AppState,
    stop: watch::Receiver<bool>,
    /// Wakes the connection at the current deadline; reset when it moves.
    timer: Pin<Box<Sleep>>,
    /// When a write last found the socket full with no byte taken since;
    /// `None` while writes make progress.
    write_blocked_since: Option<Instant>,
    /// Wakes the connection at the write deadline (its own timer: hyper
    /// polls a read and a write of one connection in the same task, and
    /// one timer for both would be reset back and forth).
    write_timer: Pin<Box<Sleep>>,
}

/// The head check of a connection's reads.
enum Gate {
    /// The bytes read are a request head's: collected here, not handed to
    /// hyper until [`crate::head::check`] passes them.
    Head(Vec<u8>),
    /// The head passed: reads go to hyper as they come until the next
    /// request's head ([`Clock::expects_head`]). `expected`: the head's
    /// and body's bytes (`None`: a body framed by its chunks), `handed`:
    /// the bytes hyper got since the head began; the next head is checked
    /// only when they are equal, else hyper holds bytes past the body (a
    /// pipelined request) and the gate turns [`Gate::Off`].
    Passed { expected: Option<u64>, handed: u64 },
    /// No more checks on this connection (see [`Gate::Passed`]): hyper
    /// parses, and refuses, heads itself.
    Off,
    /// The head was refused (module doc): its answer is written, the
    /// write side shut (the client sees the end after the answer), and
    /// what the client still sends is read and dropped, at most
    /// [`LINGER_MAX_BYTES`] within the header deadline, so the close is
    /// not a reset that could destroy the answer in the client's buffers;
    /// then the stream ends for hyper, which has seen nothing of the head.
    Refused(Refusal),
}

/// Where the answer to a refused head is.
struct Refusal {
    answer: Vec<u8>,
    written: usize,
    shut: bool,
    dropped: usize,
}

/// Most bytes read and dropped after a refused head's answer.
const LINGER_MAX_BYTES: usize = 256 * 1024;

/// Which timeout closed a connection.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expired {
    Headers,
    Idle,
    /// Shutting down: a connection that has not handed a request to the
    /// router is closed at once (module doc).
    Shutdown,
}

impl<S: AsyncRead + AsyncWrite + Unpin> TimedIo<S> {
    /// The current deadline and what it is, `None` while busy.
    fn deadline(&self) -> Option<(Instant, Expired)> {
        let phase = self.clock.phase();
        if *self.stop.borrow() {
            if let Phase::Fresh(_) | Phase::Headers(_) = phase {
                return Some((Instant::now(), Expired::Shutdown));
            }
        }
        match phase {
            Phase::Fresh(since) | Phase::Idle(since) => {
                Some((since + self.limits.idle_timeout, Expired::Idle))
            }
            Phase::Headers(since) => {
                Some((since + self.limits.header_read_timeout, Expired::Headers))
            }
            Phase::Busy => None,
        }
    }

    fn expire(&self, why: Expired) -> io::Error {
        let metrics = self.state.connection_metrics();
        let (counter, message) = match why {
            Expired::Headers => (
                Some(&metrics.header_read_timeouts),
                "request headers not received within http.header_read_timeout_ms",
            ),
            Expired::Idle => (
                Some(&metrics.idle_timeouts),
                "connection idle for http.idle_timeout_ms",
            ),
            Expired::Shutdown => (None, "shutting down before a request was received"),
        };
        if let Some(counter) = counter {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        io::Error::new(io::ErrorKind::TimedOut, message)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TimedIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // Checked bytes first, as they came.
        if this.released_at < this.released.len() {
            let n = buf.remaining().min(this.released.len() - this.released_at);
            buf.put_slice(&this.released[this.released_at..this.released_at + n]);
            this.released_at += n;
            if this.released_at == this.released.len() {
                this.released = Vec::new();
                this.released_at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        if let Gate::Passed { expected, handed } = this.gate {
            if this.clock.expects_head() {
                this.gate = if expected == Some(handed) {
                    Gate::Head(Vec::new())
                } else {
                    Gate::Off
                };
            }
        }
        match this.gate {
            Gate::Passed { .. } | Gate::Off => {}
            Gate::Head(_) | Gate::Refused(..) => return this.poll_head(cx, buf),
        }
        let filled_before = buf.filled().len();
        if let Poll::Ready(result) = Pin::new(&mut this.stream).poll_read(cx, buf) {
            let read = buf.filled().len() - filled_before;
            if read > 0 {
                this.clock.bytes_read(Instant::now());
            }
            if let Gate::Passed { handed, .. } = &mut this.gate {
                *handed += read as u64;
            }
            return Poll::Ready(result);
        }
        this.poll_deadline(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TimedIo<S> {
    /// A read while a head is expected: bytes are collected and checked
    /// until the head is whole (then handed to hyper with what followed
    /// it), or refused (then answered here and the stream ends for hyper).
    fn poll_head(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            match &mut self.gate {
                Gate::Passed { .. } | Gate::Off => return Poll::Ready(Ok(())),
                Gate::Refused(r) => {
                    if r.written < r.answer.len() {
                        match Pin::new(&mut self.stream).poll_write(cx, &r.answer[r.written..]) {
                            Poll::Ready(Ok(n)) if n > 0 => {
                                r.written += n;
                                continue;
                            }
                            // The client is gone: the end for hyper too.
                            Poll::Ready(_) => return Poll::Ready(Ok(())),
                            Poll::Pending => return self.poll_deadline(cx),
                        }
                    }
                    if !r.shut {
                        match Pin::new(&mut self.stream).poll_shutdown(cx) {
                            Poll::Ready(_) => r.shut = true,
                            Poll::Pending => return self.poll_deadline(cx),
                        }
                    }
                    let mut chunk = [0u8; 8192];
                    let mut read = ReadBuf::new(&mut chunk);
                    match Pin::new(&mut self.stream).poll_read(cx, &mut read) {
                        Poll::Ready(Ok(())) if !read.filled().is_empty() => {
                            r.dropped += read.filled().len();
                            if r.dropped > LINGER_MAX_BYTES {
                                return Poll::Ready(Ok(()));
                            }
                        }
                        // Closed by the client, or failed: the end for
                        // hyper (nothing of this head reached it), which
                        // closes the connection.
                        Poll::Ready(_) => return Poll::Ready(Ok(())),
                        Poll::Pending => return self.poll_deadline(cx),
                    }
                }
                Gate::Head(collected) => {
                    let mut chunk = [0u8; 8192];
                    let mut read = ReadBuf::new(&mut chunk);
                    match Pin::new(&mut self.stream).poll_read(cx, &mut read) {
                        Poll::Ready(Ok(())) if read.filled().is_empty() => {
                            // The client closed: hyper sees what it would
                            // have (the end, after a partial head or none).
                            return Poll::Ready(Ok(()));
                        }
                        Poll::Ready(Ok(())) => {
                            let worth = head::worth_checking(collected.len(), read.filled());
                            collected.extend_from_slice(read.filled());
                            if !worth {
                                self.clock.bytes_read(Instant::now());
                                continue;
                            }
                        }
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Pending => return self.poll_deadline(cx),
                    }
                    self.clock.bytes_read(Instant::now());
                    let Gate::Head(collected) = &mut self.gate else {
                        continue;
                    };
                    match head::check(collected) {
                        head::Head::Partial => {}
                        head::Head::Complete { len, body } => {
                            self.released = std::mem::take(collected);
                            self.released_at = 0;
                            self.gate = Gate::Passed {
                                expected: body.map(|b| b.saturating_add(len as u64)),
                                handed: self.released.len() as u64,
                            };
                            let n = buf.remaining().min(self.released.len());
                            buf.put_slice(&self.released[..n]);
                            self.released_at = n;
                            return Poll::Ready(Ok(()));
                        }
                        head::Head::Refused(error) => {
                            self.state
                                .connection_metrics()
                                .rejected_heads
                                .fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(
                                error_code = error.error_code(),
                                error = %error,
                                "request head refused before routing"
                            );
                            self.gate = Gate::Refused(Refusal {
                                answer: head::answer(&error),
                                written: 0,
                                shut: false,
                                dropped: 0,
                            });
                        }
                    }
                }
            }
        }
    }

    /// No byte to read: past the phase's deadline the connection ends,
    /// else the read waits for bytes or the deadline.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self;
        this.clock.read_pending(cx.waker());
        let Some((deadline, why)) = this.deadline() else {
            return Poll::Pending;
        };
        if deadline <= Instant::now() {
            return Poll::Ready(Err(this.expire(why)));
        }
        if this.timer.deadline() != deadline {
            this.timer.as_mut().reset(deadline);
        }
        match this.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(this.expire(why))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TimedIo<S> {
    /// A write's outcome, with the write deadline applied: progress clears
    /// the clock, a blocked write starts it (if not running) and fails
    /// once it has run for `write_timeout` (module doc).
    fn timed_write(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if written.is_ready() {
            self.write_blocked_since = None;
            return written;
        }
        let now = Instant::now();
        let deadline = *self.write_blocked_since.get_or_insert(now) + self.limits.write_timeout;
        if deadline > now {
            if self.write_timer.deadline() != deadline {
                self.write_timer.as_mut().reset(deadline);
            }
            if self.write_timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        self.state
            .connection_metrics()
            .write_timeouts
            .fetch_add(1, Ordering::Relaxed);
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "response write made no progress for http.write_timeout_ms",
        )))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TimedIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.timed_write(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.timed_write(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Gate::Refused(Refusal { shut: true, .. }) = this.gate {
            return Poll::Ready(Ok(())); // shut after the refusal's answer
        }
        Pin::new(&mut this.stream).poll_shutdown(cx)
    }
}
