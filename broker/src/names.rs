//! Validation of topic and consumer group names, whichever front-end they
//! arrive through.
//!
//! Topic names become directory names under `consumequeue/` and
//! `compacted/`, so they follow Kafka's rule exactly
//! (`[a-zA-Z0-9._-]{1,249}`, not `.` or `..`): nothing that can climb out of
//! the data directory, no separators, no bytes a filesystem might fold or
//! reject. Every check runs before a name reaches storage.
//!
//! Consumer group names are what Kafka takes: any non-empty string (0132
//! of librdkafka's suite names one `roundrobin,range`), at most 4,096
//! bytes of UTF-8. Kafka has no bound short of a protocol string's
//! 32,767 bytes; this one keeps what the coordinator's 10,000 groups and
//! the offsets of every group hold in their names to megabytes, not
//! hundreds of them, whoever names them. Every place a group
//! name reaches is safe for any of them: the `group/topic/partition` keys
//! of `__consumer_offsets` are split from the right (a topic name has no
//! `/` and a partition is a number, so the group is the rest: the keys
//! are unchanged on disk), metrics escape their label values, logs print
//! names quoted and escaped (as `Debug`), HTTP paths percent-decode them
//! and `base_uri` percent-encodes them, and no file is named after one.
//!
//! HTTP consumer instance names keep the narrow rule
//! ([`validate_plain_name`]: `[a-zA-Z0-9._-]`, `:` and `@`, at most 249),
//! since they are tidelog's own and appear in URLs it builds.
//!
//! An invalid name is `BrokerError::InvalidName`, not an unknown topic or
//! group: such a topic or group can never exist, and the message says what
//! is wrong with the name.

use tidelog_storage::{topic_name_problem, TopicNameProblem};

use crate::error::BrokerError;

/// Kafka's `Topic.MAX_NAME_LENGTH`.
pub const TOPIC_NAME_MAX_CHARS: usize = tidelog_storage::types::TOPIC_NAME_MAX;

/// The longest consumer group name, in bytes (module doc: why not a
/// protocol string's 32,767).
pub const GROUP_NAME_MAX_BYTES: usize = 4096;

/// The longest HTTP consumer instance name ([`validate_plain_name`]).
pub const PLAIN_NAME_MAX_CHARS: usize = 249;

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

/// Checks a consumer group name: any non-empty string up to
/// [`GROUP_NAME_MAX_BYTES`], as Kafka (module doc).
pub fn validate_group_name(name: &str) -> Result<(), BrokerError> {
    let invalid = |reason: String| BrokerError::InvalidName {
        kind: "consumer group",
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("must not be empty".into()));
    }
    if name.len() > GROUP_NAME_MAX_BYTES {
        return Err(invalid(format!(
            "is {} bytes long, the maximum is {GROUP_NAME_MAX_BYTES}",
            name.len()
        )));
    }
    Ok(())
}

/// Checks a name of tidelog's own (an HTTP consumer instance's): 1 to
/// [`PLAIN_NAME_MAX_CHARS`] of `[a-zA-Z0-9._-]`, `:` and `@`, safe in a
/// URL path and a log line as it is. `kind` names it in the refusal.
pub fn validate_plain_name(kind: &'static str, name: &str) -> Result<(), BrokerError> {
    let invalid = |reason: String| BrokerError::InvalidName {
        kind,
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
    if name.len() > PLAIN_NAME_MAX_CHARS {
        return Err(invalid(format!(
            "is {} characters long, the maximum is {PLAIN_NAME_MAX_CHARS}",
            name.len()
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

    /// Any non-empty group name Kafka can carry is one: commas, spaces,
    /// slashes, `%`, control characters, `__`, any script.
    #[test]
    fn group_names_are_any_non_empty_string_kafka_can_carry() {
        for name in [
            "g",
            "roundrobin,range",
            "my group",
            "grüppe",
            "../x",
            "a/b/c",
            "a\\b",
            "a\0",
            "a\r\nb",
            "a%2Fb",
            "__consumer_offsets",
            "群组",
        ] {
            validate_group_name(name).unwrap();
        }
        validate_group_name(&"g".repeat(GROUP_NAME_MAX_BYTES)).unwrap();
        assert!(reason(validate_group_name("").unwrap_err()).contains("empty"));
        assert!(
            reason(validate_group_name(&"g".repeat(GROUP_NAME_MAX_BYTES + 1)).unwrap_err())
                .contains("4097 bytes")
        );
    }

    #[test]
    fn plain_names_are_url_and_log_safe() {
        for name in ["g", "billing-v2", "a.b:c@d", "...", "_x", "Z9"] {
            validate_plain_name("consumer instance", name).unwrap();
        }
        validate_plain_name("consumer instance", &"g".repeat(249)).unwrap();
        let refused =
            |name: &str| reason(validate_plain_name("consumer instance", name).unwrap_err());
        assert!(refused("").contains("empty"));
        for (bad, shown) in [
            ("my i", "' '"),
            ("grüppe", "'ü'"),
            ("../x", "'/'"),
            ("a\r\nb", "'\\r'"),
            ("a%2Fb", "'%'"),
        ] {
            assert!(refused(bad).contains(shown), "{bad:?}");
        }
        assert!(refused(&"g".repeat(250)).contains("250"));
    }
}
