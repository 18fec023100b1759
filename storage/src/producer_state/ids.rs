//! The `producer-ids` file: the high-water mark of handed-out producer ids,
//! so a restarted broker never hands out an id already used (two producers
//! sharing an id would take each other's batches for duplicates).
//!
//! ```text
//! offset  size  field
//!      0     4  magic            u32, MAGIC ("TPID")
//!      4     2  version          u16, VERSION
//!      6     2  reserved         0
//!      8     8  reserved_below   i64, no id at or above this was handed out
//!     16     4  crc              u32, CRC32C of bytes [0, 16)
//! ```
//!
//! Ids are reserved in blocks of [`ID_BLOCK`]: the file is replaced
//! (temp file, fsync, rename, fsync directory) before the first id of a
//! block is handed out, so one write covers a thousand InitProducerIds and
//! a crash costs at most the unused rest of a block. At open the next id
//! is the larger of `reserved_below` and one past every id the producer
//! state holds. A damaged or missing file (with producer state present)
//! is logged at warn and the ids continue past the state's largest.

use std::path::{Path, PathBuf};

use crate::codec::{self, put_u16, put_u32, put_u64, U16_LEN, U32_LEN, U64_LEN};
use crate::error::{CorruptionKind, IoContext, Result, StoreError};
use crate::fs_util;

pub const FILE_NAME: &str = "producer-ids";
pub const MAGIC: u32 = 0x5450_4944;
pub const VERSION: u16 = 1;
/// Ids reserved per write of the file.
pub const ID_BLOCK: i64 = 1000;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = OFF_MAGIC + U32_LEN;
const OFF_RESERVED: usize = OFF_VERSION + U16_LEN;
const OFF_BELOW: usize = OFF_RESERVED + U16_LEN;
const OFF_CRC: usize = OFF_BELOW + U64_LEN;
pub const LEN: usize = OFF_CRC + U32_LEN;
const _: () = assert!(LEN == 20);

pub fn encode(reserved_below: i64) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    put_u32(&mut b, OFF_MAGIC, MAGIC);
    put_u16(&mut b, OFF_VERSION, VERSION);
    put_u64(&mut b, OFF_BELOW, reserved_below as u64);
    let crc = crc32c::crc32c(&b[..OFF_CRC]);
    put_u32(&mut b, OFF_CRC, crc);
    b
}

pub fn decode(b: &[u8]) -> std::result::Result<i64, CorruptionKind> {
    if b.len() != LEN {
        return Err(CorruptionKind::FileLength {
            len: b.len() as u64,
            expected: LEN as u64,
        });
    }
    // The table files' framing: CRC, magic, version, reserved.
    let mut r = codec::crc_framed_table(b, "producer-ids file", OFF_BELOW, MAGIC, VERSION)?;
    let below = r.u64()?;
    i64::try_from(below).map_err(|_| CorruptionKind::OutOfRange {
        field: "reserved_below",
        value: u32::MAX,
        min: 0,
        max: u32::MAX,
    })
}

/// Hands out producer ids (see the module doc). Not thread-safe by itself:
/// the store keeps it behind a mutex.
#[derive(Debug)]
pub struct ProducerIds {
    path: PathBuf,
    next: i64,
    reserved_below: i64,
    /// The ids this node hands out: all of them alone, its own block in a
    /// cluster ([`ProducerIds::confine`]).
    space: std::ops::Range<i64>,
}

/// Bits of a cluster node's own block of producer ids: node `n` hands
/// out ids in `[n << NODE_SPACE_BITS, (n + 1) << NODE_SPACE_BITS)`, a
/// trillion each, so no two nodes ever hand out one id and any node can
/// answer an idempotent producer's InitProducerId, as every Kafka broker
/// does from its own block. A single node's ids (node 0's block) stay
/// below every cluster node's.
pub const NODE_SPACE_BITS: u32 = 40;

/// Cluster node `node_id`'s block of producer ids (see [`NODE_SPACE_BITS`]).
pub fn node_space(node_id: u32) -> std::ops::Range<i64> {
    let start = i64::from(node_id) << NODE_SPACE_BITS;
    start..start + (1i64 << NODE_SPACE_BITS)
}

impl ProducerIds {
    /// Open `<dir>/producer-ids`; `floor` is one past the largest producer
    /// id the recovered state holds (0 with none).
    pub fn load(dir: &Path, floor: i64) -> Result<ProducerIds> {
        let path = dir.join(FILE_NAME);
        let stored = match std::fs::read(&path) {
            Ok(b) => match decode(&b) {
                Ok(below) => Some(below),
                Err(why) => {
                    tracing::warn!(path = %path.display(), %why, floor, "the producer-id file is damaged; handing out ids past the largest the producer state holds");
                    None
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if floor > 0 {
                    tracing::warn!(path = %path.display(), floor, "no producer-id file but producer state exists; handing out ids past the largest it holds");
                }
                None
            }
            Err(e) => return Err(e).at(&path),
        };
        let next = stored.unwrap_or(0).max(floor);
        Ok(ProducerIds {
            path,
            next,
            reserved_below: next,
            space: 0..i64::MAX,
        })
    }

    /// Hand out ids only in `space` from now on (a cluster's node: its own
    /// block, [`node_space`]), above `floor` (one past the largest id of
    /// the space the producer state holds). Ids of the space handed out
    /// before (the file's mark, if it lies in the space) stay handed out.
    pub fn confine(&mut self, space: std::ops::Range<i64>, floor: i64) {
        let stored = Some(self.reserved_below.max(self.next)).filter(|b| space.contains(b));
        let next = space.start.max(floor).max(stored.unwrap_or(space.start));
        self.next = next;
        // The mark is written again before the first id: a crash then
        // never hands out an id of the space twice.
        self.reserved_below = next;
        self.space = space;
    }

    /// The next producer id, durable before it is returned.
    pub fn allocate(&mut self) -> Result<i64> {
        if self.next >= self.reserved_below {
            let below = self
                .next
                .checked_add(ID_BLOCK)
                .filter(|b| *b <= self.space.end)
                .ok_or_else(|| {
                    StoreError::inconsistent(&self.path, 0, "producer ids are exhausted")
                })?;
            fs_util::write_atomic(&self.path, &encode(below))?;
            self.reserved_below = below;
        }
        let id = self.next;
        self.next += 1;
        Ok(id)
    }

    /// Whether `id` was handed out by this data dir (below the mark).
    pub fn issued(&self, id: i64) -> bool {
        (self.space.start.max(0)..self.next).contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_node_hands_out_ids_of_its_own_block_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut ids = ProducerIds::load(dir.path(), 0).unwrap();
        assert_eq!(ids.allocate().unwrap(), 0, "a single node starts at 0");
        let two = node_space(2);
        ids.confine(two.clone(), 0);
        assert_eq!(ids.allocate().unwrap(), two.start);
        assert!(ids.issued(two.start) && !ids.issued(0), "the block's own");
        // Reopened: the file's mark lies in the block, the state's floor
        // above it wins.
        let mut again = ProducerIds::load(dir.path(), 0).unwrap();
        again.confine(two.clone(), two.start + 5000);
        assert_eq!(again.allocate().unwrap(), two.start + 5000);
        // Another node's block never meets this one.
        let other = tempfile::tempdir().unwrap();
        let mut three = ProducerIds::load(other.path(), 0).unwrap();
        three.confine(node_space(3), 0);
        assert_eq!(three.allocate().unwrap(), node_space(3).start);
        assert!(node_space(2).end <= node_space(3).start);
    }

    #[test]
    fn golden_bytes() {
        #[rustfmt::skip]
        let want: [u8; LEN] = [
            0x44, 0x49, 0x50, 0x54, // magic "TPID"
            0x01, 0x00, 0x00, 0x00, // version 1, reserved
            0xe8, 0x03, 0, 0, 0, 0, 0, 0, // reserved_below 1000
            0x98, 0x8a, 0xfc, 0x25, // crc
        ];
        let got = encode(1000);
        assert_eq!(got, want);
        assert_eq!(decode(&got), Ok(1000));
        for i in 0..LEN {
            let mut b = got;
            b[i] ^= 1;
            assert!(decode(&b).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn ids_are_never_handed_out_twice_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let mut ids = ProducerIds::load(dir.path(), 0).unwrap();
        let first: Vec<i64> = (0..3).map(|_| ids.allocate().unwrap()).collect();
        assert_eq!(first, [0, 1, 2]);
        drop(ids);
        // A restart (clean or not) continues past the reserved block.
        let mut ids = ProducerIds::load(dir.path(), 0).unwrap();
        assert_eq!(ids.allocate().unwrap(), ID_BLOCK);
        assert!(ids.issued(2) && ids.issued(ID_BLOCK) && !ids.issued(ID_BLOCK + 1));
        // The state's largest id is a floor too (a lost file).
        std::fs::remove_file(dir.path().join(FILE_NAME)).unwrap();
        let mut ids = ProducerIds::load(dir.path(), 5000).unwrap();
        assert_eq!(ids.allocate().unwrap(), 5000);
        std::fs::write(dir.path().join(FILE_NAME), b"junk").unwrap();
        let mut ids = ProducerIds::load(dir.path(), 7).unwrap();
        assert_eq!(ids.allocate().unwrap(), 7);
    }
}
