//! Byte layout of a CommitLog entry and of the end-of-segment marker.
//!
//! An entry holds one or more records of one partition with consecutive
//! queue offsets: the records of one produce request to that partition, as
//! Kafka's record batch holds them. What is the same for all of them (topic,
//! partition, store time, physical position) is written once in the entry
//! header; each record carries only what is its own, with variable-length
//! integers. One CRC covers the whole entry, so a produce request to a
//! partition reaches the log whole or not at all.
//!
//! Fixed-width integers are little-endian; `varint` is unsigned LEB128
//! (at most 10 bytes), `zigzag` a signed value folded onto it.
//!
//! ```text
//! entry
//! offset  size  field
//!      0     4  total_len          u32, whole entry including this field
//!      4     4  crc                u32, CRC32C of bytes [8, total_len)
//!      8     2  magic              u16, RECORD_MAGIC
//!     10     1  version            u8,  VERSION (3; 2 is still read)
//!     11     1  flags              u8,  ENTRY_HAS_PRODUCER | ENTRY_PRODUCER_CONTINUES
//!     12     8  physical_offset    u64, where this entry starts in the log
//!     20     8  base_queue_offset  u64, queue offset of its first record
//!     28     8  store_timestamp    i64, ms since epoch, set by the store
//!     36     4  partition          u32
//!     40     4  record_count       u32, at least 1
//!     44     2  topic_len          u16
//!     46        topic | producer block (only with ENTRY_HAS_PRODUCER)
//!               | record_count records
//!
//! producer block (version 3, ENTRY_HAS_PRODUCER), right after the topic
//!      0     8  producer_id        i64, >= 0
//!      8     2  producer_epoch     i16, >= 0
//!     10     4  base_sequence      i32, >= 0: the sequence of the entry's
//!                                  first record; the record count gives the
//!                                  last (wrapping past i32::MAX to 0, as
//!                                  Kafka's sequences do)
//!
//! record (at `distance` bytes from the entry's first byte)
//!   varint  distance           its own position in the entry
//!   u8      flags              FLAG_HAS_KEY | FLAG_HAS_VALUE
//!   varint  offset_delta       queue offset - base_queue_offset
//!   zigzag  timestamp_delta    producer timestamp - store timestamp
//!   varint  key_len            only with FLAG_HAS_KEY
//!   varint  value_len          only with FLAG_HAS_VALUE
//!   varint  header_count
//!   varint  headers_len        only when header_count > 0
//!           key | value | header block
//! header block: header_count times
//!          2  name_len u16 | 4 value_len u32 | name (UTF-8) | value
//!          value_len = u32::MAX (HEADER_VALUE_NULL, version 3 only): a
//!          null value (Kafka's length -1), no bytes follow
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
//! A record's physical offset is the position of its own first byte, so
//! every record has an address of its own (ConsumeQueue units, IndexFile
//! entries and `GET /commitlog/{physical_offset}` use it); its `distance`
//! leads back to the entry header, which must hold its own position in
//! turn. A record with no value (FLAG_HAS_VALUE clear) is a tombstone.
//!
//! Each entry carries its own physical offset: recovery and reads by
//! physical offset check it, so stale bytes of an older entry at another
//! position, or a client-supplied offset into the middle of a record, are
//! never taken for a record. The CRC covers everything after itself, so a
//! torn write fails it.
//!
//! An entry with ENTRY_HAS_PRODUCER holds (part of) one batch of an
//! idempotent producer: the producer state (`crate::producer_state`) is
//! rebuilt from these at recovery. A batch too large for one entry
//! continues in the next entries of its append, each with
//! ENTRY_PRODUCER_CONTINUES set and the sequence of its own first record,
//! so recovery joins them back into one batch.
//!
//! Version 4 (only for a transaction's entries: ENTRY_TRANSACTIONAL, and
//! ENTRY_CONTROL for a marker) is version 3 with two more flags and, after
//! a marker's producer block (whose sequence is -1, Kafka's NO_SEQUENCE),
//! the marker block:
//!      0     8  txn_first_offset   u64, the first offset of the
//!                                  transaction it ends here; u64::MAX:
//!                                  none was open here
//!      8     8  last_stable_offset u64, the partition's LSO once written
//! A marker's one record is Kafka's control record: key version 0 and
//! type (ABORT 0, COMMIT 1), value version 0 and the coordinator epoch,
//! big-endian as Kafka writes them.
//!
//! Versions: 3 is written (the producer block, the entry flags and null
//! header values); 2, the same layout with `flags` = 0, no producer block
//! and no null header value (its sentinel is refused as corrupt: version 2
//! never wrote it), is still read, so
//! data dirs written before keep opening. Version 1 (a 64-byte header per
//! record) and any version above 3 are refused, not read (see `recovery`).
//! An older build (reading version 2 only) refuses a version-3 entry the
//! same way: its recovery scan stops with `LogFormatVersion` and never
//! truncates it; so no downgrade past a version-3 write.

use std::ops::Range;

use bytes::Bytes;

use crate::codec::{
    self, get_u16, get_u32, get_u64, push_varint, put_u16, put_u32, put_u64, unzigzag, varint_len,
    zigzag, U16_LEN, U32_LEN, U64_LEN, U8_LEN, VARINT_LEN_MAX,
};

/// Magic of an entry ("TIDE" squeezed into 16 bits).
pub const RECORD_MAGIC: u16 = 0x7D1E;
/// Magic of the end-of-segment marker.
pub const END_MAGIC: u16 = 0xE0F5;
/// The version written for every entry outside a transaction.
pub const VERSION: u8 = 3;
/// The version written for the entries of transactions (their records and
/// their markers): version 3 with two more entry flags and the marker
/// block. Only these are version 4, so a data dir that never saw a
/// transaction stays readable by a build that reads up to 3.
pub const VERSION_TXN: u8 = 4;
/// The previous version, still read: no entry flags, no producer block.
pub const VERSION_2: u8 = 2;
// The versions a refusal of another version names (`error.rs`, which
// imports nothing of the crate, spells them out).
const _: () = assert!(
    crate::error::READ_LOG_VERSIONS[0] == VERSION_2
        && crate::error::READ_LOG_VERSIONS[1] == VERSION
        && crate::error::READ_LOG_VERSIONS[2] == VERSION_TXN
);

/// Entry flag: a producer block follows the topic name.
pub const ENTRY_HAS_PRODUCER: u8 = 0b01;
/// Entry flag: this entry continues the producer batch of the entry before
/// it in the same append (a batch larger than one entry).
pub const ENTRY_PRODUCER_CONTINUES: u8 = 0b10;
/// Entry flag (version 4): the producer's records belong to its open
/// transaction, invisible to read_committed readers until its marker.
pub const ENTRY_TRANSACTIONAL: u8 = 0b100;
/// Entry flag (version 4, with [`ENTRY_TRANSACTIONAL`]): the entry is a
/// transaction marker, one control record (Kafka's COMMIT or ABORT) at an
/// offset of its own, followed by the marker block. Never served as a
/// record: the Kafka front-end answers it as a control batch.
pub const ENTRY_CONTROL: u8 = 0b1000;
const ENTRY_FLAGS_V3: u8 = ENTRY_HAS_PRODUCER | ENTRY_PRODUCER_CONTINUES;
const ENTRY_FLAGS_V4: u8 = ENTRY_FLAGS_V3 | ENTRY_TRANSACTIONAL | ENTRY_CONTROL;

pub const FLAG_HAS_KEY: u8 = 0b01;
pub const FLAG_HAS_VALUE: u8 = 0b10;
const FLAGS_KNOWN: u8 = FLAG_HAS_KEY | FLAG_HAS_VALUE;

// Entry header fields, each at the end of the one before it (redb's
// `header.rs` style): moving or resizing one moves every later one.
const OFF_TOTAL_LEN: usize = 0;
const OFF_CRC: usize = OFF_TOTAL_LEN + U32_LEN;
const OFF_MAGIC: usize = OFF_CRC + U32_LEN;
const OFF_VERSION: usize = OFF_MAGIC + U16_LEN;
const OFF_FLAGS: usize = OFF_VERSION + U8_LEN;
const OFF_PHYSICAL: usize = OFF_FLAGS + U8_LEN;
const OFF_BASE_QUEUE: usize = OFF_PHYSICAL + U64_LEN;
const OFF_STORE_TS: usize = OFF_BASE_QUEUE + U64_LEN;
const OFF_PARTITION: usize = OFF_STORE_TS + U64_LEN;
const OFF_RECORD_COUNT: usize = OFF_PARTITION + U32_LEN;
const OFF_TOPIC_LEN: usize = OFF_RECORD_COUNT + U32_LEN;
/// Fixed part of an entry header; the topic name follows it.
pub const ENTRY_HEADER_LEN: usize = OFF_TOPIC_LEN + U16_LEN;
/// The end marker shares the entry header's first fields, to the physical
/// offset.
pub const END_MARKER_LEN: usize = OFF_PHYSICAL + U64_LEN;
/// The CRC covers the entry from here to its end.
pub const CRC_START: usize = OFF_CRC + U32_LEN;

// Producer block fields, relative to the block's first byte (right after
// the topic name).
const OFF_PRODUCER_ID: usize = 0;
const OFF_PRODUCER_EPOCH: usize = OFF_PRODUCER_ID + U64_LEN;
const OFF_BASE_SEQUENCE: usize = OFF_PRODUCER_EPOCH + U16_LEN;
/// Bytes of the producer block.
pub const PRODUCER_BLOCK_LEN: usize = OFF_BASE_SEQUENCE + U32_LEN;

// Marker block fields (version 4, ENTRY_CONTROL), right after the
// producer block.
const OFF_TXN_FIRST: usize = 0;
const OFF_MARKER_LSO: usize = OFF_TXN_FIRST + U64_LEN;
/// Bytes of the marker block.
pub const MARKER_BLOCK_LEN: usize = OFF_MARKER_LSO + U64_LEN;
/// `txn_first_offset` of a marker whose producer had no transaction open
/// in the partition (Kafka writes markers to every partition a
/// transaction added, written to or not).
pub const TXN_FIRST_NONE: u64 = u64::MAX;
/// A marker's producer block has no sequence (Kafka's `NO_SEQUENCE`).
pub const MARKER_SEQUENCE: i32 = -1;

/// Kafka's control record key (`ControlRecordType`): version 0, then the
/// type, big-endian int16s.
pub const CONTROL_KEY_LEN: usize = 4;
/// Kafka's transaction marker value (`EndTransactionMarker`): version 0
/// int16, then the coordinator epoch int32, big-endian.
pub const CONTROL_VALUE_LEN: usize = 6;
/// Kafka's ABORT and COMMIT control record types.
pub const CONTROL_TYPE_ABORT: i16 = 0;
pub const CONTROL_TYPE_COMMIT: i16 = 1;

/// A header block entry without its name and value: `name_len` u16,
/// `value_len` u32.
const HEADER_ENTRY_FIXED: usize = U16_LEN + U32_LEN;
/// The smallest record: distance, flags, offset delta, timestamp delta and
/// header count, one byte each.
const RECORD_LEN_MIN: usize = 5;
const VARINT_MAX: usize = VARINT_LEN_MAX;

// The sizes docs/formats.md publishes.
const _: () = assert!(ENTRY_HEADER_LEN == 46);
const _: () = assert!(END_MARKER_LEN == 20);
const _: () = assert!(CRC_START == OFF_MAGIC);
const _: () = assert!(PRODUCER_BLOCK_LEN == 14);
const _: () = assert!(MARKER_BLOCK_LEN == 16);

/// Longest topic name an entry may carry (Kafka's limit).
pub const TOPIC_LEN_MAX: usize = crate::types::TOPIC_NAME_MAX;
/// Most headers on one record.
pub const HEADER_COUNT_MAX: usize = u16::MAX as usize;
/// Longest header name.
pub const HEADER_NAME_MAX: usize = u16::MAX as usize;
/// Hard ceiling on one entry (and so on one record), whatever
/// `max_message_bytes` says; lengths read from disk are checked against it
/// before anything is sliced.
pub const RECORD_LEN_MAX: usize = 256 << 20;

/// A header block's `value_len` for a null value (version 3): no value
/// bytes follow. Never a real length: an entry is at most
/// [`RECORD_LEN_MAX`].
pub const HEADER_VALUE_NULL: u32 = u32::MAX;

/// One record header, as clients send them: a name and opaque bytes, or no
/// value at all (a Kafka header whose value is null stays null).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: Option<Bytes>,
}

impl Header {
    /// Bytes of the value (0 for a null one).
    pub fn value_len(&self) -> usize {
        self.value.as_ref().map_or(0, Bytes::len)
    }
}

/// What every record of an entry shares.
#[derive(Clone, Copy, Debug)]
pub struct EntryFields<'a> {
    pub base_queue_offset: u64,
    pub store_timestamp_ms: i64,
    pub topic: &'a str,
    pub partition: u32,
    /// The idempotent producer whose batch this entry holds (part of).
    pub producer: Option<EntryProducer>,
    /// With `producer`: the entry is this transaction marker (its control
    /// record is the entry's one record, made by [`control_key`] and
    /// [`control_value`] from the same fields).
    pub marker: Option<EntryMarker>,
}

/// An entry's producer block: whose batch the entry holds, and the
/// sequence of its first record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryProducer {
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
    /// The entry continues the producer batch of the entry before it in the
    /// same append (ENTRY_PRODUCER_CONTINUES).
    pub continues: bool,
    /// The records belong to the producer's open transaction
    /// (ENTRY_TRANSACTIONAL; a marker has it too).
    pub transactional: bool,
}

/// A transaction marker: what its control record says, and the marker
/// block, which names what the marker ends in its partition so that
/// whatever reads the entry alone (the aborted-transaction index, built
/// by the dispatcher; recovery) needs no other state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryMarker {
    /// COMMIT, else ABORT.
    pub commit: bool,
    /// The transaction coordinator's epoch that wrote it.
    pub coordinator_epoch: i32,
    /// The first offset of the producer's transaction in this partition,
    /// `None` when it had none open here.
    pub txn_first_offset: Option<u64>,
    /// The partition's last stable offset once the marker is written.
    pub last_stable_offset: u64,
}

/// The key of a transaction marker's control record, as Kafka writes it.
pub fn control_key(commit: bool) -> [u8; CONTROL_KEY_LEN] {
    let kind = if commit {
        CONTROL_TYPE_COMMIT
    } else {
        CONTROL_TYPE_ABORT
    };
    let mut k = [0u8; CONTROL_KEY_LEN];
    k[2..].copy_from_slice(&kind.to_be_bytes());
    k
}

/// The value of a transaction marker's control record, as Kafka writes it.
pub fn control_value(coordinator_epoch: i32) -> [u8; CONTROL_VALUE_LEN] {
    let mut v = [0u8; CONTROL_VALUE_LEN];
    v[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
    v
}

/// What one record of an entry has of its own.
#[derive(Clone, Copy, Debug)]
pub struct RecordFields<'a> {
    pub producer_timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [Header],
}

/// Bytes of the header block for `headers`.
pub fn headers_block_len(headers: &[Header]) -> usize {
    headers
        .iter()
        .map(|h| HEADER_ENTRY_FIXED + h.name.len() + h.value_len())
        .sum()
}

/// Bytes an entry header takes with a topic name of `topic_len` bytes
/// (without a producer block: see [`entry_header_len_with`]).
pub fn entry_header_len(topic_len: usize) -> usize {
    ENTRY_HEADER_LEN + topic_len
}

/// Bytes an entry header takes with a topic name of `topic_len` bytes and,
/// with `producer`, the producer block.
pub fn entry_header_len_with(topic_len: usize, producer: bool) -> usize {
    entry_header_len(topic_len) + if producer { PRODUCER_BLOCK_LEN } else { 0 }
}

/// Bytes a marker entry's header takes (producer and marker blocks).
pub fn marker_header_len(topic_len: usize) -> usize {
    entry_header_len_with(topic_len, true) + MARKER_BLOCK_LEN
}

/// Bytes a record takes at `distance` from its entry's start, as the
/// `offset_delta`-th record of an entry stored at `store_ts`.
pub fn record_len(
    distance: usize,
    offset_delta: u64,
    store_ts: i64,
    r: &RecordFields<'_>,
) -> usize {
    let headers_len = headers_block_len(r.headers);
    varint_len(distance as u64)
        + 1
        + varint_len(offset_delta)
        + varint_len(zigzag(r.producer_timestamp_ms.wrapping_sub(store_ts)))
        + r.key.map_or(0, |k| varint_len(k.len() as u64) + k.len())
        + r.value.map_or(0, |v| varint_len(v.len() as u64) + v.len())
        + varint_len(r.headers.len() as u64)
        + if r.headers.is_empty() {
            0
        } else {
            varint_len(headers_len as u64) + headers_len
        }
}

/// The most bytes a record with these parts can take, wherever it lands:
/// for checking limits before positions are known.
pub fn record_len_bound(
    key_len: Option<usize>,
    value_len: Option<usize>,
    headers: &[Header],
) -> usize {
    let headers_len = headers_block_len(headers);
    3 * VARINT_MAX
        + 1
        + key_len.map_or(0, |k| VARINT_MAX + k)
        + value_len.map_or(0, |v| VARINT_MAX + v)
        + 2 * VARINT_MAX
        + headers_len
}

/// The most framing one record adds to its key + value + header block:
/// [`record_len_bound`] with a key, a value and headers.
pub const RECORD_FRAMING_MAX: usize = 3 * VARINT_MAX + 1 + 2 * VARINT_MAX + 2 * VARINT_MAX;

/// The largest key + value + header block of a record that fits, as an
/// entry of its own, in an empty segment of `segment_bytes` with room for
/// the end marker, under any topic name and with a producer block: the
/// record limit a segment size allows, the same for every producer. Also
/// bounded by [`RECORD_LEN_MAX`].
pub fn payload_max_in_segment(segment_bytes: u64) -> u64 {
    let framing =
        (entry_header_len_with(TOPIC_LEN_MAX, true) + RECORD_FRAMING_MAX + END_MARKER_LEN) as u64;
    let fits = segment_bytes.min(RECORD_LEN_MAX as u64 + END_MARKER_LEN as u64);
    fits.saturating_sub(framing)
}

/// Read a varint at `*at`, advancing past it.
#[inline(always)]
fn get_varint(buf: &[u8], at: &mut usize) -> Result<u64, Invalid> {
    codec::get_varint(buf, at).map_err(Invalid::BadVarint)
}

/// A varint that is a length or count: at most `max`.
#[inline(always)]
fn get_len(buf: &[u8], at: &mut usize, max: usize, what: &str) -> Result<usize, Invalid> {
    let v = get_varint(buf, at)?;
    if v > max as u64 {
        return Err(Invalid::BadLength(format!("{what} {v} exceeds {max}")));
    }
    Ok(v as usize)
}

/// Builds entries in a byte buffer: [`EntryBuilder::begin`], then
/// [`EntryBuilder::push`] per record, then [`EntryBuilder::finish`] once the
/// entry's position in the log is known.
pub struct EntryBuilder {
    start: usize,
    store_ts: i64,
    count: u32,
}

impl EntryBuilder {
    /// Start an entry at the end of `buf`.
    pub fn begin(buf: &mut Vec<u8>, e: &EntryFields<'_>) -> EntryBuilder {
        debug_assert!(e.topic.len() <= TOPIC_LEN_MAX);
        let start = buf.len();
        buf.resize(start + ENTRY_HEADER_LEN, 0);
        let h = &mut buf[start..];
        put_u16(h, OFF_MAGIC, RECORD_MAGIC);
        let flags = match e.producer {
            None => 0,
            Some(p) => {
                let mut f = ENTRY_HAS_PRODUCER;
                if p.continues {
                    f |= ENTRY_PRODUCER_CONTINUES;
                }
                if p.transactional {
                    f |= ENTRY_TRANSACTIONAL;
                }
                if e.marker.is_some() {
                    f |= ENTRY_CONTROL;
                }
                f
            }
        };
        debug_assert!(e.marker.is_none() || e.producer.is_some_and(|p| p.transactional));
        h[OFF_VERSION] = if flags & ENTRY_TRANSACTIONAL != 0 {
            VERSION_TXN
        } else {
            VERSION
        };
        h[OFF_FLAGS] = flags;
        put_u64(h, OFF_BASE_QUEUE, e.base_queue_offset);
        codec::put_i64(h, OFF_STORE_TS, e.store_timestamp_ms);
        put_u32(h, OFF_PARTITION, e.partition);
        put_u16(h, OFF_TOPIC_LEN, e.topic.len() as u16);
        buf.extend_from_slice(e.topic.as_bytes());
        if let Some(p) = e.producer {
            debug_assert!(
                p.producer_id >= 0
                    && p.epoch >= 0
                    && (p.base_sequence >= 0
                        || (e.marker.is_some() && p.base_sequence == MARKER_SEQUENCE))
            );
            let at = buf.len();
            buf.resize(at + PRODUCER_BLOCK_LEN, 0);
            let b = &mut buf[at..];
            put_u64(b, OFF_PRODUCER_ID, p.producer_id as u64);
            put_u16(b, OFF_PRODUCER_EPOCH, p.epoch as u16);
            put_u32(b, OFF_BASE_SEQUENCE, p.base_sequence as u32);
        }
        if let Some(m) = e.marker {
            let at = buf.len();
            buf.resize(at + MARKER_BLOCK_LEN, 0);
            let b = &mut buf[at..];
            put_u64(
                b,
                OFF_TXN_FIRST,
                m.txn_first_offset.unwrap_or(TXN_FIRST_NONE),
            );
            put_u64(b, OFF_MARKER_LSO, m.last_stable_offset);
        }
        EntryBuilder {
            start,
            store_ts: e.store_timestamp_ms,
            count: 0,
        }
    }

    /// Append the next record; returns where it starts in the entry and
    /// its length. The caller has validated every length (see
    /// `CommitLog::append_as`).
    pub fn push(&mut self, buf: &mut Vec<u8>, r: &RecordFields<'_>) -> (usize, usize) {
        let distance = buf.len() - self.start;
        let mut flags = 0;
        if r.key.is_some() {
            flags |= FLAG_HAS_KEY;
        }
        if r.value.is_some() {
            flags |= FLAG_HAS_VALUE;
        }
        push_varint(buf, distance as u64);
        buf.push(flags);
        push_varint(buf, u64::from(self.count));
        push_varint(
            buf,
            zigzag(r.producer_timestamp_ms.wrapping_sub(self.store_ts)),
        );
        if let Some(k) = r.key {
            push_varint(buf, k.len() as u64);
        }
        if let Some(v) = r.value {
            push_varint(buf, v.len() as u64);
        }
        push_varint(buf, r.headers.len() as u64);
        if !r.headers.is_empty() {
            push_varint(buf, headers_block_len(r.headers) as u64);
        }
        buf.extend_from_slice(r.key.unwrap_or_default());
        buf.extend_from_slice(r.value.unwrap_or_default());
        for h in r.headers {
            codec::push_u16(buf, h.name.len() as u16);
            codec::push_u32(
                buf,
                h.value
                    .as_ref()
                    .map_or(HEADER_VALUE_NULL, |v| v.len() as u32),
            );
            buf.extend_from_slice(h.name.as_bytes());
            buf.extend_from_slice(h.value.as_deref().unwrap_or_default());
        }
        self.count += 1;
        let len = buf.len() - self.start - distance;
        debug_assert_eq!(
            len,
            record_len(distance, u64::from(self.count - 1), self.store_ts, r)
        );
        (distance, len)
    }

    /// Close the entry (at least one record) as starting at
    /// `physical_offset`: lengths, position and CRC.
    pub fn finish(self, buf: &mut [u8], physical_offset: u64) {
        debug_assert!(self.count > 0);
        let e = &mut buf[self.start..];
        put_u32(e, OFF_TOTAL_LEN, e.len() as u32);
        put_u64(e, OFF_PHYSICAL, physical_offset);
        put_u32(e, OFF_RECORD_COUNT, self.count);
        let crc = crc32c::crc32c(&e[CRC_START..]);
        put_u32(e, OFF_CRC, crc);
    }
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

/// Why bytes are not a valid entry or record (defined with the crate's
/// other reasons in `error.rs`, which a `StoreError` carries).
pub use crate::error::Invalid;

/// The end-of-segment marker whose 20 bytes start `buf`, at
/// `expected_offset`: the bytes it says are left in its segment (itself
/// included). `Ok(None)` if `buf` does not start with an end marker's
/// magic. Unlike [`decode`], the zeros the marker stands for need not
/// follow it: a replication stream sends the marker alone.
pub fn decode_end_marker(buf: &[u8], expected_offset: u64) -> Result<Option<u64>, Invalid> {
    if buf.len() < END_MARKER_LEN || get_u16(buf, OFF_MAGIC) != END_MAGIC {
        return Ok(None);
    }
    // The versions `decode` reads: a log an older tidelog wrote holds
    // its markers.
    let version = buf[OFF_VERSION];
    if !matches!(version, VERSION_2 | VERSION | VERSION_TXN) {
        return Err(Invalid::BadVersion(version));
    }
    let stored_offset = get_u64(buf, OFF_PHYSICAL);
    if stored_offset != expected_offset {
        return Err(Invalid::OffsetMismatch {
            stored: stored_offset,
            expected: expected_offset,
        });
    }
    let computed = crc32c::crc32c(&buf[CRC_START..END_MARKER_LEN]);
    let stored = get_u32(buf, OFF_CRC);
    if computed != stored {
        return Err(Invalid::CrcMismatch { stored, computed });
    }
    let remaining = u64::from(get_u32(buf, OFF_TOTAL_LEN));
    if remaining < END_MARKER_LEN as u64 {
        return Err(Invalid::BadLength(format!(
            "end marker claims {remaining} bytes, less than itself"
        )));
    }
    Ok(Some(remaining))
}

/// What starts at a position of a segment.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Zero length: nothing was ever written here.
    Empty,
    /// End-of-segment marker; the next entry is in the next segment.
    EndOfSegment {
        len: usize,
    },
    Entry(EntryView),
}

/// The header of a decoded entry; ranges are relative to its first byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryView {
    pub total_len: usize,
    pub physical_offset: u64,
    pub base_queue_offset: u64,
    pub store_timestamp_ms: i64,
    pub partition: u32,
    pub record_count: u32,
    pub topic: Range<usize>,
    /// Version 3's producer block, when the entry has one.
    pub producer: Option<EntryProducer>,
    /// Version 4's marker: the entry is a transaction marker.
    pub marker: Option<EntryMarker>,
    /// The entry's format version (3; 4 for a transaction's; 2 read from
    /// an older data dir).
    pub version: u8,
}

impl EntryView {
    /// Where the entry's first record starts.
    pub fn first_record(&self) -> usize {
        self.topic.end
            + if self.producer.is_some() {
                PRODUCER_BLOCK_LEN
            } else {
                0
            }
            + if self.marker.is_some() {
                MARKER_BLOCK_LEN
            } else {
                0
            }
    }

    /// Whether the entry is a transaction marker (never served as a
    /// record).
    pub fn is_control(&self) -> bool {
        self.marker.is_some()
    }
}

/// A decoded record: its own fields, and where its parts are relative to
/// its entry's first byte. Positions are `u32` (an entry is at most
/// `RECORD_LEN_MAX`): a fetch holds hundreds of these and moves them by
/// value, so the view is kept to 72 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordView {
    pub physical_offset: u64,
    pub queue_offset: u64,
    pub store_timestamp_ms: i64,
    pub producer_timestamp_ms: i64,
    pub partition: u32,
    /// Where the record starts in its entry.
    pub at: u32,
    /// The record's length.
    pub len: u32,
    /// Where its key (or, without one, its value) starts.
    body: u32,
    key_len: u32,
    value_len: u32,
    headers_len: u32,
    topic_len: u16,
    pub header_count: u16,
    pub flags: u8,
}

impl RecordView {
    pub fn topic(&self) -> Range<usize> {
        ENTRY_HEADER_LEN..ENTRY_HEADER_LEN + usize::from(self.topic_len)
    }

    pub fn key(&self) -> Option<Range<usize>> {
        let start = self.body as usize;
        (self.flags & FLAG_HAS_KEY != 0).then(|| start..start + self.key_len as usize)
    }

    /// `None` for a tombstone.
    pub fn value(&self) -> Option<Range<usize>> {
        let start = self.body as usize + self.key_len as usize;
        (self.flags & FLAG_HAS_VALUE != 0).then(|| start..start + self.value_len as usize)
    }

    /// The header block (`header_count` entries).
    pub fn headers(&self) -> Range<usize> {
        let start = self.body as usize + self.key_len as usize + self.value_len as usize;
        start..start + self.headers_len as usize
    }
}

const _: () = assert!(std::mem::size_of::<RecordView>() == 72);

/// Decode what starts at `buf[0]`, where `buf` runs to the end of the
/// readable region (the segment end, or the committed position) and
/// `expected_offset` is the physical offset of `buf[0]`.
///
/// With `verify` the entry's CRC and topic name are checked and every
/// record in it is walked, for bytes of unknown origin (recovery, offsets
/// from clients). Without it (bytes this process wrote, or recovery already
/// checked) only the header is decoded; every length is still checked
/// against `buf`, and [`decode_record`] checks each record's, so a bad
/// length can never slice out of bounds.
pub fn decode(buf: &[u8], expected_offset: u64, verify: bool) -> Result<Decoded, Invalid> {
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
    if !matches!(version, VERSION_2 | VERSION | VERSION_TXN) {
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
    if !(ENTRY_HEADER_LEN + RECORD_LEN_MIN..=RECORD_LEN_MAX).contains(&total_len) {
        return Err(Invalid::BadLength(format!(
            "total length {total_len} outside [{}, {RECORD_LEN_MAX}]",
            ENTRY_HEADER_LEN + RECORD_LEN_MIN
        )));
    }
    if total_len > buf.len() {
        return Err(Invalid::Truncated {
            needed: total_len,
            available: buf.len(),
        });
    }
    let entry = &buf[..total_len];
    let flags = entry[OFF_FLAGS];
    let has = |f: u8| flags & f != 0;
    // Version 2 had no entry flags; version 3 knows two, version 4 four
    // and is only ever a transaction's. A continuation is always of a
    // producer batch, a transaction's records always a producer's, and a
    // marker always a transaction's, whole in one entry.
    let known = match version {
        VERSION_2 => 0,
        VERSION => ENTRY_FLAGS_V3,
        _ => ENTRY_FLAGS_V4,
    };
    if flags & !known != 0
        || (has(ENTRY_PRODUCER_CONTINUES) && !has(ENTRY_HAS_PRODUCER))
        || (has(ENTRY_TRANSACTIONAL) && !has(ENTRY_HAS_PRODUCER))
        || (has(ENTRY_CONTROL) && (!has(ENTRY_TRANSACTIONAL) || has(ENTRY_PRODUCER_CONTINUES)))
        || (version == VERSION_TXN && !has(ENTRY_TRANSACTIONAL))
    {
        return Err(Invalid::BadFlags(flags));
    }
    let has_producer = has(ENTRY_HAS_PRODUCER);
    let is_control = has(ENTRY_CONTROL);
    let topic_len = get_u16(entry, OFF_TOPIC_LEN) as usize;
    let record_count = get_u32(entry, OFF_RECORD_COUNT);
    let topic = ENTRY_HEADER_LEN..ENTRY_HEADER_LEN + topic_len;
    let producer_end = entry_header_len_with(topic_len, has_producer);
    let records_at = producer_end + if is_control { MARKER_BLOCK_LEN } else { 0 };
    let room = total_len.saturating_sub(records_at);
    if topic_len > TOPIC_LEN_MAX
        || record_count == 0
        || records_at > total_len
        || room < record_count as usize * RECORD_LEN_MIN
    {
        return Err(Invalid::BadLength(format!(
            "{record_count} records and a {topic_len}-byte topic do not fit {total_len} bytes"
        )));
    }
    if is_control && record_count != 1 {
        return Err(Invalid::BadLength(format!(
            "a transaction marker holds one record, not {record_count}"
        )));
    }
    let producer = if has_producer {
        let b = &entry[topic.end..producer_end];
        let p = EntryProducer {
            producer_id: get_u64(b, OFF_PRODUCER_ID) as i64,
            epoch: get_u16(b, OFF_PRODUCER_EPOCH) as i16,
            base_sequence: get_u32(b, OFF_BASE_SEQUENCE) as i32,
            continues: has(ENTRY_PRODUCER_CONTINUES),
            transactional: has(ENTRY_TRANSACTIONAL),
        };
        let sequence_ok = if is_control {
            p.base_sequence == MARKER_SEQUENCE
        } else {
            p.base_sequence >= 0
        };
        if p.producer_id < 0 || p.epoch < 0 || !sequence_ok {
            return Err(Invalid::BadProducer {
                producer_id: p.producer_id,
                epoch: p.epoch,
                base_sequence: p.base_sequence,
            });
        }
        Some(p)
    } else {
        None
    };
    let mut view = EntryView {
        total_len,
        physical_offset: stored_offset,
        base_queue_offset: get_u64(entry, OFF_BASE_QUEUE),
        store_timestamp_ms: codec::get_i64(entry, OFF_STORE_TS),
        partition: get_u32(entry, OFF_PARTITION),
        record_count,
        topic,
        producer,
        marker: None,
        version,
    };
    if view
        .base_queue_offset
        .checked_add(u64::from(record_count))
        .is_none()
    {
        return Err(Invalid::BadLength("queue offsets overflow".into()));
    }
    if is_control {
        view.marker = Some(decode_marker(entry, &view, producer_end)?);
    }
    if verify {
        let computed = crc32c::crc32c(&entry[CRC_START..]);
        let stored = get_u32(entry, OFF_CRC);
        if computed != stored {
            return Err(Invalid::CrcMismatch { stored, computed });
        }
        // The name check is for bytes of unknown origin. Trusted reads (the
        // writer's own committed bytes, whose names it checked, or bytes that
        // recovery read with the full check) skip it. `StoredRecord::topic`
        // stays safe regardless.
        if std::str::from_utf8(&entry[view.topic.clone()]).map_or(true, |name| {
            crate::types::validate_topic_name(name).is_err()
        }) {
            return Err(Invalid::BadTopic);
        }
        let mut at = view.first_record();
        for r in RecordWalk::new(entry, &view) {
            let r = r?;
            at = (r.at + r.len) as usize;
        }
        if at != total_len {
            return Err(Invalid::BadLength(format!(
                "{} bytes left after {record_count} records",
                total_len - at
            )));
        }
    }
    Ok(Decoded::Entry(view))
}

/// A marker entry's marker block and control record (`view.marker` is
/// still `None`; the block starts at `block_at`). Both are checked
/// whenever the entry is decoded: a marker decides what read_committed
/// readers see, so a malformed one is never taken for a commit or an
/// abort.
fn decode_marker(entry: &[u8], view: &EntryView, block_at: usize) -> Result<EntryMarker, Invalid> {
    let b = &entry[block_at..block_at + MARKER_BLOCK_LEN];
    let offset = view.base_queue_offset;
    let first = get_u64(b, OFF_TXN_FIRST);
    let lso = get_u64(b, OFF_MARKER_LSO);
    let txn_first_offset = (first != TXN_FIRST_NONE).then_some(first);
    if txn_first_offset.is_some_and(|f| f > offset) || lso > offset + 1 {
        return Err(Invalid::BadLength(format!(
            "a marker at offset {offset} names a transaction from {first} and a last stable offset of {lso}"
        )));
    }
    // The control record, read with the marker block counted in.
    let with_block = EntryView {
        marker: Some(EntryMarker {
            commit: false,
            coordinator_epoch: 0,
            txn_first_offset,
            last_stable_offset: lso,
        }),
        ..view.clone()
    };
    let r = decode_record(entry, &with_block, with_block.first_record())?;
    let (key, value) = match (r.key(), r.value()) {
        (Some(k), Some(v)) if r.header_count == 0 => (&entry[k], &entry[v]),
        _ => {
            return Err(Invalid::BadLength(
                "a marker's control record needs a key and a value and no headers".into(),
            ))
        }
    };
    let commit = match key {
        [0, 0, t0, t1] if i16::from_be_bytes([*t0, *t1]) == CONTROL_TYPE_COMMIT => true,
        [0, 0, t0, t1] if i16::from_be_bytes([*t0, *t1]) == CONTROL_TYPE_ABORT => false,
        _ => {
            return Err(Invalid::BadLength(format!(
                "control record key {key:02x?} is not a version-0 COMMIT or ABORT"
            )))
        }
    };
    let coordinator_epoch = match value {
        [0, 0, e @ ..] if e.len() == 4 => i32::from_be_bytes([e[0], e[1], e[2], e[3]]),
        _ => {
            return Err(Invalid::BadLength(format!(
                "control record value {value:02x?} is not a version-0 transaction marker"
            )))
        }
    };
    Ok(EntryMarker {
        commit,
        coordinator_epoch,
        txn_first_offset,
        last_stable_offset: lso,
    })
}

/// The records of an entry in order, from its first: each decoded with
/// [`decode_record`] and required to hold the next queue offset. A bad one
/// ends the walk with its error (nothing after it can be found).
pub struct RecordWalk<'a> {
    entry: &'a [u8],
    view: &'a EntryView,
    at: usize,
    index: u32,
}

impl<'a> RecordWalk<'a> {
    pub fn new(entry: &'a [u8], view: &'a EntryView) -> Self {
        RecordWalk {
            entry,
            view,
            at: view.first_record(),
            index: 0,
        }
    }
}

impl Iterator for RecordWalk<'_> {
    type Item = Result<RecordView, Invalid>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.index >= self.view.record_count {
            return None;
        }
        let expected = self.view.base_queue_offset + u64::from(self.index);
        let record = decode_record(self.entry, self.view, self.at).and_then(|r| {
            if r.queue_offset == expected {
                Ok(r)
            } else {
                Err(Invalid::BadLength(format!(
                    "record {} of the entry has queue offset {}, not {expected}",
                    self.index, r.queue_offset
                )))
            }
        });
        match &record {
            Ok(r) => {
                self.at += r.len as usize;
                self.index += 1;
            }
            Err(_) => self.index = self.view.record_count,
        }
        Some(record)
    }
}

/// Decode the record that starts `at` bytes into `entry` (whose header is
/// `view`). Every length is checked against the entry, and the record's
/// stored distance must be `at`: a position inside another record is
/// refused.
pub fn decode_record(entry: &[u8], view: &EntryView, at: usize) -> Result<RecordView, Invalid> {
    let entry = entry.get(..view.total_len).ok_or(Invalid::Truncated {
        needed: view.total_len,
        available: entry.len(),
    })?;
    if at < view.first_record() || at >= entry.len() {
        return Err(Invalid::NotARecord(format!(
            "position {at} is outside the records of a {}-byte entry",
            entry.len()
        )));
    }
    let mut cur = at;
    let distance = get_varint(entry, &mut cur)?;
    if distance != at as u64 {
        return Err(Invalid::NotARecord(format!(
            "the bytes at {at} say {distance}"
        )));
    }
    let Some(&flags) = entry.get(cur) else {
        return Err(Invalid::BadLength("a record runs past the entry".into()));
    };
    cur += 1;
    if flags & !FLAGS_KNOWN != 0 {
        return Err(Invalid::BadFlags(flags));
    }
    let offset_delta = get_varint(entry, &mut cur)?;
    if offset_delta >= u64::from(view.record_count) {
        return Err(Invalid::BadLength(format!(
            "offset delta {offset_delta} in an entry of {} records",
            view.record_count
        )));
    }
    let ts_delta = unzigzag(get_varint(entry, &mut cur)?);
    // Lengths are bounded by the entry first (no overflow below), then
    // their sum by what is left of it.
    let left = |cur: usize| entry.len().saturating_sub(cur);
    let key_len = if flags & FLAG_HAS_KEY != 0 {
        Some(get_len(entry, &mut cur, entry.len(), "key length")?)
    } else {
        None
    };
    let value_len = if flags & FLAG_HAS_VALUE != 0 {
        Some(get_len(entry, &mut cur, entry.len(), "value length")?)
    } else {
        None
    };
    let header_count = get_len(entry, &mut cur, HEADER_COUNT_MAX, "header count")?;
    let headers_len = if header_count > 0 {
        get_len(entry, &mut cur, entry.len(), "header block length")?
    } else {
        0
    };
    let body = key_len.unwrap_or(0) as u64 + value_len.unwrap_or(0) as u64 + headers_len as u64;
    if body > left(cur) as u64 {
        return Err(Invalid::BadLength(format!(
            "a record of {body} bytes runs past the entry"
        )));
    }
    let headers_start = cur + key_len.unwrap_or(0) + value_len.unwrap_or(0);
    let headers = headers_start..headers_start + headers_len;
    // No headers, no block (`headers_len` is 0): nothing to walk, and a
    // call per record the dispatcher and every read make.
    if header_count > 0 {
        validate_headers(
            &entry[headers.clone()],
            header_count,
            view.version != VERSION_2,
        )?;
    }
    // Every position is below the entry's length, itself at most
    // RECORD_LEN_MAX (< 2^32), and header_count at most HEADER_COUNT_MAX.
    Ok(RecordView {
        physical_offset: view.physical_offset + at as u64,
        queue_offset: view.base_queue_offset + offset_delta,
        store_timestamp_ms: view.store_timestamp_ms,
        producer_timestamp_ms: view.store_timestamp_ms.wrapping_add(ts_delta),
        partition: view.partition,
        at: at as u32,
        len: (headers.end - at) as u32,
        body: cur as u32,
        key_len: key_len.unwrap_or(0) as u32,
        value_len: value_len.unwrap_or(0) as u32,
        headers_len: headers_len as u32,
        topic_len: view.topic.len() as u16,
        header_count: header_count as u16,
        flags,
    })
}

/// The entry flags of the entry that starts at `entry[0]` (0 if it is too
/// short to have them).
pub fn entry_flags(entry: &[u8]) -> u8 {
    entry.get(OFF_FLAGS).copied().unwrap_or(0)
}

/// How far before `bytes` (which start where a record is said to start)
/// that record says its entry starts, for a reader that holds a record's
/// position only (a ConsumeQueue unit, an IndexFile entry, a client's
/// physical offset). `None` if the bytes cannot start a record. The entry
/// found there must still be decoded and checked, and
/// [`decode_record`] checks the distance again.
pub fn distance_at(bytes: &[u8]) -> Option<u64> {
    let mut at = 0;
    get_varint(bytes, &mut at).ok()
}

/// Walk a header block and check it holds exactly `count` well-formed
/// entries with UTF-8 names; a null value ([`HEADER_VALUE_NULL`]) only
/// where `nulls` (a format version that writes them) allows it.
pub fn validate_headers(block: &[u8], count: usize, nulls: bool) -> Result<(), Invalid> {
    let mut at = 0;
    for i in 0..count {
        if block.len() - at < HEADER_ENTRY_FIXED {
            return Err(Invalid::BadHeaders(format!(
                "entry {i} runs past the block"
            )));
        }
        let name_len = get_u16(block, at) as usize;
        let value_len = match get_u32(block, at + 2) {
            HEADER_VALUE_NULL if nulls => 0,
            HEADER_VALUE_NULL => {
                return Err(Invalid::BadHeaders(format!(
                    "entry {i} has a null value, which this version never wrote"
                )))
            }
            len => len as usize,
        };
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

/// Decode a validated header block (see [`decode_record`]) into owned
/// headers whose values share `block`'s memory.
pub fn decode_headers(block: &Bytes, count: usize) -> Vec<Header> {
    let mut out = Vec::with_capacity(count);
    for (name, value) in header_ranges(block, count) {
        out.push(Header {
            name: String::from_utf8_lossy(&block[name]).into_owned(),
            value: value.map(|v| block.slice(v)),
        });
    }
    out
}

/// The names and values (`None`: null) of a validated header block (see
/// [`decode_record`]), borrowed from it, in order.
pub fn header_entries(
    block: &[u8],
    count: usize,
) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> + Clone {
    header_ranges(block, count).map(move |(name, value)| (&block[name], value.map(|v| &block[v])))
}

/// Where each of the first `count` entries of a header block has its name
/// and value; ends early at an entry that would run past the block (none
/// does in a validated block: this only keeps a slice in bounds).
fn header_ranges(
    block: &[u8],
    count: usize,
) -> impl Iterator<Item = (Range<usize>, Option<Range<usize>>)> + Clone + '_ {
    let mut at = 0;
    (0..count).map_while(move |_| {
        if at + HEADER_ENTRY_FIXED > block.len() {
            return None;
        }
        let name_len = get_u16(block, at) as usize;
        let value_len = match get_u32(block, at + 2) {
            HEADER_VALUE_NULL => None,
            len => Some(len as usize),
        };
        at += HEADER_ENTRY_FIXED;
        if at + name_len + value_len.unwrap_or(0) > block.len() {
            return None;
        }
        let name = at..at + name_len;
        at += name_len;
        let value = value_len.map(|len| at..at + len);
        at += value_len.unwrap_or(0);
        Some((name, value))
    })
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
