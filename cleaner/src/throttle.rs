//! `cleaner.io_max_bytes_per_second`: one budget shared by every cleaner
//! thread, for reads and writes together.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A simple rate limiter: callers report bytes moved and sleep until the
/// running average is back under the rate.
pub struct Throttle {
    bytes_per_second: Option<u64>,
    state: Mutex<(Instant, u64)>,
}

/// Windows restart after this long, so a pause does not bank a burst.
const WINDOW: Duration = Duration::from_secs(1);

impl Throttle {
    pub fn new(bytes_per_second: Option<u64>) -> Self {
        Throttle {
            bytes_per_second: bytes_per_second.filter(|&b| b > 0),
            state: Mutex::new((Instant::now(), 0)),
        }
    }

    /// Account for `bytes`; sleeps if the budget is exceeded.
    pub fn account(&self, bytes: u64) {
        let Some(rate) = self.bytes_per_second else {
            return;
        };
        let sleep = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let elapsed = st.0.elapsed();
            if elapsed > WINDOW {
                *st = (Instant::now(), 0);
            }
            st.1 += bytes;
            let due = Duration::from_secs_f64(st.1 as f64 / rate as f64);
            due.saturating_sub(st.0.elapsed())
        };
        if !sleep.is_zero() {
            std::thread::sleep(sleep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_or_none_means_unlimited() {
        assert_eq!(Throttle::new(None).bytes_per_second, None);
        assert_eq!(Throttle::new(Some(0)).bytes_per_second, None);
        assert_eq!(Throttle::new(Some(5)).bytes_per_second, Some(5));
    }

    #[test]
    fn limited_spreads_bytes_over_time() {
        // 1 MB at 10 MB/s must take at least ~0.1 s: a lower bound, which
        // noise can only make longer, never shorter.
        let t = Throttle::new(Some(10_000_000));
        let start = Instant::now();
        for _ in 0..10 {
            t.account(100_000);
        }
        assert!(start.elapsed() >= Duration::from_millis(90));
    }
}
