//! Frames over a byte stream: a head read first, its length checked
//! against [`BODY_MAX`](crate::frame::BODY_MAX) before the body is
//! allocated, then the body; every read and write bounded by a deadline
//! by the caller (`tokio::time::timeout`).

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::frame::{self, Frame, FrameError, HEAD_LEN};

/// Why the stream stopped carrying frames.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("a frame that does not decode: {0}")]
    Frame(#[from] FrameError),
    #[error("the peer closed the connection")]
    Closed,
}

/// The next frame of `r`; [`WireError::Closed`] at a clean end between
/// frames.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Frame, WireError> {
    let mut head = [0u8; HEAD_LEN];
    match r.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(WireError::Closed),
        Err(e) => return Err(e.into()),
    }
    let (len, crc) = frame::decode_head(&head)?;
    let mut body = BytesMut::zeroed(len);
    r.read_exact(&mut body).await?;
    Ok(frame::decode_body(body.freeze(), crc)?)
}

/// Write `f` whole to `w` and flush it.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, f: &Frame) -> Result<(), WireError> {
    let bytes = frame::encode(f)?;
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(())
}
