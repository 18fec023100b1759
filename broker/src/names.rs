//! Validation of topic and consumer group names, whichever front-end they
//! arrive through.
//!
//! Topic names become directory names under `consumequeue/` and
//! `compacted/`, so they follow Kafka's rule exactly
//! (`[a-zA-Z0-9._-]{1,249}`, not `.` or `..`): nothing that can climb out of
//! the data directory, no separators, no bytes a filesystem might fold or
//! reject. Every check runs before a name reaches storage.
//!
//! Consumer group names follow API.md's rule (all routes and the Kafka
//! protocol): 1 to 249 characters of `[a-zA-Z0-9._-]`, `:` and `@`. Kafka
//! itself takes any non-empty string; the narrower set keeps a name safe in
//! a URL path, a log line and the `group/topic/partition` keys of
//! `__consumer_offsets` (no `/`). One more rule of tidelog's own: a name
//! may not start with `__`, the prefix of internal names
//! (`__consumer_offsets`), which Kafka reserves for its internal topics but
//! not for groups; so no client group can be taken for an internal one.
//!
//! An invalid name is `BrokerError::InvalidName`, not an unknown topic or
//! group: such a topic or group can never exist, and the message says what
//! is wrong with the name.

use tidelog_storage::{topic_name_problem, TopicNameProblem};

use crate::error::BrokerError;

/// Kafka's `Topic.MAX_NAME_LENGTH`.
pub const TOPIC_NAME_MAX_CHARS: usize = tidelog_storage::types::TOPIC_NAME_MAX;

/// Same bound as topics, so a group name fits wherever a topic name does.
pub const GROUP_NAME_MAX_CHARS: usize = 249;

/// The prefix of internal names, refused at the start of a group name.
pub const INTERNAL_PREFIX: &str = "__";

/// The largest queue offset a client may ask for: 2^63 − 1, Kafka's
/// `Long.MAX_VALUE`, so offsets round-trip through every Kafka client.
pub const OFFSET_MAX: u64 = i64::MAX as u64;

/// Checks a topic name against Kafka's rule (storage's one definition),
/// worded for a client.
pub fn validate_topic_name(name: &str) -> Result<(), BrokerError> {
    let Some(problem) = topic_name_problem(name) else {
        return Ok(());
    };
    Err(BrokerError::InvalidName {
        kind: "topic",
        name: name.to_string(),
        reason: match problem {
            TopicNameProblem::Empty => "must not be empty".into(),
            TopicNameProblem::Reserved => "must not be \".\" or \"..\"".into(),
            TopicNameProblem::Character(bad) => format!(
                "character {bad:?} is not allowed (only ASCII letters, digits, '.', '_' and '-')"
            ),
            TopicNameProblem::TooLong(len) => {
                format!("is {len} characters long, the maximum is {TOPIC_NAME_MAX_CHARS}")
            }
        },
    })
}

/// Checks a consumer group name (rules in the module doc).
pub fn validate_group_name(name: &str) -> Result<(), BrokerError> {
    let invalid = |reason: String| BrokerError::InvalidName {
        kind: "consumer group",
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("must not be empty".into()));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '@')))
    {
        return Err(invalid(format!(
            "character {bad:?} is not allowed (only ASCII letters, digits, '.', '_', '-', ':' and '@')"
        )));
    }
    // ASCII only from here, so bytes are characters.
    if name.len() > GROUP_NAME_MAX_CHARS {
        return Err(invalid(format!(
            "is {} characters long, the maximum is {GROUP_NAME_MAX_CHARS}",
            name.len()
        )));
    }
    if name.starts_with(INTERNAL_PREFIX) {
        return Err(invalid(format!(
            "must not start with {INTERNAL_PREFIX:?}, the prefix of internal names such as __consumer_offsets"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(err: BrokerError) -> String {
        match err {
            BrokerError::InvalidName { reason, .. } => reason,
            other => panic!("expected InvalidName, got {other:?}"),
        }
    }

    #[test]
    fn topic_names_kafka_accepts() {
        for name in [
            "a",
            "events",
            "Users.v2",
            "my_topic-1",
            "__consumer_offsets",
            "...",
        ] {
            validate_topic_name(name).unwrap();
        }
        validate_topic_name(&"x".repeat(249)).unwrap();
    }

    #[test]
    fn hostile_topic_names_are_rejected_with_a_reason() {
        assert!(reason(validate_topic_name("").unwrap_err()).contains("empty"));
        assert!(reason(validate_topic_name(".").unwrap_err()).contains("\"..\""));
        assert!(reason(validate_topic_name("..").unwrap_err()).contains("\"..\""));
        assert!(reason(validate_topic_name("../x").unwrap_err()).contains("'/'"));
        assert!(reason(validate_topic_name("a/b").unwrap_err()).contains("'/'"));
        assert!(reason(validate_topic_name("a\\b").unwrap_err()).contains("'\\\\'"));
        assert!(reason(validate_topic_name("a\0b").unwrap_err()).contains("'\\0'"));
        assert!(reason(validate_topic_name("a b").unwrap_err()).contains("' '"));
        assert!(reason(validate_topic_name("tópico").unwrap_err()).contains("'ó'"));
        assert!(reason(validate_topic_name("a\nb").unwrap_err()).contains("'\\n'"));
        assert!(reason(validate_topic_name(&"x".repeat(250)).unwrap_err()).contains("250"));
    }

    #[test]
    fn group_names_follow_the_api_md_rule() {
        for name in [
            "g",
            "billing-v2",
            "a.b:c@d",
            "...",
            "_one_underscore",
            "group__with__underscores",
            "Z9",
        ] {
            validate_group_name(name).unwrap();
        }
        validate_group_name(&"g".repeat(249)).unwrap();

        assert!(reason(validate_group_name("").unwrap_err()).contains("empty"));
        for (bad, shown) in [
            ("my group", "' '"),
            ("grüppe", "'ü'"),
            ("../x", "'/'"),
            ("a\\b", "'\\\\'"),
            ("a\0", "'\\0'"),
            ("a\r\nb", "'\\r'"),
            ("a%2Fb", "'%'"),
        ] {
            assert!(
                reason(validate_group_name(bad).unwrap_err()).contains(shown),
                "{bad:?}"
            );
        }
        assert!(reason(validate_group_name(&"g".repeat(250)).unwrap_err()).contains("250"));
        for internal in ["__consumer_offsets", "__", "__x"] {
            assert!(
                reason(validate_group_name(internal).unwrap_err()).contains("internal"),
                "{internal:?}"
            );
        }
    }
}
