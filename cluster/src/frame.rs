//! The replication stream's frames (issue 39): what a replica and its
//! master say over `replication_listen`, RocketMQ's HAService idea over a
//! protocol of ours.
//!
//! A replica says hello with its log's end and the epoch it follows; the
//! master answers with its epochs (so the replica finds where their logs
//! part ways, `tidelog_storage::epochs::common_end`, and cuts there), then
//! streams its CommitLog's bytes from there; the replica confirms how far
//! its copy is durable. Every frame carries the sender's epoch, so a
//! deposed master's bytes are told apart and refused.
//!
//! ```text
//! frame = head | body; integers little-endian
//!
//! head (HEAD_LEN = 8)
//!   0  4  body_len  u32, at most BODY_MAX: checked before the body is read
//!   4  4  crc       u32, CRC32C of the body
//! body
//!   0  1  kind      u8
//!   1  1  version   u8, VERSION (1)
//!   2  2  reserved  0
//!   4  8  epoch     u64, the sender's: a master's own, a replica's the one
//!                   it follows (0: none yet)
//!  12     the kind's fields:
//!   HELLO   1  replica → master: node_id u32, log_end u64, cluster_len u16
//!              (≤ NAME_MAX) | cluster name (UTF-8)
//!   EPOCHS  2  master → replica: log_end u64, count u32 (≤ EPOCHS_MAX) |
//!              count × (epoch u64, start u64)
//!   DATA    3  master → replica: position u64 (the physical offset of the
//!              first byte), len u32 (≤ DATA_MAX) | the CommitLog's bytes
//!   CONFIRM 4  replica → master: flushed u64 (its copy is durable to here)
//!   REFUSED 5  either way: code u16, reason_len u16 (≤ REASON_MAX) | reason
//!              (UTF-8)
//!   WATERMARK 6 master → replica: high_watermark u64 (what every member
//!              of the in-sync set holds: readers may see up to here)
//! ```
//! A body holds exactly its kind's fields: a byte more or less is refused,
//! as is an unknown kind, version or code, a reserved field not zero, a
//! name or reason that is not UTF-8, and epochs out of order. Lengths and
//! counts are checked against their bounds and the bytes that hold them
//! before anything is allocated; DATA's bytes are a slice of the frame.

use bytes::Bytes;
use tidelog_storage::codec::{
    push_u16, push_u32, push_u64, Reader, Truncated, U16_LEN, U32_LEN, U64_LEN, U8_LEN,
};
use tidelog_storage::epochs::{EpochEntry, EPOCHS_MAX};

pub const VERSION: u8 = 1;

pub const KIND_HELLO: u8 = 1;
pub const KIND_EPOCHS: u8 = 2;
pub const KIND_DATA: u8 = 3;
pub const KIND_CONFIRM: u8 = 4;
pub const KIND_REFUSED: u8 = 5;
pub const KIND_WATERMARK: u8 = 6;

/// The head: body_len, crc.
pub const HEAD_LEN: usize = U32_LEN + U32_LEN;
/// Every body's fixed start: kind, version, reserved, epoch.
pub const BODY_FIXED_LEN: usize = U8_LEN + U8_LEN + U16_LEN + U64_LEN;
const _: () = assert!(HEAD_LEN == 8 && BODY_FIXED_LEN == 12);
/// Most CommitLog bytes one DATA frame carries.
pub const DATA_MAX: usize = 4 << 20;
/// Longest cluster name (the config's `cluster.name`).
pub const NAME_MAX: usize = 255;
/// Longest refusal reason.
pub const REASON_MAX: usize = 1024;
/// Longest body: a full DATA frame.
pub const BODY_MAX: usize = BODY_FIXED_LEN + U64_LEN + U32_LEN + DATA_MAX;
// The largest EPOCHS frame fits too.
const _: () =
    assert!(BODY_FIXED_LEN + U64_LEN + U32_LEN + EPOCHS_MAX as usize * 2 * U64_LEN <= BODY_MAX);

/// Why a peer's frame is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalCode {
    /// The frame's epoch is not the receiver's: a deposed master, or a
    /// replica following one.
    StaleEpoch,
    /// The peer belongs to another cluster (its name differs).
    OtherCluster,
    /// This node is not the master.
    NotMaster,
    /// The asked or sent position is not where the receiver's log is.
    BadPosition,
    /// The peer's certificate names a principal that may not copy this
    /// log (no CLUSTER_ACTION on the cluster).
    NotAuthorized,
}

impl RefusalCode {
    fn code(self) -> u16 {
        match self {
            RefusalCode::StaleEpoch => 1,
            RefusalCode::OtherCluster => 2,
            RefusalCode::NotMaster => 3,
            RefusalCode::BadPosition => 4,
            RefusalCode::NotAuthorized => 5,
        }
    }

    fn from_code(code: u16) -> Option<RefusalCode> {
        Some(match code {
            1 => RefusalCode::StaleEpoch,
            2 => RefusalCode::OtherCluster,
            3 => RefusalCode::NotMaster,
            4 => RefusalCode::BadPosition,
            5 => RefusalCode::NotAuthorized,
            _ => return None,
        })
    }
}

/// One frame of the stream (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    Hello {
        epoch: u64,
        node_id: u32,
        log_end: u64,
        cluster: String,
    },
    Epochs {
        epoch: u64,
        log_end: u64,
        entries: Vec<EpochEntry>,
    },
    Data {
        epoch: u64,
        position: u64,
        bytes: Bytes,
    },
    Confirm {
        epoch: u64,
        flushed: u64,
    },
    Refused {
        epoch: u64,
        code: RefusalCode,
        reason: String,
    },
    Watermark {
        epoch: u64,
        high_watermark: u64,
    },
}

/// Why bytes are not a frame, or a frame cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error(transparent)]
    Truncated(#[from] Truncated),
    #[error("a body of {len} bytes, outside [{BODY_FIXED_LEN}, {BODY_MAX}]")]
    BodyLength { len: usize },
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("unknown kind {kind}")]
    Kind { kind: u8 },
    #[error("unknown version {version}")]
    Version { version: u8 },
    #[error("reserved field {found:#06x}, not zero")]
    Reserved { found: u16 },
    #[error("{what} of {len}, more than {max}")]
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    #[error("{what} is not UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("unknown refusal code {code}")]
    Code { code: u16 },
    #[error("epoch entry {entry}: {reason}")]
    EpochOrder { entry: usize, reason: String },
    #[error("{count} bytes after the frame's last field")]
    Trailing { count: usize },
}

fn bounded(what: &'static str, len: usize, max: usize) -> Result<(), FrameError> {
    if len > max {
        return Err(FrameError::TooLong { what, len, max });
    }
    Ok(())
}

fn push_text(
    b: &mut Vec<u8>,
    what: &'static str,
    text: &str,
    max: usize,
) -> Result<(), FrameError> {
    bounded(what, text.len(), max)?;
    push_u16(b, text.len() as u16);
    b.extend_from_slice(text.as_bytes());
    Ok(())
}

/// The frame's bytes, head and body; refused when a field is past its
/// bound (the frame could not be decoded).
pub fn encode(frame: &Frame) -> Result<Vec<u8>, FrameError> {
    let mut b = vec![0u8; HEAD_LEN];
    let (kind, epoch) = match frame {
        Frame::Hello { epoch, .. } => (KIND_HELLO, epoch),
        Frame::Epochs { epoch, .. } => (KIND_EPOCHS, epoch),
        Frame::Data { epoch, .. } => (KIND_DATA, epoch),
        Frame::Confirm { epoch, .. } => (KIND_CONFIRM, epoch),
        Frame::Refused { epoch, .. } => (KIND_REFUSED, epoch),
        Frame::Watermark { epoch, .. } => (KIND_WATERMARK, epoch),
    };
    b.push(kind);
    b.push(VERSION);
    push_u16(&mut b, 0);
    push_u64(&mut b, *epoch);
    match frame {
        Frame::Hello {
            node_id,
            log_end,
            cluster,
            ..
        } => {
            push_u32(&mut b, *node_id);
            push_u64(&mut b, *log_end);
            push_text(&mut b, "cluster name", cluster, NAME_MAX)?;
        }
        Frame::Epochs {
            log_end, entries, ..
        } => {
            bounded("epoch count", entries.len(), EPOCHS_MAX as usize)?;
            push_u64(&mut b, *log_end);
            push_u32(&mut b, entries.len() as u32);
            for e in entries {
                push_u64(&mut b, e.epoch);
                push_u64(&mut b, e.start);
            }
        }
        Frame::Data {
            position, bytes, ..
        } => {
            bounded("data", bytes.len(), DATA_MAX)?;
            push_u64(&mut b, *position);
            push_u32(&mut b, bytes.len() as u32);
            b.extend_from_slice(bytes);
        }
        Frame::Confirm { flushed, .. } => push_u64(&mut b, *flushed),
        Frame::Refused { code, reason, .. } => {
            push_u16(&mut b, code.code());
            push_text(&mut b, "reason", reason, REASON_MAX)?;
        }
        Frame::Watermark { high_watermark, .. } => push_u64(&mut b, *high_watermark),
    }
    let body_len = b.len() - HEAD_LEN;
    let crc = crc32c::crc32c(&b[HEAD_LEN..]);
    b[..U32_LEN].copy_from_slice(&(body_len as u32).to_le_bytes());
    b[U32_LEN..HEAD_LEN].copy_from_slice(&crc.to_le_bytes());
    Ok(b)
}

/// The head: how many body bytes follow (checked against [`BODY_MAX`], so
/// a reader allocates for it only then) and their CRC.
pub fn decode_head(head: &[u8; HEAD_LEN]) -> Result<(usize, u32), FrameError> {
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if !(BODY_FIXED_LEN..=BODY_MAX).contains(&len) {
        return Err(FrameError::BodyLength { len });
    }
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    Ok((len, crc))
}

fn take_text(r: &mut Reader<'_>, what: &'static str, max: usize) -> Result<String, FrameError> {
    let len = r.u16()? as usize;
    bounded(what, len, max)?;
    let bytes = r.take(len)?;
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| FrameError::NotUtf8 { what })
}

/// The frame of `body` (read after [`decode_head`] gave its length and
/// `crc`), every rule of the module doc checked.
pub fn decode_body(body: Bytes, crc: u32) -> Result<Frame, FrameError> {
    let computed = crc32c::crc32c(&body);
    if computed != crc {
        return Err(FrameError::Crc {
            stored: crc,
            computed,
        });
    }
    if !(BODY_FIXED_LEN..=BODY_MAX).contains(&body.len()) {
        return Err(FrameError::BodyLength { len: body.len() });
    }
    let mut r = Reader::new(&body);
    let kind = r.take(U8_LEN)?[0];
    let version = r.take(U8_LEN)?[0];
    if version != VERSION {
        return Err(FrameError::Version { version });
    }
    let reserved = r.u16()?;
    if reserved != 0 {
        return Err(FrameError::Reserved { found: reserved });
    }
    let epoch = r.u64()?;
    let frame = match kind {
        KIND_HELLO => Frame::Hello {
            epoch,
            node_id: r.u32()?,
            log_end: r.u64()?,
            cluster: take_text(&mut r, "cluster name", NAME_MAX)?,
        },
        KIND_EPOCHS => {
            let log_end = r.u64()?;
            let count = r.u32()? as usize;
            bounded("epoch count", count, EPOCHS_MAX as usize)?;
            // Bounded by the bytes too before the list is made.
            if count * 2 * U64_LEN > r.remaining() {
                return Err(Truncated {
                    at: r.position(),
                    needed: count * 2 * U64_LEN,
                    available: r.remaining(),
                }
                .into());
            }
            let mut entries: Vec<EpochEntry> = Vec::with_capacity(count);
            for entry in 0..count {
                let e = EpochEntry {
                    epoch: r.u64()?,
                    start: r.u64()?,
                };
                if let Some(last) = entries.last() {
                    if e.epoch <= last.epoch || e.start < last.start {
                        return Err(FrameError::EpochOrder {
                            entry,
                            reason: format!(
                                "epoch {} from {} after epoch {} from {}",
                                e.epoch, e.start, last.epoch, last.start
                            ),
                        });
                    }
                }
                entries.push(e);
            }
            Frame::Epochs {
                epoch,
                log_end,
                entries,
            }
        }
        KIND_DATA => {
            let position = r.u64()?;
            let len = r.u32()? as usize;
            bounded("data", len, DATA_MAX)?;
            let at = r.position();
            r.take(len)?;
            Frame::Data {
                epoch,
                position,
                bytes: body.slice(at..at + len),
            }
        }
        KIND_CONFIRM => Frame::Confirm {
            epoch,
            flushed: r.u64()?,
        },
        KIND_REFUSED => {
            let code = r.u16()?;
            let code = RefusalCode::from_code(code).ok_or(FrameError::Code { code })?;
            Frame::Refused {
                epoch,
                code,
                reason: take_text(&mut r, "reason", REASON_MAX)?,
            }
        }
        KIND_WATERMARK => Frame::Watermark {
            epoch,
            high_watermark: r.u64()?,
        },
        kind => return Err(FrameError::Kind { kind }),
    };
    if r.remaining() != 0 {
        return Err(FrameError::Trailing {
            count: r.remaining(),
        });
    }
    Ok(frame)
}

/// A whole frame (head and body) decoded: tests and tools; a stream
/// reads the head first ([`decode_head`]) and then just its body.
pub fn decode(bytes: &[u8]) -> Result<Frame, FrameError> {
    let head: &[u8; HEAD_LEN] = bytes
        .get(..HEAD_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(Truncated {
            at: 0,
            needed: HEAD_LEN,
            available: bytes.len(),
        })?;
    let (len, crc) = decode_head(head)?;
    let body = bytes.get(HEAD_LEN..HEAD_LEN + len).ok_or(Truncated {
        at: HEAD_LEN,
        needed: len,
        available: bytes.len() - HEAD_LEN,
    })?;
    if bytes.len() != HEAD_LEN + len {
        return Err(FrameError::Trailing {
            count: bytes.len() - HEAD_LEN - len,
        });
    }
    decode_body(Bytes::copy_from_slice(body), crc)
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
