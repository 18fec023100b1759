//! The last minutes of the server's rates and gauges, for the console's
//! plots (`GET /v3/clusters/{c}/stats/history`): a plot opened now shows
//! the last ten minutes at once instead of starting empty.
//!
//! Invariants:
//! - Memory is bounded: the ring holds at most [`CAPACITY`] samples (one
//!   every [`INTERVAL`]: ten minutes), the oldest dropped first.
//! - One `tidelog-history` thread takes the samples (`start`); what a
//!   sample reads is `crate::state`'s, which this module does not know. The
//!   thread holds the API's state weakly and the broker only for the moment of a sample, so it
//!   never keeps either alive: it ends at the first tick after the state
//!   is gone, and a shutdown's `take_ready` is not held up by it.
//! - A sample holds counters (records and bytes produced and fetched since
//!   start) and gauges; rates are computed between neighbours when the
//!   route answers, so the first sample has none. A counter that went
//!   backwards (not possible within one server's life) gives rate 0.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Time between two samples.
pub const INTERVAL: Duration = Duration::from_secs(2);

/// How often the sampler looks for the broker before it is ready.
const NOT_READY_POLL: Duration = Duration::from_millis(100);

/// Samples kept: ten minutes at [`INTERVAL`].
pub const CAPACITY: usize = 300;

/// What the server looked like at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub timestamp_ms: i64,
    pub produce_records: u64,
    pub produce_bytes: u64,
    pub fetch_records: u64,
    pub fetch_bytes: u64,
    pub dispatch_lag_bytes: u64,
    pub disk_used_ratio: f64,
    pub commitlog_segments: usize,
}

/// One sample as the route answers it: rates per second since the
/// previous sample (`None` for the first).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    pub timestamp_ms: i64,
    pub produce_records_per_sec: Option<f64>,
    pub produce_bytes_per_sec: Option<f64>,
    pub fetch_records_per_sec: Option<f64>,
    pub fetch_bytes_per_sec: Option<f64>,
    pub dispatch_lag_bytes: u64,
    pub disk_used_ratio: f64,
    pub commitlog_segments: usize,
}

/// The ring of samples.
#[derive(Debug)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
    capacity: usize,
}

impl Default for History {
    fn default() -> Self {
        History::with_capacity(CAPACITY)
    }
}

impl History {
    pub fn with_capacity(capacity: usize) -> Self {
        History {
            samples: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity: capacity.max(1),
        }
    }

    /// Adds `sample`, dropping the oldest when the ring is full.
    pub fn push(&self, sample: Sample) {
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if samples.len() >= self.capacity {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// Every sample, oldest first, with its rates (module doc).
    pub fn points(&self) -> Vec<Point> {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let mut previous: Option<&Sample> = None;
        let mut points = Vec::with_capacity(samples.len());
        for s in samples.iter() {
            let rate = |counter: fn(&Sample) -> u64| {
                previous.map(|p| {
                    let seconds = (s.timestamp_ms - p.timestamp_ms) as f64 / 1000.0;
                    if seconds <= 0.0 {
                        return 0.0;
                    }
                    counter(s).saturating_sub(counter(p)) as f64 / seconds
                })
            };
            points.push(Point {
                timestamp_ms: s.timestamp_ms,
                produce_records_per_sec: rate(|s| s.produce_records),
                produce_bytes_per_sec: rate(|s| s.produce_bytes),
                fetch_records_per_sec: rate(|s| s.fetch_records),
                fetch_bytes_per_sec: rate(|s| s.fetch_bytes),
                dispatch_lag_bytes: s.dispatch_lag_bytes,
                disk_used_ratio: s.disk_used_ratio,
                commitlog_segments: s.commitlog_segments,
            });
            previous = Some(s);
        }
        points
    }
}

/// What one tick of the sampler found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tick {
    /// A sample was pushed.
    Sampled,
    /// The broker is not ready yet (recovery): nothing was pushed.
    NotReady,
    /// The state the samples are taken from is gone: the thread ends.
    Gone,
}

/// Starts the `tidelog-history` thread, which calls `tick` every
/// [`INTERVAL`] (every [`NOT_READY_POLL`] until the broker is ready) and
/// ends at the first [`Tick::Gone`] (module doc). What a sample holds and
/// where it is pushed is the caller's (`crate::state`), so this module
/// depends on no state of the API.
pub(crate) fn start(mut tick: impl FnMut() -> Tick + Send + 'static) {
    let spawned = std::thread::Builder::new()
        .name("tidelog-history".into())
        .spawn(move || loop {
            let sampled = match tick() {
                Tick::Sampled => true,
                Tick::NotReady => false,
                Tick::Gone => return,
            };
            // Until the broker is ready, look again soon, so the first
            // sample is the server's start and the first rate counts
            // what came right after it.
            std::thread::sleep(if sampled { INTERVAL } else { NOT_READY_POLL });
        });
    if let Err(e) = spawned {
        // The plots then start empty; nothing else depends on it.
        tracing::warn!(error = %e, "cannot start the tidelog-history thread");
    }
}

/// Now, in milliseconds since the epoch: a [`Sample`]'s timestamp.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(timestamp_ms: i64, produced: u64, fetched: u64) -> Sample {
        Sample {
            timestamp_ms,
            produce_records: produced,
            produce_bytes: produced * 10,
            fetch_records: fetched,
            fetch_bytes: fetched * 10,
            dispatch_lag_bytes: 7,
            disk_used_ratio: 0.5,
            commitlog_segments: 1,
        }
    }

    #[test]
    fn rates_come_from_neighbouring_samples() {
        let history = History::with_capacity(10);
        history.push(sample(1_000, 0, 0));
        history.push(sample(3_000, 200, 50));
        history.push(sample(5_000, 200, 40)); // a counter going back: 0
        let points = history.points();
        assert_eq!(points.len(), 3);
        assert_eq!(points[0].produce_records_per_sec, None);
        assert_eq!(points[1].produce_records_per_sec, Some(100.0));
        assert_eq!(points[1].produce_bytes_per_sec, Some(1000.0));
        assert_eq!(points[1].fetch_records_per_sec, Some(25.0));
        assert_eq!(points[2].produce_records_per_sec, Some(0.0));
        assert_eq!(points[2].fetch_records_per_sec, Some(0.0));
        assert_eq!(points[2].dispatch_lag_bytes, 7);
    }

    #[test]
    fn the_ring_keeps_only_the_newest_samples() {
        let history = History::with_capacity(3);
        for i in 0..10 {
            history.push(sample(i * 2_000, i as u64, 0));
        }
        let points = history.points();
        let times: Vec<i64> = points.iter().map(|p| p.timestamp_ms).collect();
        assert_eq!(times, [14_000, 16_000, 18_000]);
        assert_eq!(points[1].produce_records_per_sec, Some(0.5));
        assert_eq!(
            History::default().capacity,
            (600 / INTERVAL.as_secs()) as usize
        );
    }
}
