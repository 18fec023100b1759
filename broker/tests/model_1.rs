//! Seed 4 of the broker model test (`model.rs`), pinned: as the model
//! draws today, at its step 12 a Kafka produce of 5 records to `mixed`
//! (`compact,delete`) partition 1 is acknowledged (offsets 1..6), and at
//! step 15 a DeleteRecords of that partition below −1 (the high watermark)
//! answers `Ok(0)` or `Ok(1)` (whatever was dispatched by then), where
//! the model wants 6: the client is told the records are deleted, and they
//! are not. In other seeds the same call below an offset under the
//! acknowledged end is refused `OffsetOutOfRange { high_watermark: 0 }`.
//!
//! The cause: `Broker::delete_records` resolves −1 and checks the offset
//! against the dispatched end (`Store::delete_records`, the ConsumeQueue's),
//! not against what was acknowledged, and the Kafka front-end calls it
//! without the read-your-writes wait its reads make
//! (`tidelog_broker::visibility`). A Kafka client deleting what it just
//! produced is told it was deleted when it was not, or gets
//! OFFSET_OUT_OF_RANGE; Kafka's high watermark moves with the append.
//! It shows whenever dispatch lags the answer, which it did at this step on
//! every run here (the seed still runs ten times, to be sure).
//!
//! Ignored until the fix lands (then drop the `#[ignore]`, and
//! `Workarounds::visible_before_delete_records`, which the CI seeds run
//! with meanwhile). Run it with
//! `cargo nextest run -p tidelog-broker --test model_1 --run-ignored all`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::model::{run_seed, Workarounds};

#[test]
#[ignore = "DeleteRecords right after a produce is checked against the dispatched end (model_1.rs' doc)"]
fn seed_4_delete_records_sees_what_was_acknowledged() {
    for _ in 0..10 {
        run_seed(4, 150, Workarounds::NONE);
    }
}
