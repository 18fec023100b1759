//! `cleaner:` settings of broker.yaml ([`CleanerConfig`]): Kafka's
//! defaults, written once in its `Default`, and their one check,
//! [`CleanerConfig::validate`], which `LogCleaner::new`, `tidelog serve` and
//! `tidelog check-config` all run.
//!
//! With the `serde` feature (enabled by the crate that loads YAML) the
//! struct deserializes from that section: the `cleaner.*` keys and units
//! of docs/OPERATIONS.md ("Configuration keys"), absent keys keep the
//! defaults, unknown keys are errors. `load_factor` is not a key.

use crate::error::{CleanerError, Result};
use crate::offset_map::{self, BYTES_PER_ENTRY, DEFAULT_LOAD_FACTOR};

/// `cleaner:` settings of broker.yaml (Kafka's defaults).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(deny_unknown_fields, default)
)]
pub struct CleanerConfig {
    pub threads: usize,
    /// Offset-map memory for all threads together.
    pub dedupe_buffer_bytes: usize,
    pub backoff_ms: u64,
    /// `None` (`null`): cleaner I/O is not throttled.
    pub io_max_bytes_per_second: Option<u64>,
    /// The offset map's fill limit (not a key of broker.yaml).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub load_factor: f64,
}

/// Most cleaner threads (`cleaner.threads`): far more than a single node's
/// disks can keep busy, and each holds a share of the offset map.
pub const THREADS_MAX: usize = 64;

/// Most offset-map memory one thread may hold: Kafka's cap, 2 GiB per
/// cleaner thread (its map is indexed by a 32-bit int). A larger
/// `dedupe_buffer_bytes` would be allocated at start and could take the
/// machine's memory before anything is cleaned.
pub const DEDUPE_BUFFER_BYTES_PER_THREAD_MAX: usize = 2 << 30;

/// Smallest offset map: room for a few dozen keys.
pub const DEDUPE_BUFFER_BYTES_MIN: usize = 1024;

impl CleanerConfig {
    /// The one range check of the `cleaner:` settings, used by
    /// `LogCleaner::new`, `tidelog serve` and `tidelog check-config`, so
    /// they accept and refuse the same values.
    pub fn validate(&self) -> Result<()> {
        let bad = |setting: &'static str, reason: String| {
            Err(CleanerError::InvalidConfig { setting, reason })
        };
        if !(1..=THREADS_MAX).contains(&self.threads) {
            return bad(
                "cleaner.threads",
                format!("{} is not in [1, {THREADS_MAX}]", self.threads),
            );
        }
        let buffer_max = DEDUPE_BUFFER_BYTES_PER_THREAD_MAX.saturating_mul(self.threads);
        if !(DEDUPE_BUFFER_BYTES_MIN..=buffer_max).contains(&self.dedupe_buffer_bytes) {
            return bad(
                "cleaner.dedupe_buffer_bytes",
                format!(
                    "{} is not in [{DEDUPE_BUFFER_BYTES_MIN}, {buffer_max}] (at most 2 GiB per cleaner thread, as in Kafka)",
                    self.dedupe_buffer_bytes
                ),
            );
        }
        if self.io_max_bytes_per_second == Some(0) {
            return bad(
                "cleaner.io_max_bytes_per_second",
                "0 is too small, the minimum is 1 (null: unthrottled)".into(),
            );
        }
        if !offset_map::load_factor_is_usable(self.load_factor) {
            return bad(
                "cleaner.load_factor",
                format!("{} is not in (0, 1)", self.load_factor),
            );
        }
        // Each thread builds its map from its share at start; a share that
        // holds no key would fail there, after the config was accepted.
        let per_thread = self.dedupe_buffer_bytes / self.threads;
        if offset_map::max_entries(per_thread, self.load_factor) == 0 {
            return bad(
                "cleaner.dedupe_buffer_bytes",
                format!(
                    "{} is too small for {} cleaner threads: a thread's share of {per_thread} bytes holds no key (each takes {BYTES_PER_ENTRY} bytes)",
                    self.dedupe_buffer_bytes, self.threads
                ),
            );
        }
        Ok(())
    }
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            threads: 1,
            dedupe_buffer_bytes: 128 << 20,
            backoff_ms: 15_000,
            io_max_bytes_per_second: None,
            load_factor: DEFAULT_LOAD_FACTOR,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offset_map::OffsetMap;

    /// `validate` accepts a buffer exactly when every thread can build its
    /// map from its share, as `LogCleaner::start` does.
    #[test]
    fn validate_accepts_what_every_thread_can_build() {
        for threads in [1, 2, 25, 26, 51, 52, THREADS_MAX] {
            for dedupe_buffer_bytes in [1024, 2048, 4096] {
                let config = CleanerConfig {
                    threads,
                    dedupe_buffer_bytes,
                    ..CleanerConfig::default()
                };
                let per_thread = dedupe_buffer_bytes / threads;
                let builds = OffsetMap::new(per_thread, config.load_factor).is_ok();
                match config.validate() {
                    Ok(()) => assert!(builds, "{threads} threads, {dedupe_buffer_bytes} bytes"),
                    Err(CleanerError::InvalidConfig { setting, .. }) => {
                        assert!(!builds, "{threads} threads, {dedupe_buffer_bytes} bytes");
                        assert_eq!(setting, "cleaner.dedupe_buffer_bytes");
                    }
                    Err(other) => panic!("{other}"),
                }
            }
        }
        let edge = |threads| CleanerConfig {
            threads,
            dedupe_buffer_bytes: 1024,
            ..CleanerConfig::default()
        };
        edge(32).validate().unwrap();
        assert!(edge(33).validate().is_err(), "31 bytes hold no key");
    }

    #[test]
    fn load_factor_bounds_are_the_maps() {
        for load_factor in [0.0, 1.0, f64::NAN] {
            let config = CleanerConfig {
                load_factor,
                ..CleanerConfig::default()
            };
            assert!(config.validate().is_err(), "{load_factor}");
            assert!(OffsetMap::new(1 << 20, load_factor).is_err());
        }
    }
}
