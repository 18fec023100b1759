//! The admin token check both front-ends share (HTTP's bearer token,
//! Kafka's SASL/PLAIN password).

/// Whether `given` is the admin token, compared in time that depends on
/// the token's length only (every byte of the token is compared, whatever
/// `given` is; a length that differs is folded into the result, not
/// returned early), so a client cannot find the token byte by byte, nor
/// its length, from how long refusals take.
pub fn admin_token_matches(given: &[u8], token: &[u8]) -> bool {
    let mut diff = u8::from(given.len() != token.len());
    for (i, t) in token.iter().enumerate() {
        // Past the end of `given`: compared against 0, the length
        // difference already counts.
        let g = given.get(i).copied().unwrap_or(0);
        diff |= g ^ t;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_bytes_match() {
        assert!(admin_token_matches(b"abc", b"abc"));
        assert!(!admin_token_matches(b"abc", b"abd"));
        assert!(!admin_token_matches(b"abc", b"abcd"));
        assert!(!admin_token_matches(b"", b"a"));
        assert!(admin_token_matches(b"", b""));
        assert!(!admin_token_matches(b"abc\0", b"abc"));
        assert!(!admin_token_matches(b"ab", b"ab\0"));
        assert!(!admin_token_matches(b"a", b""));
    }
}
