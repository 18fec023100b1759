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

/// The bytes [`SliceWriter::varint`] writes for `value`.
pub fn varint_len(value: i32) -> usize {
    unsigned_len(u64::from(((value << 1) ^ (value >> 31)) as u32))
}

/// The bytes [`SliceWriter::varlong`] writes for `value`.
pub fn varlong_len(value: i64) -> usize {
    unsigned_len(((value << 1) ^ (value >> 63)) as u64)
}

fn unsigned_len(value: u64) -> usize {
    // 7 bits a byte; 0 still takes one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// Writes into a slice sized beforehand to exactly what is written (the
/// `*_len` functions above): a record's fields go in as plain stores,
/// where pushing each byte to a `Vec` checks its capacity every time and
/// each small copy is a call.
pub struct SliceWriter<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl<'a> SliceWriter<'a> {
    pub fn new(buf: &'a mut [u8]) -> SliceWriter<'a> {
        SliceWriter { buf, at: 0 }
    }

    /// Bytes written so far.
    pub fn written(&self) -> usize {
        self.at
    }

    pub fn u8(&mut self, b: u8) {
        self.buf[self.at] = b;
        self.at += 1;
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

    pub fn bytes(&mut self, bytes: &[u8]) {
        self.buf[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zig_zag_round_trips_and_known_bytes() {
        let lens = varint_len(-1) + varint_len(1) + varint_len(300) + varlong_len(i64::MIN);
        let mut out = vec![0; lens];
        let mut w = SliceWriter::new(&mut out);
        w.varint(-1);
        w.varint(1);
        w.varint(300);
        w.varlong(i64::MIN);
        assert_eq!(w.written(), lens);
        // -1 → 1, 1 → 2, 300 → 600 = 0xd8 0x04 (protobuf's examples)
        assert_eq!(&out[..4], &[0x01, 0x02, 0xd8, 0x04]);
        let mut c = Cursor::new(&out);
        assert_eq!(c.varint("a").unwrap(), -1);
        assert_eq!(c.varint("b").unwrap(), 1);
        assert_eq!(c.varint("c").unwrap(), 300);
        assert_eq!(c.varlong("d").unwrap(), i64::MIN);
        assert_eq!(c.remaining(), 0);
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
