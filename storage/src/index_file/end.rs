//! The `index-end` file: where the IndexFiles ended at a checkpoint.
//!
//! ```text
//! offset  size  field
//!      0     4  magic          u32, MAGIC ("TIXE")
//!      4     2  version        u16, VERSION
//!      6     2  reserved       0
//!      8     8  end            u64, one past the physical offset of the
//!                              newest IndexFile entry for a record below
//!                              the checkpoint's `dispatched` (0: none)
//!     16     8  written_at_ms  i64, wall-clock time of writing
//!     24     4  crc            u32, CRC32C of bytes [0, 24)
//! ```
//! Written with temp → fsync → rename → fsync dir, before the checkpoint
//! file and only when `end` moved.
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

use crate::codec::{get_i64, get_u16, get_u32, get_u64, put_i64, put_u16, put_u32, put_u64};
use crate::codec::{U16_LEN, U32_LEN, U64_LEN};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;
use crate::types::now_ms;

pub const FILE_NAME: &str = "index-end";
pub const MAGIC: u32 = 0x5449_5845;
pub const VERSION: u16 = 1;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = OFF_MAGIC + U32_LEN;
const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
const OFF_END: usize = OFF_RESERVED + U16_LEN;
const OFF_WRITTEN_AT: usize = OFF_END + U64_LEN;
/// The CRC covers every byte before it.
const OFF_CRC: usize = OFF_WRITTEN_AT + U64_LEN;
pub const LEN: usize = OFF_CRC + U32_LEN;
const _: () = assert!(LEN == 28);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexEnd {
    pub end: u64,
    pub written_at_ms: i64,
}

impl IndexEnd {
    pub fn new(end: u64) -> IndexEnd {
        IndexEnd {
            end,
            written_at_ms: now_ms(),
        }
    }

    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        put_u32(&mut b, OFF_MAGIC, MAGIC);
        put_u16(&mut b, OFF_VERSION, VERSION);
        put_u64(&mut b, OFF_END, self.end);
        put_i64(&mut b, OFF_WRITTEN_AT, self.written_at_ms);
        let crc = crc32c::crc32c(&b[..OFF_CRC]);
        put_u32(&mut b, OFF_CRC, crc);
        b
    }

    pub fn decode(b: &[u8]) -> std::result::Result<IndexEnd, CorruptionKind> {
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
        Ok(IndexEnd {
            end: get_u64(b, OFF_END),
            written_at_ms: get_i64(b, OFF_WRITTEN_AT),
        })
    }

    /// Read `<dir>/index-end`; `None` if there is none.
    pub fn load(dir: &Path) -> Result<Option<IndexEnd>> {
        let path = dir.join(FILE_NAME);
        let bytes = match std::fs::metadata(&path) {
            Ok(meta) if meta.len() != LEN as u64 => {
                return Err(StoreError::corruption(
                    &path,
                    0,
                    CorruptionKind::FileLength {
                        len: meta.len(),
                        expected: LEN as u64,
                    },
                ))
            }
            Ok(_) => std::fs::read(&path).at(&path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).at(&path),
        };
        IndexEnd::decode(&bytes)
            .map(Some)
            .map_err(|why| StoreError::corruption(&path, 0, why))
    }

    pub fn store(&self, dir: &Path) -> Result<()> {
        fs_util::write_atomic(&dir.join(FILE_NAME), &self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes() {
        let e = IndexEnd {
            end: 0x0102,
            written_at_ms: 7,
        };
        #[rustfmt::skip]
        let mut want = vec![
            0x45, 0x58, 0x49, 0x54, // magic "EXIT" little endian
            1, 0, 0, 0, // version, reserved
            0x02, 0x01, 0, 0, 0, 0, 0, 0, // end
            7, 0, 0, 0, 0, 0, 0, 0, // written_at_ms
        ];
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(e.encode().to_vec(), want);
        assert_eq!(IndexEnd::decode(&want), Ok(e));
        let mut bad = want.clone();
        bad[OFF_END] ^= 1;
        assert!(matches!(
            IndexEnd::decode(&bad),
            Err(CorruptionKind::CrcMismatch { .. })
        ));
        assert!(matches!(
            IndexEnd::decode(&want[..LEN - 1]),
            Err(CorruptionKind::FileLength { .. })
        ));
    }

    #[test]
    fn store_and_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(IndexEnd::load(dir.path()).unwrap(), None);
        let e = IndexEnd::new(4096);
        e.store(dir.path()).unwrap();
        assert_eq!(IndexEnd::load(dir.path()).unwrap(), Some(e));
    }
}
