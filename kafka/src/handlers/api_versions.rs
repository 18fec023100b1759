//! ApiVersions (18): the served APIs and versions of `dispatch::SERVED`,
//! nothing else (so clients see unserved APIs as unsupported).

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiVersionsResponse;

use crate::dispatch::SERVED;

/// The answer, with `error_code` (0, or UNSUPPORTED_VERSION for a version
/// this broker does not know, then encoded as v0).
pub fn answer(error_code: i16) -> ApiVersionsResponse {
    let api_keys = SERVED
        .iter()
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(*key as i16)
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
}
