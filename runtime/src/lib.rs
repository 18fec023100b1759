//! What a tidelog node shares with its front-ends (HTTP in `tidelog-api`,
//! Kafka in `tidelog-kafka`), in a crate below both so that neither
//! depends on the other and none of it sits in the broker, which owns the
//! domain (topics, records, groups) and no runtime concern.
//!
//! * [`budget`]: the byte budgets held in memory (request bytes, fetch
//!   answers not yet written) that HTTP bodies and Kafka frames take from.
//! * [`connections`]: both listeners' connections counted against the
//!   open-file limit, and the `descriptors:` section that sets it.
//! * [`ready`]: the slot the opened broker is published in once recovery
//!   is done, and taken back from at shutdown.
//! * [`metrics`]: the trait a component's metric families are rendered
//!   through in `/metrics` (the Kafka listener's), and the text format's
//!   two line helpers.
//! * [`tls`]: the `tls:` section and the acceptor both front-ends'
//!   TLS listeners share (certificate reloads, bounded handshakes, the
//!   client certificate's identity).
//!
//! The node itself (which owns one of each and starts the front-ends) is
//! the binary's (`server/src/node.rs`).

pub mod budget;
pub mod connections;
pub mod metrics;
pub mod ready;
pub mod tls;

pub use budget::{ByteBudget, Reservation};
pub use connections::{ConnectionSlots, DescriptorsConfig};
pub use metrics::MetricFamilies;
pub use ready::ReadySlot;
