//! Byte and varint helpers, written once for every on-disk format (the
//! CommitLog entry, ConsumeQueue unit, IndexFile, checkpoint,
//! deleted-partitions table here; the compacted log record in the cleaner).
//!
//! Every format is little-endian with explicit widths, so there are no
//! big-endian helpers. Three kinds of access, by who has checked the length:
//! - `put_*` / `get_*` at a fixed offset: for buffers the caller sized (an
//!   encoder's own array) or whose length it has checked against the
//!   format's header length. Out of bounds is a bug there, so they index
//!   (and panic) like a slice would; they are `#[inline]` for the hot paths.
//! - `read_*` at an offset and [`Reader`] (a cursor): for bytes of unknown
//!   length from disk. Out of bounds is [`Truncated`], never a panic.
//! - Varints ([`get_varint`]): unsigned LEB128, at most [`VARINT_LEN_MAX`]
//!   bytes; a varint that runs past the buffer, is too long or overflows 64
//!   bits is a [`VarintError`]. `zigzag` folds a signed value onto one.

/// Bytes a `u16`, `u32`, `u64` field takes (for deriving format offsets:
/// `NEXT_OFFSET = PREV_OFFSET + U32_LEN`).
pub const U8_LEN: usize = 1;
pub const U16_LEN: usize = 2;
pub const U32_LEN: usize = 4;
pub const U64_LEN: usize = 8;

/// Longest varint of a `u64`: ten groups of seven bits.
pub const VARINT_LEN_MAX: usize = 10;

/// A read needed bytes past the end of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("truncated at byte {at}: {needed} bytes needed, {available} available")]
pub struct Truncated {
    /// Where the field starts.
    pub at: usize,
    /// Bytes the field needs.
    pub needed: usize,
    /// Bytes the buffer has from `at` on.
    pub available: usize,
}

/// Why bytes are not a varint (defined with the crate's other reasons in
/// `error.rs`: a CommitLog entry's [`Invalid`](crate::error::Invalid)
/// carries it).
pub use crate::error::VarintError;

impl From<Truncated> for crate::error::CorruptionKind {
    fn from(t: Truncated) -> Self {
        crate::error::CorruptionKind::Truncated { at: t.at }
    }
}

#[inline]
pub fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + U16_LEN].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + U32_LEN].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + U64_LEN].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub fn put_i64(buf: &mut [u8], at: usize, v: i64) {
    buf[at..at + U64_LEN].copy_from_slice(&v.to_le_bytes());
}

/// The `N` bytes at `at`; panics past the end (see the module doc).
#[inline]
fn array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut b = [0u8; N];
    b.copy_from_slice(&buf[at..at + N]);
    b
}

#[inline]
pub fn get_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(array(buf, at))
}

#[inline]
pub fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(array(buf, at))
}

#[inline]
pub fn get_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(array(buf, at))
}

#[inline]
pub fn get_i64(buf: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(array(buf, at))
}

/// The `n` bytes at `at`, or [`Truncated`].
#[inline]
pub fn read_bytes(buf: &[u8], at: usize, n: usize) -> Result<&[u8], Truncated> {
    at.checked_add(n)
        .and_then(|end| buf.get(at..end))
        .ok_or(Truncated {
            at,
            needed: n,
            available: buf.len().saturating_sub(at),
        })
}

#[inline]
pub fn read_u16(buf: &[u8], at: usize) -> Result<u16, Truncated> {
    read_bytes(buf, at, U16_LEN).map(|b| get_u16(b, 0))
}

#[inline]
pub fn read_u32(buf: &[u8], at: usize) -> Result<u32, Truncated> {
    read_bytes(buf, at, U32_LEN).map(|b| get_u32(b, 0))
}

#[inline]
pub fn read_u64(buf: &[u8], at: usize) -> Result<u64, Truncated> {
    read_bytes(buf, at, U64_LEN).map(|b| get_u64(b, 0))
}

/// Append a little-endian field to a growing buffer.
#[inline]
pub fn push_u16(buf: &mut Vec<u8>, v: u16) {
    buf.extend_from_slice(&v.to_le_bytes());
}

#[inline]
pub fn push_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_le_bytes());
}

#[inline]
pub fn push_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

/// Reads fields front to back, each checked against the end.
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, at: 0 }
    }

    /// Where the next field starts.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        let s = read_bytes(self.buf, self.at, n)?;
        self.at += n;
        Ok(s)
    }

    pub fn u16(&mut self) -> Result<u16, Truncated> {
        self.take(U16_LEN).map(|b| get_u16(b, 0))
    }

    pub fn u32(&mut self) -> Result<u32, Truncated> {
        self.take(U32_LEN).map(|b| get_u32(b, 0))
    }

    pub fn u64(&mut self) -> Result<u64, Truncated> {
        self.take(U64_LEN).map(|b| get_u64(b, 0))
    }
}

/// The body of a CRC-framed table file (magic u32, version u16, reserved
/// u16, ..., CRC32C u32 of every byte before it, as the deleted-partitions
/// table and the producer-state snapshot are): the CRC checked, then the
/// magic and version; the reader is left after the reserved field.
/// `header_len` is the fixed part the format needs before its entries.
pub fn crc_framed_table<'a>(
    b: &'a [u8],
    what: &'static str,
    header_len: usize,
    magic: u32,
    version: u16,
) -> Result<Reader<'a>, crate::error::CorruptionKind> {
    use crate::error::CorruptionKind;
    if b.len() < header_len + U32_LEN {
        return Err(CorruptionKind::NoHeader {
            what,
            len: b.len() as u64,
        });
    }
    let (body, crc) = b.split_at(b.len() - U32_LEN);
    let stored = get_u32(crc, 0);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(CorruptionKind::CrcMismatch { stored, computed });
    }
    let mut r = Reader::new(body);
    let found = r.u32()?;
    if found != magic {
        return Err(CorruptionKind::BadMagic { found });
    }
    let found = r.u16()?;
    if found != version {
        return Err(CorruptionKind::UnknownVersion { found });
    }
    r.u16()?;
    Ok(r)
}

/// Bytes `v` takes as a varint.
#[inline]
pub fn varint_len(v: u64) -> usize {
    // Seven bits a byte, zero still takes one: ceil(bits / 7) with bits =
    // log2 + 1, as (log2 * 9 + 73) / 64 (protobuf's `VarintSize64`): a
    // multiply and a shift instead of a division and its remainder, on a
    // path that sizes every record of every append.
    let log2 = 63 - (v | 1).leading_zeros() as usize;
    (log2 * 9 + 73) / 64
}

/// Append `v` as a varint.
#[inline]
pub fn push_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Read a varint at `*at`, advancing past it.
#[inline(always)]
pub fn get_varint(buf: &[u8], at: &mut usize) -> Result<u64, VarintError> {
    // Most are one byte (counts, small deltas and lengths) or two (a
    // record's distance into its entry, past its first 127 bytes).
    match buf.get(*at..*at + 2) {
        Some(&[b, _]) if b < 0x80 => {
            *at += 1;
            Ok(u64::from(b))
        }
        Some(&[b0, b1]) if b1 < 0x80 => {
            *at += 2;
            Ok(u64::from(b0 & 0x7f) | u64::from(b1) << 7)
        }
        _ => get_varint_long(buf, at),
    }
}

#[cold]
fn get_varint_long(buf: &[u8], at: &mut usize) -> Result<u64, VarintError> {
    let mut v = 0u64;
    for i in 0..VARINT_LEN_MAX {
        let Some(&b) = buf.get(*at + i) else {
            return Err(VarintError::RunsPast);
        };
        let bits = u64::from(b & 0x7f);
        if i == VARINT_LEN_MAX - 1 && b > 1 {
            return Err(VarintError::Overflow);
        }
        v |= bits << (7 * i);
        if b & 0x80 == 0 {
            *at += i + 1;
            return Ok(v);
        }
    }
    // Not reached: the tenth byte either overflows or ends the varint.
    Err(VarintError::Overflow)
}

/// Fold a signed value onto an unsigned one, small magnitudes small.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_width_fields_are_little_endian() {
        let mut b = [0u8; 16];
        put_u16(&mut b, 0, 0x0102);
        put_u32(&mut b, 2, 0x0304_0506);
        put_u64(&mut b, 6, 0x0708_090a_0b0c_0d0e);
        assert_eq!(
            b,
            [2, 1, 6, 5, 4, 3, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 9, 8, 7, 0, 0]
        );
        assert_eq!(get_u16(&b, 0), 0x0102);
        assert_eq!(get_u32(&b, 2), 0x0304_0506);
        assert_eq!(get_u64(&b, 6), 0x0708_090a_0b0c_0d0e);
        let mut v = Vec::new();
        push_u16(&mut v, 0x0102);
        push_u32(&mut v, 0x0304_0506);
        push_u64(&mut v, 0x0708_090a_0b0c_0d0e);
        assert_eq!(v, &b[..14]);
        put_i64(&mut b, 8, -2);
        assert_eq!(get_i64(&b, 8), -2);
        assert_eq!(&b[8..], &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    }

    #[test]
    fn checked_reads_refuse_what_is_not_there() {
        let b = [1u8, 0, 0, 0, 2];
        assert_eq!(read_u32(&b, 0), Ok(1));
        assert_eq!(
            read_u32(&b, 2),
            Err(Truncated {
                at: 2,
                needed: 4,
                available: 3
            })
        );
        assert_eq!(read_u16(&b, 9).map_err(|t| t.available), Err(0));
        assert!(read_u64(&b, 0).is_err());
        assert!(read_bytes(&b, usize::MAX, 2).is_err(), "no overflow");
        let mut r = Reader::new(&b);
        assert_eq!(r.u32(), Ok(1));
        assert_eq!(r.position(), 4);
        assert_eq!(r.u16().map_err(|t| t.at), Err(4));
        assert_eq!(r.position(), 4, "a failed read does not advance");
        assert_eq!(r.take(1), Ok(&[2u8][..]));
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn varints_round_trip_at_their_edges() {
        for v in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            push_varint(&mut buf, v);
            assert_eq!(buf.len(), varint_len(v), "{v}");
            let mut at = 0;
            assert_eq!(get_varint(&buf, &mut at), Ok(v));
            assert_eq!(at, buf.len());
        }
        let mut buf = Vec::new();
        push_varint(&mut buf, 300);
        assert_eq!(buf, [0xac, 0x02], "LEB128");
        // The length formula against the definition (seven bits a byte,
        // zero takes one) and the bytes written, at every bit width's edges.
        for bits in 0..64u32 {
            for v in [(1u64 << bits) - 1, 1u64 << bits, (1u64 << bits) + 1] {
                let want = (64 - v.leading_zeros() as usize).div_ceil(7).max(1);
                assert_eq!(varint_len(v), want, "{v}");
                let mut pushed = Vec::new();
                push_varint(&mut pushed, v);
                assert_eq!(pushed.len(), want, "{v}");
            }
        }
        assert_eq!(varint_len(u64::MAX), VARINT_LEN_MAX);
        for v in [0, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!([zigzag(0), zigzag(-1), zigzag(1), zigzag(-2)], [0, 1, 2, 3]);
        // Eleven bytes, a tenth byte with more than the last bit, or one
        // that stops in the middle: refused, each with its reason.
        let mut at = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut at), Err(VarintError::Overflow));
        let mut long = vec![0xffu8; 9];
        long.push(0x02);
        assert_eq!(get_varint(&long, &mut at), Err(VarintError::Overflow));
        assert_eq!(
            get_varint(&[0x80, 0x80], &mut at),
            Err(VarintError::RunsPast)
        );
        assert_eq!(at, 0, "a refused varint does not advance");
    }
}
