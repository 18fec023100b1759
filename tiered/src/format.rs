//! Byte layout of a record object (`.tlro`): the records of one partition
//! between two offsets, as the uploader wrote them, with a sparse offset
//! index so a reader can fetch the part it needs with a ranged GET.
//!
//! All integers are little-endian with explicit widths. An object's bytes
//! depend only on its records (no upload time, no random ids), so a retried
//! upload of the same records writes the same bytes under the same name.
//!
//! ```text
//! object = header | record frames | index | footer
//!
//! header (HEADER_LEN = 24)
//! offset  size  field
//!      0     4  magic           u32, MAGIC ("TLRO")
//!      4     2  version         u16, VERSION (1)
//!      6     2  reserved        u16, 0
//!      8     8  base_offset     u64, offset of the first record
//!     16     8  last_offset     u64, offset of the last record
//!
//! record frame (at a position the index or the previous frame gives)
//!      0     4  body_len        u32, <= RECORD_BODY_MAX
//!      4     4  crc             u32, CRC32C of the body
//!      8        body
//! body
//!      0     8  offset          u64, ascending, base_offset..=last_offset
//!      8     8  timestamp_ms    i64
//!     16     4  key_len         i32, LEN_NULL (-1): no key, no bytes follow
//!               key
//!            4  value_len       i32, LEN_NULL: no value
//!               value
//!            2  header_count    u16
//!               header_count times:
//!            2    name_len      u16 | name (UTF-8)
//!            4    value_len     i32, LEN_NULL: a null value | value
//!
//! index (index_count entries of INDEX_ENTRY_LEN = 16, ascending)
//!      0     8  offset          u64, the offset of the record at position
//!      8     8  position        u64, byte position of its frame
//!   The first record is always indexed; then the first record starting at
//!   least INDEX_INTERVAL_BYTES after the last indexed one.
//!
//! footer (FOOTER_LEN = 52, the object's last bytes)
//!      0     8  index_position  u64, where the index starts (= records end)
//!      8     4  index_count     u32
//!     12     4  record_count    u32
//!     16     8  base_offset     u64
//!     24     8  last_offset     u64
//!     32     8  max_timestamp   i64, the largest timestamp_ms (retention)
//!     40     4  index_crc       u32, CRC32C of the index bytes
//!     44     4  footer_crc      u32, CRC32C of footer bytes [0, 44)
//!     48     4  magic           u32, MAGIC
//! ```
//!
//! Invariants a decoder checks before it slices or allocates: the magic and
//! version, every CRC, `HEADER_LEN <= index_position` and
//! `index_position + index_count * 16 + FOOTER_LEN == object size`, index
//! entries ascending in offset and position and inside the records, every
//! length inside the bytes that hold it, offsets ascending inside
//! `base_offset..=last_offset`.

use bytes::Bytes;
use tidelog_storage::codec::{
    get_i64, get_u16, get_u32, get_u64, push_u16, push_u32, push_u64, read_bytes, Truncated,
    U16_LEN, U32_LEN, U64_LEN,
};

use crate::record::RemoteRecord;

/// "TLRO" read as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"TLRO");
pub const VERSION: u16 = 1;

pub const OFF_MAGIC: usize = 0;
pub const OFF_VERSION: usize = OFF_MAGIC + U32_LEN;
pub const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
pub const OFF_BASE: usize = OFF_RESERVED + U16_LEN;
pub const OFF_LAST: usize = OFF_BASE + U64_LEN;
pub const HEADER_LEN: usize = OFF_LAST + U64_LEN;
const _: () = assert!(HEADER_LEN == 24);

pub const FRAME_OFF_LEN: usize = 0;
pub const FRAME_OFF_CRC: usize = FRAME_OFF_LEN + U32_LEN;
pub const FRAME_HEAD_LEN: usize = FRAME_OFF_CRC + U32_LEN;
const _: () = assert!(FRAME_HEAD_LEN == 8);

/// A length field's value for "null" (Kafka's -1).
pub const LEN_NULL: i32 = -1;
/// Largest record body: a record must fit the store's record limit
/// (256 MiB) with its framing, well inside this.
pub const RECORD_BODY_MAX: usize = 1 << 30;
/// The fixed part of a body: offset, timestamp, key_len, value_len,
/// header_count.
pub const BODY_FIXED_LEN: usize = U64_LEN + U64_LEN + U32_LEN + U32_LEN + U16_LEN;
/// The fixed part of one header: name_len, value_len.
pub const HEADER_FIXED_LEN: usize = U16_LEN + U32_LEN;

pub const INDEX_ENTRY_LEN: usize = U64_LEN + U64_LEN;
/// Distance between two index entries, in record bytes.
pub const INDEX_INTERVAL_BYTES: usize = 64 * 1024;

pub const FOOT_OFF_INDEX_POSITION: usize = 0;
pub const FOOT_OFF_INDEX_COUNT: usize = FOOT_OFF_INDEX_POSITION + U64_LEN;
pub const FOOT_OFF_RECORD_COUNT: usize = FOOT_OFF_INDEX_COUNT + U32_LEN;
pub const FOOT_OFF_BASE: usize = FOOT_OFF_RECORD_COUNT + U32_LEN;
pub const FOOT_OFF_LAST: usize = FOOT_OFF_BASE + U64_LEN;
pub const FOOT_OFF_MAX_TIMESTAMP: usize = FOOT_OFF_LAST + U64_LEN;
pub const FOOT_OFF_INDEX_CRC: usize = FOOT_OFF_MAX_TIMESTAMP + U64_LEN;
pub const FOOT_OFF_FOOTER_CRC: usize = FOOT_OFF_INDEX_CRC + U32_LEN;
pub const FOOT_OFF_MAGIC: usize = FOOT_OFF_FOOTER_CRC + U32_LEN;
pub const FOOTER_LEN: usize = FOOT_OFF_MAGIC + U32_LEN;
const _: () = assert!(FOOTER_LEN == 52);

/// Why bytes are not a record object (or a part of one).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error(transparent)]
    Truncated(#[from] Truncated),
    #[error("bad magic {found:#010x}")]
    BadMagic { found: u32 },
    #[error("unknown version {found}")]
    UnknownVersion { found: u16 },
    #[error("{what}: CRC {stored:#010x} stored, {computed:#010x} computed")]
    CrcMismatch {
        what: &'static str,
        stored: u32,
        computed: u32,
    },
    #[error("bad length: {0}")]
    BadLength(String),
    #[error("bad index: {0}")]
    BadIndex(String),
    #[error("bad offset: {0}")]
    BadOffset(String),
    #[error("header name is not UTF-8")]
    BadHeaderName,
}

/// What the footer says about an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    pub index_position: u64,
    pub index_count: u32,
    pub record_count: u32,
    pub base_offset: u64,
    pub last_offset: u64,
    pub max_timestamp_ms: i64,
    pub index_crc: u32,
}

/// One sparse index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub offset: u64,
    pub position: u64,
}

/// An encoded object and what the manifest records of it.
#[derive(Clone, Debug)]
pub struct Encoded {
    pub bytes: Bytes,
    pub base_offset: u64,
    pub last_offset: u64,
    pub records: u64,
    pub max_timestamp_ms: i64,
    /// CRC32C of the whole object.
    pub crc32c: u32,
}

/// Bytes a record takes in an object (frame head and body).
pub fn framed_len(r: &RemoteRecord) -> usize {
    let opt = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
    let headers: usize = r
        .headers
        .iter()
        .map(|(name, value)| HEADER_FIXED_LEN + name.len() + opt(value))
        .sum();
    FRAME_HEAD_LEN + BODY_FIXED_LEN + opt(&r.key) + opt(&r.value) + headers
}

/// A length that fits an i32 field and the body limit, or why not.
fn field_len(len: usize, what: &str) -> Result<i32, Invalid> {
    i32::try_from(len)
        .ok()
        .filter(|_| len <= RECORD_BODY_MAX)
        .ok_or_else(|| Invalid::BadLength(format!("{what} of {len} bytes")))
}

fn push_opt(buf: &mut Vec<u8>, b: &Option<Bytes>, what: &str) -> Result<(), Invalid> {
    match b {
        None => push_u32(buf, LEN_NULL as u32),
        Some(b) => {
            push_u32(buf, field_len(b.len(), what)? as u32);
            buf.extend_from_slice(b);
        }
    }
    Ok(())
}

/// Encodes `records` (ascending offsets, at least one) as one object.
/// Refuses records the format cannot hold (a body over RECORD_BODY_MAX, more
/// than u16::MAX headers or a longer header name, offsets not ascending).
pub fn encode(records: &[RemoteRecord]) -> Result<Encoded, Invalid> {
    let (first, last) = match (records.first(), records.last()) {
        (Some(f), Some(l)) => (f, l),
        _ => return Err(Invalid::BadLength("an object of no records".into())),
    };
    let record_count = u32::try_from(records.len())
        .map_err(|_| Invalid::BadLength(format!("{} records in one object", records.len())))?;
    let total: usize = records.iter().map(framed_len).sum();
    let mut buf = Vec::with_capacity(HEADER_LEN + total + FOOTER_LEN + total / 4096);
    push_u32(&mut buf, MAGIC);
    push_u16(&mut buf, VERSION);
    push_u16(&mut buf, 0);
    push_u64(&mut buf, first.offset);
    push_u64(&mut buf, last.offset);

    let mut index: Vec<IndexEntry> = Vec::new();
    let mut max_timestamp_ms = i64::MIN;
    let mut previous: Option<u64> = None;
    for r in records {
        if previous.is_some_and(|p| r.offset <= p) {
            return Err(Invalid::BadOffset(format!(
                "offset {} after {}",
                r.offset,
                previous.unwrap_or_default()
            )));
        }
        previous = Some(r.offset);
        let position = buf.len();
        if index
            .last()
            .is_none_or(|e| position - e.position as usize >= INDEX_INTERVAL_BYTES)
        {
            index.push(IndexEntry {
                offset: r.offset,
                position: position as u64,
            });
        }
        max_timestamp_ms = max_timestamp_ms.max(r.timestamp_ms);
        let body_len = framed_len(r) - FRAME_HEAD_LEN;
        let body_len = field_len(body_len, "record body")?;
        push_u32(&mut buf, body_len as u32);
        push_u32(&mut buf, 0); // the CRC, once the body is written
        let body_at = buf.len();
        push_u64(&mut buf, r.offset);
        push_u64(&mut buf, r.timestamp_ms as u64);
        push_opt(&mut buf, &r.key, "key")?;
        push_opt(&mut buf, &r.value, "value")?;
        let count = u16::try_from(r.headers.len())
            .map_err(|_| Invalid::BadLength(format!("{} headers", r.headers.len())))?;
        push_u16(&mut buf, count);
        for (name, value) in &r.headers {
            let name_len = u16::try_from(name.len())
                .map_err(|_| Invalid::BadLength(format!("header name of {} bytes", name.len())))?;
            push_u16(&mut buf, name_len);
            buf.extend_from_slice(name.as_bytes());
            push_opt(&mut buf, value, "header value")?;
        }
        let crc = crc32c::crc32c(&buf[body_at..]);
        buf[body_at - U32_LEN..body_at].copy_from_slice(&crc.to_le_bytes());
    }

    let index_position = buf.len() as u64;
    for e in &index {
        push_u64(&mut buf, e.offset);
        push_u64(&mut buf, e.position);
    }
    let index_crc = crc32c::crc32c(&buf[index_position as usize..]);
    let footer = Footer {
        index_position,
        index_count: index.len() as u32,
        record_count,
        base_offset: first.offset,
        last_offset: last.offset,
        max_timestamp_ms,
        index_crc,
    };
    buf.extend_from_slice(&encode_footer(&footer));
    let crc32c = crc32c::crc32c(&buf);
    Ok(Encoded {
        bytes: Bytes::from(buf),
        base_offset: first.offset,
        last_offset: last.offset,
        records: records.len() as u64,
        max_timestamp_ms,
        crc32c,
    })
}

fn encode_footer(f: &Footer) -> [u8; FOOTER_LEN] {
    let mut b = [0u8; FOOTER_LEN];
    tidelog_storage::codec::put_u64(&mut b, FOOT_OFF_INDEX_POSITION, f.index_position);
    tidelog_storage::codec::put_u32(&mut b, FOOT_OFF_INDEX_COUNT, f.index_count);
    tidelog_storage::codec::put_u32(&mut b, FOOT_OFF_RECORD_COUNT, f.record_count);
    tidelog_storage::codec::put_u64(&mut b, FOOT_OFF_BASE, f.base_offset);
    tidelog_storage::codec::put_u64(&mut b, FOOT_OFF_LAST, f.last_offset);
    tidelog_storage::codec::put_i64(&mut b, FOOT_OFF_MAX_TIMESTAMP, f.max_timestamp_ms);
    tidelog_storage::codec::put_u32(&mut b, FOOT_OFF_INDEX_CRC, f.index_crc);
    let crc = crc32c::crc32c(&b[..FOOT_OFF_FOOTER_CRC]);
    tidelog_storage::codec::put_u32(&mut b, FOOT_OFF_FOOTER_CRC, crc);
    tidelog_storage::codec::put_u32(&mut b, FOOT_OFF_MAGIC, MAGIC);
    b
}

/// Decodes and checks the footer: `tail` is the object's last FOOTER_LEN
/// bytes, `object_len` its size.
pub fn decode_footer(tail: &[u8], object_len: u64) -> Result<Footer, Invalid> {
    if tail.len() != FOOTER_LEN || object_len < (HEADER_LEN + FOOTER_LEN) as u64 {
        return Err(Invalid::BadLength(format!(
            "a footer of {} bytes in an object of {object_len}",
            tail.len()
        )));
    }
    let found = get_u32(tail, FOOT_OFF_MAGIC);
    if found != MAGIC {
        return Err(Invalid::BadMagic { found });
    }
    let stored = get_u32(tail, FOOT_OFF_FOOTER_CRC);
    let computed = crc32c::crc32c(&tail[..FOOT_OFF_FOOTER_CRC]);
    if stored != computed {
        return Err(Invalid::CrcMismatch {
            what: "footer",
            stored,
            computed,
        });
    }
    let f = Footer {
        index_position: get_u64(tail, FOOT_OFF_INDEX_POSITION),
        index_count: get_u32(tail, FOOT_OFF_INDEX_COUNT),
        record_count: get_u32(tail, FOOT_OFF_RECORD_COUNT),
        base_offset: get_u64(tail, FOOT_OFF_BASE),
        last_offset: get_u64(tail, FOOT_OFF_LAST),
        max_timestamp_ms: get_i64(tail, FOOT_OFF_MAX_TIMESTAMP),
        index_crc: get_u32(tail, FOOT_OFF_INDEX_CRC),
    };
    let index_len = u64::from(f.index_count) * INDEX_ENTRY_LEN as u64;
    let expected = f
        .index_position
        .checked_add(index_len)
        .and_then(|n| n.checked_add(FOOTER_LEN as u64));
    if f.index_position < HEADER_LEN as u64 || expected != Some(object_len) {
        return Err(Invalid::BadIndex(format!(
            "index of {} entries at {} in an object of {object_len} bytes",
            f.index_count, f.index_position
        )));
    }
    if f.record_count == 0 || f.index_count == 0 || f.index_count > f.record_count {
        return Err(Invalid::BadIndex(format!(
            "{} index entries for {} records",
            f.index_count, f.record_count
        )));
    }
    if f.last_offset < f.base_offset
        || f.last_offset - f.base_offset < u64::from(f.record_count) - 1
    {
        return Err(Invalid::BadOffset(format!(
            "{} records in offsets {}..={}",
            f.record_count, f.base_offset, f.last_offset
        )));
    }
    Ok(f)
}

/// Decodes and checks the index: `bytes` are the object's bytes
/// `[index_position, index_position + index_count * 16)`.
pub fn decode_index(bytes: &[u8], f: &Footer) -> Result<Vec<IndexEntry>, Invalid> {
    if bytes.len() as u64 != u64::from(f.index_count) * INDEX_ENTRY_LEN as u64 {
        return Err(Invalid::BadIndex(format!(
            "{} index bytes for {} entries",
            bytes.len(),
            f.index_count
        )));
    }
    let computed = crc32c::crc32c(bytes);
    if computed != f.index_crc {
        return Err(Invalid::CrcMismatch {
            what: "index",
            stored: f.index_crc,
            computed,
        });
    }
    // The count was checked against the object's size (decode_footer) and
    // against these bytes, so the allocation is bounded by what was read.
    let mut entries = Vec::with_capacity(f.index_count as usize);
    for chunk in bytes.chunks_exact(INDEX_ENTRY_LEN) {
        let e = IndexEntry {
            offset: get_u64(chunk, 0),
            position: get_u64(chunk, U64_LEN),
        };
        let in_order = match entries.last() {
            None => e.offset == f.base_offset && e.position == HEADER_LEN as u64,
            Some(p @ IndexEntry { .. }) => e.offset > p.offset && e.position > p.position,
        };
        if !in_order || e.offset > f.last_offset || e.position >= f.index_position {
            return Err(Invalid::BadIndex(format!(
                "entry {} (offset {}, position {}) out of order or bounds",
                entries.len(),
                e.offset,
                e.position
            )));
        }
        entries.push(e);
    }
    Ok(entries)
}

/// The index entry to start a read of `from` at: the last one at or below
/// it (the first one when `from` is below the object).
pub fn seek(index: &[IndexEntry], from: u64) -> Option<IndexEntry> {
    let after = index.partition_point(|e| e.offset <= from);
    index.get(after.saturating_sub(1)).copied()
}

/// Checks a frame head (the 8 bytes at a record's position) and returns the
/// body length and CRC. `room` is how many bytes the records section still
/// holds after the head.
pub fn decode_frame_head(head: &[u8], room: u64) -> Result<(usize, u32), Invalid> {
    let len = read_bytes(head, FRAME_OFF_LEN, U32_LEN).map(|b| get_u32(b, 0))?;
    let crc = read_bytes(head, FRAME_OFF_CRC, U32_LEN).map(|b| get_u32(b, 0))?;
    let len = len as usize;
    if !(BODY_FIXED_LEN..=RECORD_BODY_MAX).contains(&len) || len as u64 > room {
        return Err(Invalid::BadLength(format!(
            "record body of {len} bytes with {room} left in the records"
        )));
    }
    Ok((len, crc))
}

/// Reads a length field: `None` for LEN_NULL, the checked length otherwise.
fn get_len(body: &[u8], at: &mut usize, width: usize) -> Result<Option<usize>, Invalid> {
    let raw = read_bytes(body, *at, width)?;
    *at += width;
    let len = if width == U16_LEN {
        i64::from(get_u16(raw, 0))
    } else {
        i64::from(get_u32(raw, 0) as i32)
    };
    if len == i64::from(LEN_NULL) && width == U32_LEN {
        return Ok(None);
    }
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= body.len() - *at)
        .ok_or_else(|| Invalid::BadLength(format!("field of {len} bytes at {at}")))?;
    Ok(Some(len))
}

fn take_opt(body: &Bytes, at: &mut usize) -> Result<Option<Bytes>, Invalid> {
    Ok(get_len(body, at, U32_LEN)?.map(|len| {
        let b = body.slice(*at..*at + len);
        *at += len;
        b
    }))
}

/// Decodes one record body after checking its CRC. Key, value and header
/// values are slices of `body` (no copy).
pub fn decode_body(body: Bytes, crc: u32) -> Result<RemoteRecord, Invalid> {
    let computed = crc32c::crc32c(&body);
    if computed != crc {
        return Err(Invalid::CrcMismatch {
            what: "record",
            stored: crc,
            computed,
        });
    }
    let offset = read_bytes(&body, 0, U64_LEN).map(|b| get_u64(b, 0))?;
    let timestamp_ms = read_bytes(&body, U64_LEN, U64_LEN).map(|b| get_i64(b, 0))?;
    let mut at = 2 * U64_LEN;
    let key = take_opt(&body, &mut at)?;
    let value = take_opt(&body, &mut at)?;
    let count = read_bytes(&body, at, U16_LEN).map(|b| get_u16(b, 0))? as usize;
    at += U16_LEN;
    if count * HEADER_FIXED_LEN > body.len() - at {
        return Err(Invalid::BadLength(format!(
            "{count} headers in {} bytes",
            body.len() - at
        )));
    }
    let mut headers = Vec::with_capacity(count);
    for _ in 0..count {
        let name_len = get_len(&body, &mut at, U16_LEN)?.unwrap_or_default();
        let name = std::str::from_utf8(&body[at..at + name_len])
            .map_err(|_| Invalid::BadHeaderName)?
            .to_string();
        at += name_len;
        headers.push((name, take_opt(&body, &mut at)?));
    }
    if at != body.len() {
        return Err(Invalid::BadLength(format!(
            "{} bytes after the record's last field",
            body.len() - at
        )));
    }
    Ok(RemoteRecord {
        offset,
        timestamp_ms,
        key,
        value,
        headers,
    })
}

/// Checks the header of a whole object against its footer.
fn check_header(object: &[u8], f: &Footer) -> Result<(), Invalid> {
    let head = read_bytes(object, 0, HEADER_LEN)?;
    let found = get_u32(head, OFF_MAGIC);
    if found != MAGIC {
        return Err(Invalid::BadMagic { found });
    }
    let found = get_u16(head, OFF_VERSION);
    if found != VERSION {
        return Err(Invalid::UnknownVersion { found });
    }
    if get_u64(head, OFF_BASE) != f.base_offset || get_u64(head, OFF_LAST) != f.last_offset {
        return Err(Invalid::BadOffset(
            "header and footer disagree on the offsets".into(),
        ));
    }
    Ok(())
}

/// Decodes a whole object, checking everything (restore, verification,
/// tests; reads use the footer, the index and ranged frames instead).
pub fn decode(object: Bytes) -> Result<(Footer, Vec<RemoteRecord>), Invalid> {
    let len = object.len();
    if len < HEADER_LEN + FOOTER_LEN {
        return Err(Invalid::BadLength(format!("an object of {len} bytes")));
    }
    let f = decode_footer(&object[len - FOOTER_LEN..], len as u64)?;
    check_header(&object, &f)?;
    let index_at = f.index_position as usize;
    decode_index(&object[index_at..len - FOOTER_LEN], &f)?;
    // Bounded by the bytes: each record takes at least a frame head.
    let mut records = Vec::with_capacity((f.record_count as usize).min(len / FRAME_HEAD_LEN));
    let mut at = HEADER_LEN;
    while at < index_at {
        let room = (index_at - at - FRAME_HEAD_LEN.min(index_at - at)) as u64;
        let (body_len, crc) = decode_frame_head(&object[at..index_at], room)?;
        let body_at = at + FRAME_HEAD_LEN;
        let r = decode_body(object.slice(body_at..body_at + body_len), crc)?;
        check_next(records.last().map(|p: &RemoteRecord| p.offset), &r, &f)?;
        records.push(r);
        at = body_at + body_len;
    }
    if records.len() != f.record_count as usize
        || records.last().map(|r| r.offset) != Some(f.last_offset)
    {
        return Err(Invalid::BadOffset(format!(
            "{} records decoded, the footer says {} ending at {}",
            records.len(),
            f.record_count,
            f.last_offset
        )));
    }
    Ok((f, records))
}

/// A decoded record follows the previous one and lies inside the object.
pub fn check_next(previous: Option<u64>, r: &RemoteRecord, f: &Footer) -> Result<(), Invalid> {
    let after_previous = previous.is_none_or(|p| r.offset > p);
    if !after_previous || r.offset < f.base_offset || r.offset > f.last_offset {
        return Err(Invalid::BadOffset(format!(
            "record offset {} after {previous:?} in {}..={}",
            r.offset, f.base_offset, f.last_offset
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: u64, value: &[u8]) -> RemoteRecord {
        RemoteRecord {
            offset,
            timestamp_ms: 1_700_000_000_000 + offset as i64,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::copy_from_slice(value)),
            headers: vec![],
        }
    }

    /// One object of two records, every byte written out: a change to the
    /// encoder and the decoder together cannot pass unseen.
    #[test]
    fn golden_bytes() {
        let records = vec![
            RemoteRecord {
                offset: 5,
                timestamp_ms: 0x0102,
                key: Some(Bytes::from_static(b"k")),
                value: None,
                headers: vec![("h".into(), None)],
            },
            RemoteRecord {
                offset: 7,
                timestamp_ms: 0x0103,
                key: None,
                value: Some(Bytes::from_static(b"vv")),
                headers: vec![],
            },
        ];
        let enc = encode(&records).unwrap();
        let mut expected: Vec<u8> = Vec::new();
        // header
        expected.extend_from_slice(b"TLRO");
        expected.extend_from_slice(&[1, 0, 0, 0]);
        expected.extend_from_slice(&5u64.to_le_bytes());
        expected.extend_from_slice(&7u64.to_le_bytes());
        // record 5: body = offset, ts, key 1 "k", value null, 1 header "h" null
        let mut body1 = Vec::new();
        body1.extend_from_slice(&5u64.to_le_bytes());
        body1.extend_from_slice(&0x0102u64.to_le_bytes());
        body1.extend_from_slice(&[1, 0, 0, 0, b'k']);
        body1.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        body1.extend_from_slice(&[1, 0]);
        body1.extend_from_slice(&[1, 0, b'h', 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(body1.len(), 34);
        expected.extend_from_slice(&[34, 0, 0, 0]);
        expected.extend_from_slice(&crc32c::crc32c(&body1).to_le_bytes());
        expected.extend_from_slice(&body1);
        // record 7: key null, value "vv", no headers
        let mut body2 = Vec::new();
        body2.extend_from_slice(&7u64.to_le_bytes());
        body2.extend_from_slice(&0x0103u64.to_le_bytes());
        body2.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        body2.extend_from_slice(&[2, 0, 0, 0, b'v', b'v']);
        body2.extend_from_slice(&[0, 0]);
        assert_eq!(body2.len(), 28);
        expected.extend_from_slice(&[28, 0, 0, 0]);
        expected.extend_from_slice(&crc32c::crc32c(&body2).to_le_bytes());
        expected.extend_from_slice(&body2);
        // index: one entry, offset 5 at position 24
        let index_at = expected.len() as u64;
        assert_eq!(index_at, 24 + 8 + 34 + 8 + 28);
        let mut index = Vec::new();
        index.extend_from_slice(&5u64.to_le_bytes());
        index.extend_from_slice(&24u64.to_le_bytes());
        expected.extend_from_slice(&index);
        // footer
        let mut footer = Vec::new();
        footer.extend_from_slice(&index_at.to_le_bytes());
        footer.extend_from_slice(&1u32.to_le_bytes());
        footer.extend_from_slice(&2u32.to_le_bytes());
        footer.extend_from_slice(&5u64.to_le_bytes());
        footer.extend_from_slice(&7u64.to_le_bytes());
        footer.extend_from_slice(&0x0103u64.to_le_bytes());
        footer.extend_from_slice(&crc32c::crc32c(&index).to_le_bytes());
        let footer_crc = crc32c::crc32c(&footer);
        footer.extend_from_slice(&footer_crc.to_le_bytes());
        footer.extend_from_slice(b"TLRO");
        expected.extend_from_slice(&footer);
        assert_eq!(&enc.bytes[..], &expected[..]);
        assert_eq!(enc.crc32c, crc32c::crc32c(&expected));
        assert_eq!((enc.base_offset, enc.last_offset, enc.records), (5, 7, 2));
        assert_eq!(enc.max_timestamp_ms, 0x0103);

        let (f, back) = decode(Bytes::from(expected)).unwrap();
        assert_eq!(back, records);
        assert_eq!(f.index_count, 1);
    }

    #[test]
    fn sparse_index_and_seek() {
        let value = vec![7u8; 10_000];
        let records: Vec<_> = (0..40).map(|i| rec(100 + 2 * i, &value)).collect();
        let enc = encode(&records).unwrap();
        let (f, back) = decode(enc.bytes.clone()).unwrap();
        assert_eq!(back, records);
        let len = enc.bytes.len();
        let index =
            decode_index(&enc.bytes[f.index_position as usize..len - FOOTER_LEN], &f).unwrap();
        // ~400 KB of records, one entry per 64 KiB
        assert!(index.len() >= 5 && index.len() <= 8, "{}", index.len());
        assert_eq!(seek(&index, 0).unwrap().offset, 100);
        let e = seek(&index, 150).unwrap();
        assert!(e.offset <= 150);
        assert_eq!(seek(&index, 10_000), index.last().copied());
    }

    #[test]
    fn refuses_unordered_and_empty() {
        assert!(encode(&[]).is_err());
        assert!(matches!(
            encode(&[rec(3, b"a"), rec(3, b"b")]),
            Err(Invalid::BadOffset(_))
        ));
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let records = vec![rec(1, b"hello"), rec(2, b"world")];
        let enc = encode(&records).unwrap();
        for i in 0..enc.bytes.len() {
            let mut b = enc.bytes.to_vec();
            b[i] ^= 0x40;
            // The reserved header field is the one byte range nothing reads.
            if (OFF_RESERVED..OFF_RESERVED + U16_LEN).contains(&i) {
                continue;
            }
            assert!(decode(Bytes::from(b)).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn truncations_are_refused() {
        let enc = encode(&[rec(1, b"hello"), rec(2, b"world")]).unwrap();
        for len in 0..enc.bytes.len() {
            assert!(
                decode(enc.bytes.slice(..len)).is_err(),
                "length {len} accepted"
            );
        }
    }

    #[test]
    fn lengths_from_the_bytes_are_bounded() {
        // A frame head claiming more than the records hold.
        let mut head = Vec::new();
        push_u32(&mut head, u32::MAX);
        push_u32(&mut head, 0);
        assert!(matches!(
            decode_frame_head(&head, 100),
            Err(Invalid::BadLength(_))
        ));
        // A footer claiming 2^32-1 index entries in a small object.
        let f = Footer {
            index_position: 24,
            index_count: u32::MAX,
            record_count: u32::MAX,
            base_offset: 0,
            last_offset: u64::MAX,
            max_timestamp_ms: 0,
            index_crc: 0,
        };
        let tail = encode_footer(&f);
        assert!(matches!(
            decode_footer(&tail, 200),
            Err(Invalid::BadIndex(_))
        ));
        // A header count the body cannot hold.
        let mut body = Vec::new();
        push_u64(&mut body, 1);
        push_u64(&mut body, 1);
        push_u32(&mut body, LEN_NULL as u32);
        push_u32(&mut body, LEN_NULL as u32);
        push_u16(&mut body, u16::MAX);
        let crc = crc32c::crc32c(&body);
        assert!(matches!(
            decode_body(Bytes::from(body), crc),
            Err(Invalid::BadLength(_))
        ));
    }
}
