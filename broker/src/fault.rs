//! The fault plans a test opens the broker with, forwarded to the store and
//! the LogCleaner (`Broker::open_with_faults`).
//!
//! Only with the `failpoints` cargo feature, which only dev-dependencies
//! enable (it turns on the store's and the cleaner's own). Without it
//! `Faults` is empty and the broker opens both the production way.

use std::sync::Arc;

use tidelog_cleaner::{CleanerConfig, CompactedLogs, CopySource, LogCleaner};
use tidelog_storage::DispatchSink;
use tidelog_storage::{DataDirLock, Store, StoreConfig};

/// The store's and the cleaner's own plans and points, so a front-end's
/// tests need no dependency on those crates.
#[cfg(feature = "failpoints")]
pub use tidelog_cleaner::fault::{FaultPoint as CleanerFaultPoint, Faults as CleanerFaults};
#[cfg(feature = "failpoints")]
pub use tidelog_storage::fault::{FaultPoint as StoreFaultPoint, Faults as StoreFaults};

/// Which plans to install; `None`: that part runs without one.
#[cfg(feature = "failpoints")]
#[derive(Clone, Debug, Default)]
pub struct Faults {
    pub store: Option<Arc<tidelog_storage::fault::Faults>>,
    pub cleaner: Option<Arc<tidelog_cleaner::fault::Faults>>,
}

/// Without `failpoints` there is nothing to install.
#[cfg(not(feature = "failpoints"))]
#[derive(Clone, Debug, Default)]
pub(crate) struct Faults {}

/// `Store::open_locked`, with the store's plan if there is one.
pub(crate) fn open_store(
    config: StoreConfig,
    sinks: Vec<Arc<dyn DispatchSink>>,
    lock: DataDirLock,
    faults: &Faults,
) -> tidelog_storage::Result<Store> {
    #[cfg(feature = "failpoints")]
    if let Some(plan) = &faults.store {
        return Store::open_locked_with_faults(config, sinks, lock, Arc::clone(plan));
    }
    let _ = faults;
    Store::open_locked(config, sinks, lock)
}

/// `LogCleaner::new`, with the cleaner's plan if there is one.
pub(crate) fn new_cleaner<S: CopySource + 'static>(
    logs: Arc<CompactedLogs>,
    data_dir: std::path::PathBuf,
    config: CleanerConfig,
    source: Arc<S>,
    faults: &Faults,
) -> tidelog_cleaner::Result<LogCleaner> {
    #[cfg(feature = "failpoints")]
    if let Some(plan) = &faults.cleaner {
        return LogCleaner::new_with_faults(logs, data_dir, config, source, Arc::clone(plan));
    }
    let _ = faults;
    LogCleaner::new(logs, data_dir, config, source)
}
