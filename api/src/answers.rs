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
//! refused, 503/50307, and counted (`tidelog_http_rejected_answer_bytes_total`).
//!
//! The reservation travels inside the answer's bytes
//! ([`Bytes::from_owner`]): hyper is handed the rendered buffer itself, no
//! copy, and the budget's bytes are given back exactly when the buffer is
//! freed, which is when hyper has written (or dropped) the last of it, not
//! when the body's last frame was polled into hyper's write queue.
//!
//! [`ByteBudget`]: crate::budget::ByteBudget

use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::budget::Reservation;
use crate::error::ApiError;
use crate::state::AppState;

/// Less room than this in the answer budget: the call is refused (503)
/// rather than answered with a sliver.
pub const ANSWER_ROOM_MIN_BYTES: u64 = 64 << 10;

/// The payload bytes (`max_bytes`) a read may use now: `asked`, or half
/// the answer budget's room when that is less (counted in
/// `tidelog_http_answers_shrunk_total`); 503/50307 with less than
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
/// body is written or dropped; 503/50307 if they do not fit.
pub(crate) fn held_answer(
    state: &AppState,
    content_type: &'static str,
    body: Vec<u8>,
) -> Result<Response, ApiError> {
    let held = reserve_answer(state, body.len())?;
    Ok(answer_response(content_type, body, held))
}

/// `bytes` of the answer budget for a rendered answer; 503/50307 if they
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
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        Body::from(held_bytes(body, held)),
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

/// `body` as [`Bytes`] that hold `held` until the last reference to
/// them is dropped (hyper's, once written).
fn held_bytes(body: Vec<u8>, held: Reservation) -> Bytes {
    Bytes::from_owner(HeldBuffer { body, _held: held })
}

/// A rendered answer and its reservation, freed together.
struct HeldBuffer {
    body: Vec<u8>,
    _held: Reservation,
}

impl AsRef<[u8]> for HeldBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.body
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::ByteBudget;

    /// The answer's bytes are held while any part of it is alive (hyper
    /// writes slices of it), and given back when the last is dropped.
    #[test]
    fn held_bytes_keep_their_reservation_until_the_last_slice_is_dropped() {
        let budget = ByteBudget::new(1 << 20);
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let held = budget.try_reserve(data.len() as u64).unwrap();
        let whole = held_bytes(data.clone(), held);
        assert_eq!(&whole[..], &data[..], "handed over as rendered, no copy");
        let tail = whole.slice(150_000..);
        drop(whole);
        assert_eq!(budget.used_bytes(), 200_000, "a slice still holds it");
        assert_eq!(&tail[..], &data[150_000..]);
        drop(tail);
        assert_eq!(budget.used_bytes(), 0);
    }
}
