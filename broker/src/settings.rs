//! What the broker is told at start, as plain data: the server crate owns
//! the YAML schema (OPERATIONS.md) and fills these.

use crate::topic_config::Overrides;

/// A topic declared in the config file (`topics:`), already validated.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredTopic {
    pub name: String,
    pub partitions: u32,
    /// Canonical config values; the file wins for these keys at start.
    pub overrides: Overrides,
}
