//! A replica's writer path (issue 39): its master's CommitLog bytes placed
//! at the same physical offsets, so the two logs are the same bytes and a
//! replica's data dir is a valid single-node data dir.
//!
//! The bytes come as the master's log holds them, from this log's end:
//! whole entries, and at a segment's end the 20-byte end marker alone
//! (the zeros it stands for are not sent; the next byte is the next
//! segment's first). Each piece is checked as recovery checks the log
//! (CRC, stored physical offset, every record), and more: an entry must
//! fit this node's segment as it fit the master's, an end marker must end
//! where this node's segment ends (the two run with one segment size),
//! and each entry's first queue offset must be where its partition goes
//! on. The whole run is planned and checked before a byte is written, so
//! it lands whole or not at all, as an append does.
//!
//! Once written, the partitions' next queue offsets, the producer state
//! and the transactions move as the master's writer moved them
//! ([`replay_entry`]), and the new committed position is published: the
//! dispatcher then indexes the bytes as it indexes an append, and the
//! flush and checkpoint threads treat them alike.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::format::{self, Decoded, EntryView, END_MARKER_LEN};
use super::replay::{replay_entry, TxnStep};
use super::segment::Segment;
use super::{lock, CommitLog};
use crate::error::{CopyProblem, CorruptionKind, Result, StoreError};

/// A run of a master's log for a replica ([`CommitLog::read_for_copy`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyChunk {
    /// The physical offset of `bytes`' first byte.
    pub at: u64,
    /// Whole entries of one segment, ending with its end marker (20
    /// bytes) if the run reached it.
    pub bytes: Bytes,
    /// Where the next run starts: past the last entry, or the next
    /// segment's base after an end marker.
    pub next: u64,
}

/// What [`CommitLog::append_copy`] placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Copied {
    /// The log's end after the copy.
    pub end: u64,
    pub entries: u64,
    pub records: u64,
}

/// One checked piece of the bytes: an entry, or an end marker.
struct Piece<'a> {
    /// Where it starts in the bytes handed in.
    rel: usize,
    len: usize,
    /// Its physical offset.
    at: u64,
    /// `None` for an end marker; else the entry and its topic.
    entry: Option<(EntryView, &'a str)>,
}

fn refused(position: u64, problem: CopyProblem) -> StoreError {
    StoreError::CopyRefused { position, problem }
}

impl CommitLog {
    /// The master's side: its committed bytes from `from` (an entry
    /// boundary: a replica's log end), as [`CommitLog::append_copy`]
    /// takes them. One segment's run at most, and at most `max_bytes`
    /// unless its first entry alone is larger (it is returned whole: a
    /// replica takes whole entries only). `None` when nothing is
    /// committed past `from`. Refused with [`CopyProblem::Gone`] below
    /// the log's first segment (retention deleted what the replica
    /// lacks).
    pub fn read_for_copy(&self, from: u64, max_bytes: usize) -> Result<Option<CopyChunk>> {
        let committed = self.committed();
        if from >= committed {
            return Ok(None);
        }
        let Some(seg) = self.segment_containing(from) else {
            return Err(refused(
                from,
                CopyProblem::Gone {
                    log_start: self.min_offset(),
                },
            ));
        };
        let rel = (from - seg.base()) as usize;
        let avail = (committed.min(seg.end()) - from) as usize;
        // SAFETY: `[from, from + avail)` is below `committed`.
        let bytes = unsafe { seg.bytes(rel, avail) };
        let corrupt = |at: usize, why: CorruptionKind| {
            StoreError::corruption(seg.path(), (rel + at) as u64, why)
        };
        let mut len = 0usize;
        let mut next = from;
        while len < bytes.len() {
            let pos = from + len as u64;
            if format::decode_end_marker(&bytes[len..], pos)
                .map_err(|why| corrupt(len, why.into()))?
                .is_some()
            {
                len += END_MARKER_LEN;
                next = seg.end();
                break;
            }
            match format::decode(&bytes[len..], pos, false) {
                Ok(Decoded::Entry(v)) => {
                    if len > 0 && len + v.total_len > max_bytes {
                        break;
                    }
                    len += v.total_len;
                    next = from + len as u64;
                }
                Ok(other) => {
                    return Err(corrupt(
                        len,
                        format::Invalid::BadLength(format!(
                            "{other:?} below the committed position"
                        ))
                        .into(),
                    ))
                }
                Err(why) => return Err(corrupt(len, why.into())),
            }
        }
        Ok(Some(CopyChunk {
            at: from,
            bytes: bytes.slice(..len),
            next,
        }))
    }

    /// Place `bytes`, the master's log from physical offset `at`, at the
    /// same offsets here (see the module doc). `at` must be this log's
    /// end. Refused whole, with nothing written, if any piece fails a
    /// check ([`StoreError::CopyRefused`]). Does not wait for a flush:
    /// [`CommitLog::wait_flushed`] or [`CommitLog::flushed`] say when the
    /// copy is durable, which is what a replica confirms.
    pub fn append_copy(&self, at: u64, bytes: &[u8]) -> Result<Copied> {
        let mut deadline = None;
        loop {
            match self.try_copy(at, bytes)? {
                Ok(done) => return Ok(done),
                Err(base) => {
                    let deadline = *deadline.get_or_insert_with(|| {
                        std::time::Instant::now() + super::prealloc::SEGMENT_WAIT_MAX
                    });
                    self.wait_for_segment(base, deadline)?;
                }
            }
        }
    }

    /// One attempt under the writer's lock; `Err(base)`: the segment at
    /// `base` is being made, wait with the lock released and plan again.
    fn try_copy(&self, at: u64, bytes: &[u8]) -> Result<std::result::Result<Copied, u64>> {
        let mut w = lock(&self.writer);
        self.check_poisoned()?;
        if at != w.write_pos {
            return Err(refused(
                at,
                CopyProblem::NotAtEnd {
                    log_end: w.write_pos,
                },
            ));
        }
        // Plan: every piece checked, and every segment it goes to found
        // (or made), before anything is written.
        let mut pieces: Vec<Piece> = Vec::new();
        // Each partition's next queue offset as the pieces so far move it.
        let mut next: HashMap<(&str, u32), u64, ahash::RandomState> = HashMap::default();
        let mut records = 0u64;
        let mut pos = at;
        let mut rel = 0usize;
        let Some(mut seg) = self.segment_for_write(pos)? else {
            return Ok(Err(pos));
        };
        while rel < bytes.len() {
            if pos >= seg.end() {
                seg = match self.segment_for_write(pos)? {
                    Some(s) => s,
                    None => return Ok(Err(pos)),
                };
            }
            let rest = &bytes[rel..];
            let invalid = |why| refused(pos, CopyProblem::Invalid(Box::new(why)));
            if let Some(remaining) = format::decode_end_marker(rest, pos).map_err(invalid)? {
                if pos + remaining != seg.end() {
                    return Err(refused(
                        pos,
                        CopyProblem::SegmentEnd {
                            master_end: pos + remaining,
                            segment_end: seg.end(),
                        },
                    ));
                }
                pieces.push(Piece {
                    rel,
                    len: END_MARKER_LEN,
                    at: pos,
                    entry: None,
                });
                rel += END_MARKER_LEN;
                pos = seg.end();
                continue;
            }
            let v = match format::decode(rest, pos, true) {
                Ok(Decoded::Entry(v)) => v,
                Err(format::Invalid::Truncated { needed, available }) => {
                    return Err(refused(pos, CopyProblem::TornEntry { needed, available }))
                }
                Ok(Decoded::Empty) => {
                    return Err(invalid(format::Invalid::BadLength(
                        "zeros where an entry was sent".into(),
                    )))
                }
                // `decode_end_marker` took every end marker.
                Ok(Decoded::EndOfSegment { .. }) => {
                    return Err(invalid(format::Invalid::BadLength(
                        "an end marker that is not whole".into(),
                    )))
                }
                Err(why) => return Err(invalid(why)),
            };
            // The master's writer rolls before an entry that would leave
            // no room for an end marker after it.
            if pos + (v.total_len + END_MARKER_LEN) as u64 > seg.end() {
                return Err(refused(
                    pos,
                    CopyProblem::SegmentEnd {
                        master_end: pos + v.total_len as u64,
                        segment_end: seg.end(),
                    },
                ));
            }
            let topic = std::str::from_utf8(&rest[v.topic.clone()]).map_err(|_| {
                invalid(format::Invalid::BadLength(
                    "a topic name that is not UTF-8".into(),
                ))
            })?;
            let expected = match next.get(&(topic, v.partition)) {
                Some(&n) => n,
                None => w.next_offsets.get(topic, v.partition).unwrap_or(0),
            };
            if v.base_queue_offset != expected {
                return Err(refused(
                    pos,
                    CopyProblem::QueueOffset {
                        topic: topic.to_string(),
                        partition: v.partition,
                        found: v.base_queue_offset,
                        expected,
                    },
                ));
            }
            next.insert(
                (topic, v.partition),
                v.base_queue_offset + u64::from(v.record_count),
            );
            records += u64::from(v.record_count);
            let len = v.total_len;
            pieces.push(Piece {
                rel,
                len,
                at: pos,
                entry: Some((v, topic)),
            });
            rel += len;
            pos += len as u64;
        }
        let end = pos;
        if pieces.is_empty() {
            return Ok(Ok(Copied {
                end,
                ..Copied::default()
            }));
        }
        if self.zero_fill_ahead {
            self.wait_for_zero_fill(end);
        }

        // Write: the pieces of one segment are one run of the bytes and of
        // the log, ended by an end marker or by the bytes' end.
        let mut run_start = 0usize;
        let mut newest_ts = i64::MIN;
        for (i, p) in pieces.iter().enumerate() {
            if let Some((v, _)) = &p.entry {
                newest_ts = newest_ts.max(v.store_timestamp_ms);
            }
            let last_of_run = p.entry.is_none() || i + 1 == pieces.len();
            if !last_of_run {
                continue;
            }
            let first = &pieces[run_start];
            self.write_run(first.at, &bytes[first.rel..p.rel + p.len])?;
            if let Some(s) = self.segment_containing(first.at) {
                note_run(&s, newest_ts, p.entry.is_none());
            }
            run_start = i + 1;
            newest_ts = i64::MIN;
        }

        // Written: the state moves as the master's writer moved it.
        let mut producers_moved = false;
        let mut topic: Arc<str> = Arc::from("");
        for p in &pieces {
            let Some((v, name)) = &p.entry else { continue };
            if &*topic != *name {
                topic = Arc::from(*name);
            }
            w.next_offsets
                .topic_mut(&topic)
                .insert(v.partition, v.base_queue_offset + u64::from(v.record_count));
            if v.producer.is_none() {
                continue;
            }
            producers_moved = true;
            let step = replay_entry(&mut w.producers, &topic, v);
            let mut txns = self.txns.lock();
            let problem = match step {
                Some(TxnStep::Record {
                    producer_id,
                    offset,
                }) => txns
                    .get_mut(&topic, v.partition)
                    .record(producer_id, offset)
                    .err(),
                Some(TxnStep::Marker {
                    producer_id,
                    offset,
                    commit,
                    position,
                }) => txns
                    .get_mut(&topic, v.partition)
                    .marker(producer_id, offset, commit, position)
                    .err(),
                None => None,
            };
            if let Some(why) = problem {
                // The master's writer checked the same rules before it
                // wrote the entry: only a master whose state differs
                // from this copy's gets here. Kept as recovery keeps it.
                tracing::warn!(%topic, partition = v.partition, position = p.at, %why, "a copied transactional entry the transaction table refuses");
            }
        }
        if producers_moved {
            w.producers_version += 1;
        }
        w.write_pos = end;
        self.committed.store(end, Ordering::Release);
        drop(w);
        self.appended.notify(usize::MAX);
        if self.preallocate {
            self.prealloc.writer_at(end);
        }
        Ok(Ok(Copied {
            end,
            entries: pieces.iter().filter(|p| p.entry.is_some()).count() as u64,
            records,
        }))
    }
}

/// A run was written to `seg`: its newest store time noted (retention by
/// age reads it), and the segment sealed if the run ended it.
fn note_run(seg: &Segment, newest_ts: i64, ended: bool) {
    if newest_ts != i64::MIN {
        seg.note_store_ts(newest_ts);
    }
    if ended {
        seg.seal();
    }
}
