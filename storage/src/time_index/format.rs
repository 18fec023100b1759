//! Byte layout of a time index file: one per ConsumeQueue file, beside it
//! (`<20-digit start byte offset>.time`), covering the same queue offsets.
//!
//! ```text
//! header (HEADER_LEN = 16 bytes)
//! offset  size  field
//!      0     4  magic             u32, MAGIC
//!      4     2  version           u16, VERSION
//!      6     2  reserved          0
//!      8     4  interval_records  u32, queue offsets per entry (INTERVAL_RECORDS)
//!     12     4  crc               u32, CRC32C of bytes 0..12
//! entries: entry k at HEADER_LEN + k × ENTRY_LEN (ENTRY_LEN = 12 bytes)
//!      0     8  max_timestamp_ms  i64, the largest record timestamp among the
//!                                 queue offsets [first + k × I, first + (k+1) × I)
//!                                 of the file (I = interval_records, the last
//!                                 interval cut at the file's end); NO_RECORDS
//!                                 (i64::MIN) when none of them holds a record
//!      8     4  crc               u32, CRC32C of (first unit u64, k u64,
//!                                 max_timestamp_ms), little endian
//! ```
//! An entry's CRC covers where it belongs (its file's first queue offset and
//! its index), so a zeroed, torn or misplaced entry never decodes. Entries
//! are appended in order, one per completed interval; a file holds at most
//! `entries_per_file` of them (the queue file's units over the interval,
//! rounded up).

use crate::codec::{get_i64, get_u16, get_u32, put_i64, put_u16, put_u32};
use crate::codec::{U16_LEN, U32_LEN, U64_LEN};

pub const MAGIC: u32 = 0x5449_4d45; // "TIME" (little endian on disk: "EMIT")
pub const VERSION: u16 = 1;

/// Queue offsets each entry covers. Small enough that a lookup reads at
/// most about two intervals of records (the one it lands in, and the tail
/// not yet indexed); large enough that the index is 12 bytes per 512
/// records beside the queue's 20 bytes per record, and the dispatcher
/// appends rarely.
pub const INTERVAL_RECORDS: u32 = 512;

/// `max_timestamp_ms` of an interval without a record (holes only).
pub const NO_RECORDS: i64 = i64::MIN;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = OFF_MAGIC + U32_LEN;
const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
const OFF_INTERVAL: usize = OFF_RESERVED + U16_LEN;
const OFF_HEADER_CRC: usize = OFF_INTERVAL + U32_LEN;
pub const HEADER_LEN: usize = OFF_HEADER_CRC + U32_LEN;

const OFF_ENTRY_MAX_TS: usize = 0;
const OFF_ENTRY_CRC: usize = OFF_ENTRY_MAX_TS + U64_LEN;
pub const ENTRY_LEN: usize = OFF_ENTRY_CRC + U32_LEN;

// The sizes docs/formats.md publishes.
const _: () = assert!(HEADER_LEN == 16);
const _: () = assert!(ENTRY_LEN == 12);

/// Why a header does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderProblem {
    Short,
    Magic(u32),
    Version(u16),
    Crc,
    /// Written with another interval (a build with another constant).
    Interval(u32),
}

pub fn encode_header(interval_records: u32) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    put_u32(&mut b, OFF_MAGIC, MAGIC);
    put_u16(&mut b, OFF_VERSION, VERSION);
    put_u16(&mut b, OFF_RESERVED, 0);
    put_u32(&mut b, OFF_INTERVAL, interval_records);
    let crc = crc32c::crc32c(&b[..OFF_HEADER_CRC]);
    put_u32(&mut b, OFF_HEADER_CRC, crc);
    b
}

/// Check a header written for `interval_records`.
pub fn decode_header(b: &[u8], interval_records: u32) -> Result<(), HeaderProblem> {
    let b = b.get(..HEADER_LEN).ok_or(HeaderProblem::Short)?;
    let magic = get_u32(b, OFF_MAGIC);
    if magic != MAGIC {
        return Err(HeaderProblem::Magic(magic));
    }
    if get_u32(b, OFF_HEADER_CRC) != crc32c::crc32c(&b[..OFF_HEADER_CRC]) {
        return Err(HeaderProblem::Crc);
    }
    let version = get_u16(b, OFF_VERSION);
    if version != VERSION {
        return Err(HeaderProblem::Version(version));
    }
    let interval = get_u32(b, OFF_INTERVAL);
    if interval != interval_records {
        return Err(HeaderProblem::Interval(interval));
    }
    Ok(())
}

fn entry_crc(first_unit: u64, k: u64, max_timestamp_ms: i64) -> u32 {
    let mut c = crc32c::crc32c(&first_unit.to_le_bytes());
    c = crc32c::crc32c_append(c, &k.to_le_bytes());
    crc32c::crc32c_append(c, &max_timestamp_ms.to_le_bytes())
}

/// Entry `k` of the file whose first queue offset is `first_unit`.
pub fn encode_entry(first_unit: u64, k: u64, max_timestamp_ms: i64) -> [u8; ENTRY_LEN] {
    let mut b = [0u8; ENTRY_LEN];
    put_i64(&mut b, OFF_ENTRY_MAX_TS, max_timestamp_ms);
    put_u32(
        &mut b,
        OFF_ENTRY_CRC,
        entry_crc(first_unit, k, max_timestamp_ms),
    );
    b
}

/// The interval maximum of entry `k`, or `None` if its bytes are not that
/// entry (torn, zeroed, damaged or of another place).
pub fn decode_entry(b: &[u8; ENTRY_LEN], first_unit: u64, k: u64) -> Option<i64> {
    let max_ts = get_i64(b, OFF_ENTRY_MAX_TS);
    (get_u32(b, OFF_ENTRY_CRC) == entry_crc(first_unit, k, max_ts)).then_some(max_ts)
}

/// Entries a time index file beside a queue file of `units_per_file`
/// units holds when full, at `interval_records` per entry.
pub fn entries_per_file(units_per_file: u64, interval_records: u64) -> u64 {
    units_per_file.div_ceil(interval_records.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header and an entry written out by hand (see docs/formats.md).
    #[test]
    fn golden_bytes() {
        #[rustfmt::skip]
        let header: [u8; HEADER_LEN] = [
            0x45, 0x4d, 0x49, 0x54, // magic
            0x01, 0x00,             // version
            0x00, 0x00,             // reserved
            0x00, 0x02, 0x00, 0x00, // interval_records 512
            0x2d, 0x10, 0x59, 0x69, // crc
        ];
        assert_eq!(encode_header(512), header);
        assert_eq!(decode_header(&header, 512), Ok(()));
        #[rustfmt::skip]
        let entry: [u8; ENTRY_LEN] = [
            0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // max_timestamp_ms
            0xfa, 0x2e, 0x8a, 0x95,                         // crc of (300000, 3, max)
        ];
        assert_eq!(encode_entry(300_000, 3, 0x0102_0304_0506_0708), entry);
        assert_eq!(
            decode_entry(&entry, 300_000, 3),
            Some(0x0102_0304_0506_0708)
        );
    }

    #[test]
    fn entries_decode_only_in_their_place() {
        let e = encode_entry(0, 7, -5);
        assert_eq!(decode_entry(&e, 0, 7), Some(-5));
        assert_eq!(decode_entry(&e, 0, 8), None, "another index");
        assert_eq!(decode_entry(&e, 512, 7), None, "another file");
        assert_eq!(decode_entry(&[0u8; ENTRY_LEN], 0, 0), None, "zeros");
        let none = encode_entry(0, 0, NO_RECORDS);
        assert_eq!(decode_entry(&none, 0, 0), Some(NO_RECORDS));
        let mut torn = e;
        torn[2] ^= 0x40;
        assert_eq!(decode_entry(&torn, 0, 7), None);
    }

    #[test]
    fn bad_headers() {
        let h = encode_header(INTERVAL_RECORDS);
        assert_eq!(decode_header(&h[..10], 512), Err(HeaderProblem::Short));
        assert_eq!(decode_header(&h, 256), Err(HeaderProblem::Interval(512)));
        let mut bad = h;
        bad[0] = 0;
        assert!(matches!(
            decode_header(&bad, 512),
            Err(HeaderProblem::Magic(_))
        ));
        let mut bad = h;
        bad[9] ^= 1;
        assert_eq!(decode_header(&bad, 512), Err(HeaderProblem::Crc));
    }

    #[test]
    fn entries_per_file_rounds_up() {
        assert_eq!(entries_per_file(300_000, 512), 586);
        assert_eq!(entries_per_file(512, 512), 1);
        assert_eq!(entries_per_file(4, 512), 1);
        assert_eq!(entries_per_file(64, 8), 8);
    }
}
