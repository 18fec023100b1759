//! Validation of numbers that arrive in URL paths and queries; the name
//! rules are the broker's ([`tidelog_broker::names`]), re-exported here.
//!
//! An invalid name is 400/40002 rather than 404: such a topic or group can
//! never exist, and the message says what is wrong with the name.

pub use tidelog_broker::names::{
    validate_group_name, validate_topic_name, GROUP_NAME_MAX_BYTES, OFFSET_MAX,
    TOPIC_NAME_MAX_CHARS,
};

use crate::error::ApiError;

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
