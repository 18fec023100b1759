//! Seed 4 of the broker model test (`model.rs`), pinned: at its step 20 an
//! HTTP produce to `events` is acknowledged (offsets 0..3 of partition 0)
//! and the DeleteRecords that follows at once, below offset 1, is refused
//! `OffsetOutOfRange { high_watermark: 0 }`: `Broker::delete_records`
//! checks the offset against the dispatched end (`Store::delete_records`,
//! the ConsumeQueue's), not against what was acknowledged, and the Kafka
//! front-end calls it without the read-your-writes wait its reads make
//! (`tidelog_broker::visibility`). A Kafka client deleting what it just
//! produced gets OFFSET_OUT_OF_RANGE now and then; Kafka's high watermark
//! moves with the append.
//!
//! It shows only when dispatch lags the answer (a few runs in ten on a
//! busy two-core machine), so the seed runs ten times.
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
