//! The stored form of a json-format key or value (API.md, "Conventions"):
//! compact JSON text with object members sorted and numbers exactly as the
//! client wrote them.
//!
//! Equal stored bytes must mean equal keys, for the partitioner, the
//! IndexFile and compaction, so the text is put in one canonical form; but
//! a number is never converted: `18446744073709551616` and
//! `18446744073709551617` are different keys, `-0`, `1e2` and `100` are
//! three, and a fetch gives back the spelling that was produced. (Going
//! through `serde_json::Value` made them f64s: 2^64 and 2^64 + 1 became the
//! same key, `1e2` came back as `100.0`. serde_json's `arbitrary_precision`
//! would keep the digits but still respell `1e2` as `1e+2`, and it is a
//! workspace-wide switch under every number of every crate.)
//!
//! Invariants of [`canonicalize`]:
//! * It accepts exactly one RFC 8259 JSON value, optionally surrounded by
//!   whitespace: UTF-8, no trailing commas, no leading zeros, no control
//!   characters in strings, `\u` surrogates paired, no number beyond an
//!   f64's range (serde_json's rule, which the general produce decoder
//!   applies to the whole body; `1e-400` is fine, `1e400` is not), at
//!   most [`MAX_DEPTH`] nested arrays and objects. Anything else is [`NotJson`] with the byte
//!   position.
//! * The output has no whitespace; `null`, `true`, `false` and numbers are
//!   copied as written; strings are decoded and written in serde_json's
//!   escaping (only `"`, `\` and control characters escaped); object
//!   members are sorted by their decoded names as bytes (serde_json's
//!   `Map` order, so every text stored before numbers were kept as written
//!   is unchanged unless it held a float or an integer over 64 bits), and
//!   a repeated name keeps its last value, as serde_json does.
//! * Canonicalizing the output again gives the same bytes.
//!
//! `json_fast::is_canonical_json` recognises text that is already in this
//! form without building anything; this module is the general case.

use std::borrow::Cow;
use std::fmt;

use super::json_write::push_json_str;

/// Deepest nesting of arrays and objects accepted. At least serde_json's
/// own limit (127 for a whole produce body), so the general produce
/// decoder never refuses here what serde_json accepted.
pub(crate) const MAX_DEPTH: usize = 128;

/// Why text is not one JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotJson {
    pub position: usize,
    pub reason: &'static str,
}

impl fmt::Display for NotJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.position)
    }
}

/// The canonical text of the one JSON value in `text` (module doc).
pub(crate) fn canonicalize(text: &[u8]) -> Result<Vec<u8>, NotJson> {
    let node = Node::parse(text)?;
    let mut out = Vec::with_capacity(text.len());
    node.write(&mut out);
    Ok(out)
}

/// A parsed JSON value that keeps what canonical text needs: scalars as
/// written, strings decoded, object members sorted and unique.
#[derive(Debug)]
pub(crate) enum Node<'a> {
    /// `null`, `true`, `false` or a number, as written.
    Raw(&'a str),
    Str(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    /// Sorted by name as bytes, names unique (the last one written won).
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

impl<'a> Node<'a> {
    /// Parses the one JSON value in `text` (module doc).
    pub(crate) fn parse(text: &'a [u8]) -> Result<Node<'a>, NotJson> {
        let text = std::str::from_utf8(text).map_err(|e| NotJson {
            position: e.valid_up_to(),
            reason: "invalid UTF-8",
        })?;
        let mut p = Parser { text, pos: 0 };
        p.ws();
        let node = p.value(0)?;
        p.ws();
        if p.pos != text.len() {
            return Err(p.error("trailing characters after the value"));
        }
        Ok(node)
    }

    /// The value of member `name`, if this is an object that has one.
    pub(crate) fn member(&self, name: &str) -> Option<&Node<'a>> {
        let Node::Object(members) = self else {
            return None;
        };
        members
            .binary_search_by(|(n, _)| n.as_bytes().cmp(name.as_bytes()))
            .ok()
            .map(|i| &members[i].1)
    }

    /// The elements, if this is an array.
    pub(crate) fn items(&self) -> Option<&[Node<'a>]> {
        match self {
            Node::Array(items) => Some(items),
            _ => None,
        }
    }

    /// Appends the canonical text.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match self {
            Node::Raw(text) => out.extend_from_slice(text.as_bytes()),
            Node::Str(text) => push_json_str(out, text),
            Node::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item.write(out);
                }
                out.push(b']');
            }
            Node::Object(members) => {
                out.push(b'{');
                for (i, (name, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    push_json_str(out, name);
                    out.push(b':');
                    value.write(out);
                }
                out.push(b'}');
            }
        }
    }
}

/// Whether a valid number token is within an f64's range, as serde_json
/// requires. Only a long token or one with an exponent can be beyond it.
pub(crate) fn number_in_range(token: &str) -> bool {
    let may_overflow = token.len() > 300 || token.bytes().any(|b| b == b'e' || b == b'E');
    !may_overflow || token.parse::<f64>().is_ok_and(f64::is_finite)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, reason: &'static str) -> NotJson {
        NotJson {
            position: self.pos,
            reason,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8, reason: &'static str) -> Result<(), NotJson> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(reason))
        }
    }

    /// One value at the cursor; `depth` arrays and objects enclose it.
    fn value(&mut self, depth: usize) -> Result<Node<'a>, NotJson> {
        match self.peek() {
            None => Err(self.error("unexpected end of the text")),
            Some(b'n') => self.literal("null"),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'"') => Ok(Node::Str(self.string()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(open @ (b'[' | b'{')) => {
                if depth >= MAX_DEPTH {
                    return Err(self.error("nested too deep"));
                }
                self.pos += 1;
                self.ws();
                if open == b'[' {
                    self.array(depth)
                } else {
                    self.object(depth)
                }
            }
            Some(_) => Err(self.error("expected a JSON value")),
        }
    }

    fn literal(&mut self, word: &'static str) -> Result<Node<'a>, NotJson> {
        if self.text[self.pos..].starts_with(word) {
            let start = self.pos;
            self.pos += word.len();
            Ok(Node::Raw(&self.text[start..self.pos]))
        } else {
            Err(self.error("expected a JSON value"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// RFC 8259's number grammar; the text is kept as written.
    fn number(&mut self) -> Result<Node<'a>, NotJson> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.error("invalid number: no digit after the decimal point"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("invalid number: no digit in the exponent"));
            }
        }
        let text = &self.text[start..self.pos];
        if !number_in_range(text) {
            self.pos = start;
            return Err(self.error("number out of range (beyond an f64's)"));
        }
        Ok(Node::Raw(text))
    }

    /// Elements after the `[` (and whitespace).
    fn array(&mut self, depth: usize) -> Result<Node<'a>, NotJson> {
        let mut items = Vec::new();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Node::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Node::Array(items));
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    /// Members after the `{` (and whitespace), then sorted, a repeated
    /// name keeping its last value.
    fn object(&mut self, depth: usize) -> Result<Node<'a>, NotJson> {
        let mut members = Vec::new();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Node::Object(members));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a member name"));
            }
            let name = self.string()?;
            self.ws();
            self.expect(b':', "expected ':' after a member name")?;
            self.ws();
            members.push((name, self.value(depth + 1)?));
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
        // Stable: of equal names, the last written stays last.
        members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut unique: Vec<(Cow<'a, str>, Node<'a>)> = Vec::with_capacity(members.len());
        for member in members {
            match unique.last_mut() {
                Some(last) if last.0 == member.0 => *last = member,
                _ => unique.push(member),
            }
        }
        Ok(Node::Object(unique))
    }

    /// A string at the cursor (on its opening quote), decoded; borrowed
    /// when it has no escape.
    fn string(&mut self) -> Result<Cow<'a, str>, NotJson> {
        self.pos += 1;
        let start = self.pos;
        let bytes = self.text.as_bytes();
        // Plain bytes up to the closing quote or the first escape.
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Borrowed(&self.text[start..self.pos - 1]));
                }
                Some(b'\\') => break,
                Some(0x00..=0x1f) => return Err(self.error("control character in a string")),
                Some(_) => self.pos += 1,
            }
        }
        let mut owned = String::from(&self.text[start..self.pos]);
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(owned));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let decoded = match self.peek() {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.pos += 1;
                            let c = self.unicode_escape()?;
                            owned.push(c);
                            continue;
                        }
                        _ => return Err(self.error("invalid escape in a string")),
                    };
                    self.pos += 1;
                    owned.push(decoded);
                }
                Some(0x00..=0x1f) => return Err(self.error("control character in a string")),
                Some(_) => {
                    // Up to the next quote, backslash or control byte: all
                    // ASCII, so the slice ends on a character boundary.
                    let run = self.pos;
                    while let Some(&b) = bytes.get(self.pos) {
                        if b == b'"' || b == b'\\' || b < 0x20 {
                            break;
                        }
                        self.pos += 1;
                    }
                    owned.push_str(&self.text[run..self.pos]);
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, NotJson> {
        let hex = self
            .text
            .get(self.pos..self.pos + 4)
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("invalid \\u escape"))?;
        self.pos += 4;
        u32::from_str_radix(hex, 16).map_err(|_| self.error("invalid \\u escape"))
    }

    /// The character of a `\u` escape (cursor after the `u`); a UTF-16
    /// surrogate must come as a high-low pair.
    fn unicode_escape(&mut self) -> Result<char, NotJson> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.text[self.pos..].starts_with("\\u") {
                    return Err(self.error("unpaired surrogate in a \\u escape"));
                }
                self.pos += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(self.error("unpaired surrogate in a \\u escape"));
                }
                0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.error("unpaired surrogate in a \\u escape")),
            c => c,
        };
        char::from_u32(code).ok_or_else(|| self.error("invalid \\u escape"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn canon(text: &str) -> String {
        String::from_utf8(canonicalize(text.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn numbers_keep_their_text() {
        for n in [
            "0",
            "-0",
            "7",
            "1e2",
            "1E+2",
            "1e-400",
            "100",
            "1.50",
            "-0.0",
            "18446744073709551616",
            "18446744073709551617",
            "123456789012345678901234567890.000000000000000000001",
        ] {
            assert_eq!(canon(n), n);
            assert_eq!(canon(&format!(" {n}\n")), n);
        }
        assert_ne!(canon("18446744073709551616"), canon("18446744073709551617"));
        assert_eq!(
            canon(r#"{"id": 18446744073709551617, "v": [1e2, -0]}"#),
            r#"{"id":18446744073709551617,"v":[1e2,-0]}"#
        );
    }

    #[test]
    fn members_are_sorted_and_strings_escaped_as_serde_json_does() {
        assert_eq!(
            canon(r#" { "b" : 1 , "a" : { "z" : [ true , null ] , "c" : "s" } } "#),
            r#"{"a":{"c":"s","z":[true,null]},"b":1}"#
        );
        // Sorted by decoded name, as bytes (é sorts after z).
        assert_eq!(
            canon(r#"{"\u00e9":1,"z":2,"a\n":3,"a":4}"#),
            "{\"a\":4,\"a\\n\":3,\"z\":2,\"é\":1}"
        );
        // The last of a repeated name wins, as in serde_json.
        assert_eq!(canon(r#"{"a":1,"b":0,"a":2}"#), r#"{"a":2,"b":0}"#);
        assert_eq!(
            canon(r#""\/\u0041\u0001\ud83d\ude00\t\"""#),
            "\"/A\\u0001😀\\t\\\"\""
        );
        // Agrees with serde_json for everything without a number.
        for text in [
            r#"{"b":[{"y":"\u00fc","x":null}],"a":"\\","c":{}}"#,
            r#"["\b\f\n\r\t", "\u007f", "日本"]"#,
        ] {
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(canon(text), serde_json::to_string(&value).unwrap());
        }
    }

    #[test]
    fn canonical_text_is_a_fixed_point() {
        for text in [
            r#"{"b":1e2,"a":[-0, {"d":"\u0000","c":1.0}]}"#,
            r#""x""#,
            "[[],{}]",
        ] {
            let once = canon(text);
            assert_eq!(canon(&once), once);
        }
    }

    #[test]
    fn bad_json_is_refused_with_a_position() {
        for (text, reason) in [
            ("", "unexpected end of the text"),
            ("01", "trailing characters after the value"),
            ("1.", "invalid number: no digit after the decimal point"),
            ("1e", "invalid number: no digit in the exponent"),
            ("-", "invalid number"),
            ("+1", "expected a JSON value"),
            ("NaN", "expected a JSON value"),
            ("nul", "expected a JSON value"),
            ("[1,]", "expected a JSON value"),
            ("[1 2]", "expected ',' or ']'"),
            ("{\"a\":1,}", "expected a member name"),
            ("{1:2}", "expected a member name"),
            ("{\"a\" 1}", "expected ':' after a member name"),
            ("\"abc", "unterminated string"),
            ("\"a\tb\"", "control character in a string"),
            ("\"\\x\"", "invalid escape in a string"),
            ("\"\\u12\"", "invalid \\u escape"),
            ("\"\\ud800\"", "unpaired surrogate in a \\u escape"),
            ("\"\\udc00\"", "unpaired surrogate in a \\u escape"),
            ("\"\\ud800\\u0041\"", "unpaired surrogate in a \\u escape"),
            ("1 2", "trailing characters after the value"),
            ("1e400", "number out of range (beyond an f64's)"),
            ("[-1E+309]", "number out of range (beyond an f64's)"),
        ] {
            let err = canonicalize(text.as_bytes()).unwrap_err();
            assert_eq!(err.reason, reason, "{text:?}");
            // serde_json refuses them too.
            assert!(
                serde_json::from_str::<serde_json::Value>(text).is_err(),
                "{text:?}"
            );
        }
        assert_eq!(
            canonicalize(b"\"\xff\"").unwrap_err(),
            NotJson {
                position: 1,
                reason: "invalid UTF-8"
            }
        );
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(canon(&deep(MAX_DEPTH)), deep(MAX_DEPTH));
        let err = canonicalize(deep(MAX_DEPTH + 1).as_bytes()).unwrap_err();
        assert_eq!(err.reason, "nested too deep");
        // Far deeper than the stack could take without the bound.
        let err = canonicalize(deep(1_000_000).as_bytes()).unwrap_err();
        assert_eq!(err.position, MAX_DEPTH);
    }
}
