//! The `index-end` file: where the IndexFiles ended at a checkpoint.
//!
//! A position file ([`crate::position_file`], 28 bytes, magic "TIXE"):
//! `position` is `end`, one past the physical offset of the newest
//! IndexFile entry for a record below the checkpoint's `dispatched` (0:
//! none).
//!
//! Written before the checkpoint file, and only when `end` moved.
//!
//! Why it exists: recovery trusts the checkpoint's `dispatched` position,
//! so an IndexFile lost after a checkpoint (deleted by hand, a bad disk)
//! would silently make lookups by key miss the records it held. Invariant:
//! every entry below `end` was flushed before the file was written, and
//! points at flushed CommitLog bytes (entries past `dispatched` are not
//! claimed: a power loss may take their records). Retention keeps the
//! newest IndexFile, so the end survives it. At open, IndexFiles that end
//! below `end` lost their newest file (or all of them): recovery
//! re-dispatches from just after the newest surviving entry (from the
//! log's start if none survives), with a warning. A missing file (a data
//! dir of an older tidelog) means nothing to compare until the first
//! checkpoint writes it; a damaged one is logged and the IndexFiles are
//! rebuilt from the log's start (the file is derived data). A lost file
//! that is not the newest is not noticed this way.

use std::path::Path;

use crate::error::Result;
use crate::position_file::{Position, PositionFile};

pub const FILE_NAME: &str = "index-end";
pub const MAGIC: u32 = 0x5449_5845;
const FILE: PositionFile = PositionFile {
    name: FILE_NAME,
    magic: MAGIC,
};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexEnd {
    pub end: u64,
    pub written_at_ms: i64,
}

impl IndexEnd {
    pub fn new(end: u64) -> IndexEnd {
        IndexEnd::from(Position::now(end))
    }

    /// Read `<dir>/index-end`; `None` if there is none.
    pub fn load(dir: &Path) -> Result<Option<IndexEnd>> {
        Ok(FILE.load(dir)?.map(IndexEnd::from))
    }

    pub fn store(&self, dir: &Path) -> Result<()> {
        FILE.store(
            dir,
            Position {
                position: self.end,
                written_at_ms: self.written_at_ms,
            },
        )
    }
}

impl From<Position> for IndexEnd {
    fn from(p: Position) -> IndexEnd {
        IndexEnd {
            end: p.position,
            written_at_ms: p.written_at_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This kind's bytes as written (the layout's checks are tested in
    /// `position_file`).
    #[test]
    fn golden_bytes_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(IndexEnd::load(dir.path()).unwrap(), None);
        let written = IndexEnd {
            end: 0x0102,
            written_at_ms: 7,
        };
        written.store(dir.path()).unwrap();
        #[rustfmt::skip]
        let mut want = vec![
            0x45, 0x58, 0x49, 0x54, // magic "TIXE" little endian
            1, 0, 0, 0, // version, reserved
            0x02, 0x01, 0, 0, 0, 0, 0, 0, // end
            7, 0, 0, 0, 0, 0, 0, 0, // written_at_ms
        ];
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(std::fs::read(dir.path().join("index-end")).unwrap(), want);
        assert_eq!(IndexEnd::load(dir.path()).unwrap(), Some(written));
    }
}
