//! A replica's writes, forwarded to the master (issue 39; API.md
//! "Cluster"): in a cluster only the master takes writes, and a load
//! balancer over every node must still work, so a replica sends each
//! write it is asked for to the master's HTTP API and answers what the
//! master answered (status, end-to-end headers, body).
//!
//! Which requests ([`forwards`]): every `POST`, `PUT`, `PATCH` and
//! `DELETE`, except the two that act on this node's own files
//! (`…/compaction`, `…/retention`: every node compacts and trims its own
//! logs), and every call under `/consumers/` and `/consumer-groups`
//! whatever its method (the group coordinator that holds consumer
//! instances, members and committed offsets is the master's; a replica's
//! is what it loaded when it opened).
//! Reads are served where they arrive.
//!
//! When ([`route`]): only with a cluster gate, once the broker is ready,
//! and when the gate refuses this node's writes (`may_write`) while
//! naming another node as master. A master past its lease's margin is not
//! forwarded from (it is the master it knows of): its door refuses the
//! write, 503/50301.
//!
//! Rules the forwarding keeps:
//! * The caller's principal: `Authorization` goes through unchanged, and
//!   the master checks the login again and its ACLs against it; this node
//!   has already checked it (and its admin token) as it does for every
//!   request. A caller known by its client certificate (mTLS, no
//!   `Authorization`) is named in [`FORWARDED_PRINCIPAL`], and the
//!   caller's address in [`FORWARDED_FOR`]; the master believes the two
//!   only from a node: a connection whose own certificate names a
//!   principal allowed CLUSTER_ACTION on the cluster (`crate::login`).
//!   Anyone else who sends them is judged as if they were absent, and a
//!   forwarded request without either is the anonymous caller's, never
//!   the forwarding node's.
//! * No loops: a forwarded request carries [`FORWARDED_BY`] (this node's
//!   id), and a request that carries it is never forwarded again: a node
//!   that would forward it answers 503/50301, so two nodes that each think
//!   the other is master cannot pass a request back and forth.
//! * Bounds: the body is the one the router read under
//!   `http.max_request_bytes`, the in-flight budget and the body timeout,
//!   held until the master's answer head arrives; connecting is bounded by
//!   [`CONNECT_TIMEOUT`], the answer head by [`ANSWER_TIMEOUT`], and each
//!   wait for the next bytes of the answer body by [`ANSWER_IDLE_TIMEOUT`].
//!   The answer body is streamed as it comes (one frame held at a time),
//!   so the master's own answer limits bound it. No master known, the
//!   master not reached or not answering in time: 503/50301 saying so.
//! * With `http.tls` the master speaks HTTPS only: the write goes there
//!   over TLS with this node's own certificate (`tls.cert_file`), the
//!   master's checked against `tls.client_ca_file`
//!   ([`Forwarder::over_tls`], installed by the server); a node without
//!   it refuses 503/50301 naming the master.
//!
//! The client is hyper-util's pooled one (`client::legacy`), the same
//! crate reqwest runs on in this workspace, with hyper-rustls for HTTPS:
//! kept connections to the master, a connect timeout, and the answer as a
//! hyper body that streams back without a copy.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::header::{self, HeaderName};
use axum::http::{HeaderMap, HeaderValue, Method, Uri};
use axum::response::Response;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tidelog_broker::cluster::ClusterStatus;
use tidelog_broker::{Broker, Caller, Principal};
use tokio::time::{Instant, Sleep};

use crate::error::ApiError;

/// The header a forwarded request carries: the id of the node that
/// forwarded it (module doc, "No loops").
pub const FORWARDED_BY: &str = "x-tidelog-forwarded-by";

/// The CN of the client certificate the caller of a forwarded request
/// logged in with at the forwarding node (module doc, "The caller's
/// principal").
pub const FORWARDED_PRINCIPAL: &str = "x-tidelog-forwarded-principal";

/// The address the caller of a forwarded request came from.
pub const FORWARDED_FOR: &str = "x-tidelog-forwarded-for";

/// Longest wait for a TCP connection to the master.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Longest wait for the master's answer head, from sending the request:
/// above the longest wait a forwarded call makes on purpose (a consumer
/// instance's records call, 30 s at most, and an acks=all produce's
/// `cluster.replication_timeout_ms`).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest wait for the next bytes of the master's answer body.
pub const ANSWER_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Idle connections kept to one master, and for how long.
const POOL_IDLE_PER_HOST: usize = 32;
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Headers of one connection, not of the request or answer (RFC 9110
/// 7.6.1), and those the forwarding sets itself.
const NOT_FORWARDED: [HeaderName; 11] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::HOST,
    header::CONTENT_LENGTH,
];

/// Whether `method path` is forwarded from a replica (module doc).
pub fn forwards(method: &Method, path: &str) -> bool {
    // The group coordinator's state (consumer instances, members,
    // committed offsets) is the master's: a replica's is what it loaded
    // at its open, and follows no copy.
    let coordinators = path.starts_with("/consumers/")
        || path == "/consumer-groups"
        || path.starts_with("/consumer-groups/");
    if coordinators {
        return true;
    }
    let mutating = matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let node_local = path.starts_with("/v3/clusters/")
        && (path.ends_with("/compaction") || path.ends_with("/retention"));
    mutating && !node_local
}

/// Where a request is served.
#[derive(Debug)]
pub enum Route {
    /// Here, by the router's handler.
    Local,
    /// At the master.
    Forward(Target),
    /// Nowhere: answered with this error (module doc).
    Refuse(ApiError),
}

/// The master a request goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// This node, named in [`FORWARDED_BY`].
    pub from_node: u32,
    pub master: u32,
    /// The master's `host:port`.
    pub address: String,
}

impl Target {
    /// The refusal of a node that cannot reach this HTTPS master: it has
    /// no certificate to forward with (module doc).
    pub fn without_certificate(&self) -> ApiError {
        ApiError::NotReady {
            message: format!(
                "node {} is a replica without a certificate to forward writes over TLS with: send them to the master, node {} at https://{}",
                self.from_node, self.master, self.address
            ),
        }
    }
}

/// Where `method path` with `headers` is served on `broker`'s node
/// (`None`: not ready yet, the handler answers 503). How the master is
/// reached (http or https) is the [`Forwarder`]'s.
pub fn route(broker: Option<&Broker>, method: &Method, path: &str, headers: &HeaderMap) -> Route {
    let Some(gate) = broker.and_then(|b| b.cluster()) else {
        return Route::Local;
    };
    if !forwards(method, path) || gate.may_write().is_ok() {
        return Route::Local;
    }
    decide(&gate.status(), headers)
}

/// [`route`] for a node that may not write, seeing the cluster as
/// `status`.
fn decide(status: &ClusterStatus, headers: &HeaderMap) -> Route {
    if status.master == Some(status.node_id) {
        // The master past its lease's margin: its door refuses.
        return Route::Local;
    }
    let not_ready = |message: String| Route::Refuse(ApiError::NotReady { message });
    if let Some(by) = headers.get(FORWARDED_BY) {
        let by = String::from_utf8_lossy(by.as_bytes()).into_owned();
        return not_ready(format!(
            "node {by} forwarded this write to node {}, which is not the master either (it sees {}); not forwarded again; retry shortly",
            status.node_id,
            status
                .master
                .map_or("no master".to_string(), |m| format!("node {m} as master")),
        ));
    }
    let Some(master) = status.master_node() else {
        return not_ready(match status.master {
            None => format!(
                "node {} is a replica and knows no master now (epoch {}): writes cannot be forwarded; retry shortly",
                status.node_id, status.epoch
            ),
            Some(m) => format!(
                "node {} is a replica; its master, node {m}, is not among the live nodes: writes cannot be forwarded; retry shortly",
                status.node_id
            ),
        });
    };
    Route::Forward(Target {
        from_node: status.node_id,
        master: master.node_id,
        address: master.http.clone(),
    })
}

/// The pooled client to the master (module doc).
#[derive(Debug, Clone)]
pub struct Forwarder {
    client: Pool,
}

#[derive(Debug, Clone)]
enum Pool {
    Plain(Client<HttpConnector, Body>),
    Tls(Client<HttpsConnector<HttpConnector>, Body>),
}

impl Default for Forwarder {
    fn default() -> Self {
        Forwarder {
            client: Pool::Plain(pool(connector())),
        }
    }
}

fn connector() -> HttpConnector {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    connector.set_nodelay(true);
    connector
}

fn pool<C>(connector: C) -> Client<C, Body>
where
    C: hyper_util::client::legacy::connect::Connect + Clone,
{
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(POOL_IDLE_PER_HOST)
        .build(connector)
}

impl Forwarder {
    /// A forwarder to a master that speaks HTTPS only, with `client`:
    /// this node's certificate as its client certificate, the master's
    /// checked against the cluster's CA and the host it is reached by.
    pub fn over_tls(client: Arc<rustls::ClientConfig>) -> Forwarder {
        let mut http = connector();
        // The https connector hands it `https://` URIs.
        http.enforce_http(false);
        let https = HttpsConnectorBuilder::new()
            .with_tls_config((*client).clone())
            .https_only()
            .enable_http1()
            .wrap_connector(http);
        Forwarder {
            client: Pool::Tls(pool(https)),
        }
    }

    /// `http` or `https`.
    fn scheme(&self) -> &'static str {
        match self.client {
            Pool::Plain(_) => "http",
            Pool::Tls(_) => "https",
        }
    }

    /// Sends `request` (its head; `body` read whole by the router) of
    /// `caller` to `target` and answers as the master answered;
    /// 503/50301 when the master cannot be reached or does not answer in
    /// time.
    pub async fn forward(
        &self,
        target: &Target,
        caller: &Caller,
        request: axum::http::request::Parts,
        body: Bytes,
    ) -> Result<Response, ApiError> {
        let length = body.len();
        let unreachable = |why: String| {
            ApiError::NotReady {
            message: format!(
                "node {} is a replica and could not forward this write to the master, node {} at {}: {why}; retry shortly",
                target.from_node, target.master, target.address
            ),
        }
        };
        let path = request.uri.path_and_query().map_or("/", |p| p.as_str());
        let uri: Uri = format!("{}://{}{path}", self.scheme(), target.address)
            .parse()
            .map_err(|e| unreachable(format!("the master's address is not host:port ({e})")))?;
        let mut forwarded = hyper::Request::builder()
            .method(request.method)
            .uri(uri)
            .body(Body::from(body))
            .map_err(|e| unreachable(format!("cannot build the request ({e})")))?;
        let headers = forwarded.headers_mut();
        for (name, value) in &request.headers {
            // The body is here whole: nothing to expect a 100 for. The
            // caller's own word for who it is, or where from, is not
            // passed on.
            if !NOT_FORWARDED.contains(name)
                && *name != header::EXPECT
                && name.as_str() != FORWARDED_PRINCIPAL
                && name.as_str() != FORWARDED_FOR
            {
                headers.append(name, value.clone());
            }
        }
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        headers.insert(FORWARDED_BY, HeaderValue::from(target.from_node));
        // A certificate names the caller only when no `Authorization`
        // came (`crate::login`), so the two never travel together.
        if let Principal::Certificate(cn) = &caller.principal {
            let value = HeaderValue::from_str(cn).map_err(|_| {
                unreachable(
                    "the caller's certificate names a CN that cannot travel in a header".into(),
                )
            })?;
            headers.insert(FORWARDED_PRINCIPAL, value);
        }
        if let Some(Ok(host)) = caller
            .host
            .map(|host| HeaderValue::from_str(&host.to_string()))
        {
            headers.insert(FORWARDED_FOR, host);
        }
        let sent = match &self.client {
            Pool::Plain(client) => client.request(forwarded),
            Pool::Tls(client) => client.request(forwarded),
        };
        let answer = match tokio::time::timeout(ANSWER_TIMEOUT, sent).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Err(unreachable(error_chain(&e))),
            Err(_) => {
                return Err(unreachable(format!(
                    "no answer within {} s",
                    ANSWER_TIMEOUT.as_secs()
                )))
            }
        };
        let (parts, incoming) = answer.into_parts();
        let mut response = Response::new(Body::new(AnswerBody::new(incoming)));
        *response.status_mut() = parts.status;
        let headers = response.headers_mut();
        for (name, value) in &parts.headers {
            if !NOT_FORWARDED.contains(name) {
                headers.append(name, value.clone());
            }
        }
        Ok(response)
    }
}

/// An error and its sources, `: `-joined (hyper's own text is terse:
/// "client error (Connect)").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The master's answer body, streamed, each wait for its next bytes
/// bounded by [`ANSWER_IDLE_TIMEOUT`] (an error then, which ends the
/// client's connection: the answer is cut, never passed as whole).
struct AnswerBody {
    body: Incoming,
    idle: Pin<Box<Sleep>>,
    /// A poll found no bytes and the idle clock runs; a wait counts from
    /// then, not from the last frame (the client may read slowly).
    waiting: bool,
}

impl AnswerBody {
    fn new(body: Incoming) -> AnswerBody {
        AnswerBody {
            body,
            idle: Box::pin(tokio::time::sleep(ANSWER_IDLE_TIMEOUT)),
            waiting: false,
        }
    }
}

impl http_body::Body for AnswerBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.waiting = false;
                Poll::Ready(frame.map(|f| f.map_err(std::io::Error::other)))
            }
            Poll::Pending => {
                if !this.waiting {
                    this.waiting = true;
                    this.idle
                        .as_mut()
                        .reset(Instant::now() + ANSWER_IDLE_TIMEOUT);
                }
                match this.idle.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the master's answer stalled",
                    )))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
#[path = "forward_tests.rs"]
mod tests;
