//! tidelog's Kafka wire protocol front-end (KAFKA.md, docs/KAFKA.md).
//!
//! A thin mapping onto `tidelog-broker`, beside the HTTP API and never
//! depending on it: the listener and framing (`listener`), dispatch by
//! API key (`dispatch`), one handler module per API (`handlers`), and the
//! record-batch layer (`records`). Request and response envelopes come
//! from the `kafka-protocol` crate; record batches do not (`records`).

pub mod config;
pub mod error;
pub mod records;

pub use config::KafkaConfig;
pub use error::{FrameError, RecordError};
