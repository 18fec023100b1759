//! tidelog-storage: everything tidelog keeps on disk.
//!
//! No async runtime lives here: the store runs on named OS threads and its
//! blocking calls are meant to be reached from `spawn_blocking` or plain
//! threads. Readers that wait for new records get a runtime-agnostic future.

pub mod error;
pub mod fs_util;

pub use error::{Result, StoreError};
