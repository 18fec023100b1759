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

/// A tiny seeded PRNG (xorshift64*), so failures reproduce from the seed:
/// `cleaner/tests/model.rs`' generator (the test binaries of two crates
/// share no module).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Spread small seeds (1, 2, ...) over the state space.
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}
