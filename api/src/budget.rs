//! The global budget of request bytes held in memory
//! (`http.max_inflight_bytes`). It is the node's runtime's
//! ([`tidelog_runtime::budget`]), so the Kafka listener's frames take from
//! the same budget as HTTP bodies; the HTTP API refuses a body that does
//! not fit at once (503/50305, `router`), and its metrics read the shared
//! budget's use.

pub use tidelog_runtime::budget::{ByteBudget, Reservation};
