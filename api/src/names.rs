//! Validation of names and numbers that arrive in URL paths and queries.
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
//! An invalid name is 400/40002 rather than 404: such a topic or group can
//! never exist, and the message says what is wrong with the name.

use tidelog_storage::{topic_name_problem, TopicNameProblem};

use crate::error::ApiError;

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
/// worded for an HTTP client.
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    let Some(problem) = topic_name_problem(name) else {
        return Ok(());
    };
    Err(ApiError::InvalidName {
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
pub fn validate_group_name(name: &str) -> Result<(), ApiError> {
    let invalid = |reason: String| ApiError::InvalidName {
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

/// Parses a partition number: plain decimal digits, no sign, no spaces,
/// fitting in a `u32`.
pub fn parse_partition(text: &str) -> Result<u32, ApiError> {
    parse_decimal(text)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| ApiError::BadRequest {
            message: format!(
                "partition {text:?} is not a partition number (decimal digits, 0 to {})",
                u32::MAX
            ),
        })
}

/// Parses a queue offset (`offset` query parameter): plain decimal digits in
/// [0, 2^63 − 1]. Negative or unparseable offsets are 400/40002 (API.md).
pub fn parse_offset(text: &str) -> Result<u64, ApiError> {
    parse_decimal(text)
        .filter(|n| *n <= OFFSET_MAX)
        .ok_or_else(|| ApiError::BadRequest {
            message: format!("offset {text:?} is not a decimal integer in [0, {OFFSET_MAX}]"),
        })
}

/// Digits only, because `str::parse::<u64>` also takes a leading `+`, which
/// would let two spellings name the same partition.
fn parse_decimal(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(err: ApiError) -> String {
        assert_eq!(err.error_code(), 40002);
        match err {
            ApiError::InvalidName { reason, .. } => reason,
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

    #[test]
    fn partitions_are_plain_decimal_u32() {
        assert_eq!(parse_partition("0").unwrap(), 0);
        assert_eq!(parse_partition("17").unwrap(), 17);
        assert_eq!(parse_partition("4294967295").unwrap(), u32::MAX);
        for bad in ["", "-1", "+1", " 1", "1 ", "0x1", "1.0", "4294967296", "١"] {
            let err = parse_partition(bad).unwrap_err();
            assert_eq!(err.error_code(), 40002, "{bad:?}");
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn offsets_are_decimal_in_zero_to_i64_max() {
        assert_eq!(parse_offset("0").unwrap(), 0);
        assert_eq!(parse_offset("9223372036854775807").unwrap(), OFFSET_MAX);
        for bad in [
            "",
            "-1",
            "+5",
            "9223372036854775808",
            "18446744073709551616",
            "1e3",
            "abc",
        ] {
            assert_eq!(
                parse_offset(bad).unwrap_err().error_code(),
                40002,
                "{bad:?}"
            );
        }
    }
}
