//! Byte layout of a CommitLog record and of the end-of-segment marker.
//!
//! All integers are little-endian.
//!
//! ```text
//! record
//! offset  size  field
//!      0     4  total_len          u32, whole record including this field
//!      4     4  crc                u32, CRC32C of bytes [8, total_len)
//!      8     2  magic              u16, RECORD_MAGIC
//!     10     1  version            u8,  VERSION
//!     11     1  flags              u8,  FLAG_HAS_KEY | FLAG_HAS_VALUE
//!     12     8  physical_offset    u64, where this record starts in the log
//!     20     8  queue_offset       u64, its number within the partition
//!     28     8  store_timestamp    i64, ms since epoch, set by the store
//!     36     8  producer_timestamp i64, ms since epoch, set by the client
//!     44     4  partition          u32
//!     48     2  topic_len          u16
//!     50     2  header_count       u16
//!     52     4  key_len            u32 (0 when FLAG_HAS_KEY is clear)
//!     56     4  value_len          u32 (0 when FLAG_HAS_VALUE is clear)
//!     60     4  headers_len        u32, bytes of the header block
//!     64        topic | key | value | header block
//! header block: header_count times
//!          2  name_len u16 | 4 value_len u32 | name (UTF-8) | value
//!
//! end-of-segment marker (fills the rest of a segment)
//!      0     4  total_len          u32, bytes from here to the segment end
//!      4     4  crc                u32, CRC32C of bytes [8, 20)
//!      8     2  magic              u16, END_MAGIC
//!     10     1  version            u8
//!     11     1  flags              u8, 0
//!     12     8  physical_offset    u64
//! ```
//!
//! A record with no value (FLAG_HAS_VALUE clear) is a tombstone. Each record
//! carries its own physical offset: recovery and reads by physical offset
//! check it, so stale bytes of an older record at another position, or a
//! client-supplied offset into the middle of a record, are never taken for a
//! record. The CRC covers everything after itself, so a torn write fails it.

use bytes::Bytes;

/// Magic of a record ("TIDE" squeezed into 16 bits).
pub const RECORD_MAGIC: u16 = 0x7D1E;
/// Magic of the end-of-segment marker.
pub const END_MAGIC: u16 = 0xE0F5;
pub const VERSION: u8 = 1;

pub const FLAG_HAS_KEY: u8 = 0b01;
pub const FLAG_HAS_VALUE: u8 = 0b10;
const FLAGS_KNOWN: u8 = FLAG_HAS_KEY | FLAG_HAS_VALUE;

pub const HEADER_LEN: usize = 64;
pub const END_MARKER_LEN: usize = 20;

const OFF_TOTAL_LEN: usize = 0;
const OFF_CRC: usize = 4;
const OFF_MAGIC: usize = 8;
const OFF_VERSION: usize = 10;
const OFF_FLAGS: usize = 11;
const OFF_PHYSICAL: usize = 12;
const OFF_QUEUE: usize = 20;
const OFF_STORE_TS: usize = 28;
const OFF_PRODUCER_TS: usize = 36;
const OFF_PARTITION: usize = 44;
const OFF_TOPIC_LEN: usize = 48;
const OFF_HEADER_COUNT: usize = 50;
const OFF_KEY_LEN: usize = 52;
const OFF_VALUE_LEN: usize = 56;
const OFF_HEADERS_LEN: usize = 60;
/// The CRC covers the record from here to its end.
pub const CRC_START: usize = 8;

const HEADER_ENTRY_FIXED: usize = 6;

const _: () = assert!(OFF_HEADERS_LEN + 4 == HEADER_LEN);
const _: () = assert!(OFF_PHYSICAL + 8 == END_MARKER_LEN);

/// Longest topic name a record may carry (Kafka's limit).
pub const TOPIC_LEN_MAX: usize = crate::types::TOPIC_NAME_MAX;
/// Most headers on one record.
pub const HEADER_COUNT_MAX: usize = u16::MAX as usize;
/// Longest header name.
pub const HEADER_NAME_MAX: usize = u16::MAX as usize;
/// Hard ceiling on one record, whatever `max_message_bytes` says; lengths
/// read from disk are checked against it before anything is sliced.
pub const RECORD_LEN_MAX: usize = 256 << 20;

/// One record header, as clients send them: a name and opaque bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: Bytes,
}

/// Everything needed to encode one record.
#[derive(Clone, Copy, Debug)]
pub struct RecordFields<'a> {
    pub physical_offset: u64,
    pub queue_offset: u64,
    pub store_timestamp_ms: i64,
    pub producer_timestamp_ms: i64,
    pub topic: &'a str,
    pub partition: u32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [Header],
}

/// Bytes of the header block for `headers`.
pub fn headers_block_len(headers: &[Header]) -> usize {
    headers
        .iter()
        .map(|h| HEADER_ENTRY_FIXED + h.name.len() + h.value.len())
        .sum()
}

/// Bytes a record with these parts occupies in the log.
pub fn encoded_len(
    topic_len: usize,
    key_len: usize,
    value_len: usize,
    headers: &[Header],
) -> usize {
    HEADER_LEN + topic_len + key_len + value_len + headers_block_len(headers)
}

/// Why bytes are not a valid record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Fewer bytes than a header needs.
    Truncated {
        needed: usize,
        available: usize,
    },
    BadMagic(u16),
    BadVersion(u8),
    BadFlags(u8),
    BadLength(String),
    OffsetMismatch {
        stored: u64,
        expected: u64,
    },
    CrcMismatch {
        stored: u32,
        computed: u32,
    },
    BadTopic,
    BadHeaders(String),
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::Truncated { needed, available } => {
                write!(f, "truncated: needs {needed} bytes, {available} available")
            }
            Invalid::BadMagic(m) => write!(f, "bad magic {m:#06x}"),
            Invalid::BadVersion(v) => write!(f, "unknown version {v}"),
            Invalid::BadFlags(x) => write!(f, "unknown flags {x:#04x}"),
            Invalid::BadLength(s) => write!(f, "bad length: {s}"),
            Invalid::OffsetMismatch { stored, expected } => {
                write!(f, "record says it starts at {stored}, found at {expected}")
            }
            Invalid::CrcMismatch { stored, computed } => {
                write!(
                    f,
                    "CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
                )
            }
            Invalid::BadTopic => write!(f, "topic name is not valid"),
            Invalid::BadHeaders(s) => write!(f, "bad header block: {s}"),
        }
    }
}

/// What starts at a position of a segment.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Zero length: nothing was ever written here.
    Empty,
    /// End-of-segment marker; the next record is in the next segment.
    EndOfSegment {
        len: usize,
    },
    Record(RecordView),
}

/// Field positions of a decoded record, relative to the record's first byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordView {
    pub total_len: usize,
    pub flags: u8,
    pub physical_offset: u64,
    pub queue_offset: u64,
    pub store_timestamp_ms: i64,
    pub producer_timestamp_ms: i64,
    pub partition: u32,
    pub topic: std::ops::Range<usize>,
    pub key: Option<std::ops::Range<usize>>,
    pub value: Option<std::ops::Range<usize>>,
    pub headers: std::ops::Range<usize>,
    pub header_count: usize,
}

fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([buf[at], buf[at + 1]])
}
fn get_u32(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}
fn get_u64(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Encode `r` into `buf`, which must be exactly `encoded_len(..)` bytes.
/// The caller has validated every length (see `CommitLog::append`); these
/// are programmer invariants, hence debug assertions.
pub fn encode(buf: &mut [u8], r: &RecordFields<'_>) {
    let key = r.key.unwrap_or_default();
    let value = r.value.unwrap_or_default();
    let headers_len = headers_block_len(r.headers);
    debug_assert_eq!(
        buf.len(),
        encoded_len(r.topic.len(), key.len(), value.len(), r.headers)
    );
    debug_assert!(r.topic.len() <= TOPIC_LEN_MAX && r.headers.len() <= HEADER_COUNT_MAX);
    let mut flags = 0;
    if r.key.is_some() {
        flags |= FLAG_HAS_KEY;
    }
    if r.value.is_some() {
        flags |= FLAG_HAS_VALUE;
    }
    put_u32(buf, OFF_TOTAL_LEN, buf.len() as u32);
    put_u16(buf, OFF_MAGIC, RECORD_MAGIC);
    buf[OFF_VERSION] = VERSION;
    buf[OFF_FLAGS] = flags;
    put_u64(buf, OFF_PHYSICAL, r.physical_offset);
    put_u64(buf, OFF_QUEUE, r.queue_offset);
    put_u64(buf, OFF_STORE_TS, r.store_timestamp_ms as u64);
    put_u64(buf, OFF_PRODUCER_TS, r.producer_timestamp_ms as u64);
    put_u32(buf, OFF_PARTITION, r.partition);
    put_u16(buf, OFF_TOPIC_LEN, r.topic.len() as u16);
    put_u16(buf, OFF_HEADER_COUNT, r.headers.len() as u16);
    put_u32(buf, OFF_KEY_LEN, key.len() as u32);
    put_u32(buf, OFF_VALUE_LEN, value.len() as u32);
    put_u32(buf, OFF_HEADERS_LEN, headers_len as u32);
    let mut at = HEADER_LEN;
    for part in [r.topic.as_bytes(), key, value] {
        buf[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    for h in r.headers {
        put_u16(buf, at, h.name.len() as u16);
        put_u32(buf, at + 2, h.value.len() as u32);
        at += HEADER_ENTRY_FIXED;
        buf[at..at + h.name.len()].copy_from_slice(h.name.as_bytes());
        at += h.name.len();
        buf[at..at + h.value.len()].copy_from_slice(&h.value);
        at += h.value.len();
    }
    debug_assert_eq!(at, buf.len());
    let crc = crc32c::crc32c(&buf[CRC_START..]);
    put_u32(buf, OFF_CRC, crc);
}

/// Encode the 20 bytes of an end-of-segment marker at `physical_offset`
/// that says `remaining` bytes are left in the segment (for writers that
/// write the marker's header only, leaving the zeros after it).
pub fn encode_end_marker(buf: &mut [u8; END_MARKER_LEN], physical_offset: u64, remaining: u64) {
    put_u32(buf, OFF_TOTAL_LEN, remaining.min(u32::MAX as u64) as u32);
    put_u16(buf, OFF_MAGIC, END_MAGIC);
    buf[OFF_VERSION] = VERSION;
    buf[OFF_FLAGS] = 0;
    put_u64(buf, OFF_PHYSICAL, physical_offset);
    let crc = crc32c::crc32c(&buf[CRC_START..END_MARKER_LEN]);
    put_u32(buf, OFF_CRC, crc);
}

/// Decode what starts at `buf[0]`, where `buf` runs to the end of the
/// readable region (the segment end, or the committed position) and
/// `expected_offset` is the physical offset of `buf[0]`.
///
/// With `verify_crc` false the CRC is skipped (used on bytes that were
/// already verified, e.g. reads through the ConsumeQueue); every length is
/// still checked, so a bad length can never slice out of bounds.
pub fn decode(buf: &[u8], expected_offset: u64, verify_crc: bool) -> Result<Decoded, Invalid> {
    if buf.len() < 4 {
        // Too short to hold even a length: treat zeros as empty, else torn.
        return if buf.iter().all(|&b| b == 0) {
            Ok(Decoded::Empty)
        } else {
            Err(Invalid::Truncated {
                needed: 4,
                available: buf.len(),
            })
        };
    }
    let total_len = get_u32(buf, OFF_TOTAL_LEN) as usize;
    if total_len == 0 {
        return Ok(Decoded::Empty);
    }
    if buf.len() < END_MARKER_LEN {
        return Err(Invalid::Truncated {
            needed: END_MARKER_LEN,
            available: buf.len(),
        });
    }
    let magic = get_u16(buf, OFF_MAGIC);
    let version = buf[OFF_VERSION];
    let stored_offset = get_u64(buf, OFF_PHYSICAL);
    match magic {
        END_MAGIC | RECORD_MAGIC => {}
        other => return Err(Invalid::BadMagic(other)),
    }
    if version != VERSION {
        return Err(Invalid::BadVersion(version));
    }
    if stored_offset != expected_offset {
        return Err(Invalid::OffsetMismatch {
            stored: stored_offset,
            expected: expected_offset,
        });
    }
    if magic == END_MAGIC {
        let computed = crc32c::crc32c(&buf[CRC_START..END_MARKER_LEN]);
        let stored = get_u32(buf, OFF_CRC);
        if computed != stored {
            return Err(Invalid::CrcMismatch { stored, computed });
        }
        if total_len < END_MARKER_LEN || total_len > buf.len() {
            return Err(Invalid::BadLength(format!(
                "end marker claims {total_len} bytes, {} remain",
                buf.len()
            )));
        }
        return Ok(Decoded::EndOfSegment { len: total_len });
    }
    if !(HEADER_LEN..=RECORD_LEN_MAX).contains(&total_len) {
        return Err(Invalid::BadLength(format!(
            "total length {total_len} outside [{HEADER_LEN}, {RECORD_LEN_MAX}]"
        )));
    }
    if total_len > buf.len() {
        return Err(Invalid::Truncated {
            needed: total_len,
            available: buf.len(),
        });
    }
    let rec = &buf[..total_len];
    let flags = rec[OFF_FLAGS];
    if flags & !FLAGS_KNOWN != 0 {
        return Err(Invalid::BadFlags(flags));
    }
    let topic_len = get_u16(rec, OFF_TOPIC_LEN) as usize;
    let header_count = get_u16(rec, OFF_HEADER_COUNT) as usize;
    let key_len = get_u32(rec, OFF_KEY_LEN) as usize;
    let value_len = get_u32(rec, OFF_VALUE_LEN) as usize;
    let headers_len = get_u32(rec, OFF_HEADERS_LEN) as usize;
    let body = topic_len as u64 + key_len as u64 + value_len as u64 + headers_len as u64;
    if HEADER_LEN as u64 + body != total_len as u64 {
        return Err(Invalid::BadLength(format!(
            "parts add up to {} bytes, record says {total_len}",
            HEADER_LEN as u64 + body
        )));
    }
    if flags & FLAG_HAS_KEY == 0 && key_len != 0 || flags & FLAG_HAS_VALUE == 0 && value_len != 0 {
        return Err(Invalid::BadLength(
            "length given for an absent key or value".into(),
        ));
    }
    if verify_crc {
        let computed = crc32c::crc32c(&rec[CRC_START..]);
        let stored = get_u32(rec, OFF_CRC);
        if computed != stored {
            return Err(Invalid::CrcMismatch { stored, computed });
        }
    }
    let topic = HEADER_LEN..HEADER_LEN + topic_len;
    // The name check is for bytes of unknown origin. Trusted reads (the
    // writer's own committed bytes, whose names it checked, or bytes that
    // recovery read with the full check) skip it: it was a tenth of the
    // dispatcher's time. `StoredRecord::topic` stays safe regardless.
    if verify_crc
        && std::str::from_utf8(&rec[topic.clone()]).map_or(true, |name| {
            crate::types::validate_topic_name(name).is_err()
        })
    {
        return Err(Invalid::BadTopic);
    }
    let key = topic.end..topic.end + key_len;
    let value = key.end..key.end + value_len;
    let headers = value.end..value.end + headers_len;
    validate_headers(&rec[headers.clone()], header_count)?;
    Ok(Decoded::Record(RecordView {
        total_len,
        flags,
        physical_offset: stored_offset,
        queue_offset: get_u64(rec, OFF_QUEUE),
        store_timestamp_ms: get_u64(rec, OFF_STORE_TS) as i64,
        producer_timestamp_ms: get_u64(rec, OFF_PRODUCER_TS) as i64,
        partition: get_u32(rec, OFF_PARTITION),
        topic,
        key: (flags & FLAG_HAS_KEY != 0).then_some(key),
        value: (flags & FLAG_HAS_VALUE != 0).then_some(value),
        headers,
        header_count,
    }))
}

/// Walk a header block and check it holds exactly `count` well-formed
/// entries with UTF-8 names.
pub fn validate_headers(block: &[u8], count: usize) -> Result<(), Invalid> {
    let mut at = 0;
    for i in 0..count {
        if block.len() - at < HEADER_ENTRY_FIXED {
            return Err(Invalid::BadHeaders(format!(
                "entry {i} runs past the block"
            )));
        }
        let name_len = get_u16(block, at) as usize;
        let value_len = get_u32(block, at + 2) as usize;
        at += HEADER_ENTRY_FIXED;
        if (block.len() - at) < name_len + value_len {
            return Err(Invalid::BadHeaders(format!(
                "entry {i} runs past the block"
            )));
        }
        if std::str::from_utf8(&block[at..at + name_len]).is_err() {
            return Err(Invalid::BadHeaders(format!("entry {i} name is not UTF-8")));
        }
        at += name_len + value_len;
    }
    if at != block.len() {
        return Err(Invalid::BadHeaders(format!(
            "{} bytes left after {count} entries",
            block.len() - at
        )));
    }
    Ok(())
}

/// Decode a validated header block (see [`decode`]) into owned headers whose
/// values share `block`'s memory.
pub fn decode_headers(block: &Bytes, count: usize) -> Vec<Header> {
    let mut out = Vec::with_capacity(count);
    let mut at = 0;
    while at + HEADER_ENTRY_FIXED <= block.len() && out.len() < count {
        let name_len = get_u16(block, at) as usize;
        let value_len = get_u32(block, at + 2) as usize;
        at += HEADER_ENTRY_FIXED;
        if at + name_len + value_len > block.len() {
            break;
        }
        let name = String::from_utf8_lossy(&block[at..at + name_len]).into_owned();
        at += name_len;
        out.push(Header {
            name,
            value: block.slice(at..at + value_len),
        });
        at += value_len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_headers() -> Vec<Header> {
        vec![
            Header {
                name: "trace".into(),
                value: Bytes::from_static(b"abc"),
            },
            Header {
                name: "trace".into(),
                value: Bytes::new(),
            },
            Header {
                name: "".into(),
                value: Bytes::from_static(b"\x00\xff"),
            },
        ]
    }

    fn encode_vec(f: &RecordFields<'_>) -> Vec<u8> {
        let len = encoded_len(
            f.topic.len(),
            f.key.map_or(0, |k| k.len()),
            f.value.map_or(0, |v| v.len()),
            f.headers,
        );
        let mut buf = vec![0u8; len];
        encode(&mut buf, f);
        buf
    }

    fn fields<'a>(headers: &'a [Header]) -> RecordFields<'a> {
        RecordFields {
            physical_offset: 4096,
            queue_offset: 7,
            store_timestamp_ms: 1_700_000_000_000,
            producer_timestamp_ms: -1,
            topic: "orders",
            partition: 3,
            key: Some(b"k1"),
            value: Some(b"hello"),
            headers,
        }
    }

    #[test]
    fn record_round_trip() {
        let headers = sample_headers();
        let f = fields(&headers);
        let buf = encode_vec(&f);
        let Decoded::Record(v) = decode(&buf, 4096, true).unwrap() else {
            panic!("not a record")
        };
        assert_eq!(v.total_len, buf.len());
        assert_eq!(v.queue_offset, 7);
        assert_eq!(v.partition, 3);
        assert_eq!(v.store_timestamp_ms, 1_700_000_000_000);
        assert_eq!(v.producer_timestamp_ms, -1);
        assert_eq!(&buf[v.topic.clone()], b"orders");
        assert_eq!(&buf[v.key.clone().unwrap()], b"k1");
        assert_eq!(&buf[v.value.clone().unwrap()], b"hello");
        let block = Bytes::copy_from_slice(&buf[v.headers.clone()]);
        assert_eq!(decode_headers(&block, v.header_count), headers);
    }

    #[test]
    fn tombstone_and_keyless_round_trip() {
        let mut f = fields(&[]);
        f.key = None;
        f.value = None;
        let buf = encode_vec(&f);
        let Decoded::Record(v) = decode(&buf, 4096, true).unwrap() else {
            panic!("not a record")
        };
        assert_eq!(v.key, None);
        assert_eq!(v.value, None);
        // An empty value is not a tombstone.
        f.value = Some(b"");
        let buf = encode_vec(&f);
        let Decoded::Record(v) = decode(&buf, 4096, true).unwrap() else {
            panic!("not a record")
        };
        assert_eq!(v.value.map(|r| r.len()), Some(0));
    }

    #[test]
    fn end_marker_round_trip() {
        let mut buf = vec![0u8; 100];
        let mut marker = [0u8; END_MARKER_LEN];
        encode_end_marker(&mut marker, 900, 100);
        buf[..END_MARKER_LEN].copy_from_slice(&marker);
        assert_eq!(
            decode(&buf, 900, true).unwrap(),
            Decoded::EndOfSegment { len: 100 }
        );
        assert!(matches!(
            decode(&buf, 901, true),
            Err(Invalid::OffsetMismatch { .. })
        ));
    }

    #[test]
    fn zeros_are_empty() {
        assert_eq!(decode(&[0u8; 64], 0, true).unwrap(), Decoded::Empty);
        assert_eq!(decode(&[0u8; 2], 0, true).unwrap(), Decoded::Empty);
        assert_eq!(decode(&[], 0, true).unwrap(), Decoded::Empty);
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let headers = sample_headers();
        let buf = encode_vec(&fields(&headers));
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            match decode(&bad, 4096, true) {
                Err(_) => {}
                // A flipped length byte can make the record look empty or
                // too long; both are refusals, never a wrong record.
                Ok(Decoded::Empty) => assert!(i < 4),
                Ok(other) => panic!("flip at byte {i} decoded as {other:?}"),
            }
        }
    }

    #[test]
    fn torn_record_is_truncated() {
        let buf = encode_vec(&fields(&[]));
        for cut in 1..buf.len() {
            let r = decode(&buf[..cut], 4096, true);
            assert!(r.is_err(), "cut at {cut} gave {r:?}");
        }
    }

    #[test]
    fn record_at_wrong_position_is_refused() {
        let buf = encode_vec(&fields(&[]));
        assert_eq!(
            decode(&buf, 8192, true),
            Err(Invalid::OffsetMismatch {
                stored: 4096,
                expected: 8192
            })
        );
    }

    #[test]
    fn hostile_lengths_are_bounded() {
        let mut buf = encode_vec(&fields(&[]));
        // Claim a gigantic total length.
        buf[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(&buf, 4096, false),
            Err(Invalid::BadLength(_))
        ));
        // Key length that overflows the record, with the CRC check off.
        let mut buf = encode_vec(&fields(&[]));
        buf[OFF_KEY_LEN..OFF_KEY_LEN + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(&buf, 4096, false),
            Err(Invalid::BadLength(_))
        ));
        // Header count larger than the block holds.
        let headers = sample_headers();
        let mut buf = encode_vec(&fields(&headers));
        buf[OFF_HEADER_COUNT..OFF_HEADER_COUNT + 2].copy_from_slice(&9u16.to_le_bytes());
        assert!(matches!(
            decode(&buf, 4096, false),
            Err(Invalid::BadHeaders(_))
        ));
        // A bad topic name in bytes of unknown origin (even with a valid
        // CRC) never reaches the caller.
        let mut buf = encode_vec(&fields(&[]));
        buf[HEADER_LEN] = b'/';
        let crc = crc32c::crc32c(&buf[CRC_START..]);
        put_u32(&mut buf, OFF_CRC, crc);
        assert_eq!(decode(&buf, 4096, true), Err(Invalid::BadTopic));
        // Trusted reads (bytes this process wrote or recovery checked) skip
        // the name check; a name that is not UTF-8 still never reaches a
        // caller as a `str`.
        let mut buf = encode_vec(&fields(&[]));
        buf[HEADER_LEN] = 0xff;
        let Ok(Decoded::Record(view)) = decode(&buf, 4096, false) else {
            panic!("a trusted read decodes the record");
        };
        let record = super::super::StoredRecord::from_bytes(Bytes::from(buf), view);
        assert_eq!(record.topic(), "");
    }
}
