//! Choosing a partition for a record that names none.
//!
//! Keyed records use Kafka's default partitioner, bit for bit:
//! `toPositive(murmur2(key)) % partitions` with `Utils.murmur2` (seed
//! `0x9747b28c`). A topic mirrored from Kafka, or produced to by both a Kafka
//! producer and tidelog clients, therefore keeps each key in the same
//! partition, which is what per-key ordering and compaction rely on. The hash
//! runs over the stored key bytes: in the binary format these are exactly the
//! bytes a Kafka producer would send; in the json format they are the compact
//! JSON text (`"abc"` with its quotes), like Kafka's JSON serializer.
//!
//! Keyless records go round-robin, so load spreads evenly without the client
//! having to pick.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

/// Kafka's `Utils.murmur2`: MurmurHash2, 32 bit, seed `0x9747b28c`, Java
/// `int` arithmetic (wrapping multiply, logical shifts). Returns the signed
/// value Java would, so test vectors from Kafka compare directly.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java computes `seed ^ length` on an int; a key longer than i32::MAX
    // cannot reach us (body limits), and truncation matches Java anyway.
    let mut h: u32 = SEED ^ (data.len() as u32);

    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }

    // Java's switch falls through: 3 mixes bytes 2, 1, 0; 2 mixes 1, 0.
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if let Some(first) = tail.first() {
        h ^= u32::from(*first);
        h = h.wrapping_mul(M);
    }

    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which would
/// overflow on `i32::MIN` and map two hashes to one).
pub fn to_positive(n: i32) -> u32 {
    (n & 0x7fff_ffff) as u32
}

/// The partition Kafka's default partitioner picks for `key`.
pub fn partition_for_key(key: &[u8], partitions: NonZeroU32) -> u32 {
    to_positive(murmur2(key)) % partitions.get()
}

/// Round-robin over partitions for keyless records. One per topic; shared
/// between request handlers, so it is a lock-free counter.
#[derive(Debug, Default)]
pub struct RoundRobin {
    // 64 bits so the counter never wraps in practice; a wrap of a 32-bit
    // counter would repeat a partition when `partitions` is not a power of 2.
    next: AtomicU64,
}

impl RoundRobin {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next partition in turn: 0, 1, ..., partitions − 1, 0, ...
    /// If the partition count changes, the cycle continues from the counter.
    pub fn next(&self, partitions: NonZeroU32) -> u32 {
        // Relaxed: handlers only need distinct tickets, not ordering.
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        (ticket % u64::from(partitions.get())) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(partitions: u32) -> NonZeroU32 {
        NonZeroU32::new(partitions).unwrap()
    }

    /// Kafka's `UtilsTest.testMurmur2` (clients/src/test/java/org/apache/
    /// kafka/common/utils/UtilsTest.java). Together they cover all four tail
    /// lengths: 2, 6 (2), 24 (0), 26 (2), 48 (0), 3 (3).
    #[test]
    fn murmur2_matches_kafka_utils_test() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            (b"abc", 479470107),
        ];
        for (data, expected) in cases {
            assert_eq!(
                murmur2(data),
                expected,
                "{:?}",
                String::from_utf8_lossy(data)
            );
        }
    }

    #[test]
    fn murmur2_uses_every_byte_of_a_one_byte_tail() {
        // Length 5 has a tail of 1 byte (the only length Kafka's vectors miss);
        // changing that byte must change the hash.
        assert_ne!(murmur2(b"abcde"), murmur2(b"abcdf"));
        assert_ne!(
            murmur2(b""),
            murmur2(b"\0"),
            "length is mixed into the seed"
        );
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), 0x7fff_ffff);
        assert_eq!(to_positive(5), 5);
        assert_eq!(to_positive(-973932308), (-973932308i32 & 0x7fffffff) as u32);
    }

    #[test]
    fn partition_for_key_is_positive_hash_mod_partitions() {
        // -973932308 & 0x7fffffff = 1173551340 (Kafka vector, sign bit cleared).
        assert_eq!(to_positive(murmur2(b"21")), 1_173_551_340);
        assert_eq!(partition_for_key(b"21", n(4)), 1_173_551_340 % 4);
        assert_eq!(partition_for_key(b"21", n(7)), 1_173_551_340 % 7);
        // 479470107 is already positive.
        assert_eq!(partition_for_key(b"abc", n(10)), 479_470_107 % 10);
        assert_eq!(partition_for_key(b"anything", n(1)), 0);
        for key in [&b"x"[..], b"foobar", b""] {
            assert!(partition_for_key(key, n(3)) < 3);
        }
    }

    #[test]
    fn round_robin_cycles_through_every_partition() {
        let rr = RoundRobin::new();
        let picks: Vec<u32> = (0..7).map(|_| rr.next(n(3))).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn round_robin_is_fair_across_threads() {
        let rr = std::sync::Arc::new(RoundRobin::new());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let rr = rr.clone();
                std::thread::spawn(move || {
                    let mut counts = [0u32; 5];
                    for _ in 0..1000 {
                        counts[rr.next(n(5)) as usize] += 1;
                    }
                    counts
                })
            })
            .collect();
        let mut total = [0u32; 5];
        for h in handles {
            for (t, c) in total.iter_mut().zip(h.join().unwrap()) {
                *t += c;
            }
        }
        // 4000 tickets over 5 partitions: exactly 800 each.
        assert_eq!(total, [800; 5]);
    }
}
