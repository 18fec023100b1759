//! The client: its endpoints, and one bounded request to the first that
//! can be reached.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::error::EtcdError;
use super::wire::GatewayError;

/// The longest answer read from etcd (a whole body, or one message of a
/// stream); longer is refused before more of it is buffered.
pub const ANSWER_BYTES_MAX: usize = 4 << 20;
/// The most endpoints a client takes (an etcd cluster has a handful).
pub const ENDPOINTS_MAX: usize = 16;

/// A client of etcd's v3 JSON gateway (see the module doc of
/// [`crate::etcd`]). Cheap to clone: clones share the connection pool.
#[derive(Clone, Debug)]
pub struct EtcdClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    /// `http://host:port`, no trailing slash.
    endpoints: Vec<Arc<str>>,
    /// The endpoint that last answered: tried first.
    preferred: AtomicUsize,
    request_timeout: Duration,
}

/// An answer's head, from the endpoint that gave it.
pub(crate) struct Opened {
    pub endpoint: Arc<str>,
    pub response: reqwest::Response,
}

/// Where a request went and what about, for its errors.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub endpoint: &'a str,
    pub path: &'static str,
    pub subject: &'a str,
}

impl Ctx<'_> {
    pub fn bad_answer(&self, reason: impl std::fmt::Display) -> EtcdError {
        EtcdError::BadAnswer {
            endpoint: self.endpoint.into(),
            path: self.path,
            subject: self.subject.into(),
            reason: reason.to_string(),
        }
    }

    pub fn too_large(&self) -> EtcdError {
        EtcdError::AnswerTooLarge {
            endpoint: self.endpoint.into(),
            path: self.path,
            subject: self.subject.into(),
            max: ANSWER_BYTES_MAX,
        }
    }

    pub fn refused(&self, status: u16, code: i32, message: String) -> EtcdError {
        EtcdError::Refused {
            endpoint: self.endpoint.into(),
            path: self.path,
            subject: self.subject.into(),
            status,
            code,
            message,
        }
    }

    pub fn transport(&self, source: reqwest::Error, timeout: Duration) -> EtcdError {
        if source.is_timeout() {
            return EtcdError::Timeout {
                endpoint: self.endpoint.into(),
                path: self.path,
                subject: self.subject.into(),
                timeout,
            };
        }
        EtcdError::Transport {
            endpoint: self.endpoint.into(),
            path: self.path,
            subject: self.subject.into(),
            source,
        }
    }

    pub fn stream_ended(&self) -> EtcdError {
        EtcdError::StreamEnded {
            endpoint: self.endpoint.into(),
            path: self.path,
            subject: self.subject.into(),
        }
    }
}

impl EtcdClient {
    /// A client of the etcd members at `endpoints` (`http://host:port`;
    /// plain http only: this client is built without TLS), each request
    /// bounded by `request_timeout`. Connects lazily.
    pub fn new(endpoints: &[String], request_timeout: Duration) -> Result<EtcdClient, EtcdError> {
        if endpoints.is_empty() {
            return Err(EtcdError::NoEndpoints);
        }
        if endpoints.len() > ENDPOINTS_MAX {
            return Err(EtcdError::InvalidArgument {
                what: "etcd endpoints",
                reason: format!("{} endpoints, more than {ENDPOINTS_MAX}", endpoints.len()),
            });
        }
        if request_timeout.is_zero() {
            return Err(EtcdError::InvalidArgument {
                what: "etcd request timeout",
                reason: "zero".into(),
            });
        }
        let endpoints = endpoints
            .iter()
            .map(|e| validate_endpoint(e))
            .collect::<Result<Vec<_>, _>>()?;
        let http = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(request_timeout)
            .timeout(request_timeout)
            .build()
            .map_err(|source| EtcdError::Client { source })?;
        Ok(EtcdClient {
            inner: Arc::new(Inner {
                http,
                endpoints,
                preferred: AtomicUsize::new(0),
                request_timeout,
            }),
        })
    }

    /// The timeout of one request.
    pub fn request_timeout(&self) -> Duration {
        self.inner.request_timeout
    }

    /// Sends `request` as JSON to `path` and decodes the answer: one
    /// request under the client's timeout.
    pub(crate) async fn call<Q: Serialize, A: DeserializeOwned>(
        &self,
        path: &'static str,
        subject: &str,
        request: &Q,
    ) -> Result<(A, Arc<str>), EtcdError> {
        self.call_within(path, subject, request, self.inner.request_timeout)
            .await
    }

    /// As [`call`](Self::call), under `timeout`.
    pub(crate) async fn call_within<Q: Serialize, A: DeserializeOwned>(
        &self,
        path: &'static str,
        subject: &str,
        request: &Q,
        timeout: Duration,
    ) -> Result<(A, Arc<str>), EtcdError> {
        let (body, endpoint) = self
            .call_raw_within(path, subject, request, timeout)
            .await?;
        let ctx = Ctx {
            endpoint: &endpoint,
            path,
            subject,
        };
        let answer = serde_json::from_slice(&body).map_err(|e| ctx.bad_answer(e))?;
        Ok((answer, endpoint))
    }

    /// The body of a 200 answer to `request`, bounded; any other status is
    /// [`EtcdError::Refused`].
    pub(crate) async fn call_raw_within<Q: Serialize>(
        &self,
        path: &'static str,
        subject: &str,
        request: &Q,
        timeout: Duration,
    ) -> Result<(Vec<u8>, Arc<str>), EtcdError> {
        let Opened {
            endpoint,
            mut response,
        } = self.open(path, subject, request, timeout).await?;
        let ctx = Ctx {
            endpoint: &endpoint,
            path,
            subject,
        };
        let status = response.status().as_u16();
        let body = read_bounded(&ctx, &mut response, timeout).await?;
        if status != 200 {
            return Err(refusal(&ctx, status, &body));
        }
        Ok((body, endpoint))
    }

    /// Sends `request` as JSON to `path` at the first endpoint that
    /// accepts a connection, starting with the one that last answered;
    /// returns the answer's head, its body unread.
    pub(crate) async fn open<Q: Serialize>(
        &self,
        path: &'static str,
        subject: &str,
        request: &Q,
        timeout: Duration,
    ) -> Result<Opened, EtcdError> {
        let inner = &self.inner;
        let body =
            Bytes::from(
                serde_json::to_vec(request).map_err(|e| EtcdError::InvalidArgument {
                    what: "etcd request",
                    reason: format!("{path} {subject}: {e}"),
                })?,
            );
        let count = inner.endpoints.len();
        let first = inner.preferred.load(Ordering::Relaxed) % count;
        let mut unreachable = None;
        for i in 0..count {
            let index = (first + i) % count;
            let endpoint = &inner.endpoints[index];
            let sent = inner
                .http
                .post(format!("{endpoint}{path}"))
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone())
                .timeout(timeout)
                .send()
                .await;
            match sent {
                Ok(response) => {
                    inner.preferred.store(index, Ordering::Relaxed);
                    return Ok(Opened {
                        endpoint: endpoint.clone(),
                        response,
                    });
                }
                // Never sent: the next endpoint may take it.
                Err(e) if e.is_connect() => {
                    tracing::debug!(%endpoint, path, error = %e, "etcd endpoint unreachable");
                    unreachable = Some(e);
                }
                Err(e) => {
                    let ctx = Ctx {
                        endpoint,
                        path,
                        subject,
                    };
                    return Err(ctx.transport(e, timeout));
                }
            }
        }
        match unreachable {
            Some(source) => Err(EtcdError::Unreachable {
                endpoints: inner.endpoints.join(", "),
                path,
                subject: subject.into(),
                source,
            }),
            None => Err(EtcdError::NoEndpoints),
        }
    }
}

fn validate_endpoint(endpoint: &str) -> Result<Arc<str>, EtcdError> {
    let invalid = |reason| EtcdError::InvalidEndpoint {
        endpoint: endpoint.into(),
        reason,
    };
    let url = reqwest::Url::parse(endpoint).map_err(|_| invalid("not a URL"))?;
    if url.scheme() != "http" {
        return Err(invalid(
            "only http:// is supported (the client is built without TLS)",
        ));
    }
    if url.host_str().is_none() {
        return Err(invalid("no host"));
    }
    if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("a path, query or fragment (give http://host:port)"));
    }
    Ok(endpoint.trim_end_matches('/').into())
}

/// The whole body, refused once it is announced or grows past
/// [`ANSWER_BYTES_MAX`].
pub(crate) async fn read_bounded(
    ctx: &Ctx<'_>,
    response: &mut reqwest::Response,
    timeout: Duration,
) -> Result<Vec<u8>, EtcdError> {
    let announced = response.content_length().unwrap_or(0);
    if announced > ANSWER_BYTES_MAX as u64 {
        return Err(ctx.too_large());
    }
    let mut body = Vec::with_capacity(announced as usize);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ctx.transport(e, timeout))?
    {
        if body.len() + chunk.len() > ANSWER_BYTES_MAX {
            return Err(ctx.too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A non-200 answer as a refusal, with etcd's gRPC code and message when
/// the body carries them.
pub(crate) fn refusal(ctx: &Ctx<'_>, status: u16, body: &[u8]) -> EtcdError {
    let error: GatewayError = serde_json::from_slice(body).unwrap_or_default();
    let message = if error.message.is_empty() {
        String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned()
    } else {
        error.message
    };
    ctx.refused(status, error.code, message)
}

/// The first message of a streamed answer (one JSON object per line).
pub(crate) fn first_message(body: &[u8]) -> &[u8] {
    let line = body
        .split(|&b| b == b'\n')
        .find(|l| !l.iter().all(u8::is_ascii_whitespace));
    line.unwrap_or(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_plain_http_urls_without_a_path() {
        assert_eq!(
            &*validate_endpoint("http://127.0.0.1:2379/").unwrap(),
            "http://127.0.0.1:2379"
        );
        for bad in [
            "127.0.0.1:2379",
            "https://h:2379",
            "http://h:2379/v3",
            "http://h:1?x=1",
            "",
        ] {
            assert!(
                matches!(
                    validate_endpoint(bad),
                    Err(EtcdError::InvalidEndpoint { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            EtcdClient::new(&[], Duration::from_secs(1)),
            Err(EtcdError::NoEndpoints)
        ));
        let many = vec!["http://h:1".to_string(); ENDPOINTS_MAX + 1];
        assert!(matches!(
            EtcdClient::new(&many, Duration::from_secs(1)),
            Err(EtcdError::InvalidArgument { .. })
        ));
    }

    #[test]
    fn a_refusal_keeps_etcd_s_code_and_message() {
        let ctx = Ctx {
            endpoint: "http://h:1",
            path: "/v3/lease/revoke",
            subject: "lease 7",
        };
        let body = br#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#;
        match refusal(&ctx, 404, body) {
            EtcdError::Refused {
                status,
                code,
                message,
                ..
            } => {
                assert_eq!((status, code), (404, 5));
                assert_eq!(message, "etcdserver: requested lease not found");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            refusal(&ctx, 502, b"bad gateway"),
            EtcdError::Refused { code: 0, .. }
        ));
    }

    #[test]
    fn a_stream_s_first_message_is_its_first_non_blank_line() {
        assert_eq!(first_message(b"\n{\"a\":1}\n{\"b\":2}\n"), b"{\"a\":1}");
        assert_eq!(first_message(b"{\"a\":1}"), b"{\"a\":1}");
    }
}
