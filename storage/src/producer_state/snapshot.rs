//! The `producer-state` file: a snapshot of [`ProducerStates`] and of the
//! open transactions, written with the store checkpoint, so the state of
//! producers whose entries lie below the recovery scan's start (or in
//! segments retention deleted) survives a restart, and so does every
//! transaction a read_committed reader must wait for.
//!
//! ```text
//! offset  size  field
//!      0     4  magic            u32, MAGIC ("TPRS")
//!      4     2  version          u16, VERSION (2; 1 is read: no open
//!                                transactions, every entry one batch or
//!                                more)
//!      6     2  reserved         0
//!      8     8  log_position     u64, the state holds every producer block
//!                                of the CommitLog below this; recovery
//!                                replays the entries at or past it
//!     16     4  count            u32, entries, at most PRODUCER_ENTRIES_MAX
//!     20        count entries, sorted by producer id, topic, partition:
//!                 producer_id i64 | topic_len u16 (1..=249) | topic |
//!                 partition u32 | epoch i16 | last_timestamp_ms i64 |
//!                 batch_count u8 (0..=5; 0 after a marker of a new
//!                 epoch) | batch_count times:
//!                 first_seq i32 | last_seq i32 | base_offset u64 |
//!                 last_offset u64
//!               version 2 only, the open transactions:
//!               open_count u32, at most OPEN_TXNS_MAX, then open_count
//!                 times, sorted by topic, partition, producer:
//!                 topic_len u16 (1..=249) | topic | partition u32 |
//!                 producer_id i64 | first_offset u64
//!               version 2 only, each partition's count of aborted
//!               transactions (what its aborted.txnindex must hold, so a
//!               lost file is found and rebuilt):
//!               aborted_count u32, at most OPEN_TXNS_MAX, then that many
//!                 times, sorted by topic, partition:
//!                 topic_len u16 | topic | partition u32 | aborted u32
//!  end-4     4  crc              u32, CRC32C of every byte before it
//! ```
//!
//! Invariant: `log_position` is at or below the CommitLog's flushed
//! position when the file is written (the store flushes first), so a power
//! loss can never keep the snapshot of a batch and lose the batch.
//! Replaced atomically (temp file, fsync, rename, fsync directory). A file
//! that does not decode is ignored with a warning: the state is rebuilt
//! from the entries recovery walks, never a refusal to start (Kafka does
//! the same with a bad snapshot).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use super::{BatchMeta, ProducerEntry, ProducerStates, BATCHES_RETAINED, PRODUCER_ENTRIES_MAX};
use crate::codec::{self, U32_LEN};
use crate::commit_log::format::TOPIC_LEN_MAX;
use crate::error::{CorruptionKind, IoContext, Result};
use crate::fs_util;
use crate::txn_index::OpenTxn;
use crate::types::validate_topic_name;

pub const FILE_NAME: &str = "producer-state";
pub const MAGIC: u32 = 0x5450_5253;
pub const VERSION: u16 = 2;
/// The version before open transactions, still read.
pub const VERSION_1: u16 = 1;
/// Most open transactions a snapshot holds: as many as producer entries
/// (a producer has one transaction open per partition at most).
pub const OPEN_TXNS_MAX: usize = PRODUCER_ENTRIES_MAX;
/// Magic, version, reserved, log position, count.
const HEADER_LEN: usize = 20;
const CRC_LEN: usize = U32_LEN;
/// An entry with the longest topic and five batches.
const ENTRY_LEN_MAX: usize = 8 + 2 + TOPIC_LEN_MAX + 4 + 2 + 8 + 1 + BATCHES_RETAINED * 24;
/// An open transaction with the longest topic.
const OPEN_LEN_MAX: usize = 2 + TOPIC_LEN_MAX + 4 + 8 + 8;
/// The largest file a valid snapshot can be: checked before it is read.
const FILE_LEN_MAX: u64 = (HEADER_LEN
    + CRC_LEN
    + PRODUCER_ENTRIES_MAX * ENTRY_LEN_MAX
    + U32_LEN
    + OPEN_TXNS_MAX * OPEN_LEN_MAX) as u64;

/// A partition's count of aborted transactions.
pub type AbortedCount = (Arc<str>, u32, u32);

/// What a snapshot holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub states: ProducerStates,
    /// Sorted by topic, partition, producer.
    pub open_txns: Vec<OpenTxn>,
    /// Sorted by topic, partition; partitions with none left out.
    pub aborted: Vec<AbortedCount>,
    /// The log position both cover.
    pub position: u64,
}

/// Encode `states` and `open_txns` as covering the log below
/// `log_position`.
pub fn encode(
    states: &ProducerStates,
    open_txns: &[OpenTxn],
    aborted: &[AbortedCount],
    log_position: u64,
) -> Vec<u8> {
    let sorted = states.sorted();
    let mut b = Vec::with_capacity(HEADER_LEN + CRC_LEN + sorted.len() * 64);
    codec::push_u32(&mut b, MAGIC);
    codec::push_u16(&mut b, VERSION);
    codec::push_u16(&mut b, 0);
    codec::push_u64(&mut b, log_position);
    codec::push_u32(&mut b, sorted.len() as u32);
    for ((producer_id, topic, partition), e) in sorted {
        codec::push_u64(&mut b, *producer_id as u64);
        codec::push_u16(&mut b, topic.len() as u16);
        b.extend_from_slice(topic.as_bytes());
        codec::push_u32(&mut b, *partition);
        codec::push_u16(&mut b, e.epoch as u16);
        codec::push_u64(&mut b, e.last_timestamp_ms as u64);
        b.push(e.batches.len() as u8);
        for m in &e.batches {
            codec::push_u32(&mut b, m.first_seq as u32);
            codec::push_u32(&mut b, m.last_seq as u32);
            codec::push_u64(&mut b, m.base_offset);
            codec::push_u64(&mut b, m.last_offset);
        }
    }
    let mut open: Vec<&OpenTxn> = open_txns.iter().collect();
    open.sort();
    codec::push_u32(&mut b, open.len() as u32);
    for (topic, partition, producer_id, first) in open {
        codec::push_u16(&mut b, topic.len() as u16);
        b.extend_from_slice(topic.as_bytes());
        codec::push_u32(&mut b, *partition);
        codec::push_u64(&mut b, *producer_id as u64);
        codec::push_u64(&mut b, *first);
    }
    let mut counts: Vec<&AbortedCount> = aborted.iter().filter(|a| a.2 > 0).collect();
    counts.sort();
    codec::push_u32(&mut b, counts.len() as u32);
    for (topic, partition, n) in counts {
        codec::push_u16(&mut b, topic.len() as u16);
        b.extend_from_slice(topic.as_bytes());
        codec::push_u32(&mut b, *partition);
        codec::push_u32(&mut b, *n);
    }
    let crc = crc32c::crc32c(&b);
    codec::push_u32(&mut b, crc);
    b
}

/// A topic name (`topic_len` u16, then the name), checked as a topic
/// name; `bad` words a refusal for the entry it is in.
fn read_topic<'a>(
    r: &mut codec::Reader<'a>,
    bad: impl Fn(String) -> CorruptionKind,
) -> std::result::Result<&'a str, CorruptionKind> {
    let topic_len = r.u16()? as usize;
    if topic_len == 0 || topic_len > TOPIC_LEN_MAX {
        return Err(bad(format!("topic of {topic_len} bytes")));
    }
    let topic =
        std::str::from_utf8(r.take(topic_len)?).map_err(|_| bad("topic is not UTF-8".into()))?;
    validate_topic_name(topic).map_err(|e| bad(e.to_string()))?;
    Ok(topic)
}

/// A section's entry count, refused past `max` before anything is
/// allocated for it.
fn read_count(r: &mut codec::Reader<'_>, max: usize) -> std::result::Result<u32, CorruptionKind> {
    let count = r.u32()?;
    if count as usize > max {
        return Err(CorruptionKind::TooManyEntries {
            count,
            max: max as u32,
        });
    }
    Ok(count)
}

/// Decode a snapshot (version 2, or 1).
pub fn decode(b: &[u8]) -> std::result::Result<Snapshot, CorruptionKind> {
    const WHAT: &str = "producer-state snapshot";
    let (mut r, version) = match codec::crc_framed_table(b, WHAT, HEADER_LEN, MAGIC, VERSION) {
        Err(CorruptionKind::UnknownVersion { found: VERSION_1 }) => (
            codec::crc_framed_table(b, WHAT, HEADER_LEN, MAGIC, VERSION_1)?,
            VERSION_1,
        ),
        other => (other?, VERSION),
    };
    let min_batches = if version == VERSION_1 { 1 } else { 0 };
    let log_position = r.u64()?;
    let count = read_count(&mut r, PRODUCER_ENTRIES_MAX)?;
    let mut out = ProducerStates::default();
    for i in 0..count {
        let bad = |reason: String| CorruptionKind::BadTopicEntry { entry: i, reason };
        let producer_id = r.u64()? as i64;
        let topic = read_topic(&mut r, bad)?;
        let partition = r.u32()?;
        let epoch = r.u16()? as i16;
        let last_timestamp_ms = r.u64()? as i64;
        let batch_count = r.take(1)?[0] as usize;
        if producer_id < 0 || epoch < 0 || !(min_batches..=BATCHES_RETAINED).contains(&batch_count)
        {
            return Err(bad(format!(
                "producer {producer_id}, epoch {epoch}, {batch_count} batches"
            )));
        }
        let mut batches = VecDeque::with_capacity(batch_count);
        for _ in 0..batch_count {
            let m = BatchMeta {
                first_seq: r.u32()? as i32,
                last_seq: r.u32()? as i32,
                base_offset: r.u64()?,
                last_offset: r.u64()?,
            };
            if m.first_seq < 0 || m.last_seq < 0 || m.last_offset < m.base_offset {
                return Err(bad(format!("batch {m:?}")));
            }
            batches.push_back(m);
        }
        out.insert(
            (producer_id, Arc::from(topic), partition),
            ProducerEntry {
                epoch,
                batches,
                last_timestamp_ms,
            },
        );
    }
    if out.len() != count as usize {
        return Err(CorruptionKind::BadTopicEntry {
            entry: count,
            reason: "an entry appears twice".into(),
        });
    }
    let mut open_txns = Vec::new();
    let mut aborted: Vec<AbortedCount> = Vec::new();
    if version != VERSION_1 {
        let open_count = read_count(&mut r, OPEN_TXNS_MAX)?;
        for i in 0..open_count {
            let bad = |reason: String| CorruptionKind::BadTopicEntry {
                entry: count + i,
                reason,
            };
            let topic = read_topic(&mut r, bad)?;
            let partition = r.u32()?;
            let producer_id = r.u64()? as i64;
            let first = r.u64()?;
            if producer_id < 0 {
                return Err(bad(format!("producer {producer_id}")));
            }
            let open: OpenTxn = (Arc::from(topic), partition, producer_id, first);
            if open_txns.last().is_some_and(|prev: &OpenTxn| {
                (&prev.0, prev.1, prev.2) >= (&open.0, open.1, open.2)
            }) {
                return Err(bad("open transactions out of order, or one twice".into()));
            }
            open_txns.push(open);
        }
        for i in 0..read_count(&mut r, OPEN_TXNS_MAX)? {
            let bad = |reason: String| CorruptionKind::BadTopicEntry {
                entry: count + open_count + i,
                reason,
            };
            let topic = read_topic(&mut r, bad)?;
            let partition = r.u32()?;
            let k = r.u32()?;
            if aborted
                .last()
                .is_some_and(|prev| (&*prev.0, prev.1) >= (topic, partition))
                || k == 0
            {
                return Err(bad("aborted counts out of order, twice, or zero".into()));
            }
            aborted.push((Arc::from(topic), partition, k));
        }
    }
    if r.remaining() != 0 {
        return Err(CorruptionKind::TrailingBytes {
            count: r.remaining(),
        });
    }
    Ok(Snapshot {
        states: out,
        open_txns,
        aborted,
        position: log_position,
    })
}

/// What [`load`] found.
#[derive(Debug)]
pub enum Loaded {
    Snapshot(Snapshot),
    Missing,
    /// The file is there but does not decode (already logged at warn).
    Damaged,
}

/// Read `<dir>/producer-state`. A damaged file is logged and reported as
/// [`Loaded::Damaged`], never an error: the state is rebuilt from the log.
pub fn load(dir: &Path) -> Result<Loaded> {
    let path = dir.join(FILE_NAME);
    let bytes = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::Missing),
        Err(e) => return Err(e).at(&path),
        Ok(meta) if meta.len() > FILE_LEN_MAX => Err(CorruptionKind::FileTooLarge {
            len: meta.len(),
            max: FILE_LEN_MAX,
        }),
        Ok(_) => Ok(std::fs::read(&path).at(&path)?),
    };
    match bytes.and_then(|b| decode(&b)) {
        Ok(snapshot) => Ok(Loaded::Snapshot(snapshot)),
        Err(why) => {
            tracing::warn!(path = %path.display(), %why, "the producer-state snapshot is damaged; ignoring it and rebuilding producer state from the commit log entries recovery reads");
            Ok(Loaded::Damaged)
        }
    }
}

/// Replace `<dir>/producer-state` atomically and durably. The caller has
/// flushed the CommitLog up to `log_position`.
pub fn store(
    dir: &Path,
    states: &ProducerStates,
    open_txns: &[OpenTxn],
    aborted: &[AbortedCount],
    log_position: u64,
) -> Result<()> {
    fs_util::write_atomic(
        &dir.join(FILE_NAME),
        &encode(states, open_txns, aborted, log_position),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer_state::ProducerBatch;

    fn sample() -> ProducerStates {
        let t: Arc<str> = Arc::from("orders");
        let mut s = ProducerStates::default();
        let p = ProducerBatch {
            producer_id: 5,
            epoch: 2,
            base_sequence: 0,
            transactional: false,
        };
        s.record(&t, 3, &p, 2, 40, 1_700_000_000_000);
        s
    }

    fn open_sample() -> Vec<OpenTxn> {
        vec![(Arc::from("orders"), 3, 5, 40)]
    }

    fn aborted_sample() -> Vec<AbortedCount> {
        vec![(Arc::from("orders"), 3, 2)]
    }

    /// A version-1 file (before open transactions), as written before:
    /// still read, with no transaction open.
    #[test]
    fn version_1_is_read() {
        #[rustfmt::skip]
        let v1: &[u8] = &[
            0x53, 0x52, 0x50, 0x54, // magic "TPRS"
            0x01, 0x00, 0x00, 0x00, // version 1, reserved
            0x00, 0x20, 0, 0, 0, 0, 0, 0, // log_position 8192
            0x01, 0x00, 0x00, 0x00, // count 1
            0x05, 0, 0, 0, 0, 0, 0, 0, // producer_id 5
            0x06, 0x00, b'o', b'r', b'd', b'e', b'r', b's', // topic
            0x03, 0x00, 0x00, 0x00, // partition 3
            0x02, 0x00, // epoch 2
            0x00, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, // last_timestamp_ms
            0x01, // one batch
            0x00, 0x00, 0x00, 0x00, // first_seq 0
            0x01, 0x00, 0x00, 0x00, // last_seq 1
            0x28, 0, 0, 0, 0, 0, 0, 0, // base_offset 40
            0x29, 0, 0, 0, 0, 0, 0, 0, // last_offset 41
            0xe4, 0x35, 0x37, 0xad, // crc
        ];
        let snap = decode(v1).unwrap();
        assert_eq!(snap.position, 8192);
        assert_eq!(snap.states, sample());
        assert!(snap.open_txns.is_empty());
        // Version 1 never held an entry without a batch.
        let mut empty = v1[..48].to_vec();
        empty.push(0);
        let crc = crc32c::crc32c(&empty);
        empty.extend_from_slice(&crc.to_le_bytes());
        assert!(decode(&empty).is_err());
    }

    /// The file's bytes written out by hand (see docs/formats.md).
    #[test]
    fn golden_bytes() {
        #[rustfmt::skip]
        let mut want: Vec<u8> = vec![
            0x53, 0x52, 0x50, 0x54, // magic "TPRS"
            0x02, 0x00, 0x00, 0x00, // version 2, reserved
            0x00, 0x20, 0, 0, 0, 0, 0, 0, // log_position 8192
            0x01, 0x00, 0x00, 0x00, // count 1
            0x05, 0, 0, 0, 0, 0, 0, 0, // producer_id 5
            0x06, 0x00, b'o', b'r', b'd', b'e', b'r', b's', // topic
            0x03, 0x00, 0x00, 0x00, // partition 3
            0x02, 0x00, // epoch 2
            0x00, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, // last_timestamp_ms
            0x01, // one batch
            0x00, 0x00, 0x00, 0x00, // first_seq 0
            0x01, 0x00, 0x00, 0x00, // last_seq 1
            0x28, 0, 0, 0, 0, 0, 0, 0, // base_offset 40
            0x29, 0, 0, 0, 0, 0, 0, 0, // last_offset 41
            0x01, 0x00, 0x00, 0x00, // open_count 1
            0x06, 0x00, b'o', b'r', b'd', b'e', b'r', b's', // topic
            0x03, 0x00, 0x00, 0x00, // partition 3
            0x05, 0, 0, 0, 0, 0, 0, 0, // producer_id 5
            0x28, 0, 0, 0, 0, 0, 0, 0, // first_offset 40
            0x01, 0x00, 0x00, 0x00, // aborted_count 1
            0x06, 0x00, b'o', b'r', b'd', b'e', b'r', b's', // topic
            0x03, 0x00, 0x00, 0x00, // partition 3
            0x02, 0x00, 0x00, 0x00, // 2 aborted
        ];
        // The CRC computed independently of the encoder.
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        let got = encode(&sample(), &open_sample(), &aborted_sample(), 8192);
        assert_eq!(got, want);
        let snap = decode(&want).unwrap();
        assert_eq!(snap.position, 8192);
        assert_eq!(snap.states, sample());
        assert_eq!(snap.open_txns, open_sample());
        assert_eq!(snap.aborted, aborted_sample());
        let e = snap.states.get(5, "orders", 3).unwrap();
        assert_eq!(e.epoch, 2);
        assert_eq!(e.last_timestamp_ms, 1_700_000_000_000);
        assert_eq!(
            e.batches.iter().copied().collect::<Vec<_>>(),
            [BatchMeta {
                first_seq: 0,
                last_seq: 1,
                base_offset: 40,
                last_offset: 41
            }]
        );
        // An entry with no batch (a marker's new epoch) round-trips.
        let mut s = sample();
        s.marker(&Arc::from("orders"), 4, 6, 1, 7);
        let snap = decode(&encode(&s, &[], &[], 1)).unwrap();
        assert_eq!(snap.states, s);
        assert!(snap.states.get(6, "orders", 4).unwrap().batches.is_empty());
    }

    #[test]
    fn every_damage_is_refused_and_loads_as_damaged() {
        let good = encode(&sample(), &open_sample(), &aborted_sample(), 8192);
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x10;
            assert!(decode(&b).is_err(), "flip at {i} accepted");
        }
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut} accepted");
        }
        // A count too large is refused before anything is allocated.
        let mut b = good[..good.len() - CRC_LEN].to_vec();
        b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            decode(&b),
            Err(CorruptionKind::TooManyEntries { .. })
        ));
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(load(dir.path()).unwrap(), Loaded::Missing));
        std::fs::write(dir.path().join(FILE_NAME), b"garbage").unwrap();
        assert!(matches!(load(dir.path()).unwrap(), Loaded::Damaged));
        store(dir.path(), &sample(), &open_sample(), &aborted_sample(), 77).unwrap();
        match load(dir.path()).unwrap() {
            Loaded::Snapshot(s) => {
                assert_eq!(
                    (s.states, s.open_txns, s.position),
                    (sample(), open_sample(), 77)
                )
            }
            other => panic!("{other:?}"),
        }
    }
}
