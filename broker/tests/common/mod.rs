//! What the broker's seeded model tests share (`model.rs` and the pinned
//! regressions `model_N.rs`):
//!
//! * [`driver`]: [`driver::Driver`], the one place the tests call into the
//!   broker. Every operation goes through it the way a front-end makes it
//!   (HTTP's per-record produce, Kafka's partition batch with and without an
//!   idempotent producer, a fetch after the read-your-writes wait, ...),
//!   so a change of the broker's API is an edit of that file alone.
//! * [`model`]: the in-memory model, the random steps and the checks
//!   after each of them; [`model::run_seed`] runs one seed.
//! * [`Rng`]: the seeded generator, so a failure replays from its seed.
//!
//! Each test binary compiles this module on its own and may use a part of
//! it only.
#![allow(dead_code)]

pub mod driver;
pub mod model;

use tidelog_storage::test_rng::SplitMix64;

/// The workspace's seeded generator (`tidelog_storage::test_rng`, that of
/// every model test), with the draws the model makes.
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64(seed))
    }

    pub fn next(&mut self) -> u64 {
        self.0.next()
    }

    /// In `[0, n)`; `n` at least 1.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}
