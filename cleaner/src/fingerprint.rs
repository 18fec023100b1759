//! 64-bit key fingerprints for the offset map: SipHash-2-4 (its 64-bit
//! output), under a secret key drawn per map.
//!
//! Invariants:
//! - The output is exactly the reference SipHash-2-4 of Aumasson and
//!   Bernstein (checked against the reference `vectors.h` below, both the
//!   64-bit output used and the 128-bit one), so its quality is the
//!   published one, not ours.
//! - A map draws a fresh random key (see `random_key`), so nobody outside the
//!   process can predict fingerprints.
//!
//! A fingerprint only finds a key's slot; it never decides alone that a
//! record is superseded. The cleaner compares the key bytes of the record
//! the slot points at before it drops anything (offset_map.rs, "Collisions"),
//! so two keys with one fingerprint cost an extra record kept, never a live
//! value. That is why 64 bits are enough where Kafka's MD5 needs 128.
//!
//! Why SipHash and not MurmurHash3 or MD5 (Kafka's choice): keys come from
//! clients. MurmurHash3 has published seed-independent multicollisions
//! (Aumasson, Bernstein and Boßlet, "Hash-flooding DoS reloaded", 2012), so
//! a producer could make many keys share one fingerprint, and their records
//! would then be kept uncompacted and probed past on every lookup. MD5 is
//! slower, most of all on short keys (it always processes at least one
//! 64-byte block). SipHash is a keyed PRF: without the secret key nobody can
//! compute a fingerprint at all, let alone aim for a collision; accidental
//! collisions among n distinct keys have probability about n^2 / 2^65.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// A key's 64-bit fingerprint: the SipHash-2-4 (64-bit output) of the key.
pub(crate) type Fingerprint = u64;

/// SipHash state: the four 64-bit lanes.
struct SipState {
    v0: u64,
    v1: u64,
    v2: u64,
    v3: u64,
}

impl SipState {
    #[inline(always)]
    fn round(&mut self) {
        self.v0 = self.v0.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(13);
        self.v1 ^= self.v0;
        self.v0 = self.v0.rotate_left(32);
        self.v2 = self.v2.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(16);
        self.v3 ^= self.v2;
        self.v0 = self.v0.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(21);
        self.v3 ^= self.v0;
        self.v2 = self.v2.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(17);
        self.v1 ^= self.v2;
        self.v2 = self.v2.rotate_left(32);
    }

    #[inline(always)]
    fn compress(&mut self, m: u64) {
        self.v3 ^= m;
        self.round();
        self.round();
        self.v0 ^= m;
    }

    #[inline(always)]
    fn finalize(&mut self) -> u64 {
        for _ in 0..4 {
            self.round();
        }
        self.v0 ^ self.v1 ^ self.v2 ^ self.v3
    }
}

/// SipHash-2-4. `wide` selects the 128-bit output variant (which differs from
/// the 64-bit one in its initialisation and finalisation constants, not just
/// by running longer); the 64-bit variant exists so the core can be checked
/// against the paper's vectors too.
#[inline]
fn siphash_2_4(key: &[u64; 2], msg: &[u8], wide: bool) -> [u64; 2] {
    let mut s = SipState {
        v0: key[0] ^ 0x736f_6d65_7073_6575,
        v1: key[1] ^ 0x646f_7261_6e64_6f6d,
        v2: key[0] ^ 0x6c79_6765_6e65_7261,
        v3: key[1] ^ 0x7465_6462_7974_6573,
    };
    if wide {
        s.v1 ^= 0xee;
    }
    let mut words = msg.chunks_exact(8);
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        s.compress(u64::from_le_bytes(bytes));
    }
    let tail = words.remainder();
    let mut last = [0u8; 8];
    last[..tail.len()].copy_from_slice(tail);
    // The length only enters modulo 256, as the specification says.
    s.compress(u64::from_le_bytes(last) | ((msg.len() as u64) << 56));
    s.v2 ^= if wide { 0xee } else { 0xff };
    let first = s.finalize();
    if !wide {
        return [first, 0];
    }
    s.v1 ^= 0xdd;
    let second = s.finalize();
    [first, second]
}

/// The fingerprint of `msg` under `key`.
#[inline]
pub(crate) fn fingerprint(key: &[u64; 2], msg: &[u8]) -> Fingerprint {
    siphash_2_4(key, msg, false)[0]
}

/// A fresh secret SipHash key. std's `RandomState` is seeded from the
/// operating system's randomness once per thread and perturbed per call; two
/// of its (SipHash-1-3) outputs are unpredictable from outside the process,
/// which is all the fingerprint key needs. This avoids a dependency on a
/// random-number crate.
pub(crate) fn random_key() -> [u64; 2] {
    let state = RandomState::new();
    let lane = |tag: u64| {
        let mut h = state.build_hasher();
        h.write_u64(tag);
        h.finish()
    };
    [lane(0), lane(1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference key 00 01 02 .. 0f of the SipHash test vectors.
    const REFERENCE_KEY: [u64; 2] = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];

    /// Message `i` of the reference vectors: the bytes 00 01 .. (i-1).
    fn reference_message(len: usize) -> Vec<u8> {
        (0..len).map(|i| i as u8).collect()
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn matches_reference_siphash_2_4_128_vectors() {
        // From `vectors_sip128` in the reference implementation's vectors.h
        // (github.com/veorq/SipHash): tag over message 00..(len-1), key
        // 00..0f. The lengths cover empty input, a partial word, the word
        // boundary on both sides, and several full words.
        let vectors: [(usize, &str); 11] = [
            (0, "a3817f04ba25a8e66df67214c7550293"),
            (1, "da87c1d86b99af44347659119b22fc45"),
            (2, "8177228da4a45dc7fca38bdef60affe4"),
            (7, "a1f1ebbed8dbc153c0b84aa61ff08239"),
            (8, "3b62a9ba6258f5610f83e264f31497b4"),
            (9, "264499060ad9baabc47f8b02bb6d71ed"),
            (15, "5493e99933b0a8117e08ec0f97cfc3d9"),
            (16, "6ee2a4ca67b054bbfd3315bf85230577"),
            (31, "2939b0183223fafc1723de4f52c43d35"),
            (32, "7c3956ca5eeafc3e363e9d556546eb68"),
            (63, "5150d1772f50834a503e069a973fbd7c"),
        ];
        for (len, expected) in vectors {
            let [a, b] = siphash_2_4(&REFERENCE_KEY, &reference_message(len), true);
            let mut out = [0u8; 16];
            out[..8].copy_from_slice(&a.to_le_bytes());
            out[8..].copy_from_slice(&b.to_le_bytes());
            assert_eq!(hex(&out), expected, "message length {len}");
        }
    }

    #[test]
    fn matches_reference_siphash_2_4_64_vectors() {
        // The 64-bit variant shares the compression function; its vectors
        // (including the paper's worked example, length 15) pin the core.
        let vectors: [(usize, u64); 4] = [
            (0, 0x726f_db47_dd0e_0e31),
            (8, 0x93f5_f579_9a93_2462),
            (15, 0xa129_ca61_49be_45e5),
            (63, 0x958a_324c_eb06_4572),
        ];
        for (len, expected) in vectors {
            let [out, _] = siphash_2_4(&REFERENCE_KEY, &reference_message(len), false);
            assert_eq!(out, expected, "message length {len}");
        }
    }

    #[test]
    fn random_keys_differ() {
        // Two maps must not share a key, or a collision in one pass would
        // repeat in every pass.
        assert_ne!(random_key(), random_key());
    }

    #[test]
    fn key_changes_the_fingerprint() {
        let msg = b"user-42";
        assert_ne!(
            fingerprint(&[1, 2], msg),
            fingerprint(&[1, 3], msg),
            "the fingerprint must depend on the secret key"
        );
    }
}
