//! Parsers of the values the command line takes: `consume -o`, the dates
//! of `groups reset-offsets --to-datetime`, and `k=v` pairs. Each refuses
//! what it cannot read exactly, naming the accepted forms.

use std::str::FromStr;

/// `consume -o`: where each partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// `beginning`: the partition's first record.
    Beginning,
    /// `end`: only records produced from now on.
    End,
    /// `N`: that offset (the partition's beginning if below it).
    Absolute(u64),
    /// `-N`: the last N records of each partition.
    FromEnd(u64),
    /// `@ms`: the first record whose timestamp is at least `ms`.
    Timestamp(i64),
}

const OFFSET_FORMS: &str = "beginning, end, N, -N (the last N) or @ms (a timestamp)";

impl FromStr for OffsetSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<OffsetSpec, String> {
        let bad = || format!("{text:?} is not an offset: {OFFSET_FORMS}");
        match text {
            "beginning" => Ok(OffsetSpec::Beginning),
            "end" => Ok(OffsetSpec::End),
            _ => {
                if let Some(ms) = text.strip_prefix('@') {
                    return ms.parse().map(OffsetSpec::Timestamp).map_err(|_| bad());
                }
                if let Some(n) = text.strip_prefix('-') {
                    return parse_digits(n).map(OffsetSpec::FromEnd).ok_or_else(bad);
                }
                match parse_digits(text) {
                    Some(n) if n <= i64::MAX as u64 => Ok(OffsetSpec::Absolute(n)),
                    _ => Err(bad()),
                }
            }
        }
    }
}

/// Decimal digits only (`u64::from_str` takes a leading `+`).
fn parse_digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `--to-datetime`: `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]` (ISO 8601, a
/// space instead of `T` accepted); without a zone it is UTC. Returns
/// milliseconds since the Unix epoch.
pub fn parse_datetime_ms(text: &str) -> Result<i64, String> {
    let bad = |why: &str| {
        format!("{text:?} is not a date-time ({why}): use YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM]")
    };
    let bytes = text.as_bytes();
    if bytes.len() < 19 || !matches!(bytes[10], b'T' | b't' | b' ') {
        return Err(bad("too short or no T"));
    }
    let num = |range: std::ops::Range<usize>| -> Result<i64, String> {
        let part = text.get(range).ok_or_else(|| bad("not ASCII"))?;
        parse_digits(part)
            .and_then(|n| i64::try_from(n).ok())
            .ok_or_else(|| bad("a field is not a number"))
    };
    if bytes[4] != b'-' || bytes[7] != b'-' || bytes[13] != b':' || bytes[16] != b':' {
        return Err(bad("separators"));
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad("no such day"));
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(bad("no such time"));
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return Err(bad("fraction of a second"));
        }
        // Milliseconds: the first three digits, padded.
        let first = &fraction[..digits.min(3)];
        millis = num_pad3(first);
        rest = &fraction[digits..];
    }
    let offset_minutes = match rest {
        "" | "Z" | "z" => 0,
        zone => {
            let zb = zone.as_bytes();
            if zb.len() != 6 || !matches!(zb[0], b'+' | b'-') || zb[3] != b':' {
                return Err(bad("zone"));
            }
            let field = |range| zone.get(range).and_then(parse_digits);
            let hours = field(1..3).ok_or_else(|| bad("zone"))?;
            let minutes = field(4..6).ok_or_else(|| bad("zone"))?;
            if hours > 23 || minutes > 59 {
                return Err(bad("zone"));
            }
            let sign = if zb[0] == b'-' { -1 } else { 1 };
            sign * i64::try_from(hours * 60 + minutes).map_err(|_| bad("zone"))?
        }
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(seconds * 1000 + millis)
}

fn num_pad3(digits: &str) -> i64 {
    let mut millis = 0;
    for i in 0..3 {
        let d = digits.as_bytes().get(i).map_or(0, |b| i64::from(b - b'0'));
        millis = millis * 10 + d;
    }
    millis
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = if year >= 0 { year } else { year - 399 } / 400;
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// `--config k=v`, `--set k=v`: split at the first `=`; the name must not
/// be empty (the value may be, and is the server's to judge).
pub fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_specs_parse() {
        let cases = [
            ("beginning", OffsetSpec::Beginning),
            ("end", OffsetSpec::End),
            ("0", OffsetSpec::Absolute(0)),
            ("1234", OffsetSpec::Absolute(1234)),
            ("-10", OffsetSpec::FromEnd(10)),
            ("-0", OffsetSpec::FromEnd(0)),
            ("@1700000000000", OffsetSpec::Timestamp(1_700_000_000_000)),
            ("@-5", OffsetSpec::Timestamp(-5)),
        ];
        for (text, spec) in cases {
            assert_eq!(text.parse::<OffsetSpec>(), Ok(spec), "{text}");
        }
    }

    #[test]
    fn bad_offset_specs_are_refused() {
        for bad in [
            "",
            "start",
            "+5",
            "1.5",
            "-",
            "--1",
            "@",
            "@x",
            "9223372036854775808",
            " 1",
            "1 ",
        ] {
            let why = bad.parse::<OffsetSpec>().unwrap_err();
            assert!(why.contains("beginning, end"), "{bad:?}: {why}");
        }
        assert_eq!(
            "9223372036854775807".parse::<OffsetSpec>(),
            Ok(OffsetSpec::Absolute(i64::MAX as u64))
        );
    }

    #[test]
    fn datetimes_parse_to_epoch_milliseconds() {
        let cases = [
            ("1970-01-01T00:00:00Z", 0),
            ("1970-01-01T00:00:00", 0),
            ("2023-11-14T22:13:20Z", 1_700_000_000_000),
            ("2023-11-14 22:13:20.5", 1_700_000_000_500),
            ("2023-11-14T22:13:20.123456Z", 1_700_000_000_123),
            ("2023-11-15T00:13:20+02:00", 1_700_000_000_000),
            ("2023-11-14T21:13:20-01:00", 1_700_000_000_000),
            ("2024-02-29T00:00:00Z", 1_709_164_800_000),
            ("1969-12-31T23:59:59Z", -1000),
            ("2000-03-01T00:00:00Z", 951_868_800_000),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_datetime_ms(text), Ok(ms), "{text}");
        }
    }

    #[test]
    fn bad_datetimes_are_refused() {
        for bad in [
            "",
            "2023-11-14",
            "2023-11-14T22:13",
            "2023-02-29T00:00:00Z",
            "2023-13-01T00:00:00Z",
            "2023-11-14T24:00:00Z",
            "2023-11-14T22:13:20.Z",
            "2023-11-14T22:13:20+0200",
            "2023-11-14T22:13:20 UTC",
            "2023/11/14T22:13:20Z",
            "1700000000000",
        ] {
            assert!(parse_datetime_ms(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn key_values_split_at_the_first_equals() {
        assert_eq!(
            parse_key_value("cleanup.policy=compact"),
            Ok(("cleanup.policy".into(), "compact".into()))
        );
        assert_eq!(parse_key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(parse_key_value("a="), Ok(("a".into(), String::new())));
        assert!(parse_key_value("=b").is_err());
        assert!(parse_key_value("ab").is_err());
    }
}
