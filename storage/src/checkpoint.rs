//! The `checkpoint` file: durable positions that bound recovery work.
//!
//! ```text
//! offset  size  field
//!      0     4  magic               u32, MAGIC ("TCKP")
//!      4     2  version             u16, VERSION
//!      6     2  reserved            0
//!      8     8  commitlog_flushed   u64, CommitLog bytes below this were fsynced
//!     16     8  dispatched          u64, records below this are in every
//!                                   index (ConsumeQueue, IndexFile, sinks)
//!                                   and those indexes were flushed
//!     24     8  written_at_ms       i64, wall-clock time of writing
//!     32     4  crc                 u32, CRC32C of bytes [0, 32)
//! ```
//! Written with temp → fsync → rename → fsync dir, so it is always whole.
//! Positions, not timestamps: recovery starts scanning at
//! min(`dispatched`, `commitlog_flushed`), and `dispatched` is never
//! written above `commitlog_flushed`. A damaged checkpoint is ignored (with
//! a warning): recovery then scans the whole log, which is always right.
//!
//! Writing it is `CheckpointWriter`'s: the indexes and sinks flushed,
//! then the files recovery compares them with (`queue-ends`, `index-end`),
//! a cluster node's `high-watermark` and the producer-state snapshot,
//! then this file; so everything below the `dispatched` it records is
//! durable in every index, and the snapshot never holds a batch the
//! flushed log lost.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::codec::{get_i64, get_u16, get_u32, get_u64, put_i64, put_u16, put_u32, put_u64};
use crate::codec::{U16_LEN, U32_LEN, U64_LEN};
use crate::commit_log::CommitLog;
use crate::consume_queue::ends::QueueEnds;
use crate::consume_queue::ConsumeQueues;
use crate::dispatch::Dispatcher;
use crate::error::{CorruptionKind, IoContext, Result};
use crate::fs_util;
use crate::index_file::IndexService;
use crate::types::now_ms;

pub const FILE_NAME: &str = "checkpoint";
pub const MAGIC: u32 = 0x5443_4B50;
pub const VERSION: u16 = 1;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = OFF_MAGIC + U32_LEN;
const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
const OFF_FLUSHED: usize = OFF_RESERVED + U16_LEN;
const OFF_DISPATCHED: usize = OFF_FLUSHED + U64_LEN;
const OFF_WRITTEN_AT: usize = OFF_DISPATCHED + U64_LEN;
/// The CRC covers every byte before it.
const OFF_CRC: usize = OFF_WRITTEN_AT + U64_LEN;
pub const LEN: usize = OFF_CRC + U32_LEN;
const _: () = assert!(LEN == 36);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    pub commitlog_flushed: u64,
    pub dispatched: u64,
    pub written_at_ms: i64,
}

impl Checkpoint {
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        put_u32(&mut b, OFF_MAGIC, MAGIC);
        put_u16(&mut b, OFF_VERSION, VERSION);
        put_u64(&mut b, OFF_FLUSHED, self.commitlog_flushed);
        put_u64(&mut b, OFF_DISPATCHED, self.dispatched);
        put_i64(&mut b, OFF_WRITTEN_AT, self.written_at_ms);
        let crc = crc32c::crc32c(&b[..OFF_CRC]);
        put_u32(&mut b, OFF_CRC, crc);
        b
    }

    pub fn decode(b: &[u8]) -> std::result::Result<Checkpoint, CorruptionKind> {
        if b.len() != LEN {
            return Err(CorruptionKind::FileLength {
                len: b.len() as u64,
                expected: LEN as u64,
            });
        }
        // The length is checked: the fixed offsets below are in bounds.
        let magic = get_u32(b, OFF_MAGIC);
        if magic != MAGIC {
            return Err(CorruptionKind::BadMagic { found: magic });
        }
        let version = get_u16(b, OFF_VERSION);
        if version != VERSION {
            return Err(CorruptionKind::UnknownVersion { found: version });
        }
        let stored = get_u32(b, OFF_CRC);
        let computed = crc32c::crc32c(&b[..OFF_CRC]);
        if stored != computed {
            return Err(CorruptionKind::CrcMismatch { stored, computed });
        }
        Ok(Checkpoint {
            commitlog_flushed: get_u64(b, OFF_FLUSHED),
            dispatched: get_u64(b, OFF_DISPATCHED),
            written_at_ms: get_i64(b, OFF_WRITTEN_AT),
        })
    }

    /// Read `<dir>/checkpoint`; `None` if there is none yet, or if it is
    /// damaged. The checkpoint only bounds recovery work: without it
    /// recovery scans the whole CommitLog and rebuilds every index from it,
    /// which is slower but always right, so a damaged one is logged and
    /// treated as missing rather than stopping start-up.
    pub fn load(dir: &Path) -> Result<Option<Checkpoint>> {
        let path = dir.join(FILE_NAME);
        let bytes = match std::fs::metadata(&path) {
            Ok(meta) if meta.len() != LEN as u64 => Err(CorruptionKind::FileLength {
                len: meta.len(),
                expected: LEN as u64,
            }),
            Ok(_) => Ok(std::fs::read(&path).at(&path)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).at(&path),
        };
        match bytes.and_then(|b| Checkpoint::decode(&b)) {
            Ok(cp) => Ok(Some(cp)),
            Err(why) => {
                tracing::warn!(path = %path.display(), %why, "the checkpoint is damaged; ignoring it and recovering with a full scan of the commit log");
                Ok(None)
            }
        }
    }

    pub fn store(&self, dir: &Path) -> Result<()> {
        fs_util::write_atomic(&dir.join(FILE_NAME), &self.encode())
    }
}

/// Writes the checkpoint and, before it, the files whose positions it
/// vouches for (`queue-ends`, `index-end`, the producer-state snapshot):
/// the store's one writer of them (its flush thread, shutdown, open and
/// a manual checkpoint), serialised by `lock`. Each of those files is
/// written only when it changed since the last one this writer wrote.
#[derive(Debug, Default)]
pub(crate) struct CheckpointWriter {
    /// Serialises checkpoint writers (flush thread and shutdown).
    lock: Mutex<()>,
    /// The producer-state version the last snapshot written holds.
    producer_snapshot_version: AtomicU64,
    /// The `queue-ends` table last written (none yet in this run).
    queue_ends_stored: Mutex<Option<QueueEnds>>,
    /// The `index-end` last written (none yet in this run).
    index_end_stored: Mutex<Option<u64>>,
    /// The `high-watermark` last written (none yet in this run).
    high_watermark_stored: Mutex<Option<u64>>,
}

impl CheckpointWriter {
    /// Write the checkpoint: flush the indexes first, so that everything
    /// below the recorded dispatched position is durable in them. Raises
    /// `durable_dispatched` (what retention may delete below) to the
    /// position written.
    pub(crate) fn write(
        &self,
        data_dir: &Path,
        log: &CommitLog,
        dispatcher: &Dispatcher,
        queues: &ConsumeQueues,
        index: &IndexService,
        durable_dispatched: &AtomicU64,
    ) -> Result<()> {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // What every sink has written, not only taken: the dispatcher
        // moves `dispatched` entry by entry and the compacted logs write
        // an entry's copies at the round's end, so a checkpoint between
        // the two claimed copies the flush below never saw, and after a
        // power loss recovery did not hand them over again (the
        // power-loss test caught a compacted log one record short).
        let dispatched = dispatcher.published();
        dispatcher.flush_sinks()?;
        let flushed = log.flushed();
        // Claim only what is on disk in the log too: recovery and retention
        // trust `dispatched`, and indexes pointing past the flushed log
        // would point at zeros after a power loss.
        let dispatched = dispatched.min(flushed);
        // Each queue's end as of `dispatched`: its units were written
        // before the flush above, so they are durable, and they point
        // into flushed log bytes, which a power loss cannot take
        // (`consume_queue::ends`).
        self.store_queue_ends(data_dir, queues.ends_at(dispatched))?;
        self.store_index_end(data_dir, index.end_below(dispatched))?;
        crate::high_watermark::store_if_moved(
            data_dir,
            log,
            &mut self
                .high_watermark_stored
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )?;
        self.store_producer_snapshot(data_dir, log)?;
        Checkpoint {
            commitlog_flushed: flushed,
            dispatched,
            written_at_ms: now_ms(),
        }
        .store(data_dir)?;
        durable_dispatched.fetch_max(dispatched, Ordering::AcqRel);
        Ok(())
    }

    /// Replace `queue-ends` with `ends` if they changed since the last
    /// one written. Before the checkpoint: recovery compares the queues
    /// with the newest one either way (its ends are durable in the queues
    /// whichever checkpoint follows).
    fn store_queue_ends(&self, data_dir: &Path, ends: QueueEnds) -> Result<()> {
        let mut last = self
            .queue_ends_stored
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if last.as_ref() == Some(&ends) {
            return Ok(());
        }
        ends.store(&data_dir.join(crate::consume_queue::ends::FILE_NAME))?;
        *last = Some(ends);
        Ok(())
    }

    /// Replace `index-end` with `end` if it moved since the last one
    /// written (`index_file::end`).
    fn store_index_end(&self, data_dir: &Path, end: u64) -> Result<()> {
        let mut last = self
            .index_end_stored
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if *last == Some(end) {
            return Ok(());
        }
        crate::index_file::end::IndexEnd::new(end).store(data_dir)?;
        *last = Some(end);
        Ok(())
    }

    /// Write the producer-state snapshot if the state changed since the
    /// last one: after the checkpoint's positions were read (so the
    /// snapshot's position is at or past the recovery start the checkpoint
    /// will name) and before the checkpoint is written, with the log
    /// flushed up to the snapshot's position first (so a power loss can
    /// never keep a batch in the snapshot and lose it from the log). A
    /// failure fails the checkpoint: the old pair stays consistent.
    fn store_producer_snapshot(&self, data_dir: &Path, log: &CommitLog) -> Result<()> {
        let since = self.producer_snapshot_version.load(Ordering::Acquire);
        let Some(snap) = log.producer_snapshot(since) else {
            return Ok(());
        };
        if log.flushed() < snap.position {
            log.flush_all()?;
        }
        crate::producer_state::snapshot::store(
            data_dir,
            &snap.states,
            &snap.open_txns,
            &snap.aborted,
            snap.position,
        )?;
        self.producer_snapshot_version
            .store(snap.version, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_through_disk() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Checkpoint::load(dir.path()).unwrap(), None);
        let cp = Checkpoint {
            commitlog_flushed: 1 << 33,
            dispatched: 12345,
            written_at_ms: 1_700_000_000_000,
        };
        cp.store(dir.path()).unwrap();
        assert_eq!(Checkpoint::load(dir.path()).unwrap(), Some(cp));
    }

    /// The file's bytes written out by hand (see docs/formats.md).
    #[test]
    fn golden_bytes() {
        #[rustfmt::skip]
        let want: [u8; LEN] = [
            0x50, 0x4b, 0x43, 0x54, // magic "TCKP"
            0x01, 0x00, 0x00, 0x00, // version 1, reserved
            0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, // commitlog_flushed 2^32 + 5
            0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // dispatched 4096
            0x00, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, // written_at_ms
            0xb7, 0x40, 0x4c, 0xca, // crc
        ];
        let cp = Checkpoint {
            commitlog_flushed: (1 << 32) + 5,
            dispatched: 4096,
            written_at_ms: 1_700_000_000_000,
        };
        assert_eq!(cp.encode(), want);
        assert_eq!(Checkpoint::decode(&want), Ok(cp));
    }

    #[test]
    fn bad_checkpoints_are_refused_and_read_as_missing() {
        let good = Checkpoint {
            commitlog_flushed: 1,
            dispatched: 2,
            written_at_ms: 3,
        }
        .encode();
        for i in 0..LEN {
            let mut b = good;
            b[i] ^= 0x01;
            assert!(Checkpoint::decode(&b).is_err(), "flip at {i} accepted");
        }
        assert!(Checkpoint::decode(&good[..LEN - 1]).is_err());
        assert!(matches!(
            Checkpoint::decode(&good[..LEN - 1]),
            Err(CorruptionKind::FileLength {
                len: 35,
                expected: 36
            })
        ));
        let mut flipped = good;
        flipped[OFF_CRC] ^= 1;
        assert!(matches!(
            Checkpoint::decode(&flipped),
            Err(CorruptionKind::CrcMismatch { .. })
        ));
        assert!(Checkpoint::decode(&[]).is_err());
        // On disk: a short file, and a whole one with a flipped byte.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), b"garbage").unwrap();
        assert_eq!(Checkpoint::load(dir.path()).unwrap(), None);
        let mut flipped = good;
        flipped[17] ^= 0x40;
        std::fs::write(dir.path().join(FILE_NAME), flipped).unwrap();
        assert_eq!(Checkpoint::load(dir.path()).unwrap(), None);
    }
}
