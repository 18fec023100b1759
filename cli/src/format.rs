//! `tidelog consume -F`: kcat's `-f` output format string.
//!
//! Tokens: `%t` topic, `%p` partition, `%o` offset, `%k` key, `%s` value,
//! `%K` key length, `%S` value length, `%T` timestamp (ms), `%h` headers
//! as `name=value` separated by `,` (a null value prints the name alone),
//! `%%` a percent sign; escapes `\n`, `\r`, `\t`, `\\`. A null key or value
//! prints nothing and its length `-1`, as kcat does. Anything else after
//! `%` or `\` is refused when the string is parsed, before any record is
//! read, so a typo cannot garble a long output.

/// One consumed record, with its bytes as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Key,
    Value,
    KeyLen,
    ValueLen,
    Timestamp,
    Headers,
}

/// A parsed format string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format(Vec<Token>);

/// The tokens, for error messages and help.
pub const TOKENS: &str = "%t topic, %p partition, %o offset, %k key, %s value, %K key length, \
%S value length, %T timestamp (ms), %h headers (name=value,...), %% a percent sign; \
escapes \\n \\r \\t \\\\";

impl Format {
    /// kcat's default for a consumer: the value, one per line.
    pub fn value_per_line() -> Format {
        Format(vec![Token::Value, Token::Literal(b"\n".to_vec())])
    }

    pub fn parse(text: &str) -> Result<Format, String> {
        let mut tokens = Vec::new();
        let mut literal = Vec::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            let token = match c {
                '%' => match chars.next() {
                    Some('t') => Token::Topic,
                    Some('p') => Token::Partition,
                    Some('o') => Token::Offset,
                    Some('k') => Token::Key,
                    Some('s') => Token::Value,
                    Some('K') => Token::KeyLen,
                    Some('S') => Token::ValueLen,
                    Some('T') => Token::Timestamp,
                    Some('h') => Token::Headers,
                    Some('%') => {
                        literal.push(b'%');
                        continue;
                    }
                    Some(other) => {
                        return Err(format!("unknown token %{other} (supported: {TOKENS})"))
                    }
                    None => return Err(format!("a lone % at the end (supported: {TOKENS})")),
                },
                '\\' => {
                    let escaped = match chars.next() {
                        Some('n') => b'\n',
                        Some('r') => b'\r',
                        Some('t') => b'\t',
                        Some('\\') => b'\\',
                        Some(other) => {
                            return Err(format!(
                                "unknown escape \\{other} (supported: \\n \\r \\t \\\\)"
                            ))
                        }
                        None => return Err("a lone \\ at the end".into()),
                    };
                    literal.push(escaped);
                    continue;
                }
                other => {
                    let mut buf = [0u8; 4];
                    literal.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                    continue;
                }
            };
            if !literal.is_empty() {
                tokens.push(Token::Literal(std::mem::take(&mut literal)));
            }
            tokens.push(token);
        }
        if !literal.is_empty() {
            tokens.push(Token::Literal(literal));
        }
        Ok(Format(tokens))
    }

    /// Appends `record` rendered by this format to `out`.
    pub fn render(&self, record: &Record, out: &mut Vec<u8>) {
        let len = |bytes: &Option<Vec<u8>>| match bytes {
            Some(b) => b.len().to_string(),
            None => "-1".to_string(),
        };
        for token in &self.0 {
            match token {
                Token::Literal(bytes) => out.extend_from_slice(bytes),
                Token::Topic => out.extend_from_slice(record.topic.as_bytes()),
                Token::Partition => out.extend_from_slice(record.partition.to_string().as_bytes()),
                Token::Offset => out.extend_from_slice(record.offset.to_string().as_bytes()),
                Token::Timestamp => out.extend_from_slice(record.timestamp.to_string().as_bytes()),
                Token::Key => out.extend_from_slice(record.key.as_deref().unwrap_or_default()),
                Token::Value => out.extend_from_slice(record.value.as_deref().unwrap_or_default()),
                Token::KeyLen => out.extend_from_slice(len(&record.key).as_bytes()),
                Token::ValueLen => out.extend_from_slice(len(&record.value).as_bytes()),
                Token::Headers => {
                    for (i, (name, value)) in record.headers.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(name.as_bytes());
                        if let Some(value) = value {
                            out.push(b'=');
                            out.extend_from_slice(value);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            topic: "events".into(),
            partition: 3,
            offset: 42,
            timestamp: 1_700_000_000_000,
            key: Some(b"user-1".to_vec()),
            value: Some(b"{\"n\":1}".to_vec()),
            headers: vec![
                ("trace".into(), Some(b"ab".to_vec())),
                ("empty".into(), None),
            ],
        }
    }

    fn render(format: &str, record: &Record) -> String {
        let mut out = Vec::new();
        Format::parse(format).unwrap().render(record, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_token_renders() {
        assert_eq!(
            render("%t %p %o %k %s %T %h\n", &record()),
            "events 3 42 user-1 {\"n\":1} 1700000000000 trace=ab,empty\n"
        );
        assert_eq!(render("%K/%S", &record()), "6/7");
        assert_eq!(render("100%% %o\\t|\\\\|\\r", &record()), "100% 42\t|\\|\r");
        assert_eq!(render("é %s", &record()), "é {\"n\":1}");
    }

    #[test]
    fn null_key_and_value_print_nothing_and_length_minus_one() {
        let mut r = record();
        r.key = None;
        r.value = None;
        r.headers.clear();
        assert_eq!(render("[%k][%s][%K][%S][%h]", &r), "[][][-1][-1][]");
    }

    #[test]
    fn the_default_is_the_value_per_line() {
        let mut out = Vec::new();
        Format::value_per_line().render(&record(), &mut out);
        assert_eq!(out, b"{\"n\":1}\n");
        assert_eq!(Format::value_per_line(), Format::parse("%s\\n").unwrap());
    }

    #[test]
    fn bad_tokens_and_escapes_are_refused() {
        for bad in ["%x", "%", "a %", "\\q", "\\", "%s %z"] {
            assert!(Format::parse(bad).is_err(), "{bad:?} parsed");
        }
        let why = Format::parse("%x").unwrap_err();
        assert!(why.contains("%x") && why.contains("%T"), "{why}");
    }
}
