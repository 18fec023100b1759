//! Fast paths for the produce and fetch hot paths (docs/BENCHMARKS.md,
//! "after the hot-path work").
//!
//! Both are *sound by fallback*: they only take a body or a stored value
//! they can prove they handle exactly like the general path in `records/mod.rs`
//! (serde_json `Value` trees), and hand everything else back to it. So every
//! answer, error code and message is the general path's.
//!
//! * [`decode_produce_fast`] reads a produce body with a strict hand-written
//!   scanner and answers `None` (use the general decoder) for anything that
//!   is not a well-formed, valid request in the plain shape: an unknown or
//!   repeated field, an escape in a field name or a base64 string, bad
//!   base64, a wrong type, nesting deeper than [`MAX_DEPTH`], invalid
//!   UTF-8. A json-format key or value already in canonical form is copied
//!   as it is; any other is put in it by `canonical_json`. Base64 is decoded into one buffer for the
//!   whole request, which the records then share.
//! * Base64 here is base64-simd's: decoding a 100-byte value onto a shared
//!   buffer takes ~32 ns where the scalar `base64` crate takes ~80 ns, and
//!   encoding ~36 against ~94 ns (`api/benches/base64.rs`); produce decodes,
//!   fetch encodes, every value. It is exactly as strict as
//!   the general path's `base64` STANDARD engine (padding required and
//!   canonical, no trailing bits, no whitespace): the decode tests in
//!   `records/mod.rs` run both over the same texts, and invalid base64 falls
//!   back to the general path for its error message.
//! * [`is_canonical_json`] tells whether bytes are exactly what
//!   `canonical_json::canonicalize` makes of them (compact, object members
//!   sorted and without escapes in their names, strings in serde_json's
//!   escaping, numbers in any valid spelling): such bytes are their own
//!   canonical form and can be stored or sent as they are. It may answer
//!   false for some canonical text (a member name with an escape); that
//!   only costs a canonicalisation.

use base64_simd::STANDARD as BASE64;
use bytes::Bytes;

use super::format::{EmbeddedFormat, ProduceRecord};

/// Deeper nesting (counted from the body's root) goes to the general path,
/// which enforces serde_json's own limit of 128 with its own message.
/// Below `canonical_json::MAX_DEPTH`, so a value this scanner accepts is
/// never too deep to canonicalise.
pub(crate) const MAX_DEPTH: usize = 100;

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// What [`Scanner::value`] found.
struct Scanned {
    start: usize,
    end: usize,
    /// The text is serde_json's compact, sorted rendering of itself.
    canonical: bool,
}

impl<'a> Scanner<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Scanner { bytes, pos: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skips JSON whitespace; true if there was any.
    fn ws(&mut self) -> bool {
        let start = self.pos;
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
        self.pos != start
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Some(())
        } else {
            None
        }
    }

    fn literal(&mut self, text: &[u8]) -> Option<()> {
        if self.bytes.get(self.pos..self.pos + text.len()) == Some(text) {
            self.pos += text.len();
            Some(())
        } else {
            None
        }
    }

    /// Skips string bytes that need no attention (not `"`, `\\` or a
    /// control character), eight at a time.
    fn skip_plain(&mut self) {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
        while let Some(chunk) = self.bytes.get(self.pos..self.pos + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let x = u64::from_le_bytes(word);
            // Any byte that is `"`, `\\`, or below 0x20 stops the skip.
            let special = has_zero(x ^ (ONES * u64::from(b'"')))
                | has_zero(x ^ (ONES * u64::from(b'\\')))
                | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
            if special != 0 {
                return;
            }
            self.pos += 8;
        }
    }

    /// A string at the cursor (on its opening quote). Returns the raw
    /// contents between the quotes, whether they contain an escape, and
    /// whether they are in serde_json's output escaping. `None` for invalid
    /// strings, with `\u` escapes checked as serde_json and
    /// `canonical_json` do (four hex digits, surrogates in pairs).
    fn string(&mut self) -> Option<(&'a [u8], bool, bool)> {
        self.eat(b'"')?;
        let start = self.pos;
        let mut escaped = false;
        let mut canonical = true;
        loop {
            self.skip_plain();
            let b = self.peek()?;
            match b {
                b'"' => {
                    let raw = &self.bytes[start..self.pos];
                    self.pos += 1;
                    return Some((raw, escaped, canonical));
                }
                b'\\' => {
                    escaped = true;
                    self.pos += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'/' => canonical = false,
                        b'u' => {
                            canonical = false;
                            self.pos += 1;
                            self.unicode_escape()?;
                            continue;
                        }
                        _ => return None,
                    }
                    self.pos += 1;
                }
                0x00..=0x1f => return None,
                _ => self.pos += 1,
            }
        }
    }

    /// Four hex digits.
    fn hex4(&mut self) -> Option<u32> {
        let hex = self.bytes.get(self.pos..self.pos + 4)?;
        let mut n = 0;
        for &b in hex {
            n = n * 16 + char::from(b).to_digit(16)?;
        }
        self.pos += 4;
        Some(n)
    }

    /// The rest of a `\u` escape (cursor after the `u`): a UTF-16
    /// surrogate must come as a high-low pair.
    fn unicode_escape(&mut self) -> Option<()> {
        match self.hex4()? {
            0xD800..=0xDBFF => {
                self.literal(b"\\u")?;
                (0xDC00..=0xDFFF).contains(&self.hex4()?).then_some(())
            }
            0xDC00..=0xDFFF => None,
            _ => Some(()),
        }
    }

    /// A number in RFC 8259's grammar, within an f64's range as serde_json
    /// requires. Always canonical: canonical text keeps numbers as written.
    fn number(&mut self) -> Option<bool> {
        let start = self.pos;
        self.eat(b'-');
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                }
            }
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            let frac = self.pos;
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
            if self.pos == frac {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            let exp = self.pos;
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
            if self.pos == exp {
                return None;
            }
        }
        debug_assert!(self.pos > start);
        let token = std::str::from_utf8(&self.bytes[start..self.pos]).ok()?;
        super::canonical_json::number_in_range(token).then_some(true)
    }

    /// One JSON value at the cursor (no leading whitespace), `depth` being
    /// the nesting of its container. `None`: invalid, unsupported or too
    /// deep.
    fn value(&mut self, depth: usize) -> Option<Scanned> {
        let start = self.pos;
        let canonical = match self.peek()? {
            b'n' => self.literal(b"null").map(|()| true)?,
            b't' => self.literal(b"true").map(|()| true)?,
            b'f' => self.literal(b"false").map(|()| true)?,
            b'"' => self.string().map(|(_, _, canonical)| canonical)?,
            b'-' | b'0'..=b'9' => self.number()?,
            open @ (b'[' | b'{') => {
                if depth + 1 > MAX_DEPTH {
                    return None;
                }
                let object = open == b'{';
                let close = if object { b'}' } else { b']' };
                self.pos += 1;
                let mut canonical = !self.ws();
                if self.eat(close).is_none() {
                    let mut previous: Option<&[u8]> = None;
                    loop {
                        if object {
                            let (key, escaped, _) = self.string()?;
                            // Sorted and unique as raw bytes is sorted and
                            // unique as strings when there is no escape.
                            canonical &= !escaped && previous.is_none_or(|p| p < key);
                            previous = Some(key);
                            canonical &= !self.ws();
                            self.eat(b':')?;
                            canonical &= !self.ws();
                        }
                        let item = self.value(depth + 1)?;
                        canonical &= item.canonical;
                        canonical &= !self.ws();
                        if !self.separator(close)? {
                            break;
                        }
                        canonical &= !self.ws();
                    }
                }
                canonical
            }
            _ => return None,
        };
        Some(Scanned {
            start,
            end: self.pos,
            canonical,
        })
    }

    /// A field name of a known object: a string without escapes.
    fn field_name(&mut self) -> Option<&'a [u8]> {
        let (name, escaped, _) = self.string()?;
        (!escaped).then_some(name)
    }

    /// Iterates the members of an object at the cursor, calling `member`
    /// with each name, the cursor on its value.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let name = self.field_name()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            member(self, name)?;
            self.ws();
            if !self.separator(b'}')? {
                return Some(());
            }
            self.ws();
        }
    }

    /// Iterates the elements of an array at the cursor.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        self.ws();
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            element(self)?;
            self.ws();
            if !self.separator(b']')? {
                return Some(());
            }
            self.ws();
        }
    }

    /// After an element of a container: `Some(true)` past a `,` (another
    /// element follows), `Some(false)` past `close`, `None` otherwise.
    fn separator(&mut self, close: u8) -> Option<bool> {
        let more = match self.peek()? {
            b',' => true,
            c if c == close => false,
            _ => return None,
        };
        self.pos += 1;
        Some(more)
    }

    /// A non-negative integer without fraction or exponent that fits `u64`.
    fn unsigned(&mut self) -> Option<u64> {
        let start = self.pos;
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                }
            }
            _ => return None,
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return None;
        }
        let mut n: u64 = 0;
        for &d in &self.bytes[start..self.pos] {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        Some(n)
    }

    /// A base64 string (no escapes), decoded onto the end of `out`; the
    /// range it took.
    fn base64_into(&mut self, out: &mut Vec<u8>) -> Option<(usize, usize)> {
        let (text, escaped, _) = self.string()?;
        if escaped {
            return None;
        }
        let start = out.len();
        // decode_append grows the buffer by exactly what it needs; reserve
        // first so a long run of values still grows it geometrically.
        out.reserve(BASE64.estimated_decoded_length(text.len()));
        BASE64.decode_append(text, out).ok()?;
        Some((start, out.len()))
    }
}

/// Where a record's key or value is while the request is decoded.
enum Slot {
    None,
    /// A range of the shared decode buffer.
    Shared(usize, usize),
    Own(Bytes),
}

impl Slot {
    fn into_bytes(self, shared: &Bytes) -> Option<Bytes> {
        match self {
            Slot::None => None,
            Slot::Shared(start, end) => Some(shared.slice(start..end)),
            Slot::Own(bytes) => Some(bytes),
        }
    }
}

struct Pending {
    key: Slot,
    value: Slot,
    partition: Option<u32>,
    /// A header value's range in `shared`, `None` for a null value.
    headers: Vec<(String, Option<(usize, usize)>)>,
    timestamp_ms: Option<i64>,
}

/// `decode_produce` for the requests it can prove it decodes exactly like
/// the general path; `None` for every other body (see the module doc).
pub(crate) fn decode_produce_fast(
    format: EmbeddedFormat,
    body: &[u8],
) -> Option<Vec<ProduceRecord>> {
    // serde_json rejects invalid UTF-8 in any string; every string of the
    // body goes through `Scanner::string`, which checks `\u` escapes as
    // serde_json does.
    std::str::from_utf8(body).ok()?;
    let mut s = Scanner::new(body);
    let mut shared: Vec<u8> = Vec::new();
    let mut pending: Option<Vec<Pending>> = None;
    s.ws();
    s.object(|s, name| {
        if name != b"records" {
            // Ignored like the general path does, but it must be valid.
            s.value(1)?;
            return Some(());
        }
        if pending.is_some() {
            return None; // repeated: the last one would win
        }
        if shared.capacity() == 0 {
            shared.reserve(body.len() * 3 / 4);
        }
        let mut records = Vec::new();
        s.array(|s| {
            records.push(record(s, format, &mut shared)?);
            Some(())
        })?;
        pending = Some(records);
        Some(())
    })?;
    s.ws();
    if s.pos != body.len() {
        return None;
    }
    let pending = pending?;
    let shared = Bytes::from(shared);
    Some(
        pending
            .into_iter()
            .map(|p| ProduceRecord {
                key: p.key.into_bytes(&shared),
                value: p.value.into_bytes(&shared),
                partition: p.partition,
                headers: p
                    .headers
                    .into_iter()
                    .map(|(name, range)| (name, range.map(|(start, end)| shared.slice(start..end))))
                    .collect(),
                timestamp_ms: p.timestamp_ms,
            })
            .collect(),
    )
}

fn record(s: &mut Scanner<'_>, format: EmbeddedFormat, shared: &mut Vec<u8>) -> Option<Pending> {
    let mut seen = [false; 5];
    let mut p = Pending {
        key: Slot::None,
        value: Slot::None,
        partition: None,
        headers: Vec::new(),
        timestamp_ms: None,
    };
    let mut once = |i: usize| {
        if seen[i] {
            None
        } else {
            seen[i] = true;
            Some(())
        }
    };
    s.object(|s, name| {
        match name {
            b"key" => {
                once(0)?;
                p.key = embedded(s, format, shared)?;
            }
            b"value" => {
                once(1)?;
                p.value = embedded(s, format, shared)?;
            }
            b"partition" => {
                once(2)?;
                if s.literal(b"null").is_none() {
                    p.partition = Some(u32::try_from(s.unsigned()?).ok()?);
                }
            }
            b"timestamp" => {
                once(3)?;
                if s.literal(b"null").is_none() {
                    p.timestamp_ms = Some(i64::try_from(s.unsigned()?).ok()?);
                }
            }
            b"headers" => {
                once(4)?;
                if s.literal(b"null").is_none() {
                    s.array(|s| {
                        p.headers.push(header(s, shared)?);
                        Some(())
                    })?;
                }
            }
            _ => return None,
        }
        Some(())
    })?;
    // A missing value is an error of the general path.
    seen[1].then_some(p)
}

fn embedded(s: &mut Scanner<'_>, format: EmbeddedFormat, shared: &mut Vec<u8>) -> Option<Slot> {
    if s.literal(b"null").is_some() {
        return Some(Slot::None);
    }
    match format {
        EmbeddedFormat::Binary => {
            let (start, end) = s.base64_into(shared)?;
            Some(Slot::Shared(start, end))
        }
        EmbeddedFormat::Json => {
            // The body's root object and the records array hold it.
            let scanned = s.value(2)?;
            let text = &s.bytes[scanned.start..scanned.end];
            if scanned.canonical {
                let start = shared.len();
                shared.extend_from_slice(text);
                Some(Slot::Shared(start, shared.len()))
            } else {
                let canonical = super::canonical_json::canonicalize(text).ok()?;
                Some(Slot::Own(Bytes::from(canonical)))
            }
        }
    }
}

fn header(s: &mut Scanner<'_>, shared: &mut Vec<u8>) -> Option<(String, Option<(usize, usize)>)> {
    let mut name: Option<String> = None;
    let mut value: Option<Option<(usize, usize)>> = None;
    s.object(|s, field| {
        match field {
            b"name" if name.is_none() => {
                let raw = s.field_name()?;
                name = Some(std::str::from_utf8(raw).ok()?.to_owned());
            }
            b"value" if value.is_none() => {
                value = Some(match s.literal(b"null") {
                    Some(()) => None,
                    None => Some(s.base64_into(shared)?),
                });
            }
            _ => return None,
        }
        Some(())
    })?;
    Some((name?, value?))
}

/// True if `bytes` is one JSON value exactly as serde_json writes the
/// `Value` it parses to (module doc), so it can be used as is.
pub(crate) fn is_canonical_json(bytes: &[u8]) -> bool {
    if std::str::from_utf8(bytes).is_err() {
        return false;
    }
    let mut s = Scanner::new(bytes);
    match s.value(0) {
        Some(scanned) => scanned.canonical && s.pos == bytes.len(),
        None => false,
    }
}
