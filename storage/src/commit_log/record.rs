//! Records as the store takes them in and hands them out.

use std::sync::Arc;

use bytes::Bytes;

use super::format::{self, EntryMarker, EntryProducer, EntryView, Header, Invalid, RecordView};
use crate::types::{PhysicalOffset, QueueOffset};

/// One record to append. `value: None` is a tombstone.
#[derive(Clone, Debug)]
pub struct AppendRecord {
    pub topic: Arc<str>,
    pub partition: u32,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
    /// Client-supplied timestamp; the store's own time if `None`.
    pub timestamp_ms: Option<i64>,
}

/// Where an appended record landed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Appended {
    pub queue_offset: QueueOffset,
    pub physical_offset: PhysicalOffset,
    pub size: u32,
}

/// A record read back from the log. Key, value and headers share the mapped
/// segment's memory: no copy, and the segment stays mapped while they live.
/// `bytes` is the record's whole entry (its header holds the topic), `view`
/// the record's place in it.
#[derive(Clone)]
pub struct StoredRecord {
    bytes: Bytes,
    view: RecordView,
}

impl std::fmt::Debug for StoredRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredRecord")
            .field("topic", &self.topic())
            .field("partition", &self.view.partition)
            .field("queue_offset", &self.view.queue_offset)
            .field("physical_offset", &self.view.physical_offset)
            .field("key", &self.key())
            .field("value", &self.value())
            .finish()
    }
}

impl StoredRecord {
    /// Build from the bytes of the record's entry and the record's view
    /// decoded from them.
    pub fn from_bytes(bytes: Bytes, view: RecordView) -> Self {
        StoredRecord { bytes, view }
    }

    /// The topic's bytes (valid UTF-8), for cheap comparisons on hot paths:
    /// [`StoredRecord::topic`] checks the UTF-8 again on every call.
    pub fn topic_bytes(&self) -> &[u8] {
        &self.bytes[self.view.topic()]
    }

    pub fn topic(&self) -> &str {
        // Validated as a topic name (ASCII) when decoded.
        std::str::from_utf8(&self.bytes[self.view.topic()]).unwrap_or_default()
    }

    pub fn partition(&self) -> u32 {
        self.view.partition
    }

    pub fn queue_offset(&self) -> QueueOffset {
        QueueOffset::new(self.view.queue_offset)
    }

    pub fn physical_offset(&self) -> PhysicalOffset {
        PhysicalOffset::new(self.view.physical_offset)
    }

    /// Bytes the record occupies in the log (its share of the entry
    /// header not counted).
    pub fn size(&self) -> u32 {
        self.view.len
    }

    pub fn store_timestamp_ms(&self) -> i64 {
        self.view.store_timestamp_ms
    }

    pub fn timestamp_ms(&self) -> i64 {
        self.view.producer_timestamp_ms
    }

    pub fn key(&self) -> Option<Bytes> {
        self.view.key().map(|r| self.bytes.slice(r))
    }

    /// `None` for a tombstone.
    pub fn value(&self) -> Option<Bytes> {
        self.view.value().map(|r| self.bytes.slice(r))
    }

    /// The key, borrowed: no reference count taken, for callers that only
    /// copy or encode it.
    pub fn key_slice(&self) -> Option<&[u8]> {
        self.view.key().map(|r| &self.bytes[r])
    }

    /// The value, borrowed (`None` for a tombstone).
    pub fn value_slice(&self) -> Option<&[u8]> {
        self.view.value().map(|r| &self.bytes[r])
    }

    pub fn is_tombstone(&self) -> bool {
        self.view.flags & format::FLAG_HAS_VALUE == 0
    }

    /// Whether the record is a transaction marker (Kafka's control record):
    /// never served as a record; the Kafka front-end answers it as a
    /// control batch. One byte of the entry header.
    pub fn is_control(&self) -> bool {
        format::entry_flags(&self.bytes) & format::ENTRY_CONTROL != 0
    }

    /// Whether the record belongs to a producer's transaction (a marker
    /// does too). One byte of the entry header.
    pub fn is_transactional(&self) -> bool {
        format::entry_flags(&self.bytes) & format::ENTRY_TRANSACTIONAL != 0
    }

    /// The producer block of the record's entry: whose batch it is, with
    /// the sequence of the entry's first record. Decodes the entry header.
    pub fn producer(&self) -> Option<EntryProducer> {
        self.entry_view()?.producer
    }

    /// The producer block of the record's entry and this record's own
    /// sequence in it (−1 for a marker, which takes none). Decodes the
    /// entry header.
    pub fn producer_sequence(&self) -> Option<(EntryProducer, i32)> {
        let v = self.entry_view()?;
        let p = v.producer?;
        if v.marker.is_some() {
            return Some((p, format::MARKER_SEQUENCE));
        }
        let delta = self.view.queue_offset.checked_sub(v.base_queue_offset)?;
        let delta = i32::try_from(delta).ok()?;
        Some((
            p,
            crate::producer_state::increment_sequence(p.base_sequence, delta),
        ))
    }

    /// The marker, for a transaction marker. Decodes the entry header.
    pub fn marker(&self) -> Option<EntryMarker> {
        if !self.is_control() {
            return None;
        }
        self.entry_view()?.marker
    }

    /// The record's entry header, decoded (its lengths checked again, not
    /// its CRC: the bytes were checked when written or recovered).
    fn entry_view(&self) -> Option<EntryView> {
        let start = self.view.physical_offset - u64::from(self.view.at);
        match format::decode(&self.bytes, start, false) {
            Ok(format::Decoded::Entry(v)) => Some(v),
            _ => None,
        }
    }

    pub fn headers(&self) -> Vec<Header> {
        if self.view.header_count == 0 {
            return Vec::new();
        }
        format::decode_headers(
            &self.bytes.slice(self.view.headers()),
            self.view.header_count.into(),
        )
    }

    /// The headers' names and values (`None`: null), borrowed, in order:
    /// for an encoder that copies them out without collecting them.
    pub fn header_entries(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> + Clone {
        format::header_entries(
            &self.bytes[self.view.headers()],
            self.view.header_count.into(),
        )
    }

    /// Bytes of the encoded header block (what a produce's size limit and
    /// byte counters count for headers).
    pub fn headers_len(&self) -> usize {
        self.view.headers().len()
    }

    /// The encoded header block and its entry count, for copying a record's
    /// headers verbatim into another log (see `format::decode_headers`).
    pub fn headers_block(&self) -> (Bytes, usize) {
        (
            self.bytes.slice(self.view.headers()),
            self.view.header_count.into(),
        )
    }

    /// [`StoredRecord::headers_block`], borrowed: no reference count taken
    /// (the compacted-log copy encodes it straight into its batch).
    pub fn headers_slice(&self) -> (&[u8], usize) {
        (
            &self.bytes[self.view.headers()],
            self.view.header_count.into(),
        )
    }
}

/// Where a sequential read of a partition (`Store::read_into`) puts its
/// records, in offset order: a `Vec` collects them; a Kafka fetch encodes
/// each into its batch as it comes and keeps only the last.
pub trait ReadSink {
    /// The record pushed last, if the sink still holds it: the read looks
    /// for the next record in its entry first, without a queue lookup.
    fn last(&self) -> Option<&StoredRecord>;
    fn push(&mut self, record: StoredRecord);
    /// Room for about `records` more (a hint).
    fn reserve(&mut self, _records: usize) {}
}

impl ReadSink for Vec<StoredRecord> {
    fn last(&self) -> Option<&StoredRecord> {
        self.as_slice().last()
    }

    fn push(&mut self, record: StoredRecord) {
        Vec::push(self, record);
    }

    fn reserve(&mut self, records: usize) {
        Vec::reserve(self, records);
    }
}

/// An entry read back from the log: the records of one partition written
/// together (see [`mod@format`]), sharing one header.
#[derive(Clone)]
pub struct Entry {
    bytes: Bytes,
    view: EntryView,
}

impl Entry {
    /// `bytes` are exactly the entry's, `view` decoded from them.
    pub fn new(bytes: Bytes, view: EntryView) -> Entry {
        debug_assert_eq!(bytes.len(), view.total_len);
        Entry { bytes, view }
    }

    /// Bytes the entry occupies in the log.
    pub fn size(&self) -> u64 {
        self.view.total_len as u64
    }

    pub fn physical_offset(&self) -> u64 {
        self.view.physical_offset
    }

    /// Does the entry's span in the log include `pos`?
    pub fn holds(&self, pos: u64) -> bool {
        pos >= self.view.physical_offset && pos - self.view.physical_offset < self.size()
    }

    pub fn record_count(&self) -> u32 {
        self.view.record_count
    }

    /// The entry's header fields.
    pub fn view(&self) -> &EntryView {
        &self.view
    }

    /// The topic name (validated when the entry was verified).
    pub fn topic(&self) -> &str {
        std::str::from_utf8(&self.bytes[self.view.topic.clone()]).unwrap_or_default()
    }

    /// The record after `prev` (one of this entry's), or `None` if `prev`
    /// is its last. Records of an entry are contiguous and their queue
    /// offsets consecutive, so the next one starts where `prev` ends.
    pub fn record_after(&self, prev: &StoredRecord) -> Result<Option<StoredRecord>, Invalid> {
        let index = prev
            .queue_offset()
            .get()
            .checked_sub(self.view.base_queue_offset);
        let has_next =
            index.is_some_and(|i| i.saturating_add(1) < u64::from(self.view.record_count));
        if !self.holds(prev.physical_offset().get()) || !has_next {
            return Ok(None);
        }
        let at = prev.physical_offset().get() - self.view.physical_offset + u64::from(prev.size());
        self.record_at(at as usize).map(Some)
    }

    /// The record that starts `at` bytes into the entry.
    pub fn record_at(&self, at: usize) -> Result<StoredRecord, Invalid> {
        let view = format::decode_record(&self.bytes, &self.view, at)?;
        Ok(StoredRecord::from_bytes(self.bytes.clone(), view))
    }

    /// The entry's records in order. Each is decoded with every length
    /// checked and must hold the next queue offset; a bad one ends the walk
    /// with its error.
    pub fn records(&self) -> impl Iterator<Item = Result<StoredRecord, Invalid>> + '_ {
        format::RecordWalk::new(&self.bytes, &self.view)
            .map(|r| r.map(|view| StoredRecord::from_bytes(self.bytes.clone(), view)))
    }
}
