//! Seed 4 of the broker model test (`model.rs`), pinned: before its fix it
//! failed within its first few dozen steps, on a DeleteRecords made right
//! after a produce to the same partition. The two ways it showed (which
//! one, and at which step, depended on how far dispatch got):
//!
//! - refused: e.g. `events-1` holds 1 acknowledged record and a
//!   DeleteRecords below 1 answers `OffsetOutOfRange { high_watermark: 0 }`;
//! - answered wrong: e.g. `mixed-1` (`compact,delete`) holds 6
//!   acknowledged records and a DeleteRecords below −1 (the high
//!   watermark) answers `Ok(0)` or `Ok(1)`, the low watermark it moved
//!   the log start to: the records from there to 6, which the client
//!   asked to delete, stay.
//!
//! The cause: `Broker::delete_records` resolves −1 and checks the offset
//! against the dispatched end (`Store::delete_records`, the ConsumeQueue's),
//! not against what was acknowledged, and the Kafka front-end called it
//! without the read-your-writes wait its reads make
//! (`tidelog_broker::visibility`). A Kafka client deleting what it just
//! produced was told it was deleted when it was not, or got
//! OFFSET_OUT_OF_RANGE; Kafka's high watermark moves with the append.
//! The fix: the door's `Door::delete_records` waits, as a read does, until
//! every record acknowledged before it is visible. The seed failed on
//! every run before; it runs ten times to be sure.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::model::run_seed;

#[test]
fn seed_4_delete_records_sees_what_was_acknowledged() {
    for _ in 0..10 {
        run_seed(4, 150);
    }
}
