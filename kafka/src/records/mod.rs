//! Kafka record batches (magic 2): decoded on produce, built on fetch.
//!
//! kafka-protocol's own record layer is not used: its headers are a map
//! (duplicate names collapse, tidelog keeps them in order), its decoder
//! reserves capacity from counts read off the wire, and its decompressors
//! write into unbounded buffers (docs/KAFKA.md).
//!
//! Invariants of [`decode_batches`]:
//! * Every length and count is checked against the bytes left before
//!   anything is allocated for it: a record count against the fewest
//!   bytes a record can take, a header count likewise, each key, value
//!   and header against its record's own length.
//! * The CRC32C (over attributes to the end of the batch) is checked
//!   before the batch's records are read.
//! * A compressed batch inflates into at most the smaller of the
//!   request's inflation budget left (`kafka.max_request_bytes`, which
//!   each batch spends) and one batch's limit
//!   (`kafka.max_batch_inflated_bytes`, Kafka's `max.message.bytes` check
//!   of a batch, made here on the inflated bytes, where the memory is):
//!   [`DecodeLimits`]. Past the batch's limit it is MESSAGE_TOO_LARGE.
//! * A batch's record count is checked against the records the request
//!   may still carry (`kafka.max_records_per_request`) before any of its
//!   records is decoded or room for them reserved: RECORD_LIST_TOO_LARGE.
//! * The sink is told of every byte that comes to be held because of the
//!   request (an inflated buffer, room for records, each record) before or
//!   as it is held, and may refuse it ([`RecordSink`]: Produce counts them
//!   against the in-flight byte budget); a refusal ends the decode.
//! * A record's timestamp is its base timestamp plus its delta, added
//!   with overflow checked, and must pass the broker's one timestamp rule
//!   (`tidelog_broker::produce::check_timestamp_ms`), else the batch is
//!   INVALID_TIMESTAMP; -1 (Kafka's NO_TIMESTAMP) is no timestamp, as a
//!   LogAppendTime batch's (the append time is stored).
//! * Keys, values and header values of an uncompressed batch are slices of
//!   the request's buffer (no copy); of a compressed one, of its inflated
//!   buffer.

pub mod appends;
pub mod compression;
pub mod varint;

use bytes::Bytes;
use tidelog_broker::read::RecordRef;
use tidelog_broker::store::Header;

use crate::error::RecordError;
use varint::{varint_len, varlong_len, Cursor, SliceWriter};

/// baseOffset (8) and batchLength (4): what precedes the counted bytes.
const LOG_OVERHEAD: usize = 12;
/// From partitionLeaderEpoch to the record count, inclusive: the fewest
/// bytes `batchLength` can count.
const BATCH_HEADER_AFTER_LENGTH: usize = 49;
/// Where the CRC'd bytes start (attributes), from the batch's first byte.
const CRC_START: usize = 21;
/// The fewest bytes a record takes: length, attributes, timestamp delta,
/// offset delta, key length, value length and header count, one byte each.
const MIN_RECORD_BYTES: usize = 7;
/// The fewest bytes a header takes: its two lengths.
const MIN_HEADER_BYTES: usize = 2;

const ATTR_CODEC_MASK: i16 = 0x07;
const ATTR_LOG_APPEND_TIME: i16 = 0x08;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

/// One record of a produce batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    /// In batch order, duplicates kept; `None` is a null value (length -1),
    /// kept null.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// The CreateTime; `None` when the batch asks for LogAppendTime.
    pub timestamp_ms: Option<i64>,
}

/// An idempotent producer's batch: the batch header's producer id (≥ 0),
/// epoch and base sequence, and whether it is its transaction's
/// (attribute bit 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchProducer {
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
}

/// Kafka's NO_TIMESTAMP: a record without a CreateTime.
const NO_TIMESTAMP: i64 = -1;

/// Where decoded records go, as each is decoded: a `Vec`, or the
/// broker's `Records` ([`appends`]), which turns each into the store's
/// record at once (Produce: no list of [`BatchRecord`]s in between). Each call may
/// refuse (the memory it would hold is not there): the decode stops with
/// that error.
pub trait RecordSink {
    /// A compressed batch's records were inflated into a buffer of
    /// `bytes`, which the decoded records share.
    fn inflated(&mut self, _bytes: usize) -> Result<(), RecordError> {
        Ok(())
    }
    /// `records` more are coming (a batch's count, checked against its
    /// bytes and the request's record limit before this is called).
    fn reserve(&mut self, records: usize) -> Result<(), RecordError>;
    fn push(&mut self, record: BatchRecord) -> Result<(), RecordError>;
}

impl RecordSink for Vec<BatchRecord> {
    fn reserve(&mut self, records: usize) -> Result<(), RecordError> {
        Vec::reserve(self, records);
        Ok(())
    }

    fn push(&mut self, record: BatchRecord) -> Result<(), RecordError> {
        Vec::push(self, record);
        Ok(())
    }
}

/// What decoding one Produce request may still spend, across its
/// partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Bytes its compressed batches may still inflate into, together
    /// (`kafka.max_request_bytes`).
    pub inflate_left: usize,
    /// One compressed batch's records section, inflated, at most
    /// (`kafka.max_batch_inflated_bytes`).
    pub batch_inflated_max: usize,
    /// Records it may still carry (`kafka.max_records_per_request`).
    pub records_left: usize,
}

impl DecodeLimits {
    /// A request's limits: `inflate` bytes of inflation in all, at most
    /// `batch_inflated_max` a batch, `records` records.
    pub fn new(inflate: usize, batch_inflated_max: usize, records: usize) -> DecodeLimits {
        DecodeLimits {
            inflate_left: inflate,
            batch_inflated_max,
            records_left: records,
        }
    }
}

/// Every record of every batch in a partition's `records` field, in order;
/// compressed batches inflate into `budget` (each at most all of it), and
/// records are not counted.
pub fn decode_batches(data: &Bytes, budget: &mut usize) -> Result<Vec<BatchRecord>, RecordError> {
    decode_partition(data, budget).map(|(records, _)| records)
}

/// Whether any batch in `data` (a partition's `records`) is compressed:
/// its decode is the work worth moving off an async worker (a few wire
/// bytes may inflate to many records). Walks the batch headers only; a
/// malformed one answers `true` (the decode, wherever it runs, refuses it).
pub fn any_compressed(data: &[u8]) -> bool {
    let mut at = 0;
    while at < data.len() {
        let Some(header) = data.get(at..at + CRC_START + 2) else {
            return true;
        };
        let length = i32::from_be_bytes([header[8], header[9], header[10], header[11]]);
        let attributes = i16::from_be_bytes([header[CRC_START], header[CRC_START + 1]]);
        if attributes & ATTR_CODEC_MASK != 0 {
            return true;
        }
        match usize::try_from(length) {
            Ok(length) if length >= BATCH_HEADER_AFTER_LENGTH => at += LOG_OVERHEAD + length,
            _ => return true,
        }
    }
    false
}

/// [`decode_batches`], with the producer of an idempotent producer's batch
/// (producer id ≥ 0). Such a batch must be the partition's only one, as
/// Kafka requires of Produce v3+: its sequence covers exactly its records.
pub fn decode_partition(
    data: &Bytes,
    budget: &mut usize,
) -> Result<(Vec<BatchRecord>, Option<BatchProducer>), RecordError> {
    let mut records = Vec::new();
    let mut limits = DecodeLimits::new(*budget, *budget, usize::MAX);
    let producer = decode_partition_into(data, &mut limits, &mut records)?;
    *budget = limits.inflate_left;
    Ok((records, producer))
}

/// [`decode_partition`] into `out`, record by record. On an error `out`
/// may hold the records decoded before it: the caller drops them.
pub fn decode_partition_into(
    data: &Bytes,
    limits: &mut DecodeLimits,
    out: &mut impl RecordSink,
) -> Result<Option<BatchProducer>, RecordError> {
    let mut producer = None;
    let mut batches = 0;
    let mut at = 0;
    while at < data.len() {
        let (used, batch_producer) = decode_batch(&data.slice(at..), limits, out)?;
        batches += 1;
        producer = producer.or(batch_producer);
        at += used;
    }
    if producer.is_some() && batches > 1 {
        return Err(RecordError::ProducerBatches { batches });
    }
    Ok(producer)
}

/// Decodes the batch at the start of `data` into `out`; the bytes it took
/// and its producer, if it has one.
fn decode_batch(
    data: &Bytes,
    limits: &mut DecodeLimits,
    out: &mut impl RecordSink,
) -> Result<(usize, Option<BatchProducer>), RecordError> {
    let mut c = Cursor::new(data);
    c.take(8, "baseOffset")?;
    let length = i32::from_be_bytes(fixed(&mut c, "batchLength")?);
    let length = usize::try_from(length)
        .ok()
        .filter(|l| *l >= BATCH_HEADER_AFTER_LENGTH)
        .ok_or(RecordError::BadLength {
            what: "batchLength",
            value: i64::from(length),
        })?;
    let total = LOG_OVERHEAD + length;
    if total > data.len() {
        return Err(RecordError::Truncated {
            what: "record batch",
            needed: total,
            left: data.len(),
        });
    }
    let batch = data.slice(..total);
    let mut c = Cursor::new(&batch);
    c.take(LOG_OVERHEAD + 4, "partitionLeaderEpoch")?;
    let magic = c.u8("magic")? as i8;
    if magic != 2 {
        return Err(RecordError::Magic { magic });
    }
    let stored = u32::from_be_bytes(fixed(&mut c, "crc")?);
    let computed = crc32c::crc32c(&batch[CRC_START..]);
    if stored != computed {
        return Err(RecordError::Crc { stored, computed });
    }
    let attributes = i16::from_be_bytes(fixed(&mut c, "attributes")?);
    // A control batch (a transaction marker) is the coordinator's to
    // write, never a client's.
    if attributes & ATTR_CONTROL != 0 {
        return Err(RecordError::Transactional);
    }
    let transactional = attributes & ATTR_TRANSACTIONAL != 0;
    c.take(4, "lastOffsetDelta")?;
    let base_timestamp = i64::from_be_bytes(fixed(&mut c, "baseTimestamp")?);
    c.take(8, "maxTimestamp")?;
    let producer_id = i64::from_be_bytes(fixed(&mut c, "producerId")?);
    let epoch = i16::from_be_bytes(fixed(&mut c, "producerEpoch")?);
    let base_sequence = i32::from_be_bytes(fixed(&mut c, "baseSequence")?);
    let count = i32::from_be_bytes(fixed(&mut c, "records count")?);
    // Producer id -1 is "no producer"; an idempotent batch has an epoch and
    // a sequence of its own (Kafka refuses one without).
    let producer = match producer_id {
        // A transaction's batch always names its producer.
        -1 if !transactional => None,
        id if id >= 0 && epoch >= 0 && base_sequence >= 0 => Some(BatchProducer {
            producer_id: id,
            epoch,
            base_sequence,
            transactional,
        }),
        _ => {
            return Err(RecordError::BadProducer {
                producer_id,
                epoch,
                base_sequence,
            })
        }
    };
    let body_start = c.position();
    let codec = (attributes & ATTR_CODEC_MASK) as u8;
    let body = if codec == compression::NONE {
        batch.slice(body_start..)
    } else {
        let batch_bound = limits.batch_inflated_max < limits.inflate_left;
        let cap = limits.inflate_left.min(limits.batch_inflated_max);
        let inflated = match compression::decompress(codec, &batch[body_start..], cap) {
            Err(RecordError::Inflates { .. }) if batch_bound => {
                return Err(RecordError::BatchTooLarge {
                    limit: limits.batch_inflated_max,
                })
            }
            other => other?,
        };
        limits.inflate_left -= inflated.len();
        out.inflated(inflated.len())?;
        Bytes::from(inflated)
    };
    let count = usize::try_from(count)
        .ok()
        .filter(|n| *n <= body.len() / MIN_RECORD_BYTES)
        .ok_or(RecordError::BadLength {
            what: "records count",
            value: i64::from(count),
        })?;
    if count > limits.records_left {
        return Err(RecordError::TooManyRecords {
            count,
            left: limits.records_left,
        });
    }
    limits.records_left -= count;
    let log_append_time = attributes & ATTR_LOG_APPEND_TIME != 0;
    out.reserve(count)?;
    let mut c = Cursor::new(&body);
    for _ in 0..count {
        out.push(decode_record(
            &body,
            &mut c,
            base_timestamp,
            log_append_time,
        )?)?;
    }
    if c.remaining() != 0 {
        return Err(RecordError::TrailingBytes {
            bytes: c.remaining(),
        });
    }
    Ok((total, producer))
}

fn fixed<const N: usize>(c: &mut Cursor<'_>, what: &'static str) -> Result<[u8; N], RecordError> {
    let mut out = [0u8; N];
    out.copy_from_slice(c.take(N, what)?);
    Ok(out)
}

fn decode_record(
    body: &Bytes,
    c: &mut Cursor<'_>,
    base_timestamp: i64,
    log_append_time: bool,
) -> Result<BatchRecord, RecordError> {
    let length = c.varint("record length")?;
    let length = usize::try_from(length)
        .ok()
        .filter(|l| *l <= c.remaining() && *l >= MIN_RECORD_BYTES - 1)
        .ok_or(RecordError::BadLength {
            what: "record length",
            value: i64::from(length),
        })?;
    // The record is read through a plain slice: only its key, value and
    // headers become `Bytes` (of `body`, at `start` + their place).
    let start = c.position();
    let record = c.take(length, "record")?;
    let mut r = Cursor::new(record);
    r.u8("record attributes")?;
    let delta = r.varlong("timestampDelta")?;
    r.varint("offsetDelta")?;
    let key = bytes_field(body, start, &mut r, "key")?;
    let value = bytes_field(body, start, &mut r, "value")?;
    let header_count = r.varint("headers count")?;
    let header_count = usize::try_from(header_count)
        .ok()
        .filter(|n| *n <= r.remaining() / MIN_HEADER_BYTES)
        .ok_or(RecordError::BadLength {
            what: "headers count",
            value: i64::from(header_count),
        })?;
    let mut headers = Vec::with_capacity(header_count);
    for _ in 0..header_count {
        let name = bytes_field(body, start, &mut r, "header name")?.unwrap_or_default();
        let name = String::from_utf8(name.to_vec()).map_err(|_| RecordError::HeaderName)?;
        headers.push((name, bytes_field(body, start, &mut r, "header value")?));
    }
    if r.remaining() != 0 {
        return Err(RecordError::TrailingBytes {
            bytes: r.remaining(),
        });
    }
    let timestamp_ms = if log_append_time {
        None
    } else {
        record_timestamp(base_timestamp, delta)?
    };
    Ok(BatchRecord {
        key,
        value,
        headers,
        timestamp_ms,
    })
}

/// A CreateTime record's timestamp: `base + delta` without overflow,
/// `None` for NO_TIMESTAMP (the append time is stored), else within the
/// broker's one rule (`check_timestamp_ms`, as HTTP's `timestamp`).
fn record_timestamp(base: i64, delta: i64) -> Result<Option<i64>, RecordError> {
    let timestamp = base
        .checked_add(delta)
        .ok_or(RecordError::TimestampOverflow { base, delta })?;
    if timestamp == NO_TIMESTAMP {
        return Ok(None);
    }
    tidelog_broker::produce::check_timestamp_ms(timestamp)
        .map(Some)
        .map_err(|source| RecordError::Timestamp { source })
}

/// A varint length (-1: null) and that many bytes, sliced from `whole`,
/// where `c`'s slice starts at `whole[base]`.
fn bytes_field(
    whole: &Bytes,
    base: usize,
    c: &mut Cursor<'_>,
    what: &'static str,
) -> Result<Option<Bytes>, RecordError> {
    let len = c.varint(what)?;
    if len == -1 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| RecordError::BadLength {
        what,
        value: i64::from(len),
    })?;
    let start = base + c.position();
    c.take(len, what)?;
    Ok(Some(whole.slice(start..start + len)))
}

/// One record as a fetch sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutRecord<'a> {
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// In order, duplicates kept; a `None` value is null, sent as length
    /// -1. The store's own type, so a fetched record's headers pass
    /// through without being collected again.
    pub headers: Vec<Header>,
}

impl<'a> From<RecordRef<'a>> for OutRecord<'a> {
    fn from(r: RecordRef<'a>) -> OutRecord<'a> {
        OutRecord {
            offset: r.offset(),
            timestamp_ms: r.timestamp_ms(),
            key: r.key(),
            value: r.value(),
            headers: r.headers(),
        }
    }
}

/// Appends one uncompressed batch holding `records` (in offset order; gaps
/// allowed, as after compaction) to `out`: their own offsets and
/// CreateTimes, partition leader epoch -1, no producer. Nothing for no
/// records.
pub fn encode_batch<'a>(out: &mut Vec<u8>, records: impl IntoIterator<Item = OutRecord<'a>>) {
    encode_batch_as(out, records, false);
}

/// [`encode_batch`], with `log_append_time` the batches of a topic whose
/// timestamps are the broker's ([`BatchBuilder::log_append_time`]).
pub fn encode_batch_as<'a>(
    out: &mut Vec<u8>,
    records: impl IntoIterator<Item = OutRecord<'a>>,
    log_append_time: bool,
) {
    let mut batch = BatchBuilder::new(std::mem::take(out));
    if log_append_time {
        batch = batch.log_append_time();
    }
    for r in records {
        batch.push(
            r.offset,
            r.timestamp_ms,
            r.key,
            r.value,
            r.headers
                .iter()
                .map(|h| (h.name.as_bytes(), h.value.as_deref())),
        );
    }
    *out = batch.finish();
}

/// Builds one uncompressed batch at the end of a buffer, a record at a
/// time ([`encode_batch`]; a fetch pushes each stored record as the store
/// reads it, with no list of records in between).
///
/// Each record is written straight into the buffer behind a placeholder
/// header (its length computed first, so no record is staged in a buffer
/// of its own); [`BatchBuilder::finish`] fills in the header and the CRC
/// over it: the record bytes are copied once, from the store's memory
/// into the buffer.
pub struct BatchBuilder {
    out: Vec<u8>,
    /// Where the batch starts in `out`.
    start: usize,
    base_offset: u64,
    base_timestamp: i64,
    max_timestamp: i64,
    last_delta: i32,
    count: i32,
    /// Batches say their timestamps are the broker's (attribute bit 3,
    /// LogAppendTime), so one batch holds records of one append time.
    log_append_time: bool,
    /// Whose batch this is, for a transaction's records and markers (the
    /// producer id a read_committed client matches aborted transactions
    /// by); `None`: no producer, as every other batch.
    producer: Option<TxnBatch>,
    /// The sequence of the batch's first record (a transaction's).
    base_sequence: i32,
}

/// The producer fields of a batch a fetch answers: a transaction's
/// records (attribute bit 4) or its marker (bits 4 and 5, a control
/// batch). One batch holds one producer's run of either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub control: bool,
}

impl BatchBuilder {
    /// A batch to be appended to `out` (nothing is written before the
    /// first record).
    pub fn new(out: Vec<u8>) -> BatchBuilder {
        BatchBuilder {
            start: out.len(),
            out,
            base_offset: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            last_delta: 0,
            count: 0,
            log_append_time: false,
            producer: None,
            base_sequence: -1,
        }
    }

    /// The records pushed next are `producer`'s (a transaction's records
    /// or marker; `None`: no producer's): a change closes the batch being
    /// built and starts another, whose first record has sequence
    /// `base_sequence` (−1 for a marker, or for no producer).
    #[inline]
    pub fn set_producer(&mut self, producer: Option<TxnBatch>, base_sequence: i32) {
        if producer != self.producer {
            if self.count > 0 {
                self.roll();
            }
            self.producer = producer;
        }
        if self.count == 0 {
            self.base_sequence = base_sequence;
        }
    }

    /// Batches of a topic with `message.timestamp.type=LogAppendTime`:
    /// each says so in its attributes, and a record whose time differs
    /// from its batch's starts a new batch in the same buffer. A client
    /// reads every record of a LogAppendTime batch at the batch's
    /// `max_timestamp`, so one batch must not mix append times.
    pub fn log_append_time(mut self) -> BatchBuilder {
        self.log_append_time = true;
        self
    }

    /// Closes the batch being built (its header and CRC) and starts the
    /// next one after it.
    fn roll(&mut self) {
        self.fill_header();
        self.start = self.out.len();
        self.count = 0;
    }

    fn fill_header(&mut self) {
        if self.count > 0 {
            let mut attributes = if self.log_append_time {
                ATTR_LOG_APPEND_TIME
            } else {
                0
            };
            let (producer_id, producer_epoch, base_sequence) = match self.producer {
                Some(p) => {
                    attributes |= ATTR_TRANSACTIONAL;
                    if p.control {
                        attributes |= ATTR_CONTROL;
                    }
                    (p.producer_id, p.epoch, self.base_sequence)
                }
                None => (-1, -1, -1),
            };
            let header = BatchHeader {
                base_offset: self.base_offset as i64,
                attributes,
                last_offset_delta: self.last_delta,
                base_timestamp: self.base_timestamp,
                max_timestamp: self.max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                count: self.count,
            };
            header.fill(&mut self.out, self.start);
        }
    }

    /// Appends a record: its offset (at or after the previous one's), its
    /// CreateTime, key, value (`None`: null) and headers (name, value;
    /// `None`: a null value), in order. Inlined into the fetch's sink, its
    /// one hot caller: left out of line (as the compiler chose once the
    /// produce decoder became generic) it cost a fetch 28 instructions a
    /// record more.
    #[inline]
    pub fn push<'h>(
        &mut self,
        offset: u64,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: impl Iterator<Item = (&'h [u8], Option<&'h [u8]>)> + Clone,
    ) {
        if self.log_append_time && self.count > 0 && timestamp_ms != self.base_timestamp {
            self.roll();
        }
        if self.count == 0 {
            self.base_offset = offset;
            self.base_timestamp = timestamp_ms;
            self.max_timestamp = timestamp_ms;
            let header_end = self.start + LOG_OVERHEAD + BATCH_HEADER_AFTER_LENGTH;
            self.out.resize(header_end, 0);
        }
        let out = &mut self.out;
        let timestamp_delta = timestamp_ms.wrapping_sub(self.base_timestamp);
        // A fetch never spans more offsets than an i32 counts (it is
        // bounded by bytes far below that).
        let delta = offset.wrapping_sub(self.base_offset) as i32;
        let mut header_count: i32 = 0;
        let mut headers_len = 0;
        for (name, value) in headers.clone() {
            header_count += 1;
            headers_len += bytes_len(Some(name)) + bytes_len(value);
        }
        let length = 1
            + varlong_len(timestamp_delta)
            + varint_len(delta)
            + bytes_len(key)
            + bytes_len(value)
            + varint_len(header_count)
            + headers_len;
        // The record's exact bytes, then each field stored into them.
        let at = out.len();
        out.resize(at + varint_len(length as i32) + length, 0);
        let mut w = SliceWriter::new(&mut out[at..]);
        w.varint(length as i32);
        w.u8(0);
        w.varlong(timestamp_delta);
        w.varint(delta);
        write_bytes(&mut w, key);
        write_bytes(&mut w, value);
        w.varint(header_count);
        for (name, value) in headers {
            write_bytes(&mut w, Some(name));
            write_bytes(&mut w, value);
        }
        debug_assert_eq!(at + w.written(), out.len());
        self.max_timestamp = self.max_timestamp.max(timestamp_ms);
        self.last_delta = delta;
        self.count += 1;
    }

    /// Whether the batch being built is a producer's
    /// ([`set_producer`](Self::set_producer)).
    pub fn has_producer(&self) -> bool {
        self.producer.is_some()
    }

    /// Room for `bytes` more in the buffer.
    pub fn reserve(&mut self, bytes: usize) {
        self.out.reserve(bytes);
    }

    /// Records in the batch being built (all pushed so far, unless
    /// LogAppendTime started more batches).
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The buffer with the batch's header and CRC filled in (as it was,
    /// for no records).
    pub fn finish(mut self) -> Vec<u8> {
        self.fill_header();
        self.out
    }
}

/// `batches` (uncompressed v2 batches as [`BatchBuilder`] writes them,
/// back to back) with each batch's records compressed with `codec`
/// (`compression::GZIP`..`ZSTD`) at `level` (`None`: the codec's
/// default): its length, attributes and CRC rewritten, the rest of its
/// header kept. What a fetch answers for a topic with a
/// `compression.type` (KAFKA.md "Topic configs").
pub fn compress_batches(batches: &[u8], codec: u8, level: Option<i32>) -> std::io::Result<Vec<u8>> {
    let header = LOG_OVERHEAD + BATCH_HEADER_AFTER_LENGTH;
    let mut out = Vec::with_capacity(batches.len() / 2 + header);
    let mut at = 0;
    while at < batches.len() {
        let length = batches
            .get(at + 8..at + 12)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(i32::from_be_bytes)
            .and_then(|l| usize::try_from(l).ok())
            .filter(|l| *l >= BATCH_HEADER_AFTER_LENGTH)
            .ok_or_else(|| std::io::Error::other("not a record batch"))?;
        let end = at + LOG_OVERHEAD + length;
        let batch = batches
            .get(at..end)
            .ok_or_else(|| std::io::Error::other("a record batch past the end"))?;
        if i16::from_be_bytes([batch[CRC_START], batch[CRC_START + 1]]) & ATTR_CONTROL != 0 {
            // A control batch (a transaction marker) stays as Kafka
            // writes it: uncompressed.
            out.extend_from_slice(batch);
            at = end;
            continue;
        }
        let packed = compression::compress(codec, &batch[header..], level)?;
        let start = out.len();
        out.extend_from_slice(&batch[..header]);
        out.extend_from_slice(&packed);
        let written = &mut out[start..];
        let new_length = (written.len() - LOG_OVERHEAD) as i32;
        written[8..12].copy_from_slice(&new_length.to_be_bytes());
        let attributes = i16::from_be_bytes([written[CRC_START], written[CRC_START + 1]])
            & !ATTR_CODEC_MASK
            | i16::from(codec);
        written[CRC_START..CRC_START + 2].copy_from_slice(&attributes.to_be_bytes());
        let crc = crc32c::crc32c(&written[CRC_START..]);
        written[CRC_START - 4..CRC_START].copy_from_slice(&crc.to_be_bytes());
        at = end;
    }
    Ok(out)
}

/// The fields of a batch header that vary; the rest is a single broker's
/// constants (leader epoch -1). The producer fields are −1 but for a
/// transaction's batches ([`TxnBatch`]).
struct BatchHeader {
    base_offset: i64,
    attributes: i16,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    count: i32,
}

impl BatchHeader {
    /// Appends the header and `body` to `out`.
    #[cfg(test)]
    fn write(&self, out: &mut Vec<u8>, body: &[u8]) {
        let start = out.len();
        out.resize(start + LOG_OVERHEAD + BATCH_HEADER_AFTER_LENGTH, 0);
        out.extend_from_slice(body);
        self.fill(out, start);
    }

    /// Writes the header into the placeholder at `out[start..]`, whose
    /// records run to the end of `out`, and the CRC over them.
    fn fill(&self, out: &mut [u8], start: usize) {
        let batch = &mut out[start..];
        let length = batch.len() - LOG_OVERHEAD;
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            batch[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(&self.base_offset.to_be_bytes());
        put(&(length as i32).to_be_bytes());
        put(&(-1i32).to_be_bytes());
        put(&[2]);
        put(&[0; 4]); // the CRC, below
        put(&self.attributes.to_be_bytes());
        put(&self.last_offset_delta.to_be_bytes());
        put(&self.base_timestamp.to_be_bytes());
        put(&self.max_timestamp.to_be_bytes());
        put(&self.producer_id.to_be_bytes());
        put(&self.producer_epoch.to_be_bytes());
        put(&self.base_sequence.to_be_bytes());
        put(&self.count.to_be_bytes());
        let crc = crc32c::crc32c(&batch[CRC_START..]);
        batch[CRC_START - 4..CRC_START].copy_from_slice(&crc.to_be_bytes());
    }
}

/// The bytes `write_bytes` writes for `value`.
fn bytes_len(value: Option<&[u8]>) -> usize {
    match value {
        None => varint_len(-1),
        Some(v) => varint_len(v.len() as i32) + v.len(),
    }
}

/// `value` as a record field: its varint length (-1: null), its bytes.
/// Inlined into `BatchBuilder::push`, the fetch's per-record path: left to
/// itself the compiler made it a call (callgrind: 39 instructions a
/// fetched record, once the produce decoder's sink moved beside it).
#[inline]
fn write_bytes(w: &mut SliceWriter<'_>, value: Option<&[u8]>) {
    match value {
        None => w.varint(-1),
        Some(v) => {
            w.varint(v.len() as i32);
            w.bytes(v);
        }
    }
}

#[cfg(test)]
mod tests;
