//! Byte layout of a record in a compacted log segment.
//!
//! ```text
//! offset  size  field
//!      0     4  total_len          u32, whole record including this field
//!      4     4  crc                u32, CRC32C of bytes [8, total_len)
//!      8     2  magic              u16, MAGIC
//!     10     1  version            u8,  VERSION
//!     11     1  flags              u8,  FLAG_HAS_KEY | FLAG_HAS_VALUE
//!     12     8  offset             u64, the record's queue offset (never changes)
//!     20     8  timestamp          i64, ms, the producer's timestamp
//!     28     8  store_timestamp    i64, ms, when the CommitLog took it
//!     36     8  delete_horizon     i64, ms; tombstones only: 0 until the
//!                                  first cleaning that keeps it stamps
//!                                  now + delete.retention.ms
//!     44     8  physical_offset    u64, where the record is in the CommitLog
//!                                  (recovery drops copies of records the
//!                                  CommitLog lost in a crash)
//!     52     4  key_len            u32
//!     56     4  value_len          u32 (0 for a tombstone)
//!     60     2  header_count       u16
//!     62     2  reserved           0
//!     64     4  headers_len        u32
//!     68        key | value | header block (the CommitLog's header encoding)
//! ```
//! Records of a compact topic always have a key (keyless records are refused
//! at produce). Segments hold records in increasing offset order, possibly
//! with gaps once cleaned. The topic and partition are the log's directory.

use bytes::Bytes;
use tidelog_storage::commit_log::format::{validate_headers, Header};
use tidelog_storage::{PhysicalOffset, QueueOffset};

pub const MAGIC: u16 = 0xC0A7;
pub const VERSION: u8 = 1;
pub const FLAG_HAS_KEY: u8 = 0b01;
pub const FLAG_HAS_VALUE: u8 = 0b10;
pub const HEADER_LEN: usize = 68;
pub const CRC_START: usize = 8;
/// Longest record accepted from disk; lengths are checked against it before
/// anything is sliced.
pub const RECORD_LEN_MAX: usize = 256 << 20;

const OFF_MAGIC: usize = 8;
const OFF_VERSION: usize = 10;
const OFF_FLAGS: usize = 11;
const OFF_OFFSET: usize = 12;
const OFF_TS: usize = 20;
const OFF_STORE_TS: usize = 28;
const OFF_HORIZON: usize = 36;
const OFF_PHYSICAL: usize = 44;
const OFF_KEY_LEN: usize = 52;
const OFF_VALUE_LEN: usize = 56;
const OFF_HEADER_COUNT: usize = 60;
const OFF_HEADERS_LEN: usize = 64;
const _: () = assert!(OFF_HEADERS_LEN + 4 == HEADER_LEN);

/// A compacted record, owning its bytes (key, value and headers are slices).
#[derive(Clone, PartialEq, Eq)]
pub struct CompactedRecord {
    bytes: Bytes,
    pub offset: QueueOffset,
    pub timestamp_ms: i64,
    pub store_timestamp_ms: i64,
    pub delete_horizon_ms: i64,
    pub physical_offset: PhysicalOffset,
    flags: u8,
    key: std::ops::Range<usize>,
    value: std::ops::Range<usize>,
    headers: std::ops::Range<usize>,
    header_count: usize,
}

impl std::fmt::Debug for CompactedRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactedRecord")
            .field("offset", &self.offset)
            .field("key", &self.key())
            .field("value", &self.value())
            .field("delete_horizon_ms", &self.delete_horizon_ms)
            .finish()
    }
}

impl CompactedRecord {
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn key(&self) -> Option<Bytes> {
        (self.flags & FLAG_HAS_KEY != 0).then(|| self.bytes.slice(self.key.clone()))
    }

    /// `None` for a tombstone.
    pub fn value(&self) -> Option<Bytes> {
        (self.flags & FLAG_HAS_VALUE != 0).then(|| self.bytes.slice(self.value.clone()))
    }

    /// The key, borrowed: no reference count taken.
    pub fn key_slice(&self) -> Option<&[u8]> {
        (self.flags & FLAG_HAS_KEY != 0).then(|| &self.bytes[self.key.clone()])
    }

    /// The value, borrowed (`None` for a tombstone).
    pub fn value_slice(&self) -> Option<&[u8]> {
        (self.flags & FLAG_HAS_VALUE != 0).then(|| &self.bytes[self.value.clone()])
    }

    pub fn is_tombstone(&self) -> bool {
        self.flags & FLAG_HAS_VALUE == 0
    }

    /// Bytes of the encoded header block (as [`StoredRecord::headers_len`]).
    ///
    /// [`StoredRecord::headers_len`]: tidelog_storage::StoredRecord::headers_len
    pub fn headers_len(&self) -> usize {
        self.headers.len()
    }

    pub fn headers(&self) -> Vec<Header> {
        tidelog_storage::commit_log::format::decode_headers(
            &self.bytes.slice(self.headers.clone()),
            self.header_count,
        )
    }

    /// The encoded record.
    pub fn raw(&self) -> &Bytes {
        &self.bytes
    }

    /// This record re-encoded with another delete horizon (the CRC changes).
    pub fn with_delete_horizon(&self, horizon_ms: i64) -> CompactedRecord {
        let mut b = self.bytes.to_vec();
        b[OFF_HORIZON..OFF_HORIZON + 8].copy_from_slice(&horizon_ms.to_le_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        let mut r = self.clone();
        r.bytes = Bytes::from(b);
        r.delete_horizon_ms = horizon_ms;
        r
    }
}

/// The parts of a record to encode.
pub struct Fields<'a> {
    pub offset: QueueOffset,
    pub timestamp_ms: i64,
    pub store_timestamp_ms: i64,
    pub delete_horizon_ms: i64,
    pub physical_offset: PhysicalOffset,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// An encoded header block (CommitLog encoding) and its entry count.
    pub headers_block: &'a [u8],
    pub header_count: usize,
}

pub fn encoded_len(f: &Fields<'_>) -> usize {
    HEADER_LEN
        + f.key.map_or(0, <[u8]>::len)
        + f.value.map_or(0, <[u8]>::len)
        + f.headers_block.len()
}

/// Encode into a new buffer.
pub fn encode(f: &Fields<'_>) -> Vec<u8> {
    let key = f.key.unwrap_or_default();
    let value = f.value.unwrap_or_default();
    let len = encoded_len(f);
    let mut b = vec![0u8; len];
    let mut flags = 0;
    if f.key.is_some() {
        flags |= FLAG_HAS_KEY;
    }
    if f.value.is_some() {
        flags |= FLAG_HAS_VALUE;
    }
    b[0..4].copy_from_slice(&(len as u32).to_le_bytes());
    b[OFF_MAGIC..OFF_MAGIC + 2].copy_from_slice(&MAGIC.to_le_bytes());
    b[OFF_VERSION] = VERSION;
    b[OFF_FLAGS] = flags;
    b[OFF_OFFSET..OFF_OFFSET + 8].copy_from_slice(&f.offset.get().to_le_bytes());
    b[OFF_TS..OFF_TS + 8].copy_from_slice(&f.timestamp_ms.to_le_bytes());
    b[OFF_STORE_TS..OFF_STORE_TS + 8].copy_from_slice(&f.store_timestamp_ms.to_le_bytes());
    b[OFF_HORIZON..OFF_HORIZON + 8].copy_from_slice(&f.delete_horizon_ms.to_le_bytes());
    b[OFF_PHYSICAL..OFF_PHYSICAL + 8].copy_from_slice(&f.physical_offset.get().to_le_bytes());
    b[OFF_KEY_LEN..OFF_KEY_LEN + 4].copy_from_slice(&(key.len() as u32).to_le_bytes());
    b[OFF_VALUE_LEN..OFF_VALUE_LEN + 4].copy_from_slice(&(value.len() as u32).to_le_bytes());
    b[OFF_HEADER_COUNT..OFF_HEADER_COUNT + 2]
        .copy_from_slice(&(f.header_count as u16).to_le_bytes());
    b[OFF_HEADERS_LEN..OFF_HEADERS_LEN + 4]
        .copy_from_slice(&(f.headers_block.len() as u32).to_le_bytes());
    let mut at = HEADER_LEN;
    for part in [key, value, f.headers_block] {
        b[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    let crc = crc32c::crc32c(&b[CRC_START..]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Encode `f` into a record, without decoding it back: the ranges are
/// known from the fields (the copy path runs this once per record).
pub fn encode_record(f: &Fields<'_>) -> CompactedRecord {
    let key_len = f.key.map_or(0, <[u8]>::len);
    let value_len = f.value.map_or(0, <[u8]>::len);
    let bytes = Bytes::from(encode(f));
    let mut flags = 0;
    if f.key.is_some() {
        flags |= FLAG_HAS_KEY;
    }
    if f.value.is_some() {
        flags |= FLAG_HAS_VALUE;
    }
    let key = HEADER_LEN..HEADER_LEN + key_len;
    let value = key.end..key.end + value_len;
    let headers = value.end..bytes.len();
    CompactedRecord {
        offset: f.offset,
        timestamp_ms: f.timestamp_ms,
        store_timestamp_ms: f.store_timestamp_ms,
        delete_horizon_ms: f.delete_horizon_ms,
        physical_offset: f.physical_offset,
        flags,
        key,
        value,
        headers,
        header_count: f.header_count,
        bytes,
    }
}

/// What starts at a position of a segment.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Zeros or the end of the bytes: nothing written here.
    End,
    Record(CompactedRecord),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Decode the record at the start of `buf` (which runs to the end of the
/// readable bytes), fully checked. `Err` carries the reason.
pub fn decode(buf: &Bytes) -> Result<Decoded, String> {
    if buf.len() < 4 || u32_at(buf, 0) == 0 {
        return if buf.iter().take(HEADER_LEN).all(|&b| b == 0) {
            Ok(Decoded::End)
        } else {
            Err("truncated record".into())
        };
    }
    let total = u32_at(buf, 0) as usize;
    if !(HEADER_LEN..=RECORD_LEN_MAX).contains(&total) {
        return Err(format!(
            "length {total} outside [{HEADER_LEN}, {RECORD_LEN_MAX}]"
        ));
    }
    if total > buf.len() {
        return Err(format!("record of {total} bytes, {} available", buf.len()));
    }
    let b = buf.slice(..total);
    let magic = u16::from_le_bytes([b[OFF_MAGIC], b[OFF_MAGIC + 1]]);
    if magic != MAGIC || b[OFF_VERSION] != VERSION {
        return Err(format!(
            "bad magic {magic:#06x} or version {}",
            b[OFF_VERSION]
        ));
    }
    let stored = u32_at(&b, 4);
    let computed = crc32c::crc32c(&b[CRC_START..]);
    if stored != computed {
        return Err(format!(
            "CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
        ));
    }
    let flags = b[OFF_FLAGS];
    if flags & !(FLAG_HAS_KEY | FLAG_HAS_VALUE) != 0 {
        return Err(format!("unknown flags {flags:#04x}"));
    }
    let key_len = u32_at(&b, OFF_KEY_LEN) as usize;
    let value_len = u32_at(&b, OFF_VALUE_LEN) as usize;
    let headers_len = u32_at(&b, OFF_HEADERS_LEN) as usize;
    let header_count = u16::from_le_bytes([b[OFF_HEADER_COUNT], b[OFF_HEADER_COUNT + 1]]) as usize;
    if HEADER_LEN as u64 + key_len as u64 + value_len as u64 + headers_len as u64 != total as u64 {
        return Err("parts do not add up to the record length".into());
    }
    let key = HEADER_LEN..HEADER_LEN + key_len;
    let value = key.end..key.end + value_len;
    let headers = value.end..total;
    validate_headers(&b[headers.clone()], header_count).map_err(|e| e.to_string())?;
    Ok(Decoded::Record(CompactedRecord {
        offset: QueueOffset::new(u64_at(&b, OFF_OFFSET)),
        timestamp_ms: u64_at(&b, OFF_TS) as i64,
        store_timestamp_ms: u64_at(&b, OFF_STORE_TS) as i64,
        delete_horizon_ms: u64_at(&b, OFF_HORIZON) as i64,
        physical_offset: PhysicalOffset::new(u64_at(&b, OFF_PHYSICAL)),
        flags,
        key,
        value,
        headers,
        header_count,
        bytes: b,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields<'a>(
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
        headers: &'a [u8],
        count: usize,
    ) -> Fields<'a> {
        Fields {
            offset: QueueOffset::new(42),
            timestamp_ms: 7,
            store_timestamp_ms: 8,
            delete_horizon_ms: 0,
            physical_offset: PhysicalOffset::new(1000),
            key,
            value,
            headers_block: headers,
            header_count: count,
        }
    }

    #[test]
    fn round_trip() {
        // One header "h" = "xy" in the CommitLog's header encoding.
        let headers = [1u8, 0, 2, 0, 0, 0, b'h', b'x', b'y'];
        let enc = Bytes::from(encode(&fields(Some(b"k"), Some(b"v"), &headers, 1)));
        let Decoded::Record(r) = decode(&enc).unwrap() else {
            panic!()
        };
        assert_eq!(r.offset.get(), 42);
        assert_eq!(r.key().as_deref(), Some(b"k".as_slice()));
        assert_eq!(r.value().as_deref(), Some(b"v".as_slice()));
        assert_eq!(r.headers().len(), 1);
        assert_eq!(&r.headers()[0].value[..], b"xy");
        let stamped = r.with_delete_horizon(99);
        let Decoded::Record(r2) = decode(stamped.raw()).unwrap() else {
            panic!()
        };
        assert_eq!(r2.delete_horizon_ms, 99);
    }

    #[test]
    fn encode_record_matches_decode() {
        let headers = [1u8, 0, 2, 0, 0, 0, b'h', b'x', b'y'];
        for (k, v) in [
            (Some(b"k".as_slice()), Some(b"v".as_slice())),
            (Some(b"key"), None),
        ] {
            let f = fields(k, v, &headers, 1);
            let built = encode_record(&f);
            let Decoded::Record(decoded) = decode(built.raw()).unwrap() else {
                panic!()
            };
            assert_eq!(built, decoded);
        }
    }

    #[test]
    fn tombstone_round_trip() {
        let enc = Bytes::from(encode(&fields(Some(b"k"), None, &[], 0)));
        let Decoded::Record(r) = decode(&enc).unwrap() else {
            panic!()
        };
        assert!(r.is_tombstone());
        assert_eq!(r.value(), None);
    }

    #[test]
    fn damage_is_detected() {
        let enc = encode(&fields(Some(b"key"), Some(b"value"), &[], 0));
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 0x20;
            let r = decode(&Bytes::from(bad));
            assert!(matches!(r, Err(_) | Ok(Decoded::End)), "flip at {i}: {r:?}");
        }
        for cut in 1..enc.len() {
            assert!(
                decode(&Bytes::copy_from_slice(&enc[..cut])).is_err(),
                "cut at {cut}"
            );
        }
        assert_eq!(decode(&Bytes::from(vec![0u8; 100])), Ok(Decoded::End));
        assert_eq!(decode(&Bytes::new()), Ok(Decoded::End));
    }
}
