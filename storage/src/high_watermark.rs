//! The `high-watermark` file: a cluster node's high watermark as its last
//! checkpoint saw it, so that recovery indexes nothing the in-sync set
//! may not hold ([`crate::StoreConfig::cluster_member`]).
//!
//! A position file ([`crate::position_file`], 28 bytes, magic "THWM"):
//! `position` is the cap [`CommitLog::high_watermark`] had, never
//! `u64::MAX` (a single node's "no cap" is not written).
//!
//! Why it exists: readers see only what the cluster's high watermark
//! covers, and the cap is in memory. Recovery indexes every record it
//! verifies, so without this file a restarted replica (or a restarted
//! master) served its whole log at once, a tail past the watermark
//! included, which a failover can still take back (the node then cuts
//! it, and a reader has seen records that are gone, their offsets
//! handed out again to others).
//!
//! Invariant: the kept position is at or below what every member of the
//! in-sync set held when it was written (a watermark never counts a
//! record the set lacks), so a record below it is never cut (a cut only
//! takes back what lies past the cluster's watermark). A stale file only
//! hides more, until the node's stream brings the cluster's watermark
//! (a replica) or its in-sync set confirms the tail (a master). Written
//! by the checkpoint when the cap moved, before the checkpoint file. A
//! missing or damaged file (a data dir of an older tidelog, a node that
//! never joined) holds back what the checkpoint had not indexed: a
//! cluster node never indexes past its cap, so that too is a lower bound
//! of the watermark it last knew.

use std::path::Path;

use crate::commit_log::CommitLog;
use crate::error::Result;
use crate::position_file::{Position, PositionFile};

pub const FILE_NAME: &str = "high-watermark";
pub const MAGIC: u32 = 0x5448_574D;
const FILE: PositionFile = PositionFile {
    name: FILE_NAME,
    magic: MAGIC,
};

/// Read `<dir>/high-watermark`: `None` if there is none or it is
/// damaged (logged; recovery then falls back to the checkpoint).
pub fn load(dir: &Path) -> Option<u64> {
    match FILE.load(dir) {
        Ok(p) => p.map(|p| p.position),
        Err(e) => {
            tracing::warn!(error = %e, "the kept high watermark is unreadable; holding back what the checkpoint had not indexed");
            None
        }
    }
}

/// Keep `log`'s cap in `<dir>/high-watermark` if there is one (a
/// cluster's node) and it moved since `last` (updated).
pub fn store_if_moved(dir: &Path, log: &CommitLog, last: &mut Option<u64>) -> Result<()> {
    let hw = log.high_watermark();
    if hw == u64::MAX || *last == Some(hw) {
        return Ok(());
    }
    FILE.store(dir, Position::now(hw))?;
    *last = Some(hw);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes_round_trip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()), None);
        FILE.store(
            dir.path(),
            Position {
                position: 0x0102,
                written_at_ms: 7,
            },
        )
        .unwrap();
        #[rustfmt::skip]
        let mut want = vec![
            0x4D, 0x57, 0x48, 0x54, // magic "THWM" little endian
            1, 0, 0, 0, // version, reserved
            0x02, 0x01, 0, 0, 0, 0, 0, 0, // the watermark
            7, 0, 0, 0, 0, 0, 0, 0, // written_at_ms
        ];
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        let path = dir.path().join(FILE_NAME);
        assert_eq!(std::fs::read(&path).unwrap(), want);
        assert_eq!(load(dir.path()), Some(0x0102));
        want[9] ^= 1;
        std::fs::write(&path, &want).unwrap();
        assert_eq!(load(dir.path()), None, "a damaged file is no watermark");
    }
}
