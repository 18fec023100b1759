//! Seeded model test of the broker through the calls the front-ends make
//! (`common::driver::Driver`): random sequences of HTTP produce (per-record
//! partitions, a path partition, key-hashed and round-robin records, an
//! auto-created topic), Kafka produce (one partition's batch, plain or an
//! idempotent producer's: in sequence, retried, out of sequence, of an old
//! epoch), InitProducerId (new producers, epoch bumps), fetches through
//! HTTP's and Kafka's read paths from random offsets with random limits,
//! ListOffsets by timestamp, DeleteRecords, compaction on request, group
//! offset commits and fetches, and clean restarts, over a topic of each
//! `cleanup.policy` (`delete`, `compact`, `compact,delete` with a
//! `delete.retention.ms` of 0, 300 ms or a day). After every step that
//! reads, the broker's answers are checked against a plain model
//! (`common::model`):
//!
//! - produce is all or nothing: a request breaking a rule (an unknown
//!   partition, a record's partition not the path's, a keyless record on a
//!   compact topic) is refused with that rule's error and writes nothing;
//!   an accepted one gets, per partition, the next offsets in order, never
//!   handed out twice, and a keyed record without a partition lands on its
//!   key's murmur2 partition;
//! - an idempotent producer's batch in sequence is written; a retry of one
//!   of its five retained batches answers that batch's offsets and writes
//!   nothing; a gap is OutOfOrder (UnknownProducer with no state in the
//!   partition), an old epoch StaleEpoch; a new epoch starts at sequence
//!   0; producer ids are never handed out twice; all of it across
//!   restarts;
//! - a partition's end offset is what was acknowledged, and its log start
//!   what DeleteRecords moved it to (−1 the end, past the end out of
//!   range, at or below the start no move; refused on a `compact` topic);
//! - every record served is the one acknowledged at its offset, field for
//!   field (key, value, headers in order with nulls, the given timestamp or
//!   an append time between the produce's call and answer); offsets served
//!   only increase, never below the log start;
//! - a topic that does not compact serves every acknowledged record from
//!   the log start; a fetch returns the first of them at or after its
//!   offset (at least one if there is one, at most its `max_records`);
//! - ListOffsets by timestamp on a topic that does not compact answers
//!   the first offset from the log start whose timestamp is at least the
//!   one asked for, or the end;
//! - a compact topic serves, per key, its latest record as the newest of
//!   the key (a key never comes back to an older value), unless that is a
//!   tombstone past its `delete.retention.ms` or below the log start, and
//!   then nothing of the key; a fetch skips no such required record;
//! - compaction on request finishes a pass on every partition (and is
//!   refused on a topic that does not compact);
//! - `__consumer_offsets` is refused to HTTP and Kafka produce and to
//!   DeleteRecords; an empty HTTP produce writes nothing;
//! - group offsets are the last commit of each partition, with its
//!   metadata; a commit with an unknown topic or partition, or metadata
//!   over 4096 bytes, changes nothing;
//! - after a restart all of the above still holds.
//!
//! Background cleaner passes run when they like (the cleaner's own
//! threads), so what compaction has removed yet is bounded, never
//! predicted. A fixed set of seeds runs in CI (a few seconds in a debug
//! build), and together they must reach every case (`Coverage`). Each seed
//! is printed before it runs; rerun one with `TIDELOG_MODEL_SEED=<seed>`
//! (and `TIDELOG_MODEL_TRACE=1` to print every step), or try more with
//! `TIDELOG_MODEL_SEEDS=<n>`. A seed that found a bug is pinned in a
//! `model_N.rs` beside this file.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::model::{run_seed, Coverage};

/// Seeds run by default (CI).
const CI_SEEDS: u64 = 12;
/// Steps of each seed.
const STEPS: usize = 150;

#[test]
fn random_produce_fetch_delete_compact_commit_and_restart_match_the_model() {
    let seeds: Vec<u64> = match std::env::var("TIDELOG_MODEL_SEED") {
        Ok(s) => vec![s.parse().expect("TIDELOG_MODEL_SEED is a number")],
        Err(_) => {
            let n = std::env::var("TIDELOG_MODEL_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(CI_SEEDS);
            (1..=n).collect()
        }
    };
    let several = seeds.len() >= CI_SEEDS as usize;
    let mut total = Coverage::default();
    for seed in seeds {
        total.add(&run_seed(seed, STEPS));
    }
    eprintln!("broker model: {total:?}");
    if several {
        total.assert_complete();
    }
}
