//! Retries of object-store calls: exponential backoff, bounded in attempts
//! and in time, for the errors that can pass (the store's `Generic`: a
//! 5xx, a reset connection, a timeout, an I/O error). Everything else
//! (not found, already exists, permission) is an answer, returned at once.
//! The caller turns what is left into `TieredError::Unavailable`.

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::time::Instant;

use crate::stats::bump;

/// How hard to retry one object-store call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub attempts: u32,
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// No attempt starts after this much time since the first.
    pub deadline: Duration,
    /// One attempt that takes longer is abandoned (and retried).
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 6,
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            deadline: Duration::from_secs(30),
            attempt_timeout: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The read side's: a fetch that cannot be served should answer 503
    /// within seconds, not after the write side's patience (4 attempts,
    /// 50 ms doubling to 1 s, none after 10 s, 15 s an attempt).
    pub fn for_reads() -> RetryPolicy {
        RetryPolicy {
            attempts: 4,
            first_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
            deadline: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(15),
        }
    }
}

/// Whether an error can pass on a retry.
pub fn transient(e: &object_store::Error) -> bool {
    matches!(
        e,
        object_store::Error::Generic { .. } | object_store::Error::JoinError { .. }
    )
}

/// Runs `call` until it succeeds, fails for good, or the policy is spent;
/// each retry bumps `retries` and logs at warn.
pub async fn retry<T, F, Fut>(
    policy: &RetryPolicy,
    op: &'static str,
    retries: &AtomicU64,
    mut call: F,
) -> Result<T, object_store::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, object_store::Error>>,
{
    let started = Instant::now();
    let mut backoff = policy.first_backoff;
    let mut attempt = 1;
    loop {
        let outcome = match tokio::time::timeout(policy.attempt_timeout, call()).await {
            Ok(outcome) => outcome,
            Err(_) => Err(object_store::Error::Generic {
                store: "tidelog-tiered",
                source: format!("{op} timed out after {:?}", policy.attempt_timeout).into(),
            }),
        };
        match outcome {
            Ok(v) => return Ok(v),
            Err(e)
                if transient(&e)
                    && attempt < policy.attempts
                    && started.elapsed() + backoff < policy.deadline =>
            {
                tracing::warn!(op, attempt, backoff_ms = backoff.as_millis() as u64, error = %e, "object store call failed; retrying");
                bump(retries, 1);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(policy.max_backoff);
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn generic() -> object_store::Error {
        object_store::Error::Generic {
            store: "test",
            source: "boom".into(),
        }
    }

    fn fast(attempts: u32) -> RetryPolicy {
        RetryPolicy {
            attempts,
            first_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(4),
            deadline: Duration::from_secs(60),
            attempt_timeout: Duration::from_secs(60),
        }
    }

    #[tokio::test]
    async fn transient_errors_are_retried_up_to_the_bound() {
        let retries = AtomicU64::new(0);
        let mut calls = 0;
        let out = retry(&fast(4), "op", &retries, || {
            calls += 1;
            let fail = calls < 3;
            async move {
                if fail {
                    Err(generic())
                } else {
                    Ok(calls)
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(out, 3);
        assert_eq!(retries.load(Ordering::Relaxed), 2);

        let mut calls = 0;
        let err = retry(&fast(4), "op", &retries, || {
            calls += 1;
            async { Err::<(), _>(generic()) }
        })
        .await
        .unwrap_err();
        assert!(transient(&err));
        assert_eq!(calls, 4, "attempts are bounded");
    }

    #[tokio::test]
    async fn answers_are_not_retried() {
        let retries = AtomicU64::new(0);
        let mut calls = 0;
        let err = retry(&fast(4), "op", &retries, || {
            calls += 1;
            async {
                Err::<(), _>(object_store::Error::NotFound {
                    path: "x".into(),
                    source: "gone".into(),
                })
            }
        })
        .await
        .unwrap_err();
        assert!(matches!(err, object_store::Error::NotFound { .. }));
        assert_eq!(calls, 1);
        assert_eq!(retries.load(Ordering::Relaxed), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_attempt_times_out_and_the_deadline_bounds_the_retries() {
        let retries = AtomicU64::new(0);
        let policy = RetryPolicy {
            attempts: 100,
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(1),
            deadline: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(2),
        };
        let mut calls = 0;
        let err = retry(&policy, "op", &retries, || {
            calls += 1;
            std::future::pending::<Result<(), object_store::Error>>()
        })
        .await
        .unwrap_err();
        assert!(transient(&err));
        // 2 s an attempt plus 1 s of backoff: the 10 s deadline stops it
        // long before 100 attempts.
        assert!((3..=5).contains(&calls), "{calls}");
    }
}
