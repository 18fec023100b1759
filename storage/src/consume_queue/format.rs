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

use crate::codec::{get_u32, get_u64, put_u32, put_u64, U32_LEN, U64_LEN};
use crate::commit_log::format::RECORD_LEN_MAX;
use crate::error::CorruptionKind;

const OFF_PHYSICAL: usize = 0;
const OFF_SIZE: usize = OFF_PHYSICAL + U64_LEN;
const OFF_KEY_HASH: usize = OFF_SIZE + U32_LEN;
pub const UNIT_LEN: usize = OFF_KEY_HASH + U64_LEN;
// The unit is fixed at 20 bytes (formats.md): unit n is at byte n × 20.
const _: () = assert!(UNIT_LEN == 20);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub physical_offset: u64,
    pub size: u32,
    pub key_hash: u64,
}

impl Unit {
    pub fn encode(&self) -> [u8; UNIT_LEN] {
        let mut b = [0u8; UNIT_LEN];
        put_u64(&mut b, OFF_PHYSICAL, self.physical_offset);
        put_u32(&mut b, OFF_SIZE, self.size);
        put_u64(&mut b, OFF_KEY_HASH, self.key_hash);
        b
    }

    /// `Ok(None)` for an empty unit; `Err` with the reason for a unit that
    /// cannot be real.
    pub fn decode(b: &[u8; UNIT_LEN]) -> Result<Option<Unit>, CorruptionKind> {
        let physical_offset = get_u64(b, OFF_PHYSICAL);
        let size = get_u32(b, OFF_SIZE);
        let key_hash = get_u64(b, OFF_KEY_HASH);
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

    /// A unit's bytes written out by hand (see docs/formats.md).
    #[test]
    fn golden_bytes() {
        #[rustfmt::skip]
        let want: [u8; UNIT_LEN] = [
            0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // physical_offset
            0x34, 0x12, 0x00, 0x00, // size 0x1234
            0xd4, 0x4b, 0x4a, 0x75, 0xaa, 0xa2, 0x4b, 0xf8, // key_hash of "user-1"
        ];
        let u = Unit {
            physical_offset: 0x0102_0304_0506_0708,
            size: 0x1234,
            key_hash: key_hash(Some(b"user-1")),
        };
        assert_eq!(u.key_hash, 0xf84b_a2aa_754a_4bd4);
        assert_eq!(u.encode(), want);
        assert_eq!(Unit::decode(&want), Ok(Some(u)));
    }

    #[test]
    fn empty_and_bad_units() {
        assert_eq!(Unit::decode(&[0u8; UNIT_LEN]), Ok(None));
        let mut b = [0u8; UNIT_LEN];
        b[0] = 1;
        assert!(Unit::decode(&b).is_err(), "zero size with an offset");
        assert_eq!(Unit::decode(&b), Err(CorruptionKind::UnitZeroSize));
        let u = Unit {
            physical_offset: 0,
            size: u32::MAX,
            key_hash: 0,
        };
        assert!(Unit::decode(&u.encode()).is_err(), "size beyond any record");
        assert!(matches!(
            Unit::decode(&u.encode()),
            Err(CorruptionKind::UnitTooLarge { size: u32::MAX, .. })
        ));
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
