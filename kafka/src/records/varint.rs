//! Kafka's zig-zag varints (protobuf's), read from a bounded cursor.
//!
//! Invariant: a read never looks past the slice it was given; a varint
//! longer than its type allows (5 bytes for 32 bits, 10 for 64) is an
//! error, not a wrap-around.

use crate::error::RecordError;

/// A forward-only reader over one slice; every read checks what is left.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, at: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn position(&self) -> usize {
        self.at
    }

    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], RecordError> {
        if n > self.remaining() {
            return Err(RecordError::Truncated {
                what,
                needed: n,
                left: self.remaining(),
            });
        }
        let slice = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, RecordError> {
        Ok(self.take(1, what)?[0])
    }

    fn unsigned(&mut self, max_bytes: usize, what: &'static str) -> Result<u64, RecordError> {
        // Most varints of a batch (attributes' neighbours, deltas, short
        // lengths, header counts) are one byte.
        if let Some(&b) = self.bytes.get(self.at) {
            if b & 0x80 == 0 {
                self.at += 1;
                return Ok(u64::from(b));
            }
        }
        let mut value = 0u64;
        for i in 0..max_bytes {
            let b = self.u8(what)?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError::BadVarint { what })
    }

    /// A zig-zag varint of at most 32 bits.
    pub fn varint(&mut self, what: &'static str) -> Result<i32, RecordError> {
        let raw = self.unsigned(5, what)?;
        let raw = u32::try_from(raw).map_err(|_| RecordError::BadVarint { what })?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A zig-zag varint of at most 64 bits.
    pub fn varlong(&mut self, what: &'static str) -> Result<i64, RecordError> {
        let raw = self.unsigned(10, what)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }
}

pub fn put_varint(out: &mut Vec<u8>, value: i32) {
    put_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    put_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

/// The bytes [`put_varint`] writes for `value`.
pub fn varint_len(value: i32) -> usize {
    unsigned_len(u64::from(((value << 1) ^ (value >> 31)) as u32))
}

/// The bytes [`put_varlong`] writes for `value`.
pub fn varlong_len(value: i64) -> usize {
    unsigned_len(((value << 1) ^ (value >> 63)) as u64)
}

fn unsigned_len(value: u64) -> usize {
    // 7 bits a byte; 0 still takes one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A few varints and bytes gathered on the stack, to be appended to a
/// buffer in one copy (a record's fields before its key: a push per byte
/// checks the buffer's capacity each time).
pub struct Staged {
    buf: [u8; STAGED_MAX],
    len: usize,
}

/// What [`Staged`] holds: a record's length, attributes, timestamp delta,
/// offset delta and key length take at most 5 + 1 + 10 + 5 + 5 bytes.
const STAGED_MAX: usize = 32;

impl Staged {
    pub fn new() -> Staged {
        Staged {
            buf: [0; STAGED_MAX],
            len: 0,
        }
    }

    pub fn u8(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }

    pub fn varint(&mut self, value: i32) {
        self.unsigned(u64::from(((value << 1) ^ (value >> 31)) as u32));
    }

    pub fn varlong(&mut self, value: i64) {
        self.unsigned(((value << 1) ^ (value >> 63)) as u64);
    }

    fn unsigned(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.u8((value as u8) | 0x80);
            value >>= 7;
        }
        self.u8(value as u8);
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Default for Staged {
    fn default() -> Staged {
        Staged::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zig_zag_round_trips_and_known_bytes() {
        let mut out = Vec::new();
        put_varint(&mut out, -1);
        put_varint(&mut out, 1);
        put_varint(&mut out, 300);
        put_varlong(&mut out, i64::MIN);
        // -1 → 1, 1 → 2, 300 → 600 = 0xd8 0x04 (protobuf's examples)
        assert_eq!(&out[..4], &[0x01, 0x02, 0xd8, 0x04]);
        let mut c = Cursor::new(&out);
        assert_eq!(c.varint("a").unwrap(), -1);
        assert_eq!(c.varint("b").unwrap(), 1);
        assert_eq!(c.varint("c").unwrap(), 300);
        assert_eq!(c.varlong("d").unwrap(), i64::MIN);
        assert_eq!(c.remaining(), 0);
        let lens = varint_len(-1) + varint_len(1) + varint_len(300) + varlong_len(i64::MIN);
        assert_eq!(lens, out.len());
    }

    #[test]
    fn overlong_and_truncated_varints_are_errors() {
        let six = [0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(matches!(
            Cursor::new(&six).varint("x"),
            Err(RecordError::BadVarint { .. })
        ));
        assert!(matches!(
            Cursor::new(&[0x80]).varint("x"),
            Err(RecordError::Truncated { .. })
        ));
    }
}
