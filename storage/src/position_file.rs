//! Position files: a small durable record of one CommitLog position, the
//! layout `log-head` and `index-end` share (each has its own name, magic
//! and meaning, in [`crate::log_head`] and [`crate::index_file::end`]).
//!
//! ```text
//! offset  size  field
//!      0     4  magic          u32, the kind's magic
//!      4     2  version        u16, VERSION
//!      6     2  reserved       0
//!      8     8  position       u64, what the kind records
//!     16     8  written_at_ms  i64, wall-clock time of writing
//!     24     4  crc            u32, CRC32C of bytes [0, 24)
//! ```
//! Written with temp → fsync → rename → fsync dir, so a file is always
//! whole. The decoder checks the length (exactly [`LEN`]), then the CRC,
//! the magic and the version as every CRC-framed file of the store
//! ([`codec::crc_framed_table`]); a file that fails any of them is
//! corruption of that file, named by its path.

use std::path::Path;

use crate::codec::{self, put_i64, put_u16, put_u32, put_u64};
use crate::codec::{U16_LEN, U32_LEN, U64_LEN};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;
use crate::types::now_ms;

pub const VERSION: u16 = 1;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = OFF_MAGIC + U32_LEN;
const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
pub(crate) const OFF_POSITION: usize = OFF_RESERVED + U16_LEN;
const OFF_WRITTEN_AT: usize = OFF_POSITION + U64_LEN;
/// The CRC covers every byte before it.
const OFF_CRC: usize = OFF_WRITTEN_AT + U64_LEN;
pub const LEN: usize = OFF_CRC + U32_LEN;
const _: () = assert!(LEN == 28);

/// One kind of position file: where it lives in the data dir and the
/// magic that tells it from the others.
#[derive(Clone, Copy, Debug)]
pub struct PositionFile {
    pub name: &'static str,
    pub magic: u32,
}

/// What a position file holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    pub position: u64,
    pub written_at_ms: i64,
}

impl Position {
    /// `position`, written now.
    pub fn now(position: u64) -> Position {
        Position {
            position,
            written_at_ms: now_ms(),
        }
    }
}

impl PositionFile {
    pub fn encode(&self, p: Position) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        put_u32(&mut b, OFF_MAGIC, self.magic);
        put_u16(&mut b, OFF_VERSION, VERSION);
        put_u64(&mut b, OFF_POSITION, p.position);
        put_i64(&mut b, OFF_WRITTEN_AT, p.written_at_ms);
        let crc = crc32c::crc32c(&b[..OFF_CRC]);
        put_u32(&mut b, OFF_CRC, crc);
        b
    }

    pub fn decode(&self, b: &[u8]) -> std::result::Result<Position, CorruptionKind> {
        if b.len() != LEN {
            return Err(CorruptionKind::FileLength {
                len: b.len() as u64,
                expected: LEN as u64,
            });
        }
        let mut r = codec::crc_framed_table(b, self.name, OFF_POSITION, self.magic, VERSION)?;
        Ok(Position {
            position: r.u64()?,
            written_at_ms: r.u64()? as i64,
        })
    }

    /// Read `<dir>/<name>`; `None` if there is none. The length is
    /// checked before the file is read.
    pub fn load(&self, dir: &Path) -> Result<Option<Position>> {
        let path = dir.join(self.name);
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
        self.decode(&bytes)
            .map(Some)
            .map_err(|why| StoreError::corruption(&path, 0, why))
    }

    /// Replace `<dir>/<name>` with `p`, durably.
    pub fn store(&self, dir: &Path, p: Position) -> Result<()> {
        fs_util::write_atomic(&dir.join(self.name), &self.encode(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: PositionFile = PositionFile {
        name: "test-position",
        magic: 0x5445_5354,
    };

    #[test]
    fn golden_bytes_and_each_check() {
        let p = Position {
            position: 0x0102,
            written_at_ms: 7,
        };
        #[rustfmt::skip]
        let mut want = vec![
            0x54, 0x53, 0x45, 0x54, // magic, little endian
            1, 0, 0, 0, // version, reserved
            0x02, 0x01, 0, 0, 0, 0, 0, 0, // position
            7, 0, 0, 0, 0, 0, 0, 0, // written_at_ms
        ];
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(KIND.encode(p).to_vec(), want);
        assert_eq!(KIND.decode(&want), Ok(p));
        let mut bad = want.clone();
        bad[OFF_POSITION] ^= 1;
        assert!(matches!(
            KIND.decode(&bad),
            Err(CorruptionKind::CrcMismatch { .. })
        ));
        let other = PositionFile {
            magic: 0x4f54_4852,
            ..KIND
        };
        assert!(matches!(
            other.decode(&want),
            Err(CorruptionKind::BadMagic { .. })
        ));
        let mut newer = want[..OFF_CRC].to_vec();
        newer[OFF_VERSION] = 2;
        let crc = crc32c::crc32c(&newer);
        newer.extend_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            KIND.decode(&newer),
            Err(CorruptionKind::UnknownVersion { found: 2 })
        ));
        assert!(matches!(
            KIND.decode(&want[..LEN - 1]),
            Err(CorruptionKind::FileLength { .. })
        ));
    }

    #[test]
    fn store_and_load_round_trip_and_a_wrong_length_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(KIND.load(dir.path()).unwrap(), None);
        let p = Position::now(4096);
        KIND.store(dir.path(), p).unwrap();
        assert_eq!(KIND.load(dir.path()).unwrap(), Some(p));
        std::fs::write(dir.path().join(KIND.name), [0u8; LEN + 1]).unwrap();
        assert!(matches!(
            KIND.load(dir.path()),
            Err(StoreError::Corruption {
                kind: CorruptionKind::FileLength { .. },
                ..
            })
        ));
    }
}
