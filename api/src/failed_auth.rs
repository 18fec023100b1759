//! Failed admin token checks: each is answered 401 only after
//! `http.auth_failure_delay_ms`, and at most
//! [`AUTH_FAILURES_AT_ONCE`] of those delays run at once over every
//! connection, so guessing the token runs at a few guesses a second
//! whether a client guesses on one connection or on a thousand (the
//! others wait their turn, each holding only its own connection, which
//! `http.max_connections` bounds). The wait is a tokio sleep: it holds no
//! worker thread. A call with the right token is never delayed.
//!
//! Each failure is counted (`tidelog_http_auth_failures_total`) and logged
//! at WARN at most once per [`WARN_INTERVAL`], with how many failed since
//! the last line; the token sent is never logged.

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

pub use crate::settings::AUTH_FAILURES_AT_ONCE;

/// Shortest time between two WARN lines about failed token checks.
pub const WARN_INTERVAL: Duration = Duration::from_secs(10);

/// The delay of failed checks and its bound (module doc).
#[derive(Debug)]
pub struct FailedAuth {
    delay: Duration,
    slots: Semaphore,
    log: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    last: Option<Instant>,
    /// Failures since the last WARN line.
    unlogged: u64,
}

impl FailedAuth {
    pub fn new(delay: Duration) -> FailedAuth {
        FailedAuth {
            delay,
            slots: Semaphore::new(AUTH_FAILURES_AT_ONCE),
            log: Mutex::new(LogState::default()),
        }
    }

    /// Counts a failed check of `method path` in `failures`, logs it
    /// (rate-limited), then waits for a slot and the delay.
    pub async fn penalize(
        &self,
        failures: &std::sync::atomic::AtomicU64,
        method: &axum::http::Method,
        path: &str,
    ) {
        failures.fetch_add(1, Ordering::Relaxed);
        self.log(method, path);
        // Never closed; were it, the delay alone still applies.
        let _slot = self.slots.acquire().await.ok();
        tokio::time::sleep(self.delay).await;
    }

    fn log(&self, method: &axum::http::Method, path: &str) {
        let now = Instant::now();
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.unlogged += 1;
        if log
            .last
            .is_some_and(|last| now.duration_since(last) < WARN_INTERVAL)
        {
            return;
        }
        let failures = std::mem::take(&mut log.unlogged);
        log.last = Some(now);
        drop(log);
        tracing::warn!(
            %method,
            path,
            failures,
            delay_ms = self.delay.as_millis() as u64,
            "failed HTTP login: wrong admin bearer token or user password (failures since the last such line; each answered 401 after http.auth_failure_delay_ms)"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use super::*;

    /// Failures in parallel are counted at once, take every slot, and
    /// the ones past the slots wait for one: none is answered before its
    /// delay (a minute here, far past the test).
    #[tokio::test]
    async fn parallel_failures_share_the_slots_and_are_counted() {
        let failed = Arc::new(FailedAuth::new(Duration::from_secs(60)));
        let counter = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..2 * AUTH_FAILURES_AT_ONCE {
            let (failed, counter) = (Arc::clone(&failed), Arc::clone(&counter));
            tasks.push(tokio::spawn(async move {
                failed
                    .penalize(&counter, &axum::http::Method::POST, "/v3/x")
                    .await;
            }));
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while counter.load(Ordering::Relaxed) < 8 || failed.slots.available_permits() > 0 {
            assert!(std::time::Instant::now() < deadline, "not all counted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(tasks.iter().all(|t| !t.is_finished()));
        for t in tasks {
            t.abort();
        }
    }
}
