//! The client's HTTP side: one plain HTTP/1.1 keep-alive connection to the
//! server (hyper's client connection, reopened when the server closed it
//! between requests), JSON in and out, and the mapping of an error answer
//! to [`CliError::Server`] with the server's `error_code` and `message`.
//!
//! A request is never re-sent after it went out: a produce that broke
//! mid-way may have been appended, and sending it again could write its
//! records twice. Only a connection found closed before sending is
//! reopened.

use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::error::CliError;

/// The longest a request may take: above the longest wait the client asks
/// for (a fetch's 30 s long-poll, `compact --wait`'s 60 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub const JSON: &str = "application/json";
/// REST Proxy's binary embedded format: keys, values and header values in
/// base64, so any bytes go through unchanged.
pub const BINARY: &str = "application/vnd.kafka.binary.v2+json";
pub const JSON_RECORDS: &str = "application/vnd.kafka.json.v2+json";

/// Where the server is: `--url`, split once.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `host:port`, for the connection and the `Host` header.
    authority: String,
    /// The host alone (no brackets around an IPv6 address): the name the
    /// server's certificate must carry.
    host: String,
    /// `https://`.
    pub tls: bool,
    /// A path prefix (a proxy's mount point), without the trailing `/`.
    prefix: String,
    /// `--url` as given, for messages.
    url: String,
}

impl Endpoint {
    /// `http://host[:port][/prefix]` or `https://...` (the server's
    /// `http.tls`; `crate::tls`).
    pub fn parse(url: &str) -> Result<Endpoint, CliError> {
        let (tls, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (false, rest),
            (None, Some(rest)) => (true, rest),
            (None, None) => {
                return Err(CliError::usage(format!(
                    "--url {url:?}: an http:// or https:// URL (http://host:port)"
                )))
            }
        };
        let (authority, prefix) = match rest.find('/') {
            Some(slash) => (&rest[..slash], rest[slash..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(CliError::usage(format!("--url {url:?}: no host")));
        }
        let has_port = match authority.rfind(':') {
            Some(colon) => !authority[colon..].contains(']'),
            None => false,
        };
        let host = match authority.rfind(':') {
            Some(colon) if has_port => &authority[..colon],
            _ => authority,
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let authority = if has_port {
            authority.to_string()
        } else if tls {
            format!("{authority}:443")
        } else {
            format!("{authority}:80")
        };
        Ok(Endpoint {
            authority,
            host,
            tls,
            prefix: prefix.to_string(),
            url: url.to_string(),
        })
    }
}

/// An answer with a success status.
pub struct Answer {
    pub body: Bytes,
}

/// What the client proves who it is with.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// The admin token, as `Bearer`, on the calls that change something.
    pub token: Option<String>,
    /// A user and password, as HTTP Basic, on every call.
    pub login: Option<Login>,
}

/// A user's login; its `Debug` hides the password.
#[derive(Clone)]
pub struct Login {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// One connection's worth of client: the endpoint, the credentials, the
/// open connection if any.
pub struct Client {
    endpoint: Endpoint,
    credentials: Credentials,
    /// For an `https://` endpoint.
    tls: Option<tokio_rustls::TlsConnector>,
    connection: Option<Connection>,
}

struct Connection {
    send: SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Client {
    pub fn new(
        endpoint: Endpoint,
        credentials: Credentials,
        tls: Option<tokio_rustls::TlsConnector>,
    ) -> Client {
        Client {
            endpoint,
            credentials,
            tls,
            connection: None,
        }
    }

    /// Another client to the same server with its own connection (one per
    /// partition a consumer reads at once).
    pub fn another(&self) -> Client {
        Client::new(
            self.endpoint.clone(),
            self.credentials.clone(),
            self.tls.clone(),
        )
    }

    /// Drops the connection (after a request was cut off mid-way: the
    /// next request opens a fresh one).
    pub fn disconnect(&mut self) {
        self.connection = None;
    }

    async fn connect(&self) -> Result<Connection, CliError> {
        let connect_error = |source| CliError::Connect {
            url: self.endpoint.url.clone(),
            source,
        };
        let stream = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect(self.endpoint.authority.as_str()),
        )
        .await
        .map_err(|_| {
            connect_error(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no connection within {CONNECT_TIMEOUT:?}"),
            ))
        })?
        .map_err(connect_error)?;
        let _ = stream.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return handshake(stream).await.map_err(connect_error);
        };
        let name = rustls_pki_types::ServerName::try_from(self.endpoint.host.clone())
            .map_err(|e| CliError::usage(format!("--url {}: {e}", self.endpoint.url)))?;
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, tls.connect(name, stream))
            .await
            .map_err(|_| {
                connect_error(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no TLS handshake within {CONNECT_TIMEOUT:?}"),
                ))
            })?
            .map_err(connect_error)?;
        handshake(stream).await.map_err(connect_error)
    }

    /// Sends one request; an error status becomes [`CliError::Server`].
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        content_type: Option<&'static str>,
        accept: Option<&'static str>,
        body: Bytes,
    ) -> Result<Answer, CliError> {
        let what = format!("{method} {path}");
        let transport = |reason: String| CliError::Transport {
            what: what.clone(),
            reason,
        };
        let mut request = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.endpoint.prefix))
            .header(HOST, &self.endpoint.authority);
        if let Some(content_type) = content_type {
            request = request.header(CONTENT_TYPE, content_type);
        }
        if let Some(accept) = accept {
            request = request.header(ACCEPT, accept);
        }
        // A user's login goes with every request (a server requiring
        // logins asks it of reads too). The token goes only where the API
        // asks for it: reads need none, and a token not sent cannot leak
        // through a proxy's access log.
        if let Some(login) = &self.credentials.login {
            let pair = format!("{}:{}", login.user, login.password);
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            request = request.header(AUTHORIZATION, format!("Basic {encoded}"));
        } else if let Some(token) = self
            .credentials
            .token
            .as_ref()
            .filter(|_| method != Method::GET)
        {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| CliError::usage(format!("{what}: cannot build the request: {e}")))?;

        // A keep-alive connection the server closed while idle is reopened;
        // the request has not gone out yet.
        let reusable = match self.connection.as_mut() {
            Some(c) => !c.send.is_closed() && c.send.ready().await.is_ok(),
            None => false,
        };
        if !reusable {
            self.connection = Some(self.connect().await?);
        }
        let Some(connection) = self.connection.as_mut() else {
            return Err(transport("no connection".into()));
        };
        let exchange = async {
            connection.send.ready().await?;
            let response = connection.send.send_request(request).await?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>((status, body))
        };
        let (status, body) = match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                self.connection = None;
                return Err(transport(format!(
                    "connection to {}: {e}",
                    self.endpoint.url
                )));
            }
            Err(_) => {
                self.connection = None;
                return Err(transport(format!("no answer within {REQUEST_TIMEOUT:?}")));
            }
        };
        if status >= 400 {
            return Err(server_error(what, status, &body));
        }
        Ok(Answer { body })
    }

    /// `GET path` answered with JSON.
    pub async fn get_json(&mut self, path: &str) -> Result<Value, CliError> {
        let answer = self
            .send(Method::GET, path, None, Some(JSON), Bytes::new())
            .await?;
        parse_json(&format!("GET {path}"), &answer.body)
    }

    /// `method path` with a JSON body (`application/json`); an empty
    /// answer (204) is `Value::Null`.
    pub async fn send_json(
        &mut self,
        method: Method,
        path: &str,
        body: &Value,
    ) -> Result<Value, CliError> {
        let what = format!("{method} {path}");
        let answer = self
            .send(
                method,
                path,
                Some(JSON),
                Some(JSON),
                Bytes::from(body.to_string()),
            )
            .await?;
        parse_json(&what, &answer.body)
    }

    /// The server's cluster id, for the `/v3/clusters/{c}/…` routes.
    pub async fn cluster_id(&mut self) -> Result<String, CliError> {
        let clusters = self.get_json("/v3/clusters").await?;
        clusters["data"][0]["cluster_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| CliError::BadAnswer {
                what: "GET /v3/clusters".into(),
                reason: format!("no cluster_id in {clusters}"),
            })
    }
}

/// HTTP/1.1 over `stream` (plain or TLS), its connection driven by a
/// task of its own.
async fn handshake<S>(stream: S) -> std::io::Result<Connection>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(Connection { send, driver })
}

/// An empty body is `Null`; anything else must be JSON.
pub fn parse_json(what: &str, body: &[u8]) -> Result<Value, CliError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|e| CliError::BadAnswer {
        what: what.to_string(),
        reason: format!("not JSON ({e}): {}", String::from_utf8_lossy(body)),
    })
}

/// API.md's error body, `{"error_code","message"}`, or the raw text when a
/// proxy in between answered something else.
fn server_error(what: String, status: u16, body: &[u8]) -> CliError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error_code = parsed
        .as_ref()
        .and_then(|v| v.get("error_code"))
        .and_then(Value::as_i64);
    let message = parsed
        .as_ref()
        .and_then(|v| v.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    CliError::Server {
        what,
        status,
        error_code,
        message,
    }
}

/// Percent-encodes a path segment or query value (names are restricted by
/// the server, but a user may type anything; the server then answers its
/// own error about the name, not a confused route).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        let e = Endpoint::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.prefix.as_str()),
            ("127.0.0.1:8080", "")
        );
        let e = Endpoint::parse("http://logs.internal/tidelog/").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.prefix.as_str()),
            ("logs.internal:80", "/tidelog")
        );
        let e = Endpoint::parse("http://[::1]:9").unwrap();
        assert_eq!(e.authority, "[::1]:9");
        let e = Endpoint::parse("http://[::1]").unwrap();
        assert_eq!(e.authority, "[::1]:80");
        let e = Endpoint::parse("https://logs.internal").unwrap();
        assert!(e.tls);
        assert_eq!(
            (e.authority.as_str(), e.host.as_str()),
            ("logs.internal:443", "logs.internal")
        );
        let e = Endpoint::parse("https://[::1]:8443").unwrap();
        assert_eq!(e.host, "::1");
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("127.0.0.1:8080").is_err());
        assert!(Endpoint::parse("http:///x").is_err());
    }

    #[test]
    fn error_bodies_keep_the_servers_words() {
        let e = server_error(
            "GET /topics/x".into(),
            404,
            br#"{"error_code":40401,"message":"topic \"x\" does not exist"}"#,
        );
        assert!(matches!(
            &e,
            CliError::Server { status: 404, error_code: Some(40401), message, .. }
                if message == "topic \"x\" does not exist"
        ));
        let e = server_error("GET /".into(), 502, b"Bad Gateway\n");
        assert!(
            matches!(&e, CliError::Server { error_code: None, message, .. } if message == "Bad Gateway")
        );
    }

    #[test]
    fn encoding_leaves_names_alone() {
        assert_eq!(encode("users.v1_a-b"), "users.v1_a-b");
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
    }
}
