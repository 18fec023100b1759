//! The request head, checked before hyper parses it, so that a head
//! hyper would refuse is answered with API.md's JSON error body instead
//! of hyper's empty one.
//!
//! hyper 1 answers a head it cannot parse (a control character in a
//! header, an over-long URI, too many headers, a head over its buffer)
//! itself, with a bare status line, and offers no hook to change that
//! answer: the error never reaches a service. Rather than rewrite the
//! bytes hyper writes (which would mean telling its error answers from the
//! tail of a previous response in the same write), the listener reads each
//! head itself first ([`check`]), with limits tighter than hyper's and the
//! parser hyper uses (httparse, default config, as hyper's server uses it),
//! and hands hyper only heads that pass. A head that fails is answered
//! here, with the JSON body, and the connection is closed, as hyper does.
//!
//! Limits: [`HEAD_MAX_BYTES`] for the whole head (431/43101),
//! [`URI_MAX_BYTES`] for the request target (414/41401), [`MAX_HEADERS`]
//! header fields (431/43101); anything else httparse or hyper's own checks
//! of the parsed head refuse is 400/40002.
//!
//! hyper's limits stay above these (its 100 headers, 64 KiB URI, ~400 KiB
//! buffer), so a head that passes here is never refused by hyper for a
//! limit. Not covered: a connection on which hyper was handed bytes past
//! a request's body (a client that pipelines requests, or a chunked body,
//! whose end only its framing tells): the listener cannot know where the
//! next head starts in what hyper holds, so from then on that
//! connection's heads get hyper's own answer.

use crate::error::ApiError;

/// Largest request head (request line and headers).
pub const HEAD_MAX_BYTES: usize = 64 * 1024;

/// Longest request target (path and query).
pub const URI_MAX_BYTES: usize = 32 * 1024;

/// Most header fields in a request (hyper's own default).
pub const MAX_HEADERS: usize = 100;

/// Longest request line: the target and room for the method and version.
const REQUEST_LINE_MAX_BYTES: usize = URI_MAX_BYTES + 64;

/// What the bytes of a head so far come to.
#[derive(Debug, PartialEq)]
pub enum Head {
    /// A whole head of `len` bytes, which hyper will accept, and the
    /// length of its body: `Some(0)` without one, `None` when only the
    /// body's own framing says (`Transfer-Encoding`).
    Complete { len: usize, body: Option<u64> },
    /// Not whole yet, and nothing wrong so far.
    Partial,
    /// Refused: answer this and close.
    Refused(ApiError),
}

/// Checks the start of `buf`, the bytes of a request head so far.
pub fn check(buf: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let parsed = request.parse(buf);
    let line_too_long = || {
        Head::Refused(ApiError::UriTooLong {
            message: format!(
                "the request target is longer than the server's limit of {URI_MAX_BYTES} bytes"
            ),
        })
    };
    if request.path.is_some_and(|p| p.len() > URI_MAX_BYTES) {
        return line_too_long();
    }
    match parsed {
        Ok(httparse::Status::Complete(len)) if len > HEAD_MAX_BYTES => head_too_large(),
        Ok(httparse::Status::Complete(len)) => match check_parsed(&request) {
            Ok(body) => Head::Complete { len, body },
            Err(e) => Head::Refused(e),
        },
        Ok(httparse::Status::Partial) => {
            // No request line yet, and already longer than any allowed one.
            if request.path.is_none() && buf.len() > REQUEST_LINE_MAX_BYTES {
                return line_too_long();
            }
            if buf.len() > HEAD_MAX_BYTES {
                return head_too_large();
            }
            Head::Partial
        }
        Err(httparse::Error::TooManyHeaders) => Head::Refused(ApiError::HeadersTooLarge {
            message: format!(
                "the request has more than the server's limit of {MAX_HEADERS} header fields"
            ),
        }),
        Err(e) => Head::Refused(ApiError::BadRequest {
            message: format!("malformed request head: {e}"),
        }),
    }
}

/// Whether a head of `before` bytes, `fresh` ones added, is worth
/// [`check`]ing again: its verdict can only change at the end of a line
/// (a head ends with one; a bad field is found once its line is whole) or
/// where it passes a length limit. Parsing again on every read would cost
/// a head trickled a byte at a time its length squared.
pub fn worth_checking(before: usize, fresh: &[u8]) -> bool {
    let after = before + fresh.len();
    let passes = |limit: usize| before <= limit && after > limit;
    fresh.contains(&b'\n') || passes(REQUEST_LINE_MAX_BYTES) || passes(HEAD_MAX_BYTES)
}

fn head_too_large() -> Head {
    Head::Refused(ApiError::HeadersTooLarge {
        message: format!(
            "the request head is larger than the server's limit of {HEAD_MAX_BYTES} bytes"
        ),
    })
}

/// hyper's checks of a parsed head beyond httparse's: the target is a URI,
/// each header name and value valid, and `Content-Length` a number (one
/// value, or the same one repeated). The body's length, as
/// [`Head::Complete`] has it.
fn check_parsed(request: &httparse::Request<'_, '_>) -> Result<Option<u64>, ApiError> {
    let bad = |what: String| ApiError::BadRequest {
        message: format!("malformed request head: {what}"),
    };
    let path = request.path.unwrap_or_default();
    if axum::http::Uri::try_from(path).is_err() {
        return Err(bad("the request target is not a valid URI".into()));
    }
    if request
        .method
        .is_some_and(|m| axum::http::Method::from_bytes(m.as_bytes()).is_err())
    {
        return Err(bad("invalid method".into()));
    }
    let mut length: Option<&[u8]> = None;
    let mut framed = false;
    for h in request.headers.iter() {
        framed |= h.name.eq_ignore_ascii_case("transfer-encoding");
        if axum::http::HeaderName::from_bytes(h.name.as_bytes()).is_err() {
            return Err(bad("invalid header name".into()));
        }
        if axum::http::HeaderValue::from_bytes(h.value).is_err() {
            return Err(bad(format!("invalid value of header {:?}", h.name)));
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            let digits = !h.value.is_empty() && h.value.iter().all(u8::is_ascii_digit);
            if !digits || length.is_some_and(|l| l != h.value) {
                return Err(bad("invalid Content-Length".into()));
            }
            length = Some(h.value);
        }
    }
    if framed {
        return Ok(None);
    }
    // Digits only, checked above; more than u64 holds is hyper's refusal.
    match length.map(|l| {
        std::str::from_utf8(l)
            .ok()
            .and_then(|l| l.parse::<u64>().ok())
    }) {
        None => Ok(Some(0)),
        Some(Some(n)) => Ok(Some(n)),
        Some(None) => Err(bad("invalid Content-Length".into())),
    }
}

/// The whole answer to a refused head: the status line, JSON headers,
/// `Connection: close` and the body.
pub fn answer(error: &ApiError) -> Vec<u8> {
    let status = error.status();
    let body = error.body();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head is parsed again only at a line's end or a limit: a byte
    /// inside a line changes nothing, and a trickled head is still checked
    /// once whole and refused once over a limit.
    #[test]
    fn a_head_is_checked_again_only_at_a_line_end_or_a_limit() {
        assert!(!worth_checking(10, b"x"));
        assert!(!worth_checking(0, b"GET /topics HTTP/1.1\r"));
        assert!(worth_checking(20, b"\n"));
        assert!(worth_checking(REQUEST_LINE_MAX_BYTES, b"x"));
        assert!(!worth_checking(REQUEST_LINE_MAX_BYTES + 1, b"x"));
        assert!(worth_checking(HEAD_MAX_BYTES - 1, b"xx"));
        let head = b"GET /topics HTTP/1.1\r\nHost: x\r\n\r\n";
        let mut collected = Vec::new();
        let mut verdicts = Vec::new();
        for byte in head.iter() {
            let fresh = [*byte];
            let worth = worth_checking(collected.len(), &fresh);
            collected.push(*byte);
            if worth {
                verdicts.push(check(&collected));
            }
        }
        assert_eq!(verdicts.len(), 3, "one check a line");
        assert!(matches!(
            verdicts.last(),
            Some(Head::Complete { len, body: Some(0) }) if *len == head.len()
        ));
        let long = vec![b'x'; REQUEST_LINE_MAX_BYTES + 1];
        assert!(worth_checking(0, &long));
        assert!(matches!(
            check(&long),
            Head::Refused(ApiError::UriTooLong { .. })
        ));
    }

    fn refused(buf: &[u8]) -> u32 {
        match check(buf) {
            Head::Refused(e) => e.error_code(),
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(buf)),
        }
    }

    #[test]
    fn heads_hyper_would_refuse_are_refused_with_a_code() {
        assert_eq!(
            check(b"GET /topics HTTP/1.1\r\nHost: x\r\n\r\nrest"),
            Head::Complete {
                len: 33,
                body: Some(0)
            }
        );
        assert_eq!(
            check(b"POST /t HTTP/1.1\r\nContent-Length: 12\r\n\r\n{}"),
            Head::Complete {
                len: 40,
                body: Some(12)
            }
        );
        assert_eq!(
            check(b"POST /t HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Head::Complete {
                len: 48,
                body: None
            }
        );
        assert_eq!(check(b"GET /topics HTTP/1.1\r\nHo"), Head::Partial);
        assert_eq!(refused(b"GET /t HTTP/1.1\r\nX-A: a\x01b\r\n\r\n"), 40002);
        // Seen before the head ends.
        assert_eq!(refused(b"GET /t HTTP/1.1\r\nX-A: a\x01b"), 40002);
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(URI_MAX_BYTES + 200));
        assert_eq!(refused(long.as_bytes()), 41401);
        // Still arriving, no line end yet.
        assert_eq!(refused(&long.as_bytes()[..URI_MAX_BYTES + 100]), 41401);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
        assert_eq!(
            refused(format!("GET /t HTTP/1.1\r\n{many}\r\n").as_bytes()),
            43101
        );
        let big = format!(
            "GET /t HTTP/1.1\r\nX-Big: {}\r\n",
            "v".repeat(HEAD_MAX_BYTES)
        );
        assert_eq!(refused(big.as_bytes()), 43101);
        assert_eq!(
            refused(b"POST /t HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            40002
        );
        assert_eq!(
            refused(b"POST /t HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
            40002
        );
    }

    #[test]
    fn the_answer_is_the_json_error_and_closes() {
        let text = String::from_utf8(answer(&ApiError::UriTooLong {
            message: "long".into(),
        }))
        .unwrap();
        assert!(text.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{text}");
        assert!(text.contains("connection: close\r\n"), "{text}");
        assert!(
            text.ends_with("\r\n\r\n{\"error_code\":41401,\"message\":\"long\"}"),
            "{text}"
        );
    }
}
