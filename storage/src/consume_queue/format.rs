//! Byte layout of a ConsumeQueue unit.
//!
//! ```text
//! offset  size  field
//!      0     8  physical_offset  u64, where the record starts in the CommitLog
//!      8     4  size             u32, bytes of the record (0 = no unit here)
//!     12     8  key_hash         u64, FNV-1a of the key (0 for keyless)
//! ```
//! Unit `n` of a partition sits at byte `n * UNIT_LEN` of the partition's
//! queue, so lookup by queue offset is O(1). Files are named by the byte
//! offset of their first unit. A unit with size 0 was never written (a hole
//! left by a gap or a truncation), so readers skip it.

use crate::commit_log::format::RECORD_LEN_MAX;
use crate::error::CorruptionKind;

pub const UNIT_LEN: usize = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub physical_offset: u64,
    pub size: u32,
    pub key_hash: u64,
}

impl Unit {
    pub fn encode(&self) -> [u8; UNIT_LEN] {
        let mut b = [0u8; UNIT_LEN];
        b[0..8].copy_from_slice(&self.physical_offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.size.to_le_bytes());
        b[12..20].copy_from_slice(&self.key_hash.to_le_bytes());
        b
    }

    /// `Ok(None)` for an empty unit; `Err` with the reason for a unit that
    /// cannot be real.
    pub fn decode(b: &[u8; UNIT_LEN]) -> Result<Option<Unit>, CorruptionKind> {
        let mut u64b = [0u8; 8];
        u64b.copy_from_slice(&b[0..8]);
        let physical_offset = u64::from_le_bytes(u64b);
        let size = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        u64b.copy_from_slice(&b[12..20]);
        let key_hash = u64::from_le_bytes(u64b);
        if size == 0 {
            return if physical_offset == 0 && key_hash == 0 {
                Ok(None)
            } else {
                Err(CorruptionKind::UnitZeroSize)
            };
        }
        if size as usize > RECORD_LEN_MAX {
            return Err(CorruptionKind::UnitTooLarge {
                size,
                max: RECORD_LEN_MAX,
            });
        }
        Ok(Some(Unit {
            physical_offset,
            size,
            key_hash,
        }))
    }
}

/// Stable 64-bit FNV-1a hash of a key, stored in units (a tag for filtering
/// without reading the record). Stable across builds, unlike `ahash`.
pub fn key_hash(key: Option<&[u8]>) -> u64 {
    let Some(key) = key else { return 0 };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_round_trip() {
        let u = Unit {
            physical_offset: 1 << 40,
            size: 1234,
            key_hash: key_hash(Some(b"user-1")),
        };
        assert_eq!(Unit::decode(&u.encode()), Ok(Some(u)));
    }

    #[test]
    fn empty_and_bad_units() {
        assert_eq!(Unit::decode(&[0u8; UNIT_LEN]), Ok(None));
        let mut b = [0u8; UNIT_LEN];
        b[0] = 1;
        assert!(Unit::decode(&b).is_err(), "zero size with an offset");
        let u = Unit {
            physical_offset: 0,
            size: u32::MAX,
            key_hash: 0,
        };
        assert!(Unit::decode(&u.encode()).is_err(), "size beyond any record");
    }

    #[test]
    fn fnv_vectors() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(key_hash(Some(b"")), 0xcbf2_9ce4_8422_2325);
        assert_eq!(key_hash(Some(b"a")), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(key_hash(Some(b"foobar")), 0x8594_4171_f739_67e8);
        assert_eq!(key_hash(None), 0);
    }
}
