//! Client connections counted against the process's file descriptors,
//! both front-ends (HTTP and Kafka) together.
//!
//! Every connection is a descriptor, and so is every file the store opens
//! (CommitLog segments, ConsumeQueue and time index files, IndexFiles,
//! compacted logs, the checkpoint's temporary file). Without a bound, idle
//! connections can take the last descriptors and the store's next
//! `open` fails with EMFILE ("Too many open files"): a segment cannot be
//! made, a queue file cannot be created, a flush cannot write the
//! checkpoint. So the server raises its soft `RLIMIT_NOFILE` to the hard
//! limit at start, keeps `descriptors.store_reserve` of them for the store,
//! and the listeners refuse (accept, then close at once) every connection
//! past `limit − reserve`: the store's files and the connections already
//! open keep working, and a client is told by a closed connection rather
//! than by a store error on someone else's produce.
//!
//! Invariants: `open` counts [`ConnectionSlot`]s alive; a slot is taken
//! before a connection is served and dropped when it ends; `open` never
//! passes `max`. A refusal is counted (`tidelog_connections_refused_total`)
//! and warned at most once per [`REFUSED_WARN_INTERVAL`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Least `descriptors.store_reserve`: the store opens a few files even
/// with one partition (segments being made, the checkpoint's temporary
/// file, the data dir's lock).
pub const STORE_RESERVE_MIN: u64 = 64;
/// Largest `descriptors.store_reserve` (Linux's default `fs.nr_open`).
pub const STORE_RESERVE_MAX: u64 = 1 << 20;
/// The fewest connections the listeners keep together, whatever the
/// limit: below this the server could not even be asked for its status.
pub const CONNECTIONS_MIN: u64 = 16;
/// Refusals are warned at most this often (each counted).
pub const REFUSED_WARN_INTERVAL: Duration = Duration::from_secs(10);

/// The `descriptors:` section of broker.yaml.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DescriptorsConfig {
    /// File descriptors kept for the store (and everything that is not a
    /// client connection): connections are refused past `limit − this`.
    pub store_reserve: u64,
}

impl Default for DescriptorsConfig {
    fn default() -> Self {
        DescriptorsConfig {
            store_reserve: 1024,
        }
    }
}

impl DescriptorsConfig {
    /// `Err((key, reason))` for a value out of range.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(STORE_RESERVE_MIN..=STORE_RESERVE_MAX).contains(&self.store_reserve) {
            return Err((
                "descriptors.store_reserve",
                format!(
                    "{} is not in [{STORE_RESERVE_MIN}, {STORE_RESERVE_MAX}]",
                    self.store_reserve
                ),
            ));
        }
        Ok(())
    }

    /// What the listeners may hold together under an open-file limit of
    /// `limit`: (the reserve kept, the connections allowed). A limit too
    /// small for the configured reserve keeps half of it for the store
    /// (and at least [`CONNECTIONS_MIN`] for connections): the caller
    /// warns that the reserve was cut.
    pub fn connection_cap(&self, limit: u64) -> (u64, u64) {
        let reserve = if limit >= self.store_reserve.saturating_mul(2) {
            self.store_reserve
        } else {
            (limit / 2).min(limit.saturating_sub(CONNECTIONS_MIN))
        };
        (reserve, limit.saturating_sub(reserve).max(CONNECTIONS_MIN))
    }
}

/// The connections both listeners hold, against their shared cap.
#[derive(Debug)]
pub struct ConnectionSlots {
    max: u64,
    open: AtomicU64,
    refused: AtomicU64,
    /// When a refusal was last warned, and how many since.
    warned: Mutex<(Option<Instant>, u64)>,
    /// What a refusal warns.
    refusal: &'static str,
}

/// One open connection's share; given back when dropped.
#[derive(Debug)]
pub struct ConnectionSlot(Arc<ConnectionSlots>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The counters `/metrics` renders.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionSlotsSnapshot {
    pub max: u64,
    pub open: u64,
    pub refused: u64,
}

impl ConnectionSlots {
    pub fn new(max: u64) -> Arc<ConnectionSlots> {
        ConnectionSlots::capped(
            max,
            "refusing new connections: every file descriptor the store's reserve (descriptors.store_reserve) leaves is held by an open connection",
        )
    }

    /// A cap of its own, for a listener that is no client front-end (a
    /// cluster's replication listener): `refusal` is what a refusal
    /// warns.
    pub fn capped(max: u64, refusal: &'static str) -> Arc<ConnectionSlots> {
        Arc::new(ConnectionSlots {
            max,
            open: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            warned: Mutex::new((None, 0)),
            refusal,
        })
    }

    /// No cap (tests and embedders that manage descriptors themselves).
    pub fn unlimited() -> Arc<ConnectionSlots> {
        ConnectionSlots::new(u64::MAX)
    }

    /// A slot for a connection `front_end` ("http", "kafka",
    /// "replication") accepted, or `None` if the cap is reached: the
    /// caller closes the connection at once. Counted and (rate-limited)
    /// warned here.
    pub fn try_open(self: &Arc<Self>, front_end: &'static str) -> Option<ConnectionSlot> {
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            });
        if taken.is_ok() {
            return Some(ConnectionSlot(Arc::clone(self)));
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        warned.1 += 1;
        if warned
            .0
            .is_none_or(|at| at.elapsed() >= REFUSED_WARN_INTERVAL)
        {
            tracing::warn!(
                front_end,
                max_connections = self.max,
                refused_since_last_warning = warned.1,
                "{}",
                self.refusal
            );
            *warned = (Some(Instant::now()), 0);
        }
        None
    }

    pub fn snapshot(&self) -> ConnectionSlotsSnapshot {
        ConnectionSlotsSnapshot {
            max: self.max,
            open: self.open.load(Ordering::Acquire),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stop_at_the_cap_and_come_back_when_dropped() {
        let slots = ConnectionSlots::new(2);
        let a = slots.try_open("http").unwrap();
        let _b = slots.try_open("kafka").unwrap();
        assert!(slots.try_open("http").is_none());
        assert!(slots.try_open("kafka").is_none());
        assert_eq!(
            slots.snapshot(),
            ConnectionSlotsSnapshot {
                max: 2,
                open: 2,
                refused: 2
            }
        );
        drop(a);
        assert!(slots.try_open("http").is_some());
    }

    #[test]
    fn the_reserve_is_validated_and_cut_under_a_small_limit() {
        let c = DescriptorsConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert!(DescriptorsConfig { store_reserve: 1 }.validate().is_err());
        assert!(DescriptorsConfig {
            store_reserve: STORE_RESERVE_MAX + 1
        }
        .validate()
        .is_err());
        assert_eq!(c.connection_cap(65_536), (1024, 64_512));
        // `ulimit -n 1024`: half for the store, half for connections.
        assert_eq!(c.connection_cap(1024), (512, 512));
        assert_eq!(c.connection_cap(20), (4, 16));
    }
}
