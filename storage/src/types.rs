//! Newtypes for the two integers that are easiest to mix up, and the name of
//! a partition.

use std::fmt;
use std::sync::Arc;

use crate::error::{Result, StoreError};

/// A byte position in the shared CommitLog: the position of a record's
/// (or an entry's, or a segment's) first byte, counted from the start of
/// the log across every segment, never reset. Segment files are named by
/// the physical offset of their first byte; ConsumeQueue units, IndexFile
/// entries, compacted records, `/commitlog/{pos}` and the checkpoint's
/// positions hold these. Not comparable with a [`QueueOffset`]: the
/// constructor and [`PhysicalOffset::get`] are the only ways in and out,
/// so the two never mix silently. `repr(transparent)`: as cheap as a `u64`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct PhysicalOffset(u64);

/// A record's number within its topic-partition: 0, 1, 2, ... with no gaps
/// at write time (a compacted log keeps the numbers of the records it
/// keeps, so it has gaps). What Kafka calls an offset: what a client
/// fetches from and commits. Not comparable with a [`PhysicalOffset`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct QueueOffset(u64);

impl PhysicalOffset {
    pub const fn new(pos: u64) -> Self {
        PhysicalOffset(pos)
    }

    /// The byte position as a plain integer (for arithmetic on positions,
    /// file names and encoding).
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl QueueOffset {
    pub const fn new(offset: u64) -> Self {
        QueueOffset(offset)
    }

    /// The record number as a plain integer.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for PhysicalOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for QueueOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Longest topic name, as in Kafka.
pub const TOPIC_NAME_MAX: usize = 249;

/// What breaks Kafka's topic name rule, `[a-zA-Z0-9._-]{1,249}` and not
/// `.` or `..`; the one definition of the rule, which the HTTP API words
/// in its own messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicNameProblem {
    Empty,
    /// `.` or `..`.
    Reserved,
    /// The first character outside `[a-zA-Z0-9._-]`.
    Character(char),
    /// Longer than [`TOPIC_NAME_MAX`] (bytes, which are characters once
    /// every character is ASCII).
    TooLong(usize),
}

/// The first problem of `name` under the topic name rule, checked in this
/// order: empty, reserved, characters, length (a long name of foreign
/// characters hears about its characters, the more useful complaint).
pub fn topic_name_problem(name: &str) -> Option<TopicNameProblem> {
    if name.is_empty() {
        return Some(TopicNameProblem::Empty);
    }
    if name == "." || name == ".." {
        return Some(TopicNameProblem::Reserved);
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Some(TopicNameProblem::Character(bad));
    }
    if name.len() > TOPIC_NAME_MAX {
        return Some(TopicNameProblem::TooLong(name.len()));
    }
    None
}

/// Check a topic name against Kafka's rules (see [`topic_name_problem`]).
/// The store uses topic names as directory names, so this is a safety
/// check, not a nicety: it runs on names from clients and from disk.
pub fn validate_topic_name(name: &str) -> Result<()> {
    let Some(problem) = topic_name_problem(name) else {
        return Ok(());
    };
    Err(StoreError::invalid(match problem {
        TopicNameProblem::Empty | TopicNameProblem::TooLong(_) => format!(
            "topic name must be 1 to {TOPIC_NAME_MAX} characters, got {}",
            name.len()
        ),
        TopicNameProblem::Reserved => format!("topic name {name:?} is reserved"),
        TopicNameProblem::Character(bad) => format!(
            "topic name {name:?} has the character {bad:?}; allowed are ASCII letters, digits, '.', '_' and '-'"
        ),
    }))
}

/// A topic and one of its partitions. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    topic: Arc<str>,
    partition: u32,
}

impl TopicPartition {
    /// Validates the topic name (see [`validate_topic_name`]).
    pub fn new(topic: &str, partition: u32) -> Result<Self> {
        validate_topic_name(topic)?;
        Ok(TopicPartition {
            topic: Arc::from(topic),
            partition,
        })
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn topic_arc(&self) -> &Arc<str> {
        &self.topic
    }

    pub fn partition(&self) -> u32 {
        self.partition
    }
}

impl fmt::Debug for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Milliseconds since the Unix epoch, from the system clock.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_topic_names() {
        for ok in [
            "a",
            "events",
            "__consumer_offsets",
            "A.b-c_9",
            &"x".repeat(249),
        ] {
            validate_topic_name(ok).unwrap();
        }
    }

    #[test]
    fn hostile_topic_names_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            "a b",
            "é",
            "a\0b",
            &"x".repeat(250),
        ] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
