//! Byte layout of an IndexFile (RocketMQ's, with a magic and version in
//! front so a stray file is never taken for an index).
//!
//! ```text
//! header (HEADER_LEN = 56 bytes)
//! offset  size  field
//!      0     4  magic            u32, MAGIC
//!      4     2  version          u16, VERSION
//!      6     2  reserved         0
//!      8     8  begin_timestamp  i64, ms, store time of the first entry
//!     16     8  end_timestamp    i64, ms, store time of the last entry
//!     24     8  begin_physical   u64, physical offset of the first entry
//!     32     8  end_physical     u64, physical offset of the last entry
//!     40     4  slot_count       u32
//!     44     4  entry_capacity   u32
//!     48     4  entry_count      u32, entries used; entry 0 is never used
//!     52     4  reserved         0
//! slots: slot_count × u32, index of the newest entry whose hash maps to the
//!        slot (0 = none)
//! entries: entry_capacity × 20 bytes
//!      0     4  key_hash         u32
//!      4     8  physical_offset  u64
//!     12     4  time_delta_s     u32, seconds since begin_timestamp
//!     16     4  prev             u32, older entry in the same slot (0 = end)
//! ```
//! Chains run newest first and `prev` is always smaller than the entry's own
//! index, so a walk terminates even over damaged data.

use crate::error::CorruptionKind;

pub const MAGIC: u32 = 0x5449_4458; // "TIDX"
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 56;
pub const SLOT_LEN: usize = 4;
pub const ENTRY_LEN: usize = 20;

pub const OFF_BEGIN_TS: usize = 8;
pub const OFF_END_TS: usize = 16;
pub const OFF_BEGIN_PHYS: usize = 24;
pub const OFF_END_PHYS: usize = 32;
pub const OFF_SLOT_COUNT: usize = 40;
pub const OFF_ENTRY_CAPACITY: usize = 44;
pub const OFF_ENTRY_COUNT: usize = 48;

/// Bounds on the sizes read from a header, checked before mapping.
pub const SLOT_COUNT_MAX: u32 = 1 << 26;
pub const ENTRY_CAPACITY_MAX: u32 = 1 << 27;

const _: () = assert!(OFF_ENTRY_COUNT + 8 == HEADER_LEN);
const _: () = assert!(HEADER_LEN % 8 == 0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexHeader {
    pub begin_timestamp_ms: i64,
    pub end_timestamp_ms: i64,
    pub begin_physical: u64,
    pub end_physical: u64,
    pub slot_count: u32,
    pub entry_capacity: u32,
    /// Entries used, counting the unused entry 0 (so 1 when empty).
    pub entry_count: u32,
}

impl IndexHeader {
    pub fn new(slot_count: u32, entry_capacity: u32) -> Self {
        IndexHeader {
            begin_timestamp_ms: 0,
            end_timestamp_ms: 0,
            begin_physical: 0,
            end_physical: 0,
            slot_count,
            entry_capacity,
            entry_count: 1,
        }
    }

    pub fn file_len(&self) -> usize {
        file_len(self.slot_count, self.entry_capacity)
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[OFF_BEGIN_TS..OFF_BEGIN_TS + 8].copy_from_slice(&self.begin_timestamp_ms.to_le_bytes());
        b[OFF_END_TS..OFF_END_TS + 8].copy_from_slice(&self.end_timestamp_ms.to_le_bytes());
        b[OFF_BEGIN_PHYS..OFF_BEGIN_PHYS + 8].copy_from_slice(&self.begin_physical.to_le_bytes());
        b[OFF_END_PHYS..OFF_END_PHYS + 8].copy_from_slice(&self.end_physical.to_le_bytes());
        b[OFF_SLOT_COUNT..OFF_SLOT_COUNT + 4].copy_from_slice(&self.slot_count.to_le_bytes());
        b[OFF_ENTRY_CAPACITY..OFF_ENTRY_CAPACITY + 4]
            .copy_from_slice(&self.entry_capacity.to_le_bytes());
        b[OFF_ENTRY_COUNT..OFF_ENTRY_COUNT + 4].copy_from_slice(&self.entry_count.to_le_bytes());
        b
    }

    /// Decode and check a header; `file_len` is the file's actual length.
    pub fn decode(b: &[u8], file_len: u64) -> Result<IndexHeader, CorruptionKind> {
        if b.len() < HEADER_LEN {
            return Err(CorruptionKind::NoHeader {
                what: "index header",
                len: b.len() as u64,
            });
        }
        let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let u64_at = |at: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(x)
        };
        if u32_at(0) != MAGIC {
            return Err(CorruptionKind::BadMagic { found: u32_at(0) });
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != VERSION {
            return Err(CorruptionKind::UnknownVersion { found: version });
        }
        let h = IndexHeader {
            begin_timestamp_ms: u64_at(OFF_BEGIN_TS) as i64,
            end_timestamp_ms: u64_at(OFF_END_TS) as i64,
            begin_physical: u64_at(OFF_BEGIN_PHYS),
            end_physical: u64_at(OFF_END_PHYS),
            slot_count: u32_at(OFF_SLOT_COUNT),
            entry_capacity: u32_at(OFF_ENTRY_CAPACITY),
            entry_count: u32_at(OFF_ENTRY_COUNT),
        };
        if h.slot_count == 0 || h.slot_count > SLOT_COUNT_MAX {
            return Err(CorruptionKind::OutOfRange {
                field: "slot count",
                value: h.slot_count,
                min: 1,
                max: SLOT_COUNT_MAX,
            });
        }
        if h.entry_capacity < 2 || h.entry_capacity > ENTRY_CAPACITY_MAX {
            return Err(CorruptionKind::OutOfRange {
                field: "entry capacity",
                value: h.entry_capacity,
                min: 2,
                max: ENTRY_CAPACITY_MAX,
            });
        }
        if h.entry_count == 0 || h.entry_count > h.entry_capacity {
            return Err(CorruptionKind::OutOfRange {
                field: "entry count",
                value: h.entry_count,
                min: 1,
                max: h.entry_capacity,
            });
        }
        if h.file_len() as u64 != file_len {
            return Err(CorruptionKind::IndexFileLength {
                len: file_len,
                implied: h.file_len() as u64,
            });
        }
        if h.entry_count > 1 && h.end_physical < h.begin_physical {
            return Err(CorruptionKind::IndexRangeBackwards);
        }
        Ok(h)
    }
}

pub fn file_len(slot_count: u32, entry_capacity: u32) -> usize {
    HEADER_LEN + slot_count as usize * SLOT_LEN + entry_capacity as usize * ENTRY_LEN
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key_hash: u32,
    pub physical_offset: u64,
    pub time_delta_s: u32,
    pub prev: u32,
}

impl Entry {
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[0..4].copy_from_slice(&self.key_hash.to_le_bytes());
        b[4..12].copy_from_slice(&self.physical_offset.to_le_bytes());
        b[12..16].copy_from_slice(&self.time_delta_s.to_le_bytes());
        b[16..20].copy_from_slice(&self.prev.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; ENTRY_LEN]) -> Entry {
        let mut p = [0u8; 8];
        p.copy_from_slice(&b[4..12]);
        Entry {
            key_hash: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            physical_offset: u64::from_le_bytes(p),
            time_delta_s: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
            prev: u32::from_le_bytes([b[16], b[17], b[18], b[19]]),
        }
    }
}

/// Hash of (topic, key) that picks the slot and is stored in the entry:
/// CRC32C of `topic`, a `#`, then the key. Stable across builds and
/// machines (an on-disk format must not use a randomly seeded hash).
pub fn key_hash(topic: &str, key: &[u8]) -> u32 {
    let h = crc32c::crc32c_append(crc32c::crc32c(topic.as_bytes()), b"#");
    crc32c::crc32c_append(h, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let h = IndexHeader {
            begin_timestamp_ms: 1_700_000_000_000,
            end_timestamp_ms: 1_700_000_100_000,
            begin_physical: 10,
            end_physical: 9000,
            slot_count: 16,
            entry_capacity: 64,
            entry_count: 5,
        };
        let b = h.encode();
        assert_eq!(IndexHeader::decode(&b, h.file_len() as u64), Ok(h));
    }

    #[test]
    fn bad_headers() {
        let h = IndexHeader::new(16, 64);
        let len = h.file_len() as u64;
        let mut b = h.encode();
        b[0] ^= 1;
        assert!(IndexHeader::decode(&b, len).is_err(), "magic");
        let b = h.encode();
        assert!(IndexHeader::decode(&b, len + 1).is_err(), "length");
        assert!(IndexHeader::decode(&b[..10], len).is_err(), "short");
        let mut bad = h;
        bad.entry_count = 65;
        assert!(
            IndexHeader::decode(&bad.encode(), len).is_err(),
            "count > capacity"
        );
        let mut bad = h;
        bad.slot_count = 0;
        assert!(
            IndexHeader::decode(&bad.encode(), file_len(0, 64) as u64).is_err(),
            "no slots"
        );
        let mut bad = h;
        bad.entry_capacity = u32::MAX;
        assert!(
            IndexHeader::decode(&bad.encode(), len).is_err(),
            "huge capacity"
        );
    }

    #[test]
    fn entry_round_trip() {
        let e = Entry {
            key_hash: 0xdead_beef,
            physical_offset: u64::MAX - 1,
            time_delta_s: 77,
            prev: 3,
        };
        assert_eq!(Entry::decode(&e.encode()), e);
    }

    #[test]
    fn key_hash_separates_topic_and_key() {
        assert_ne!(key_hash("ab", b"c"), key_hash("a", b"bc"));
        assert_eq!(key_hash("t", b"k"), key_hash("t", b"k"));
    }
}
