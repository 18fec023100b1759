//! Records as the store takes them in and hands them out.

use std::sync::Arc;

use bytes::Bytes;

use super::format::{self, Header, RecordView};
use super::segment::Segment;
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub queue_offset: QueueOffset,
    pub physical_offset: PhysicalOffset,
    pub size: u32,
}

/// A record read back from the log. Key, value and headers share the mapped
/// segment's memory: no copy, and the segment stays mapped while they live.
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
    /// # Safety
    /// `[at, at + view.total_len)` of `segment` is committed (see
    /// `Segment::bytes`) and `view` was decoded from exactly those bytes.
    pub(crate) unsafe fn from_segment(segment: &Arc<Segment>, at: usize, view: RecordView) -> Self {
        // SAFETY: forwarded from the caller.
        let bytes = unsafe { segment.bytes(at, view.total_len) };
        StoredRecord { bytes, view }
    }

    /// Build from an owned copy of the record's bytes (tests, tools).
    pub fn from_bytes(bytes: Bytes, view: RecordView) -> Self {
        StoredRecord { bytes, view }
    }

    /// The topic's bytes (valid UTF-8), for cheap comparisons on hot paths:
    /// [`StoredRecord::topic`] checks the UTF-8 again on every call.
    pub fn topic_bytes(&self) -> &[u8] {
        &self.bytes[self.view.topic.clone()]
    }

    pub fn topic(&self) -> &str {
        // Validated as a topic name (ASCII) when decoded.
        std::str::from_utf8(&self.bytes[self.view.topic.clone()]).unwrap_or_default()
    }

    pub fn partition(&self) -> u32 {
        self.view.partition
    }

    pub fn queue_offset(&self) -> QueueOffset {
        QueueOffset(self.view.queue_offset)
    }

    pub fn physical_offset(&self) -> PhysicalOffset {
        PhysicalOffset(self.view.physical_offset)
    }

    /// Bytes the record occupies in the log.
    pub fn size(&self) -> u32 {
        self.view.total_len as u32
    }

    pub fn store_timestamp_ms(&self) -> i64 {
        self.view.store_timestamp_ms
    }

    pub fn timestamp_ms(&self) -> i64 {
        self.view.producer_timestamp_ms
    }

    pub fn key(&self) -> Option<Bytes> {
        self.view.key.clone().map(|r| self.bytes.slice(r))
    }

    /// `None` for a tombstone.
    pub fn value(&self) -> Option<Bytes> {
        self.view.value.clone().map(|r| self.bytes.slice(r))
    }

    /// The key, borrowed: no reference count taken, for callers that only
    /// copy or encode it.
    pub fn key_slice(&self) -> Option<&[u8]> {
        self.view.key.clone().map(|r| &self.bytes[r])
    }

    /// The value, borrowed (`None` for a tombstone).
    pub fn value_slice(&self) -> Option<&[u8]> {
        self.view.value.clone().map(|r| &self.bytes[r])
    }

    pub fn is_tombstone(&self) -> bool {
        self.view.flags & format::FLAG_HAS_VALUE == 0
    }

    pub fn headers(&self) -> Vec<Header> {
        format::decode_headers(
            &self.bytes.slice(self.view.headers.clone()),
            self.view.header_count,
        )
    }

    /// The encoded header block and its entry count, for copying a record's
    /// headers verbatim into another log (see `format::decode_headers`).
    pub fn headers_block(&self) -> (Bytes, usize) {
        (
            self.bytes.slice(self.view.headers.clone()),
            self.view.header_count,
        )
    }

    /// The whole encoded record, as it sits in the log.
    pub fn raw(&self) -> &Bytes {
        &self.bytes
    }
}
