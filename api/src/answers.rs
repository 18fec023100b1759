//! The budget of fetch answers held in memory until they are written
//! (`http.max_inflight_response_bytes`).
//!
//! A fetch or a consumer instance's records call renders its whole answer
//! (up to 64 MiB of payload, more once base64 and JSON are around it)
//! before hyper writes it, and a client that does not read keeps it in
//! memory until `http.write_timeout_ms` closes the connection: 24 such
//! clients held 1.3 GiB. Every rendered answer of those routes takes its
//! bytes from this budget ([`ByteBudget`], its own, so readers that do not
//! read cannot starve producers of the request budget) and gives them back
//! when its body is dropped: after hyper has taken its last chunk, or when
//! the connection closes (the write timeout, the client leaving).
//!
//! When the budget is short the answer is smaller, not refused: a read
//! asks for at most half the budget's room as payload (rendering adds
//! base64 and JSON around it), the way REST Proxy's `max_bytes` is capped
//! by its server-side `consumer.request.max.bytes`: `max_bytes` is an
//! upper bound, fewer records is a valid answer and the client goes on
//! from the last offset it got. Only with less than
//! [`ANSWER_ROOM_MIN_BYTES`] of room, or a rendered answer (at least one
//! record, which may be larger than asked) that does not fit, is the call
//! refused, 503/50306, and counted (`tidelog_http_rejected_answer_bytes_total`).
//!
//! The body is handed to hyper in [`ANSWER_CHUNK_BYTES`] copies, so hyper
//! holds at most its write buffer's worth of them and the rendered buffer
//! itself is freed exactly when the reservation is given back (an answer
//! of one chunk or less goes as it is).

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::{Frame, SizeHint};

use crate::budget::Reservation;
use crate::error::ApiError;
use crate::state::AppState;

/// Less room than this in the answer budget: the call is refused (503)
/// rather than answered with a sliver.
pub const ANSWER_ROOM_MIN_BYTES: u64 = 64 << 10;

/// The size of the copies an answer is handed to hyper in.
pub const ANSWER_CHUNK_BYTES: usize = 64 << 10;

/// The payload bytes (`max_bytes`) a read may use now: `asked`, or half
/// the answer budget's room when that is less (counted in
/// `tidelog_http_answers_shrunk_total`); 503/50306 with less than
/// [`ANSWER_ROOM_MIN_BYTES`] of room.
pub(crate) fn payload_room(state: &AppState, asked: usize) -> Result<usize, ApiError> {
    let shared = state.shared();
    let budget = &shared.answer_bytes;
    let room = budget.limit_bytes().saturating_sub(budget.used_bytes());
    if room < ANSWER_ROOM_MIN_BYTES {
        return Err(answers_exhausted(state, room));
    }
    let most = usize::try_from(room / 2).unwrap_or(usize::MAX);
    if most < asked {
        shared
            .metrics
            .answers_shrunk
            .fetch_add(1, Ordering::Relaxed);
        return Ok(most);
    }
    Ok(asked)
}

/// A 200 answer of `body`, its bytes held in the answer budget until the
/// body is written or dropped; 503/50306 if they do not fit.
pub(crate) fn held_answer(
    state: &AppState,
    content_type: &'static str,
    body: Vec<u8>,
) -> Result<Response, ApiError> {
    let held = reserve_answer(state, body.len())?;
    Ok(answer_response(content_type, body, held))
}

/// `bytes` of the answer budget for a rendered answer; 503/50306 if they
/// do not fit. A caller that must not consume what it rendered unless it
/// is answered (a records call) takes them before it commits to the
/// answer.
pub(crate) fn reserve_answer(state: &AppState, bytes: usize) -> Result<Reservation, ApiError> {
    let budget = &state.shared().answer_bytes;
    budget.try_reserve(bytes as u64).ok_or_else(|| {
        answers_exhausted(
            state,
            budget.limit_bytes().saturating_sub(budget.used_bytes()),
        )
    })
}

/// A 200 answer of `body` that holds `held` until it is written or dropped.
pub(crate) fn answer_response(
    content_type: &'static str,
    body: Vec<u8>,
    held: Reservation,
) -> Response {
    let body = HeldBody {
        body,
        sent: 0,
        _held: held,
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        Body::new(body),
    )
        .into_response()
}

fn answers_exhausted(state: &AppState, room: u64) -> ApiError {
    let shared = state.shared();
    shared
        .metrics
        .rejected_answer_bytes
        .fetch_add(1, Ordering::Relaxed);
    ApiError::AnswerBytesExhausted {
        message: format!(
            "the server holds {} of its {} bytes of fetch answers not yet written (http.max_inflight_response_bytes), {room} left: too little for this answer; retry shortly",
            shared.answer_bytes.used_bytes(),
            shared.answer_bytes.limit_bytes()
        ),
    }
}

/// A rendered answer and its reservation: handed out in copies of
/// [`ANSWER_CHUNK_BYTES`]; both are freed when hyper drops it.
struct HeldBody {
    body: Vec<u8>,
    sent: usize,
    _held: Reservation,
}

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.sent >= this.body.len() {
            return Poll::Ready(None);
        }
        if this.sent == 0 && this.body.len() <= ANSWER_CHUNK_BYTES {
            // One chunk's worth: handed over as it is, no copy (what hyper
            // then holds after the reservation is given back is that small).
            let whole = std::mem::take(&mut this.body);
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(whole)))));
        }
        let end = this.body.len().min(this.sent + ANSWER_CHUNK_BYTES);
        let chunk = Bytes::copy_from_slice(&this.body[this.sent..end]);
        this.sent = end;
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent >= self.body.len()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.body.len().saturating_sub(self.sent) as u64)
    }
}

#[cfg(test)]
mod tests {
    use http_body::Body as _;

    use super::*;
    use crate::budget::ByteBudget;

    /// The body comes out whole in chunks, and its bytes are held until
    /// it is dropped, not given back as the chunks go.
    #[tokio::test]
    async fn a_held_body_keeps_its_bytes_until_dropped() {
        let budget = ByteBudget::new(1 << 20);
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut body = HeldBody {
            body: data.clone(),
            sent: 0,
            _held: budget.try_reserve(data.len() as u64).unwrap(),
        };
        assert_eq!(body.size_hint().exact(), Some(200_000));
        let mut out = Vec::new();
        let mut chunks = 0;
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let chunk = frame.unwrap().into_data().unwrap();
            assert!(chunk.len() <= ANSWER_CHUNK_BYTES);
            out.extend_from_slice(&chunk);
            chunks += 1;
            assert_eq!(budget.used_bytes(), 200_000);
        }
        assert!(body.is_end_stream());
        assert_eq!((out, chunks), (data, 4));
        drop(body);
        assert_eq!(budget.used_bytes(), 0);
    }

    /// An answer of one chunk or less goes whole, in one frame.
    #[tokio::test]
    async fn a_small_body_goes_in_one_frame() {
        let budget = ByteBudget::new(1 << 20);
        let mut body = HeldBody {
            body: b"[1,2]".to_vec(),
            sent: 0,
            _held: budget.try_reserve(5).unwrap(),
        };
        let frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
        assert_eq!(&frame.unwrap().unwrap().into_data().unwrap()[..], b"[1,2]");
        assert!(body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(0));
        assert!(
            std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx))
                .await
                .is_none()
        );
        assert_eq!(budget.used_bytes(), 5);
        drop(body);
        assert_eq!(budget.used_bytes(), 0);
    }
}
