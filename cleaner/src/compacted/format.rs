//! Byte layout of a record in a compacted log segment.
//!
//! ```text
//! offset  size  field
//!      0     4  total_len          u32, whole record including this field
//!      4     4  crc                u32, CRC32C of bytes [8, total_len)
//!      8     2  magic              u16, MAGIC
//!     10     1  version            u8,  VERSION
//!     11     1  flags              u8,  FLAG_HAS_KEY | FLAG_HAS_VALUE |
//!                                  FLAG_TRANSACTIONAL
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
//!               | producer block, with FLAG_TRANSACTIONAL only:
//!                   producer_id    i64
//!                   producer_epoch i16
//!                   reserved       u16, 0
//! ```
//! Versions: 2 is written for every record outside a transaction; its
//! header block may hold null header values (`HEADER_VALUE_NULL`, as the
//! CommitLog's version 3). 3 is written only for a transaction's record
//! (FLAG_TRANSACTIONAL and its producer block): the cleaner and a
//! read_committed reader tell an aborted transaction's record by its
//! producer (docs/compaction.md, "Transactions"), and a log that never held
//! one stays readable by a build before version 3, as the CommitLog's
//! version 4 does. 1, version 2's layout whose header block never held a
//! null value (the sentinel there is refused as corrupt), is still read,
//! so compacted logs written before keep opening. A transaction's markers
//! are never copied here.
//! Records of a compact topic always have a key (keyless records are refused
//! at produce). Segments hold records in increasing offset order, possibly
//! with gaps once cleaned. The topic and partition are the log's directory.

use bytes::Bytes;
use tidelog_storage::codec::{
    get_i64, get_u16, get_u32, get_u64, put_i64, put_u16, put_u32, put_u64, U16_LEN, U32_LEN,
    U64_LEN, U8_LEN,
};
use tidelog_storage::commit_log::format::{self as log_format, validate_headers, Header};
use tidelog_storage::{PhysicalOffset, QueueOffset};

pub const MAGIC: u16 = 0xC0A7;
/// The version written for a record outside a transaction.
pub const VERSION: u8 = 2;
/// The version written for a transaction's record (its producer block).
pub const VERSION_TXN: u8 = 3;
/// The first version, still read: no null header values.
pub const VERSION_1: u8 = 1;
pub const FLAG_HAS_KEY: u8 = 0b01;
pub const FLAG_HAS_VALUE: u8 = 0b10;
/// A transaction's record: a producer block ends it (version 3 only).
pub const FLAG_TRANSACTIONAL: u8 = 0b100;
const FLAGS_KNOWN: u8 = FLAG_HAS_KEY | FLAG_HAS_VALUE | FLAG_TRANSACTIONAL;
/// A transactional record's producer block: id, epoch, reserved.
pub const PRODUCER_BLOCK_LEN: usize = U64_LEN + U16_LEN + U16_LEN;
/// Longest record accepted from disk; lengths are checked against it before
/// anything is sliced.
pub const RECORD_LEN_MAX: usize = 256 << 20;

// Header fields, each at the end of the one before it.
pub(crate) const OFF_TOTAL_LEN: usize = 0;
const OFF_CRC: usize = OFF_TOTAL_LEN + U32_LEN;
const OFF_MAGIC: usize = OFF_CRC + U32_LEN;
const OFF_VERSION: usize = OFF_MAGIC + U16_LEN;
const OFF_FLAGS: usize = OFF_VERSION + U8_LEN;
const OFF_OFFSET: usize = OFF_FLAGS + U8_LEN;
const OFF_TS: usize = OFF_OFFSET + U64_LEN;
const OFF_STORE_TS: usize = OFF_TS + U64_LEN;
const OFF_HORIZON: usize = OFF_STORE_TS + U64_LEN;
const OFF_PHYSICAL: usize = OFF_HORIZON + U64_LEN;
const OFF_KEY_LEN: usize = OFF_PHYSICAL + U64_LEN;
const OFF_VALUE_LEN: usize = OFF_KEY_LEN + U32_LEN;
const OFF_HEADER_COUNT: usize = OFF_VALUE_LEN + U32_LEN;
const OFF_RESERVED: usize = OFF_HEADER_COUNT + U16_LEN;
const OFF_HEADERS_LEN: usize = OFF_RESERVED + U16_LEN;
/// The fixed header; key, value and header block follow it.
pub const HEADER_LEN: usize = OFF_HEADERS_LEN + U32_LEN;
/// The CRC covers the record from here to its end.
pub const CRC_START: usize = OFF_CRC + U32_LEN;
// The size docs/formats.md publishes.
const _: () = assert!(HEADER_LEN == 68);

/// Why bytes are not a compacted record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// Fewer bytes than a length field, and not all zeros.
    #[error("truncated record")]
    Truncated,
    #[error("length {total} outside [{HEADER_LEN}, {RECORD_LEN_MAX}]")]
    BadLength { total: usize },
    #[error("record of {total} bytes, {available} available")]
    PastEnd { total: usize, available: usize },
    #[error("bad magic {magic:#06x} or version {version}")]
    BadMagic { magic: u16, version: u8 },
    /// A producer block in a version without one, or a version-3 record
    /// without it, or a block whose reserved bytes are not zero.
    #[error("version {version} with flags {flags:#04x}: no such record")]
    VersionFlags { version: u8, flags: u8 },
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("unknown flags {flags:#04x}")]
    BadFlags { flags: u8 },
    #[error("parts do not add up to the record length")]
    PartsMismatch,
    /// The header block does not decode (the CommitLog's reason: it is the
    /// CommitLog's encoding).
    #[error("{0}")]
    BadHeaders(log_format::Invalid),
}

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
    producer: Option<TxnProducer>,
}

/// The producer of a transaction's record ([`CompactedRecord::producer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnProducer {
    pub id: i64,
    pub epoch: i16,
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

    /// The producer of a transaction's record; `None` outside one.
    pub fn producer(&self) -> Option<TxnProducer> {
        self.producer
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
        put_i64(&mut b, OFF_HORIZON, horizon_ms);
        let crc = crc32c::crc32c(&b[CRC_START..]);
        put_u32(&mut b, OFF_CRC, crc);
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
    /// A transaction's record: its producer (written as version 3).
    pub producer: Option<TxnProducer>,
}

pub fn encoded_len(f: &Fields<'_>) -> usize {
    HEADER_LEN
        + f.key.map_or(0, <[u8]>::len)
        + f.value.map_or(0, <[u8]>::len)
        + f.headers_block.len()
        + f.producer.map_or(0, |_| PRODUCER_BLOCK_LEN)
}

/// The flags of a record with `f`'s parts.
fn flags_of(f: &Fields<'_>) -> u8 {
    let mut flags = 0;
    if f.key.is_some() {
        flags |= FLAG_HAS_KEY;
    }
    if f.value.is_some() {
        flags |= FLAG_HAS_VALUE;
    }
    if f.producer.is_some() {
        flags |= FLAG_TRANSACTIONAL;
    }
    flags
}

/// Encode into a new buffer.
pub fn encode(f: &Fields<'_>) -> Vec<u8> {
    let mut b = Vec::with_capacity(encoded_len(f));
    encode_into(f, &mut b);
    b
}

/// Encode at the end of `out` (which grows by [`encoded_len`]): the copy
/// path encodes a batch of records into one buffer this way, with no
/// allocation per record, and writes it with one positioned write.
pub fn encode_into(f: &Fields<'_>, out: &mut Vec<u8>) {
    let key = f.key.unwrap_or_default();
    let value = f.value.unwrap_or_default();
    let len = encoded_len(f);
    let start = out.len();
    out.resize(start + HEADER_LEN, 0);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out.extend_from_slice(f.headers_block);
    if let Some(p) = f.producer {
        out.extend_from_slice(&p.id.to_le_bytes());
        out.extend_from_slice(&p.epoch.to_le_bytes());
        out.extend_from_slice(&[0, 0]);
    }
    let b = &mut out[start..];
    put_u32(b, OFF_TOTAL_LEN, len as u32);
    put_u16(b, OFF_MAGIC, MAGIC);
    b[OFF_VERSION] = if f.producer.is_some() {
        VERSION_TXN
    } else {
        VERSION
    };
    b[OFF_FLAGS] = flags_of(f);
    put_u64(b, OFF_OFFSET, f.offset.get());
    put_i64(b, OFF_TS, f.timestamp_ms);
    put_i64(b, OFF_STORE_TS, f.store_timestamp_ms);
    put_i64(b, OFF_HORIZON, f.delete_horizon_ms);
    put_u64(b, OFF_PHYSICAL, f.physical_offset.get());
    put_u32(b, OFF_KEY_LEN, key.len() as u32);
    put_u32(b, OFF_VALUE_LEN, value.len() as u32);
    put_u16(b, OFF_HEADER_COUNT, f.header_count as u16);
    put_u32(b, OFF_HEADERS_LEN, f.headers_block.len() as u32);
    let crc = crc32c::crc32c(&b[CRC_START..]);
    put_u32(b, OFF_CRC, crc);
}

/// Encode `f` into a record, without decoding it back: the ranges are
/// known from the fields (the copy path runs this once per record).
pub fn encode_record(f: &Fields<'_>) -> CompactedRecord {
    let key_len = f.key.map_or(0, <[u8]>::len);
    let value_len = f.value.map_or(0, <[u8]>::len);
    let bytes = Bytes::from(encode(f));
    let flags = flags_of(f);
    let key = HEADER_LEN..HEADER_LEN + key_len;
    let value = key.end..key.end + value_len;
    let headers = value.end..value.end + f.headers_block.len();
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
        producer: f.producer,
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

/// The key of the record at the start of `raw`, read from its header alone:
/// no CRC check, so only for bytes already decoded once (the cleaner reads
/// the key of a record its map build checked, through a mapping of the same
/// sealed segment). `None` for a keyless record or bytes that do not hold
/// the key their header claims, never a panic.
pub fn key_in(raw: &[u8]) -> Option<&[u8]> {
    if raw.len() < HEADER_LEN || raw[OFF_FLAGS] & FLAG_HAS_KEY == 0 {
        return None;
    }
    let total = get_u32(raw, OFF_TOTAL_LEN) as usize;
    let key_len = get_u32(raw, OFF_KEY_LEN) as usize;
    let end = HEADER_LEN.checked_add(key_len)?;
    if end > total || total > raw.len() {
        return None;
    }
    Some(&raw[HEADER_LEN..end])
}

/// Decode the record at the start of `buf` (which runs to the end of the
/// readable bytes), fully checked.
pub fn decode(buf: &Bytes) -> Result<Decoded, Invalid> {
    decode_checked(buf, true)
}

/// [`decode`], with the CRC check when `check_crc`; every other check is
/// made either way. Without it only for bytes that [`decode`] accepted
/// before and that cannot have changed since: a cleaning pass reads each
/// dirty record twice through one mapping of a sealed segment, and its map
/// build checked the CRC (cleaner/pass.rs).
pub fn decode_checked(buf: &Bytes, check_crc: bool) -> Result<Decoded, Invalid> {
    if buf.len() < U32_LEN || get_u32(buf, OFF_TOTAL_LEN) == 0 {
        return if buf.iter().take(HEADER_LEN).all(|&b| b == 0) {
            Ok(Decoded::End)
        } else {
            Err(Invalid::Truncated)
        };
    }
    let total = get_u32(buf, OFF_TOTAL_LEN) as usize;
    if !(HEADER_LEN..=RECORD_LEN_MAX).contains(&total) {
        return Err(Invalid::BadLength { total });
    }
    if total > buf.len() {
        return Err(Invalid::PastEnd {
            total,
            available: buf.len(),
        });
    }
    // `total` ≥ HEADER_LEN bytes are there: the header offsets are in bounds.
    let b = buf.slice(..total);
    let magic = get_u16(&b, OFF_MAGIC);
    let version = b[OFF_VERSION];
    if magic != MAGIC || !matches!(version, VERSION_1 | VERSION | VERSION_TXN) {
        return Err(Invalid::BadMagic { magic, version });
    }
    if check_crc {
        let stored = get_u32(&b, OFF_CRC);
        let computed = crc32c::crc32c(&b[CRC_START..]);
        if stored != computed {
            return Err(Invalid::CrcMismatch { stored, computed });
        }
    }
    let flags = b[OFF_FLAGS];
    if flags & !FLAGS_KNOWN != 0 {
        return Err(Invalid::BadFlags { flags });
    }
    // Version 3 is exactly the records with a producer block.
    let transactional = flags & FLAG_TRANSACTIONAL != 0;
    if transactional != (version == VERSION_TXN) {
        return Err(Invalid::VersionFlags { version, flags });
    }
    let producer_len = if transactional { PRODUCER_BLOCK_LEN } else { 0 };
    let key_len = get_u32(&b, OFF_KEY_LEN) as usize;
    let value_len = get_u32(&b, OFF_VALUE_LEN) as usize;
    let headers_len = get_u32(&b, OFF_HEADERS_LEN) as usize;
    let header_count = get_u16(&b, OFF_HEADER_COUNT) as usize;
    if HEADER_LEN as u64
        + key_len as u64
        + value_len as u64
        + headers_len as u64
        + producer_len as u64
        != total as u64
    {
        return Err(Invalid::PartsMismatch);
    }
    let key = HEADER_LEN..HEADER_LEN + key_len;
    let value = key.end..key.end + value_len;
    let headers = value.end..value.end + headers_len;
    validate_headers(&b[headers.clone()], header_count, version != VERSION_1)
        .map_err(Invalid::BadHeaders)?;
    let producer = if transactional {
        let at = headers.end;
        if get_u16(&b, at + U64_LEN + U16_LEN) != 0 {
            return Err(Invalid::VersionFlags { version, flags });
        }
        Some(TxnProducer {
            id: get_u64(&b, at) as i64,
            epoch: get_u16(&b, at + U64_LEN) as i16,
        })
    } else {
        None
    };
    Ok(Decoded::Record(CompactedRecord {
        offset: QueueOffset::new(get_u64(&b, OFF_OFFSET)),
        timestamp_ms: get_i64(&b, OFF_TS),
        store_timestamp_ms: get_i64(&b, OFF_STORE_TS),
        delete_horizon_ms: get_i64(&b, OFF_HORIZON),
        physical_offset: PhysicalOffset::new(get_u64(&b, OFF_PHYSICAL)),
        flags,
        key,
        value,
        headers,
        header_count,
        producer,
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
            producer: None,
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
        assert_eq!(r.headers()[0].value.as_deref(), Some(&b"xy"[..]));
        let stamped = r.with_delete_horizon(99);
        let Decoded::Record(r2) = decode(stamped.raw()).unwrap() else {
            panic!()
        };
        assert_eq!(r2.delete_horizon_ms, 99);
    }

    /// A record and a stamped tombstone written out by hand (see
    /// docs/formats.md).
    #[test]
    fn golden_bytes() {
        #[rustfmt::skip]
        let record: &[u8] = &[
            0x4f, 0x00, 0x00, 0x00, // total_len 79
            0x2f, 0x1f, 0x22, 0x9f, // crc
            0xa7, 0xc0, 0x02, 0x03, // magic, version 2, flags key | value
            0x2a, 0, 0, 0, 0, 0, 0, 0, // offset 42
            0x07, 0, 0, 0, 0, 0, 0, 0, // timestamp 7
            0x08, 0, 0, 0, 0, 0, 0, 0, // store_timestamp 8
            0x00, 0, 0, 0, 0, 0, 0, 0, // delete_horizon 0
            0xe8, 0x03, 0, 0, 0, 0, 0, 0, // physical_offset 1000
            0x01, 0x00, 0x00, 0x00, // key_len 1
            0x01, 0x00, 0x00, 0x00, // value_len 1
            0x01, 0x00, 0x00, 0x00, // header_count 1, reserved
            0x09, 0x00, 0x00, 0x00, // headers_len 9
            b'k', b'v', // key, value
            0x01, 0x00, 0x02, 0x00, 0x00, 0x00, b'h', b'x', b'y', // header h = xy
        ];
        let headers = [1u8, 0, 2, 0, 0, 0, b'h', b'x', b'y'];
        let f = fields(Some(b"k"), Some(b"v"), &headers, 1);
        assert_eq!(encode(&f), record);
        let Decoded::Record(r) = decode(&Bytes::from_static(record)).unwrap() else {
            panic!()
        };
        assert_eq!(r, encode_record(&f));
        assert_eq!(
            (
                r.offset.get(),
                r.timestamp_ms,
                r.store_timestamp_ms,
                r.physical_offset.get()
            ),
            (42, 7, 8, 1000)
        );
        assert_eq!(r.key_slice(), Some(&b"k"[..]));
        assert_eq!(r.value_slice(), Some(&b"v"[..]));
        assert_eq!(r.headers()[0].name, "h");

        #[rustfmt::skip]
        let tombstone: &[u8] = &[
            0x45, 0x00, 0x00, 0x00, // total_len 69
            0xcd, 0x1c, 0xba, 0x4e, // crc
            0xa7, 0xc0, 0x02, 0x01, // magic, version 2, flags key only
            0x2b, 0, 0, 0, 0, 0, 0, 0, // offset 43
            0x09, 0, 0, 0, 0, 0, 0, 0, // timestamp 9
            0x0a, 0, 0, 0, 0, 0, 0, 0, // store_timestamp 10
            0x00, 0xc4, 0x0b, 0xd5, 0x8b, 0x01, 0x00, 0x00, // delete_horizon
            0x4c, 0x04, 0, 0, 0, 0, 0, 0, // physical_offset 1100
            0x01, 0x00, 0x00, 0x00, // key_len 1
            0x00, 0x00, 0x00, 0x00, // value_len 0
            0x00, 0x00, 0x00, 0x00, // header_count 0, reserved
            0x00, 0x00, 0x00, 0x00, // headers_len 0
            b'k',
        ];
        let f = Fields {
            offset: QueueOffset::new(43),
            timestamp_ms: 9,
            store_timestamp_ms: 10,
            delete_horizon_ms: 1_700_086_400_000,
            physical_offset: PhysicalOffset::new(1100),
            ..fields(Some(b"k"), None, &[], 0)
        };
        assert_eq!(encode(&f), tombstone);
        let Decoded::Record(t) = decode(&Bytes::from_static(tombstone)).unwrap() else {
            panic!()
        };
        assert!(t.is_tombstone());
        assert_eq!(
            (t.offset.get(), t.delete_horizon_ms),
            (43, 1_700_086_400_000)
        );
        // Stamping the horizon later gives the same bytes as writing it.
        let unstamped = encode_record(&Fields {
            delete_horizon_ms: 0,
            ..f
        });
        assert_eq!(
            unstamped.with_delete_horizon(1_700_086_400_000).raw(),
            tombstone
        );
    }

    /// A version-2 record whose header block holds a null value between
    /// two headers of the same name, written out by hand.
    #[test]
    fn golden_bytes_with_a_null_header_value() {
        #[rustfmt::skip]
        let record: &[u8] = &[
            0x5c, 0x00, 0x00, 0x00, // total_len 92
            0x33, 0xcc, 0xa6, 0xa7, // crc
            0xa7, 0xc0, 0x02, 0x03, // magic, version 2, flags key | value
            0x2a, 0, 0, 0, 0, 0, 0, 0, // offset 42
            0x07, 0, 0, 0, 0, 0, 0, 0, // timestamp 7
            0x08, 0, 0, 0, 0, 0, 0, 0, // store_timestamp 8
            0x00, 0, 0, 0, 0, 0, 0, 0, // delete_horizon 0
            0xe8, 0x03, 0, 0, 0, 0, 0, 0, // physical_offset 1000
            0x01, 0x00, 0x00, 0x00, // key_len 1
            0x01, 0x00, 0x00, 0x00, // value_len 1
            0x03, 0x00, 0x00, 0x00, // header_count 3, reserved
            0x16, 0x00, 0x00, 0x00, // headers_len 22
            b'k', b'v', // key, value
            0x01, 0x00, 0x01, 0x00, 0x00, 0x00, b'h', b'x', // h = x
            0x01, 0x00, 0xff, 0xff, 0xff, 0xff, b'h', // h = null
            0x01, 0x00, 0x00, 0x00, 0x00, 0x00, b'h', // h = ""
        ];
        let headers = &record[HEADER_LEN + 2..];
        let f = fields(Some(b"k"), Some(b"v"), headers, 3);
        assert_eq!(encode(&f), record);
        let Decoded::Record(r) = decode(&Bytes::from_static(record)).unwrap() else {
            panic!()
        };
        assert_eq!(r, encode_record(&f));
        let values: Vec<(String, Option<Bytes>)> =
            r.headers().into_iter().map(|h| (h.name, h.value)).collect();
        assert_eq!(
            values,
            [
                ("h".to_string(), Some(Bytes::from_static(b"x"))),
                ("h".to_string(), None),
                ("h".to_string(), Some(Bytes::new())),
            ]
        );
        // Version 1 never wrote the sentinel: as version 1 (CRC fixed up)
        // the same record is corrupt.
        let mut v1 = record.to_vec();
        v1[OFF_VERSION] = VERSION_1;
        let crc = crc32c::crc32c(&v1[CRC_START..]);
        put_u32(&mut v1, OFF_CRC, crc);
        assert!(matches!(
            decode(&Bytes::from(v1)),
            Err(Invalid::BadHeaders(log_format::Invalid::BadHeaders(_)))
        ));
    }

    /// A version-1 record (what compacted logs before version 2 hold),
    /// written out by hand: it still decodes.
    #[test]
    fn golden_bytes_v1_is_still_read() {
        #[rustfmt::skip]
        let record: &[u8] = &[
            0x4f, 0x00, 0x00, 0x00, // total_len 79
            0x2c, 0x65, 0x55, 0x61, // crc
            0xa7, 0xc0, 0x01, 0x03, // magic, version 1, flags key | value
            0x2a, 0, 0, 0, 0, 0, 0, 0, // offset 42
            0x07, 0, 0, 0, 0, 0, 0, 0, // timestamp 7
            0x08, 0, 0, 0, 0, 0, 0, 0, // store_timestamp 8
            0x00, 0, 0, 0, 0, 0, 0, 0, // delete_horizon 0
            0xe8, 0x03, 0, 0, 0, 0, 0, 0, // physical_offset 1000
            0x01, 0x00, 0x00, 0x00, // key_len 1
            0x01, 0x00, 0x00, 0x00, // value_len 1
            0x01, 0x00, 0x00, 0x00, // header_count 1, reserved
            0x09, 0x00, 0x00, 0x00, // headers_len 9
            b'k', b'v', // key, value
            0x01, 0x00, 0x02, 0x00, 0x00, 0x00, b'h', b'x', b'y', // header h = xy
        ];
        let Decoded::Record(r) = decode(&Bytes::from_static(record)).unwrap() else {
            panic!()
        };
        assert_eq!((r.offset.get(), r.physical_offset.get()), (42, 1000));
        assert_eq!(
            (r.key_slice(), r.value_slice()),
            (Some(&b"k"[..]), Some(&b"v"[..]))
        );
        let h = r.headers();
        assert_eq!(
            (h[0].name.as_str(), h[0].value.as_deref()),
            ("h", Some(&b"xy"[..]))
        );
        // Unknown versions are refused.
        let mut v4 = record.to_vec();
        v4[OFF_VERSION] = 4;
        assert!(matches!(
            decode(&Bytes::from(v4)),
            Err(Invalid::BadMagic { version: 4, .. })
        ));
    }

    /// A transaction's record (version 3, its producer block), written out
    /// by hand (see docs/formats.md).
    #[test]
    fn golden_bytes_of_a_transactional_record() {
        #[rustfmt::skip]
        let record: &[u8] = &[
            0x52, 0x00, 0x00, 0x00, // total_len 82
            0x75, 0xd8, 0xad, 0xf0, // crc
            0xa7, 0xc0, 0x03, 0x07, // magic, version 3, flags key | value | transactional
            0x2a, 0, 0, 0, 0, 0, 0, 0, // offset 42
            0x07, 0, 0, 0, 0, 0, 0, 0, // timestamp 7
            0x08, 0, 0, 0, 0, 0, 0, 0, // store_timestamp 8
            0x00, 0, 0, 0, 0, 0, 0, 0, // delete_horizon 0
            0xe8, 0x03, 0, 0, 0, 0, 0, 0, // physical_offset 1000
            0x01, 0x00, 0x00, 0x00, // key_len 1
            0x01, 0x00, 0x00, 0x00, // value_len 1
            0x00, 0x00, 0x00, 0x00, // header_count 0, reserved
            0x00, 0x00, 0x00, 0x00, // headers_len 0
            b'k', b'v', // key, value
            0x39, 0x30, 0, 0, 0, 0, 0, 0, // producer_id 12345
            0x02, 0x00, // producer_epoch 2
            0x00, 0x00, // reserved
        ];
        let f = Fields {
            producer: Some(TxnProducer {
                id: 12345,
                epoch: 2,
            }),
            ..fields(Some(b"k"), Some(b"v"), &[], 0)
        };
        assert_eq!(encode(&f), record);
        let Decoded::Record(r) = decode(&Bytes::from_static(record)).unwrap() else {
            panic!()
        };
        assert_eq!(r, encode_record(&f));
        assert_eq!(
            r.producer(),
            Some(TxnProducer {
                id: 12345,
                epoch: 2
            })
        );
        assert_eq!(
            (r.key_slice(), r.value_slice(), r.headers_len()),
            (Some(&b"k"[..]), Some(&b"v"[..]), 0)
        );
        // Stamping a horizon keeps the producer block.
        let stamped = r.with_delete_horizon(5);
        let Decoded::Record(s) = decode(stamped.raw()).unwrap() else {
            panic!()
        };
        assert_eq!(s.producer(), r.producer());

        // The version and the flag go together, and the reserved bytes are
        // zero (each CRC fixed up).
        let refit = |mut b: Vec<u8>| {
            let crc = crc32c::crc32c(&b[CRC_START..]);
            put_u32(&mut b, OFF_CRC, crc);
            decode(&Bytes::from(b))
        };
        let mut v2 = record.to_vec();
        v2[OFF_VERSION] = VERSION;
        assert!(matches!(refit(v2), Err(Invalid::VersionFlags { .. })));
        let mut no_flag = record.to_vec();
        no_flag[OFF_FLAGS] &= !FLAG_TRANSACTIONAL;
        assert!(matches!(refit(no_flag), Err(Invalid::VersionFlags { .. })));
        let mut reserved = record.to_vec();
        let last = reserved.len() - 1;
        reserved[last] = 1;
        assert!(matches!(refit(reserved), Err(Invalid::VersionFlags { .. })));
        // A plain record never becomes version 3.
        assert_eq!(
            encode(&fields(Some(b"k"), Some(b"v"), &[], 0))[OFF_VERSION],
            VERSION
        );
    }

    #[test]
    fn bad_records_say_why() {
        let enc = encode(&fields(Some(b"key"), Some(b"value"), &[], 0));
        let mut bad = enc.clone();
        bad[CRC_START + 20] ^= 1;
        assert!(matches!(
            decode(&Bytes::from(bad)),
            Err(Invalid::CrcMismatch { .. })
        ));
        assert_eq!(
            decode(&Bytes::copy_from_slice(&enc[..20])),
            Err(Invalid::PastEnd {
                total: enc.len(),
                available: 20
            })
        );
        assert_eq!(
            decode(&Bytes::from_static(&[1, 0])),
            Err(Invalid::Truncated)
        );
        let mut short = enc.clone();
        put_u32(&mut short, OFF_TOTAL_LEN, 10);
        assert_eq!(
            decode(&Bytes::from(short)),
            Err(Invalid::BadLength { total: 10 })
        );
        // A header count the block does not hold (CRC fixed up): the
        // CommitLog's header-block reason, kept typed.
        let headers = [1u8, 0, 2, 0, 0, 0, b'h', b'x', b'y'];
        let mut b = encode(&fields(Some(b"k"), Some(b"v"), &headers, 1));
        put_u16(&mut b, OFF_HEADER_COUNT, 2);
        let crc = crc32c::crc32c(&b[CRC_START..]);
        put_u32(&mut b, OFF_CRC, crc);
        assert!(matches!(
            decode(&Bytes::from(b)),
            Err(Invalid::BadHeaders(log_format::Invalid::BadHeaders(_)))
        ));
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

    #[test]
    fn key_in_reads_the_key_from_the_header_and_never_panics() {
        let enc = encode(&fields(Some(b"key"), Some(b"value"), &[], 0));
        assert_eq!(key_in(&enc), Some(&b"key"[..]));
        // Followed by more bytes (the rest of a segment): the same key.
        let mut more = enc.clone();
        more.extend_from_slice(&enc);
        assert_eq!(key_in(&more), Some(&b"key"[..]));
        assert_eq!(
            key_in(&encode(&fields(Some(b""), None, &[], 0))),
            Some(&b""[..])
        );
        assert_eq!(key_in(&encode(&fields(None, Some(b"v"), &[], 0))), None);
        // Cut anywhere, or a key length past the record: no key, no panic.
        for cut in 0..enc.len() {
            assert_eq!(key_in(&enc[..cut]), None, "cut at {cut}");
        }
        let mut bad = enc.clone();
        put_u32(&mut bad, OFF_KEY_LEN, u32::MAX);
        assert_eq!(key_in(&bad), None);
    }

    #[test]
    fn decode_without_the_crc_check_checks_everything_else() {
        let enc = encode(&fields(Some(b"key"), Some(b"value"), &[], 0));
        let mut bad_crc = enc.clone();
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 1;
        let bad_crc = Bytes::from(bad_crc);
        assert!(matches!(decode(&bad_crc), Err(Invalid::CrcMismatch { .. })));
        assert!(matches!(
            decode_checked(&bad_crc, false),
            Ok(Decoded::Record(_))
        ));
        let mut bad_magic = enc.clone();
        bad_magic[OFF_MAGIC] ^= 1;
        assert!(matches!(
            decode_checked(&Bytes::from(bad_magic), false),
            Err(Invalid::BadMagic { .. })
        ));
        assert!(decode_checked(&Bytes::copy_from_slice(&enc[..enc.len() - 1]), false).is_err());
    }
}
