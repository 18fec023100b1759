//! The ready slot: where the opened broker is once recovery is done.
//!
//! The server binds its listeners before it opens the store (recovery can
//! take a while), so `/status/ready` answers 503 and Kafka partitions
//! LEADER_NOT_AVAILABLE until the broker is [`ReadySlot::publish`]ed. At
//! shutdown the node [`ReadySlot::take`]s it back, to close it cleanly
//! once no request holds it.
//!
//! Invariants:
//! - The slot's lock is held only to clone, set or take an `Arc`, never
//!   across an `.await` or a call into what it holds.
//! - After [`ReadySlot::take`] the slot is empty for good unless published
//!   again: every reader then sees "not ready".
//! - Readers hold the value only for one request or one pass; whoever must
//!   not keep it alive (a periodic thread) holds it weakly.
//!
//! Generic over what it holds so this crate needs nothing of the broker.

use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How often [`ReadySlot::take`] looks whether the last other holder let
/// go: blocking store calls finish in milliseconds and signal nothing when
/// they do.
const TAKE_POLL: Duration = Duration::from_millis(10);

/// The value once it is ready (module doc); shared as `Arc<ReadySlot<T>>`.
pub struct ReadySlot<T> {
    slot: RwLock<Option<Arc<T>>>,
}

impl<T> Default for ReadySlot<T> {
    fn default() -> Self {
        ReadySlot {
            slot: RwLock::new(None),
        }
    }
}

impl<T> fmt::Debug for ReadySlot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadySlot")
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl<T> ReadySlot<T> {
    /// An empty slot (recovery has not finished).
    pub fn new() -> Arc<ReadySlot<T>> {
        Arc::new(ReadySlot::default())
    }

    /// The value, or `None` before it is published (or after it is taken).
    pub fn get(&self) -> Option<Arc<T>> {
        self.slot.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn is_ready(&self) -> bool {
        self.slot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Publishes `value`: from now on [`ReadySlot::get`] answers it.
    pub fn publish(&self, value: Arc<T>) {
        *self.slot.write().unwrap_or_else(|e| e.into_inner()) = Some(value);
    }

    /// Takes the value back once nobody else holds it: empties the slot at
    /// once, then waits for holders still running (a blocking call whose
    /// client went away, say) for at most `timeout`. `None` if nothing was
    /// published; `Err` gives the `Arc` back if some still hold it then.
    pub async fn take(&self, timeout: Duration) -> Option<Result<T, Arc<T>>> {
        let taken = self
            .slot
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut ready = taken;
        loop {
            match Arc::try_unwrap(ready) {
                Ok(r) => return Some(Ok(r)),
                Err(still_shared) => {
                    if tokio::time::Instant::now() >= deadline {
                        return Some(Err(still_shared));
                    }
                    ready = still_shared;
                    tokio::time::sleep(TAKE_POLL).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn take_waits_for_the_last_holder_and_empties_the_slot() {
        let slot = ReadySlot::new();
        assert!(slot.get().is_none());
        assert!(slot.take(Duration::ZERO).await.is_none());
        slot.publish(Arc::new(7u32));
        assert!(slot.is_ready());
        let held = slot.get().unwrap();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(held);
        });
        assert_eq!(slot.take(Duration::from_secs(10)).await, Some(Ok(7)));
        assert!(!slot.is_ready());
        release.await.unwrap();

        slot.publish(Arc::new(8));
        let _kept = slot.get().unwrap();
        let still = slot.take(Duration::from_millis(20)).await.unwrap();
        assert_eq!(still.map_err(|a| *a), Err(8));
    }
}
