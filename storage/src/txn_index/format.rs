//! Byte layout of an aborted-transaction index entry (issue 38; Kafka's
//! `.txnindex` idea): one entry per transaction aborted in a partition,
//! appended by the dispatcher when it meets the ABORT marker, so Fetch can
//! answer a read_committed consumer's `aborted_transactions` without
//! scanning the log.
//!
//! ```text
//! entry (ENTRY_LEN = 48 bytes)
//! offset  size  field
//!      0     4  crc                 u32, CRC32C of bytes 4..48
//!      4     2  version             u16, VERSION
//!      6     2  reserved            0
//!      8     8  producer_id         i64, ≥ 0
//!     16     8  first_offset        u64, the transaction's first record
//!     24     8  last_offset         u64, its ABORT marker; ≥ first_offset
//!     32     8  last_stable_offset  u64, the partition's LSO once it ended
//!     40     8  marker_position     u64, the ABORT marker's physical offset
//! ```
//!
//! Kafka's entry is the first five fields without the CRC (34 bytes); the
//! CRC makes a torn or zeroed entry refuse to decode instead of naming a
//! wrong range of records as aborted, which would hide committed ones.
//! The marker's CommitLog position is what recovery truncates by, as every
//! other index the dispatcher builds: an entry whose marker a crash took
//! from the log is dropped with it.

use crate::codec::{get_i64, get_u16, get_u32, get_u64, put_i64, put_u16, put_u32, put_u64};
use crate::codec::{U16_LEN, U32_LEN, U64_LEN};

const I64_LEN: usize = U64_LEN;

pub const VERSION: u16 = 1;

const OFF_CRC: usize = 0;
const OFF_VERSION: usize = OFF_CRC + U32_LEN;
const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
const OFF_PRODUCER_ID: usize = OFF_RESERVED + U16_LEN;
const OFF_FIRST: usize = OFF_PRODUCER_ID + I64_LEN;
const OFF_LAST: usize = OFF_FIRST + U64_LEN;
const OFF_LSO: usize = OFF_LAST + U64_LEN;
const OFF_POSITION: usize = OFF_LSO + U64_LEN;
pub const ENTRY_LEN: usize = OFF_POSITION + U64_LEN;

// The size docs/formats.md publishes.
const _: () = assert!(ENTRY_LEN == 48);

/// One aborted transaction of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: u64,
    pub last_offset: u64,
    pub last_stable_offset: u64,
    pub marker_position: u64,
}

/// Why an entry does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("{len} bytes, not an entry of {ENTRY_LEN}")]
    Short { len: usize },
    #[error("CRC {stored:#010x} does not match the bytes' {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("version {found} is not {VERSION}")]
    Version { found: u16 },
    #[error("negative producer id {producer_id}")]
    ProducerId { producer_id: i64 },
    #[error("last offset {last} below first offset {first}")]
    Range { first: u64, last: u64 },
}

pub fn encode(e: &AbortedTxn) -> [u8; ENTRY_LEN] {
    let mut b = [0u8; ENTRY_LEN];
    put_u16(&mut b, OFF_VERSION, VERSION);
    put_u16(&mut b, OFF_RESERVED, 0);
    put_i64(&mut b, OFF_PRODUCER_ID, e.producer_id);
    put_u64(&mut b, OFF_FIRST, e.first_offset);
    put_u64(&mut b, OFF_LAST, e.last_offset);
    put_u64(&mut b, OFF_LSO, e.last_stable_offset);
    put_u64(&mut b, OFF_POSITION, e.marker_position);
    let crc = crc32c::crc32c(&b[OFF_VERSION..]);
    put_u32(&mut b, OFF_CRC, crc);
    b
}

pub fn decode(b: &[u8]) -> Result<AbortedTxn, Invalid> {
    if b.len() != ENTRY_LEN {
        return Err(Invalid::Short { len: b.len() });
    }
    let stored = get_u32(b, OFF_CRC);
    let computed = crc32c::crc32c(&b[OFF_VERSION..]);
    if stored != computed {
        return Err(Invalid::Crc { stored, computed });
    }
    let found = get_u16(b, OFF_VERSION);
    if found != VERSION {
        return Err(Invalid::Version { found });
    }
    let e = AbortedTxn {
        producer_id: get_i64(b, OFF_PRODUCER_ID),
        first_offset: get_u64(b, OFF_FIRST),
        last_offset: get_u64(b, OFF_LAST),
        last_stable_offset: get_u64(b, OFF_LSO),
        marker_position: get_u64(b, OFF_POSITION),
    };
    if e.producer_id < 0 {
        return Err(Invalid::ProducerId {
            producer_id: e.producer_id,
        });
    }
    if e.last_offset < e.first_offset {
        return Err(Invalid::Range {
            first: e.first_offset,
            last: e.last_offset,
        });
    }
    Ok(e)
}

/// The entries of a file's bytes, in order, and how many bytes of it are
/// whole entries. A tail shorter than an entry is what a crash cut (the
/// caller drops it); a whole entry that does not decode is damage, refused
/// with its position.
pub fn decode_all(bytes: &[u8]) -> Result<(Vec<AbortedTxn>, usize), (usize, Invalid)> {
    let whole = bytes.len() - bytes.len() % ENTRY_LEN;
    let mut out = Vec::with_capacity(whole / ENTRY_LEN);
    for (k, chunk) in bytes[..whole].chunks_exact(ENTRY_LEN).enumerate() {
        out.push(decode(chunk).map_err(|e| (k * ENTRY_LEN, e))?);
    }
    Ok((out, whole))
}
