//! The `tiered:` config section: where the remote tier lives and how big
//! its objects and read cache are. Defaults are the `tiered.*` rows of
//! docs/OPERATIONS.md ("Configuration keys") (off: no url).
//! Credentials never come from here: the environment's `AWS_*` variables.

use serde::{Deserialize, Serialize};

use crate::error::{Result, TieredError};

/// Smallest `object_bytes`: one sparse-index interval
/// ([`crate::format::INDEX_INTERVAL_BYTES`]), so an object has a useful index.
pub const OBJECT_BYTES_MIN: u64 = 64 * 1024;
/// Largest `object_bytes`: S3's largest single PUT (larger objects would
/// have to be multipart only, and one object is uploaded or not as a whole).
pub const OBJECT_BYTES_MAX: u64 = 5 * 1024 * 1024 * 1024;
/// Shortest upload interval: the uploader LISTs each tiered partition's
/// manifest at most this often.
pub const UPLOAD_INTERVAL_MS_MIN: u64 = 100;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TieredConfig {
    /// `s3://bucket/prefix` or `file:///abs/path`; `None`: tiering is off.
    pub url: Option<String>,
    /// The endpoint of an S3-compatible server, e.g. `http://127.0.0.1:8333`.
    pub endpoint: Option<String>,
    pub region: String,
    /// Plain-HTTP endpoints (a local SeaweedFS or MinIO) must be allowed.
    pub allow_http: bool,
    /// How often the broker's uploader looks for sealed data to upload.
    pub upload_interval_ms: u64,
    /// Target size of one uploaded record object.
    pub object_bytes: u64,
    /// Bound of the read-ahead cache (record blocks, footers and indexes).
    pub read_cache_bytes: u64,
}

impl Default for TieredConfig {
    fn default() -> Self {
        TieredConfig {
            url: None,
            endpoint: None,
            region: "us-east-1".to_string(),
            allow_http: false,
            upload_interval_ms: 10_000,
            object_bytes: 64 * 1024 * 1024,
            read_cache_bytes: 256 * 1024 * 1024,
        }
    }
}

/// Where a validated url points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Location {
    /// `s3://bucket/prefix`: the bucket and the prefix inside it.
    S3 { bucket: String, prefix: String },
    /// `file:///abs/path`: the absolute directory.
    File { path: String },
}

impl TieredConfig {
    /// Tiering is on when a url is set.
    pub fn enabled(&self) -> bool {
        self.url.is_some()
    }

    /// Checks every key; the message names the key.
    pub fn validate(&self) -> Result<()> {
        if let Some(url) = &self.url {
            let location = parse_location(url)?;
            if matches!(location, Location::S3 { .. }) && !cfg!(feature = "s3") {
                return Err(TieredError::config(format!(
                    "url {url}: this build has no S3 backend (tidelog-tiered's `s3` feature)"
                )));
            }
        }
        if let Some(endpoint) = &self.endpoint {
            let plain = endpoint.starts_with("http://");
            if !plain && !endpoint.starts_with("https://") {
                return Err(TieredError::config(format!(
                    "endpoint {endpoint:?}: must start with http:// or https://"
                )));
            }
            if plain && !self.allow_http {
                return Err(TieredError::config(format!(
                    "endpoint {endpoint:?} is plain HTTP: set allow_http: true"
                )));
            }
        }
        if self.region.is_empty() {
            return Err(TieredError::config("region must not be empty"));
        }
        if self.upload_interval_ms < UPLOAD_INTERVAL_MS_MIN {
            return Err(TieredError::config(format!(
                "upload_interval_ms {} is below {UPLOAD_INTERVAL_MS_MIN}",
                self.upload_interval_ms
            )));
        }
        if !(OBJECT_BYTES_MIN..=OBJECT_BYTES_MAX).contains(&self.object_bytes) {
            return Err(TieredError::config(format!(
                "object_bytes {} is outside {OBJECT_BYTES_MIN}..={OBJECT_BYTES_MAX}",
                self.object_bytes
            )));
        }
        Ok(())
    }
}

/// `s3://bucket/prefix` or `file:///abs/path`, refused otherwise.
pub(crate) fn parse_location(url: &str) -> Result<Location> {
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(TieredError::config(format!("url {url:?}: no bucket")));
        }
        return Ok(Location::S3 {
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
        });
    }
    if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(TieredError::config(format!(
                "url {url:?}: a file url needs an absolute path (file:///dir)"
            )));
        }
        if path.split('/').any(|part| part == "..") {
            return Err(TieredError::config(format!(
                "url {url:?}: `..` in the path"
            )));
        }
        return Ok(Location::File {
            path: path.to_string(),
        });
    }
    Err(TieredError::config(format!(
        "url {url:?}: expected s3://bucket/prefix or file:///path"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_url(url: &str) -> TieredConfig {
        TieredConfig {
            url: Some(url.to_string()),
            ..TieredConfig::default()
        }
    }

    #[test]
    fn defaults_are_off_and_valid() {
        let cfg = TieredConfig::default();
        assert!(!cfg.enabled());
        cfg.validate().unwrap();
        assert_eq!(cfg.object_bytes, 67_108_864);
        assert_eq!(cfg.read_cache_bytes, 268_435_456);
    }

    #[test]
    fn yaml_keys_and_unknown_keys() {
        let cfg: TieredConfig =
            serde_json::from_str(r#"{"url": "file:///tmp/x", "object_bytes": 1048576}"#).unwrap();
        assert!(cfg.enabled());
        assert_eq!(cfg.object_bytes, 1_048_576);
        assert_eq!(cfg.region, "us-east-1");
        assert!(serde_json::from_str::<TieredConfig>(r#"{"urll": "x"}"#).is_err());
    }

    #[test]
    fn refuses_bad_values() {
        for url in ["http://x", "file://relative", "s3:///p", "file:///a/../b"] {
            let err = with_url(url).validate().unwrap_err();
            assert!(matches!(err, TieredError::Config { .. }), "{url}: {err}");
        }
        let plain = TieredConfig {
            endpoint: Some("http://127.0.0.1:8333".into()),
            ..TieredConfig::default()
        };
        assert!(matches!(plain.validate(), Err(TieredError::Config { .. })));
        let small = TieredConfig {
            object_bytes: 1000,
            ..TieredConfig::default()
        };
        assert!(matches!(small.validate(), Err(TieredError::Config { .. })));
        let fast = TieredConfig {
            upload_interval_ms: 1,
            ..TieredConfig::default()
        };
        assert!(matches!(fast.validate(), Err(TieredError::Config { .. })));
        with_url("file:///tmp/tiered").validate().unwrap();
    }

    #[test]
    fn locations() {
        assert_eq!(
            parse_location("s3://b/a/p/").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                prefix: "a/p".into()
            }
        );
        assert_eq!(
            parse_location("s3://b").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                prefix: String::new()
            }
        );
        assert_eq!(
            parse_location("file:///var/t").unwrap(),
            Location::File {
                path: "/var/t".into()
            }
        );
    }

    #[cfg(not(feature = "s3"))]
    #[test]
    fn s3_needs_the_feature() {
        assert!(matches!(
            with_url("s3://bucket/p").validate(),
            Err(TieredError::Config { .. })
        ));
    }
}
