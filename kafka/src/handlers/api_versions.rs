//! ApiVersions (18): the served APIs and versions (`routes::served`, the
//! table's rows), nothing else (so clients see unserved APIs as
//! unsupported). The list comes in as an argument, so this handler does
//! not import the table that names it.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

/// The answer listing `served` (key, min, max) in its order, with
/// `error_code` (0, or UNSUPPORTED_VERSION for a version this broker does
/// not know, then encoded as v0).
pub fn answer(
    error_code: i16,
    served: impl IntoIterator<Item = (ApiKey, i16, i16)>,
) -> ApiVersionsResponse {
    let api_keys = served
        .into_iter()
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
}
