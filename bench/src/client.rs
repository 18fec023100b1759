//! The load generator's HTTP client: one HTTP/1.1 keep-alive connection
//! per load task (hyper's client connection, no pool; TLS only towards an
//! HTTPS target, `secure.rs`), so the client spends as little of the
//! machine's CPU as it can; the server under test shares the same cores.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;

use crate::secure::{self, Secure};

/// How long one request may take before the bench calls it failed; well
/// above the longest long-poll it sends (1 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One keep-alive connection to `addr`.
pub struct Conn {
    addr: SocketAddr,
    host: String,
    /// `Authorization` of every request (an HTTPS target's bearer token).
    authorization: Option<HeaderValue>,
    send: SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
}

/// A complete answer.
pub struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Conn {
    /// A plain HTTP connection.
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<Conn> {
        Conn::connect_secure(addr, None).await
    }

    /// An HTTP connection, over TLS (with its bearer token) when `secure`.
    pub(crate) async fn connect_secure(
        addr: SocketAddr,
        secure: Option<&Secure>,
    ) -> anyhow::Result<Conn> {
        let stream = secure::connect(addr, secure).await?;
        let authorization = match secure.and_then(Secure::bearer) {
            Some(token) => Some(
                HeaderValue::from_str(&format!("Bearer {token}"))
                    .context("a bearer token that is not a header value")?,
            ),
            None => None,
        };
        let (send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .with_context(|| format!("HTTP handshake with {addr}"))?;
        // The connection future drives the socket; it ends when `send` is
        // dropped or the server closes.
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            addr,
            host: addr.to_string(),
            authorization,
            send,
            driver,
        })
    }

    /// `POST path` with `body` of `content_type`.
    pub async fn post(
        &mut self,
        path: &str,
        content_type: &'static str,
        body: Bytes,
    ) -> anyhow::Result<Answer> {
        self.post_with(path, content_type, &[], body).await
    }

    /// [`Conn::post`] with `headers` added (the failover probe's
    /// `x-tidelog-forwarded-by`).
    pub(crate) async fn post_with(
        &mut self,
        path: &str,
        content_type: &'static str,
        headers: &[(&'static str, &'static str)],
        body: Bytes,
    ) -> anyhow::Result<Answer> {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(HOST, &self.host)
            .header(CONTENT_TYPE, content_type);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(body))
            .context("building a POST request")?;
        self.send(request).await
    }

    /// `GET path` with `Accept: accept`.
    pub async fn get(&mut self, path: &str, accept: &'static str) -> anyhow::Result<Answer> {
        let request = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(HOST, &self.host)
            .header(ACCEPT, accept)
            .body(Full::new(Bytes::new()))
            .context("building a GET request")?;
        self.send(request).await
    }

    /// The number `field` of the JSON object `GET path` answers (a
    /// stats page): an error naming the path when the answer is not 200,
    /// not JSON, or has no such unsigned number.
    pub(crate) async fn stats_field(&mut self, path: &str, field: &str) -> anyhow::Result<u64> {
        let answer = self.get(path, "application/json").await?;
        if answer.status != StatusCode::OK {
            bail!("GET {path}: status {}", answer.status);
        }
        let body: serde_json::Value = serde_json::from_slice(&answer.body)
            .with_context(|| format!("GET {path}: not JSON"))?;
        body[field]
            .as_u64()
            .ok_or_else(|| anyhow!("GET {path}: no {field} in {body}"))
    }

    async fn send(&mut self, mut request: Request<Full<Bytes>>) -> anyhow::Result<Answer> {
        if let Some(value) = &self.authorization {
            request.headers_mut().insert(AUTHORIZATION, value.clone());
        }
        let what = format!("{} {}", request.method(), request.uri());
        let work = async {
            self.send.ready().await?;
            let response = self.send.send_request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>(Answer { status, body })
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, work).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(anyhow!("{what} to {}: {e}", self.addr)),
            Err(_) => bail!(
                "{what} to {}: no answer within {REQUEST_TIMEOUT:?}",
                self.addr
            ),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Polls `GET /status/ready` on fresh connections until it answers 200,
/// for at most `timeout` (checking `alive` between attempts, so a server
/// that died is reported at once rather than after the timeout).
pub async fn wait_ready(
    addr: SocketAddr,
    timeout: Duration,
    alive: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    wait_ready_secure(addr, None, timeout, alive).await
}

/// [`wait_ready`] over TLS when `secure` (an HTTPS server).
pub(crate) async fn wait_ready_secure(
    addr: SocketAddr,
    secure: Option<&Secure>,
    timeout: Duration,
    mut alive: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    const POLL: Duration = Duration::from_millis(50);
    let deadline = Instant::now() + timeout;
    let mut last = String::from("no attempt yet");
    while Instant::now() < deadline {
        alive()?;
        match Conn::connect_secure(addr, secure).await {
            Ok(mut conn) => match conn.get("/status/ready", "application/json").await {
                Ok(answer) if answer.status == StatusCode::OK => return Ok(()),
                Ok(answer) => last = format!("status {}", answer.status),
                Err(e) => last = e.to_string(),
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(POLL).await;
    }
    bail!("{addr} was not ready within {timeout:?} (last: {last})")
}

/// How many times `needle` occurs in `haystack` (non-overlapping is the
/// same here: the needles used cannot overlap themselves).
pub fn count_occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    if needle.is_empty() || haystack.len() < needle.len() {
        return 0;
    }
    let first = needle[0];
    let mut count = 0;
    let mut at = 0;
    let last_start = haystack.len() - needle.len();
    while at <= last_start {
        match haystack[at..=last_start].iter().position(|&b| b == first) {
            None => break,
            Some(skip) => {
                at += skip;
                if haystack[at..at + needle.len()] == *needle {
                    count += 1;
                    at += needle.len();
                } else {
                    at += 1;
                }
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_needles() {
        let n = b"\"offset\":";
        assert_eq!(count_occurrences(b"", n), 0);
        assert_eq!(count_occurrences(b"\"offset\"", n), 0);
        assert_eq!(count_occurrences(b"\"offset\":1", n), 1);
        assert_eq!(
            count_occurrences(b"{\"offsets\":[{\"offset\":0},{\"offset\":1}]}", n),
            2
        );
        assert_eq!(count_occurrences(b"xx\"offset\":", n), 1);
    }
}
