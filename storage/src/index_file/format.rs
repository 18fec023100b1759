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

use crate::codec::{get_i64, get_u16, get_u32, get_u64, put_i64, put_u16, put_u32, put_u64};
use crate::codec::{U16_LEN, U32_LEN, U64_LEN};
use crate::error::CorruptionKind;

pub const MAGIC: u32 = 0x5449_4458; // "TIDX"
pub const VERSION: u16 = 1;

// Header fields, each at the end of the one before it.
const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = OFF_MAGIC + U32_LEN;
const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
pub const OFF_BEGIN_TS: usize = OFF_RESERVED + U16_LEN;
pub const OFF_END_TS: usize = OFF_BEGIN_TS + U64_LEN;
pub const OFF_BEGIN_PHYS: usize = OFF_END_TS + U64_LEN;
pub const OFF_END_PHYS: usize = OFF_BEGIN_PHYS + U64_LEN;
pub const OFF_SLOT_COUNT: usize = OFF_END_PHYS + U64_LEN;
pub const OFF_ENTRY_CAPACITY: usize = OFF_SLOT_COUNT + U32_LEN;
pub const OFF_ENTRY_COUNT: usize = OFF_ENTRY_CAPACITY + U32_LEN;
const OFF_RESERVED_END: usize = OFF_ENTRY_COUNT + U32_LEN;
pub const HEADER_LEN: usize = OFF_RESERVED_END + U32_LEN;

/// A slot: the index of the newest entry whose hash maps to it.
pub const SLOT_LEN: usize = U32_LEN;

// Entry fields.
const OFF_ENTRY_KEY_HASH: usize = 0;
const OFF_ENTRY_PHYSICAL: usize = OFF_ENTRY_KEY_HASH + U32_LEN;
const OFF_ENTRY_TIME_DELTA: usize = OFF_ENTRY_PHYSICAL + U64_LEN;
const OFF_ENTRY_PREV: usize = OFF_ENTRY_TIME_DELTA + U32_LEN;
pub const ENTRY_LEN: usize = OFF_ENTRY_PREV + U32_LEN;

// The sizes docs/formats.md publishes; the header's 64-bit fields must be
// 8-aligned for the atomic loads and stores `IndexFile` does on the map.
const _: () = assert!(HEADER_LEN == 56 && ENTRY_LEN == 20 && SLOT_LEN == 4);
const _: () = assert!(OFF_BEGIN_TS % 8 == 0 && OFF_ENTRY_COUNT % 4 == 0);

/// Bounds on the sizes read from a header, checked before mapping.
pub const SLOT_COUNT_MAX: u32 = 1 << 26;
pub const ENTRY_CAPACITY_MAX: u32 = 1 << 27;

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
        put_u32(&mut b, OFF_MAGIC, MAGIC);
        put_u16(&mut b, OFF_VERSION, VERSION);
        put_i64(&mut b, OFF_BEGIN_TS, self.begin_timestamp_ms);
        put_i64(&mut b, OFF_END_TS, self.end_timestamp_ms);
        put_u64(&mut b, OFF_BEGIN_PHYS, self.begin_physical);
        put_u64(&mut b, OFF_END_PHYS, self.end_physical);
        put_u32(&mut b, OFF_SLOT_COUNT, self.slot_count);
        put_u32(&mut b, OFF_ENTRY_CAPACITY, self.entry_capacity);
        put_u32(&mut b, OFF_ENTRY_COUNT, self.entry_count);
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
        // The length is checked: the fixed offsets below are in bounds.
        let magic = get_u32(b, OFF_MAGIC);
        if magic != MAGIC {
            return Err(CorruptionKind::BadMagic { found: magic });
        }
        let version = get_u16(b, OFF_VERSION);
        if version != VERSION {
            return Err(CorruptionKind::UnknownVersion { found: version });
        }
        let h = IndexHeader {
            begin_timestamp_ms: get_i64(b, OFF_BEGIN_TS),
            end_timestamp_ms: get_i64(b, OFF_END_TS),
            begin_physical: get_u64(b, OFF_BEGIN_PHYS),
            end_physical: get_u64(b, OFF_END_PHYS),
            slot_count: get_u32(b, OFF_SLOT_COUNT),
            entry_capacity: get_u32(b, OFF_ENTRY_CAPACITY),
            entry_count: get_u32(b, OFF_ENTRY_COUNT),
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
        put_u32(&mut b, OFF_ENTRY_KEY_HASH, self.key_hash);
        put_u64(&mut b, OFF_ENTRY_PHYSICAL, self.physical_offset);
        put_u32(&mut b, OFF_ENTRY_TIME_DELTA, self.time_delta_s);
        put_u32(&mut b, OFF_ENTRY_PREV, self.prev);
        b
    }

    pub fn decode(b: &[u8; ENTRY_LEN]) -> Entry {
        Entry {
            key_hash: get_u32(b, OFF_ENTRY_KEY_HASH),
            physical_offset: get_u64(b, OFF_ENTRY_PHYSICAL),
            time_delta_s: get_u32(b, OFF_ENTRY_TIME_DELTA),
            prev: get_u32(b, OFF_ENTRY_PREV),
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

    /// A header and an entry written out by hand (see docs/formats.md).
    #[test]
    fn golden_bytes() {
        #[rustfmt::skip]
        let header: [u8; HEADER_LEN] = [
            0x58, 0x44, 0x49, 0x54, // magic "TIDX"
            0x01, 0x00, 0x00, 0x00, // version 1, reserved
            0x00, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, // begin_timestamp
            0x88, 0x7b, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, // end_timestamp (+5 s)
            0x2e, 0, 0, 0, 0, 0, 0, 0, // begin_physical 46
            0x28, 0x23, 0, 0, 0, 0, 0, 0, // end_physical 9000
            0x10, 0x00, 0x00, 0x00, // slot_count 16
            0x40, 0x00, 0x00, 0x00, // entry_capacity 64
            0x03, 0x00, 0x00, 0x00, // entry_count 3
            0x00, 0x00, 0x00, 0x00, // reserved
        ];
        let h = IndexHeader {
            begin_timestamp_ms: 1_700_000_000_000,
            end_timestamp_ms: 1_700_000_005_000,
            begin_physical: 46,
            end_physical: 9000,
            slot_count: 16,
            entry_capacity: 64,
            entry_count: 3,
        };
        assert_eq!(h.encode(), header);
        assert_eq!(IndexHeader::decode(&header, 56 + 16 * 4 + 64 * 20), Ok(h));

        #[rustfmt::skip]
        let entry: [u8; ENTRY_LEN] = [
            0xba, 0xea, 0xa5, 0x0e, // key_hash of ("orders", "k1")
            0x2e, 0x10, 0, 0, 0, 0, 0, 0, // physical_offset 4142
            0x05, 0x00, 0x00, 0x00, // time_delta_s 5
            0x01, 0x00, 0x00, 0x00, // prev 1
        ];
        let e = Entry {
            key_hash: key_hash("orders", b"k1"),
            physical_offset: 4142,
            time_delta_s: 5,
            prev: 1,
        };
        assert_eq!(e.key_hash, 0x0ea5_eaba);
        assert_eq!(e.encode(), entry);
        assert_eq!(Entry::decode(&entry), e);
    }

    #[test]
    fn bad_headers() {
        let h = IndexHeader::new(16, 64);
        let len = h.file_len() as u64;
        let mut b = h.encode();
        b[0] ^= 1;
        assert!(IndexHeader::decode(&b, len).is_err(), "magic");
        assert!(matches!(
            IndexHeader::decode(&b, len),
            Err(CorruptionKind::BadMagic { .. })
        ));
        let b = h.encode();
        assert!(IndexHeader::decode(&b, len + 1).is_err(), "length");
        assert!(matches!(
            IndexHeader::decode(&b, len + 1),
            Err(CorruptionKind::IndexFileLength { .. })
        ));
        assert!(IndexHeader::decode(&b[..10], len).is_err(), "short");
        assert!(matches!(
            IndexHeader::decode(&b[..10], len),
            Err(CorruptionKind::NoHeader { len: 10, .. })
        ));
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
