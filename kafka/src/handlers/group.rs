//! What the group handlers share: the answer before the broker is ready,
//! the answer to a wait cut short by shutdown, and a string from the wire
//! as an optional id. The waits themselves are the broker's
//! (`Door::join_group`, `Door::sync_group`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;

/// COORDINATOR_LOAD_IN_PROGRESS: what a group call answers while recovery
/// runs (KAFKA.md "Not ready"; retriable).
pub const NOT_READY: i16 = ResponseError::CoordinatorLoadInProgress.code();

/// Answered to a wait cut short by shutdown: the client looks for the
/// coordinator again (retriable).
pub const STOPPING: i16 = ResponseError::CoordinatorNotAvailable.code();

/// An id from the wire: empty or null is none.
pub fn id(s: Option<&StrBytes>) -> Option<&str> {
    s.map(|s| s.as_str()).filter(|s| !s.is_empty())
}
