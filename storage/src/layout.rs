//! The data directory's layout: the names of the store's own directories
//! and marker files, written once, so every module that builds a path
//! into the data dir (the store, `log_head`, the broker's restore, the
//! cleaner) spells them the same way.
//!
//! ```text
//! <data_dir>/
//!   lock           LOCK_FILE: flocked by the one process serving the dir
//!   abort          ABORT_FILE: there while a store is open; left by a crash
//!   commitlog/     COMMITLOG_DIR: the CommitLog's segments
//!   consumequeue/  CONSUMEQUEUE_DIR: each partition's ConsumeQueue files
//!   index/         INDEX_DIR: the IndexFiles
//! ```
//!
//! A file of one format (`checkpoint`, `queue-ends`, `log-head`, ...) is
//! named by the module that owns the format (its `FILE_NAME`).
//!
//! Invariant: this file imports nothing of the crate (a leaf every module
//! may use; `tidelog_storage::store` re-exports the names).

pub const LOCK_FILE: &str = "lock";
pub const ABORT_FILE: &str = "abort";
pub const COMMITLOG_DIR: &str = "commitlog";
pub const CONSUMEQUEUE_DIR: &str = "consumequeue";
pub const INDEX_DIR: &str = "index";
