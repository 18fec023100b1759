//! Request parts as the handlers want them, with every rejection turned into
//! an [`ApiError`] (axum's own rejections answer plain text, which would
//! break the "every error is `{error_code, message}`" rule).

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use serde::de::DeserializeOwned;
use tidelog_broker::auth::admin_token_matches;

use crate::error::ApiError;

/// `Path<T>` whose rejection (bad percent-encoding, say) is 40002.
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| ApiPath(v))
            .map_err(|e| ApiError::BadRequest {
                message: format!("bad path: {}", e.body_text()),
            })
    }
}

/// The query string as name → value (the last one wins for a repeated
/// name); undecodable query strings are 40002. Each handler parses the
/// values it knows with its own messages and ignores the others, as REST
/// Proxy does.
pub struct ApiQuery(pub HashMap<String, String>);

impl<S> FromRequestParts<S> for ApiQuery
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            .map_err(|e| ApiError::BadRequest {
                message: format!("bad query string: {}", e.body_text()),
            })
    }
}

impl ApiQuery {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// An optional unsigned integer parameter in `[min, max]`; 40002 naming
    /// the parameter otherwise.
    pub fn u64_in(&self, name: &str, default: u64, min: u64, max: u64) -> Result<u64, ApiError> {
        let Some(text) = self.get(name) else {
            return Ok(default);
        };
        text.parse::<u64>()
            .ok()
            .filter(|n| text.bytes().all(|b| b.is_ascii_digit()) && (min..=max).contains(n))
            .ok_or_else(|| ApiError::BadRequest {
                message: format!("{name} {text:?} is not an integer in [{min}, {max}]"),
            })
    }

    /// An optional signed 64-bit integer parameter (decimal digits with an
    /// optional leading `-`); 40002 naming the parameter otherwise.
    pub fn i64_opt(&self, name: &str) -> Result<Option<i64>, ApiError> {
        let Some(text) = self.get(name) else {
            return Ok(None);
        };
        let digits = text.strip_prefix('-').unwrap_or(text);
        text.parse::<i64>()
            .ok()
            .filter(|_| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .map(Some)
            .ok_or_else(|| ApiError::BadRequest {
                message: format!(
                    "{name} {text:?} is not an integer in [{}, {}]",
                    i64::MIN,
                    i64::MAX
                ),
            })
    }
}

/// A JSON admin or commit body as `T`, the one decoder of every JSON body
/// but produce's: not JSON, the wrong shape, or anything but an object
/// where `T` has a struct (`json_body.rs`) is 42206 (payload malformed),
/// with the path of the value at fault.
pub fn json_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    crate::json_body::decode(body).map_err(|e| ApiError::PayloadMalformed {
        message: format!("request body: {e}"),
    })
}

/// `Content-Type` as text, if present and printable.
pub fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
}

/// 40101 unless `Authorization: Bearer <token>` carries `token`. The
/// comparison takes the same time wherever the first difference is, so the
/// token cannot be guessed byte by byte from response times.
pub fn check_bearer(headers: &HeaderMap, token: &str) -> Result<(), ApiError> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
    match given {
        None => Err(ApiError::Unauthorized {
            message: "this call needs Authorization: Bearer <admin_token>".into(),
        }),
        Some(given) if admin_token_matches(given.as_bytes(), token.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::Unauthorized {
            message: "wrong bearer token".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn bearer_checks() {
        let mut h = HeaderMap::new();
        assert_eq!(check_bearer(&h, "s3cret").unwrap_err().error_code(), 40101);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret"),
        );
        assert!(check_bearer(&h, "s3cret").is_ok());
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer s3cret"),
        );
        assert!(check_bearer(&h, "s3cret").is_ok());
        for bad in ["Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret"] {
            h.insert(header::AUTHORIZATION, HeaderValue::from_static(bad));
            assert_eq!(
                check_bearer(&h, "s3cret").unwrap_err().error_code(),
                40101,
                "{bad}"
            );
        }
    }

    #[test]
    fn integer_query_parameters() {
        let q = ApiQuery(HashMap::from([
            ("a".to_string(), "5".to_string()),
            ("b".to_string(), "-1".to_string()),
            ("c".to_string(), "+5".to_string()),
            ("d".to_string(), "99".to_string()),
        ]));
        assert_eq!(q.u64_in("a", 1, 0, 10).unwrap(), 5);
        assert_eq!(q.u64_in("missing", 1, 0, 10).unwrap(), 1);
        for name in ["b", "c", "d"] {
            let err = q.u64_in(name, 1, 0, 10).unwrap_err();
            assert_eq!(err.error_code(), 40002);
            assert!(err.to_string().starts_with(name), "{err}");
        }
    }
}
