//! SplitMix64, the one seeded generator of the model tests, the power-loss
//! test and the benches (a seed names a run, so a failure can be replayed).
//! Small and fast; not for anything that must be unpredictable.

/// SplitMix64 over its state; `SplitMix64(seed)` starts a sequence.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next value. Named like the copies it replaced; an endless
    /// generator, not an `Iterator`.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform enough in `[0, n)`; `n` at least 1.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True about once in `n` calls.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published SplitMix64 sequence for seed 0 (so a seed names the
    /// same run everywhere).
    #[test]
    fn matches_the_reference_sequence() {
        let mut r = SplitMix64(0);
        assert_eq!(r.next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next(), 0x6e78_9e6a_a1b9_65f4);
    }
}
