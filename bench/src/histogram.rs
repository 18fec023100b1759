//! A log-linear latency histogram in the spirit of HdrHistogram: exact below
//! 2^SUB_BITS, then 2^SUB_BITS equal sub-buckets per power of two, so every
//! recorded value is kept to within 1 / 2^SUB_BITS (< 0.8 %) of itself.
//!
//! Fixed size (about 58 KiB), no allocation while recording, mergeable; one
//! per load connection, merged at the end of a phase. Values are
//! nanoseconds; percentiles report the highest value of the bucket they fall
//! in (HdrHistogram's "highest equivalent value"), so they never flatter.

use std::time::Duration;

/// Sub-bucket bits: 128 sub-buckets per power of two.
const SUB_BITS: u32 = 7;
const SUB_COUNT: u64 = 1 << SUB_BITS;
/// Buckets for every `u64`: the linear part plus one group per exponent.
const BUCKETS: usize = ((65 - SUB_BITS) as usize) << SUB_BITS;

#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            total: 0,
            max: 0,
        }
    }

    pub fn record(&mut self, value: Duration) {
        let nanos = u64::try_from(value.as_nanos()).unwrap_or(u64::MAX);
        self.record_nanos(nanos);
    }

    pub fn record_nanos(&mut self, nanos: u64) {
        self.counts[index_of(nanos)] += 1;
        self.total += 1;
        self.max = self.max.max(nanos);
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The value at quantile `q` (0..=1): the smallest bucket whose
    /// cumulative count reaches `ceil(q * count)`, as its highest value
    /// (capped at the largest value recorded). Zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (index, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Duration::from_nanos(highest_of(index).min(self.max));
            }
        }
        Duration::from_nanos(self.max)
    }
}

fn index_of(value: u64) -> usize {
    if value < SUB_COUNT {
        return value as usize;
    }
    // value >= 2^SUB_BITS: exponent e >= SUB_BITS, keep the top SUB_BITS + 1
    // bits (the leading one and SUB_BITS below it).
    let exponent = 63 - value.leading_zeros();
    let shift = exponent - SUB_BITS;
    let mantissa = value >> shift; // in [SUB_COUNT, 2 * SUB_COUNT)
    (((shift + 1) as usize) << SUB_BITS) + (mantissa - SUB_COUNT) as usize
}

/// The highest value that lands in bucket `index`.
fn highest_of(index: usize) -> u64 {
    let index = index as u64;
    if index < 2 * SUB_COUNT {
        return index;
    }
    let group = index >> SUB_BITS; // >= 2
    let mantissa = SUB_COUNT + (index & (SUB_COUNT - 1));
    let shift = group - 1;
    let lowest = mantissa << shift;
    lowest.saturating_add((1u64 << shift) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact() {
        for v in 0..(4 * SUB_COUNT) {
            let i = index_of(v);
            if v < 2 * SUB_COUNT {
                assert_eq!(highest_of(i), v);
            }
            assert!(highest_of(i) >= v);
        }
    }

    #[test]
    fn buckets_are_ordered_and_tight() {
        let mut previous = 0usize;
        let mut v = 1u64;
        while v < u64::MAX / 3 {
            for candidate in [v - 1, v, v + 1, v + v / 3] {
                let i = index_of(candidate);
                assert!(i < BUCKETS);
                let high = highest_of(i);
                assert!(high >= candidate, "{candidate} -> {high}");
                // Within 1/128 of the value.
                assert!(
                    (high - candidate) as f64 <= candidate as f64 / SUB_COUNT as f64 + 1.0,
                    "{candidate} -> {high}"
                );
            }
            let i = index_of(v);
            assert!(i >= previous);
            previous = i;
            v = v * 3 / 2 + 1;
        }
        assert_eq!(index_of(u64::MAX), BUCKETS - 1);
        assert_eq!(highest_of(BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn quantiles_of_a_uniform_spread() {
        let mut h = Histogram::new();
        for micros in 1..=10_000u64 {
            h.record(Duration::from_micros(micros));
        }
        assert_eq!(h.count(), 10_000);
        let near = |d: Duration, micros: f64| {
            let got = d.as_secs_f64() * 1e6;
            assert!((got - micros).abs() <= micros / 100.0, "{got} vs {micros}");
        };
        near(h.quantile(0.5), 5_000.0);
        near(h.quantile(0.99), 9_900.0);
        near(h.quantile(0.999), 9_990.0);
        assert_eq!(h.quantile(1.0), Duration::from_micros(10_000));
        assert_eq!(Histogram::new().quantile(0.5), Duration::ZERO);
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        for _ in 0..99 {
            a.record(Duration::from_micros(100));
        }
        b.record(Duration::from_millis(50));
        a.merge(&b);
        assert_eq!(a.count(), 100);
        assert!(a.quantile(0.5) <= Duration::from_micros(101));
        assert_eq!(a.quantile(1.0), Duration::from_millis(50));
    }
}
