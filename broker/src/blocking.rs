//! Where the broker runs work that blocks a thread (a registry write and
//! its fsync, a compacted log's read from disk, a retention pass): on
//! tokio's blocking pool, so an async worker never waits on a disk. The
//! broker's door decides this per operation; no front-end does.

use crate::error::BrokerError;

/// Runs `f` on the blocking pool and awaits it.
pub(crate) async fn run<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, BrokerError> + Send + 'static,
) -> Result<T, BrokerError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|source| {
            Err(BrokerError::BlockingTaskFailed {
                task: "a blocking broker call",
                source,
            })
        })
}
