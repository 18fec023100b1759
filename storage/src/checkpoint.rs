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

use std::path::Path;

use crate::error::{CorruptionKind, IoContext, Result};
use crate::fs_util;

pub const FILE_NAME: &str = "checkpoint";
pub const MAGIC: u32 = 0x5443_4B50;
pub const VERSION: u16 = 1;
pub const LEN: usize = 36;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    pub commitlog_flushed: u64,
    pub dispatched: u64,
    pub written_at_ms: i64,
}

impl Checkpoint {
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[8..16].copy_from_slice(&self.commitlog_flushed.to_le_bytes());
        b[16..24].copy_from_slice(&self.dispatched.to_le_bytes());
        b[24..32].copy_from_slice(&self.written_at_ms.to_le_bytes());
        let crc = crc32c::crc32c(&b[..32]);
        b[32..36].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> std::result::Result<Checkpoint, CorruptionKind> {
        if b.len() != LEN {
            return Err(CorruptionKind::FileLength {
                len: b.len() as u64,
                expected: LEN as u64,
            });
        }
        let u64_at = |at: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(x)
        };
        let magic = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if magic != MAGIC {
            return Err(CorruptionKind::BadMagic { found: magic });
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != VERSION {
            return Err(CorruptionKind::UnknownVersion { found: version });
        }
        let stored = u32::from_le_bytes([b[32], b[33], b[34], b[35]]);
        let computed = crc32c::crc32c(&b[..32]);
        if stored != computed {
            return Err(CorruptionKind::CrcMismatch { stored, computed });
        }
        Ok(Checkpoint {
            commitlog_flushed: u64_at(8),
            dispatched: u64_at(16),
            written_at_ms: u64_at(24) as i64,
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
